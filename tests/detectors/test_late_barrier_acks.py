"""late_barrier_acks as a plain state machine: events in, steps out, time injected.

Events and timers go through :mod:`detectors.testing`, which saves the state as
JSON between calls like the Spark adapter.
"""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from detectors import AlertStatus, Event
from detectors.base import Discard
from detectors.late_barrier_acks import (
    LateBarrierAcks,
    LateBarrierAcksEvidence,
    LateBarrierAcksParams,
    LateBarrierAcksState,
)
from detectors.model import Alert
from detectors.testing import DetectorTester, drive_timer
from detectors.words import at

JOB = "5b7e0c4d9a2f4e18b6c3d1a0f8e7d6c5"
SEC = 1_000
MIN = 60_000
T0 = 1_717_408_800_000  # 2024-06-03 10:00:00 UTC
GRAPH = "a1b2c3d4e5f60718293a4b5c6d7e8f90"
VERTEX = "cbc357ccb763df2852fee8c4fc7d55f2"
HOT = "worker-7.example.com"
HOT_TM = "container_e05_1717000000000_0042_01_000007"


def attempt(subtask: int, graph: str = GRAPH, number: int = 0) -> str:
    """A Flink 1.16+ execution attempt id."""
    return f"{graph}_{VERTEX}_{subtask}_{number}"


def late(
    cp: int,
    t: int,
    task: str | None = None,
    host: str | None = None,
    tm: str | None = None,
    job: str = JOB,
) -> Event:
    return Event(
        kind="checkpoint_late_ack",
        time_ms=t,
        job_id=job,
        checkpoint_id=cp,
        task=task or attempt(0),
        host=host,
        tm_id=tm,
    )


def expired(cp: int, t: int) -> Event:
    return Event(kind="checkpoint_expired", time_ms=t, job_id=JOB, checkpoint_id=cp)


def declined(cp: int, t: int) -> Event:
    return Event(
        kind="checkpoint_declined", time_ms=t, job_id=JOB, checkpoint_id=cp, task=attempt(9)
    )


def failed(cp: int, t: int, reason: str) -> Event:
    return Event(kind="checkpoint_failed", time_ms=t, job_id=JOB, checkpoint_id=cp, reason=reason)


def skewed_checkpoint(cp: int, t: int, acks: int = 5) -> list[Event]:
    """One expired checkpoint and its late acks, all but one from worker-7."""
    events = [expired(cp, t)]
    for i in range(acks):
        if i < acks - 1:
            events.append(late(cp, t + (2 + i) * SEC, attempt(i % 3), HOT, HOT_TM))
        else:
            events.append(late(cp, t + 30 * SEC, attempt(5), "worker-3.example.com", "c3"))
    return events


def run(
    det: LateBarrierAcks,
    events: list[Event],
    state: LateBarrierAcksState | None = None,
    timer: int | None = None,
    *,
    until: int | None = None,
) -> tuple[LateBarrierAcksState | None, list[Alert], int | None]:
    """Events in order (due timers first), then the timers due by ``until``.

    Returns the state, the transitions and the pending timer; pass the last two back
    in to carry on.
    """
    state, timer, alerts = drive_timer(det, events, until=until, state=state, timer=timer)
    return state, alerts, timer


def incident(first_cp: int = 420, n: int = 6, every: int = 10 * MIN) -> list[Event]:
    """Every checkpoint from ``first_cp`` on expires (timeout 10 min) with late acks."""
    return [e for i in range(n) for e in skewed_checkpoint(first_cp + i, T0 + i * every)]


def test_contract_attributes() -> None:
    assert LateBarrierAcks.name == "late_barrier_acks"
    assert LateBarrierAcks.scope == "job"
    assert "checkpoint_late_ack" in LateBarrierAcks.kinds
    assert "checkpoint_expired" in LateBarrierAcks.kinds


