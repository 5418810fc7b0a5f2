"""The event bus between the parse query and the detectors, and the routing on both ends.

The parse query turns records into events and puts each event on the bus once per
*entity scope* that some enabled detector reads it for (``job:<id>``, ``tm:<id>``,
``cluster``; a keyed source's lines that name no one, ``src:<topic>:<key>``, see
:mod:`streaming.forwards`): key = the entity, value = the event as JSON. The detect query reads the
bus and groups it by shard (a hash of the entity); the runner (:mod:`streaming.runner`)
hands each of an entity's events to the detectors of its scope that read it.

* Live runs (``run``, ``demo``): the bus is a Kafka topic (``kafka.events_topic``), and
  malformed records go to a second topic (``kafka.deadletters_topic``) with their Kafka
  coordinates. The parse query is stateless, so it can run in Spark's real-time mode:
  records flow through as they arrive instead of waiting for a micro-batch.
* The tests' ``run_once``: the bus is a directory of Parquet files with the same two
  columns, written by the parse query's ``foreachBatch``. ``flinkwatch replay``
  (:mod:`streaming.replay`) makes the same records in one batch job.

All of an entity's events share one Kafka partition, in the order the parse query wrote
them: the parse query places them itself, by a hash of the entity and a partition count
that changes only when nothing of the bus is left unread (:mod:`streaming.placement`), so
partitions added to the topic cannot move an entity while records of it wait. A Kafka
sink delivers at least once: after a restart the parse query writes up to one batch
again. The runner drops those repeats by the position of the record they came from
(``src``, ``offset``, ``seq``), see :mod:`streaming.runner`.
"""

from __future__ import annotations

import re
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, IntegerType, LongType, StringType

from conf import AppConfig, ConfigError
from detectors.tm_ids import KEY_FILL, KEY_UNSAFE
from streaming.forwards import FREE_LINES, SAYS, SELF_REPORTED, SOURCE_PREFIX
from streaming.routes import interest
from streaming.schemas import (
    BUS_FIELDS,
    BUS_VALUE_SCHEMA,
    DEAD_LETTER_FIELDS,
    struct_of,
)
from streaming.shard_keys import shard_keys
from streaming.ticks import TICK_KEY

#: What :func:`detect_input` reads of a bus record first: its time and the shards it names.
_HEAD = struct_of(event_ms=LongType(), shards=ArrayType(IntegerType()))

#: The ASCII characters :data:`detectors.tm_ids.KEY_UNSAFE` replaces.
_ASCII_UNSAFE = "".join(c for c in map(chr, range(128)) if re.fullmatch(KEY_UNSAFE, c))


def _tm_key(tm_id: Column) -> Column:
    """:func:`detectors.tm_ids.tm_key` as Spark SQL: the same pattern, one rule on both ends.

    An id of ASCII characters alone (every id Flink makes) has them mapped by
    ``translate``, without the pattern: its replace, a Java regex over a copy of the text,
    took ~7 % of the JVM's CPU replaying an hour of the 100-job fleet (three million ids
    keyed in 9.1 s against 2.0 with ``translate``). Any other id is replaced by the pattern.
    """
    ascii_only = F.length(tm_id) == F.octet_length(tm_id)
    mapped = F.translate(tm_id, _ASCII_UNSAFE, KEY_FILL * len(_ASCII_UNSAFE))
    return F.when(ascii_only, mapped).otherwise(F.regexp_replace(tm_id, KEY_UNSAFE, KEY_FILL))


_SCOPE_ENTITY = {
    "job": lambda: F.concat(F.lit("job:"), F.col("job_id")),
    "tm": lambda: F.concat(F.lit("tm:"), _tm_key(F.col("tm_id"))),
    "cluster": lambda: F.lit("cluster"),
    # A keyed source (streaming.forwards): its lines that name no one, and what it says of
    # itself. Null without a key.
    "src": lambda: F.concat(F.lit(SOURCE_PREFIX), F.col("topic"), F.lit(":"), F.col("source_key")),
}


def active_detectors(cfg: AppConfig) -> list[str]:
    """Detectors and rules enabled globally or for at least one job by an override."""
    on = {n for n, p in cfg.resolver().base.items() if p.enabled}
    for ov in cfg.overrides:
        on |= {n for n, sec in ov.detectors.items() if sec.get("enabled") is True}
    return sorted(on)


