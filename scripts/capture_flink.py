"""Capture a real Flink run: its log and periodic Prometheus scrapes, as flinkwatch reads them.

Runs one SQL job on PyFlink's local mini-cluster (``apache-flink`` from PyPI), with the
Prometheus reporter on and the log in Flink's default pattern layout or in Elastic's ECS
JSON layout (log4j2's ``JsonTemplateLayout`` with ``classpath:EcsLayout.json``, which the
Flink distribution ships). While the job runs, ``/metrics`` is scraped every few seconds
and each sample of interest is written as a canonical metric record
(``{"name", "value", "timestamp", "labels"}``), as a shipper would send it.

Not product code and not a dependency of it: PyFlink pins its own pandas/pyarrow, so it
lives in a venv of its own. The reporter and the BLOB server bind the wildcard address,
so the run goes into a network namespace with only loopback::

    python3 -m venv .flink && .flink/bin/pip install apache-flink==2.3.0
    unshare -n sh -c 'ip link set lo up && .flink/bin/python scripts/capture_flink.py \
        creep --seconds 240 --layout ecs --out tests/data/real/creep_ecs'

Scenarios (``--help`` lists them) reproduce the incidents flinkwatch pages on with
``datagen`` sources; each writes ``<out>.log`` and ``<out>.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

#: Metric families kept from each scrape: what flinkwatch's detectors read (``uptime`` and
#: ``numRestarts``: the job's heartbeat for ``job_lost``).
KEEP = re.compile(
    r"^flink_(jobmanager_job_(lastCheckpoint(Duration|Size|FullSize)|numberOf(Completed|Failed)"
    r"Checkpoints|numRestarts|uptime)|taskmanager_Status_JVM_Memory_Heap_(Used|Max)"
    r"|taskmanager_job_task_numRecords(In|Out)(PerSecond)?)$"
)
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')

_SOURCE = """
CREATE TABLE src (k BIGINT, v BIGINT, ts AS PROCTIME()) WITH (
  'connector' = 'datagen', 'rows-per-second' = '{rate}',
  'fields.k.kind' = 'random', 'fields.k.min' = '1', 'fields.k.max' = '{keys}')
"""
_SOURCE_STRINGS = """
CREATE TABLE src (k BIGINT, s STRING) WITH (
  'connector' = 'datagen', 'rows-per-second' = '{rate}',
  'fields.k.kind' = 'random', 'fields.k.min' = '1', 'fields.k.max' = '1000',
  'fields.s.length' = '60')
