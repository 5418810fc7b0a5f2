"""The cost of watching nothing: ``flinkwatch run`` on empty topics.

The command a user runs (a process of its own, the default config but for the broker,
the topics and the ports), left alone for a warm-up and until its parse query idles in
micro-batches (:func:`_settle`), then measured: the CPU of its whole process tree (the
driver's Python, Spark's JVM, the Python workers) over the window, the JVM's threads by
CPU, and the micro-batches each query committed in the window (counted in the
checkpoints' ``commits/`` directories, not from the log). Each run is a fresh state
directory; ``--idle-runs`` runs give the median and the spread.
"""

from __future__ import annotations

import logging
import os
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from bench.measure import TICK, proc_cpu_s
from lab.procs import children, free_port_run

log = logging.getLogger("bench")


#: The longest wait for the parse query's idle switch (:func:`_settle`) after the warm-up.
_SETTLE_LIMIT_S = 300.0
#: After the switch: the restarted query's first batches, and the compiler's burst.
_SETTLE_S = 20.0


def _tree(pid: int) -> list[int]:
    """``pid`` and every process under it."""
    kids = children()
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def _threads(pid: int) -> Counter[str]:
    """CPU seconds of a process's threads, by thread name (a JVM names its threads)."""
    out: Counter[str] = Counter()
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[name] += (int(fields[11]) + int(fields[12])) / TICK
    return out


def _jvm(pids: list[int]) -> int | None:
    for p in pids:
        try:
            with open(f"/proc/{p}/comm") as f:
                if f.read().strip() == "java":
                    return p
        except OSError:
            continue
    return None


def stop(proc: subprocess.Popen[Any]) -> None:
    """SIGTERM (a clean stop, as an operator's), then SIGKILL after a minute."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _commits(state: Path) -> dict[str, int]:
    """Micro-batches committed so far per query checkpoint: its newest commit's id + 1.

    Not the files in ``commits/``: Spark removes old ones (it keeps the last 100), so
    their number stops growing while batches still run.
    """
    root = state / "checkpoints"
    out: dict[str, int] = {}
    for commits in root.glob("*/commits"):
        ids = [int(f.name) for f in commits.iterdir() if f.name.isdigit()]
        out[commits.parent.name] = max(ids, default=-1) + 1
    return out


def _settle(proc: subprocess.Popen[Any], state: Path, spark: dict[str, Any]) -> bool | None:
    """Wait until the parse query runs as it does while idle; whether it switched.

    In real-time mode the parse query idles in micro-batches once it has read nothing for
    ``spark.idle_after_s`` (60 s): it is restarted then, a new plan and a burst of the
    JIT's, once. The window measures the steady cost after it: a start slower than the
    warm-up (a busy machine) put that restart inside the window (0.195-0.213 cores, then
    0.038-0.040 after it). ``None``: this config never switches; ``False``: no switch in
    :data:`_SETTLE_LIMIT_S` (measured as it is).
    """
    if spark.get("parse_mode") == "microbatch" or spark.get("idle_after_s", 60.0) == 0:
        return None
    deadline = time.monotonic() + _SETTLE_LIMIT_S
    while _commits(state).get("parse-microbatch", 0) == 0:
        if proc.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(1.0)
    time.sleep(_SETTLE_S)
    return True


def one_run(
    bootstrap: str,
    work: Path,
    warmup_s: float,
    window_s: float,
    n: int,
    spark: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One ``flinkwatch run`` on empty topics of its own: the window's numbers.

    ``spark``: settings of the config's ``spark`` section over the defaults (``--spark``).
    """
    state = work / f"idle-{n}"
    prefix = f"idle{n}"
    cfg = {
        "cluster": f"idle{n}",
        "kafka": {
            "bootstrap_servers": bootstrap,
            "logs_topic": f"{prefix}.logs",
            "metrics_topic": f"{prefix}.metrics",
        },
        "output": {"state_dir": str(state)},
        "metrics": {"port": free_port_run(1)},
        "spark": {**(spark or {}), "ui_port": free_port_run(1)},
    }
    state.mkdir(parents=True, exist_ok=True)
    path = state / "flinkwatch.yaml"
    path.write_text(yaml.safe_dump(cfg))
    exe = Path(sys.executable).with_name("flinkwatch")
    with (state / "run.log").open("w") as out:
        proc = subprocess.Popen(
            [str(exe), "run", "--config", str(path)], stdout=out, stderr=subprocess.STDOUT
        )
    started = time.monotonic()
    try:
        time.sleep(warmup_s)
        idled = _settle(proc, state, spark or {})
        if proc.poll() is not None:
            msg = f"flinkwatch run exited ({proc.returncode}): see {state / 'run.log'}"
            raise RuntimeError(msg)
        pids = _tree(proc.pid)
        jvm = _jvm(pids)
        cpu0 = {p: proc_cpu_s(p) or 0.0 for p in pids}
        threads0 = _threads(jvm) if jvm else Counter()
        commits0 = _commits(state)
        t0 = time.monotonic()
        time.sleep(window_s)
        dt = time.monotonic() - t0
        pids1 = _tree(proc.pid)
        cpu = sum((proc_cpu_s(p) or 0.0) - cpu0.get(p, 0.0) for p in pids1)
        threads = _threads(jvm) if jvm else Counter()
        threads.subtract(threads0)
        commits = _commits(state)
    finally:
        stop(proc)
    return {
        "cores": round(cpu / dt, 4),
        "window_s": round(dt, 1),
        "window_from_s": round(t0 - started, 1),
        "parse_idled": idled,
        "jvm_threads_cores": {k: round(v / dt, 4) for k, v in threads.most_common(8) if v > 0},
        "batches_in_window": {
            q.split("-shards")[0]: commits.get(q, 0) - commits0.get(q, 0) for q in commits
        },
    }


def idle(
    bootstrap: str,
    work: Path,
    runs: int,
    warmup_s: float,
    window_s: float,
    spark: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``runs`` idle runs one after the other: the median of their cores, and each run."""
    each = []
    for n in range(runs):
        log.info(
            "idle: run %d of %d (warm-up %.0f s, then %.0f s measured)",
            n + 1,
            runs,
            warmup_s,
            window_s,
        )
        each.append(one_run(bootstrap, work, warmup_s, window_s, n, spark))
        log.info("idle: %.3f cores, batches %s", each[-1]["cores"], each[-1]["batches_in_window"])
    cores = [r["cores"] for r in each]
    return {
        "cores": {
            "median": round(statistics.median(cores), 4),
            "min": min(cores),
            "max": max(cores),
        },
        "warmup_s": warmup_s,
        "spark": spark or {},
        "runs": each,
    }
