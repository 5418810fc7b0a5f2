"""What the rule kinds' tests share: a rule from a dict, its detector, events."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from detectors.base import Event
from detectors.rules import Rule, rule_detector
from detectors.testing import DetectorTester

T0 = 1_700_000_000_000
BP = "flink_taskmanager_job_task_backPressuredTimeMsPerSecond"
RULE: TypeAdapter[Any] = TypeAdapter(Rule)


def rule(**fields: Any) -> Any:
    """A rule validated as the config validates it."""
    return RULE.validate_python({"name": "my_rule", **fields})


def driven(**fields: Any) -> DetectorTester[Any]:
    """A tester on the detector of a rule made from ``fields``."""
    r = rule(**fields)
    return DetectorTester(rule_detector(r)(r))


def metric(t_s: float, name: str, value: float, **labels: Any) -> Event:
    """A metric sample ``t_s`` seconds after T0 (job j1, orders, unless given)."""
    labels = {"job_id": "j1", "job_name": "orders"} | labels
    return Event("metric", T0 + int(t_s * 1000), metric=name, value=value, **labels)


def log(t_s: float, kind: str = "log_error", message: str = "boom", **labels: Any) -> Event:
    """A log event ``t_s`` seconds after T0."""
    labels = {"job_id": "j1", "job_name": "orders"} | labels
    return Event(kind, T0 + int(t_s * 1000), message=message, **labels)


def at(alert: Any) -> float:
    """An alert's time, seconds after T0."""
    return (alert.event_time_ms - T0) / 1000
