"""Every real shipper capture replays to what its Flink run pages, through every route.

Each folder under ``tests/data/shippers/`` has an ``expected.json``: per route (the
processes' own files, each shipper's topic), the log and metric files a replay reads and
every alert it must give, no more. A route that pages less than the files says why in the
folder's README and in the file's ``note`` (the KafkaAppender lost a dying TaskManager's
last lines).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streaming.cli import main

SHIPPERS = Path(__file__).resolve().parents[1] / "data" / "shippers"
CASES = [
    (folder, route, spec)
    for folder in sorted(d for d in SHIPPERS.iterdir() if (d / "expected.json").exists())
    for route, spec in json.loads((folder / "expected.json").read_text())["routes"].items()
]


def test_every_capture_has_its_expectations() -> None:
    folders = {f.name for f, _, _ in CASES}
    assert folders == {d.name for d in SHIPPERS.iterdir() if (d / "README.md").exists()}
    for folder, _, spec in CASES:
        for name in spec["logs"] + spec["metrics"]:
            assert (folder / name).is_file(), (folder.name, name)


@pytest.mark.spark
@pytest.mark.parametrize(
    ("folder", "route", "spec"), CASES, ids=[f"{f.name}:{r}" for f, r, _ in CASES]
)
def test_a_shipped_route_replays_to_its_runs_alerts(
    spark, tmp_path: Path, folder: Path, route: str, spec: dict
) -> None:
    out, dead = tmp_path / "alerts.jsonl", tmp_path / "dead"
    args = ["replay", "--output", str(out), "--deadletters", str(dead)]
    args += ["--logs", *[str(folder / n) for n in spec["logs"]]]
    args += ["--metrics", *[str(folder / n) for n in spec["metrics"]]]
    assert main(args) == 0
    # Every record a real shipper wrote reaches the detectors.
    assert not list(dead.glob("*.jsonl")), [p.read_text()[:300] for p in dead.glob("*.jsonl")]
    got = sorted(
        (a["detector"], a["status"], a["event_time"], a.get("tm_id") or a.get("job_id"))
        for a in map(json.loads, out.read_text().splitlines())
    )
    want = sorted(
        (a["detector"], a["status"], a["event_time"], a["entity"]) for a in spec["alerts"]
    )
    assert got == want
