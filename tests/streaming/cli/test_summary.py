"""What ``run`` and ``replay`` print when they end (``streaming/cli/summary.py``)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from streaming.cli.summary import print_incidents, print_summary


def test_the_summary_counts_kinds_and_dead_letters_and_tables_alerts_per_entity(
    capsys: pytest.CaptureFixture[str],
) -> None:
    alerts = Counter(
        {
            ("checkpoint_failures", "job:7f", "firing"): 2,
            ("checkpoint_failures", "job:7f", "resolved"): 1,
            ("tm_lost", "tm:orders-taskmanager-1-2", "firing"): 1,
        }
    )
    kinds = Counter({"checkpoint_failed": 3, "checkpoint_completed": 5})
    print_summary(alerts, kinds, Counter({"bad_type": 1}))
    assert capsys.readouterr().out.splitlines() == [
        "events by kind: checkpoint_completed=5, checkpoint_failed=3",
        "dead letters:   bad_type=1",
        "detector             entity                     firing  resolved",
        "checkpoint_failures  job:7f                          2         1",
        "tm_lost              tm:orders-taskmanager-1-2       1         0",
    ]


def test_a_run_with_nothing_in_it_says_none_for_each(capsys: pytest.CaptureFixture[str]) -> None:
    print_summary(Counter(), Counter(), Counter())
    assert capsys.readouterr().out.splitlines() == [
        "events by kind: none",
        "dead letters:   none",
        "alerts: none",
    ]


def test_an_incident_lists_its_members_from_the_one_that_opened_it_and_its_latest_cause(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = [
        # The alert that opened the incident fired alone: it carries no incident id.
        {"alert_id": "a1", "detector": "checkpoint_failures"},
        {"alert_id": "a2", "detector": "late_barrier_acks", "incident_id": "a1", "root_cause": "x"},
        {"alert_id": "a3", "detector": "checkpoint_creep", "incident_id": "a1", "root_cause": "y"},
        {"alert_id": "a4", "detector": "late_barrier_acks", "incident_id": "a1", "root_cause": "z"},
        {"alert_id": "b1", "detector": "tm_lost"},
    ]
    alerts = tmp_path / "alerts.jsonl"
    alerts.write_text("".join(json.dumps(r) + "\n" for r in records))
    print_incidents(alerts)
    assert capsys.readouterr().out.splitlines() == [
        "incident a1 (checkpoint_failures -> late_barrier_acks -> checkpoint_creep): z"
    ]


def test_a_taskmanager_is_one_row_named_as_its_alerts_spelled_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # tm_lost fired on the metrics' spelling, jvm_fatal and the resolve after the logs
    # named the TaskManager: one row per detector, the logged id shown, not the key.
    from detectors import Alert, AlertStatus, Severity
    from streaming.delivery import PipelineStats

    def about(detector: str, status: AlertStatus, tm_id: str | None) -> Alert:
        return Alert(
            alert_id=detector,
            detector=detector,
            entity="tm:localhost_38251_0bfbad" if tm_id else "tm:10_0_0_9_6121",
            status=status,
            severity=Severity.CRITICAL,
            event_time_ms=0,
            summary="s",
            tm_id=tm_id,
        )

    stats = PipelineStats()
    for a in [
        about("tm_lost", AlertStatus.FIRING, "localhost:38251_0bfbad"),
        about("jvm_fatal", AlertStatus.FIRING, "localhost:38251-0bfbad"),
        about("tm_lost", AlertStatus.RESOLVED, "localhost:38251-0bfbad"),
        # A reporter's spelling after the logged one does not replace it.
        about("jvm_fatal", AlertStatus.RESOLVED, "localhost_38251_0bfbad"),
        about("tm_lost", AlertStatus.FIRING, None),  # no spelling known: the key
    ]:
        stats.count_alert(a)
    print_summary(stats.alerts, Counter(), Counter(), stats.names)
    assert capsys.readouterr().out.splitlines()[2:] == [
        "detector   entity                     firing  resolved",
        "jvm_fatal  tm:localhost:38251-0bfbad       1         1",
        "tm_lost    tm:10_0_0_9_6121                1         0",
        "tm_lost    tm:localhost:38251-0bfbad       1         1",
    ]
