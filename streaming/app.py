"""Build and run the flinkwatch queries.

Two streaming queries share one SparkSession, one after the other:

* ``parse``: records → parsed events. Each micro-batch is counted by kind, its
  dead letters (with their Kafka coordinates) go to the dead-letter sink, and
  the events some detector wants are written as one Parquet file to the event
  hop directory, named by batch id (a replayed batch rewrites the same file).
* ``detect``: the event hop → routed per detector → the stateful adapter
  (:mod:`streaming.processor`) → alert sinks, via ``foreachBatch``.

Why a hop: Spark 4.0 serialises the whole child plan of a Python
``transformWithState`` operator at every micro-batch; behind the parser's
expression tree that took 15-40 s per batch. Behind a Parquet scan it is cheap,
and the parser runs once instead of once per query.

If a query fails (a Kafka broker restart, say) both are restarted on their
checkpoints after a back-off: offsets and detector state come back from the
checkpoints, so no record is skipped and no state is lost.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import (
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from conf import AppConfig
from conf.reload import ConfigWatcher
from conf.silences import silence_for
from detectors import REGISTRY, Alert, AlertStatus, Severity
from detectors.correlation import Correlator
from sinks import AlertLedger, AlertObserver, DeadLetterFileSink, DeliverySink
from sinks.dispatch import Dispatcher
from sinks.prometheus import SignalBoard
from streaming.parsing import ParseLimits, parse_logs, parse_metrics
from streaming.processor import (
    ALERT_SCHEMA,
    EVENT_INPUT_COLUMNS,
    SIGNAL,
    SIGNAL_GONE,
    DetectorProcessor,
)

log = logging.getLogger(__name__)

_LONGS = ("checkpoint_id", "duration_ms", "size_bytes")


def parse_limits(cfg: AppConfig) -> ParseLimits:
    """Parser bounds from the config."""
    return ParseLimits(
        max_record_bytes=cfg.parsing.max_record_bytes,
        max_future_ms=int(cfg.parsing.max_future_skew_s * 1000),
    )


def parsed_events(logs: DataFrame, metrics: DataFrame, cfg: AppConfig) -> DataFrame:
    """Both record streams parsed into one stream of events (and dead letters)."""
    lim = parse_limits(cfg)
    return parse_logs(logs, lim).unionByName(parse_metrics(metrics, lim))


#: Columns of the event hop (Parquet), the ``detect`` query's input.
HOP_SCHEMA = StructType(
    [
        StructField("kind", StringType()),
        StructField("event_time", TimestampType()),
        StructField("offset", LongType()),
        *[
            StructField(
                c, LongType() if c in _LONGS else DoubleType() if c == "value" else StringType()
            )
            for c in EVENT_INPUT_COLUMNS
            if c not in ("kind", "event_ms", "offset")
        ],
    ]
)


def active_detectors(cfg: AppConfig) -> list[str]:
    """Detectors enabled globally or for at least one job by an override."""
    on = {n for n, p in cfg.detector_params().items() if p.enabled}
    for ov in cfg.overrides:
        on |= {n for n, sec in ov.detectors.items() if sec.get("enabled") is True}
    return sorted(on)


def _wants(det: Any) -> Column:
    """The events one detector consumes.

    A detector that names ``metrics`` gets only those metric events, even when ``metric``
    is among its kinds: routing every metric to it would hand the Python workers the
    whole metric stream (92 % of a fleet's records) only to be ignored there.
    """
    kinds = set(det.kinds)
    if det.metrics:
        kinds.discard("metric")
    cond = F.col("kind").isin(*sorted(kinds)) if kinds else F.lit(False)
    if det.metrics:
        cond = cond | ((F.col("kind") == "metric") & F.col("metric").isin(*sorted(det.metrics)))
    return cond


def wanted(cfg: AppConfig) -> Column:
    """True for events at least one enabled detector consumes."""
    cond = F.lit(False)
    for name in active_detectors(cfg):
        cond = cond | _wants(REGISTRY[name])
    return F.col("error").isNull() & cond


def routed_events(events: DataFrame, cfg: AppConfig) -> DataFrame:
    """Good events, one row per (enabled detector that wants it, its entity)."""
    ok = events.where(F.col("error").isNull())
    parts = []
    for name in active_detectors(cfg):
        det = REGISTRY[name]
        cond = _wants(det)
        entity = {
            "job": F.concat(F.lit("job:"), F.col("job_id")),
            "tm": F.concat(F.lit("tm:"), F.col("tm_id")),
            "cluster": F.lit("cluster"),
        }[det.scope]
        parts.append(
            ok.where(cond & entity.isNotNull()).select(
                F.lit(name).alias("detector"), entity.alias("entity"), "*"
            )
        )
    if not parts:
        msg = "every detector is disabled: nothing to run"
        raise ValueError(msg)
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return out


def alert_stream(events: DataFrame, cfg: AppConfig) -> DataFrame:
    """Alert transitions from the stateful detectors.

    ``events`` must carry a watermark on ``event_time`` (one per input stream).
    """
    routed = routed_events(events, cfg).select(
        "detector",
        "entity",
        "event_time",
        F.unix_millis("event_time").alias("event_ms"),
        *[c for c in EVENT_INPUT_COLUMNS if c != "event_ms"],
    )
    return routed.groupBy("detector", "entity").transformWithStateInPandas(
        statefulProcessor=DetectorProcessor(cfg.resolver()),
        outputStructType=ALERT_SCHEMA,
        outputMode="Append",
        timeMode="EventTime",
    )


def rows_to_alerts(rows: Sequence[Any]) -> list[Alert]:
    """Collected alert rows → typed alerts, in event-time order."""
    alerts = [
        Alert(
            alert_id=r["alert_id"],
            detector=r["detector"],
            entity=r["entity"],
            status=AlertStatus(r["status"]),
            severity=Severity(r["severity"]),
            event_time_ms=int(r["event_ms"]),
            summary=r["summary"],
            job_id=r["job_id"],
            job_name=r["job_name"],
            tm_id=r["tm_id"],
            host=r["host"],
            evidence=json.loads(r["evidence"] or "{}"),
        )
        for r in rows
    ]
    order = {AlertStatus.FIRING: 0, AlertStatus.ESCALATED: 1, AlertStatus.RESOLVED: 2}
    return sorted(alerts, key=lambda a: (a.event_time_ms, a.alert_id, order[a.status]))


@dataclass
class PipelineStats:
    """Counters the pipeline query keeps on the driver (also for the CLI summary)."""

    kinds: Counter[str] = field(default_factory=Counter)
    dead_letters: Counter[str] = field(default_factory=Counter)
    alerts: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    # Last batch counted per query; kept here, not in the handlers, because the handlers
    # are recreated when the queries restart and Spark then replays the last batch.
    counted: dict[str, int] = field(default_factory=dict)

    def first_count(self, query: str, batch_id: int) -> bool:
        """True the first time a batch of a query is counted."""
        if batch_id <= self.counted.get(query, -1):
            return False
        self.counted[query] = batch_id
        return True


@dataclass
class Outputs:
    """Where the detect query's transitions go (all on the driver).

    Attributes:
        ledger: Records each transition once, in step with the batch commit.
        sinks: Delivery sinks drained inside the batch (the alert file): a failure
            fails the batch, which Spark replays.
        observers: See each new transition once (Prometheus view, console).
        dispatcher: Drains slow sinks (Slack) in its own thread, outside the batch.
        signals: The detectors' per-entity signal gauges.
        correlator: Groups related transitions into incidents as the ledger records
            them; rebuilt from the ledger after a restart (``None``: no incidents).
    """

    ledger: AlertLedger
    sinks: Sequence[DeliverySink] = ()
    observers: Sequence[AlertObserver] = ()
    dispatcher: Dispatcher | None = None
    signals: SignalBoard | None = None
    correlator: Correlator | None = None

    def delivery_sinks(self) -> list[DeliverySink]:
        """Every sink a transition is queued for."""
        return [*self.sinks, *(self.dispatcher.sinks if self.dispatcher else [])]


class AlertDelivery:
    """``foreachBatch`` of the detect query: record in the ledger, then deliver."""

    def __init__(self, outputs: Outputs, stats: PipelineStats, cfg: AppConfig) -> None:
        self.out = outputs
        self.stats = stats
        self.cfg = cfg

    def _silence(self, alert: Alert) -> str | None:
        return silence_for(self.cfg.silences, alert, self.cfg.cluster)

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        """Record and deliver one micro-batch of alert transitions.

        Raises:
            Exception: the first failure of an in-batch sink, after every sink was
                tried, so Spark does not commit the batch and replays it; the ledger
                has the transitions already and the replay only retries the delivery.
        """
        rows = batch.collect()
        alert_rows = [r for r in rows if r["status"] not in (SIGNAL, SIGNAL_GONE)]
        self._signals([r for r in rows if r["status"] in (SIGNAL, SIGNAL_GONE)])
        correlator = self.out.correlator
        if correlator is not None:
            correlator.params = self.cfg.correlation  # follows a reload
        new = self.out.ledger.record(
            batch_id,
            rows_to_alerts(alert_rows),
            self.out.delivery_sinks(),
            self._silence,
            correlator.observe if correlator is not None else None,
        )
        for t in new:
            self.stats.alerts[(t.alert.detector, t.alert.entity, t.alert.status.value)] += 1
        for obs in self.out.observers:
            try:
                obs.observe(new)
            except Exception:
                log.exception("observer=%s failed on batch %d", obs.name, batch_id)
        errors: list[Exception] = []
        for sink in self.out.sinks:
            # One failing sink must not keep the others from delivering.
            try:
                self.out.ledger.deliver(sink)
            except Exception as exc:
                log.exception("sink=%s batch=%d delivery failed", sink.name, batch_id)
                errors.append(exc)
        if self.out.dispatcher is not None and new:
            self.out.dispatcher.wake()
        if errors:
            raise errors[0]

    def _signals(self, rows: Sequence[Any]) -> None:
        board = self.out.signals
        if board is None:
            return
        for r in rows:
            if r["status"] == SIGNAL_GONE:
                board.drop(r["detector"], r["entity"])
                continue
            labels = {k: r[k] for k in ("job_id", "job_name", "tm_id", "host") if r[k]}
            board.update(r["detector"], r["entity"], labels, json.loads(r["evidence"] or "{}"))


class ParseBatch:
    """``foreachBatch`` of the ``parse`` query: hop the wanted events, count, keep dead letters."""

    def __init__(
        self, cfg: AppConfig, hop_dir: Path, dead_letters: DeadLetterFileSink, stats: PipelineStats
    ) -> None:
        self.cfg = cfg
        self.hop_dir = hop_dir
        self.dead_letters = dead_letters
        self.stats = stats

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        """Process one micro-batch of parsed records."""
        batch = batch.withColumn("_wanted", wanted(self.cfg)).persist()
        try:
            counts = (
                batch.select(F.coalesce(F.col("error"), F.lit("")).alias("e"), "kind", "_wanted")
                .groupBy("e", "kind", "_wanted")
                .count()
                .collect()
            )
            if any(r["_wanted"] for r in counts):
                self._hop(batch, batch_id)
            dead = Counter({r["e"]: r["count"] for r in counts if r["e"]})
            if dead:
                rows = (
                    batch.where(F.col("error").isNotNull())
                    .select("topic", "partition", "offset", "kafka_ts", "error", "detail", "raw")
                    .collect()
                )
                path = self.dead_letters.write(batch_id, [r.asDict() for r in rows])
                log.warning(
                    "dead letters: %d in batch %d (%s) -> %s",
                    dead.total(),
                    batch_id,
                    ", ".join(f"{k}={v}" for k, v in sorted(dead.items())),
                    path,
                )
        finally:
            batch.unpersist()
        # Counted last, once per batch id: a batch that fails above, or that Spark replays
        # after a crash, must not count twice.
        if not self.stats.first_count("parse", batch_id):
            return
        self.stats.dead_letters.update(dead)
        for r in counts:
            if not r["e"]:
                self.stats.kinds[r["kind"]] += r["count"]

    def _hop(self, batch: DataFrame, batch_id: int) -> None:
        # Written next to the hop directory, then moved in under a name fixed by the batch
        # id: the detect query never sees a half-written file, and a replayed batch
        # replaces its own file instead of adding a second copy.
        tmp = self.hop_dir.parent / f".hop-tmp-{batch_id}"
        (
            batch.where(F.col("_wanted"))
            .select(*[f.name for f in HOP_SCHEMA.fields])
            .coalesce(1)
            .write.mode("overwrite")
            .parquet(str(tmp))
        )
        self.hop_dir.mkdir(parents=True, exist_ok=True)
        for i, part in enumerate(sorted(tmp.glob("part-*.parquet"))):
            os.replace(part, self.hop_dir / f"batch-{batch_id:010d}-{i}.parquet")
        shutil.rmtree(tmp, ignore_errors=True)


@dataclass
class Pipeline:
    """The two queries of one run, built from one pair of record streams."""

    spark: SparkSession
    cfg: AppConfig
    logs: Callable[[], DataFrame]
    metrics: Callable[[], DataFrame]
    outputs: Outputs
    checkpoint_dir: Path
    deadletter_dir: Path
    #: ``None``: a processing-time trigger of ``spark.trigger_interval_s`` (read at each
    #: start, so a config reload changes it); replay passes ``{"availableNow": True}``.
    trigger: dict[str, Any] | None = None
    stats: PipelineStats = field(default_factory=PipelineStats)

    def _trigger(self) -> dict[str, Any]:
        if self.trigger is not None:
            return self.trigger
        return {"processingTime": f"{int(self.cfg.spark.trigger_interval_s * 1000)} milliseconds"}

    @property
    def hop_dir(self) -> Path:
        """Where the parse query hands events to the detect query."""
        return self.checkpoint_dir / "events"

    def start_parse(self) -> StreamingQuery:
        """Start the parse query (from its checkpoint, if any)."""
        # Set here, not only at session start, so a reloaded log_timezone applies.
        self.spark.conf.set("spark.sql.session.timeZone", self.cfg.parsing.log_timezone)
        return (
            parsed_events(self.logs(), self.metrics(), self.cfg)
            .writeStream.queryName("flinkwatch-parse")
            .foreachBatch(
                ParseBatch(
                    self.cfg, self.hop_dir, DeadLetterFileSink(self.deadletter_dir), self.stats
                )
            )
            .option("checkpointLocation", str(self.checkpoint_dir / "parse"))
            .trigger(**self._trigger())
            .start()
        )

    def start_detect(self) -> StreamingQuery:
        """Start the detect query (from its checkpoint, if any)."""
        delay = f"{int(self.cfg.spark.watermark_delay_s * 1000)} milliseconds"
        # One stream for logs and metrics together: with one watermark per stream, a
        # stream that has no data (no metrics topic traffic, a logs-only replay) would
        # hold the global watermark at zero and no timer would ever fire. The cost: a
        # topic lagging the other by more than the watermark delay loses its late rows,
        # which the progress log and flinkwatch_late_rows_dropped_total make visible.
        self.hop_dir.mkdir(parents=True, exist_ok=True)
        events = (
            self.spark.readStream.schema(HOP_SCHEMA)
            # Processed hop files are deleted; the parse checkpoint still has the offsets.
            .option("cleanSource", "delete")
            .parquet(str(self.hop_dir))
            .withWatermark("event_time", delay)
            .withColumn("error", F.lit(None).cast(StringType()))
        )
        return (
            alert_stream(events, self.cfg)
            .writeStream.queryName("flinkwatch-detect")
            .foreachBatch(AlertDelivery(self.outputs, self.stats, self.cfg))
            .option("checkpointLocation", str(self.checkpoint_dir / "detect"))
            .trigger(**self._trigger())
            .start()
        )

    def start(self) -> list[StreamingQuery]:
        """Start both queries, to run side by side."""
        return [self.start_parse(), self.start_detect()]

    def run_once(self) -> None:
        """Process everything available, parse first and detect after (replay, tests).

        Raises:
            StreamingQueryException: when a query fails.
        """
        for start in (self.start_parse, self.start_detect):
            q = start()
            q.awaitTermination()
            exc = q.exception()
            if exc is not None:
                raise exc


def run_forever(
    pipeline: Pipeline,
    *,
    should_stop: Callable[[], bool] = lambda: False,
    watcher: ConfigWatcher | None = None,
    reload_requested: threading.Event | None = None,
) -> int:
    """Run the queries until stopped; restart them on the same checkpoints after a failure.

    A valid change of the config file (or SIGHUP, via ``reload_requested``) restarts both
    queries on their checkpoints with the new config: detector state is kept, and a
    micro-batch cut short is replayed, which the sinks dedupe.

    Returns:
        0 when stopped on request, 1 after ``max_restarts`` failures in a row.
    """
    failures = 0
    while True:
        try:
            queries = pipeline.start()
        except Exception:
            # A query that cannot start (bad checkpoint, unreachable storage) must not leave
            # the other one running unsupervised: stop what started and retry as a failure.
            log.exception("starting the queries failed")
            _stop_quietly(list(pipeline.spark.streams.active))
            failures += 1
            if failures > pipeline.cfg.spark.max_restarts or _sleep_unless(
                should_stop, pipeline.cfg.spark.restart_backoff_s
            ):
                return 1 if failures > pipeline.cfg.spark.max_restarts else 0
            continue
        log.info(
            "queries started: %s (config hash %s)",
            ", ".join(q.name or "?" for q in queries),
            watcher.stats.active_hash if watcher else "-",
        )
        started = time.monotonic()
        next_poll = time.monotonic() + pipeline.cfg.reload_interval_s
        failed: StreamingQuery | None = None
        new_cfg: AppConfig | None = None
        while failed is None and new_cfg is None and not should_stop():
            failed = next((q for q in queries if not q.isActive), None)
            if failed is not None:
                break
            forced = reload_requested is not None and reload_requested.is_set()
            if watcher is not None and (forced or time.monotonic() >= next_poll):
                if reload_requested is not None:
                    reload_requested.clear()
                new_cfg = watcher.poll(force=forced)
                next_poll = time.monotonic() + pipeline.cfg.reload_interval_s
            else:
                time.sleep(0.25)
        _stop_quietly(queries)
        if new_cfg is not None:
            pipeline.cfg = new_cfg
            log.info("config reload: restarting both queries on their checkpoints")
            continue
        if failed is None:
            return 0
        exc = failed.exception()
        if time.monotonic() - started > 300:
            failures = 0  # it ran fine for a while: this is a new streak
        failures += 1
        spark_cfg = pipeline.cfg.spark
        if failures > spark_cfg.max_restarts:
            log.error(
                "query %s failed %d times in a row; giving up: %s", failed.name, failures, exc
            )
            return 1
        log.error(
            "query %s failed (%s); restarting both queries from their checkpoints in %.0f s "
            "(attempt %d of %d)",
            failed.name,
            str(exc).splitlines()[0] if exc else "stopped",
            spark_cfg.restart_backoff_s,
            failures,
            spark_cfg.max_restarts,
        )
        if _sleep_unless(should_stop, spark_cfg.restart_backoff_s):
            return 0


def _sleep_unless(should_stop: Callable[[], bool], seconds: float) -> bool:
    """Sleep up to ``seconds``; True as soon as a stop is requested."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if should_stop():
            return True
        time.sleep(0.2)
    return should_stop()


def _stop_quietly(queries: Sequence[StreamingQuery]) -> None:
    # Stopping interrupts the running micro-batch; the callback's py4j thread then logs
    # the InterruptedException as an error, which on a requested stop is not one.
    py4j_log = logging.getLogger("py4j.clientserver")
    level = py4j_log.level
    py4j_log.setLevel(logging.CRITICAL)
    try:
        for q in queries:
            if q.isActive:
                q.stop()
    finally:
        py4j_log.setLevel(level)
