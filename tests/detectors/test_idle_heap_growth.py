"""idle_heap_growth as a plain state machine: hand-made metric samples, time injected."""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from typing import Any

import pytest
from pydantic import ValidationError

from detectors import AlertStatus, Event, Severity
from detectors.correlation import Correlator
from detectors.idle_heap_growth import (
    HEAP_MAX,
    HEAP_USED,
    HINT,
    LEAK,
    IdleHeapGrowth,
    IdleHeapGrowthParams,
)
from detectors.stats import theil_sen
from detectors.testing import DetectorTester, drive, drive_timer
from detectors.words import at

TM = "container_e08_1717400000000_0042_01_000002"
HOST = "worker_7_example_com"
JOB = "5d1c3e7f9a2b4c6d8e0f1a2b3c4d5e6f"
MIN = 60_000
MB = 1024 * 1024
T0 = 1_717_400_100_000  # on a 5-minute boundary, so bucket closes fall on whole minutes
SRC = "Source:_kafka_orders____Map/0"
SINK = "Sink:_audit_log/0"

OUT = "flink_taskmanager_job_task_numRecordsOut"
OUT_RATE = "flink_taskmanager_job_task_numRecordsOutPerSecond"
IN = "flink_taskmanager_job_task_numRecordsIn"
IN_RATE = "flink_taskmanager_job_task_numRecordsInPerSecond"
OP_IN = "flink_taskmanager_job_task_operator_numRecordsIn"
COMMITS = "flink_taskmanager_job_task_operator_KafkaSourceReader_commitsSucceeded"


def metric(name: str, t: int, value: float, task: str | None = None, tm: str = TM) -> Event:
    job = JOB if task else None
    return Event(
        kind="metric",
        time_ms=t,
        tm_id=tm,
        host=HOST,
        job_id=job,
        job_name="orders_audit" if job else None,
        task=task,
        metric=name,
        value=value,
    )


def heap(
    *,
    minutes: float,
    floor_mb: float,
    growth_mb_h: float,
    alloc_mb_s: float = 1.0,
    young_mb: float = 120,
    start: int = T0,
    step_s: int = 15,
    seed: int = 1,
    tm: str = TM,
) -> list[Event]:
    """A GC sawtooth on top of a floor that grows linearly (MB/h)."""
    r = random.Random(seed)
    events, h = [], floor_mb
    for i in range(int(minutes * 60 / step_s)):
        t = start + i * step_s * 1000
        floor = floor_mb + growth_mb_h * (t - start) / 3_600_000
        h = max(h + alloc_mb_s * step_s * r.uniform(0.5, 1.5), floor)
        if h - floor > young_mb:
            h = floor + r.uniform(0, 3)
        events.append(metric(HEAP_USED, t, h * MB, tm=tm))
    return events


def throughput(
    *,
    minutes: float,
    rate: float = 0.0,
    start: int = T0,
    step_s: int = 15,
    tm: str = TM,
    base: float = 123_456.0,
) -> list[Event]:
    """A source task and a sink task: the source's task-level numRecordsIn is always 0."""
    events, count = [], base
    for i in range(int(minutes * 60 / step_s)):
        t = start + i * step_s * 1000
        count += rate * step_s
        events += [
            metric(IN, t, 0.0, SRC, tm),
            metric(OUT, t, count, SRC, tm),
            metric(OUT_RATE, t, rate, SRC, tm),
            metric(IN_RATE, t, rate, SINK, tm),
        ]
        if i % 4 == 0:
            events.append(metric(COMMITS, t, 17.0, SRC, tm))
    return events


def merged(*streams: Iterable[Event]) -> list[Event]:
    return sorted((e for s in streams for e in s), key=lambda e: e.time_ms)


def fold(det: IdleHeapGrowth, events: list[Event]) -> Any:
    """The state after many events, kept in memory: ``drive`` would save it at each one."""
    state, timer = None, None
    for e in events:
        step = det.advance(state, timer, e)
        state, timer = step.state, step.timer_ms
    assert state is not None
    return state


def leak(minutes: float = 120, **kw) -> list[Event]:
    return merged(
        heap(minutes=minutes, floor_mb=420, growth_mb_h=200, **kw), throughput(minutes=minutes)
    )


