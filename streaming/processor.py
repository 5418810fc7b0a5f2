"""The one Spark adapter around all detectors (row-based ``transformWithState``).

Rows arrive grouped by ``(detector, entity)``. For each group the adapter loads
the detector's JSON state from a RocksDB-backed value state, feeds the events in
event-time order to the pure-Python detector, keeps exactly one event-time timer
(the one the detector asked for last) and emits the alert transitions as rows.
Detector logic never sees Spark; this module never decides anything.

Rows, not pandas frames: a key's call costs what its rows cost. With
``transformWithStateInPandas`` every key paid for building, deduplicating, sorting and
returning small pandas frames, about 9 ms per key: at 2,000 jobs and 8,000 TaskManagers
that was a minute per micro-batch.
"""

from __future__ import annotations

import json
import logging
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from pydantic import ValidationError
from pyspark.sql import Row
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)
from pyspark.sql.types import StringType, StructField, StructType

from conf import ParamsResolver
from conf.errors import StateError
from detectors import REGISTRY, Alert, Detector, Event
from detectors.base import DetectorState
from streaming.schemas import ALERT_COLUMNS, alert_row, event_of

log = logging.getLogger(__name__)

#: ``status`` of the non-alert rows the adapter emits for dashboards: the entity's
#: current detector signals (``evidence`` holds them), or that the entity is gone.
SIGNAL = "signal"
SIGNAL_GONE = "signal_gone"
#: ``status`` of a row saying a detector raised for an entity (``summary`` says what,
#: ``evidence`` holds ``where``, ``failures`` in a row and whether the entity was dropped).
DETECTOR_ERROR = "detector_error"
#: ``status`` of a row saying an entity seen the first time was not admitted: the query
#: holds ``spark.max_entities`` already.
ENTITY_REFUSED = "entity_refused"
#: Calls in a row that may raise for one entity before its state is dropped (and its
#: open incident resolved): a state the detector cannot handle must not stay forever.
MAX_FAILURES = 3

_STATE_SCHEMA = StructType([StructField("json", StringType())])
_TIMER_KEY = "_timer_ms"
#: The detector's own next deadline. The registered timer may be earlier (one kept to
#: save a round trip to the JVM): firing it again must not replay a deadline it passed.
_DUE_KEY = "_due_ms"
#: Per source (raw topic:partition or file), the position of the last record applied.
_SEEN_KEY = "_seen"
#: Sources remembered per entity; a record's events come from one, an entity's from a few.
_MAX_SOURCES = 16
#: The job's name from its state lines (``Job NAME (ID) switched from state …``), kept by
#: the adapter for detectors that do not read those lines: SREs know jobs by name.
_NAME_KEY = "_job_name"
#: Detector calls in a row that raised for this entity.
_FAILURES_KEY = "_failures"
#: Retry delay of a timer whose call raised (capped by the idle TTL).
_RETRY_MS = 60_000


def fresh_rows(rows: list[Any], seen: dict[str, list[int]]) -> list[Any]:
    """The rows not applied before; ``seen`` is advanced past them.

    The bus is at-least-once: after a restart the parse query writes again what it wrote
    since its last commit. An entity's events share one bus partition, so from one source
    they arrive in the order of their records: a position ``(offset, seq)`` at or before
    the last one applied from that source is a repeat. Repeats inside one batch are
    dropped as well. ``rows`` have ``src``, ``offset`` and ``seq`` (Spark rows or dicts).
    """
    out = []
    batch: set[tuple[str, int, int]] = set()
    top: dict[str, list[int]] = {}
    for r in rows:
        src = r["src"]
        if src is None:
            out.append(r)
            continue
        pos = [int(r["offset"] if r["offset"] is not None else -1), int(r["seq"] or 0)]
        ident = (src, pos[0], pos[1])
        last = seen.get(src)
        if ident in batch or (last is not None and pos <= last):
            continue
        batch.add(ident)
        out.append(r)
        if pos > top.get(src, [-2, 0]):
            top[src] = pos
    for src, pos in top.items():
        seen[src] = pos
    while len(seen) > _MAX_SOURCES:
        seen.pop(next(iter(seen)))
    return out


def rows_to_events(rows: list[Any]) -> list[Event]:
    """The rows of one key in one micro-batch → events in event-time, then offset order."""
    return [event_of(r) for r in sorted(rows, key=lambda r: (r["event_ms"], r["offset"] or 0))]


def alert_rows(alerts: list[Alert]) -> list[dict[str, Any]]:
    """Alerts → output rows (:data:`~streaming.schemas.ALERT_SCHEMA` columns)."""
    return [alert_row(a) for a in alerts]


