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

The tests' ``run_once`` uses ``bus="files"``: the parse query's ``foreachBatch`` writes
the same bus records as Parquet files and the dead letters directly, so the live detect
query (its state, the entity cap, a batch the ledger fails) is tested without Kafka.
``flinkwatch replay`` runs no queries at all (:mod:`streaming.replay`).

If a query fails (a Kafka broker restart, say) all are restarted on their checkpoints
after a back-off: offsets and detector state come back from the checkpoints, so no record
is skipped and no state is lost.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from conf import AppConfig, SparkConfig
from conf.kafka_client import kafka_settings
from conf.running import RunningConfig
from detectors.model import EVENT_KINDS
from sinks import DeadLetterFileSink
from streaming import catchup, checkpoints, placement
from streaming.bus import active_detectors, bus_partition, bus_records, detect_input
from streaming.catchup import ParsePlan, Quiet, Switch
from streaming.checkpoints import CheckpointDir
from streaming.delivery import (
    PARSE_COUNTS,
    AlertDelivery,
    DeadLetterBatch,
    Outputs,
    ParseBatch,
    PipelineStats,
)
from streaming.listener import PARSE_QUERY
from streaming.metric_parsing import parse_metrics
from streaming.parsing import DEAD_LETTER_REASONS, ParseLimits, parse_logs
from streaming.placement import Placement
from streaming.processor import STATE_LAYOUT, ShardProcessor
from streaming.restarts import Admission, admission
from streaming.rows import DETECT_SCHEMA, Forward
from streaming.session import query_settings
from streaming.shard_keys import checkpoint_name
from streaming.sources import kafka_records, kafka_stream
from streaming.ticks import TICK_KEY, Ticker, tick_value, woken

log = logging.getLogger(__name__)

BusKind = Literal["kafka", "files"]

#: The detect query evaluates its expressions without generating a Java class for them
#: (Spark's interpreted projections and predicates). Spark plans each micro-batch anew,
#: and its stateful operator's filter of late rows carries the batch's watermark as a
#: constant: with generated classes each batch compiled new ones (75-100 compiles and ~200
#: classes a minute at 500 records/s) and the JIT compiled their methods again, batch
#: after batch. Its expressions are small (a JSON head, a hash, the watermark's filter).
#: Measured (issue #34): `python -m bench.jit` (100 jobs, 500 records/s), the process
#: tree from the fifth minute 0.53-0.63 cores against ~0.70, the C2 compiler 1.6-2.7 CPU s
#: a minute against 4-6, no class generated after the first minute. `make bench`'s
#: 8-minute steady runs (their first minutes' compiles included) do not tell it from the
#: hours' spread: own CPU 0.700 and 0.826 cores against 0.761-0.780 at 494 records/s; at
#: 10,028 records/s the detect JVM's share 0.096 cores against 0.087, pages as fast. The
#: parse query keeps generated classes: its records are many, and its plan's classes are
#: compiled once and reused.
DETECT_SETTINGS = {"spark.sql.codegen.factoryMode": "NO_CODEGEN"}


def parse_limits(cfg: AppConfig) -> ParseLimits:
    """Parser bounds from the config."""
    return ParseLimits(
        max_record_bytes=cfg.parsing.max_record_bytes,
        max_future_ms=int(cfg.parsing.max_future_skew_s * 1000),
        max_points_per_record=cfg.parsing.max_points_per_record,
    )


def parsed_events(logs: DataFrame, metrics: DataFrame, cfg: AppConfig) -> DataFrame:
    """Both record streams parsed into one stream of events (and dead letters)."""
    lim = parse_limits(cfg)
    # Read from ``cfg`` at each start of the parse query, so a reload that restarts the
    # queries applies changed naming rules too.
    named = parse_metrics(metrics, lim, names=cfg.parsing.metric_names)
    # Log records may carry their Kafka key (``source_key``, streaming.forwards).
    return parse_logs(logs, lim).unionByName(named, allowMissingColumns=True)


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
        shards=sp.state_shards,
    )
    return rows.groupBy("shard").transformWithStateInPandas(
        statefulProcessor=processor,
        outputStructType=DETECT_SCHEMA,
        outputMode="Append",
        timeMode="EventTime",
    )


