"""``flinkwatch report``'s numbers and page, from a real ledger and alert file (ten days)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sinks.files import iso_utc
from sinks.reports.weekly import (
    Report,
    TimeToResolve,
    nearest_rank,
    parse_since,
    summary_lines,
)
from sinks.reports.weekly_html import render_html
from tests.sinks.reports.scenario import (
    DAY,
    HOSTILE_SUMMARY,
    JOB_A,
    JOB_B,
    JOB_C,
    JOB_D,
    JOB_E,
    MINUTE,
    NOISE_PRESSES,
    NOW,
    T0,
    TTR_S,
    from_ledger,
)


def ttr(seconds: list[int]) -> TimeToResolve:
    """What the scenario's times to resolve give, by the nearest-rank rule spelled out."""
    s = sorted(seconds)
    at = lambda pct: s[-(-len(s) * pct // 100) - 1]  # noqa: E731 - ceil(n * pct / 100)th value
    return TimeToResolve(resolved=len(s), p50_s=at(50), p90_s=at(90), max_s=s[-1])


def test_incidents_are_counted_by_root_detector_with_their_time_to_resolve(week: Report) -> None:
    by = {d.detector: d for d in week.detectors}
    assert {d: s.incidents for d, s in by.items()} == {
        "checkpoint_failures": 3,
        "idle_heap_growth": 1,
        "restart_storm": 1,
        "checkpoint_creep": 1,
        "late_barrier_acks": 1,
    }
    # The leak, the TaskManager it killed and the restarts it caused are one incident,
    # the leak's: tm_lost is the root of none, and the storm counts as an alert of it.
    (heap,) = [i for i in week.incidents if i.detector == "idle_heap_growth"]
    assert heap.detectors == ("idle_heap_growth", "tm_lost", "restart_storm")
    assert heap.alerts == 3 and heap.severity == "critical"
    assert [j.job_name for j in heap.jobs] == [JOB_B[1]]
    assert "tm_lost" not in by and by["restart_storm"].alerts == 2
    for detector, seconds in TTR_S.items():
        assert by[detector].ttr == ttr(seconds), detector
    # Still open: counted as open, kept out of the percentiles.
    assert by["late_barrier_acks"].open == 1 and by["late_barrier_acks"].ttr is None
    t = week.totals
    assert (t.incidents, t.resolved, t.open) == (7, 6, 1)
    assert t.ttr == ttr([s for seconds in TTR_S.values() for s in seconds])
    assert [d.detector for d in week.detectors][0] == "checkpoint_failures"


def test_percentiles_are_nearest_rank_observed_values() -> None:
    values = [float(v) for v in range(10, 0, -1)]
    assert (nearest_rank(values, 50), nearest_rank(values, 90)) == (5.0, 9.0)
    assert nearest_rank([7.0], 50) == nearest_rank([7.0], 90) == 7.0
    assert nearest_rank([1.0, 100.0], 50) == 1.0
    with pytest.raises(ValueError, match="no values"):
        nearest_rank([], 50)


def test_a_page_resolved_as_noise_in_slack_counts_against_its_root_detector(
    week: Report,
) -> None:
    noisy = {i.incident_id: i for i in week.incidents if i.noise is not None}
    assert set(noisy) == {iid for iid, _ in NOISE_PRESSES}
    for iid, at in NOISE_PRESSES:
        assert noisy[iid].noise is not None
        assert (noisy[iid].noise.by, noisy[iid].noise.at) == ("U0NOISE1", iso_utc(at))
    by = {d.detector: d for d in week.detectors}
    assert (by["checkpoint_failures"].noise, by["checkpoint_failures"].false_alarm_rate) == (
        1,
        round(1 / 3, 4),
    )
    assert (by["restart_storm"].noise, by["restart_storm"].false_alarm_rate) == (1, 1.0)
    assert (by["idle_heap_growth"].noise, by["idle_heap_growth"].false_alarm_rate) == (0, 0.0)
    assert week.totals.noise == 3 and week.totals.false_alarm_rate == round(3 / 7, 4)


def test_the_noisiest_jobs_have_most_incidents_then_most_noise(week: Report) -> None:
    assert [(j.job.job_id, j.job.job_name, j.incidents, j.noise) for j in week.noisiest] == [
        (*JOB_A, 3, 2),
        (*JOB_C, 2, 0),
        (*JOB_E, 1, 1),  # as many incidents as payments, one of them noise
        (*JOB_B, 1, 0),
    ]
    a = week.jobs[0]
    assert a.detectors == {"checkpoint_failures": 2, "restart_storm": 1}
    assert week.jobs[1].open == 1
    assert week.totals.jobs == 4


def test_the_window_holds_the_incidents_that_opened_in_it(
    week: Report, recorded: tuple[Path, Path]
) -> None:
    ids = {i.incident_id for i in week.incidents}
    # old-cf is day 1; creep-d opened on day 2, and storm-d joining it on day 4 does not
    # make it the window's.
    assert "old-cf" not in ids and "creep-d" not in ids and "storm-d" not in ids
    assert JOB_D[0] not in {j.job.job_id for j in week.jobs}
    assert [d.date for d in week.days][0] == "2026-11-13" and len(week.days) == 8
    assert [d.incidents for d in week.days] == [0, 1, 1, 1, 1, 1, 2, 0]
    assert week.days[6].detectors == {"checkpoint_creep": 1, "late_barrier_acks": 1}

    ten = from_ledger(recorded[0], since_ms=parse_since("10d", NOW))
    assert ten.totals.incidents == week.totals.incidents + 2
    creep_d = next(i for i in ten.incidents if i.incident_id == "creep-d")
    assert creep_d.detectors == ("checkpoint_creep", "restart_storm") and creep_d.ttr_s is None
    assert len(ten.days) == 11


def test_hostile_text_is_escaped_on_the_page_and_cleaned_in_the_summary(week: Report) -> None:
    page = render_html(week)
    assert "<script>" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(&quot;pwn&quot;)&lt;/script&gt;" in page
    assert (
        "3 checkpoints expired &lt;img src=x onerror=alert(1)&gt; &amp; &quot;quoted&quot;" in page
    )
    assert HOSTILE_SUMMARY in {i.summary for i in week.incidents}  # the data keeps it as it was
    assert "\x1b" not in page
    text = "\n".join(summary_lines(week))
    assert "\x1b" not in text and '<script>alert("pwn")' in text


def test_the_json_round_trips_and_names_its_schema(week: Report) -> None:
    text = week.to_json()
    assert Report.from_json(text) == week
    doc = json.loads(text)
    assert doc["schema"] == 1
    assert list(doc) == [
        "schema",
        "window",
        "sources",
        "totals",
        "detectors",
        "days",
        "jobs",
        "incidents",
    ]
    assert doc["window"] == {
        "since": "2026-11-13T00:00:00.000Z",
        "until": "2026-11-20T00:00:00.000Z",
    }
    cf5 = next(i for i in doc["incidents"] if i["incident_id"] == "cf-5")
    assert cf5["ttr_s"] == 600.0 and cf5["noise"]["by"] == "U0NOISE1"
    assert cf5["jobs"] == [{"job_id": JOB_A[0], "job_name": JOB_A[1]}]


def test_an_empty_window_is_a_valid_empty_report(recorded: tuple[Path, Path]) -> None:
    empty = from_ledger(recorded[0], since_ms=NOW - 30 * MINUTE)
    assert empty.totals.incidents == 0 and empty.incidents == () and empty.jobs == ()
    assert empty.totals.ttr is None and empty.totals.false_alarm_rate is None
    assert [(d.date, d.incidents) for d in empty.days] == [("2026-11-19", 0), ("2026-11-20", 0)]
    assert Report.from_json(empty.to_json()) == empty
    assert "No incident opened in this window." in render_html(empty)
    assert summary_lines(empty)[-1] == "no incident opened in this window"


def test_since_is_a_span_back_from_now_or_an_iso_date() -> None:
    assert parse_since("7d", NOW) == NOW - 7 * DAY
    assert parse_since("24h", NOW) == NOW - DAY
    assert parse_since("90m", NOW) == NOW - 90 * MINUTE
    assert parse_since("1h30m", NOW) == NOW - 90 * MINUTE
    assert parse_since("2026-11-13", NOW) == T0 + 3 * DAY
    assert parse_since("2026-11-13T06:00:00Z", NOW) == T0 + 3 * DAY + 6 * 60 * MINUTE
    assert parse_since("2026-11-13T07:00:00+01:00", NOW) == T0 + 3 * DAY + 6 * 60 * MINUTE
    assert parse_since("2026-11-13T06:00:00", NOW) == T0 + 3 * DAY + 6 * 60 * MINUTE  # UTC
    for bad in ("yesterday", "7", "-1d", "2026-13-40"):
        with pytest.raises(ValueError, match=re.escape(repr(bad))):
            parse_since(bad, NOW)
    with pytest.raises(ValueError, match="after now"):
        parse_since("2026-12-01", NOW)
