"""`flinkwatch run` as a process: /metrics scraped by a real Prometheus, SIGHUP, stops."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from lab.promserver import PrometheusServer
from sinks import AlertLedger
from tests.conftest import (
    REPO,
    RUN_SPARK_OPTIONS,
    alive,
    descendants,
    free_port_run,
    kill_all,
    python_m,
    wait_until,
    wait_while_progressing,
)
from tests.integration.kafka_path import CC, expired_cycle, flink_line
from tests.integration.test_prometheus_server import need_binary

pytestmark = [pytest.mark.kafka]

JOB = "6a1f0e2d3c4b5a69788796a5b4c3d2e1"


def scrape(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            return response.read().decode()
    except OSError:
        return ""


def healthz(port: int) -> tuple[int, str]:
    """(status, body) of /healthz on ``port``; (0, "") while nothing answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return 0, ""


def run_progress(log: Path, state: Path) -> tuple[int, int]:
    """How far a run has come: the log's lines that say a step, and the detect batches.

    For waits whose length depends on how busy the machine is. The per-query summary
    lines (``query=…``) come every 30 s while nothing is decided, so they do not count;
    nor does the parse query's real-time commits. An idle detect query runs no batch.
    """
    try:
        lines = log.read_text().splitlines()
    except OSError:
        lines = []
    steps = sum(1 for line in lines if " query=" not in line)
    commits = sum(
        1
        for d in (state / "checkpoints").glob("detect*/commits")
        for f in d.iterdir()
        if f.name.isdigit()
    )
    return steps, commits


