"""Rules on real Flink 2.3 runs (``tests/data/real/``), their logs parsed as a replay parses them."""

from __future__ import annotations

import functools

import pytest

from tests.detectors.rules.helpers import driven
from tests.detectors.rules.real import parsed_events

pytestmark = pytest.mark.spark


@functools.cache
def _events(spark, run):
    return tuple(parsed_events(spark, run))


def events(spark, run, *kinds):
    return [e for e in _events(spark, run) if e.kind in kinds]


def test_a_cancelled_job_is_no_flatline_but_its_checkpoints_stopping_without_the_end_is(
    spark,
) -> None:
    # job_cancelled_2_3: checkpoints complete every 5 s until the job is CANCELED.
    run = "job_cancelled_2_3"
    mine = events(spark, run, "checkpoint_completed", "job_state")
    flat = {"kind": "flatline", "kinds": ["checkpoint_completed"], "for_s": 30}
    t = driven(**flat)
    t.feed(*mine)
    t.advance_to(mine[-1].time_ms + 3600_000)
    assert t.alerts == [] and t.state is None
    # The same run without its JobManager's state lines: the end looks like a stop.
    completed = [e for e in mine if e.kind == "checkpoint_completed"]
    t = driven(**flat)
    t.feed(*completed)
    t.advance_to(completed[-1].time_ms + 3600_000)
    fired = t.alerts[0]
    assert fired.event_time_ms == completed[-1].time_ms + 30_000
    # (no state line, no name: the runner gives the alert the name the bus knows)
    assert fired.summary == "job 07071d29a089d3f938ee50ce3a0c76b9: no checkpoint_completed for 30 s"


def test_expiring_checkpoints_page_as_a_frequency_and_as_a_flatline(spark) -> None:
    # expiry_2_3: checkpoints 68-75 fail one after the other (the 10 s timeout), and no
    # checkpoint completes for 20 s at 131 s.
    run = "expiry_2_3"
    failed = events(spark, run, "checkpoint_failed")
    t = driven(
        kind="frequency",
        kinds=["checkpoint_failed"],
        pattern="Failed to trigger or complete checkpoint",
        count=5,
        window_s=30,
    )
    t.feed(*failed)
    t.advance_to(failed[-1].time_ms + 3600_000)
    fired, resolved = t.alerts
    # checkpoints 67-71 failed within 30 s (68-75 one after the other)
    assert "checkpoint 71 " in fired.evidence["example"]
    assert fired.summary.endswith(
        ": 5 checkpoint_failed matching /Failed to trigger or complete checkpoint/ in 30 s"
    )
    assert resolved.status.value == "resolved"

    mine = events(spark, run, "checkpoint_completed", "job_state")
    t = driven(kind="flatline", kinds=["checkpoint_completed"], for_s=15, clear_for_s=0)
    t.feed(*mine)
    fired, resolved = t.alerts
    assert resolved.summary.endswith("checkpoint_completed back after 20 s")
    assert 15 <= (resolved.event_time_ms - fired.event_time_ms) / 1000 + 15 <= 20.1
