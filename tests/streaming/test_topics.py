"""connect(): wait for a broker that is starting, never for a refused login or TLS handshake."""

from __future__ import annotations

import logging

import pytest
from kafka.errors import KafkaConnectionError, KafkaTimeoutError, SaslAuthenticationFailedError

from streaming import topics
from streaming.topics import KafkaConnectError, connect

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
