from __future__ import annotations

import pickle

from pyspark import cloudpickle

from detectors.rules import rule_detector
from detectors.rules.threshold import ThresholdDetector, ThresholdRule
from detectors.testing import DetectorTester
from tests.detectors.rules.helpers import BP, metric, rule


def test_a_rule_class_takes_its_class_variables_from_the_rule() -> None:
    r = rule(kind="threshold", scope="tm", metric=BP, value=1, runbook="Look at the sink.")
    det = rule_detector(r)
    assert issubclass(det, ThresholdDetector)
    assert (det.name, det.scope, det.kinds, det.metrics) == ("my_rule", "tm", {"metric"}, {BP})
    assert det.profile.runbook == "Look at the sink."
    assert det.params_model is ThresholdRule
    assert det.state_model.__name__ == "ThresholdState"


def test_the_same_rule_gives_the_same_class_and_a_changed_one_another() -> None:
    a = rule(kind="threshold", metric=BP, value=1)
    assert rule_detector(a) is rule_detector(rule(kind="threshold", metric=BP, value=1))
    assert rule_detector(a) is not rule_detector(rule(kind="threshold", metric=BP, value=2))


def test_a_rule_detector_travels_by_cloudpickle_and_judges_the_same() -> None:
    r = rule(kind="threshold", metric=BP, value=1)
    det = rule_detector(r)(r)
    again = pickle.loads(cloudpickle.dumps(det))
    assert again.name == "my_rule" and again.params == r
    a, b = DetectorTester(det), DetectorTester(again)
    ev = metric(0, BP, 5)
    assert [x.summary for x in a.feed(ev)] == [x.summary for x in b.feed(ev)]


def test_a_job_scope_rule_leaves_an_unnamed_job_unwatched_when_it_filters_by_name() -> None:
    r = rule(kind="threshold", metric=BP, value=1, job_name="orders")
    t = DetectorTester(rule_detector(r)(r))
    t.feed(metric(0, BP, 5, job_name=None))
    assert t.state is None
    t.feed(metric(1, BP, 5))
    assert len(t.alerts) == 1


def test_the_examples_in_the_rules_docstrings_hold() -> None:
    import doctest

    import detectors.rules
    import detectors.rules.params
    import detectors.rules.regex

    for module in (detectors.rules, detectors.rules.params, detectors.rules.regex):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__
