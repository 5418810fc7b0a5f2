"""Record sources: Kafka topics (the job) and files (replay, parse).

Both hand the parser the same columns: ``value``, ``topic``, ``partition``,
``offset`` and ``kafka_ts``. For files, ``topic`` is the file path and
``offset`` the record's position in it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, LongType, StringType, TimestampType

from conf import KafkaConfig
from conf.kafka_client import kafka_settings
from streaming.forwards import JM_START, JOB_ADDED, JOB_REMOVED, TM_START

# A new log record starts with a timestamp (log4j layouts, optionally behind a kubectl
# RFC 3339 prefix) or with `{` (JSON layouts); any other line continues the one before
# (stack traces, multi-line messages).
_RECORD_START = r"\r?\n(?=\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}|\{)"


#: The raw topics' consumers in real-time mode, unless ``kafka.options`` sets them: each
#: fetch waits for 64 KB or 100 ms. A real-time task polls all the time, and a fetch that
#: returns at the first byte (Kafka's default) brings a few records at a time: at 494
#: records/s these cut the parse's executor CPU by ~15 % and the broker's by ~20 %
#: (bench/README.md, stop 55), for up to 0.1 s more on the way to the bus.
REALTIME_FETCH = {"fetch.min.bytes": "65536", "fetch.max.wait.ms": "100"}
#: The parse query's producer to the bus, unless ``kafka.options`` sets it: records sent
#: in batches of up to 20 ms, not one request each.
BUS_LINGER = {"linger.ms": "20"}


def with_defaults(defaults: dict[str, str], options: dict[str, str]) -> dict[str, str]:
    """Spark's Kafka ``options`` with client ``defaults`` added where they set none."""
    return {**{f"kafka.{k}": v for k, v in defaults.items()}, **options}


def kafka_stream(
    spark: SparkSession,
    cfg: KafkaConfig,
    topic: str,
    *,
    stream: bool = True,
    realtime: bool = False,
    starting_offsets: str | None = None,
    max_offsets: int | None = None,
) -> DataFrame:
    """One Kafka topic as Spark's Kafka source gives it (``key``, ``value``, ...).

    ``realtime``: for a query in real-time mode, which refuses per-trigger limits.
    ``max_offsets`` overrides ``kafka.max_offsets_per_trigger``.

    Raises:
        KafkaSettingsError: a secret's environment variable is unset, or the CA file
            unreadable (from :func:`conf.kafka_client.kafka_settings`).
    """
    reader = spark.readStream if stream else spark.read
    options = kafka_settings(cfg).spark(reader=True)
    r = (
        reader.format("kafka")
        # Connection, security and kafka.options; the keys below are refused there.
        .options(**(with_defaults(REALTIME_FETCH, options) if realtime else options))
        .option("subscribe", topic)
        .option("startingOffsets", starting_offsets or cfg.starting_offsets)
        .option("failOnDataLoss", str(cfg.fail_on_data_loss).lower())
    )
    limit = max_offsets or cfg.max_offsets_per_trigger
    if stream and not realtime and limit:
        r = r.option("maxOffsetsPerTrigger", str(limit))
    return r.load()


def kafka_records(
    spark: SparkSession,
    cfg: KafkaConfig,
    topic: str,
    *,
    stream: bool = True,
    realtime: bool = False,
    starting_offsets: str | None = None,
    max_offsets: int | None = None,
    keyed: bool = False,
) -> DataFrame:
    """Records of one Kafka topic with the official Spark Kafka source.

    ``keyed``: also the record's key as ``source_key`` (log topics: a bare appender's key
    says which process a record is from, :mod:`streaming.forwards`).
    """
    return kafka_stream(
        spark,
        cfg,
        topic,
        stream=stream,
        realtime=realtime,
        starting_offsets=starting_offsets,
        max_offsets=max_offsets,
    ).select(
        F.col("value").cast(StringType()).alias("value"),
        F.col("topic"),
        F.col("partition"),
        F.col("offset"),
        F.col("timestamp").alias("kafka_ts"),
        *([F.col("key").cast(StringType()).alias("source_key")] if keyed else []),
    )


def stage_files(paths: Sequence[str | Path], into: Path) -> Path:
    """Link input files into one directory, which Spark's file stream source needs.

    Directories are expanded to the files in them.
    """
    into.mkdir(parents=True, exist_ok=True)
    n = 0
    for p in paths:
        p = Path(p).resolve()
        files = sorted(x for x in p.rglob("*") if x.is_file()) if p.is_dir() else [p]
        for f in files:
            if not f.exists():
                msg = f"input file not found: {f}"
                raise FileNotFoundError(msg)
            os.symlink(f, into / f"{n:05d}-{f.name}")
            n += 1
    return into


