"""``flinkwatch parse``: how each record of a file parses, one JSON object a record."""

from __future__ import annotations

import json

import pytest

from streaming.cli import main
from tests.conftest import REPO

SCENARIOS = REPO / "tests" / "data" / "checkpoint_failures"


@pytest.mark.spark
def test_parse_prints_one_object_per_record_with_kind_or_reason(spark, tmp_path, capsys) -> None:
    log = tmp_path / "jm.log"
    log.write_text(
        (SCENARIOS / "single_expiry_1_9.log").read_text().splitlines()[0]
        + "\n"
        + '{"level":"INFO", broken\n'
        + "2024-06-03 10:10:00,003 WARN  org.apache.flink.runtime.checkpoint.CheckpointFailureManager [] - "
        "Failed to trigger or complete checkpoint 1843 for job 3f4c2a9b7d1e4f60a8b5c2d1e0f9a7b3. "
        "(0 consecutive failed attempts so far)\n"
        "org.apache.flink.runtime.checkpoint.CheckpointException: Checkpoint expired before completing.\n"
        "\tat org.apache.flink.runtime.checkpoint.CheckpointCoordinator$CheckpointCanceller.run(CheckpointCoordinator.java:2216)\n"
    )
    assert main(["parse", str(log)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r.get("kind"), r.get("error")) for r in rows] == [
        ("checkpoint_triggered", None),
        (None, "invalid_json"),
        ("checkpoint_failed", None),
    ]
    assert rows[0]["topic"] == "jm.log" and rows[0]["event_time"] == "2019-11-14T16:00:00.007Z"
    assert rows[2]["checkpoint_id"] == 1843
    assert rows[2]["reason"] == "Checkpoint expired before completing."


def test_a_file_record_without_its_own_time_takes_the_one_before_it(
    spark, tmp_path, capsys
) -> None:
    # A shipper without multiline handling wrote the JVM's lines as records of their own,
    # in envelopes that carry no time (kcat dump of the logs topic, one record per line).
    # On Kafka they take the record's timestamp (log_cases.yaml: oom_heap_lone_line); in a
    # file, the time of the record before them, and their kind is read as on Kafka.
    log = tmp_path / "tm.jsonl.log"
    log.write_text(
        '{"log":"2024-02-02 07:31:11,950 INFO  org.apache.flink.runtime.taskexecutor.TaskExecutor'
        ' [] - Un-registering task and sending final execution state FAILED.\\n",'
        '"kubernetes":{"pod_name":"orders-taskmanager-1-2"}}\n'
        '{"log":"java.lang.OutOfMemoryError: Java heap space\\n",'
        '"kubernetes":{"pod_name":"orders-taskmanager-1-2"}}\n'
        '{"log":"org.apache.flink.runtime.taskexecutor.exceptions.RegistrationTimeoutException: '
        "Could not register at the ResourceManager within the specified maximum registration "
        'duration 300000 ms. This indicates a problem with this instance. Terminating now.\\n",'
        '"kubernetes":{"pod_name":"orders-taskmanager-1-2"}}\n'
    )
    assert main(["parse", str(log)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r.get("kind"), r.get("error")) for r in rows] == [
        ("unparsed", None),
        ("jvm_oom", None),
        ("registration_timeout", None),
    ]
    assert {r["event_time"] for r in rows} == {"2024-02-02T07:31:11.950Z"}
    assert rows[1]["reason"] == "Java heap space"
    assert rows[1]["tm_id"] == "orders-taskmanager-1-2"
