"""`flinkwatch run` on a real Spark standalone cluster: a master and two workers on 127.0.0.1.

The cluster comes from the pinned pyspark (``scripts/spark-cluster.sh``); the flinkwatch
process is the driver (client mode) and reads the session's Kafka broker. What Spark
itself reports, through the driver's REST API, and the process table prove that the
detectors ran in the workers' executor JVMs; the alert file proves what they found:

1. incidents produced to Kafka alert (fire and resolve) once each;
2. the stateful detector stage ran its tasks on two executors, one per worker, each a
   child process of its worker, and none on the driver;
3. a threshold edited in the config file reaches the executors: input that alerts only
   under the new threshold alerts, and both executors processed detector input after it;
4. SIGKILL of one worker's process group (worker, executor, Python workers) while
   incidents flow loses no alert and repeats none: Spark moves the dead executor's tasks
   and state partitions to the surviving one.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import (
    CLUSTER_RUN_SPARK_OPTIONS,
    REPO,
    TEST_SERVER_JAVA,
    SparkCluster,
    alive,
    cmdline,
    free_port_run,
    wait_until,
)
from tests.integration.test_delivery_crash import T0, line

pytestmark = [pytest.mark.kafka]

PARTITIONS = 4  # Kafka partitions and shuffle (state) partitions: more than the 2 cores
WORKERS = 2


def job_id(i: int) -> str:
    return f"{0xC1A55E00 + i:032x}"


def incident(i: int, expired: int, completed: int = 2) -> list[str]:
    """Job ``i``: ``expired`` expired checkpoints, then ``completed`` completed ones.

    Each job's records lie in their own 10-minute slice of event time.
    """
    job = job_id(i)
    at = [T0 + dt.timedelta(minutes=10 * i + m) for m in range(expired + completed)]
    out = [
        line(at[m], f"Checkpoint {m + 1} of job {job} expired before completing.")
        for m in range(expired)
    ]
    out += [
        line(
            at[m],
            f"Completed checkpoint {m + 1} for job {job} (73400320 bytes, "
            "checkpointDuration=1376 ms, finalizationTime=4 ms).",
        )
        for m in range(expired, expired + completed)
    ]
    return out


class Driver:
    """The flinkwatch driver's Spark REST API (``/api/v1``)."""

    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}/api/v1"
        self._app: str | None = None

    def get(self, path: str) -> Any:
        # The driver JVM answers slowly while it plans a micro-batch on a loaded machine.
        with urllib.request.urlopen(f"{self.base}{path}", timeout=60) as r:
            return json.load(r)

    def up(self) -> bool:
        try:
            return bool(self.get("/applications"))
        except OSError:
            return False

    @property
    def app(self) -> str:
        if self._app is None:
            (only,) = self.get("/applications")
            self._app = only["id"]
        return self._app

    def executors(self) -> list[dict[str, Any]]:
        """Every executor of the application, removed ones included."""
        return self.get(f"/applications/{self.app}/allexecutors")

    def detector_tasks(self) -> list[dict[str, Any]]:
        """Tasks of the stateful detector stage of every ``flinkwatch-detect`` micro-batch.

        A detect micro-batch is one job: a read of the Kafka event bus, shuffled by
        (detector, entity) into the state partitions, then transformWithStateInPandas and
        the collect of ``foreachBatch``. That last stage is the job's result stage (the
        highest stage id); each of its tasks is one state partition. Each task gets the
        ``run_id`` of the query run it belongs to (a new one after every restart).
        """
        tasks = []
        for job in self.get(f"/applications/{self.app}/jobs?status=succeeded"):
            desc = job.get("description") or ""
            if not desc.startswith("flinkwatch-detect"):
                continue
            run_id = re.search(r"runId = (\S+)", desc)
            stage = max(job["stageIds"])
            for attempt in self.get(f"/applications/{self.app}/stages/{stage}"):
                # A retried attempt (after a lost executor) runs only the missing partitions.
                if attempt["attemptId"] == 0:
                    assert attempt["numTasks"] == PARTITIONS, attempt["name"]
                for t in self.get(
                    f"/applications/{self.app}/stages/{stage}/{attempt['attemptId']}"
                    "/taskList?length=1000"
                ):
                    if t["status"] != "SUCCESS":
                        continue
                    tasks.append(
                        {
                            "run_id": run_id.group(1) if run_id else None,
                            "stage": stage,
                            "partition": t["index"],
                            "executor": t["executorId"],
                            "rows": t["taskMetrics"]["shuffleReadMetrics"]["recordsRead"],
                        }
                    )
        return tasks


