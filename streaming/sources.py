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

from conf import KafkaConfig
from conf.kafka_client import kafka_settings

# A new log record starts with a timestamp (log4j layouts, optionally behind a kubectl
# RFC 3339 prefix) or with `{` (JSON layouts); any other line continues the one before
# (stack traces, multi-line messages).
_RECORD_START = r"\r?\n(?=\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}|\{)"


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
    r = (
        reader.format("kafka")
        # Connection, security and kafka.options; the keys below are refused there.
        .options(**kafka_settings(cfg).spark(reader=True))
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
) -> DataFrame:
    """Records of one Kafka topic with the official Spark Kafka source."""
    return kafka_stream(
        spark,
        cfg,
        topic,
        stream=stream,
        realtime=realtime,
        starting_offsets=starting_offsets,
        max_offsets=max_offsets,
    ).select(
        F.col("value").cast("string").alias("value"),
        F.col("topic"),
        F.col("partition"),
        F.col("offset"),
        F.col("timestamp").alias("kafka_ts"),
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


#: A timestamp somewhere near a record's start: its layout's or its JSON envelope's.
_TIME_TEXT = r"(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?(?:Z|[+-]\d{2}:?\d{2})?)"
#: How many records back a record without a time of its own looks for one.
_LOOK_BACK = 3


def _time_text(record: Column) -> Column:
    found = F.regexp_extract(F.substring(record, 1, 300), _TIME_TEXT, 1)
    return F.when(found != "", found)


def file_records(
    spark: SparkSession, directory: Path, *, kind: str, stream: bool = True
) -> DataFrame:
    """Records of every file in ``directory``.

    Log files are split at record starts, so stack traces stay with their line;
    metric files are one record per line. A log record without a time of its own (a
    shipper without multiline handling wrote ``java.lang.OutOfMemoryError: …`` as a record
    of its own) gets ``fallback_time``: the time of the record before it in the file,
    where Kafka records fall back to their Kafka timestamp.
    """
    reader = spark.readStream if stream else spark.read
    df = reader.format("text").option("wholetext", "true").load(str(directory))
    split = _RECORD_START if kind == "log" else r"\r?\n"
    df = df.select(
        F.input_file_name().alias("topic"), F.split(F.col("value"), split).alias("_recs")
    )
    if kind == "log":
        # Arrays, not a window: the file source is a stream. Each record's time text is
        # extracted once; a record looks back a few records for one.
        df = df.select("topic", "_recs", F.transform("_recs", _time_text).alias("_times"))
        items = F.transform(
            "_recs",
            lambda rec, i: F.struct(
                rec.alias("value"),
                F.coalesce(
                    *[
                        F.when(i >= k, F.element_at(F.col("_times"), i - k + 1))
                        for k in range(1, _LOOK_BACK + 1)
                    ]
                ).alias("fallback_time"),
            ),
        )
    else:
        items = F.transform(
            "_recs",
            lambda rec: F.struct(
                rec.alias("value"), F.lit(None).cast("string").alias("fallback_time")
            ),
        )
    return (
        df.select("topic", F.posexplode(items).alias("offset", "_rec"))
        .where(F.trim(F.col("_rec.value")) != "")
        .select(
            F.col("_rec.value").alias("value"),
            F.regexp_replace(F.col("topic"), r"^file:(//)?", "").alias("topic"),
            F.lit(0).alias("partition"),
            F.col("offset").cast("long").alias("offset"),
            F.lit(None).cast("timestamp").alias("kafka_ts"),
            F.col("_rec.fallback_time").alias("fallback_time"),
        )
    )
