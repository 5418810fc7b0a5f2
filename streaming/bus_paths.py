"""How the parse query hands its events to the detect query: the live layout or the tests'.

:class:`KafkaPath` is the live layout: the raw topics, the Kafka event bus, the ticks and
the dead-letter topic; it keeps across the queries' starts how the parse query runs (real
time, catching up or idle), how it places records on the bus, and the ticker.
:class:`FilesPath` is the tests' layout: the parse query writes the bus as Parquet files.
:class:`streaming.app.Pipeline` is the same for both and asks its path where they differ.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import StringType

from conf import AppConfig, SparkConfig
from conf.kafka_client import kafka_settings
from streaming import catchup, placement
from streaming.bus import bus_partition, bus_records
from streaming.catchup import ParsePlan, Quiet, Switch
from streaming.delivery import ParseBatch
from streaming.events import counted, parsed_events
from streaming.listener import PARSE_QUERY
from streaming.placement import Placement
from streaming.rows import Forward
from streaming.sources import BUS_LINGER, kafka_records, kafka_stream, with_defaults
from streaming.ticks import TICK_KEY, Ticker, hold_value, tick_value, woken

if TYPE_CHECKING:
    from streaming.app import Pipeline

log = logging.getLogger(__name__)


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
        if p.trigger is None:
            # Before it writes anything: a query that starts behind holds the deadlines
            # (a run on a trigger of its own, the benchmark's drain, has no ticks to end it).
            self.ticks(p).start(sum(plan.backlog.values()))
        writer = (
            bus_records(events, p.cfg, dead_letters=True, partitions=placed.partitions)
            .writeStream.queryName(PARSE_QUERY)
            .format("kafka")
            .options(**with_defaults(BUS_LINGER, kafka_settings(k).spark(reader=False)))
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
            F.col("key").cast(StringType()).alias("key"),
            F.col("value").cast(StringType()).alias("value"),
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
            if self.ticker is not None and self.ticker.held:
                self.ticks(p).poll(None)  # turned off by a reload: the hold is released
            return
        parse = next((q for q in queries if q.name == PARSE_QUERY), None)
        if parse is None:
            return
        ticker = self.ticks(p)
        shards = p.cfg.spark.state_shards
        stats = p.stats
        ticker.wakes = lambda t_ms: woken(stats.due(), shards, t_ms)
        ticker.poll(parse.lastProgress)

    def ticks(self, p: Pipeline) -> Ticker:
        """The ticker (made at its first use), with the config's interval."""
        if self.ticker is None:
            self.ticker = _kafka_ticker(p.cfg)
        self.ticker.interval_s = p.cfg.spark.tick_interval_s or 0
        self.ticker.caught_up_s = caught_up_s(p.cfg.spark)
        return self.ticker

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
                # The parse query's producer settings: one cached producer serves both.
                .options(**with_defaults(BUS_LINGER, kafka_settings(k).spark(reader=False)))
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

    def send_hold(hold: bool) -> None:
        parts = sorted(connected().partitions_for(k.events_topic) or ())
        now_ms = int(time.time() * 1000)
        sent = [
            producer.send(
                k.events_topic,
                key=TICK_KEY.encode(),
                value=hold_value(hold, now_ms, p).encode(),
                partition=p,
            )
            for p in parts
        ]
        for f in sent:
            f.get(timeout=10)  # raises for a mark the broker did not take: tried again

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
        send_hold=send_hold,
    )


def caught_up_s(spark: SparkConfig) -> float:
    """How soon after a tick's offsets the parse query must read past them to have caught up.

    A parse query at the raw topics' ends shows it in its next progress report: a real-time
    batch's end (``spark.realtime_batch_s``) or a micro-batch's (``trigger_interval_s``),
    twice for a tick taken just after one, and a second for the driver's loop.
    """
    return 2 * max(spark.realtime_batch_s, spark.trigger_interval_s) + 1.0
