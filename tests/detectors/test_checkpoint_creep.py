"""checkpoint_creep as a plain state machine: events in, steps out, time injected.

Events and timers go through :mod:`detectors.testing`, which saves the state as
JSON between calls like the Spark adapter, so a state that is not JSON-clean fails
here first.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Iterable
from pathlib import Path

import pytest

from detectors import AlertStatus, Event
from detectors.checkpoint_creep import (
    CheckpointCreep,
    CheckpointCreepEvidence,
    CheckpointCreepParams,
    CheckpointCreepState,
)
from detectors.model import LAST_CHECKPOINT_DURATION, LAST_CHECKPOINT_SIZE, Alert
from detectors.testing import DetectorTester, drive_timer
from detectors.words import at

JOB = "5d1e0f9a7b33f4c2a9b7d1e4f60a8b5c"
S = 1000
MIN = 60 * S
T0 = 1_717_400_000_000
INTERVAL = MIN
TIMEOUT = 600 * S
SIZE = 22_110_045


# --- helpers ---------------------------------------------------------------------------


def triggered(cp: int, t: int, reason: str = "Checkpoint") -> Event:
    return Event(
        kind="checkpoint_triggered", time_ms=t, job_id=JOB, checkpoint_id=cp, reason=reason
    )


def completed(cp: int, t: int, duration: int, size: int = SIZE) -> Event:
    return Event(
        kind="checkpoint_completed",
        time_ms=t,
        job_id=JOB,
        checkpoint_id=cp,
        duration_ms=duration,
        size_bytes=size,
    )


def expired(cp: int, t: int) -> Event:
    return Event(kind="checkpoint_expired", time_ms=t, job_id=JOB, checkpoint_id=cp)


def metric(name: str, t: int, value: float) -> Event:
    return Event(kind="metric", time_ms=t, job_id=JOB, metric=name, value=value, job_name="orders")


def checkpoints(
    durations: Iterable[int | None], *, first_id: int = 1, start: int = T0
) -> tuple[list[Event], list[int]]:
    """Trigger + completion (or expiry, for ``None``) per checkpoint, Flink-style pacing.

    The next trigger comes one interval after the previous one, or right after a
    checkpoint that took longer than the interval (as with max-concurrent = 1).
    Returns the events and the trigger times.
    """
    events, starts, t = [], [], start
    for i, d in enumerate(durations):
        cp = first_id + i
        starts.append(t)
        events.append(triggered(cp, t))
        if d is None:
            events.append(expired(cp, t + TIMEOUT))
            end = t + TIMEOUT
        else:
            events.append(completed(cp, t + d, d))
            end = t + d
        t = max(t + INTERVAL, end + 5)
    return events, starts


def jitter(i: int, spread: float) -> float:
    """A deterministic pseudo-random factor in [1 - spread, 1 + spread]."""
    u = math.sin(i * 12.9898 + 78.233) * 43758.5453
    return 1 + spread * (2 * (u - math.floor(u)) - 1)


def run(
    det: CheckpointCreep,
    events: Iterable[Event],
    state: CheckpointCreepState | None = None,
    timer: int | None = None,
    *,
    until: int | None = None,
) -> tuple[CheckpointCreepState | None, list[Alert], int | None]:
    """Events in order (due timers first), then the timers due by ``until``.

    Returns the state, the transitions and the pending timer; pass the last two back
    in to carry on.
    """
    state, timer, alerts = drive_timer(det, list(events), until=until, state=state, timer=timer)
    return state, alerts, timer


def creep_durations(n: int, growth: float = 0.04) -> list[int | None]:
    """~5 s growing by ``growth`` per checkpoint with ±10 % jitter; None once past the timeout."""
    out: list[int | None] = []
    for i in range(n):
        d = int(5 * S * (1 + growth) ** i * jitter(i, 0.1))
        out.append(None if d >= TIMEOUT else d)
    return out


def default() -> CheckpointCreep:
    return CheckpointCreep(CheckpointCreepParams())


# --- contract ---------------------------------------------------------------------------


def test_contract_attributes() -> None:
    assert CheckpointCreep.name == "checkpoint_creep"
    assert CheckpointCreep.scope == "job"
    assert "checkpoint_triggered" in CheckpointCreep.kinds
    assert "metric" in CheckpointCreep.kinds
    assert CheckpointCreep.metrics == {LAST_CHECKPOINT_DURATION, LAST_CHECKPOINT_SIZE}
    assert CheckpointCreep.params_model is CheckpointCreepParams


# --- the incident -----------------------------------------------------------------------


def test_creeping_durations_fire_once_well_before_the_first_expiry() -> None:
    durations = creep_durations(140)
    events, starts = checkpoints(durations)
    first_expiry = next(i for i, d in enumerate(durations) if d is None)
    _, alerts, _ = run(default(), events)
    assert [a.status for a in alerts] == [AlertStatus.FIRING]
    fired = alerts[0]
    # It fires at the completion of the first checkpoint whose recent median passes
    # min_duration_ms (30 s), about 45 checkpoints after a 5 s start...
    fired_at = next(i for i, t in enumerate(starts) if t > fired.event_time_ms) - 1
    assert 40 <= fired_at <= 55
    assert fired.event_time_ms == starts[fired_at] + (durations[fired_at] or 0)
    # ... which is hours before the first checkpoint expires.
    assert starts[first_expiry] + TIMEOUT - fired.event_time_ms > 3 * 3600 * S
    assert fired.alert_id and fired.job_id == JOB and fired.detector == "checkpoint_creep"
    assert "creeping up" in fired.summary and "timeout is reached in" in fired.summary


def test_evidence_carries_the_durations_slope_ratio_and_projection() -> None:
    durations = creep_durations(80)
    events, _ = checkpoints(durations)
    _, alerts, _ = run(default(), events)
    ev = alerts[0].evidence
    assert ev["signals"] == ["trend"]
    assert ev["source"] == "log"
    # The window: the newest (at most 60) completed checkpoints up to the one that fired.
    last, n = ev["checkpoint_ids"][-1], ev["samples"]
    assert 40 <= n <= 60 and len(ev["durations_ms"]) == len(ev["sizes_bytes"]) == n
    assert ev["checkpoint_ids"] == list(range(last - n + 1, last + 1))
    assert ev["durations_ms"] == durations[last - n : last]
    assert ev["sizes_bytes"] == [SIZE] * n
    assert ev["ratio"] >= 2.0 and ev["recent_median_ms"] >= 30_000
    assert ev["mann_kendall_z"] >= 3.5
    # ~4 % of ~30 s per checkpoint, one checkpoint a minute.
    assert 500 < ev["slope_ms_per_checkpoint"] < 2500
    assert ev["slope_ms_per_hour"] == pytest.approx(ev["slope_ms_per_checkpoint"] * 60, rel=0.05)
    assert ev["checkpoint_interval_s"] == pytest.approx(60, abs=1)
    # Linear projection of the ~570 s left at that slope.
    assert 3600 < ev["projected_timeout_in_s"] < 12 * 3600
    assert ev["pending_checkpoints"] == [] and ev["restarts_seen"] == 0


def test_evidence_carries_the_samples_times_and_the_fitted_line_for_a_chart() -> None:
    durations = creep_durations(80)
    events, _ = checkpoints(durations)
    _, alerts, _ = run(default(), events)
    ev = alerts[0].evidence
    completions = {e.checkpoint_id: e.time_ms for e in events if e.kind == "checkpoint_completed"}
    assert ev["times_ms"] == [completions[cid] for cid in ev["checkpoint_ids"]]
    fit = ev["fit"]
    # Theil-Sen over the newest half of the window, the slope the evidence states.
    assert fit["samples"] == max(10, ev["samples"] // 2)
    assert fit["slope_ms"] == ev["slope_ms_per_checkpoint"]
    # The line goes through the newest durations: half of them within 10 % of it (jitter).
    m = fit["samples"]
    newest = ev["durations_ms"][-m:]
    line = [fit["level_ms"] - fit["slope_ms"] * (m - 1 - i) for i in range(m)]
    off = sorted(abs(d - y) / y for d, y in zip(newest, line, strict=True))
    assert off[m // 2] < 0.1
    assert sum(d > y for d, y in zip(newest, line, strict=True)) in range(m // 4, 3 * m // 4)


def test_evidence_lists_are_capped() -> None:
    det = CheckpointCreep(CheckpointCreepParams(window=200, min_samples=20))
    events, _ = checkpoints(creep_durations(200, growth=0.02)[:120])
    state, alerts, _ = run(det, events)
    assert alerts and len(alerts[0].evidence["durations_ms"]) == 60
    assert len(alerts[0].evidence["times_ms"]) == 60
    assert state is not None and len(state.samples) <= 200


def test_resolves_clear_for_s_after_durations_fall_back_with_the_same_alert_id() -> None:
    durations = creep_durations(70)
    events, starts = checkpoints(durations)
    state, alerts, timer = run(default(), events)
    assert [a.status for a in alerts] == [AlertStatus.FIRING]
    # A fix: durations back to 4 s. The recent median falls under 30 s after a few.
    recovery, rstarts = checkpoints([4 * S] * 30, first_id=71, start=starts[-1] + 10 * MIN)
    state, later, _ = run(default(), recovery, state, timer)
    assert [a.status for a in later] == [AlertStatus.RESOLVED]
    resolved = later[0]
    assert resolved.alert_id == alerts[0].alert_id
    assert state is not None and state.firing is False
    # Trend false from the 6th fast checkpoint on (median of the last 10 samples);
    # resolved exactly clear_for_s (300 s) later.
    off = next(
        i for i in range(30) if rstarts[0] + i * MIN + 4 * S + 300 * S == resolved.event_time_ms
    )
    assert 3 <= off <= 8
    assert "no longer creeping" in resolved.summary


def test_a_second_incident_gets_a_new_alert_id() -> None:
    events, starts = checkpoints(creep_durations(70))
    state, first, timer = run(default(), events)
    fix, fstarts = checkpoints([4 * S] * 60, first_id=71, start=starts[-1] + 10 * MIN)
    state, middle, timer = run(default(), fix, state, timer)
    again, _ = checkpoints(creep_durations(70), first_id=131, start=fstarts[-1] + MIN)
    _, second, _ = run(default(), again, state, timer)
    assert [a.status for a in first + middle + second] == [
        AlertStatus.FIRING,
        AlertStatus.RESOLVED,
        AlertStatus.FIRING,
    ]
    assert second[0].alert_id != first[0].alert_id


# --- stuck pending checkpoint -------------------------------------------------------------


def healthy(n: int, first_id: int, start: int, d: int = 3 * S) -> tuple[list[Event], list[int]]:
    return checkpoints([int(d * jitter(i, 0.2)) for i in range(n)], first_id=first_id, start=start)


def test_a_hanging_checkpoint_fires_on_its_timer_and_resolves_after_it_expires() -> None:
    det = default()
    before, starts = healthy(10, 100, T0)
    stuck_at = starts[-1] + INTERVAL
    state, alerts, timer = run(det, [*before, triggered(110, stuck_at)])
    assert alerts == []
    # The timer asked for is trigger + 0.5 x 600 s.
    assert timer == stuck_at + 300 * S
    state, fired, timer = run(det, [], state, timer, until=stuck_at + 300 * S)
    assert [a.status for a in fired] == [AlertStatus.FIRING]
    alert = fired[0]
    assert alert.event_time_ms == stuck_at + 300 * S
    assert alert.evidence["signals"] == ["pending"]
    assert alert.evidence["pending_checkpoints"] == [{"checkpoint_id": 110, "pending_for_s": 300}]
    assert "checkpoint 110" in alert.summary and "pending for 5.0 min" in alert.summary
    assert len(alert.evidence["durations_ms"]) == 10 and alert.evidence["test"] is None
    after, _ = healthy(20, 111, stuck_at + TIMEOUT + 5)
    state, later, _ = run(det, [expired(110, stuck_at + TIMEOUT), *after], state, timer)
    assert [(a.status, a.event_time_ms) for a in later] == [
        (AlertStatus.RESOLVED, stuck_at + TIMEOUT + 300 * S)
    ]
    assert later[0].alert_id == alert.alert_id


def test_a_hanging_checkpoint_found_late_fires_at_the_same_time_as_the_timer() -> None:
    # In a replay the expiry line can arrive before the timer runs: same alerts.
    before, starts = healthy(10, 100, T0)
    stuck_at = starts[-1] + INTERVAL
    after, _ = healthy(20, 111, stuck_at + TIMEOUT + 5)
    events = [*before, triggered(110, stuck_at), expired(110, stuck_at + TIMEOUT), *after]
    _, alerts, _ = run(default(), events)
    assert [(a.status, a.event_time_ms) for a in alerts] == [
        (AlertStatus.FIRING, stuck_at + 300 * S),
        (AlertStatus.RESOLVED, stuck_at + TIMEOUT + 300 * S),
    ]


def test_a_job_whose_every_checkpoint_hangs_pages_once() -> None:
    before, starts = healthy(10, 100, T0)
    events, _ = checkpoints([None] * 6, first_id=110, start=starts[-1] + INTERVAL)
    _, alerts, _ = run(default(), [*before, *events])
    assert [a.status for a in alerts] == [AlertStatus.FIRING]


def test_a_slow_checkpoint_that_completes_in_time_but_past_the_share_still_fires() -> None:
    before, starts = healthy(10, 100, T0)
    t = starts[-1] + INTERVAL
    _, alerts, _ = run(
        default(), [*before, triggered(110, t), completed(110, t + 400 * S, 400 * S)]
    )
    assert [(a.status, a.event_time_ms) for a in alerts] == [(AlertStatus.FIRING, t + 300 * S)]


def test_savepoints_are_ignored_however_long_they_take() -> None:
    before, starts = healthy(30, 100, T0)
    t = starts[-1] + INTERVAL
    for reason in ("Savepoint", "SAVEPOINT", "SYNC_SAVEPOINT", "Terminate Savepoint"):
        state, alerts, _ = run(
            default(), [*before, triggered(130, t, reason), completed(130, t + 500 * S, 500 * S)]
        )
        assert alerts == [], reason
        assert state is not None and 130 not in [s.checkpoint_id for s in state.samples]


def test_a_savepoint_completing_after_later_checkpoints_is_not_a_restart() -> None:
    before, starts = healthy(10, 100, T0)
    t = starts[-1] + INTERVAL
    during, _ = healthy(5, 111, t + 5 * S)
    events = [*before, triggered(110, t, "SAVEPOINT"), *during]
    events.append(completed(110, t + 280 * S, 280 * S))
    state, alerts, _ = run(default(), events)
    assert alerts == []
    assert state is not None and state.restarts == 0 and state.savepoints == []
    assert state.last_completed is not None and state.last_completed[0] == 115


def test_a_pending_checkpoint_without_outcome_is_forgotten_after_twice_the_timeout() -> None:
    before, starts = healthy(10, 100, T0)
    t = starts[-1] + INTERVAL
    det = default()
    state, _, timer = run(det, [*before, triggered(110, t)])
    state, fired, timer = run(det, [], state, timer, until=t + 300 * S)
    assert [a.status for a in fired] == [AlertStatus.FIRING]
    # Nothing more from the job (cancelled? log lost?): forgotten at 2 x timeout, then
    # resolved clear_for_s later, both on timers.
    assert timer == t + 2 * TIMEOUT
    state, forgotten, timer = run(det, [], state, timer, until=t + 2 * TIMEOUT)
    assert forgotten == [] and state is not None and state.pending == {}
    assert timer == t + 2 * TIMEOUT + 300 * S
    _, done, _ = run(det, [], state, timer, until=t + 2 * TIMEOUT + 300 * S)
    assert [(a.status, a.event_time_ms) for a in done] == [
        (AlertStatus.RESOLVED, t + 2 * TIMEOUT + 300 * S)
    ]


def test_a_late_timer_decides_at_the_due_time_not_at_the_watermark() -> None:
    det = default()
    before, starts = healthy(10, 100, T0)
    t = starts[-1] + INTERVAL
    state, _, timer = run(det, [*before, triggered(110, t)])
    _, alerts, _ = run(det, [], state, timer, until=t + 3 * TIMEOUT)
    assert [(a.status, a.event_time_ms) for a in alerts] == [
        (AlertStatus.FIRING, t + 300 * S),
        (AlertStatus.RESOLVED, t + 2 * TIMEOUT + 300 * S),
    ]


# --- false-positive traps -----------------------------------------------------------------


def flat_with_outlier(n: int, base: int, spread: float = 0.4) -> list[int | None]:
    out: list[int | None] = [int(base * jitter(i, spread)) for i in range(n)]
    out[n // 2] = int(base * 10)
    return out


def test_jittery_flat_durations_with_one_10x_outlier_stay_quiet() -> None:
    events, _ = checkpoints(flat_with_outlier(300, 2 * S))
    _, alerts, _ = run(default(), events)
    assert alerts == []


def test_jittery_flat_durations_stay_quiet_on_the_statistics_alone() -> None:
    # Without the min_duration_ms gate the robust trend and the ratio keep it quiet.
    det = CheckpointCreep(CheckpointCreepParams(min_duration_ms=0))
    events, _ = checkpoints(flat_with_outlier(300, 2 * S))
    _, alerts, _ = run(det, events)
    assert alerts == []
    events, _ = checkpoints(flat_with_outlier(300, 25 * S))
    _, alerts, _ = run(det, events)
    assert alerts == []


def test_a_fast_job_whose_durations_double_stays_under_min_duration() -> None:
    durations: list[int | None] = [int(400 * 1.02**i * jitter(i, 0.1)) for i in range(120)]
    events, _ = checkpoints(durations)
    _, alerts, _ = run(default(), events)
    assert alerts == []
    # The same series is a trend by the statistics: only the floor keeps it quiet.
    _, alerts, _ = run(CheckpointCreep(CheckpointCreepParams(min_duration_ms=500)), events)
    assert [a.status for a in alerts] == [AlertStatus.FIRING]


def test_a_restart_that_resets_checkpoint_ids_is_neither_a_trend_nor_a_hang() -> None:
    det = default()
    old_run, starts = healthy(60, 500, T0, d=20 * S)
    # Checkpoint 560 is in flight when the job fails; it never completes or expires.
    fail_at = starts[-1] + INTERVAL
    in_flight = triggered(560, fail_at)
    # The new run starts its ids at 1; its first checkpoint is a slow full one.
    new_run, _ = checkpoints(
        [60 * S] + [int(20 * S * jitter(i, 0.2)) for i in range(60)],
        first_id=1,
        start=fail_at + 40 * S,
    )
    state, alerts, _ = run(det, [*old_run, in_flight, *new_run])
    assert alerts == []
    assert state is not None
    assert state.restarts == 1
    assert state.pending == {}
    assert len(state.samples) == 60  # the new run's completions all count


def test_a_line_delivered_twice_counts_once_and_is_not_a_restart() -> None:
    det = default()
    events, _ = healthy(5, 10, T0)
    replayed = [*events, *events[2:6], *healthy(3, 15, T0 + 10 * MIN)[0]]
    state, alerts, _ = run(det, replayed)
    assert alerts == []
    assert state is not None and state.restarts == 0
    assert [s.checkpoint_id for s in state.samples] == [10, 11, 12, 13, 14, 15, 16, 17]


# --- metrics ----------------------------------------------------------------------------------


def scrapes(durations: list[int], start: int, every: int = 15 * S) -> list[Event]:
    """Prometheus scrapes every 15 s; checkpoint i completes at start + i minutes."""
    events = []
    end = start + len(durations) * INTERVAL
    for t in range(start, end, every):
        i = (t - start) // INTERVAL
        done = t - start - i * INTERVAL >= durations[i]
        value = durations[i] if done else (durations[i - 1] if i else -1)
        events.append(metric(LAST_CHECKPOINT_DURATION, t, value))
        events.append(metric(LAST_CHECKPOINT_SIZE, t, SIZE + i if value >= 0 else -1))
    return events


def test_metric_only_creep_fires_from_value_changes() -> None:
    durations = [d for d in creep_durations(90) if d is not None]
    state, alerts, _ = run(default(), scrapes(durations, T0))
    assert [a.status for a in alerts] == [AlertStatus.FIRING]
    ev = alerts[0].evidence
    assert ev["source"] == "metric"
    # One sample per checkpoint, not per scrape; no -1.
    assert len(set(ev["durations_ms"])) == len(ev["durations_ms"])
    assert min(ev["durations_ms"]) > 0
    # Each sample carries the size scraped with it (the newest one fills in on the next
    # size record of the same scrape).
    sizes = [x for x in ev["sizes_bytes"][:-1]]
    assert None not in sizes and sizes == sorted(sizes)
    assert alerts[0].job_name == "orders"
    fired_checkpoint = (alerts[0].event_time_ms - T0) // INTERVAL
    assert 40 <= fired_checkpoint <= 56


def test_minus_one_and_repeated_values_are_not_samples() -> None:
    events = [metric(LAST_CHECKPOINT_DURATION, T0 + i * 15 * S, -1) for i in range(4)]
    events += [metric(LAST_CHECKPOINT_DURATION, T0 + (4 + i) * 15 * S, 2500) for i in range(8)]
    events += [metric(LAST_CHECKPOINT_DURATION, T0 + 12 * 15 * S, -1)]  # a new run of the job
    events += [metric(LAST_CHECKPOINT_DURATION, T0 + 13 * 15 * S, 2500)]
    state, _, _ = run(default(), events)
    assert state is not None and [s.duration_ms for s in state.samples] == [2500, 2500]


def test_other_metrics_are_ignored() -> None:
    events = [metric("flink_jobmanager_job_numRestarts", T0 + i * MIN, i) for i in range(30)]
    state, alerts, _ = run(default(), events)
    assert alerts == [] and state is not None and state.samples == []


def test_a_checkpoint_seen_in_log_and_metric_counts_once() -> None:
    durations = [int(3 * S * jitter(i, 0.2)) for i in range(40)]
    logs, _ = checkpoints(durations, start=T0)
    both = sorted([*logs, *scrapes(durations, T0)], key=lambda e: e.time_ms)
    state, alerts, _ = run(default(), both)
    assert alerts == []
    assert state is not None and len(state.samples) == 40
    assert {s.source for s in state.samples} == {"l"}


def test_metrics_take_over_when_the_log_stops() -> None:
    durations = [int(3 * S * jitter(i, 0.2)) for i in range(40)]
    logs, _ = checkpoints(durations[:20], start=T0)
    both = sorted([*logs, *scrapes(durations, T0)], key=lambda e: e.time_ms)
    state, _, _ = run(default(), both)
    assert state is not None
    sources = [s.source for s in state.samples]
    assert sources[:20] == ["l"] * 20
    # Two checkpoint intervals without a log completion, then one sample per change.
    assert sources[20:] == ["m"] * len(sources[20:]) and 16 <= len(sources[20:]) <= 19


# --- bounds and eviction ----------------------------------------------------------------------


def test_state_stays_bounded_under_a_flood() -> None:
    det = default()
    # Typical: a healthy job once its window and baseline are full.
    events, starts = healthy(400, 1, T0, d=12_345)
    state, _, timer = run(det, events)
    assert state is not None
    typical = len(json.dumps(det.dump(state)))
    assert len(state.samples) == 60 and len(state.history) == 36
    # Worst case: big numbers everywhere plus a flood of triggers that never finish.
    t = starts[-1] + INTERVAL
    flood = [completed(10**12 + i, t + i * S, 599_999, 10**15) for i in range(100)] + [
        triggered(10**12 + 100 + i, t + 100 * S + i) for i in range(5000)
    ]
    state, _, _ = run(det, flood, state, timer)
    assert state is not None
    assert len(state.pending) == 16 and len(state.samples) == 60
    worst = len(json.dumps(det.dump(state)))
    # The module docstring quotes these sizes.
    assert typical < 3600 and worst < 5300, (typical, worst)


def test_idle_job_is_evicted_on_its_timer_resolving_the_alert() -> None:
    det = CheckpointCreep(CheckpointCreepParams(idle_ttl_s=3600))
    events, _ = checkpoints(creep_durations(70))
    state, alerts, timer = run(det, events)
    assert [a.status for a in alerts] == [AlertStatus.FIRING]
    last = events[-1].time_ms
    assert timer == last + 3600 * S
    # A watermark before the TTL keeps the state.
    early, none, timer = run(det, [], state, timer, until=last + 1800 * S)
    assert early is not None and none == []
    final, resolved, _ = run(det, [], early, timer, until=last + 3600 * S)
    assert final is None
    assert [(a.status, a.event_time_ms, a.summary) for a in resolved] == [
        (AlertStatus.RESOLVED, last + 3600 * S, f"job {JOB}: no events from this job any more")
    ]
    assert resolved[0].alert_id == alerts[0].alert_id


def test_quiet_idle_job_is_dropped_silently() -> None:
    det = default()
    state, _, timer = run(det, healthy(5, 1, T0)[0])
    assert timer is not None
    final, alerts, _ = run(det, [], state, timer, until=timer)
    assert final is None and alerts == []


def test_a_late_event_older_than_the_clock_is_folded_in_without_going_back_in_time() -> None:
    det = default()
    events, starts = healthy(10, 1, T0)
    state, _, timer = run(det, events)
    assert state is not None
    clock = state.clock_ms
    state, alerts, _ = run(det, [expired(3, T0 + 30 * S)], state, timer)
    assert alerts == [] and state is not None and state.clock_ms == clock


# --- saved states ------------------------------------------------------------------------

#: A state as the release with dict states saved it: a pending checkpoint 5, the timeout
#: (20 s) learned from an expiry, the cadence from the triggers, one metric sample.
SAVED_BEFORE_TYPED_STATES = {
    "v": 1,
    "entity": f"job:{JOB}",
    "job_id": JOB,
    "job_name": "orders",
    "tm_id": None,
    "host": "jm-1",
    "firing": False,
    "incident_start_ms": None,
    "clear_since_ms": None,
    "last_event_ms": T0 + 300 * S,
    "samples": [
        [T0 + 63 * S, 2, 3000, 1000, "l"],
        [T0 + 124 * S, 3, 4000, 1200, "l"],
        [T0 + 300 * S, None, 4500, 1500, "m"],
    ],
    "history": [],
    "since_block": 3,
    "pending": {"5": T0 + 181 * S},
    "savepoints": [4],
    "max_triggered": [5, T0 + 181 * S],
    "last_completed": [3, T0 + 124 * S],
    "last_log_ms": T0 + 124 * S,
    "metric_duration": 4500.0,
    "metric_size": [1500.0, T0 + 300 * S],
    "restarts": 0,
    "trend_on": False,
    "clock_ms": T0 + 300 * S,
    "last_trigger": [5, T0 + 181 * S],
    "timeout_ms": 20000,
    "cadence_ms": 60000,
}


def test_a_state_saved_before_typed_states_loads_and_carries_on_alike() -> None:
    det = default()
    saved = SAVED_BEFORE_TYPED_STATES
    state = det.load(saved)
    assert det.dump(state) == {**saved, "slope_ms": None}  # a field added since
    # Keys written only once learned may be missing.
    unlearned = {k: v for k, v in saved.items() if k not in ("timeout_ms", "cadence_ms")}
    assert det.load(unlearned).timeout_ms is None
    # What the dict-state release did next (its timer was trigger + 300 s): checkpoint 5
    # overdue, forgotten at 2 x timeout, resolved clear_for_s later.
    _, alerts, _ = run(det, [], state, T0 + 481 * S, until=T0 + 3600 * S)
    assert [(a.status, a.event_time_ms, a.alert_id) for a in alerts] == [
        (AlertStatus.FIRING, T0 + 481 * S, "58174a9f0bc81e1d"),
        (AlertStatus.RESOLVED, T0 + 1681 * S, "58174a9f0bc81e1d"),
    ]
    assert alerts[0].summary == (
        "checkpoint 5 of job orders pending for 5.0 min without completing (timeout 600 s)"
    )
    stats = dict.fromkeys(
        (
            "test checkpoint_every_s intervals timeout_share samples baseline_checkpoints "
            "mann_kendall_z baseline_median_ms recent_median_ms ratio slope_ms_per_checkpoint "
            "slope_ms_per_hour checkpoint_interval_s projected_timeout_in_s"
        ).split()
    )
    want = {
        "signals": ["pending"],
        "durations_ms": [3000, 4000, 4500],
        "sizes_bytes": [1000, 1200, 1500],
        "checkpoint_ids": [2, 3, None],
        "source": "mixed",
        "checkpoint_timeout_s": 20.0,
        "restarts_seen": 0,
        "pending_checkpoints": [{"checkpoint_id": 5, "pending_for_s": 300}],
        **stats,
        # What a chart draws, after what Slack shows: the samples' times, no fitted line yet.
        "times_ms": [T0 + 63 * S, T0 + 124 * S, T0 + 300 * S],
        "fit": None,
    }
    # The same keys in the same order (Slack shows the first few scalars).
    assert alerts[0].evidence == want and list(alerts[0].evidence) == list(want)
    assert alerts[1].evidence == {**want, "signals": [], "pending_checkpoints": []}
    assert (
        CheckpointCreepEvidence.model_validate(alerts[1].evidence).as_dict() == alerts[1].evidence
    )


# --- scenario files -------------------------------------------------------------------------
#
# The Spark replay (`flinkwatch replay`) is what expected.json describes. This test reads the
# same files with a minimal reader of the few checkpoint lines they contain (the real parser
# is tested in tests/streaming) and runs the detector like the adapter does, so a change to
# the detector that breaks a scenario fails here in milliseconds.

SCENARIOS = Path(__file__).resolve().parent.parent / "data" / "checkpoint_creep"
_LAYOUT = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) +\w+ +\S+ +(?:\[\] )?- (.*)$")
_LINES = (
    (
        "checkpoint_triggered",
        re.compile(
            r"^Triggering checkpoint (\d+) (?:\(type=(?:\w+\{name=')?([\w ]+).*?\) )?"
            r"@ \d+ for job ([0-9a-f]{32})"
        ),
    ),
    (
        "checkpoint_completed",
        re.compile(
            r"^Completed checkpoint (\d+) for job ([0-9a-f]{32}) \((\d+) bytes"
            r"(?: in |, checkpointDuration=)(\d+) ms"
        ),
    ),
    ("checkpoint_expired", re.compile(r"^Checkpoint (\d+) of job ([0-9a-f]{32}) expired")),
    (
        "checkpoint_failed",
        re.compile(r"^Failed to trigger or complete checkpoint (\d+) for job ([0-9a-f]{32})"),
    ),
)


def _read_scenario(path: Path) -> list[Event]:
    events = []
    for n, raw in enumerate(path.read_text().splitlines()):
        if path.suffix == ".jsonl":
            r = json.loads(raw)
            events.append(
                (
                    Event(
                        kind="metric",
                        time_ms=int(r["timestamp"]),
                        job_id=r["labels"].get("job_id"),
                        job_name=r["labels"].get("job_name"),
                        host=r["labels"].get("host"),
                        metric=r["name"],
                        value=float(r["value"]),
                    ),
                    n,
                )
            )
            continue
        m = _LAYOUT.match(raw)
        if not m:
            continue
        stamp = dt.datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=dt.UTC)
        t = int(stamp.timestamp() * 1000)
        for kind, rx in _LINES:
            f = rx.match(m[2])
            if not f:
                continue
            if kind == "checkpoint_triggered":
                e = Event(kind, t, job_id=f[3], checkpoint_id=int(f[1]), reason=f[2])
            elif kind == "checkpoint_completed":
                e = Event(
                    kind,
                    t,
                    job_id=f[2],
                    checkpoint_id=int(f[1]),
                    size_bytes=int(f[3]),
                    duration_ms=int(f[4]),
                )
            else:
                e = Event(kind, t, job_id=f[2], checkpoint_id=int(f[1]))
            events.append((e, n))
    return [e for e, _ in sorted(events, key=lambda x: (x[0].time_ms, x[1]))]


def _iso(ms: int) -> str:
    return (
        dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    )


def test_scenario_files_give_the_expected_alerts() -> None:
    expected = json.loads((SCENARIOS / "expected.json").read_text())
    assert set(expected) == {p.name for p in SCENARIOS.iterdir() if p.name != "expected.json"}
    by_job: dict[str, list[Event]] = {}
    for name in expected:
        for e in _read_scenario(SCENARIOS / name):
            by_job.setdefault(e.job_id or "", []).append(e)
    # The replay's watermark ends 30 s behind the newest record of all files.
    end = max(e.time_ms for events in by_job.values() for e in events) - 30 * S
    det = default()
    got = []
    for events in by_job.values():
        events.sort(key=lambda e: e.time_ms)
        _, alerts, _ = run(det, events, until=end)
        got.extend(alerts)
    got.sort(key=lambda a: (a.event_time_ms, a.status != AlertStatus.FIRING))
    want = [a for alerts in expected.values() for a in alerts]
    assert [
        {"status": a.status.value, "job_id": a.job_id, "event_time": _iso(a.event_time_ms)}
        for a in got
    ] == want


def test_signals_give_the_latest_duration_and_the_current_slope() -> None:
    det = default()
    events, _ = checkpoints(creep_durations(40, growth=0.02))
    state, _, _ = run(det, events)
    assert state is not None
    signals = det.signal_values(state)
    last = [e for e in events if e.kind == "checkpoint_completed"][-1]
    assert signals["checkpoint_duration_last_seconds"] == last.duration_ms / 1000
    # ~5 s growing 2 % a checkpoint: the newest durations grow ~0.15-0.25 s per checkpoint.
    assert 0.1 < signals["checkpoint_duration_slope_seconds"] < 0.35
    few, _ = checkpoints([5 * S] * 3)
    young, _, _ = run(det, few)
    assert young is not None
    assert "checkpoint_duration_slope_seconds" not in det.signal_values(young)


# --- against the job's own cadence (issue #13) -----------------------------------------


def paced(durations: Iterable[int], every: int, start: int = T0) -> list[Event]:
    """Checkpoints of a job with a short interval ``every``, Flink-style pacing."""
    events, t = [], start
    for cp, d in enumerate(durations, start=1):
        events.extend([triggered(cp, t), completed(cp, t + d, d)])
        t = max(t + every, t + d + 5)
    return events


def first_fire(events: list[Event]) -> Alert | None:
    _, alerts, _ = run(default(), events)
    return next((a for a in alerts if a.status == AlertStatus.FIRING), None)


def test_a_young_fast_job_whose_checkpoints_outgrow_its_interval_pages_within_minutes() -> None:
    # seed 000's story on a job checkpointing every 2 s: 300 ms growing 15 % per
    # checkpoint, never near the 30 s absolute floor or the 20-sample trend window.
    durations = [int(300 * 1.15**i * jitter(i, 0.1)) for i in range(40)]
    events = paced(durations, 2 * S)
    alert = first_fire(events)
    assert alert is not None
    assert alert.evidence["test"] == "cadence"
    assert alert.evidence["checkpoint_every_s"] == 2.0
    assert alert.evidence["intervals"] >= 3
    assert alert.event_time_ms - T0 <= 3 * MIN
    assert "checkpoint interval (2 s)" in alert.summary


@pytest.mark.parametrize(
    "durations",
    [
        pytest.param([int(400 * jitter(i, 0.1)) for i in range(200)], id="fast-stays-fast"),
        pytest.param([int(7 * S * jitter(i, 0.5)) for i in range(200)], id="jittery-at-3.5x"),
        pytest.param(
            [int(400 * jitter(i, 0.1)) if i != 60 else 30 * S for i in range(200)],
            id="one-slow-checkpoint",
        ),
        pytest.param(
            [int(min(300 * 1.2**i, 1500) * jitter(i, 0.1)) for i in range(200)],
            id="warm-up-levels-off",
        ),
    ],
)
def test_a_job_at_its_own_steady_pace_stays_quiet(durations: list[int]) -> None:
    assert first_fire(paced(durations, 2 * S)) is None


def test_the_timeout_learned_from_an_expiry_is_the_yardstick() -> None:
    # Triggers too irregular for a cadence (every id jumps), a 20 s timeout learned from
    # one expiry: durations growing past half of it page, on a job this young.
    events = [triggered(1, T0), expired(1, T0 + 20 * S)]
    t = T0 + 25 * S
    for i in range(30):
        cp = 3 + 2 * i
        d = int(1 * S * 1.12**i)
        events.extend([triggered(cp, t), completed(cp, t + d, d)])
        t += d + 3 * S
    alert = first_fire(events)
    assert alert is not None and alert.evidence["test"] == "cadence"
    assert alert.evidence["checkpoint_timeout_s"] == 20.0
    assert alert.evidence["checkpoint_every_s"] is None
    assert alert.evidence["timeout_share"] >= 0.5


# --- standing ----------------------------------------------------------------------------


def test_standing_tells_samples_trend_and_projection_as_the_creep_builds_and_fires() -> None:
    durations = creep_durations(140)
    events, _ = checkpoints(durations)
    tester = DetectorTester(default())
    assert tester.standing() == "no checkpoint seen for this job"
    # Building up: too few samples for any test.
    tester.feed(*events[:10])
    assert tester.standing() == (
        f"5 of 20 checkpoints, the latest took {durations[4] / 1000:.1f} s; "
        "no trend judged before 10"
    )
    # Judged, not paging yet: the numbers the decision rests on, next to its thresholds.
    tester.feed(*events[10:62])
    line = tester.standing()
    m = re.fullmatch(
        r"31 checkpoints, median ([\d.]+) s = ([\d.]+)x baseline \(pages at 2x and 30\.0 s\); "
        r"\+(\d+) ms/checkpoint, z ([\d.]+) \(significant at 3\.5\); "
        r"10 min timeout in ~([\d.]+) h at this pace",
        line,
    )
    assert m, line
    assert float(m[1]) < 30 and float(m[2]) < 2  # what keeps it from paging
    assert float(m[4]) >= 3.5 and 0 < int(m[3]) < 1000 and float(m[5]) > 10
    # Firing: since when, the same numbers as the page's evidence, what resolves it.
    for i, event in enumerate(events[62:], 62):  # noqa: B007 (i: where it fired)
        if tester.feed(event):
            break
    (fired,) = tester.alerts
    ev, line = fired.evidence, tester.standing()
    assert line.startswith(f"FIRING since {at(fired.event_time_ms)} (0 s); ")
    assert f"median {ev['recent_median_ms'] / 1000:.1f} s = {ev['ratio']:.1f}x baseline;" in line
    assert f"z {ev['mann_kendall_z']:.1f}; " in line and "pages at" not in line
    assert re.search(r"; 10 min timeout in ~[\d.]+ h; resolves 5 min after it clears$", line), line
    assert i < 110


def test_standing_names_a_hanging_checkpoint_and_the_checkpoint_its_resolve_waits_for() -> None:
    before, starts = healthy(10, 100, T0)
    stuck_at = starts[-1] + INTERVAL
    tester = DetectorTester(default())
    tester.feed(*before, triggered(110, stuck_at))
    tester.advance_to(stuck_at + 300 * S)
    line = tester.standing()
    assert line.startswith(f"FIRING since {at(stuck_at + 300 * S)}"), line
    assert line.endswith(
        "checkpoint 110 pending for 5 min (overdue); resolves 5 min after it clears"
    ), line
    # It expires; the next one is in flight: the resolve waits for it.
    tester.feed(expired(110, stuck_at + TIMEOUT), triggered(111, stuck_at + TIMEOUT + 5))
    assert tester.standing().endswith("resolve waits for checkpoint 111 in flight")
