"""The composition root: every driver-side part of a run, built once from one config.

``flinkwatch run`` (and the demo, through it), ``flinkwatch replay``, the benchmark and
its cluster drain all build what sits around the queries here, the same way:

* the alert ledger (the record every delivery is made from);
* the delivery sinks: the alert file; Slack, with a sink per further channel that
  routes with ``continue`` can add; Alertmanager; each webhook;
* the outputs of the detect query (:class:`~streaming.delivery.Outputs`): the Prometheus
  views, the console, the dispatcher that drains the sinks that talk over the network,
  the correlator, the command line's silences;
* the Alertmanager re-sender, the Slack buttons' endpoint, the ledger's pruning.

Their Spark session is asked for the one way, as a :class:`~streaming.session.SessionSpec`
(``flinkwatch run`` and the benchmark's from the config's ``spark`` section, a replay's
its own); a run's progress listener is added with :meth:`Runtime.listen`.

One config holder, :attr:`Runtime.running` (:class:`~conf.running.RunningConfig`): every
part that lives across query restarts reads the config through it at each use, and a
reload puts the new config in force with one call, :meth:`Runtime.swap`. One Prometheus
registry, :attr:`Runtime.registry`, where each part registers its own collector
(:meth:`Runtime.register_metrics`). The queries read the same holder when they start
(:class:`~streaming.app.Pipeline`); :func:`~streaming.supervise.run_forever` restarts them
around :meth:`Runtime.swap`. :meth:`Runtime.close` stops everything in the one order that
is safe.

Example:
    >>> with Runtime(cfg) as runtime:  # doctest: +SKIP
    ...     pipeline = runtime.pipeline(spark)
    ...     run_forever(pipeline, on_reload=runtime.swap)
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from prometheus_client import CollectorRegistry

from conf import AppConfig, OutputConfig
from conf.destinations import SlackActionsConfig
from conf.errors import FlinkwatchError
from conf.running import RunningConfig
from detectors.correlation import Correlator
from sinks import (
    AlertLedger,
    DeliverySink,
    JsonLinesAlertSink,
    LedgerError,
    LogAlertSink,
    RetryableDeliveryError,
)
from sinks.alertmanager import AlertmanagerSink, Resender, alertmanager_sink
from sinks.besteffort import BestEffort
from sinks.dispatch import Dispatcher, deliver
from sinks.inbound.slack_actions import PATH, SlackActions, signing_secret
from sinks.prometheus import ActiveAlerts, SignalBoard
from sinks.silence_store import SilenceStore
from sinks.slack import SlackBotSink, further_channels, slack_sink
from sinks.slack.chart import slack_chart_sink
from sinks.webhook import WebhookSink, webhook_sinks
from streaming import checkpoints
from streaming.app import Pipeline
from streaming.delivery import Outputs
from streaming.listener import ProgressLogger
from streaming.metrics import register_run
from streaming.session import stop_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.listener import StreamingQueryListener

    from detectors import Alert
    from detectors.correlation import IncidentView
    from sinks.inbound.http_server import AppServer
    from sinks.prometheus import ReloadCounts

# The run's own lines, under the name they always had ("flinkwatch", the command line's).
log = logging.getLogger("flinkwatch")

#: How often the ledger forgets closed incidents past ``output.ledger_retention_days``.
PRUNE_EVERY_S = 6 * 3600.0


class StartError(FlinkwatchError):
    """A part of the run could not start: the ledger's volume, the buttons' port.

    The message says which and why; the run stops (exit code 1).
    """


class Runtime:
    """Everything a run keeps on the driver around its queries, and the config they read.

    Built in the order a run starts them: the buttons' signing secret, the ledger, the
    sinks (each secret read from the environment), the check of the Slack routes and the
    ledger's pruning, the outputs with their dispatcher, the buttons' endpoint, the
    Alertmanager re-sender. A part that cannot be built stops the build, and what was
    already started is stopped again.

    Args:
        cfg: The config in force at the start.
        replay: A replay's outputs: the ledger and the alert file only (with the
            correlator). No receiver over the network, no Prometheus view, no console
            line, no command-line silence: a replay says what the detectors say about
            its files, whatever the live job's state holds.
        ledger_path: The ledger (default ``output.ledger_path``; a replay's in its
            work directory).
        alerts_path: The alert file. Default ``output.alerts_path``, rotated as
            ``output`` says; given (a replay's ``--output``), at the sink's own bounds.
        env: Where the secrets' variables are read (default: the environment).
        start: False builds every part and starts none: no thread, no socket, no request
            (what a test looks at).
        registry: The run's Prometheus registry (default: a new one).

    Raises:
        ConfigError: a secret's variable is empty or unset (names the field).
        StartError: the ledger cannot be opened, or the buttons' port not bound.
    """

    def __init__(
        self,
        cfg: AppConfig,
        *,
        replay: bool = False,
        ledger_path: Path | None = None,
        alerts_path: Path | None = None,
        env: Mapping[str, str] | None = None,
        start: bool = True,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.running = RunningConfig(cfg)
        self.registry = registry if registry is not None else CollectorRegistry()
        self.slack: DeliverySink | None = None
        self.alertmanager: AlertmanagerSink | None = None
        self.webhooks: list[WebhookSink] = []
        #: The sinks of the further channels routes with ``continue`` can add.
        self.further: list[SlackBotSink] = []
        self.resender: Resender | None = None
        self.actions: SlackActions | None = None
        self.actions_server: AppServer | None = None
        self._check_routes: Callable[[AppConfig], None] = _no_check
        self._pruning = threading.Event()
        self._spark: tuple[SparkSession, StreamingQueryListener] | None = None
        self._closed = False
        self._left = ""
        secret = None if replay else buttons_secret(cfg, env)
        path = ledger_path or cfg.output.ledger_path
        try:
            self.ledger = AlertLedger(path)
        except (OSError, sqlite3.Error) as exc:  # a full or read-only volume, say
            msg = f"alert ledger {path} cannot be opened: {exc}"
            raise StartError(msg) from exc
        self.outputs = Outputs(ledger=self.ledger)  # until built: close() needs it
        try:
            if replay:
                self.outputs = Outputs(
                    ledger=self.ledger,
                    sinks=[alerts_file(cfg.output, alerts_path)],
                    correlator=Correlator(cfg.correlation),
                )
            else:
                self._build(cfg, alerts_path, env, secret, start)
        except BaseException:
            self.close()
            raise

    def _build(
        self,
        cfg: AppConfig,
        alerts_path: Path | None,
        env: Mapping[str, str] | None,
        secret: str | None,
        start: bool,
    ) -> None:
        # Each reads the config through self.cfg at each use: a swap reaches them all.
        runbook = self.running.runbook  # a rule a reload adds has its own in every sink
        self.slack = slack_sink(
            lambda: self.cfg.slack, lambda: self.cfg.cluster, self.ledger, env, runbook
        )
        self.alertmanager = alertmanager_sink(
            lambda: self.cfg.alertmanager, lambda: self.cfg.cluster, self.ledger, env, runbook
        )
        self.webhooks = webhook_sinks(cfg.webhooks, lambda: self.cfg.cluster, env, runbook)
        if start:
            self._check_routes = route_checks(self.slack)
            self._check_routes(cfg)
            prune_ledger(self.ledger, lambda: self.cfg.output.ledger_retention_days, self._pruning)
        # Routes with `continue` take an incident to further channels, each its own sink.
        self.further = further_channels(self.slack)
        # The evidence chart follows the page into its thread: after Slack in the
        # dispatcher's order, one chart a pass.
        chart = slack_chart_sink(self.slack, lambda: self.cfg.slack, render_chart)
        self.outputs = build_outputs(
            cfg,
            self.ledger,
            self.slack,
            self.alertmanager,
            [*self.further, *self.webhooks, *([chart] if chart is not None else [])],
            alerts_path=alerts_path,
            start=start,
        )
        wired = slack_actions(
            cfg,
            self.slack,
            self.outputs,
            secret,
            serve=start,
            access=lambda: self.cfg.slack.actions,
        )
        if wired is not None:
            self.actions, self.actions_server = wired
        if self.alertmanager is not None:
            # Open alerts posted again each interval, or Alertmanager ends them at their endsAt.
            self.resender = Resender(
                self.alertmanager, lambda: self.cfg.alertmanager.resend_interval_s
            )
            if start:
                self.resender.start()

    @property
    def cfg(self) -> AppConfig:
        """The config in force: what every part reads, at each use."""
        return self.running.current

    def swap(self, cfg: AppConfig) -> None:
        """Put ``cfg`` in force: one reference, which every part reads at its next use.

        The correlator takes the new ``correlation`` settings, and the Slack routes are
        checked again when they changed. Settings marked restart-only keep their effect
        from the start (the sinks were made with them).
        """
        self.running.swap(cfg)
        if self.outputs.correlator is not None:
            self.outputs.correlator.params = cfg.correlation
        self._check_routes(cfg)

    def pipeline(self, spark: SparkSession, *, trigger: dict[str, Any] | None = None) -> Pipeline:
        """The live layout's queries (the event bus on Kafka) over these outputs.

        ``trigger``: ``None`` as ``flinkwatch run`` (real-time parsing once caught up);
        the benchmark passes ``{"availableNow": True}`` to drain a backlog.
        """
        out = self.cfg.output
        return Pipeline(
            spark=spark,
            config=self.running,
            outputs=self.outputs,
            checkpoint_dir=checkpoints.open_dir(spark, out.checkpoints),
            deadletter_dir=out.deadletter_path,
            trigger=trigger,
            bus="kafka",
        )

    def register_metrics(
        self, pipeline: Pipeline, progress: ProgressLogger, reloads: ReloadCounts | None
    ) -> None:
        """Register each part's collector with :attr:`registry` (see :mod:`streaming.metrics`)."""
        register_run(
            self.registry,
            self.running,
            self.outputs,
            pipeline.stats,
            progress,
            reloads=reloads,
            actions=self.actions,
        )

    def listen(self, spark: SparkSession) -> ProgressLogger:
        """The run's progress listener, added to ``spark``; :meth:`close` stops both first."""
        progress = ProgressLogger()
        spark.streams.addListener(progress)
        self.attach(spark, progress)
        return progress

    def attach(self, spark: SparkSession, listener: StreamingQueryListener) -> None:
        """Spark and the run's progress listener: :meth:`close` stops them first."""
        self._spark = (spark, listener)

    def close(self) -> str:
        """Stop everything, in order; what the final flush left (said again when called again).

        Spark first, its listener detached while Python still answers the JVM (a progress
        callback into an exited interpreter prints py4j stack traces); the re-sender; the
        buttons' endpoint, before the dispatcher, so no press is taken that could not be
        carried out; the dispatcher; the alert file brought up to the ledger once more;
        the ledger.
        """
        if self._closed:
            return self._left
        self._closed = True
        if self._spark is not None:
            spark, listener = self._spark
            spark.streams.removeListener(listener)
            stop_session(spark)
        self._pruning.set()
        if self.resender is not None:
            self.resender.stop()
        if self.actions_server is not None:
            self.actions_server.close()
        if self.outputs.dispatcher is not None:
            self.outputs.dispatcher.stop()
        self._left = flush(self.outputs)
        self.ledger.close()
        return self._left

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _no_check(_cfg: AppConfig) -> None:
    """No route check (replay, or a runtime that starts nothing)."""


def buttons_secret(cfg: AppConfig, env: Mapping[str, str] | None = None) -> str | None:
    """The Slack app's signing secret when the buttons are on (None when off).

    Raises:
        ConfigError: its variable is empty or unset.
    """
    if cfg.slack.interactivity_port is None:
        return None
    return signing_secret(cfg.slack, env)


def alerts_file(out: OutputConfig, path: Path | None = None) -> JsonLinesAlertSink:
    """The alert file of ``output``, rotated as configured; ``path``: that file, unrotated."""
    if path is not None:
        return JsonLinesAlertSink(path)
    mb = int(out.alerts_file_max_mb * 2**20)
    return JsonLinesAlertSink(out.alerts_path, max_bytes=mb, keep=out.alerts_file_keep)


def build_outputs(
    cfg: AppConfig,
    ledger: AlertLedger,
    slack: DeliverySink | None,
    alertmanager: DeliverySink | None = None,
    others: Sequence[DeliverySink] = (),
    *,
    alerts_path: Path | None = None,
    start: bool = True,
) -> Outputs:
    """The detect query's outputs: the alert file, Prometheus views, the dispatcher.

    The dispatcher drains the sinks that talk to a receiver over the network (Slack,
    Alertmanager, ``others``: Slack's further channels and each webhook), outside the
    micro-batch; each backs off on its own settings. ``start``: the dispatcher's thread.
    """
    out = cfg.output
    file = alerts_file(out, alerts_path)
    try:
        deliver(ledger, file)  # whatever a crash left undelivered
    except (RetryableDeliveryError, LedgerError) as exc:  # a full volume must not stop the start
        log.error("alert file: %s; a later batch tries again", exc)
    active = ActiveAlerts(seed=ledger.active())
    if active.snapshot():
        log.info("%d incidents still open from before the restart", len(active.snapshot()))
    in_batch = BestEffort()  # the alert file's failures, and the dispatcher's counted with them
    dispatcher = None
    slow = [s for s in (slack, alertmanager, *others) if s is not None]
    if slow:
        am = cfg.alertmanager
        backoffs = {"alertmanager": (am.retry_backoff_s, am.max_backoff_s)}
        backoffs |= {w.sink: (w.retry_backoff_s, w.max_backoff_s) for w in cfg.webhooks}
        dispatcher = Dispatcher(
            ledger,
            slow,
            backoff_s=cfg.slack.retry_backoff_s,
            max_backoff_s=cfg.slack.max_backoff_s,
            backoffs=backoffs,
            on_error=in_batch.count,
        )
        if start:
            dispatcher.start()
    # Incidents still taking members continue where the last run left them.
    correlator = Correlator(cfg.correlation)
    correlator.restore(ledger.history())
    return Outputs(
        ledger=ledger,
        sinks=[file],
        observers=[active, LogAlertSink()] if out.console else [active],
        dispatcher=dispatcher,
        signals=SignalBoard(cfg.metrics.max_signal_entities),
        correlator=correlator,
        in_batch=in_batch,
        silences=SilenceStore(out.silences_path),
    )


def slack_actions(
    cfg: AppConfig,
    slack: DeliverySink | None,
    outputs: Outputs,
    secret: str | None,
    *,
    serve: bool = True,
    access: Callable[[], SlackActionsConfig] | None = None,
) -> tuple[SlackActions, AppServer | None] | None:
    """The Slack buttons' endpoint (None when off): the actions, and their server.

    The server is None when not ``serve``-d. ``access`` is who may press, read at each
    press (the config in force); by default ``cfg``'s.

    Raises:
        StartError: the port cannot be bound: the run stops, as the buttons on its
            messages would answer nobody.
    """
    c = cfg.slack
    dispatcher = outputs.dispatcher  # never None beside a bot sink: it drains the sink
    if c.interactivity_port is None or secret is None or dispatcher is None:
        return None
    if not isinstance(slack, SlackBotSink):
        return None
    actions = SlackActions(
        slack,
        outputs.ledger,
        cfg.output.silences_path,
        dispatcher,
        secret,
        access=access or (lambda: c.actions),
    )
    if not serve:
        return actions, None
    host = c.interactivity_host or cfg.metrics.host
    try:
        server = actions.serve(
            host,
            c.interactivity_port,
            max_connections=cfg.metrics.max_connections,
            deadline_s=cfg.metrics.request_deadline_s,
        )
    except OSError as exc:
        msg = f"slack actions: cannot listen on {host}:{c.interactivity_port} ({exc})"
        raise StartError(msg) from exc
    log.info("slack actions: %s%s takes the incident messages' buttons", server.origin, PATH)
    return actions, server


def _in_background(work: Callable[[], object]) -> None:
    threading.Thread(target=work, name="flinkwatch-slack-routes", daemon=True).start()


def route_checks(
    slack: object, run: Callable[[Callable[[], object]], None] = _in_background
) -> Callable[[AppConfig], None]:
    """A function that checks the Slack bot's routes when first called and on each change.

    The check (:meth:`~sinks.slack.SlackBotSink.check_routes`) asks Slack over the
    network, so ``run`` starts it in a daemon thread: neither the start nor a reload
    waits for it. Webhook mode has no routes to check (a webhook is bound to its channel).
    """
    checked: list[object] = []

    def check(cfg: AppConfig) -> None:
        key = (cfg.slack.channel, cfg.slack.routes)
        if isinstance(slack, SlackBotSink) and checked != [key]:
            checked[:] = [key]
            run(slack.check_routes)

    return check


def prune_ledger(
    ledger: AlertLedger, retention_days: Callable[[], float], stop: threading.Event
) -> None:
    """Prune the ledger now and every 6 hours, in a daemon thread, until ``stop`` is set."""

    def prune() -> None:
        while not stop.is_set():
            cutoff = int((time.time() - retention_days() * 86_400) * 1000)
            try:
                n = ledger.prune(older_than_ms=cutoff)
            except Exception:
                log.exception("alert ledger: pruning failed")
            else:
                if n:
                    log.info("alert ledger: forgot %d transitions of closed incidents", n)
            stop.wait(PRUNE_EVERY_S)

    threading.Thread(target=prune, name="flinkwatch-ledger-prune", daemon=True).start()


def flush(outputs: Outputs) -> str:
    """Bring the alert file up to the ledger, once more; say what waits for the next start."""
    for sink in outputs.sinks:
        try:
            deliver(outputs.ledger, sink)
        except (RetryableDeliveryError, LedgerError):
            pass  # a full volume, still: counted and logged by the batches; the next start tries
    try:
        waiting = sum(outputs.ledger.backlog().values())
    except LedgerError:
        return "ledger unreadable"
    return f"{waiting} deliveries wait for the next start" if waiting else "all delivered"


def render_chart(alert: Alert, incident: IncidentView | None = None) -> bytes | None:
    """An alert's evidence chart (:func:`sinks.charts.render`).

    matplotlib is imported at the first chart, not with the runtime: 0.4 s (with what it
    brings) of every command's start (a replay's, ``flinkwatch run``'s), and a run whose
    Slack is off, or a replay, draws none.
    """
    from sinks.charts import render  # matplotlib, at the first chart

    return render(alert, incident)
