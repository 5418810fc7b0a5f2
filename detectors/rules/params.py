"""What every rule has (:class:`RuleParams`), which events it reads, and the words it pages in.

A rule is a detector an operator writes in the config (``rules:``) instead of in Python:
its parameters model is also its definition. The fields here are the ones every kind
shares; each kind's module adds its own (``threshold``, ``frequency``, ``flatline``,
``spike``). Everything a rule matches with a regular expression is matched with RE2 and
checked by :func:`detectors.rules.regex.check_pattern` at load, and every bound that keeps
a rule's state small is a ``Field`` bound here, so a config that breaks one is refused
naming the field.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from detectors.base import DetectorParams
from detectors.model import Event, cap_name
from detectors.rules.regex import check_pattern, fullmatch

#: The longest a rule may look back (a window, a ``for_s``, a staleness): one day. A longer
#: window would keep more state per entity than a rule is allowed (counts, series).
MAX_WINDOW_S = 86_400.0

RuleScope = Literal["job", "tm"]
Op = Literal[">", ">=", "<", "<="]
Aggregate = Literal["max", "min", "avg", "sum"]

OPS: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}
#: The opposite of each comparison, for what a resolve says ("back under 800").
NOT_OPS = {">": "<=", ">=": "<", "<": ">=", "<=": ">"}

AGGREGATES: dict[str, Callable[[list[float]], float]] = {
    "max": max,
    "min": min,
    "avg": lambda vs: sum(vs) / len(vs),
    "sum": sum,
}

#: Metric-name prefixes a summary leaves out: ``backPressuredTimeMsPerSecond`` reads better
#: than its Prometheus name. Longest first.
_SCOPE_PREFIXES = (
    "flink_taskmanager_job_task_operator_",
    "flink_taskmanager_job_task_",
    "flink_taskmanager_job_",
    "flink_jobmanager_job_",
    "flink_taskmanager_",
    "flink_jobmanager_",
)


def short_metric(name: str) -> str:
    """A metric's name as a summary says it (its Flink scope prefix left out).

    Example:
        >>> short_metric("flink_taskmanager_job_task_backPressuredTimeMsPerSecond")
        'backPressuredTimeMsPerSecond'
    """
    for prefix in _SCOPE_PREFIXES:
        if name.startswith(prefix) and len(name) > len(prefix):
            return name[len(prefix) :]
    return name


def figure(v: float) -> str:
    """A value for a summary: ``870``, ``0.25``, ``1,234,567``.

    Example:
        >>> figure(870.0), figure(0.25), figure(1234567.4)
        ('870', '0.25', '1,234,567')
    """
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def _spellings(name: str) -> set[str]:
    # Prometheus-reporter label values have '-' and '.' replaced by '_' (orders-x arrives
    # as orders_x), as conf.app.JobMatch matches them.
    return {name, name.replace("-", "_").replace(".", "_")}


def name_matches(pattern: str, name: str | None) -> bool:
    """Whether ``pattern`` matches the whole ``name``, in either spelling of the reporters.

    The name is cut as the parsers cut names (:data:`detectors.model.NAME_CHARS`), and
    both the name and the pattern are tried with ``-`` as ``_`` (``conf.app.JobMatch``'s
    semantics).

    Example:
        >>> name_matches("orders-.*", "orders_enrichment"), name_matches("orders", "orders-x")
        (True, False)
    """
    name = cap_name(name)
    if not name:
        return False
    patterns = {pattern, pattern.replace("-", "_")}
    return any(fullmatch(p, n) for p in patterns for n in _spellings(name))


def _checked(v: str | None) -> str | None:
    if v is not None:
        check_pattern(v)
        check_pattern(v.replace("-", "_"))
    return v


class RuleParams(DetectorParams):
    """What every rule has: its name and kind, its words, its scope and the jobs it watches.

    Besides these, the base detector parameters: ``enabled``, ``severity``, ``idle_ttl_s``
    and ``clear_for_s``.
    """

    name: str = Field(pattern=r"^[a-z][a-z0-9_]{1,62}$")
    """The rule's name: its alerts' detector name (lower case, digits and _, 2-63
    characters; not a built-in detector's)."""
    kind: str
    """The rule kind: threshold, frequency, flatline or spike."""
    description: str = Field(default="", max_length=500)
    """What the rule is for, in a line (flinkwatch config check shows it)."""
    runbook: str = Field(default="", max_length=2000)
    """What the person paged should do first (shown in Slack, Alertmanager, webhooks)."""
    scope: RuleScope = "job"
    """The entity the rule judges: one job (job), or one TaskManager (tm)."""
    job_name: str | None = Field(default=None)
    """Only jobs whose name this regular expression matches whole (both spellings: '-' or
    '_'); a job whose name is not known yet is not watched."""
    job_id: str | None = Field(default=None, max_length=64)
    """Only the job with this id."""

    _check_job_name = field_validator("job_name")(_checked)

    def admits_job(self, job_id: str | None, job_name: str | None) -> bool:
        """Whether the rule watches this job (no filter: every job)."""
        if self.job_id is not None and job_id != self.job_id:
            return False
        return self.job_name is None or name_matches(self.job_name, job_name)

    def watches(self) -> str:
        """What the rule reads, in a few words, unless its condition says it."""
        return ""

    def condition(self) -> str:
        """When it fires, in a few words (``flinkwatch config check``)."""
        return ""

    def describe(self) -> str:
        """One line: name, kind, what it watches, the condition and its filter."""
        jobs = []
        if self.job_id:
            jobs.append(f"job_id {self.job_id}")
        if self.job_name:
            jobs.append(f"job_name ~ {self.job_name}")
        where = f" [{', '.join(jobs)}]" if jobs else ""
        off = "" if self.enabled else " (disabled)"
        return (
            f"{self.name} ({self.kind}, per {'TaskManager' if self.scope == 'tm' else 'job'})"
            f"{where}: {'; '.join(x for x in (self.watches(), self.condition()) if x)}{off}"
        )


class Labels(BaseModel):
    """Which series of a metric a rule reads: regular expressions matched whole on the labels.

    ``task`` is what the parser makes of a task's labels: ``task_name/subtask_index`` for
    task metrics (``Source:_kafka_orders____Map/3``: the reporter writes ``_`` for
    spaces, ``-``, ``.`` and ``>``), or ``operator_name`` for operator metrics.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    task: str | None = None
    """Task (task_name/subtask_index) or operator name."""
    tm_id: str | None = None
    """TaskManager id."""
    host: str | None = None
    """Host."""

    _check = field_validator("task", "tm_id", "host")(_checked)

    def admits(self, event: Event) -> bool:
        """Whether the event's labels match every pattern given."""
        for pattern, value in ((self.task, event.task), (self.tm_id, event.tm_id)):
            if pattern is not None and not name_matches(pattern, value):
                return False
        return self.host is None or name_matches(self.host, event.host)

    def words(self) -> str:
        """The patterns given, for a description (``task ~ Sink.*``); empty: none."""
        given = [(k, v) for k, v in (("task", self.task), ("tm_id", self.tm_id)) if v]
        if self.host:
            given.append(("host", self.host))
        return ", ".join(f"{k} ~ {v}" for k, v in given)