def wants(det: Any) -> Column:
    """The events one detector's entity must get, as a Spark condition (see :func:`interest`)."""
    want = interest(det)
    cond = F.col("kind").isin(*sorted(want.kinds)) if want.kinds else F.lit(False)
    if want.metrics:
        cond = cond | ((F.col("kind") == "metric") & F.col("metric").isin(*sorted(want.metrics)))
    if want.names:
        cond = cond | ((F.col("kind") == "job_state") & F.col("job_name").isNotNull())
    return cond


def _scopes(cfg: AppConfig) -> dict[str, Column]:
    """Per entity scope, the events some enabled detector of that scope consumes."""
    names = active_detectors(cfg)
    if not names:
        msg = "every detector is disabled: nothing to run"
        raise ConfigError(msg)
    catalog = cfg.catalog()
    out: dict[str, Column] = {}
    for name in names:
        det = catalog[name]
        cond = wants(det)
        out[det.scope] = out[det.scope] | cond if det.scope in out else cond
    return out


def _source_wants(scopes: dict[str, Column]) -> Column:
    """The events of a keyed source its entity must get (:mod:`streaming.forwards`).

    The lines a forward would name (a TaskManager's own lines that name no TaskManager, a
    free WARN/ERROR line that names no job), where some detector of that scope reads
    them; and the few lines that say who the source is, whoever reads them.
    """
    kind = F.col("kind")
    never = F.lit(False)
    to_tm = kind.isin(*SELF_REPORTED) & F.col("tm_id").isNull() & scopes.get("tm", never)
    to_job = kind.isin(*FREE_LINES) & F.col("job_id").isNull() & scopes.get("job", never)
    says = never
    for text in SAYS:
        says = says | F.col("message").contains(text)
    return to_tm | to_job | (kind.isin("unparsed", "job_released", "jm_started") & says)


def _event_json() -> Column:
    """The bus value of a parsed event (``src`` is the record's topic and partition)."""
    fields = {
        "event_ms": F.unix_millis("event_time"),
        "src": F.concat_ws(":", F.col("topic"), F.col("partition").cast(StringType())),
    }
    return F.to_json(F.struct(*[fields.get(c, F.col(c)).alias(c) for c in BUS_FIELDS]))


def _dead_letter_json() -> Column:
    return F.to_json(
        F.struct(
            *[
                F.date_format("kafka_ts", "yyyy-MM-dd'T'HH:mm:ss.SSSXXX").alias(c)
                if c == "kafka_ts"
                else F.col(c)
                for c in DEAD_LETTER_FIELDS
            ]
        )
    )


def bus_partition(entity: Column, partitions: int) -> Column:
    """The bus partition of an entity's records: a hash of it modulo ``partitions``.

    Spark's ``hash`` (Murmur3, what bucketed tables rely on staying the same across
    releases), not Kafka's murmur2, which Spark SQL does not have.
    """
    return F.pmod(F.hash(entity), F.lit(partitions)).cast(IntegerType()).alias("partition")


def _out_type(partitions: int | None, event_ms: bool) -> str:
    """One type for every bus record a row can make (``stack`` takes no mixed nullability)."""
    p = "" if partitions is None else ", partition int"
    t = ", event_ms bigint" if event_ms else ""
    return f"struct<topic string, key string, value string{p}{t}>"


