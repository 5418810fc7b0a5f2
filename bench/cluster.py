"""Scaling out: the full pipeline draining one backlog on a standalone cluster of 1, then 2 workers.

The orchestrating side (:func:`cluster_phase`, called by ``bench.run``) writes one backlog
of the simulated fleet into topics with ``--cluster-partitions`` partitions, then for each
worker count starts a local Spark standalone cluster (``scripts/spark-cluster.sh``: one
core per worker), and runs the driver in a subprocess (``python -m bench.cluster drain``,
client mode, like ``flinkwatch run``) that drains the backlog with ``availableNow``: parse
+ every detector + ledger + alert file. While the driver drains, CPU time is sampled from
/proc for every process of the run (driver Python and JVM, master, each worker, its
executor JVM and Python workers) and for the whole machine, with the load average: the
cores are shared with whatever else runs. The driver reports, from Spark's REST API, how
many tasks and how much task time each executor had, per query.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from lab.procs import SparkCluster, cmdline, descendants, free_port_run

REPO = Path(__file__).resolve().parent.parent
TICK = os.sysconf("SC_CLK_TCK")


# --- the driver (subprocess) -------------------------------------------------------------


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as r:  # noqa: S310 - the driver's http URL
        return json.load(r)


def task_split(ui: str) -> dict[str, Any]:
    """Tasks and task seconds per executor, by query, from the driver's REST API."""
    base = f"{ui}/api/v1/applications"
    (app,) = _get(base)
    base = f"{base}/{app['id']}"
    split: dict[str, dict[str, dict[str, float]]] = {}
    for job in _get(f"{base}/jobs"):
        query = (job.get("description") or "").split("\n")[0] or "other"
        for stage in job["stageIds"]:
            for attempt in _get(f"{base}/stages/{stage}"):
                if attempt["status"] == "SKIPPED":
                    continue
                tasks = _get(f"{base}/stages/{stage}/{attempt['attemptId']}/taskList?length=100000")
                for t in tasks:
                    e = split.setdefault(query, {}).setdefault(
                        t["executorId"], {"tasks": 0, "task_s": 0.0}
                    )
                    e["tasks"] += 1
                    e["task_s"] += (t.get("duration") or 0) / 1000
    executors = [
        {
            "id": e["id"],
            "host_port": e["hostPort"],
            "tasks": e["totalTasks"],
            "task_s": round(e["totalDuration"] / 1000, 1),
            "gc_s": round(e["totalGCTime"] / 1000, 1),
        }
        for e in _get(f"{base}/allexecutors")
    ]
    for per_exec in split.values():
        for v in per_exec.values():
            v["task_s"] = round(v["task_s"], 1)
    return {"executors": executors, "by_query": split}


def drain(args: argparse.Namespace) -> dict[str, Any]:
    """Drain the backlog once on the cluster at ``args.master``; the driver side."""
    from conf import AppConfig
    from streaming.runtime import Runtime
    from streaming.session import SessionSpec
    from streaming.topics import ensure_bus_topics

    state = Path(args.state)
    cfg = AppConfig.model_validate(
        {
            "kafka": {
                "bootstrap_servers": args.bootstrap,
                "logs_topic": f"{args.prefix}.logs",
                "metrics_topic": f"{args.prefix}.metrics",
            },
            "spark": {
                "master": args.master,
                "shuffle_partitions": args.shuffle_partitions,
                "executor_memory": args.executor_memory,
                "options": {
                    "spark.ui.enabled": "true",
                    "spark.ui.port": str(args.ui_port),
                    # Time the drain only once every executor is there.
                    "spark.cores.max": str(args.cores),
                    "spark.scheduler.minRegisteredResourcesRatio": "1.0",
                    "spark.scheduler.maxRegisteredResourcesWaitingTime": "120s",
                },
            },
            "output": {"state_dir": str(state), "console": False},
            "metrics": {"enabled": False},
        }
    )
    t0 = time.monotonic()
    spark = SessionSpec.of(cfg).start()  # as `flinkwatch run` asks, unsized
    session_s = time.monotonic() - t0
    runtime = Runtime(cfg)  # what `flinkwatch run` wires: ledger, alert file, correlator
    ensure_bus_topics(cfg.kafka)
    pipe = runtime.pipeline(spark, trigger={"availableNow": True})
    print(json.dumps({"event": "drain_start"}), flush=True)  # noqa: T201 - to the orchestrator
    t0 = time.monotonic()
    q = pipe.start_parse()
    q.awaitTermination()
    pipe.count_progress([q])
    parse_s = time.monotonic() - t0
    pipe.start_detect().awaitTermination()
    total_s = time.monotonic() - t0
    print(json.dumps({"event": "drain_end"}), flush=True)  # noqa: T201
    processed = sum(pipe.stats.kinds.values()) + sum(pipe.stats.dead_letters.values())
    split = task_split(spark.sparkContext.uiWebUrl or f"http://127.0.0.1:{args.ui_port}")
    spark.stop()
    runtime.close()
    return {
        "session_start_s": round(session_s, 1),
        "records": processed,
        "drain_s": round(total_s, 1),
        "parse_s": round(parse_s, 1),
        "detect_s": round(total_s - parse_s, 1),
        "records_per_s": round(processed / total_s),
        "alerts": dict(sorted((f"{d}:{s}", n) for (d, _e, s), n in pipe.stats.alerts.items())),
        **split,
    }


