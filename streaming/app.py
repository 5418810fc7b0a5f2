"""Build and run the flinkwatch queries.

Two streaming queries share one SparkSession:

* ``alerts``: records → parsed events → routed per detector → the stateful
  adapter (:mod:`streaming.processor`) → alert sinks, via ``foreachBatch``;
* ``pipeline``: records → parsed events → counts by kind and dead letters
  (with their Kafka coordinates) to the dead-letter sink.

If a query fails (a Kafka broker restart, say) both are restarted on the same
checkpoints after a back-off: offsets and detector state come back from the
checkpoint, so no record is skipped and no state is lost.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from conf import AppConfig
from detectors import REGISTRY, Alert, AlertStatus, Severity
from sinks import AlertSink, DeadLetterFileSink
from streaming.parsing import ParseLimits, parse_logs, parse_metrics
from streaming.processor import ALERT_SCHEMA, EVENT_INPUT_COLUMNS, DetectorProcessor

log = logging.getLogger(__name__)


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


def routed_events(events: DataFrame, cfg: AppConfig) -> DataFrame:
    """Good events, one row per (enabled detector that wants it, its entity)."""
    ok = events.where(F.col("error").isNull())
    parts = []
    for name, params in cfg.detectors.items():
        det = REGISTRY[name]
        if not params.enabled:
            continue
        cond = F.col("kind").isin(*sorted(det.kinds))
        if det.metrics:
            cond = cond | ((F.col("kind") == "metric") & F.col("metric").isin(*sorted(det.metrics)))
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
    """Alert transitions from the stateful detectors."""
    routed = routed_events(events, cfg).select(
        "detector",
        "entity",
        "event_time",
        F.unix_millis("event_time").alias("event_ms"),
        *[c for c in EVENT_INPUT_COLUMNS if c != "event_ms"],
    )
    return (
        routed.withWatermark("event_time", f"{int(cfg.spark.watermark_delay_s * 1000)} milliseconds")
        .groupBy("detector", "entity")
        .transformWithStateInPandas(
            statefulProcessor=DetectorProcessor(cfg.detectors),
            outputStructType=ALERT_SCHEMA,
            outputMode="Append",
            timeMode="EventTime",
        )
    )


def rows_to_alerts(rows: Sequence[Any]) -> list[Alert]:
    """Collected alert rows → typed alerts, in event-time order."""
    import json

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
    return sorted(alerts, key=lambda a: (a.event_time_ms, a.alert_id, a.status != "firing"))


@dataclass
class PipelineStats:
    """Counters the pipeline query keeps on the driver (also for the CLI summary)."""

    kinds: Counter[str] = field(default_factory=Counter)
    dead_letters: Counter[str] = field(default_factory=Counter)
    alerts: Counter[tuple[str, str, str]] = field(default_factory=Counter)


class AlertDelivery:
    """``foreachBatch`` of the alerts query: collect on the driver, hand to every sink."""

    def __init__(self, sinks: Sequence[AlertSink], stats: PipelineStats) -> None:
        self.sinks = list(sinks)
        self.stats = stats

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        alerts = rows_to_alerts(batch.collect())
        for a in alerts:
            self.stats.alerts[(a.detector, a.entity, a.status.value)] += 1
        for sink in self.sinks:
            # One failing sink must not keep the others from delivering.
            try:
                sink.deliver(batch_id, alerts)
            except Exception:
                log.exception("sink=%s batch=%d delivery failed", sink.name, batch_id)


class PipelineAccounting:
    """``foreachBatch`` of the pipeline query: count kinds, keep dead letters."""

    def __init__(self, dead_letters: DeadLetterFileSink, stats: PipelineStats) -> None:
        self.dead_letters = dead_letters
        self.stats = stats

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        counts = (
            batch.select(F.coalesce(F.col("error"), F.lit("")).alias("e"), "kind")
            .groupBy("e", "kind")
            .count()
            .collect()
        )
        bad = 0
        for r in counts:
            if r["e"]:
                self.stats.dead_letters[r["e"]] += r["count"]
                bad += r["count"]
            else:
                self.stats.kinds[r["kind"]] += r["count"]
        if bad:
            rows = (
                batch.where(F.col("error").isNotNull())
                .select("topic", "partition", "offset", "kafka_ts", "error", "detail", "raw")
                .collect()
            )
            path = self.dead_letters.write(batch_id, [r.asDict() for r in rows])
            log.warning(
                "dead letters: %d in batch %d (%s) -> %s",
                bad,
                batch_id,
                ", ".join(f"{k}={v}" for k, v in sorted(Counter({r["e"]: r["count"] for r in counts if r["e"]}).items())),
                path,
            )


@dataclass
class Pipeline:
    """The two queries of one run, built from one pair of record streams."""

    spark: SparkSession
    cfg: AppConfig
    logs: Callable[[], DataFrame]
    metrics: Callable[[], DataFrame]
    sinks: Sequence[AlertSink]
    checkpoint_dir: Path
    deadletter_dir: Path
    trigger: dict[str, Any]
    stats: PipelineStats = field(default_factory=PipelineStats)

    def start(self) -> list[StreamingQuery]:
        """Start both queries (from their checkpoints, if any)."""
        alerts_q = (
            alert_stream(parsed_events(self.logs(), self.metrics(), self.cfg), self.cfg)
            .writeStream.queryName("flinkwatch-alerts")
            .foreachBatch(AlertDelivery(self.sinks, self.stats))
            .option("checkpointLocation", str(self.checkpoint_dir / "alerts"))
            .trigger(**self.trigger)
            .start()
        )
        pipeline_q = (
            parsed_events(self.logs(), self.metrics(), self.cfg)
            .writeStream.queryName("flinkwatch-pipeline")
            .foreachBatch(PipelineAccounting(DeadLetterFileSink(self.deadletter_dir), self.stats))
            .option("checkpointLocation", str(self.checkpoint_dir / "pipeline"))
            .trigger(**self.trigger)
            .start()
        )
        return [alerts_q, pipeline_q]


def run_forever(pipeline: Pipeline, *, should_stop: Callable[[], bool] = lambda: False) -> int:
    """Run the queries until stopped; restart them on the same checkpoints after a failure.

    Returns:
        0 when stopped on request, 1 after ``max_restarts`` failures in a row.
    """
    cfg = pipeline.cfg.spark
    failures = 0
    while True:
        queries = pipeline.start()
        log.info("queries started: %s", ", ".join(q.name for q in queries))
        started = time.monotonic()
        failed: StreamingQuery | None = None
        while failed is None and not should_stop():
            for q in queries:
                if not q.isActive:
                    failed = q
                    break
            else:
                time.sleep(0.5)
        for q in queries:
            if q.isActive:
                q.stop()
        if failed is None:
            return 0
        exc = failed.exception()
        if time.monotonic() - started > 300:
            failures = 0  # it ran fine for a while: this is a new streak
        failures += 1
        if failures > cfg.max_restarts:
            log.error("query %s failed %d times in a row; giving up: %s", failed.name, failures, exc)
            return 1
        log.error(
            "query %s failed (%s); restarting both queries from their checkpoints in %.0f s "
            "(attempt %d of %d)",
            failed.name,
            str(exc).splitlines()[0] if exc else "stopped",
            cfg.restart_backoff_s,
            failures,
            cfg.max_restarts,
        )
        time.sleep(cfg.restart_backoff_s)
