"""``flinkwatch replay``: a scenario's files give exactly its expected alerts, and the run says what it read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streaming.cli import main

DATA = Path(__file__).resolve().parents[2] / "data"
SCENARIOS = DATA / "checkpoint_failures"  # also replayed by test_scenarios


@pytest.mark.spark
def test_replay_gives_exactly_the_expected_alerts_per_scenario(spark, tmp_path, capsys) -> None:
    expected = json.loads((SCENARIOS / "expected.json").read_text())
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text(
        '{"name": "flink_jobmanager_job_lastCheckpointDuration", "value": 2214, '
        '"timestamp": "2024-06-03T09:50:02.479Z", "labels": {"job_id": "3f4c2a9b7d1e4f60a8b5c2d1e0f9a7b3"}}\n'
        '{"name": "flink_jobmanager_job_lastCheckpointDuration", "value": "slow", "timestamp": 1717408202479}\n'
    )
    out = tmp_path / "alerts.jsonl"
    rc = main(
        [
            "replay",
            "--logs",
            *(str(SCENARIOS / name) for name in expected),
            "--metrics",
            str(metrics),
            "--output",
            str(out),
            "--deadletters",
            str(tmp_path / "dead"),
        ]
    )
    assert rc == 0
    got = [json.loads(line) for line in out.read_text().splitlines()]
    # On the expiry streak late_barrier_acks and checkpoint_creep (overdue checkpoints)
    # rightly fire too; this test pins checkpoint_failures, test_scenarios the others.
    got = [a for a in got if a["detector"] == "checkpoint_failures"]
    want = [a for alerts in expected.values() for a in alerts]
    assert [
        {
            "status": a["status"],
            "job_id": a["job_id"],
            "event_time": a["event_time"],
            "expired_checkpoints": a["evidence"]["expired_checkpoints"],
        }
        for a in got
    ] == want
    for a in got:
        assert a["detector"] == "checkpoint_failures"
        assert a["severity"] == "warning"
        assert len(a["alert_id"]) == 16
    summary = capsys.readouterr().out
    assert "checkpoint_failures" in summary and "dead letters:   bad_type=1" in summary
    letters = [
        json.loads(x)
        for f in (tmp_path / "dead").glob("*.jsonl")
        for x in f.read_text().splitlines()
    ]
    assert [(d["error"], d["offset"]) for d in letters] == [("bad_type", 1)]


@pytest.mark.spark
def test_replay_ends_with_the_records_it_read_and_the_event_time_reached(
    spark, tmp_path, caplog
) -> None:
    import logging

    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text(
        '{"name": "flink_jobmanager_job_lastCheckpointDuration", "value": 2214, '
        '"timestamp": "2024-06-03T09:50:02.479Z", "labels": {"job_id": "3f4c2a9b7d1e4f60a8b5c2d1e0f9a7b3"}}\n'
        '{"name": "flink_jobmanager_job_lastCheckpointDuration", "value": "slow", "timestamp": 1717408202479}\n'
        '{"name": "flink_jobmanager_job_lastCheckpointDuration", "value": 2300, '
        '"timestamp": "2024-06-03T09:40:00.000Z", "labels": {"job_id": "3f4c2a9b7d1e4f60a8b5c2d1e0f9a7b3"}}\n'
    )
    caplog.set_level(logging.INFO, logger="flinkwatch")
    argv = ["replay", "--metrics", str(metrics), "--output", str(tmp_path / "alerts.jsonl")]
    assert main(argv) == 0
    done = [r.getMessage() for r in caplog.records if r.getMessage().startswith("replay: done")]
    assert len(done) == 1
    # Two events and a dead letter; the newest time is the first line's.
    assert "3 records read" in done[0]
    assert "event time 2024-06-03T09:50:02Z," in done[0]
