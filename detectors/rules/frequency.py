"""The ``frequency`` rule: ``count`` log lines of some kinds (or matching a pattern) in a window.

ElastAlert's ``frequency``: per job (or TaskManager), fire when at least ``count`` events of
``kinds`` whose message matches ``pattern`` (searched, not matched whole) arrived within
``window_s``; resolve once fewer have for ``clear_for_s``. The state keeps the times of the
latest ``count`` events only: enough to know whether ``count`` fit in the window.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from detectors import words
from detectors.base import DetectorState
from detectors.model import EVENT_KINDS, Alert, Event
from detectors.rules.base import RuleDetector
from detectors.rules.params import MAX_WINDOW_S, RuleParams
from detectors.rules.regex import check_pattern, search

#: The most events a count may need (the state keeps that many times per entity).
MAX_COUNT = 500
#: Kinds a pattern alone reads: the log lines flinkwatch knows no better kind for.
LOG_KINDS = ("log_warn", "log_error")
_EXAMPLE_CHARS = 300


def check_kinds(kinds: tuple[str, ...]) -> tuple[str, ...]:
    """``kinds`` if each is a log event kind the parser emits (``metric`` is not one)."""
    unknown = [k for k in kinds if k not in EVENT_KINDS or k == "metric"]
    if unknown:
        msg = f"unknown event kinds {unknown}; known: {[k for k in EVENT_KINDS if k != 'metric']}"
        raise ValueError(msg)
    return kinds


class FrequencyRule(RuleParams):
    """At least ``count`` events of ``kinds`` (matching ``pattern``) within ``window_s``."""

    kind: Literal["frequency"]
    """frequency"""
    kinds: tuple[str, ...] = ()
    """Event kinds counted (log_warn, log_error, checkpoint_declined, ...); with only a
    pattern: log_warn and log_error."""
    pattern: str | None = None
    """A regular expression (RE2 syntax) searched in the event's message; only matching
    events count."""
    count: int = Field(ge=1, le=MAX_COUNT)
    """How many events within window_s fire the rule."""
    window_s: float = Field(gt=0, le=MAX_WINDOW_S)
    """The window (event-time seconds)."""

    _kinds = field_validator("kinds")(check_kinds)

    @field_validator("pattern")
    @classmethod
    def _safe(cls, v: str | None) -> str | None:
        return check_pattern(v) if v is not None else v

    @model_validator(mode="after")
    def _something(self) -> FrequencyRule:
        if not self.kinds and self.pattern is None:
            msg = "give kinds and/or pattern"
            raise ValueError(msg)
        return self

    def counted_kinds(self) -> tuple[str, ...]:
        """The kinds counted: ``kinds``, or with only a pattern the WARN and ERROR lines."""
        return self.kinds or LOG_KINDS

    def watches(self) -> str:  # noqa: D102
        what = " or ".join(self.counted_kinds())
        return what + (f" matching /{self.pattern}/" if self.pattern else "")

    def condition(self) -> str:  # noqa: D102
        return f">= {self.count} in {words.span(self.window_s)}"


class FrequencyState(DetectorState):
    """Per entity: the times of its latest ``count`` matching events, and the latest one's text."""

    times_ms: list[int] = []
    example: str | None = None


class FrequencyDetector(RuleDetector[FrequencyRule, FrequencyState]):
    """Fire when ``count`` matching events fall within ``window_s``."""

    @classmethod
    def kinds_of(cls, rule: FrequencyRule) -> set[str]:  # noqa: D102
        return set(rule.counted_kinds())

    def new_state(self, event: Event, **fields: Any) -> FrequencyState | None:
        """Watch an entity from its first matching event only."""
        return super().new_state(event, **fields) if self._counts(event) else None

    def on_event(self, state: FrequencyState, event: Event) -> list[Alert]:
        """Count a matching event; fire when ``count`` are within the window."""
        if not self.admits(state, event) or not self._counts(event):
            return []
        p = self.params
        state.times_ms = [*state.times_ms, event.time_ms][-p.count :]
        if event.message:
            state.example = event.message[:_EXAMPLE_CHARS]
        return self._judge(state, event.time_ms)

    def on_timer(self, state: FrequencyState, now_ms: int) -> list[Alert]:
        """An event left the window, or a resolve is due."""
        return self._judge(state, now_ms)

    def next_deadline(self, state: FrequencyState) -> int | None:
        """While firing: when the oldest counted event leaves the window, or the resolve."""
        if not state.firing:
            return None
        resolve = state.resolve_deadline(int(self.params.clear_for_s * 1000))
        if resolve is not None:
            return resolve
        return state.times_ms[0] + int(self.params.window_s * 1000) if state.times_ms else None

    def in_window(self, state: FrequencyState, now_ms: int) -> int:
        """How many of the kept events are within the window at ``now_ms``."""
        since = now_ms - self.params.window_s * 1000
        return sum(1 for t in state.times_ms if t > since)

    def _counts(self, event: Event) -> bool:
        p = self.params
        if event.kind not in p.counted_kinds():
            return False
        return p.pattern is None or search(p.pattern, event.message or "")

    def _judge(self, state: FrequencyState, now_ms: int) -> list[Alert]:
        p = self.params
        since = now_ms - p.window_s * 1000
        state.times_ms = [t for t in state.times_ms if t > since]
        n = len(state.times_ms)
        holds = n >= p.count
        what = self.params.watches()
        if not state.firing:
            if not holds:
                return []
            summary = f"{self.who(state)}: {n} {what} in {words.span(p.window_s)}"
            return [self.fire(state, now_ms, summary, self.evidence(state))]
        if state.hysteresis(holds, now_ms, clear_for_ms=int(p.clear_for_s * 1000)) != "resolved":
            return []
        summary = f"{self.who(state)}: {n} {what} in {words.span(p.window_s)}, fewer than {p.count}"
        return [self.resolve(state, now_ms, summary, self.evidence(state))]

    def evidence(self, state: FrequencyState) -> dict[str, Any]:  # noqa: D102
        p = self.params
        return {
            "count": len(state.times_ms),
            "threshold": p.count,
            "window_s": p.window_s,
            "kinds": list(p.counted_kinds()),
            "pattern": p.pattern,
            "example": state.example,
        }

    def standing(self, state: FrequencyState | None) -> str:
        """``3 of 5 log_error in the last 10 min``, or why it cannot judge."""
        p = self.params
        if state is None:
            return f"no {p.watches()} from this {'TaskManager' if p.scope == 'tm' else 'job'}"
        n = self.in_window(state, state.last_event_ms)
        held = f"{n} of {p.count} {p.watches()} in the last {words.span(p.window_s)}"
        return words.clause(self.firing(state), held)