def test_fires_once_at_the_first_late_ack_of_the_third_late_checkpoint() -> None:
    det = LateBarrierAcks(LateBarrierAcksParams())
    state, alerts, timer = run(det, incident())
    assert [(a.status, a.event_time_ms) for a in alerts] == [
        (AlertStatus.FIRING, T0 + 20 * MIN + 2 * SEC)
    ]
    alert = alerts[0]
    assert alert.job_id == JOB and alert.entity == f"job:{JOB}"
    assert alert.detector == "late_barrier_acks"
    assert alert.evidence["late_checkpoints"] == 3
    assert alert.evidence["checkpoint_ids"] == [420, 421, 422]
    assert f"from host {HOT}" in alert.summary
    # The alert resolves clear_for_s after the last late ack: that is the timer asked for.
    last_ack = T0 + 50 * MIN + 30 * SEC
    assert state is not None and timer == last_ack + 1800 * SEC


def test_resolves_at_the_clear_deadline_with_the_same_alert_id() -> None:
    det = LateBarrierAcks(LateBarrierAcksParams())
    state, alerts, timer = run(det, incident())
    assert state is not None and timer is not None
    # The watermark may be well past the deadline when the timer runs.
    state, resolved, idle_timer = run(det, [], state, timer, until=timer + 7 * MIN)
    assert [(a.status, a.event_time_ms) for a in resolved] == [(AlertStatus.RESOLVED, timer)]
    assert resolved[0].alert_id == alerts[0].alert_id
    assert resolved[0].summary == f"job {JOB}: no late checkpoint acks for 30 min"
    assert state is not None and state.checkpoints == []
    assert idle_timer == T0 + 50 * MIN + 30 * SEC + 6 * 3600 * SEC


def test_evidence_names_the_hot_host_tms_and_tasks() -> None:
    det = LateBarrierAcks(LateBarrierAcksParams())
    _, alerts, _ = run(det, incident(n=3))
    ev = alerts[0].evidence
    # Fired at the first ack of the third checkpoint: 5 + 5 + 1 late acks so far.
    assert ev["late_acks"] == 11 and ev["located_late_acks"] == 11
    assert ev["top_hosts"][0] == {
        "host": HOT,
        "checkpoints": 3,
        "late_acks": 9,
        "share": round(9 / 11, 3),
    }
    assert ev["top_hosts"][1]["host"] == "worker-3.example.com"
    assert ev["concentrated"] is True and ev["concentrated_host"] == HOT
    assert ev["top_tms"][0]["tm_id"] == HOT_TM
    assert ev["top_tasks"][0] == {
        "task": f"{VERTEX}/0",
        "checkpoints": 3,
        "late_acks": 5,
        "share": round(5 / 11, 3),
    }
    assert [t["task"] for t in ev["top_tasks"]] == [f"{VERTEX}/{i}" for i in (0, 1, 2, 5)]
    assert ev["window_s"] == 3600 and ev["expired_checkpoints"] == 3


def test_late_acks_spread_over_hosts_are_not_concentrated() -> None:
    det = LateBarrierAcks(LateBarrierAcksParams())
    events = []
    for i in range(3):
        t = T0 + i * 10 * MIN
        events.append(expired(100 + i, t))
        for h in range(4):
            events.append(late(100 + i, t + (h + 1) * SEC, attempt(h), f"worker-{h}", f"c{h}"))
    _, alerts, _ = run(det, events)
    ev = alerts[0].evidence
    assert ev["concentrated"] is False and ev["concentrated_host"] is None
    assert "most often task" in alerts[0].summary


def test_attempts_of_one_subtask_across_restarts_count_as_one_task() -> None:
    det = LateBarrierAcks(LateBarrierAcksParams())
    graphs = ["0" * 31 + "1", "0" * 31 + "2", "0" * 31 + "3"]
    events = []
    for i, graph in enumerate(graphs):
        events += [expired(7 + i, T0 + i * 10 * MIN)]
        events += [late(7 + i, T0 + i * 10 * MIN + SEC, attempt(4, graph, number=i), HOT)]
    _, alerts, _ = run(det, events)
    assert alerts[0].evidence["top_tasks"] == [
        {"task": f"{VERTEX}/4", "checkpoints": 3, "late_acks": 3, "share": 1.0}
    ]


