"""The ``flatline`` rule: a metric or a kind of log line that stops for a job that had it.

ElastAlert's ``flatline`` and PromQL's ``absent_over_time``: once an entity has sent the
rule's metric (or events of its kinds), fire when none arrived for ``for_s`` of event time,
and resolve when one comes back. The deadline is a timer, so the rule fires while nothing
comes from the entity at all, as the runner's clock (the bus's newest time) passes it.

A job's own end is no flatline: a job that reaches FINISHED, CANCELED, FAILED or SUSPENDED
(its JobManager's log says so), or a TaskManager released by the JobManager, is no longer
watched (an open incident resolves saying so), until it sends the metric again. Without
the JobManager's log flinkwatch cannot tell an end from a stop: a cancelled job's metrics
stop like a stalled one's, and page after ``for_s``. An entity that sends nothing the rule
reads for ``idle_ttl_s`` is dropped (its open incident resolves), so ``for_s`` must be
shorter.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from detectors import words
from detectors.base import DetectorState, Discard
from detectors.model import Alert, Event
from detectors.rules.base import RuleDetector
from detectors.rules.frequency import check_kinds
from detectors.rules.params import MAX_WINDOW_S, Labels, RuleParams, short_metric

#: Job states after which a job's metrics stop on purpose.
END_STATES = frozenset({"FINISHED", "CANCELED", "CANCELLED", "FAILED", "SUSPENDED"})


class FlatlineRule(RuleParams):
    """Nothing of ``metric`` (or of ``kinds``) from an entity that had it, for ``for_s``."""

    kind: Literal["flatline"]
    """flatline"""
    metric: str | None = Field(
        default=None, min_length=1, max_length=300, pattern=r"^[A-Za-z_:][A-Za-z0-9_:]*$"
    )
    """The metric that must keep coming (give metric or kinds)."""
    match: Labels = Labels()
    """Which of the metric's series count: {task, tm_id, host} regular expressions."""
    kinds: tuple[str, ...] = ()
    """Event kinds that must keep coming (e.g. checkpoint_completed)."""
    for_s: float = Field(gt=0, le=MAX_WINDOW_S)
    """How long nothing may come (event-time seconds) before the rule fires."""

    _kinds = field_validator("kinds")(check_kinds)

    @model_validator(mode="after")
    def _one_thing(self) -> FlatlineRule:
        if (self.metric is None) == (not self.kinds):
            msg = "give either metric or kinds"
            raise ValueError(msg)
        if self.for_s >= self.idle_ttl_s:
            msg = f"for_s ({self.for_s:g}) must be shorter than idle_ttl_s ({self.idle_ttl_s:g})"
            raise ValueError(msg)
        return self

    def thing(self) -> str:
        """What must keep coming, in a word or two."""
        return short_metric(self.metric) if self.metric else " or ".join(self.kinds)

    def watches(self) -> str:  # noqa: D102
        labels = self.match.words()
        return self.thing() + (f" {{{labels}}}" if labels and self.metric else "")

    def condition(self) -> str:  # noqa: D102
        return f"none for {words.span(self.for_s)}"


class FlatlineState(DetectorState):
    """Per entity: when the watched metric or kind last arrived."""

    seen_ms: int = 0


class FlatlineDetector(RuleDetector[FlatlineRule, FlatlineState]):
    """Fire when the watched metric or kind stops for ``for_s``; resolve when it comes back."""

    @classmethod
    def kinds_of(cls, rule: FlatlineRule) -> set[str]:  # noqa: D102
        ends = {"job_state"} if rule.scope == "job" else {"tm_released"}
        return ({"metric"} if rule.metric else set(rule.kinds)) | ends

    @classmethod
    def metrics_of(cls, rule: FlatlineRule) -> set[str]:  # noqa: D102
        return {rule.metric} if rule.metric else set()

    def new_state(self, event: Event, **fields: Any) -> FlatlineState | None:
        """Watch an entity from the first time it sends what the rule watches."""
        if not self._watched(event):
            return None
        return super().new_state(event, seen_ms=event.time_ms, **fields)

    def on_event(self, state: FlatlineState, event: Event) -> Iterable[Alert]:
        """The watched thing arrived (resolve if firing), or the entity ended (stop watching)."""
        p = self.params
        if self._ended(event):
            if not state.firing:
                return Discard()
            why = f"{event.to_state or 'released'}, no longer watched"
            summary = f"{self.who(state)}: {'job' if p.scope == 'job' else 'TaskManager'} {why}"
            return Discard([self.resolve(state, event.time_ms, summary, self.evidence(state))])
        if not self._watched(event) or not self.admits(state, event):
            return []
        gap = (event.time_ms - state.seen_ms) / 1000
        state.seen_ms = max(state.seen_ms, event.time_ms)
        if not state.firing:
            return []
        summary = f"{self.who(state)}: {p.thing()} back after {words.span(gap)}"
        return [self.resolve(state, event.time_ms, summary, self.evidence(state))]

    def on_timer(self, state: FlatlineState, now_ms: int) -> list[Alert]:
        """Nothing came for ``for_s``: fire."""
        p = self.params
        if state.firing or now_ms < state.seen_ms + p.for_s * 1000:
            return []
        summary = f"{self.who(state)}: no {p.thing()} for {words.span(p.for_s)}"
        return [self.fire(state, now_ms, summary, self.evidence(state))]

    def next_deadline(self, state: FlatlineState) -> int | None:
        """``for_s`` after the watched thing last arrived, until the rule fires."""
        return None if state.firing else state.seen_ms + int(self.params.for_s * 1000)

    def evidence(self, state: FlatlineState) -> dict[str, Any]:  # noqa: D102
        p = self.params
        return {
            "metric": p.metric,
            "kinds": list(p.kinds),
            "for_s": p.for_s,
            "last_seen_ms": state.seen_ms,
        }

    def standing(self, state: FlatlineState | None) -> str:
        """When the watched thing last came and how long until it counts as stopped."""
        p = self.params
        where = "TaskManager" if p.scope == "tm" else "job"
        if state is None:
            what = p.metric or " or ".join(p.kinds)
            return f"not watched: no {what} from this {where} yet, or it ended"
        if state.firing:
            none = f"no {p.thing()} since {words.at(state.seen_ms)}; resolves when one comes"
            return words.clause(self.firing(state), none)
        due = words.at(state.seen_ms + int(p.for_s * 1000))
        return f"{p.thing()} last at {words.at(state.seen_ms)}; fires at {due} if none comes"

    def _watched(self, event: Event) -> bool:
        p = self.params
        if p.metric is not None:
            return event.kind == "metric" and event.metric == p.metric and p.match.admits(event)
        return event.kind in p.kinds

    def _ended(self, event: Event) -> bool:
        if self.params.scope == "job":
            return event.kind == "job_state" and (event.to_state or "").upper() in END_STATES
        return event.kind == "tm_released"
