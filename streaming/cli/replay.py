"""``flinkwatch replay``: the same parser and detectors over files, in event time.

The command's front: its arguments, config and files, and the Spark session; the rest
(:mod:`streaming.cli.replay_run`) is imported while the session starts.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import tempfile
from pathlib import Path

from conf import AppConfig
from conf.reload import ConfigWatcher
from streaming.cli.args import load_or_exit
from streaming.replay_session import replay_session
from streaming.sources import stage_files, stage_logs

log = logging.getLogger("flinkwatch")


def add_arguments(rp: argparse.ArgumentParser) -> None:
    """``flinkwatch replay``'s options."""
    rp.add_argument("--logs", nargs="+", default=[], help="log files or directories")
    rp.add_argument("--metrics", nargs="+", default=[], help="metric files (JSON lines)")
    rp.add_argument("--config", help="YAML config with the thresholds to try")
    rp.add_argument(
        "--baseline",
        metavar="FILE",
        help="YAML config to compare with: both replayed, their pages compared",
    )
    rp.add_argument(
        "-o",
        dest="format",
        choices=("text", "json"),
        help="the comparison's form (with --baseline; default text)",
    )
    rp.add_argument(
        "--output", required=True, help="alerts as JSON lines (the baseline's: FILE.baseline.jsonl)"
    )
    rp.add_argument("--deadletters", help="directory for records that did not parse")
    rp.add_argument("--report", metavar="DIR", help="write every incident's charts and index.html")
    rp.add_argument(
        "--watch",
        action="store_true",
        help="stay: replay again at each save of --config (and --baseline), until Ctrl-C",
    )
    rp.add_argument("--keep-work", action="store_true", help=argparse.SUPPRESS)
    rp.set_defaults(func=cmd_replay)


def cmd_replay(args: argparse.Namespace) -> int:
    """The same parser and detectors over files, in event time; alerts as JSON lines.

    One Spark batch job (:mod:`streaming.replay`): the files are all there at the start,
    so none of the live job's streaming machinery (queries, checkpoints, state store) is
    needed to give its alerts.
    """
    cfg = load_or_exit(args.config)
    base_cfg = load_or_exit(args.baseline) if args.baseline else None
    if not args.logs and not args.metrics:
        log.error("replay needs --logs and/or --metrics")
        return 2
    if args.format and base_cfg is None:
        log.error("-o is the comparison's form: it needs --baseline")
        return 2
    if args.watch and not args.config:
        log.error("--watch replays again when --config's file changes: it needs --config")
        return 2
    # Read now, with the configs: a save while the session starts is then a change.
    watchers = _watchers(args, cfg, base_cfg) if args.watch else []
    work = Path(tempfile.mkdtemp(prefix="flinkwatch-replay-"))
    try:
        logs_dir, captures_dir = stage_logs(args.logs or [], work)
        metrics_dir = stage_files(args.metrics or [], work / "metrics")
    except FileNotFoundError as exc:
        log.error("%s", exc)
        return 2
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text("")
    rest = "streaming.cli.replay_watch" if args.watch else "streaming.cli.replay_run"
    spark, short = replay_session(cfg, logs_dir, metrics_dir, captures_dir, meanwhile=(rest,))
    from streaming.cli.replay_run import Staged, run_replay

    staged = Staged(work, logs_dir, captures_dir, metrics_dir, output)
    try:
        if args.watch:
            from streaming.cli.replay_watch import watch_replay

            return watch_replay(args, cfg, base_cfg, spark, short, staged, watchers)
        return run_replay(args, cfg, base_cfg, spark, short, staged)
    finally:
        if not args.keep_work:
            shutil.rmtree(work, ignore_errors=True)


def _watchers(
    args: argparse.Namespace, cfg: AppConfig, base_cfg: AppConfig | None
) -> list[ConfigWatcher]:
    """``--watch``'s readers of ``--config`` and ``--baseline``, holding the configs loaded.

    Every setting applies to a replay's next try (``fixed=()``): no query, checkpoint or
    connection holds one.
    """
    watchers = [ConfigWatcher(args.config, cfg, fixed=())]
    if args.baseline and base_cfg is not None:
        watchers.append(ConfigWatcher(args.baseline, base_cfg, fixed=()))
    return watchers
