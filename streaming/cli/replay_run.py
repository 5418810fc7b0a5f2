"""``flinkwatch replay`` once its session runs: the replay, its delivery and what it says.

Apart from the command's front (:mod:`streaming.cli.replay`: its arguments, config, files
and session) so that these imports, most of a replay's Python, are made while the JVM
starts (:func:`streaming.replay_session.imported_meanwhile`).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from py4j.protocol import Py4JError

from conf import AppConfig
from sinks import DeadLetterFileSink
from sinks.dispatch import deliver
from sinks.reports.compare import Comparison, compare, read_pages
from streaming.cli.summary import print_incidents, print_summary
from streaming.delivery import PipelineStats
from streaming.replay import Baseline, KeptParse, replay, same_parse
from streaming.replay_progress import ReplayCounts, ReplayProgress
from streaming.runtime import Runtime
from streaming.sources import file_records, log_records

if TYPE_CHECKING:
    from pyspark import StatusTracker
    from pyspark.sql import SparkSession

log = logging.getLogger("flinkwatch")


@dataclass(frozen=True)
class Staged:
    """A replay's files as the command staged them, and where its output goes.

    Attributes:
        work: The replay's own directory (removed at the end unless ``--keep-work``).
        logs_dir: The log files (``streaming.sources.stage_logs``).
        captures_dir: Captured Kafka records, keyed (the same).
        metrics_dir: The metric files.
        output: The alert file, emptied.
    """

    work: Path
    logs_dir: Path
    captures_dir: Path
    metrics_dir: Path
    output: Path


def run_replay(
    args: argparse.Namespace,
    cfg: AppConfig,
    base_cfg: AppConfig | None,
    spark: SparkSession,
    short: bool,
    staged: Staged,
    kept: list[KeptParse] | None = None,
) -> int:
    """Replay the staged files on ``spark`` (``short``: the shards run here), deliver, tell.

    Its ledgers and (unless ``--deadletters`` says where) dead letters go in
    ``staged.work``; ``kept``: parses to use and add to (:func:`streaming.replay.replay`).
    """
    work, output = staged.work, staged.output
    output.write_text("")  # a try of --watch writes its alerts anew
    logs_dir, captures_dir, metrics_dir = staged.logs_dir, staged.captures_dir, staged.metrics_dir
    deadletters = Path(args.deadletters) if args.deadletters else work / "deadletters"
    out = cfg.output
    sink = DeadLetterFileSink(
        deadletters,
        max_per_batch=out.deadletters_max_per_batch,
        retain_bytes=int(out.deadletters_retain_mb * 2**20),
    )
    runtime = Runtime(cfg, replay=True, ledger_path=work / "ledger.sqlite", alerts_path=output)
    runtimes = [runtime]
    stats = PipelineStats()
    base: Baseline | None = None
    if base_cfg is not None:
        base_rt, base = _baseline(base_cfg, output, work)
        runtimes.append(base_rt)
    parses = [(cfg, runtime.outputs, stats, sink, base)]
    if base is not None and not same_parse(cfg, base.cfg):
        log.info("replay: the two configs parse differently (parsing section): two parses")
        # The baseline's dead letters are its own: they would be the new run's twice.
        base_sink = DeadLetterFileSink(work / "baseline-deadletters", max_per_batch=1)
        parses = [
            (cfg, runtime.outputs, stats, sink, None),
            (base.cfg, base.outputs, base.stats, base_sink, None),
        ]
    one_parse = len(parses) == 1
    tracker = spark.sparkContext.statusTracker()
    progress_done = ReplayProgress(lambda: replay_counts(stats, tracker)).start()
    try:
        for c, outputs, st, letters, also in parses:
            # The log time zone is the session's: each parse reads in its config's.
            spark.conf.set("spark.sql.session.timeZone", c.parsing.log_timezone)
            replay(
                log_records(spark, logs_dir, captures_dir),
                file_records(spark, metrics_dir, kind="metric", stream=False),
                c,
                outputs,
                letters,
                st,
                also,
                here=short,
                kept=kept,
            )
        if not one_parse:
            spark.conf.set("spark.sql.session.timeZone", cfg.parsing.log_timezone)
        # The output file is the replay's product, not a copy: what could not be written
        # during the run is written now, or the replay fails.
        for rt in runtimes:
            for s in rt.outputs.sinks:
                deliver(rt.outputs.ledger, s)
    except Exception as exc:
        progress_done(False)
        log.error("replay failed: %s", exc)
        return 1
    finally:
        for rt in runtimes:
            rt.close()
    progress_done(True)
    _tell(args, cfg, stats, output, deadletters, baseline=base is not None, one_parse=one_parse)
    return 0


def _tell(
    args: argparse.Namespace,
    cfg: AppConfig,
    stats: PipelineStats,
    output: Path,
    deadletters: Path,
    *,
    baseline: bool,
    one_parse: bool,
) -> None:
    """What a replay that ended says: its summary (or the comparison), where its files are."""
    comparison = None
    if not baseline:
        print_summary(stats.alerts, stats.kinds, stats.dead_letters, stats.names)
        print_incidents(output)
    else:
        comparison = print_comparison(args, output, one_parse)
    if sum(stats.dead_letters.values()) and args.deadletters:
        print(f"dead letters written to {deadletters}", file=sys.stderr)
    print(f"alerts written to {output}", file=sys.stderr)
    if baseline:
        print(f"baseline alerts written to {baseline_output(output)}", file=sys.stderr)
    if args.report:
        from sinks.reports.replay import write_report  # matplotlib: only when asked for

        report = write_report(output, Path(args.report), cfg.correlation, comparison)
        print(f"report written to {report.index} ({report.charts} charts)", file=sys.stderr)


def _baseline(cfg: AppConfig, output: Path, work: Path) -> tuple[Runtime, Baseline]:
    """The baseline's own ledger and alert file (beside ``output``), and its counters."""
    path = baseline_output(output)
    path.write_text("")
    runtime = Runtime(cfg, replay=True, ledger_path=work / "baseline.sqlite", alerts_path=path)
    return runtime, Baseline(cfg, runtime.outputs, PipelineStats())


