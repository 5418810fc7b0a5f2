"""``flinkwatch doctor`` on real shipper captures: files, and the same records on a real broker."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from streaming.cli import main

SHIPPERS = Path(__file__).resolve().parents[2] / "data" / "shippers"
OOM = SHIPPERS / "tm_oom_2_3"


def doctor(capsys, *args: str) -> dict:
    capsys.readouterr()
    assert main(["doctor", *args, "-o", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def verdicts(doc: dict) -> dict[str, str]:
    return {d["detector"]: d["verdict"] for d in doc["detectors"]}


@pytest.mark.spark
def test_a_bare_appender_leaves_jvm_fatal_blind_and_the_taskmanagers_own_log_does_not(
    spark, capsys, tmp_path
) -> None:
    bare = doctor(
        capsys,
        "--logs",
        str(OOM / "tm_oom_2_3.kafka_pattern.log"),
        "--metrics",
        str(OOM / "tm_oom_2_3.jsonl"),
    )
    assert {(s["input"], s["shape"]) for s in bare["shapes"]} == {
        ("logs", "log4j_text"),
        ("metrics", "canonical"),
    }
    assert bare["dead_letters"] == []
    got = verdicts(bare)
    assert got["jvm_fatal"] == "blind"
    assert got["checkpoint_creep"] == got["idle_heap_growth"] == got["tm_lost"] == "ready"
    (fatal,) = [d for d in bare["detectors"] if d["detector"] == "jvm_fatal"]
    assert "no TaskManager log line names its TaskManager" in fatal["missing"][0]
    # The same records captured with their keys: the TaskManager's key has its start line.
    keyed = doctor(capsys, "--logs", str(OOM / "tm_oom_2_3.kafka_pattern.records.jsonl"))
    assert keyed["sources"]["logs"] == "1 file(s)"
    assert verdicts(keyed)["jvm_fatal"] == "ready"
    # One key for every process (the JobManager's start and the TaskManager's under it):
    # whose a line is cannot be told, as the runner does not tell it.
    records = (OOM / "tm_oom_2_3.kafka_pattern.records.jsonl").read_text().splitlines()
    one_key = tmp_path / "one_key.records.jsonl"
    one_key.write_text(
        "".join(json.dumps({**json.loads(r), "key": "flink"}) + "\n" for r in records)
    )
    assert verdicts(doctor(capsys, "--logs", str(one_key)))["jvm_fatal"] == "blind"
    # rsyslog keyed by host and file: the TaskManager's key names it and its one job, so
    # its fatal lines are placed and its WARN lines name the job, as the runner forwards them.
    rsk = doctor(capsys, "--logs", str(OOM / "tm_oom_2_3.rsyslog_keyed.records.jsonl"))
    by = {d["detector"]: d for d in rsk["detectors"]}
    assert by["jvm_fatal"]["verdict"] == "ready" and not by["tm_lost"]["notes"]
    assert by["new_error_pattern"]["verdict"] == "ready"
    own = doctor(capsys, "--logs", str(OOM / "tm_oom_2_3.taskmanager.log"))
    assert verdicts(own)["jvm_fatal"] == "ready"
    # Logs only: no heap gauge at all.
    assert verdicts(own)["idle_heap_growth"] == "blind"


@pytest.mark.spark
@pytest.mark.kafka
def test_doctor_samples_the_newest_records_of_the_topics_and_shows_a_dead_letter(
    spark, kafka, tmp_path, capsys
) -> None:
    prefix = f"doctor-{uuid.uuid4().hex[:6]}"
    logs, metrics = f"{prefix}.logs", f"{prefix}.metrics"
    kafka.create_topics(logs, metrics, partitions=1)
    shipped = [
        json.loads(x)["value"]
        for x in (OOM / "tm_oom_2_3.rsyslog_json.records.jsonl").read_text().splitlines()
    ]
    kafka.produce(logs, ["not a Flink line at all", *shipped])
    influx = (
        (SHIPPERS / "telegraf_growth_2_3" / "growth_2_3.telegraf-influx.lp")
        .read_text()
        .splitlines()
    )
    kafka.produce(metrics, influx)
    cfg = tmp_path / "doctor.yaml"
    cfg.write_text(
        f"kafka: {{bootstrap_servers: '{kafka.bootstrap}', logs_topic: {logs}, metrics_topic: {metrics}}}\n"
    )
    # The whole topics: the garbage line first, then the rsyslog records.
    doc = doctor(capsys, "--config", str(cfg), "--sample", "100000")
    shapes = {(s["input"], s["shape"]): s for s in doc["shapes"]}
    assert shapes["logs", "filebeat"]["records"] == len(shipped)
    assert shapes["metrics", "influx_line"]["parsed"] == len(influx)
    (dead,) = doc["dead_letters"]
    assert (dead["reason"], dead["records"]) == ("unknown_layout", 1)
    assert (dead["example"]["source"], dead["example"]["offset"]) == (logs, 0)
    assert dead["example"]["raw"] == "not a Flink line at all"
    assert (
        f"{logs}: the newest {len(shipped) + 1:,} records of 1 partition(s)"
        == doc["sources"]["logs"]
    )
    # A sample of the newest 10 records per partition reads exactly those.
    doc = doctor(capsys, "--config", str(cfg), "--sample", "10")
    assert sum(s["records"] for s in doc["shapes"] if s["input"] == "logs") == 10
    assert doc["dead_letters"] == []
