"""flinkwatch configuration: frozen pydantic models loaded from YAML.

The detector section is derived from :data:`detectors.REGISTRY`: each detector's
parameters live in its own module, and an unknown detector name or parameter is
an error that names the field.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from conf.errors import ConfigError as ConfigError
from conf.errors import FlinkwatchError as FlinkwatchError
from conf.kafka_options import check_options, env_ref
from conf.silences import Matchers, Silence
from detectors import REGISTRY, Alert, AlertStatus, DetectorParams, Severity
from detectors.correlation import CorrelationParams

DEFAULT_CONFIG = Path(__file__).with_name("flinkwatch.yaml")

#: The most a config file may hold (1 MiB; the shipped one is a few KB). The file is read
#: on the driver at start and at every reload poll: a path that points at ``/dev/zero``, a
#: log file or a FIFO must not be read whole, nor block the driver's loop.
MAX_CONFIG_BYTES = 1 << 20


#: Field metadata of a setting that takes effect only when flinkwatch restarts (it changes
#: where the job reads from, where its checkpoints are, the shape of its state, or a client
#: built once); every other setting applies on a live reload. A section marked so is
#: restart-only as a whole. ``conf.reload`` reads the marks.
RESTART: dict[str, Any] = {"reload": "restart"}


def restart_only(field: Any) -> bool:
    """Whether a pydantic field carries the :data:`RESTART` mark."""
    extra = field.json_schema_extra
    return isinstance(extra, dict) and extra.get("reload") == "restart"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"


class KafkaConfig(_Frozen):
    """Where the Flink records come from, and how to reach the brokers.

    The connection settings (``bootstrap_servers`` to ``ssl_check_hostname``) serve
    Spark's Kafka clients and the command-line tools alike; ``conf.kafka_client`` turns
    them into each one's settings. Secrets are never in the file: the SASL password and
    any ``${ENV_VAR}`` option value are read from the environment when a client is built.
    """

    bootstrap_servers: str = Field(
        default="127.0.0.1:9092",
        description="Kafka bootstrap servers (host:port, comma-separated).",
    )
    security_protocol: SecurityProtocol = Field(
        default="PLAINTEXT",
        description="PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (docs/kafka-security.md).",
    )
    sasl_mechanism: SaslMechanism | None = Field(
        default=None, description="SASL_*: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"
    )
    sasl_username: str | None = Field(default=None, min_length=1, description="SASL_*: the user")
    sasl_password_env: str = Field(
        default="FLINKWATCH_KAFKA_PASSWORD",
        pattern=_ENV_NAME,
        description="SASL_*: the environment variable holding the password",
    )
    ssl_ca_file: Path | None = Field(
        default=None,
        description=(
            "SSL, SASL_SSL: PEM file of the CA certificates the brokers' certificates are "
            "checked against; null = the JVM's and Python's default trust"
        ),
    )
    ssl_check_hostname: bool = Field(
        default=True, description="SSL, SASL_SSL: the broker certificate must name its host"
    )
    logs_topic: str = Field(default="flink.logs", description="Topic of Flink log records.")
    metrics_topic: str = Field(
        default="flink.metrics", description="Topic of Flink metric records."
    )
    starting_offsets: Literal["earliest", "latest"] = Field(
        default="earliest",
        description="Where a new query starts: earliest or latest (a checkpoint wins over both).",
    )
    max_offsets_per_trigger: int | None = Field(
        default=200_000,
        gt=0,
        description="Records per micro-batch at most, per topic; null = no limit.",
    )
    fail_on_data_loss: bool = Field(
        default=True,
        description=(
            "Stop when offsets vanished (retention, a deleted topic) instead of skipping them."
        ),
    )
    options: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "Kafka client settings by their Kafka names (no `kafka.` prefix) for Spark's "
            "clients, and Spark Kafka source options (minPartitions, ...); a value "
            "`${NAME}` is read from the environment variable NAME"
        ),
    )
    events_topic: str | None = Field(
        default=None,
        description=(
            "Parsed events keyed by entity: the parse query writes, the detectors read; "
            "null = flinkwatch.<cluster>.events."
        ),
    )
    deadletters_topic: str | None = Field(
        default=None,
        description=(
            "Malformed records with their Kafka coordinates and the reason; "
            "null = flinkwatch.<cluster>.deadletters."
        ),
    )
    bus_partitions: int = Field(
        default=2, gt=0, description="Partitions of both topics above when flinkwatch creates them."
    )
    bus_replication_factor: int | None = Field(
        default=None,
        ge=1,
        le=32767,
        description=(
            "Replicas of both topics above when flinkwatch creates them; null = the brokers' "
            "default.replication.factor (Kafka 2.4 or later; older brokers need a number). At "
            "least the topics' min.insync.replicas: brokers before Kafka 3.7 refuse writes to "
            "a topic with fewer replicas."
        ),
    )
    bus_retention_s: int | None = Field(
        default=None,
        gt=0,
        description=(
            "How long the brokers keep the records of both topics above, set on them when "
            "flinkwatch creates them; null = the brokers' log.retention.*. A detect query with "
            "a new checkpoint rebuilds its state from what the event bus still holds."
        ),
    )

    @field_validator("options")
    @classmethod
    def _known_options(cls, v: dict[str, str]) -> dict[str, str]:
        # Spark passes on only `kafka.`-prefixed keys and its own options, and ignores
        # any other key without a word: refuse it here, by name.
        return check_options(v)

    @model_validator(mode="after")
    def _security_fits_protocol(self) -> KafkaConfig:
        sasl = self.security_protocol.startswith("SASL_")
        ssl = self.security_protocol.endswith("SSL")
        if sasl:
            missing = [
                f"kafka.{f}"
                for f in ("sasl_mechanism", "sasl_username")
                if getattr(self, f) is None
            ]
            if missing:
                msg = f"security_protocol {self.security_protocol} needs {' and '.join(missing)}"
                raise ValueError(msg)
        else:
            given = [f"kafka.{f}" for f in ("sasl_mechanism", "sasl_username") if getattr(self, f)]
            if given:
                msg = (
                    f"{' and '.join(given)} set, but security_protocol {self.security_protocol} "
                    "does not use SASL (SASL_SSL or SASL_PLAINTEXT does)"
                )
                raise ValueError(msg)
        if not ssl and (self.ssl_ca_file is not None or not self.ssl_check_hostname):
            msg = (
                f"kafka.ssl_ca_file / kafka.ssl_check_hostname set, but security_protocol "
                f"{self.security_protocol} does not use TLS (SSL or SASL_SSL does)"
            )
            raise ValueError(msg)
        return self


class SparkConfig(_Frozen):
    """How the Spark job runs."""

    master: str = Field(
        default="local[2]",
        description=(
            "Spark master URL: local[N], or spark://HOST:7077 for a standalone cluster "
            "(docs/deployment.md)."
        ),
        json_schema_extra=RESTART,
    )
    shuffle_partitions: int = Field(
        default=2,
        gt=0,
        description=(
            "Partitions of detector state; at least the cores of the cluster; fixed once a "
            "checkpoint exists."
        ),
        json_schema_extra=RESTART,
    )
    trigger_interval_s: float = Field(
        default=0.0,
        ge=0,
        description="Detector micro-batch interval; 0 = the next batch as soon as one ends.",
    )
    parse_mode: Literal["realtime", "microbatch"] = Field(
        default="realtime",
        description=(
            "realtime: the parse query runs in Spark's real-time mode, records flow through "
            "as they arrive (one task slot per source partition); microbatch: it runs on the "
            "detector trigger."
        ),
        json_schema_extra=RESTART,
    )
    realtime_batch_s: float = Field(
        default=5.0,
        ge=5,
        description="Real-time mode: how often the parse query commits offsets (records flow on).",
    )
    realtime_max_lag: int = Field(
        default=100_000,
        ge=0,
        description=(
            "Real-time mode: more raw records than this behind, catch up in micro-batches "
            "first (event time then advances evenly over the topics)."
        ),
    )
    state_shards: int = Field(
        default=32,
        ge=1,
        le=4096,
        description=(
            "Detector state is kept per shard (a hash of the entity), a micro-batch costs a call "
            "per shard with work; at least a few per core. Another count is another checkpoint: "
            "state is then rebuilt from the event bus."
        ),
        json_schema_extra=RESTART,
    )
    deadline_grace_s: float | None = Field(
        default=2.0,
        ge=0,
        description=(
            "A deadline (a checkpoint pending too long, a resolve after quiet) is judged once the "
            "newest event time on the bus is this far past it, plus how late the entity's records "
            "usually arrive; null = only when the watermark passes it (watermark_delay_s later)."
        ),
    )
    tick_interval_s: float | None = Field(
        default=5.0,
        gt=0,
        description=(
            "How often the driver writes a tick to the event bus (every record the raw topics "
            "held then is on the bus), so deadlines pass when nothing at all arrives; null = "
            "no ticks: a whole cluster falling silent is then seen only with other data."
        ),
    )
    watermark_delay_s: float = Field(
        default=30.0,
        ge=0,
        description=(
            "How late (event time) a record may arrive and still count; later rows are dropped and"
            " counted."
        ),
    )
    restart_backoff_s: float = Field(
        default=5.0, gt=0, description="Wait before restarting failed queries (seconds)."
    )
    max_restarts: int = Field(
        default=100,
        ge=0,
        description=(
            "Give up after this many query failures in a row; a full volume (ENOSPC) is "
            "waited out instead, not counted."
        ),
    )
    stop_grace_s: float = Field(
        default=10.0,
        ge=0,
        description=(
            "A stop (SIGTERM, Ctrl-C, a reload's restart) waits this long (seconds) for the "
            "detect micro-batch in flight to finish; after that the batch is abandoned and "
            "the next start runs it again. Keep it well under Kubernetes' "
            "terminationGracePeriodSeconds (30)."
        ),
    )
    executor_memory: str | None = Field(
        default=None,
        pattern=r"^[0-9]+[kKmMgGtT]?$",
        description="spark.executor.memory on a cluster, e.g. 2g; null = Spark's 1g",
        json_schema_extra=RESTART,
    )
    executor_cores: int | None = Field(
        default=None,
        gt=0,
        description="spark.executor.cores; null = all of a worker's cores",
        json_schema_extra=RESTART,
    )
    max_entities: int = Field(
        default=500_000,
        gt=0,
        description=(
            "detector entities (jobs, TaskManagers, clusters; counted by the detect query's "
            "shards) kept; past it new entities are refused (counted) until idle ones are "
            "evicted below 90 %"
        ),
    )
    entity_cap_min_dwell_s: float = Field(
        default=300.0,
        ge=0,
        description=(
            "after the entity cap switches (new entities refused, or admitted again) it stays "
            "so at least this long: each switch restarts the queries"
        ),
    )
    state_memory_mb: int | None = Field(
        default=256,
        gt=0,
        description=(
            "one RocksDB memory budget (memtables and block cache) shared by all detector "
            "state of a Spark process, in MB; null = unbounded (RocksDB's per-store defaults)"
        ),
        json_schema_extra=RESTART,
    )
    ui_port: int | None = Field(
        default=4040,
        ge=1,
        le=65535,
        description=(
            "Port of the Spark UI on the driver, read-only (its Structured Streaming tab shows "
            "the parse, detect and dead-letter queries; Spark takes the next port when this "
            "one is busy); null = no UI (also `flinkwatch run --no-spark-ui`)."
        ),
        json_schema_extra=RESTART,
    )
    options: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "Extra Spark settings, e.g. {spark.driver.host: 10.0.0.5}; they win over "
            "flinkwatch's, and spark-submit --conf or spark-defaults.conf win over them."
        ),
        json_schema_extra=RESTART,
    )


class ParsingConfig(_Frozen):
    """How records are read and when they become dead letters."""

    log_timezone: str = Field(default="UTC", description="Zone of log timestamps that carry none.")
    max_record_bytes: int = Field(
        default=1_048_576, gt=0, description="Longer records are dead letters (too_large)."
    )
    # Minutes, not hours: one record from a host whose clock runs ahead moves the
    # watermark, and everything after it would be dropped as late (issue #14).
    max_future_skew_s: float = Field(
        default=300,
        gt=0,
        description=(
            "Event time this far past the record's Kafka timestamp is a dead letter "
            "(bad_timestamp): a record from a host whose clock runs ahead would move the watermark"
            " and make the records after it late."
        ),
    )


class OutputConfig(_Frozen):
    """Where state and results go."""

    state_dir: Path = Field(
        default=Path("var"),
        description=(
            "Checkpoints, the alert ledger, the alert file and dead letters (and the replay's "
            "event files)."
        ),
    )
    alerts_file: Path | None = Field(
        default=None, description="The JSON-lines alert file; null = <state_dir>/alerts.jsonl."
    )
    deadletter_dir: Path | None = Field(
        default=None, description="Directory of dead-letter files; null = <state_dir>/deadletters."
    )
    console: bool = Field(default=True, description="Also log each transition.")
    ledger_retention_days: float = Field(
        default=30.0,
        gt=0,
        description=(
            "The ledger forgets closed incidents whose deliveries are settled after this long "
            "(checked at start and every 6 h)."
        ),
    )
    deadletters_max_per_batch: int = Field(
        default=10_000, ge=1, description="dead letters kept per batch; the rest are counted"
    )
    deadletters_retain_mb: float = Field(
        default=256.0, gt=0, description="dead-letter files kept, oldest deleted first (MB)"
    )
    alerts_file_max_mb: float = Field(
        default=64.0, gt=0, description="the alert file is rotated at this size (MB)"
    )
    alerts_file_keep: int = Field(default=5, ge=0, description="rotated alert files kept")
    page_max_age_s: float | None = Field(
        default=3600.0,
        gt=0,
        description=(
            "a transition whose event time is older than this when it is recorded is kept "
            "(ledger, alert file, metrics) but not sent to Slack: it is marked stale, and "
            "so are its incident's later transitions, unless the incident escalates recently "
            "or is still open when flinkwatch catches up after being behind (then it pages "
            "once; docs/guarantees.md); null = page whatever the age"
        ),
    )

    @property
    def checkpoint_dir(self) -> Path:
        """Spark checkpoints (offsets and detector state)."""
        return self.state_dir / "checkpoints"

    @property
    def alerts_path(self) -> Path:
        """The JSON-lines alert log."""
        return self.alerts_file or self.state_dir / "alerts.jsonl"

    @property
    def ledger_path(self) -> Path:
        """The alert ledger (SQLite): every transition and its delivery per sink."""
        return self.state_dir / "ledger.sqlite"

    @property
    def silences_path(self) -> Path:
        """Silences added with ``flinkwatch silence add`` (SQLite)."""
        return self.state_dir / "silences.sqlite"

    @property
    def deadletter_path(self) -> Path:
        """Directory of dead-letter JSON-lines files."""
        return self.deadletter_dir or self.state_dir / "deadletters"


class PushgatewayConfig(_Frozen):
    """Optional push of the same metrics to a Prometheus Pushgateway."""

    url: str | None = Field(default=None, description="e.g. http://pushgateway:9091; null = off")
    job: str = Field(
        default="flinkwatch",
        description="The Pushgateway's job grouping label (the cluster is added).",
    )
    interval_s: float = Field(default=15.0, gt=0, description="Seconds between pushes.")


class MetricsConfig(_Frozen):
    """The Prometheus endpoint on the driver (docs/metrics-endpoint.md).

    HTTPS needs both ``tls_cert_file`` and ``tls_key_file``; ``tls_client_ca_file`` adds
    mutual TLS. Basic auth is on when ``basic_auth_username`` is set; its password is read
    from the environment variable ``basic_auth_password_env``, never from this file.
    """

    enabled: bool = Field(
        default=True, description="Serve Prometheus metrics from the driver (run and demo)."
    )
    host: str = Field(
        default="127.0.0.1",
        description=(
            "Bind address of /metrics; 0.0.0.0 to be scraped from other hosts (see "
            "docs/metrics-endpoint.md)."
        ),
    )
    port: int = Field(default=9250, ge=0, le=65535, description="Port of /metrics.")
    max_connections: int = Field(
        default=64,
        ge=1,
        le=10_000,
        description=(
            "connections /metrics keeps open at most; one more closes the oldest that has not "
            "sent its whole request (a slow or stalled client), so scrapes still get in"
        ),
    )
    request_deadline_s: float = Field(
        default=10.0,
        gt=0,
        le=300,
        description=(
            "seconds a connection to /metrics may take in all (TLS handshake, request, "
            "response); a client still sending or reading after it is closed"
        ),
    )
    health_port: int | None = Field(
        default=None,
        ge=0,
        le=65535,
        description=(
            "Port of a second listener on metrics.host that answers GET /healthz only, in "
            "plain HTTP without credentials, for a kubelet liveness probe (which has no client "
            "certificate or password); null = none. /healthz is also on metrics.port, behind "
            "its TLS and basic auth"
        ),
    )
    health_max_age_s: float = Field(
        default=600.0,
        gt=0,
        description=(
            "/healthz answers 503 once the detect query has shown no progress (a micro-batch "
            "finished, or a look for new data found none) for this long, and 200 before; "
            "keep it above the longest micro-batch, or a liveness probe restarts a driver "
            "that is only slow (and the batch starts over)"
        ),
    )
    pushgateway: PushgatewayConfig = PushgatewayConfig()
    max_signal_entities: int = Field(
        default=5000,
        gt=0,
        description=(
            "entities per detector with signal series; more are refused (counted), "
            "so a flood of ids cannot flood Prometheus"
        ),
    )
    tls_cert_file: Path | None = Field(
        default=None, description="PEM certificate (chain) served over HTTPS; with tls_key_file"
    )
    tls_key_file: Path | None = Field(
        default=None, description="PEM private key of tls_cert_file (unencrypted)"
    )
    tls_client_ca_file: Path | None = Field(
        default=None,
        description="PEM CA bundle; set = clients must present a certificate it signed (mTLS)",
    )
    basic_auth_username: str | None = Field(
        default=None,
        min_length=1,
        # RFC 7617: the user-id ends at the first colon, so it cannot hold one.
        pattern=r"^[^:]+$",
        description="set = every request needs HTTP basic auth as this user",
    )
    basic_auth_password_env: str = Field(
        default="FLINKWATCH_METRICS_PASSWORD",
        min_length=1,
        description="environment variable holding the basic-auth password",
    )

    @model_validator(mode="after")
    def _tls_files_come_in_pairs(self) -> MetricsConfig:
        # One file without the other cannot serve HTTPS; quietly serving plain HTTP
        # instead would expose what the operator meant to protect.
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            have, missing = (
                ("tls_cert_file", "tls_key_file")
                if self.tls_cert_file is not None
                else ("tls_key_file", "tls_cert_file")
            )
            msg = f"metrics.{missing} is required when metrics.{have} is set"
            raise ValueError(msg)
        if self.tls_client_ca_file is not None and self.tls_cert_file is None:
            msg = (
                "metrics.tls_client_ca_file needs metrics.tls_cert_file and "
                "metrics.tls_key_file (client certificates are checked in the TLS handshake)"
            )
            raise ValueError(msg)
        return self

    @model_validator(mode="after")
    def _health_port_is_its_own(self) -> MetricsConfig:
        if self.health_port is not None and self.health_port == self.port != 0:
            msg = "metrics.health_port must differ from metrics.port (or be null)"
            raise ValueError(msg)
        return self

    @property
    def tls(self) -> bool:
        """Whether the endpoint serves HTTPS."""
        return self.tls_cert_file is not None


class RouteMatch(_Frozen):
    """Which alerts a route takes: every condition given must hold.

    The detector is one of ``detectors``, the severity one of ``severities``, and each
    regular expression of ``match`` matches the whole value of its label (``cluster``,
    ``job_name``, ``job_id``, ``tm_id``, ``host``, ``detector``, ``severity``), as a
    silence's matchers do: a platform with several teams sends each team its own jobs
    (``match: {job_name: "payments-.*"}``). Nothing given matches everything.
    """

    detectors: tuple[str, ...] = ()
    severities: tuple[Severity, ...] = ()
    match: Matchers | None = None

    @model_validator(mode="after")
    def _check(self) -> RouteMatch:
        unknown = sorted(set(self.detectors) - set(REGISTRY))
        if unknown:
            msg = f"unknown detector(s) {unknown}; known: {sorted(REGISTRY)}"
            raise ValueError(msg)
        return self

    def matches(self, alert: Alert, cluster: str) -> bool:
        """True when the route takes this alert (an empty list matches everything)."""
        return (
            (not self.detectors or alert.detector in self.detectors)
            and (not self.severities or alert.severity in self.severities)
            and (self.match is None or self.match.matches(alert, cluster))
        )


class SlackRoute(RouteMatch):
    """Send the incidents this route matches to ``channel``.

    The first route that matches wins, unless it says ``continue: true``: then the routes
    after it are tried too, and each one that matches adds its channel, as Alertmanager's
    routing tree does (a team's channel and the platform's).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    channel: str
    continue_: bool = Field(default=False, alias="continue")


