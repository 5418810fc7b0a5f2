"""Build and run the flinkwatch queries.

Live runs (:class:`Pipeline` with ``bus="kafka"``) run three streaming queries in one
SparkSession:

* ``flinkwatch-parse``: raw records → parsed events on the Kafka event bus
  (:mod:`streaming.bus`) and malformed records on the dead-letter topic. Stateless, so it
  runs in Spark's real-time mode (``spark.parse_mode``): a record is on the bus tens of
  milliseconds after it arrived. Events are counted by kind and reason with ``observe``.
* ``flinkwatch-detect``: the bus → routed per detector → the stateful adapter
  (:mod:`streaming.processor`) → alert sinks, via ``foreachBatch``.
* ``flinkwatch-deadletters``: the dead-letter topic → files, with their Kafka coordinates.

The parse query places each entity's records on a partition of the bus itself, by a count
that changes only when the detect query has read the whole bus; until then the parse query
waits (:mod:`streaming.placement`).

Replay and the tests' ``run_once`` use ``bus="files"``: the parse query's ``foreachBatch``
writes the same bus records as Parquet files and the dead letters directly.

If a query fails (a Kafka broker restart, say) all are restarted on their checkpoints
after a back-off: offsets and detector state come back from the checkpoints, so no record
is skipped and no state is lost.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from conf import AppConfig
from conf.kafka_client import kafka_settings
from conf.reload import ConfigWatcher
from detectors.model import EVENT_KINDS
from sinks import DeadLetterFileSink
from streaming import catchup, placement
from streaming.bus import active_detectors, bus_records, detect_input
from streaming.catchup import ParsePlan
from streaming.delivery import (
    PARSE_COUNTS,
    AlertDelivery,
    DeadLetterBatch,
    Outputs,
    ParseBatch,
    PipelineStats,
)
from streaming.listener import DETECT_QUERY
from streaming.metric_parsing import parse_metrics
from streaming.parsing import DEAD_LETTER_REASONS, ParseLimits, parse_logs
from streaming.placement import Placement
from streaming.processor import STATE_LAYOUT, ShardProcessor
from streaming.rows import DETECT_SCHEMA
from streaming.sources import kafka_records, kafka_stream
from streaming.ticks import TICK_KEY, Ticker, tick_value

log = logging.getLogger(__name__)

BusKind = Literal["kafka", "files"]


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


def counted(events: DataFrame) -> DataFrame:
    """``events`` with a per-batch count of every kind and dead-letter reason attached.

    ``observe`` works in real-time mode, where no ``foreachBatch`` may run; the counts
    arrive with the query's progress (:meth:`PipelineStats.count_observed`).
    """
    kinds = [F.sum(F.when(F.col("kind") == k, 1).otherwise(0)).alias(f"k_{k}") for k in EVENT_KINDS]
    reasons = [
        F.sum(F.when(F.col("error") == r, 1).otherwise(0)).alias(f"e_{r}")
        for r in DEAD_LETTER_REASONS
    ]
    return events.observe(PARSE_COUNTS, *kinds, *reasons)


def alert_stream(
    rows: DataFrame, cfg: AppConfig, admit_new: bool = True, token: str = ""
) -> DataFrame:
    """Alert transitions (and signal, error and refusal rows) from the detectors.

    ``rows`` are the detect query's input (:func:`streaming.bus.detect_input`) with a
    watermark on ``event_time``; ``admit_new=False`` refuses entities not seen before;
    ``token`` names this run of the query.
    """
    sp = cfg.spark
    grace = None if sp.deadline_grace_s is None else int(sp.deadline_grace_s * 1000)
    processor = ShardProcessor(
        cfg.resolver(),
        active_detectors(cfg),
        admit_new=admit_new,
        token=token,
        delay_ms=int(sp.watermark_delay_s * 1000),
        grace_ms=grace,
    )
    return rows.groupBy("shard").transformWithStateInPandas(
        statefulProcessor=processor,
        outputStructType=DETECT_SCHEMA,
        outputMode="Append",
        timeMode="EventTime",
    )


@dataclass
class Pipeline:
    """The queries of one run.

    Attributes:
        bus: ``kafka``: the live layout: three queries reading and writing Kafka (the raw
            topics, the event bus and the dead-letter topic of ``cfg.kafka``); ``files``:
            replay, the parse query writes the bus as Parquet files under the checkpoint
            directory, from ``logs`` and ``metrics``.
        trigger: ``None``: the parse query as ``spark.parse_mode`` says (real time once
            caught up) and the detect query on ``spark.trigger_interval_s``, both read at
            each start, so a reload changes them; replay and tests pass
            ``{"availableNow": True}`` for every query.
    """

    spark: SparkSession
    cfg: AppConfig
    outputs: Outputs
    checkpoint_dir: Path
    deadletter_dir: Path
    logs: Callable[[], DataFrame] | None = None
    metrics: Callable[[], DataFrame] | None = None
    trigger: dict[str, Any] | None = None
    bus: BusKind = "files"
    stats: PipelineStats = field(default_factory=PipelineStats)
    #: How the running parse query was started (Kafka bus only).
    parse_plan: ParsePlan | None = None
    #: False while the detect query holds ``spark.max_entities`` (see :meth:`admission`).
    admit_new: bool = True
    #: When ``admit_new`` last switched (monotonic seconds; ``None``: never).
    switched_at: float | None = None
    #: Writes ticks to the event bus (Kafka bus only; see :mod:`streaming.ticks`).
    ticker: Ticker | None = None
    #: How the parse query places records on the bus, decided at each start (Kafka bus).
    placement: Placement | None = None

    def _trigger(self) -> dict[str, Any]:
        if self.trigger is not None:
            return self.trigger
        return {"processingTime": f"{int(self.cfg.spark.trigger_interval_s * 1000)} milliseconds"}

    @property
    def realtime_wanted(self) -> bool:
        """True when the parse query is to run in real-time mode once caught up."""
        return (
            self.bus == "kafka" and self.trigger is None and self.cfg.spark.parse_mode == "realtime"
        )

    @property
    def catching_up(self) -> bool:
        """True while the parse query runs micro-batches before switching to real time."""
        return self.realtime_wanted and self.parse_plan is not None and self.parse_plan.catching_up

    @property
    def parse_held(self) -> bool:
        """True while the parse query waits for the detect query to read the whole bus."""
        return self.placement is not None and self.placement.held

    @property
    def placement_record(self) -> Path:
        """Where the bus's partition count is recorded: beside the checkpoints, not in them."""
        return self.cfg.output.state_dir / placement.RECORD_NAME

    @property
    def detect_checkpoint(self) -> Path:
        """The detect query's checkpoint.

        The state is keyed by shard: another shard count (or layout of a shard's value) is
        another checkpoint, rebuilt from the bus (a new detect query reads all of it).
        """
        name = "detect" if self.bus == "files" else "detect-kafka"
        return self.checkpoint_dir / f"{name}-shards{self.cfg.spark.state_shards}-{STATE_LAYOUT}"

    def place_bus(self) -> Placement:
        """Decide how the parse query places records on the bus from this start on.

        The recorded count while the topic has as many partitions; else the topic's count,
        recorded, once the detect query has read every record on the bus, and until then
        the parse query is held (see :mod:`streaming.placement`).

        Raises:
            KafkaConnectError: the brokers cannot be reached.
            KafkaTopicError: the bus topic does not exist.
        """
        k = self.cfg.kafka
        topic = k.events_topic or ""
        known = placement.recorded(self.placement_record, topic)
        parts, unread = placement.bus_backlog(k, self.detect_checkpoint)
        plan = placement.decide(topic, known, parts, unread)
        if plan.partitions is not None and plan.partitions != known:
            placement.record(self.placement_record, topic, plan.partitions)
        self.placement = plan
        return plan

    def bus_drained(self) -> bool:
        """True when the detect query has committed every record the bus holds."""
        return placement.bus_backlog(self.cfg.kafka, self.detect_checkpoint)[1] == 0

    @property
    def hop_dir(self) -> Path:
        """Where the parse query hands events to the detect query on the files bus."""
        return self.checkpoint_dir / "events"

    def _dead_letter_sink(self) -> DeadLetterFileSink:
        out = self.cfg.output
        return DeadLetterFileSink(
            self.deadletter_dir,
            max_per_batch=out.deadletters_max_per_batch,
            retain_bytes=int(out.deadletters_retain_mb * 2**20),
        )

    def _kafka(self, topic: str, **options: Any) -> DataFrame:
        return kafka_records(self.spark, self.cfg.kafka, topic, **options)

    def start_parse(self) -> StreamingQuery:
        """Start the parse query (from its checkpoint, if any)."""
        # Set here, not only at session start, so a reloaded log_timezone applies.
        self.spark.conf.set("spark.sql.session.timeZone", self.cfg.parsing.log_timezone)
        if self.bus == "files":
            if self.logs is None or self.metrics is None:
                msg = "the files bus reads from logs and metrics"
                raise ValueError(msg)
            return (
                parsed_events(self.logs(), self.metrics(), self.cfg)
                .writeStream.queryName("flinkwatch-parse")
                .foreachBatch(
                    ParseBatch(self.cfg, self.hop_dir, self._dead_letter_sink(), self.stats)
                )
                .option("checkpointLocation", str(self.checkpoint_dir / "parse"))
                .trigger(**self._trigger())
                .start()
            )
        k = self.cfg.kafka
        plan = self.parse_plan = catchup.plan(
            self.cfg, self.checkpoint_dir, realtime=self.realtime_wanted
        )
        rt = plan.mode == "realtime"
        if not (plan.checkpoint / "commits").exists():
            # A fresh checkpoint numbers its batches from 0 again.
            self.stats.counted.pop(self._count_key, None)
        logs, metrics = (
            self._kafka(
                t,
                realtime=rt,
                starting_offsets=plan.starting.get(t),
                max_offsets=plan.max_offsets.get(t),
            )
            for t in (k.logs_topic, k.metrics_topic)
        )
        events = counted(parsed_events(logs, metrics, self.cfg))
        placed = self.placement or self.place_bus()
        if placed.partitions is None:
            msg = f"the parse query waits until the detect query has read {placed.topic}"
            raise RuntimeError(msg)
        writer = (
            bus_records(events, self.cfg, dead_letters=True, partitions=placed.partitions)
            .writeStream.queryName("flinkwatch-parse")
            .format("kafka")
            .options(**kafka_settings(k).spark(reader=False))
            .outputMode("update")
        )
        trigger = (
            {"realTime": f"{int(self.cfg.spark.realtime_batch_s * 1000)} milliseconds"}
            if rt
            else self._trigger()
        )
        return writer.option("checkpointLocation", str(plan.checkpoint)).trigger(**trigger).start()

    def _bus(self) -> DataFrame:
        if self.bus == "files":
            self.hop_dir.mkdir(parents=True, exist_ok=True)
            return (
                self.spark.readStream.schema("key string, value string")
                # Processed bus files are deleted; the parse checkpoint has the offsets.
                .option("cleanSource", "delete")
                .parquet(str(self.hop_dir))
            )
        # The bus is flinkwatch's own: a new detect query reads all of it.
        return kafka_stream(
            self.spark, self.cfg.kafka, self.cfg.kafka.events_topic, starting_offsets="earliest"
        ).select(
            F.col("key").cast("string").alias("key"),
            F.col("value").cast("string").alias("value"),
            F.col("timestamp").alias("bus_ts"),
        )

    def start_detect(self) -> StreamingQuery:
        """Start the detect query (from its checkpoint, if any)."""
        delay = f"{int(self.cfg.spark.watermark_delay_s * 1000)} milliseconds"
        # One stream for logs and metrics together: with one watermark per stream, a
        # stream that has no data (no metrics topic traffic, a logs-only replay) would
        # hold the global watermark at zero and no timer would ever fire. The cost: a
        # topic lagging the other by more than the watermark delay loses its late rows,
        # which the progress log and flinkwatch_late_rows_dropped_total make visible.
        rows = detect_input(self._bus(), self.cfg.spark.state_shards)
        rows = rows.withWatermark("event_time", delay)
        checkpoint = self.detect_checkpoint
        return (
            alert_stream(rows, self.cfg, self.admit_new, secrets.token_hex(2))
            .writeStream.queryName("flinkwatch-detect")
            .foreachBatch(AlertDelivery(self.outputs, self.stats, self.cfg, checkpoint))
            .option("checkpointLocation", str(checkpoint))
            .trigger(**self._trigger())
            .start()
        )

    def start_deadletters(self) -> StreamingQuery:
        """Start the query that keeps the dead-letter topic's records as files."""
        trigger = self.trigger or {"processingTime": "5 seconds"}
        return (
            kafka_stream(
                self.spark,
                self.cfg.kafka,
                self.cfg.kafka.deadletters_topic,
                starting_offsets="earliest",
            )
            .writeStream.queryName("flinkwatch-deadletters")
            .foreachBatch(DeadLetterBatch(self._dead_letter_sink()))
            .option("checkpointLocation", str(self.checkpoint_dir / "deadletters"))
            .trigger(**trigger)
            .start()
        )

    def starters(self) -> list[Callable[[], StreamingQuery]]:
        """The queries' start functions, in the order data flows through them.

        On the Kafka bus the placement is decided first (:meth:`place_bus`); while it
        holds the parse query back, only the detect and dead-letter queries start.
        """
        if self.bus == "files":
            return [self.start_parse, self.start_detect]
        if self.place_bus().held:
            # Its plan belongs to a run that is over: no catch-up switch while held.
            self.parse_plan = None
            return [self.start_detect, self.start_deadletters]
        return [self.start_parse, self.start_detect, self.start_deadletters]

    def start(self) -> list[StreamingQuery]:
        """Start every query, to run side by side."""
        return [start() for start in self.starters()]

    def admission(self) -> bool:
        """Whether new entities must now be refused, or admitted again (then restart).

        The entities are counted by the detect query's shards: each turn of a shard ends
        with a row saying how many it holds (:meth:`PipelineStats.count_entities`). The
        state store's rows say nothing of them: a shard keeps all its entities and its
        wake-up table in one value, beside its timer. Past ``spark.max_entities`` new
        entities are refused; below 90 % of it they are admitted again. A processor reads
        the switch when the query starts, so a change means restarting the queries on
        their checkpoints; after a switch the next waits ``spark.entity_cap_min_dwell_s``,
        so a count hovering at the cap cannot restart the queries at every check.
        """
        held = self.stats.entities()
        if held is None:
            return False
        cap = self.cfg.spark.max_entities
        refuse = self.admit_new and held > cap
        admit = not self.admit_new and held < 0.9 * cap
        if not (refuse or admit):
            return False
        now = time.monotonic()
        dwell = self.cfg.spark.entity_cap_min_dwell_s
        if self.switched_at is not None and now - self.switched_at < dwell:
            return False
        self.switched_at = now
        if refuse:
            log.error(
                "detect: %d entities held, more than spark.max_entities=%d: new entities are "
                "refused (flinkwatch_entities_refused_total) until idle ones are evicted "
                "below 90 %%, for %.0f s at least",
                held,
                cap,
                dwell,
            )
        else:
            log.warning("detect: %d entities held; new entities are admitted again", held)
        self.admit_new = admit
        return True

    def tick(self, queries: Sequence[StreamingQuery]) -> None:
        """Give the ticker the parse query's progress (Kafka bus, ``spark.tick_interval_s``)."""
        if self.bus != "kafka" or not self.cfg.spark.tick_interval_s:
            return
        parse = next((q for q in queries if q.name == "flinkwatch-parse"), None)
        if parse is None:
            return
        if self.ticker is None:
            self.ticker = _kafka_ticker(self.cfg)
        self.ticker.interval_s = self.cfg.spark.tick_interval_s
        self.ticker.poll(parse.lastProgress)

    def count_progress(self, queries: Sequence[StreamingQuery]) -> None:
        """Count what the parse query observed in the batches it finished since last asked.

        Spark keeps the last 100 progress reports of a query; this is asked every quarter
        second, and each batch is counted once whatever overlaps.
        """
        if self.bus != "kafka":
            return
        for q in queries:
            if q.name != "flinkwatch-parse":
                continue
            last = q.lastProgress
            done = self.stats.counted.get(self._count_key, -1)
            if last is None or last.batchId <= done:
                continue
            # The whole list (parsed from JSON, up to 100 reports) only when a batch was
            # missed between two looks.
            for progress in [last] if last.batchId == done + 1 else q.recentProgress:
                self.stats.count_observed(
                    self._count_key, progress.batchId, progress.observedMetrics
                )

    @property
    def _count_key(self) -> str:
        # Batch ids belong to a checkpoint: the two parse modes number theirs apart.
        return f"parse:{self.parse_plan.checkpoint.name if self.parse_plan else '-'}"

    def run_once(self) -> None:
        """Process everything available, query after query (replay, tests).

        A parse query held back by the bus placement runs after the detect query has read
        the bus, in a second round.

        Raises:
            StreamingQueryException: when a query fails.
        """
        for _round in range(2):
            for start in self.starters():
                q = start()
                q.awaitTermination()
                exc = q.exception()
                if exc is not None:
                    raise exc
                self.count_progress([q])
            if not self.parse_held:
                return


