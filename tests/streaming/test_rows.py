"""The detect query's rows: each kind reads back into its own type, in one schema."""

from __future__ import annotations

import pytest

from detectors import Alert, AlertStatus, Severity
from streaming.notes import failure as failure_of
from streaming.rows import (
    DETECT_COLUMNS,
    About,
    DetectorFailure,
    EntityCount,
    Forward,
    Refused,
    RowKind,
    Signal,
    SignalGone,
    alert_rows,
    note_row,
    read,
)
from streaming.schemas import ALERT_COLUMNS

ABOUT = About("checkpoint_creep", "job:7f", 1_700_000_000_000, "7f", "orders", None, "host-1")
NOTES = [
    Signal(ABOUT, {"timeout_share": 0.4}),
    SignalGone(About("checkpoint_creep", "job:7f")),
    DetectorFailure(ABOUT, "KeyError: 'ts' at checkpoint_creep.py:88", "on_timer", 3, dropped=True),
    Refused(About("job_lost", "job:80")),
    EntityCount("7", 1234),
    Forward("tm:localhost_1_a", '{"kind":"fatal_error","event_ms":5,"src":"fwd:l:0"}', 5),
]
#: The columns only an alert fills.
ALERT_ONLY = ("alert_id", "status", "severity", "summary", "evidence")


@pytest.mark.parametrize("note", NOTES, ids=lambda n: n.kind.value)
def test_a_note_reads_back_as_itself_and_leaves_the_alert_columns_empty(note) -> None:
    row = note_row(note)
    assert list(row) == list(DETECT_COLUMNS)
    assert row["kind"] == note.kind.value
    assert all(row[c] is None for c in ALERT_ONLY)
    assert read(row) == note


def test_an_alert_reads_back_as_itself_and_carries_no_note_data() -> None:
    alert = Alert(
        alert_id="a1",
        detector="checkpoint_creep",
        entity="job:7f",
        status=AlertStatus.ESCALATED,
        severity=Severity.CRITICAL,
        event_time_ms=42,
        job_id="7f",
        summary="pending past 90 % of the timeout",
        evidence={"durations_ms": [1, 2, 3]},
    )
    (row,) = alert_rows([alert])
    assert list(row) == list(DETECT_COLUMNS)
    assert DETECT_COLUMNS == ("kind", *ALERT_COLUMNS, "data")
    assert (row["kind"], row["data"]) == ("alert", None)
    assert read(row) == alert


def test_a_failure_row_says_where_it_raised_and_what() -> None:
    try:
        {}["ts"]  # noqa: B018 - the error under test
    except KeyError as exc:
        row = note_row(failure_of("checkpoint_creep", "job:7f", None, exc, "on_event", 2))
    failure = read(row)
    assert isinstance(failure, DetectorFailure)
    assert failure.error.startswith("KeyError: 'ts' at test_rows.py:")
    assert (failure.where, failure.failures, failure.dropped) == ("on_event", 2, False)


def test_a_row_of_an_unknown_kind_is_refused_not_taken_for_an_alert() -> None:
    row = {**note_row(NOTES[0]), "kind": "gauge"}
    with pytest.raises(ValueError, match="gauge"):
        read(row)
    assert {k.value for k in RowKind} == {"alert", *(n.kind.value for n in NOTES)}
