"""The detector contract: plain-Python state machines over parsed Flink events.

A detector never touches Spark, the clock or I/O, and never checks the time itself.
The detect query (``streaming/processor.py``) groups events by shard (a hash of the
entity) and hands each shard's rows to the runner (``streaming/runner.py``), which takes
the shard's entities one at a time: for each detector that reads any of an entity's new
events (``streaming/routes.py``), it loads the detector's typed state for that entity
(:meth:`Detector.load`) and calls :meth:`Detector.advance` for each event in event-time
order: that first fires every timer due at or before the event
(:meth:`Detector.on_timer`), then folds the event in (:meth:`Detector.on_event`). Both
return alerts; the base keeps the state and asks :meth:`Detector.next_deadline` when to
wake the entity again. When the entity's clock passes the pending timer (Spark's
watermark, or the bus's newest time less how late the entity's records arrive: see
``streaming.clock.Clock``) it calls :meth:`Detector.fire_due`. The base class owns the idle
deadline: an entity without events for ``idle_ttl_s`` is dropped, its open incident
resolved (:meth:`Detector.on_close`). So a replay of one long batch, live micro-batches
and a unit test give the same alerts, like bytewax's ``on_notify``.

The values it speaks in (:class:`~detectors.model.Event`, :class:`~detectors.model.Alert`,
their enums and the errors) live in :mod:`detectors.model`, which imports nothing of ours.
"""

from __future__ import annotations

import hashlib
import json
import typing
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Literal, NamedTuple, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from detectors import words
from detectors.model import Alert, AlertStatus, Event, Severity, StateError
from detectors.tm_ids import tm_entity

Scope = Literal["job", "tm", "cluster"]


