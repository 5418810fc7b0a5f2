"""Every scenario directory replays to exactly its expected alerts.

``tests/data/<detector>/`` holds Flink log files (``*.log``) and metric files
(``*.jsonl``) of one or more scenarios, and ``expected.json``: per file, the alerts
that a replay of the whole directory must produce (false-positive traps list none).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from detectors import REGISTRY
from streaming.cli import main

DATA = Path(__file__).resolve().parent.parent / "data"
SCENARIO_DIRS = sorted(d for d in DATA.iterdir() if (d / "expected.json").exists())


def test_every_detector_has_scenarios() -> None:
    assert {d.name for d in SCENARIO_DIRS} >= set(REGISTRY)


@pytest.mark.spark
@pytest.mark.parametrize("scenario_dir", SCENARIO_DIRS, ids=lambda d: d.name)
def test_replay_gives_exactly_the_expected_alerts(spark, tmp_path, scenario_dir: Path) -> None:
    expected = json.loads((scenario_dir / "expected.json").read_text())
    logs = sorted(str(p) for p in scenario_dir.glob("*.log"))
    metrics = sorted(str(p) for p in scenario_dir.glob("*.jsonl"))
    assert set(expected) == {Path(p).name for p in logs + metrics}, "expected.json lists every file"
    out = tmp_path / "alerts.jsonl"
    args = ["replay", "--output", str(out)]
    if logs:
        args += ["--logs", *logs]
    if metrics:
        args += ["--metrics", *metrics]
    assert main(args) == 0
    # Other detectors may rightly fire on the same files (an expiry streak is also a
    # checkpoint_failures incident); each directory pins its own detector's alerts.
    got = [json.loads(line) for line in out.read_text().splitlines()]

    def key(a: dict) -> tuple:
        entity = a.get("job_id") or a.get("tm_id")
        return (a["event_time"], a["status"], entity)

    want = sorted(
        (key(a) for alerts in expected.values() for a in alerts),
    )
    own = [a for a in got if a["detector"] == scenario_dir.name]
    mine = sorted(key(a) for a in own)
    assert mine == want
    # One incident, one alert_id: every resolve closes an earlier firing of the same id.
    fired: set[str] = set()
    for a in sorted(own, key=lambda a: (a["event_time"], a["status"] != "firing")):
        assert a["severity"] in {"info", "warning", "critical"}
        assert a["summary"] and isinstance(a["evidence"], dict) and a["evidence"]
        if a["status"] == "firing":
            fired.add(a["alert_id"])
        else:
            assert a["alert_id"] in fired
