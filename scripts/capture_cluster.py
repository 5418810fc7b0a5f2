"""Capture a real standalone Flink cluster losing (or ending) a job: logs and scrapes.

Where ``capture_flink.py`` runs PyFlink's mini-cluster (one JVM), this runs a standalone
session cluster from the Flink distribution PyPI's ``apache-flink`` ships: a JobManager
(``bin/jobmanager.sh start-foreground``) and a TaskManager (``bin/taskmanager.sh
start-foreground``) in JVMs of their own, one ``config.yaml`` for both (no high
availability; heartbeats shortened so the TaskManager notices a dead JobManager within
seconds), the Prometheus reporter on a port of its own per process. A SQL job (the
``healthy`` tumbling window of ``capture_flink.py``, datagen → blackhole, checkpoints every
few seconds) is submitted with the PyFlink Table API (``execution.target: remote``); once
it is RUNNING, the scenario happens to it:

- ``jm_killed_restarted``: the JobManager JVM gets SIGKILL; a new JobManager starts on the
  same configuration a few seconds later (without HA it recovers no job); the TaskManager
  keeps running and registers with it.
- ``jm_killed``: the same kill, no new JobManager; the TaskManager keeps retrying.
- ``cluster_stopped``: both JVMs get SIGKILL; nothing more is logged or scraped.
- ``job_cancelled``: the job is cancelled over the REST API; the cluster stays up, idle.

Each process's log is copied as Flink wrote it (default pattern layout, one file per
process: ``<out>.jobmanager.log``, ``<out>.jobmanager-2.log``, ``<out>.taskmanager.log``)
before anything is stopped, so no shutdown line of the capture's own making is in them;
both reporters are scraped every ``--scrape-s`` seconds into ``<out>.jsonl`` (canonical
metric records of the families in ``capture_flink.KEEP``). Run it in a network namespace
with only loopback (the servers bind the wildcard address)::

    unshare -n sh -c 'ip link set lo up && .flink/bin/python scripts/capture_cluster.py \
        jm_killed --out tests/data/real/jm_killed_2_3/jm_killed_2_3'
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from capture_flink import SCENARIOS, _pyflink_home, parse_exposition  # noqa: E402

REST = "http://127.0.0.1:8081"
JM_PORT, TM_PORT = 9249, 9250

#: name -> help
ACTIONS = {
    "jm_killed_restarted": "SIGKILL the JobManager, start a new one on the same config",
    "jm_killed": "SIGKILL the JobManager, no new one",
    "cluster_stopped": "SIGKILL the JobManager and the TaskManager",
    "job_cancelled": "cancel the job over REST; the cluster stays up, idle",
}


def _config(work: Path, checkpoint_s: float, extra: dict[str, str | None] | None = None) -> str:
    """The cluster's config.yaml (flat keys; Flink 2 reads them as well as nested ones).

    ``extra`` overrides the settings below; a key mapped to None is left out.
    """
    shipped = (_pyflink_home() / "conf" / "config.yaml").read_text()
    opts = next(
        line.split("all:", 1)[1].strip() for line in shipped.splitlines() if "all: --add-" in line
    )
    settings = {
        "env.java.opts.all": opts,
        "jobmanager.bind-host": "localhost",
        "jobmanager.rpc.address": "localhost",
        "jobmanager.rpc.port": "6123",
        "jobmanager.memory.process.size": "1024m",
        "taskmanager.bind-host": "localhost",
        "taskmanager.host": "localhost",
        "taskmanager.numberOfTaskSlots": "2",
        "taskmanager.memory.process.size": "1280m",
        "parallelism.default": "2",
        "rest.address": "127.0.0.1",
        "rest.bind-address": "127.0.0.1",
        "rest.port": "8081",
        "heartbeat.interval": "5000",
        "heartbeat.timeout": "20000",
        "metrics.reporter.prom.factory.class": (
            "org.apache.flink.metrics.prometheus.PrometheusReporterFactory"
        ),
        "metrics.reporter.prom.port": str(JM_PORT),
        "state.backend.type": "hashmap",
        "execution.checkpointing.interval": f"{checkpoint_s:g}s",
        "execution.checkpointing.dir": f"file://{work / 'checkpoints'}",
    }
    merged = {k: v for k, v in {**settings, **(extra or {})}.items() if v is not None}
    return "".join(f"{k}: {json.dumps(v)}\n" for k, v in merged.items())


def _conf_dir(work: Path, checkpoint_s: float, extra: dict[str, str | None] | None = None) -> Path:
    conf = work / "conf"
    conf.mkdir()
    for name in ("log4j-console.properties", "log4j.properties", "log4j-cli.properties"):
        shutil.copy(_pyflink_home() / "conf" / name, conf / name)
    (conf / "config.yaml").write_text(_config(work, checkpoint_s, extra))
    return conf


class Process:
    """One Flink JVM started in the foreground (``flink-console.sh`` execs java: pid = JVM).

    ``home`` is the Flink distribution whose ``bin/`` starts it (and whose ``lib/`` is its
    classpath): PyFlink's own unless given, e.g. a copy with more jars in ``lib/``.
    """

    def __init__(
        self, script: str, conf: Path, log_dir: Path, *args: str, home: Path | None = None
    ) -> None:
        log_dir.mkdir(parents=True)
        self.log_dir = log_dir
        env = {**os.environ, "FLINK_CONF_DIR": str(conf), "FLINK_LOG_DIR": str(log_dir)}
        bin_dir = (home or _pyflink_home()) / "bin"
        cmd = ["bash", str(bin_dir / script), "start-foreground", *args]
        self.proc = subprocess.Popen(
            cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    def log(self) -> Path:
        """The log file the JVM writes (``FLINK_LOG_DIR``)."""
        (log,) = self.log_dir.glob("*.log")
        return log

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to the JVM, if it still runs, and wait for it."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            self.proc.wait(timeout=60)


def _get(path: str) -> Any:
    with urllib.request.urlopen(f"{REST}{path}", timeout=5) as r:  # noqa: S310 (loopback)
        return json.loads(r.read().decode())


def _wait(what: str, check: Any, timeout_s: float = 180) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            value = check()
        except OSError:
            value = None
        if value:
            return value
        time.sleep(1)
    msg = f"timed out waiting for {what}"
    raise RuntimeError(msg)


def _scrape(out: Path, every_s: float, stop: threading.Event, seen: set[str]) -> None:
    with out.open("w") as f:
        while not stop.wait(every_s):
            at_ms = int(time.time() * 1000)
            for port in (JM_PORT, TM_PORT):
                url = f"http://127.0.0.1:{port}/metrics"
                try:
                    with urllib.request.urlopen(url, timeout=5) as r:  # noqa: S310 (loopback)
                        text = r.read().decode()
                except OSError:
                    continue  # that process is dead or not up yet
                seen.update(
                    line.split("{", 1)[0]
                    for line in text.splitlines()
                    if line.startswith("flink_jobmanager_job_")
                )
                for rec in parse_exposition(text, at_ms):
                    f.write(json.dumps(rec) + "\n")
            f.flush()


def _submit(
    conf: Path,
    checkpoint_s: float,
    statements: list[str] | None = None,
    settings: dict[str, str] | None = None,
) -> str:
    """Submit a SQL job (the healthy tumbling window unless given) to the cluster; its id.

    ``settings`` go into the job's configuration (checkpoint timeout and the like).
    """
    from pyflink.common import Configuration
    from pyflink.table import EnvironmentSettings, TableEnvironment

    config = Configuration()
    for k, v in {
        "execution.target": "remote",
        "rest.address": "127.0.0.1",
        "rest.port": "8081",
        "parallelism.default": "2",
        "execution.checkpointing.interval": f"{checkpoint_s:g}s",
        **(settings or {}),
    }.items():
        config.set_string(k, v)
    env = TableEnvironment.create(
        EnvironmentSettings.new_instance().in_streaming_mode().with_configuration(config).build()
    )
    if statements is None:
        _, _, statements = SCENARIOS["healthy"]
    for stmt in statements[:-1]:
        env.execute_sql(stmt)
    client = env.execute_sql(statements[-1]).get_job_client()
    assert client is not None
    return str(client.get_job_id())


def main() -> None:
    """Start the cluster, run the job, make the scenario happen, write logs and scrapes."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "scenario",
        choices=sorted(ACTIONS),
        help="; ".join(f"{k}: {v}" for k, v in sorted(ACTIONS.items())),
    )
    ap.add_argument("--out", type=Path, required=True, help="output path without suffix")
    ap.add_argument("--before-s", type=float, default=60, help="RUNNING this long before")
    ap.add_argument("--after-s", type=float, default=120, help="capture this long after")
    ap.add_argument("--restart-after-s", type=float, default=5, help="new JobManager after")
    ap.add_argument("--checkpoint-s", type=float, default=5, help="checkpoint interval")
    ap.add_argument("--scrape-s", type=float, default=15, help="scrape interval")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="flink-cluster-"))
    conf = _conf_dir(work, args.checkpoint_s)
    os.environ.update(FLINK_CONF_DIR=str(conf), FLINK_LOG_DIR=str(work / "log" / "client"))
    (work / "log" / "client").mkdir(parents=True)
    stamp = lambda what: print(f"{time.strftime('%H:%M:%S')} {what}", flush=True)  # noqa: E731
    jms = [Process("jobmanager.sh", conf, work / "log" / "jobmanager")]
    _wait("the REST endpoint", lambda: _get("/overview"))
    tm = Process(
        "taskmanager.sh",
        conf,
        work / "log" / "taskmanager",
        "-D",
        f"metrics.reporter.prom.port={TM_PORT}",
    )
    _wait("the TaskManager", lambda: _get("/overview")["taskmanagers"] >= 1)
    stamp("cluster up")
    stop, seen = threading.Event(), set[str]()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    scraper = threading.Thread(
        target=_scrape, args=(args.out.with_suffix(".jsonl"), args.scrape_s, stop, seen)
    )
    scraper.start()
    job = _submit(conf, args.checkpoint_s)
    _wait("the job RUNNING", lambda: _get(f"/jobs/{job}")["state"] == "RUNNING")
    stamp(f"job {job} RUNNING")
    time.sleep(args.before_s)
    if args.scenario == "job_cancelled":
        url = f"{REST}/jobs/{job}?mode=cancel"
        req = urllib.request.Request(url, method="PATCH")  # noqa: S310 (loopback)
        urllib.request.urlopen(req, timeout=10).close()  # noqa: S310 (loopback)
        stamp("job cancelled")
    else:
        jms[0].kill()
        stamp("JobManager killed (SIGKILL)")
        if args.scenario == "cluster_stopped":
            tm.kill()
            stamp("TaskManager killed (SIGKILL)")
        if args.scenario == "jm_killed_restarted":
            time.sleep(args.restart_after_s)
            jms.append(Process("jobmanager.sh", conf, work / "log" / "jobmanager-2"))
            stamp("new JobManager started")
    time.sleep(args.after_s)
    stop.set()
    scraper.join()
    stamp("capture ends")
    names = ["jobmanager", "jobmanager-2"]
    for name, jm in zip(names, jms, strict=False):
        shutil.copy(jm.log(), args.out.with_name(f"{args.out.name}.{name}.log"))
    shutil.copy(tm.log(), args.out.with_name(f"{args.out.name}.taskmanager.log"))
    for p in [*jms, tm]:
        p.kill(signal.SIGTERM)
    print("job-level JobManager families:", " ".join(sorted(seen)), file=sys.stderr)
    print(f"{args.scenario}: {args.out}.*.log, {args.out}.jsonl (work dir {work})")


if __name__ == "__main__":
    main()
