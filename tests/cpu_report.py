"""``pytest --cpu-report FILE``: the CPU seconds each test cost, to find where the suite's go.

``make test`` keeps both cores busy (docs/development.md), so its wall time is its CPU:
a test is as long as the CPU it and the processes it starts burn. Each worker appends a
line per test to ``FILE`` (JSON: the test, its file, the CPU seconds of the worker's
process tree over the test's setup, call and teardown, and its wall seconds); the
controller adds the whole machine's busy CPU seconds over the session, against which the
tests' sum says how much ran outside any worker's tree (a process a test killed before
it could be counted, a broker or daemon that left its parent). A session fixture's start (a
worker's Spark session, its broker) counts in the first test that uses it.
``python -m tests.cpu_report FILE`` prints the files and tests that cost most.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.measure import TICK, machine_busy_s
from lab.procs import descendants


def tree_cpu_s(pid: int | None = None) -> float:
    """CPU seconds of ``pid`` (this process) and every live process below it.

    Each process's own and its reaped children's (``utime stime cutime cstime``): a child
    that ended is counted in whoever waited for it, this process included.
    """
    me = os.getpid() if pid is None else pid
    total = 0.0
    for p in descendants(me):
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # ended between the listing and the read: counted in its reaper
        total += sum(int(x) for x in fields[11:15]) / TICK
    return total


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--cpu-report",
        metavar="FILE",
        help="append each test's CPU seconds (its worker's process tree) to FILE",
    )


def _write(config: pytest.Config, line: dict[str, Any]) -> None:
    path = config.getoption("--cpu-report")
    if path:
        # One short line per write, appended: the workers' lines do not interleave.
        with open(path, "a") as f:
            f.write(json.dumps(line) + "\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    if not item.config.getoption("--cpu-report"):
        yield
        return
    cpu0, wall0 = tree_cpu_s(), time.monotonic()
    yield
    _write(
        item.config,
        {
            "test": item.nodeid,
            "file": item.nodeid.split("::", 1)[0],
            "cpu_s": round(tree_cpu_s() - cpu0, 3),
            "wall_s": round(time.monotonic() - wall0, 3),
            "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
        },
    )


_SESSION: dict[str, float] = {}


def pytest_sessionstart(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput"):  # the controller (or a run without xdist)
        _SESSION.update(busy=machine_busy_s(), wall=time.monotonic())


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _SESSION and not hasattr(session.config, "workerinput"):
        _write(
            session.config,
            {
                "machine_busy_s": round(machine_busy_s() - _SESSION["busy"], 1),
                "wall_s": round(time.monotonic() - _SESSION["wall"], 1),
                "cores": os.cpu_count(),
            },
        )


def summary(lines: list[dict[str, Any]], top: int = 15) -> str:
    """The report's text: the session's totals, then the costliest files and tests."""
    tests = [x for x in lines if "test" in x]
    machine = [x for x in lines if "machine_busy_s" in x]
    counted = sum(x["cpu_s"] for x in tests)
    out = [f"{len(tests)} tests: {counted:,.0f} CPU s in their workers' process trees"]
    for m in machine:
        busy, wall = m["machine_busy_s"], m["wall_s"]
        out.append(
            f"the machine: {busy:,.0f} CPU s busy in {wall:,.0f} s "
            f"({busy / wall:.2f} of {m['cores']} cores); not in a worker's tree: "
            f"{busy - counted:,.0f} CPU s (other processes, killed or orphaned ones)"
        )
    files: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for x in tests:
        f = files[x["file"]]
        f[0] += x["cpu_s"]
        f[1] += x["wall_s"]
        f[2] += 1
    out.append(f"\nfiles by CPU (CPU s, wall s, tests), the top {top}:")
    for name, (cpu, wall, n) in sorted(files.items(), key=lambda kv: -kv[1][0])[:top]:
        out.append(f"{cpu:8.1f} {wall:8.1f} {n:5.0f}  {name}")
    out.append(f"\ntests by CPU (CPU s, wall s), the top {top}:")
    for x in sorted(tests, key=lambda x: -x["cpu_s"])[:top]:
        out.append(f"{x['cpu_s']:8.1f} {x['wall_s']:8.1f}  {x['test']}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.cpu_report", description=__doc__)
    ap.add_argument("file", help="the file a run's --cpu-report wrote")
    ap.add_argument("--top", type=int, default=15, help="files and tests to show (15)")
    args = ap.parse_args(argv)
    text = Path(args.file).read_text()
    print(summary([json.loads(x) for x in text.splitlines() if x.strip()], args.top))  # noqa: T201
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
