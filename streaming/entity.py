"""What an entity keeps between micro-batches.

An entity (``job:<id>``, ``tm:<id>``, ``cluster``) is saved as one value: a header the
runner owns (:class:`Header`) and, per detector that has state for it, that detector's
state as its own JSON. Saved as text, one line each, so a detector's state is parsed only
when one of its events or deadlines comes: most micro-batches touch one or two of an
entity's detectors.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from conf.pipeline import SparkConfig
from detectors import Alert, Detector
from detectors.base import DetectorState
from detectors.tm_ids import spelling_rank
from streaming.clock import Lag

#: Layout version of the saved value (the header's ``v``).
LAYOUT = 2
#: Sources remembered per entity at most (the oldest go first). Repeats come from the
#: parse query's last batch before a restart, so a source silent for an hour of the
#: entity's event time can no longer repeat; this bound only caps a flood.
MAX_SOURCES = 1024
#: A source last seen this long (entity event time) before the entity's newest event is
#: forgotten.
SOURCE_HORIZON_MS = 3_600_000
#: Width of the event-time windows over which the entity's delivery lag is tracked, unless
#: ``spark.lag_window_s`` says otherwise: a deadline waits for the largest of the last two,
#: so one slow moment (a burst of every job's start, the parse's JIT still cold) holds the
#: entity's deadlines back for one to two minutes. Five-minute windows kept it for 5-10
#: and set most runs' page latency at 100 jobs (bench/README.md, stop 55). A slower path
#: whose records come less often than that is not waited for (docs/guarantees.md).
LAG_WINDOW_MS = int(SparkConfig.model_fields["lag_window_s"].default * 1000)
#: A source (raw topic and partition) of an entity silent this long (the entity's event
#: time) is idle: a catch-up waits for it no more (:mod:`streaming.arrivals`).
CATCHUP_IDLE_MS = 300_000


@dataclass
class Header:
    """What the runner keeps per entity beside the detectors' states.

    Its JSON keys (:data:`SAVED_KEYS`) are shorter than its names and never change with
    them: checkpoints written by earlier releases must still load.

    Attributes:
        seen: Per source, ``[offset, seq, event ms]`` of the last record applied: a
            record at or before it is a repeat from the at-least-once bus.
        name: The job's name from its state lines (job entities).
        tm: The TaskManager's id as its entity's events spell it best (TaskManager
            entities: a log line's spelling over a metric label's, see
            :func:`~detectors.tm_ids.spelling_rank`), what every state and alert of the
            entity then names.
        tm_rank: That spelling's rank.
        newest_ms: The entity's newest event time.
        lag: ``[window start, max bus lag in it, in the window before, max frontier lag
            in it, in the window before]``: how late the entity's records arrive (their
            host's clock, its shipper, the parse), see :meth:`lag_ms`. Three numbers
            (saved by an earlier release): the bus lag alone, standing for both.
        due: Per detector, its own next deadline.
        retry: Per detector, when a deadline whose call raised is tried again.
        failures: Per detector, calls in a row that raised.
        signatures: Per detector, the run and a hash of the signal values last emitted
            (:func:`signature`).
        me: What a keyed source said of itself (source entities,
            :class:`streaming.forwards.SourceSelf`).
        held: ``[bus value, bus ms]`` of events read while the parse query caught up
            that are newer than one of the entity's sources has reached: applied once
            it has, in time order (:func:`streaming.arrivals.in_step`).
    """

    seen: dict[str, list[int]] = field(default_factory=dict)
    name: str | None = None
    tm: str | None = None
    tm_rank: int = 0
    newest_ms: int = 0
    lag: list[int] | None = None
    due: dict[str, int] = field(default_factory=dict)
    retry: dict[str, int] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)
    signatures: dict[str, str] = field(default_factory=dict)
    me: dict[str, Any] = field(default_factory=dict)
    held: list[list[Any]] = field(default_factory=list)

    @classmethod
    def parse(cls, text: str) -> Header:
        """The header from its JSON line (unknown keys of a newer layout are ignored)."""
        d: dict[str, Any] = json.loads(text)
        return cls(
            seen=d.get("seen") or {},
            name=d.get("name"),
            tm=d.get("tm"),
            tm_rank=int(d.get("tmr") or 0),
            newest_ms=int(d.get("t") or 0),
            lag=d.get("lag"),
            due=d.get("due") or {},
            retry=d.get("retry") or {},
            failures=d.get("fail") or {},
            signatures=d.get("sig") or {},
            me=d.get("me") or {},
            held=d.get("held") or [],
        )

    def text(self) -> str:
        """The header as one JSON line (empty parts left out)."""
        d: dict[str, Any] = {"v": LAYOUT, "t": self.newest_ms}
        for attr, key in SAVED_KEYS.items():
            value = getattr(self, attr)
            if value:
                d[key] = value
        return json.dumps(d, separators=(",", ":"))

    def forget(self, detector: str) -> None:
        """Drop what the header keeps for one detector."""
        for part in (self.due, self.retry, self.failures, self.signatures):
            part.pop(detector, None)

    def spell_tm(self, tm_id: str | None, *, logged: bool) -> None:
        """Keep ``tm_id`` as the TaskManager's spelling if it ranks above the one kept."""
        if tm_id is None or tm_id == self.tm:
            return
        rank = spelling_rank(tm_id, logged=logged)
        if self.tm is None or rank > self.tm_rank:
            self.tm, self.tm_rank = tm_id, rank

    def note_lag(self, event_ms: int, bus: int, frontier: int, width_ms: int | None = None) -> None:
        """Fold one record's lags in (:class:`~streaming.clock.Lag`).

        ``bus``: its bus time less its event time; ``frontier``: how far its event time is
        behind the records' frontier before its micro-batch; ``width_ms``: the windows'
        (``spark.lag_window_s``; ``None``: :data:`LAG_WINDOW_MS`).
        """
        width = width_ms or LAG_WINDOW_MS
        window = event_ms - event_ms % width
        lag = self.lag
        if lag is not None and len(lag) == 3:
            # Saved by a release that kept the bus lag only: it stands for both (the safe
            # side: what a record trails the frontier by is as a rule the smaller).
            lag = [*lag, lag[1], lag[2]]
        if lag is None or window > lag[0] + width:
            lag = [window, bus, bus, frontier, frontier]
        elif window > lag[0]:
            lag = [window, bus, lag[1], frontier, lag[3]]
        elif window == lag[0]:
            lag[1], lag[3] = max(lag[1], bus), max(lag[3], frontier)
        else:
            lag[2], lag[4] = max(lag[2], bus), max(lag[4], frontier)
        self.lag = lag

    def lag_ms(self) -> Lag | None:
        """The largest lags of the entity's records in the last two windows."""
        lag = self.lag
        if lag is None:
            return None
        bus = max(lag[1], lag[2])
        return Lag(bus if len(lag) == 3 else max(lag[3], lag[4]), bus)


