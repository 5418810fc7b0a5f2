"""The Spark shell around the runner (``streaming/processor.py``), driven as Spark drives it.

Spark calls the processor with its state handle: here a handle that keeps the shard's one
value and its timers in memory, so what the shell does with them (save the shard, move its
one timer, clear it when nothing is left) is seen call by call. The same processor in a
real detect query: ``test_entity_cap.py``, ``test_state_damage.py``, ``test_scenarios.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from typing import Any

import pandas as pd
from pyspark.sql.streaming.stateful_processor import ExpiredTimerInfo, TimerValues

from conf import AppConfig
from streaming.bus import active_detectors
from streaming.processor import ShardProcessor
from streaming.rows import DETECT_COLUMNS
from streaming.ticks import TICK_KEY, hold_value
from tests.conftest import REPO

T0 = 1_700_000_000_000
JOB = "b" * 32
DAY_MS = 86_400_000


class Value:
    """One value state, as ``handle.getValueState`` gives it."""

    def __init__(self) -> None:
        self.row: tuple[Any, ...] | None = None

    def get(self) -> tuple[Any, ...] | None:
        return self.row

    def update(self, row: tuple[Any, ...]) -> None:
        self.row = row

    def clear(self) -> None:
        self.row = None


class Handle:
    """The shard's state and timers, as Spark's handle keeps them for one key.

    A timer set twice, or deleted when there is none, is what Spark warns of and ignores
    (``TimerStateImpl``): kept in ``warnings``.
    """

    def __init__(self) -> None:
        self.values: dict[str, Value] = {}
        self.timers: list[int] = []
        self.warnings: list[str] = []

    def getValueState(self, name: str, schema: Any) -> Value:  # noqa: N802 - Spark's name
        return self.values.setdefault(name, Value())

    def registerTimer(self, ms: int) -> None:  # noqa: N802
        if ms in self.timers:
            self.warnings.append(f"timer {ms} already exists")
        else:
            self.timers.append(ms)

    def deleteTimer(self, ms: int) -> None:  # noqa: N802
        if ms in self.timers:
            self.timers.remove(ms)
        else:
            self.warnings.append(f"timer {ms} does not exist")


def _fire(processor: ShardProcessor, handle: Handle, watermark: int) -> pd.DataFrame:
    """Spark firing the shard's timer: the handler, then the fired timer deleted."""
    (fired,) = handle.timers
    out = _run(
        processor.handleExpiredTimer(("3",), TimerValues(-1, watermark), ExpiredTimerInfo(fired))
    )
    handle.deleteTimer(fired)
    return out


def _processor() -> tuple[ShardProcessor, Handle]:
    cfg = AppConfig()
    processor = ShardProcessor(cfg.resolver(), active_detectors(cfg), token="run-1")
    handle = Handle()
    processor.init(handle)  # type: ignore[arg-type]
    return processor, handle


def _expiries(*minutes: int) -> pd.DataFrame:
    values = [
        json.dumps({"src": "logs:0", "seq": 0, "job_id": JOB, "kind": "checkpoint_expired",
                    "event_ms": T0 + m * 60_000, "offset": m, "checkpoint_id": 10 + m})
        for m in minutes
    ]  # fmt: skip
    return pd.DataFrame({"entity": [f"job:{JOB}"] * len(values), "value": values})


def _run(out: Any) -> pd.DataFrame:
    frames = list(out)
    return pd.concat(frames) if frames else pd.DataFrame(columns=list(DETECT_COLUMNS))


def test_rows_in_save_the_shard_and_set_its_one_timer_at_the_earliest_wake_up() -> None:
    processor, handle = _processor()
    out = _run(processor.handleInputRows(("3",), iter([_expiries(1, 2, 3)]), TimerValues(-1, T0)))
    assert list(out.columns) == list(DETECT_COLUMNS)
    count = out[out["kind"] == "entity_count"]
    assert count["entity"].tolist() == ["shard:3"]
    assert ("checkpoint_failures", "firing") in set(
        zip(out["detector"], out["status"], strict=True)
    )
    assert handle.values["shard"].get() is not None
    assert len(handle.timers) == 1 and handle.timers[0] > T0
    # More rows of the same entity: still one timer, moved if the wake-up moved.
    _run(processor.handleInputRows(("3",), iter([_expiries(4)]), TimerValues(-1, T0)))
    assert len(handle.timers) == 1


def test_a_repeat_from_the_bus_changes_nothing() -> None:
    processor, handle = _processor()
    _run(processor.handleInputRows(("3",), iter([_expiries(1, 2, 3)]), TimerValues(-1, T0)))
    saved, timers = handle.values["shard"].get(), list(handle.timers)
    again = _run(processor.handleInputRows(("3",), iter([_expiries(1, 2, 3)]), TimerValues(-1, T0)))
    assert "alert" not in set(again["kind"])
    assert (handle.values["shard"].get(), handle.timers) == (saved, timers)


def test_a_shard_whose_entities_all_went_idle_is_cleared_and_keeps_no_timer() -> None:
    processor, handle = _processor()
    _run(processor.handleInputRows(("3",), iter([_expiries(1, 2, 3)]), TimerValues(-1, T0)))
    out = _fire(processor, handle, T0 + 30 * DAY_MS)
    assert handle.values["shard"].get() is None
    assert (handle.timers, handle.warnings) == ([], [])
    assert out[out["kind"] == "entity_count"]["data"].map(json.loads).tolist() == [
        {"entities": 0, "due_ms": None}
    ]