def sample(body: str, prefix: str) -> float | None:
    for line in body.splitlines():
        if line.startswith(prefix):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_run_serves_metrics_reloads_on_sighup_and_stops_on_ctrl_c(kafka, tmp_path) -> None:
    kafka.create_topics("proc.logs", "proc.metrics")
    port = free_port_run(3)
    health_port, ui_port = port + 1, port + 2
    conf = tmp_path / "flinkwatch.yaml"
    doc = {
        "kafka": {
            "bootstrap_servers": kafka.bootstrap,
            "logs_topic": "proc.logs",
            "metrics_topic": "proc.metrics",
            "events_topic": "proc.events",
            "deadletters_topic": "proc.deadletters",
        },
        "spark": {"trigger_interval_s": 0.5, "ui_port": ui_port, "options": RUN_SPARK_OPTIONS},
        "output": {"state_dir": str(tmp_path / "state")},
        "metrics": {"port": port, "health_port": health_port},
        "reload_interval_s": 3600,  # only SIGHUP may trigger the reload in this test
        "detectors": {"checkpoint_failures": {"min_expired": 3}},
    }
    conf.write_text(yaml.safe_dump(doc))
    proc = start_run(conf, tmp_path / "run.log")

    def progress() -> tuple[int, int]:
        assert proc.poll() is None, (tmp_path / "run.log").read_text()[-3000:]
        return run_progress(tmp_path / "run.log", tmp_path / "state")

    try:
        wait_while_progressing(
            lambda: "flinkwatch_config_info" in scrape(port), progress, what="/metrics"
        )
        kafka.produce("proc.logs", expired_cycle(JOB, 1, 3, 1), key=JOB.encode())
        wait_while_progressing(
            lambda: (
                sample(
                    scrape(port),
                    'flinkwatch_alert_transitions_total{detector="checkpoint_failures",status="firing"}',
                )
                == 1.0
            ),
            progress,
            what="the firing transition in /metrics",
        )
        # flinkwatch explain asks the running job: its detect query's state, read while it runs.
        told = python_m(
            "streaming.cli", "explain", "--job", JOB, "--url", f"http://127.0.0.1:{port}"
        )
        assert told.returncode == 0, told.stderr[-2000:]
        lines = {line.split()[0]: line.split()[1] for line in told.stdout.splitlines()[1:]}
        assert lines["checkpoint_failures"] == "FIRING", told.stdout
        assert proc.poll() is None
        # The liveness answer comes from the detect query's own progress reports.
        status, body = healthz(health_port)
        assert status == 200 and body.startswith("ok: last progress"), (status, body)
        # A real Prometheus server scrapes the running job: the alert series and the
        # detector's signal for the job come back from its query API.
        with PrometheusServer(
            need_binary(), tmp_path / "prom", [f"127.0.0.1:{port}"], scrape_interval_s=1.0
        ) as prom:
            (series,) = prom.wait_for(
                'flinkwatch_alerts_active{detector="checkpoint_failures"}', timeout=60
            )
            assert series["metric"]["job_id"] == JOB
            assert series["metric"]["cluster"] == "default"
            (signal_,) = prom.wait_for(f'flinkwatch_checkpoints_expired{{job_id="{JOB}"}}')
            assert signal_["value"][1] == "3"
        doc["detectors"]["checkpoint_failures"]["min_expired"] = 4
        # The Spark UI, on by default: its Structured Streaming tab lists the queries.
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/StreamingQuery/", timeout=60) as r:
            assert r.status == 200 and "flinkwatch-detect" in r.read().decode()
        conf.write_text(yaml.safe_dump(doc))
        proc.send_signal(signal.SIGHUP)
        wait_while_progressing(
            lambda: (
                sample(scrape(port), 'flinkwatch_config_reloads_total{outcome="success"}') == 1.0
            ),
            progress,
            what="the SIGHUP reload",
        )

        def restarted() -> bool:
            _, reloaded, after = (tmp_path / "run.log").read_text().partition("config reload: ")
            return bool(reloaded) and "queries started" in after

        wait_while_progressing(
            restarted, progress, what="the queries restarted with the new config"
        )
        # Ctrl-C in a terminal: SIGINT to the whole foreground process group.
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            kill_all(descendants(proc.pid))
            proc.wait()
    out = (tmp_path / "run.log").read_text()
    assert "SIGHUP: re-reading the config" in out
    # Spark names the driver's host in the address; the port is the configured one.
    (ui_line,) = [line for line in out.splitlines() if "Spark UI at http://" in line]
    assert f":{ui_port} " in ui_line, ui_line
    assert "checkpoint_failures" in out.split("events by kind:")[-1]  # the summary table
    alerts = [json.loads(x) for x in (tmp_path / "state" / "alerts.jsonl").read_text().splitlines()]
    assert [
        (a["detector"], a["status"]) for a in alerts if a["detector"] == "checkpoint_failures"
    ] == [("checkpoint_failures", "firing")]
    # A person reads this log: no generated Java code, no compiler errors, no stack traces
    # in normal operation (the parse projection used to fail Janino's 64 KB limit on every
    # micro-batch and log the whole generated class).
    for noise in ("Failed to compile", "grows beyond 64 KB", "generated.java"):
        assert noise not in out, noise
    # Nor the JVM's startup notices (streaming/log4j2.properties, session.JVM_NOTICE).
    for noise in ("NativeCodeLoader", "log4j2-defaults", "incubator modules", "default log level"):
        assert noise not in out, noise
    assert_stopped_cleanly(out, "SIGINT")


#: What a stop must not print: Python or Java stack traces, Py4J's words for a JVM that went
#: away under the driver, the state store's complaint about a batch cut short, and the
#: transformWithState driver worker's print()s.
STOP_NOISE = (
    "Traceback",
    "Py4J",
    "Answer from Java side is empty",
    "<exception str() failed>",
    "STATE_STORE_OPERATION_OUT_OF_ORDER",
    "Python worker",
    "\tat org.apache.",
    "KeyboardInterrupt",
)


def assert_stopped_cleanly(out: str, why: str) -> None:
    """The log of a run stopped by ``why`` has one stop line and nothing of ``STOP_NOISE``."""
    stops = [x for x in out.splitlines() if "flinkwatch stopped:" in x]
    assert len(stops) == 1, stops
    assert f"flinkwatch stopped: {why}" in stops[0], stops[0]
    for noise in STOP_NOISE:
        assert noise not in out, noise


def start_run(conf: Path, log: Path) -> subprocess.Popen[bytes]:
    """`flinkwatch run` leading a process group of its own, as a shell job or a container."""
    with log.open("w") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "streaming.cli", "run", "--config", str(conf)],
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            start_new_session=True,
        )


