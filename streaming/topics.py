"""Kafka topics flinkwatch reads and writes, through kafka-python: connect, create, count.

The raw topics belong to the log and metric shippers; the event bus and the dead-letter
topic belong to flinkwatch, which creates them when missing (brokers commonly refuse to
create topics on first use). The command-line tools (``kafka create-topics``, ``simulate``,
``demo``) connect through :func:`connect` too, with the same settings as the job
(:func:`conf.kafka_client.kafka_settings`).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

from conf import FlinkwatchError, KafkaConfig
from conf.kafka_client import kafka_settings

log = logging.getLogger(__name__)

#: How long one connection attempt may take before the next (kafka-python 3 bootstraps
#: in the constructor, 30 s by default).
_ATTEMPT_MS = 10_000

T = TypeVar("T")


class KafkaConnectError(FlinkwatchError):
    """kafka-python could not connect: brokers unreachable, login or TLS refused.

    The message names the bootstrap servers and the reason, never a secret.
    """


class KafkaTopicError(FlinkwatchError):
    """A topic flinkwatch needs cannot be created or written.

    The message names the topic, what the brokers said or what is wrong with it, and the
    setting that fixes it.
    """


class _Refusals(logging.Handler):
    """Authentication and TLS failures kafka-python logs while it connects.

    kafka-python retries them until its bootstrap timeout and then raises a bare
    "Unable to bootstrap": the reason is only in its log, as the logged exception.
    Neither kind heals by waiting, so one is enough to stop trying.
    """

    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.reasons: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        from kafka.errors import (
            AuthorizationError,
            KafkaConnectionError,
            SaslAuthenticationFailedError,
        )

        args = record.args if isinstance(record.args, tuple) else ()
        for arg in args:
            if isinstance(arg, SaslAuthenticationFailedError | AuthorizationError):
                self.reasons.append(f"authentication failed: {_brief(arg)}")
            elif isinstance(arg, KafkaConnectionError) and "Handshake failed" in str(arg):
                self.reasons.append(f"TLS handshake failed: {_brief(arg)}")


def _brief(exc: BaseException) -> str:
    # kafka-python repeats the class name: "[Error 58] SaslAuthenticationFailedError:
    # SaslAuthenticationFailedError: Authentication failed ...".
    text = re.sub(r"^(\[Error \d+\] )?(\w+Error: )*(Handshake failed: )?", "", str(exc))
    return text.strip() or type(exc).__name__


@contextmanager
def _refusals() -> Iterator[_Refusals]:
    handler = _Refusals()
    logger = logging.getLogger("kafka")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


def connect(
    factory: Callable[..., T],
    settings: Mapping[str, Any],
    *,
    wait_s: float = 60,
    **kwargs: Any,
) -> T:
    """A kafka-python client (``KafkaAdminClient``, ``KafkaConsumer``, ``KafkaProducer``).

    Retries for ``wait_s`` while the brokers do not answer (they may still be starting),
    but not after a refused login or TLS handshake: those do not heal by waiting.

    Args:
        factory: The client class.
        settings: kafka-python connection settings (:attr:`KafkaSettings.python`).
        wait_s: How long to keep trying an unreachable broker.
        **kwargs: Further client arguments (``client_id``, ...).

    Raises:
        KafkaConnectError: no connection; the message says why when kafka-python did.
    """
    defaults = getattr(factory, "DEFAULT_CONFIG", {})
    if "bootstrap_timeout_ms" in defaults:
        kwargs.setdefault("bootstrap_timeout_ms", _ATTEMPT_MS)
    where = settings.get("bootstrap_servers")
    deadline = time.monotonic() + wait_s
    while True:
        with _refusals() as refused:
            try:
                return factory(**settings, **kwargs)
            except Exception as exc:  # kafka-python raises several kinds for "no broker"
                last: Exception = exc
        if refused.reasons:
            msg = f"kafka at {where}: {refused.reasons[-1]}"
            raise KafkaConnectError(msg) from last
        if time.monotonic() > deadline:
            msg = f"kafka at {where} not reachable within {wait_s:.0f} s: {last}"
            raise KafkaConnectError(msg) from last
        time.sleep(1)


def _admin(cfg: KafkaConfig, wait_s: float) -> Any:
    from kafka.admin import KafkaAdminClient

    return connect(
        KafkaAdminClient, kafka_settings(cfg).python, wait_s=wait_s, client_id="flinkwatch-admin"
    )


def topic_spec(
    partitions: int, replication_factor: int | None = None, retention_s: int | None = None
) -> dict[str, Any]:
    """How a topic is created: kafka-python's ``create_topics`` entry.

    What is not given is the brokers' own: a replication factor of -1 asks for their
    ``default.replication.factor`` (KIP-464, Kafka 2.4 and later), and without a
    ``retention.ms`` of its own the topic keeps records as long as ``log.retention.*`` says.
    """
    configs = {} if retention_s is None else {"retention.ms": str(retention_s * 1000)}
    return {
        "num_partitions": partitions,
        "replication_factor": -1 if replication_factor is None else replication_factor,
        "configs": configs,
    }


def create_topics(admin: Any, specs: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Create the topics of ``specs`` (name → :func:`topic_spec`) that are missing.

    Returns:
        The names created (one created meanwhile by someone else is not among them).

    Raises:
        KafkaTopicError: the brokers refused a topic (a replication factor more than the
            cluster can place, a policy); the message names the topic and the reason.
    """
    import kafka.errors as errors

    existing = set(admin.list_topics())
    missing = {t: dict(spec) for t, spec in specs.items() if t not in existing}
    if not missing:
        return []
    try:
        result = admin.create_topics(missing, raise_errors=False)
    except errors.IncompatibleBrokerVersion as exc:
        msg = (
            f"cannot create {', '.join(missing)}: brokers older than Kafka 2.4 do not take "
            f"their default replication factor from a client; set it ({exc})"
        )
        raise KafkaTopicError(msg) from exc
    created, refused = [], []
    for topic in result["topics"]:
        err = errors.for_code(topic["error_code"])
        if err is errors.NoError:
            created.append(topic["name"])
        elif err is not errors.TopicAlreadyExistsError:
            refused.append(f"{topic['name']}: {err.__name__}: {topic.get('error_message') or ''}")
    if refused:
        msg = f"the brokers refused to create {'; '.join(refused)}"
        raise KafkaTopicError(msg)
    if created:
        log.info("kafka: created %s", ", ".join(created))
        try:  # described at once, a new topic may not have its leaders yet
            admin.wait_for_topics(created)
        except errors.KafkaTimeoutError as exc:
            log.warning("kafka: %s not ready yet: %s", ", ".join(created), exc)
    return created


