"""The progress listener: what the log says about the queries."""

from __future__ import annotations

import logging
from types import SimpleNamespace

from streaming.listener import ProgressLogger


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