def run_forever(
    pipeline: Pipeline,
    *,
    should_stop: Callable[[], bool] = lambda: False,
    watcher: ConfigWatcher | None = None,
    reload_requested: threading.Event | None = None,
    on_reload: Callable[[AppConfig], None] | None = None,
) -> int:
    """Run the queries until stopped; restart them on the same checkpoints after a failure.

    A valid change of the config file (or SIGHUP, via ``reload_requested``) restarts both
    queries on their checkpoints with the new config: detector state is kept, and a
    micro-batch cut short is replayed, which the sinks dedupe; an incident its first run
    opened and the replay (with the new settings) does not is closed by the ledger. The
    new config goes to ``on_reload`` too (:meth:`streaming.runtime.Runtime.swap`: the
    sinks' config) once the queries have stopped, before they start again.

    A failure because a volume is full (the ledger's, the checkpoints') is waited out: it
    is not counted against ``spark.max_restarts``, and the queries are started again after
    a back-off doubling up to a minute, until there is space. Spark has not committed the
    failed batch, so nothing is skipped while the event bus still holds its records.

    Returns:
        0 when stopped on request, 1 after ``max_restarts`` failures in a row.
    """
    failures = 0
    full = 0  # failures in a row because a volume is full
    while True:
        if should_stop():  # asked while Spark started, or during a back-off
            return 0
        try:
            queries = pipeline.start()
        except Exception as exc:
            # A query that cannot start (bad checkpoint, unreachable storage) must not leave
            # the other one running unsupervised: stop what started and retry as a failure.
            _stop_quietly(list(pipeline.spark.streams.active))
            why = storage_full(exc)
            _count_failure(pipeline, why)
            if why is not None:
                full += 1
                wait = _full_backoff(pipeline.cfg, full)
                _say_full(pipeline, "starting the queries", why, wait)
                if _sleep_unless(should_stop, wait):
                    return 0
                continue
            log.exception("starting the queries failed")
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
        next_catchup = time.monotonic() + _CATCHUP_CHECK_S
        next_drain = time.monotonic() + _DRAIN_CHECK_S
        failed: StreamingQuery | None = None
        new_cfg: AppConfig | None = None
        switch = False
        while failed is None and new_cfg is None and not switch and not should_stop():
            pipeline.count_progress(queries)
            if hasattr(pipeline, "tick"):
                pipeline.tick(queries)
            failed = next((q for q in queries if not q.isActive), None)
            if failed is not None:
                break
            if getattr(pipeline, "parse_held", False) and time.monotonic() >= next_drain:
                next_drain = time.monotonic() + _DRAIN_CHECK_S
                if _drained(pipeline):
                    log.info("bus: the detect query has read the bus; starting the parse query")
                    switch = True
                    break
            if time.monotonic() >= next_catchup:
                next_catchup = time.monotonic() + _CATCHUP_CHECK_S
                if getattr(pipeline, "catching_up", False) and _caught_up(pipeline):
                    log.info("parse: caught up; restarting the queries to parse in real time")
                    switch = True
                    break
                if hasattr(pipeline, "admission") and pipeline.admission():
                    switch = True
                    break
            forced = reload_requested is not None and reload_requested.is_set()
            if watcher is not None and (forced or time.monotonic() >= next_poll):
                if reload_requested is not None:
                    reload_requested.clear()
                new_cfg = watcher.poll(force=forced)
                next_poll = time.monotonic() + pipeline.cfg.reload_interval_s
            else:
                time.sleep(0.25)
        stats = getattr(pipeline, "stats", None)
        note = _stop_quietly(queries, stats, pipeline.cfg.spark.stop_grace_s)
        if switch:
            continue
        if new_cfg is not None:
            pipeline.cfg = new_cfg
            log.info("config reload: restarting the queries on their checkpoints")
            if on_reload is not None:
                on_reload(new_cfg)
            continue
        if failed is None:
            if stats is not None:
                stats.stop_note = note
            return 0
        exc = failed.exception()
        if time.monotonic() - started > 300:
            failures = full = 0  # it ran fine for a while: this is a new streak
        why = storage_full(exc)
        _count_failure(pipeline, why)
        if why is not None:
            full += 1
            wait = _full_backoff(pipeline.cfg, full)
            _say_full(pipeline, f"query {failed.name}", why, wait)
            if _sleep_unless(should_stop, wait):
                return 0
            continue
        full = 0
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


