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

Where the two layouts differ is their path's (:mod:`streaming.bus_paths`); the parse
step every parsing query shares is :mod:`streaming.events`.

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
from typing import Any, Literal

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from conf import AppConfig
from conf.running import RunningConfig
from sinks import DeadLetterFileSink
from streaming import checkpoints
from streaming.bus import active_detectors, detect_input
from streaming.bus_paths import FilesPath, KafkaPath
from streaming.catchup import Switch
from streaming.checkpoints import CheckpointDir
from streaming.delivery import AlertDelivery, DeadLetterBatch, Outputs, PipelineStats
from streaming.processor import STATE_LAYOUT, ShardProcessor
from streaming.restarts import Admission, admission
from streaming.rows import DETECT_SCHEMA
from streaming.session import give_back_heap, query_settings
from streaming.shard_keys import checkpoint_name
from streaming.sources import kafka_stream

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


def detect_processor(cfg: AppConfig, *, admit_new: bool = True, token: str = "") -> ShardProcessor:
    """The detect query's stateful processor, with the config's ``spark`` timings."""
    sp = cfg.spark
    return ShardProcessor(
        cfg.resolver(),
        active_detectors(cfg),
        admit_new=admit_new,
        token=token,
        delay_ms=int(sp.watermark_delay_s * 1000),
        grace_ms=None if sp.deadline_grace_s is None else int(sp.deadline_grace_s * 1000),
        shards=sp.state_shards,
        lag_window_ms=int(sp.lag_window_s * 1000),
    )


def alert_stream(
    rows: DataFrame, cfg: AppConfig, admit_new: bool = True, token: str = ""
) -> DataFrame:
    """Alert transitions (and signal, error and refusal rows) from the detectors.

    ``rows`` are the detect query's input (:func:`streaming.bus.detect_input`) with a
    watermark on ``event_time``; ``admit_new=False`` refuses entities not seen before;
    ``token`` names this run of the query.
    """
    return rows.groupBy("shard").transformWithStateInPandas(
        statefulProcessor=detect_processor(cfg, admit_new=admit_new, token=token),
        outputStructType=DETECT_SCHEMA,
        outputMode="Append",
        timeMode="EventTime",
    )


@dataclass
class Pipeline:
    """The queries of one run: how each starts, and what they count.

    What only the live layout keeps across starts (the parse query's plan, the bus's
    placement, the ticker) is its path's (:class:`~streaming.bus_paths.KafkaPath`), not
    the pipeline's.

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
        # hold the global watermark at zero and no timer would ever fire. A record later
        # than the delay to the bus (a catch-up's, a stalled shipper's) moves none and is
        # applied late (detect_input); what is still dropped is counted and logged.
        sp = cfg.spark
        fresh_ms = int(sp.watermark_delay_s * 1000)
        rows = detect_input(self.path.read(self), sp.state_shards, sp.shuffle_partitions, fresh_ms)
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

        On the Kafka bus the placement is decided first
        (:meth:`~streaming.bus_paths.KafkaPath.place_bus`); while it holds the parse query
        back, only the detect and dead-letter queries start.
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

    def give_back_memory(self) -> None:
        """Give back the driver's heap a parse query grew (:func:`give_back_heap`), and say so."""
        t0 = time.monotonic()
        try:
            freed = give_back_heap(self.spark)
        except Exception as exc:  # noqa: BLE001 - memory, not the queries: they go on
            log.warning("memory: the driver's heap could not be given back: %s", exc)
            return
        log.info(
            "memory: %d MB of the driver's heap given back in %.2f s",
            freed >> 20,
            time.monotonic() - t0,
        )

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