"""
_SINK = "CREATE TABLE sink (k BIGINT, c BIGINT) WITH ('connector' = 'blackhole')"

#: name -> (help, settings, statements)
SCENARIOS: dict[str, tuple[str, dict[str, str], list[str]]] = {
    "creep": (
        "HOP window over ever new keys, heap state: state and checkpoint duration grow",
        {"execution.checkpointing.interval": "2s", "execution.checkpointing.timeout": "10min"},
        [
            _SOURCE.format(rate=4000, keys=1_000_000_000),
            _SINK,
            "INSERT INTO sink SELECT k, COUNT(*) FROM TABLE(HOP(TABLE src, DESCRIPTOR(ts),"
            " INTERVAL '10' SECOND, INTERVAL '30' MINUTE)) GROUP BY k, window_start, window_end",
        ],
    ),
    "growth": (
        "COUNT(DISTINCT) over random strings, heap state: every record stays in the state, "
        "which grows by orders of magnitude, and checkpoint durations follow",
        {"execution.checkpointing.interval": "2s", "execution.checkpointing.timeout": "10min"},
        [
            _SOURCE_STRINGS.format(rate=20000),
            _SINK,
            "INSERT INTO sink SELECT k, COUNT(DISTINCT s) FROM src GROUP BY k",
        ],
    ),
    "expiry": (
        "the growth job with a 500 ms checkpoint timeout: checkpoints expire, late acks follow",
        {
            "execution.checkpointing.interval": "2s",
            "execution.checkpointing.timeout": "500ms",
            "execution.checkpointing.tolerable-failed-checkpoints": "1000",
        },
        [
            _SOURCE_STRINGS.format(rate=20000),
            _SINK,
            "INSERT INTO sink SELECT k, COUNT(DISTINCT s) FROM src GROUP BY k",
        ],
    ),
    "idle": (
        "a continuous file source on an empty directory: the job runs and reads nothing",
        {"execution.checkpointing.interval": "2s"},
        [
            "CREATE TABLE src (line STRING) WITH ('connector' = 'filesystem', "
            "'path' = 'file://{empty}', 'format' = 'raw', 'source.monitor-interval' = '1s')",
            "CREATE TABLE sink (line STRING) WITH ('connector' = 'blackhole')",
            "INSERT INTO sink SELECT line FROM src",
        ],
    ),
    "surge": (
        "seed 000's sliding window (2 min sliding by 2 s) over ever new keys, heap state, one "
        "slot, a 10 min timeout: each record is in 60 windows, the size surges by orders of "
        "magnitude while the window fills and durations climb to tens of seconds",
        {
            "execution.checkpointing.interval": "2s",
            "execution.checkpointing.timeout": "10min",
            "parallelism.default": "1",
            "taskmanager.numberOfTaskSlots": "1",
        },
        [
            _SOURCE.format(rate=2000, keys=1_000_000_000),
            _SINK,
            "INSERT INTO sink SELECT k, COUNT(*) FROM TABLE(HOP(TABLE src, DESCRIPTOR(ts),"
            " INTERVAL '2' SECOND, INTERVAL '2' MINUTE)) GROUP BY k, window_start, window_end",
        ],
    ),
    "healthy": (
        "a tumbling window over a thousand keys: small flat state, fast checkpoints",
        {"execution.checkpointing.interval": "2s"},
        [
            _SOURCE.format(rate=2000, keys=1000),
            _SINK,
            "INSERT INTO sink SELECT k, COUNT(*) FROM TABLE(TUMBLE(TABLE src, DESCRIPTOR(ts),"
            " INTERVAL '10' SECOND)) GROUP BY k, window_start, window_end",
        ],
    ),
}

_ECS_LOG4J = """
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FileAppender
appender.file.name = FileAppender
appender.file.type = FILE
appender.file.append = false
appender.file.fileName = ${sys:log.file}
appender.file.layout.type = JsonTemplateLayout
appender.file.layout.eventTemplateUri = classpath:EcsLayout.json
"""


def _pyflink_home() -> Path:
    import pyflink

    return Path(pyflink.__file__).parent


def _settings(work: Path, scenario: dict[str, str], port: int, args: Any) -> dict[str, str]:
    # Given to the table environment: the local mini-cluster takes its configuration
    # from there, not from config.yaml.
    crash = {}
    if args.job_id:
        # The same job id in every run and its checkpoints kept: a JobManager that crashes
        # and comes back restores the job, as Kubernetes with HA does.
        crash = {
            "$internal.pipeline.job-id": args.job_id,
            "execution.checkpointing.externalized-checkpoint-retention": ("RETAIN_ON_CANCELLATION"),
        }
        latest = _latest_checkpoint(args.checkpoints)
        if latest is not None:
            crash["execution.state-recovery.path"] = str(latest)
    return {
        **crash,
        "metrics.reporter.prom.factory.class": (
            "org.apache.flink.metrics.prometheus.PrometheusReporterFactory"
        ),
        "metrics.reporter.prom.port": str(port),
        "state.backend.type": "hashmap",
        "execution.checkpointing.dir": f"file://{args.checkpoints or work / 'checkpoints'}",
        "parallelism.default": "2",
        "taskmanager.numberOfTaskSlots": "2",
        **scenario,
    }


def _latest_checkpoint(root: Path | None) -> Path | None:
    if root is None:
        return None
    done = [p.parent for p in root.glob("*/chk-*/_metadata")]
    return max(done, key=lambda p: int(p.name.split("-")[1]), default=None)


def _conf_dir(work: Path, layout: str) -> Path:
    conf = work / "conf"
    shutil.copytree(_pyflink_home() / "conf", conf)
    if layout == "ecs":
        (conf / "log4j-cli.properties").write_text(_ECS_LOG4J)
    return conf


def parse_exposition(text: str, at_ms: int) -> list[dict]:
    """Prometheus text exposition → canonical metric records of the kept families."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m or not KEEP.match(m.group(1)):
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        pairs = _LABEL.findall(m.group(2) or "")
        labels = {k: v.encode().decode("unicode_escape") for k, v in pairs}
        out.append({"name": m.group(1), "value": value, "timestamp": at_ms, "labels": labels})
    return out


