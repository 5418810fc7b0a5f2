"""Which ``kafka.options`` keys flinkwatch accepts, and why it refuses the others.

``kafka.options`` holds two kinds of keys, told apart by name:

* Kafka client settings, by their Kafka names (``client.dns.lookup``,
  ``ssl.keystore.location``): flinkwatch hands them to Spark's Kafka clients as
  ``kafka.<name>``. The ``kafka.`` prefix itself is refused, so there is one spelling.
* Spark Kafka source options (``minPartitions``, ``groupIdPrefix``): they go to the
  readers only. Spark matches them case-insensitively; so does flinkwatch.

Anything else is an error naming the key: Spark would silently ignore it. So is a key that
flinkwatch sets itself (the error says which ``kafka.*`` field to use), and a secret given
in the file instead of as ``${ENV_VAR}``.
"""

from __future__ import annotations

import difflib
import re

#: Consumer, producer and admin settings of kafka-clients 3.9.2 (the client of the Spark
#: 4.2.0 connector), without the ``internal.*`` ones. tests/integration/test_kafka_security.py
#: compares this list with the kafka-clients jar Spark loads.
KAFKA_CLIENT_CONFIGS = frozenset(
    """
    acks allow.auto.create.topics auto.commit.interval.ms auto.include.jmx.reporter
    auto.offset.reset batch.size bootstrap.controllers bootstrap.servers buffer.memory
    check.crcs client.dns.lookup client.id client.rack compression.gzip.level
    compression.lz4.level compression.type compression.zstd.level connections.max.idle.ms
    default.api.timeout.ms delivery.timeout.ms enable.auto.commit enable.idempotence
    enable.metrics.push exclude.internal.topics fetch.max.bytes fetch.max.wait.ms
    fetch.min.bytes group.id group.instance.id group.protocol group.remote.assignor
    heartbeat.interval.ms interceptor.classes isolation.level key.deserializer key.serializer
    linger.ms max.block.ms max.in.flight.requests.per.connection max.partition.fetch.bytes
    max.poll.interval.ms max.poll.records max.request.size metadata.max.age.ms
    metadata.max.idle.ms metadata.recovery.strategy metric.reporters metrics.num.samples
    metrics.recording.level metrics.sample.window.ms partition.assignment.strategy
    partitioner.adaptive.partitioning.enable partitioner.availability.timeout.ms
    partitioner.class partitioner.ignore.keys receive.buffer.bytes reconnect.backoff.max.ms
    reconnect.backoff.ms request.timeout.ms retries retry.backoff.max.ms retry.backoff.ms
    sasl.client.callback.handler.class sasl.jaas.config sasl.kerberos.kinit.cmd
    sasl.kerberos.min.time.before.relogin sasl.kerberos.service.name
    sasl.kerberos.ticket.renew.jitter sasl.kerberos.ticket.renew.window.factor
    sasl.login.callback.handler.class sasl.login.class sasl.login.connect.timeout.ms
    sasl.login.read.timeout.ms sasl.login.refresh.buffer.seconds
    sasl.login.refresh.min.period.seconds sasl.login.refresh.window.factor
    sasl.login.refresh.window.jitter sasl.login.retry.backoff.max.ms
    sasl.login.retry.backoff.ms sasl.mechanism sasl.oauthbearer.clock.skew.seconds
    sasl.oauthbearer.expected.audience sasl.oauthbearer.expected.issuer
    sasl.oauthbearer.header.urlencode sasl.oauthbearer.jwks.endpoint.refresh.ms
    sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms
    sasl.oauthbearer.jwks.endpoint.retry.backoff.ms sasl.oauthbearer.jwks.endpoint.url
    sasl.oauthbearer.scope.claim.name sasl.oauthbearer.sub.claim.name
    sasl.oauthbearer.token.endpoint.url security.protocol security.providers send.buffer.bytes
    session.timeout.ms socket.connection.setup.timeout.max.ms
    socket.connection.setup.timeout.ms ssl.cipher.suites ssl.enabled.protocols
    ssl.endpoint.identification.algorithm ssl.engine.factory.class ssl.key.password
    ssl.keymanager.algorithm ssl.keystore.certificate.chain ssl.keystore.key
    ssl.keystore.location ssl.keystore.password ssl.keystore.type ssl.protocol ssl.provider
    ssl.secure.random.implementation ssl.trustmanager.algorithm ssl.truststore.certificates
    ssl.truststore.location ssl.truststore.password ssl.truststore.type transaction.timeout.ms
    transactional.id value.deserializer value.serializer
    """.split()
)

#: Spark Kafka source options flinkwatch leaves to the user (Spark 4.2.0), by lower-case name.
SPARK_SOURCE_OPTIONS = {
    name.lower(): name
    for name in (
        "minPartitions",
        "maxTriggerDelay",
        "minOffsetsPerTrigger",
        "maxRecordsPerPartition",
        "fetchOffset.numRetries",
        "fetchOffset.retryIntervalMs",
        "kafkaConsumer.pollTimeoutMs",
        "groupIdPrefix",
    )
}