@dataclass
class Pipeline:
    """The queries of one run: how each starts, and what they count.

    What only the live layout keeps across starts (the parse query's plan, the bus's
    placement, the ticker) is its path's (:class:`KafkaPath`), not the pipeline's.

    Attributes:
        config: The holder of the config in force (:class:`~conf.running.RunningConfig`,
            the runtime's): each query reads it when it starts, so a reload that swaps it
            reaches the queries at their restart.
        bus: ``kafka``: the live layout: three queries reading and writing Kafka (the raw
            topics, the event bus and the dead-letter topic of ``cfg.kafka``); ``files``:
            the tests' layout, the parse query writes the bus as Parquet files under the
            checkpoint directory, from ``logs`` and ``metrics``.
        trigger: ``None``: the parse query as ``spark.parse_mode`` says (real time once
            caught up) and the detect query on ``spark.trigger_interval_s``, both read at
            each start, so a reload changes them; tests pass
            ``{"availableNow": True}`` for every query.
    """

    spark: SparkSession
    config: RunningConfig
    outputs: Outputs
    #: A local ``Path``, or a directory on HDFS or S3 (:func:`streaming.checkpoints.open_dir`).
    checkpoint_dir: CheckpointDir
    deadletter_dir: Path
    logs: Callable[[], DataFrame] | None = None
    metrics: Callable[[], DataFrame] | None = None
    trigger: dict[str, Any] | None = None
    bus: BusKind = "files"
    stats: PipelineStats = field(default_factory=PipelineStats)
    #: Whether new entities are admitted (see :meth:`admission`).
    entity_cap: Admission = field(default_factory=Admission)

    def __post_init__(self) -> None:
        # The one place the two layouts part: everything else is the same for both.
        self.path: FilesPath | KafkaPath = KafkaPath() if self.bus == "kafka" else FilesPath()

    @property
    def cfg(self) -> AppConfig:
        """The config in force (:attr:`config`'s), read at each use."""
        return self.config.current

    @property
    def admit_new(self) -> bool:
        """False while the detect query holds ``spark.max_entities``: new entities refused."""
        return self.entity_cap.admit_new

    def running(self) -> list[StreamingQuery]:
        """The queries running now in the session."""
        return list(self.spark.streams.active)

    def trigger_options(self) -> dict[str, Any]:
        """The queries' trigger: the tests' ``trigger``, else ``spark.trigger_interval_s``."""
        if self.trigger is not None:
            return self.trigger
        return {"processingTime": f"{int(self.cfg.spark.trigger_interval_s * 1000)} milliseconds"}

    def parse_switch(self, ask_brokers: bool) -> Switch | None:
        """The mode the parse query is to switch to now, if another (:func:`catchup.decide`).

        ``ask_brokers``: whether a catching-up query may ask the brokers how far behind it
        is (a round trip, so not at every look).

        Raises:
            KafkaConnectError: the brokers cannot be reached.
        """
        return self.path.parse_switch(self, ask_brokers)

    @property
    def parse_held(self) -> bool:
        """True while the parse query waits for the detect query to read the whole bus."""
        return self.path.parse_held

    def bus_drained(self) -> bool:
        """True when the detect query has committed every record the bus holds."""
        return self.path.bus_drained(self)

    @property
    def detect_checkpoint(self) -> CheckpointDir:
        """The detect query's checkpoint.

        The state is keyed by shard, under keys chosen for the partitions
        (:mod:`streaming.shard_keys`): another shard or partition count (or layout of a
        shard's value) is another checkpoint, rebuilt from the bus (a new detect query
        reads all of it).
        """
        sp = self.cfg.spark
        return self.checkpoint_dir / checkpoint_name(
            self._detect_query, sp.state_shards, sp.shuffle_partitions, STATE_LAYOUT
        )

    def set_aside_stale_detect(self) -> None:
        """Set a stale detect checkpoint aside before anything reads its offsets.

        See :func:`streaming.checkpoints.set_aside_stale`: a checkpoint left for another
        layout's is never resumed.
        """
        root, current = self.checkpoint_dir, self.detect_checkpoint.name
        stale = checkpoints.set_aside_stale(root, current, self._detect_query)
        if stale:
            log.warning("%s", stale)

    @property
    def _detect_query(self) -> str:
        """The detect checkpoints' name before their layout."""
        return self.path.detect_query

    @property
    def hop_dir(self) -> Path:
        """Where the parse query hands events to the detect query on the files bus.

        A local directory: the files bus (replay) keeps its checkpoints on the local disk.
        """
        if not isinstance(self.checkpoint_dir, Path):
            msg = "the files bus keeps its checkpoints on a local disk"
            raise ValueError(msg)
        return self.checkpoint_dir / "events"

    def dead_letter_sink(self) -> DeadLetterFileSink:
        """Where the dead letters are kept as files."""
        out = self.cfg.output
        return DeadLetterFileSink(
            self.deadletter_dir,
            max_per_batch=out.deadletters_max_per_batch,
            retain_bytes=int(out.deadletters_retain_mb * 2**20),
        )

    def start_parse(self, idle: bool = False) -> StreamingQuery:
        """Start the parse query (from its checkpoint, if any).

        ``idle``: the raw topics were idle, micro-batches stand in for real time
        (:mod:`streaming.catchup`).
        """
        checkpoints.use_file_manager(self.spark, str(self.checkpoint_dir))
        # Set here, not only at session start, so a reloaded log_timezone applies.
        self.spark.conf.set("spark.sql.session.timeZone", self.cfg.parsing.log_timezone)
        return self.path.start_parse(self, idle)

    def start_detect(self) -> StreamingQuery:
        """Start the detect query (from its checkpoint, if any)."""
        checkpoints.use_file_manager(self.spark, str(self.checkpoint_dir))
        cfg = self.cfg  # one config for the whole query: the one in force at its start
        delay = f"{int(cfg.spark.watermark_delay_s * 1000)} milliseconds"
        # One stream for logs and metrics together: with one watermark per stream, a
        # stream that has no data (no metrics topic traffic, a logs-only replay) would
        # hold the global watermark at zero and no timer would ever fire. The cost: a
        # topic lagging the other by more than the watermark delay loses its late rows,
        # which the progress log and flinkwatch_late_rows_dropped_total make visible.
        sp = cfg.spark
        rows = detect_input(self.path.read(self), sp.state_shards, sp.shuffle_partitions)
        rows = rows.withWatermark("event_time", delay)
        self.set_aside_stale_detect()
        checkpoint = self.detect_checkpoint
        writer = (
            alert_stream(rows, cfg, self.admit_new, secrets.token_hex(2))
            .writeStream.queryName("flinkwatch-detect")
            .foreachBatch(
                AlertDelivery(
                    self.outputs, self.stats, cfg, checkpoint, forward=self.path.forwarder(self)
                )
            )
            .option("checkpointLocation", str(checkpoint))
            .trigger(**self.trigger_options())
        )
        with query_settings(self.spark, DETECT_SETTINGS):
            return writer.start()

    def start_deadletters(self) -> StreamingQuery:
        """Start the query that keeps the dead-letter topic's records as files."""
        checkpoints.use_file_manager(self.spark, str(self.checkpoint_dir))
        trigger = self.trigger or {"processingTime": "5 seconds"}
        return (
            kafka_stream(
                self.spark,
                self.cfg.kafka,
                self.cfg.kafka.deadletters_topic,
                starting_offsets="earliest",
            )
            .writeStream.queryName("flinkwatch-deadletters")
            .foreachBatch(DeadLetterBatch(self.dead_letter_sink()))
            .option("checkpointLocation", str(self.checkpoint_dir / "deadletters"))
            .trigger(**trigger)
            .start()
        )

    def starters(self) -> list[Callable[[], StreamingQuery]]:
        """The queries' start functions, in the order data flows through them.

        On the Kafka bus the placement is decided first (:meth:`KafkaPath.place_bus`);
        while it holds the parse query back, only the detect and dead-letter queries start.
        """
        self.set_aside_stale_detect()  # the placement reads the detect checkpoint's offsets
        return self.path.starters(self)

    def start(self) -> list[StreamingQuery]:
        """Start every query, to run side by side.

        The first tick after a start goes to every shard (:mod:`streaming.ticks`): a
        reload may have changed the shards' deadlines, and each reports them again.
        """
        self.stats.forget_due()
        # Read when a query starts: with a trigger of 0 an idle query asks its sources for
        # new offsets every this often (Spark's default, 10 ms, is a busy loop).
        delay = f"{max(1, round(self.cfg.spark.poll_interval_s * 1000))}ms"
        self.spark.conf.set("spark.sql.streaming.pollingDelay", delay)
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
        cap, dwell = self.cfg.spark.max_entities, self.cfg.spark.entity_cap_min_dwell_s
        switched = admission(self.entity_cap, held, cap, dwell, time.monotonic())
        if switched is None:
            return False
        self.entity_cap = switched
        if not switched.admit_new:
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
        return True

    def tick(self, queries: Sequence[StreamingQuery]) -> None:
        """Give the ticker the parse query's progress (Kafka bus, ``spark.tick_interval_s``)."""
        self.path.tick(self, queries)

    def count_progress(self, queries: Sequence[StreamingQuery]) -> None:
        """Count what the parse query observed in the batches it finished since last asked."""
        self.path.count_progress(self, queries)

    def close(self) -> None:
        """Let go of what the path keeps open between starts (the Kafka bus's ticker)."""
        self.path.close()

    def run_once(self) -> None:
        """Process everything available, query after query (tests).

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


class BusPath(Protocol):
    """How the parse query hands its events to the detect query: the live layout or the tests'.

    Attributes:
        live: The Kafka bus: ticks, parse counts by ``observe``, real-time parsing.
        detect_query: The detect checkpoints' name before their layout.
    """

    live: bool
    detect_query: str

    def start_parse(self, p: Pipeline, idle: bool) -> StreamingQuery:
        """Start the parse query writing the bus (``idle``: micro-batches for real time)."""

    def read(self, p: Pipeline) -> DataFrame:
        """The bus as the detect query reads it (``key``, ``value``, and ``bus_ts`` if live)."""

    def starters(self, p: Pipeline) -> list[Callable[[], StreamingQuery]]:
        """The queries' start functions, in the order data flows through them."""

    @property
    def parse_held(self) -> bool:
        """True while the parse query waits for the detect query to read the whole bus."""

    def parse_switch(self, p: Pipeline, ask_brokers: bool) -> Switch | None:
        """The mode the parse query is to switch to now, if another."""

    def bus_drained(self, p: Pipeline) -> bool:
        """True when the detect query has committed every record the bus holds."""

    def tick(self, p: Pipeline, queries: Sequence[StreamingQuery]) -> None:
        """Give the ticker the parse query's progress."""

    def count_progress(self, p: Pipeline, queries: Sequence[StreamingQuery]) -> None:
        """Count what the parse query observed since last asked."""

    def close(self) -> None:
        """Let go of what the path keeps open between starts."""

    def forwarder(self, p: Pipeline) -> Callable[[Sequence[Forward]], None] | None:
        """What writes a detect batch's forwards onto the bus (``None``: they are dropped)."""


