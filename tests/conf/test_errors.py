"""The error hierarchy: one base, and errors that carry their context."""

from __future__ import annotations

import pytest

from conf import ConfigError, load_config


def test_errors_share_one_base_and_carry_their_context(tmp_path) -> None:
    from conf import FlinkwatchError
    from conf.kafka_client import KafkaSettingsError
    from sinks.base import AmbiguousDeliveryError, DeliveryError, PermanentDeliveryError
    from sinks.inbound.metrics_server import MetricsEndpointError
    from streaming.topics import KafkaConnectError

    for cls in (ConfigError, KafkaSettingsError, DeliveryError, MetricsEndpointError):
        assert issubclass(cls, FlinkwatchError), cls
    assert issubclass(KafkaConnectError, FlinkwatchError)
    assert issubclass(AmbiguousDeliveryError, DeliveryError)
    assert issubclass(PermanentDeliveryError, DeliveryError)
    f = tmp_path / "c.yaml"
    f.write_text("detectors:\n  checkpoint_failures: {min_expired: zero}\nslack: {chanel: x}\n")
    with pytest.raises(ConfigError) as err:
        load_config(f)
    assert err.value.path == f
    assert set(err.value.fields) == {"detectors.checkpoint_failures.min_expired", "slack.chanel"}
