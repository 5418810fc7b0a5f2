"""``flinkwatch replay``: the same parser and detectors over files, in event time."""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import tempfile
from pathlib import Path

from sinks import DeadLetterFileSink
from sinks.dispatch import deliver
from streaming.cli.args import load_or_exit
from streaming.cli.summary import print_incidents, print_summary
from streaming.delivery import PipelineStats
from streaming.replay import input_bytes, replay, session_settings
from streaming.replay_progress import ReplayCounts, ReplayProgress
from streaming.runtime import Runtime
from streaming.session import SessionSpec
from streaming.sources import file_records, stage_files

log = logging.getLogger("flinkwatch")


def add_arguments(rp: argparse.ArgumentParser) -> None:
    """``flinkwatch replay``'s options."""
    rp.add_argument("--logs", nargs="+", default=[], help="log files or directories")
    rp.add_argument("--metrics", nargs="+", default=[], help="metric files (JSON lines)")
    rp.add_argument("--config", help="YAML config with the thresholds to try")
    rp.add_argument("--output", required=True, help="alerts as JSON lines")
    rp.add_argument("--deadletters", help="directory for records that did not parse")
    rp.add_argument("--report", metavar="DIR", help="write every incident's charts and index.html")
    rp.add_argument("--keep-work", action="store_true", help=argparse.SUPPRESS)
    rp.set_defaults(func=cmd_replay)


def cmd_replay(args: argparse.Namespace) -> int:
    """The same parser and detectors over files, in event time; alerts as JSON lines.

    One Spark batch job (:mod:`streaming.replay`): the files are all there at the start,
    so none of the live job's streaming machinery (queries, checkpoints, state store) is
    needed to give its alerts.
    """
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
    spark = SessionSpec.replay(cfg, session_settings(input_bytes(logs_dir, metrics_dir))).start()
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
    print_summary(stats.alerts, stats.kinds, stats.dead_letters)
    print_incidents(output)
    if sum(stats.dead_letters.values()) and args.deadletters:
        print(f"dead letters written to {deadletters}", file=sys.stderr)
    print(f"alerts written to {output}", file=sys.stderr)
    if args.report:
        from sinks.reports.replay import write_report  # matplotlib: only when asked for

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
