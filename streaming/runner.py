"""The detect stage without Spark: an entity's events in, its detectors run, results out.

The detect query (:mod:`streaming.processor`) groups the event bus by *shard* (a hash of
the entity) and hands each shard's rows of a micro-batch to :class:`ShardRunner`, with a
store for the shard's entities. Everything that decides lives here and is tested without
Spark: repeats from the at-least-once bus, the job's name, which detector reads which
event, detectors that raise (isolated, retried, given up), states that cannot be read,
detectors disabled for a job, refusal at the entity cap, and when each entity must be
woken again. It returns values (alerts and :mod:`streaming.notes`, when to wake each
entity); the Spark shell only turns them into rows and moves rows and state.

Why shards: a keyed Python state API pays round trips to the JVM per key and micro-batch
(set the key, read, write, timers; ~0.3-0.5 ms measured) and a few microseconds per cell
of every row. Keyed by ``(detector, entity)`` that was ~18,000 keys per scrape interval at
2,000 jobs. Keyed by a few dozen shards, a micro-batch costs one call per shard, one read
and one write per entity touched, and two columns per row.

Time. Detectors see event time only. An entity's deadlines fire when Spark's watermark
passes them, and, in live runs, as soon as the fleet's own clock has: the newest event
time on the bus, less ``spark.deadline_grace_s`` and less how far behind it the entity's
records usually arrive (its shipper, its host's clock). A checkpoint pending past half its
timeout then pages seconds after the deadline, not a watermark delay later. No record
moves its entity's time past its bus time (:func:`on_bus_clock`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from conf import ParamsResolver
from detectors import REGISTRY, Alert, Detector, DetectorParams, Event
from detectors.base import DetectorState
from detectors.model import StateError
from streaming.arrivals import fresh, in_step, in_time, on_bus_clock
from streaming.clock import Clock, WakeUp
from streaming.entity import (
    Header,
    close_incident,
    parse_saved,
    saved_text,
    signature,
)
from streaming.failures import RETRY_MS, fold_events, judge_failure
from streaming.forwards import SOURCE_IDLE_MS, SourceSelf, encode, is_source
from streaming.notes import (
    About,
    EntityCount,
    Forward,
    Output,
    Refused,
    SignalGone,
    failure,
    signal,
)
from streaming.packed import PackError
from streaming.routes import BusEvent, Routes, decode, scope_of
from streaming.ticks import TICK_KEY, frontier, holding

log = logging.getLogger(__name__)

#: The ``detector`` of an error row about a bus value that could not be read.
BUS_READER = "bus"
#: The ``detector`` of an error row about an entity's saved value that could not be read
#: (the entity is dropped; the driver counts it and closes its open incidents).
STATE = "state"
#: The wake-up of an entity whose events wait for the parse query to catch up: due as
#: soon as the watermark or the records decide again (the release), never by a tick.
WAIT_RELEASE = WakeUp(0, 0, 2**62)


@dataclass(frozen=True)
class Outcome:
    """What one entity's turn decided.

    Attributes:
        text: The value to save; ``None`` with ``write``: delete the entity.
        wake: When to wake the entity again (:meth:`Clock.wake`), ``None`` when deleted.
        outputs: Alerts and notes (signals, failures, refusals), in order.
        write: Whether the store must change (a refused entity stays unsaved).
    """

    text: str | None
    wake: WakeUp | None
    outputs: list[Output]
    write: bool = True


@dataclass
class _EntityTurn:
    """One entity's turn: its header, states as text, and what it says."""

    entity: str
    header: Header
    texts: dict[str, str]
    now: int
    outputs: list[Output] = field(default_factory=list)


@dataclass(frozen=True)
class _JobName:
    """The job's name in one detector's turn, decided once (:meth:`EntityRunner._job_name`).

    ``imposed`` is the name from the job's state lines (the header's), which every state,
    event and alert of the detector then carries; ``None``: the detector keeps the name
    itself (it reads the state lines), or none is known.
    """

    imposed: str | None

    def on_state(self, state: DetectorState | None) -> None:
        if self.imposed and state is not None:
            state.job_name = self.imposed

    def on_events(self, events: list[Event]) -> list[Event]:
        # Every text the detector writes names the job as the alert's job_name will:
        # from the first event of a state it creates in this turn (it would word its
        # first alert with the id), and over a metric label's filtered spelling.
        named = self.imposed
        if not named:
            return events
        return [e if e.job_name == named else e._replace(job_name=named) for e in events]

    def on_alerts(self, alerts: list[Alert]) -> list[Alert]:
        named = self.imposed
        if not named:
            return alerts
        return [a if a.job_name else a.model_copy(update={"job_name": named}) for a in alerts]

    def for_params(
        self, loaded: DetectorState | None, events: list[Event], header: Header
    ) -> str | None:
        """The name the job's parameters are chosen by (per-job overrides)."""
        return (loaded.job_name if loaded else None) or next(
            (e.job_name for e in events if e.job_name), header.name
        )