class SlackConfig(_Frozen):
    """Slack notifications. Secrets come from the environment, never from this file."""

    mode: Literal["off", "webhook", "bot"] = Field(
        default="off",
        description=(
            "off, webhook (a message per transition) or bot (one message per incident, updated)."
        ),
        json_schema_extra=RESTART,
    )
    token_env: str = Field(
        default="SLACK_BOT_TOKEN",
        description="bot mode: env var of the token",
        json_schema_extra=RESTART,
    )
    webhook_url_env: str = Field(
        default="SLACK_WEBHOOK_URL",
        description="webhook mode: env var of the URL",
        json_schema_extra=RESTART,
    )
    api_url: str | None = Field(
        default=None,
        description="Web API base URL; null = https://slack.com/api/",
        json_schema_extra=RESTART,
    )
    channel: str = Field(
        default="#flink-alerts", description="Channel of incidents that no route takes."
    )
    routes: tuple[SlackRoute, ...] = Field(
        default=(),
        description=(
            "[{channel, detectors: [...], severities: [...], match: {job_name: regex, cluster: "
            "regex, ...}, continue: false}]: the first route whose every condition holds wins "
            "(with continue: true the later ones are tried too, each adding its channel); an "
            "empty list matches all; `flinkwatch config check FILE --sample job_name=...` "
            "shows the routes taken."
        ),
    )
    max_retries: int = Field(
        default=3,
        ge=0,
        le=20,
        description=(
            "slack-sdk retries per send on 429 (honouring Retry-After) and failures to connect; a "
            "5xx or time-out is confirmed with Slack before any resend."
        ),
    )
    timeout_s: float = Field(
        default=10.0, gt=0, description="HTTP timeout per Slack request (seconds)."
    )
    retry_backoff_s: float = Field(
        default=5.0,
        gt=0,
        description=(
            "After the retries, wait this long (doubling) before trying the backlog again, in "
            "order."
        ),
    )
    max_backoff_s: float = Field(
        default=300.0, gt=0, description="Ceiling of that back-off (seconds)."
    )
    runbook_url: str | None = Field(
        default=None,
        description="Linked from each message as <runbook_url>#<detector>; null = no link.",
    )
    mention_on_critical: str | None = Field(
        default=None, description="e.g. <!here> or <@U123>, prepended to critical alerts"
    )
    interactivity_port: int | None = Field(
        default=None,
        ge=0,
        le=65535,
        description=(
            "bot mode: port of the HTTP endpoint that takes the incident message's buttons "
            "(Acknowledge, Silence 1 h / 4 h, Resolve as noise), the Slack app's interactivity "
            "request URL (docs/slack-actions.md); null = no buttons, no endpoint"
        ),
        json_schema_extra=RESTART,
    )
    interactivity_host: str | None = Field(
        default=None,
        description=(
            "bind address of that endpoint; null = metrics.host. Slack reaches it through an "
            "Ingress or load balancer that terminates HTTPS"
        ),
        json_schema_extra=RESTART,
    )
    signing_secret_env: str = Field(
        default="SLACK_SIGNING_SECRET",
        min_length=1,
        description=(
            "env var of the Slack app's signing secret; every button press is checked against "
            "it (needed when interactivity_port is set)"
        ),
        json_schema_extra=RESTART,
    )
    charts: bool = Field(
        default=True,
        description=(
            "bot mode: post a chart of what decided each incident into its thread, after the "
            "message (docs/slack.md#the-evidence-chart); the token needs files:write"
        ),
    )

    @model_validator(mode="after")
    def _buttons_need_the_bot(self) -> SlackConfig:
        # Buttons live on the bot's incident message; a webhook post has no message to act on.
        if self.interactivity_port is not None and self.mode != "bot":
            msg = "slack.interactivity_port needs slack.mode: bot (the buttons are on its messages)"
            raise ValueError(msg)
        return self

    @field_validator("mode", mode="before")
    @classmethod
    def _yaml_off(cls, v: Any) -> Any:
        # YAML 1.1 reads a bare `off` as false.
        return "off" if v is False else v

    def channel_for(self, alert: Alert, cluster: str) -> str:
        """The channel of a new incident whose first alert is ``alert``."""
        return self.route_for(alert, cluster)[1]

    @property
    def max_channels(self) -> int:
        """The most channels one incident can go to: one, and one per ``continue`` route."""
        return 1 + sum(r.continue_ for r in self.routes)

    def route_table(
        self, detectors: list[str], labels: dict[str, str], cluster: str
    ) -> list[tuple[str, Severity, str, str]]:
        """Where each detector's warning and critical incidents about a sample would go.

        A row per route taken: a route with ``continue`` adds the rows of the ones after.

        ``labels``: the sample's ``job_name``, ``job_id``, ``tm_id``, ``host`` (and
        ``cluster``, else ``cluster``). Rows of ``(detector, severity, route, channel)``.
        """
        rows = []
        where = labels.get("cluster", cluster)
        for name in detectors:
            for severity in (Severity.WARNING, Severity.CRITICAL):
                sample = Alert(
                    alert_id="sample",
                    detector=name,
                    entity="sample",
                    status=AlertStatus.FIRING,
                    severity=severity,
                    event_time_ms=0,
                    summary="sample",
                    job_name=labels.get("job_name"),
                    job_id=labels.get("job_id"),
                    tm_id=labels.get("tm_id"),
                    host=labels.get("host"),
                )
                rows += [(name, severity, *r) for r in self.routes_for(sample, where)]
        return rows

    def route_for(self, alert: Alert, cluster: str) -> tuple[str, str]:
        """A new incident's first route (``slack.routes[i]`` or ``slack.channel``) and channel."""
        return self.routes_for(alert, cluster)[0]

    def routes_for(self, alert: Alert, cluster: str) -> list[tuple[str, str]]:
        """Every route a new incident takes, in order, each with its channel.

        Routes are tried in order; the first that matches without ``continue`` ends the
        walk. ``slack.channel`` takes the incident when no route matched at all. A channel
        that an earlier route took already is not taken twice.
        """
        taken: list[tuple[str, str]] = []
        for i, route in enumerate(self.routes):
            if not route.matches(alert, cluster):
                continue
            if all(ch != route.channel for _, ch in taken):
                taken.append((f"slack.routes[{i}]", route.channel))
            if not route.continue_:
                break
        return taken or [("slack.channel", self.channel)]