def test_flink_1_8_acks_without_location_still_fire_and_say_no_host() -> None:
    det = LateBarrierAcks(LateBarrierAcksParams())
    ids = ["f2862289958b430bc3dc20f39794ca2c", "8f569166274106f22e49ed2ce919c930"]
    events = []
    for i in range(3):
        t = T0 + i * 6 * MIN
        events.append(expired(57 + i, t))
        events += [late(57 + i, t + (k + 1) * SEC, ids[k]) for k in range(2)]
    _, alerts, _ = run(det, events)
    assert [a.status for a in alerts] == [AlertStatus.FIRING]
    ev = alerts[0].evidence
    assert ev["top_hosts"] == [] and ev["top_tms"] == [] and ev["located_late_acks"] == 0
    assert ev["concentrated"] is False
    assert ev["top_tasks"][0]["task"] == ids[0] and ev["top_tasks"][0]["checkpoints"] == 3


def test_flink_1_4_late_acks_alone_are_enough() -> None:
    # 1.4 prints `Checkpoint N expired before completing.` without a job id: the job
    # entity sees only the late acks.
    det = LateBarrierAcks(LateBarrierAcksParams())
    events = [
        late(222 + i, T0 + i * 11 * MIN + k * SEC, f"{k:032x}") for i in range(3) for k in range(3)
    ]
    _, alerts, _ = run(det, events)
    assert [(a.status, a.event_time_ms) for a in alerts] == [(AlertStatus.FIRING, T0 + 22 * MIN)]
    assert alerts[0].evidence["expired_checkpoints"] == 0


# False-positive traps ----------------------------------------------------------------------


def test_one_isolated_late_checkpoint_with_many_late_acks_stays_quiet() -> None:
    det = LateBarrierAcks(LateBarrierAcksParams())
    events = [expired(224, T0)]
    events += [late(224, T0 + 22 * SEC + k * 10, f"{k:032x}", f"w{k}", f"c{k}") for k in range(10)]
    state, alerts, _ = run(det, events)
    assert alerts == []
    assert state is not None and len(state.tasks) == 10


def test_expired_checkpoints_without_late_acks_do_not_count() -> None:
    det = LateBarrierAcks(LateBarrierAcksParams())
    events = [expired(10 + i, T0 + i * 10 * MIN) for i in range(5)]
    events += skewed_checkpoint(15, T0 + 50 * MIN)
    _, alerts, _ = run(det, events)
    assert alerts == []


def test_two_late_checkpoints_far_apart_stay_quiet_even_with_a_threshold_of_two() -> None:
    det = LateBarrierAcks(LateBarrierAcksParams(min_checkpoints=2))
    events = skewed_checkpoint(300, T0) + skewed_checkpoint(312, T0 + 2 * 3600 * SEC)
    _, alerts, _ = run(det, events)
    assert alerts == []


def test_three_late_checkpoints_spread_wider_than_the_window_stay_quiet() -> None:
    det = LateBarrierAcks(LateBarrierAcksParams())
    events = [e for i in range(4) for e in skewed_checkpoint(300 + 8 * i, T0 + i * 45 * MIN)]
    state, alerts, _ = run(det, events)
    assert alerts == []
    assert state is not None and [r.id for r in state.checkpoints] == [316, 324]


def test_a_restart_that_resets_checkpoint_ids_stays_quiet() -> None:
    # Late checkpoint 812, the JobManager restarts without HA, ids start again at 1 and
    # checkpoint 3 has a late ack: two distinct late checkpoints, not three.
    det = LateBarrierAcks(LateBarrierAcksParams())
    events = skewed_checkpoint(812, T0) + skewed_checkpoint(3, T0 + 9 * MIN)
    state, alerts, _ = run(det, events)
    assert alerts == []
    assert state is not None and [r.id for r in state.checkpoints] == [812, 3]