class FilesPath:
    """The tests' layout: the parse query writes the bus as Parquet files (``hop_dir``).

    It holds nothing back, never switches the parse query's mode, ticks nothing and counts
    its parse batches in its ``foreachBatch`` (:class:`~streaming.delivery.ParseBatch`).
    """

    live = False
    detect_query = "detect"
    parse_held = False

    def start_parse(self, p: Pipeline, idle: bool) -> StreamingQuery:  # noqa: D102
        if p.logs is None or p.metrics is None:
            msg = "the files bus reads from logs and metrics"
            raise ValueError(msg)
        return (
            parsed_events(p.logs(), p.metrics(), p.cfg)
            .writeStream.queryName(PARSE_QUERY)
            .foreachBatch(ParseBatch(p.cfg, p.hop_dir, p.dead_letter_sink(), p.stats))
            .option("checkpointLocation", str(p.checkpoint_dir / "parse"))
            .trigger(**p.trigger_options())
            .start()
        )

    def read(self, p: Pipeline) -> DataFrame:  # noqa: D102
        p.hop_dir.mkdir(parents=True, exist_ok=True)
        return (
            p.spark.readStream.schema("key string, value string")
            # Processed bus files are deleted; the parse checkpoint has the offsets.
            .option("cleanSource", "delete")
            .parquet(str(p.hop_dir))
        )

    def starters(self, p: Pipeline) -> list[Callable[[], StreamingQuery]]:  # noqa: D102
        return [p.start_parse, p.start_detect]

    def parse_switch(self, p: Pipeline, ask_brokers: bool) -> Switch | None:  # noqa: D102
        return None

    def bus_drained(self, p: Pipeline) -> bool:  # noqa: D102
        return True

    def tick(self, p: Pipeline, queries: Sequence[StreamingQuery]) -> None:  # noqa: D102
        pass

    def count_progress(self, p: Pipeline, queries: Sequence[StreamingQuery]) -> None:  # noqa: D102
        pass

    def close(self) -> None:  # noqa: D102
        pass

    def forwarder(self, p: Pipeline) -> Callable[[Sequence[Forward]], None] | None:  # noqa: D102
        # The files bus reads raw files, which carry no Kafka key: no source is keyed.
        return None


