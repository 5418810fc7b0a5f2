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
from dataclasses import dataclass, field
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
    return None if state is None else json.dumps(detector.dump(state))


def _thawed(detector: Detector[Any, Any], snapshot: str | None) -> DetectorState | None:
    if snapshot is None:
        return None
    state: DetectorState = detector.load(json.loads(snapshot))
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
        self, name: str, state: dict[str, Any] | None, events: list[Event]
    ) -> Detector[Any, Any] | None:
        """The detector with the parameters in force for this entity's job, if enabled."""
        if name not in REGISTRY or name not in self._resolver.base:
            return None
        job_id = (state or {}).get("job_id") or next((e.job_id for e in events if e.job_id), None)
        job_name = (state or {}).get("job_name") or next(
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

    def _load(self) -> dict[str, Any] | None:
        # get() answers None for a key without state: one round trip to the state server
        # per key instead of two (exists() first). The text is kept: a detector call that
        # raises is undone by starting again from it.
        row = self._state.get()
        self._raw: str | None = row[0] if row and row[0] else None
        return json.loads(self._raw) if self._raw else None

    def _thaw(
        self, detector: Detector[Any, Any], name: str | None
    ) -> Callable[[], DetectorState | None]:
        """The loaded state as the detector's typed state, rebuilt on each call.

        Raises:
            StateError: The saved state is of a newer version or does not fit the model.
        """
        raw = self._raw

        def start() -> DetectorState | None:
            data = json.loads(raw) if raw else None
            if data is None:
                return None
            for k in (_TIMER_KEY, _SEEN_KEY, _NAME_KEY, _FAILURES_KEY):
                data.pop(k, None)
            if not data:
                return None  # the job's name only
            state: DetectorState = detector.load(data)
            if name:
                state.job_name = name
            return state

        return start

    def _apply(
        self,
        detector: Detector[Any, Any] | None,
        old_timer: int | None,
        step_state: DetectorState | None,
        timer: int | None,
        seen: dict[str, list[int]] | None = None,
        name: str | None = None,
        failures: int = 0,
    ) -> None:
        saved: dict[str, Any] | None = None
        if step_state is not None and detector is not None:
            saved = detector.dump(step_state)
        elif name is not None and timer is not None:
            # No detector state, but the job's name for when it has some: kept until the
            # idle timer, like any state.
            saved = {}
        if saved is None:
            if old_timer is not None:
                self._handle.deleteTimer(old_timer)
            self._state.clear()
            return
        if old_timer is not None and (timer is None or old_timer <= timer):
            # Keep the earlier timer: each timer call is a round trip to the JVM, and a
            # deadline that moves with every event (idle TTL, stale heap) would cost two
            # per key per batch. Firing early is harmless: a timer acts only on what is
            # due by then, and the detector asks for its next deadline.
            timer = old_timer
        elif timer is not None and timer != old_timer:
            if old_timer is not None:
                self._handle.deleteTimer(old_timer)
            self._handle.registerTimer(timer)
        saved[_TIMER_KEY] = timer
        if seen:
            saved[_SEEN_KEY] = seen
        if name:
            saved[_NAME_KEY] = name
        if failures:
            saved[_FAILURES_KEY] = failures
        self._state.update((json.dumps(saved, separators=(",", ":")),))

    def _unloadable(
        self, detector: Detector[Any, Any], key: Any, raw: dict[str, Any], exc: StateError
    ) -> list[dict[str, Any]]:
        """A saved state the detector cannot load: drop it, close its incident, say so."""
        self._state.clear()
        closing = close_incident(
            detector, raw, int(raw.get("last_event_ms") or 0), "its saved state is unreadable"
        )
        error = error_row(key, None, exc, {"where": "load", "failures": 1, "dropped": True})
        return [error, *alert_rows([closing] if closing else []), signal_row(None, key, None)]

    def handleInputRows(  # noqa: D102
        self, key: Any, rows: Iterator[Row], timerValues: TimerValues
    ) -> Iterator[Row]:
        raw = self._load()
        if raw is None and not self._admit_new:
            yield from output_rows([refused_row(key)])
            return
        seen: dict[str, list[int]] = (raw or {}).pop(_SEEN_KEY, None) or {}
        name: str | None = (raw or {}).pop(_NAME_KEY, None)
        fresh = fresh_rows(list(rows), seen)
        if not fresh:
            return
        events = rows_to_events(fresh)
        detector = self._detector(key[0], raw, events)
        if detector is None:
            if raw is not None:
                # Disabled (reload or per-job override) while the entity had state.
                self._state.clear()
                closing = self._close_incident(key[0], raw, events[-1].time_ms)
                yield from output_rows(
                    [*alert_rows([closing] if closing else []), signal_row(None, key, None)]
                )
            return
        old_timer = raw.pop(_TIMER_KEY, None) if raw else None
        failures = int(raw.pop(_FAILURES_KEY, 0)) if raw else 0
        had_state = bool(raw)  # detector state, not only the job's name
        names = [e.job_name for e in events if e.kind not in detector.kinds and e.job_name]
        events = [e for e in events if e.kind in detector.kinds]
        name = names[-1] if names else name
        timer: int | None = old_timer
        if timer is None and name and events == []:
            timer = fresh[-1]["event_ms"] + detector.idle_ms
        start = self._thaw(detector, name)
        try:
            start()
        except StateError as exc:
            yield from output_rows(self._unloadable(detector, key, raw or {}, exc))
            return
        fold = fold_events(detector, key, start, events, timer, failures)
        state = fold.state
        if state is not None and name:
            state.job_name = name
        alerts = fold.alerts
        if name:
            alerts = [a if a.job_name else a.model_copy(update={"job_name": name}) for a in alerts]
        self._apply(detector, old_timer, state, fold.timer, seen, name, fold.failures)
        out = [*alert_rows(alerts), *fold.errors]
        # A batch of name lines only says nothing new; one that dropped the entity must
        # take its series away (or the signal board keeps a slot for it).
        if detector.signals and (state is not None or not names or had_state):
            out.append(signal_row(detector, key, state))
        yield from output_rows(out)

    def handleExpiredTimer(  # noqa: D102
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[Row]:
        raw = self._load()
        if raw is None:
            return
        detector = self._detector(key[0], raw, [])
        fired = expiredTimerInfo.getExpiryTimeInMs()
        raw.pop(_TIMER_KEY, None)
        seen = raw.pop(_SEEN_KEY, None)
        name = raw.pop(_NAME_KEY, None)
        failures = int(raw.pop(_FAILURES_KEY, 0))
        if not raw:
            # Only the job's name, and no event since its idle timer was set: forget it.
            self._state.clear()
            return
        if detector is None:
            # Detector disabled since the state was written: forget the entity, and close
            # its incident so no alert stays firing forever.
            self._state.clear()
            closing = self._close_incident(key[0], raw, fired)
            yield from output_rows(
                [*alert_rows([closing] if closing else []), signal_row(None, key, None)]
            )
            return
        now = max(timerValues.getCurrentWatermarkInMs(), fired)
        try:
            state = self._thaw(detector, name)()
        except StateError as exc:
            yield from output_rows(self._unloadable(detector, key, raw, exc))
            return
        try:
            # Each due deadline at its own time, not at the watermark: a late timer must
            # decide as a punctual one would.
            step = detector.fire_due(state, fired, now)
        except Exception as exc:  # noqa: BLE001 - one detector must not stop the query
            yield from output_rows(
                self._timer_failed(detector, key, exc, now, seen, name, failures)
            )
            return
        named = name if step.state is not None else None
        self._apply(detector, None, step.state, step.timer_ms, seen, named)
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
        seen: dict[str, list[int]] | None,
        name: str | None,
        failures: int,
    ) -> list[dict[str, Any]]:
        """A timer call raised: keep the state as it was and retry soon, or give up."""
        log.debug("detector=%s entity=%s raised on its timer", key[0], key[1], exc_info=True)
        state = self._thaw(detector, name)()
        failures += 1
        dropped = failures >= MAX_FAILURES
        out = [
            error_row(
                key, state, exc, {"where": "on_timer", "failures": failures, "dropped": dropped}
            )
        ]
        if not dropped:
            retry = now + min(_RETRY_MS, detector.idle_ms)
            self._apply(detector, None, state, retry, seen, name, failures)
            return out
        self._state.clear()
        closing = close_incident(detector, state, now, "it kept failing")
        return [*out, *alert_rows([closing] if closing else []), signal_row(None, key, None)]

    def _close_incident(self, name: str, state: dict[str, Any], time_ms: int) -> Alert | None:
        """A resolved transition for a firing incident whose detector was disabled."""
        if name not in REGISTRY or name not in self._resolver.base:
            return None
        det = REGISTRY[name](self._resolver.base[name])
        return close_incident(det, state, time_ms, "detector disabled")

    def close(self) -> None:  # noqa: D102
        self._instances = {}
