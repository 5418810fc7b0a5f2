"""Config loading: defaults, per-detector sections, errors that name the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from conf import DEFAULT_CONFIG, ConfigError, load_config
from detectors import REGISTRY


def test_packaged_default_is_valid_and_lists_every_detector() -> None:
    cfg = load_config(DEFAULT_CONFIG)
    assert set(cfg.detector_params()) == set(REGISTRY)
    assert cfg.kafka.logs_topic == "flink.logs"


def test_default_yaml_states_every_default_of_the_models(tmp_path: Path) -> None:
    # The YAML documents the defaults: an empty file must load to the very same config.
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert load_config(empty) == load_config(DEFAULT_CONFIG)


def test_unknown_parameter_names_file_and_field(tmp_path: Path) -> None:
    f = tmp_path / "typo.yaml"
    f.write_text("detectors:\n  checkpoint_failures:\n    min_expird: 4\n")
    with pytest.raises(ConfigError, match=r"typo\.yaml.*detectors.*min_expird"):
        load_config(f)


def test_out_of_range_threshold_is_rejected(tmp_path: Path) -> None:
    f = tmp_path / "zero_window.yaml"
    f.write_text("detectors:\n  checkpoint_failures:\n    window_s: 0\n")
    with pytest.raises(ConfigError, match="window_s"):
        load_config(f)


def test_unknown_detector_is_rejected(tmp_path: Path) -> None:
    f = tmp_path / "unknown_detector.yaml"
    f.write_text("detectors:\n  heap_magic: {}\n")
    with pytest.raises(ConfigError, match="heap_magic"):
        load_config(f)


def test_unknown_top_level_section_is_rejected(tmp_path: Path) -> None:
    f = tmp_path / "extra_section.yaml"
    f.write_text("kafkaa:\n  bootstrap_servers: x\n")
    with pytest.raises(ConfigError, match="kafkaa"):
        load_config(f)


def test_broken_yaml_and_missing_file_are_config_errors(tmp_path: Path) -> None:
    f = tmp_path / "broken.yaml"
    f.write_text("kafka: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(f)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "nope.yaml")


def test_config_is_frozen() -> None:
    cfg = load_config(DEFAULT_CONFIG)
    with pytest.raises(Exception, match="frozen"):
        cfg.kafka.logs_topic = "x"  # type: ignore[misc]


def test_bus_topics_are_named_after_the_cluster_unless_set() -> None:
    from conf import AppConfig, KafkaConfig

    assert AppConfig().kafka.events_topic == "flinkwatch.default.events"
    cfg = AppConfig.model_validate({"cluster": "prod-eu"})
    assert (cfg.kafka.events_topic, cfg.kafka.deadletters_topic) == (
        "flinkwatch.prod-eu.events",
        "flinkwatch.prod-eu.deadletters",
    )
    mine = AppConfig(cluster="x", kafka=KafkaConfig(events_topic="bus", logs_topic="l"))
    assert (mine.kafka.events_topic, mine.kafka.deadletters_topic) == (
        "bus",
        "flinkwatch.x.deadletters",
    )


def test_tls_certificate_without_its_key_names_the_missing_field(tmp_path: Path) -> None:
    f = tmp_path / "cert_without_key.yaml"
    f.write_text("metrics: {tls_cert_file: /etc/flinkwatch-tls/tls.crt}\n")
    with pytest.raises(ConfigError, match=r"cert_without_key\.yaml.*metrics\.tls_key_file"):
        load_config(f)


def test_tls_key_without_its_certificate_names_the_missing_field(tmp_path: Path) -> None:
    f = tmp_path / "key_without_cert.yaml"
    f.write_text("metrics: {tls_key_file: /etc/flinkwatch-tls/tls.key}\n")
    with pytest.raises(ConfigError, match=r"key_without_cert\.yaml.*metrics\.tls_cert_file"):
        load_config(f)


def test_client_ca_without_a_server_certificate_is_rejected(tmp_path: Path) -> None:
    f = tmp_path / "client_ca_without_tls.yaml"
    f.write_text("metrics: {tls_client_ca_file: /etc/flinkwatch-tls/ca.crt}\n")
    with pytest.raises(
        ConfigError, match=r"metrics\.tls_client_ca_file needs metrics\.tls_cert_file"
    ):
        load_config(f)


def test_basic_auth_username_cannot_hold_a_colon(tmp_path: Path) -> None:
    # The user-id of basic auth ends at the first colon (RFC 7617).
    f = tmp_path / "username_with_colon.yaml"
    f.write_text("metrics: {basic_auth_username: 'prom:etheus'}\n")
    with pytest.raises(ConfigError, match=r"metrics\.basic_auth_username: String should match"):
        load_config(f)


def test_tls_and_basic_auth_settings_load(tmp_path: Path) -> None:
    f = tmp_path / "tls_and_auth.yaml"
    f.write_text(
        "metrics:\n"
        "  tls_cert_file: /etc/flinkwatch-tls/tls.crt\n"
        "  tls_key_file: /etc/flinkwatch-tls/tls.key\n"
        "  basic_auth_username: prometheus\n"
        "  basic_auth_password_env: PROM_PASSWORD\n"
    )
    m = load_config(f).metrics
    assert m.tls and m.tls_key_file == Path("/etc/flinkwatch-tls/tls.key")
    assert (m.basic_auth_username, m.basic_auth_password_env) == ("prometheus", "PROM_PASSWORD")
    # Off unless asked for: the defaults serve plain HTTP without credentials.
    default = load_config(None).metrics
    assert not default.tls and default.basic_auth_username is None


def test_routes_continue_to_each_later_match_once_and_the_default_takes_only_the_rest() -> None:
    from conf import SlackConfig
    from detectors import Alert, AlertStatus, Severity

    cfg = SlackConfig.model_validate(
        {
            "routes": [
                {"channel": "#team", "match": {"job_name": "pay-.*"}, "continue": True},
                {"channel": "#team", "severities": ["critical"], "continue": True},
                {"channel": "#pager", "severities": ["critical"]},
                {"channel": "#late"},
            ]
        }
    )
    assert cfg.max_channels == 3

    def taken(job_name: str | None, severity: Severity, config: SlackConfig = cfg) -> list[str]:
        a = Alert(
            alert_id="a",
            detector="checkpoint_creep",
            entity="job:x",
            status=AlertStatus.FIRING,
            severity=severity,
            event_time_ms=0,
            summary="s",
            job_name=job_name,
        )
        return [ch for _, ch in config.routes_for(a, "prod")]

    assert taken("pay-etl", Severity.CRITICAL) == ["#team", "#pager"]  # #team once
    assert taken("pay-etl", Severity.WARNING) == ["#team", "#late"]
    assert taken("orders", Severity.WARNING) == ["#late"]
    # Nothing matched at all: the default channel.
    only_the_team = cfg.model_copy(update={"routes": cfg.routes[:1]})
    assert taken(None, Severity.WARNING, only_the_team) == ["#flink-alerts"]