@dataclass
class KafkaPath:
    """The live layout: the raw topics, the event bus and the dead-letter topic of ``cfg.kafka``.

    What it keeps between the queries' starts is the live layout's alone: how the running
    parse query was started, how it places records on the bus, and the ticker.
    """

    live: ClassVar[bool] = True
    detect_query: ClassVar[str] = "detect-kafka"
    #: How the running parse query was started.
    parse_plan: ParsePlan | None = None
    #: How long the running parse query has read nothing, from its progress.
    quiet: Quiet = field(default_factory=Quiet)
    #: How the parse query places records on the bus, decided at each start.
    placement: Placement | None = None
    #: Writes ticks to the event bus (see :mod:`streaming.ticks`).
    ticker: Ticker | None = None

    def start_parse(self, p: Pipeline, idle: bool) -> StreamingQuery:  # noqa: D102
        k = p.cfg.kafka
        before = self.parse_plan
        plan = self.parse_plan = catchup.plan(
            p.cfg, p.checkpoint_dir, realtime=self.realtime_wanted(p), idle=idle
        )
        self.quiet = Quiet()
        _say_switch(before, plan, p.cfg.spark)
        rt = plan.mode == "realtime"
        if not (plan.checkpoint / "commits").exists():
            # A fresh checkpoint numbers its batches from 0 again.
            p.stats.counted.pop(self.count_key, None)
        logs, metrics = (
            kafka_records(
                p.spark,
                k,
                t,
                realtime=rt,
                starting_offsets=plan.starting.get(t),
                max_offsets=plan.max_offsets.get(t),
                keyed=t == k.logs_topic,
            )
            for t in (k.logs_topic, k.metrics_topic)
        )
        events = counted(parsed_events(logs, metrics, p.cfg))
        placed = self.placement or self.place_bus(p)
        if placed.partitions is None:
            msg = f"the parse query waits until the detect query has read {placed.topic}"
            raise RuntimeError(msg)
        writer = (
            bus_records(events, p.cfg, dead_letters=True, partitions=placed.partitions)
            .writeStream.queryName(PARSE_QUERY)
            .format("kafka")
            .options(**kafka_settings(k).spark(reader=False))
            .outputMode("update")
        )
        trigger = (
            {"realTime": f"{int(p.cfg.spark.realtime_batch_s * 1000)} milliseconds"}
            if rt
            else p.trigger_options()
        )
        return writer.option("checkpointLocation", str(plan.checkpoint)).trigger(**trigger).start()

    def read(self, p: Pipeline) -> DataFrame:  # noqa: D102
        # The bus is flinkwatch's own: a new detect query reads all of it.
        return kafka_stream(
            p.spark, p.cfg.kafka, p.cfg.kafka.events_topic, starting_offsets="earliest"
        ).select(
            F.col("key").cast("string").alias("key"),
            F.col("value").cast("string").alias("value"),
            F.col("timestamp").alias("bus_ts"),
        )

    def starters(self, p: Pipeline) -> list[Callable[[], StreamingQuery]]:
        """The placement first, then the three queries.

        While the placement (:meth:`place_bus`) holds the parse query back, only the
        detect and dead-letter queries start.
        """
        if self.place_bus(p).held:
            # Its plan belongs to a run that is over: no catch-up switch while held.
            self.parse_plan = None
            return [p.start_detect, p.start_deadletters]
        return [p.start_parse, p.start_detect, p.start_deadletters]

    def realtime_wanted(self, p: Pipeline) -> bool:
        """True when the parse query is to run in real-time mode once caught up."""
        return p.trigger is None and p.cfg.spark.parse_mode == "realtime"

    def parse_switch(self, p: Pipeline, ask_brokers: bool) -> Switch | None:
        """The mode the parse query is to switch to now, if another (:func:`catchup.decide`).

        Raises:
            KafkaConnectError: the brokers cannot be reached.
        """
        plan = self.parse_plan
        if plan is None or not self.realtime_wanted(p):
            return None
        ask = (lambda: self.caught_up(p)) if ask_brokers else None
        return catchup.decide(plan, self.quiet, p.cfg.spark.idle_after_s, ask)

    def caught_up(self, p: Pipeline) -> bool:
        """True when the catching-up parse query has reached the raw topics' ends.

        Raises:
            KafkaConnectError: the brokers cannot be reached.
        """
        plan = self.parse_plan
        return plan is not None and catchup.caught_up(p.cfg, plan.checkpoint)

    @property
    def parse_held(self) -> bool:  # noqa: D102
        return self.placement is not None and self.placement.held

    @staticmethod
    def placement_record(p: Pipeline) -> Path:
        """Where the bus's partition count is recorded: beside the checkpoints, not in them."""
        return p.cfg.output.state_dir / placement.RECORD_NAME

    def place_bus(self, p: Pipeline) -> Placement:
        """Decide how the parse query places records on the bus from this start on.

        The recorded count while the topic has as many partitions; else the topic's count,
        recorded, once the detect query has read every record on the bus, and until then
        the parse query is held (see :mod:`streaming.placement`).

        Raises:
            KafkaConnectError: the brokers cannot be reached.
            KafkaTopicError: the bus topic does not exist.
        """
        k = p.cfg.kafka
        topic = k.events_topic or ""
        where = self.placement_record(p)
        known = placement.recorded(where, topic)
        parts, unread = placement.bus_backlog(k, p.detect_checkpoint)
        plan = placement.decide(topic, known, parts, unread)
        if plan.partitions is not None and plan.partitions != known:
            placement.record(where, topic, plan.partitions)
        self.placement = plan
        return plan

    def bus_drained(self, p: Pipeline) -> bool:  # noqa: D102
        return placement.bus_backlog(p.cfg.kafka, p.detect_checkpoint)[1] == 0

    def tick(self, p: Pipeline, queries: Sequence[StreamingQuery]) -> None:
        """Give the ticker the parse query's progress (``spark.tick_interval_s``)."""
        if not p.cfg.spark.tick_interval_s:
            return
        parse = next((q for q in queries if q.name == PARSE_QUERY), None)
        if parse is None:
            return
        if self.ticker is None:
            self.ticker = _kafka_ticker(p.cfg)
        shards = p.cfg.spark.state_shards
        stats = p.stats
        self.ticker.wakes = lambda t_ms: woken(stats.due(), shards, t_ms)
        self.ticker.interval_s = p.cfg.spark.tick_interval_s
        self.ticker.poll(parse.lastProgress)

    def count_progress(self, p: Pipeline, queries: Sequence[StreamingQuery]) -> None:
        """Count what the parse query observed in the batches it finished since last asked.

        Spark keeps the last 100 progress reports of a query; this is asked every quarter
        second, and each batch is counted once whatever overlaps.
        """
        for q in queries:
            if q.name != PARSE_QUERY:
                continue
            last = q.lastProgress
            done = p.stats.counted.get(self.count_key, -1)
            if last is None or last.batchId <= done:
                continue
            # The whole list (parsed from JSON, up to 100 reports) only when a batch was
            # missed between two looks.
            for progress in [last] if last.batchId == done + 1 else q.recentProgress:
                if progress.batchId <= done:
                    continue
                p.stats.count_observed(self.count_key, progress.batchId, progress.observedMetrics)
                self.quiet.add(progress)

    @property
    def count_key(self) -> str:
        """Under which key the parse query's counted batches are remembered.

        Batch ids belong to a checkpoint: the two parse modes number theirs apart.
        """
        return f"parse:{self.parse_plan.checkpoint.name if self.parse_plan else '-'}"

    def forwarder(self, p: Pipeline) -> Callable[[Sequence[Forward]], None] | None:
        """Writes forwards onto the bus, each where the parse query places its entity.

        Spark's own Kafka writer and :func:`~streaming.bus.bus_partition`, the parse
        query's placement, so a forward lands in its entity's partition. Called inside the
        detect query's ``foreachBatch``, before the batch commits: a failure fails the
        batch, which runs again (its forwards with it, dropped as repeats where applied).
        """
        k = p.cfg.kafka

        def write(forwards: Sequence[Forward]) -> None:
            placed = self.placement
            # While the bus is held for a new count, the count its records are placed by.
            n = placed and (placed.partitions or placed.topic_partitions)
            rows = p.spark.createDataFrame(
                [(f.entity, f.value) for f in forwards], "key string, value string"
            )
            (
                rows.select("key", "value", *([bus_partition(F.col("key"), n)] if n else []))
                .write.format("kafka")
                .options(**kafka_settings(k).spark(reader=False))
                .option("topic", k.events_topic)
                .save()
            )

        return write

    def close(self) -> None:
        """Close the ticker's producer, if it made one."""
        if self.ticker is not None:
            self.ticker.close()


