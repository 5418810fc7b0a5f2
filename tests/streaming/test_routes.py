"""Which detector reads which event (``streaming/routes.py``): pure Python, no Spark."""

from __future__ import annotations

import json

import pytest

from detectors import REGISTRY, Event
from detectors.idle_heap_growth import HEAP_USED
from detectors.model import LAST_CHECKPOINT_DURATION
from streaming.routes import Interest, Routes, decode, interest, scope_of

JOB = "3f4c2a9b7d1e4f60a8b5c2d1e0f9a7b3"


def test_a_detector_naming_metrics_reads_those_metrics_only() -> None:
    heap = interest(REGISTRY["idle_heap_growth"])
    # Its kinds are "metric" alone: the names stand for it.
    assert heap.kinds == frozenset() and HEAP_USED in heap.metrics
    assert heap.reads("metric", HEAP_USED)
    assert not heap.reads("metric", "flink_taskmanager_Status_JVM_CPU_Load")
    assert not heap.reads("job_state", None)


def test_a_job_detector_that_reads_no_state_lines_still_wants_those_naming_the_job() -> None:
    failures = interest(REGISTRY["checkpoint_failures"])
    assert failures.names and not failures.reads("job_state", None)
    assert failures.wants("job_state", None, "orders-etl")
    assert not failures.wants("job_state", None, None)
    # A detector that reads the state lines gets them as any event it reads.
    storm = interest(REGISTRY["restart_storm"])
    assert not storm.names and storm.wants("job_state", None, None)
    # Only job detectors keep a name: a TaskManager's has none to keep.
    assert not interest(REGISTRY["jvm_fatal"]).names


def test_interest_is_the_same_value_for_the_same_declaration() -> None:
    assert interest(REGISTRY["jvm_fatal"]) == Interest(
        frozenset({"fatal_error", "jvm_oom"}), frozenset(), False
    )


@pytest.mark.parametrize(
    ("entity", "scope"),
    [(f"job:{JOB}", "job"), ("tm:container_e05_01_000003", "tm"), ("cluster", "cluster")],
)
def test_an_entity_key_names_its_scope(entity: str, scope: str) -> None:
    assert scope_of(entity) == scope


def test_routes_hand_an_event_to_the_enabled_detectors_of_its_scope_that_read_it() -> None:
    names = ["checkpoint_creep", "checkpoint_failures", "idle_heap_growth", "nope"]
    routes = Routes(names, REGISTRY)
    assert routes.detectors("job") == ("checkpoint_creep", "checkpoint_failures")
    assert routes.detectors("tm") == ("idle_heap_growth",)
    assert routes.detectors("cluster") == ()
    expired = Event("checkpoint_expired", 1, job_id=JOB)
    duration = Event("metric", 1, job_id=JOB, metric=LAST_CHECKPOINT_DURATION, value=1.0)
    heap = Event("metric", 1, tm_id="tm-1", metric=HEAP_USED, value=1.0)
    assert routes.of("job", expired) == ("checkpoint_creep", "checkpoint_failures")
    assert routes.of("job", duration) == ("checkpoint_creep",)
    assert routes.of("tm", heap) == ("idle_heap_growth",)
    assert routes.of("job", heap) == ()
    assert routes.of("job", expired) == ("checkpoint_creep", "checkpoint_failures")  # cached


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("not json", "Expecting value"),
        (json.dumps({"kind": "checkpoint_expired", "job_id": JOB}), "without 'event_ms'"),
        (json.dumps({"kind": "checkpoint_expired", "event_ms": 5}) + " {}", "Extra data"),
        ("5", "not a JSON object"),
        ('"checkpoint_expired"', "not a JSON object"),
        ('[{"kind": "checkpoint_expired"}]', "not a JSON object"),
    ],
)
def test_a_value_that_is_no_bus_event_is_refused(value: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        decode(value)


def test_white_space_around_a_value_is_read_past() -> None:
    value = json.dumps({"kind": "checkpoint_expired", "event_ms": 5, "job_id": JOB})
    assert decode(f" {value}\n") == decode(value)


def test_a_value_without_a_position_decodes_to_no_offset() -> None:
    e = decode(json.dumps({"kind": "checkpoint_expired", "event_ms": 5, "job_id": JOB}))
    assert e.event == Event("checkpoint_expired", 5, job_id=JOB)
    assert (e.src, e.offset, e.seq, e.bus_ms) == (None, -1, 0, None)