def test_contract_attributes_route_heap_and_every_throughput_series() -> None:
    assert IdleHeapGrowth.name == "idle_heap_growth"
    assert IdleHeapGrowth.scope == "tm"
    assert IdleHeapGrowth.kinds == frozenset({"metric"})
    for name in (HEAP_USED, HEAP_MAX, OUT, OUT_RATE, IN, IN_RATE, OP_IN, COMMITS):
        assert name in IdleHeapGrowth.metrics
    assert "flink_taskmanager_job_task_operator_numRecordsOutPerSecond" in IdleHeapGrowth.metrics


def test_theil_sen_ignores_an_outlier() -> None:
    assert theil_sen([(0, 0), (1, 1), (2, 2), (3, 3), (4, 40)]) == 1.0
    assert theil_sen([(0, 5)]) == 0.0


def test_leak_fires_once_within_an_hour_with_the_evidence() -> None:
    det = IdleHeapGrowth(IdleHeapGrowthParams())
    _, alerts = drive(det, leak(minutes=180))
    assert [a.status for a in alerts] == [AlertStatus.FIRING]
    a = alerts[0]
    # The tenth 5-minute bucket closes at 50 min: an hour of growth is not needed.
    assert a.event_time_ms == T0 + 50 * MIN
    assert a.tm_id == TM and a.host == HOST and a.entity == f"tm:{TM}"
    assert a.job_id == JOB and a.job_name == "orders_audit"
    assert a.severity == Severity.WARNING
    ev = a.evidence
    assert 170 <= ev["growth_mb_per_h"] <= 230
    assert 560 <= ev["floor_mb"] <= 600
    assert ev["floors_mb"] == sorted(ev["floors_mb"])
    assert ev["heap_max_mb"] is None and ev["hours_to_heap_max"] is None
    assert ev["throughput_series"] == [IN, IN_RATE, OUT, OUT_RATE]
    # For a chart: each bucket of the window, its floor beside its records in/out.
    starts = [t for t, *_ in ev["buckets"]]
    assert starts[0] >= ev["window_start_ms"] and starts[-1] < ev["window_end_ms"]
    assert starts == sorted(starts) and len(starts) == 10  # the samples began at T0
    assert [f for _, f, _, _ in ev["buckets"] if f is not None] == ev["floors_mb"]
    assert {(rate, moved) for _, _, rate, moved in ev["buckets"]} == {(0.0, False)}
    assert ev["max_rate"] == 0.0 and ev["throughput_samples"] > 0
    assert ev["kafka_commits_succeeded"] == "flat"
    assert ev["window_end_ms"] - ev["window_start_ms"] == 3_600_000
    assert ev["window_end_ms"] == a.event_time_ms
    assert ev["jobs"] == {JOB: "orders_audit"}
    assert ev["job_ids"] == [JOB]  # the link correlation joins on
    assert ev["hint"] == HINT and "FLINK-33231" in a.summary and "3.0.1" in a.summary


class _Counting(IdleHeapGrowth):
    """The detector, noting the start of each bucket it judges."""

    def __init__(self, params: IdleHeapGrowthParams) -> None:
        super().__init__(params)
        self.judged: list[int] = []

    def _judge(self, st: Any) -> list[Any]:
        self.judged.append(st.buckets[-1].t)
        return super()._judge(st)


def test_the_bucket_that_completes_the_window_is_judged_when_it_ends() -> None:
    # Live, the next sample comes a scrape interval after the bucket's end: the verdict
    # does not wait for it, and that sample does not judge the bucket again.
    det = IdleHeapGrowth(IdleHeapGrowthParams())
    events = leak(minutes=60)
    before = [e for e in events if e.time_ms < T0 + 50 * MIN]
    state, timer, alerts = drive_timer(det, before)
    assert alerts == [] and timer == T0 + 50 * MIN
    state, timer, alerts = drive_timer(det, [], until=timer, state=state, timer=timer)
    assert [(a.status, a.event_time_ms) for a in alerts] == [(AlertStatus.FIRING, T0 + 50 * MIN)]
    _, by_sample = drive(det, events)
    assert by_sample == alerts  # what one long batch says, at the same time
    assert state is not None and state.judged_ms == T0 + 50 * MIN
    counting = _Counting(IdleHeapGrowthParams())
    after = [e for e in events if e.time_ms >= T0 + 50 * MIN]
    _, later = drive(counting, after, state=state, timer=timer)
    assert later == [] and T0 + 45 * MIN not in counting.judged
    assert counting.judged == sorted(set(counting.judged))  # each bucket judged once


