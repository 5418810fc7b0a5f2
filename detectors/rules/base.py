"""The detector every rule kind is: a :class:`~detectors.base.Detector` made from a rule.

A rule kind is one class here (``ThresholdDetector``...), generic over its rule model;
:meth:`RuleDetector.for_rule` makes the class of one rule from it, whose class variables
(``name``, ``scope``, ``kinds``, ``metrics``, ``profile``) come from the rule, so the
runner, the routes and the sinks treat it as any detector. The class is a pure function
of the rule: made again from the same rule (on a Spark executor, after a reload) it is the
same detector.
"""

from __future__ import annotations

import typing
from typing import Any, ClassVar, Generic, TypeVar

from detectors import words
from detectors.base import Detector, DetectorState, Profile, S
from detectors.model import Event
from detectors.rules.params import RuleParams

R = TypeVar("R", bound=RuleParams)


class RuleDetector(Detector[R, S], Generic[R, S]):
    """The detector of one rule; each kind subclasses it, :meth:`for_rule` makes one per rule.

    Attributes:
        rule: The rule the class was made from (the kind's own class has none).
    """

    rule: ClassVar[RuleParams]

    @classmethod
    def for_rule(cls, rule: R) -> type[RuleDetector[R, S]]:
        """The detector class of ``rule`` (construct it with the rule: ``det(rule)``)."""
        idle = f"no events for this {'TaskManager' if rule.scope == 'tm' else 'job'} any more"
        attrs: dict[str, Any] = {
            "__module__": cls.__module__,
            "__doc__": rule.description or f"The {rule.kind} rule {rule.name}.",
            "rule": rule,
            "name": rule.name,
            "scope": rule.scope,
            "kinds": frozenset(cls.kinds_of(rule)),
            "metrics": frozenset(cls.metrics_of(rule)),
            "profile": Profile(runbook=rule.runbook, idle_words=idle),
        }
        made = type(f"{cls.__name__}_{rule.name}", (cls,), attrs)
        return typing.cast(type[RuleDetector[R, S]], made)

    @classmethod
    def kinds_of(cls, rule: R) -> set[str]:
        """The event kinds the rule reads (``metric`` included when it reads metrics)."""
        raise NotImplementedError

    @classmethod
    def metrics_of(cls, rule: R) -> set[str]:
        """The metric names the rule reads (never all of them)."""
        return set()

    def new_state(self, event: Event, **fields: Any) -> S | None:
        """A state for a job the rule watches; ``None`` for the others (left unwatched).

        A job-scope rule with a ``job_name`` filter waits for an event that names the job.
        A TaskManager's rule filters each event instead (:meth:`admits`).
        """
        if self.params.scope == "job" and not self.params.admits_job(event.job_id, event.job_name):
            return None
        return super().new_state(event, **fields)

    def admits(self, state: DetectorState, event: Event) -> bool:
        """Whether the event is about a job the rule watches."""
        job_id = event.job_id or (state.job_id if self.params.scope == "job" else None)
        job_name = event.job_name or (state.job_name if self.params.scope == "job" else None)
        return self.params.admits_job(job_id, job_name)

    def firing(self, state: DetectorState) -> str | None:
        """``FIRING since <time> (<how long>)`` when the incident is open, else ``None``.

        For :meth:`standing`, worded as every detector's (:mod:`detectors.words`).
        """
        if not state.firing:
            return None
        return words.firing_since(state.incident_start_ms, state.last_event_ms)

    def who(self, state: DetectorState) -> str:
        """Who the entity is, for a summary (``job orders``, ``TaskManager tm-1``)."""
        return self.subject(state)
