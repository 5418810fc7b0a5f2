"""Exactly-once delivery across SIGKILL: the job as a process, real Kafka, a local Slack.

The job is killed (SIGKILL, whole process group: the Python driver and its JVM) at
several moments while records flow and while Slack is down, and restarted on the same
checkpoints and ledger each time. At the end every expected transition must have
reached Slack and the alert file exactly once: one message per incident, one thread
reply per resolve, one evidence chart per incident in its thread, and no second
``chat.postMessage`` for anything. A real Alertmanager
gets them too: every delivery ``delivered`` once in the ledger, none left firing.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from lab.procs import wait_while_progressing
from lab.promserver import AlertmanagerServer, find_binary
from lab.slack import SlackEmulator
from sinks import AlertLedger
from tests.conftest import REPO, RUN_SPARK_OPTIONS, descendants, kill_all, wait_until
from tests.integration.test_run_process import run_progress

pytestmark = [pytest.mark.kafka]

CC = "org.apache.flink.runtime.checkpoint.CheckpointCoordinator"
JOBS = [f"{0xC0FFEE00 + i:032x}" for i in range(10)]
# A kill while records flow, one while Slack is down (the last cycle: the job dies with a
# backlog it has not delivered), then a last start. Each cycle is a JVM start, about 45 s
# of the suite; a third (a second kill while records flow) tested nothing the second does
# not: it too starts from a killed run's checkpoints and ledger.
KILLS = 2
SLACK_DOWN = KILLS - 1
T0 = dt.datetime(2024, 6, 3, 8, 0, tzinfo=dt.UTC)


def line(at: dt.datetime, msg: str) -> str:
    ts = at.strftime("%Y-%m-%d %H:%M:%S,") + f"{at.microsecond // 1000:03d}"
    return f"{ts} INFO  {CC:<60} [] - {msg}"


def said(message: dict) -> list[dict]:
    """The thread's text replies (the resolve)."""
    return [r for r in message["replies"] if not r.get("files")]


def charts(message: dict) -> list[dict]:
    """The thread's file replies (the evidence chart)."""
    return [r for r in message["replies"] if r.get("files")]


def incident(i: int, job: str) -> list[str]:
    """Three expired checkpoints (fires), then two completed ones (resolves)."""
    start = T0 + dt.timedelta(minutes=10 * i)
    out = [
        line(
            start + dt.timedelta(minutes=m),
            f"Checkpoint {m + 1} of job {job} expired before completing.",
        )
        for m in range(3)
    ]
    out += [
        line(
            start + dt.timedelta(minutes=3 + m),
            f"Completed checkpoint {4 + m} for job {job} (73400320 bytes, "
            "checkpointDuration=1376 ms, finalizationTime=4 ms).",
        )
        for m in range(2)
    ]
    return out


class Job:
    """`flinkwatch run` in its own process group; a kill takes its whole tree, JVM included."""

    def __init__(self, conf: Path, log: Path, token: str) -> None:
        self.conf, self.log, self.token = conf, log, token
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        with self.log.open("a") as f:
            f.write(f"\n===== start {self.starts} =====\n")
        out = self.log.open("a")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "streaming.cli", "run", "--config", str(self.conf)],
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "FW_CRASH_TOKEN": self.token},
            start_new_session=True,
        )
        out.close()

    def running_queries(self) -> bool:
        text = self.log.read_text()
        return text.rsplit("===== start", 1)[-1].count("queries started") >= 1

    def kill(self) -> None:
        assert self.proc is not None
        # The JVM is in a session of its own: the group's SIGKILL would leave it to exit
        # on its own once the driver's pipe closes, in an orderly way, not a crash.
        kill_all(descendants(self.proc.pid))
        self.proc.wait(timeout=60)

    def stop(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=120)
        finally:
            if self.proc.poll() is None:
                kill_all(descendants(self.proc.pid))


