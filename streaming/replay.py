"""``flinkwatch replay``: the live job's parser and detectors over files, as one batch job.

The live job is three streaming queries because its input never ends. A replay's input
is a few files that are all there at the start, so it runs as Spark *batch* work: no
checkpoints, no state store, no query starts, no hop through bus files. What decides
is the live job's code: the same parser (:func:`streaming.events.parsed_events`), the same
bus records (:func:`streaming.bus.bus_records`, :func:`streaming.bus.detect_input`), the
same shards and runner (:class:`streaming.runner.ShardRunner`, one call per shard as
:class:`streaming.processor.ShardProcessor` makes it) and the same delivery
(:class:`streaming.delivery.AlertDelivery`: ledger, alert file, correlator).

Time is what the streaming replay did (it ran the detect query with ``availableNow``):

* batch 0: every record, each shard's entities run with Spark's first watermark (0), so
  an entity's deadlines fire only as its own later events pass them
  (:meth:`detectors.base.Detector.advance`);
* batch 1: the watermark then stands at the newest bus event time less
  ``spark.watermark_delay_s``; the shards whose timer is due by it run once more with no
  records, and the deadlines due by it fire (a deadline later than that stays unfired,
  as a live job that had read nothing newer would leave it).

Each batch is delivered as one micro-batch of the detect query was (its transitions in
event-time order), batch 0 before batch 1, so the alert file and the incidents are the
streaming replay's.

Why batch, measured on the small real run ``growth_2_3`` (issue #34; a 2-core machine
shared with other Spark work, so indicative): the streaming replay started a parse and a
detect query one after the other, each planned, checkpointed and committed (RocksDB
stores, a hop through Parquet files, two detect micro-batches): 83-97 s wall, 38 CPU s;
the same with the JVM's C1 compiler alone (below) 30 s, 20 CPU s; this shape 20-45 s,
17-21 CPU s. What is left is mostly the JVM starting and planning and compiling the
parse projection (Spark's driver thread), not the records.

Since then (issue #34, growth_2_3 again, the whole process tree's CPU, the machine shared
with four other Spark test runs at a load of 22-36, so wall times are not the quiet
machine's): 24.4-27.8 CPU s before, 16.1-17.4 after three cuts: the parse's plan built
without PySpark's call-site recording (``streaming.session.NO_CALL_SITES``), the JVM started from a
class-data archive (``scripts/class_archive.py``), and a short input's shards run in the
driver with the newest event observed in the parse's pass (two jobs, a shuffle and a
Python worker fewer). Per phase after them: the JVM's start 2.6 CPU s, building the
parse's plan 2.9 (JVM) and 0.6 (Python), planning and running the parse 6.8 (3.2 of
them in its two tasks), the shards and delivery 0.3; Python's imports 1.3.
"""

from __future__ import annotations

import heapq
import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import repeat
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame, Observation, Row
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from conf import AppConfig, ParamsResolver, ParsingConfig
from detectors.model import EVENT_KINDS
from sinks import DeadLetterFileSink
from streaming.bus import active_detectors, bus_records, detect_input
from streaming.clock import Clock, WakeUp
from streaming.delivery import AlertDelivery, Outputs, PipelineStats, write_dead_letters
from streaming.events import parsed_events
from streaming.explain import Asked
from streaming.parsing import DEAD_LETTER_REASONS
from streaming.routes import Routes
from streaming.rows import DETECT_COLUMNS, DETECT_SCHEMA, RowKind, output_rows
from streaming.runner import EntityRunner, ShardRunner
from streaming.schemas import DEAD_LETTER_FIELDS, DEAD_LETTER_SCHEMA

log = logging.getLogger(__name__)

#: The detect step's output: the detect query's rows and the batch each belongs to.
REPLAY_SCHEMA = StructType([*DETECT_SCHEMA.fields, StructField("batch", IntegerType())])
#: The ``batch`` of the rows that carry an entity's end state (its saved value in
#: ``data``), asked for by ``flinkwatch explain``; never delivered.
END_STATE = 2
#: The ``batch`` of a shard's state after its records (:meth:`ShardReplay.first`), for the
#: driver's end of it (:meth:`ShardReplay.last`); never delivered.
SHARD_STATE = 3
#: The ``batch`` of the dead letters that travelled with the shards (:data:`LETTERS`).
LETTER_BATCH = 4
#: How the entities a long replay's dead letters travel under begin (then a number, to
#: spread them over the shards): no entity of the bus begins so (``job:``, ``tm:``,
#: ``src:``, ``cluster``, the ticks' key).
LETTERS = "deadletters"
_BLANK: dict[str, Any] = dict.fromkeys(DETECT_COLUMNS)


