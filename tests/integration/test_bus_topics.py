"""The event bus and dead-letter topics on a broker with defaults of its own.

One broker of the stack's jars whose ``default.replication.factor`` is 2 (more than its one
node can place) and whose ``log.retention.ms`` is three days. A topic asked for with the
brokers' default replication factor is therefore refused, which shows the default was asked
for; with ``kafka.bus_replication_factor: 1`` it is created. A bus topic whose
``min.insync.replicas`` is above its replica count (made with replication factor 1 on a
cluster with ``min.insync.replicas=2``) is named in a warning. Its records are stamped by
their producers (``CreateTime``, Kafka's default): the bus topics flinkwatch creates are
stamped by the broker, and the driver's ticks carry the broker's time.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from kafka.admin import ConfigResource, KafkaAdminClient

from conf import KafkaConfig
from streaming.topics import KafkaTopicError, ensure_bus_topics
from tests.conftest import KafkaBroker

pytestmark = pytest.mark.kafka

BROKER_RETENTION_MS = 3 * 24 * 3600 * 1000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    b = KafkaBroker(
        tmp_path_factory.mktemp("kafka-defaults"),
        properties={
            "default.replication.factor": "2",
            "log.retention.ms": str(BROKER_RETENTION_MS),
            "log.message.timestamp.type": "CreateTime",
        },
        topics=(),
    )
    b.start()
    yield b
    b.purge()


@pytest.fixture
def admin(broker: KafkaBroker) -> Iterator[Any]:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    yield client
    client.close()


def bus(broker: KafkaBroker, name: str, **kw: Any) -> KafkaConfig:
    return KafkaConfig(
        bootstrap_servers=broker.bootstrap,
        events_topic=f"{name}.events",
        deadletters_topic=f"{name}.deadletters",
        **kw,
    )


def replicas(admin: Any, topic: str) -> set[int]:
    (t,) = admin.describe_topics([topic])
    return {len(p["replica_nodes"]) for p in t["partitions"]}


def topic_config(admin: Any, topic: str, key: str) -> dict[str, Any]:
    found = admin.describe_configs([ConfigResource("TOPIC", topic, [key])], config_filter="all")
    return dict(found["topic"][topic][key])


def test_bus_topics_ask_the_brokers_for_their_default_replication_factor(
    broker: KafkaBroker, admin: Any
) -> None:
    cfg = bus(broker, "default-rf")
    with pytest.raises(KafkaTopicError) as err:
        ensure_bus_topics(cfg, wait_s=30)
    # The broker's default (2) was asked for, and one broker cannot place it.
    text = str(err.value)
    assert "InvalidReplicationFactorError" in text and "2" in text
    assert cfg.events_topic in text and "kafka.bus_replication_factor" in text
    assert cfg.events_topic not in admin.list_topics()


def test_a_configured_replication_factor_is_used_and_retention_stays_the_brokers(
    broker: KafkaBroker, admin: Any
) -> None:
    cfg = bus(broker, "rf1", bus_replication_factor=1, bus_partitions=3)
    assert sorted(ensure_bus_topics(cfg, wait_s=30)) == sorted(
        [cfg.events_topic, cfg.deadletters_topic]
    )
    for topic in (cfg.events_topic, cfg.deadletters_topic):
        assert replicas(admin, topic) == {1}
        (t,) = admin.describe_topics([topic])
        assert len(t["partitions"]) == 3
        retention = topic_config(admin, topic, "retention.ms")
        # No retention of the topic's own: the broker's log.retention.ms applies.
        assert retention["value"] == str(BROKER_RETENTION_MS)
        assert retention["config_source"] != "DYNAMIC_TOPIC_CONFIG"
    assert ensure_bus_topics(cfg, wait_s=30) == []  # there already


def test_a_configured_retention_is_set_on_the_bus_topics(broker: KafkaBroker, admin: Any) -> None:
    cfg = bus(broker, "ret", bus_replication_factor=1, bus_retention_s=7200)
    ensure_bus_topics(cfg, wait_s=30)
    for topic in (cfg.events_topic, cfg.deadletters_topic):
        retention = topic_config(admin, topic, "retention.ms")
        assert retention["value"] == "7200000"
        assert retention["config_source"] == "DYNAMIC_TOPIC_CONFIG"


def test_a_bus_topic_with_fewer_replicas_than_min_insync_replicas_is_named_in_a_warning(
    broker: KafkaBroker, admin: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # A bus made by an older flinkwatch (one replica) on a cluster whose topics want two
    # in-sync replicas: brokers before Kafka 3.7 refuse its writes, later ones (this one is
    # 3.9) take them, but a restart of its one broker stops them.
    cfg = bus(broker, "short", bus_replication_factor=1)
    specs = {"num_partitions": 2, "replication_factor": 1, "configs": {"min.insync.replicas": "2"}}
    admin.create_topics(dict.fromkeys([cfg.events_topic, cfg.deadletters_topic], specs))
    with caplog.at_level(logging.WARNING, logger="streaming.topics"):
        assert ensure_bus_topics(cfg, wait_s=30) == []
    warned = [r.getMessage() for r in caplog.records if r.name == "streaming.topics"]
    stamped = [m for m in warned if "CreateTime" in m]
    warned = [m for m in warned if m not in stamped]
    assert len(warned) == 2
    # Made by hand on brokers stamping with the producers' clocks: the bus is named.
    (stamped_by_producers,) = stamped
    assert cfg.events_topic in stamped_by_producers and "LogAppendTime" in stamped_by_producers
    assert warned[0].startswith(
        f"kafka: topic {cfg.events_topic} has 1 replica(s), fewer than its "
        "min.insync.replicas=2: brokers before Kafka 3.7 refuse every write"
    )
    # Topics with enough replicas for their minimum say nothing.
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="streaming.topics"):
        ensure_bus_topics(bus(broker, "rf1", bus_replication_factor=1), wait_s=30)
    assert not [r for r in caplog.records if r.name == "streaming.topics"]


def test_a_tick_carries_the_brokers_time_whatever_the_drivers_clock(
    broker: KafkaBroker, admin: Any
) -> None:
    # In cluster mode the driver's clock may run ahead of the brokers' and executors':
    # a tick of the driver's time judged every deadline that much early.
    from kafka import KafkaConsumer, TopicPartition

    from conf import AppConfig
    from streaming.bus_paths import _kafka_ticker

    cfg = bus(
        broker,
        "ticks",
        bus_replication_factor=1,
        logs_topic="ticks.logs",
        metrics_topic="ticks.metrics",
    )
    raw = {"num_partitions": 1, "replication_factor": 1, "configs": {}}
    admin.create_topics(dict.fromkeys([cfg.logs_topic, cfg.metrics_topic], raw))
    ensure_bus_topics(cfg, wait_s=30)
    stamped = topic_config(admin, cfg.events_topic, "message.timestamp.type")
    assert stamped["value"] == "LogAppendTime"
    ticker = _kafka_ticker(AppConfig.model_validate({"kafka": cfg.model_dump()}))
    ticker.clock = lambda: time.time() + 600  # the driver's clock, ten minutes ahead
    # The parse query has read the raw topics (empty) to their ends.
    read = json.dumps({cfg.logs_topic: {"0": 0}, cfg.metrics_topic: {"0": 0}})
    progress = SimpleNamespace(sources=[SimpleNamespace(endOffset=read)])
    before = int(time.time() * 1000)
    try:
        ticker.poll(progress)  # takes a tick: the broker's time, then the raw topics' ends
        ticker.poll(progress)  # read past them: sent
    finally:
        ticker.close()
    after = int(time.time() * 1000)
    assert ticker.sent == 1
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, consumer_timeout_ms=3000)
    try:
        parts = [TopicPartition(cfg.events_topic, p) for p in (0, 1)]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        ticks = [json.loads(r.value) | {"bus_ms": r.timestamp} for r in consumer]
    finally:
        consumer.close()
    sent = [t for t in ticks if t.get("shards") != []]  # the broker's mark wakes no shard
    assert sorted(t["p"] for t in sent) == [0, 1]
    for t in sent:
        assert before <= t["event_ms"] <= t["bus_ms"] <= after
