"""Rules: detectors an operator writes in the config (``rules:``), no Python.

Four kinds, each a pydantic model (the rule) and a detector class made from it:
``threshold`` (:mod:`~detectors.rules.threshold`), ``frequency``
(:mod:`~detectors.rules.frequency`), ``flatline`` (:mod:`~detectors.rules.flatline`) and
``spike`` (:mod:`~detectors.rules.spike`). :data:`Rule` is the config's union of them, told
apart by ``kind``; :func:`rule_detector` gives a rule's detector class, which the runner
runs like a registered detector (``cls(rule)``). ``docs/rules.md`` describes each kind.

Example:
    >>> from pydantic import TypeAdapter
    >>> rule = TypeAdapter(Rule).validate_python({
    ...     "name": "backpressure", "kind": "threshold",
    ...     "metric": "flink_taskmanager_job_task_backPressuredTimeMsPerSecond",
    ...     "value": 800, "for_s": 600})
    >>> det = rule_detector(rule)
    >>> det.name, det.scope, sorted(det.metrics)
    ('backpressure', 'job', ['flink_taskmanager_job_task_backPressuredTimeMsPerSecond'])
    >>> det is rule_detector(rule)
    True
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from detectors.base import Detector
from detectors.rules.base import RuleDetector
from detectors.rules.flatline import FlatlineDetector, FlatlineRule
from detectors.rules.frequency import FrequencyDetector, FrequencyRule
from detectors.rules.params import RuleParams
from detectors.rules.regex import UnsafePattern, check_pattern
from detectors.rules.spike import SpikeDetector, SpikeRule
from detectors.rules.threshold import MetricCondition, ThresholdDetector, ThresholdRule

Rule = Annotated[
    ThresholdRule | FrequencyRule | FlatlineRule | SpikeRule, Field(discriminator="kind")
]

#: Each rule kind's detector class (the class of one rule is made from it).
KINDS: dict[str, type[RuleDetector[Any, Any]]] = {
    "threshold": ThresholdDetector,
    "frequency": FrequencyDetector,
    "flatline": FlatlineDetector,
    "spike": SpikeDetector,
}

#: One class per distinct rule (by its JSON), so a rule read again (a reload that did not
#: change it, an executor unpickling its parameters) is the same detector. Bounded: a
#: config holds a few rules, reloads change some.
_CLASSES: dict[str, type[Detector[Any, Any]]] = {}
_MAX_CLASSES = 1000


def rule_detector(rule: RuleParams) -> type[Detector[Any, Any]]:
    """The detector class of ``rule``: ``name``, ``scope``, ``kinds``, ``metrics`` from the rule.

    Made once per distinct rule and kept; the same rule gives the same class.
    """
    key = f"{type(rule).__qualname__}:{rule.model_dump_json()}"
    made = _CLASSES.get(key)
    if made is None:
        if len(_CLASSES) >= _MAX_CLASSES:
            _CLASSES.clear()
        made = KINDS[rule.kind].for_rule(rule)
        _CLASSES[key] = made
    return made


__all__ = [
    "KINDS",
    "FlatlineRule",
    "FrequencyRule",
    "MetricCondition",
    "Rule",
    "RuleParams",
    "SpikeRule",
    "ThresholdRule",
    "UnsafePattern",
    "check_pattern",
    "rule_detector",
]