def given_name(staged: str) -> str:
    """The name the user gave a file :func:`stage_files` linked as ``NNNNN-<name>``."""
    name = Path(staged).name
    return name.split("-", 1)[1] if "-" in name else name


#: A timestamp somewhere near a record's start: its layout's or its JSON envelope's.
_TIME_TEXT = r"(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?(?:Z|[+-]\d{2}:?\d{2})?)"
#: How many records back a record without a time of its own looks for one.
_LOOK_BACK = 3


def _time_text(record: Column) -> Column:
    found = F.regexp_extract(F.substring(record, 1, 300), _TIME_TEXT, 1)
    return F.when(found != "", found)


# What a TaskManager's own log says of itself: whose it is (its first lines, and again after
# a restart into the same file), and which jobs it holds slots of (TaskExecutor and
# DefaultJobLeaderService, every version from 1.5 to 2.3). Only a log file as Flink wrote it
# is one process's (a mini-cluster's JobManager runs in its TaskManager's JVM): a file of
# shipper records (JSON, or behind a syslog or `kubectl --timestamps` header), or of text
# records where a JobManager starts beside a TaskManager (a KafkaAppender's topic written
# out), interleaves processes, and its records name their own source in their envelope.
_SHIPPED = r"^\s*(?:\{|\d{4}-\d{2}-\d{2}T)"


def _found(record: Column, pattern: str) -> Column:
    value = F.regexp_extract(record, pattern, 1)
    return F.when(value != "", value)


def _jobmanager_start(record: Column) -> Column:
    """Whether a record is a JobManager process starting.

    A file holding one and a TaskManager's start holds two processes: a topic's records
    written out, not one process's log (a mini-cluster logs no entrypoint).
    """
    return record.contains("ClusterEntry") & record.rlike(JM_START)


def _mark(record: Column, i: Column) -> Column:
    """A record that names the log's TaskManager or a job it holds, as a mark; else null."""
    says = record.contains("Starting TaskManager with ResourceID") | record.contains(
        " job leader monitoring"
    )
    return F.when(
        says,
        F.struct(
            i.alias("i"),
            _found(record, TM_START).alias("tm"),
            _found(record, JOB_ADDED).alias("add"),
            _found(record, JOB_REMOVED).alias("rm"),
        ),
    )


def _self_at(marks: Column, i: Column) -> Column:
    """The TaskManager a log is, and the jobs it holds, as of its record ``i``.

    Folds the marks up to ``i``: a start names the TaskManager and forgets the jobs of the
    one before it (a restart logging into the same file), an added job joins, a removed one
    leaves. A few marks per file: the cost is the records times the marks before them.
    """
    start = F.struct(
        F.lit(None).cast(StringType()).alias("tm"),
        F.array().cast(ArrayType(StringType())).alias("jobs"),
    )

    def step(acc: Column, m: Column) -> Column:
        jobs = (
            F.when(m["tm"].isNotNull(), F.array().cast(ArrayType(StringType())))
            .when(m["add"].isNotNull(), F.array_union(acc["jobs"], F.array(m["add"])))
            .when(m["rm"].isNotNull(), F.array_remove(acc["jobs"], m["rm"]))
            .otherwise(acc["jobs"])
        )
        return F.struct(F.coalesce(m["tm"], acc["tm"]).alias("tm"), jobs.alias("jobs"))

    return F.aggregate(F.filter(marks, lambda m: m["i"] <= i), start, step)


