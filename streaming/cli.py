"""``flinkwatch`` command line: run, replay, parse; config, kafka, deliveries.

The demo tooling (simulated fleet, local Slack) has its own: ``python -m lab``.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import signal
import sys
import tempfile
import threading
import time
import tomllib
from collections import Counter
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from conf import AppConfig, ConfigError, load_config
from streaming.cli_args import (
    add_output_format,
    base_overrides,
    load_or_exit,
    print_json,
    setup_logging,
    with_overrides,
)
from streaming.deliveries_cli import add_deliveries_parser
from streaming.doctor_cli import add_doctor_parser
from streaming.replay_progress import ReplayCounts, ReplayProgress
from streaming.report_cli import add_report_parser
from streaming.silence_cli import add_silence_parser

if TYPE_CHECKING:  # `flinkwatch --version` and `config check` must not import Spark
    from conf.kafka_client import KafkaSettings
    from conf.reload import ConfigWatcher
    from sinks.metrics_server import MetricsEndpoint
    from sinks.slack_actions import SlackActions
    from streaming.app import Pipeline
    from streaming.delivery import PipelineStats
    from streaming.listener import ProgressLogger

log = logging.getLogger("flinkwatch")


# --- run -------------------------------------------------------------------------


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
    from conf.reload import ConfigWatcher
    from sinks.http_post import redact_url
    from streaming.listener import ProgressLogger
    from streaming.live import live_session
    from streaming.runtime import Runtime, StartError
    from streaming.session import on_jvm_signals
    from streaming.supervise import run_forever
    from streaming.topics import KafkaConnectError

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
        progress = ProgressLogger()
        spark.streams.addListener(progress)
        runtime.attach(spark, progress)
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
            _serve_metrics(cfg, endpoint, pipeline, progress, watcher, runtime.actions)
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
            if pipeline.ticker is not None:
                pipeline.ticker.close()
    notes = [pipeline.stats.stop_note, left, f"{signals.since():.1f} s"]
    log.log(
        logging.INFO if rc == 0 else logging.ERROR,
        "flinkwatch stopped: %s (%s)",
        signals.reason or "the queries kept failing",
        "; ".join(n for n in notes if n),
    )
    _print_summary(pipeline.stats.alerts, pipeline.stats.kinds, pipeline.stats.dead_letters)
    return rc


def _preflight(cfg: AppConfig) -> MetricsEndpoint | None:
    """The metrics endpoint (None when off), after checking every secret the job needs.

    Raises:
        ConfigError: a password's variable is unset, a key or CA file is unreadable.
    """
    from sinks.metrics_server import MetricsEndpoint, MetricsEndpointError

    _kafka_settings(cfg)  # the Kafka password's variable and the CA file
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


def _serve_metrics(
    cfg: AppConfig,
    endpoint: MetricsEndpoint,
    pipeline: Pipeline,
    progress: ProgressLogger,
    watcher: ConfigWatcher | None,
    actions: SlackActions | None = None,
) -> None:
    """Serve ``/metrics`` and the health answer of the run (and push, if configured)."""
    from prometheus_client import CollectorRegistry

    from sinks.metrics_server import HEALTH_PATH
    from sinks.prometheus import ActiveAlerts, FlinkwatchCollector, Pusher, Sources

    out = pipeline.outputs
    observers = [o for o in out.observers if isinstance(o, ActiveAlerts)]

    def backlog() -> dict[str, int]:
        waiting = out.ledger.backlog()
        return {s.name: waiting.get(s.name, 0) for s in out.delivery_sinks()}

    registry = CollectorRegistry()
    registry.register(
        FlinkwatchCollector(
            Sources(
                kinds=lambda: pipeline.stats.kinds,
                dead_letters=lambda: pipeline.stats.dead_letters,
                detector_errors=lambda: pipeline.stats.detector_errors,
                entities_refused=lambda: pipeline.stats.entities_refused,
                state_damaged=lambda: pipeline.stats.state_damaged,
                sink_errors=lambda: {
                    s.name: out.in_batch.errors.get(s.name, 0) for s in out.delivery_sinks()
                },
                ledger_errors=lambda: pipeline.stats.ledger_errors,
                query_failures=lambda: pipeline.stats.query_failures,
                entities=pipeline.stats.entities,
                progress=lambda: dict(progress.latest),
                reloads=lambda: (
                    (watcher.stats.succeeded, watcher.stats.failed) if watcher else (0, 0)
                ),
                config_hash=lambda: watcher.stats.active_hash if watcher else "",
                active=observers[0],
                cluster=lambda: pipeline.cfg.cluster,
                signals=out.signals,
                deliveries=lambda: dict(out.ledger.outcomes),
                backlog=backlog,
                watermark_delay_s=lambda: pipeline.cfg.spark.watermark_delay_s,
                slack_actions=(lambda: actions.outcomes) if actions is not None else None,
                slack_refusals=(lambda: actions.refusals) if actions is not None else dict,
                false_alarms=(lambda: actions.false_alarms) if actions is not None else dict,
            )
        )
    )
    push = cfg.metrics.pushgateway
    if push.url:
        Pusher(registry, push.url, push.job, push.interval_s, lambda: pipeline.cfg.cluster).start()
        log.info("metrics: pushing to %s every %.0f s", push.url, push.interval_s)
    try:
        server = endpoint.serve(registry, progress_age_s=progress.progress_age_s)
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


# --- replay ------------------------------------------------------------------------


def cmd_replay(args: argparse.Namespace) -> int:
    """The same parser and detectors over files, in event time; alerts as JSON lines.

    One Spark batch job (:mod:`streaming.replay`): the files are all there at the start,
    so none of the live job's streaming machinery (queries, checkpoints, state store) is
    needed to give its alerts.
    """
    from sinks import DeadLetterFileSink
    from sinks.dispatch import deliver
    from streaming.delivery import PipelineStats
    from streaming.replay import input_bytes, replay, session_settings
    from streaming.runtime import Runtime
    from streaming.session import get_session
    from streaming.sources import file_records, stage_files

    cfg = load_or_exit(args.config)
    if not args.logs and not args.metrics:
        log.error("replay needs --logs and/or --metrics")
        return 2
    work = Path(tempfile.mkdtemp(prefix="flinkwatch-replay-"))
    try:
        logs_dir = stage_files(args.logs or [], work / "logs")
        metrics_dir = stage_files(args.metrics or [], work / "metrics")
    except FileNotFoundError as exc:
        log.error("%s", exc)
        return 2
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text("")
    spark = get_session(
        shuffle_partitions=cfg.spark.shuffle_partitions,
        timezone=cfg.parsing.log_timezone,
        require_kafka=False,
        state_memory_mb=None,
        extra=session_settings(input_bytes(logs_dir, metrics_dir)),
    )
    deadletters = Path(args.deadletters) if args.deadletters else work / "deadletters"
    out = cfg.output
    sink = DeadLetterFileSink(
        deadletters,
        max_per_batch=out.deadletters_max_per_batch,
        retain_bytes=int(out.deadletters_retain_mb * 2**20),
    )
    runtime = Runtime(cfg, replay=True, ledger_path=work / "ledger.sqlite", alerts_path=output)
    stats = PipelineStats()
    progress_done = ReplayProgress(lambda: replay_counts(stats)).start()
    try:
        replay(
            file_records(spark, logs_dir, kind="log", stream=False),
            file_records(spark, metrics_dir, kind="metric", stream=False),
            cfg,
            runtime.outputs,
            sink,
            stats,
        )
        # The output file is the replay's product, not a copy: what could not be written
        # during the run is written now, or the replay fails.
        for s in runtime.outputs.sinks:
            deliver(runtime.outputs.ledger, s)
    except Exception as exc:
        progress_done(False)
        log.error("replay failed: %s", exc)
        return 1
    finally:
        runtime.close()
        if not args.keep_work:
            shutil.rmtree(work, ignore_errors=True)
    progress_done(True)
    _print_summary(stats.alerts, stats.kinds, stats.dead_letters)
    _print_incidents(output)
    if sum(stats.dead_letters.values()) and args.deadletters:
        print(f"dead letters written to {deadletters}", file=sys.stderr)
    print(f"alerts written to {output}", file=sys.stderr)
    if args.report:
        from sinks.replay_report import write_report  # matplotlib: only when asked for

        report = write_report(output, Path(args.report), cfg.correlation)
        print(f"report written to {report.index} ({report.charts} charts)", file=sys.stderr)
    return 0


def replay_counts(stats: PipelineStats) -> ReplayCounts:
    """A replay's progress so far, from the pipeline's counters (read from another thread).

    The counters are updated by the queries' ``foreachBatch`` threads; ``dict(...)`` copies
    the alert counter in one step, so a batch adding to it meanwhile cannot break the sum.
    """
    return ReplayCounts(
        records=stats.records_read,
        newest_event_ms=stats.newest_event_ms,
        alerts=sum(dict(stats.alerts).values()),
        parse_batches=stats.counted.get("parse", -1) + 1,
        detect_batches=stats.delivered,
    )


def _print_summary(
    alerts: Counter[tuple[str, str, str]], kinds: Counter[str], dead: Counter[str]
) -> None:
    out = sys.stdout
    print(
        "events by kind: " + (", ".join(f"{k}={v}" for k, v in sorted(kinds.items())) or "none"),
        file=out,
    )
    print(
        "dead letters:   " + (", ".join(f"{k}={v}" for k, v in sorted(dead.items())) or "none"),
        file=out,
    )
    if not alerts:
        print("alerts: none", file=out)
        return
    keys = sorted({(d, e) for (d, e, _s) in alerts})
    w_det = max(len("detector"), *(len(d) for d, _ in keys))
    w_ent = max(len("entity"), *(len(e) for _, e in keys))
    print(f"{'detector':<{w_det}}  {'entity':<{w_ent}}  firing  resolved", file=out)
    for d, e in keys:
        firing, resolved = alerts[(d, e, "firing")], alerts[(d, e, "resolved")]
        print(f"{d:<{w_det}}  {e:<{w_ent}}  {firing:>6}  {resolved:>8}", file=out)


def _print_incidents(alerts_file: Path) -> None:
    """The incidents of several alerts, each with its members and latest root-cause line."""
    records = [json.loads(line) for line in alerts_file.read_text().splitlines()]
    causes = {r["incident_id"]: r["root_cause"] for r in records if r.get("incident_id")}
    for iid, cause in causes.items():
        # The alert that opened the incident was alone when it fired: it carries no id.
        members: list[str] = []
        for r in records:
            if iid in (r.get("incident_id"), r["alert_id"]) and r["detector"] not in members:
                members.append(r["detector"])
        print(f"incident {iid} ({' -> '.join(members)}): {cause}", file=sys.stdout)


# --- parse -------------------------------------------------------------------------


def cmd_parse(args: argparse.Namespace) -> int:
    """One JSON object per input record: the parsed event, or why it did not parse."""
    from streaming.app import parse_limits
    from streaming.metric_parsing import parse_metrics
    from streaming.parsing import parse_logs
    from streaming.session import get_session
    from streaming.sources import file_records, given_name, stage_files

    cfg = load_or_exit(args.config)
    work = Path(tempfile.mkdtemp(prefix="flinkwatch-parse-"))
    try:
        staged = stage_files(args.paths, work / "in")
        spark = get_session(timezone=cfg.parsing.log_timezone, require_kafka=False)
        records = file_records(spark, staged, kind=args.kind, stream=False)
        lim = parse_limits(cfg)
        if args.kind == "metric":
            parsed = parse_metrics(records, lim, names=cfg.parsing.metric_names)
        else:
            parsed = parse_logs(records, lim)
        df = parsed.orderBy("topic", "offset")
        for row in df.toLocalIterator():
            rec = {k: v for k, v in row.asDict().items() if v is not None}
            if "event_time" in rec:
                rec["event_time"] = rec["event_time"].strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
            rec["topic"] = given_name(rec.get("topic", ""))
            rec.pop("kafka_ts", None)
            rec.pop("partition", None)
            print(json.dumps(rec, default=str))
    except FileNotFoundError as exc:
        log.error("%s", exc)
        return 2
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _kafka_settings(cfg: AppConfig) -> KafkaSettings:
    """The Kafka client settings of ``cfg`` (secrets from the environment)."""
    from conf.kafka_client import kafka_settings

    return kafka_settings(cfg.kafka)


# --- config / kafka ---------------------------------------------------------------------


def cmd_config_check(args: argparse.Namespace) -> int:
    """Validate a config file without running anything."""
    as_json = args.output_format == "json"
    try:
        cfg = load_config(args.file)
    except ConfigError as exc:
        if as_json:
            # On stdout, like the success: a script reads one place and the exit code.
            print_json(
                {"ok": False, "file": args.file, "fields": list(exc.fields), "message": str(exc)}
            )
        else:
            print(f"INVALID {exc}", file=sys.stderr)
        return 1
    enabled = [n for n, p in cfg.detector_params().items() if p.enabled]
    try:
        sample = _sample_labels(args.sample or [])
    except ValueError as exc:
        print(f"config check: {exc}", file=sys.stderr)
        return 2
    routes = cfg.slack.route_table(enabled, sample, cfg.cluster) if sample else []
    if as_json:
        out: dict[str, object] = {"ok": True, "file": args.file, "detectors_enabled": enabled}
        if sample:
            out["routes"] = [
                {"detector": d, "severity": sev.value, "route": route, "channel": channel}
                for d, sev, route, channel in routes
            ]
        print_json(out)
        return 0
    print(f"OK {args.file}: detectors enabled: {', '.join(enabled) or 'none'}")
    if routes:
        print(f"slack routes for {' '.join(args.sample)}:")
        width = max(len(d) for d, *_ in routes)
        for d, sev, route, channel in routes:
            print(f"  {d:<{width}}  {sev.value:<8}  {channel}  ({route})")
    return 0


#: The labels ``config check --sample`` takes.
SAMPLE_LABELS = ("cluster", "job_name", "job_id", "tm_id", "host")


def _sample_labels(texts: list[str]) -> dict[str, str]:
    """``--sample job_name=pay-etl`` (repeated) → the sample's labels."""
    labels: dict[str, str] = {}
    for text in texts:
        name, sep, value = text.partition("=")
        if not sep or name not in SAMPLE_LABELS:
            msg = f"--sample {text!r}: give name=value, name one of {', '.join(SAMPLE_LABELS)}"
            raise ValueError(msg)
        labels[name] = value
    return labels


