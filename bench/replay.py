"""The ``replay`` phase: ``flinkwatch replay`` as an operator runs it, timed.

Each run is the command line in a fresh process (``python -m streaming.cli replay``, so a
run includes the interpreter, the JVM and the Spark session starting), measured for its
wall time and the CPU seconds of its whole process tree (``utime + stime`` of
``/proc/<pid>/stat`` for the process and every descendant, sampled every 0.1 s, each
process's last value kept: the JVM and the Python workers included).

Two inputs:

* **small**: a real Flink 2.3 run, ``tests/data/real/growth_2_3`` (172 KB of logs, 384
  metric records);
* **an hour of a 100-job fleet**: the simulator's records (:mod:`lab.fleet`, the
  throughput phase's fleet and incidents) written before the timing starts, as the files
  an operator would replay: one log file per process that logs (a JobManager's records
  are keyed by its job, a TaskManager's by its id) and one JSON-lines metric file per
  entity the metrics are about.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

from bench.measure import proc_cpu_s
from lab.procs import descendants

REPO = Path(__file__).resolve().parent.parent
SMALL = REPO / "tests" / "data" / "real" / "growth_2_3"
#: The throughput phase's incidents, so the detectors do real work in the hour too.
INCIDENTS = [
    ("checkpoint_expiry", 1, 600.0),
    ("checkpoint_creep", 2, 300.0),
    ("idle_heap_leak", 3, 300.0),
    ("late_acks_skew", 4, 600.0),
]


def write_fleet(into: Path, jobs: int, tms: int, hours: float, start_ms: int) -> dict[str, Any]:
    """Write ``hours`` of a ``jobs``-job fleet as log and metric files under ``into``."""
    from bench.run import _spec
    from lab.fleet import generate

    spec = _spec(jobs, tms, [i for i in INCIDENTS if i[1] < jobs], seed=11)
    logs, metrics = into / "logs", into / "metrics"
    logs.mkdir(parents=True, exist_ok=True)
    metrics.mkdir(parents=True, exist_ok=True)
    files: dict[tuple[str, str], IO[bytes]] = {}
    n = size = 0
    try:
        for r in generate(spec, start_ms, hours * 3600):
            key = r.key.decode() if r.key else "unkeyed"
            f = files.get((r.stream, key))
            if f is None:
                path = logs / f"{key}.log" if r.stream == "log" else metrics / f"{key}.jsonl"
                f = files[(r.stream, key)] = path.open("wb")
            f.write(r.value + b"\n")
            n += 1
            size += len(r.value) + 1
    finally:
        for f in files.values():
            f.close()
    return {"records": n, "bytes": size, "files": len(files), "jobs": jobs, "hours": hours}


def timed(cmd: list[str], log_to: Path) -> dict[str, float]:
    """Run ``cmd`` to its end: its wall seconds and its process tree's CPU seconds.

    Raises:
        subprocess.CalledProcessError: the command failed (its output is in ``log_to``).
    """
    last: dict[int, float] = {}
    t0 = time.monotonic()
    with log_to.open("wb") as out:
        p = subprocess.Popen(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)  # noqa: S603
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                for pid in [p.pid, *descendants(p.pid)]:
                    cpu = proc_cpu_s(pid)
                    if cpu is not None:
                        last[pid] = cpu
                stop.wait(0.1)

        sampler = threading.Thread(target=sample, name="bench-replay-cpu", daemon=True)
        sampler.start()
        rc = p.wait()
        wall = time.monotonic() - t0
        stop.set()
        sampler.join()
    if rc != 0:
        raise subprocess.CalledProcessError(rc, cmd)
    return {"wall_s": round(wall, 2), "cpu_s": round(sum(last.values()), 2)}


def spread(xs: list[float]) -> dict[str, Any]:
    """Runs' median, min, max and each run, as the phase reports them."""
    xs = [round(x, 2) for x in xs]
    return {
        "median": round(statistics.median(xs), 2),
        "min": min(xs),
        "max": max(xs),
        "runs": xs,
    }


def replay_command(logs: list[Path], metrics: list[Path], output: Path) -> list[str]:
    """``flinkwatch replay`` of these files, from this checkout's code."""
    return [
        sys.executable,
        "-m",
        "streaming.cli",
        "replay",
        "--logs",
        *map(str, logs),
        "--metrics",
        *map(str, metrics),
        "--output",
        str(output),
    ]


def _measure(name: str, cmd: list[str], runs: int, work: Path) -> dict[str, Any]:
    samples = [timed(cmd, work / f"{name}-{i}.log") for i in range(runs)]
    return {
        "wall_s": spread([s["wall_s"] for s in samples]),
        "cpu_s": spread([s["cpu_s"] for s in samples]),
    }


def replay_phase(work: Path, jobs: int = 100, tms: int = 4, runs: int = 3) -> dict[str, Any]:
    """Time ``flinkwatch replay`` on the small real run and on an hour of the fleet."""
    work.mkdir(parents=True, exist_ok=True)
    small_logs, small_metrics = sorted(SMALL.glob("*.log")), sorted(SMALL.glob("*.jsonl"))
    cmd = replay_command(small_logs, small_metrics, work / "small.jsonl")
    small = _measure("small", cmd, runs, work)
    small_alerts = len((work / "small.jsonl").read_text().splitlines())
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        fleet = Path(tmp)
        t0 = time.monotonic()
        # A fixed start: the same records every run.
        made = write_fleet(fleet, jobs, tms, 1.0, start_ms=1_795_000_000_000)
        made["generate_s"] = round(time.monotonic() - t0, 1)
        hour = _measure(
            "hour",
            replay_command([fleet / "logs"], [fleet / "metrics"], work / "hour.jsonl"),
            runs,
            work,
        )
    hour_alerts = len((work / "hour.jsonl").read_text().splitlines())
    return {
        "small_wall_s": small["wall_s"],
        "small_cpu_s": small["cpu_s"],
        "small_input": {
            "run": SMALL.name,
            "bytes": sum(f.stat().st_size for f in [*small_logs, *small_metrics]),
            "alerts": small_alerts,
        },
        "hour_100_jobs_wall_s": hour["wall_s"],
        "hour_100_jobs_cpu_s": hour["cpu_s"],
        "records": made["records"],
        "hour_input": {**made, "taskmanagers": jobs * tms, "alerts": hour_alerts},
    }
