"""Fixtures the sinks' tests share: the report scenario, recorded once per module."""

from __future__ import annotations

from pathlib import Path

import pytest

from sinks.reports.weekly import Report
from tests.sinks.reports.scenario import from_ledger, record_scenario


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The ten days of ``report_scenario``: the ledger's path and the alert file's."""
    return record_scenario(tmp_path_factory.mktemp("state"))


@pytest.fixture(scope="module")
def week(recorded: tuple[Path, Path]) -> Report:
    """The report of the ledger's last seven days."""
    return from_ledger(recorded[0])