def test_acks_of_two_checkpoints_interleaving_are_not_a_restart() -> None:
    det = LateBarrierAcks(LateBarrierAcksParams())
    events = [expired(100, T0), expired(101, T0 + MIN)]
    events += [late(100, T0 + 70 * SEC, attempt(1)), late(101, T0 + 71 * SEC, attempt(2))]
    events += [late(100, T0 + 72 * SEC, attempt(3)), late(101, T0 + 73 * SEC, attempt(1))]
    state, alerts, _ = run(det, events)
    assert alerts == []
    assert state is not None and len(state.checkpoints) == 2


def test_an_id_reused_after_a_restart_is_another_checkpoint() -> None:
    det = LateBarrierAcks(LateBarrierAcksParams())
    before = skewed_checkpoint(5, T0) + skewed_checkpoint(6, T0 + 10 * MIN)
    # The JobManager restarted from a savepoint taken at checkpoint 4: ids 5, 6 again.
    after = skewed_checkpoint(5, T0 + 16 * MIN)
    _, alerts, _ = run(det, before + after)
    assert [(a.status, a.event_time_ms) for a in alerts] == [
        (AlertStatus.FIRING, T0 + 16 * MIN + 2 * SEC)
    ]
    assert alerts[0].evidence["checkpoint_ids"] == [5, 6, 5]


def test_without_expiry_lines_a_long_gap_separates_attempts_of_one_id() -> None:
    det = LateBarrierAcks(LateBarrierAcksParams())
    events = [late(5, T0), late(6, T0 + 10 * MIN), late(5, T0 + 30 * MIN)]
    _, alerts, _ = run(det, events)
    assert [a.status for a in alerts] == [AlertStatus.FIRING]


def test_late_acks_of_declined_or_aborted_checkpoints_do_not_count() -> None:
    # Before Flink 1.19 a checkpoint aborted by a decline or a task failure also logs
    # "late message" for the acks still in flight: not a slow barrier.
    det = LateBarrierAcks(LateBarrierAcksParams())
    events = []
    for i in range(4):
        t = T0 + i * 3 * MIN
        events.append(declined(40 + i, t) if i % 2 else failed(40 + i, t, "Task has failed."))
        events += [late(40 + i, t + k * SEC, attempt(k), HOT) for k in range(1, 4)]
    state, alerts, _ = run(det, events)
    assert alerts == []
    assert state is not None and state.tasks == {} and state.hosts == {}


def test_a_decline_logged_after_late_acks_takes_the_checkpoint_back() -> None:
    det = LateBarrierAcks(LateBarrierAcksParams(min_checkpoints=4))
    events = skewed_checkpoint(1, T0) + skewed_checkpoint(2, T0 + 10 * MIN)
    # Out of order: a late ack of checkpoint 3, then the decline that aborted it.
    events += [late(3, T0 + 20 * MIN, attempt(7), "worker-9"), declined(3, T0 + 20 * MIN + 5)]
    state, alerts, timer = run(det, events)
    assert alerts == []
    assert state is not None and LateBarrierAcks._late_count(state) == 2
    assert "worker-9" not in state.hosts and f"{VERTEX}/7" not in state.tasks
    events = skewed_checkpoint(4, T0 + 30 * MIN) + skewed_checkpoint(5, T0 + 40 * MIN)
    _, alerts, _ = run(det, events, state, timer)
    assert [(a.status, a.event_time_ms) for a in alerts] == [
        (AlertStatus.FIRING, T0 + 40 * MIN + 2 * SEC)
    ]
    assert alerts[0].evidence["checkpoint_ids"] == [1, 2, 4, 5]


def test_an_expiry_reported_as_checkpoint_failed_counts_like_an_expiry() -> None:
    det = LateBarrierAcks(LateBarrierAcksParams())
    events = []
    for i in range(3):
        t = T0 + i * 10 * MIN
        events += [
            expired(60 + i, t),
            failed(60 + i, t + 1, "Checkpoint expired before completing."),
        ]
        events += [late(60 + i, t + 3 * SEC, attempt(1), HOT)]
    state, alerts, _ = run(det, events)
    assert [a.status for a in alerts] == [AlertStatus.FIRING]
    assert state is not None and len(state.checkpoints) == 3


