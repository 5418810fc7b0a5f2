"""A real Flink 2.3 run (``tests/data/real/``) as the detectors see it, for the rules' tests.

``metric_events`` reads a run's metric records in plain Python (the labels the parser keeps,
``task`` as it builds it); ``parsed_events`` runs the run's logs and metrics through the
parser on Spark, as ``flinkwatch replay`` does.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from detectors.base import Event

REAL = Path(__file__).resolve().parents[2] / "data" / "real"


def metric_events(run: str) -> list[Event]:
    """A run's metric records as metric events, in time order."""
    out = []
    for path in sorted((REAL / run).glob("*.jsonl")):
        for line in path.read_text().splitlines():
            r = json.loads(line)
            lab = r["labels"]
            task = lab.get("operator_name")
            if lab.get("task_name"):
                task = f"{lab['task_name']}/{lab.get('subtask_index')}"
            out.append(
                Event(
                    "metric",
                    r["timestamp"],
                    job_id=lab.get("job_id"),
                    job_name=lab.get("job_name"),
                    tm_id=lab.get("tm_id"),
                    host=lab.get("host"),
                    task=task,
                    metric=r["name"],
                    value=r["value"],
                )
            )
    return sorted(out, key=lambda e: e.time_ms)


def parsed_events(spark: Any, run: str) -> list[Event]:
    """A run's logs and metrics through the parser (Spark), every event naming a job, in order."""
    from pyspark.sql import functions as F

    from streaming.metric_parsing import parse_metrics
    from streaming.parsing import parse_logs
    from streaming.sources import file_records, stage_files

    d = REAL / run
    with tempfile.TemporaryDirectory() as tmp:
        logs = stage_files(sorted(d.glob("*.log")), Path(tmp) / "logs")
        metrics = stage_files(sorted(d.glob("*.jsonl")), Path(tmp) / "metrics")
        parsed = parse_logs(file_records(spark, logs, kind="log", stream=False)).unionByName(
            parse_metrics(file_records(spark, metrics, kind="metric", stream=False))
        )
        rows = (
            parsed.where(F.col("job_id").isNotNull())
            .select("*", F.unix_millis("event_time").alias("ms"))
            .orderBy("ms", "topic", "offset")
            .collect()
        )
    names = [n for n in Event._fields if n not in ("kind", "time_ms")]
    return [Event(r["kind"], r["ms"], **{n: r[n] for n in names}) for r in rows]
