"""The ``threshold`` rule: a metric's value per job or TaskManager past a bound for a while.

PromQL's ``max by (job_id) (metric{task=~"..."}) > 800`` with ``for: 10m``, judged in event
time: the entity's value is an aggregate (max, min, avg, sum) over the latest sample of
each of its series (one per TaskManager and task) seen within ``stale_s``; the condition
must hold at every sample for ``for_s`` before the rule fires, and resolves once false for
``clear_for_s``. ``also`` adds a second metric condition that must hold at the same time
(a sink that writes nothing *while* the source reads).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from detectors import words
from detectors.base import DetectorState
from detectors.model import Alert, Event
from detectors.rules.base import RuleDetector
from detectors.rules.params import (
    AGGREGATES,
    MAX_WINDOW_S,
    NOT_OPS,
    OPS,
    Aggregate,
    Labels,
    Op,
    RuleParams,
    figure,
    short_metric,
)

#: A series key is cut to this many characters (task names run long in SQL jobs).
_KEY_CHARS = 120


class MetricCondition(BaseModel):
    """A condition on one metric's aggregate per entity: ``max(metric{match}) > value``."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    metric: str = Field(min_length=1, max_length=300, pattern=r"^[A-Za-z_:][A-Za-z0-9_:]*$")
    """The metric's name as the parser emits it (flink_taskmanager_job_task_...)."""
    match: Labels = Labels()
    """Which of its series count: {task, tm_id, host} regular expressions, matched whole."""
    aggregate: Aggregate = "max"
    """How the entity's series make one value: max, min, avg or sum of their latest samples."""
    op: Op = ">"
    """The comparison: >, >=, < or <=."""
    value: float
    """The bound the aggregate is compared with."""
    stale_s: float = Field(default=120, gt=0, le=3600)
    """A series whose latest sample is older than this no longer counts (seconds)."""

    def series(self) -> str:
        """``numRecordsInPerSecond {task ~ .*Sink.*}``: the metric and its label patterns."""
        labels = self.match.words()
        return short_metric(self.metric) + (f" {{{labels}}}" if labels else "")

    def bound(self) -> str:
        """``backPressuredTimeMsPerSecond {task ~ Map.*} max > 800``."""
        return f"{self.series()} {self.aggregate} {self.op} {figure(self.value)}"

    def words(self, agg: float | None = None) -> str:
        """``backPressuredTimeMsPerSecond max > 800`` (with the aggregate's value if given)."""
        now = f" {figure(agg)}" if agg is not None else ""
        return f"{short_metric(self.metric)} {self.aggregate}{now} {self.op} {figure(self.value)}"


class ThresholdRule(RuleParams, MetricCondition):
    """A metric's aggregate per job or TaskManager past a bound for ``for_s`` (PromQL ``for:``)."""

    kind: Literal["threshold"]
    """threshold"""
    for_s: float = Field(default=0, ge=0, le=MAX_WINDOW_S)
    """How long the condition must hold (event-time seconds) before the rule fires."""
    also: MetricCondition | None = None
    """A second metric condition that must hold at the same time (e.g. input flowing)."""
    max_series: int = Field(default=64, ge=1, le=256)
    """The most series kept per entity (the oldest is dropped first): bounds the state."""

    @model_validator(mode="after")
    def _fire_before_idle(self) -> ThresholdRule:
        if self.for_s >= self.idle_ttl_s:
            msg = f"for_s ({self.for_s:g}) must be shorter than idle_ttl_s ({self.idle_ttl_s:g})"
            raise ValueError(msg)
        return self

    def condition(self) -> str:
        """Each series once, with its labels, where its bound is (no separate ``watches``)."""
        cond = self.bound()
        if self.also is not None:
            cond += f" while {self.also.bound()}"
        return cond + (f" for {words.span(self.for_s)}" if self.for_s else "")


