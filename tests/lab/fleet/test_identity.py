"""Who one job is: its TaskManagers and its graph."""

from __future__ import annotations

from lab.fleet import FleetSpec, tm_id
from lab.fleet.identity import Identity


def test_every_taskmanager_runs_one_subtask_of_each_vertex() -> None:
    spec = FleetSpec(jobs=3, tms_per_job=3)
    ident = Identity(spec, 2)
    assert [tm.tm_id for tm in ident.tms] == [tm_id(spec, 2, k) for k in range(3)]
    assert len(ident.tasks) == 3 * 3
    for tm in ident.tms:
        on_tm = [t for t in ident.tasks if t.subtask == tm.index]
        assert sorted(t.vertex for t in on_tm) == [0, 1, 2]
        assert ident.stateful_task(tm) == next(t for t in on_tm if t.vertex == 2)
        assert tm.location == f"{tm.tm_id} @ {tm.host} (dataPort={tm.data_port})"
    assert [t.is_source for t in ident.tasks if t.subtask == 0] == [True, True, False]
