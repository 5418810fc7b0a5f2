"""A log message's kind, by Flink's wording (:data:`_KIND_RULES`), in Spark SQL.

The rules run on the message's first line, then on the whole of it; a task failure is
looked at again for its cause, and a line no rule names takes its level's kind
(:data:`FREE_KINDS`). A cheap substring test guards each regex: most lines match no rule.
"""

from __future__ import annotations

import re

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from streaming.jvm_columns import widened
from streaming.log_layouts import _level

J = r"([0-9a-f]{32})"  # a Flink JobID


# A WARN or ERROR line no rule classifies is a line of its own kind, by its level, for
# new_error_pattern (FATAL counts as ERROR: logback and log4j 1 print it). A line without a
# level (a stack-trace line shipped as a record of its own) stays `unparsed`.
FREE_KINDS = {"WARN": "log_warn", "WARNING": "log_warn", "ERROR": "log_error", "FATAL": "log_error"}


# (kind, pattern on the message, guards) in priority order: the first match wins. Fields are
# extracted with kind-specific patterns (streaming.log_fields). The rules run on the first
# line of the message (a record that is only a stack-trace line classifies by that line);
# only when it matches none do they run on the whole message, where a cause or YARN
# diagnostics follow an unremarkable first line. ``guards``: literals one of which the text
# must contain for the pattern to match at all; a cheap substring test runs before the regex
# (a pattern anchored at ``^`` on a literal is guarded by that prefix without being told).
_KIND_RULES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("checkpoint_completed", r"^Completed checkpoint \d+", ()),
    ("checkpoint_triggered", r"^Triggering checkpoint \d+", ()),
    ("checkpoint_expired", r"^Checkpoint \d+ (?:of job \S+ )?expired before completing", ()),
    ("checkpoint_late_ack", r"^Received late message for now expired checkpoint attempt", ()),
    ("checkpoint_declined", r"^Decline checkpoint \d+", ()),
    (
        "checkpoint_failed",
        r"^(?:Failed to trigger or complete checkpoint|Failed to trigger checkpoint|"
        r"Triggering Checkpoint \d+ for job \S+ failed due to|Discarding checkpoint \d+)|"
        r"Exceeded checkpoint tolerable failure threshold",
        (
            "Failed to trigger",
            "Triggering Checkpoint ",
            "Discarding checkpoint ",
            "Exceeded checkpoint",
        ),
    ),
    (
        "container_memory_kill",
        r"beyond (?:the )?'?(?:physical|PHYSICAL|virtual|VIRTUAL)'? memory limit|"
        r"is under oom because|OOMKilled",
        ("memory limit", "is under oom because", "OOMKilled"),
    ),
    (
        "heartbeat_timeout",
        r"^(?:(?:java\.util\.concurrent\.)?TimeoutException: )?(?:The h|H)eartbeat of TaskManager "
        r"with id \S+\s+timed out|^TaskManager with id \S+ is no longer reachable",
        ("eartbeat of TaskManager with id", "TaskManager with id"),
    ),
    # The TaskManager's (or ResourceManager's) view of a JobManager that stopped answering:
    # the log line, or the exception alone when a shipper split the trace.
    (
        "jm_heartbeat_timeout",
        r"^(?:Caused by: )?(?:(?:java\.util\.concurrent\.)?TimeoutException: )?The heartbeat of "
        r"JobManager with id \S+ timed out|^(?:Caused by: )?(?:[\w$.]+: )?JobManager with id \S+ "
        r"is no longer reachable",
        ("heartbeat of JobManager with id", "JobManager with id "),
    ),
    (
        "fatal_error",
        r"^FATAL: Thread '|^Fatal error occurred in |^Encountered fatal error |"
        r"^Fatal error occurred while executing the TaskManager",
        ("FATAL: Thread '", "Fatal error occurred ", "Encountered fatal error "),
    ),
    (
        "registration_timeout",
        r"RegistrationTimeoutException|Could not register at the ResourceManager within",
        ("RegistrationTimeoutException", "Could not register at the ResourceManager within"),
    ),
    ("jvm_oom", r"^(?:Caused by: )?(?:java\.lang\.)?OutOfMemoryError\b", ("OutOfMemoryError",)),
    (
        "k8s_watch_gone",
        r"KubernetesClientException: too old resource version|"
        r"Got a http code 'HTTP_GONE'|^Creating a new watch on TaskManager pods",
        ("too old resource version", "HTTP_GONE", "Creating a new watch on TaskManager pods"),
    ),
    (
        "leadership_lost",
        r"lost leadership|was revoked leadership|is revoked leadership|"
        r"leadership has been revoked",
        ("leadership",),
    ),
    # Flink stopping a TaskManager on purpose (idle, no longer needed, never registered).
    (
        "tm_released",
        r"^Stopping (?:[Ww]orker|container|TaskManager pod) [^\s(]+(?:\([^)\s]*\))?\.?$|"
        r"^Closing TaskExecutor connection \S+ because: (?:TaskExecutor exceeded the idle "
        r"timeout|slot manager has determined that the resource is no longer needed)",
        ("Stopping ", "Closing TaskExecutor connection "),
    ),
    ("jm_started", r"^\s*Starting \w+ClusterEntry[Pp]oint\b", ("ClusterEntry",)),
    (
        "job_restored",
        r"^Restoring (?:job [0-9a-f]{32} )?from (?:latest valid checkpoint: )?[A-Z][\w ]*? \d+ @",
        (),
    ),
    ("no_checkpoint_found", r"^No checkpoint found during restore", ()),
    ("job_released", rf"^Remove job {J} from job leader monitoring", ()),
    (
        "job_state",
        r"^Job .* \([0-9a-f]{32}\) switched from state \w+ to \w+",
        ("switched from state",),
    ),
    ("task_state", r"^.+ \([0-9a-f_]+\) switched from \w+ to \w+", (" switched from ",)),
)