def waiting_for(ledger: Path, sink: str) -> int:
    """Open deliveries to ``sink``, read-only (the running job writes the ledger)."""
    with contextlib.closing(sqlite3.connect(f"file:{ledger}?mode=ro", uri=True)) as db:
        (n,) = db.execute(
            "SELECT COUNT(*) FROM deliveries WHERE sink = ? AND state IN ('pending', 'sending')",
            (sink,),
        ).fetchone()
    return int(n)


def test_every_transition_reaches_slack_exactly_once_across_kills(kafka, tmp_path, request) -> None:
    rnd = random.Random(20261122)
    kafka.create_topics("crash.logs", "crash.metrics")
    state = tmp_path / "state"
    prom = find_binary()
    assert prom is not None, "no alertmanager binary: run `scripts/prometheus.sh fetch`"
    # Its notifications go nowhere (port 1): this test looks at what it holds.
    am = AlertmanagerServer(
        prom.with_name("alertmanager"), tmp_path / "am", "http://127.0.0.1:1/", "#x"
    ).start()
    request.addfinalizer(am.stop)
    with SlackEmulator(token="xoxb-crash-test", channels=("#flink-alerts",)) as slack:
        conf = tmp_path / "flinkwatch.yaml"
        conf.write_text(
            yaml.safe_dump(
                {
                    "kafka": {
                        "bootstrap_servers": kafka.bootstrap,
                        "logs_topic": "crash.logs",
                        "metrics_topic": "crash.metrics",
                        # Small batches: a kill lands between many batch commits.
                        "max_offsets_per_trigger": 6,
                    },
                    "spark": {
                        "trigger_interval_s": 0.5,
                        "watermark_delay_s": 86400,
                        "options": RUN_SPARK_OPTIONS,
                    },
                    # The incidents are from 2024: page them, however old (this test is
                    # about delivery, not about the age limit).
                    "output": {"state_dir": str(state), "console": True, "page_max_age_s": None},
                    "metrics": {"enabled": False},
                    "cluster": "crash-test",
                    "slack": {
                        "mode": "bot",
                        "token_env": "FW_CRASH_TOKEN",
                        "api_url": slack.base_url,
                        "channel": "#flink-alerts",
                        "max_retries": 0,
                        "retry_backoff_s": 1,
                        "max_backoff_s": 2,
                    },
                    "alertmanager": {
                        "urls": [f"http://{am.target}"],
                        "retry_backoff_s": 1,
                        "max_backoff_s": 2,
                        "resend_interval_s": 5,
                    },
                    "detectors": {
                        # Resolve at the second completion: this test is about delivery.
                        "checkpoint_failures": {"min_expired": 3, "clear_for_s": 0},
                        "late_barrier_acks": {"enabled": False},
                        "checkpoint_creep": {"enabled": False},
                        "idle_heap_growth": {"enabled": False},
                    },
                }
            )
        )
        job = Job(conf, tmp_path / "run.log", slack.token)
        produced = {"n": 0}

        def produce_some(n: int) -> None:
            for i in range(produced["n"], min(produced["n"] + n, len(JOBS))):
                kafka.produce("crash.logs", incident(i, JOBS[i]), key=JOBS[i].encode())
            produced["n"] = min(produced["n"] + n, len(JOBS))

        def recorded() -> int:
            alerts = state / "alerts.jsonl"
            return len(alerts.read_text().splitlines()) if alerts.exists() else 0

        produce_some(3)
        kills: list[str] = []
        for cycle in range(KILLS):
            before = recorded()
            job.start()
            wait_until(job.running_queries, timeout=240, what=f"queries of start {cycle + 1}")
            produce_some(2)
            if cycle == SLACK_DOWN:
                # Slack goes down, and the job dies with a backlog it has not delivered.
                slack.set_down(True)
            # Kill mid-stream: once this run has recorded something, at a random moment
            # within the next few micro-batches.
            wait_until(lambda b=before: recorded() > b, timeout=240, what="new transitions")
            time.sleep(rnd.uniform(0.0, 3.0))
            job.kill()
            kills.append(
                f"cycle {cycle + 1}: killed with {recorded()} transitions in the alert file, "
                f"{len(slack.messages('#flink-alerts'))} incident messages in Slack"
                + (" (Slack down)" if cycle == SLACK_DOWN else "")
            )
            if cycle == SLACK_DOWN:
                threading.Timer(3.0, slack.set_down, args=(False,)).start()
        produce_some(len(JOBS))
        job.start()

        def in_slack() -> tuple[int, int]:
            messages = slack.messages("#flink-alerts")
            return sum(len(said(m)) for m in messages), sum(len(charts(m)) for m in messages)

        try:
            # As long as the run moves (its log's steps, detect batches, transitions, Slack
            # posts): on a busy machine this took over 300 s, on a quiet one about 60.
            wait_while_progressing(
                lambda: min(in_slack()) >= len(JOBS),
                lambda: (run_progress(job.log, state), recorded(), in_slack()),
                what="every incident fired and resolved in Slack, each with its chart",
            )
            time.sleep(3)  # anything duplicated late would show up now
            # Alertmanager's deliveries are through too (none wait in the ledger).
            wait_until(
                lambda: waiting_for(state / "ledger.sqlite", "alertmanager") == 0,
                timeout=60,
                what="every transition posted to Alertmanager",
            )
        finally:
            rc = job.stop()
        assert rc == 0
        with urllib.request.urlopen(f"http://{am.target}/api/v2/alerts", timeout=5) as resp:  # noqa: S310
            still_firing = [
                a for a in json.load(resp) if a["labels"].get("cluster") == "crash-test"
            ]

        messages = slack.messages("#flink-alerts")
        posts = [s for p, s in slack.requests if p.endswith("chat.postMessage")]
    log_text = (tmp_path / "run.log").read_text()
    print("kill/restart cycles:", *kills, sep="\n  ")  # noqa: T201 - numbers for the notes
    print(  # noqa: T201
        f"  chat.postMessage 200s: {posts.count(200)}, failed requests: "
        f"{len([s for _p, s in slack.requests if s != 200])}, sends confirmed after a kill: "
        f"{log_text.count('found delivered, not sent again')}"
    )

    # One message per incident, one resolve reply each: exactly once.
    assert sorted(m["metadata"]["event_payload"]["key"].split(":")[1] for m in messages) == [
        "firing"
    ] * len(JOBS)
    jobs_in_slack = sorted(next(j for j in JOBS if j in m["text"]) for m in messages)
    assert jobs_in_slack == sorted(JOBS)
    for m in messages:
        assert [r["metadata"]["event_payload"]["key"].split(":")[1] for r in said(m)] == [
            "resolved"
        ]
        # The evidence chart too: once in the thread, whatever the kills cut.
        (chart,) = charts(m)
        assert chart["files"][0]["name"].endswith(".png")
        assert "resolved" in m["text"]  # the incident's message was updated
    assert posts.count(200) == 2 * len(JOBS), "a chat.postMessage was repeated"

    alerts = [json.loads(x) for x in (state / "alerts.jsonl").read_text().splitlines()]
    keys = [(a["alert_id"], a["status"]) for a in alerts]
    assert len(keys) == len(set(keys)) == 2 * len(JOBS)
    assert {a["job_id"] for a in alerts} == set(JOBS)
    assert log_text.count("===== start") == KILLS + 1

    # Alertmanager: each transition delivered once (a post cut by a kill is posted again,
    # which an idempotent receiver takes as one), every incident resolved there.
    ledger = AlertLedger(state / "ledger.sqlite")
    to_am = [d for d in ledger.deliveries() if d.sink == "alertmanager"]
    assert sorted(d.key for d in to_am) == sorted(f"{a}:{s}" for a, s in keys)
    assert {d.state for d in to_am} == {"delivered"}
    assert still_firing == []
