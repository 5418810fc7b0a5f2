"""``flinkwatch doctor``: what the data on the topics (or in files) lets flinkwatch see.

Reads a sample, the newest ``--sample`` records of each partition of the configured log
and metric topics (or the files given), parses it with the product's own parsers, counts
it in Spark by shape, kind, dead-letter reason and naming, and prints what
:mod:`streaming.doctor` makes of the counts: which record shapes arrive, why records are
refused (with one example each), and per detector whether the signals it needs are there.
Nothing is written to Kafka and no consumer group is committed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from conf import AppConfig
from streaming.catchup import end_offsets
from streaming.cli.args import add_output_format, config_of, log, print_json
from streaming.doctor import (
    Count,
    Example,
    Tally,
    as_json,
    diagnose,
    render_text,
    side_of_logger,
)
from streaming.events import parse_limits
from streaming.forwards import FREE_LINES, JM_START, JOB_ADDED, TM_START
from streaming.jvm_columns import side_by_side
from streaming.metric_parsing import parse_metrics
from streaming.parsing import parse_logs
from streaming.replay_session import replay_session
from streaming.session import get_session
from streaming.sources import (
    file_records,
    given_name,
    kafka_records,
    log_records,
    stage_files,
    stage_logs,
)

#: The newest records per partition a sample reads by default.
DEFAULT_SAMPLE = 10_000
#: Characters of a dead letter's record shown as its example.
_EXAMPLE_CHARS = 400


def add_arguments(d: argparse.ArgumentParser) -> None:
    """The ``doctor`` command."""
    d.allow_abbrev = False
    d.add_argument("--config", help="YAML config (topics, Kafka connection, parsing limits)")
    d.add_argument("--bootstrap", help="override kafka.bootstrap_servers")
    d.add_argument(
        "--logs", nargs="+", default=[], help="log files or directories instead of the topics"
    )
    d.add_argument("--metrics", nargs="+", default=[], help="metric files instead of the topics")
    d.add_argument(
        "--sample",
        type=int,
        default=DEFAULT_SAMPLE,
        help=f"newest records per partition read from each topic (default {DEFAULT_SAMPLE:,})",
    )
    add_output_format(d)
    d.set_defaults(func=cmd_doctor)


def cmd_doctor(args: argparse.Namespace) -> int:
    """Sample, parse, count, judge, print."""
    cfg = config_of(args)
    if args.sample < 1:
        log.error("--sample must be at least 1")
        return 2
    from_files = bool(args.logs or args.metrics)
    work = Path(tempfile.mkdtemp(prefix="flinkwatch-doctor-"))
    try:
        if from_files:
            staged = _staged(args, work)
            # A replay's session, for files as a replay of them would have it: a small
            # input's JVM maps the class-data archive and runs the parse without compiling
            # it (streaming.replay_session.session_settings).
            dirs = [d for _, ds in staged.values() for d in ds]
            spark, _ = replay_session(cfg, *dirs, partitions=PARTITIONS)
            inputs = _file_inputs(spark, staged)
        else:
            spark = get_session(
                timezone=cfg.parsing.log_timezone, shuffle_partitions=PARTITIONS, require_kafka=True
            )
            inputs = _topic_inputs(spark, cfg, args.sample)
        tally = collect_tally(cfg, inputs)
    except FileNotFoundError as exc:
        log.error("%s", exc)
        return 2
    finally:
        shutil.rmtree(work, ignore_errors=True)
    enabled = [n for n, p in cfg.resolver().base.items() if p.enabled]
    diagnosis = diagnose(tally, enabled, cfg.catalog())
    if args.output_format == "json":
        print_json(as_json(diagnosis))
    else:
        print("\n".join(render_text(diagnosis)))
    sys.stdout.flush()
    return 0


#: The shuffle's partitions of a doctor's counts (a sample: a few thousand rows each).
PARTITIONS = 2
#: Per input: where the sample came from, and its records (``value``, ``topic``, ...).
Inputs = dict[str, tuple[str, DataFrame]]


def _staged(args: argparse.Namespace, work: Path) -> dict[str, tuple[str, list[Path]]]:
    """The input files linked under ``work``: per input, its kind and its directories."""
    out: dict[str, tuple[str, list[Path]]] = {}
    if args.logs:
        # Kafka records captured with their keys read as the topic would be.
        out["logs"] = ("log", list(stage_logs(args.logs, work / "logs")))
    if args.metrics:
        out["metrics"] = ("metric", [stage_files(args.metrics, work / "metrics")])
    return out


def _file_inputs(spark: SparkSession, staged: dict[str, tuple[str, list[Path]]]) -> Inputs:
    out: Inputs = {}
    for name, (kind, dirs) in staged.items():
        files = sum(1 for d in dirs for _ in d.iterdir())
        records = (
            log_records(spark, *dirs)
            if kind == "log"
            else file_records(spark, dirs[0], kind=kind, stream=False)
        )
        out[name] = (f"{files} file(s)", records)
    return out


def _topic_inputs(spark: SparkSession, cfg: AppConfig, sample: int) -> Inputs:
    topics = {"logs": cfg.kafka.logs_topic, "metrics": cfg.kafka.metrics_topic}
    first, end = end_offsets(cfg.kafka, list(topics.values()))
    out: Inputs = {}
    for name, topic in topics.items():
        parts = end.get(topic, {})
        if not parts:
            log.warning("topic %s has no partitions (missing?): nothing sampled from it", topic)
            continue
        start = {p: max(first.get(topic, {}).get(p, 0), stop - sample) for p, stop in parts.items()}
        records = sum(parts[p] - start[p] for p in parts)
        df = kafka_records(
            spark,
            cfg.kafka,
            topic,
            stream=False,
            starting_offsets=json.dumps({topic: start}),
            keyed=name == "logs",
        )
        what = f"{topic}: the newest {records:,} records of {len(parts)} partition(s)"
        out[name] = (what, df)
    return out


def _keyed(own: Column, job: Column) -> tuple[Column, Column]:
    """What a keyed record's line is attributed to through its key (streaming.forwards).

    Its key's own start line names its TaskManager, when the key's sample holds one; its
    job leader lines name the job of a WARN or ERROR line that names none, when the
    sample's lines of the key name exactly one job (the runner gives such a line the job
    when its TaskManager holds exactly one then). A key that also holds a JobManager's
    start holds several processes (one key for every process): nothing of it is
    attributed, as in the runner (:class:`streaming.forwards.SourceSelf`).
    """
    key = Window.partitionBy("topic", "source_key")
    one = F.col("source_key").isNotNull() & ~F.coalesce(
        F.max(F.col("message").rlike(JM_START)).over(key), F.lit(False)
    )
    said = F.coalesce(F.max(F.col("message").rlike(TM_START)).over(key), F.lit(False))
    held = F.regexp_extract(F.col("message"), JOB_ADDED, 1)
    jobs = F.collect_set(F.when(held != "", held)).over(key)
    free = F.col("kind").isin(*FREE_LINES)
    return own | (one & said), job | (one & free & (F.size(jobs) == 1))


def collect_tally(cfg: AppConfig, inputs: Inputs) -> Tally:
    """Parse each input and count it (one small Spark aggregation per input)."""
    known = sorted({m for d in cfg.catalog().values() for m in d.metrics})
    counts: list[Count] = []
    examples: list[Example] = []
    sources: dict[str, str] = {}
    for name, df in _parsed_inputs(cfg, inputs).items():
        sources[name] = inputs[name][0]
        own, job = F.col("_own_source"), F.col("_own_job")
        metric = F.when(F.col("metric").isin(*known), F.col("metric")).when(
            F.col("kind") == "metric", F.lit("other")
        )
        grouped = df.groupBy(
            "shape",
            "kind",
            "error",
            job.alias("job"),
            F.col("tm_id").isNotNull().alias("tm"),
            own.alias("source"),
            "logger",
            metric.alias("metric_seen"),
        ).count()
        for r in grouped.collect():
            counts.append(
                Count(
                    input=name,  # type: ignore[arg-type]
                    shape=r["shape"] or "unknown",
                    kind=r["kind"],
                    error=r["error"],
                    job=bool(r["job"]),
                    tm=bool(r["tm"]),
                    side=side_of_logger(r["logger"]),
                    metric=r["metric_seen"],
                    n=int(r["count"]),
                    source=bool(r["source"]),
                )
            )
        first_dead = (
            df.where(F.col("error").isNotNull())
            .groupBy("error")
            .agg(F.min_by(F.struct("topic", "partition", "offset", "raw"), "offset").alias("e"))
        )
        for r in first_dead.collect():
            e = r["e"]
            topic = e["topic"] or ""
            examples.append(
                Example(
                    input=name,  # type: ignore[arg-type]
                    error=r["error"],
                    # A file's path (staged); a Kafka topic's name as it is.
                    source=given_name(topic) if "/" in topic else topic,
                    partition=int(e["partition"] or 0),
                    offset=int(e["offset"] or 0),
                    raw=(e["raw"] or "")[:_EXAMPLE_CHARS],
                )
            )
    return Tally(tuple(_merged(counts)), tuple(examples), sources)


def _parsed_inputs(cfg: AppConfig, inputs: Inputs) -> dict[str, DataFrame]:
    """Each input parsed with its shapes; the two inputs' plans built at once (side by side)."""
    builds = [
        (name, lambda name=name, records=records: _parsed(cfg, name, records))
        for name, (_, records) in inputs.items()
    ]
    if len(builds) != 2:
        return {name: build() for name, build in builds}
    (first, here), (second, beside) = builds
    a, b = side_by_side(inputs[first][1].sparkSession, here, beside)
    return {first: a, second: b}


def _parsed(cfg: AppConfig, name: str, records: DataFrame) -> DataFrame:
    """One input parsed, with whether each record names its source and its job."""
    lim = parse_limits(cfg)
    if name == "logs":
        df = parse_logs(records, lim, shapes=True)
    else:
        df = parse_metrics(records, lim, names=cfg.parsing.metric_names, shapes=True)
    # Metric records name their TaskManager in their labels, or not at all.
    own = F.col("own_tm").isNotNull() if "own_tm" in df.columns else F.lit(False)
    job = F.col("job_id").isNotNull() if "job_id" in df.columns else F.lit(False)
    if "source_key" in df.columns:
        own, job = _keyed(own, job)
    # Columns first: a window may not be a grouping expression.
    return df.select("*", own.alias("_own_source"), job.alias("_own_job"))


def _merged(counts: list[Any]) -> list[Any]:
    """Rows that differ only by logger (several loggers of one side) summed into one."""
    out: dict[tuple[Any, ...], Any] = {}
    for c in counts:
        key = (c.input, c.shape, c.kind, c.error, c.job, c.tm, c.side, c.metric, c.source)
        out[key] = replace(out[key], n=out[key].n + c.n) if key in out else c
    return list(out.values())
