"""Fixtures of the fleet simulator's tests."""

from __future__ import annotations

import pytest

from lab.fleet import FleetSpec, Incident, SimRecord
from tests.lab.fleet.helpers import run


@pytest.fixture(scope="module")
def fleet() -> tuple[FleetSpec, list[SimRecord]]:
    """Four jobs (every layout, versions 1.11/1.14/1.18/2.0), job 2 with expiring checkpoints."""
    spec = FleetSpec(jobs=4, incidents=(Incident("checkpoint_expiry", 2, 200.0),))
    return spec, run(spec, 900)