class Entities:
    """A shard's entities in memory: the store the runner keeps them in for one replay."""

    def __init__(self) -> None:
        self.saved: dict[str, str] = {}

    def get(self, entity: str) -> str | None:
        """The entity's saved value."""
        return self.saved.get(entity)

    def put(self, entity: str, text: str) -> None:
        """Save the entity's value."""
        self.saved[entity] = text

    def delete(self, entity: str) -> None:
        """Forget the entity."""
        self.saved.pop(entity, None)


@dataclass(frozen=True)
class ShardReplay:
    """One shard's replay: its records (:meth:`first`), then its deadlines at the end.

    The records run where the shard's rows are (a Python worker, ``applyInPandas``, or
    the driver); the end runs in the driver, once the newest event and so the final
    watermark are known: the two need not be one pass over the parsed records.

    Attributes:
        resolver: Per-job detector parameters.
        detectors: The enabled detectors.
        delay_ms: ``spark.watermark_delay_s``.
        grace_ms: ``spark.deadline_grace_s`` (``None``: deadlines wait for the watermark).
        explain: Also give the end state of the entities these questions match (batch
            :data:`END_STATE`, for ``flinkwatch explain``).
        letters_kept: Of the dead letters that travel with the shards (:data:`LETTERS`),
            how many travel whole (``output.deadletters_max_per_batch``); the rest only
            counted, as the dead-letter file keeps no more.
    """

    resolver: ParamsResolver
    detectors: list[str]
    delay_ms: int
    grace_ms: int | None
    explain: tuple[Asked, ...] = ()
    letters_kept: int = 0

    def _runner(self) -> ShardRunner:
        return ShardRunner(
            EntityRunner(self.resolver, Routes(self.detectors, self.resolver.catalog()))
        )

    def first(
        self, shard: str, rows: list[tuple[str, str, int | None]]
    ) -> Iterator[tuple[int, dict[str, Any]]]:
        """Batch 0: the shard's records, each entity with Spark's first watermark (0).

        Then the shard as it stands (batch :data:`SHARD_STATE`: its entities' saved values
        and wake-ups), for :meth:`last`.
        """
        store, wakes = Entities(), {}
        first = self._runner().run(store, wakes, rows, self._clock(0), {}, shard=shard)
        yield from ((0, r) for r in output_rows(first.outputs))
        state = {"saved": store.saved, "wakes": {e: list(w) for e, w in wakes.items()}}
        yield SHARD_STATE, {**_BLANK, "kind": "state", "entity": shard, "data": json.dumps(state)}

    def last(
        self, state: dict[str, Any], watermark_ms: int | None
    ) -> Iterator[tuple[int, dict[str, Any]]]:
        """Batch 1 of one shard (its :meth:`first`'s state row): the deadlines due by the end.

        ``watermark_ms``: the watermark after every record (``None``: there was none).
        Then the end state of the entities :attr:`explain` asks about.
        """
        shard = str(state["entity"])
        kept = json.loads(state["data"])
        store = Entities()
        store.saved = kept["saved"]
        wakes = {e: WakeUp(*w) for e, w in kept["wakes"].items()}
        clock = self._clock(0)
        timer = min((clock.timer(w) for w in wakes.values()), default=None)
        # Spark fires the shard's one timer once the watermark reaches it.
        if watermark_ms is not None and timer is not None and timer <= watermark_ms:
            end = self._runner().run(store, wakes, [], self._clock(watermark_ms), {}, shard=shard)
            yield from ((1, r) for r in output_rows(end.outputs))
        for entity, text in store.saved.items():
            if any(asked.matches(entity, text) for asked in self.explain):
                yield END_STATE, {**_BLANK, "kind": "state", "entity": entity, "data": text}

    def run(
        self, shard: str, rows: list[tuple[str, str, int | None]], watermark_ms: int | None
    ) -> Iterator[tuple[int, dict[str, Any]]]:
        """:meth:`first` and :meth:`last` of one shard, in this process."""
        for b, r in self.first(shard, rows):
            if b == SHARD_STATE:
                yield from self.last(r, watermark_ms)
            else:
                yield b, r

    def _clock(self, watermark_ms: int) -> Clock:
        return Clock(watermark_ms, self.delay_ms, self.grace_ms)

    def __call__(self, key: tuple[Any, ...], pdf: pd.DataFrame) -> pd.DataFrame:
        """``applyInPandas``: a shard's rows (``entity``, ``value``) in, batch 0 and its state out.

        Dead letters (entities named :data:`LETTERS`) may share a shard with records.
        """
        # Files carry no bus time: only the watermark moves time, as on the files bus.
        entities, values = pdf["entity"].tolist(), pdf["value"].tolist()
        pairs = list(zip(entities, values, strict=True))
        rows = [(e, v, None) for e, v in pairs if not e.startswith(LETTERS)]
        out = [{**r, "batch": b} for b, r in self.first(str(key[0]), rows)] if rows else []
        if len(rows) < len(values):
            letters = [json.loads(v)["letter"] for e, v in pairs if e.startswith(LETTERS)]
            out.extend({**r, "batch": LETTER_BATCH} for r in self._letters(letters))
        return pd.DataFrame(out, columns=[*DETECT_COLUMNS, "batch"])

    def _letters(self, letters: list[str]) -> Iterator[dict[str, Any]]:
        """The first :attr:`letters_kept` of these dead letters by place (:func:`letter_place`).

        The rest go as one row that counts them: past the file's first, a flood of
        malformed records does not travel to the driver. What does is each shard's
        first, whole: up to ``spark.state_shards`` times the file's (their raw text up
        to 64 KB each), collected with the shards' rows (the short path streams them).
        """
        parsed = [json.loads(t) for t in letters]
        for d in heapq.nsmallest(self.letters_kept, parsed, key=letter_place):
            yield {**_BLANK, "kind": "dead_letter", "data": json.dumps(d)}
        more = len(parsed) - self.letters_kept
        if more > 0:
            yield {**_BLANK, "kind": "dead_letter", "data": json.dumps({"more": more})}


