"""The public test driver: a detector on one entity, as the runner runs it."""

from __future__ import annotations

import pytest
from pydantic_core import PydanticSerializationError

from detectors.base import Detector, DetectorParams, DetectorState
from detectors.checkpoint_failures import CheckpointFailures, CheckpointFailuresParams
from detectors.model import Alert, Event
from detectors.testing import DetectorTester, drive_timer

T0 = 1_700_000_000_000


def expired(t: int, cid: int) -> Event:
    return Event("checkpoint_expired", t, job_id="7f", checkpoint_id=cid)


def test_feed_and_advance_return_what_each_made_and_keep_it_all() -> None:
    tester = DetectorTester(CheckpointFailures(CheckpointFailuresParams(min_expired=2)))
    assert tester.feed(expired(T0, 1)) == []
    (fired,) = tester.feed(expired(T0 + 1000, 2))
    assert fired.status.value == "firing" and tester.state is not None and tester.state.firing
    assert tester.timer is not None
    (closed,) = tester.advance_to(T0 + 7 * 3600 * 1000)
    assert (closed.status.value, closed.alert_id) == ("resolved", fired.alert_id)
    assert tester.alerts == [fired, closed]
    assert (tester.state, tester.timer) == (None, None)


def test_drive_is_the_tester_in_one_call() -> None:
    det = CheckpointFailures(CheckpointFailuresParams(min_expired=2))
    events = [expired(T0, 1), expired(T0 + 1000, 2)]
    state, timer, alerts = drive_timer(det, events, until=T0 + 2000)
    tester = DetectorTester(det)
    tester.feed(*events)
    tester.advance_to(T0 + 2000)
    assert (tester.state, tester.timer, tester.alerts) == (state, timer, alerts)


class SetState(DetectorState):
    seen: set[str] = set()


class KeepsASet(Detector[DetectorParams, SetState]):
    name = "keeps_a_set"
    scope = "job"
    kinds = frozenset({"checkpoint_expired"})

    def on_event(self, state: SetState, event: Event) -> list[Alert]:
        state.seen = {*state.seen, object()}  # type: ignore[arg-type]  # not JSON
        return []


def test_a_state_that_does_not_survive_the_runners_json_fails_at_once() -> None:
    tester = DetectorTester(KeepsASet(DetectorParams()))
    with pytest.raises(PydanticSerializationError):
        tester.feed(expired(T0, 1))


def test_standing_is_asked_of_the_state_as_the_runner_would_load_it() -> None:
    tester = DetectorTester(CheckpointFailures(CheckpointFailuresParams(min_expired=2)))
    assert tester.standing() == "no checkpoint seen for this job"
    tester.feed(expired(T0, 1))
    assert tester.standing().startswith("1 of 2 expired, 1 of 2 failed within 30 min")
    assert tester.standing() == tester.detector.standing(tester.state)
