"""Prometheus exporter of flinkwatch's own state, served from the driver.

A collector per component reads, at scrape time, the counters that component already
keeps, as prometheus_client's custom collectors do: the open incidents
(:class:`AlertCollector` over :class:`ActiveAlerts`, an alert observer seeded from the
ledger), sends per sink (:class:`DeliveryCollector`), the Slack buttons
(:class:`SlackActionsCollector`), the detectors' signals per entity
(:class:`SignalCollector` over :class:`SignalBoard`), events, dead letters and failures
(:class:`PipelineCollector`), config reloads (:class:`ConfigCollector`) and the latest
progress of each query (:class:`ProgressCollector`). The composition root registers each
with the run's one registry (:mod:`streaming.metrics`). Nothing is counted twice and
nothing runs on the executors.

Every label is bounded: ``detector`` (registered detectors), ``severity`` (3 values),
``status`` (3), ``kind`` (the parser's event kinds), ``reason`` (dead-letter reasons),
``outcome`` (a handful each), ``query`` (2), ``sink`` (2), ``cause`` (2), ``silence``
(configured silences), ``cluster`` (1). Entity labels (``job_id``, ``job_name``,
``tm_id``, ``host``) appear only on the open-incident gauge, whose series go away when the
incident resolves, and on the signal gauges, whose series go away when the detector
forgets the entity (idle TTL).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from prometheus_client import push_to_gateway
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from conf.running import RunningConfig
from detectors import REGISTRY, AlertStatus, Detector
from sinks.base import AlertObserver, Transition

log = logging.getLogger(__name__)

#: The detectors and rules that run, by name (the running config's catalog, read at each
#: scrape: a rule a reload adds has its series from then on).
Catalog = Callable[[], Mapping[str, type[Detector[Any, Any]]]]


def builtins() -> Mapping[str, type[Detector[Any, Any]]]:
    """The built-in detectors (a :data:`Catalog` for a run without rules)."""
    return REGISTRY


def _labels(catalog: Catalog, counted: Iterable[str]) -> list[str]:
    # Every series of what runs starts at 0, so rate() sees its first count; a name
    # counted once (a rule a reload removed) keeps its series: a counter never vanishes
    # while the process lives.
    return sorted(set(catalog()) | set(counted))


#: ``outcome`` of ``flinkwatch_slack_actions_total`` (sinks.inbound.slack_actions counts them).
SLACK_ACTION_OUTCOMES = (
    "acted",
    "repeated",
    "unknown_incident",
    "refused",
    "forged",
    "stale",
    "malformed",
    "error",
)

#: ``reason`` of ``flinkwatch_slack_actions_refused_total``: why a signed press was refused.
SLACK_ACTION_REFUSALS = ("team", "external_user", "channel", "user", "unverified")


class ActiveAlerts(AlertObserver):
    """The incidents open now, with their latest transition, and transition counts.

    Seeded from the ledger at start, so a restarted job shows what is still firing.
    """

    name = "prometheus"

    def __init__(self, seed: Sequence[Transition] = ()) -> None:
        self._lock = threading.Lock()
        self._active: dict[str, Transition] = {t.alert.alert_id: t for t in seed}
        self.transitions: Counter[tuple[str, str]] = Counter()
        self.silenced: Counter[tuple[str, str]] = Counter()

    def observe(self, transitions: Sequence[Transition]) -> None:  # noqa: D102
        with self._lock:
            for t in transitions:
                a = t.alert
                self.transitions[(a.detector, a.status.value)] += 1
                if t.silenced_by:
                    self.silenced[(a.detector, t.silenced_by)] += 1
                if a.status is AlertStatus.RESOLVED:
                    self._active.pop(a.alert_id, None)
                else:
                    self._active[a.alert_id] = t

    def snapshot(self) -> list[Transition]:
        """The latest transition of each open incident."""
        with self._lock:
            return list(self._active.values())


class SignalBoard:
    """The detectors' latest signal values per entity, for the signal gauges.

    An entity's series go away when its detector drops it (idle TTL, disabled). At most
    ``max_entities`` entities per detector have series: a flood of (valid-looking) ids must
    not take Prometheus down with it. An entity past the cap gets none until others go
    away; each refused update is counted in :attr:`refused`, by detector.
    """

    def __init__(self, max_entities: int = 5000) -> None:
        self._lock = threading.Lock()
        self._values: dict[tuple[str, str], tuple[dict[str, str], dict[str, float]]] = {}
        self.max_entities = max_entities
        self._per_detector: Counter[str] = Counter()
        self.refused: Counter[str] = Counter()

    def update(
        self, detector: str, entity: str, labels: dict[str, str], values: dict[str, float]
    ) -> None:
        """Replace an entity's values (an empty ``values`` keeps the entity, without values).

        A label the entity already has keeps its value: logs and metrics spell a job's
        name differently (Flink's metric reporters turn ``-`` into ``_``), and a label
        that flips with whichever record came last would start a new series each time.
        """
        with self._lock:
            old = self._values.get((detector, entity))
            if old is not None:
                labels = {**labels, **old[0]}
            elif self._per_detector[detector] >= self.max_entities:
                if not self.refused[detector]:
                    log.warning(
                        "signals: %s has %d entities with series (the cap); new entities get "
                        "none until some go away (flinkwatch_signal_entities_refused_total)",
                        detector,
                        self.max_entities,
                    )
                self.refused[detector] += 1
                return
            else:
                self._per_detector[detector] += 1
            self._values[(detector, entity)] = (labels, values)

    def drop(self, detector: str, entity: str) -> None:
        """Forget an entity."""
        with self._lock:
            if self._values.pop((detector, entity), None) is not None:
                self._per_detector[detector] -= 1

    def snapshot(self) -> list[tuple[str, dict[str, str], dict[str, float]]]:
        """(detector, labels, values) per entity."""
        with self._lock:
            return [(d, lab, dict(v)) for (d, _e), (lab, v) in self._values.items()]


class _Progress(Protocol):
    late_rows_dropped: int
    input_rows_per_s: float
    processed_rows_per_s: float
    batch_ms: int
    state_rows: int
    state_bytes: int
    watermark_ms: int | None


class _Ledger(Protocol):
    @property
    def outcomes(self) -> Mapping[tuple[str, str], int]: ...

    def backlog(self) -> Mapping[str, int]: ...


class _Failures(Protocol):
    @property
    def errors(self) -> Mapping[str, int]: ...


class _Named(Protocol):
    @property
    def name(self) -> str: ...


class DeliveryOutputs(Protocol):
    """What :class:`DeliveryCollector` reads: the detect query's outputs."""

    @property
    def ledger(self) -> _Ledger:
        """Sends by (sink, outcome) and the transitions waiting per sink."""
        ...

    @property
    def in_batch(self) -> _Failures:
        """Failed delivery passes per sink."""
        ...

    def delivery_sinks(self) -> Sequence[_Named]:
        """Every sink a transition is queued for."""
        ...


class PipelineCounts(Protocol):
    """What :class:`PipelineCollector` reads: the queries' counters."""

    @property
    def kinds(self) -> Mapping[str, int]:
        """Parsed events by kind."""
        ...

    @property
    def dead_letters(self) -> Mapping[str, int]:
        """Records that did not parse, by reason."""
        ...

    @property
    def detector_errors(self) -> Mapping[tuple[str, str], int]:
        """Detector calls that raised, by (detector, outcome): skipped, dropped."""
        ...

    @property
    def entities_refused(self) -> Mapping[str, int]:
        """New entities refused past spark.max_entities, by detector."""
        ...

    @property
    def state_damaged(self) -> int:
        """Entities dropped because their saved state could not be read."""
        ...

    @property
    def ledger_errors(self) -> int:
        """Micro-batches the ledger could not record."""
        ...

    @property
    def query_failures(self) -> Mapping[str, int]:
        """Query failures by cause: storage_full, other."""
        ...

    def entities(self) -> int | None:
        """Entities the detect query holds (``None``: not known yet)."""
        ...


class SlackActionCounts(Protocol):
    """What :class:`SlackActionsCollector` reads: the buttons' endpoint's counters."""

    @property
    def outcomes(self) -> Mapping[str, int]:
        """Requests to the endpoint, by outcome."""
        ...

    @property
    def refusals(self) -> Mapping[str, int]:
        """Signed presses refused, by reason."""
        ...

    @property
    def false_alarms(self) -> Mapping[str, int]:
        """Incidents resolved as noise from Slack, by their root detector."""
        ...


class ReloadCounts(Protocol):
    """What :class:`ConfigCollector` reads of the config watcher."""

    @property
    def succeeded(self) -> int:
        """Reloads applied or unchanged."""
        ...

    @property
    def failed(self) -> int:
        """Reloads rejected."""
        ...

    @property
    def active_hash(self) -> str:
        """The content hash of the config in force."""
        ...


class ProgressSource(Protocol):
    """What :class:`ProgressCollector` reads: the latest progress of each query."""

    @property
    def latest(self) -> Mapping[str, _Progress]:
        """Per query name, its latest micro-batch's progress."""
        ...


class AlertCollector(Collector):
    """The open incidents and the transitions the ledger recorded (:class:`ActiveAlerts`)."""

    def __init__(self, active: ActiveAlerts, cluster: Callable[[], str]) -> None:
        self.active = active
        self.cluster = cluster

    def collect(self) -> Iterator[Metric]:  # noqa: D102
        active = GaugeMetricFamily(
            "flinkwatch_alerts_active",
            "Open incidents (1 each) by their latest transition; the series goes away on resolve.",
            labels=[
                "detector",
                "severity",
                "cluster",
                "job_id",
                "job_name",
                "tm_id",
                "host",
                "silenced",
            ],
        )
        cluster = self.cluster()
        for t in self.active.snapshot():
            a = t.alert
            active.add_metric(
                [
                    a.detector,
                    a.severity.value,
                    cluster,
                    a.job_id or "",
                    a.job_name or "",
                    # As Alertmanager's label: an escalation after the TaskManager's logs
                    # respelled its id must not start a second series of the incident.
                    t.tm_id or "",
                    a.host or "",
                    "true" if t.silenced_by else "false",
                ],
                1.0,
            )
        yield active

        transitions = CounterMetricFamily(
            "flinkwatch_alert_transitions",
            "Alert transitions recorded, by detector and status (firing/escalated/resolved).",
            labels=["detector", "status"],
        )
        for (det, status), n in sorted(self.active.transitions.items()):
            transitions.add_metric([det, status], float(n))
        yield transitions

        silenced = CounterMetricFamily(
            "flinkwatch_alerts_silenced",
            "Alert transitions withheld from Slack, by detector and silence name.",
            labels=["detector", "silence"],
        )
        for (det, name), n in sorted(self.active.silenced.items()):
            silenced.add_metric([det, name], float(n))
        yield silenced


class DeliveryCollector(Collector):
    """Sends per sink and outcome, what waits per sink, failed passes (the outputs)."""

    def __init__(self, outputs: DeliveryOutputs) -> None:
        self.outputs = outputs

    def _backlog(self) -> dict[str, int]:
        waiting = self.outputs.ledger.backlog()
        return {s.name: waiting.get(s.name, 0) for s in self.outputs.delivery_sinks()}

    def _sink_errors(self) -> dict[str, int]:
        errors = self.outputs.in_batch.errors
        return {s.name: errors.get(s.name, 0) for s in self.outputs.delivery_sinks()}

    def collect(self) -> Iterator[Metric]:  # noqa: D102
        sends = CounterMetricFamily(
            "flinkwatch_deliveries",
            "Sends to delivery sinks (slack, file) by outcome: delivered, retry (sink "
            "unavailable, kept in order), unknown (no answer, e.g. 5xx or timeout: asked "
            "about before any resend), failed (refused, skipped), confirmed (found "
            "delivered after a crash or an unknown outcome), resent_unconfirmed (sent "
            "again without being able to ask), stale (withheld as older than "
            "output.page_max_age_s), paged_late (withheld while flinkwatch was behind, "
            "paged once it caught up with the incident still open).",
            labels=["sink", "outcome"],
        )
        for (sink, outcome), n in sorted(dict(self.outputs.ledger.outcomes).items()):
            sends.add_metric([sink, outcome], float(n))
        yield sends

        backlog = GaugeMetricFamily(
            "flinkwatch_delivery_backlog",
            "Alert transitions waiting for a delivery sink.",
            labels=["sink"],
        )
        for sink, n in sorted(self._backlog().items()):
            backlog.add_metric([sink], float(n))
        yield backlog

        sink_errors = CounterMetricFamily(
            "flinkwatch_sink_errors",
            "Delivery passes that failed, by sink: file (the alert file could not be "
            "written; retried later, never holds detection back), slack (Slack unavailable).",
            labels=["sink"],
        )
        for sink, n in sorted(self._sink_errors().items()):
            sink_errors.add_metric([sink], float(n))
        yield sink_errors


class SlackActionsCollector(Collector):
    """The Slack buttons' requests, refusals and false alarms (all 0 while they are off)."""

    def __init__(self, actions: SlackActionCounts | None, catalog: Catalog = builtins) -> None:
        self.actions = actions
        self.catalog = catalog

    def collect(self) -> Iterator[Metric]:  # noqa: D102
        # Every series starts at 0 (both labels are bounded), so rate() sees the first one.
        noise = self.actions.false_alarms if self.actions is not None else {}
        alarms = CounterMetricFamily(
            "flinkwatch_false_alarms",
            "Incidents resolved as noise from Slack (the button), by their root detector.",
            labels=["detector"],
        )
        for det in _labels(self.catalog, noise):
            alarms.add_metric([det], float(noise.get(det, 0)))
        yield alarms
        # Without the endpoint (no slack.interactivity_port) every outcome stays at 0.
        seen = self.actions.outcomes if self.actions is not None else {}
        actions = CounterMetricFamily(
            "flinkwatch_slack_actions",
            "Requests to the Slack interactivity endpoint by outcome: acted, repeated (changed "
            "nothing: already done, or Slack sending a press again), unknown_incident, refused "
            "(a signed press from elsewhere or by someone not allowed; by reason in "
            "flinkwatch_slack_actions_refused_total), forged "
            "(unsigned or a bad signature: 401), stale (timestamp more than 5 min off, a replay: "
            "401), malformed (signed but not a press on our buttons: 400), error (not recorded: "
            "500).",
            labels=["outcome"],
        )
        for outcome in SLACK_ACTION_OUTCOMES:
            actions.add_metric([outcome], float(seen.get(outcome, 0)))
        yield actions
        no = self.actions.refusals if self.actions is not None else {}
        refused = CounterMetricFamily(
            "flinkwatch_slack_actions_refused",
            "Signed button presses refused, by reason: team (another workspace or "
            "organisation), external_user (a Slack Connect user of an organisation not in "
            "slack.actions.allowed_teams), channel (not the incident's message), user (not in "
            "slack.actions.allowed_users or allowed_usergroups), unverified (Slack could not "
            "be asked).",
            labels=["reason"],
        )
        for reason in SLACK_ACTION_REFUSALS:
            refused.add_metric([reason], float(no.get(reason, 0)))
        yield refused


class SignalCollector(Collector):
    """The detectors' per-entity signal gauges (:class:`SignalBoard`), and what it refused."""

    def __init__(
        self, board: SignalBoard, cluster: Callable[[], str], catalog: Catalog = builtins
    ) -> None:
        self.board = board
        self.cluster = cluster
        self.catalog = catalog

    def collect(self) -> Iterator[Metric]:  # noqa: D102
        yield from signal_families(self.board, self.cluster(), self.catalog())
        refused = CounterMetricFamily(
            "flinkwatch_signal_entities_refused",
            "Signal updates of entities past metrics.max_signal_entities (per detector), "
            "which got no series.",
            labels=["detector"],
        )
        for det in _labels(self.catalog, self.board.refused):
            refused.add_metric([det], float(self.board.refused.get(det, 0)))
        yield refused


class PipelineCollector(Collector):
    """The queries' counters: events, dead letters, detector errors, entities, failures."""

    def __init__(self, stats: PipelineCounts, catalog: Catalog = builtins) -> None:
        self.stats = stats
        self.catalog = catalog

    def collect(self) -> Iterator[Metric]:  # noqa: D102
        events = CounterMetricFamily(
            "flinkwatch_events", "Parsed events, by kind.", labels=["kind"]
        )
        for kind, n in sorted(self.stats.kinds.items()):
            events.add_metric([kind], float(n))
        yield events

        dead = CounterMetricFamily(
            "flinkwatch_dead_letters",
            "Records that did not parse, by reason (kept in the dead-letter sink).",
            labels=["reason"],
        )
        for reason, n in sorted(self.stats.dead_letters.items()):
            dead.add_metric([reason], float(n))
        yield dead

        errors = CounterMetricFamily(
            "flinkwatch_detector_errors",
            "Detector calls that raised, by detector and outcome: skipped (that event or "
            "timer skipped, state kept) or dropped (the entity given up after repeated "
            "failures, its open incident resolved).",
            labels=["detector", "outcome"],
        )
        # Every series starts at 0 (labels are bounded by the registry): a rate() over a
        # counter that appears only with its first error misses that error.
        raised = self.stats.detector_errors
        for det in _labels(self.catalog, (d for d, _ in raised)):
            for outcome in ("skipped", "dropped"):
                errors.add_metric([det, outcome], float(raised.get((det, outcome), 0)))
        yield errors

        refused = CounterMetricFamily(
            "flinkwatch_entities_refused",
            "Entities seen the first time but not watched because the detect query held "
            "spark.max_entities, by detector (counted once per micro-batch they appear in).",
            labels=["detector"],
        )
        refusals = self.stats.entities_refused
        for det in _labels(self.catalog, refusals):
            refused.add_metric([det], float(refusals.get(det, 0)))
        yield refused

        damaged = CounterMetricFamily(
            "flinkwatch_state_damaged",
            "Entities dropped because their saved state in the detect query could not be "
            "read (a damaged value); their open incidents are resolved and they start again "
            "from their next records.",
        )
        damaged.add_metric([], float(self.stats.state_damaged))
        yield damaged

        held = self.stats.entities()
        if held is not None:
            entities = GaugeMetricFamily(
                "flinkwatch_detect_entities",
                "Entities (jobs, TaskManagers, clusters) the detect query holds, as its "
                "shards count them; spark.max_entities caps it.",
            )
            entities.add_metric([], float(held))
            yield entities

        failures = CounterMetricFamily(
            "flinkwatch_query_failures",
            "Query failures, by cause: storage_full (a volume flinkwatch writes is full: "
            "waited out, never counted against spark.max_restarts) or other.",
            labels=["cause"],
        )
        failed_by = self.stats.query_failures
        for cause in ("storage_full", "other"):
            failures.add_metric([cause], float(failed_by.get(cause, 0)))
        yield failures

        ledger = CounterMetricFamily(
            "flinkwatch_ledger_errors",
            "Micro-batches the alert ledger could not record (a full volume, say): each "
            "failed and is run again by Spark when the queries restart.",
        )
        ledger.add_metric([], float(self.stats.ledger_errors))
        yield ledger


class ConfigCollector(Collector):
    """Reloads by outcome, the config in force (its hash) and its watermark delay."""

    def __init__(self, running: RunningConfig, reloads: ReloadCounts | None = None) -> None:
        self.running = running
        self.reloads = reloads

    def collect(self) -> Iterator[Metric]:  # noqa: D102
        ok, failed = (self.reloads.succeeded, self.reloads.failed) if self.reloads else (0, 0)
        reloads = CounterMetricFamily(
            "flinkwatch_config_reloads",
            "Config file reloads, by outcome (success: applied or unchanged; failure: rejected).",
            labels=["outcome"],
        )
        reloads.add_metric(["success"], float(ok))
        reloads.add_metric(["failure"], float(failed))
        yield reloads

        info = GaugeMetricFamily(
            "flinkwatch_config_info", "The config in force (its content hash).", labels=["hash"]
        )
        info.add_metric([(self.reloads.active_hash if self.reloads else "") or "default"], 1.0)
        yield info

        delay = GaugeMetricFamily(
            "flinkwatch_watermark_delay_seconds",
            "Configured lateness allowed before events are dropped (spark.watermark_delay_s).",
        )
        delay.add_metric([], self.running.current.spark.watermark_delay_s)
        yield delay


class ProgressCollector(Collector):
    """Each query's latest progress: rates, batch time, state, watermark lag, late rows."""

    def __init__(self, progress: ProgressSource, clock: Callable[[], float] = time.time) -> None:
        self.progress = progress
        self.clock = clock

    def collect(self) -> Iterator[Metric]:  # noqa: D102
        yield from self._families(dict(self.progress.latest), self.clock())

    @staticmethod
    def _families(progress: Mapping[str, Any], now_s: float) -> Iterator[Metric]:
        specs = [
            (
                "flinkwatch_input_rows_per_second",
                "Input rows/s of the last micro-batch.",
                "input_rows_per_s",
                1.0,
            ),
            (
                "flinkwatch_processed_rows_per_second",
                "Processed rows/s of the last micro-batch.",
                "processed_rows_per_s",
                1.0,
            ),
            (
                "flinkwatch_batch_duration_seconds",
                "Duration of the last micro-batch.",
                "batch_ms",
                0.001,
            ),
            ("flinkwatch_state_rows", "Rows in the query's state store.", "state_rows", 1.0),
            (
                "flinkwatch_state_bytes",
                "Size of the query's state store: RocksDB files on disk plus reported memory.",
                "state_bytes",
                1.0,
            ),
        ]
        for name, doc, attr, scale in specs:
            fam = GaugeMetricFamily(name, doc, labels=["query"])
            for query, p in sorted(progress.items()):
                fam.add_metric([query], float(getattr(p, attr)) * scale)
            yield fam
        lag = GaugeMetricFamily(
            "flinkwatch_watermark_lag_seconds",
            "Wall clock minus the query's event-time watermark: how far detection is behind "
            "(negative: the watermark runs ahead of the clock, records stamped in the future).",
            labels=["query"],
        )
        for query, p in sorted(progress.items()):
            wm = getattr(p, "watermark_ms", None)
            if wm:
                # Signed: a watermark ahead of the wall clock means some host's clock moved
                # event time forward, and records at the right time are being dropped.
                lag.add_metric([query], now_s - wm / 1000)
        yield lag
        late = CounterMetricFamily(
            "flinkwatch_late_rows_dropped",
            "Rows the detectors never saw because they were older than the watermark.",
            labels=["query"],
        )
        for query, p in sorted(progress.items()):
            late.add_metric([query], float(getattr(p, "late_rows_dropped", 0)))
        yield late


def signal_families(
    board: SignalBoard, cluster: str, catalog: Mapping[str, type[Detector[Any, Any]]] = REGISTRY
) -> Iterator[Metric]:
    """One gauge per declared detector signal, one series per entity."""
    by_detector: dict[str, list[tuple[dict[str, str], dict[str, float]]]] = {}
    for det, labels, values in board.snapshot():
        by_detector.setdefault(det, []).append((labels, values))
    for name, cls in sorted(catalog.items()):
        keys = (
            ["cluster", "job_id", "job_name"] if cls.scope != "tm" else ["cluster", "tm_id", "host"]
        )
        for signal, doc in cls.signals.items():
            fam = GaugeMetricFamily(f"flinkwatch_{signal}", f"{doc} ({name})", labels=keys)
            for labels, values in by_detector.get(name, []):
                if signal in values:
                    row = {**labels, "cluster": cluster}
                    fam.add_metric([row.get(k) or "" for k in keys], float(values[signal]))
            yield fam


class Pusher:
    """Pushes the registry to a Pushgateway every ``interval_s`` (for push-based setups).

    The grouping key carries the cluster, so several flinkwatch instances do not
    overwrite each other. Failures are logged once per outage, not once per push.
    """

    def __init__(
        self,
        registry: CollectorRegistry,
        url: str,
        job: str,
        interval_s: float,
        cluster: Callable[[], str],
    ) -> None:
        self.registry = registry
        self.url = url
        self.job = job
        self.interval_s = interval_s
        self.cluster = cluster
        self.failing = False
        self.pushes = 0
        self._stop = threading.Event()

    def push_once(self) -> bool:
        """One push; True when the gateway took it."""
        try:
            push_to_gateway(
                self.url,
                job=self.job,
                registry=self.registry,
                grouping_key={"cluster": self.cluster()},
                timeout=max(self.interval_s, 5.0),
            )
        except Exception as exc:
            if not self.failing:
                log.warning("pushgateway %s: push failed (%s); will keep trying", self.url, exc)
            self.failing = True
            return False
        if self.failing:
            log.info("pushgateway %s: pushing again", self.url)
        self.failing = False
        self.pushes += 1
        return True

    def start(self) -> Pusher:
        """Push in a daemon thread until :meth:`stop`."""

        def run() -> None:
            while not self._stop.wait(self.interval_s):
                self.push_once()

        threading.Thread(target=run, name="flinkwatch-pushgateway", daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop pushing."""
        self._stop.set()