def test_the_rate_gauge_shows_the_bucket_judged_last() -> None:
    det = IdleHeapGrowth(IdleHeapGrowthParams())
    five = throughput(minutes=5, rate=5.0)
    seven = throughput(minutes=5, rate=7.0, start=T0 + 5 * MIN, base=999_999.0)
    state, timer, _ = drive_timer(det, merged(five, seven))
    assert state is not None and det.signal_values(state)["taskmanager_records_per_second"] == 5.0
    # Its end passed: the newest bucket is judged, and the gauge shows it (a killed
    # TaskManager's next bucket never opens).
    state, _, _ = drive_timer(det, [], until=timer, state=state, timer=timer)
    assert state is not None and det.signal_values(state)["taskmanager_records_per_second"] == 7.0


def test_a_quiet_taskmanager_is_judged_once_at_its_last_bucket_s_end() -> None:
    det = IdleHeapGrowth(IdleHeapGrowthParams())
    flat = merged(heap(minutes=20, floor_mb=300, growth_mb_h=0), throughput(minutes=20))
    state, timer, _ = drive_timer(det, flat)
    assert timer == T0 + 20 * MIN
    state, timer, alerts = drive_timer(det, [], until=timer, state=state, timer=timer)
    assert alerts == [] and state is not None and state.judged_ms == T0 + 20 * MIN
    assert timer == state.last_event_ms + det.idle_ms  # no timer per empty bucket


def test_heap_max_gives_the_time_left_and_critical_when_it_is_near() -> None:
    events = leak(minutes=60)
    events = merged(events, [metric(HEAP_MAX, e.time_ms, 2048 * MB) for e in events[:1]])
    _, alerts = drive(IdleHeapGrowth(IdleHeapGrowthParams()), events)
    ev = alerts[0].evidence
    assert ev["heap_max_mb"] == 2048.0
    assert ev["hours_to_heap_max"] == pytest.approx((2048 - ev["floor_mb"]) / 200, abs=1.0)
    assert alerts[0].severity == Severity.WARNING
    near = merged(leak(minutes=60), [metric(HEAP_MAX, T0, 800 * MB)])
    _, alerts = drive(IdleHeapGrowth(IdleHeapGrowthParams()), near)
    assert alerts[0].severity == Severity.CRITICAL
    assert "Heap_Max in ~" in alerts[0].summary


def test_a_firing_leak_escalates_once_when_heap_max_comes_within_reach() -> None:
    # Floor 420 MB + 200 MB/h against a 1200 MB heap: ~3 h left when it fires at 50 min,
    # under critical_within_h (2 h) from about 115 min on.
    events = merged(leak(minutes=180), [metric(HEAP_MAX, T0, 1200 * MB)])
    state, alerts = drive(IdleHeapGrowth(IdleHeapGrowthParams()), events)
    assert [(a.status, a.severity) for a in alerts] == [
        (AlertStatus.FIRING, Severity.WARNING),
        (AlertStatus.ESCALATED, Severity.CRITICAL),
    ]
    assert alerts[0].alert_id == alerts[1].alert_id
    assert alerts[1].evidence["hours_to_heap_max"] <= 2.0 < alerts[0].evidence["hours_to_heap_max"]
    signals = IdleHeapGrowth(IdleHeapGrowthParams()).signal_values(state)
    assert 170 * MB <= signals["taskmanager_heap_floor_growth_bytes_per_hour"] <= 230 * MB
    assert signals["taskmanager_records_per_second"] == 0.0