# Task failures classified by their cause rather than their first line: (kind, pattern on the
# whole message, guards). A TaskManager failing its tasks because their JobManager stopped
# answering says which job in the cause (``Disconnect from JobManager responsible for J.``,
# ``JobManager responsible for J lost the leadership.`` before 1.13) and why further down
# (``Caused by: …TimeoutException: The heartbeat of JobManager with id R timed out.``): the one
# record that ties the lost JobManager to its job.
_TASK_CAUSE_RULES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "jm_heartbeat_timeout",
        rf"JobManager responsible for {J}[\s\S]*(?:heartbeat of JobManager with id \S+ timed out"
        r"|JobManager with id \S+ is no longer reachable)",
        ("JobManager responsible for ",),
    ),
)


def _guard(pattern: str, guards: tuple[str, ...]) -> tuple[str, ...]:
    """Literals one of which a text must contain (or start with: see :func:`_guarded`)."""
    if guards:
        return guards
    m = re.match(r"\^([^\\.\[\]{}()*+?^$|]{3,})", pattern)
    return (m.group(1),) if m and "|" not in pattern else ()


def _guarded(text: Column, pattern: str, guards: tuple[str, ...]) -> Column:
    """``text.rlike(pattern)``, after a substring test that rules most texts out cheaply."""
    lits = _guard(pattern, guards)
    if not lits:
        return text.rlike(pattern)
    if not guards:  # a derived literal prefix of an anchored pattern
        return text.startswith(lits[0]) & text.rlike(pattern)
    cheap = text.contains(lits[0])
    for lit in lits[1:]:
        cheap = cheap | text.contains(lit)
    return cheap & text.rlike(pattern)


def _match_rules(text: Column) -> Column:
    expr = None
    for kind, pattern, guards in _KIND_RULES:
        cond = _guarded(text, pattern, guards)
        expr = F.when(cond, F.lit(kind)) if expr is None else expr.when(cond, F.lit(kind))
    assert expr is not None
    return expr


def _by_cause(kind: Column, msg: Column) -> Column:
    """A task failure's kind by its cause (:data:`_TASK_CAUSE_RULES`), else ``kind``.

    Only task transitions are looked at again, and only those whose text has a guard.
    """
    expr = kind
    for k, pattern, guards in _TASK_CAUSE_RULES:
        cond = (kind == "task_state") & _guarded(msg, pattern, guards)
        expr = F.when(cond, F.lit(k)).otherwise(expr)
    return expr


def _classify(msg: Column, first_line: Column) -> Column:
    """The kind of a message: the rules on its first line, else on all of it.

    A record that is only a stack-trace line classifies by that line; a cause or YARN
    diagnostics after an unremarkable first line classify the whole message. Each chain
    runs once at most (the second only for multi-line messages). ``first_line`` must be
    a column of its own: as an expression it would be cut out again for every rule.
    """
    return F.coalesce(
        _match_rules(first_line),
        F.when(msg.contains("\n"), _match_rules(msg)),
        F.lit("unparsed"),
    )


def _by_level(kind: Column, level: Column) -> Column:
    """An ``unparsed`` WARN or ERROR line's kind by its level (:data:`FREE_KINDS`), else ``kind``."""
    expr = kind
    for lv, k in FREE_KINDS.items():
        expr = F.when((kind == "unparsed") & (level == lv), F.lit(k)).otherwise(expr)
    return expr


def _kinded(df: DataFrame) -> DataFrame:
    """Records with their ``kind`` (null for a dead letter), from their ``_message``."""
    return widened(df, ("log_kinds._kinded",), _kind_columns)


def _kind_columns() -> list[list[Column]]:
    """:func:`_kinded`'s projections, each reading the one before."""
    ok = F.col("error").isNull()
    return [
        [F.when(ok, F.substring_index(F.col("_message"), "\n", 1)).alias("_first")],
        [F.when(ok, _classify(F.col("_message"), F.col("_first"))).alias("_kind")],
        [_by_cause(F.col("_kind"), F.col("_message")).alias("_ruled")],
        [_by_level(F.col("_ruled"), _level()).alias("kind")],
    ]