def _named_not_written(v: SecretStr) -> SecretStr:
    if env_ref(v.get_secret_value()) is None:
        msg = "a secret: give it as ${ENV_VAR}, not in the config file"
        raise ValueError(msg)
    return v


#: A secret field: only ``${ENV_VAR}`` is accepted, read from the environment at start.
EnvSecret = Annotated[SecretStr, AfterValidator(_named_not_written)]


#: Labels flinkwatch sets on every Alertmanager alert (``alertmanager.labels`` cannot
#: set them: the identity of an alert must stay flinkwatch's).
ALERTMANAGER_LABELS = (
    "alertname",
    "detector",
    "severity",
    "cluster",
    "job_id",
    "job_name",
    "tm_id",
    "incident",
)
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


class AlertmanagerConfig(_Frozen):
    """Alerts posted to Alertmanager's v2 API (docs/alertmanager.md); on when ``urls`` is set.

    Secrets (``basic_auth_password``, ``bearer_token``) are given as ``${ENV_VAR}`` and read
    from the environment when the sink starts, never written in the file.
    """

    urls: tuple[str, ...] = Field(
        default=(),
        description=(
            "Base URLs of the Alertmanagers, e.g. [http://alertmanager:9093]; each one gets "
            "every alert (all members of an HA cluster, as Prometheus does); empty = off."
        ),
        json_schema_extra=RESTART,
    )
    timeout_s: float = Field(
        default=10.0, gt=0, description="HTTP timeout per request to one Alertmanager (seconds)."
    )
    resend_interval_s: float = Field(
        default=60.0,
        gt=0,
        description=(
            "Open alerts are posted again this often, each time with endsAt 4 intervals ahead: "
            "Alertmanager resolves an alert flinkwatch stopped posting (it is down) after that."
        ),
    )
    retry_backoff_s: float = Field(
        default=5.0,
        gt=0,
        description=(
            "After a failed post (no Alertmanager answered, or each answered 5xx), wait this "
            "long (doubling) before trying the backlog again, in order."
        ),
    )
    max_backoff_s: float = Field(
        default=60.0, gt=0, description="Ceiling of that back-off (seconds)."
    )
    alertname: str | None = Field(
        default=None,
        min_length=1,
        description="The alertname label of every alert; null = the detector's name.",
    )
    labels: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "Static labels added to every alert, e.g. {team: data-platform}; flinkwatch's own "
            "labels (alertname, detector, severity, cluster, job_id, job_name, tm_id, "
            "incident) cannot be set here."
        ),
    )
    runbook_url: str | None = Field(
        default=None,
        description="Annotation runbook_url = <runbook_url>#<detector>; null = none.",
    )
    generator_url: str | None = Field(
        default=None,
        description="generatorURL of every alert (a dashboard, say); null = none.",
    )
    basic_auth_username: str | None = Field(
        default=None,
        min_length=1,
        pattern=r"^[^:]+$",
        description="set = every request carries HTTP basic auth as this user",
        json_schema_extra=RESTART,
    )
    basic_auth_password: EnvSecret | None = Field(
        default=None,
        description="Its password, as ${ENV_VAR} (read from the environment at start).",
        json_schema_extra=RESTART,
    )
    bearer_token: EnvSecret | None = Field(
        default=None,
        description=(
            "set = every request carries Authorization: Bearer <token>; as ${ENV_VAR}, read "
            "from the environment at start."
        ),
        json_schema_extra=RESTART,
    )

    @field_validator("urls")
    @classmethod
    def _http_urls(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        bad = [u for u in v if not re.match(r"^https?://[^/\s]+", u)]
        if bad:
            msg = f"not an http(s) base URL: {bad}"
            raise ValueError(msg)
        if len(set(v)) != len(v):
            msg = "a URL is given twice"
            raise ValueError(msg)
        # The API path is added by flinkwatch: a trailing slash would double it.
        return tuple(u.rstrip("/") for u in v)

    @field_validator("labels")
    @classmethod
    def _static_labels(cls, v: dict[str, str]) -> dict[str, str]:
        ours = sorted(set(v) & set(ALERTMANAGER_LABELS))
        if ours:
            msg = f"set by flinkwatch, not by alertmanager.labels: {ours}"
            raise ValueError(msg)
        bad = sorted(k for k in v if not _LABEL_NAME.match(k) or k.startswith("__"))
        if bad:
            msg = f"not valid label names: {bad}"
            raise ValueError(msg)
        empty = sorted(k for k, val in v.items() if not val)
        if empty:
            # Alertmanager drops a label with an empty value: it would match nothing.
            msg = f"labels without a value: {empty}"
            raise ValueError(msg)
        return v

    @model_validator(mode="after")
    def _one_auth(self) -> AlertmanagerConfig:
        if (self.basic_auth_username is None) != (self.basic_auth_password is None):
            msg = "basic_auth_username and basic_auth_password come together"
            raise ValueError(msg)
        if self.basic_auth_username is not None and self.bearer_token is not None:
            msg = "basic auth or a bearer token, not both"
            raise ValueError(msg)
        return self

    @property
    def enabled(self) -> bool:
        """Whether flinkwatch posts to Alertmanager."""
        return bool(self.urls)


#: Headers flinkwatch sets on every webhook post (``headers`` cannot replace them).
WEBHOOK_HEADERS = (
    "content-type",
    "idempotency-key",
    "x-flinkwatch-signature",
    "x-flinkwatch-timestamp",
)


class WebhookConfig(_Frozen):
    """One webhook (docs/webhooks.md): each transition POSTed as JSON, signed.

    Secrets (``secret``, ``routing_key``, a header's value) are given as ``${ENV_VAR}``
    and read from the environment when the sink starts, never written in the file.
    """

    name: str = Field(
        pattern=r"^[a-z0-9][a-z0-9_-]{0,39}$",
        description=(
            "Unique name (lower case, digits, - and _): the sink is webhook:<name> in the "
            "ledger, the metrics and flinkwatch deliveries."
        ),
    )
    url: str = Field(
        pattern=r"^https?://[^/\s]+",
        description="Where each transition is POSTed, e.g. https://hooks.example/flinkwatch.",
    )
    format: Literal["flinkwatch", "pagerduty"] = Field(
        default="flinkwatch",
        description=(
            "flinkwatch: the versioned flinkwatch schema, signed; pagerduty: a PagerDuty "
            "Events API v2 event (url https://events.pagerduty.com/v2/enqueue)."
        ),
    )
    secret: EnvSecret | None = Field(
        default=None,
        description=(
            "HMAC-SHA256 key of X-Flinkwatch-Signature, as ${ENV_VAR} (read from the "
            "environment at start); required for format flinkwatch."
        ),
    )
    routing_key: EnvSecret | None = Field(
        default=None,
        description=(
            "The PagerDuty integration's routing key, as ${ENV_VAR}; required for format pagerduty."
        ),
    )
    timeout_s: float = Field(default=10.0, gt=0, description="HTTP timeout per post (seconds).")
    headers: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "Static headers on every post, e.g. {X-Team: data}; a value written ${ENV_VAR} is "
            "read from the environment at start (Authorization must be)."
        ),
    )
    runbook_url: str | None = Field(
        default=None, description="runbook_url of each post = <runbook_url>#<detector>."
    )
    route: RouteMatch | None = Field(
        default=None,
        description=(
            "{detectors: [...], severities: [...], match: {job_name: regex, ...}}: only the "
            "incidents it matches are posted (judged on each incident's first transition "
            "here; the rest of an incident follows it); null = every incident."
        ),
    )
    retry_backoff_s: float = Field(
        default=5.0,
        gt=0,
        description=(
            "After a failed post (no answer, 5xx, 408, 429), wait this long (doubling) before "
            "trying this webhook's backlog again, in order."
        ),
    )
    max_backoff_s: float = Field(
        default=60.0, gt=0, description="Ceiling of that back-off (seconds)."
    )

    @field_validator("headers")
    @classmethod
    def _static_headers(cls, v: dict[str, str]) -> dict[str, str]:
        ours = sorted(k for k in v if k.lower() in WEBHOOK_HEADERS)
        if ours:
            msg = f"set by flinkwatch, not by headers: {ours}"
            raise ValueError(msg)
        bad = sorted(k for k in v if not re.fullmatch(r"[A-Za-z0-9-]+", k))
        if bad:
            msg = f"not valid header names: {bad}"
            raise ValueError(msg)
        literal = sorted(
            k for k, val in v.items() if k.lower() == "authorization" and env_ref(val) is None
        )
        if literal:
            msg = "Authorization is a secret: give its value as ${ENV_VAR}"
            raise ValueError(msg)
        return v

    @model_validator(mode="after")
    def _format_needs(self) -> WebhookConfig:
        if self.format == "flinkwatch" and self.secret is None:
            msg = "format flinkwatch signs every post: give secret as ${ENV_VAR}"
            raise ValueError(msg)
        if self.format == "pagerduty" and self.routing_key is None:
            msg = "format pagerduty needs routing_key as ${ENV_VAR}"
            raise ValueError(msg)
        return self

    @property
    def sink(self) -> str:
        """The sink's name in the ledger: ``webhook:<name>``."""
        return f"webhook:{self.name}"


