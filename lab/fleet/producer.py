"""Sending the simulated records to Kafka."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kafka import KafkaProducer

from detectors.model import FlinkwatchError
from lab.fleet.spec import SimRecord


class ProduceError(FlinkwatchError):
    """Kafka did not accept a simulated record.

    Attributes:
        topic: The topic of the first record that failed.

    """

    def __init__(self, msg: str, topic: str) -> None:
        super().__init__(msg)
        self.topic = topic


_PROGRESS_EVERY = 1000


def produce(
    records: Iterable[SimRecord],
    bootstrap: str | Mapping[str, Any],
    logs_topic: str,
    metrics_topic: str,
    realtime: bool = False,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Send records to Kafka; log records to ``logs_topic``, metrics to ``metrics_topic``.

    The Kafka timestamp of each record is its event time. The producer is idempotent
    (kafka-python's default), so a key's records stay in order across retries.

    Args:
        records: What to send, usually :func:`generate`'s output.
        bootstrap: Kafka bootstrap servers, ``host:port[,host:port]``, or kafka-python
            connection settings (:attr:`conf.kafka_client.KafkaSettings.python`) for a
            secured broker.
        logs_topic: Topic of ``stream == "log"`` records.
        metrics_topic: Topic of ``stream == "metric"`` records.
        realtime: Pace the records: each is sent at the wall-clock start plus its offset
            from the first record's ``time_ms``.
        progress: Called with the number of records sent so far, every 1,000 records,
            after each pause when pacing, and once at the end.

    Returns:
        The number of records sent.

    Raises:
        ProduceError: Kafka rejected a record (raised after the flush).
        KafkaConnectError: no connection to the brokers (login or TLS refused, or none
            answered within a minute).

    """
    from streaming.topics import connect

    settings = {"bootstrap_servers": bootstrap} if isinstance(bootstrap, str) else bootstrap
    producer = connect(KafkaProducer, settings, linger_ms=20, batch_size=256 * 1024)
    failures: list[tuple[str, BaseException]] = []

    def on_error(topic: str) -> Callable[[BaseException], None]:
        def record(exc: BaseException) -> None:
            failures.append((topic, exc))

        return record

    on_log_error, on_metric_error = on_error(logs_topic), on_error(metrics_topic)
    sent = 0
    first_ms: int | None = None
    wall0 = 0.0
    try:
        for rec in records:
            if realtime:
                if first_ms is None:
                    first_ms, wall0 = rec.time_ms, time.monotonic()
                delay = wall0 + (rec.time_ms - first_ms) / 1000 - time.monotonic()
                if delay > 0.001:
                    time.sleep(delay)
                    if progress is not None:
                        progress(sent)
            is_log = rec.stream == "log"
            future = producer.send(
                logs_topic if is_log else metrics_topic,
                value=rec.value,
                key=rec.key,
                timestamp_ms=rec.time_ms,
            )
            future.add_errback(on_log_error if is_log else on_metric_error)
            sent += 1
            if progress is not None and sent % _PROGRESS_EVERY == 0:
                progress(sent)
        producer.flush()
    finally:
        producer.close()
    if failures:
        topic, exc = failures[0]
        msg = f"kafka rejected {len(failures)} of {sent} records; first to topic={topic}: {exc}"
        raise ProduceError(msg, topic) from exc
    if progress is not None:
        progress(sent)
    return sent
