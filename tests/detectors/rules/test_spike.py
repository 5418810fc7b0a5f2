from __future__ import annotations

import pytest
from pydantic import ValidationError

from tests.detectors.rules.helpers import T0, driven, log, metric, rule

IN = "flink_taskmanager_job_task_numRecordsInPerSecond"


def spike(**extra):
    fields = {"kind": "spike", "kinds": ["log_warn"], "window_s": 600, "spike_height": 3}
    return driven(**(fields | extra))


def test_a_burst_of_warnings_against_a_steady_rate_pages() -> None:
    t = spike(min_count=10)
    t.feed(*[log(i * 60, kind="log_warn") for i in range(20)])  # 1 a minute for 20 min
    assert t.alerts == []
    t.feed(*[log(1200 + i * 5, kind="log_warn") for i in range(30)])  # then 12 a minute
    (fired,) = t.alerts
    assert fired.evidence["previous"] == 10
    assert "up 3x from 10 the 10 min before" in fired.summary


def test_one_to_three_does_not_page() -> None:
    # False-positive trap: a tripling of a trickle is below min_count.
    t = spike(min_count=10)
    t.feed(log(0, kind="log_warn"), log(700, kind="log_warn"))
    t.feed(*[log(1300 + i, kind="log_warn") for i in range(3)])
    assert t.alerts == []


def test_a_new_job_is_no_spike_from_zero() -> None:
    t = spike(min_count=5)
    t.feed(*[log(i, kind="log_warn") for i in range(50)])
    assert t.alerts == []


def test_a_drop_pages_by_timer_and_resolves_when_the_rate_returns() -> None:
    t = driven(
        kind="spike", metric=IN, window_s=600, spike_height=10, direction="down", min_value=100
    )
    t.feed(*[metric(i * 15, IN, 1000) for i in range(80)])  # 20 min at 1,000/s
    t.feed(*[metric(1200 + i * 15, IN, 10) for i in range(60)])  # then 10/s
    fired = t.alerts[0]
    assert fired.status.value == "firing"
    assert "numRecordsInPerSecond mean" in fired.summary and "down" in fired.summary
    t.feed(*[metric(2100 + i * 15, IN, 1000) for i in range(200)])
    assert t.alerts[-1].status.value == "resolved"


def test_state_stays_two_windows_of_buckets() -> None:
    t = spike()
    t.feed(*[log(i, kind="log_warn") for i in range(0, 5000, 3)])
    assert len(t.state.buckets) <= 20


def test_a_down_rule_stops_waking_once_both_windows_are_empty() -> None:
    t = spike(direction="down", min_count=1)
    t.feed(log(0, kind="log_warn"))
    assert t.timer == (T0 // 60_000 + 1) * 60_000  # the next bucket boundary: a drop pages by timer
    t.advance_to(T0 + 1500_000)
    assert t.state.buckets == [] and t.alerts == []
    assert t.timer == T0 + 6 * 3600_000  # only the idle deadline is left


def test_standing() -> None:
    t = spike()
    assert t.detector.standing(None) == "no log_warn from this job"
    t.feed(log(0, kind="log_warn"))
    assert t.detector.standing(t.state).startswith("watched for less than two windows of 10 min")


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"spike_height": 1}, "spike_height"),
        ({"window_s": 100_000}, "window_s"),
        ({"metric": IN}, "<root>"),  # a count and a metric
        ({"window_s": 20_000}, "<root>"),  # two windows longer than idle_ttl_s
        ({"pattern": "(?=Check)point"}, "pattern"),  # nor lookarounds
        ({"direction": "sideways"}, "direction"),
    ],
)
def test_refused_at_load(fields, field) -> None:
    base = {"kind": "spike", "kinds": ["log_warn"], "window_s": 600, "spike_height": 3}
    with pytest.raises(ValidationError) as exc:
        rule(**(base | fields))
    locs = [".".join(str(x) for x in e["loc"][1:]) or "<root>" for e in exc.value.errors()]
    assert field in locs


def test_an_up_rule_sets_no_timer_until_it_fires() -> None:
    t = spike()
    t.feed(*[log(i * 60, kind="log_warn") for i in range(5)])
    assert t.timer == t.state.last_event_ms + 6 * 3600_000
