from __future__ import annotations

import pytest
from pydantic import ValidationError

from tests.detectors.rules.helpers import BP, at, driven, metric, rule
from tests.detectors.rules.real import metric_events

IN = "flink_taskmanager_job_task_numRecordsInPerSecond"
OUT = "flink_taskmanager_job_task_numRecordsOutPerSecond"


def bp(**extra):
    return driven(**({"kind": "threshold", "metric": BP, "value": 800, "for_s": 600} | extra))


def test_fires_once_the_condition_held_for_for_s_and_resolves_after_clear_for_s() -> None:
    t = bp()
    for i in range(80):  # every 15 s for 20 min: 870 from 75 s to 15 min
        t.feed(metric(i * 15, BP, 870 if 5 <= i < 60 else 100, tm_id="tm1", task="Map/0"))
    t.advance_to(metric(3600, BP, 0).time_ms)
    fired, resolved = t.alerts
    assert fired.status.value == "firing" and at(fired) == 75 + 600
    assert fired.summary == "job orders: backPressuredTimeMsPerSecond max 870 > 800 for 10 min"
    assert fired.evidence["value"] == 870 and fired.evidence["threshold"] == 800
    assert fired.evidence["worst"] == "tm1|Map/0"
    assert resolved.status.value == "resolved" and at(resolved) == 900 + 300
    assert "back <= 800" in resolved.summary


def test_a_dip_below_the_bound_restarts_the_for_clock() -> None:
    # False-positive trap: back-pressure that comes and goes never holds 10 min.
    t = bp()
    for i in range(200):
        t.feed(metric(i * 15, BP, 100 if i % 30 == 29 else 870, task="Map/0"))
    assert t.alerts == []


def test_the_timer_fires_when_for_s_ends_between_samples() -> None:
    t = bp(for_s=100)
    t.feed(metric(0, BP, 900), metric(60, BP, 900))
    assert t.alerts == []
    assert [at(a) for a in t.advance_to(metric(110, BP, 0).time_ms)] == [100]


def test_max_aggregates_over_the_latest_sample_of_each_series() -> None:
    t = bp(for_s=0)
    t.feed(metric(0, BP, 900, task="Map/0"))
    t.feed(metric(5, BP, 100, task="Map/0"), metric(6, BP, 100, task="Map/1"))
    t.feed(metric(400, BP, 100, task="Map/0"), metric(401, BP, 100, task="Map/1"))
    assert [a.status.value for a in t.alerts] == ["firing", "resolved"]  # 900 was replaced
    t.feed(metric(402, BP, 850, task="Map/1"))
    assert t.alerts[-1].status.value == "firing" and t.alerts[-1].evidence["series"] == 2


def test_avg_and_sum_and_below() -> None:
    t = driven(kind="threshold", metric=IN, aggregate="sum", value=10)
    t.feed(metric(0, IN, 6, task="a/0"))
    assert t.alerts == []
    t.feed(metric(1, IN, 6, task="a/1"))
    assert t.alerts[0].summary == "job orders: numRecordsInPerSecond sum 12 > 10"
    t = driven(kind="threshold", metric=IN, aggregate="avg", op="<=", value=2)
    t.feed(metric(0, IN, 3, task="a/0"), metric(1, IN, 1, task="a/1"))
    assert t.alerts[0].summary == "job orders: numRecordsInPerSecond avg 2 <= 2"


def test_a_stale_series_no_longer_counts() -> None:
    t = bp(for_s=0, stale_s=60)
    t.feed(metric(0, BP, 900, task="a/0"))
    assert len(t.alerts) == 1
    t.feed(metric(61, BP, 0, task="a/1"))
    t.advance_to(metric(1000, BP, 0).time_ms)
    assert [a.status.value for a in t.alerts] == ["firing", "resolved"]


def test_labels_match_whole_in_both_spellings() -> None:
    t = bp(for_s=0, match={"task": "Sink-.*"})
    t.feed(metric(0, BP, 900, task="Map/0"))
    assert t.alerts == []
    t.feed(metric(1, BP, 900, task="Sink_kafka/0"))
    assert len(t.alerts) == 1


def test_a_job_filter_leaves_other_jobs_unwatched() -> None:
    t = bp(for_s=0, job_name="payments-.*")
    t.feed(metric(0, BP, 900))
    assert t.state is None and t.alerts == []
    t.feed(metric(1, BP, 900, job_id="j2", job_name="payments_eu"))
    assert len(t.alerts) == 1