class Evidence(BaseModel):
    """What an alert shows as its evidence: each detector declares its own fields.

    The link fields name the other jobs and TaskManagers the alert is about, so
    correlation can join it to their incidents without knowing the detector.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    job_ids: tuple[str, ...] | None = None
    tm_ids: tuple[str, ...] | None = None

    def as_dict(self) -> dict[str, Any]:
        """The evidence as an alert carries it (JSON-ready; unset link fields left out)."""
        out = self.model_dump(mode="json")
        for link in ("job_ids", "tm_ids"):
            if out.get(link) is None:
                out.pop(link, None)
        return out


class Record(BaseModel):
    """A mutable part of a detector's state (the state itself, or a record inside it).

    Fields are written on every event, so a declared field is written straight into the
    instance's values; any other name goes to pydantic, which refuses it. Pydantic's own
    assignment (it does not validate here either) also notes the name in
    ``model_fields_set`` (read only by :meth:`Detector.load_json`, before any write), for
    about 75 ns more a write: measured with pydantic 2.14 over every detector call of
    ``tests/detectors``, an ``idle_heap_growth`` sample took 7.05 µs instead of 6.35
    (+11 %), all calls 5 % more.
    A frozen model with ``model_copy(update=...)`` costs 1.8 µs a write.
    """

    model_config = ConfigDict(extra="forbid")

    def __setattr__(self, name: str, value: Any) -> None:
        fields = self.__dict__
        if name in fields:
            fields[name] = value
        else:
            super().__setattr__(name, value)  # not a field: pydantic says so


class Incident(Record):
    """One incident: whether it is open, when it started, and a resolve under way.

    A detector opens, escalates and closes it with :meth:`Detector.fire`,
    :meth:`Detector.escalate` and :meth:`Detector.resolve`; its start time gives every
    transition of the incident one ``alert_id``. A state holds its entity's incident
    (:class:`DetectorState` is one: an entity has one incident at a time), or several,
    keyed by what each is about, as a dict of ``Incident`` subclasses
    (``jm_k8s_watch_crash``: one per JobManager host), passed as ``incident=``.

    Attributes:
        firing: The incident is open.
        incident_start_ms: Event time it fired (its ``alert_id`` comes from it).
        clear_since_ms: Since when its condition has been false (hysteresis).
    """

    firing: bool = False
    incident_start_ms: int | None = None
    clear_since_ms: int | None = None

    def hysteresis(self, condition: bool, now_ms: int, *, clear_for_ms: int) -> str | None:
        """Fire the first time ``condition`` holds; resolve once false for ``clear_for_ms``.

        Returns the transition to emit, ``"firing"`` or ``"resolved"``, or ``None``.

        Example:
            >>> inc = Incident()
            >>> inc.hysteresis(True, 1000, clear_for_ms=500)
            'firing'
            >>> inc.hysteresis(False, 1200, clear_for_ms=500) is None
            True
            >>> inc.hysteresis(False, 1700, clear_for_ms=500)
            'resolved'
        """
        if condition:
            self.clear_since_ms = None
            if not self.firing:
                self.firing = True
                self.incident_start_ms = now_ms
                return "firing"
            return None
        if not self.firing:
            return None
        if self.clear_since_ms is None:
            self.clear_since_ms = now_ms
        if now_ms - self.clear_since_ms >= clear_for_ms:
            self.firing = False
            self.clear_since_ms = None
            return "resolved"
        return None

    def resolve_deadline(self, clear_for_ms: int) -> int | None:
        """When a pending resolve completes if nothing changes (for the detector's timer)."""
        if self.firing and self.clear_since_ms is not None:
            return self.clear_since_ms + clear_for_ms
        return None


class DetectorState(Incident):
    """The fields every detector's state has; each detector subclasses it with its own.

    States are plain data that survive a JSON round trip (the adapter saves them as
    JSON between micro-batches). A detector may change the state it is given in
    place: the adapter hands it a fresh copy each time and keeps the saved text to
    undo a call that raised.

    The state is its entity's :class:`Incident` too: those fields sit in every saved
    state, where the runner finds them to close the incident of a state it can no
    longer load.

    Attributes:
        v: The layout version it was written with (the detector's ``schema_version``).
        entity: The entity key (``job:<id>``, ``tm:<id>``, ``cluster``).
        job_id: The job, when the entity has one.
        job_name: The job's name, when known.
        tm_id: The TaskManager, for TaskManager entities.
        host: The host, when known.
        last_event_ms: The latest event time seen; the idle deadline counts from it.
    """

    v: int = 1
    entity: str
    job_id: str | None = None
    job_name: str | None = None
    tm_id: str | None = None
    host: str | None = None
    last_event_ms: int = 0


S = TypeVar("S", bound=DetectorState)


class Discard(tuple[Alert, ...]):
    """The alerts of a hook that also drops the entity's state (bytewax's ``DISCARD``).

    A hook returns its alerts and the base keeps the state; ``return Discard(alerts)``
    emits them and forgets the entity instead, as if it was never seen.

    Example:
        >>> Discard(), list(Discard([]))
        ((), [])
    """

    __slots__ = ()

    def __new__(cls, alerts: Iterable[Alert] = ()) -> Discard:  # noqa: D102
        return super().__new__(cls, alerts)


class Step(NamedTuple, Generic[S]):
    """What the base tells the runner after one call; detectors never build one.

    Attributes:
        state: The state to keep, or ``None``: the entity's state is dropped.
        alerts: Transitions to emit (firing or resolved), in order.
        timer_ms: When to wake the entity: the detector's :meth:`~Detector.next_deadline`
            or the idle deadline, whichever is first (``None`` with no state).
    """

    state: S | None
    alerts: tuple[Alert, ...] = ()
    timer_ms: int | None = None


class Member(Alert):
    """One alert of an incident, as of its latest transition (``event_time_ms``).

    Attributes:
        first_ms: When the alert first joined the incident (its firing, usually).
    """

    first_ms: int

    @property
    def last_ms(self) -> int:
        """The time of its latest transition."""
        return self.event_time_ms


@dataclass(frozen=True)
class Story:
    """What the headline is told from.

    Attributes:
        root: The member the headline starts from (lowest causal rank, then earliest).
        first: The earliest member of each detector, in the order they fired.
        death: How a process of the incident died, as the detector that knows it best
            tells it (``None``: nobody died).
        dead: The member that told the death.
        role: Which process it was (``TaskManager`` unless a detector knows better).
    """

    root: Member
    first: dict[str, Member]
    death: str | None = None
    dead: Member | None = None
    role: str = "TaskManager"


def default_headline(story: Story) -> str:
    """The root-cause line when the root's detector tells none: who, and its summary."""
    root = story.root
    who = (root.job_name or root.job_id) if root.job_id else (root.tm_id or root.host)
    on = f" on {who}" if who else ""
    return f"{root.detector}{on}: {root.summary}"


def _untold(member: Member) -> None:
    return None


@dataclass(frozen=True)
class Profile:
    """How a detector's incidents are told beyond each alert: every field optional.

    One per detector (``profile = Profile(...)``); the defaults suit a detector that
    says nothing more. The story hooks (``headline``, ``death``, ``aftermath``,
    ``role``) serve correlation only, which builds an incident's root-cause line from
    them with :mod:`detectors.story`'s helpers.

    Attributes:
        runbook: What the person paged should do first (Slack, Alertmanager, webhooks).
        idle_words: What the resolve of an entity gone idle says after who it is
            (:meth:`Detector.on_close`).
        causal_rank: Where its alerts sit in a chain of cause and effect: a leak (0)
            kills a JVM (1), which loses a TaskManager (2), which fails checkpoints
            (3, 4) and restarts the job (5).
        headline: The root-cause line of an incident this detector's alert started.
        death: How a process died, if this detector's alert says: (rank, text), the
            lower rank wins; another detector's headline tells it.
        aftermath: What followed, told at the end of another detector's headline.
        role: Which process the incident is about, if this detector's alert knows.

    Example:
        >>> Profile(runbook="Look at the checkpoint size.", causal_rank=0).idle_words
        'no events any more'
    """

    runbook: str = ""
    idle_words: str = "no events any more"
    causal_rank: int = 3
    headline: Callable[[Story], str] = default_headline
    death: Callable[[Member], tuple[int, str] | None] = _untold
    aftermath: Callable[[Member], str | None] = _untold
    role: Callable[[Member], str | None] = _untold


class DetectorParams(BaseModel):
    """Parameters every detector has; each detector subclasses this with its own."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    enabled: bool = Field(default=True)
    """Run this detector."""
    severity: Severity = Field(default=Severity.WARNING)
    """Severity of its alerts: info, warning or critical."""
    idle_ttl_s: float = Field(default=6 * 3600, gt=0)
    """Drop an entity's state after this long without events (seconds); an open incident is resolved
    then."""
    clear_for_s: float = Field(default=300, ge=0)
    """Hysteresis: a firing alert resolves only after its condition has been false this long
    (event-time seconds), so a flapping condition pages once."""


P = TypeVar("P", bound=DetectorParams)


def given_up_words(detector: str, why: str) -> str:
    """What the resolve of an incident flinkwatch gives up on says (:meth:`Detector.give_up`)."""
    return f"{detector} stopped watching this entity ({why}); closing its open incident"


class Detector(ABC, Generic[P, S]):
    """Base class of all detectors: one state machine per entity, in event time.

    The core, what a new detector is written with (bytewax's ``StatefulLogic``:
    ``on_item``, ``on_notify``, ``notify_at``):

    - ``Detector[P, S]``, ``DetectorParams``, ``DetectorState``: subclass the two models
      and name them as the type arguments; the base reads them from there.
    - ``name``, ``scope``, ``kinds``: the detector's stable name, the entity it keys on
      (``job``, ``tm``, ``cluster``) and the event kinds it reads.
    - ``on_event(state, event)`` (required) and ``on_timer(state, now_ms)``: change the
      state in place and return the alerts of that moment; the base keeps the state.
    - ``next_deadline(state)``: when ``on_timer`` is due next; asked after every call.
    - ``fire(...)``, ``escalate(...)``, ``resolve(...)``: the transitions of an
      :class:`Incident` (the state's own, or ``incident=`` one of several it keys).
    - ``standing(state)``: where the entity stands, in a line of the detector's own
      words (``flinkwatch explain``): what it holds and how far it is from firing, or,
      firing, since when and what resolves it; for ``None``, why it cannot judge. The
      base words a generic line; every real detector says more.

    Optional, each with a default that most detectors keep:

    - ``on_close(state, now_ms)``: the entity went idle and is dropped: close what is open
      (default: resolve the open incident, saying the profile's ``idle_words``).
    - ``new_state(event)``: the state of an entity seen the first time (``None``: leave
      it unwatched); ``return Discard(alerts)``: drop the state after those alerts.
    - ``profile``: how its incidents are told (:class:`Profile`: runbook, idle words,
      causal rank and the story hooks correlation tells an incident's headline with).
    - ``evidence``, ``signals`` with ``signal_values``, ``metrics``, and ``migrate`` for
      an older saved state.

    Everything else (``advance``, ``fire_due``, loading and saving states) is what the
    runner calls; a detector does not.

    Attributes:
        name: Stable detector name; part of the output contract.
        scope: Which entity the detector keys on.
        kinds: Event kinds routed to it.
        metrics: For ``metric`` events, the metric names routed to it.
        params_model: The pydantic model of its parameters (from ``Detector[P, S]``).
        state_model: The pydantic model of its state (from ``Detector[P, S]``).
        schema_version: The state layout's version: the default of the state model's
            ``v``; :meth:`migrate` upgrades older ones.
        profile: How its incidents are told (:class:`Profile`).
        signals: Gauges the detector exports per entity (see :meth:`signal_values`).

    Example:
        >>> from detectors.checkpoint_failures import CheckpointFailures
        >>> det = CheckpointFailures(CheckpointFailures.params_model(min_expired=1))
        >>> step = det.advance(None, None, Event("checkpoint_expired", 1000, job_id="7f",
        ...                                      checkpoint_id=3))
        >>> [a.status.value for a in step.alerts], det.dump(step.state)["firing"]
        (['firing'], True)
    """

    # The core: every detector sets these.
    name: ClassVar[str]
    scope: ClassVar[Scope]
    kinds: ClassVar[frozenset[str]]
    # Optional.
    metrics: ClassVar[frozenset[str]] = frozenset()
    profile: ClassVar[Profile] = Profile()
    #: Gauges for dashboards, per entity: metric name (``flinkwatch_`` is prefixed) → help.
    signals: ClassVar[dict[str, str]] = {}
    # Set by the base from ``Detector[P, S]``.
    params_model: ClassVar[type[DetectorParams]]
    state_model: ClassVar[type[DetectorState]]
    schema_version: ClassVar[int] = 1

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # One source for each model: the class's own type arguments, Detector[P, S] (or a
        # generic detector's, as the rule kinds name theirs: RuleDetector[R, S]).
        for parent in cls.__dict__.get("__orig_bases__", ()):
            origin = typing.get_origin(parent)
            if isinstance(origin, type) and issubclass(origin, Detector):
                params, state = typing.get_args(parent)
                if isinstance(state, type) and issubclass(state, DetectorState):
                    cls.params_model = params
                    cls.state_model = state
                    cls.schema_version = int(state.model_fields["v"].default)

    def __init__(self, params: P) -> None:
        self.params = params
        self.idle_ms = int(params.idle_ttl_s * 1000)

    # The core hooks ------------------------------------------------------------------

    @abstractmethod
    def on_event(self, state: S, event: Event) -> Iterable[Alert]:
        """Fold one event into the entity's state; return the alerts it makes.

        Change ``state`` in place: the base keeps it (a :class:`Discard` drops it) and
        asks :meth:`next_deadline` when the entity is due next.

        Args:
            state: The entity's state; :meth:`new_state` made it from this event for an
                entity seen the first time. Its ``last_event_ms`` and ``job_name``
                already include the event.
            event: The event. Every deadline due at or before its time has fired already.

        Returns:
            The transitions, in order (usually a list, often empty).
        """

    def on_timer(self, state: S, now_ms: int) -> Iterable[Alert]:
        """The deadline :meth:`next_deadline` gave is due; return the alerts it makes.

        ``now_ms`` is that deadline (event time; a detector never reads a clock), or the
        idle deadline if that comes first. Default: no alerts.
        """
        return ()

    def next_deadline(self, state: S) -> int | None:
        """When :meth:`on_timer` is due next (event time, ms); ``None``: not at all.

        Asked after every :meth:`on_event` and :meth:`on_timer` (bytewax's
        ``notify_at``), so the deadline follows from the state. The base wakes the
        entity at the earlier of this and the idle deadline. Default: ``None``.
        """
        return None

    # Optional hooks, with defaults ------------------------------------------------------

    def on_close(self, state: S, now_ms: int) -> Iterable[Alert]:
        """The entity had no event for ``idle_ttl_s``: close what is open, at ``now_ms``.

        Its state is dropped afterwards. Runs after :meth:`on_timer` at the same time (a
        deadline due then comes first). Default: resolve the open incident, if any, as
        ``{subject}: {idle_words}`` (the profile's) with :meth:`evidence`.
        """
        if not state.firing:
            return ()
        summary = f"{self.subject(state)}: {self.profile.idle_words}"
        return (self.resolve(state, now_ms, summary, self.evidence(state)),)

    def give_up(self, state: S, time_ms: int, why: str) -> list[Alert]:
        """Resolve every incident the state holds open: flinkwatch stops watching the entity.

        It kept failing, its saved state is damaged, or the detector was turned off; no
        incident may stay firing forever, so each is resolved saying why. Default: the
        state's own incident. A detector whose state keys several incidents resolves each.
        The state is dropped afterwards.
        """
        if not state.firing:
            return []
        return [self.resolve(state, time_ms, given_up_words(self.name, why), {"reason": why})]

    def evidence(self, state: S) -> Evidence | Mapping[str, Any]:
        """The evidence of the entity's current incident (for :meth:`on_close`)."""
        return {}

    def job_name_from(self, state: S, event: Event) -> str | None:
        """The job name ``state`` takes from ``event`` before :meth:`on_event`; ``None``: none.

        Default: the event's, when it is about the state's job (a TaskManager's state may
        see several jobs: a name goes with its own id).
        """
        if event.job_name and event.job_id in (None, state.job_id or event.job_id):
            return event.job_name
        return None

    def standing(self, state: S | None) -> str:
        """Where the entity stands for this detector, in one line of its own words.

        What the state holds and how far it is from firing (or, firing, since when and
        what would resolve it); for ``None`` (the detector holds nothing for the entity),
        why it cannot judge. ``flinkwatch explain`` prints it for each detector that
        looks at an entity ("why did it not page?"). Times are event time: the state's
        own latest time is "now" (a detector never reads a clock); durations and times
        are worded with :mod:`detectors.words`; no trailing newline, nothing unknown
        shown as a placeholder.

        Default: the open incident (since when, a resolve under way), else that none is
        open and the latest event; for ``None``, the events the detector reads.

        Example:
            >>> from detectors.jvm_fatal import JvmFatal
            >>> Detector.standing(JvmFatal(JvmFatal.params_model()), None)
            'nothing seen for this entity (reads fatal error, jvm oom lines)'
        """
        if state is None:
            return f"nothing seen for this entity (reads {words.reads(self.kinds, self.metrics)})"
        now = state.last_event_ms
        if not state.firing:
            return f"no incident open; latest event {words.at(now)}"
        clearing = state.clear_since_ms
        resolve = (
            f"condition clear since {words.at(clearing)}, resolves after "
            f"{words.span(self.params.clear_for_s)}"
            if clearing is not None
            else f"resolves once its condition is clear for {words.span(self.params.clear_for_s)}"
        )
        return words.clause(words.firing_since(state.incident_start_ms, now), resolve)

    def signal_values(self, state: S) -> dict[str, float]:
        """The entity's current :attr:`signals` (a missing name means not known yet)."""
        return {}

    @classmethod
    def migrate(cls, old: dict[str, Any], from_version: int) -> dict[str, Any]:
        """A state saved with layout ``from_version`` in the current layout.

        Called by :meth:`load` for an older ``v``. Default: there is no older layout.
        """
        msg = f"{cls.name}: no migration from state version {from_version}"
        raise StateError(msg, detector=cls.name, version=from_version)

    # The base's part: time, idleness, persistence ----------------------------------

    def advance(self, state: S | None, timer: int | None, event: Event) -> Step[S]:
        """What the entity does at ``event``: the timers due by then fire, then the event.

        ``timer`` is the pending timer (``None``: none). This is the one way events
        reach a detector, in the Spark adapter and in tests alike.
        """
        if state is None or timer is None or timer > event.time_ms:
            return self.handle_event(state, event)  # nothing due: most events
        fired = self.fire_due(state, timer, event.time_ms)
        step = self.handle_event(fired.state, event)
        return Step(step.state, fired.alerts + step.alerts, step.timer_ms)

    def fire_due(self, state: S | None, timer: int | None, upto: int) -> Step[S]:
        """Fire every timer due at or before ``upto``, each at its own time."""
        alerts: tuple[Alert, ...] = ()
        while state is not None and timer is not None and timer <= upto:
            step = self.handle_timer(state, timer)
            alerts += step.alerts
            state, timer = step.state, step.timer_ms
        return Step(state, alerts, timer if state is not None else None)

    def handle_event(self, state: S | None, event: Event) -> Step[S]:
        """:meth:`on_event`, on a new state or with ``last_event_ms`` and the name kept."""
        if state is None:
            state = self.new_state(event)
            if state is None:
                return Step(state=None)  # not watched
        else:
            if event.time_ms > state.last_event_ms:  # a write is a call (:class:`Record`)
                state.last_event_ms = event.time_ms
            name = self.job_name_from(state, event)
            if name and name != state.job_name:
                state.job_name = name
        return self._after(state, self.on_event(state, event))

    def handle_timer(self, state: S, now_ms: int) -> Step[S]:
        """A timer at ``now_ms``: the idle deadline (base) or the detector's own."""
        idle_at = self.idle_at(state)
        if now_ms >= idle_at:
            # A deadline due at the idle time itself comes first; a late timer (a retry
            # after a failure) still closes at the idle deadline.
            due = self.on_timer(state, idle_at)
            if isinstance(due, Discard):
                return Step(state=None, alerts=tuple(due))
            return Step(state=None, alerts=(*due, *self.on_close(state, idle_at)))
        return self._after(state, self.on_timer(state, now_ms))

    def idle_at(self, state: S) -> int:
        """When the entity counts as idle if no event comes."""
        return state.last_event_ms + self.idle_ms

    def _after(self, state: S, alerts: Iterable[Alert]) -> Step[S]:
        """A hook's alerts, with the state kept (unless discarded) and its next wake-up."""
        if isinstance(alerts, Discard):
            return Step(state=None, alerts=tuple(alerts))
        alerts = tuple(alerts)  # before next_deadline: a generator changes the state as it runs
        idle_at = self.idle_at(state)
        own = self.next_deadline(state)
        return Step(state, alerts, own if own is not None and own <= idle_at else idle_at)

    @classmethod
    def load(cls, data: Mapping[str, Any]) -> S:
        """A saved state (JSON-decoded) as this detector's typed state, migrated if old.

        Raises:
            StateError: The state is of a newer version or does not fit the model.
        """
        if not isinstance(data, Mapping) or not isinstance(data.get("v", 1), int):
            msg = f"{cls.name}: saved state is not a versioned object: {str(data)[:200]}"
            raise StateError(msg, detector=cls.name, version=None)
        version = int(data.get("v") or 1)
        raw = dict(data)
        if version > cls.schema_version:
            msg = f"{cls.name}: state version {version} is newer than {cls.schema_version}"
            raise StateError(msg, detector=cls.name, version=version)
        if version < cls.schema_version:
            try:
                raw = cls.migrate(raw, version)
            except StateError:
                raise
            except Exception as exc:
                msg = f"{cls.name}: migrating state version {version} failed: {exc!r}"
                raise StateError(msg, detector=cls.name, version=version) from exc
            raw["v"] = cls.schema_version
        try:
            return cls.state_model.model_validate(raw)  # type: ignore[return-value]
        except ValidationError as exc:
            msg = f"{cls.name}: saved state does not fit version {version}: {exc}"
            raise StateError(msg, detector=cls.name, version=version) from exc

    @classmethod
    def load_json(cls, text: str) -> S:
        """:meth:`load` from saved JSON text.

        A state of the current version is parsed straight into the model (pydantic's
        parser, no dicts in between: this runs for every entity in every micro-batch);
        anything else takes the checked way through :meth:`load`.
        """
        try:
            state = cls.state_model.model_validate_json(text)
        except ValidationError:
            state = None
        if state is not None and state.v == cls.schema_version and "v" in state.model_fields_set:
            return state  # type: ignore[return-value]
        try:
            data = json.loads(text)
        except ValueError as exc:
            msg = f"{cls.name}: saved state is not JSON: {exc}"
            raise StateError(msg, detector=cls.name, version=None) from exc
        return cls.load(data)

    @staticmethod
    def dump(state: DetectorState) -> dict[str, Any]:
        """The state as JSON-ready data (what :meth:`load` takes back)."""
        return state.model_dump(mode="json")

    @staticmethod
    def dump_json(state: DetectorState) -> str:
        """The state as JSON text (what :meth:`load_json` takes back)."""
        return state.model_dump_json()

    def new_state(self, event: Event, **fields: Any) -> S | None:
        """The state of an entity seen the first time, at ``event``; ``None``: not watched.

        The base calls it before :meth:`on_event`. The identity (entity, job,
        TaskManager, host) and ``last_event_ms`` come from the event, the rest from the
        state model's defaults. Override it to set fields of your own from the first
        event (``return super().new_state(event, clock_ms=event.time_ms)``), or to leave
        an entity without state until an event worth watching comes (``None``).
        """
        identity: dict[str, Any] = {
            "v": self.schema_version,
            "entity": self.entity_of(event, self.scope) or "",
            "job_id": event.job_id,
            "job_name": event.job_name,
            "tm_id": event.tm_id,
            "host": event.host,
            "last_event_ms": event.time_ms,
        }
        return self.state_model(**(identity | fields))  # type: ignore[return-value]

    # Helpers shared by detectors -------------------------------------------------------

    @staticmethod
    def entity_of(event: Event, scope: Scope) -> str | None:
        """An event's entity key for a scope, or ``None`` (``tm:``: :mod:`detectors.tm_ids`)."""
        if scope == "job":
            return f"job:{event.job_id}" if event.job_id else None
        if scope == "tm":
            return tm_entity(event.tm_id) if event.tm_id else None
        return "cluster"

    @staticmethod
    def subject(state: DetectorState) -> str:
        """Who the entity is, for a summary: ``job NAME``, ``TaskManager ID`` or the cluster."""
        if state.entity.startswith("tm:"):
            who = state.tm_id or state.host
            return f"TaskManager {who}" if who else "a TaskManager"
        if state.entity.startswith("job:"):
            who = state.job_name or state.job_id
            return f"job {who}" if who else "a job"
        return "the cluster"

    def fire(
        self,
        state: DetectorState,
        time_ms: int,
        summary: str,
        evidence: Evidence | Mapping[str, Any],
        severity: Severity | None = None,
        *,
        incident: Incident | None = None,
        labels: Mapping[str, str | None] | None = None,
    ) -> Alert:
        """The firing transition of a new incident starting at ``time_ms``; opens it.

        Args:
            state: The entity's state; the alert names its job, TaskManager and host.
            time_ms: When the incident starts (its ``alert_id`` comes from it).
            summary: What the page says.
            evidence: What the person paged reads.
            severity: Default: the ``severity`` parameter.
            incident: The incident, when the state keys several (default: the state's own).
            labels: Who the alert names instead of the state's ``job_id``, ``job_name``,
                ``tm_id`` and ``host`` (an incident keyed by another process).
        """
        inc = state if incident is None else incident
        inc.firing = True
        inc.incident_start_ms = time_ms
        inc.clear_since_ms = None
        return self._transition(
            state, inc, AlertStatus.FIRING, time_ms, summary, evidence, severity, labels
        )

    def escalate(
        self,
        state: DetectorState,
        time_ms: int,
        summary: str,
        evidence: Evidence | Mapping[str, Any],
        severity: Severity | None = None,
        *,
        incident: Incident | None = None,
        labels: Mapping[str, str | None] | None = None,
    ) -> Alert:
        """A further page of the open incident (worse now); it stays open, its id the same.

        Arguments as :meth:`fire`.
        """
        inc = state if incident is None else incident
        return self._transition(
            state, inc, AlertStatus.ESCALATED, time_ms, summary, evidence, severity, labels
        )

    def resolve(
        self,
        state: DetectorState,
        time_ms: int,
        summary: str,
        evidence: Evidence | Mapping[str, Any],
        severity: Severity | None = None,
        *,
        incident: Incident | None = None,
        labels: Mapping[str, str | None] | None = None,
    ) -> Alert:
        """The resolved transition of the open incident; closes it.

        The alert carries the incident's ``alert_id`` (it is built before the incident's
        start time is cleared); afterwards the incident is ready to fire again.
        Arguments as :meth:`fire`.
        """
        inc = state if incident is None else incident
        alert = self._transition(
            state, inc, AlertStatus.RESOLVED, time_ms, summary, evidence, severity, labels
        )
        inc.firing = False
        inc.incident_start_ms = None
        inc.clear_since_ms = None
        return alert

    def _transition(
        self,
        state: DetectorState,
        incident: Incident,
        status: AlertStatus,
        event_time_ms: int,
        summary: str,
        evidence: Evidence | Mapping[str, Any],
        severity: Severity | None,
        labels: Mapping[str, str | None] | None = None,
    ) -> Alert:
        """An alert whose id is stable for one incident of one entity: its start time's."""
        entity = state.entity
        start = incident.incident_start_ms or event_time_ms
        raw = f"{self.name}|{entity}|{start}".encode()
        if isinstance(evidence, Evidence):
            evidence = evidence.as_dict()
        who = {"job_id": state.job_id, "job_name": state.job_name}
        who |= {"tm_id": state.tm_id, "host": state.host} | dict(labels or {})
        return Alert(
            alert_id=hashlib.sha1(raw, usedforsecurity=False).hexdigest()[:16],
            detector=self.name,
            entity=entity,
            status=status,
            severity=severity or self.params.severity,
            event_time_ms=event_time_ms,
            summary=summary,
            job_id=who["job_id"],
            job_name=who["job_name"],
            tm_id=who["tm_id"],
            host=who["host"],
            evidence=dict(evidence),
        )