def bus_topic_specs(cfg: KafkaConfig) -> dict[str, dict[str, Any]]:
    """The event bus and dead-letter topics, as flinkwatch creates them.

    Stamped by the broker (``LogAppendTime``): a record's bus time is when the broker
    appended it, one clock for the parse query's executors and the driver's ticks
    (:mod:`streaming.ticks`), and retention counts from arrival.
    """
    spec = topic_spec(cfg.bus_partitions, cfg.bus_replication_factor, cfg.bus_retention_s)
    spec["configs"] = {**spec["configs"], TIMESTAMP_TYPE: "LogAppendTime"}
    return {t: spec for t in (cfg.events_topic, cfg.deadletters_topic) if t is not None}


#: The topic setting that says who stamps a record's timestamp.
TIMESTAMP_TYPE = "message.timestamp.type"


def ensure_bus_topics(cfg: KafkaConfig, wait_s: float = 60) -> list[str]:
    """Create the event bus and dead-letter topics if missing; the names created.

    They get ``kafka.bus_partitions`` partitions and, unless the config sets them, the
    brokers' default replication factor and retention. A bus topic with fewer replicas
    than its ``min.insync.replicas`` (one made by an older flinkwatch) is logged as a
    warning.

    Raises:
        KafkaConnectError: no connection to the brokers.
        KafkaTopicError: the brokers refused a topic; the message names it and the setting.
    """
    admin = _admin(cfg, wait_s)
    try:
        specs = bus_topic_specs(cfg)
        try:
            created = create_topics(admin, specs)
        except KafkaTopicError as exc:
            rf = cfg.bus_replication_factor
            msg = (
                f"{exc}; set kafka.bus_replication_factor (now "
                f"{'null, the brokers default.replication.factor' if rf is None else rf}) "
                "and kafka.bus_retention_s to what the cluster allows"
            )
            raise KafkaTopicError(msg) from exc
        _check_replicas(admin, list(specs), cfg.events_topic)
        return created
    finally:
        admin.close()