#: The header's parts kept only when not empty → their keys in the saved JSON, in the
#: order they are written (``t``, the newest event time, always comes first).
SAVED_KEYS = {
    "seen": "seen",
    "name": "name",
    "tm": "tm",
    "tm_rank": "tmr",
    "lag": "lag",
    "due": "due",
    "retry": "retry",
    "failures": "fail",
    "signatures": "sig",
    "me": "me",
    "held": "held",
}


def parse_saved(text: str | None) -> tuple[Header, dict[str, str]]:
    """A saved value → its header and each detector's state text.

    Raises:
        ValueError: the header is not JSON (the value is not of this layout).
    """
    if not text:
        return Header(), {}
    head, _, rest = text.partition("\n")
    texts: dict[str, str] = {}
    for line in rest.split("\n") if rest else ():
        name, _, body = line.partition("\t")
        texts[name] = body
    return Header.parse(head), texts


def saved_text(header: Header, texts: dict[str, str]) -> str:
    """The value to save: the header line, then one ``detector<TAB>state`` line each."""
    # JSON text has no raw newline or tab, and detector names have neither.
    return "\n".join([header.text(), *(f"{n}\t{t}" for n, t in sorted(texts.items()))])


def signature(token: str, values: dict[str, float]) -> str:
    """The run and a short hash of signal values: emitted again when either changes.

    CRC-32, not Python's ``hash``: string hashes differ between worker processes.
    """
    return f"{token}:{zlib.crc32(repr(sorted(values.items())).encode()):08x}"


def close_incident(
    detector: Detector[Any, Any],
    state: DetectorState | dict[str, Any] | None,
    time_ms: int,
    why: str,
) -> list[Alert]:
    """Resolved transitions for the entity's open incidents, which flinkwatch gives up on.

    ``state`` may be a saved state the detector cannot load (a newer version, a bad
    shape): the fields every state has are enough to close its own incident (not the
    ones a state of that detector keys, which only the detector can read).
    """
    if isinstance(state, dict):
        common = {k: state[k] for k in DetectorState.model_fields if k in state}
        try:
            own = DetectorState.model_validate(common)
        except ValidationError:
            return []
        return Detector.give_up(detector, own, time_ms, why)
    if state is None:
        return []
    return detector.give_up(state.model_copy(deep=True), time_ms, why)