#: What an error says when a volume is full: ENOSPC and EDQUOT as the JVM and the OS word
#: them, and SQLite's SQLITE_FULL (the ledger).
_FULL_WORDS = ("no space left on device", "disk quota exceeded", "database or disk is full")
#: Longest wait between two starts while a volume is full.
FULL_BACKOFF_MAX_S = 60.0


def storage_full(exc: BaseException | None) -> str | None:
    """The line of a query failure that says a volume is full, or ``None``.

    A failure in ``foreachBatch`` reaches the driver as Spark's wrapper around the Python
    traceback, so the words are looked for in every line; the last such line is returned:
    a chained Python traceback ends with the error raised last, which says the most
    (the ledger's, naming its file, after SQLite's own).
    """
    if exc is None:
        return None
    found = [line for line in str(exc).splitlines() if any(w in line.lower() for w in _FULL_WORDS)]
    return found[-1].strip()[:500] if found else None


def _full_backoff(cfg: AppConfig, streak: int) -> float:
    return min(cfg.spark.restart_backoff_s * 2 ** (streak - 1), FULL_BACKOFF_MAX_S)


def _count_failure(pipeline: Any, why: str | None) -> None:
    stats = getattr(pipeline, "stats", None)
    if stats is not None:
        stats.count_query_failure("other" if why is None else "storage_full")


