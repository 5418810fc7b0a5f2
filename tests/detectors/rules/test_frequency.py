from __future__ import annotations

import pytest
from pydantic import ValidationError

from tests.detectors.rules.helpers import at, driven, log, rule


def errors(**extra):
    fields = {"kind": "frequency", "kinds": ["log_error"], "count": 5, "window_s": 600} | extra
    return driven(**fields)


def test_fires_at_count_within_the_window_and_resolves_when_fewer() -> None:
    t = errors()
    t.feed(*[log(i * 60, message=f"Sink failed {i}") for i in range(5)])
    (fired,) = t.alerts
    assert at(fired) == 240
    assert fired.summary == "job orders: 5 log_error in 10 min"
    assert fired.evidence["example"] == "Sink failed 4"
    t.advance_to(log(3600).time_ms)
    resolved = t.alerts[-1]
    # the first error leaves the window at 600 s; the condition clear for 300 s more
    assert resolved.status.value == "resolved" and at(resolved) == 600 + 300


def test_spread_out_errors_never_page() -> None:
    # False-positive trap: one error every 3 minutes is 4 per 10 minutes, forever.
    t = errors()
    t.feed(*[log(i * 180) for i in range(100)])
    assert t.alerts == []
    assert len(t.state.times_ms) <= 5


def test_the_pattern_is_searched_in_the_message() -> None:
    t = errors(kinds=[], pattern="(?i)timeout", count=2)
    t.feed(log(0, message="all fine"), log(1, kind="log_warn", message="Request TIMEOUT"))
    assert t.alerts == []
    t.feed(log(2, message="Timeout waiting for sink"))
    assert len(t.alerts) == 1 and "matching /(?i)timeout/" in t.alerts[0].summary


def test_a_pattern_rule_travels_to_a_worker_as_its_text_and_counts_the_same() -> None:
    import pickle

    from pyspark import cloudpickle

    from detectors.testing import DetectorTester

    t = errors(kinds=[], pattern=r"Sink \w+ failed", count=2)
    t.feed(log(0, message="Sink orders failed"))  # the pattern compiled in this process
    again = DetectorTester(pickle.loads(cloudpickle.dumps(t.detector)))
    for tester in (t, again):
        tester.feed(log(1, message="Sink x failed"), log(2, message="Sink  failed"))
    assert len(t.alerts) == 1 and len(again.alerts) == 0  # the copy saw one match
    again.feed(log(3, message="Sink y failed"))
    assert len(again.alerts) == 1


def test_other_kinds_start_no_state() -> None:
    t = errors()
    t.feed(log(0, kind="log_warn"))
    assert t.state is None


def test_standing() -> None:
    t = errors()
    assert t.detector.standing(None) == "no log_error from this job"
    t.feed(log(0), log(30), log(60))
    assert t.detector.standing(t.state) == "3 of 5 log_error in the last 10 min"
    t.feed(log(90), log(120))
    assert t.detector.standing(t.state) == (
        "FIRING since 2023-11-14T22:15:20Z (0 s); 5 of 5 log_error in the last 10 min"
    )


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"count": 100_000}, "count"),
        ({"window_s": 200_000}, "window_s"),
        ({"kinds": ["metric"]}, "kinds"),
        ({"kinds": ["log_debug"]}, "kinds"),
        ({"pattern": r"(a)\1"}, "pattern"),  # RE2 has no backreferences
        ({"kinds": [], "pattern": None}, "<root>"),
        ({"name": "Bad Name"}, "name"),
    ],
)
def test_refused_at_load(fields, field) -> None:
    base = {"kind": "frequency", "kinds": ["log_error"], "count": 5, "window_s": 600}
    with pytest.raises(ValidationError) as exc:
        rule(**(base | fields))
    locs = [".".join(str(x) for x in e["loc"][1:]) or "<root>" for e in exc.value.errors()]
    assert field in locs
