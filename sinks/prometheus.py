"""Prometheus exporter of flinkwatch's own state, served from the driver.

One custom collector reads, at scrape time, the counters the pipeline already keeps
(events by kind, dead letters by reason, config reloads, sends per sink), the latest
progress of each query, the open incidents (:class:`ActiveAlerts`, an alert
observer seeded from the ledger) and the detectors' signals per entity
(:class:`SignalBoard`). Nothing is counted twice and nothing runs on the executors.

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
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from prometheus_client import push_to_gateway
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from detectors import REGISTRY, AlertStatus
from sinks.base import AlertObserver, Transition

log = logging.getLogger(__name__)

#: ``outcome`` of ``flinkwatch_slack_actions_total`` (sinks.slack_actions counts them).
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


def _nothing() -> Mapping[Any, int]:
    return {}


@dataclass
class Sources:
    """Where the collector reads from; each is a callable so it sees current values."""

    kinds: Callable[[], Mapping[str, int]]
    dead_letters: Callable[[], Mapping[str, int]]
    progress: Callable[[], Mapping[str, _Progress]]
    reloads: Callable[[], tuple[int, int]]
    config_hash: Callable[[], str]
    active: ActiveAlerts
    cluster: Callable[[], str] = lambda: "default"
    signals: SignalBoard | None = None
    #: Sends by (sink, outcome): delivered, failed, retry, unknown, confirmed,
    #: resent_unconfirmed, stale, paged_late.
    deliveries: Callable[[], Mapping[tuple[str, str], int]] = _nothing
    #: Transitions waiting per delivery sink.
    backlog: Callable[[], Mapping[str, int]] = _nothing
    #: Detector calls that raised, by (detector, outcome): skipped, dropped.
    detector_errors: Callable[[], Mapping[tuple[str, str], int]] = _nothing
    #: New entities refused past spark.max_entities, by detector.
    entities_refused: Callable[[], Mapping[str, int]] = _nothing
    #: Entities dropped because their saved state could not be read.
    state_damaged: Callable[[], int] = lambda: 0
    #: Failed delivery passes per delivery sink (every sink named, failing or not).
    sink_errors: Callable[[], Mapping[str, int]] = _nothing
    #: Micro-batches the ledger could not record.
    ledger_errors: Callable[[], int] = lambda: 0
    #: Query failures by cause: storage_full, other.
    query_failures: Callable[[], Mapping[str, int]] = _nothing
    #: Requests to the Slack interactivity endpoint, by outcome (``None``: it is off).
    slack_actions: Callable[[], Mapping[str, int]] | None = None
    #: Signed presses refused, by reason (team, external_user, channel, user, unverified).
    slack_refusals: Callable[[], Mapping[str, int]] = _nothing
    #: Incidents resolved as noise from Slack, by their root detector.
    false_alarms: Callable[[], Mapping[str, int]] = _nothing
    #: Entities the detect query holds (``None``: not known yet).
    entities: Callable[[], int | None] = lambda: None
    watermark_delay_s: Callable[[], float] = lambda: 0.0
    clock: Callable[[], float] = time.time


class FlinkwatchCollector(Collector):
    """Builds every flinkwatch_* metric family at scrape time."""

    def __init__(self, sources: Sources) -> None:
        self.s = sources

    def collect(self) -> Iterator[Metric]:  # noqa: D102
        yield from self._alert_families()
        if self.s.signals is not None:
            yield from signal_families(self.s.signals, self.s.cluster())
        yield from self._refused_family()
        yield from self._pipeline_families()
        yield from self._progress_families(self.s.progress(), self.s.clock())

    def _alert_families(self) -> Iterator[Metric]:
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
        cluster = self.s.cluster()
        for t in self.s.active.snapshot():
            a = t.alert
            active.add_metric(
                [
                    a.detector,
                    a.severity.value,
                    cluster,
                    a.job_id or "",
                    a.job_name or "",
                    a.tm_id or "",
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
        for (det, status), n in sorted(self.s.active.transitions.items()):
            transitions.add_metric([det, status], float(n))
        yield transitions

        silenced = CounterMetricFamily(
            "flinkwatch_alerts_silenced",
            "Alert transitions withheld from Slack, by detector and silence name.",
            labels=["detector", "silence"],
        )
        for (det, name), n in sorted(self.s.active.silenced.items()):
            silenced.add_metric([det, name], float(n))
        yield silenced

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
        for (sink, outcome), n in sorted(self.s.deliveries().items()):
            sends.add_metric([sink, outcome], float(n))
        yield sends

        backlog = GaugeMetricFamily(
            "flinkwatch_delivery_backlog",
            "Alert transitions waiting for a delivery sink.",
            labels=["sink"],
        )
        for sink, n in sorted(self.s.backlog().items()):
            backlog.add_metric([sink], float(n))
        yield backlog

        sink_errors = CounterMetricFamily(
            "flinkwatch_sink_errors",
            "Delivery passes that failed, by sink: file (the alert file could not be "
            "written; retried later, never holds detection back), slack (Slack unavailable).",
            labels=["sink"],
        )
        for sink, n in sorted(self.s.sink_errors().items()):
            sink_errors.add_metric([sink], float(n))
        yield sink_errors

        yield from self._slack_action_families()

        ledger = CounterMetricFamily(
            "flinkwatch_ledger_errors",
            "Micro-batches the alert ledger could not record (a full volume, say): each "
            "failed and is run again by Spark when the queries restart.",
        )
        ledger.add_metric([], float(self.s.ledger_errors()))
        yield ledger

    def _slack_action_families(self) -> Iterator[Metric]:
        # Every series starts at 0 (both labels are bounded), so rate() sees the first one.
        noise = self.s.false_alarms()
        alarms = CounterMetricFamily(
            "flinkwatch_false_alarms",
            "Incidents resolved as noise from Slack (the button), by their root detector.",
            labels=["detector"],
        )
        for det in sorted(REGISTRY):
            alarms.add_metric([det], float(noise.get(det, 0)))
        yield alarms
        # Without the endpoint (no slack.interactivity_port) every outcome stays at 0.
        seen = self.s.slack_actions() if self.s.slack_actions is not None else {}
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
        no = self.s.slack_refusals()
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

    def _refused_family(self) -> Iterator[Metric]:
        board = self.s.signals
        if board is None:
            return
        refused = CounterMetricFamily(
            "flinkwatch_signal_entities_refused",
            "Signal updates of entities past metrics.max_signal_entities (per detector), "
            "which got no series.",
            labels=["detector"],
        )
        for det in sorted(REGISTRY):
            refused.add_metric([det], float(board.refused.get(det, 0)))
        yield refused

    def _pipeline_families(self) -> Iterator[Metric]:
        events = CounterMetricFamily(
            "flinkwatch_events", "Parsed events, by kind.", labels=["kind"]
        )
        for kind, n in sorted(self.s.kinds().items()):
            events.add_metric([kind], float(n))
        yield events

        dead = CounterMetricFamily(
            "flinkwatch_dead_letters",
            "Records that did not parse, by reason (kept in the dead-letter sink).",
            labels=["reason"],
        )
        for reason, n in sorted(self.s.dead_letters().items()):
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
        raised = self.s.detector_errors()
        for det in sorted(REGISTRY):
            for outcome in ("skipped", "dropped"):
                errors.add_metric([det, outcome], float(raised.get((det, outcome), 0)))
        yield errors

        refused = CounterMetricFamily(
            "flinkwatch_entities_refused",
            "Entities seen the first time but not watched because the detect query held "
            "spark.max_entities, by detector (counted once per micro-batch they appear in).",
            labels=["detector"],
        )
        refusals = self.s.entities_refused()
        for det in sorted(REGISTRY):
            refused.add_metric([det], float(refusals.get(det, 0)))
        yield refused

        damaged = CounterMetricFamily(
            "flinkwatch_state_damaged",
            "Entities dropped because their saved state in the detect query could not be "
            "read (a damaged value); their open incidents are resolved and they start again "
            "from their next records.",
        )
        damaged.add_metric([], float(self.s.state_damaged()))
        yield damaged

        held = self.s.entities()
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
        failed_by = self.s.query_failures()
        for cause in ("storage_full", "other"):
            failures.add_metric([cause], float(failed_by.get(cause, 0)))
        yield failures

        ok, failed = self.s.reloads()
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
        info.add_metric([self.s.config_hash() or "default"], 1.0)
        yield info

        delay = GaugeMetricFamily(
            "flinkwatch_watermark_delay_seconds",
            "Configured lateness allowed before events are dropped (spark.watermark_delay_s).",
        )
        delay.add_metric([], self.s.watermark_delay_s())
        yield delay

    @staticmethod
    def _progress_families(progress: Mapping[str, Any], now_s: float) -> Iterator[Metric]:
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


def signal_families(board: SignalBoard, cluster: str) -> Iterator[Metric]:
    """One gauge per declared detector signal, one series per entity."""
    by_detector: dict[str, list[tuple[dict[str, str], dict[str, float]]]] = {}
    for det, labels, values in board.snapshot():
        by_detector.setdefault(det, []).append((labels, values))
    for name, cls in sorted(REGISTRY.items()):
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