class ThresholdState(DetectorState):
    """Per entity: the latest sample of each series, and since when the condition holds.

    ``series`` maps ``<condition>|<tm or job>|<task>`` (condition 0 the rule's, 1 its
    ``also``) to ``[time_ms, value]``, oldest first.
    """

    series: dict[str, list[float]] = {}
    holding_since_ms: int | None = None
    value: float | None = None


class ThresholdDetector(RuleDetector[ThresholdRule, ThresholdState]):
    """Fire when the rule's metric condition (and ``also``) held for ``for_s``."""

    @classmethod
    def kinds_of(cls, rule: ThresholdRule) -> set[str]:  # noqa: D102
        return {"metric"}

    @classmethod
    def metrics_of(cls, rule: ThresholdRule) -> set[str]:  # noqa: D102
        return {rule.metric} | ({rule.also.metric} if rule.also else set())

    def on_event(self, state: ThresholdState, event: Event) -> list[Alert]:
        """Keep the sample if its series counts, then judge the entity at its time."""
        p = self.params
        if event.value is None or not self.admits(state, event):
            return []
        for i, cond in enumerate((p, p.also)):
            if cond is not None and event.metric == cond.metric and cond.match.admits(event):
                key = self.series_key(i, event)
                state.series.pop(key, None)  # re-inserted last: the dict stays oldest first
                state.series[key] = [float(event.time_ms), float(event.value)]
        if len(state.series) > p.max_series:
            for key in list(state.series)[: len(state.series) - p.max_series]:
                del state.series[key]
        return self._judge(state, event.time_ms)

    def series_key(self, condition: int, event: Event) -> str:
        """``<condition>|<who>|<task>``: the series an event belongs to, within its entity.

        ``who`` is the TaskManager in a job's state, the job in a TaskManager's (the
        entity's own id would repeat in every key). Cut to :data:`_KEY_CHARS`: a key is
        saved with the state on every batch.
        """
        who = event.tm_id if self.params.scope == "job" else event.job_id
        return f"{condition}|{who or ''}|{event.task or ''}"[:_KEY_CHARS]

    def on_timer(self, state: ThresholdState, now_ms: int) -> list[Alert]:
        """``for_s`` passed, a sample went stale, or a resolve is due: judge again."""
        return self._judge(state, now_ms)

    def next_deadline(self, state: ThresholdState) -> int | None:
        """When the condition will have held for ``for_s``, a sample goes stale, or a resolve."""
        p = self.params
        due = []
        if not state.firing and state.holding_since_ms is not None:
            due.append(state.holding_since_ms + int(p.for_s * 1000))
        resolve = state.resolve_deadline(int(p.clear_for_s * 1000))
        if resolve is not None:
            due.append(resolve)
        if state.series and (state.holding_since_ms is not None or state.firing):
            # The value changes when a sample goes stale, not only when one comes.
            due.append(min(int(t + self._stale_ms(k)) + 1 for k, (t, _) in state.series.items()))
        return min(due) if due else None

    def _stale_ms(self, key: str) -> float:
        p = self.params
        cond = p.also if key[0] == "1" and p.also is not None else p
        return cond.stale_s * 1000

    def values(self, state: ThresholdState, now_ms: int) -> tuple[float | None, float | None]:
        """The entity's aggregate of the rule's metric and of ``also``'s at ``now_ms``."""
        p = self.params
        out: list[float | None] = []
        for i, cond in enumerate((p, p.also)):
            if cond is None:
                out.append(None)
                continue
            since = now_ms - cond.stale_s * 1000
            vals = [v for k, (t, v) in state.series.items() if k[0] == str(i) and t >= since]
            out.append(AGGREGATES[cond.aggregate](vals) if vals else None)
        return out[0], out[1]

    def _holds(self, value: float | None, other: float | None) -> bool:
        p = self.params
        if value is None or not OPS[p.op](value, p.value):
            return False
        return p.also is None or (other is not None and OPS[p.also.op](other, p.also.value))

    def _judge(self, state: ThresholdState, now_ms: int) -> list[Alert]:
        p = self.params
        state.series = {
            k: tv for k, tv in state.series.items() if tv[0] + self._stale_ms(k) >= now_ms
        }
        value, other = self.values(state, now_ms)
        holds = self._holds(value, other)
        state.value = value
        if not holds:
            state.holding_since_ms = None
        elif state.holding_since_ms is None:
            state.holding_since_ms = now_ms
        if not state.firing:
            since = state.holding_since_ms
            if since is None or now_ms - since < p.for_s * 1000:
                return []
            summary = f"{self.who(state)}: {p.words(value)}"
            if p.also is not None:
                summary += f" while {p.also.words(other)}"
            if p.for_s:
                summary += f" for {words.span(p.for_s)}"
            return [self.fire(state, now_ms, summary, self._evidence(state, value, other))]
        if state.hysteresis(holds, now_ms, clear_for_ms=int(p.clear_for_s * 1000)) != "resolved":
            return []
        name = short_metric(p.metric)
        if value is None:
            summary = f"{self.who(state)}: no fresh {name} samples"
        elif not OPS[p.op](value, p.value):
            back = f"back {NOT_OPS[p.op]} {figure(p.value)}"
            summary = f"{self.who(state)}: {name} {p.aggregate} {figure(value)}, {back}"
        elif p.also is not None:  # the rule's own condition holds, its ``also`` no longer
            a, also = p.also, short_metric(p.also.metric)
            now = f"{also} {a.aggregate} {figure(other)}" if other is not None else f"no {also}"
            summary = f"{self.who(state)}: {now}, no longer {a.op} {figure(a.value)}"
        else:  # not reached: the condition holds, so the incident stays open
            summary = f"{self.who(state)}: {p.words(value)}"
        return [self.resolve(state, now_ms, summary, self._evidence(state, value, other))]

    def _evidence(
        self, state: ThresholdState, value: float | None, other: float | None
    ) -> dict[str, Any]:
        p = self.params
        out: dict[str, Any] = {
            "metric": p.metric,
            "aggregate": p.aggregate,
            "value": value,
            "op": p.op,
            "threshold": p.value,
            "for_s": p.for_s,
            "series": sum(1 for k in state.series if k[0] == "0"),
        }
        if p.aggregate in ("max", "min") and value is not None:
            # Which series it is: the subtask an SRE opens first.
            worst = [k for k, (_, v) in state.series.items() if k[0] == "0" and v == value]
            if worst:
                out["worst"] = worst[-1].split("|", 1)[1]
        if p.also is not None:
            out |= {"also_metric": p.also.metric, "also_value": other}
        return out

    def evidence(self, state: ThresholdState) -> dict[str, Any]:  # noqa: D102
        return self._evidence(state, state.value, None)

    def standing(self, state: ThresholdState | None) -> str:
        """What the rule holds for the entity and how far it is from firing."""
        p = self.params
        if state is None or not state.series:
            where = "TaskManager" if p.scope == "tm" else "job"
            return f"no {p.metric} samples for this {where}"
        value, other = self.values(state, state.last_event_ms)
        now = p.words(value)
        if state.firing:
            clear = f"resolves once not {p.op} {figure(p.value)} for {words.span(p.clear_for_s)}"
            return words.clause(self.firing(state), now, clear)
        if state.holding_since_ms is None:
            if value is not None and not OPS[p.op](value, p.value):
                not_yet = f"not {p.op} {figure(p.value)}"
                return f"{short_metric(p.metric)} {p.aggregate} {figure(value)}, {not_yet}"
            if p.also is not None:
                return f"{now}, but not {p.also.words(other)}"
            return f"no fresh {short_metric(p.metric)} samples"
        held = (state.last_event_ms - state.holding_since_ms) / 1000
        return f"{now} for {words.span(held)} of {words.span(p.for_s)}"
