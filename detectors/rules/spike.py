"""The ``spike`` rule: a rate that changes sharply, this window against the one before.

ElastAlert's ``spike``: per job (or TaskManager), compare the current ``window_s`` with the
one before it: the count of events of ``kinds`` (matching ``pattern``), or the mean of a
metric's samples. Fire when the current is ``spike_height`` times the previous (``up``),
a ``spike_height``-th of it (``down``), or either (``both``), and the larger side reaches
``min_count`` (``min_value`` for a metric), so 1 → 3 errors does not page. Nothing is
judged before the entity has been watched for both windows (a job that just started is no
spike from zero). The state is 20 buckets of a tenth of the window each, whatever the rate.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from detectors import words
from detectors.base import DetectorState
from detectors.model import Alert, Event
from detectors.rules.base import RuleDetector
from detectors.rules.frequency import LOG_KINDS, check_kinds
from detectors.rules.params import (
    MAX_WINDOW_S,
    Labels,
    RuleParams,
    figure,
    short_metric,
)
from detectors.rules.regex import check_pattern, search

#: Buckets per window: the state holds two windows of them.
BUCKETS = 10


class SpikeRule(RuleParams):
    """The count (or a metric's mean) of this window ``spike_height`` times the previous one's."""

    kind: Literal["spike"]
    """spike"""
    kinds: tuple[str, ...] = ()
    """Event kinds counted (give kinds and/or pattern, or metric)."""
    pattern: str | None = None
    """A regular expression (RE2 syntax) searched in the event's message; only matching
    events count."""
    metric: str | None = Field(
        default=None, min_length=1, max_length=300, pattern=r"^[A-Za-z_:][A-Za-z0-9_:]*$"
    )
    """A metric whose mean over its samples is compared instead of a count."""
    match: Labels = Labels()
    """Which of the metric's series count: {task, tm_id, host} regular expressions."""
    window_s: float = Field(gt=0, le=MAX_WINDOW_S)
    """Each window's length (event-time seconds); two are compared."""
    spike_height: float = Field(gt=1, le=1_000_000)
    """How many times larger (up) or smaller (down) the current window must be."""
    direction: Literal["up", "down", "both"] = "up"
    """Which change pages: up, down or both."""
    min_count: int = Field(default=10, ge=1, le=1_000_000_000)
    """Counts: the larger window must hold at least this many events."""
    min_value: float = Field(default=0, ge=0)
    """Metrics: the larger window's mean must be at least this."""

    _kinds = field_validator("kinds")(check_kinds)

    @field_validator("pattern")
    @classmethod
    def _safe(cls, v: str | None) -> str | None:
        return check_pattern(v) if v is not None else v

    @model_validator(mode="after")
    def _one_thing(self) -> SpikeRule:
        counts = bool(self.kinds) or self.pattern is not None
        if counts == (self.metric is not None):
            msg = "give kinds and/or pattern (a count), or metric (a mean), not both"
            raise ValueError(msg)
        if 2 * self.window_s >= self.idle_ttl_s:
            msg = (
                f"two windows ({2 * self.window_s:g} s) must fit in idle_ttl_s "
                f"({self.idle_ttl_s:g})"
            )
            raise ValueError(msg)
        return self

    def counted_kinds(self) -> tuple[str, ...]:
        """The kinds counted: ``kinds``, or with only a pattern the WARN and ERROR lines."""
        return self.kinds or LOG_KINDS

    def thing(self) -> str:
        """What is compared, in a few words."""
        if self.metric is not None:
            return f"{short_metric(self.metric)} mean"
        what = " or ".join(self.counted_kinds())
        return what + (f" matching /{self.pattern}/" if self.pattern else "")

    def watches(self) -> str:  # noqa: D102
        labels = self.match.words()
        return self.thing() + (f" {{{labels}}}" if labels and self.metric else "")

    def condition(self) -> str:  # noqa: D102
        floor = (
            f"min_count {self.min_count}"
            if self.metric is None
            else f"min_value {figure(self.min_value)}"
        )
        windows = f"{words.span(self.window_s)} against the one before"
        return f"{self.direction} {self.spike_height:g}x, {windows} ({floor})"


class SpikeState(DetectorState):
    """Per entity: ``[bucket, sum, samples]`` of the last two windows.

    Also since when the entity is watched, and when it was last judged (its timer's clock).
    """

    buckets: list[list[float]] = []
    first_ms: int = 0
    judged_ms: int = 0


class SpikeDetector(RuleDetector[SpikeRule, SpikeState]):
    """Fire when this window's count or mean is ``spike_height`` times off the previous one's."""

    @classmethod
    def kinds_of(cls, rule: SpikeRule) -> set[str]:  # noqa: D102
        return {"metric"} if rule.metric else set(rule.counted_kinds())

    @classmethod
    def metrics_of(cls, rule: SpikeRule) -> set[str]:  # noqa: D102
        return {rule.metric} if rule.metric else set()

    def new_state(self, event: Event, **fields: Any) -> SpikeState | None:
        """Watch an entity from its first counted event or sample."""
        if not self._counts(event):
            return None
        return super().new_state(event, first_ms=event.time_ms, **fields)

    @property
    def bucket_ms(self) -> int:
        """A bucket's length: a tenth of the window."""
        return max(1, int(self.params.window_s * 1000) // BUCKETS)

    def on_event(self, state: SpikeState, event: Event) -> list[Alert]:
        """Add the event (or sample) to its bucket, then compare the windows."""
        if not self._counts(event) or not self.admits(state, event):
            return []
        idx = event.time_ms // self.bucket_ms
        add = float(event.value or 0) if self.params.metric else 1.0
        if state.buckets and state.buckets[-1][0] == idx:
            state.buckets[-1][1] += add
            state.buckets[-1][2] += 1
        elif not state.buckets or state.buckets[-1][0] < idx:
            state.buckets.append([float(idx), add, 1.0])
        else:  # an event late for its bucket: into the one it belongs to, if still kept
            for b in state.buckets:
                if b[0] == idx:
                    b[1] += add
                    b[2] += 1
        return self._judge(state, event.time_ms)

    def on_timer(self, state: SpikeState, now_ms: int) -> list[Alert]:
        """A bucket boundary (the windows moved) or a resolve is due."""
        return self._judge(state, now_ms)

    def next_deadline(self, state: SpikeState) -> int | None:
        """The next bucket boundary while a drop can page or an incident is open.

        A rise pages on the event that makes it, so an ``up`` rule needs no timer until it
        fires; a drop pages as the windows move past the last event. Once both windows are
        empty there is nothing left to compare.
        """
        p = self.params
        if not state.firing and (p.direction == "up" or not state.buckets):
            return None
        nxt = (state.judged_ms // self.bucket_ms + 1) * self.bucket_ms
        resolve = state.resolve_deadline(int(p.clear_for_s * 1000))
        return min(nxt, resolve) if resolve is not None else nxt

    def windows(self, state: SpikeState, now_ms: int) -> tuple[float | None, float | None]:
        """The current and previous windows' count (or mean) at ``now_ms``; ``None``: unknown."""
        k = now_ms // self.bucket_ms
        cur = [b for b in state.buckets if k - BUCKETS < b[0] <= k]
        prev = [b for b in state.buckets if k - 2 * BUCKETS < b[0] <= k - BUCKETS]
        if self.params.metric is None:
            return sum(b[1] for b in cur), sum(b[1] for b in prev)
        return _mean(cur), _mean(prev)

    def ready(self, state: SpikeState, now_ms: int) -> bool:
        """Whether the entity was watched for the whole previous window."""
        k = now_ms // self.bucket_ms
        return state.first_ms <= (k - 2 * BUCKETS + 1) * self.bucket_ms

    def _judge(self, state: SpikeState, now_ms: int) -> list[Alert]:
        p = self.params
        k = now_ms // self.bucket_ms
        state.judged_ms = max(state.judged_ms, now_ms)
        state.buckets = [b for b in state.buckets if b[0] > k - 2 * BUCKETS]
        cur, prev = self.windows(state, now_ms)
        change = self._change(cur, prev) if self.ready(state, now_ms) else None
        holds = change is not None
        if not state.firing:
            if not holds:
                return []
            summary = f"{self.who(state)}: {self._words(cur, prev)}"
            return [self.fire(state, now_ms, summary, self._evidence(cur, prev))]
        if state.hysteresis(holds, now_ms, clear_for_ms=int(p.clear_for_s * 1000)) != "resolved":
            return []
        summary = (
            f"{self.who(state)}: {self._words(cur, prev)}, no longer a {p.spike_height:g}x change"
        )
        return [self.resolve(state, now_ms, summary, self._evidence(cur, prev))]

    def _change(self, cur: float | None, prev: float | None) -> str | None:
        """``up`` or ``down`` when the windows differ enough, else ``None``."""
        p = self.params
        if cur is None or prev is None:
            return None
        floor = p.min_count if p.metric is None else p.min_value
        if p.direction in ("up", "both") and cur >= floor and cur >= prev * p.spike_height:
            return "up" if cur > 0 else None
        if p.direction in ("down", "both") and prev >= floor and cur * p.spike_height <= prev:
            return "down" if prev > 0 else None
        return None

    def _words(self, cur: float | None, prev: float | None) -> str:
        p = self.params
        win = words.span(p.window_s)
        c, r = figure(cur or 0), figure(prev or 0)
        ratio = ""
        if cur and prev:
            x = max(cur, prev) / min(cur, prev)
            ratio = f"{'up' if cur > prev else 'down'} {x:.2g}x from "
        elif prev == 0 and cur:
            ratio = "up from "
        elif cur == 0 and prev:
            ratio = "down from "
        if p.metric is None:
            return f"{c} {p.thing()} in {win}, {ratio}{r} the {win} before"
        return f"{p.thing()} {c} over {win}, {ratio}{r} the {win} before"

    def _evidence(self, cur: float | None, prev: float | None) -> dict[str, Any]:
        p = self.params
        return {
            "current": cur,
            "previous": prev,
            "window_s": p.window_s,
            "spike_height": p.spike_height,
            "direction": p.direction,
            "metric": p.metric,
            "kinds": list(p.counted_kinds()) if p.metric is None else [],
            "pattern": p.pattern,
        }

    def evidence(self, state: SpikeState) -> dict[str, Any]:  # noqa: D102
        return self._evidence(*self.windows(state, state.last_event_ms))

    def standing(self, state: SpikeState | None) -> str:
        """The two windows as they stand, or why the rule cannot compare them yet."""
        p = self.params
        where = "TaskManager" if p.scope == "tm" else "job"
        if state is None:
            return f"no {p.thing().removesuffix(' mean')} from this {where}"
        now = state.last_event_ms
        cur, prev = self.windows(state, now)
        if not self.ready(state, now):
            left = (state.first_ms + 2 * p.window_s * 1000 - now) / 1000
            to_go = words.span(max(left, 0))
            return f"watched for less than two windows of {words.span(p.window_s)} ({to_go} to go)"
        now_words = f"{self._words(cur, prev)}; pages at {p.direction} {p.spike_height:g}x"
        return words.clause(self.firing(state), now_words)

    def _counts(self, event: Event) -> bool:
        p = self.params
        if p.metric is not None:
            return (
                event.kind == "metric"
                and event.metric == p.metric
                and event.value is not None
                and p.match.admits(event)
            )
        if event.kind not in p.counted_kinds():
            return False
        return p.pattern is None or search(p.pattern, event.message or "")


def _mean(buckets: list[list[float]]) -> float | None:
    n = sum(b[2] for b in buckets)
    return sum(b[1] for b in buckets) / n if n else None