# Lifecycle ---------------------------------------------------------------------------------


def test_late_acks_every_checkpoint_timeout_keep_one_incident_firing() -> None:
    det = LateBarrierAcks(LateBarrierAcksParams())
    state, alerts, timer = run(det, incident(n=12, every=25 * MIN))
    assert [a.status for a in alerts] == [AlertStatus.FIRING]
    assert timer == T0 + 11 * 25 * MIN + 30 * SEC + 1800 * SEC


def test_a_late_ack_after_the_deadline_resolves_first_and_needs_a_fresh_streak() -> None:
    det = LateBarrierAcks(LateBarrierAcksParams())
    state, alerts, timer = run(det, incident(n=3))
    assert timer is not None
    # No watermark passed the deadline when a new late checkpoint arrives after it: the
    # resolve comes first, at the deadline.
    later = skewed_checkpoint(500, timer + 5 * MIN)
    state, more, next_timer = run(det, later, state, timer)
    assert [(a.status, a.event_time_ms) for a in more] == [(AlertStatus.RESOLVED, timer)]
    assert more[0].alert_id == alerts[0].alert_id
    # Two more late checkpoints make a new incident with a new id.
    state, again, _ = run(
        det,
        skewed_checkpoint(501, timer + 15 * MIN) + skewed_checkpoint(502, timer + 25 * MIN),
        state,
        next_timer,
    )
    assert [(a.status, a.event_time_ms) for a in again] == [
        (AlertStatus.FIRING, timer + 25 * MIN + 2 * SEC)
    ]
    assert again[0].alert_id != alerts[0].alert_id
    assert again[0].evidence["checkpoint_ids"] == [500, 501, 502]


def test_timer_evicts_an_idle_job_and_resolves_a_firing_alert() -> None:
    params = LateBarrierAcksParams(idle_ttl_s=600, clear_for_s=3600)
    det = LateBarrierAcks(params)
    state, alerts, timer = run(det, incident(n=3))
    last = T0 + 20 * MIN + 30 * SEC
    assert timer == last + 600 * SEC
    assert state is not None
    final, resolved, _ = run(det, [], state, timer, until=last + 600 * SEC)
    assert final is None
    assert [(a.status, a.event_time_ms, a.summary) for a in resolved] == [
        (AlertStatus.RESOLVED, last + 600 * SEC, f"job {JOB}: no events from this job any more")
    ]
    assert resolved[0].alert_id == alerts[0].alert_id
    # Its evidence: the late checkpoints still in the window then (all three).
    assert resolved[0].evidence["late_checkpoints"] == 3


def test_timer_evicts_a_quiet_idle_job_silently() -> None:
    det = LateBarrierAcks(LateBarrierAcksParams())
    state, _, timer = run(det, skewed_checkpoint(1, T0))
    # No incident, so no deadline of its own: the idle one.
    assert state is not None and timer == T0 + 30 * SEC + 6 * 3600 * SEC
    early, alerts, early_timer = run(det, [], state, timer, until=T0 + 3700 * SEC)
    assert early is not None and alerts == [] and early_timer == timer
    final, alerts, _ = run(det, [], early, timer, until=timer)
    assert final is None and alerts == []


def test_the_timer_hook_prunes_the_window_when_nothing_is_due() -> None:
    # Only the idle deadline is due then (and the base drops the state): pruning keeps a
    # timer at any other time, a retry after a failure say, true to the window.
    det = LateBarrierAcks(LateBarrierAcksParams())
    state, _, timer = run(det, skewed_checkpoint(1, T0))
    assert state is not None
    alerts = det.on_timer(state, T0 + 3700 * SEC)
    assert not isinstance(alerts, Discard) and state.checkpoints == [] and list(alerts) == []
    assert det.next_deadline(state) is None