def _check_replicas(admin: Any, topics: list[str], events: str | None = None) -> None:
    """Warn about a bus topic with fewer replicas than its ``min.insync.replicas``.

    And about an event bus (``events``) that its producers stamp (one made by an older
    flinkwatch, or by hand): see :func:`bus_topic_specs`.

    Spark's Kafka producer waits for the in-sync replicas (``acks=all``). Brokers before
    Kafka 3.7 refuse every such write to a topic with fewer replicas than that minimum
    (NOT_ENOUGH_REPLICAS): nothing would be detected. Later brokers take the replica count
    as the minimum, so the writes pass, but they stop whenever the one broker holding a
    partition restarts. A bus made by flinkwatch before its replication factor was
    configurable (always one replica) on a cluster with ``min.insync.replicas=2`` is such
    a topic. Without the rights to describe the topics (ACLs) there is nothing to say.
    """
    import kafka.errors as errors
    from kafka.admin import ConfigResource

    try:
        described = {t["name"]: t for t in admin.describe_topics(topics)}
        unready = [t for t in topics if not described.get(t, {}).get("partitions")]
        if unready:
            # Made a moment ago (by another client, when ours found it there already):
            # the brokers' metadata may not hold its partitions yet, on KRaft above all.
            try:
                admin.wait_for_topics(unready)
            except errors.KafkaTimeoutError:
                pass  # said as far as it is known; a topic not yet described is skipped
            described.update({t["name"]: t for t in admin.describe_topics(unready)})
        keys = ["min.insync.replicas", TIMESTAMP_TYPE]
        resources = [ConfigResource("TOPIC", t, keys) for t in topics]
        configs = admin.describe_configs(resources, config_filter="all").get("topic", {})
    except errors.KafkaError as exc:
        log.warning("kafka: cannot check the replicas of %s: %s", ", ".join(topics), exc)
        return
    for t in topics:
        stamped = (configs.get(t, {}).get(TIMESTAMP_TYPE) or {}).get("value")
        if t == events and stamped == "CreateTime":
            log.warning(
                "kafka: topic %s is stamped by its producers (%s=CreateTime): the driver's "
                "ticks then carry the driver's clock, and one ahead of the brokers judges "
                "deadlines that much early. Set it to LogAppendTime (kafka-configs --alter "
                "--entity-type topics --entity-name %s --add-config %s=LogAppendTime); "
                "topics flinkwatch creates have it",
                t,
                TIMESTAMP_TYPE,
                t,
                TIMESTAMP_TYPE,
            )
        parts = described.get(t, {}).get("partitions") or []
        entry = configs.get(t, {}).get("min.insync.replicas") or {}
        if not parts or entry.get("value") is None:
            continue
        replicas = min(len(p["replica_nodes"]) for p in parts)
        min_isr = int(entry["value"])
        if replicas < min_isr:
            log.warning(
                "kafka: topic %s has %d replica(s), fewer than its min.insync.replicas=%d: "
                "brokers before Kafka 3.7 refuse every write of the parse query (nothing is "
                "detected), later ones take them but detection stops whenever that broker "
                "restarts. Add replicas (kafka-reassign-partitions); topics flinkwatch creates "
                "get kafka.bus_replication_factor, or the brokers' default",
                t,
                replicas,
                min_isr,
            )


def partition_count(cfg: KafkaConfig, topics: list[str], wait_s: float = 60) -> int:
    """Partitions of ``topics`` together (a missing topic counts as one)."""
    from kafka import KafkaConsumer

    deadline = time.monotonic() + wait_s
    consumer = connect(
        KafkaConsumer,
        kafka_settings(cfg).python,
        wait_s=wait_s,
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
