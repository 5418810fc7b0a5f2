"""The whole configuration (:class:`AppConfig`), its detector sections and per-job overrides.

The detector section is derived from :data:`detectors.REGISTRY`: each detector's
parameters live in its own module, and an unknown detector name or parameter is
an error that names the field.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    model_validator,
)

from conf.base import RESTART, FrozenModel
from conf.destinations import AlertmanagerConfig, SlackConfig, WebhookConfig
from conf.metrics import MetricsConfig
from conf.output import OutputConfig
from conf.pipeline import KafkaConfig, ParsingConfig, SparkConfig
from conf.silences import Silence
from detectors import REGISTRY, Detector, DetectorParams
from detectors.base import Profile
from detectors.correlation import CorrelationParams
from detectors.model import cap_name
from detectors.rules import Rule, RuleParams, rule_detector


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
    rules: tuple[Rule, ...] = Field(
        default=(),
        description=(
            "Your own rules, each run like a detector: [{name, kind: threshold | frequency | "
            "flatline | spike, ...}] (docs/rules.md)."
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
        if not enabled and not any(r.enabled for r in self.rules):
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
    def _unique_names(self) -> AppConfig:
        for what, names in (
            ("webhook", [w.name for w in self.webhooks]),
            ("silence", [s.name for s in self.silences]),
            ("rule", [r.name for r in self.rules]),
        ):
            dupes = sorted({n for n in names if names.count(n) > 1})
            if dupes:
                msg = f"{what} names must be unique: {dupes}"
                raise ValueError(msg)
        return self

    @model_validator(mode="after")
    def _rules_are_not_detectors(self) -> AppConfig:
        for i, rule in enumerate(self.rules):
            if rule.name in REGISTRY:
                msg = f"rules.{i}.name: {rule.name!r} is a built-in detector's name"
                raise ValueError(msg)
        return self

    @model_validator(mode="after")
    def _routes_name_what_runs(self) -> AppConfig:
        # Checked here, not on the route: a route may name a rule, which only the whole
        # config knows.
        known = set(self.resolver().base)
        named = [
            (f"slack.routes.{i}.detectors", r.detectors) for i, r in enumerate(self.slack.routes)
        ]
        named += [
            (f"webhooks.{i}.route.detectors", w.route.detectors)
            for i, w in enumerate(self.webhooks)
            if w.route is not None
        ]
        for where, names in named:
            unknown = sorted(set(names) - known)
            if unknown:
                msg = f"{where}: unknown detector(s) {unknown}; known: {sorted(known)}"
                raise ValueError(msg)
        return self

    def detector_params(self) -> dict[str, DetectorParams]:
        """Each registered detector's parameters, by detector name."""
        return {name: getattr(self.detectors, name) for name in REGISTRY}

    def resolver(self) -> ParamsResolver:
        """Per-job parameter lookup for the detectors (base params plus overrides)."""
        rules = {r.name: r for r in self.rules}
        return ParamsResolver({**self.detector_params(), **rules}, self.overrides)

    def catalog(self) -> dict[str, type[Detector[Any, Any]]]:
        """What this config runs, by name: the built-in detectors and one class per rule.

        :data:`detectors.REGISTRY` stays the list of built-ins (the config reference, the
        docs); the pipeline, the sinks and the driver's words take their detectors from
        here, so a reload that adds a rule reaches them all.
        """
        return self.resolver().catalog()


class ParamsResolver:
    """Parameters of a detector for one job: the first matching override over the base.

    Pure Python and picklable: it travels to the Spark executors with the adapter.
    """

    def __init__(self, base: dict[str, DetectorParams], overrides: tuple[Override, ...]) -> None:
        self.base = dict(base)
        self.overrides = tuple(overrides)
        self._cache: dict[tuple[str, str | None, str | None], DetectorParams] = {}
        self._classes: dict[str, type[Detector[Any, Any]]] = {}

    def detector_class(self, name: str) -> type[Detector[Any, Any]]:
        """The class that runs as ``name``: a built-in detector's, or the one its rule makes.

        Made where it is asked for, from ``base`` (a rule's params are the rule): a class
        made at run time cannot be pickled to the executors, its definition can.

        Raises:
            KeyError: no detector or rule of that name in the config.
        """
        hit = self._classes.get(name)
        if hit is None:
            hit = self._classes[name] = self._make(name)
        return hit

    def _make(self, name: str) -> type[Detector[Any, Any]]:
        params = self.base[name]
        if name in REGISTRY:
            return REGISTRY[name]
        if not isinstance(params, RuleParams):
            msg = f"{name}: neither a detector nor a rule"
            raise KeyError(msg)
        return rule_detector(params)

    def catalog(self) -> dict[str, type[Detector[Any, Any]]]:
        """Every detector and rule of the config by name (enabled or not)."""
        return {name: self.detector_class(name) for name in self.base}

    def profile(self, name: str) -> Profile:
        """How ``name``'s incidents are told; the default :class:`Profile` when not known."""
        try:
            return self.detector_class(name).profile
        except KeyError:
            return Profile()

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