#: A state as the release with dict states saved it: three late checkpoints (firing since
#: the third), one declined attempt.
SAVED_BEFORE_TYPED_STATES = {
    "v": 1,
    "entity": f"job:{JOB}",
    "job_id": JOB,
    "job_name": None,
    "tm_id": None,
    "host": None,
    "firing": True,
    "incident_start_ms": T0 + 1202 * SEC,
    "clear_since_ms": T0 + 1202 * SEC,
    "last_event_ms": T0 + 1800 * SEC,
    "checkpoints": [
        {
            "seq": 0,
            "id": 420,
            "first_ms": T0,
            "last_ms": T0 + 3 * SEC,
            "late_acks": 2,
            "located_acks": 2,
            "expired": True,
            "aborted": False,
        },
        {
            "seq": 1,
            "id": 421,
            "first_ms": T0 + 600 * SEC,
            "last_ms": T0 + 602 * SEC,
            "late_acks": 1,
            "located_acks": 1,
            "expired": True,
            "aborted": False,
        },
        {
            "seq": 2,
            "id": 422,
            "first_ms": T0 + 1200 * SEC,
            "last_ms": T0 + 1202 * SEC,
            "late_acks": 1,
            "located_acks": 1,
            "expired": True,
            "aborted": False,
        },
        {
            "seq": 3,
            "id": 423,
            "first_ms": T0 + 1800 * SEC,
            "last_ms": T0 + 1800 * SEC,
            "late_acks": 0,
            "located_acks": 0,
            "expired": False,
            "aborted": True,
        },
    ],
    "next_seq": 4,
    "tasks": {
        "t1": {"cps": {"0": 1, "1": 1, "2": 1}, "last_ms": T0 + 1202 * SEC},
        "t2": {"cps": {"0": 1}, "last_ms": T0 + 3 * SEC},
    },
    "tms": {
        "c7": {"cps": {"0": 2, "2": 1}, "last_ms": T0 + 1202 * SEC},
        "c3": {"cps": {"1": 1}, "last_ms": T0 + 602 * SEC},
    },
    "hosts": {
        "worker-7": {"cps": {"0": 2, "2": 1}, "last_ms": T0 + 1202 * SEC},
        "worker-3": {"cps": {"1": 1}, "last_ms": T0 + 602 * SEC},
    },
}


def test_a_state_saved_before_typed_states_loads_and_carries_on_alike() -> None:
    det = LateBarrierAcks(LateBarrierAcksParams())
    saved = SAVED_BEFORE_TYPED_STATES
    state = det.load(saved)
    assert det.dump(state) == saved
    # What the dict-state release did next: a fourth late checkpoint moves the deadline,
    # which resolves the incident with the fourth counted in.
    ack = late(424, T0 + 1900 * SEC, "t1", "worker-7", "c7")
    state, alerts, timer = run(det, [ack], state, T0 + 3002 * SEC)
    assert alerts == [] and timer == T0 + 3700 * SEC
    assert state is not None and state.hosts["worker-7"].cps == {0: 2, 2: 1, 4: 1}
    _, alerts, _ = run(det, [], state, timer, until=timer)
    assert [(a.status, a.event_time_ms, a.alert_id) for a in alerts] == [
        (AlertStatus.RESOLVED, T0 + 3700 * SEC, "9987e8e514788768")
    ]
    want = {
        "late_checkpoints": 4,
        "checkpoint_ids": [420, 421, 422, 424],
        "expired_checkpoints": 3,
        "late_acks": 5,
        "window_s": 3600,
        "top_tasks": [
            {"task": "t1", "checkpoints": 4, "late_acks": 4, "share": 0.8},
            {"task": "t2", "checkpoints": 1, "late_acks": 1, "share": 0.2},
        ],
        "top_tms": [
            {"tm_id": "c7", "checkpoints": 3, "late_acks": 4, "share": 0.8},
            {"tm_id": "c3", "checkpoints": 1, "late_acks": 1, "share": 0.2},
        ],
        "top_hosts": [
            {"host": "worker-7", "checkpoints": 3, "late_acks": 4, "share": 0.8},
            {"host": "worker-3", "checkpoints": 1, "late_acks": 1, "share": 0.2},
        ],
        "located_late_acks": 5,
        "concentrated": True,
        "concentrated_host": "worker-7",
        # For a chart: each late checkpoint with its late acks per host of top_hosts.
        "per_checkpoint": [
            {"checkpoint_id": 420, "time_ms": T0, "late_acks": 2, "by_host": [2, 0]},
            {"checkpoint_id": 421, "time_ms": T0 + 600 * SEC, "late_acks": 1, "by_host": [0, 1]},
            {"checkpoint_id": 422, "time_ms": T0 + 1200 * SEC, "late_acks": 1, "by_host": [1, 0]},
            {"checkpoint_id": 424, "time_ms": T0 + 1900 * SEC, "late_acks": 1, "by_host": [1, 0]},
        ],
    }
    # The same keys in the same order (Slack shows the first few scalars).
    assert alerts[0].evidence == want and list(alerts[0].evidence) == list(want)
    assert LateBarrierAcksEvidence.model_validate(want).as_dict() == alerts[0].evidence


