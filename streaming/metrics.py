"""The run's Prometheus metrics: one registry, a collector per component, the endpoint.

The composition root (:class:`~streaming.runtime.Runtime`) owns the registry; each part
of a run that counts something gets its own collector registered there
(:func:`register_run`), reading that part's counters at scrape time, as
prometheus_client's custom collectors do. :func:`serve` puts the registry on the
``/metrics`` endpoint (and the Pushgateway, if configured).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry

from conf import AppConfig
from conf.running import RunningConfig
from detectors import Detector
from sinks.inbound.metrics_server import EXPLAIN_PATH, HEALTH_PATH, Explainer, MetricsEndpoint
from sinks.prometheus import (
    ActiveAlerts,
    AlertCollector,
    ConfigCollector,
    DeliveryCollector,
    PipelineCollector,
    ProgressCollector,
    Pusher,
    ReloadCounts,
    SignalCollector,
    SlackActionCounts,
    SlackActionsCollector,
)
from streaming.delivery import Outputs, PipelineStats
from streaming.listener import ProgressLogger

log = logging.getLogger("flinkwatch")


def register_run(
    registry: CollectorRegistry,
    running: RunningConfig,
    outputs: Outputs,
    stats: PipelineStats,
    progress: ProgressLogger,
    reloads: ReloadCounts | None = None,
    actions: SlackActionCounts | None = None,
) -> None:
    """Register the collector of each part of a run with ``registry``.

    Args:
        registry: The run's one registry.
        running: The config in force (the cluster label, the watermark delay).
        outputs: The detect query's outputs: open incidents, sends, signals.
        stats: The queries' counters.
        progress: The queries' latest progress.
        reloads: The config watcher's counts (``None``: no file is watched).
        actions: The Slack buttons' counts (``None``: they are off; counted at 0).
    """

    def cluster() -> str:
        return running.current.cluster

    active = next(o for o in outputs.observers if isinstance(o, ActiveAlerts))
    registry.register(AlertCollector(active, cluster))
    registry.register(DeliveryCollector(outputs))

    def catalog() -> Mapping[str, type[Detector[Any, Any]]]:
        return running.catalog

    registry.register(SlackActionsCollector(actions, catalog))
    if outputs.signals is not None:
        registry.register(SignalCollector(outputs.signals, cluster, catalog))
    registry.register(PipelineCollector(stats, catalog))
    registry.register(ConfigCollector(running, reloads))
    registry.register(ProgressCollector(progress))


def serve(
    cfg: AppConfig,
    endpoint: MetricsEndpoint,
    registry: CollectorRegistry,
    progress: ProgressLogger,
    running: RunningConfig,
    explainer: Explainer | None = None,
) -> None:
    """Serve ``/metrics`` and the health answer of the run (and push, if configured).

    With ``explainer``, ``/explain`` answers ``flinkwatch explain --url`` too.
    """
    push = cfg.metrics.pushgateway
    if push.url:
        Pusher(
            registry, push.url, push.job, push.interval_s, lambda: running.current.cluster
        ).start()
        log.info("metrics: pushing to %s every %.0f s", push.url, push.interval_s)
    try:
        server = endpoint.serve(
            registry, progress_age_s=progress.progress_age_s, explainer=explainer
        )
    except OSError as exc:
        log.error(
            "metrics: cannot listen on %s:%d or health port %s (%s); running without /metrics",
            cfg.metrics.host,
            cfg.metrics.port,
            cfg.metrics.health_port,
            exc,
        )
        return
    log.info("metrics: %s %s", server.url, endpoint.describe())
    log.info(
        "health: %s answers 503 after %.0f s without progress of the detect query",
        server.health_url or server.url.removesuffix("/metrics") + HEALTH_PATH,
        cfg.metrics.health_max_age_s,
    )
    if explainer is not None:
        log.info(
            "explain: %s answers flinkwatch explain --url",
            server.url.removesuffix("/metrics") + EXPLAIN_PATH,
        )
