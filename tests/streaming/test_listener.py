"""The progress listener: what the log says about the queries."""

from __future__ import annotations

import json
import logging
import time
from types import SimpleNamespace
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener

from streaming.listener import JsonProgressListener, ProgressLogger


def _progress(batch: int, rows: int, run: str = "r1") -> SimpleNamespace:
    p = SimpleNamespace(
        name="flinkwatch-detect",
        id="q1",
        runId=run,
        batchId=batch,
        numInputRows=rows,
        inputRowsPerSecond=0.0,
        processedRowsPerSecond=0.0,
        batchDuration=100,
        eventTime={},
        stateOperators=[],
        durationMs={},
    )
    return SimpleNamespace(progress=p)


def test_the_first_batch_with_data_after_each_start_is_logged_once(caplog) -> None:
    listener = ProgressLogger(every_s=3600)
    caplog.set_level(logging.INFO, logger="flinkwatch.progress")
    listener.onQueryStarted(SimpleNamespace(name="flinkwatch-detect", id="q1", runId="r1"))
    listener.onQueryProgress(_progress(0, 0))  # no data yet: not the one
    listener.onQueryProgress(_progress(1, 40))
    listener.onQueryProgress(_progress(2, 50))
    firsts = [r.getMessage() for r in caplog.records if "first batch with data" in r.getMessage()]
    assert len(firsts) == 1 and "batch=1 rows=40" in firsts[0]
    assert listener.first_batch_s["flinkwatch-detect"] >= 0
    # A restart (a new run of the same query) is timed again.
    listener.onQueryStarted(SimpleNamespace(name="flinkwatch-detect", id="q1", runId="r2"))
    listener.onQueryProgress(_progress(3, 7, run="r2"))
    firsts = [r.getMessage() for r in caplog.records if "first batch with data" in r.getMessage()]
    assert len(firsts) == 2 and "batch=3 rows=7" in firsts[1]


class _Seen(StreamingQueryListener):
    """PySpark's own bridge (a Py4J call per field), to compare with."""

    def __init__(self) -> None:
        self.progress: dict[int, Any] = {}

    def onQueryStarted(self, event: Any) -> None:  # noqa: N802
        pass

    def onQueryProgress(self, event: Any) -> None:  # noqa: N802
        self.progress[event.progress.batchId] = event.progress

    def onQueryIdle(self, event: Any) -> None:  # noqa: N802
        pass

    def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
        pass


class _SeenAsJson(JsonProgressListener, _Seen):
    pass


def test_progress_as_json_carries_what_pyspark_own_bridge_does(spark) -> None:
    ours, theirs = _SeenAsJson(), _Seen()
    spark.streams.addListener(ours)
    spark.streams.addListener(theirs)
    query = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 50)
        .load()
        .withWatermark("timestamp", "1 second")
        .dropDuplicates(["value"])
        .writeStream.format("noop")
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        deadline = time.monotonic() + 300
        while not any(p.numInputRows for p in theirs.progress.values()):
            assert query.exception() is None and time.monotonic() < deadline
            time.sleep(0.1)
        # Between two batches: a stop that kills a running write task has Spark log it at
        # ERROR with a stack trace ("Aborting task"), into the suite's output.
        while query.status["isTriggerActive"]:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        query.stop()
    finally:
        spark.streams.removeListener(ours)
        spark.streams.removeListener(theirs)
    batch = next(b for b, p in theirs.progress.items() if p.numInputRows)
    while batch not in ours.progress:  # the same bus, but another listener's turn
        assert time.monotonic() < deadline
        time.sleep(0.05)
    a, b = ours.progress[batch], theirs.progress[batch]
    # Ours crossed as JSON (no Java object behind it), theirs field by field.
    assert a._jprogress is None and a._jdict is not None  # noqa: SLF001
    assert b._jprogress is not None  # noqa: SLF001
    assert (a.id, a.runId, a.batchId, a.numInputRows) == (b.id, b.runId, b.batchId, b.numInputRows)
    assert a.eventTime == b.eventTime and a.durationMs == b.durationMs
    assert json.loads(a.sources[0].endOffset) == json.loads(b.sources[0].endOffset)
    assert a.stateOperators[0].numRowsTotal == b.stateOperators[0].numRowsTotal
    assert a.stateOperators[0].customMetrics == b.stateOperators[0].customMetrics


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_progress_age_counts_the_detect_querys_batches_and_idle_checks() -> None:
    clock = Clock()
    listener = ProgressLogger(every_s=3600, clock=clock)
    clock.now += 100
    # Never progressed: the age counts from when the listener was made.
    assert listener.progress_age_s() == 100
    listener.onQueryStarted(SimpleNamespace(name="flinkwatch-detect", id="q1", runId="r1"))
    listener.onQueryStarted(SimpleNamespace(name="flinkwatch-parse", id="q2", runId="p1"))
    clock.now += 50
    listener.onQueryProgress(_progress(0, 0))  # a finished micro-batch, even without rows
    assert listener.progress_age_s() == 0
    clock.now += 20
    assert listener.progress_age_s() == 20
    # Another query's batches and idle checks say nothing about the detectors.
    parse = _progress(5, 10, run="p1")
    parse.progress.name = "flinkwatch-parse"
    listener.onQueryProgress(parse)
    listener.onQueryIdle(SimpleNamespace(id="q2", runId="p1", timestamp="t"))
    assert listener.progress_age_s() == 20
    assert listener.progress_age_s("flinkwatch-parse") == 0
    # An idle detect query (no new data on the bus) is alive: Spark reports it every 10 s.
    clock.now += 30
    listener.onQueryIdle(SimpleNamespace(id="q1", runId="r1", timestamp="t"))
    assert listener.progress_age_s() == 0
    # A run the listener never saw start is nobody's.
    clock.now += 40
    listener.onQueryIdle(SimpleNamespace(id="q9", runId="r9", timestamp="t"))
    assert listener.progress_age_s() == 40
