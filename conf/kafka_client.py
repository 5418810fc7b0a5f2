"""The ``kafka`` section as client settings: Spark's Kafka clients and kafka-python.

One function, :func:`kafka_settings`, builds both from the same fields, so the job and
the command-line tools (``simulate``, ``kafka create-topics``, ``demo``) reach a secured
broker alike. It reads the secrets from the environment at that moment; they are never
in the config file, in the config object, in a log line or in an error message.

The trusted CA certificates come from one PEM file. kafka-python is given the file;
Spark gets its content inline (``ssl.truststore.type=PEM`` with
``ssl.truststore.certificates``, kafka-clients 2.7+), so the executors need no copy of
the file: the options travel with the query to them.

Example:
    >>> from conf import KafkaConfig
    >>> cfg = KafkaConfig(
    ...     security_protocol="SASL_PLAINTEXT",
    ...     sasl_mechanism="SCRAM-SHA-512",
    ...     sasl_username="flinkwatch",
    ... )
    >>> s = kafka_settings(cfg, env={"FLINKWATCH_KAFKA_PASSWORD": "pw"})
    >>> s.spark(reader=False)["kafka.sasl.mechanism"]
    'SCRAM-SHA-512'
    >>> s.python["sasl_plain_username"]
    'flinkwatch'
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from conf import ConfigError, KafkaConfig
from conf.kafka_options import env_ref, spark_source_option

_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


class KafkaSettingsError(ConfigError):
    """The Kafka settings cannot be built: a variable is unset, the CA file unreadable.

    The message names the config field and the variable or file, never a secret.
    """


@dataclass(frozen=True, repr=False)
class KafkaSettings:
    """Client settings built from one ``kafka`` config section, secrets resolved.

    Attributes:
        client: Kafka client settings by their Kafka names (Spark's clients).
        source: Spark Kafka source options (readers only).
        python: kafka-python keyword arguments (admin, consumer, producer).
    """

    client: Mapping[str, str]
    source: Mapping[str, str]
    python: Mapping[str, Any]

    def spark(self, *, reader: bool) -> dict[str, str]:
        """Options for ``DataStreamReader`` (``reader``) or ``DataStreamWriter``."""
        out = {f"kafka.{k}": v for k, v in self.client.items()}
        if reader:
            out.update(self.source)
        return out

    def __repr__(self) -> str:
        # Values may be secrets: a repr lands in tracebacks and debug logs.
        return (
            f"KafkaSettings(client={sorted(self.client)}, source={sorted(self.source)}, "
            f"python={sorted(self.python)})"
        )


def jaas_config(mechanism: str, username: str, password: str) -> str:
    """``sasl.jaas.config`` for a user/password mechanism.

    Kafka reads the values as quoted Java tokens: a backslash or a double quote in
    them must be escaped, or the login module sees another password.
    """

    def quoted(s: str) -> str:
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'

    module = _LOGIN_MODULES[mechanism]
    return f"{module} required username={quoted(username)} password={quoted(password)};"


def _secret(var: str, field: str, env: Mapping[str, str]) -> str:
    # A Kubernetes Secret made with --from-file keeps the file's final newline; no
    # password ends in one.
    value = env.get(var, "").rstrip("\r\n")
    if not value:
        msg = f"{field}: environment variable {var} is empty or unset"
        raise KafkaSettingsError(msg)
    return value


def _ca_pem(cfg: KafkaConfig) -> str:
    path = cfg.ssl_ca_file
    try:
        text = path.read_text(encoding="ascii") if path else ""
    except (OSError, UnicodeDecodeError) as exc:
        msg = f"kafka.ssl_ca_file: cannot read {path}: {getattr(exc, 'strerror', None) or exc}"
        raise KafkaSettingsError(msg) from exc
    if "-----BEGIN CERTIFICATE-----" not in text:
        msg = f"kafka.ssl_ca_file: {path} holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
        raise KafkaSettingsError(msg)
    return text


def kafka_settings(cfg: KafkaConfig, env: Mapping[str, str] | None = None) -> KafkaSettings:
    """Spark's and kafka-python's settings for the brokers of ``cfg``.

    Args:
        cfg: The ``kafka`` config section.
        env: Where secrets are looked up (default: ``os.environ``).

    Raises:
        KafkaSettingsError: a referenced variable is empty or unset, or the CA file is
            unreadable; the message names the field and the variable or file.
    """
    environ = os.environ if env is None else env
    protocol = cfg.security_protocol
    client: dict[str, str] = {"bootstrap.servers": cfg.bootstrap_servers}
    python: dict[str, Any] = {"bootstrap_servers": cfg.bootstrap_servers}
    if protocol != "PLAINTEXT":
        client["security.protocol"] = protocol
        python["security_protocol"] = protocol
    if protocol.startswith("SASL_"):
        # The model validator makes both present with a SASL protocol.
        mechanism, user = cfg.sasl_mechanism or "", cfg.sasl_username or ""
        password = _secret(cfg.sasl_password_env, "kafka.sasl_password_env", environ)
        client["sasl.mechanism"] = mechanism
        client["sasl.jaas.config"] = jaas_config(mechanism, user, password)
        python |= {
            "sasl_mechanism": mechanism,
            "sasl_plain_username": user,
            "sasl_plain_password": password,
        }
    if protocol.endswith("SSL"):
        if cfg.ssl_ca_file is not None:
            client["ssl.truststore.type"] = "PEM"
            client["ssl.truststore.certificates"] = _ca_pem(cfg)
            python["ssl_cafile"] = str(cfg.ssl_ca_file)
        if not cfg.ssl_check_hostname:
            client["ssl.endpoint.identification.algorithm"] = ""
        python["ssl_check_hostname"] = cfg.ssl_check_hostname
    source: dict[str, str] = {}
    for key, value in cfg.options.items():
        var = env_ref(value)
        if var is not None:
            value = _secret(var, f"kafka.options[{key!r}]", environ)
        (source if spark_source_option(key) else client)[key] = value
    return KafkaSettings(
        client=MappingProxyType(client),
        source=MappingProxyType(source),
        python=MappingProxyType(python),
    )
