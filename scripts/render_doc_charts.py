"""Render the charts of docs/charts.md from the real Flink runs in ``tests/data/real/``.

Each run a chart comes from is replayed with ``flinkwatch replay --report`` (Spark, local,
about half a minute a run); the chart of the named detector's alert, and for a run whose
alerts form one incident the incident's chart, are copied to ``docs/images/``::

    .venv/bin/python scripts/render_doc_charts.py

The charts are the ones a replay writes, byte for byte: after a change to a chart, a
detector's evidence or a real run, run this again and commit the images.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
REAL = REPO / "tests" / "data" / "real"
IMAGES = REPO / "docs" / "images"

#: Run → the detectors whose chart docs/charts.md shows from it (``incident``: the run's
#: incident of several alerts). Each detector once; docs/charts.md names the run.
SHOWN: dict[str, tuple[str, ...]] = {
    "expiry_2_3": (
        "checkpoint_creep",
        "checkpoint_failures",
        "late_barrier_acks",
        "incident",
    ),
    "growth_2_3": ("checkpoint_state_growth",),
    "crashloop_2_3": ("restart_storm",),
    "jm_killed_2_3": ("job_lost",),
}


def replay(run: Path, work: Path) -> tuple[list[dict[str, object]], Path]:
    """Replay one real run with a report: its alert records and the report's directory."""
    from streaming.cli import main

    out, report = work / f"{run.name}.jsonl", work / run.name
    args = ["replay", "--output", str(out), "--report", str(report)]
    args += ["--logs", *map(str, sorted(run.glob("*.log")))]
    args += ["--metrics", *map(str, sorted(run.glob("*.jsonl")))]
    if main(args) != 0:
        msg = f"replay of {run.name} failed"
        raise SystemExit(msg)
    return [json.loads(line) for line in out.read_text().splitlines()], report


def render(run_name: str, detectors: tuple[str, ...], work: Path) -> list[Path]:
    """The run's charts of ``detectors``, copied to docs/images/<detector>.png."""
    records, report = replay(REAL / run_name, work)
    written = []
    for detector in detectors:
        if detector == "incident":
            found = sorted(report.glob("incident-*.png"))
            if len(found) != 1:
                msg = f"{run_name}: {len(found)} incidents of several alerts, expected one"
                raise SystemExit(msg)
            source = found[0]
        else:
            ids = [r["alert_id"] for r in records if r["detector"] == detector]
            if not ids:
                msg = f"{run_name}: no {detector} alert; docs/charts.md must say so"
                raise SystemExit(msg)
            source = report / f"{ids[0]}.png"
        target = IMAGES / f"{detector}.png"
        shutil.copyfile(source, target)
        written.append(target)
    return written


def main() -> int:
    """Render every chart docs/charts.md shows."""
    sys.path.insert(0, str(REPO))
    IMAGES.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="flinkwatch-doc-charts-") as tmp:
        for run_name, detectors in SHOWN.items():
            for path in render(run_name, detectors, Path(tmp)):
                print(f"{path.relative_to(REPO)}: {path.stat().st_size:,} bytes ({run_name})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