def _say_full(pipeline: Any, what: str, why: str, wait: float) -> None:
    log.error(
        "%s failed: a volume is full (%s). Detection waits; Spark did not commit the batch "
        "and runs it again once there is space, so nothing is lost while the event bus "
        "holds its records (24 h). Free space under output.state_dir=%s; next try in %.0f s "
        "(not counted against spark.max_restarts)",
        what,
        why,
        pipeline.cfg.output.state_dir,
        wait,
    )


def _kafka_ticker(cfg: AppConfig) -> Ticker:
    """A ticker reading the raw topics and writing the event bus of ``cfg.kafka``."""
    from kafka import KafkaProducer

    from streaming.topics import connect

    k = cfg.kafka
    producer: Any = None

    def send(event_ms: int) -> None:
        nonlocal producer
        if producer is None:
            producer = connect(
                KafkaProducer, kafka_settings(k).python, wait_s=0, client_id="flinkwatch-ticks"
            )
        # One per partition: a micro-batch may read the partitions unevenly.
        parts = sorted(producer.partitions_for(k.events_topic) or ())
        for p in parts:
            value = tick_value(event_ms, p, len(parts))
            producer.send(k.events_topic, key=TICK_KEY.encode(), value=value.encode(), partition=p)
        producer.flush(timeout=10)

    return Ticker(
        end_offsets=lambda: catchup.end_offsets(k, [k.logs_topic, k.metrics_topic])[1],
        send=send,
        interval_s=cfg.spark.tick_interval_s or 0,
    )


