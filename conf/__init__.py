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
from typing import Any
from urllib.parse import urlsplit

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    model_validator,
)

from conf.base import ENV_NAME as ENV_NAME
from conf.base import RESTART as RESTART
from conf.base import FrozenModel as FrozenModel
from conf.base import restart_only as restart_only
from conf.destinations import AlertmanagerConfig as AlertmanagerConfig
from conf.destinations import RouteMatch as RouteMatch
from conf.destinations import SlackConfig as SlackConfig
from conf.destinations import SlackRoute as SlackRoute
from conf.destinations import WebhookConfig as WebhookConfig
from conf.errors import ConfigError as ConfigError
from conf.errors import FlinkwatchError as FlinkwatchError
from conf.pipeline import KafkaConfig as KafkaConfig
from conf.pipeline import ParsingConfig as ParsingConfig
from conf.pipeline import SparkConfig as SparkConfig
from conf.silences import Silence
from detectors import REGISTRY, DetectorParams
from detectors.correlation import CorrelationParams
from detectors.model import cap_name

DEFAULT_CONFIG = Path(__file__).with_name("flinkwatch.yaml")

#: The most a config file may hold (1 MiB; the shipped one is a few KB). The file is read
#: on the driver at start and at every reload poll: a path that points at ``/dev/zero``, a
#: log file or a FIFO must not be read whole, nor block the driver's loop.
MAX_CONFIG_BYTES = 1 << 20


def checkpoint_scheme(location: str | None) -> str | None:
    """The URI scheme of a checkpoint location (``hdfs``, ``s3a``...); None for a path."""
    m = re.match(r"([A-Za-z][A-Za-z0-9+.-]*):", location or "")
    # A one-letter "scheme" is a Windows drive, which is a path.
    return m.group(1).lower() if m and len(m.group(1)) > 1 else None


class OutputConfig(FrozenModel):
    """Where state and results go."""

    state_dir: Path = Field(
        default=Path("var"),
        description=(
            "Checkpoints (unless checkpoint_location says otherwise), the alert ledger, the "
            "silences, the bus placement record, the alert file and dead letters (and the "
            "replay's event files), on the driver's local disk."
        ),
    )
    checkpoint_location: str | None = Field(
        default=None,
        description=(
            "Where Spark keeps the queries' checkpoints (offsets, commits, the detectors' "
            "RocksDB state): a path, or a Hadoop file system URI such as "
            "hdfs://namenode:8020/flinkwatch/checkpoints or s3a://bucket/flinkwatch/checkpoints "
            "(its settings, e.g. fs.s3a.endpoint, go in spark.options as spark.hadoop.*); "
            "null = <state_dir>/checkpoints. The ledger and the other files stay in state_dir "
            "(docs/deployment.md)."
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

    @model_validator(mode="after")
    def _known_scheme(self) -> OutputConfig:
        scheme = checkpoint_scheme(self.checkpoint_location)
        if scheme in ("s3", "s3n"):
            msg = (
                f"output.checkpoint_location: {scheme}:// has no file system in Hadoop 3; "
                "use s3a://"
            )
            raise ValueError(msg)
        return self

    @property
    def checkpoints(self) -> str:
        """Spark checkpoints (offsets and detector state): a local path or a Hadoop URI."""
        if self.checkpoint_location is None:
            return str(self.state_dir / "checkpoints")
        return self.checkpoint_location

    @property
    def checkpoint_dir(self) -> Path:
        """Spark checkpoints as a local directory.

        Raises:
            ValueError: ``checkpoint_location`` is on a Hadoop file system (hdfs://, s3a://):
                read it through ``streaming.checkpoints.open_dir``.
        """
        if checkpoint_scheme(self.checkpoint_location) not in (None, "file"):
            msg = f"the checkpoints are not on a local disk: {self.checkpoint_location}"
            raise ValueError(msg)
        if self.checkpoint_location is None:
            return self.state_dir / "checkpoints"
        return Path(urlsplit(self.checkpoint_location).path or self.checkpoint_location)

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


class PushgatewayConfig(FrozenModel):
    """Optional push of the same metrics to a Prometheus Pushgateway."""

    url: str | None = Field(default=None, description="e.g. http://pushgateway:9091; null = off")
    job: str = Field(
        default="flinkwatch",
        description="The Pushgateway's job grouping label (the cluster is added).",
    )
    interval_s: float = Field(default=15.0, gt=0, description="Seconds between pushes.")


class MetricsConfig(FrozenModel):
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


class JobMatch(FrozenModel):
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
            # Cut as the parsers cut names: a regex never runs on more (see NAME_CHARS).
            job_name = cap_name(job_name)
            if not job_name:
                return False
            # Prometheus-reporter label values have '-' and '.' replaced by '_' (orders-x
            # arrives as orders_x): try the name and the pattern in both spellings.
            names = {job_name, job_name.replace("-", "_").replace(".", "_")}
            patterns = {self.job_name, self.job_name.replace("-", "_")}
            if not any(re.fullmatch(p, n) for p in patterns for n in names):
                return False
        return True


class Override(FrozenModel):
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


class AppConfig(FrozenModel):
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
