"""What ``new_error_pattern`` costs per line, how many lines reach it, what it says on real runs.

``python -m bench.pattern_cost`` prints:

* per real run of ``tests/data/real``: its log records, its WARN/ERROR lines left to the
  detector (``log_warn``/``log_error``), how many of those name a job (only those reach
  a job detector), and the detector's pages with the defaults and with no warm-up
  (``learn_s`` 0): the false alarms on real output;
* the per-line cost in pure Python (median of ``--repeat`` runs, µs a line): mining the
  real runs' WARN/ERROR lines (every one, as if its job were known) and the simulated
  fleet's lines that reach the detector, each both with the state kept in memory and with
  the state through JSON around every line (the runner loads and saves an entity's state
  once per micro-batch: one line per entity per batch is the worst case);
* the share of the simulated fleet's records that reach the detector, at the steady
  runs' fleet (``bench/incidents.py``: its versions; 4 TaskManagers a job, as
  ``bench/run.py``), and what that costs at each of ``bench/run.py``'s steady rates.

The events are read by :mod:`lab.loglines` (the parse query's rules in plain Python); no
Spark, no Kafka. Numbers depend on the machine: run it on an idle one.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from bench import incidents as inc
from detectors.model import Event
from detectors.new_error_pattern import NewErrorPattern, NewErrorPatternParams
from lab.fleet import generate
from lab.loglines import file_events, sim_events

REAL = Path(__file__).resolve().parent.parent / "tests" / "data" / "real"
START_MS = 1_763_800_000_000
FREE = ("log_warn", "log_error")
TMS = 4  # TaskManagers a job, bench/run.py's default
RATES = (500, 2_000, 5_000, 10_000, 20_000)  # bench/run.py's steady rates, records/s


def _pages(det: NewErrorPattern, events: list[Event]) -> int:
    """Firing alerts of ``det`` over ``events`` (each job on its own), timers run to the end."""
    by_job: dict[str, list[Event]] = {}
    for e in events:
        if e.kind in det.kinds and e.job_id:
            by_job.setdefault(e.job_id, []).append(e)
    end = max((e.time_ms for e in events), default=0)
    fired = 0
    for evs in by_job.values():
        evs.sort(key=lambda e: e.time_ms)
        state, timer = None, None
        for e in evs:
            step = det.advance(state, timer, e)
            fired += sum(1 for a in step.alerts if a.status.value == "firing")
            state, timer = step.state, step.timer_ms
        fired += sum(
            1 for a in det.fire_due(state, timer, end).alerts if a.status.value == "firing"
        )
    return fired


def real_runs() -> list[tuple[str, int, int, int, int, int]]:
    """Per real run: records, free lines, free lines naming a job, pages (defaults, no warm-up)."""
    rows = []
    for run in sorted(d for d in REAL.iterdir() if (d / "expected.json").exists()):
        events = [e for f in sorted(run.glob("*.log")) for e in file_events(f)]
        free = [e for e in events if e.kind in FREE]
        named = [e for e in free if e.job_id]
        default = _pages(NewErrorPattern(NewErrorPatternParams()), events)
        eager = _pages(NewErrorPattern(NewErrorPatternParams(learn_s=0)), events)
        rows.append((run.name, len(events), len(free), len(named), default, eager))
    return rows


def _cost(events: list[Event], repeat: int, roundtrip: bool) -> float:
    """Median µs a line of ``events`` (already grouped per job, in time order)."""
    det = NewErrorPattern(NewErrorPatternParams(learn_s=0))
    runs = []
    for _ in range(repeat):
        states: dict[str | None, tuple[object, int | None]] = {}
        t0 = time.perf_counter()
        for e in events:
            state, timer = states.get(e.job_id, (None, None))
            if roundtrip and state is not None:
                state = det.load_json(det.dump_json(state))  # type: ignore[arg-type]
            step = det.advance(state, timer, e)  # type: ignore[arg-type]
            states[e.job_id] = (step.state, step.timer_ms)
        runs.append((time.perf_counter() - t0) / max(1, len(events)) * 1e6)
    return statistics.median(runs)


def _as_one_job(events: list[Event]) -> list[Event]:
    """Every WARN/ERROR line of the real runs as one job's (none names its job)."""
    job = "0" * 31 + "1"
    return sorted(
        (e._replace(job_id=job) for e in events if e.kind in FREE), key=lambda e: e.time_ms
    )