def bus_records(
    events: DataFrame,
    cfg: AppConfig,
    *,
    dead_letters: bool,
    partitions: int | None = None,
    event_ms: bool = False,
) -> DataFrame:
    """Parsed events → bus records: ``key`` (the entity), ``value`` (JSON), ``topic``.

    One record per entity scope that wants the event; an event nobody reads makes none.
    With ``dead_letters``, a malformed record makes one record for the dead-letter topic.
    With ``partitions``, a ``partition`` column places each event's record by its entity
    (:func:`bus_partition`; :mod:`streaming.placement` says why); dead letters keep
    Kafka's placement (null), their order matters to no one. With ``event_ms``, an
    ``event_ms`` column holds the value's ``event_ms`` (null for a dead letter), for a
    reader in the same job (:func:`detect_input`), which then need not read the JSON for
    it. A single projection and
    ``stack``: no second pass over the source, which Spark's real-time mode does not
    allow.
    """
    ok = F.col("error").isNull()
    outs = []
    scopes = _scopes(cfg)
    if "source_key" in events.columns:
        scopes["src"] = _source_wants(scopes)
    # Each scope's entity and whether it gets the event, in the projection before the
    # row generator: Spark evaluates a generator's own expressions row by row, uncompiled,
    # and the entity three times there (a TaskManager's is a regex: ~9 % of the parse and
    # bus's CPU, measured).
    per_scope = []
    for scope, cond in scopes.items():
        entity = _SCOPE_ENTITY[scope]()
        per_scope.append(entity.alias(f"_key_{scope}"))
        per_scope.append((ok & cond & entity.isNotNull()).alias(f"_to_{scope}"))
    for scope in scopes:
        entity = F.col(f"_key_{scope}")
        placed = [] if partitions is None else [bus_partition(entity, partitions)]
        if event_ms:
            placed.append(F.unix_millis("event_time").alias("event_ms"))
        outs.append(
            F.when(
                F.col(f"_to_{scope}"),
                F.struct(
                    F.lit(cfg.kafka.events_topic).alias("topic"),
                    entity.alias("key"),
                    F.col("_event").alias("value"),
                    *placed,
                ),
            )
        )
    if dead_letters:
        outs.append(
            F.when(
                ~ok,
                F.struct(
                    F.lit(cfg.kafka.deadletters_topic).alias("topic"),
                    F.concat_ws(":", F.col("topic"), F.col("partition").cast(StringType())).alias(
                        "key"
                    ),
                    _dead_letter_json().alias("value"),
                    *(
                        []
                        if partitions is None
                        else [F.lit(None).cast(IntegerType()).alias("partition")]
                    ),
                    *([F.lit(None).cast(LongType()).alias("event_ms")] if event_ms else []),
                ),
            )
        )
    wanted = F.lit(False)
    for cond in scopes.values():
        wanted = wanted | cond
    # A row per scope (and the dead letter), then the nulls dropped: array_compact is a
    # lambda (filter), and Spark interprets lambdas row by row (it tripled the parse
    # query's cost, measured). `stack`, not an explode of an array: the explode asks its
    # array's type again for every row (-6 % and -11 % of the parse and bus's CPU, measured).
    kind = _out_type(partitions, event_ms)
    return (
        events.select("*", F.when(ok & wanted, _event_json()).alias("_event"), *per_scope)
        .select(F.stack(F.lit(len(outs)), *[o.cast(kind) for o in outs]).alias("_out"))
        .where(F.col("_out").isNotNull())
        .select(
            "_out.topic",
            "_out.key",
            "_out.value",
            *([] if partitions is None else ["_out.partition"]),
            *(["_out.event_ms"] if event_ms else []),
        )
    )


def bus_events(records: DataFrame) -> DataFrame:
    """Bus records (``key``, ``value``) → events: ``entity``, ``event_time``, the fields.

    ``event_time`` is what the watermark follows; detectors read ``event_ms``. With the
    bus record's Kafka timestamp (``bus_ts``: when the parse query wrote it) it is the
    earlier of the two: one host whose clock runs minutes ahead (still within
    ``parsing.max_future_skew_s``) would otherwise move everyone's watermark ahead with
    its own, and every other host's records would be dropped as late. The broker's clock
    is one clock for all; the host keeps its own times in its events.
    """
    event_time = F.timestamp_millis(F.col("_e.event_ms"))
    if "bus_ts" in records.columns:
        event_time = F.least(event_time, F.col("bus_ts"))
    return records.select(
        F.col("key").alias("entity"),
        F.from_json("value", BUS_VALUE_SCHEMA).alias("_e"),
        *(["bus_ts"] if "bus_ts" in records.columns else []),
    ).select(
        "entity",
        event_time.alias("event_time"),
        *[F.col(f"_e.{c}").alias(c) for c in BUS_FIELDS],
    )


