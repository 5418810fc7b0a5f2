"""Detectors: pure-Python state machines over parsed Flink events (no Spark here).

``REGISTRY`` is the one list of detectors; the config schema and the Spark
adapter are both derived from it. Adding a detector is one module plus one line.
"""

from typing import Any

from detectors.base import Alert, AlertStatus, Detector, DetectorParams, Event, Severity, Step
from detectors.checkpoint_creep import CheckpointCreep
from detectors.checkpoint_failures import CheckpointFailures
from detectors.idle_heap_growth import IdleHeapGrowth
from detectors.late_barrier_acks import LateBarrierAcks

REGISTRY: dict[str, type[Detector[Any]]] = {
    d.name: d for d in (CheckpointCreep, CheckpointFailures, IdleHeapGrowth, LateBarrierAcks)
}

__all__ = [
    "REGISTRY",
    "Alert",
    "AlertStatus",
    "Detector",
    "DetectorParams",
    "Event",
    "Severity",
    "Step",
]
