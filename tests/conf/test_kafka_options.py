"""kafka.options and the security fields: every refused key is named, with what to use."""

from __future__ import annotations

from pathlib import Path

import pytest

from conf import ConfigError, KafkaConfig, load_config


def load_kafka(tmp_path: Path, name: str, section: str) -> KafkaConfig:
    f = tmp_path / f"{name}.yaml"
    f.write_text(f"kafka:\n{section}")
    return load_config(f).kafka


def refused(tmp_path: Path, name: str, section: str) -> str:
    with pytest.raises(ConfigError) as err:
        load_kafka(tmp_path, name, section)
    return str(err.value)


def test_an_unknown_option_is_named_with_the_closest_kafka_setting(tmp_path) -> None:
    msg = refused(tmp_path, "typo_option", "  options: {client.dns.lookpu: use_all_dns_ips}\n")
    assert "typo_option.yaml" in msg and "kafka.options" in msg
    assert "unknown option 'client.dns.lookpu'" in msg
    assert "did you mean 'client.dns.lookup'" in msg


def test_a_kafka_prefixed_option_is_refused_with_the_name_to_write(tmp_path) -> None:
    msg = refused(tmp_path, "prefixed_option", "  options: {kafka.client.id: flinkwatch-eu}\n")
    assert "'kafka.client.id': write Kafka settings without the 'kafka.' prefix ('client.id')" in (
        msg
    )


def test_the_old_prefixed_security_option_points_to_the_security_field(tmp_path) -> None:
    msg = refused(tmp_path, "old_ssl_option", "  options: {kafka.security.protocol: SSL}\n")
    assert "without the 'kafka.' prefix" in msg
    assert "use kafka.security_protocol" in msg


@pytest.mark.parametrize(
    ("key", "instead"),
    [
        ("bootstrap.servers", "use kafka.bootstrap_servers"),
        ("sasl.jaas.config", "use kafka.sasl_username and kafka.sasl_password_env"),
        ("ssl.truststore.location", "use kafka.ssl_ca_file"),
        ("ssl.endpoint.identification.algorithm", "use kafka.ssl_check_hostname"),
        ("group.id", "use groupIdPrefix"),
        ("value.deserializer", "leave it out: Spark reads bytes"),
        ("subscribe", "use kafka.logs_topic"),
        ("startingOffsets", "use kafka.starting_offsets"),
        ("STARTINGTIMESTAMP", "use kafka.starting_offsets"),
        ("maxOffsetsPerTrigger", "use kafka.max_offsets_per_trigger"),
    ],
)
def test_options_flinkwatch_sets_itself_are_refused_with_the_field_to_use(
    tmp_path, key: str, instead: str
) -> None:
    msg = refused(tmp_path, "managed_option", f'  options: {{{key}: "x"}}\n')
    assert f"'{key}' is set by flinkwatch: {instead}" in msg


def test_every_refused_option_is_named_at_once(tmp_path) -> None:
    msg = refused(tmp_path, "two_bad_options", "  options: {bogus.one: a, group.id: b}\n")
    assert "'bogus.one'" in msg and "'group.id'" in msg


def test_a_secret_option_written_into_the_file_is_refused_without_echoing_it(tmp_path) -> None:
    msg = refused(tmp_path, "inline_secret", "  options: {ssl.keystore.password: hunter2}\n")
    assert "'ssl.keystore.password' is a secret: give it as ${ENV_VAR}" in msg
    assert "hunter2" not in msg


def test_kafka_settings_and_spark_source_options_are_accepted_in_spark_spelling(tmp_path) -> None:
    cfg = load_kafka(
        tmp_path,
        "good_options",
        "  options:\n"
        "    minpartitions: '16'\n"
        "    client.dns.lookup: use_all_dns_ips\n"
        "    ssl.keystore.password: ${KS_PASSWORD}\n",
    )
    assert cfg.options == {
        "minPartitions": "16",
        "client.dns.lookup": "use_all_dns_ips",
        "ssl.keystore.password": "${KS_PASSWORD}",
    }


def test_a_spark_option_given_twice_in_two_spellings_is_refused(tmp_path) -> None:
    msg = refused(tmp_path, "twice_option", "  options: {minPartitions: '4', minpartitions: '8'}\n")
    assert "'minpartitions' is given twice" in msg


def test_sasl_needs_a_mechanism_and_a_user(tmp_path) -> None:
    msg = refused(tmp_path, "sasl_no_user", "  security_protocol: SASL_SSL\n")
    assert "security_protocol SASL_SSL needs kafka.sasl_mechanism and kafka.sasl_username" in msg


def test_sasl_settings_without_a_sasl_protocol_are_refused_not_ignored(tmp_path) -> None:
    msg = refused(
        tmp_path, "user_without_sasl", "  security_protocol: SSL\n  sasl_username: flinkwatch\n"
    )
    assert "kafka.sasl_username set, but security_protocol SSL does not use SASL" in msg


def test_tls_settings_without_a_tls_protocol_are_refused_not_ignored(tmp_path) -> None:
    msg = refused(tmp_path, "ca_without_tls", "  ssl_ca_file: /etc/kafka/ca.pem\n")
    assert "security_protocol PLAINTEXT does not use TLS" in msg


def test_unknown_protocol_and_mechanism_are_named_with_the_choices(tmp_path) -> None:
    msg = refused(tmp_path, "bad_protocol", "  security_protocol: TLS\n")
    assert "kafka.security_protocol: Input should be 'PLAINTEXT', 'SSL', 'SASL_PLAINTEXT'" in msg
    msg = refused(
        tmp_path,
        "bad_mechanism",
        "  security_protocol: SASL_SSL\n  sasl_mechanism: GSSAPI\n  sasl_username: u\n",
    )
    assert "kafka.sasl_mechanism: Input should be 'PLAIN', 'SCRAM-SHA-256' or 'SCRAM-SHA-512'" in (
        msg
    )


def test_the_password_variable_must_be_a_variable_name(tmp_path) -> None:
    msg = refused(
        tmp_path,
        "password_in_env_field",
        "  security_protocol: SASL_SSL\n  sasl_mechanism: PLAIN\n  sasl_username: u\n"
        "  sasl_password_env: 'p@ss w0rd'\n",
    )
    assert "kafka.sasl_password_env: String should match pattern" in msg