def test_sigterm_to_the_process_group_stops_the_run_cleanly_mid_stream(kafka, tmp_path) -> None:
    """`timeout` and supervisors signal the whole group: the JVM and the Python workers too.

    Records keep flowing while the signal arrives, so the detect query is likely in a
    micro-batch. The run must still end with exit code 0, one stop line, no stack
    trace, nothing left running, and the ledger and the alert file agreeing.
    """
    kafka.create_topics("stop.logs", "stop.metrics")
    state = tmp_path / "state"
    conf = tmp_path / "flinkwatch.yaml"
    conf.write_text(
        yaml.safe_dump(
            {
                "kafka": {
                    "bootstrap_servers": kafka.bootstrap,
                    "logs_topic": "stop.logs",
                    "metrics_topic": "stop.metrics",
                    "events_topic": "stop.events",
                    "deadletters_topic": "stop.deadletters",
                },
                "output": {"state_dir": str(state)},
                "metrics": {"enabled": False},
                "detectors": {"checkpoint_failures": {"min_expired": 3}},
            }
        )
    )
    log_path = tmp_path / "run.log"
    proc = start_run(conf, log_path)
    flowing = threading.Event()
    done = threading.Event()

    def flow() -> None:
        # Another job's completed checkpoints: they raise nothing, but every micro-batch
        # has rows to run the detectors over. A steady 20 or so a second through one
        # producer: a producer a record, as fast as it went, took 11 of the test's 81
        # CPU s (measured alone), on a machine the other worker shares.
        from kafka import KafkaProducer

        other = "0f" * 16
        producer = KafkaProducer(bootstrap_servers=kafka.bootstrap, acks="all")
        try:
            n = 0
            while not done.wait(0.05):
                ts = f"2024-06-03 11:{n // 60 % 60:02d}:{n % 60:02d},000"
                msg = (
                    f"Completed checkpoint {n + 1} for job {other} (73400320 bytes, "
                    "checkpointDuration=1376 ms, finalizationTime=4 ms)."
                )
                line = flink_line(ts, "INFO", CC, msg)
                producer.send("stop.logs", value=line.encode(), key=other.encode()).get(30)
                n += 1
                if n >= 10:
                    flowing.set()
        finally:
            producer.close()

    flower = threading.Thread(target=flow)
    try:

        def progress() -> tuple[int, int]:
            assert proc.poll() is None, log_path.read_text()[-3000:]
            return run_progress(log_path, state)

        wait_while_progressing(
            lambda: "queries started" in log_path.read_text(), progress, what="queries started"
        )
        kafka.produce("stop.logs", expired_cycle(JOB, 1, 3, 1), key=JOB.encode())
        alerts_file = state / "alerts.jsonl"
        wait_while_progressing(
            alerts_file.exists, progress, what="the firing transition in the alert file"
        )
        flower.start()
        wait_until(flowing.is_set, 60, "records flowing")
        tree = descendants(proc.pid)
        assert len(tree) > 1, "the JVM runs beside the driver"
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=120) == 0
        wait_until(lambda: not any(alive(p) for p in tree), 60, "the JVM and the workers to end")
    finally:
        done.set()
        if flower.is_alive():
            flower.join()
        if proc.poll() is None:
            kill_all(descendants(proc.pid))
            proc.wait()
    out = log_path.read_text()
    assert_stopped_cleanly(out, "SIGTERM")
    # Every transition the ledger recorded (the firing one from before the stop among
    # them) is in the alert file once, in order, and nothing waits to be delivered.
    ledger = AlertLedger(state / "ledger.sqlite")
    try:
        recorded = [(a.detector, a.alert_id, a.status.value) for a, _ in ledger.history()]
        waiting = ledger.backlog()
    finally:
        ledger.close()
    assert waiting == {}
    assert ("checkpoint_failures", "firing") in [(d, st) for d, _, st in recorded]
    lines = [json.loads(x) for x in alerts_file.read_text().splitlines()]
    assert [(a["detector"], a["alert_id"], a["status"]) for a in lines] == recorded
