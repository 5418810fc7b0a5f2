"""Detectors: pure-Python state machines over parsed Flink events (no Spark here).

``REGISTRY`` is the one list of detectors; the config schema and the Spark
adapter are both derived from it. Adding a detector is one module plus one line.
"""

from typing import Any

from detectors.base import Detector, DetectorParams, Step
from detectors.checkpoint_creep import CheckpointCreep
from detectors.checkpoint_failures import CheckpointFailures
from detectors.checkpoint_state_growth import CheckpointStateGrowth
from detectors.idle_heap_growth import IdleHeapGrowth
from detectors.jm_k8s_watch_crash import JmK8sWatchCrash
from detectors.job_lost import JobLost
from detectors.jvm_fatal import JvmFatal
from detectors.late_barrier_acks import LateBarrierAcks
from detectors.model import Alert, AlertStatus, Event, Severity
from detectors.new_error_pattern import NewErrorPattern
from detectors.restart_storm import RestartStorm
from detectors.tm_lost import TmLost

REGISTRY: dict[str, type[Detector[Any, Any]]] = {
    d.name: d
    for d in (
        CheckpointCreep,
        CheckpointFailures,
        CheckpointStateGrowth,
        JvmFatal,
        IdleHeapGrowth,
        LateBarrierAcks,
        TmLost,
        JmK8sWatchCrash,
        JobLost,
        RestartStorm,
        NewErrorPattern,
    )
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
