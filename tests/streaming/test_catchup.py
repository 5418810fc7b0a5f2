"""Where the parse query resumes, how far behind it is, and which mode it should be in."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

from streaming.catchup import (
    Mode,
    ParsePlan,
    Quiet,
    Reason,
    backlog,
    committed_offsets,
    decide,
)


def _batch(ckpt: Path, n: int, *lines: dict, commit: bool = True) -> None:
    (ckpt / "offsets").mkdir(parents=True, exist_ok=True)
    (ckpt / "commits").mkdir(parents=True, exist_ok=True)
    body = ["v1", json.dumps({"batchWatermarkMs": 0}), *[json.dumps(x) for x in lines]]
    (ckpt / "offsets" / str(n)).write_text("\n".join(body))
    if commit:
        (ckpt / "commits" / str(n)).write_text("v1\n{}")


def test_resume_from_the_last_committed_batch_of_every_source(tmp_path: Path) -> None:
    ckpt = tmp_path / "parse-realtime"
    assert committed_offsets(ckpt) is None
    _batch(ckpt, 0, {"l": {"0": 1, "1": 2}}, {"m": {"0": 5}})
    _batch(ckpt, 1, {"l": {"0": 7, "1": 9}}, {"m": {"0": 50}})
    # Batch 2 started but did not commit: its records may be half parsed; redo them.
    _batch(ckpt, 2, {"l": {"0": 8, "1": 9}}, {"m": {"0": 90}}, commit=False)
    assert committed_offsets(ckpt) == {"l": {"0": 7, "1": 9}, "m": {"0": 50}}


def test_backlog_counts_from_the_resume_point_or_the_configured_start() -> None:
    first = {"l": {"0": 0, "1": 0}, "m": {"0": 10}}
    end = {"l": {"0": 10, "1": 20}, "m": {"0": 1000}}
    assert backlog({"l": {"0": 7, "1": 9}, "m": {"0": 50}}, first, end, True) == {
        "l": 14,
        "m": 950,
    }
    # A fresh start reads from the beginning (earliest) or from the end (latest).
    assert backlog(None, first, end, True) == {"l": 30, "m": 990}
    assert backlog(None, first, end, False) == {"l": 0, "m": 0}
    # A partition the checkpoint does not know yet (added later) counts from its start.
    assert backlog({"l": {"0": 10}}, first, end, True)["l"] == 20


def _plan(reason: Reason) -> ParsePlan:
    mode: Mode = "realtime" if reason == "realtime" else "microbatch"
    return ParsePlan(mode, reason, Path(f"parse-{mode}"), {}, {}, {})


def _report(start_s: float, rows: int, took_ms: int = 100) -> SimpleNamespace:
    """A progress report as Spark gives it: the batch's start (UTC ISO), duration, rows."""
    stamp = datetime.fromtimestamp(1_790_000_000 + start_s, tz=UTC).isoformat(
        timespec="milliseconds"
    )
    return SimpleNamespace(
        timestamp=stamp.replace("+00:00", "Z"),
        durationMs={"triggerExecution": took_ms},
        numInputRows=rows,
    )


def test_quiet_runs_from_the_last_batch_that_read_rows_to_the_end_of_the_newest() -> None:
    quiet = Quiet()
    assert (quiet.quiet_s, quiet.read) == (0.0, False)
    # A real-time query's batches, one per realtime_batch_s, each lasting all of it; the
    # first one's start-up (a minute on a starved machine) is not quiet.
    quiet.add(_report(0, 0, took_ms=60_000))
    assert (quiet.quiet_s, quiet.read) == (0.0, False)
    quiet.add(_report(60, 0, took_ms=5000))
    assert (quiet.quiet_s, quiet.read) == (5.0, False)
    quiet.add(_report(65, 3, took_ms=5000))
    assert (quiet.quiet_s, quiet.read) == (0.0, True)
    quiet.add(_report(70, 0, took_ms=5000))
    quiet.add(_report(75, 0, took_ms=5000))
    assert quiet.quiet_s == 10.0
    quiet.add(_report(80, 1, took_ms=5000))
    assert quiet.quiet_s == 0.0


def test_real_time_idles_in_micro_batches_once_nothing_was_read_for_idle_after_s() -> None:
    running, quiet = _plan("realtime"), Quiet()
    for i in range(12):  # the first batch, then 55 s of real-time batches that read nothing
        quiet.add(_report(5 * i, 0, took_ms=5000))
    assert decide(running, quiet, 60, None) is None
    quiet.add(_report(60, 0, took_ms=5000))
    assert decide(running, quiet, 60, None) == "idle"
    assert decide(running, quiet, 0, None) is None  # 0: real time even when idle
    # Records in the last minute keep it in real time.
    quiet.add(_report(60, 2, took_ms=5000))
    assert decide(running, quiet, 60, None) is None


def test_idle_micro_batches_go_back_to_real_time_at_the_first_batch_that_reads_rows() -> None:
    idle, quiet = _plan("idle"), Quiet()
    # The first batch on its fresh checkpoint, then Spark's reports with no new data.
    for i in range(100):
        quiet.add(_report(i, 0))
    assert quiet.quiet_s > 60 and decide(idle, quiet, 60, None) is None
    quiet.add(_report(100, 1))
    assert decide(idle, quiet, 60, None) == "realtime"


def test_a_catch_up_ends_when_the_brokers_say_it_caught_up_and_only_then() -> None:
    behind, quiet = _plan("backlog"), Quiet()
    quiet.add(_report(0, 0, took_ms=120_000))  # a quiet long enough to idle in real time
    asked: list[bool] = []

    def caught_up(answer: bool) -> Callable[[], bool]:
        return lambda: asked.append(answer) or answer

    # Not asked this time (a round trip to the brokers): no switch, whatever the quiet.
    assert decide(behind, quiet, 60, None) is None
    assert decide(behind, quiet, 60, caught_up(False)) is None
    assert decide(behind, quiet, 60, caught_up(True)) == "realtime"
    assert asked == [False, True]
    # Configured micro-batches (or a pinned trigger) never switch, nor ask.
    assert decide(_plan("configured"), quiet, 60, caught_up(True)) is None
    assert asked == [False, True]