def test_also_must_hold_at_the_same_time() -> None:
    # The sink reads nothing while the source still emits: a stalled sink, not an idle job.
    t = driven(
        kind="threshold",
        metric=IN,
        match={"task": ".*Writer.*"},
        op="<=",
        value=0,
        for_s=60,
        also={"metric": OUT, "match": {"task": "Source:.*"}, "value": 0},
    )
    for i in range(10):  # idle job: both zero
        t.feed(
            metric(i * 15, IN, 0, task="Sink:_Writer/0"), metric(i * 15, OUT, 0, task="Source:_x/0")
        )
    assert t.alerts == []
    for i in range(10, 20):
        t.feed(
            metric(i * 15, IN, 0, task="Sink:_Writer/0"),
            metric(i * 15, OUT, 900, task="Source:_x/0"),
        )
    (fired,) = t.alerts
    assert at(fired) == 150 + 60
    assert "while numRecordsOutPerSecond max 900 > 0" in fired.summary
    for i in range(20, 60):  # the source stops too: an idle job now, no stalled sink
        t.feed(
            metric(i * 15, IN, 0, task="Sink:_Writer/0"), metric(i * 15, OUT, 0, task="Source:_x/0")
        )
    resolved = t.alerts[-1]
    assert resolved.status.value == "resolved" and at(resolved) == 300 + 300
    assert resolved.summary == "job orders: numRecordsOutPerSecond max 0, no longer > 0"


def test_the_series_per_entity_are_capped() -> None:
    t = bp(for_s=0, value=10_000, max_series=8)
    t.feed(*[metric(i, BP, 1, task=f"t/{i}") for i in range(50)])
    assert len(t.state.series) == 8


def test_standing_says_how_far_from_firing() -> None:
    t = bp()
    det = t.detector
    assert det.standing(None) == f"no {BP} samples for this job"
    t.feed(*[metric(i * 15, BP, 870) for i in range(17)])
    assert det.standing(t.state) == "backPressuredTimeMsPerSecond max 870 > 800 for 4 min of 10 min"
    t.feed(metric(255, BP, 10))
    assert det.standing(t.state) == "backPressuredTimeMsPerSecond max 10, not > 800"
    t.feed(*[metric(270 + i * 15, BP, 900) for i in range(41)])
    assert det.standing(t.state) == (
        "FIRING since 2023-11-14T22:27:50Z (0 s); backPressuredTimeMsPerSecond max 900 > 800; "
        "resolves once not > 800 for 5 min"
    )


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"for_s": 90_000}, "for_s"),
        ({"max_series": 100_000}, "max_series"),
        ({"stale_s": 7200}, "stale_s"),
        ({"match": {"task": "Sink(?!:)"}}, "match.task"),  # nor lookahead
        ({"job_name": "(orders)-\\1"}, "job_name"),  # nor backreferences
        ({"metric": "not a metric"}, "metric"),
        ({"op": "=="}, "op"),
        ({"for_s": 30_000, "idle_ttl_s": 20_000}, "<root>"),
    ],
)
def test_limits_that_would_break_the_bounds_are_refused(fields, field) -> None:
    with pytest.raises(ValidationError) as exc:
        rule(kind="threshold", **({"metric": BP, "value": 1} | fields))
    locs = [".".join(str(x) for x in e["loc"][1:]) or "<root>" for e in exc.value.errors()]
    assert field in locs


def test_describe_is_one_line() -> None:
    r = rule(kind="threshold", metric=BP, value=800, for_s=600, match={"task": "Map.*"})
    assert r.describe() == (
        "my_rule (threshold, per job): backPressuredTimeMsPerSecond {task ~ Map.*} max > 800 "
        "for 10 min"
    )


def run_rule(r, events):
    from detectors.rules import rule_detector
    from detectors.testing import DetectorTester

    det = rule_detector(r)(r)
    t = DetectorTester(det)
    t.feed(*[e for e in events if e.job_id and e.metric in det.metrics])
    return t


@pytest.mark.parametrize("run", ["healthy", "idle", "surge", "growth", "crashloop"])
def test_the_sink_stalled_example_stays_quiet_on_real_runs(run) -> None:
    # idle_2_3 is the trap: its sink reads nothing, and neither does its source.
    from conf import load_config

    (r,) = load_config("conf/examples/sink_stalled.yaml").rules
    t = run_rule(r, metric_events(f"{run}_2_3"))
    assert t.alerts == []
    assert t.state is not None  # it did read the run's task metrics


def test_a_checkpoint_size_threshold_pages_on_the_real_surge() -> None:
    r = rule(
        kind="threshold", metric="flink_jobmanager_job_lastCheckpointSize", value=10e6, for_s=30
    )
    events = metric_events("surge_2_3")
    t = run_rule(r, events)
    (fired,) = t.alerts
    first = next(e for e in events if e.metric == r.metric and e.value > 10e6)
    assert fired.event_time_ms >= first.time_ms + 30_000
    assert fired.summary.startswith(
        "job insert_into_default_catalog_default_database_sink: lastCheckpointSize max "
    )


def test_a_taskmanager_rule_judges_each_taskmanager_on_its_own() -> None:
    heap = "flink_taskmanager_Status_JVM_Memory_Heap_Used"
    t = driven(kind="threshold", scope="tm", metric=heap, value=1e9, for_s=60)
    t.feed(*[metric(i * 15, heap, 2e9, job_id=None, job_name=None, tm_id="tm-1") for i in range(6)])
    (fired,) = t.alerts
    assert fired.entity == "tm:tm_1" and fired.tm_id == "tm-1"
    assert (
        fired.summary
        == "TaskManager tm-1: Status_JVM_Memory_Heap_Used max 2,000,000,000 > 1,000,000,000 for 60 s"
    )
