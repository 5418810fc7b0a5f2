"""``flinkwatch run``: the long-running job against Kafka, until a stop is asked for.

Also what the demo runs (``python -m lab demo``, through :func:`run_job`).
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
import time

from conf import AppConfig, ConfigError
from conf.kafka_client import kafka_settings
from conf.reload import ConfigWatcher
from sinks.http_post import redact_url
from sinks.inbound.metrics_server import MetricsEndpoint, MetricsEndpointError
from streaming.cli.args import base_overrides, load_or_exit, with_overrides
from streaming.cli.summary import print_summary
from streaming.explain_state import LiveExplainer
from streaming.live import live_session
from streaming.metrics import serve as serve_metrics
from streaming.runtime import Runtime, StartError
from streaming.session import on_jvm_signals
from streaming.supervise import run_forever
from streaming.topics import KafkaConnectError

log = logging.getLogger("flinkwatch")


def add_arguments(r: argparse.ArgumentParser) -> None:
    """``flinkwatch run``'s options."""
    r.add_argument("--config", help="YAML config (default: the packaged conf/flinkwatch.yaml)")
    r.add_argument("--bootstrap", help="override kafka.bootstrap_servers")
    r.add_argument("--state-dir", help="override output.state_dir")
    r.add_argument("--duration", type=float, help="stop after this many seconds (default: never)")
    r.add_argument(
        "--no-spark-ui", action="store_true", help="no Spark UI (default: on spark.ui_port)"
    )
    r.set_defaults(func=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    """The long-running job: Kafka → parse → detectors → sinks."""
    cfg = with_overrides(load_or_exit(args.config), base_overrides(args))
    return run_job(cfg, args.duration, config_path=args.config, base=base_overrides(args))


def run_job(
    cfg: AppConfig,
    duration: float | None = None,
    *,
    config_path: str | None = None,
    base: dict[str, dict[str, object]] | None = None,
) -> int:
    """Run the job with a ready config until SIGTERM/SIGINT (or ``duration`` seconds).

    With ``config_path``, the file is watched and re-read on SIGHUP; ``base`` holds the
    command-line settings that win over the file.
    """
    # First of all: a stop asked for while Spark starts (a minute on a busy node) must
    # end the run cleanly, not kill it half way.
    signals = Signals().install()
    out = cfg.output
    log.info(
        "starting: kafka=%s topics=%s,%s state=%s alerts=%s slack=%s alertmanager=%s webhooks=%s",
        cfg.kafka.bootstrap_servers,
        cfg.kafka.logs_topic,
        cfg.kafka.metrics_topic,
        out.state_dir,
        out.alerts_path,
        cfg.slack.mode,
        ",".join(redact_url(u) for u in cfg.alertmanager.urls) or "off",
        ",".join(w.name for w in cfg.webhooks) or "off",
    )
    try:  # before Spark starts: a missing password or unreadable key stops the job at once
        endpoint = _preflight(cfg)
        runtime = Runtime(cfg)
    except ConfigError as exc:
        log.error("%s", exc)
        return 2
    except StartError as exc:  # the ledger's volume, the buttons' port
        log.error("%s", exc)
        return 1
    with runtime:
        try:
            spark, cfg = live_session(cfg)
        except KafkaConnectError as exc:  # names the brokers and, when known, why
            log.error("%s", exc)
            return 1
        except Exception as exc:
            log.error("kafka at %s: %s", cfg.kafka.bootstrap_servers, exc)
            return 1
        runtime.swap(cfg)  # spark.parse_mode as it will run
        # Under spark-submit (Kubernetes) the signal goes to the JVM, not to this process.
        on_jvm_signals(
            spark, {"SIGTERM": signals.stop, "SIGINT": signals.stop, "SIGHUP": signals.reload}
        )
        progress = runtime.listen(spark)
        pipeline = runtime.pipeline(spark)
        watcher = None
        if config_path:
            watcher = ConfigWatcher(
                config_path, cfg, transform=lambda c: with_overrides(c, base or {})
            )
            log.info(
                "watching %s for changes every %.0f s (or SIGHUP)",
                config_path,
                cfg.reload_interval_s,
            )
        if endpoint is not None:
            runtime.register_metrics(pipeline, progress, watcher.stats if watcher else None)
            explainer = LiveExplainer(
                spark, lambda: pipeline.detect_checkpoint, lambda: runtime.cfg
            )
            serve_metrics(cfg, endpoint, runtime.registry, progress, runtime.running, explainer)
        deadline = time.monotonic() + duration if duration else None

        def _should_stop() -> bool:
            if deadline is not None and time.monotonic() > deadline:
                signals.stop(f"--duration {duration:g} s elapsed")
            return signals.stopping

        try:
            rc = run_forever(
                pipeline,
                should_stop=_should_stop,
                watcher=watcher,
                reload_requested=signals.reloads,
                on_reload=runtime.swap,
            )
        finally:
            left = runtime.close()  # Spark first, the ledger last (Runtime.close)
            pipeline.close()  # the Kafka bus's ticker
    notes = [pipeline.stats.stop_note, left, f"{signals.since():.1f} s"]
    log.log(
        logging.INFO if rc == 0 else logging.ERROR,
        "flinkwatch stopped: %s (%s)",
        signals.reason or "the queries kept failing",
        "; ".join(n for n in notes if n),
    )
    st = pipeline.stats
    print_summary(st.alerts, st.kinds, st.dead_letters, st.names)
    return rc


def _preflight(cfg: AppConfig) -> MetricsEndpoint | None:
    """The metrics endpoint (None when off), after checking every secret the job needs.

    Raises:
        ConfigError: a password's variable is unset, a key or CA file is unreadable.
    """
    kafka_settings(cfg.kafka)  # the Kafka password's variable and the CA file
    try:
        return MetricsEndpoint.from_config(cfg.metrics) if cfg.metrics.enabled else None
    except MetricsEndpointError as exc:
        raise ConfigError(str(exc), fields=("metrics",)) from exc


class Signals:
    """What a run was asked by signals: SIGTERM and SIGINT to stop, SIGHUP to reload.

    A stop is a normal event: the signal is noted here and nothing else happens in the
    handler; the run loop stops the queries, then Spark, and one line says why and how
    it went. The first reason wins (a SIGINT after a SIGTERM changes nothing).
    """

    def __init__(self) -> None:
        self.reason: str | None = None
        self.reloads = threading.Event()
        self._asked_at: float | None = None

    def install(self) -> Signals:
        """Handle SIGTERM, SIGINT and SIGHUP of this process (main thread only)."""
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGHUP, self._on_signal)
        return self

    @property
    def stopping(self) -> bool:
        """Whether a stop was asked for."""
        return self.reason is not None

    def stop(self, reason: str) -> None:
        """Ask the run to stop, saying why (a signal's name)."""
        if self.reason is None:
            self._asked_at = time.monotonic()
            self.reason = reason

    def reload(self, _name: str = "SIGHUP") -> None:
        """Ask the run to re-read its config file."""
        log.info("SIGHUP: re-reading the config")
        self.reloads.set()

    def since(self) -> float:
        """Seconds since the stop was asked for (0 without one)."""
        return 0.0 if self._asked_at is None else time.monotonic() - self._asked_at

    def _on_signal(self, signum: int, _frame: object) -> None:
        name = signal.Signals(signum).name
        if name == "SIGHUP":
            self.reload()
        else:
            self.stop(name)
