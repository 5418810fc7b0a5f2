"""connect(): wait for a broker that is starting, never for a refused login or TLS handshake.

ensure_bus_topics(): what it asks the brokers for, and how it reports a refusal (a real
broker with defaults of its own: tests/integration/test_bus_topics.py).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from kafka.errors import (
    IncompatibleBrokerVersion,
    InvalidReplicationFactorError,
    KafkaConnectionError,
    KafkaTimeoutError,
    SaslAuthenticationFailedError,
    TopicAlreadyExistsError,
    TopicAuthorizationFailedError,
)

from conf import KafkaConfig
from streaming import topics
from streaming.topics import KafkaConnectError, KafkaTopicError, connect, ensure_bus_topics

SETTINGS = {"bootstrap_servers": "b1:9096", "sasl_plain_password": "hunter2"}


class Broker:
    """A kafka-python client class stand-in; fails as scripted, logging as kafka-python does."""

    DEFAULT_CONFIG = {"bootstrap_timeout_ms": 30_000}

    def __init__(self, *failures: BaseException | None) -> None:
        self.failures = list(failures)
        self.calls: list[dict[str, object]] = []

    def __call__(self, **config: object) -> str:
        self.calls.append(config)
        logged = self.failures.pop(0) if self.failures else None
        if logged is None:
            return "client"
        logging.getLogger("kafka.net.manager").error("Connection failed: %s", logged)
        raise KafkaTimeoutError("Unable to bootstrap from b1:9096")


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(topics.time, "sleep", lambda _s: None)


def test_a_refused_login_stops_at_the_first_attempt_and_says_so() -> None:
    broker = Broker(
        SaslAuthenticationFailedError(
            "SaslAuthenticationFailedError: Authentication failed during authentication due "
            "to invalid credentials with SASL mechanism SCRAM-SHA-512"
        )
    )
    with pytest.raises(KafkaConnectError) as err:
        connect(broker, SETTINGS, wait_s=60)
    assert str(err.value) == (
        "kafka at b1:9096: authentication failed: Authentication failed during "
        "authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"
    )
    assert len(broker.calls) == 1
    assert "hunter2" not in str(err.value)


def test_a_failed_tls_handshake_stops_at_the_first_attempt() -> None:
    broker = Broker(
        KafkaConnectionError(
            "Handshake failed: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"
        )
    )
    with pytest.raises(
        KafkaConnectError, match=r"TLS handshake failed: \[SSL: CERTIFICATE_VERIFY_FAILED\]"
    ):
        connect(broker, SETTINGS, wait_s=60)
    assert len(broker.calls) == 1


def test_a_starting_broker_is_waited_for() -> None:
    broker = Broker(KafkaConnectionError("socket disconnected"), None)
    assert connect(broker, SETTINGS, wait_s=60, client_id="x") == "client"
    assert len(broker.calls) == 2
    # Each attempt is short, so that a refusal is reported within seconds.
    assert broker.calls[0] == {**SETTINGS, "client_id": "x", "bootstrap_timeout_ms": 10_000}


def test_an_unreachable_broker_is_named_once_the_wait_is_over() -> None:
    broker = Broker(KafkaConnectionError("socket disconnected"))
    with pytest.raises(KafkaConnectError, match=r"kafka at b1:9096 not reachable within 0 s"):
        connect(broker, SETTINGS, wait_s=0)


class Admin:
    """A KafkaAdminClient stand-in: the topics there are, and how the brokers answer."""

    def __init__(
        self,
        existing: tuple[str, ...] = (),
        codes: dict[str, tuple[int, str]] | None = None,
        create_raises: Exception | None = None,
        describe_raises: Exception | None = None,
    ) -> None:
        self.existing = list(existing)
        self.codes = codes or {}
        self.create_raises = create_raises
        self.describe_raises = describe_raises
        self.asked: list[dict[str, Any]] = []

    def list_topics(self) -> list[str]:
        return list(self.existing)

    def create_topics(self, specs: dict[str, Any], raise_errors: bool = True) -> dict[str, Any]:
        assert raise_errors is False  # each topic's answer is read, not the first raised
        if self.create_raises is not None:
            raise self.create_raises
        self.asked.append(specs)
        answers = [(t, *self.codes.get(t, (0, None))) for t in specs]
        return {"topics": [{"name": t, "error_code": c, "error_message": m} for t, c, m in answers]}

    def wait_for_topics(self, names: list[str]) -> None:
        pass

    def describe_topics(self, names: list[str]) -> list[dict[str, Any]]:
        if self.describe_raises is not None:
            raise self.describe_raises
        return [{"name": t, "partitions": [{"replica_nodes": [1, 2, 3]}]} for t in names]

    def describe_configs(self, resources: list[Any], config_filter: str) -> dict[str, Any]:
        names = [r.name for r in resources]
        return {"topic": {t: {"min.insync.replicas": {"value": "2"}} for t in names}}

    def close(self) -> None:
        pass


def bus(**kw: Any) -> KafkaConfig:
    return KafkaConfig(events_topic="fw.events", deadletters_topic="fw.deadletters", **kw)


def with_admin(monkeypatch: pytest.MonkeyPatch, admin: Admin) -> Admin:
    monkeypatch.setattr(topics, "_admin", lambda _cfg, _wait_s: admin)
    return admin


def test_bus_topics_ask_for_the_brokers_replication_factor_and_retention_unless_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    admin = with_admin(monkeypatch, Admin())
    assert ensure_bus_topics(bus()) == ["fw.events", "fw.deadletters"]
    stamped = {"message.timestamp.type": "LogAppendTime"}
    default = {"num_partitions": 2, "replication_factor": -1, "configs": stamped}
    assert admin.asked == [{"fw.events": default, "fw.deadletters": default}]

    admin = with_admin(monkeypatch, Admin(existing=("fw.events",)))
    ensure_bus_topics(bus(bus_partitions=6, bus_replication_factor=3, bus_retention_s=7200))
    assert admin.asked == [
        {
            "fw.deadletters": {
                "num_partitions": 6,
                "replication_factor": 3,
                "configs": {"retention.ms": "7200000", **stamped},
            }
        }
    ]


def test_a_refused_bus_topic_is_an_error_naming_it_the_reason_and_the_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    refusal = "Unable to replicate the partition 3 time(s): only 1 broker(s) are registered."
    codes = {
        "fw.events": (InvalidReplicationFactorError.errno, refusal),
        "fw.deadletters": (TopicAlreadyExistsError.errno, "exists"),  # made meanwhile: fine
    }
    with_admin(monkeypatch, Admin(codes=codes))
    with pytest.raises(KafkaTopicError) as err:
        ensure_bus_topics(bus())
    assert str(err.value) == (
        f"the brokers refused to create fw.events: InvalidReplicationFactorError: {refusal}; "
        "set kafka.bus_replication_factor (now null, the brokers default.replication.factor) "
        "and kafka.bus_retention_s to what the cluster allows"
    )


def test_brokers_older_than_kafka_2_4_are_told_to_set_the_replication_factor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    old = IncompatibleBrokerVersion("Broker version (2, 3) requires explicit replication_factor")
    with_admin(monkeypatch, Admin(create_raises=old))
    with pytest.raises(KafkaTopicError, match=r"older than Kafka 2\.4 .*kafka\.bus_replication"):
        ensure_bus_topics(bus())


def test_without_the_rights_to_describe_the_bus_the_replica_check_warns_and_goes_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    denied = TopicAuthorizationFailedError("fw.events")
    with_admin(monkeypatch, Admin(existing=("fw.events", "fw.deadletters"), describe_raises=denied))
    with caplog.at_level(logging.WARNING, logger="streaming.topics"):
        assert ensure_bus_topics(bus()) == []
    assert "cannot check the replicas of fw.events, fw.deadletters" in caplog.text