@dataclass(frozen=True)
class _TmName:
    """The TaskManager's spelling in one turn of its entity (the header's ``tm``).

    One entity holds every spelling of its TaskManager's id (:mod:`detectors.tm_ids`):
    each state and event of it (so each alert, made from a state) names one spelling, the
    best seen so far: once a log line spelled the id, no detector of the entity names it
    as a metric label does (an incident fired before then resolves in the logs' spelling).
    ``None``: not a TaskManager entity, or no spelling yet.
    """

    imposed: str | None

    def on_state(self, state: DetectorState | None) -> None:
        if self.imposed and state is not None:
            state.tm_id = self.imposed

    def on_events(self, events: list[Event]) -> list[Event]:
        named = self.imposed
        if not named:
            return events
        return [e if e.tm_id == named else e._replace(tm_id=named) for e in events]


class EntityRunner:
    """Runs all detectors of one entity over its events of a micro-batch, and its deadlines.

    Args:
        resolver: Per-job detector parameters.
        routes: Which enabled detector reads which event.
        admit_new: False while the query holds ``spark.max_entities``: an entity without
            saved state gets none (a flood of ids must not grow the state without bound).
        token: This run of the query: signals are emitted again after a restart.
    """

    def __init__(
        self,
        resolver: ParamsResolver,
        routes: Routes,
        *,
        admit_new: bool = True,
        token: str = "",
    ) -> None:
        self.resolver = resolver
        self.routes = routes
        self.admit_new = admit_new
        self.token = token
        self._instances: dict[tuple[str, str | None, str | None], Detector[Any, Any] | None] = {}
        self._idle_ms = {
            scope: max((self._base(n).idle_ms for n in names), default=0)
            for scope, names in routes.by_scope.items()
        }

    def _base(self, name: str) -> Detector[Any, Any]:
        hit = self._instances.get((name, "", ""))
        if hit is None:
            cls = self.resolver.detector_class(name)
            hit = self._instances[(name, "", "")] = cls(self.resolver.base[name])
        return hit

    def detector(
        self, name: str, job_id: str | None, job_name: str | None
    ) -> Detector[Any, Any] | None:
        """The detector with the parameters in force for this job; ``None`` if disabled."""
        key = (name, job_id, job_name)
        if key in self._instances:
            return self._instances[key]
        det: Detector[Any, Any] | None = None
        if name in self.resolver.base:
            params = self.resolver.params(name, job_id, job_name)
            det = self.resolver.detector_class(name)(params) if params.enabled else None
        if len(self._instances) > 20_000:  # one per job seen; bound it all the same
            self._instances.clear()
        self._instances[key] = det
        return det

    def run(
        self, entity: str, saved: str | None, rows: Sequence[BusEvent], clock: Clock
    ) -> Outcome:
        """One entity's turn: its new events (possibly none) and its due deadlines."""
        if is_source(entity):
            return self._run_source(entity, saved, rows, clock)
        scope = scope_of(entity)
        if saved is None and rows and not self.admit_new:
            wanted = {n for r in rows for n in self.routes.of(scope, r.event)}
            refused: list[Output] = [Refused(About(n, entity)) for n in sorted(wanted)]
            return Outcome(None, None, refused, False)
        try:
            header, texts = parse_saved(saved)
        except (ValueError, TypeError, AttributeError) as exc:
            damaged = self._damaged(entity, saved or "", exc)
            out = self.run(entity, None, rows, clock)
            # The damaged value goes, whatever the batch brings.
            return replace(
                out, outputs=[*damaged, *out.outputs], write=out.write or out.text is None
            )
        arrived = sorted((on_bus_clock(e) for e in fresh(list(rows), header)), key=in_time)
        for e in arrived:
            if e.bus_ms is not None:
                t = e.event.time_ms
                # Ahead of the frontier is no lag (and a first batch's frontier, before
                # any watermark, is 1970: kept as 0, not as a 13-digit number per entity).
                header.note_lag(t, e.bus_ms - t, max(clock.before_ms - t, 0), clock.lag_window_ms)
        events = in_step(header, arrived, held=clock.held, ticked=clock.now(header.lag_ms()))
        for e in events:
            header.newest_ms = max(header.newest_ms, e.event.time_ms)
            if scope == "job" and e.event.kind == "job_state" and e.event.job_name:
                header.name = e.event.job_name
            elif scope == "tm":
                header.spell_tm(e.event.tm_id, logged=e.event.kind != "metric")
        turn = _EntityTurn(entity, header, texts, clock.now(header.lag_ms()))
        mine: dict[str, list[Event]] = {}
        for e in events:
            for name in self.routes.of(scope, e.event):
                mine.setdefault(name, []).append(e.event)
        # Only the detectors with something to do are parsed: those with events, those
        # due, and those no longer enabled (their incidents are closed).
        enabled = self.routes.detectors(scope)
        names = set(mine) | {n for n in texts if n not in enabled}
        names |= {n for n in texts if header.retry.get(n, header.due.get(n, 0)) <= turn.now}
        for name in sorted(names):
            self._run_detector(turn, name, mine.get(name, []))
        return self._outcome(turn, scope, clock)

    def _run_source(
        self, entity: str, saved: str | None, rows: Sequence[BusEvent], clock: Clock
    ) -> Outcome:
        """A keyed source's turn: learn what it says of itself, forward its lines.

        No detector runs here (:mod:`streaming.forwards`). Admitted at the entity cap: a
        source is kept only once it said who it is (a process each), so a flood of keys
        that say nothing keeps nothing.
        """
        try:
            header, _texts = parse_saved(saved)
        except (ValueError, TypeError, AttributeError) as exc:
            out = self._run_source(entity, None, rows, clock)
            damaged = failure(STATE, entity, None, exc, "load", dropped=True)
            return replace(out, outputs=[damaged, *out.outputs], write=True)
        me = SourceSelf.of(header.me)
        outputs: list[Output] = []
        # In the order of the source's records: a start line before the lines after it.
        for e in fresh(list(rows), header):
            header.newest_ms = max(header.newest_ms, e.event.time_ms)
            me.learn(e.event.message)
            sent = me.forward(e)
            if sent is not None:
                target, ev = sent
                outputs.append(Forward(target, encode(ev), ev.event.time_ms))
        header.me = me.saved()
        idle_at = header.newest_ms + SOURCE_IDLE_MS
        if not header.me or idle_at <= clock.now(None):
            return Outcome(None, None, outputs, write=saved is not None)
        return Outcome(saved_text(header, {}), clock.wake(idle_at, None), outputs)

    def _damaged(self, entity: str, saved: str, exc: Exception) -> list[Output]:
        """An entity whose saved value cannot be read: dropped; its readable incidents closed.

        The detectors' lines may be whole where the header is not: their open incidents
        are closed here, saying why; the driver closes the rest from the ledger.
        """
        out: list[Output] = [failure(STATE, entity, None, exc, "load", dropped=True)]
        _head, _, rest = saved.partition("\n")
        for line in rest.split("\n") if rest else ():
            name, _, body = line.partition("\t")
            fields = _saved_fields(body)
            try:
                at = int(fields.get("last_event_ms") or 0)
            except (TypeError, ValueError):
                at = 0
            out.extend(self._close(name, fields, at, "its saved state was damaged"))
        return out

    def _outcome(self, turn: _EntityTurn, scope: str, clock: Clock) -> Outcome:
        header, texts = turn.header, turn.texts
        if header.held:
            # Its events wait for the release (or its other sources): due with it.
            return Outcome(saved_text(header, texts), WAIT_RELEASE, turn.outputs)
        wakes = [header.retry.get(n, header.due.get(n, header.newest_ms)) for n in texts]
        if not texts:
            # Without detector state the job's name is kept until the idle deadline, like
            # any state: the next state lines may be hours away.
            idle_at = header.newest_ms + self._idle_ms.get(scope, 0)
            if header.name is None or idle_at <= turn.now:
                return Outcome(None, None, turn.outputs)
            wakes = [idle_at]
        wake = clock.wake(min(wakes), header.lag_ms())
        return Outcome(saved_text(header, texts), wake, turn.outputs)

    def _start(
        self, name: str, text: str | None, job: _JobName, tm: _TmName
    ) -> Callable[[], DetectorState | None]:
        """The saved state as the detector's typed state, rebuilt on each call."""
        cls = self.resolver.detector_class(name)

        def start() -> DetectorState | None:
            if not text:
                return None
            state: DetectorState = cls.load_json(text)
            job.on_state(state)
            tm.on_state(state)
            return state

        return start

    def _job_name(self, turn: _EntityTurn, name: str) -> _JobName:
        """The one place the job's name for a detector's turn is decided."""
        # Detectors that read the state lines keep the name themselves.
        if turn.header.name and "job_state" not in self.resolver.detector_class(name).kinds:
            return _JobName(turn.header.name)
        return _JobName(None)

    def _run_detector(self, turn: _EntityTurn, name: str, events: list[Event]) -> None:
        """Run one detector of the entity: its events, then its deadlines due by now."""
        entity, header = turn.entity, turn.header
        text = turn.texts.get(name)
        if name not in self.resolver.base:
            # A rule taken out of the config by a reload (or a detector out of the release).
            self._stop_watching(turn, name, None, header.newest_ms, REMOVED)
            return
        job = self._job_name(turn, name)
        tm = _TmName(header.tm if scope_of(entity) == "tm" else None)
        events = tm.on_events(job.on_events(events))
        start = self._start(name, text, job, tm)
        try:
            loaded = start()
        except StateError as exc:
            self._unloadable(turn, name, text or "", exc)
            start, loaded, text = self._start(name, None, job, tm), None, None
        job_id = loaded.job_id if loaded else next((e.job_id for e in events if e.job_id), None)
        det = self.detector(name, job_id, job.for_params(loaded, events, header))
        if det is None or name not in self.routes.detectors(scope_of(entity)):
            if text is not None:
                at = events[-1].time_ms if events else header.newest_ms
                # Enabled but not of this entity's scope: a rule now about another scope.
                why = self._disabled(name) if det is None else CHANGED
                self._stop_watching(turn, name, loaded, at, why)
            return
        due, failures = header.due.get(name), header.failures.get(name, 0)
        fold = fold_events(det, entity, start, events, due, failures, loaded)
        turn.outputs.extend(fold.errors)
        alerts = fold.alerts
        state, failures = fold.state, fold.failures
        retry = header.retry.get(name)
        if events:
            retry = None  # the events went through the deadlines already
        due = fold.timer
        if state is not None and due is not None and due <= turn.now and (retry or 0) <= turn.now:
            state, due, failures, retry, fired = self._fire(turn, det, state, due, failures)
            alerts = alerts + fired
        job.on_state(state)
        tm.on_state(state)
        turn.outputs.extend(job.on_alerts(alerts))
        self._save_detector(turn, det, state, due, failures, retry, had=text is not None)

    def _fire(
        self,
        turn: _EntityTurn,
        det: Detector[Any, Any],
        state: DetectorState,
        due: int,
        failures: int,
    ) -> tuple[DetectorState | None, int | None, int, int | None, list[Alert]]:
        """Fire the deadlines due by now, each at its own time; isolate a call that raises.

        Returns the state, next deadline, failures in a row, retry time and transitions.
        """
        snapshot = det.dump_json(state)
        try:
            step = det.fire_due(state, due, turn.now)
        except Exception as exc:  # noqa: BLE001 - one detector must not stop the query
            log.debug(
                "detector=%s entity=%s raised on its deadline", det.name, turn.entity, exc_info=True
            )
            kept: DetectorState = det.load_json(snapshot)
            raised = judge_failure(det, turn.entity, kept, exc, "on_timer", failures, turn.now)
            turn.outputs.append(raised.note)
            if not raised.dropped:
                return kept, due, raised.failures, turn.now + min(RETRY_MS, det.idle_ms), []
            return None, None, raised.failures, None, raised.closing
        return step.state, step.timer_ms, 0, None, list(step.alerts)

    def _save_detector(
        self,
        turn: _EntityTurn,
        det: Detector[Any, Any],
        state: DetectorState | None,
        due: int | None,
        failures: int,
        retry: int | None,
        *,
        had: bool,
    ) -> None:
        """Save one detector's state and deadlines in the turn; its signals if they changed."""
        name, header = det.name, turn.header
        if state is None:
            turn.texts.pop(name, None)
            header.forget(name)
            if had and det.signals:
                turn.outputs.append(SignalGone(About(name, turn.entity)))
            return
        turn.texts[name] = det.dump_json(state)
        header.due[name] = due if due is not None else det.idle_at(state)
        _set_or_drop(header.retry, name, retry)
        _set_or_drop(header.failures, name, failures or None)
        if det.signals:
            sig = signature(self.token, det.signal_values(state))
            if header.signatures.get(name) != sig:
                header.signatures[name] = sig
                turn.outputs.append(signal(det, turn.entity, state))

    def _stop_watching(
        self, turn: _EntityTurn, name: str, state: DetectorState | None, time_ms: int, why: str
    ) -> None:
        """Forget a detector's state for an entity it no longer watches (disabled, removed).

        Its open incident is closed, saying ``why``, so no alert stays firing forever.
        """
        text = turn.texts.pop(name, None)
        turn.header.forget(name)
        fields = state if state is not None else _saved_fields(text)
        closing = self._close(name, fields, time_ms, why)
        turn.outputs.extend([*closing, SignalGone(About(name, turn.entity))])

    def _unloadable(self, turn: _EntityTurn, name: str, text: str, exc: StateError) -> None:
        """A saved state the detector cannot load: drop it, close its incident, say so."""
        turn.texts.pop(name, None)
        turn.header.forget(name)
        fields = _saved_fields(text)
        at = int(fields.get("last_event_ms") or 0)
        # A rule's state that no longer loads is one whose definition changed (another
        # kind, say): the rule starts over.
        why = "its saved state is unreadable" if name in REGISTRY else CHANGED
        closing = self._close(name, fields, at, why)
        turn.outputs.extend(
            [
                failure(name, turn.entity, None, exc, "load", dropped=True),
                *closing,
                SignalGone(About(name, turn.entity)),
            ]
        )

    def _disabled(self, name: str) -> str:
        return "detector disabled" if name in REGISTRY else "rule disabled"

    def _close(
        self,
        name: str,
        state: DetectorState | dict[str, Any] | None,
        time_ms: int,
        why: str,
    ) -> list[Alert]:
        """Resolved transitions for the firing incidents of a detector flinkwatch stops watching."""
        det = self._base(name) if name in self.resolver.base else _removed(name)
        return close_incident(det, state, time_ms, why)


