"""The one failure policy, for a detector's events and its deadlines alike."""

from __future__ import annotations

import pytest

from detectors import AlertStatus
from detectors.checkpoint_failures import CheckpointFailures, CheckpointFailuresParams
from streaming.failures import MAX_FAILURES, judge_failure

DET = CheckpointFailures(CheckpointFailuresParams())


def _state(*, firing: bool):  # noqa: ANN202 - the detector's own state type
    return DET.load(
        {"entity": "job:7f", "job_id": "7f", "firing": firing, "incident_start_ms": 100}
    )


#: (calls in a row that raised before, firing) → (failures kept, dropped, closing statuses)
CASES = [
    (0, True, 1, False, []),
    (MAX_FAILURES - 2, True, MAX_FAILURES - 1, False, []),
    (MAX_FAILURES - 1, True, 0, True, [AlertStatus.RESOLVED]),
    (MAX_FAILURES - 1, False, 0, True, []),  # nothing open: nothing to close
]


@pytest.mark.parametrize(("before", "firing", "kept", "dropped", "closing"), CASES)
@pytest.mark.parametrize("call", ["on_event", "on_timer"])
def test_a_call_that_raises_is_counted_and_given_up_after_max_failures(
    call: str, before: int, firing: bool, kept: int, dropped: bool, closing: list[AlertStatus]
) -> None:
    try:
        raise KeyError("ts")
    except KeyError as exc:
        raised = judge_failure(DET, "job:7f", _state(firing=firing), exc, call, before, 500)
    assert (raised.failures, raised.dropped) == (kept, dropped)
    assert [a.status for a in raised.closing] == closing
    assert all(a.event_time_ms == 500 and "it kept failing" in a.summary for a in raised.closing)
    note = raised.note
    assert (note.where, note.failures, note.dropped) == (call, before + 1, dropped)
    assert note.about.entity == "job:7f" and note.error.startswith("KeyError: 'ts' at ")