def _say_switch(before: ParsePlan | None, now: ParsePlan, spark: SparkConfig) -> None:
    """One line for people when the parse query goes idle, or back to real time."""
    if now.idle:
        log.info(
            "parse: no records for %g s, idling in %g s micro-batches",
            spark.idle_after_s,
            spark.trigger_interval_s,
        )
    elif now.mode == "realtime" and before is not None and before.idle:
        log.info("parse: records again, back to real-time mode")
    elif now.mode == "realtime" and before is not None and before.catching_up:
        log.info("parse: caught up, parsing in real time")


def _kafka_ticker(cfg: AppConfig) -> Ticker:
    """A ticker reading the raw topics and writing the event bus of ``cfg.kafka``."""
    from kafka import KafkaProducer

    from streaming.topics import connect

    k = cfg.kafka
    producer: Any = None

    def connected() -> Any:
        nonlocal producer
        if producer is None:
            producer = connect(
                KafkaProducer, kafka_settings(k).python, wait_s=0, client_id="flinkwatch-ticks"
            )
        return producer

    def send(event_ms: int, shards: list[int] | None) -> None:
        # One per partition: a micro-batch may read the partitions unevenly.
        parts = sorted(connected().partitions_for(k.events_topic) or ())
        for p in parts:
            value = tick_value(event_ms, p, len(parts), shards)
            producer.send(k.events_topic, key=TICK_KEY.encode(), value=value.encode(), partition=p)
        producer.flush(timeout=10)

    def mark() -> int:
        # The broker's time: a tick for no shard (the detect query hands it to none),
        # stamped by the broker as it appends it (the bus is LogAppendTime, as flinkwatch
        # creates it; streaming.topics). Its answer carries the time the broker stamped.
        value = tick_value(int(time.time() * 1000), 0, 1, [])
        sent = connected().send(k.events_topic, key=TICK_KEY.encode(), value=value.encode())
        return int(sent.get(timeout=10).timestamp)

    def close() -> None:
        if producer is not None:
            producer.close(timeout=5)

    return Ticker(
        end_offsets=lambda: catchup.end_offsets(k, [k.logs_topic, k.metrics_topic])[1],
        send=send,
        interval_s=cfg.spark.tick_interval_s or 0,
        mark=mark,
        closer=close,
    )
