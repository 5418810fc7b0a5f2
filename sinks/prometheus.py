"""Prometheus exporter of flinkwatch's own state, served from the driver.

One custom collector reads, at scrape time, the counters the pipeline already keeps
(events by kind, dead letters by reason, config reloads), the latest progress of each
query, and the alerts currently firing, which :class:`ActiveAlerts` (an alert sink)
maintains. Nothing is counted twice and nothing runs on the executors.

Every label is bounded: ``detector`` (registered detectors), ``severity`` (3 values),
``status`` (2), ``kind`` (the parser's event kinds), ``reason`` (dead-letter reasons),
``outcome`` (2), ``query`` (2); ``job_id``/``tm_id`` only on the firing-alert gauge, whose
series disappear when the alert resolves.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from detectors import Alert, AlertStatus
from sinks.base import AlertSink


class ActiveAlerts(AlertSink):
    """Keeps the set of firing alerts and counts transitions (replay-safe by batch id)."""

    name = "prometheus"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active: dict[str, Alert] = {}
        self._last_batch = -1
        self.transitions: Counter[tuple[str, str]] = Counter()

    def deliver(self, batch_id: int, alerts: Sequence[Alert]) -> None:  # noqa: D102
        with self._lock:
            if batch_id <= self._last_batch:
                return
            self._last_batch = batch_id
            for a in alerts:
                self.transitions[(a.detector, a.status.value)] += 1
                if a.status is AlertStatus.FIRING:
                    self._active[a.alert_id] = a
                else:
                    self._active.pop(a.alert_id, None)

    def snapshot(self) -> list[Alert]:
        """The alerts firing now."""
        with self._lock:
            return list(self._active.values())


class _Progress(Protocol):
    late_rows_dropped: int
    input_rows_per_s: float
    processed_rows_per_s: float
    batch_ms: int
    state_rows: int
    state_bytes: int


@dataclass
class Sources:
    """Where the collector reads from; each is a callable so it sees current values."""

    kinds: Callable[[], Mapping[str, int]]
    dead_letters: Callable[[], Mapping[str, int]]
    progress: Callable[[], Mapping[str, _Progress]]
    reloads: Callable[[], tuple[int, int]]
    config_hash: Callable[[], str]
    active: ActiveAlerts


class FlinkwatchCollector(Collector):
    """Builds every flinkwatch_* metric family at scrape time."""

    def __init__(self, sources: Sources) -> None:
        self.s = sources

    def collect(self) -> Iterator[Metric]:  # noqa: D102
        active = GaugeMetricFamily(
            "flinkwatch_alerts_active",
            "Alerts firing now (1 per alert); the series goes away when the alert resolves.",
            labels=["detector", "severity", "job_id", "tm_id"],
        )
        for a in self.s.active.snapshot():
            active.add_metric([a.detector, a.severity.value, a.job_id or "", a.tm_id or ""], 1.0)
        yield active

        transitions = CounterMetricFamily(
            "flinkwatch_alert_transitions",
            "Alert transitions emitted, by detector and status (firing/resolved).",
            labels=["detector", "status"],
        )
        for (det, status), n in sorted(self.s.active.transitions.items()):
            transitions.add_metric([det, status], float(n))
        yield transitions

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

        yield from self._progress_families(self.s.progress())

    @staticmethod
    def _progress_families(progress: Mapping[str, Any]) -> Iterator[Metric]:
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
                "Memory used by the query's state store.",
                "state_bytes",
                1.0,
            ),
        ]
        for name, doc, attr, scale in specs:
            fam = GaugeMetricFamily(name, doc, labels=["query"])
            for query, p in sorted(progress.items()):
                fam.add_metric([query], float(getattr(p, attr)) * scale)
            yield fam
        late = CounterMetricFamily(
            "flinkwatch_late_rows_dropped",
            "Rows the detectors never saw because they were older than the watermark.",
            labels=["query"],
        )
        for query, p in sorted(progress.items()):
            late.add_metric([query], float(getattr(p, "late_rows_dropped", 0)))
        yield late