def baseline_output(output: Path) -> Path:
    """Where the baseline's alerts go: ``alerts.jsonl`` → ``alerts.baseline.jsonl`` beside it."""
    return output.with_suffix(".baseline" + (output.suffix or ".jsonl"))


def print_comparison(args: argparse.Namespace, output: Path, one_parse: bool) -> Comparison:
    """The two runs' pages compared, on stdout as text or JSON (``-o``)."""
    base_output = baseline_output(output)
    comparison = compare(read_pages(base_output), read_pages(output))
    how = "one parse for both" if one_parse else "two parses: their parsing sections differ"
    new_name = args.config or "the packaged config"
    if args.format == "json":
        context = {
            "baseline": {"config": args.baseline, "alerts": str(base_output)},
            "new": {"config": new_name, "alerts": str(output)},
            "one_parse": one_parse,
        }
        print(json.dumps(comparison.to_json(**context), indent=2))
    else:
        print(f"{new_name} against baseline {args.baseline}, the same files ({how})")
        print(comparison.text())
    return comparison


def replay_counts(stats: PipelineStats, tracker: StatusTracker | None = None) -> ReplayCounts:
    """A replay's progress so far, from the pipeline's counters (read from another thread).

    The counters are updated by the queries' ``foreachBatch`` threads; ``dict(...)`` copies
    the alert counter in one step, so a batch adding to it meanwhile cannot break the sum.
    With Spark's ``tracker``, the tasks of the stages running now: a long input's one pass
    counts its records only at its end.
    """
    tasks = done = 0
    if tracker is not None:
        try:
            for stage in tracker.getActiveStageIds():
                info = tracker.getStageInfo(stage)
                if info is not None:
                    tasks += info.numTasks
                    done += info.numCompletedTasks
        except Py4JError:
            # The context stopping under the progress thread: no tasks to tell of.
            tasks = done = 0
    return ReplayCounts(
        records=stats.records_read,
        newest_event_ms=stats.newest_event_ms,
        alerts=sum(dict(stats.alerts).values()),
        parse_batches=stats.counted.get("parse", -1) + 1,
        detect_batches=stats.delivered,
        tasks=tasks,
        tasks_done=done,
    )
