"""Where the records come from and how the queries run: ``kafka``, ``spark``, ``parsing``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from conf.base import ENV_NAME, RESTART, FrozenModel
from conf.kafka_options import check_options

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


class KafkaConfig(FrozenModel):
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
        pattern=ENV_NAME,
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
            "`${NAME}` is read from the environment variable NAME. They override "
            "flinkwatch's own client defaults (docs/kafka-security.md)"
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


class SparkConfig(FrozenModel):
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
            "Partitions of detector state; at least the cores of the cluster. The shards' keys "
            "are chosen to spread evenly over them, so another count is another detect "
            "checkpoint: state is then rebuilt from the event bus."
        ),
        json_schema_extra=RESTART,
    )
    trigger_interval_s: float = Field(
        default=1.0,
        ge=0,
        description=(
            "Least time between the starts of two detector micro-batches; 0 = the next as soon as "
            "one ends. Each batch has a fixed cost (planning, a Python call per shard, a state "
            "commit): at 500 records/s, 1 s took half the CPU of 0 for ~0.5 s more latency."
        ),
    )
    poll_interval_s: float = Field(
        default=0.25,
        gt=0,
        le=10,
        description=(
            "With nothing new to read, how often each query looks again (Spark's polling "
            "delay): the most a record waits after a quiet spell, and what idling costs."
        ),
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
        default=30.0,
        ge=5,
        description=(
            "Real-time mode: how often the parse query commits offsets (records flow on); "
            "each commit is planned anew (about 0.15 cores at 5 s), and ticks, the parse's "
            "counts and the release after a start wait for one."
        ),
    )
    realtime_max_lag: int = Field(
        default=100_000,
        ge=0,
        description=(
            "Real-time mode: more raw records than this behind, catch up in micro-batches "
            "first (event time then advances evenly over the topics)."
        ),
    )
    idle_after_s: float = Field(
        default=60.0,
        ge=0,
        description=(
            "Real-time mode: once the parse query has read no raw record for this long it "
            "runs in micro-batches on trigger_interval_s (an idle real-time query costs "
            "0.08-0.2 cores, its commits planned anew), and in real time again as soon as a "
            "micro-batch reads records; 0 = real time even when idle."
        ),
    )
    state_shards: int = Field(
        default=16,
        ge=1,
        le=4096,
        description=(
            "Detector state is kept per shard (a hash of the entity), a micro-batch costs a call "
            "per shard with work (~1-2 ms of Python CPU); a multiple of shuffle_partitions, a "
            "few per core. Another count is another checkpoint: "
            "state is then rebuilt from the event bus. Going back to a count used before does not "
            "resume its old checkpoint (stale, its offsets maybe past the bus's retention): that "
            "is renamed with the suffix .stale-YYYYmmddTHHMMSSZ (UTC), with a warning, and "
            "state is rebuilt again."
        ),
        json_schema_extra=RESTART,
    )
    deadline_grace_s: float | None = Field(
        default=1.0,
        ge=0,
        description=(
            "A deadline (a checkpoint pending too long, a resolve after quiet) is judged once the "
            "newest event time on the bus is this far past it, plus how late the entity's records "
            "usually arrive; null = only when the watermark passes it (watermark_delay_s later)."
        ),
    )
    lag_window_s: float = Field(
        default=60.0,
        ge=10,
        le=3600,
        description=(
            "Width of the event-time windows over which each entity's delivery lag is kept: a "
            "deadline waits for the largest lag of the last one to two windows. Shorter pages "
            "sooner after a slow moment passes. Keep it at least as long as the gap between a "
            "job's log lines (its checkpoint interval) where they trail its metrics, or a "
            "checkpoint that completes just before its deadline may page as pending, then resolve."
        ),
    )
    tick_interval_s: float | None = Field(
        default=1.0,
        gt=0,
        description=(
            "Least time between two ticks: the driver writes a tick to the event bus (every "
            "record the raw topics held then is on the bus) when a deadline is due, so "
            "deadlines pass when nothing at all arrives; null = no ticks: a whole cluster "
            "falling silent is then seen only with other data."
        ),
    )
    watermark_delay_s: float = Field(
        default=30.0,
        ge=0,
        description=(
            "How late (event time) a record may arrive and still count; later rows are dropped and"
            " counted. A record that reached the bus later than this after its event time (a"
            " catch-up's) moves no watermark."
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


#: The labels a metric event carries (the Prometheus reporter's label names); a naming
#: rule may fill any of them from the incoming name.
MetricLabel = Literal[
    "host", "tm_id", "job_id", "job_name", "task_name", "subtask_index", "operator_name"
]

# A group whose body repeats and that repeats itself, `(a+)+`, `(\w*\.)*`: Java's
# backtracking matcher can take exponential time on a name that almost matches, and the
# rules run on every metric sample inside the parse query.
_REPEAT = re.compile(r"[*+]|\{\d*,\d*\}|\{\d*[2-9]\d*\}|\{\d{2,}\}")
_TEMPLATE_REF = re.compile(r"\$(\d)")


def _nested_quantifier(pattern: str) -> bool:
    """Whether a quantified group of ``pattern`` holds a quantifier of its own."""
    stack: list[bool] = []  # per open group: does its body repeat?
    i, in_class = 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            if pattern[i + 1 : i + 2] == "]":
                i += 1
        elif c == "(":
            stack.append(False)
        elif c == ")" and stack:
            body_repeats = stack.pop()
            if body_repeats and _REPEAT.match(pattern, i + 1):
                return True
            if stack:
                stack[-1] = stack[-1] or body_repeats
        elif stack and _REPEAT.match(pattern, i):
            stack[-1] = True
        i += 1
    return False


class MetricNameRule(FrozenModel):
    r"""One naming rule: an incoming metric name → the canonical (Prometheus reporter) name.

    Example::

        match: '([^.]+)\.taskmanager\.([^.]+)\.Status\.JVM\.Memory\.Heap\.Used'
        name: flink_taskmanager_Status_JVM_Memory_Heap_Used
        labels: {host: $1, tm_id: $2}
    """

    match: str = Field(
        min_length=1,
        max_length=1000,
        description=(
            "Java regular expression the whole incoming metric name must match; no nested "
            "quantifier such as (a+)+."
        ),
    )
    name: str = Field(
        min_length=1,
        max_length=300,
        description=(
            "The canonical name; $1-$9 are the match's groups; characters outside "
            "[a-zA-Z0-9:_] become _."
        ),
    )
    labels: dict[MetricLabel, str] = Field(
        default_factory=dict,
        description=(
            "Labels taken from the name (host, tm_id, job_id, job_name, task_name, "
            "subtask_index, operator_name), e.g. {tm_id: $2}; they win over the record's."
        ),
    )

    @field_validator("match")
    @classmethod
    def _compiles(cls, v: str) -> str:
        if "(?P" in v:
            msg = "named groups are Java's (?<name>...), and templates use $1-$9"
            raise ValueError(msg)
        try:
            re.compile(v)
        except re.error as exc:
            msg = f"not a regular expression: {exc}"
            raise ValueError(msg) from exc
        if _nested_quantifier(v):
            msg = (
                "a repeated group that repeats inside, such as (a+)+, can backtrack for "
                "minutes on one name; write it without the nesting"
            )
            raise ValueError(msg)
        return v

    @model_validator(mode="after")
    def _templates_name_groups(self) -> MetricNameRule:
        groups = re.compile(self.match).groups
        for where, tmpl in [
            ("name", self.name),
            *((f"labels.{k}", t) for k, t in self.labels.items()),
        ]:
            # Java's replacement syntax: `$n` is a group, `\\` escapes; anything else
            # with `$` or `\\` fails inside the parse query, so refuse it here.
            bare = _TEMPLATE_REF.sub("", tmpl)
            if "$" in bare or "\\" in bare:
                msg = f"{where}: only $1-$9 may follow $, and \\ is not allowed: {tmpl!r}"
                raise ValueError(msg)
            for ref in _TEMPLATE_REF.findall(tmpl):
                if int(ref) > groups or ref == "0":
                    msg = f"{where}: ${ref} but the match has {groups} group(s)"
                    raise ValueError(msg)
        return self


class ParsingConfig(FrozenModel):
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
    max_points_per_record: int = Field(
        default=10_000,
        gt=0,
        description=(
            "Samples read from one metric record holding many (an OTLP or line-protocol batch);"
            " those past it are dropped, counted as one dead letter (too_many_points)."
        ),
    )
    metric_names: tuple[MetricNameRule, ...] = Field(
        default=(),
        description=(
            "Naming rules tried in order before the built-in ones (docs/input-formats.md#metric-"
            "names): an incoming metric name → the canonical name the detectors read."
        ),
    )