def _scrape(port: int, every_s: float, out: Path, stop: threading.Event) -> None:
    with out.open("w") as f:
        while not stop.wait(every_s):
            at_ms = int(time.time() * 1000)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                    text = r.read().decode()
            except OSError:
                continue  # the reporter is not up yet, or the job is restarting
            for rec in parse_exposition(text, at_ms):
                f.write(json.dumps(rec) + "\n")
            f.flush()


def main() -> None:
    """Run one scenario for ``--seconds``, then write its log and scrapes."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "scenario",
        choices=sorted(SCENARIOS),
        help="; ".join(f"{k}: {v[0]}" for k, v in sorted(SCENARIOS.items())),
    )
    ap.add_argument("--seconds", type=float, default=180, help="how long the job runs")
    ap.add_argument("--layout", choices=["pattern", "ecs"], default="pattern", help="log layout")
    ap.add_argument("--scrape-s", type=float, default=5.0, help="scrape interval")
    ap.add_argument("--port", type=int, default=9249, help="Prometheus reporter port")
    ap.add_argument("--out", type=Path, required=True, help="output path without suffix")
    ap.add_argument("--job-id", help="fixed job id (32 hex), restored from --checkpoints if any")
    ap.add_argument("--checkpoints", type=Path, help="checkpoint directory kept across runs")
    ap.add_argument(
        "--crash", action="store_true", help="end with SIGKILL (a crashed JobManager), no cancel"
    )
    args = ap.parse_args()
    _, settings, statements = SCENARIOS[args.scenario]
    work = Path(tempfile.mkdtemp(prefix="flink-capture-"))
    conf = _conf_dir(work, args.layout)
    home = _pyflink_home()
    reporter = next((home / "plugins" / "metrics-prometheus").glob("*.jar"))
    os.environ.update(
        FLINK_CONF_DIR=str(conf),
        FLINK_LOG_DIR=str(work / "log"),
        HADOOP_CLASSPATH=str(reporter),
    )
    (work / "log").mkdir()
    from pyflink.common import Configuration
    from pyflink.table import EnvironmentSettings, TableEnvironment

    config = Configuration()
    for k, v in _settings(work, settings, args.port, args).items():
        config.set_string(k, v)
    env = TableEnvironment.create(
        EnvironmentSettings.new_instance().in_streaming_mode().with_configuration(config).build()
    )
    (work / "empty").mkdir()
    for stmt in statements[:-1]:
        env.execute_sql(stmt.replace("{empty}", str(work / "empty")))
    stop = threading.Event()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    scraper = threading.Thread(
        target=_scrape, args=(args.port, args.scrape_s, args.out.with_suffix(".jsonl"), stop)
    )
    scraper.start()
    result = env.execute_sql(statements[-1])
    time.sleep(args.seconds)
    stop.set()
    scraper.join()
    (log,) = (work / "log").glob("*.log")
    if args.crash:
        shutil.copy(log, args.out.with_suffix(".log"))
        subprocess.run(["pkill", "-9", "-P", str(os.getpid())], check=False)
        os._exit(137)
    client = result.get_job_client()
    if client is not None:
        client.cancel().result()
    time.sleep(3)
    shutil.copy(log, args.out.with_suffix(".log"))
    print(f"{args.scenario}: {args.out}.log, {args.out}.jsonl (work dir {work})")


if __name__ == "__main__":
    main()