def _marks(hold: bool) -> pd.DataFrame:
    values = [hold_value(hold, T0, p) for p in (0, 1)]
    return pd.DataFrame({"entity": [TICK_KEY] * 2, "value": values})


def _entities(out: pd.DataFrame) -> list[int]:
    counts = out[out["kind"] == "entity_count"]["data"].map(json.loads)
    return [c["entities"] for c in counts]


def test_a_catch_up_hold_is_kept_with_the_shard_until_its_release() -> None:
    # Between two calls the shard's hold lives in its saved value, as its ticks do.
    processor, handle = _processor()
    _run(processor.handleInputRows(("3",), iter([_expiries(1, 2, 3)]), TimerValues(-1, T0)))
    _run(processor.handleInputRows(("3",), iter([_marks(True)]), TimerValues(-1, T0)))
    far = T0 + 30 * DAY_MS
    assert handle.timers == []  # held: no timer to wake it; a row does (a mark, a tick)
    out = _run(processor.handleInputRows(("3",), iter([_marks(True)]), TimerValues(-1, far)))
    assert _entities(out) == [1]  # held: a watermark a month on decides nothing
    out = _run(processor.handleInputRows(("3",), iter([_marks(False)]), TimerValues(-1, far)))
    assert _entities(out) == [0]  # released: decided, and the entity gone idle


def test_a_held_shard_keeps_no_timer_and_its_release_sets_it_again() -> None:
    # While the parse query catches up, a shard decides nothing by the watermark: a timer
    # would wake it at every batch for nothing (and, due again at once, Spark deleted it
    # after the handler while the shard set it again: its warnings, and a lost timer).
    processor, handle = _processor()
    _run(processor.handleInputRows(("3",), iter([_expiries(1, 2, 3)]), TimerValues(-1, T0)))
    assert len(handle.timers) == 1
    _run(processor.handleInputRows(("3",), iter([_marks(True)]), TimerValues(-1, T0)))
    assert handle.timers == []  # held: the timer is gone
    out = _run(processor.handleInputRows(("3",), iter([_expiries(4)]), TimerValues(-1, T0 + 1)))
    assert _entities(out) == [1] and handle.timers == []
    _run(processor.handleInputRows(("3",), iter([_marks(False)]), TimerValues(-1, T0 + 2)))
    # Released: one timer, at the entity's own deadline, and nothing Spark warns of.
    assert len(handle.timers) == 1 and handle.timers[0] > T0
    assert handle.warnings == []


def test_a_shard_due_again_at_the_time_its_timer_fired_keeps_a_timer() -> None:
    # Spark deletes the timer that fired once the handler returns: a shard whose earliest
    # wake-up is that same time must not set it again (lost, and the shard asleep until
    # its next record). No shard the runner keeps today wakes there; the shell must not
    # depend on it, so the runner here says so.
    processor, handle = _processor()
    _run(processor.handleInputRows(("3",), iter([_expiries(1, 2, 3)]), TimerValues(-1, T0)))
    (fired,) = handle.timers
    run = processor._runner.run

    def due_at_once(*args: Any, **kwargs: Any) -> Any:
        return replace(run(*args, **kwargs), timer=fired)

    processor._runner.run = due_at_once  # type: ignore[method-assign]
    _fire(processor, handle, fired)
    assert len(handle.timers) == 1 and handle.timers[0] > fired
    assert handle.warnings == []


def test_a_python_worker_freezes_its_heap_at_its_first_shard_and_the_driver_never() -> None:
    """PySpark's daemon collects garbage after every task: what a worker held before its
    first shard (modules, the config) is frozen, so each collection walks a task's objects.

    In a fresh interpreter: freezing is for the whole process.
    """
    code = """
import gc
from unittest import mock

from conf import AppConfig
from streaming.bus import active_detectors
from streaming.processor import ShardProcessor, freeze_worker_heap
from tests.streaming.test_processor import Handle

cfg = AppConfig()
ShardProcessor(cfg.resolver(), active_detectors(cfg)).init(Handle())
assert gc.get_freeze_count() == 0, "no task: the driver or a test"
with mock.patch("streaming.processor.TaskContext.get", return_value=object()):
    ShardProcessor(cfg.resolver(), active_detectors(cfg)).init(Handle())
    frozen = gc.get_freeze_count()
    assert frozen > 10_000, frozen
    made = [[i] for i in range(1_000)]  # a task's objects: collected as before
    assert not freeze_worker_heap(), "once per process"
    ShardProcessor(cfg.resolver(), active_detectors(cfg)).init(Handle())
    assert gc.get_freeze_count() == frozen, (gc.get_freeze_count(), frozen, len(made))
"""
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, timeout=120)


def test_the_detect_query_s_clock_carries_the_config_s_timings() -> None:
    from streaming.app import detect_processor

    spark = {"watermark_delay_s": 20, "deadline_grace_s": 0.5, "lag_window_s": 300}
    clock = detect_processor(AppConfig(spark=spark)).clock(T0)  # type: ignore[arg-type]
    assert (clock.watermark_ms, clock.delay_ms, clock.grace_ms) == (T0, 20_000, 500)
    assert clock.lag_window_ms == 300_000
    default = detect_processor(AppConfig()).clock(T0)
    assert default.lag_window_ms == 60_000
