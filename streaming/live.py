"""The Spark session of a live run, sized for its queries.

Real-time mode pins one task per raw partition for as long as the parse query runs; the
detect and dead-letter queries need slots beside them. A local master is raised to fit;
a cluster with too few slots parses in micro-batches instead, which the log says.
"""

from __future__ import annotations

import logging

from pyspark.sql import SparkSession

from conf import AppConfig
from streaming.session import SessionSpec, cluster_slots, sized_master
from streaming.topics import ensure_bus_topics, partition_count

log = logging.getLogger(__name__)


def query_slots(cfg: AppConfig, raw_partitions: int) -> int:
    """Task slots the live queries need at once.

    Real-time mode keeps one task per raw partition running; the detect query's stages
    (one task per bus partition, then per state partition) and the dead-letter query's
    run beside them.
    """
    pinned = raw_partitions if cfg.spark.parse_mode == "realtime" else 0
    return pinned + max(cfg.kafka.bus_partitions, cfg.spark.shuffle_partitions) + 1


def live_session(cfg: AppConfig) -> tuple[SparkSession, AppConfig]:
    """Create the bus topics if missing, start Spark with enough task slots.

    Returns:
        The session, and ``cfg`` with ``spark.parse_mode`` as it will run.

    Raises:
        KafkaConnectError: no connection to the brokers (unreachable, login or TLS refused).
        KafkaSettingsError: the password's variable is unset or the CA file unreadable.
        Exception: the broker refused a request (from the Kafka client).
    """
    ensure_bus_topics(cfg.kafka)
    raw_partitions = partition_count(cfg.kafka, [cfg.kafka.logs_topic, cfg.kafka.metrics_topic])
    need = query_slots(cfg, raw_partitions)
    spec = SessionSpec.of(cfg)
    spark = spec.sized(sized_master(spec.master, need)).start()
    if spark.sparkContext.uiWebUrl:
        log.info(
            "Spark UI at %s (Structured Streaming tab: the three queries)",
            spark.sparkContext.uiWebUrl,
        )
    if cfg.spark.parse_mode != "realtime" or cfg.spark.master.strip().startswith("local"):
        return spark, cfg
    have = cluster_slots(spark)
    if have >= need:
        return spark, cfg
    log.warning(
        "the cluster has %d task slots; real-time parsing needs %d (one per partition of "
        "%s and %s, plus the detectors): parsing in micro-batches instead",
        have,
        need,
        cfg.kafka.logs_topic,
        cfg.kafka.metrics_topic,
    )
    return spark, cfg.model_copy(
        update={"spark": cfg.spark.model_copy(update={"parse_mode": "microbatch"})}
    )
