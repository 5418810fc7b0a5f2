"""checkpoint_failures as a plain state machine: events in, steps out, time injected."""

from __future__ import annotations

from detectors import REGISTRY, AlertStatus, Event, Step
from detectors.checkpoint_failures import CheckpointFailures, CheckpointFailuresParams

JOB = "3f4c2a9b7d1e4f60a8b5c2d1e0f9a7b3"
MIN = 60_000
T0 = 1_717_400_000_000


def expired(cp: int, t: int) -> Event:
    return Event(kind="checkpoint_expired", time_ms=t, job_id=JOB, checkpoint_id=cp)


def completed(cp: int, t: int) -> Event:
    return Event(
        kind="checkpoint_completed", time_ms=t, job_id=JOB, checkpoint_id=cp, duration_ms=900
    )


def run(det: CheckpointFailures, events: list[Event]) -> tuple[dict | None, list]:
    state, alerts = None, []
    for e in events:
        step = det.on_event(state, e, e.time_ms)
        state = step.state
        alerts.extend(step.alerts)
    return state, alerts


def test_registered_under_its_contract_name() -> None:
    assert REGISTRY["checkpoint_failures"] is CheckpointFailures


def test_fires_once_at_the_third_distinct_expiry_and_resolves_after_two_completions() -> None:
    det = CheckpointFailures(CheckpointFailuresParams())
    events = [expired(10 + i, T0 + i * MIN) for i in range(5)]
    events += [completed(15, T0 + 6 * MIN), completed(16, T0 + 7 * MIN)]
    _, alerts = run(det, events)
    assert [(a.status, a.event_time_ms) for a in alerts] == [
        (AlertStatus.FIRING, T0 + 2 * MIN),
        (AlertStatus.RESOLVED, T0 + 7 * MIN),
    ]
    assert alerts[0].alert_id == alerts[1].alert_id
    assert alerts[0].job_id == JOB
    assert alerts[0].evidence["expired_checkpoints"] == [10, 11, 12]


def test_the_same_checkpoint_logged_twice_counts_once() -> None:
    det = CheckpointFailures(CheckpointFailuresParams())
    _, alerts = run(det, [expired(7, T0), expired(7, T0 + 1), expired(8, T0 + MIN)])
    assert alerts == []


def test_expirations_spread_wider_than_the_window_stay_quiet() -> None:
    det = CheckpointFailures(CheckpointFailuresParams(window_s=600))
    _, alerts = run(det, [expired(i, T0 + i * 6 * MIN) for i in range(6)])
    assert alerts == []


def test_one_completion_between_expiries_does_not_resolve() -> None:
    det = CheckpointFailures(CheckpointFailuresParams())
    events = [expired(1, T0), expired(2, T0 + MIN), expired(3, T0 + 2 * MIN)]
    events += [completed(4, T0 + 3 * MIN), expired(5, T0 + 4 * MIN), completed(6, T0 + 5 * MIN)]
    _, alerts = run(det, events)
    assert [a.status for a in alerts] == [AlertStatus.FIRING]


def test_a_second_incident_gets_a_new_alert_id() -> None:
    det = CheckpointFailures(CheckpointFailuresParams(resolve_after_completed=1))
    first = [expired(i, T0 + i * MIN) for i in range(3)] + [completed(3, T0 + 3 * MIN)]
    second = [expired(10 + i, T0 + (40 + i) * MIN) for i in range(3)]
    _, alerts = run(det, first + second)
    assert [a.status for a in alerts] == [
        AlertStatus.FIRING,
        AlertStatus.RESOLVED,
        AlertStatus.FIRING,
    ]
    assert alerts[2].alert_id != alerts[0].alert_id


def test_timer_ages_out_the_window_then_evicts_an_idle_job_resolving_it() -> None:
    params = CheckpointFailuresParams(window_s=600, idle_ttl_s=3600)
    det = CheckpointFailures(params)
    state, alerts = run(det, [expired(i, T0 + i * MIN) for i in range(3)])
    assert [a.status for a in alerts] == [AlertStatus.FIRING]
    step = det.on_event(state, completed(9, T0 + 3 * MIN), T0 + 3 * MIN)
    # The next timer is when the oldest expiry leaves the window.
    assert step.timer_ms == T0 + 600_000 + 1
    aged = det.on_timer(step.state or {}, step.timer_ms or 0)
    assert aged.state is not None and list(aged.state["expired"]) == ["1", "2"]
    # Nothing more from the job: at the idle TTL the state goes and the alert resolves.
    idle_at = T0 + 3 * MIN + 3_600_000
    final: Step = det.on_timer(aged.state, idle_at)
    assert final.state is None
    assert [(a.status, a.summary) for a in final.alerts] == [
        (AlertStatus.RESOLVED, f"job {JOB}: no events from this job any more")
    ]


def test_state_stays_bounded_under_a_flood_of_expiries() -> None:
    det = CheckpointFailures(CheckpointFailuresParams(max_tracked=20))
    state, _ = run(det, [expired(i, T0 + i * 1000) for i in range(5000)])
    assert state is not None and len(state["expired"]) == 20


def test_signal_counts_distinct_expiries_in_the_window() -> None:
    det = CheckpointFailures(CheckpointFailuresParams())
    state, _ = run(det, [expired(7, T0), expired(7, T0 + 1000), expired(8, T0 + 60_000)])
    assert state is not None
    assert det.signal_values(state) == {"checkpoints_expired": 2.0}
