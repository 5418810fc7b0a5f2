"""The adapter's pure parts: pandas rows in, typed events and alert frames out."""

from __future__ import annotations

import json
import math

import pandas as pd

from detectors import Alert, AlertStatus, Severity
from streaming.processor import ALERT_SCHEMA, EVENT_INPUT_COLUMNS, alerts_frame, rows_to_events


def frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame([{c: r.get(c) for c in EVENT_INPUT_COLUMNS} for r in rows])


def test_events_come_out_in_event_time_then_offset_order_with_nulls_as_none() -> None:
    df = frame(
        [
            {
                "kind": "checkpoint_completed",
                "event_ms": 2000,
                "offset": 5,
                "checkpoint_id": 8.0,
                "value": math.nan,
            },
            {"kind": "checkpoint_expired", "event_ms": 1000, "offset": 9, "checkpoint_id": 7.0},
            {"kind": "checkpoint_expired", "event_ms": 1000, "offset": 3, "checkpoint_id": 6.0},
        ]
    )
    events = rows_to_events(df)
    assert [(e.time_ms, e.checkpoint_id) for e in events] == [(1000, 6), (1000, 7), (2000, 8)]
    assert all(isinstance(e.checkpoint_id, int) for e in events)
    assert events[2].value is None and events[2].job_id is None


def test_alerts_frame_matches_the_output_schema() -> None:
    a = Alert(
        alert_id="x1",
        detector="checkpoint_failures",
        entity="job:7f",
        status=AlertStatus.RESOLVED,
        severity=Severity.CRITICAL,
        event_time_ms=42,
        summary="ok again",
        evidence={"n": 3},
    )
    df = alerts_frame([a])
    assert list(df.columns) == [f.name for f in ALERT_SCHEMA.fields]
    row = df.iloc[0]
    assert (row["status"], row["severity"], row["event_ms"]) == ("resolved", "critical", 42)
    assert json.loads(row["evidence"]) == {"n": 3}