def test_resolves_after_clear_for_once_records_flow_with_the_same_alert_id() -> None:
    det = IdleHeapGrowth(IdleHeapGrowthParams())
    idle = leak(minutes=90)
    # At 90 min data arrives: the reader commits, the leaked map is cleaned, the floor drops.
    busy_start = T0 + 90 * MIN
    busy = merged(
        heap(minutes=60, floor_mb=430, growth_mb_h=0, start=busy_start, seed=2),
        throughput(minutes=60, rate=40.0, start=busy_start),
    )
    _, alerts = drive(det, idle + busy)
    assert [(a.status, a.event_time_ms) for a in alerts] == [
        (AlertStatus.FIRING, T0 + 50 * MIN),
        # The bucket with the first records closes at 95 min; 15 min later it resolves.
        (AlertStatus.RESOLVED, T0 + 110 * MIN),
    ]
    assert alerts[0].alert_id == alerts[1].alert_id
    assert alerts[1].evidence["max_rate"] == 40.0
    assert "records flowing" in alerts[1].summary
    # The resolve is due when a bucket ends: it carries that bucket's verdict, whether the
    # timer or the sample that closes the bucket comes first.
    assert alerts[1].evidence["window_end_ms"] == T0 + 110 * MIN
    _, by_timer = drive(
        det, idle + [e for e in busy if e.time_ms < T0 + 110 * MIN], until=T0 + 110 * MIN
    )
    assert by_timer == alerts


def test_a_killed_taskmanager_resolves_by_timer_then_is_evicted() -> None:
    params = IdleHeapGrowthParams(idle_ttl_s=3 * 3600)
    det = IdleHeapGrowth(params)
    events = leak(minutes=120)
    state, timer, alerts = drive_timer(det, events)
    assert [a.status for a in alerts] == [AlertStatus.FIRING]
    last = events[-1].time_ms
    # The last bucket is judged when it ends (the leak holds: nothing new); then no more
    # heap samples: stale 15 min after the last one, resolved 15 min after that.
    assert timer == T0 + 120 * MIN
    state, timer, judged = drive_timer(det, [], until=timer, state=state, timer=timer)
    assert judged == [] and state is not None and state.facts.window_end_ms == T0 + 120 * MIN
    assert timer == last + 15 * MIN
    state, timer, stale = drive_timer(det, [], until=timer, state=state, timer=timer)
    assert stale == [] and timer == last + 30 * MIN
    state, timer, done = drive_timer(det, [], until=last + 30 * MIN, state=state, timer=timer)
    assert [(a.status, a.event_time_ms) for a in done] == [(AlertStatus.RESOLVED, last + 30 * MIN)]
    assert done[0].alert_id == alerts[0].alert_id
    assert "stopped sending heap metrics" in done[0].summary
    assert state is not None and timer == last + 3 * 3_600_000
    state, timer, gone = drive_timer(det, [], until=last + 3 * 3_600_000, state=state, timer=timer)
    assert state is None and timer is None and gone == []


def test_a_late_timer_resolves_at_the_deadline() -> None:
    # In a replay the watermark jumps far ahead: the resolve still carries its own time.
    det = IdleHeapGrowth(IdleHeapGrowthParams())
    events = leak(minutes=120)
    state, timer, _ = drive_timer(det, events)
    until = events[-1].time_ms + 5 * 3_600_000
    _, alerts = drive(det, [], until=until, state=state, timer=timer)
    assert [(a.status, a.event_time_ms) for a in alerts] == [
        (AlertStatus.RESOLVED, events[-1].time_ms + 30 * MIN)
    ]


def test_heap_samples_that_stop_while_throughput_goes_on_clear_from_the_stale_deadline() -> None:
    # The stale deadline fires at its own time between two samples of one batch, as it
    # does live: the resolve comes clear_for_s after it (30 min after the last heap
    # sample). One long batch used to fold the samples only and resolve 15 s later, at the
    # first bucket close whose verdict was false.
    det = IdleHeapGrowth(IdleHeapGrowthParams())
    events = merged(heap(minutes=90, floor_mb=420, growth_mb_h=200), throughput(minutes=150))
    last_heap = max(e.time_ms for e in events if e.metric == HEAP_USED)
    _, alerts = drive(det, events)
    assert [(a.status, a.event_time_ms) for a in alerts] == [
        (AlertStatus.FIRING, T0 + 50 * MIN),
        (AlertStatus.RESOLVED, last_heap + 30 * MIN),
    ]
    assert alerts[0].alert_id == alerts[1].alert_id


