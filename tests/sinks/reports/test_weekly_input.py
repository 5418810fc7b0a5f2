"""What ``flinkwatch report`` reads (``sinks/reports/weekly_input.py``): the ledger, the alert file, both."""

from __future__ import annotations

from pathlib import Path

from sinks import AlertLedger
from sinks.reports.weekly import Report, build_report
from sinks.reports.weekly_input import LedgerNoise, ledger_records, merge, read_alert_file
from tests.sinks.reports.scenario import NOW, WEEK


def test_the_alert_file_alone_gives_the_same_incidents_but_no_noise(
    week: Report, recorded: tuple[Path, Path]
) -> None:
    records, bad = read_alert_file(recorded[1])
    assert bad == 0
    alone = build_report(records, since_ms=WEEK, now_ms=NOW, noise=None)
    assert [(i.incident_id, i.detector, i.alerts, i.ttr_s) for i in alone.incidents] == [
        (i.incident_id, i.detector, i.alerts, i.ttr_s) for i in week.incidents
    ]
    assert [(d.detector, d.incidents, d.open, d.alerts, d.ttr) for d in alone.detectors] == [
        (d.detector, d.incidents, d.open, d.alerts, d.ttr) for d in week.detectors
    ]
    assert [(j.job, j.incidents) for j in alone.jobs] == [(j.job, j.incidents) for j in week.jobs]
    assert alone.days == week.days
    # Unknown is not zero.
    assert alone.totals.noise is None and not alone.noise_known
    assert all(d.noise is None and d.false_alarm_rate is None for d in alone.detectors)


def test_ledger_and_file_together_count_each_transition_once(
    week: Report, recorded: tuple[Path, Path]
) -> None:
    ledger = AlertLedger(recorded[0])
    try:
        from_ledger_records = ledger_records(ledger)
        file_records, _ = read_alert_file(recorded[1])
        merged, dropped = merge(from_ledger_records, file_records)
        both = build_report(merged, since_ms=WEEK, now_ms=NOW, noise=LedgerNoise(ledger))
    finally:
        ledger.close()
    assert dropped == len(file_records) == len(from_ledger_records)
    assert both == week


def test_an_unreadable_line_of_the_alert_file_is_skipped_and_counted(
    recorded: tuple[Path, Path], tmp_path: Path
) -> None:
    lines = recorded[1].read_text().splitlines()
    damaged = tmp_path / "alerts.jsonl"
    damaged.write_text(
        "\n".join([lines[0], "not json", '{"alert_id": "x"}', "[1, 2]", *lines[1:], lines[-1][:40]])
        + "\n"
    )
    records, bad = read_alert_file(damaged)
    assert (len(records), bad) == (len(lines), 4)
