"""``flinkwatch replay --watch``: the replay again at each save of its config.

An operator tuning a threshold on history edits the YAML, saves it and reads what would
have paged. The first try is the replay without ``--watch``; then the session stays, and so
does the parse: a try whose config parses as one before it (the same ``parsing`` section,
:func:`streaming.replay.same_parse`) scans that parse's kept events instead of reading the
files again (:class:`streaming.replay.KeptParse`), so what it pays for is its own config's
part: the bus, the detectors and the delivery.

The files are read as the live job reloads its config (:class:`conf.reload.ConfigWatcher`):
a change is taken once two reads agree (an editor's save is not caught half way), and a
file that fails validation is reported, naming the field, while the last good config stays.
Every setting applies to the next try: of a replay's session, the config sets only the log
time zone and the shuffle's partitions, and each try sets both
(:func:`streaming.cli.replay_run.run_replay`).
"""

from __future__ import annotations

import argparse
import logging
import shutil
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from itertools import count
from types import FrameType
from typing import TYPE_CHECKING

from conf import AppConfig
from conf.reload import ConfigWatcher
from streaming.cli.replay_run import Staged, run_replay
from streaming.replay import KeptParse

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("flinkwatch")

#: How often the config files are read for a change: a save is taken at the second read
#: that agrees with the first, within half a second.
POLL_S = 0.25


def watch_replay(
    args: argparse.Namespace,
    cfg: AppConfig,
    base_cfg: AppConfig | None,
    spark: SparkSession,
    short: bool,
    staged: Staged,
) -> int:
    """Replay, then again at each valid save of ``--config`` (or ``--baseline``).

    Each try has its own work directory in ``staged.work`` and writes the alert file
    anew. Runs until interrupted (Ctrl-C or SIGTERM), then returns 0: a try that fails
    says so and the watch goes on, for the next save to mend it.
    """
    watchers = [ConfigWatcher(args.config, cfg, fixed=())]
    if args.baseline:
        watchers.append(ConfigWatcher(args.baseline, base_cfg or cfg, fixed=()))
    names = " and ".join(str(w.path) for w in watchers)
    kept: list[KeptParse] = []
    try:
        with _terminate_as_interrupt():
            for n in count(1):
                work = staged.work / f"try-{n}"
                work.mkdir(parents=True)
                if n > 1:
                    again = any(k.parsing == cfg.parsing for k in kept)
                    how = "the events parsed before" if again else "the files parsed anew"
                    log.info("replay: try %d, over %s", n, how)
                started = time.monotonic()
                rc = run_replay(args, cfg, base_cfg, spark, short, replace(staged, work=work), kept)
                took = time.monotonic() - started
                log.info("replay: try %d %s in %.1f s", n, "failed" if rc else "done", took)
                # Only the parses the configs in force can use stay kept.
                parsings = [c.parsing for c in (cfg, base_cfg) if c is not None]
                kept[:] = [k for k in kept if k.parsing in parsings]
                if not args.keep_work:
                    shutil.rmtree(work, ignore_errors=True)
                log.info("replay: watching %s: save to replay again (Ctrl-C stops)", names)
                cfg, changed = _next_config(watchers)
                base_cfg = changed if args.baseline else None
    except KeyboardInterrupt:
        log.info("replay: stopped watching %s", names)
    return 0


def _next_config(watchers: list[ConfigWatcher]) -> tuple[AppConfig, AppConfig]:
    """Once a watched file has changed and is valid: the config and the baseline's (or it again).

    Each watcher keeps the last valid content of its file (``current``).
    """
    while True:
        _wait(POLL_S)
        # Every file read at each poll: two saved together make one try.
        if [w.poll() for w in watchers] != [None] * len(watchers):
            return watchers[0].current, watchers[-1].current


def _wait(seconds: float) -> None:
    """The pause between two reads of the files (the tests' operator saves files in it)."""
    time.sleep(seconds)


@contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM raises ``KeyboardInterrupt`` in the block, as Ctrl-C does: the tries' files go."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)