def letter_place(letter: dict[str, Any]) -> tuple[str, int, int, int]:
    """Where a dead letter's record was: the order the dead-letter file keeps them in."""
    return (
        letter.get("topic") or "",
        letter.get("partition") or 0,
        letter.get("offset") or 0,
        letter.get("seq") or 0,
    )


def _counts(events: DataFrame) -> tuple[DataFrame, Observation]:
    """``events`` observed: records, events by kind, dead letters by reason, newest time."""
    obs = Observation("flinkwatch_replay_counts")
    ok = F.col("error").isNull()
    kinds = [F.sum(F.when(ok & (F.col("kind") == k), 1).otherwise(0)).alias(k) for k in EVENT_KINDS]
    reasons = [
        F.sum(F.when(F.col("error") == r, 1).otherwise(0)).alias(f"error:{r}")
        for r in DEAD_LETTER_REASONS
    ]
    observed = events.observe(
        obs,
        F.count(F.lit(1)).alias("records"),
        F.max(F.unix_millis("event_time")).alias("newest"),
        *kinds,
        *reasons,
    )
    return observed, obs


@dataclass(frozen=True)
class Baseline:
    """A second config detecting over the same parse (``replay --baseline``).

    Attributes:
        cfg: The baseline config; its ``parsing`` section is the replayed config's
            (:func:`same_parse`).
        outputs: Its own ledger and alert file.
        stats: Its own counters (the parse's counts are added to both).
    """

    cfg: AppConfig
    outputs: Outputs
    stats: PipelineStats


def same_parse(a: AppConfig, b: AppConfig) -> bool:
    """Whether one parse serves both configs: what shapes the parsed events is the same.

    That is the ``parsing`` section alone (limits, metric naming rules, the log time zone,
    also the session's); which events reach the bus, the shards and the times are each
    config's own and come after the parse.
    """
    return a.parsing == b.parsing


@dataclass(frozen=True)
class KeptParse:
    """A replay's parse kept for the tries after it (``flinkwatch replay --watch``).

    Good for every config whose ``parsing`` section is this one (:func:`same_parse`): a
    try then plans and scans these rows instead of parsing the files again.

    Attributes:
        parsing: The parsing section the events were parsed with.
        events: The parsed events, local-checkpointed (Spark's memory, spilling to disk).
        counts: What the parse's pass counted (:func:`_counts`).
    """

    parsing: ParsingConfig
    events: DataFrame
    counts: dict[str, Any]

    def release(self) -> None:
        """Free the kept events' blocks now, not when the JVM next collects its garbage.

        A kept parse of an hour of a 100-job fleet is ~1.8 million rows; a watch that
        parses anew drops the old one before its try parses.
        """
        # A local checkpoint's plan is one LogicalRDD over the kept blocks; waiting for
        # them to go (milliseconds) keeps the next parse from meeting them.
        self.events._jdf.queryExecution().logical().rdd().unpersist(True)


