"""The real-time parse through the real broker: its dead letters, a backlog, idle topics."""

from __future__ import annotations

import datetime as dt
import json
import logging

import pytest

from streaming.bus_paths import KafkaPath
from tests.conftest import wait_until
from tests.integration.kafka_path import (
    JOB_A,
    TASK,
    TM,
    TM_RUNNER,
    config,
    expired_cycle,
    flink_line,
    pipeline,
    read_alerts,
    running,
)

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def test_real_time_parse_feeds_the_detectors_and_keeps_dead_letters(spark, kafka, tmp_path) -> None:
    """The live layout as `flinkwatch run` starts it: the parse query in real-time mode."""
    cfg = config(kafka, "e2ert", tmp_path / "state")
    cfg = cfg.model_copy(update={"spark": cfg.spark.model_copy(update={"parse_mode": "realtime"})})
    kafka.create_topics(cfg.kafka.logs_topic, cfg.kafka.metrics_topic)
    p = pipeline(spark, cfg, {})
    p.trigger = None
    assert p.path.realtime_wanted(p)
    with running(p) as result:
        wait_until(lambda: len(spark.streams.active) == 3, what="three queries")
        assert "parse-realtime" in {
            d.name for d in cfg.output.checkpoint_dir.iterdir() if d.is_dir()
        }
        kafka.produce(cfg.kafka.logs_topic, expired_cycle(JOB_A, 1, 3, 1), key=JOB_A.encode())
        kafka.produce(cfg.kafka.logs_topic, ["not a Flink line"], key=b"jm-2")
        wait_until(
            lambda: read_alerts(cfg.output.alerts_path, "checkpoint_failures"),
            timeout=120,
            what="the alert through the real-time parse query",
        )
        # A bare KafkaAppender keyed by the TaskManager's log file: its fatal line names no
        # one, its start line says whose it is (streaming.forwards). Stamped now, after the
        # 2024 lines were read, so its deadline (jvm_fatal waits 10 s for a cause) is
        # passed by the ticks, and the 2024 lines are not made late by it.
        now = dt.datetime.now(dt.UTC)
        at = [(now - dt.timedelta(seconds=s)).strftime("%Y-%m-%d %H:%M:%S,000") for s in (5, 4)]
        tm_lines = [
            flink_line(at[0], "INFO", TM_RUNNER, f"Starting TaskManager with ResourceID: {TM}"),
            flink_line(at[1], "ERROR", TASK, "Encountered fatal error java.lang.OutOfMemoryError - terminating the JVM"),
        ]  # fmt: skip
        kafka.produce(
            cfg.kafka.logs_topic, tm_lines, key=b"/opt/flink/log/flink--taskexecutor-0.log"
        )
        wait_until(lambda: p.stats.forwarded >= 1, timeout=90, what="the fatal line forwarded")
        wait_until(
            lambda: read_alerts(cfg.output.alerts_path, "jvm_fatal"),
            timeout=120,
            what="the keyed TaskManager's fatal line forwarded to it",
        )
        wait_until(
            lambda: list(cfg.output.deadletter_path.glob("*.jsonl")),
            timeout=60,
            what="the dead letter file",
        )
        # Counts arrive with the parse query's progress, at the end of its batch.
        wait_until(lambda: p.stats.dead_letters == {"unknown_layout": 1}, what="the counts")
        assert p.stats.kinds["checkpoint_expired"] == 3
    assert result.get("rc") == 0
    alerts = read_alerts(cfg.output.alerts_path, "checkpoint_failures")
    # The TaskManager's lines, stamped now, move the watermark past the job's quiet.
    assert [a["status"] for a in alerts] in (["firing"], ["firing", "resolved"])
    alert = alerts[0]
    assert alert["job_id"] == JOB_A and alert["evidence"]["expired_checkpoints"] == [1, 2, 3]
    fatal = read_alerts(cfg.output.alerts_path, "jvm_fatal")[0]
    assert (fatal["tm_id"], fatal["status"]) == (TM, "firing")
    assert p.stats.forwarded >= 1
    (letter,) = [
        json.loads(x)
        for f in cfg.output.deadletter_path.glob("*.jsonl")
        for x in f.read_text().splitlines()
    ]
    assert (letter["raw"], letter["error"], letter["topic"]) == (
        "not a Flink line",
        "unknown_layout",
        cfg.kafka.logs_topic,
    )


