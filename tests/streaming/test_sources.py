"""Record sources (``streaming/sources.py``): files staged for Spark, split into records."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pyspark.sql import DataFrame

from conf.kafka_client import kafka_settings
from conf.pipeline import KafkaConfig
from streaming.sources import (
    BUS_LINGER,
    file_records,
    given_name,
    kafka_stream,
    stage_files,
    stage_logs,
    with_defaults,
)

REAL = Path(__file__).resolve().parent.parent / "data" / "real"
#: A TaskManager's own log: it starts, holds one job, releases it; stack traces among its lines.
TM_LOG = REAL / "jm_killed_2_3" / "jm_killed_2_3.taskmanager.log"
METRICS = REAL / "expiry_2_3" / "expiry_2_3.jsonl"
RECORD_START = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}")


def test_staging_links_each_file_numbered_in_order_and_expands_directories(tmp_path: Path) -> None:
    staged = stage_files([TM_LOG, REAL / "expiry_2_3"], tmp_path / "in")
    links = sorted(staged.iterdir())
    assert [p.name for p in links] == [
        "00000-jm_killed_2_3.taskmanager.log",
        "00001-README.md",
        "00002-expected.json",
        "00003-expiry_2_3.jsonl",
        "00004-expiry_2_3.log",
    ]
    assert all(p.is_symlink() for p in links) and links[0].resolve() == TM_LOG
    assert [given_name(str(p)) for p in links[:1]] == ["jm_killed_2_3.taskmanager.log"]
    assert given_name("/x/plain.log") == "plain.log"


def test_a_missing_input_file_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="input file not found: .*nope.log"):
        stage_files([tmp_path / "nope.log"], tmp_path / "in")


@pytest.mark.spark
def test_a_log_splits_at_record_starts_and_each_record_knows_whose_log_it_is(
    spark, tmp_path: Path
) -> None:
    staged = stage_files([TM_LOG], tmp_path / "logs")
    rows = file_records(spark, staged, kind="log", stream=False).orderBy("offset").collect()
    lines = TM_LOG.read_text(encoding="utf-8").splitlines()
    # A record per line that starts with a time: the stack traces stay with their line.
    assert len(rows) == sum(1 for line in lines if RECORD_START.match(line))
    assert all(RECORD_START.match(r.value) for r in rows)
    # Every other line is in the record before it: together they are the file.
    assert "\n".join(r.value for r in rows) == TM_LOG.read_text(encoding="utf-8")
    assert [r.offset for r in rows] == list(range(len(rows)))
    assert {r.topic for r in rows} == {str(staged / f"00000-{TM_LOG.name}")}
    assert {(r.partition, r.kafka_ts) for r in rows} == {(0, None)}
    # Each record falls back to the time of the one before it.
    assert rows[0].fallback_time is None and rows[1].fallback_time == rows[0].value[:23]

    def at(text: str) -> int:
        return next(i for i, r in enumerate(rows) if text in r.value)

    start, added = at("Starting TaskManager with ResourceID"), at("Add job 016ba2f5")
    removed = at("Remove job 016ba2f5")
    assert {r.source_tm for r in rows[:start]} == {None}
    assert {r.source_tm for r in rows[start:]} == {"localhost:44775-057ac7"}
    assert {r.source_job for r in rows[:added]} == {None}
    assert {r.source_job for r in rows[added:removed]} == {"016ba2f5c82eb9472e74954d863dbbbb"}
    assert {r.source_job for r in rows[removed:]} == {None}


@pytest.mark.spark
def test_a_metric_file_is_a_record_per_line(spark, tmp_path: Path) -> None:
    staged = stage_files([METRICS], tmp_path / "metrics")
    df = file_records(spark, staged, kind="metric", stream=False)
    assert "source_tm" not in df.columns
    rows = df.orderBy("offset").collect()
    lines = [line for line in METRICS.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert [r.value for r in rows] == lines
    assert {r.fallback_time for r in rows} == {None}
    # The lines are made records in a compiled projection, not by a lambda over the
    # file's array (Spark interprets those element by element).
    plan = df._jdf.queryExecution().optimizedPlan().toString()
    assert "lambdafunction" not in plan.lower(), plan


@pytest.mark.spark
def test_a_crlf_metric_file_gives_its_lines_without_the_carriage_returns(
    spark, tmp_path: Path
) -> None:
    lines = METRICS.read_text(encoding="utf-8").splitlines()[:3]
    crlf = tmp_path / "crlf.jsonl"
    # A blank CRLF line between records, a record's own "\r" inside it kept, and no end
    # of line after the last one.
    inner = lines[2].replace("{", "{\r", 1)
    crlf.write_bytes(f"{lines[0]}\r\n\r\n{lines[1]}\r\n{inner}".encode())
    staged = stage_files([crlf], tmp_path / "metrics")
    rows = file_records(spark, staged, kind="metric", stream=False).orderBy("offset").collect()
    assert [(r.offset, r.value) for r in rows] == [(0, lines[0]), (2, lines[1]), (3, inner)]
    assert {r.topic for r in rows} == {str(next(staged.iterdir()))}


def test_kafka_captures_are_staged_apart_from_log_files(tmp_path: Path) -> None:
    log = tmp_path / "jm.log"
    capture = tmp_path / "tm.records.jsonl"
    for f in (log, capture):
        f.write_text("x\n")
    logs, captures = stage_logs([log, capture], tmp_path / "work")
    assert [given_name(str(p)) for p in logs.iterdir()] == ["jm.log"]
    assert [given_name(str(p)) for p in captures.iterdir()] == ["tm.records.jsonl"]


def _fetch(df: DataFrame) -> tuple[str | None, str | None]:
    """The Kafka source's ``fetch.min.bytes`` and ``fetch.max.wait.ms`` options."""
    options = df._jdf.queryExecution().analyzed().extraOptions()
    return options.get("kafka.fetch.min.bytes"), options.get("kafka.fetch.max.wait.ms")


@pytest.mark.spark
def test_a_real_time_reader_batches_its_fetches_unless_kafka_options_say_otherwise(spark) -> None:
    cfg = KafkaConfig(bootstrap_servers="127.0.0.1:9")
    assert _fetch(kafka_stream(spark, cfg, "flink.logs", realtime=True)) == ("65536", "100")
    # A micro-batch reads ranges known in advance: a fetch short of 64 KB at a range's
    # end would wait out its 100 ms.
    assert _fetch(kafka_stream(spark, cfg, "flink.logs")) == (None, None)
    mine = KafkaConfig(bootstrap_servers="127.0.0.1:9", options={"fetch.max.wait.ms": "10"})
    assert _fetch(kafka_stream(spark, mine, "flink.logs", realtime=True)) == ("65536", "10")


def test_the_bus_producer_lingers_unless_kafka_options_say_otherwise() -> None:
    settings = kafka_settings(KafkaConfig(bootstrap_servers="b:9092"))
    assert with_defaults(BUS_LINGER, settings.spark(reader=False)) == {
        "kafka.bootstrap.servers": "b:9092",
        "kafka.linger.ms": "20",
    }
    mine = kafka_settings(KafkaConfig(bootstrap_servers="b:9092", options={"linger.ms": "0"}))
    assert with_defaults(BUS_LINGER, mine.spark(reader=False))["kafka.linger.ms"] == "0"