def test_idle_ttl_evicts_a_quiet_entity_and_resolves_a_firing_one() -> None:
    det = IdleHeapGrowth(IdleHeapGrowthParams(idle_ttl_s=600, stale_after_s=3600))
    state, timer, _ = drive_timer(det, heap(minutes=20, floor_mb=300, growth_mb_h=0))
    until = T0 + 20 * MIN + 600_000
    state, alerts = drive(det, [], until=until, state=state, timer=timer)
    assert state is None and alerts == []
    state, timer, alerts = drive_timer(det, leak(minutes=60))
    assert alerts and state is not None
    until = state.last_event_ms + 600_000
    state, alerts = drive(det, [], until=until, state=state, timer=timer)
    assert state is None
    assert [(a.status, a.event_time_ms) for a in alerts] == [(AlertStatus.RESOLVED, until)]
    assert "no metrics from this TaskManager" in alerts[0].summary
    assert alerts[0].evidence["why"] == "no metrics from this TaskManager any more"
    assert "window_s" not in alerts[0].evidence


def test_a_resolve_due_with_the_idle_deadline_keeps_its_own_reason() -> None:
    # stale (15 min) + clear_for (15 min) == idle_ttl (30 min): both at the same instant.
    det = IdleHeapGrowth(IdleHeapGrowthParams(idle_ttl_s=1800))
    events = leak(minutes=60)
    state, timer, alerts = drive_timer(det, events)
    last = events[-1].time_ms
    state, resolved = drive(det, [], until=last + 30 * MIN, state=state, timer=timer)
    assert state is None
    assert [(a.status, a.event_time_ms) for a in resolved] == [
        (AlertStatus.RESOLVED, last + 30 * MIN)
    ]
    assert "stopped sending heap metrics" in resolved[0].summary


def test_its_alert_roots_the_incident_headline_told_with_the_death() -> None:
    _, (fired,) = drive(IdleHeapGrowth(IdleHeapGrowthParams()), leak(minutes=60))
    rate = f"{fired.evidence['growth_mb_per_h']:,.0f} MB/h"
    c = Correlator()
    assert c.observe(fired).headline == (
        f"TaskManager {TM} heap floor grows {rate} with zero input: {LEAK}"
    )
    died = fired.model_copy(
        update={
            "alert_id": "f",
            "detector": "jvm_fatal",
            "event_time_ms": fired.event_time_ms + MIN,
            "evidence": {"cause": "heap_space", "role": "taskmanager"},
        }
    )
    assert c.observe(died).headline == (
        f"TaskManager {TM} died (heap space) after its heap grew {rate} with zero input: {LEAK}"
    )


# --- false-positive traps ------------------------------------------------------------


def quiet(events: list[Event], **params: float) -> None:
    _, alerts = drive(IdleHeapGrowth(IdleHeapGrowthParams(**params)), events)
    assert alerts == []


def test_busy_taskmanager_with_a_big_gc_sawtooth_and_a_flat_floor_stays_quiet() -> None:
    quiet(
        merged(
            heap(minutes=180, floor_mb=400, growth_mb_h=0, alloc_mb_s=40, young_mb=1000),
            throughput(minutes=180, rate=5000.0),
        )
    )


def test_busy_taskmanager_whose_floor_grows_stays_quiet() -> None:
    # A cache filling up under load: the floor rises like a leak, but records flow.
    quiet(
        merged(
            heap(minutes=180, floor_mb=400, growth_mb_h=250, alloc_mb_s=30, young_mb=600),
            throughput(minutes=180, rate=800.0),
        )
    )


def test_source_ingesting_with_task_numrecordsin_at_zero_stays_quiet() -> None:
    # FLINK_METRICS.md §2: a source task's numRecordsIn stays 0; its intake is numRecordsOut.
    events = heap(minutes=180, floor_mb=400, growth_mb_h=200)
    count = 0.0
    for i in range(180 * 4):
        t = T0 + i * 15_000
        count += 300
        events += [metric(IN, t, 0.0, SRC), metric(OUT, t, count, SRC)]
    quiet(merged(events))