def test_a_backlog_is_caught_up_in_micro_batches_then_parsed_in_real_time(
    spark, kafka, tmp_path
) -> None:
    cfg = config(kafka, "e2ecu", tmp_path / "state")
    cfg = cfg.model_copy(
        update={
            "spark": cfg.spark.model_copy(update={"parse_mode": "realtime", "realtime_max_lag": 5})
        }
    )
    kafka.create_topics(cfg.kafka.logs_topic, cfg.kafka.metrics_topic)
    jobs = [f"{i:032x}" for i in range(20, 24)]
    # A backlog: three jobs' expiries (9 records, more than realtime_max_lag).
    for job in jobs[:3]:
        kafka.produce(cfg.kafka.logs_topic, expired_cycle(job, 1, 3, 1), key=job.encode())
    p = pipeline(spark, cfg, {})
    p.trigger = None
    ckpt = cfg.output.checkpoint_dir
    with running(p) as result:
        wait_until(lambda: (ckpt / "parse-microbatch" / "commits").is_dir(), what="catch-up")
        wait_until(
            lambda: len(read_alerts(cfg.output.alerts_path, "checkpoint_failures")) == 3,
            timeout=120,
            what="the backlog's alerts",
        )
        # Caught up: the queries restart with the parse query in real-time mode, where the
        # micro-batches ended.
        wait_until(
            lambda: p.path.parse_plan is not None and p.path.parse_plan.mode == "realtime",
            timeout=120,
            what="the switch to real time",
        )
        # Later in event time than the backlog, which moved the watermark to 10:02.
        job = jobs[3]
        kafka.produce(cfg.kafka.logs_topic, expired_cycle(job, 1, 3, 10), key=job.encode())
        wait_until(
            lambda: len(read_alerts(cfg.output.alerts_path, "checkpoint_failures")) == 4,
            timeout=120,
            what="an alert parsed in real time",
        )
        # Counts come with each real-time batch's progress, every realtime_batch_s.
        wait_until(lambda: p.stats.kinds["checkpoint_expired"] >= 12, what="the counts")
    assert result.get("rc") == 0
    assert (ckpt / "parse-realtime" / "commits").is_dir()
    alerts = read_alerts(cfg.output.alerts_path, "checkpoint_failures")
    # Each job once, with exactly its three expiries: nothing skipped or counted twice
    # across the switch.
    assert sorted(a["job_id"] for a in alerts) == sorted(jobs)
    assert all(a["evidence"]["expired_checkpoints"] == [1, 2, 3] for a in alerts)
    assert p.stats.kinds["checkpoint_expired"] == 12


def test_idle_raw_topics_are_parsed_in_micro_batches_and_a_record_brings_real_time_back(
    spark, kafka, tmp_path, caplog
) -> None:
    """Issue #34: an idle real-time parse query costs ~0.15 cores; micro-batches finding
    nothing run no batch at all. The switch starts the other mode at the last committed
    offsets: the record that ends the quiet is parsed and pages, once.
    """
    cfg = config(kafka, "e2eidlep", tmp_path / "state")
    sp = cfg.spark.model_copy(update={"parse_mode": "realtime", "idle_after_s": 1})
    cfg = cfg.model_copy(update={"spark": sp})
    kafka.create_topics(cfg.kafka.logs_topic, cfg.kafka.metrics_topic)
    p = pipeline(spark, cfg, {})
    p.trigger = None
    path = p.path
    assert isinstance(path, KafkaPath)
    ckpt = cfg.output.checkpoint_dir

    def said(line: str) -> bool:
        return any(r.getMessage() == line for r in caplog.records)

    def batches(mode: str) -> int:
        commits = ckpt / f"parse-{mode}" / "commits"
        return sum(1 for f in commits.iterdir() if f.name.isdigit()) if commits.is_dir() else 0

    with caplog.at_level(logging.INFO, logger="streaming.bus_paths"), running(p) as result:
        wait_until(lambda: len(spark.streams.active) == 3, what="three queries")
        assert path.parse_plan is not None and path.parse_plan.mode == "realtime"
        # Its first real-time batch reads nothing: past idle_after_s, micro-batches.
        wait_until(
            lambda: path.parse_plan is not None and path.parse_plan.idle,
            timeout=180,
            what="the idle switch",
        )
        assert said("parse: no records for 1 s, idling in 0.5 s micro-batches")
        wait_until(lambda: batches("microbatch") >= 1, what="the first micro-batch")
        # Idle, the micro-batch query runs no batch while the driver looks 20 times.
        ticker = path.ticker
        assert ticker is not None
        done, looks = batches("microbatch"), ticker.looks
        wait_until(lambda: ticker.looks >= looks + 20, what="20 looks")
        assert batches("microbatch") == done
        kafka.produce(cfg.kafka.logs_topic, expired_cycle(JOB_A, 1, 3, 1), key=JOB_A.encode())
        wait_until(
            lambda: said("parse: records again, back to real-time mode"),
            timeout=120,
            what="the switch back to real time",
        )
        assert batches("microbatch") > done  # read by a micro-batch, then real time
        wait_until(
            lambda: read_alerts(cfg.output.alerts_path, "checkpoint_failures"),
            timeout=120,
            what="the alert for the record that ended the quiet",
        )
    assert result.get("rc") == 0
    (alert,) = read_alerts(cfg.output.alerts_path, "checkpoint_failures")
    assert alert["job_id"] == JOB_A and alert["evidence"]["expired_checkpoints"] == [1, 2, 3]