def simulated(jobs: int, minutes: float) -> tuple[int, int, list[Event], list[Event]]:
    """The steady runs' fleet: records, log records, the events that reach the detector.

    The fourth item is every WARN/ERROR line left to the detector, its job named or not.
    """
    spec = inc.spec(jobs, TMS, [], seed=23)
    records = 0
    log_records = []
    for r in generate(spec, START_MS, minutes * 60):
        records += 1
        if r.stream == "log":
            log_records.append(r)
    events = list(sim_events(log_records))
    kinds = NewErrorPattern.kinds
    reach = [e for e in events if e.kind in kinds and e.job_id]
    free = [e for e in events if e.kind in FREE]
    return records, len(log_records), sorted(reach, key=lambda e: (e.job_id or "", e.time_ms)), free


def _table(rows: list[tuple[object, ...]], head: tuple[str, ...]) -> str:
    cells = [tuple(str(c) for c in r) for r in [head, *rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(head))]
    fmt: Callable[[tuple[str, ...]], str] = lambda r: "  ".join(  # noqa: E731
        c.ljust(w) for c, w in zip(r, widths, strict=True)
    )
    return "\n".join([fmt(cells[0]), fmt(tuple("-" * w for w in widths)), *map(fmt, cells[1:])])


def main(argv: list[str] | None = None) -> int:
    """Print the measurements."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    p.add_argument("--jobs", type=int, default=100, help="simulated jobs (default 100)")
    p.add_argument("--minutes", type=float, default=30, help="simulated minutes (default 30)")
    p.add_argument("--repeat", type=int, default=7, help="runs per cost (median; default 7)")
    args = p.parse_args(argv)

    rows = real_runs()
    print("Real Flink 2.3 runs (tests/data/real):")
    head = ("run", "log records", "WARN/ERROR left", "naming a job", "pages", "pages, learn_s=0")
    print(_table(rows, head))

    real = _as_one_job([e for d in REAL.iterdir() for f in d.glob("*.log") for e in file_events(f)])
    records, logs, reach, free = simulated(args.jobs, args.minutes)
    lines = [e for e in reach if e.kind in FREE]
    print()
    print(f"Per-line cost, pure Python, median of {args.repeat} runs (µs a line):")
    cost_rows = []
    costs = {}
    for name, evs in (
        ("real WARN/ERROR lines", real),
        ("simulated lines reaching it", lines),
        ("simulated WARN/ERROR lines", _as_one_job(free)),
    ):
        mem = costs[name] = _cost(evs, args.repeat, roundtrip=False)
        rt = _cost(evs, args.repeat, roundtrip=True)
        cost_rows.append((name, len(evs), f"{mem:.1f}", f"{rt:.1f}"))
    print(_table(cost_rows, ("lines", "count", "state in memory", "state through JSON")))
    share = len(reach) / max(1, records)
    print()
    print(
        f"Simulated steady fleet ({args.jobs} jobs of {TMS} TaskManagers, {args.minutes:g} min, "
        f"bench versions): {records} records ({logs} log records, {len(free)} WARN/ERROR left "
        f"to the detector); {len(reach)} events reach it ({dict(Counter(e.kind for e in reach))})"
        f": {share:.4%} of all records, {len(reach) / max(1, logs):.3%} of the log records."
    )
    per_line = costs["simulated lines reaching it"]
    rate_rows = [
        (rate, f"{rate * share:.2f}", f"{rate * share * per_line / 1000:.3f}") for rate in RATES
    ]
    print(_table(rate_rows, ("records/s", "lines/s reaching it", "CPU ms a second")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
