"""Real Flink 2.3 runs replay to exactly the alerts their incidents call for, and no others.

Each directory under ``tests/data/real/`` holds one run of a real Flink job (its log and
its Prometheus scrapes as canonical metric records), a ``README.md`` saying how it was
made, and ``expected.json``: every alert of every detector a replay must give, and per
detector that fires the event time of its first symptom, so the time to detect is stated
next to it. Healthy and idle
runs expect none: a false alarm on real output fails here.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from streaming.cli import main

REAL = Path(__file__).resolve().parent.parent / "data" / "real"
RUNS = sorted(d for d in REAL.iterdir() if (d / "expected.json").exists())


def _ms(iso: str) -> int:
    return int(dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)


def test_every_run_says_how_it_was_made() -> None:
    assert len(RUNS) >= 5
    for run in RUNS:
        how = (run / "README.md").read_text()
        assert "capture_flink.py" in how and "apache-flink 2.3.0" in how, run.name


@pytest.mark.spark
@pytest.mark.parametrize("run", RUNS, ids=lambda d: d.name)
def test_a_real_run_gives_exactly_its_expected_alerts(spark, tmp_path, run: Path) -> None:
    expected = json.loads((run / "expected.json").read_text())
    out, dead = tmp_path / "alerts.jsonl", tmp_path / "dead"
    args = ["replay", "--output", str(out), "--deadletters", str(dead)]
    args += ["--logs", *map(str, sorted(run.glob("*.log")))]
    args += ["--metrics", *map(str, sorted(run.glob("*.jsonl")))]
    assert main(args) == 0
    # Every record of a real run parses, in either layout (ECS included).
    assert not list(dead.glob("*.jsonl")), [p.read_text()[:300] for p in dead.glob("*.jsonl")]
    got = sorted(
        (a["detector"], a["status"], a["event_time"])
        for a in map(json.loads, out.read_text().splitlines())
    )
    want = sorted((a["detector"], a["status"], a["event_time"]) for a in expected["alerts"])
    assert got == want
    # The stated time to detect is the one the replay gives.
    for a in expected["alerts"]:
        if a["status"] == "firing":
            onset = _ms(expected["symptoms"][a["detector"]])
            assert a["detect_s"] == round((_ms(a["event_time"]) - onset) / 1000, 1)