def test_idle_taskmanager_with_a_flat_heap_stays_quiet() -> None:
    quiet(merged(heap(minutes=180, floor_mb=350, growth_mb_h=0), throughput(minutes=180)))


def test_idle_jvm_that_collects_every_half_hour_stays_quiet() -> None:
    # Between two GCs the heap climbs for 30 min: a raw-minimum floor would look like a leak.
    quiet(
        merged(
            heap(minutes=240, floor_mb=350, growth_mb_h=0, alloc_mb_s=0.1, young_mb=180),
            throughput(minutes=240),
        )
    )


def test_idle_taskmanager_with_one_heap_spike_stays_quiet() -> None:
    events = heap(minutes=180, floor_mb=350, growth_mb_h=0)
    spiked = [
        metric(HEAP_USED, e.time_ms, (e.value or 0) + 900 * MB)
        if 80 * MIN <= e.time_ms - T0 <= 86 * MIN
        else e
        for e in events
    ]
    quiet(merged(spiked, throughput(minutes=180)))


def test_a_single_step_of_the_floor_is_not_a_leak() -> None:
    low = heap(minutes=90, floor_mb=350, growth_mb_h=0)
    high = heap(minutes=90, floor_mb=600, growth_mb_h=0, start=T0 + 90 * MIN, seed=3)
    quiet(merged(low, high, throughput(minutes=180)))


def test_slow_growth_below_the_threshold_stays_quiet() -> None:
    quiet(merged(heap(minutes=180, floor_mb=350, growth_mb_h=25), throughput(minutes=180)))


def test_without_any_throughput_series_idleness_is_unproven() -> None:
    quiet(heap(minutes=180, floor_mb=420, growth_mb_h=200))


def test_a_counter_that_moves_once_in_the_window_stays_quiet() -> None:
    events = leak(minutes=90)
    bump = [metric(OUT, T0 + 45 * MIN + 1, 123_457.0, SRC)]
    quiet(merged(events, bump))


def test_constant_counters_of_chained_operators_sharing_a_task_label_are_idle() -> None:
    # Operator-level series of one chained task all carry task=<task_name>/<subtask>.
    ops = [
        metric(OP_IN, T0 + i * 15_000 + k, value, SRC)
        for i in range(120 * 4)
        for k, value in enumerate((0.0, 5_000.0, 4_990.0, 4_990.0))
    ]
    _, alerts = drive(IdleHeapGrowth(IdleHeapGrowthParams()), merged(leak(minutes=120), ops))
    assert [a.status for a in alerts] == [AlertStatus.FIRING]
    assert OP_IN in alerts[0].evidence["throughput_series"]


def test_a_slowly_collecting_leaking_jvm_is_still_caught() -> None:
    # One young GC every ~20 min: few floor points, but they rise.
    events = merged(
        heap(minutes=180, floor_mb=400, growth_mb_h=150, alloc_mb_s=0.12, young_mb=90),
        throughput(minutes=180),
    )
    _, alerts = drive(IdleHeapGrowth(IdleHeapGrowthParams()), events)
    assert [a.status for a in alerts] == [AlertStatus.FIRING]
    assert alerts[0].event_time_ms <= T0 + 90 * MIN


# --- robustness and bounds -------------------------------------------------------------


def test_an_out_of_order_heap_sample_is_ignored() -> None:
    det = IdleHeapGrowth(IdleHeapGrowthParams())
    state, _ = drive(det, [metric(HEAP_USED, T0 + 30_000, 500 * MB)])
    state, _ = drive(det, [metric(HEAP_USED, T0, 100 * MB)], state=state)
    assert state is not None
    assert state.last_heap == 500 * MB and state.buckets[0].gc is None