def entity_row(
    key: Any, state: DetectorState | None, status: str, summary: str | None, evidence: Any
) -> dict[str, Any]:
    """A non-alert output row about the entity ``key`` (who it is comes from its state)."""
    return {
        "alert_id": None,
        "detector": key[0],
        "entity": key[1],
        "status": status,
        "severity": None,
        "event_ms": state.last_event_ms if state else 0,
        "job_id": state.job_id if state else None,
        "job_name": state.job_name if state else None,
        "tm_id": state.tm_id if state else None,
        "host": state.host if state else None,
        "summary": summary,
        "evidence": json.dumps(evidence),
    }


def signal_row(
    detector: Detector[Any, Any] | None, key: Any, state: DetectorState | None
) -> dict[str, Any]:
    """The entity's current signals, or a ``signal_gone`` row if it was dropped."""
    values = {} if state is None or detector is None else detector.signal_values(state)
    return entity_row(key, state, SIGNAL if state is not None else SIGNAL_GONE, None, values)


def output_rows(rows: list[dict[str, Any]]) -> Iterator[Row]:
    """Output dicts → Spark rows in :data:`~streaming.schemas.ALERT_SCHEMA` order."""
    for r in rows:
        yield Row(**{c: r.get(c) for c in ALERT_COLUMNS})


def _where(exc: BaseException) -> str:
    """``Type: message at file:line`` of the innermost frame: enough to find the bug."""
    frames = traceback.extract_tb(exc.__traceback__)
    at = f" at {frames[-1].filename.rsplit('/', 2)[-1]}:{frames[-1].lineno}" if frames else ""
    return f"{type(exc).__name__}: {str(exc)[:300]}{at}"


def error_row(
    key: Any, state: DetectorState | None, exc: BaseException, evidence: dict[str, Any]
) -> dict[str, Any]:
    """A :data:`DETECTOR_ERROR` row: the driver logs and counts it (executors cannot)."""
    return entity_row(key, state, DETECTOR_ERROR, _where(exc), evidence)


def refused_row(key: Any) -> dict[str, Any]:
    """An :data:`ENTITY_REFUSED` row, counted on the driver."""
    return entity_row(key, None, ENTITY_REFUSED, None, {})


@dataclass
class Fold:
    """Where a key's events left it: state, timer, transitions, and the calls that raised.

    Attributes:
        state: The state to save (``None``: drop the entity).
        timer: The next timer asked for.
        alerts: Transitions, in order.
        errors: :func:`error_row` rows for calls that raised.
        failures: Calls in a row that raised (kept in the state).
        dropped: The entity was dropped (after :data:`MAX_FAILURES` failures in a row) at
            least once in the batch.
    """

    state: DetectorState | None
    timer: int | None
    alerts: list[Alert] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    failures: int = 0
    dropped: bool = False


def fold_events(
    detector: Detector[Any, Any],
    key: Any,
    start: Callable[[], DetectorState | None],
    events: list[Event],
    timer: int | None,
    failures: int = 0,
) -> Fold:
    """Apply ``events`` to the state ``start()`` builds, isolating calls that raise.

    Each event goes through :meth:`Detector.advance`: the timers due by its time fire
    first, so one long batch gives what live micro-batches would. Detectors change
    their state in place, so a call that raises may leave it half changed. Such an
    event is skipped and the state is rebuilt from ``start()`` with the events that
    went through (detectors are pure: the same calls give the same state), which costs
    nothing while nothing raises. After :data:`MAX_FAILURES` in a row the entity is
    dropped and its open incident resolved.
    """
    out = Fold(start(), timer, failures=failures)
    good: list[Event] = []

    def step(event: Event) -> list[Alert]:
        s = detector.advance(out.state, out.timer, event)
        out.state, out.timer = s.state, s.timer_ms
        return list(s.alerts)

    for event in events:
        try:
            out.alerts.extend(step(event))
        except Exception as exc:  # noqa: BLE001 - one detector must not stop the query
            log.debug("detector=%s entity=%s raised", key[0], key[1], exc_info=True)
            out.failures += 1
            out.state, out.timer = start(), timer
            for e in good:
                step(e)
            # The rebuilt state is the new starting point: each event is replayed at most
            # once, however many of the batch's events raise.
            snapshot, timer, good = _frozen(detector, out.state), out.timer, []
            start = partial(_thawed, detector, snapshot)
            dropped = out.failures >= MAX_FAILURES
            out.dropped = out.dropped or dropped
            out.errors.append(
                error_row(
                    key,
                    out.state,
                    exc,
                    {"where": "on_event", "failures": out.failures, "dropped": dropped},
                )
            )
            if dropped:
                closing = close_incident(detector, out.state, event.time_ms, "it kept failing")
                out.alerts.extend([closing] if closing else [])
                out.state, out.timer, out.failures = None, None, 0
                start, timer = partial(_thawed, detector, None), None
            continue
        out.failures = 0
        good.append(event)
    return out