def _detectors_model() -> type[BaseModel]:
    # One field per registered detector, typed by that detector's own params model, so
    # defaults live in the detector module and errors read `detectors.<name>.<param>`.
    fields: dict[str, Any] = {
        name: (cls.params_model, Field(default_factory=cls.params_model))
        for name, cls in REGISTRY.items()
    }
    return create_model(
        "DetectorsConfig",
        __config__=ConfigDict(frozen=True, extra="forbid"),
        **fields,
    )


DetectorsConfig = _detectors_model()


class JobMatch(_Frozen):
    """Which jobs an override applies to: an exact job id and/or a job-name pattern."""

    job_id: str | None = None
    job_name: str | None = Field(
        default=None, description="Regular expression, matched against the whole job name."
    )

    @model_validator(mode="after")
    def _check(self) -> JobMatch:
        if self.job_id is None and self.job_name is None:
            msg = "give job_id and/or job_name"
            raise ValueError(msg)
        if self.job_name is not None:
            try:
                re.compile(self.job_name)
            except re.error as exc:
                msg = f"job_name is not a valid regular expression: {exc}"
                raise ValueError(msg) from exc
        return self

    def matches(self, job_id: str | None, job_name: str | None) -> bool:
        """True when the job is this override's."""
        if self.job_id is not None and job_id != self.job_id:
            return False
        if self.job_name is not None:
            if not job_name:
                return False
            # Prometheus-reporter label values have '-' and '.' replaced by '_' (orders-x
            # arrives as orders_x): try the name and the pattern in both spellings.
            names = {job_name, job_name.replace("-", "_").replace(".", "_")}
            patterns = {self.job_name, self.job_name.replace("-", "_")}
            if not any(re.fullmatch(p, n) for p in patterns for n in names):
                return False
        return True