# Bounds ------------------------------------------------------------------------------------


def test_state_stays_bounded_and_serialisable_under_a_flood() -> None:
    params = LateBarrierAcksParams()
    det = LateBarrierAcks(params)
    pad = "x" * 200
    events = []
    for i in range(400):
        t = T0 + i * 5 * SEC
        events.append(expired(i, t))
        for k in range(8):
            n = i * 8 + k
            events.append(late(i, t + k, f"task-{n}-{pad}", f"host-{n}-{pad}", f"tm-{n}-{pad}"))
    state, alerts, _ = run(det, events)
    assert [a.status for a in alerts] == [AlertStatus.FIRING]
    assert state is not None
    assert len(state.checkpoints) == params.max_checkpoints
    assert len(state.tasks) == params.max_tasks
    assert len(state.hosts) == params.max_hosts and len(state.tms) == params.max_hosts
    size = len(json.dumps(det.dump(state)))
    assert size < 20_000, size  # documented worst case for these keys in the module docstring


def test_worst_case_state_size_with_default_caps() -> None:
    # Every tracked checkpoint has a late ack from every kept task, TaskManager and host.
    params = LateBarrierAcksParams()
    det = LateBarrierAcks(params)
    pad = "y" * 200
    # The longest attempt numbers kept: 3 digits (renumbered at 1000).
    state, _, timer = run(det, [late(1, T0 - MIN)])
    assert state is not None
    state.next_seq = 940
    events = []
    for i in range(60):
        t = T0 + i * 5 * SEC
        for k in range(params.max_tasks):
            h = k % params.max_hosts
            events.append(late(10_000 + i, t + k, f"t{k}{pad}", f"h{h}{pad}", f"m{h}{pad}"))
    state, _, _ = run(det, events, state, timer)
    assert state is not None and state.next_seq == 1000
    size = len(json.dumps(det.dump(state)))
    assert 30_000 < size < 35_000, size
    # The evidence's per-checkpoint counts stay small: the newest 20, numbers per top host.
    ev = det.evidence(state)
    assert len(ev.per_checkpoint) == 20
    assert ev.per_checkpoint[-1].checkpoint_id == 10_059
    assert {len(c.by_host) for c in ev.per_checkpoint} == {params.top_n}
    # Each late ack of a top host is counted in its checkpoint.
    for c in ev.per_checkpoint:
        assert sum(c.by_host) <= c.late_acks == params.max_tasks
    assert sum(c.by_host[0] for c in ev.per_checkpoint) == 20 * params.max_tasks // params.max_hosts
    assert len(json.dumps(ev.as_dict()["per_checkpoint"])) < 2_000


def test_typical_incident_state_is_small() -> None:
    det = LateBarrierAcks(LateBarrierAcksParams())
    state, _, _ = run(det, incident(n=5))
    assert state is not None and len(json.dumps(det.dump(state))) < 2_500


def test_a_threshold_of_one_checkpoint_is_rejected() -> None:
    with pytest.raises(ValidationError):
        LateBarrierAcksParams(min_checkpoints=1)