# --- CPU accounting (orchestrator) -------------------------------------------------------


def _cpu_s(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def _machine_jiffies() -> tuple[int, int]:
    with open("/proc/stat") as f:
        cpu = [int(x) for x in f.readline().split()[1:]]
    idle = cpu[3] + cpu[4]
    return sum(cpu) - idle, sum(cpu)


def _role(pid: int, driver: int, worker: int | None) -> str:
    cmd = cmdline(pid)
    if pid == driver:
        return "driver python"
    if "CoarseGrainedExecutorBackend" in cmd:
        kind = "executor JVM"
    elif "pyspark.daemon" in cmd or "pyspark.worker" in cmd:
        kind = "python workers"
    elif "deploy.worker.Worker" in cmd:
        kind = "worker daemon"
    elif "deploy.master.Master" in cmd:
        kind = "master"
    elif "java" in cmd.split(" ", 1)[0]:
        kind = "driver JVM"
    else:
        kind = "other"
    return f"{kind} (worker {worker})" if worker is not None else kind


class CpuMeter:
    """CPU seconds per role of every process of the run, and of the whole machine."""

    def __init__(self, roots: list[int], driver: int, workers: dict[int, int]) -> None:
        self.roots, self.driver, self.workers = roots, driver, workers
        self.peak: dict[int, float] = {}
        self.roles: dict[int, str] = {}
        self.loads: list[float] = []
        self._stop = threading.Event()

    def _sample(self) -> None:
        for root in self.roots:
            for pid in descendants(root):
                s = _cpu_s(pid)
                if s > self.peak.get(pid, 0.0):
                    self.peak[pid] = s
                if pid not in self.roles:
                    self.roles[pid] = _role(pid, self.driver, self.workers.get(root))
        self.loads.append(os.getloadavg()[0])

    def start(self) -> CpuMeter:
        """Snapshot now and keep sampling every second (short-lived processes)."""
        self._sample()
        self.base = dict(self.peak)
        self.t0 = time.monotonic()
        self.machine0 = _machine_jiffies()
        self.load0 = os.getloadavg()

        def run() -> None:
            while not self._stop.wait(1.0):
                self._sample()

        self._thread = threading.Thread(target=run, name="cpu-meter", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> dict[str, Any]:
        """CPU seconds per role since :meth:`start`, cores used, machine busy share."""
        self._stop.set()
        self._thread.join()
        self._sample()
        wall = time.monotonic() - self.t0
        busy1, total1 = _machine_jiffies()
        busy = (busy1 - self.machine0[0]) / max(1, total1 - self.machine0[1])
        by_role: dict[str, float] = {}
        for pid, s in self.peak.items():
            role = self.roles.get(pid, "other")
            by_role[role] = by_role.get(role, 0.0) + s - self.base.get(pid, 0.0)
        ours = sum(by_role.values())
        return {
            "wall_s": round(wall, 1),
            "cpu_s_by_process": {k: round(v, 1) for k, v in sorted(by_role.items())},
            "cores_used_by_run": round(ours / wall, 2),
            "machine_busy_share": round(busy, 3),
            "cores_used_by_machine": round(busy * (os.cpu_count() or 1), 2),
            "loadavg_1m_start": round(self.load0[0], 2),
            "loadavg_1m_mean": round(sum(self.loads) / max(1, len(self.loads)), 2),
            "loadavg_1m_max": round(max(self.loads, default=0.0), 2),
        }


# --- one run per worker count ------------------------------------------------------------


def measure(
    workers: int, bootstrap: str, prefix: str, work: Path, args: argparse.Namespace
) -> dict[str, Any]:
    """Drain the backlog on a fresh ``workers``-worker cluster; the run's numbers."""
    cluster = SparkCluster(
        work / f"spark-{workers}", workers=workers, cores=1, memory=args.worker_memory
    ).up()
    try:
        ui_port = free_port_run(1)
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.cluster",
                "drain",
                "--master",
                cluster.url,
                "--bootstrap",
                bootstrap,
                "--prefix",
                prefix,
                "--state",
                str(work / f"state-{workers}"),
                "--shuffle-partitions",
                str(args.cluster_partitions),
                "--cores",
                str(workers),
                "--executor-memory",
                args.executor_memory,
                "--ui-port",
                str(ui_port),
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
        )
        wpids = {cluster.worker_pid(i): i for i in range(1, workers + 1)}
        master = int((cluster.dir / "master.pid").read_text())
        meter = CpuMeter([proc.pid, master, *wpids], proc.pid, wpids)
        cpu: dict[str, Any] = {}
        result: dict[str, Any] = {}
        assert proc.stdout is not None
        for raw in proc.stdout:
            msg = json.loads(raw) if raw.startswith("{") else {}
            if msg.get("event") == "drain_start":
                meter.start()
            elif msg.get("event") == "drain_end":
                cpu = meter.stop()
            elif "records_per_s" in msg:
                result = msg
        if proc.wait() != 0 or not result:
            msg = f"the {workers}-worker drain failed (exit {proc.returncode})"
            raise RuntimeError(msg)
    finally:
        cluster.down()
    return {"workers": workers, **result, "cpu": cpu}


def cluster_phase(broker: Any, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Write one backlog, then drain it with each worker count in ``args.workers``."""
    from bench.load import compile_producer, send, write_load
    from bench.run import _spec
    from lab.fleet import generate

    prefix = "cluster"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "streaming.cli",
            "kafka",
            "create-topics",
            "--bootstrap",
            broker.bootstrap,
            "--partitions",
            str(args.cluster_partitions),
            f"{prefix}.logs",
            f"{prefix}.metrics",
        ],
        check=True,
    )
    spec = _spec(args.jobs, args.tms, [("checkpoint_expiry", 1, 600.0)], seed=11)
    hours = args.cluster_hours
    start_ms = int(time.time() * 1000) - int(hours * 3_600_000) - 600_000
    load = write_load(generate(spec, start_ms, hours * 3600), work / "cluster-backlog.bin")
    produced = send(
        compile_producer(work),
        broker.bootstrap,
        f"{prefix}.logs",
        f"{prefix}.metrics",
        load.path,
        paced=False,
    )
    runs = {
        str(n): measure(n, broker.bootstrap, prefix, work / "cluster", args) for n in args.workers
    }
    return {
        "records": load.records,
        "fleet": {"jobs": args.jobs, "taskmanagers": args.jobs * args.tms, "hours": hours},
        "producer_records_per_s": round(produced["records_per_s"]),
        "kafka_partitions": args.cluster_partitions,
        "shuffle_partitions": args.cluster_partitions,
        "worker": {"cores": 1, "memory": args.worker_memory},
        "executor_memory": args.executor_memory,
        "runs": runs,
    }


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.cluster drain ...``: the driver of one measured drain."""
    p = argparse.ArgumentParser(prog="bench.cluster")
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("drain")
    d.add_argument("--master", required=True)
    d.add_argument("--bootstrap", required=True)
    d.add_argument("--prefix", required=True)
    d.add_argument("--state", required=True)
    d.add_argument("--shuffle-partitions", type=int, required=True)
    d.add_argument("--cores", type=int, required=True)
    d.add_argument("--executor-memory", required=True)
    d.add_argument("--ui-port", type=int, required=True)
    args = p.parse_args(argv)
    print(json.dumps(drain(args)), flush=True)  # noqa: T201 - the orchestrator reads it
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
