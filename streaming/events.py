"""The parse step every parsing query shares: both record streams as one stream of events.

The live parse query (:class:`streaming.bus_paths.KafkaPath`), the tests' files layout,
``flinkwatch replay``, ``flinkwatch parse`` and ``flinkwatch doctor`` build their parse
with :func:`parsed_events`, so what decides a record is the same code everywhere.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from conf import AppConfig
from detectors.model import EVENT_KINDS
from streaming.delivery import PARSE_COUNTS
from streaming.jvm_columns import side_by_side
from streaming.metric_parsing import parse_metrics
from streaming.parsing import DEAD_LETTER_REASONS, ParseLimits, parse_logs


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
    # The two parses share nothing until their union: built at once, a first build took
    # 2.2-2.4 s against 3.1-3.8 (the small real run's replay, three runs each, issue #34).
    # Log records may carry their Kafka key (``source_key``, streaming.forwards).
    parsed, named = side_by_side(
        logs.sparkSession,
        lambda: parse_logs(logs, lim),
        lambda: parse_metrics(metrics, lim, names=cfg.parsing.metric_names),
    )
    return parsed.unionByName(named, allowMissingColumns=True)


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
