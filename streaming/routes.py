"""Which detector reads which event, and bus values back into events: pure Python.

One declaration per detector (:func:`interest`) serves both ends of the event bus: the
parse query turns it into Spark conditions (:func:`streaming.bus.wants`) to decide which
entity scopes an event is written for, and the detect query's runner
(:mod:`streaming.runner`) uses it to hand each of an entity's events to the detectors
that read it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from detectors import Detector, Event
from detectors.base import Scope


@dataclass(frozen=True)
class Interest:
    """The events one detector reads.

    Attributes:
        kinds: Event kinds it reads whole (``metric`` only when it reads every metric).
        metrics: For ``metric`` events, the names it reads.
        names: Job state lines carrying the job's name: a job detector that does not
            read those lines still gets them, for the name its alerts carry.
    """

    kinds: frozenset[str]
    metrics: frozenset[str]
    names: bool

    def reads(self, kind: str, metric: str | None) -> bool:
        """Whether the detector reads an event of this kind (and metric name)."""
        if kind == "metric" and self.metrics:
            return metric in self.metrics
        return kind in self.kinds

    def wants(self, kind: str, metric: str | None, job_name: str | None) -> bool:
        """Whether an event must reach the detector's entity: it reads it, or it names the job."""
        if self.reads(kind, metric):
            return True
        return self.names and kind == "job_state" and job_name is not None


def interest(det: Any) -> Interest:
    """A detector class's :class:`Interest`.

    A detector that names ``metrics`` gets only those metric events, even when
    ``metric`` is among its kinds: routing every metric to it would hand the Python
    workers the whole metric stream (92 % of a fleet's records) only to be ignored.
    """
    kinds = frozenset(det.kinds)
    metrics = frozenset(det.metrics)
    if metrics:
        kinds -= {"metric"}
    # A job's name is in its state lines only: the runner keeps it for the alerts of
    # detectors that do not read those lines (they are few: one per state change).
    names = det.scope == "job" and "job_state" not in det.kinds
    return Interest(kinds, metrics, names)


def scope_of(entity: str) -> Scope:
    """The scope of an entity key (``job:<id>``, ``tm:<id>``, ``cluster``)."""
    if entity.startswith("job:"):
        return "job"
    if entity.startswith("tm:"):
        return "tm"
    return "cluster"


class Routes:
    """The enabled detectors per scope, and which of them each event goes to.

    Args:
        names: The enabled detectors and rules.
        catalog: Their classes by name (``AppConfig.catalog``, ``ParamsResolver.catalog``):
            no default, a rule left out would get nothing.
    """

    def __init__(self, names: list[str], catalog: Mapping[str, type[Detector[Any, Any]]]) -> None:
        self.by_scope: dict[str, tuple[str, ...]] = {}
        self._interest = {n: interest(catalog[n]) for n in names if n in catalog}
        for n in sorted(self._interest):
            scope = catalog[n].scope
            self.by_scope[scope] = (*self.by_scope.get(scope, ()), n)
        self._cache: dict[tuple[str, str, str | None], tuple[str, ...]] = {}

    def detectors(self, scope: str) -> tuple[str, ...]:
        """The enabled detectors of a scope."""
        return self.by_scope.get(scope, ())

    def of(self, scope: str, event: Event) -> tuple[str, ...]:
        """The detectors of ``scope`` that read ``event``."""
        key = (scope, event.kind, event.metric)
        hit = self._cache.get(key)
        if hit is None:
            hit = tuple(
                n
                for n in self.detectors(scope)
                if self._interest[n].reads(event.kind, event.metric)
            )
            if len(self._cache) < 100_000:  # metric names are bounded, but not by us
                self._cache[key] = hit
        return hit


class BusEvent(NamedTuple):
    """An event from the bus, with where its record was and when it reached the bus.

    Attributes:
        event: The event.
        src: The record's source (raw ``topic:partition``, or a file).
        offset: The record's offset in its source.
        seq: The event's number within its record.
        bus_ms: When the parse query put it on the bus (``None``: unknown, the files bus).
    """

    event: Event
    src: str | None
    offset: int
    seq: int
    bus_ms: int | None


_EVENT_FIELDS = frozenset(Event._fields) - {"time_ms"}
# json.loads less its two white-space regex matches a value (the bus's JSON has none:
# Spark's to_json and streaming.forwards write it): 6.7 µs a value against 8.8, measured.
_RAW_DECODE = json.JSONDecoder().raw_decode


def decode(value: str, bus_ms: int | None = None) -> BusEvent:
    """A bus record's value (the event as JSON, see :mod:`streaming.bus`) → a bus event.

    Raises:
        ValueError: the value is not a bus event (not JSON, no kind or time).
    """
    try:
        d, end = _RAW_DECODE(value)
        if end != len(value):
            raise ValueError(value)
    except ValueError:
        d = json.loads(value)  # white space around it, or json's own error
    if not isinstance(d, dict):
        msg = f"bus value is not a JSON object: {value[:200]}"
        raise ValueError(msg)
    src, offset, seq = d.pop("src", None), d.pop("offset", None), d.pop("seq", None)
    try:
        d["time_ms"] = int(d.pop("event_ms"))
        event = Event(**d)
    except TypeError:
        # A field this release does not know (a newer parse query wrote the record).
        event = Event(**{k: v for k, v in d.items() if k in _EVENT_FIELDS or k == "time_ms"})
    except KeyError as exc:
        msg = f"bus value without {exc}: {value[:200]}"
        raise ValueError(msg) from exc
    return BusEvent(event, src, -1 if offset is None else int(offset), int(seq or 0), bus_ms)
