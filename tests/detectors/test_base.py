"""The contract every detector gets from the base: time, idleness, typed versioned state."""

from __future__ import annotations

import json
from typing import Any

import pytest

from detectors.base import (
    Detector,
    DetectorParams,
    DetectorState,
    Evidence,
    Incident,
    Member,
    Story,
)
from detectors.model import Alert, AlertStatus, Event, FlinkwatchError, Severity, StateError
from detectors.testing import DetectorTester, drive, drive_timer
from detectors.words import at, reads

T0 = 1_700_000_000_000


class CountState(DetectorState):
    v: int = 2
    seen: int = 0
    deadlines: list[int] = []


class CountEvidence(Evidence):
    seen: int


class Counter(Detector[DetectorParams, CountState]):
    """Fires at the 2nd event; asks for a deadline 10 s after each event."""

    name = "counter"
    scope = "job"
    kinds = frozenset({"checkpoint_expired"})

    def on_event(self, state: CountState, event: Event) -> tuple[Alert, ...]:
        state.seen += 1
        alerts: tuple[Alert, ...] = ()
        if state.seen == 2:
            alerts = (self.fire(state, event.time_ms, "two", self.evidence(state)),)
        return alerts

    def on_timer(self, state: CountState, now_ms: int) -> tuple[Alert, ...]:
        state.deadlines.append(now_ms)
        return ()

    def next_deadline(self, state: CountState) -> int | None:
        # 10 s after the latest event, until that deadline has fired.
        due = state.last_event_ms + 10_000
        return due if not state.deadlines or state.deadlines[-1] < due else None

    def evidence(self, state: CountState) -> CountEvidence:
        return CountEvidence(seen=state.seen)

    @classmethod
    def migrate(cls, old: dict[str, Any], from_version: int) -> dict[str, Any]:
        if from_version == 1:
            old["seen"] = old.pop("count")
            return old
        return super().migrate(old, from_version)


def ev(t: int, **kw: Any) -> Event:
    return Event("checkpoint_expired", t, job_id="7f", **kw)


def det(idle_s: float = 60) -> Counter:
    return Counter(DetectorParams(idle_ttl_s=idle_s))


def test_a_due_timer_fires_at_its_own_time_before_the_event_at_or_past_it() -> None:
    state, alerts = drive(det(), [ev(T0), ev(T0 + 10_000), ev(T0 + 35_000)])
    # The deadline at T0+10s fires before the event at T0+10s; the one at T0+20s fires
    # at T0+20s, not at the time of the event that came after it.
    assert state.deadlines == [T0 + 10_000, T0 + 20_000]
    assert [a.event_time_ms for a in alerts] == [T0 + 10_000]


def test_the_base_keeps_last_event_time_and_the_job_name() -> None:
    state, _ = drive(det(), [ev(T0, job_name="orders"), ev(T0 + 5, job_name=None)])
    assert (state.last_event_ms, state.job_name) == (T0 + 5, "orders")


def test_an_idle_entity_is_dropped_and_its_incident_resolved_with_the_same_id() -> None:
    d = det(idle_s=60)
    state, timer, alerts = drive_timer(d, [ev(T0), ev(T0 + 1_000)])
    # The detector's own deadline first; the idle deadline always follows it.
    assert timer == T0 + 11_000
    state, alerts_after = drive(d, [], state=state, timer=timer, until=T0 + 61_000)
    assert state is None
    fired, resolved = [*alerts, *alerts_after]
    assert (resolved.status.value, resolved.event_time_ms) == ("resolved", T0 + 61_000)
    assert resolved.alert_id == fired.alert_id
    assert resolved.summary == "job 7f: no events any more"
    assert resolved.evidence == {"seen": 2}


def test_an_event_after_the_idle_deadline_starts_a_new_entity() -> None:
    state, alerts = drive(det(idle_s=60), [ev(T0), ev(T0 + 1), ev(T0 + 120_000)])
    assert [a.status.value for a in alerts] == ["firing", "resolved"]
    assert state.seen == 1 and state.firing is False


def test_typed_evidence_leaves_unset_links_out() -> None:
    _, (alert,) = drive(det(), [ev(T0), ev(T0 + 1)])
    assert alert.evidence == {"seen": 2}
    assert CountEvidence(seen=1, tm_ids=("tm-1",)).as_dict() == {"seen": 1, "tm_ids": ["tm-1"]}


def test_the_models_and_the_version_come_from_the_type_arguments() -> None:
    assert (Counter.params_model, Counter.state_model) == (DetectorParams, CountState)
    assert Counter.schema_version == 2  # the default of CountState.v


def test_a_state_survives_json_and_an_older_version_is_migrated() -> None:
    d = det()
    state, _ = drive(d, [ev(T0)])
    assert d.load(json.loads(json.dumps(d.dump(state)))) == state
    old = {k: v for k, v in d.dump(state).items() if k not in ("seen", "v")}
    migrated = d.load({**old, "v": 1, "count": 5})
    assert (migrated.v, migrated.seen) == (2, 5)


@pytest.mark.parametrize(
    ("saved", "why"),
    [
        ({"v": 3, "entity": "job:7f"}, "newer than 2"),
        ({"v": 2, "entity": "job:7f", "seen": "many"}, "does not fit"),
        ({"v": 2, "entity": "job:7f", "unknown": 1}, "does not fit"),
    ],
    ids=["newer-version", "bad-type", "unknown-field"],
)
def test_a_state_that_cannot_be_loaded_raises_a_state_error(
    saved: dict[str, Any], why: str
) -> None:
    with pytest.raises(StateError, match=why) as err:
        det().load(saved)
    assert isinstance(err.value, FlinkwatchError) and err.value.detector == "counter"


