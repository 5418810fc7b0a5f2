"""Who is who: job ids and names, TaskManager ids per deployment."""

from __future__ import annotations

import re

from lab import fleet as sim
from lab.fleet import FleetSpec, job_id, tm_id


def test_job_ids_are_distinct_32_hex() -> None:
    spec = FleetSpec(jobs=50)
    ids = [job_id(spec, i) for i in range(50)]
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)
    assert len(set(ids)) == 50


def test_taskmanager_ids_are_yarn_containers_or_kubernetes_pods() -> None:
    spec = FleetSpec(jobs=4)
    assert re.fullmatch(r"container_e05_\d{13}_0040_01_000003", tm_id(spec, 0, 1))
    assert tm_id(spec, 2, 1) == "clickstream-sessionizer-2-taskmanager-1-2"
    assert sim.job_name(spec, 0) == "orders-enrichment-0"
