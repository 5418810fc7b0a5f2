"""``flinkwatch replay --report``: a real run's incident on a page, its charts beside it."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from matplotlib import image

from streaming.cli import main

REAL = Path(__file__).resolve().parents[2] / "data" / "real"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.mark.spark
def test_a_real_run_replayed_with_a_report_lists_its_incident_with_valid_charts(
    spark, tmp_path
) -> None:
    # expiry_2_3: one job whose checkpoints slow down, grow, expire and get late acks.
    run = REAL / "expiry_2_3"
    expected = json.loads((run / "expected.json").read_text())
    out, report = tmp_path / "alerts.jsonl", tmp_path / "report"
    args = ["replay", "--output", str(out), "--report", str(report)]
    args += ["--logs", *map(str, sorted(run.glob("*.log")))]
    args += ["--metrics", *map(str, sorted(run.glob("*.jsonl")))]
    assert main(args) == 0
    page = (report / "index.html").read_text(encoding="utf-8")
    # Every alert the run calls for, in one incident about its job.
    assert page.count("<section") == 1
    for alert in expected["alerts"]:
        assert f"<td>{alert['detector']}</td>" in page
        assert alert["event_time"] in page
    records = [json.loads(line) for line in out.read_text().splitlines()]
    job = records[0]["job_name"] or records[0]["job_id"]
    assert f"job {job}" in page and 'class="headline"' in page
    # The incident's chart and one per member, each a valid 720 x 360 PNG.
    pictures = re.findall(r'<img src="([^"]+)"', page)
    assert len(pictures) == 1 + len(expected["alerts"])
    assert pictures[0].startswith("incident-")
    assert {f"{r['alert_id']}.png" for r in records} == set(pictures[1:])
    for name in pictures:
        data = (report / name).read_bytes()
        assert data[:8] == PNG_MAGIC and 5_000 < len(data) < 150_000
        assert image.imread(io.BytesIO(data), format="png").shape[:2] == (360, 720)
