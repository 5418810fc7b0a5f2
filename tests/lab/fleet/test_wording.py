"""Each Flink version's wording of its checkpoint lines."""

from __future__ import annotations

import re

import pytest

from lab.fleet import FleetSpec
from tests.lab.fleet.helpers import (
    messages,
    run,
)

J = r"[0-9a-f]{32}"


WORDING = {
    "1.9": (
        rf"^Triggering checkpoint (\d+) @ (\d{{13}}) for job {J}\.$",
        rf"^Completed checkpoint (\d+) for job {J} \((\d+) bytes in (\d+) ms\)\.$",
    ),
    "1.11": (
        rf"^Triggering checkpoint (\d+) \(type=CHECKPOINT\) @ (\d{{13}}) for job {J}\.$",
        rf"^Completed checkpoint (\d+) for job {J} \((\d+) bytes in (\d+) ms\)\.$",
    ),
    "1.14": (
        rf"^Triggering checkpoint (\d+) \(type=CHECKPOINT\) @ (\d{{13}}) for job {J}\.$",
        rf"^Completed checkpoint (\d+) for job {J} \((\d+) bytes, checkpointDuration=(\d+) ms, "
        r"finalizationTime=\d+ ms\)\.$",
    ),
    "1.18": (
        r"^Triggering checkpoint (\d+) \(type=CheckpointType\{name='Checkpoint', "
        rf"sharingFilesStrategy=FORWARD_BACKWARD\}}\) @ (\d{{13}}) for job {J}\.$",
        rf"^Completed checkpoint (\d+) for job {J} \((\d+) bytes, checkpointDuration=(\d+) ms, "
        r"finalizationTime=\d+ ms\)\.$",
    ),
}


WORDING["2.0"] = WORDING["1.18"]


@pytest.mark.parametrize("version", sorted(WORDING))
def test_checkpoints_use_the_wording_of_the_jobs_version(version: str) -> None:
    spec = FleetSpec(jobs=1, flink_versions=(version,))
    logs = [r for r in run(spec, 300) if r.stream == "log"]
    trigger_rx, completed_rx = WORDING[version]
    triggers = messages(logs, r"^Triggering checkpoint")
    completed = messages(logs, r"^Completed checkpoint")
    assert len(triggers) >= 25 and len(completed) >= 25
    assert all(re.match(trigger_rx, m.string) for _, m in triggers), triggers[0][1].string
    assert all(re.match(completed_rx, m.string) for _, m in completed), completed[0][1].string
    for r, m in triggers:
        assert 0 <= r.time_ms - int(re.match(trigger_rx, m.string)[2]) < 10  # "@ <trigger ts>"
    ids = [int(re.match(completed_rx, m.string)[1]) for _, m in completed]
    assert ids == list(range(1, len(ids) + 1))