#: How often a catching-up parse query is checked for having caught up (seconds).
_CATCHUP_CHECK_S = 10.0
#: How often a held parse query checks whether the detect query has read the bus
#: (seconds): detection of new records waits for it.
_DRAIN_CHECK_S = 1.0


def _caught_up(pipeline: Any) -> bool:
    plan = pipeline.parse_plan
    try:
        return bool(plan is not None and catchup.caught_up(pipeline.cfg, plan.checkpoint))
    except Exception as exc:  # Kafka unreachable for a moment: ask again later
        log.warning("parse: cannot tell whether the catch-up is done: %s", exc)
        return False


def _drained(pipeline: Any) -> bool:
    try:
        return bool(pipeline.bus_drained())
    except Exception as exc:  # Kafka unreachable for a moment: ask again later
        log.warning("bus: cannot tell whether the detect query has read the bus: %s", exc)
        return False


def _sleep_unless(should_stop: Callable[[], bool], seconds: float) -> bool:
    """Sleep up to ``seconds``; True as soon as a stop is requested."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if should_stop():
            return True
        time.sleep(min(0.2, max(deadline - time.monotonic(), 0)))
    return should_stop()


#: JVM loggers that report a stopped query's interrupted tasks and threads as failures (the
#: real-time parse query's tasks are always running, so every stop interrupts them), and the
#: transformWithState state server, which logs every call a Python worker of an
#: interrupted detect task still makes, on the state store Spark aborted, as an ERROR
#: with its stack trace (STATE_STORE_OPERATION_OUT_OF_ORDER).
_STOP_NOISE = (
    "org.apache.spark.sql.execution.datasources.v2.WriteToDataSourceV2Exec",
    "org.apache.spark.sql.execution.datasources.v2.DataWritingSparkTask",
    "org.apache.spark.scheduler.TaskSetManager",
    "org.apache.spark.executor.Executor",
    "org.apache.spark.util.Utils",
    # Interrupted while it forked chmod for a checkpoint file (no native Hadoop library).
    "org.apache.hadoop.util.Shell",
    "org.apache.spark.sql.execution.python.streaming.TransformWithStateInPySparkStateServer",
)
#: Longest wait, after the queries stopped, for their interrupted tasks to end.
_TASKS_END_S = 10.0


def _stop_quietly(
    queries: Sequence[StreamingQuery], stats: PipelineStats | None = None, grace_s: float = 0.0
) -> str:
    """Stop ``queries`` in order; the detect query between two micro-batches if it can.

    A detect batch cut short is run again at the next start (Spark did not commit it;
    the sinks dedupe what it had recorded), but its interrupted tasks leave Python workers
    calling a state store Spark aborted. So when ``stats`` counts the detect query's
    deliveries, it is stopped at once if no batch runs, or as soon as the one in flight
    has been delivered, waiting up to ``grace_s``; after that the batch is abandoned.

    Returns:
        What became of the detect query's batch in flight ("" without a detect query).
    """
    # Stopping interrupts the running micro-batch; the callback's py4j thread then logs
    # the InterruptedException as an error, which on a requested stop is not one.
    py4j_log = logging.getLogger("py4j.clientserver")
    level = py4j_log.level
    py4j_log.setLevel(logging.CRITICAL)
    restore = _jvm_log_levels(_STOP_NOISE, "OFF") if queries else None
    note = ""
    try:
        for q in queries:
            if not q.isActive:
                continue
            if q.name == DETECT_QUERY and stats is not None:
                note = _finish_batch(q, stats, grace_s)
            q.stop()
        if restore:
            _settle()
    finally:
        py4j_log.setLevel(level)
        if restore:
            restore()
    return note


def _finish_batch(query: StreamingQuery, stats: PipelineStats, grace_s: float) -> str:
    """Wait until ``query`` runs no micro-batch (up to ``grace_s``); say how it went."""
    seen = stats.delivered  # before asking: a batch that ends meanwhile still counts
    if not _in_batch(query):
        return "no micro-batch in flight"
    deadline = time.monotonic() + grace_s

    def left() -> float:
        return max(deadline - time.monotonic(), 0.0)

    abandoned = (
        f"micro-batch in flight abandoned at spark.stop_grace_s={grace_s:g}, "
        "the next start runs it again"
    )
    # Woken by the delivery itself: with batches back to back (trigger_interval_s 0, a
    # backlog) the next one starts at once, which a poll of the status would not catch.
    while not stats.wait_delivered(seen, min(0.1, left())):
        if not _in_batch(query):  # a trigger that found no data, or a failure
            return "no micro-batch in flight"
        if not left():
            return abandoned
    batch = stats.delivered_batch
    # Spark commits the batch after the handler returned, then reports its progress;
    # stopped before, the next start would run the batch again (its transitions are
    # recorded, so nothing is sent twice, but the work is done twice).
    if _poll_until(lambda: _committed(query, batch), left(), every_s=0.01):
        return f"micro-batch {batch} finished first"
    return f"micro-batch {batch} delivered but not committed, the next start runs it again"


def _in_batch(query: StreamingQuery) -> bool:
    return bool(query.isActive and query.status.get("isTriggerActive"))


def _committed(query: StreamingQuery, batch_id: int | None) -> bool:
    if not query.isActive or batch_id is None:
        return True
    last = query.lastProgress
    return last is not None and last.batchId >= batch_id


def _settle() -> None:
    """Wait until Spark has taken in the stopped queries' last jobs and their tasks ended.

    ``stop()`` returns once a query's thread has ended, but the scheduler handles the job
    that thread submitted last, and then its cancellation, later, in order; and a task
    reports its interruption only once it has noticed it. Both used to come after the
    stop's loggers spoke again: the real-time parse query, stopped as it started,
    launched its tasks only then ("Aborting task"), or they reported while Spark stopped
    ("Exception in statusUpdate"). A job submitted now is handled after those events:
    once it has run, no task of the stopped queries is left to launch, and the wait for
    the launched ones to end (the scheduler's own count, not the status store's, which
    lags) covers the rest.
    """
    from pyspark import SparkContext

    sc = SparkContext._active_spark_context  # noqa: SLF001 - the scheduler's view is the JVM's
    jsc, jvm = sc._jsc if sc else None, sc._jvm if sc else None  # noqa: SLF001
    if jsc is None or jvm is None:
        return
    one = jvm.java.util.ArrayList()
    one.add(0)
    job = jsc.parallelize(one, 1).countAsync()  # a JVM job: no query to plan, no Python
    try:
        job.get(int(_TASKS_END_S), jvm.java.util.concurrent.TimeUnit.SECONDS)
    except Exception:  # noqa: BLE001 - no task slot in time (executors lost): do not hang
        job.cancel(True)
        return
    launched = jsc.sc().taskScheduler().taskIdToTaskSetManager()
    _poll_until(launched.isEmpty, _TASKS_END_S)


def _poll_until(done: Callable[[], bool], seconds: float, every_s: float = 0.1) -> bool:
    """Poll ``done`` up to ``seconds``; whether it held."""
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() >= deadline:
            return False
        time.sleep(every_s)
    return True


def _jvm_log_levels(names: Sequence[str], level: str) -> Callable[[], None] | None:
    """Set JVM loggers to ``level``; a function that puts them back (None: no JVM here)."""
    from pyspark import SparkContext

    jvm = SparkContext._jvm  # noqa: SLF001 - log4j levels are only reachable here
    if jvm is None:
        return None
    log4j = jvm.org.apache.logging.log4j
    config = log4j.core.config.Configurator
    before = {n: log4j.LogManager.getLogger(n).getLevel() for n in names}
    for n in names:
        config.setLevel(n, log4j.Level.getLevel(level))

    def restore() -> None:
        for n, lvl in before.items():
            config.setLevel(n, lvl)

    return restore
