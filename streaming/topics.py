"""Kafka topics flinkwatch reads and writes: create the bus, count partitions.

The raw topics belong to the log and metric shippers; the event bus and the dead-letter
topic belong to flinkwatch, which creates them when missing (brokers commonly refuse to
create topics on first use).
"""

from __future__ import annotations

import logging
import time

from conf import KafkaConfig

log = logging.getLogger(__name__)

#: The bus is a hand-over, not an archive: a day covers any restart of the detectors.
BUS_RETENTION_MS = 24 * 3600 * 1000


def _admin(cfg: KafkaConfig, wait_s: float) -> object:
    from kafka.admin import KafkaAdminClient

    deadline = time.monotonic() + wait_s
    while True:
        try:
            return KafkaAdminClient(
                bootstrap_servers=cfg.bootstrap_servers, client_id="flinkwatch-admin"
            )
        except Exception:  # the broker may still be starting
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def ensure_bus_topics(cfg: KafkaConfig, wait_s: float = 60) -> list[str]:
    """Create the event bus and dead-letter topics if missing; the names created."""
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = _admin(cfg, wait_s)
    try:
        existing = set(admin.list_topics())  # type: ignore[attr-defined]
        missing = [t for t in (cfg.events_topic, cfg.deadletters_topic) if t not in existing]
        if missing:
            try:
                admin.create_topics(  # type: ignore[attr-defined]
                    [
                        NewTopic(
                            t,
                            num_partitions=cfg.bus_partitions,
                            replication_factor=1,
                            topic_configs={"retention.ms": str(BUS_RETENTION_MS)},
                        )
                        for t in missing
                    ]
                )
            except TopicAlreadyExistsError:
                pass
            log.info("kafka: created %s", ", ".join(missing))
        return missing
    finally:
        admin.close()  # type: ignore[attr-defined]


def partition_count(cfg: KafkaConfig, topics: list[str], wait_s: float = 60) -> int:
    """Partitions of ``topics`` together (a missing topic counts as one)."""
    from kafka import KafkaConsumer

    deadline = time.monotonic() + wait_s
    consumer = KafkaConsumer(
        bootstrap_servers=cfg.bootstrap_servers,
        client_id="flinkwatch-admin",
        enable_auto_commit=False,
    )
    try:
        total = 0
        for t in topics:
            parts = consumer.partitions_for_topic(t)
            while parts is None and time.monotonic() < deadline:
                time.sleep(0.5)
                parts = consumer.partitions_for_topic(t)
            total += len(parts) if parts else 1
        return total
    finally:
        consumer.close()