def test_state_stays_bounded_under_a_flood_of_series_and_time() -> None:
    params = IdleHeapGrowthParams(max_series=256)
    det = IdleHeapGrowth(params)
    events = leak(minutes=600)
    long_task = "Source:_" + "x" * 300
    # Every series a long label and ten distinct 17-digit values: the worst case per series.
    flood = [
        metric(OP_IN, T0 + i * 10 + j, 1_000_000_000.123456 + j, f"{long_task}/{i}")
        for i in range(400)
        for j in range(10)
    ]
    state = fold(det, merged(events, flood))
    assert len(state.series) == 256
    assert max(len(levels) for levels in state.series.values()) == 8
    assert len(state.buckets) <= 3600 // 300 + 2
    # Worst case documented in the module docstring.
    assert len(json.dumps(det.dump(state))) < 48_000
    typical = fold(det, leak(minutes=600))
    assert len(json.dumps(det.dump(typical))) < 4_000


#: A firing state as the untyped version wrote it (trimmed to two buckets and one series).
OLD_STATE = {
    "v": 1, "entity": f"tm:{TM}", "job_id": JOB, "job_name": "orders_audit", "tm_id": TM,
    "host": HOST, "firing": True, "incident_start_ms": 1717403100000, "clear_since_ms": None,
    "last_event_ms": 1717403685000, "jobs": {JOB: "orders_audit"},
    "buckets": [
        {"t": 1717403100000, "n": 20, "gc": 620604098.1250657, "tp": 80, "act": 0,
         "rate": 0.0, "unk": 0, "cn": 5, "ci": 0},
        {"t": 1717403400000, "n": 20, "gc": 635310190.0936261, "tp": 80, "act": 0,
         "rate": 0.0, "unk": 0, "cn": 5, "ci": 0},
    ],
    "series": {"557ccacb23": [0.0]}, "names": {IN: 1717403685000, OUT: 1717403685000},
    "last_heap": 769237442.4446923, "last_heap_ms": 1717403685000, "heap_max": None,
    "severity": "warning", "cond": True, "why": "floor rising with zero throughput",
    "facts": {
        "growth_mb_per_h": 197.7, "floor_mb": 591.9, "floors_mb": [426.8, 591.9],
        "heap_max_mb": None, "hours_to_heap_max": None, "rising_fraction": 1.0,
        "gc_buckets": 11, "window_start_ms": 1717399800000, "idle_s": 3300,
        "window_end_ms": 1717403400000, "throughput_series": [IN, OUT],
        "throughput_samples": 880, "max_rate": 0.0, "kafka_commits_succeeded": "flat",
        "jobs": {JOB: "orders_audit"},
    },
}  # fmt: skip


def test_a_state_saved_by_the_untyped_version_loads_and_goes_on() -> None:
    det = IdleHeapGrowth(IdleHeapGrowthParams())
    state = det.load(OLD_STATE)
    assert set(det.dump(state)) == {*OLD_STATE, "judged_ms"}
    assert state.v == 2 and state.judged_ms is None
    assert state.buckets[-1].gc == 635310190.0936261 and not state.buckets[-1].act
    assert state.severity is Severity.WARNING and state.facts is not None
    # Version 1 judged a bucket when the next one opened: the newest one is judged when
    # it ends. Trimmed to two buckets, its window proves nothing: the incident clears.
    end = 1717403400000 + 5 * MIN
    assert det.next_deadline(state) == end
    _, alerts = drive(det, [], until=end + 15 * MIN, state=state, timer=end)
    assert [(a.status, a.event_time_ms) for a in alerts] == [(AlertStatus.RESOLVED, end + 15 * MIN)]
    assert alerts[0].evidence["floors_mb"] == [591.9, 605.9]
    assert alerts[0].evidence["why"] == "only 2 buckets with heap and throughput samples"


def test_a_version_1_state_has_its_newest_bucket_judged_when_it_ends() -> None:
    det = IdleHeapGrowth(IdleHeapGrowthParams())
    state = fold(det, leak(minutes=62))  # firing since 50 min; 60-65 min filling
    saved = det.dump(state)
    del saved["judged_ms"]
    old = det.load({**saved, "v": 1})
    assert old.v == 2 and old.judged_ms is None and old.firing
    assert det.next_deadline(old) == T0 + 65 * MIN
    counting = _Counting(IdleHeapGrowthParams())
    after, timer, alerts = drive_timer(
        counting, [], until=T0 + 65 * MIN, state=old, timer=T0 + 65 * MIN
    )
    assert alerts == [] and counting.judged == [T0 + 60 * MIN]  # the leak holds: no transition
    assert after is not None and after.judged_ms == T0 + 65 * MIN and timer != T0 + 65 * MIN


