"""Generating a fleet: deterministic, lazy, in event-time order; each job's start-up."""

from __future__ import annotations

import pytest

from lab.fleet import FleetSpec, Incident, generate, job_id, tm_id
from tests.lab.fleet.helpers import (
    START_MS,
    by_job,
    messages,
    run,
)


def test_same_spec_and_start_give_the_same_bytes() -> None:
    spec = FleetSpec(jobs=4, incidents=(Incident("checkpoint_expiry", 1, 30.0),))
    assert run(spec, 120) == run(spec, 120)


def test_another_seed_gives_another_fleet() -> None:
    a, b = FleetSpec(seed=1), FleetSpec(seed=2)
    assert job_id(a, 0) != job_id(b, 0)
    assert [r.value for r in run(a, 60)] != [r.value for r in run(b, 60)]


def test_records_are_in_event_time_order_inside_the_window(fleet) -> None:
    _, records = fleet
    times = [r.time_ms for r in records]
    assert times == sorted(times)
    assert START_MS <= times[0] and times[-1] < START_MS + 900_000


def test_generation_is_lazy() -> None:
    # A day of a big fleet: only the first records are ever built.
    it = generate(FleetSpec(jobs=200), START_MS, 86_400)
    first = [next(it) for _ in range(100)]
    assert all(r.time_ms < START_MS + 60_000 for r in first)


def test_jobs_start_with_their_tasks_switching_to_running(fleet) -> None:
    spec, records = fleet
    logs = by_job(spec, records, "log")
    for i, path in ((0, "DEPLOYING to RUNNING"), (2, "INITIALIZING to RUNNING")):
        job = messages(logs[i], r"switched from state CREATED to RUNNING\.$")
        assert len(job) == 1
        running = messages(
            logs[i], r"^(.+) \((\d)/2\) \(([0-9a-f_]+)\) switched from (\w+) to RUNNING\.$"
        )
        assert len(running) == 3 * spec.tms_per_job  # every subtask of the three vertices
        assert all(f"{m[4]} to RUNNING" == path for _, m in running)
        first_trigger = messages(logs[i], r"^Triggering checkpoint 1 ")[0][0]
        assert max(r.time_ms for r, _ in running) <= first_trigger.time_ms


def test_fleets_with_first_job_run_side_by_side() -> None:
    """Jobs 5-6 of a fleet that starts at 5 are jobs 5-6 of a bigger one: same ids, same records."""
    small = FleetSpec(jobs=2, first_job=5, incidents=(Incident("tm_memory_kill", 6, 60.0),))
    big = FleetSpec(jobs=7, incidents=(Incident("tm_memory_kill", 6, 60.0),))
    keys = {job_id(big, i).encode() for i in (5, 6)} | {
        tm_id(big, i, k).encode() for i in (5, 6) for k in range(2)
    }
    keys.add(tm_id(big, 6, 2).encode())  # job 6's replacement TaskManager
    records = run(small, 300)
    assert records == [r for r in run(big, 300) if r.key in keys]
    assert {r.key for r in records} == keys
    with pytest.raises(ValueError, match="not one of the fleet's jobs 5..6"):
        FleetSpec(jobs=2, first_job=5, incidents=(Incident("tm_heap_oom", 0, 1.0),))