class Job:
    """``flinkwatch run`` in a process group of its own (Python driver + driver JVM)."""

    def __init__(self, conf: Path, log: Path) -> None:
        self.log = log
        out = log.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "streaming.cli", "run", "--config", str(conf)],
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
            # The driver must be reachable from the executors at the address it announces.
            env={**os.environ, "PYTHONUNBUFFERED": "1", "SPARK_LOCAL_IP": "127.0.0.1"},
            start_new_session=True,
        )
        out.close()

    def text(self) -> str:
        return self.log.read_text()

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.poll() is None or alive(self.proc.pid):
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=30)
        return self.proc.returncode


def alerts(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def statuses(path: Path) -> dict[str, list[str]]:
    """Transitions in the alert file, by job id, in file order."""
    out: dict[str, list[str]] = {}
    for a in alerts(path):
        out.setdefault(a["job_id"], []).append(a["status"])
    return out


def test_run_on_a_standalone_cluster_scales_out_reloads_and_survives_a_lost_worker(
    kafka, tmp_path
) -> None:
    kafka.create_topics("cluster.logs", "cluster.metrics", partitions=PARTITIONS)
    cluster = SparkCluster(
        tmp_path / "spark", workers=WORKERS, cores=1, memory="1g", daemon_java=TEST_SERVER_JAVA
    )
    ui_port = free_port_run(1)
    state = tmp_path / "state"
    alert_file = state / "alerts.jsonl"
    conf = tmp_path / "flinkwatch.yaml"
    doc: dict[str, Any] = {
        "kafka": {
            "bootstrap_servers": kafka.bootstrap,
            "logs_topic": "cluster.logs",
            "metrics_topic": "cluster.metrics",
            "events_topic": "cluster.events",
            "deadletters_topic": "cluster.deadletters",
        },
        "spark": {
            "master": cluster.url,
            "shuffle_partitions": PARTITIONS,
            "trigger_interval_s": 0.5,
            "watermark_delay_s": 86400,  # the test's event times jump; nothing is late
            "executor_memory": "512m",
            "options": {
                **CLUSTER_RUN_SPARK_OPTIONS,
                # The driver's REST API is what proves where tasks ran.
                "spark.ui.enabled": "true",
                "spark.ui.port": str(ui_port),
                # Start only once both executors are registered, so that the state
                # partitions spread over both from the first micro-batch.
                "spark.cores.max": str(WORKERS),
                "spark.scheduler.minRegisteredResourcesRatio": "1.0",
            },
        },
        "output": {"state_dir": str(state)},
        "metrics": {"enabled": False},
        "reload_interval_s": 1,
        "detectors": {
            # Resolve at the second completion: this test is about the cluster.
            "checkpoint_failures": {"min_expired": 3, "clear_for_s": 0},
            "late_barrier_acks": {"enabled": False},
            "checkpoint_creep": {"enabled": False},
            "idle_heap_growth": {"enabled": False},
        },
    }
    conf.write_text(yaml.safe_dump(doc))
    driver = Driver(ui_port)
    t_start = time.monotonic()
    cluster.up()
    job: Job | None = None
    try:
        job = Job(conf, tmp_path / "run.log")
        wait_until(lambda: "queries started" in job.text(), timeout=240, what="the queries")
        t_queries = time.monotonic()

        # 1. Alerts: four incidents fire and resolve. Job 9 has two expirations only:
        # below min_expired=3, it must stay silent (produced first, so it is processed
        # no later than the others).
        kafka.produce("cluster.logs", incident(9, expired=2), key=job_id(9).encode())
        first = range(4)
        for i in first:
            kafka.produce("cluster.logs", incident(i, expired=3), key=job_id(i).encode())
        wait_until(
            lambda: all(
                statuses(alert_file).get(job_id(i)) == ["firing", "resolved"] for i in first
            ),
            timeout=300,
            what="the first incidents to fire and resolve",
        )
        assert job_id(9) not in statuses(alert_file)
        t_alerts = time.monotonic()

        # 2. Where the detectors ran, as Spark reports it.
        wait_until(driver.up, timeout=120, what="the driver's REST API")
        execs = {e["id"]: e for e in driver.executors()}
        assert execs["driver"]["totalTasks"] == 0  # client mode: the driver runs no task
        by_worker = {}
        for eid, e in execs.items():
            if eid == "driver":
                continue
            port = int(re.search(r"127\.0\.0\.1:(\d+)/", e["executorLogs"]["stdout"]).group(1))
            worker = port - cluster.ui_port
            by_worker[worker] = eid
            # The executor is a JVM its worker launched: a child process of the worker.
            assert eid in cluster.executors(worker), (eid, worker)
        assert sorted(by_worker) == [1, 2]
        tasks = driver.detector_tasks()
        assert {t["executor"] for t in tasks} == set(by_worker.values())
        assert {t["partition"] for t in tasks} == set(range(PARTITIONS))
        before_reload = {t["run_id"] for t in tasks}

        # 3. A reload reaches the executors: with min_expired=2, two expirations alert.
        doc["detectors"]["checkpoint_failures"]["min_expired"] = 2
        conf.write_text(yaml.safe_dump(doc))
        wait_until(
            lambda: job.text().count("queries started") >= 2,
            timeout=180,
            what="the queries to restart with the new config",
        )
        # Jobs 35-42 hash to all four state partitions (Spark's pmod(hash(detector,
        # entity), 4)), so each executor gets input whichever partitions it holds.
        reloaded = range(35, 43)
        for i in reloaded:
            kafka.produce("cluster.logs", incident(i, expired=2), key=job_id(i).encode())
        wait_until(
            lambda: all(
                statuses(alert_file).get(job_id(i)) == ["firing", "resolved"] for i in reloaded
            ),
            timeout=240,
            what="two-expiry incidents to alert under the reloaded threshold",
        )
        after = [t for t in driver.detector_tasks() if t["run_id"] not in before_reload]
        # Both executors processed detector input with the reloaded detectors.
        fed = [t for t in after if t["rows"] > 0]
        assert {t["partition"] for t in fed} == set(range(PARTITIONS))
        assert {t["executor"] for t in fed} == set(by_worker.values())
        t_reload = time.monotonic()

        # 4. SIGKILL worker 2 (with its executor and Python workers) mid-stream: half of
        # the incidents are in flight when it dies, the other half follows.
        lost, survivor = by_worker[2], by_worker[1]
        streamed = range(20, 30)

        def produce(ids: range) -> None:
            for i in ids:
                kafka.produce("cluster.logs", incident(i, expired=3), key=job_id(i).encode())
                time.sleep(0.5)

        produce(streamed[:5])
        wait_until(
            lambda: any(job_id(i) in statuses(alert_file) for i in streamed),
            timeout=240,
            what="the first alert of the streamed incidents",
        )
        alerted_at_kill = sum(job_id(i) in statuses(alert_file) for i in streamed)
        doomed = cluster.group(2)
        # The group holds the worker, its executor JVM and the executor's Python workers.
        assert set(cluster.executors(2).values()) < set(doomed)
        assert any("pyspark" in cmdline(p) for p in doomed)
        cluster.kill_worker(2)
        # The worker dies at once; its executor and Python workers, killed with it, may
        # take a moment to be gone from /proc (a fresh machine showed one still there).
        wait_until(lambda: cluster.group(2) == [], timeout=30, what="worker 2's processes")
        assert not any(alive(p) for p in doomed)
        produce(streamed[5:])
        wait_until(
            lambda: all(
                statuses(alert_file).get(job_id(i)) == ["firing", "resolved"] for i in streamed
            ),
            timeout=240,
            what="every streamed incident to fire and resolve after the kill",
        )
        t_kill = time.monotonic()
        assert {e["id"]: e for e in driver.executors()}[lost]["isActive"] is False
        final = driver.detector_tasks()
        last_stage = max(t["stage"] for t in final)
        # The last micro-batch (after the kill): every state partition on the survivor.
        assert {t["executor"] for t in final if t["stage"] == last_stage} == {survivor}
        time.sleep(2)  # a late duplicate would show up now
        log_text = job.text()
        assert job.stop() == 0
        job = None
    finally:
        if job is not None:
            job.stop()
        cluster.down()

    # Every expected transition exactly once; job 9 (two expirations before the reload)
    # never alerted before the reload and is not expected.
    keys = [(a["alert_id"], a["status"]) for a in alerts(alert_file)]
    assert len(keys) == len(set(keys))
    got = statuses(alert_file)
    for i in [*first, *reloaded, *streamed]:
        assert got[job_id(i)] == ["firing", "resolved"], i
    per_executor = {e: sum(t["executor"] == e for t in final) for e in by_worker.values()}
    print(  # noqa: T201 - numbers for the notes
        f"cluster test: queries up after {t_queries - t_start:.0f} s, first alerts "
        f"+{t_alerts - t_queries:.0f} s, reload phase +{t_reload - t_alerts:.0f} s, kill phase "
        f"+{t_kill - t_reload:.0f} s ({alerted_at_kill} of {len(streamed)} streamed incidents "
        f"had alerted at the kill); detector tasks per executor {per_executor}; query "
        f"restarts after a failure: {log_text.count('restarting both queries from')}"
    )
