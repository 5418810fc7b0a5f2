"""Progress of the streaming queries, as log lines an operator can read.

A ``StreamingQueryListener`` on the driver keeps the latest progress of each
query and logs a one-line summary per query at most every ``every_s`` seconds:
input and processed rows/s, batch duration, watermark and state size. It also notes when
each query last showed progress, which the metrics endpoint's ``/healthz`` answers from.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pyspark import SparkContext
from pyspark.sql.streaming import StreamingQueryListener
from pyspark.sql.streaming.listener import JStreamingQueryListener, QueryProgressEvent

log = logging.getLogger("flinkwatch.progress")

#: The query whose progress says the job is alive: it feeds the detectors and the sinks.
DETECT_QUERY = "flinkwatch-detect"
#: The query that parses the raw topics onto the event bus.
PARSE_QUERY = "flinkwatch-parse"


class _ProgressAsJson(JStreamingQueryListener):
    """PySpark's bridge, but a progress event crosses as one JSON string.

    PySpark's own reads each field of the progress (and of each source and state
    operator) with its own Py4J call, served on Spark's listener thread: at 5,000
    records/s that thread used 0.14 of the machine's two cores.
    """

    def onQueryProgress(self, jevent: Any) -> None:  # noqa: D102, N802
        progress = json.loads(jevent.progress().json())
        self.pylistener.onQueryProgress(QueryProgressEvent.fromJson({"progress": progress}))


class JsonProgressListener(StreamingQueryListener):
    """A ``StreamingQueryListener`` whose progress events arrive as parsed JSON."""

    @property
    def _jlistener(self) -> Any:
        # The hook StreamingQueryManager.addListener registers.
        if not hasattr(self, "_jlistenerobj"):
            wrapper = SparkContext._jvm.PythonStreamingQueryListenerWrapper  # type: ignore[union-attr]  # noqa: SLF001
            self._jlistenerobj = wrapper(_ProgressAsJson(self))
        return self._jlistenerobj


@dataclass
class QueryProgress:
    """The latest numbers of one query (also read by the metrics exporter later)."""

    batch_id: int = -1
    input_rows: int = 0
    input_rows_per_s: float = 0.0
    processed_rows_per_s: float = 0.0
    batch_ms: int = 0
    watermark: str | None = None
    watermark_ms: int | None = None
    state_rows: int = 0
    state_bytes: int = 0
    late_rows_dropped: int = 0  # cumulative since the process started
    #: Where the batch's time went (Spark's ``durationMs``: addBatch, latestOffset, ...).
    durations_ms: dict[str, int] = field(default_factory=dict)


def _epoch_ms(iso: str | None) -> int | None:
    """Spark's ISO-8601 watermark (``1970-01-01T00:00:00.000Z`` before any) → epoch ms."""
    if not iso:
        return None
    try:
        ms = int(dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None
    return ms or None


def state_size(op: Any) -> int:
    """A state operator's size: RocksDB's files plus the memory Spark reports for it.

    With the shared memory budget (``spark.state_memory_mb``) Spark reports each store's
    memory as 0, so the SST files on local disk are what shows the state growing.
    """
    custom = getattr(op, "customMetrics", None) or {}
    return int(op.memoryUsedBytes or 0) + int(custom.get("rocksdbSstFileSize") or 0)


class ProgressLogger(JsonProgressListener):
    """Keeps :class:`QueryProgress` per query name and logs it periodically.

    Args:
        every_s: Seconds between two log lines of one query at least.
        clock: Monotonic seconds (tests pass their own).
    """

    def __init__(self, every_s: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.every_s = every_s
        self._clock = clock
        self._created = clock()
        #: Query name by run id (an idle event names only the run).
        self._names: dict[str, str] = {}
        #: Per query name, when it last finished a micro-batch or found no new data.
        self._alive: dict[str, float] = {}
        self.latest: dict[str, QueryProgress] = {}
        self._rows_since: dict[str, int] = {}
        self._last_log: dict[str, float] = {}
        #: Per query run, when it started (until its first batch with data).
        self._started: dict[str, float] = {}
        #: Per query name, seconds from its latest start to its first batch with data.
        self.first_batch_s: dict[str, float] = {}
        self._lock = threading.Lock()

    def onQueryStarted(self, event: Any) -> None:  # noqa: D102, N802
        log.info("query %s started (id=%s)", event.name, event.id)
        with self._lock:
            self._started[str(event.runId)] = self._clock()
            if event.name:
                self._names[str(event.runId)] = str(event.name)

    def progress_age_s(self, name: str = DETECT_QUERY) -> float:
        """Seconds since query ``name`` last showed progress.

        Progress is a finished micro-batch, or a look for new data that found none (Spark
        reports an idle query every 10 s instead of a batch): either means its trigger
        loop runs. A query that never showed any counts from when this listener was made,
        so a job that hangs while starting ages too.
        """
        with self._lock:
            last = self._alive.get(name, self._created)
        return max(0.0, self._clock() - last)

    def _first_batch(self, p: Any, name: str) -> None:
        """Log when a run of a query finished its first micro-batch with data, once."""
        with self._lock:
            started = self._started.pop(str(p.runId), None) if p.numInputRows else None
            if started is None:
                return
            took = self._clock() - started
            self.first_batch_s[name] = took
        log.info(
            "query=%s first batch with data done %.1f s after the start (batch=%d rows=%d)",
            name,
            took,
            p.batchId,
            p.numInputRows,
        )

    def onQueryProgress(self, event: Any) -> None:  # noqa: D102, N802
        p = event.progress
        name = p.name or str(p.id)
        self._first_batch(p, name)
        states = p.stateOperators or []
        qp = QueryProgress(
            batch_id=p.batchId,
            input_rows=p.numInputRows,
            input_rows_per_s=float(p.inputRowsPerSecond or 0.0),
            processed_rows_per_s=float(p.processedRowsPerSecond or 0.0),
            batch_ms=int(p.batchDuration),
            watermark=(p.eventTime or {}).get("watermark"),
            watermark_ms=_epoch_ms((p.eventTime or {}).get("watermark")),
            state_rows=sum(s.numRowsTotal for s in states),
            state_bytes=sum(state_size(s) for s in states),
            durations_ms={k: int(v) for k, v in (p.durationMs or {}).items()},
        )
        if p.numInputRows and log.isEnabledFor(logging.DEBUG):
            log.debug(
                "query=%s batch=%d rows=%d durations_ms=%s",
                name,
                p.batchId,
                p.numInputRows,
                qp.durations_ms,
            )
        dropped = sum(s.numRowsDroppedByWatermark for s in states)
        if dropped:
            log.warning(
                "query=%s batch=%d dropped %d rows older than the watermark "
                "(raise spark.watermark_delay_s if a topic lags)",
                name,
                qp.batch_id,
                dropped,
            )
        now = self._clock()
        with self._lock:
            self._alive[name] = now
            prev = self.latest.get(name)
            qp.late_rows_dropped = (prev.late_rows_dropped if prev else 0) + dropped
            self.latest[name] = qp
            self._rows_since[name] = self._rows_since.get(name, 0) + qp.input_rows
            if now - self._last_log.get(name, 0.0) < self.every_s:
                return
            self._last_log[name] = now
            rows, self._rows_since[name] = self._rows_since[name], 0
        log.info(
            "query=%s batch=%d rows=%d in=%.0f/s processed=%.0f/s batch_ms=%d watermark=%s "
            "state_rows=%d state_bytes=%d",
            name,
            qp.batch_id,
            rows,
            qp.input_rows_per_s,
            qp.processed_rows_per_s,
            qp.batch_ms,
            qp.watermark or "-",
            qp.state_rows,
            qp.state_bytes,
        )

    def onQueryIdle(self, event: Any) -> None:  # noqa: D102, N802
        with self._lock:
            name = self._names.get(str(event.runId))
            if name is not None:
                self._alive[name] = self._clock()

    def onQueryTerminated(self, event: Any) -> None:  # noqa: D102, N802
        if event.exception:
            log.error("query id=%s failed: %s", event.id, event.exception.splitlines()[0])
        else:  # stopped on purpose: whoever stopped it says why (a stop, a reload)
            log.debug("query id=%s stopped", event.id)
