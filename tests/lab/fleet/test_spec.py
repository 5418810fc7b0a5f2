"""The fleet's spec: incident kinds, and the specs it refuses."""

from __future__ import annotations

from typing import get_args

import pytest

from lab import fleet as sim
from lab.fleet import FleetSpec, Incident


def test_incident_kinds_are_the_literal_ones() -> None:
    assert (
        set(get_args(sim.IncidentKind))
        == sim.INCIDENT_KINDS
        == {
            "checkpoint_expiry",
            "checkpoint_creep",
            "idle_heap_leak",
            "late_acks_skew",
            "checkpoint_declines",
            "state_growth",
            "tm_memory_kill",
            "tm_heap_oom",
            "tm_direct_oom",
            "tm_metaspace_oom",
            "k8s_watch_crash",
            "k8s_watch_crash_no_ha",
            "restart_storm",
            "new_error",
        }
    )


def test_a_job_takes_one_incident_that_fails_it_over() -> None:
    with pytest.raises(ValueError, match="more than one incident that fails it over"):
        FleetSpec(
            jobs=2, incidents=(Incident("tm_heap_oom", 1, 10.0), Incident("restart_storm", 1, 90.0))
        )
    # Checkpoint incidents combine with one that fails the job over.
    FleetSpec(
        jobs=2,
        incidents=(Incident("checkpoint_declines", 1, 10.0), Incident("restart_storm", 1, 90.0)),
    )


@pytest.mark.parametrize("versions", [("1.14",) * 4, ("1.11",) * 4], ids=["too-new", "on-yarn"])
def test_watch_crash_is_refused_where_flink_does_not_crash(versions: tuple[str, ...]) -> None:
    job = 3 if versions[0] == "1.14" else 1
    with pytest.raises(ValueError, match="needs a job on Kubernetes"):
        FleetSpec(
            jobs=4, flink_versions=versions, incidents=(Incident("k8s_watch_crash", job, 1.0),)
        )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"incidents": (Incident("checkpoint_expiry", 3, 10.0),)},  # job 3 of a 3-job fleet
        {"incidents": (Incident("disk_full", 0, 10.0),)},  # type: ignore[arg-type]
        {"flink_versions": ("1.4",)},
        {"flink_versions": ("latest",)},
        {"checkpoint_interval_s": 0},
        {"tms_per_job": 0},
        {"tms_per_job": 1, "incidents": (Incident("late_acks_skew", 0, 10.0),)},
        {"heap_leak_mb_per_h": 0},
        {"creep_per_checkpoint": -0.05},
    ],
    ids=[
        "job-out-of-range",
        "unknown-kind",
        "too-old",
        "not-a-version",
        "zero-interval",
        "no-tms",
        "skew-without-other-tms",
        "no-leak",
        "negative-creep",
    ],
)
def test_bad_specs_are_refused(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        FleetSpec(**kwargs)
