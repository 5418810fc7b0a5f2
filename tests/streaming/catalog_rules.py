"""Stand-in rules for the catalog's tests: a config's rule as the runner and the sinks see it.

A rule's parameters are its definition, and the resolver makes its class from them
(:meth:`conf.ParamsResolver.detector_class`). These two are small rules of two kinds,
with a resolver that knows them, so the runner's and the sinks' handling of a name that
is not a built-in detector is tested on its own.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from conf import AppConfig, ParamsResolver
from detectors import REGISTRY, Alert, Detector, DetectorParams, Event
from detectors.base import DetectorState, Profile
from streaming.bus import active_detectors
from streaming.routes import Routes
from streaming.runner import EntityRunner, ShardRunner

RUNBOOK = "Look at the job's checkpoint storage: expiries come in a row."


class ExpiryRule(DetectorParams):
    """A count rule: page when ``at_least`` checkpoints of a job expired."""

    name: str = "expiries"
    at_least: int = Field(default=2, ge=1)


class ExpiryState(DetectorState):
    """Per job: checkpoints expired so far."""

    seen: int = 0


class Expiries(Detector[ExpiryRule, ExpiryState]):
    """The class the count rule defines."""

    name = "expiries"
    scope = "job"
    kinds = frozenset({"checkpoint_expired"})
    profile = Profile(runbook=RUNBOOK)

    def on_event(self, state: ExpiryState, event: Event) -> list[Alert]:  # noqa: D102
        state.seen += 1
        if state.seen >= self.params.at_least and not state.firing:
            summary = f"{self.subject(state)}: {state.seen} checkpoints expired"
            return [self.fire(state, event.time_ms, summary, {"expired": state.seen})]
        return []


class QuietRule(DetectorParams):
    """A rule of another kind under the same name: its state is not a count's."""

    name: str = "expiries"


class QuietState(DetectorState):
    """Per job: the last checkpoint seen (a field a count's state does not have)."""

    last_checkpoint: int


class Quiet(Detector[QuietRule, QuietState]):
    """The class the other kind defines."""

    name = "expiries"
    scope = "job"
    kinds = frozenset({"checkpoint_expired"})

    def on_event(self, state: QuietState, event: Event) -> list[Alert]:  # noqa: D102
        return []

    def new_state(self, event: Event, **fields: Any) -> QuietState | None:  # noqa: D102
        return super().new_state(event, last_checkpoint=event.checkpoint_id or 0, **fields)


_KINDS: dict[type[DetectorParams], type[Detector[Any, Any]]] = {
    ExpiryRule: Expiries,
    QuietRule: Quiet,
}


class RuleResolver(ParamsResolver):
    """A resolver that makes these rules' classes (as the config's resolver makes its rules')."""

    def _make(self, name: str) -> type[Detector[Any, Any]]:
        if name in REGISTRY:
            return super()._make(name)
        return _KINDS[type(self.base[name])]


def resolver(cfg: AppConfig, *rules: ExpiryRule | QuietRule) -> RuleResolver:
    """The config's resolver with ``rules`` added."""
    base = cfg.resolver().base | {r.name: r for r in rules}
    return RuleResolver(base, cfg.overrides)


def runner(cfg: AppConfig, *rules: ExpiryRule | QuietRule, **kwargs: Any) -> ShardRunner:
    """A shard runner over the config's detectors and ``rules``."""
    res = resolver(cfg, *rules)
    names = active_detectors(cfg) + [r.name for r in rules if r.enabled]
    return ShardRunner(EntityRunner(res, Routes(names, res.catalog()), **kwargs))