def test_a_version_without_a_migration_raises_a_state_error() -> None:
    class NoMigration(Counter):
        schema_version = 3

    # Counter knows version 1; nobody wrote how version 2 becomes 3.
    with pytest.raises(StateError, match="no migration from state version 2"):
        NoMigration(DetectorParams()).load({"v": 2, "entity": "job:7f"})


@pytest.mark.parametrize(
    "text",
    ['{"v": 1, "entity": "job:7f"}', "not json", "[1, 2]", '{"v": "two"}'],
    ids=["migration-raises", "not-json", "not-an-object", "bad-version"],
)
def test_whatever_goes_wrong_loading_a_state_is_a_state_error(text: str) -> None:
    # Anything else would fail the micro-batch, and again after every restart: the bad
    # state is still there. Version 1 lacks "count", so the migration raises KeyError.
    with pytest.raises(StateError):
        det().load_json(text)


def test_a_state_refuses_a_field_it_does_not_declare() -> None:
    # Assignment skips pydantic's checks for speed, but a typo must not vanish silently.
    state = CountState(entity="job:7f")
    state.seen = 3
    assert state.seen == 3
    with pytest.raises(ValueError, match="no field"):
        state.sen = 4  # type: ignore[attr-defined]


# --- incidents as values -----------------------------------------------------------------


class HostIncident(Incident):
    """An incident per host, as a keyed detector keeps them."""

    line: str = ""


class HostsState(DetectorState):
    hosts: dict[str, HostIncident] = {}


class PerHost(Detector[DetectorParams, HostsState]):
    """One incident per host of the cluster: fatal opens it, a second escalates, OOM closes."""

    name = "per_host"
    scope = "cluster"
    kinds = frozenset({"fatal_error", "jvm_oom"})

    def on_event(self, state: HostsState, event: Event) -> list[Alert]:
        host, t = str(event.host), event.time_ms
        inc = state.hosts.get(host)
        labels = {"host": host, "job_id": None}
        if event.kind == "jvm_oom" and inc is not None:
            del state.hosts[host]
            return [self.resolve(state, t, "gone", {}, incident=inc, labels=labels)]
        if inc is None:
            inc = state.hosts[host] = HostIncident(line=event.message or "")
            return [self.fire(state, t, "down", {}, incident=inc, labels=labels)]
        crit = Severity.CRITICAL
        return [self.escalate(state, t, "again", {}, crit, incident=inc, labels=labels)]


def test_an_incident_keeps_one_id_from_firing_through_escalation_to_its_resolve() -> None:
    det = PerHost(DetectorParams())
    events = [
        Event("fatal_error", T0, host="a", job_id="7f"),
        Event("fatal_error", T0 + 1, host="b"),
        Event("fatal_error", T0 + 2, host="a"),
        Event("jvm_oom", T0 + 3, host="a"),
        Event("fatal_error", T0 + 4, host="a"),
    ]
    state, alerts = drive(det, events)
    got = [(a.status.value, a.host, a.job_id, a.severity.value) for a in alerts]
    assert got == [
        ("firing", "a", None, "warning"),
        ("firing", "b", None, "warning"),
        ("escalated", "a", None, "critical"),
        ("resolved", "a", None, "warning"),
        ("firing", "a", None, "warning"),
    ]
    a_first, b, a_esc, a_res, a_again = (a.alert_id for a in alerts)
    assert a_first == a_esc == a_res  # one incident of host a
    assert len({a_first, b, a_again}) == 3  # each incident its own id
    assert state is not None and not state.firing  # the state's own incident stays closed
    assert state.hosts["a"].firing and state.hosts["a"].incident_start_ms == T0 + 4


def test_the_state_is_its_entitys_incident_in_the_layout_every_saved_state_has() -> None:
    state, alerts = drive(det(), [ev(T0), ev(T0 + 1)])
    assert [a.status.value for a in alerts] == ["firing"]
    saved = det().dump(state)
    assert (saved["firing"], saved["incident_start_ms"], saved["clear_since_ms"]) == (
        True,
        T0 + 1,
        None,
    )


def test_a_profile_tells_nothing_more_by_default() -> None:
    told = Counter.profile
    assert (told.runbook, told.idle_words, told.causal_rank) == ("", "no events any more", 3)
    root = Member(
        alert_id="x",
        detector="counter",
        entity="job:7f",
        status=AlertStatus.FIRING,
        severity=Severity.WARNING,
        event_time_ms=T0,
        summary="two",
        job_id="7f",
        first_ms=T0,
    )
    assert told.headline(Story(root=root, first={"counter": root})) == "counter on 7f: two"
    assert (told.death(root), told.aftermath(root), told.role(root)) == (None, None, None)


def test_the_default_standing_says_what_it_reads_whether_it_fires_and_what_resolves() -> None:
    d = det()
    assert d.standing(None) == "nothing seen for this entity (reads checkpoint expired lines)"
    tester = DetectorTester(d)
    tester.feed(ev(T0))
    assert tester.standing() == f"no incident open; latest event {at(T0)}"
    tester.feed(ev(T0 + 30_000))
    assert tester.standing() == (
        f"FIRING since {at(T0 + 30_000)} (0 s); resolves once its condition is clear for 5 min"
    )
    assert tester.state is not None
    tester.state.hysteresis(False, T0 + 100_000, clear_for_ms=300_000)
    assert tester.standing().endswith(
        f"condition clear since {at(T0 + 100_000)}, resolves after 5 min"
    )


def test_what_a_detector_reads_in_words() -> None:
    assert reads({"checkpoint_expired", "checkpoint_failed"}) == "checkpoint expired, failed lines"
    assert reads({"job_state", "metric"}, {"a"}) == "job state lines; 1 metric"
    assert reads({"metric"}, {"a", "b"}) == "2 metrics"