def replay(
    logs: DataFrame,
    metrics: DataFrame,
    cfg: AppConfig,
    outputs: Outputs,
    dead_letters: DeadLetterFileSink,
    stats: PipelineStats,
    baseline: Baseline | None = None,
    explain: tuple[Asked, ...] = (),
    here: bool = False,
    kept: list[KeptParse] | None = None,
) -> dict[str, str]:
    """Parse ``logs`` and ``metrics`` (file records), run the detectors, deliver.

    ``stats`` gets what the streaming replay's handlers counted: records, events by kind,
    dead letters by reason, the newest event time, alerts, and one parse and two detect
    batches. With a ``baseline`` (whose config must parse the same: :func:`same_parse`)
    its detectors run over the same parsed events after ``cfg``'s and deliver to its own
    outputs; dead letters are written once. Returns the end state (entity → saved value)
    of the entities the questions of ``explain`` match under ``cfg`` (none without one).
    ``here``: a short input (:func:`streaming.replay_session.short_input`): each source's
    files are read in one task, and the shards run in this process, not in Python
    workers; the same runner either way.
    ``kept``: parses kept by the tries before (:class:`KeptParse`): one that ``cfg``
    parses as is used, else the files are parsed and the parse added to the list.

    Raises:
        LedgerError: the ledger could not record a batch.
    """
    old = next((k for k in kept or () if k.parsing == cfg.parsing), None)
    parsed: Observation | dict[str, Any]
    if old is not None:
        events, parsed = old.events, old.counts
    else:
        if here:
            # A short input's files, each source's in one task (a file is otherwise a
            # partition of its own): every task deserializes the whole parse's
            # expressions, for a few thousand records a quarter of the tasks' time. In a
            # warm session (a --watch try, explain, the tests) the checkpoint_creep scenario
            # (eight files) took 3.32 s against 3.89, four each, interleaved; a fresh
            # command is the same either way (14.5 s against 14.8, seven each, noisy).
            logs, metrics = logs.coalesce(1), metrics.coalesce(1)
        events, parsed = _counts(parsed_events(logs, metrics, cfg))
        if baseline is not None or kept is not None:
            # Parsed once for every config: each bus below is a scan of these kept rows.
            events = events.localCheckpoint()
        if kept is not None:
            kept.append(KeptParse(cfg.parsing, events, parsed.get))
    saved = _detect(events, parsed, cfg, outputs, stats, dead_letters, explain, here)
    if baseline is not None:
        b = baseline
        _detect(events, parsed, b.cfg, b.outputs, b.stats, None, here=here)
    return saved