def test_too_many_counter_series_leave_idleness_unproven() -> None:
    many = [metric(OUT, T0 + i * 15_000, 7.0, f"t{i % 5}/0") for i in range(120 * 4)]
    quiet(merged(leak(minutes=120), many), max_series=3)


def test_window_and_bucket_sizes_are_validated() -> None:
    with pytest.raises(ValidationError, match="at most 288"):
        IdleHeapGrowthParams(window_s=86_400 * 7, bucket_s=60)
    with pytest.raises(ValidationError, match="at least min_buckets"):
        IdleHeapGrowthParams(window_s=1800, min_buckets=10)


# --- standing ----------------------------------------------------------------------------


def test_standing_tells_the_verdict_the_floor_s_rise_and_what_resolves_it() -> None:
    idle = leak(minutes=90)
    busy_start = T0 + 90 * MIN
    busy = merged(
        heap(minutes=60, floor_mb=430, growth_mb_h=0, start=busy_start, seed=2),
        throughput(minutes=60, rate=40.0, start=busy_start),
    )
    tester = DetectorTester(IdleHeapGrowth(IdleHeapGrowthParams()))
    assert tester.standing() == "no heap or throughput metrics for this TaskManager"
    tester.feed(*[e for e in idle if e.time_ms < T0 + 4 * MIN])
    assert tester.standing() == (
        "1 bucket of 5 min so far, none closed: no verdict yet "
        "(the first page needs 50 min of samples)"
    )
    # Idle and rising, but too young: the verdict's own words, then the numbers.
    tester.feed(*[e for e in idle if T0 + 4 * MIN <= e.time_ms < T0 + 31 * MIN])
    assert tester.state is not None and tester.state.facts is not None
    facts = tester.state.facts
    assert tester.standing() == (
        f"only 6 buckets with heap and throughput samples; floor {facts.floor_mb:,.0f} MB, "
        f"{facts.growth_mb_per_h:+,.0f} MB/h (pages at 50), "
        f"GCs in {facts.gc_buckets} buckets (needs 3)"
    )
    assert 150 <= facts.growth_mb_per_h <= 250
    tester.feed(*[e for e in idle if e.time_ms >= T0 + 31 * MIN])
    (fired,) = tester.alerts
    line = tester.standing()
    assert line.startswith(f"FIRING since {at(T0 + 50 * MIN)} (40 min); floor ")
    assert line.endswith("resolves 15 min after records flow or the floor stops rising"), line
    # Records flow: the resolve is under way, and says why and when.
    tester.feed(*[e for e in busy if e.time_ms < T0 + 101 * MIN])
    assert tester.standing().endswith(
        f"clearing (records flowing (highest rate 40/s)), resolves at {at(T0 + 110 * MIN)}"
    ), tester.standing()
    tester.feed(*[e for e in busy if e.time_ms >= T0 + 101 * MIN])
    assert [a.status for a in tester.alerts] == [AlertStatus.FIRING, AlertStatus.RESOLVED]
    assert tester.standing().startswith("records flowing (highest rate 40/s); floor ")


def test_a_late_sample_counts_in_its_own_bucket_not_in_the_filling_one() -> None:
    det = IdleHeapGrowth(IdleHeapGrowthParams())
    bucket_ms = int(det.params.bucket_s * 1000)
    first, second = T0 + 10_000, T0 + bucket_ms + 10_000
    events = [
        metric(OUT_RATE, first, 0.0, task=SINK),
        metric(OUT_RATE, second, 0.0, task=SINK),
        metric(OUT_RATE, T0 + 20_000, 7.0, task=SINK),  # the first bucket's, arriving late
    ]
    state, _ = drive(det, events)
    assert state is not None
    older, filling = state.buckets[-2], state.buckets[-1]
    assert (older.t, older.tp, older.rate) == (T0, 2, 7.0)
    assert (filling.t, filling.tp, filling.rate) == (T0 + bucket_ms, 1, 0.0)
