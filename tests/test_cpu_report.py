"""``pytest --cpu-report``: a test's CPU is counted, its children's too, and summed by file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from bench.measure import TICK
from tests.conftest import REPO
from tests.cpu_report import summary, tree_cpu_s

BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < {s}: pass\n"


def _own_s() -> float:
    """This process's own CPU as ``/proc`` counts it (whole clock ticks), children apart."""
    t = os.times()
    return t.user + t.system


def scenario() -> None:
    """Print the tree's CPU seen from this process while a child burns 0.6 s, and after.

    Run in a process of its own (:func:`test_a_running_child_and_a_reaped_one_are_both_counted`).
    """
    before, own = tree_cpu_s(), _own_s()
    child = subprocess.Popen(  # noqa: S603
        [sys.executable, "-c", BURN.format(s=0.6) + "input()"], stdin=subprocess.PIPE
    )
    while tree_cpu_s(child.pid) < 0.6:
        assert child.poll() is None, "the child ended before it burned its CPU"
        time.sleep(0.05)
    live = tree_cpu_s() - before - (_own_s() - own)
    child.communicate(b"\n", timeout=60)
    reaped = tree_cpu_s() - before - (_own_s() - own)
    print(json.dumps({"live": live, "reaped": reaped}))


def test_a_running_child_and_a_reaped_one_are_both_counted() -> None:
    # In a process of its own: the pytest worker's tree holds other processes (a Spark JVM,
    # its Python workers, what earlier tests left ending) whose exit takes their CPU out of
    # the tree while the child burns (a run saw it 7.5 s lower after than before).
    out = subprocess.run(  # noqa: S603
        [sys.executable, "-c", "from tests.test_cpu_report import scenario; scenario()"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    # Still running: counted as a live process below the scenario's; ended and waited
    # for: in its children's time. Its own time is read apart from the tree's and may
    # tick in between: one tick of slack.
    assert seen["live"] >= 0.6 - 1 / TICK
    assert seen["reaped"] >= 0.6 - 1 / TICK


def test_the_report_has_each_test_and_the_machine_and_sums_them_by_file(tmp_path: Path) -> None:
    tests = tmp_path / "test_spin.py"
    tests.write_text(
        textwrap.dedent(
            f"""
            import subprocess, sys

            def test_spins_in_a_child():
                subprocess.run([sys.executable, "-c", {BURN.format(s=0.4)!r}], check=True)

            def test_idles():
                pass
            """
        )
    )
    report = tmp_path / "cpu.jsonl"
    subprocess.run(  # noqa: S603
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "tests.cpu_report",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(tmp_path),
            "--cpu-report",
            str(report),
            str(tests),
        ],
        cwd=REPO,
        check=True,
        capture_output=True,
        timeout=120,
    )
    lines = [json.loads(x) for x in report.read_text().splitlines()]
    by_test = {x["test"].rsplit("::", 1)[-1]: x for x in lines if "test" in x}
    assert set(by_test) == {"test_spins_in_a_child", "test_idles"}
    assert by_test["test_spins_in_a_child"]["cpu_s"] >= 0.4
    assert by_test["test_idles"]["cpu_s"] < by_test["test_spins_in_a_child"]["cpu_s"]
    (machine,) = [x for x in lines if "machine_busy_s" in x]
    assert machine["machine_busy_s"] >= 0.4
    text = summary(lines, top=1)
    assert "2 tests:" in text and "the machine:" in text
    # One file, named once in the files' part, both tests summed in it.
    files_part = text.split("files by CPU")[1].split("tests by CPU")[0]
    (row,) = [r for r in files_part.splitlines() if "test_spin.py" in r]
    assert row.split()[2] == "2"
    assert "test_spins_in_a_child" in text.split("tests by CPU")[1]
