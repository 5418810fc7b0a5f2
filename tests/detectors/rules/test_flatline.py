from __future__ import annotations

import pytest
from pydantic import ValidationError

from detectors.base import Event
from tests.detectors.rules.helpers import T0, at, driven, log, metric, rule

OUT = "flink_taskmanager_job_task_numRecordsOutPerSecond"


def flat(**extra):
    return driven(**({"kind": "flatline", "metric": OUT, "for_s": 300} | extra))


def test_fires_when_the_metric_stops_and_resolves_when_it_comes_back() -> None:
    t = flat()
    t.feed(*[metric(i * 15, OUT, 10) for i in range(10)])  # until 135 s
    assert t.timer == T0 + (135 + 300) * 1000
    t.advance_to(T0 + 1000 * 1000)  # the runner's clock passes: nothing came
    (fired,) = t.alerts
    assert at(fired) == 435
    assert fired.summary == "job orders: no numRecordsOutPerSecond for 5 min"
    t.feed(metric(1200, OUT, 10))
    resolved = t.alerts[-1]
    assert (
        resolved.status.value == "resolved"
        and resolved.summary == "job orders: numRecordsOutPerSecond back after 18 min"
    )


def test_a_steady_metric_never_pages() -> None:
    t = flat()
    t.feed(*[metric(i * 60, OUT, 0) for i in range(100)])  # a zero value still arrives
    assert t.alerts == []


def test_a_job_that_ends_is_no_flatline() -> None:
    t = flat()
    t.feed(metric(0, OUT, 10))
    t.feed(Event("job_state", T0 + 10_000, job_id="j1", from_state="RUNNING", to_state="CANCELED"))
    assert t.state is None
    t.advance_to(T0 + 3600_000)
    assert t.alerts == []


def test_a_job_that_ends_while_firing_resolves_saying_so() -> None:
    t = flat()
    t.feed(metric(0, OUT, 10))
    t.advance_to(T0 + 400_000)
    t.feed(Event("job_state", T0 + 500_000, job_id="j1", from_state="RUNNING", to_state="FINISHED"))
    assert [a.status.value for a in t.alerts] == ["firing", "resolved"]
    assert t.alerts[-1].summary == "job orders: job FINISHED, no longer watched"


def test_job_state_alone_starts_no_watch() -> None:
    t = flat()
    t.feed(Event("job_state", T0, job_id="j1", from_state="CREATED", to_state="RUNNING"))
    assert t.state is None


def test_a_log_kind_can_flatline_too() -> None:
    t = flat(metric=None, kinds=["checkpoint_completed"], for_s=600)
    t.feed(*[log(i * 60, kind="checkpoint_completed") for i in range(5)])
    t.advance_to(T0 + 2000_000)
    assert [at(a) for a in t.alerts] == [240 + 600]


def test_an_entity_gone_idle_resolves_after_idle_ttl() -> None:
    t = flat(idle_ttl_s=3600)
    t.feed(metric(0, OUT, 1))
    t.advance_to(T0 + 5000_000)
    assert [(a.status.value, at(a)) for a in t.alerts] == [("firing", 300), ("resolved", 3600)]


def test_standing() -> None:
    t = flat()
    assert t.detector.standing(None) == (
        "not watched: no flink_taskmanager_job_task_numRecordsOutPerSecond from this job yet, "
        "or it ended"
    )
    t.feed(metric(0, OUT, 1))
    assert t.detector.standing(t.state) == (
        "numRecordsOutPerSecond last at 2023-11-14T22:13:20Z; fires at 2023-11-14T22:18:20Z if none comes"
    )
    t.advance_to(T0 + 400_000)
    assert t.detector.standing(t.state) == (
        "FIRING since 2023-11-14T22:18:20Z; no numRecordsOutPerSecond since 2023-11-14T22:13:20Z; "
        "resolves when one comes"
    )


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"for_s": 100_000}, "for_s"),
        ({"for_s": 7200, "idle_ttl_s": 3600}, "<root>"),
        ({"kinds": ["log_error"]}, "<root>"),  # both metric and kinds
        ({"match": {"host": "(?<=tm-)\\d+"}}, "match.host"),  # RE2 has no lookbehind
    ],
)
def test_refused_at_load(fields, field) -> None:
    with pytest.raises(ValidationError) as exc:
        rule(**({"kind": "flatline", "metric": OUT, "for_s": 300} | fields))
    locs = [".".join(str(x) for x in e["loc"][1:]) or "<root>" for e in exc.value.errors()]
    assert field in locs
