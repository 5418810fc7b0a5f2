"""What a job is doing now, and what is planned for it."""

from __future__ import annotations

import random
import re

from lab.fleet import FleetSpec
from lab.fleet.identity import Identity
from lab.fleet.state import NEVER, Agenda, RunState
from tests.lab.fleet.helpers import START_MS


def test_the_agenda_runs_actions_by_time_and_equal_times_as_planned() -> None:
    agenda, ran = Agenda(), []
    assert agenda.next_ms() == NEVER
    for t, name in ((30, "c"), (10, "a"), (30, "d"), (20, "b")):
        agenda.at(t, lambda name=name: ran.append(name))
    times = []
    while agenda.next_ms() != NEVER:
        times.append(agenda.next_ms())
        agenda.run_next()
    assert ran == ["a", "b", "c", "d"] and times == [10, 20, 30, 30]


def test_each_deployment_gives_every_task_a_new_attempt_id() -> None:
    for version, new_style in (("1.14", False), ("1.18", True)):
        ident = Identity(FleetSpec(jobs=1, flink_versions=(version,)), 0)
        state = RunState(ident, START_MS, random.Random(0))
        task = ident.tasks[0]
        assert state.attempt_id(task) == task.attempt_id
        seen = {task.attempt_id}
        for deployment in (1, 2):
            state.deployment, state.attempt_no = deployment, deployment
            aid = state.attempt_id(task)
            assert aid not in seen
            seen.add(aid)
            if new_style:  # 1.16+: <graph>_<vertex>_<subtask>_<attempt number>
                assert aid == f"{ident.graph_id}_{task.vertex_id}_0_{deployment}"
            else:
                assert re.fullmatch(r"[0-9a-f]{32}", aid)
