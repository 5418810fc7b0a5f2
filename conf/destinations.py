"""Where alerts go: the ``slack``, ``alertmanager`` and ``webhooks`` sections."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    SecretStr,
    field_validator,
    model_validator,
)

from conf.base import RESTART, FrozenModel
from conf.kafka_options import env_ref
from conf.silences import Matchers
from detectors import Alert, AlertStatus, Severity


class RouteMatch(FrozenModel):
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


_SLACK_USER = re.compile(r"^[UW][A-Z0-9]{2,30}$")
_SLACK_USERGROUP = re.compile(r"^S[A-Z0-9]{2,30}$")
_SLACK_TEAM = re.compile(r"^T[A-Z0-9]{2,30}$")


def _ids(pattern: re.Pattern[str], what: str) -> AfterValidator:
    def check(values: tuple[str, ...]) -> tuple[str, ...]:
        bad = [v for v in values if not pattern.match(v)]
        if bad:
            msg = f"not {what}: {bad} (ids, not names: Slack shows them in a profile's menu)"
            raise ValueError(msg)
        return values

    return AfterValidator(check)


class SlackActionsConfig(FrozenModel):
    """Who may press the incident message's buttons (``slack.actions``).

    A press is taken only from the workspace of the bot's token, on the incident's own
    message; these settings narrow it further. They apply from the next press after a
    reload.
    """

    allowed_users: Annotated[tuple[str, ...], _ids(_SLACK_USER, "Slack user ids (U… or W…)")] = (
        Field(
            default=(),
            description=(
                "user ids (U…/W…) who may press the buttons; with allowed_usergroups, either "
                "list admits; both empty = anyone in the channel"
            ),
        )
    )
    allowed_usergroups: Annotated[
        tuple[str, ...], _ids(_SLACK_USERGROUP, "Slack user group ids (S…)")
    ] = Field(
        default=(),
        description=(
            "user group ids (S…) whose members may press, read with usergroups.users.list "
            "(the token needs usergroups:read)"
        ),
    )
    allowed_teams: Annotated[tuple[str, ...], _ids(_SLACK_TEAM, "Slack team ids (T…)")] = Field(
        default=(),
        description=(
            "team ids (T…) of other organisations whose Slack Connect users may press; [] = "
            "none: a user from outside the bot's workspace is refused"
        ),
    )
    usergroups_cache_s: float = Field(
        default=300.0,
        gt=0,
        le=86400,
        description=(
            "how long a user group's members are kept before they are read again (a group "
            "Slack cannot list then keeps its last members)"
        ),
    )


class SlackConfig(FrozenModel):
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
    actions: SlackActionsConfig = Field(
        default=SlackActionsConfig(),
        description="who may press the buttons (docs/slack-actions.md#who-may-press)",
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


class AlertmanagerConfig(FrozenModel):
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
        default=10.0,
        gt=0,
        description=(
            "Deadline of one request to one Alertmanager, whole: connecting, sending and the "
            "answer (seconds)."
        ),
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
        # The API path is added by flinkwatch: a trailing slash would double it. Cut
        # first, so one member written with and without it is still one member.
        bases = tuple(u.rstrip("/") for u in v)
        if len(set(bases)) != len(bases):
            msg = "a URL is given twice"
            raise ValueError(msg)
        return bases

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


class WebhookConfig(FrozenModel):
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
    timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="Deadline of one post, whole: connecting, sending and the answer (seconds).",
    )
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
