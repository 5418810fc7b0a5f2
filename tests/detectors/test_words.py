"""The words of ``standing``: the helpers, and every detector's line on the real Flink runs."""

from __future__ import annotations

import re
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from detectors import REGISTRY, Event
from detectors.base import Detector
from detectors.testing import DetectorTester
from detectors.words import at, clause, firing_since, plural, span, span_ms
from streaming.metric_parsing import parse_metrics
from streaming.parsing import parse_logs
from streaming.sources import file_records, stage_files

REAL = Path(__file__).resolve().parent.parent / "data" / "real"
RUNS = sorted(d for d in REAL.iterdir() if (d / "expected.json").exists())
T0 = 1_700_000_000_000


def test_times_are_utc_to_the_second_and_durations_humanised() -> None:
    assert at(T0 + 999) == "2023-11-14T22:13:20Z"
    assert [span(s) for s in (0, 99, 100, 7199, 7200, 172_799, 172_800)] == [
        "0 s",
        "99 s",
        "2 min",
        "120 min",
        "2.0 h",
        "48.0 h",
        "2.0 d",
    ]
    assert span(-5) == "0 s" and span_ms(90_000) == "90 s"


def test_a_firing_line_starts_with_its_start_and_its_age() -> None:
    assert firing_since(T0, T0 + 3 * 3600_000) == "FIRING since 2023-11-14T22:13:20Z (3.0 h)"
    assert firing_since(None, T0) == "FIRING"
    # A start after the state's latest event (a deadline fired it): its age is not known.
    assert firing_since(T0, T0 - 1000) == "FIRING since 2023-11-14T22:13:20Z"


def test_clauses_leave_out_what_is_not_known() -> None:
    assert clause("a", None, "", "b") == "a; b"
    assert clause() == ""
    assert (plural(1, "bucket"), plural(0, "bucket"), plural(2, "is", "are")) == (
        "1 bucket",
        "0 buckets",
        "2 are",
    )


# --- every detector on the real runs ----------------------------------------------------


def _events_by_run(spark: SparkSession) -> dict[str, list[Event]]:
    """Each run's parsed events in event-time order, as the replay parses them.

    Every run in one Spark job (one job a run cost 4 s each, most of this test's time):
    a staged file's number says whose it is, and each file is parsed on its own as before.
    """
    runs: dict[str, dict[int, str]] = {"log": {}, "metric": {}}
    with tempfile.TemporaryDirectory() as tmp:
        dirs = {}
        for kind, glob in (("log", "*.log"), ("metric", "*.jsonl")):
            files = [(run.name, f) for run in RUNS for f in sorted(run.glob(glob))]
            runs[kind] = {i: name for i, (name, _) in enumerate(files)}
            dirs[kind] = stage_files([f for _, f in files], Path(tmp) / kind)
        parsed = parse_logs(file_records(spark, dirs["log"], kind="log", stream=False)).select(
            "*", F.lit("log").alias("_from")
        )
        parsed = parsed.unionByName(
            parse_metrics(file_records(spark, dirs["metric"], kind="metric", stream=False)).select(
                "*", F.lit("metric").alias("_from")
            )
        )
        rows = (
            parsed.where(F.col("kind") != "unparsed")
            .select("*", F.unix_millis("event_time").alias("ms"))
            .orderBy("ms", "topic", "offset")
            .collect()
        )
    names = [n for n in Event._fields if n not in ("kind", "time_ms")]
    out: dict[str, list[Event]] = defaultdict(list)
    for r in rows:
        staged = int(r["topic"].rsplit("/", 1)[-1].split("-", 1)[0])
        run = runs[r["_from"]][staged]
        out[run].append(Event(r["kind"], r["ms"], **{n: r[n] for n in names}))
    return out


def _standings(det: Detector[Any, Any], events: list[Event]) -> dict[str, list[tuple[bool, str]]]:
    """Each entity of the run in the detector's scope: its lines, one after each of its events.

    Routed as the bus routes (kind, metric name); the last line is the run's end state,
    after the deadlines due by the run's last event. An entity none of whose events the
    detector reads is told from ``None``, as ``explain`` tells it. Each line says whether
    the detector held a state.
    """
    by_entity: dict[str, list[Event]] = defaultdict(list)
    for e in events:
        entity = det.entity_of(e, det.scope)
        if entity is None:
            continue
        mine = by_entity[entity]
        if e.kind in det.kinds and (e.kind != "metric" or e.metric in det.metrics):
            mine.append(e)
    out = {}
    for entity, mine in by_entity.items():
        tester = DetectorTester(det)
        lines = []
        for e in mine:
            tester.feed(e)
            lines.append((tester.state is not None, tester.standing()))
        tester.advance_to(events[-1].time_ms)
        out[entity] = [*lines, (tester.state is not None, tester.standing())]
    return out


@pytest.mark.spark
def test_every_detector_tells_every_entity_of_every_real_run_in_one_clean_line(spark) -> None:
    # At every event of every entity, not only at the end: explain reads a running job too.
    held: set[str] = set()
    told = 0
    by_run = _events_by_run(spark)
    assert sorted(by_run) == [run.name for run in RUNS]
    for run in RUNS:
        events = by_run[run.name]
        for name, cls in REGISTRY.items():
            det = cls(cls.params_model())
            for entity, lines in _standings(det, events).items():
                for has_state, line in lines:
                    where = f"{run.name} {name} {entity}: {line!r}"
                    assert line and "\n" not in line and line == line.strip(), where
                    assert not re.search(r"\bNone\b|\b[Nn]a[Nn]\b", line), where
                    assert "?" not in line and "{" not in line, where
                    assert len(line) <= 200, where
                    told += 1
                    if has_state:
                        held.add(name)
                    else:
                        assert line == det.standing(None), where
    # No real run loses a TaskManager or kills a JVM: those two tell only why they cannot
    # judge. Every other detector held a state and told it.
    assert held == set(REGISTRY) - {"jvm_fatal", "tm_lost"}, held
    assert told >= 11 * len(RUNS)