def cmd_kafka_create_topics(args: argparse.Namespace) -> int:
    """Create topics if missing (used by scripts/stack.sh)."""
    from kafka.admin import KafkaAdminClient

    from streaming.topics import (
        KafkaConnectError,
        KafkaTopicError,
        connect,
        create_topics,
        topic_spec,
    )

    cfg = load_or_exit(args.config)
    if args.bootstrap:
        cfg = with_overrides(cfg, {"kafka": {"bootstrap_servers": args.bootstrap}})
    try:
        # The broker may still be starting: connect() waits for it.
        admin = connect(KafkaAdminClient, _kafka_settings(cfg).python, client_id="flinkwatch-admin")
    except ConfigError as exc:
        log.error("%s", exc)
        return 2
    except KafkaConnectError as exc:
        log.error("%s", exc)
        return 1
    spec = topic_spec(args.partitions, args.replication_factor)
    try:
        created = create_topics(admin, dict.fromkeys(args.topics, spec))
    except KafkaTopicError as exc:
        log.error("%s", exc)
        return 1
    finally:
        admin.close()
    for t in args.topics:
        print(f"topic {t}: {'created' if t in created else 'exists'}", file=sys.stderr)
    return 0


# --- main ----------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (also used by the CLI tests)."""
    p = argparse.ArgumentParser(prog="flinkwatch", description=__doc__)
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    p.add_argument(
        "--version", action="version", version=f"%(prog)s {version()}", help="print the version"
    )
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="run the streaming job against Kafka")
    r.add_argument("--config", help="YAML config (default: the packaged conf/flinkwatch.yaml)")
    r.add_argument("--bootstrap", help="override kafka.bootstrap_servers")
    r.add_argument("--state-dir", help="override output.state_dir")
    r.add_argument("--duration", type=float, help="stop after this many seconds (default: never)")
    r.add_argument(
        "--no-spark-ui", action="store_true", help="no Spark UI (default: on spark.ui_port)"
    )
    r.set_defaults(func=cmd_run)

    rp = sub.add_parser("replay", help="run the detectors over log/metric files")
    rp.add_argument("--logs", nargs="+", default=[], help="log files or directories")
    rp.add_argument("--metrics", nargs="+", default=[], help="metric files (JSON lines)")
    rp.add_argument("--config", help="YAML config with the thresholds to try")
    rp.add_argument("--output", required=True, help="alerts as JSON lines")
    rp.add_argument("--deadletters", help="directory for records that did not parse")
    rp.add_argument("--report", metavar="DIR", help="write every incident's charts and index.html")
    rp.add_argument("--keep-work", action="store_true", help=argparse.SUPPRESS)
    rp.set_defaults(func=cmd_replay)

    pa = sub.add_parser("parse", help="show how records parse (one JSON object per record)")
    pa.add_argument("paths", nargs="+", help="files or directories")
    pa.add_argument("--kind", choices=["log", "metric"], default="log", help="what the files hold")
    pa.add_argument("--config", help="YAML config (for the time zone and limits)")
    pa.set_defaults(func=cmd_parse)

    c = sub.add_parser("config", help="configuration tools")
    csub = c.add_subparsers(dest="config_command", required=True)
    cc = csub.add_parser("check", help="validate a config file")
    cc.add_argument("file", help="the YAML file")
    cc.add_argument(
        "--sample",
        action="append",
        metavar="NAME=VALUE",
        help="a sample job (job_name=pay-etl, cluster=prod, ...): print the Slack route each "
        "detector's incidents about it would take",
    )
    add_output_format(cc)
    cc.set_defaults(func=cmd_config_check)

    k = sub.add_parser("kafka", help="Kafka tools")
    ksub = k.add_subparsers(dest="kafka_command", required=True)
    kt = ksub.add_parser("create-topics", help="create topics if missing")
    kt.add_argument("--config", help="YAML config (for the Kafka connection and security)")
    kt.add_argument("--bootstrap", help="override kafka.bootstrap_servers")
    kt.add_argument("--partitions", type=int, default=2, help="partitions per new topic (2)")
    kt.add_argument(
        "--replication-factor",
        type=int,
        help="replicas per new topic (default: the brokers' default.replication.factor)",
    )
    kt.add_argument("topics", nargs="+", help="topic names")
    kt.set_defaults(func=cmd_kafka_create_topics)

    add_deliveries_parser(sub)
    add_silence_parser(sub)
    add_report_parser(sub)
    add_doctor_parser(sub)
    return p


def version() -> str:
    """The installed flinkwatch's version; from a source tree not installed, pyproject's.

    A checkout run as ``python -m streaming.cli`` has no distribution metadata: the
    version in the ``pyproject.toml`` beside the code is then the truth, marked as such,
    and ``unknown`` when neither exists (a copied file, say).
    """
    try:
        return metadata.version("flinkwatch")
    except metadata.PackageNotFoundError:
        pass
    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
    except (OSError, tomllib.TOMLDecodeError):
        return "unknown (not installed)"
    if project.get("name") != "flinkwatch" or "version" not in project:
        return "unknown (not installed)"
    return f"{project['version']} (source tree, not installed)"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``flinkwatch`` console script."""
    args = build_parser().parse_args(argv)
    setup_logging(args.verbose)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