class Override(_Frozen):
    """Detector parameters for the jobs that ``match`` selects (the first match wins)."""

    match: JobMatch
    detectors: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> Override:
        for name, section in self.detectors.items():
            if name not in REGISTRY:
                msg = f"unknown detector {name!r}; known: {sorted(REGISTRY)}"
                raise ValueError(msg)
            try:
                REGISTRY[name].params_model.model_validate(section)
            except ValidationError as exc:
                problems = "; ".join(
                    f"detectors.{name}.{'.'.join(str(x) for x in e['loc'])}: {e['msg']}"
                    for e in exc.errors()
                )
                raise ValueError(problems) from exc
        return self


_BUS_TOPICS = ("events_topic", "deadletters_topic")


class AppConfig(_Frozen):
    """The whole configuration (``conf/flinkwatch.yaml``)."""

    kafka: KafkaConfig = Field(default=KafkaConfig(), json_schema_extra=RESTART)
    spark: SparkConfig = SparkConfig()
    parsing: ParsingConfig = ParsingConfig()
    output: OutputConfig = Field(default=OutputConfig(), json_schema_extra=RESTART)
    metrics: MetricsConfig = Field(default=MetricsConfig(), json_schema_extra=RESTART)
    cluster: str = Field(default="default", min_length=1, description="Name of the watched cluster")
    slack: SlackConfig = SlackConfig()
    alertmanager: AlertmanagerConfig = AlertmanagerConfig()
    webhooks: tuple[WebhookConfig, ...] = Field(
        default=(),
        description=(
            "Webhooks, each its own sink: [{name, url, secret, format, ...}] "
            "(docs/webhooks.md; the keys are under webhooks[] below)."
        ),
        json_schema_extra=RESTART,
    )
    silences: tuple[Silence, ...] = Field(
        default=(), description="Silences and maintenance windows (docs/alerts.md#silences)."
    )
    correlation: CorrelationParams = CorrelationParams()
    detectors: DetectorsConfig = Field(default_factory=DetectorsConfig)  # type: ignore[valid-type]
    overrides: tuple[Override, ...] = Field(
        default=(),
        description=(
            "Per-job detector parameters: [{match: {job_id, job_name}, detectors: {...}}], first "
            "match wins."
        ),
    )
    reload_interval_s: float = Field(
        default=5.0,
        gt=0,
        description="How often flinkwatch run --config FILE checks the file for changes (seconds).",
    )

    @model_validator(mode="before")
    @classmethod
    def _bus_topics(cls, data: Any) -> Any:
        """Name the bus topics after the cluster unless they are set.

        Two flinkwatch instances on one broker, each watching its own cluster, must not
        read each other's events.
        """
        if not isinstance(data, dict):
            return data
        cluster = data.get("cluster") or "default"
        names = {t: f"flinkwatch.{cluster}.{t.removesuffix('_topic')}" for t in _BUS_TOPICS}
        kafka = data.get("kafka")
        if isinstance(kafka, KafkaConfig):
            update = {t: n for t, n in names.items() if getattr(kafka, t) is None}
            return {**data, "kafka": kafka.model_copy(update=update)} if update else data
        if kafka is None or isinstance(kafka, dict):
            kafka = dict(kafka or {})
            for t, n in names.items():
                if kafka.get(t) is None:
                    kafka[t] = n
            return {**data, "kafka": kafka}
        return data

    @model_validator(mode="after")
    def _some_detector_runs(self) -> AppConfig:
        enabled = any(p.enabled for p in self.detector_params().values()) or any(
            sec.get("enabled") is True for ov in self.overrides for sec in ov.detectors.values()
        )
        if not enabled:
            msg = "every detector is disabled (detectors.<name>.enabled): nothing would run"
            raise ValueError(msg)
        return self

    @model_validator(mode="after")
    def _interactivity_port_is_its_own(self) -> AppConfig:
        s, m = self.slack, self.metrics
        same_host = s.interactivity_host in (None, m.host)
        taken = {m.port, m.health_port} if m.enabled else set()
        if s.interactivity_port and same_host and s.interactivity_port in taken:
            msg = (
                "slack.interactivity_port must differ from metrics.port and metrics.health_port "
                "on the same host"
            )
            raise ValueError(msg)
        return self

    @model_validator(mode="after")
    def _unique_webhook_names(self) -> AppConfig:
        names = [w.name for w in self.webhooks]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            msg = f"webhook names must be unique: {dupes}"
            raise ValueError(msg)
        return self

    @model_validator(mode="after")
    def _unique_silence_names(self) -> AppConfig:
        names = [s.name for s in self.silences]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            msg = f"silence names must be unique: {dupes}"
            raise ValueError(msg)
        return self

    def detector_params(self) -> dict[str, DetectorParams]:
        """Each registered detector's parameters, by detector name."""
        return {name: getattr(self.detectors, name) for name in REGISTRY}

    def resolver(self) -> ParamsResolver:
        """Per-job parameter lookup for the detectors (base params plus overrides)."""
        return ParamsResolver(self.detector_params(), self.overrides)


