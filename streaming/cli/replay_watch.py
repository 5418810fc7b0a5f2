"""``flinkwatch replay --watch``: the replay again at each save of its config.

An operator tuning a threshold on history edits the YAML, saves it and reads what would
have paged. The first try is the replay, except that it keeps its parsed events
(local-checkpointed: Spark's memory, spilling to its disk; a long input's one-shot replay
goes from the files to the shards in one pass instead). Then the session stays, and so does
the parse: a try whose config parses as one before it (the same ``parsing`` section,
:func:`streaming.replay.same_parse`) scans that parse's kept events instead of reading the
files again (:class:`streaming.replay.KeptParse`), so what it pays for is its own config's
part: the bus, the detectors and the delivery.

The files are read as the live job reloads its config (:class:`conf.reload.ConfigWatcher`):
a change is taken once two reads agree (an editor's save is not caught half way), and a
file that fails validation is reported, naming the field, while the last good config stays.
Every setting applies to the next try. Of a replay's session the config sets the log time
zone, which each parse sets, and the shuffle's partitions, which stay as the session began:
the shards' partitions, the ones that place the detectors' work, are each config's own
(:func:`streaming.bus.detect_input`).
"""

from __future__ import annotations

import argparse
import logging
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from itertools import count
from pathlib import Path
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
    watchers: list[ConfigWatcher],
) -> int:
    """Replay, then again at each valid save of ``--config`` (or ``--baseline``).

    ``watchers``: the readers of those files (the first ``--config``'s), made when the
    configs were loaded. Each try has its own work directory in ``staged.work`` and
    writes the alert file anew. Runs until interrupted (Ctrl-C or SIGTERM), then returns
    0: a try that fails says so and the watch goes on, for the next save to mend it.
    """
    names = " and ".join(str(w.path) for w in watchers)
    kept: list[KeptParse] = []
    try:
        with _terminate_as_interrupt():
            for n in count(1):
                if n > 1:
                    log.info("replay: watching %s: save to replay again (Ctrl-C stops)", names)
                    cfg, base = _next_config(watchers)
                    base_cfg = base if args.baseline else None
                    _between_tries(args, [cfg, *([base_cfg] if base_cfg else [])], kept, n)
                here = replace(staged, work=staged.work / f"try-{n}")
                here.work.mkdir(parents=True)
                _try(n, partial(run_replay, args, cfg, base_cfg, spark, short, here, kept))
                if not args.keep_work:
                    shutil.rmtree(here.work, ignore_errors=True)
    except KeyboardInterrupt:
        log.info("replay: stopped watching %s", names)
    return 0


def _between_tries(
    args: argparse.Namespace, configs: list[AppConfig], kept: list[KeptParse], n: int
) -> None:
    """Before try ``n``: only the parses its configs can use stay kept; no old dead letters.

    A parse no config uses is released before the try parses anew: two hours' parses
    need not be held at once. A try writes its dead letters only when it has some: the
    last try's would otherwise stay in ``--deadletters`` beside this one's summary.
    """
    parsings = [c.parsing for c in configs]
    for k in [k for k in kept if k.parsing not in parsings]:
        kept.remove(k)
        k.release()
    if args.deadletters:
        for old in Path(args.deadletters).glob("batch-*.jsonl"):
            old.unlink(missing_ok=True)
    again = any(k.parsing == configs[0].parsing for k in kept)
    how = "the events parsed before" if again else "the files parsed anew"
    log.info("replay: try %d, over %s", n, how)


def _try(n: int, run: Callable[[], int]) -> None:
    """Try ``n``: the replay (``run``, which says what it found), then how long it took."""
    started = time.monotonic()
    try:
        ok = run() == 0
    except Exception as exc:  # noqa: BLE001 - the watch outlives a try (a report, a ledger)
        log.error("replay: try %d failed: %s", n, exc)
        ok = False
    took = time.monotonic() - started
    log.info("replay: try %d %s in %.1f s", n, "done" if ok else "failed", took)


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
    """The pause between two reads of the files."""
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
