"""The local Prometheus and Alertmanager's configs, as the bench and the tests write them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.promserver import AlertmanagerServer


@pytest.mark.parametrize(("group_wait", "written"), [(None, None), (0.0, "0s"), (30.0, "30s")])
def test_alertmanager_group_wait_is_written_as_alertmanager_reads_it(
    tmp_path: Path, group_wait: float | None, written: str | None
) -> None:
    am = AlertmanagerServer(Path("alertmanager"), tmp_path, "http://slack/hook", "#c", group_wait)
    route = json.loads(am.write_config().read_text())["route"]
    assert route.get("group_wait") == written  # None: Alertmanager's own default, 30 s