def _detect(
    events: DataFrame,
    parsed: Observation | dict[str, Any],
    cfg: AppConfig,
    outputs: Outputs,
    stats: PipelineStats,
    dead_letters: DeadLetterFileSink | None,
    explain: tuple[Asked, ...] = (),
    here: bool = False,
) -> dict[str, str]:
    """One config's bus records, shards and delivery over parsed ``events``.

    ``parsed``: what the parse counted (:func:`_counts`), or its observation, which has
    it once the pass over ``events`` has run. ``here``: run the shards in this process
    (:func:`_shards_here`), not in Python workers. Returns the end state of the entities
    ``explain`` matches.
    """
    sp = cfg.spark
    delay_ms = int(sp.watermark_delay_s * 1000)
    shard = ShardReplay(
        cfg.resolver(),
        active_detectors(cfg),
        delay_ms=delay_ms,
        grace_ms=None if sp.deadline_grace_s is None else int(sp.deadline_grace_s * 1000),
        explain=explain,
        letters_kept=0 if dead_letters is None else dead_letters.max_per_batch,
    )
    bus = bus_records(events, cfg, dead_letters=True, event_ms=True)
    keyed = "source_key" in events.columns
    if here or keyed:
        rows, newest, kept = _kept_bus(bus, cfg, here)
        out = _shards_here(rows, shard) if here else _shards_on_workers(rows, shard)
        letters: Iterable[Any] = _streamed(kept)
    else:
        rows, newest_obs = _one_pass(bus, cfg, letters=dead_letters is not None)
        out = _shards_on_workers(rows, shard)
        newest = next(iter(newest_obs.get.values()), None)
        letters = _letter_rows([r for r in out if r["batch"] == LETTER_BATCH], shard.letters_kept)
    # An observation's counts are there once the pass has run (the bus's below).
    counts = parsed if isinstance(parsed, dict) else parsed.get
    _count_parse(stats, counts)
    if dead_letters is not None and any(counts.get(f"error:{r}") for r in DEAD_LETTER_REASONS):
        write_dead_letters(dead_letters, 0, letters)
    forwards = [r for r in out if r["kind"] == RowKind.FORWARD.value and r["batch"] == 0]
    if forwards:
        # A keyed source's lines for other entities (streaming.forwards): live, the driver
        # writes them onto the bus and the next batch applies them; here every shard runs
        # again with them beside the records (the same runner: the sources forward them
        # again, which is dropped). Only a replay of Kafka records with keys has any.
        extra = events.sparkSession.createDataFrame(
            [(r["entity"], json.loads(r["data"])) for r in forwards], "key string, value string"
        )
        rows = rows.unionByName(detect_input(extra, sp.state_shards, sp.shuffle_partitions))
        out = _shards_here(rows, shard) if here else _shards_on_workers(rows, shard)
    wm = None if newest is None else newest - delay_ms
    out = [r for r in out if r["kind"] != RowKind.FORWARD.value and r["batch"] != LETTER_BATCH]
    ends = [
        {**r, "batch": b} for s in out if s["batch"] == SHARD_STATE for b, r in shard.last(s, wm)
    ]
    out += ends
    deliver = AlertDelivery(outputs, stats, cfg)
    batches = [0, 1] if newest is not None else [0]
    for b in batches:
        deliver.record([r for r in out if r["batch"] == b], b)
    return {r["entity"]: r["data"] for r in out if r["batch"] == END_STATE}


def _kept_bus(
    bus: DataFrame, cfg: AppConfig, here: bool
) -> tuple[DataFrame, int | None, DataFrame]:
    """The bus kept in memory for three reads: the shards' rows, its newest event, its dead letters.

    A short input, whose parse costs less than a second pass would, and a keyed
    capture's, whose forwarded lines run the shards again (:mod:`streaming.forwards`).
    """
    k, sp = cfg.kafka, cfg.spark
    # A local checkpoint, not a cache: each read then plans a scan of the kept rows, not
    # the whole parse projection again (a cached plan is analysed whole to be matched).
    # Measured on the small real run: 1.1 of 17 CPU s. Its blocks go when ``bus`` is
    # collected (Spark's context cleaner), at the latest with the replay's process (a
    # short input's: at most 64 MB of files, whatever tries ``--watch`` makes).
    if here:
        # A short input's newest event on the bus (the final watermark's base) is observed
        # in the parse's pass: a job of its own is a plan and a pass more.
        newest_obs = Observation("flinkwatch_replay_newest")
        bus = bus.observe(newest_obs, F.max("event_ms"))
    bus = bus.localCheckpoint()
    # The shards spread evenly over the workers, as the live query's over its partitions.
    rows = detect_input(
        bus.where(F.col("topic") == k.events_topic), sp.state_shards, sp.shuffle_partitions
    )
    if here:
        newest = next(iter(newest_obs.get.values()), None)
    else:
        (newest,) = rows.select(F.max(F.unix_millis("event_time"))).first() or (None,)
    # In the order of the one pass's (:func:`letter_place`): the file keeps the first.
    letters = (
        bus.where(F.col("topic") == k.deadletters_topic)
        .select(F.from_json("value", DEAD_LETTER_SCHEMA).alias("d"))
        .select("d.*")
        .orderBy("topic", "partition", "offset", "seq")
    )
    return rows, newest, letters