class ParamsResolver:
    """Parameters of a detector for one job: the first matching override over the base.

    Pure Python and picklable: it travels to the Spark executors with the adapter.
    """

    def __init__(self, base: dict[str, DetectorParams], overrides: tuple[Override, ...]) -> None:
        self.base = dict(base)
        self.overrides = tuple(overrides)
        self._cache: dict[tuple[str, str | None, str | None], DetectorParams] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {"base": self.base, "overrides": self.overrides}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["base"], state["overrides"])  # type: ignore[misc]

    def params(self, detector: str, job_id: str | None, job_name: str | None) -> DetectorParams:
        """The effective parameters of ``detector`` for the job."""
        key = (detector, job_id, job_name)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        base = self.base[detector]
        result = base
        for ov in self.overrides:
            if detector in ov.detectors and ov.match.matches(job_id, job_name):
                merged = {**base.model_dump(), **ov.detectors[detector]}
                result = type(base).model_validate(merged)
                break
        if len(self._cache) > 10_000:  # one entry per job seen; bound it all the same
            self._cache.clear()
        self._cache[key] = result
        return result


def read_config_file(path: str | Path, limit: int = MAX_CONFIG_BYTES) -> bytes:
    """The bytes of a config file, read only if it is a regular file of at most ``limit`` bytes.

    A symlink is followed (Kubernetes mounts a ConfigMap as one). The file is opened
    without blocking and checked on the open descriptor, so a FIFO is refused rather than
    waited on, and at most ``limit + 1`` bytes are ever read: a file that turns out
    longer (one still growing, a device behind the link) is refused, not truncated.

    Raises:
        ConfigError: the file cannot be opened, is not a regular file, or holds more than
            ``limit`` bytes; the message names the file.
    """
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        msg = f"{p}: cannot read config: {exc.strerror or exc}"
        raise ConfigError(msg, path=p) from exc
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(f.fileno()).st_mode
        if not stat.S_ISREG(mode):
            what = _FILE_KINDS.get(stat.S_IFMT(mode), "not a regular file")
            msg = f"{p}: cannot read config: {what}, not a regular file"
            raise ConfigError(msg, path=p)
        try:
            data = f.read(limit + 1)
        except OSError as exc:
            msg = f"{p}: cannot read config: {exc.strerror or exc}"
            raise ConfigError(msg, path=p) from exc
    if len(data) > limit:
        msg = f"{p}: cannot read config: larger than {limit:,} bytes (not read further)"
        raise ConfigError(msg, path=p)
    return data


