"""One kafka section, two clients: Spark's options and kafka-python's, secrets from the env."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from conf import KafkaConfig
from conf.kafka_client import KafkaSettingsError, jaas_config, kafka_settings

PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
SECRET = 'pa"ss\\word-7'


def scram(tmp_path: Path, **extra: object) -> KafkaConfig:
    ca = tmp_path / "ca.pem"
    ca.write_text(PEM)
    return KafkaConfig(
        bootstrap_servers="broker-1:9096",
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="flinkwatch",
        sasl_password_env="KAFKA_PW",
        ssl_ca_file=ca,
        **extra,  # type: ignore[arg-type]
    )


def test_plaintext_needs_nothing_but_the_brokers() -> None:
    s = kafka_settings(KafkaConfig(bootstrap_servers="b:9092"), env={})
    assert s.spark(reader=True) == {"kafka.bootstrap.servers": "b:9092"}
    assert dict(s.python) == {"bootstrap_servers": "b:9092"}


def test_sasl_ssl_scram_gives_spark_and_kafka_python_the_same_connection(tmp_path) -> None:
    cfg = scram(tmp_path, options={"minPartitions": "8", "client.dns.lookup": "use_all_dns_ips"})
    s = kafka_settings(cfg, env={"KAFKA_PW": SECRET})
    reader, writer = s.spark(reader=True), s.spark(reader=False)
    assert reader == {
        "kafka.bootstrap.servers": "broker-1:9096",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": jaas_config("SCRAM-SHA-512", "flinkwatch", SECRET),
        # The CA travels inline: executors need no copy of the file.
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.certificates": PEM,
        "kafka.client.dns.lookup": "use_all_dns_ips",
        "minPartitions": "8",
    }
    # Source options are for readers; the sink gets the client settings only.
    assert writer == {k: v for k, v in reader.items() if k != "minPartitions"}
    assert dict(s.python) == {
        "bootstrap_servers": "broker-1:9096",
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "flinkwatch",
        "sasl_plain_password": SECRET,
        "ssl_cafile": str(tmp_path / "ca.pem"),
        "ssl_check_hostname": True,
    }


def test_the_jaas_password_is_quoted_so_kafka_reads_it_back_unchanged() -> None:
    assert jaas_config("SCRAM-SHA-256", 'u"1', SECRET) == (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="u\\"1" password="pa\\"ss\\\\word-7";'
    )
    assert jaas_config("PLAIN", "u", "p").startswith(
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
    )


def test_no_hostname_check_turns_off_endpoint_identification_in_both_clients(tmp_path) -> None:
    s = kafka_settings(scram(tmp_path, ssl_check_hostname=False), env={"KAFKA_PW": "x"})
    assert s.client["ssl.endpoint.identification.algorithm"] == ""
    assert s.python["ssl_check_hostname"] is False


def test_a_missing_password_variable_is_named_and_nothing_is_built(tmp_path) -> None:
    with pytest.raises(KafkaSettingsError, match=r"kafka\.sasl_password_env: .*KAFKA_PW"):
        kafka_settings(scram(tmp_path), env={})
    with pytest.raises(KafkaSettingsError, match="KAFKA_PW is empty or unset"):
        kafka_settings(scram(tmp_path), env={"KAFKA_PW": "\n"})


def test_an_option_from_the_environment_is_read_and_its_missing_variable_named(tmp_path) -> None:
    cfg = scram(tmp_path, options={"ssl.keystore.password": "${KS_PW}", "client.id": "${POD}"})
    s = kafka_settings(cfg, env={"KAFKA_PW": "x", "KS_PW": "ks-secret", "POD": "fw-0"})
    assert s.client["ssl.keystore.password"] == "ks-secret"
    assert s.client["client.id"] == "fw-0"
    with pytest.raises(KafkaSettingsError) as err:
        kafka_settings(cfg, env={"KAFKA_PW": "x", "POD": "fw-0"})
    assert str(err.value) == (
        "kafka.options['ssl.keystore.password']: environment variable KS_PW is empty or unset"
    )


def test_a_kubernetes_secret_file_newline_is_not_part_of_the_password(tmp_path) -> None:
    s = kafka_settings(scram(tmp_path), env={"KAFKA_PW": "s3cret\n"})
    assert s.python["sasl_plain_password"] == "s3cret"


def test_an_unreadable_or_non_pem_ca_file_is_named(tmp_path) -> None:
    cfg = scram(tmp_path)
    missing = cfg.model_copy(update={"ssl_ca_file": tmp_path / "nope.pem"})
    with pytest.raises(KafkaSettingsError, match=r"kafka\.ssl_ca_file: cannot read .*nope\.pem"):
        kafka_settings(missing, env={"KAFKA_PW": "x"})
    jks = tmp_path / "truststore.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed binary")
    with pytest.raises(KafkaSettingsError, match=r"kafka\.ssl_ca_file: .*truststore\.jks"):
        kafka_settings(cfg.model_copy(update={"ssl_ca_file": jks}), env={"KAFKA_PW": "x"})


def test_secrets_stay_out_of_the_settings_repr_and_the_config(tmp_path, caplog) -> None:
    cfg = scram(tmp_path)
    s = kafka_settings(cfg, env={"KAFKA_PW": SECRET})
    caplog.set_level(logging.DEBUG)
    logging.getLogger("flinkwatch").debug("settings %s %r", s, s)
    assert SECRET not in repr(s) and SECRET not in caplog.text
    assert "KafkaSettings(client=[" in repr(s)
    assert SECRET not in repr(cfg) and SECRET not in cfg.model_dump_json()
