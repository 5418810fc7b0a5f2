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


REAL = DATA / "real"
# expiry_2_3: one job whose checkpoints slow down, grow, expire and get late acks; by
# default four pages (expected.json). The baseline turns the growth detector off; the new
# config pages on two expired checkpoints instead of three, asks checkpoint_creep for
# 70 % of the timeout instead of half and late_barrier_acks for 50 late checkpoints.
BASELINE_YAML = "detectors:\n  checkpoint_state_growth: {enabled: false}\n"
NEW_YAML = (
    "detectors:\n"
    "  checkpoint_creep: {max_timeout_share: 0.7}\n"
    "  checkpoint_failures: {min_expired: 2}\n"
    "  late_barrier_acks: {min_checkpoints: 50}\n"
)


@pytest.mark.spark
def test_a_threshold_change_on_a_real_run_is_compared_page_by_page(spark, tmp_path, capsys) -> None:
    run = REAL / "expiry_2_3"
    expected = {
        a["detector"]: a["event_time"]
        for a in json.loads((run / "expected.json").read_text())["alerts"]
    }
    (tmp_path / "old.yaml").write_text(BASELINE_YAML)
    (tmp_path / "new.yaml").write_text(NEW_YAML)
    out, report = tmp_path / "alerts.jsonl", tmp_path / "report"
    args = [
        "replay",
        "--config",
        str(tmp_path / "new.yaml"),
        "--baseline",
        str(tmp_path / "old.yaml"),
    ]
    args += ["--output", str(out), "-o", "json", "--report", str(report)]
    args += ["--logs", *map(str, sorted(run.glob("*.log")))]
    args += ["--metrics", *map(str, sorted(run.glob("*.jsonl")))]
    assert main(args) == 0
    got = json.loads(capsys.readouterr().out)
    # Both configs detected over one parse; each run's alerts in its own file.
    assert got["one_parse"] is True
    assert got["baseline"]["alerts"] == str(tmp_path / "alerts.baseline.jsonl")
    assert got["pages"] == {"baseline": 3, "new": 3}
    assert got["totals"] == {"gained": 1, "lost": 1, "earlier": 1, "later": 1, "unchanged": 0}
    moves = {
        d["detector"]: (
            d["change"],
            d["baseline"] and d["baseline"]["paged"],
            d["new"] and d["new"]["paged"],
            d["delta_ms"],
        )
        for d in got["differences"]
    }
    assert moves == {
        # The baseline pages when the defaults do (expected.json), but for the growth it lacks.
        "checkpoint_creep": (
            "later",
            expected["checkpoint_creep"],
            "2026-11-22T17:37:31.555Z",
            4014,
        ),
        "checkpoint_failures": (
            "earlier",
            expected["checkpoint_failures"],
            "2026-11-22T17:37:35.679Z",
            -74007,
        ),
        "checkpoint_state_growth": ("gained", None, expected["checkpoint_state_growth"], None),
        "late_barrier_acks": ("lost", expected["late_barrier_acks"], None, None),
    }
    base_alerts = [
        json.loads(x) for x in (tmp_path / "alerts.baseline.jsonl").read_text().splitlines()
    ]
    assert sorted(a["detector"] for a in base_alerts) == [
        "checkpoint_creep",
        "checkpoint_failures",
        "late_barrier_acks",
    ]
    # The report opens with the comparison: its chart and a row per page.
    page = (report / "index.html").read_text(encoding="utf-8")
    first = page.split("<section")[1]
    assert first.startswith(' id="comparison"') and 'src="comparison.png"' in first
    assert "<td>1 min 14 s earlier</td>" in first and "<td>4.0 s later</td>" in first
    assert (report / "comparison.png").read_bytes()[:4] == b"\x89PNG"


def test_o_without_a_baseline_is_refused(tmp_path, caplog) -> None:
    args = [
        "replay",
        "--metrics",
        str(tmp_path),
        "--output",
        str(tmp_path / "a.jsonl"),
        "-o",
        "json",
    ]
    assert main(args) == 2
    assert "-o is the comparison's form: it needs --baseline" in caplog.text


@pytest.mark.spark
def test_configs_that_parse_differently_are_replayed_twice_each_with_its_dead_letters(
    spark, tmp_path, capsys
) -> None:
    # The baseline refuses every record as too large: it pages nothing, and its dead
    # letters are its own, not written to the new run's --deadletters.
    expected = json.loads((SCENARIOS / "expected.json").read_text())
    (tmp_path / "old.yaml").write_text("parsing:\n  max_record_bytes: 1\n")
    out, dead = tmp_path / "alerts.jsonl", tmp_path / "dead"
    args = ["replay", "--baseline", str(tmp_path / "old.yaml"), "--output", str(out)]
    args += ["--deadletters", str(dead), "-o", "json"]
    args += ["--logs", *(str(SCENARIOS / name) for name in expected)]
    assert main(args) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["one_parse"] is False and got["new"]["config"] == "the packaged config"
    pages = len({a["alert_id"] for a in map(json.loads, out.read_text().splitlines())})
    assert pages > 0
    assert got["pages"] == {"baseline": 0, "new": pages}
    assert got["totals"]["gained"] == pages and sum(got["totals"].values()) == pages
    assert not list(dead.glob("*.jsonl"))