_FILE_KINDS = {
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a directory",
}


def load_config(path: str | Path | None = None, text: str | None = None) -> AppConfig:
    """Load and validate a YAML config; ``None`` loads the packaged default.

    Args:
        path: The file, named in every error.
        text: Its content when the caller has read it already (the reload watcher
            validates exactly the bytes it compared).

    Raises:
        ConfigError: the file is missing, not a regular file, larger than
            :data:`MAX_CONFIG_BYTES`, not YAML, or invalid; the message names the file
            and each offending field.
    """
    p = Path(path) if path else DEFAULT_CONFIG
    if text is None:
        raw = read_config_file(p)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            msg = f"{p}: not UTF-8 ({exc})"
            raise ConfigError(msg, path=p) from exc
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        msg = f"{p}: not valid YAML: {exc}"
        raise ConfigError(msg, path=p) from exc
    if not isinstance(data, dict):
        msg = f"{p}: top level must be a mapping, got {type(data).__name__}"
        raise ConfigError(msg, path=p)
    try:
        return AppConfig.model_validate(data)
    except ValidationError as exc:
        fields = [".".join(str(x) for x in e["loc"]) or "<root>" for e in exc.errors()]
        problems = "; ".join(f"{f}: {e['msg']}" for f, e in zip(fields, exc.errors(), strict=True))
        msg = f"{p}: invalid config: {problems}"
        raise ConfigError(msg, path=p, fields=fields) from exc