def test_attempt_numbers_are_renumbered_keeping_the_counts() -> None:
    det = LateBarrierAcks(LateBarrierAcksParams())
    events = [late(i, T0 + i * 10 * SEC, attempt(i % 2), HOT, HOT_TM) for i in range(1100)]
    state, alerts, _ = run(det, events)
    assert state is not None and state.next_seq < 1000
    assert sorted(state.hosts[HOT].cps) == [r.seq for r in state.checkpoints]
    assert alerts[0].status == AlertStatus.FIRING
    ev = det.evidence(state)
    assert ev.top_hosts[0]["checkpoints"] == 30
    assert ev.top_tasks[0]["checkpoints"] == 15


def test_host_shares_are_of_the_acks_that_name_a_location() -> None:
    # Flink 2.0 may print `at Unknown location`: no host, no TaskManager.
    det = LateBarrierAcks(LateBarrierAcksParams())
    events = []
    for i in range(3):
        t = T0 + i * 10 * MIN
        events += [expired(70 + i, t), late(70 + i, t + SEC, attempt(1), HOT, HOT_TM)]
        events += [late(70 + i, t + 2 * SEC, attempt(2)), late(70 + i, t + 3 * SEC, attempt(3))]
    state, alerts, _ = run(det, events)
    assert state is not None
    ev = det.evidence(state)
    assert ev.late_acks == 9 and ev.located_late_acks == 3
    assert ev.top_hosts == [{"host": HOT, "checkpoints": 3, "late_acks": 3, "share": 1.0}]
    assert ev.top_tasks[0]["share"] == round(3 / 9, 3)
    assert ev.concentrated_host == HOT


def test_signals_count_late_checkpoints_and_acks_in_the_window() -> None:
    det = LateBarrierAcks(LateBarrierAcksParams())
    state, _, _ = run(det, incident(n=4))
    assert state is not None
    assert det.signal_values(state) == {"late_ack_checkpoints": 4.0, "late_acks": 20.0}


# --- standing ----------------------------------------------------------------------------


def test_standing_counts_late_checkpoints_against_the_threshold_and_names_the_hot_host() -> None:
    events = incident()
    tester = DetectorTester(LateBarrierAcks(LateBarrierAcksParams()))
    assert tester.standing() == "no late barrier ack, expiry or decline seen for this job"
    tester.feed(expired(419, T0 - 5 * MIN))
    assert tester.standing() == "0 of 3 checkpoints with late acks within 60 min"
    # Two late checkpoints (5 acks each, 4 of them from the hot host): one short.
    tester.feed(*[e for e in events if e.time_ms < T0 + 20 * MIN])
    assert tester.standing() == (
        f"2 of 3 checkpoints with late acks within 60 min (10 late acks, the latest "
        f"{at(T0 + 10 * MIN + 30 * SEC)}); most from {HOT} (80%); "
        f"the oldest counts until {at(T0 + 30 * SEC + 60 * MIN)}"
    )
    tester.feed(*[e for e in events if e.time_ms >= T0 + 20 * MIN])
    last_ack = T0 + 50 * MIN + 30 * SEC
    assert tester.standing() == (
        f"FIRING since {at(T0 + 20 * MIN + 2 * SEC)} (30 min); 6 checkpoints with late acks "
        f"within 60 min (30 late acks); most from {HOT} (80%); "
        f"resolves at {at(last_ack + 30 * MIN)} if no late ack comes"
    )
    tester.advance_to(last_ack + 30 * MIN)
    assert [a.status for a in tester.alerts] == [AlertStatus.FIRING, AlertStatus.RESOLVED]
    assert tester.standing() == "0 of 3 checkpoints with late acks within 60 min"


def test_standing_leaves_aborted_checkpoints_out_and_says_so() -> None:
    tester = DetectorTester(LateBarrierAcks(LateBarrierAcksParams()))
    tester.feed(declined(7, T0), late(7, T0 + SEC, host=HOT))
    assert tester.standing() == (
        "0 of 3 checkpoints with late acks within 60 min; 1 aborted, not counted"
    )