def _frozen(detector: Detector[Any, Any], state: DetectorState | None) -> str | None:
    return None if state is None else detector.dump_json(state)


def _thawed(detector: Detector[Any, Any], snapshot: str | None) -> DetectorState | None:
    if snapshot is None:
        return None
    state: DetectorState = detector.load_json(snapshot)
    return state


def close_incident(
    detector: Detector[Any, Any],
    state: DetectorState | dict[str, Any] | None,
    time_ms: int,
    why: str,
) -> Alert | None:
    """A resolved transition for the entity's open incident, which flinkwatch gives up on.

    ``state`` may be a saved state the detector cannot load (a newer version, a bad
    shape): the fields every state has are enough to close its incident.
    """
    if isinstance(state, dict):
        common = {k: state[k] for k in DetectorState.model_fields if k in state}
        try:
            state = DetectorState.model_validate(common)
        except ValidationError:
            return None
    if state is None or not state.firing:
        return None
    return detector.resolve(
        state.model_copy(),
        time_ms,
        f"{detector.name} stopped watching this entity ({why}); closing its open incident",
        {"reason": why},
    )


@dataclass
class Saved:
    """An entity's saved value: the adapter's header, then the detector's state as JSON.

    Stored as one string, ``header JSON`` + newline + ``state JSON`` (JSON text has no
    raw newline): the state is parsed by its own model, without a detour through dicts,
    which is most of what a key costs.

    Attributes:
        timer: The registered timer.
        due: The detector's next deadline (the registered timer may be earlier).
        seen: Per source, the position of the last record applied (see :func:`fresh_rows`).
        name: The job's name from its state lines, for detectors that do not read them.
        failures: Detector calls in a row that raised.
        state: The detector's state as JSON text; empty when only the name is kept.
    """

    timer: int | None = None
    due: int | None = None
    seen: dict[str, list[int]] = field(default_factory=dict)
    name: str | None = None
    failures: int = 0
    state: str = ""

    @classmethod
    def parse(cls, text: str) -> Saved:
        """The saved value, also as written before the header and the state were split."""
        head, split, body = text.partition("\n")
        data: dict[str, Any] = json.loads(head)
        if not split:
            # One JSON object: the adapter's keys among the detector's fields.
            header = {
                k: data.pop(k, None) for k in (_TIMER_KEY, _SEEN_KEY, _NAME_KEY, _FAILURES_KEY)
            }
            data, body = header, json.dumps(data) if data else ""
        return cls(
            timer=data.get(_TIMER_KEY),
            due=data.get(_DUE_KEY, data.get(_TIMER_KEY)),
            seen=data.get(_SEEN_KEY) or {},
            name=data.get(_NAME_KEY),
            failures=int(data.get(_FAILURES_KEY) or 0),
            state=body,
        )

    def text(self) -> str:
        """The value to store."""
        header: dict[str, Any] = {_TIMER_KEY: self.timer}
        if self.due != self.timer:
            header[_DUE_KEY] = self.due
        if self.seen:
            header[_SEEN_KEY] = self.seen
        if self.name:
            header[_NAME_KEY] = self.name
        if self.failures:
            header[_FAILURES_KEY] = self.failures
        return json.dumps(header, separators=(",", ":")) + "\n" + self.state