def file_records(
    spark: SparkSession, directory: Path, *, kind: str, stream: bool = True
) -> DataFrame:
    """Records of every file in ``directory``.

    Log files are split at record starts, so stack traces stay with their line;
    metric files are one record per line. A log record without a time of its own (a
    shipper without multiline handling wrote ``java.lang.OutOfMemoryError: …`` as a record
    of its own) gets ``fallback_time``: the time of the record before it in the file,
    where Kafka records fall back to their Kafka timestamp. A log record also gets what
    its file said of itself before it (:func:`_self_at`): ``source_tm``, the TaskManager
    whose log it is, and ``source_job``, the one job that TaskManager held then (null when
    it held none or several), for the lines that name neither.
    """
    reader = spark.readStream if stream else spark.read
    df = reader.format("text").option("wholetext", "true").load(str(directory))
    # A metric file splits at each "\n", one character and no pattern: Java's String.split
    # then needs no regex (6.6 % of the JVM's samples replaying an hour, 0.5 % without); a
    # line's "\r" goes with :func:`_line`. The file's name is made a topic once per file.
    split = _RECORD_START if kind == "log" else "\n"
    df = df.select(
        F.regexp_replace(F.input_file_name(), r"^file:(//)?", "").alias("topic"),
        F.split(F.col("value"), split).alias("_recs"),
    )
    if kind == "log":
        # Arrays, not a window: the file source is a stream. Each record's time text is
        # extracted once; a record looks back a few records for one.
        df = df.select(
            "topic",
            "_recs",
            F.transform("_recs", _time_text).alias("_times"),
            # Null for a file of shipper records: nothing in it speaks for the file.
            F.when(
                ~F.coalesce(F.element_at("_recs", 1), F.lit("")).rlike(_SHIPPED)
                & ~F.exists("_recs", _jobmanager_start),
                F.filter(F.transform("_recs", _mark), lambda m: m.isNotNull()),
            ).alias("_marks"),
        )

        def item(rec: Column, i: Column) -> Column:
            me = _self_at(F.col("_marks"), i)
            return F.struct(
                rec.alias("value"),
                F.coalesce(
                    *[
                        F.when(i >= k, F.element_at(F.col("_times"), i - k + 1))
                        for k in range(1, _LOOK_BACK + 1)
                    ]
                ).alias("fallback_time"),
                me["tm"].alias("source_tm"),
                F.when(F.size(me["jobs"]) == 1, me["jobs"][0]).alias("source_job"),
            )

        recs = df.select("topic", F.posexplode(F.transform("_recs", item)).alias("offset", "_rec"))
    else:
        # The lines themselves exploded, each made a record in the projection after: a
        # lambda over an array is interpreted element by element, a projection compiled
        # (a quarter hour of the 100-job fleet's metric files read: 0.91 JVM CPU s
        # against 1.17, medians of 7, warm, interleaved; issue #34).
        recs = df.select("topic", F.posexplode("_recs").alias("offset", "_line")).select(
            "topic",
            "offset",
            F.struct(
                _line(F.col("_line")).alias("value"),
                F.lit(None).cast(StringType()).alias("fallback_time"),
            ).alias("_rec"),
        )
    own = ["source_tm", "source_job"] if kind == "log" else []
    return recs.where(F.trim(F.col("_rec.value")) != "").select(
        F.col("_rec.value").alias("value"),
        "topic",
        F.lit(0).alias("partition"),
        F.col("offset").cast(LongType()).alias("offset"),
        F.lit(None).cast(TimestampType()).alias("kafka_ts"),
        F.col("_rec.fallback_time").alias("fallback_time"),
        *[F.col(f"_rec.{c}").alias(c) for c in own],
    )


def _line(text: Column) -> Column:
    r"""A line split at "\n" without the "\r" of a CRLF file (as ``\r?\n`` would split it)."""
    return F.when(text.endswith("\r"), text.substr(F.lit(1), F.length(text) - 1)).otherwise(text)


#: How a file of Kafka records captured with their coordinates ends (one JSON object a line:
#: ``topic``, ``partition``, ``offset``, ``timestamp_ms``, ``key``, ``value``).
CAPTURE_SUFFIX = ".records.jsonl"


def captured_records(spark: SparkSession, directory: Path) -> DataFrame:
    """Kafka records as a capture file holds them (:data:`CAPTURE_SUFFIX`), keys and all.

    The columns of :func:`kafka_records` with ``keyed``: a replay of a topic's records
    reads what the live job reads, the key that names a record's process included
    (:mod:`streaming.forwards`).
    """
    return (
        spark.read.schema(
            "topic string, partition int, offset long, timestamp_ms long, key string, value string"
        )
        .json(str(directory))
        .select(
            "value",
            "topic",
            "partition",
            "offset",
            F.timestamp_millis("timestamp_ms").alias("kafka_ts"),
            F.col("key").alias("source_key"),
        )
    )


def stage_logs(paths: Sequence[str | Path], into: Path) -> tuple[Path, Path]:
    """Stage log inputs (:func:`stage_files`): log files, and Kafka captures apart.

    Returns the directory of log files and the directory of captures
    (:data:`CAPTURE_SUFFIX`), each under ``into``.
    """
    captured = [p for p in paths if str(p).endswith(CAPTURE_SUFFIX)]
    logs = stage_files([p for p in paths if p not in captured], into / "logs")
    return logs, stage_files(captured, into / "captures")


def log_records(spark: SparkSession, logs: Path, captures: Path) -> DataFrame:
    """The records of staged log files and captures (:func:`stage_logs`), as one frame.

    A capture's records keep their keys (``source_key``); a file's have none.
    """
    records = file_records(spark, logs, kind="log", stream=False)
    if any(captures.iterdir()):
        records = records.unionByName(captured_records(spark, captures), allowMissingColumns=True)
    return records
