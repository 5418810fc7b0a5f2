"""The Spark shell around the runner: ``transformWithStateInPandas`` keyed by shard.

The detect query groups the event bus by shard (``xxhash64(entity) mod
spark.state_shards``). For each shard with rows in a micro-batch, or whose timer fired,
this shell reads the shard's one value (:mod:`streaming.packed`: its wake-up table and
its entities), hands the rows to :class:`~streaming.runner.ShardRunner` with a store over
it, writes it back if it changed, moves the shard's one event-time timer to its earliest
wake-up, and turns what the runner returned into output rows. It decides nothing.

Pandas, not rows: the row-based API converts each cell of each row on its own (about
2 µs a cell, measured), the pandas one a column at a time; and the rows here are two
columns, the entity and its event as the bus carries it (JSON), not twenty.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Iterator
from typing import Any

import pandas as pd
from pyspark import TaskContext
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)
from pyspark.sql.types import BinaryType, StructField, StructType

from conf import ParamsResolver
from streaming.clock import Clock, WakeUp
from streaming.notes import failure
from streaming.packed import PackedStore
from streaming.routes import Routes
from streaming.rows import DETECT_COLUMNS, output_rows
from streaming.runner import STATE, EntityRunner, ShardRunner
from streaming.shard_keys import shard_of

# Names the detect checkpoint: a release that keeps a shard's state another way starts a
# new one (rebuilt from the bus) instead of failing on the old one's state schema.
STATE_LAYOUT = "packed2"

_PACKED = StructType([StructField("packed", BinaryType())])

_frozen = False


def freeze_worker_heap() -> bool:
    """Exempt what a Python worker holds before its first shard from cyclic collection.

    PySpark's daemon runs a full ``gc.collect()`` after every task of a reused worker, and
    a full collection walks every tracked object: ~100,000 of them here (pandas, pyarrow,
    pydantic, the config, the detectors), 27-42 ms each time, measured. The detect query
    runs a task per shuffle partition and micro-batch, so at 494 records/s those
    collections were 43 % of the detect workers' CPU (py-spy, 60 s of both workers).
    ``gc.freeze`` moves the objects that exist now (modules, classes, the config) into a
    generation collections skip; what each task creates is still collected, and a frozen
    object is still freed when nothing refers to it. Once per process, in a task only:
    the driver and in-process callers (tests) keep their heaps as they are.

    Returns:
        Whether this call froze the heap.
    """
    global _frozen
    if _frozen or TaskContext.get() is None:
        return False
    gc.freeze()
    _frozen = True
    return True


class ShardProcessor(StatefulProcessor):
    """Runs the detectors of one shard's entities.

    Args:
        resolver: Per-job detector parameters.
        detectors: The enabled detectors.
        admit_new: False while the query holds ``spark.max_entities``.
        token: This run of the query (signals are emitted again after a restart).
        delay_ms: ``spark.watermark_delay_s``.
        grace_ms: ``spark.deadline_grace_s`` (``None``: deadlines wait for the watermark).
        lag_window_ms: ``spark.lag_window_s``.
        shards: ``spark.state_shards``: a key names its shard modulo this
            (:mod:`streaming.shard_keys`); ``None``: the key is the shard's number.
    """

    def __init__(
        self,
        resolver: ParamsResolver,
        detectors: list[str],
        *,
        admit_new: bool = True,
        token: str = "",
        delay_ms: int = 0,
        grace_ms: int | None = None,
        shards: int | None = None,
        lag_window_ms: int | None = None,
    ) -> None:
        self._resolver = resolver
        self._detectors = detectors
        self._admit_new = admit_new
        self._token = token
        self._delay_ms = delay_ms
        self._grace_ms = grace_ms
        self._shards = shards
        self._lag_window_ms = lag_window_ms

    def init(self, handle: StatefulProcessorHandle) -> None:  # noqa: D102
        freeze_worker_heap()
        self._handle = handle
        self._shard = handle.getValueState("shard", _PACKED)
        runner = EntityRunner(
            self._resolver,
            Routes(self._detectors, self._resolver.catalog()),
            admit_new=self._admit_new,
            token=self._token,
        )
        self._runner = ShardRunner(runner)

    def clock(self, watermark_ms: int) -> Clock:
        """A micro-batch's :class:`Clock` at Spark's watermark, with the query's timings."""
        return Clock(
            watermark_ms, self._delay_ms, self._grace_ms, lag_window_ms=self._lag_window_ms
        )

    def handleInputRows(  # noqa: D102
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: TimerValues
    ) -> Iterator[pd.DataFrame]:
        data: list[tuple[str, str, int | None]] = []
        for pdf in rows:
            bus = pdf["bus_ms"].tolist() if "bus_ms" in pdf else [None] * len(pdf)
            data.extend(
                zip(
                    pdf["entity"].tolist(),
                    pdf["value"].tolist(),
                    [
                        None if b is None or (isinstance(b, float) and math.isnan(b)) else int(b)
                        for b in bus
                    ],
                    strict=True,
                )
            )
        yield from self._run_shard(key, data, timerValues, fired=None)

    def handleExpiredTimer(  # noqa: D102
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[pd.DataFrame]:
        yield from self._run_shard(key, [], timerValues, fired=expiredTimerInfo.getExpiryTimeInMs())

    def _run_shard(
        self,
        key: Any,
        rows: list[tuple[str, str, int | None]],
        values: TimerValues,
        *,
        fired: int | None,
    ) -> Iterator[pd.DataFrame]:
        store = PackedStore(self._packed())
        # Copies: the runner updates them in place, and the store compares with its own.
        saved: dict[str, list[int]] = store.meta.get("wakes") or {}
        wakes = {entity: WakeUp(*at) for entity, at in saved.items()}
        ticks: dict[str, int] = dict(store.meta.get("ticks") or {})
        held: dict[str, int] = dict(store.meta.get("held") or {})
        old_timer: int | None = None if fired is not None else store.meta.get("timer")
        clock = self.clock(values.getCurrentWatermarkInMs())
        shard = str(key[0] if self._shards is None else shard_of(int(key[0]), self._shards))
        out = self._runner.run(
            store, wakes, rows, clock, ticks, shard=shard, lost=store.lost, held=held
        )
        rows = output_rows(out.outputs)
        if store.damaged is not None:
            # Said once per shard; counted as one entity dropped when it cannot say which.
            about = f"shard:{shard}"
            damaged = failure(STATE, about, None, store.damaged, "unpack", dropped=store.unnamed)
            rows.extend(output_rows([damaged]))
        # Held for a catch-up, the shard decides nothing by the watermark until the
        # release, which reaches every shard as a row (a mark): a timer would only wake it
        # at every batch, and the catch-up it waits for would share the cores with that.
        timer = None if held else out.timer
        if timer is not None and timer == fired:
            # Spark deletes the timer that fired once this call returns: the same time set
            # again now would go with it (and the shard sleep until its next record).
            timer += 1
        if timer != old_timer:
            # One timer per shard, at its earliest wake-up; a timer that fired is gone.
            if old_timer is not None:
                self._handle.deleteTimer(old_timer)
            if timer is not None:
                self._handle.registerTimer(timer)
        # Lists, as read back: the meta is compared with the one read to skip a write.
        kept = {entity: list(at) for entity, at in wakes.items()}
        meta: dict[str, Any] = {"timer": timer, "wakes": kept, "ticks": ticks}
        if held:
            meta["held"] = held
        store.set_meta(meta)
        if not wakes and not ticks and not held:
            self._shard.clear()
        elif store.dirty:
            self._shard.update((store.value(),))
        if rows:
            yield pd.DataFrame(rows, columns=list(DETECT_COLUMNS))

    def _packed(self) -> bytes | None:
        row = self._shard.get()
        return bytes(row[0]) if row and row[0] is not None else None

    def close(self) -> None:  # noqa: D102
        pass
