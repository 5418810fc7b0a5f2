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
import tempfile
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from detectors import Event
from detectors.job_lost import JobLost, JobLostParams
from detectors.testing import drive
from streaming.cli import main
from streaming.metric_parsing import parse_metrics
from streaming.parsing import parse_logs
from streaming.sources import file_records, stage_files

REAL = Path(__file__).resolve().parent.parent / "data" / "real"
RUNS = sorted(d for d in REAL.iterdir() if (d / "expected.json").exists())


def _ms(iso: str) -> int:
    return int(dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)


def test_every_run_says_how_it_was_made() -> None:
    assert len(RUNS) >= 5
    for run in RUNS:
        how = (run / "README.md").read_text()
        script = "capture_flink.py" in how or "capture_cluster.py" in how
        assert script and "apache-flink 2.3.0" in how, run.name


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


@pytest.mark.spark
def test_a_cluster_stopped_altogether_pages_at_its_silence_deadline_once_time_moves(spark) -> None:
    # cluster_stopped_2_3 replays to no alert: nothing after its last record moves event
    # time. Its own records, driven past the end as a clock in the detect query would,
    # page at the job's last record + silence_s.
    run = REAL / "cluster_stopped_2_3"
    det = JobLost(JobLostParams())
    with tempfile.TemporaryDirectory() as tmp:
        logs = stage_files(sorted(run.glob("*.log")), Path(tmp) / "logs")
        metrics = stage_files(sorted(run.glob("*.jsonl")), Path(tmp) / "metrics")
        parsed = parse_logs(file_records(spark, logs, kind="log", stream=False)).unionByName(
            parse_metrics(file_records(spark, metrics, kind="metric", stream=False))
        )
        wanted = F.col("kind").isin(*det.kinds) & F.col("job_id").isNotNull()
        wanted &= (F.col("kind") != "metric") | F.col("metric").isin(*det.metrics)
        rows = (
            parsed.where(wanted)
            .select("*", F.unix_millis("event_time").alias("ms"))
            .orderBy("ms", "topic", "offset")
            .collect()
        )
    names = [n for n in Event._fields if n not in ("kind", "time_ms")]
    events = [Event(r["kind"], r["ms"], **{n: r[n] for n in names}) for r in rows]
    last = events[-1].time_ms  # the last scrape of its gauges, after its last checkpoint line
    assert any(e.to_state == "RUNNING" for e in events)
    assert last >= _ms("2026-11-23T04:43:17.656Z")
    _, alerts = drive(det, events, until=last + 3600 * 1000)
    assert [(a.status.value, a.event_time_ms - last) for a in alerts] == [("firing", 180_000)]
    assert alerts[0].evidence["why"] == "silence"
    assert alerts[0].evidence["last_state"] == "RUNNING"