#: Why the incidents of a detector or rule no longer in the config are resolved.
REMOVED = "removed from the config"
#: Why a rule's incidents are resolved when its saved state no longer loads.
CHANGED = "the rule's definition changed; it starts over"


class _Removed(Detector[DetectorParams, DetectorState]):
    """A detector or rule the config no longer has: enough to resolve what its states hold open.

    Its saved states carry the incident's fields; resolving needs a name and a severity,
    not the class that opened them (a rule's class went with its definition).
    """

    name = "removed"
    scope = "job"
    kinds = frozenset()

    def on_event(self, state: DetectorState, event: Event) -> list[Alert]:  # noqa: D102
        return []


def _removed(name: str) -> Detector[Any, Any]:
    cls: type[_Removed] = type(f"Removed_{name}", (_Removed,), {"name": name})
    return cls(DetectorParams())


def _saved_fields(text: str | None) -> dict[str, Any]:
    """A saved state's JSON object as it is (``{}`` when it is none): enough to close it."""
    try:
        raw = json.loads(text) if text else {}
    except ValueError:
        return {}
    return raw if isinstance(raw, dict) else {}


def _set_or_drop(part: dict[str, int], name: str, value: int | None) -> None:
    if value is None:
        part.pop(name, None)
    else:
        part[name] = value