_TRUST = "kafka.ssl_ca_file (one PEM file serves Spark and the command-line tools)"
_TOPICS = "kafka.logs_topic, kafka.metrics_topic, kafka.events_topic, kafka.deadletters_topic"

#: Settings flinkwatch makes itself, by Kafka name or lower-case Spark option name, and
#: what to do instead.
MANAGED = {
    "bootstrap.servers": "use kafka.bootstrap_servers",
    "bootstrap.controllers": "use kafka.bootstrap_servers (flinkwatch talks to brokers)",
    "security.protocol": "use kafka.security_protocol",
    "sasl.mechanism": "use kafka.sasl_mechanism",
    "sasl.jaas.config": "use kafka.sasl_username and kafka.sasl_password_env",
    "ssl.truststore.location": f"use {_TRUST}",
    "ssl.truststore.type": f"use {_TRUST}",
    "ssl.truststore.certificates": f"use {_TRUST}",
    "ssl.truststore.password": f"use {_TRUST}",
    "ssl.endpoint.identification.algorithm": "use kafka.ssl_check_hostname",
    # Three queries read at once; one shared consumer group would make them steal
    # each other's partitions. A prefix satisfies prefixed ACLs.
    "group.id": "use groupIdPrefix (each query needs a consumer group of its own)",
    "auto.offset.reset": "use kafka.starting_offsets",
    "enable.auto.commit": "leave it out: Spark keeps the offsets in its checkpoints",
    "key.deserializer": "leave it out: Spark reads bytes",
    "value.deserializer": "leave it out: Spark reads bytes",
    "key.serializer": "leave it out: Spark writes bytes",
    "value.serializer": "leave it out: Spark writes bytes",
    "interceptor.classes": "leave it out: Spark refuses it",
    "subscribe": f"use {_TOPICS}",
    "subscribepattern": f"use {_TOPICS}",
    "assign": f"use {_TOPICS}",
    "topic": f"use {_TOPICS}",
    # Any of these would take precedence over the offsets flinkwatch starts from.
    "startingoffsets": "use kafka.starting_offsets",
    "startingtimestamp": "use kafka.starting_offsets",
    "startingoffsetsbytimestamp": "use kafka.starting_offsets",
    "startingoffsetsbytimestampstrategy": "use kafka.starting_offsets",
    "endingoffsets": "leave it out: a stream has no end",
    "endingtimestamp": "leave it out: a stream has no end",
    "endingoffsetsbytimestamp": "leave it out: a stream has no end",
    "failondataloss": "use kafka.fail_on_data_loss",
    "maxoffsetspertrigger": "use kafka.max_offsets_per_trigger",
    "includeheaders": "leave it out: flinkwatch reads no headers",
}

#: Kafka settings that hold a secret: they must come from the environment.
SECRET_CONFIGS = frozenset({"ssl.key.password", "ssl.keystore.password", "ssl.keystore.key"})

#: A value that is a reference to an environment variable, ``${NAME}``.
ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def env_ref(value: str) -> str | None:
    """The variable name if ``value`` is exactly ``${NAME}``, else ``None``."""
    m = ENV_REF.fullmatch(value)
    return m.group(1) if m else None


def _problem(key: str, value: str) -> str | None:
    lower = key.lower()
    if lower.startswith("kafka."):
        bare = key[len("kafka.") :]
        why = _problem(bare, value)
        return f"{key!r}: write Kafka settings without the 'kafka.' prefix ({bare!r})" + (
            f"; {why}" if why else ""
        )
    if key in MANAGED or lower in MANAGED:
        return f"{key!r} is set by flinkwatch: {MANAGED.get(key) or MANAGED[lower]}"
    if key in KAFKA_CLIENT_CONFIGS:
        if key in SECRET_CONFIGS and env_ref(value) is None:
            return f"{key!r} is a secret: give it as ${{ENV_VAR}}, not in the config file"
        return None
    if lower in SPARK_SOURCE_OPTIONS:
        return None
    close = difflib.get_close_matches(
        key, [*KAFKA_CLIENT_CONFIGS, *SPARK_SOURCE_OPTIONS.values()], n=1
    )
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return (
        f"unknown option {key!r}{hint}: neither a Kafka client setting nor a Spark Kafka "
        "source option"
    )


def check_options(options: dict[str, str]) -> dict[str, str]:
    """``options`` with Spark option names in Spark's spelling.

    Raises:
        ValueError: names every refused key and why (never a value).
    """
    problems = [p for k, v in options.items() if (p := _problem(k, v))]
    if problems:
        raise ValueError("; ".join(problems))
    out: dict[str, str] = {}
    for k, v in options.items():
        name = SPARK_SOURCE_OPTIONS.get(k.lower(), k) if k not in KAFKA_CLIENT_CONFIGS else k
        if name in out:
            msg = f"{k!r} is given twice (Spark option names ignore case)"
            raise ValueError(msg)
        out[name] = v
    return out


def spark_source_option(key: str) -> bool:
    """True for a Spark Kafka source option (a reader option, not a Kafka client setting)."""
    return key.lower() in SPARK_SOURCE_OPTIONS