class DetectorProcessor(StatefulProcessor):
    """Runs the detector named by the grouping key over its entity's events."""

    def __init__(self, resolver: ParamsResolver, admit_new: bool = True) -> None:
        self._resolver = resolver
        #: False while the query holds ``spark.max_entities``: an entity without state
        #: gets none (a flood of ids must not grow the state without bound).
        self._admit_new = admit_new
        self._instances: dict[tuple[str, str], Detector[Any, Any]] = {}

    def init(self, handle: StatefulProcessorHandle) -> None:  # noqa: D102
        self._handle = handle
        self._state = handle.getValueState("detector_state", _STATE_SCHEMA)

    def _detector(
        self, name: str, state: DetectorState | None, events: list[Event]
    ) -> Detector[Any, Any] | None:
        """The detector with the parameters in force for this entity's job, if enabled."""
        if name not in REGISTRY or name not in self._resolver.base:
            return None
        job_id = (state.job_id if state else None) or next(
            (e.job_id for e in events if e.job_id), None
        )
        job_name = (state.job_name if state else None) or next(
            (e.job_name for e in events if e.job_name), None
        )
        params = self._resolver.params(name, job_id, job_name)
        if not params.enabled:
            return None
        key = (name, params.model_dump_json())
        det = self._instances.get(key)
        if det is None:
            det = self._instances[key] = REGISTRY[name](params)
        return det

    def _load(self) -> Saved | None:
        # get() answers None for a key without state: one round trip to the state server
        # per key instead of two (exists() first).
        row = self._state.get()
        return Saved.parse(row[0]) if row and row[0] else None

    @staticmethod
    def _start(name: str, saved: Saved | None) -> Callable[[], DetectorState | None]:
        """The saved state as the detector's typed state, rebuilt on each call.

        A detector call that raises is undone by starting again from the saved text.

        Raises:
            StateError: The saved state is of a newer version or does not fit the model.
        """
        cls, text = REGISTRY[name], saved.state if saved else ""

        def start() -> DetectorState | None:
            if not text:
                return None  # a new entity, or the job's name only
            state: DetectorState = cls.load_json(text)
            if saved and saved.name:
                state.job_name = saved.name
            return state

        return start

    def _apply(
        self,
        detector: Detector[Any, Any],
        old_timer: int | None,
        state: DetectorState | None,
        after: Saved,
        wake: int | None = None,
    ) -> None:
        """Save ``state`` with the header ``after``; wake the entity at ``after.due``.

        ``wake`` is an earlier wake-up than the deadline (a retry after a failure).
        """
        timer = wake if wake is not None else after.due
        if state is None and not (after.name is not None and timer is not None):
            if old_timer is not None:
                self._handle.deleteTimer(old_timer)
            self._state.clear()
            return
        # Without detector state the job's name is kept until the idle timer, like any state.
        if old_timer is not None and (timer is None or old_timer <= timer):
            # Keep the earlier timer: each timer call is a round trip to the JVM, and a
            # deadline that moves with every event (idle TTL, stale heap) would cost two
            # per key per batch. Firing early is harmless: the header keeps the detector's
            # own deadline, and a timer that fires before it only registers it.
            timer = old_timer
        elif timer is not None and timer != old_timer:
            if old_timer is not None:
                self._handle.deleteTimer(old_timer)
            self._handle.registerTimer(timer)
        after.timer = timer
        after.state = detector.dump_json(state) if state is not None else ""
        self._state.update((after.text(),))

    def _unloadable(self, key: Any, saved: Saved, exc: StateError) -> list[dict[str, Any]]:
        """A saved state the detector cannot load: drop it, close its incident, say so."""
        self._state.clear()
        try:
            raw: dict[str, Any] = json.loads(saved.state)
        except ValueError:
            raw = {}
        at = int(raw.get("last_event_ms") or 0)
        closing = self._close_incident(key[0], raw, at, "its saved state is unreadable")
        error = error_row(key, None, exc, {"where": "load", "failures": 1, "dropped": True})
        return [error, *alert_rows([closing] if closing else []), signal_row(None, key, None)]

    def _gone(self, key: Any, state: DetectorState | None, time_ms: int) -> list[dict[str, Any]]:
        """Forget an entity whose detector was disabled (reload or per-job override).

        Its open incident is closed, so no alert stays firing forever.
        """
        self._state.clear()
        closing = self._close_incident(key[0], state, time_ms)
        return [*alert_rows([closing] if closing else []), signal_row(None, key, None)]

    def handleInputRows(  # noqa: D102
        self, key: Any, rows: Iterator[Row], timerValues: TimerValues
    ) -> Iterator[Row]:
        saved = self._load()
        if saved is None and not self._admit_new:
            yield from output_rows([refused_row(key)])
            return
        after = Saved(seen=saved.seen if saved else {}, name=saved.name if saved else None)
        fresh = fresh_rows(list(rows), after.seen)
        if not fresh:
            return
        if key[0] not in REGISTRY:
            yield from output_rows(self._gone(key, None, 0) if saved is not None else [])
            return
        events = rows_to_events(fresh)
        start = self._start(key[0], saved)
        gave_up: list[dict[str, Any]] = []
        try:
            loaded = start()
        except StateError as exc:
            # Dropped and reported; the entity starts over with this batch's events.
            saved = saved or Saved()
            gave_up = self._unloadable(key, saved, exc)
            saved = replace(saved, state="", due=None, failures=0)
            start, loaded = self._start(key[0], saved), None
        detector = self._detector(key[0], loaded, events)
        if detector is None:
            if saved is not None and not gave_up:
                gave_up = self._gone(key, loaded, events[-1].time_ms)
            yield from output_rows(gave_up)
            return
        old_timer = saved.timer if saved else None
        names = [e.job_name for e in events if e.kind not in detector.kinds and e.job_name]
        events = [e for e in events if e.kind in detector.kinds]
        after.name = names[-1] if names else after.name
        timer: int | None = saved.due if saved else None
        if timer is None and after.name and events == []:
            timer = fresh[-1]["event_ms"] + detector.idle_ms
        if after.name and saved is not None and after.name != saved.name:
            start = self._start(key[0], replace(saved, name=after.name))
        failures = saved.failures if saved else 0
        fold = fold_events(detector, key, start, events, timer, failures)
        state = fold.state
        if state is not None and after.name:
            state.job_name = after.name
        alerts = fold.alerts
        if after.name:
            name = after.name
            alerts = [a if a.job_name else a.model_copy(update={"job_name": name}) for a in alerts]
        after.due, after.failures = fold.timer, fold.failures
        self._apply(detector, old_timer, state, after)
        out = [*gave_up, *alert_rows(alerts), *fold.errors]
        # A batch of name lines only says nothing new; one that dropped the entity must
        # take its series away (or the signal board keeps a slot for it).
        if detector.signals and (state is not None or not names or loaded is not None):
            out.append(signal_row(detector, key, state))
        yield from output_rows(out)

    def handleExpiredTimer(  # noqa: D102
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[Row]:
        saved = self._load()
        if saved is None:
            return
        if key[0] not in REGISTRY:
            yield from output_rows(self._gone(key, None, 0))  # a detector since removed
            return
        if not saved.state:
            # Only the job's name, and no event since its idle timer was set: forget it.
            self._state.clear()
            return
        fired = expiredTimerInfo.getExpiryTimeInMs()
        start = self._start(key[0], saved)
        try:
            state = start()
        except StateError as exc:
            yield from output_rows(self._unloadable(key, saved, exc))
            return
        detector = self._detector(key[0], state, [])
        if detector is None:
            yield from output_rows(self._gone(key, state, fired))
            return
        now = max(timerValues.getCurrentWatermarkInMs(), fired)
        # The detector's own deadline: a timer kept from earlier may fire before it.
        due = saved.due if saved.due is not None else fired
        try:
            # Each due deadline at its own time, not at the watermark: a late timer must
            # decide as a punctual one would.
            step = detector.fire_due(state, due, now)
        except Exception as exc:  # noqa: BLE001 - one detector must not stop the query
            yield from output_rows(self._timer_failed(detector, key, exc, now, start, saved))
            return
        after = Saved(
            due=step.timer_ms,
            seen=saved.seen,
            name=saved.name if step.state is not None else None,
        )
        self._apply(detector, None, step.state, after)
        out = alert_rows(list(step.alerts))
        if detector.signals:
            out.append(signal_row(detector, key, step.state))
        yield from output_rows(out)

    def _timer_failed(
        self,
        detector: Detector[Any, Any],
        key: Any,
        exc: Exception,
        now: int,
        start: Callable[[], DetectorState | None],
        saved: Saved,
    ) -> list[dict[str, Any]]:
        """A timer call raised: keep the state as it was and retry soon, or give up."""
        log.debug("detector=%s entity=%s raised on its timer", key[0], key[1], exc_info=True)
        state = start()
        failures = saved.failures + 1
        dropped = failures >= MAX_FAILURES
        out = [
            error_row(
                key, state, exc, {"where": "on_timer", "failures": failures, "dropped": dropped}
            )
        ]
        if not dropped:
            retry = now + min(_RETRY_MS, detector.idle_ms)
            after = Saved(due=saved.due, seen=saved.seen, name=saved.name, failures=failures)
            self._apply(detector, None, state, after, wake=retry)
            return out
        self._state.clear()
        closing = close_incident(detector, state, now, "it kept failing")
        return [*out, *alert_rows([closing] if closing else []), signal_row(None, key, None)]

    def _close_incident(
        self,
        name: str,
        state: DetectorState | dict[str, Any] | None,
        time_ms: int,
        why: str = "detector disabled",
    ) -> Alert | None:
        """A resolved transition for a firing incident flinkwatch stops watching."""
        if name not in REGISTRY or name not in self._resolver.base:
            return None
        det = REGISTRY[name](self._resolver.base[name])
        return close_incident(det, state, time_ms, why)

    def close(self) -> None:  # noqa: D102
        self._instances = {}