def _one_pass(bus: DataFrame, cfg: AppConfig, letters: bool) -> tuple[DataFrame, Observation]:
    """The shards' rows of a long input, for one pass from the files to the shards.

    With ``letters`` its dead letters travel with them, spread over the shards (entities
    :data:`LETTERS` and a number) so that no worker holds them all; the newest event is
    observed on the way, for the driver's end of the shards (:meth:`ShardReplay.last`). The bus
    kept in memory for three reads instead (:func:`_kept_bus`) took as long for the hour
    of the 100-job fleet (1.46 million bus records; 96 and 108 s against 98 and 101,
    interleaved) and held them: the process tree's peak 3.5 GB against 2.7 (issue #34),
    growing with the input.
    """
    k, sp = cfg.kafka, cfg.spark
    letter = F.col("topic") == k.deadletters_topic
    if letters:
        # An event time of its own (0, never the newest), so that the shards' input keeps it.
        wrapped = F.to_json(
            F.struct(F.lit(0).cast(LongType()).alias("event_ms"), F.col("value").alias("letter"))
        )
        spread = F.pmod(F.xxhash64("value"), F.lit(sp.state_shards)).cast(StringType())
        bus = bus.select(
            F.when(letter, F.concat(F.lit(LETTERS), spread)).otherwise(F.col("key")).alias("key"),
            F.when(letter, wrapped).otherwise(F.col("value")).alias("value"),
            F.when(letter, F.lit(0)).otherwise(F.col("event_ms")).cast("bigint").alias("event_ms"),
        )
    else:
        bus = bus.where(~letter)
    rows = detect_input(bus, sp.state_shards, sp.shuffle_partitions)
    newest = Observation("flinkwatch_replay_newest")
    events_ms = F.when(~F.col("entity").startswith(LETTERS), F.unix_millis("event_time"))
    return rows.observe(newest, F.max(events_ms)), newest


def _streamed(rows: DataFrame) -> Iterator[Row]:
    """``rows`` one partition at a time, from the first ``next``.

    A flood of malformed records is never whole in the driver, and nothing is read when
    nothing is asked.
    """
    yield from rows.toLocalIterator()


def _letter_rows(rows: list[dict[str, Any]], kept: int) -> Iterator[Row]:
    """The dead letters that travelled with the shards, as the sink takes them (Spark rows).

    Each shard's first ``kept`` by place, merged: the first ``kept`` of all, then the
    rest as empty rows the sink counts as not kept.
    """
    said = [json.loads(r["data"]) for r in rows]
    letters = sorted((d for d in said if "more" not in d), key=letter_place)
    for d in letters[:kept]:
        # Every field, as the schema read of the kept bus gives them (JSON drops nulls).
        yield Row(**{f: d.get(f) for f in DEAD_LETTER_FIELDS})
    more = sum(int(d["more"]) for d in said if "more" in d) + max(len(letters) - kept, 0)
    yield from repeat(Row(error=None), more)


def _shards_on_workers(rows: DataFrame, shard: ShardReplay) -> list[Any]:
    """Every shard's batch-0 rows and state, each shard run in a Python worker.

    ``applyInPandas``: the shards spread over the workers as the live query's do.
    """

    def detect(key: tuple[Any, ...], pdf: pd.DataFrame) -> pd.DataFrame:
        # A function: Spark reads the arguments of what it is given (not of __call__).
        return shard(key, pdf)

    return [
        r.asDict()
        for r in rows.select("shard", "entity", "value")
        .groupBy("shard")
        .applyInPandas(detect, schema=REPLAY_SCHEMA)
        .collect()
    ]


def _shards_here(rows: DataFrame, shard: ShardReplay) -> list[dict[str, Any]]:
    """Every shard's batch-0 rows and state, the shards run one after another in this process.

    The rows a Python worker would get, collected; the same :meth:`ShardReplay.first` per
    shard. For a small input this spares the shuffle by shard and the worker's start
    (its interpreter, pandas, the config and detectors imported again), which took
    longer than the detectors' work.
    """
    by_shard: dict[int, list[tuple[str, str, int | None]]] = {}
    for r in rows.select("shard", "entity", "value").collect():
        by_shard.setdefault(r["shard"], []).append((r["entity"], r["value"], None))
    return [
        {**r, "batch": b}
        for key, shard_rows in sorted(by_shard.items())
        for b, r in shard.first(str(key), shard_rows)
    ]


def _count_parse(stats: PipelineStats, counts: dict[str, Any]) -> None:
    """What the parse counted, as the streaming replay's parse batch 0 added it."""
    stats.first_count("parse", 0)
    stats.records_read += int(counts.get("records") or 0)
    newest = counts.get("newest")
    if newest is not None:
        stats.newest_event_ms = max(stats.newest_event_ms or 0, int(newest))
    for name, n in counts.items():
        if not n or name in ("records", "newest"):
            continue
        if name.startswith("error:"):
            stats.dead_letters[name.removeprefix("error:")] += int(n)
        else:
            stats.kinds[name] += int(n)