# Shards ---------------------------------------------------------------------------------


class ShardStore(Protocol):
    """A shard's entities, as the Spark shell keeps them (:class:`streaming.packed.PackedStore`)."""

    def get(self, entity: str) -> str | None:
        """The entity's saved value.

        Raises:
            PackError: its value cannot be read.
        """

    def put(self, entity: str, text: str) -> None:
        """Save the entity's value."""

    def delete(self, entity: str) -> None:
        """Forget the entity."""


@dataclass(frozen=True)
class ShardOutcome:
    """What one shard's turn decided.

    Attributes:
        outputs: Alerts and notes, entity by entity; the shell makes them rows.
        wakes: Every saved entity of the shard → when to wake it (:meth:`Clock.wake`).
        changed: Whether ``wakes`` differs from what was given.
        timer: The watermark at which the shard's earliest entity is due (Spark's timer).
        bad: Bus values that could not be read (counted, skipped).
    """

    outputs: list[Output]
    wakes: dict[str, WakeUp]
    changed: bool
    timer: int | None
    bad: int = 0


class ShardRunner:
    """Runs one shard's entities: those with events in the batch and those due.

    ``wakes`` (every saved entity of the shard and when it is due) is what the shell
    keeps beside the entities: it says which entities exist without a read per entity,
    and which are due when Spark wakes the shard.
    """

    def __init__(self, runner: EntityRunner) -> None:
        self.runner = runner

    def run(
        self,
        store: ShardStore,
        wakes: dict[str, WakeUp],
        rows: Iterable[tuple[str, str, int | None]],
        clock: Clock,
        ticks: dict[str, int] | None = None,
        shard: str | None = None,
        lost: Iterable[str] = (),
        held: dict[str, int] | None = None,
    ) -> ShardOutcome:
        """``rows`` are ``(entity, bus value, bus time ms)``; ``wakes`` is updated.

        ``ticks`` is what the shard keeps of the bus's ticks (:func:`streaming.ticks.frontier`),
        updated with the ticks among ``rows``. With ``shard`` (its key), the last output says
        how many entities the shard holds now (:class:`~streaming.notes.EntityCount`): the
        driver adds the shards up for the entity cap. ``lost``: entities whose saved
        values were lost with a damaged shard value (each reported, for the driver to
        count and close their incidents). An entity whose value cannot be read (the
        store raises :class:`~streaming.packed.PackError`, or its text is not of this
        layout) is dropped and reported the same way; the rest of the shard goes on.
        ``held``: the partitions whose latest catch-up mark holds
        (:func:`streaming.ticks.holding`), updated with the marks among ``rows``.
        """
        by_entity: dict[str, list[BusEvent]] = {}
        out: list[Output] = []
        bad = 0
        ticks = {} if ticks is None else ticks
        tick_values: list[tuple[str, int | None]] = []
        for entity, value, bus_ms in rows:
            if entity == TICK_KEY:
                tick_values.append((value, bus_ms))
                continue
            try:
                by_entity.setdefault(entity, []).append(decode(value, bus_ms))
            except (ValueError, TypeError) as exc:
                # Not written by a parse query of ours (or of a release that wrote another
                # shape): skipped, and told once per shard and batch.
                bad += 1
                if bad == 1:
                    out.append(failure(BUS_READER, entity, None, exc, "decode"))
        reached = frontier(ticks, tick_values)
        if reached is not None and (clock.tick_ms is None or reached > clock.tick_ms):
            clock = replace(clock, tick_ms=reached)
        if holding({} if held is None else held, tick_values):
            clock = replace(clock, held=True)
        newest = _newest(by_entity.values())
        if newest is not None and (clock.batch_ms is None or newest > clock.batch_ms):
            clock = replace(clock, batch_ms=newest)
        due = [e for e, at in wakes.items() if clock.due(at) and e not in by_entity]
        changed = False
        for entity in lost:
            # Named by the shard's wake-up table, its bytes lost with a damaged value.
            lost_bytes = PackError("its bytes are lost")
            out.append(failure(STATE, entity, None, lost_bytes, "unpack", dropped=True))
        for entity in [*by_entity, *due]:
            known = entity in wakes
            try:
                saved = store.get(entity) if known else None
            except PackError as exc:
                # Its bytes do not decompress: it is dropped, the shard goes on.
                out.append(failure(STATE, entity, None, exc, "unpack", dropped=True))
                store.delete(entity)
                del wakes[entity]
                changed, known, saved = True, False, None
                if entity not in by_entity:
                    continue
            result = self.runner.run(entity, saved, by_entity.get(entity, []), clock)
            out.extend(result.outputs)
            if not result.write:
                continue
            if result.text is None:
                if known:
                    store.delete(entity)
                    del wakes[entity]
                    changed = True
                continue
            store.put(entity, result.text)
            wake = result.wake or clock.wake(clock.now(None), None)
            if wakes.get(entity) != wake:
                wakes[entity] = wake
                changed = True
        timer = min((clock.timer(w) for w in wakes.values()), default=None)
        if shard is not None:
            # Every saved entity has a wake-up, so the table counts them without a read,
            # and says at which tick the first is due: a tick before that wakes none.
            first = min((w.by_tick for w in wakes.values()), default=None)
            out.append(EntityCount(shard, len(wakes), first))
        return ShardOutcome(out, wakes, changed, timer, bad)


def _newest(batches: Iterable[list[BusEvent]]) -> int | None:
    """The newest time of records that reached the live bus, capped at their bus time.

    The cap keeps a host whose clock runs ahead from claiming a frontier in the future
    (as the watermark's own ``event_time`` does, :func:`streaming.bus.detect_input`).
    """
    times = [
        min(e.event.time_ms, e.bus_ms) for events in batches for e in events if e.bus_ms is not None
    ]
    return max(times, default=None)