def detect_input(
    records: DataFrame, shards: int, partitions: int = 1, fresh_ms: int | None = None
) -> DataFrame:
    """Bus records (``key``, ``value``, optional ``bus_ts``) → the detect query's rows.

    ``shard`` (what the state is keyed by: the shard's key, :func:`streaming.shard_keys.
    shard_keys`, so the shards spread evenly over the ``partitions`` of the grouping that
    follows), ``entity``, ``value`` (the event as the bus
    carries it: the runner reads it in Python, a column at a time is what the Python
    state API costs), ``bus_ms`` (when it reached the bus; null on the files bus) and
    ``event_time``, which the watermark follows: with the bus record's Kafka timestamp it
    is the earlier of the two, so one host whose clock runs minutes ahead (still within
    ``parsing.max_future_skew_s``) cannot move everyone's watermark ahead with its own and
    make every other host's records late. The host keeps its own times in its events.
    With ``fresh_ms`` (the watermark delay), a record that reached the bus later than that
    after its event time has none (null, as a tick): a catch-up's records, read by tasks
    that run minutes apart, would move the watermark past the records of a slower task of
    the same catch-up and have them dropped as late (101,384 of 592,480 after a 20-minute
    outage of the benchmark's fleet). Records of a live fleet reach the bus in seconds.

    Records with an ``event_ms`` column come straight from :func:`bus_records` in the same
    job (a replay's): no tick is among them (the driver writes those to Kafka), so each
    goes to its entity's shard, its time read from the column, not from its JSON.
    """
    given = "event_ms" in records.columns
    head = F.col("_head")
    event_ms = F.col("event_ms") if given else head["event_ms"]
    event_time = F.timestamp_millis(event_ms)
    has_bus = "bus_ts" in records.columns
    if has_bus:
        event_time = F.least(event_time, F.col("bus_ts"))
    # A tick (streaming.ticks) goes to the shards it names (every shard when it names
    # none), and has no event time of its own for the watermark: it bounds the frontier
    # for deadlines, it must not make records late. A named shard past this query's count
    # (a tick written for another one) is not a shard here.
    tick = F.col("key") == TICK_KEY
    moves = ~tick
    if has_bus and fresh_ms is not None:
        moves = moves & (F.unix_millis("bus_ts") - event_ms <= fresh_ms)
    keys = shard_keys(shards, partitions)
    shard = _keyed(F.pmod(F.xxhash64("key"), F.lit(shards)).cast(IntegerType()), keys)
    columns = [
        F.col("key").alias("entity"),
        "value",
        (F.unix_millis("bus_ts") if has_bus else F.lit(None).cast(LongType())).alias("bus_ms"),
        F.when(moves, event_time).alias("event_time"),
    ]
    if given:
        # No JSON read, so the filter pushed down costs nothing; nor a row generator,
        # whose expressions Spark evaluates row by row, uncompiled. The replay's parse,
        # bus and detect input of a quarter hour of the 100-job fleet took 13.8 JVM CPU s
        # against 15.8 (medians of 7, warm, interleaved; issue #34).
        return records.where(event_ms.isNotNull()).select(shard.alias("shard"), *columns)
    # The head is read once, in a projection of its own, and the records without an event
    # time are dropped by the explode (an empty array), not by a filter: Spark pushes a
    # filter below the projection that read the head and reads it there again: two JSON
    # parses of every bus record, 13 % of the JVM's samples replaying an hour of the
    # 100-job fleet, against 7.5 % for the one.
    every = F.sequence(F.lit(0), F.lit(shards - 1))
    to = F.coalesce(F.array_intersect(head["shards"], every), every)
    if keys != tuple(range(shards)):
        to = F.transform(to, lambda s: _keyed(s, keys))
    none = F.array().cast(ArrayType(IntegerType()))
    shards_to = F.when(event_ms.isNull(), none).when(tick, to).otherwise(F.array(shard))
    return records.select("*", F.from_json("value", _HEAD).alias("_head")).select(
        F.explode(shards_to).alias("shard"), *columns
    )


def _keyed(shard: Column, keys: tuple[int, ...]) -> Column:
    """A shard number's state key (:func:`streaming.shard_keys.shard_keys`)."""
    if keys == tuple(range(len(keys))):
        return shard
    return F.element_at(F.array(*(F.lit(k) for k in keys)), shard + 1)
