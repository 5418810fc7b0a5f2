"""A classified message's fields (checkpoint, task, TaskManager, job, reason), in Spark SQL.

Each kind has its own patterns (:data:`_FIELD_RULES`); a record runs only its kind's, and
each pattern once, however many groups it yields (``streaming.parse_columns._groups``).
"""

from __future__ import annotations

import re

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import LongType

from streaming.log_kinds import FREE_KINDS, J
from streaming.parse_columns import _group, _groups, _rx

TM_LOC = r"(?: at (\S+) @ ([^\s(]*[^\s(.]))?"  # TaskManagerLocation, 1.9+
# Kinds whose lines print a bare 32-hex execution attempt id or ResourceID (not a job id).
_BARE_HEX_NOT_JOB = (
    "task_state",
    "checkpoint_declined",
    "checkpoint_late_ack",
    "heartbeat_timeout",
    "jm_heartbeat_timeout",
    "tm_released",
)


# The job those lines name, in their words (`for job J`, `of job J`, `job J`, `jobId: J`,
# `JobID=J`, `job (J)`); never a bare 32-hex id, which in these lines is as often a
# JobMaster, allocation or resource id.
_NAMED_JOB = r"(?i:\bjob(?: ?id)?[:=]? ?\(?)" + J + r"\b"


def _first_exception(msg: Column) -> Column:
    """The first ``pkg.SomeException: text`` line of a multi-line message."""
    maybe = msg.contains("Exception") | msg.contains("Error") | msg.contains("Throwable")
    pattern = r"(?m)^(?:Caused by: )?((?:[\w$]+\.)+[\w$]*(?:Exception|Error|Throwable)\b[^\n]*)"
    return F.when(maybe, _rx(msg, pattern))


_COMPLETED = r"^Completed checkpoint (\d+)(?: for job (\S+))? \((\d+) bytes(?: in |, checkpointDuration=)(\d+) ms"
_LATE = rf"^Received late message for now expired checkpoint attempt (\d+) from (?:task )?(\S+) of job {J}{TM_LOC}"
_DECLINED = rf"^Decline checkpoint (\d+) by task (\S+?)(?: of job {J})?{TM_LOC}\.?(?:\s|$)"
_HEARTBEAT = r"[Hh]eartbeat of TaskManager with id ([^\s(]+)(?:\(([^:)\s]+)(?::\d+)?\))?|^TaskManager with id (\S+) is no longer"
_JM_HEARTBEAT = r"(The heartbeat of JobManager with id \S+ timed out|JobManager with id \S+ is no longer reachable)"
_TASK_LINE = (
    r"^(.+?) \(([0-9a-f_]+)\) switched from (\w+) to (\w+)(?: on (\S+) @ ([^\s(]*[^\s(.]))?"
)
_JOB_LINE = rf"^Job (.*) \({J}\) switched from state (\w+) to (\w+)"
_RELEASED = (
    r"^(?:Stopping (?:[Ww]orker|container|TaskManager pod)|Closing TaskExecutor connection) "
    r"([^\s(]+?)(?:\(([^:)\s]+)(?::\d+)?\))?\.?(?:\s|$)"
)
# The TaskManager a job failure names: heartbeat timeout or unreachable (JobMaster wording).
_NAMED_TM = (
    r"(?:[Hh]eartbeat of TaskManager with id|TaskManager with id) ([^\s(]+?)(?:\([^)]*\))?"
    r"\s+(?:timed out|is no longer reachable)"
)
_RESTORED = r"^Restoring (?:job \S+ )?from (?:latest valid checkpoint: )?([A-Z][\w ]*?) (\d+) @"
_MEMORY_KILL_ID = (
    r"containerID=(container_\w+)|Worker (\S+) is terminated|Container (container_\w+) marked|"
    r"(container_\w+) is under oom|Closing TaskExecutor connection ([^\s(]+)|"
    r"[Pp]od (?!terminated\b)(\S+) .*OOMKilled"
)

#: Per kind, the patterns its fields come from, each with ``field: group`` (a tuple of
#: groups: the first that took part). Every pattern runs once per record of its kind, and
#: only there; ``reason`` falls back to the first exception line of the message.
_FIELD_RULES: dict[str, tuple[tuple[str, dict[str, int | tuple[int, ...]]], ...]] = {
    "checkpoint_triggered": (
        (
            r"^Triggering checkpoint (\d+)(?: \(type=(?:\w+\{name=')?([\w ]+))?",
            {"checkpoint_id": 1, "reason": 2},
        ),
    ),
    "checkpoint_completed": (
        (_COMPLETED, {"checkpoint_id": 1, "size_bytes": 3, "duration_ms": 4}),
    ),
    "checkpoint_expired": ((r"^Checkpoint (\d+)", {"checkpoint_id": 1}),),
    "checkpoint_late_ack": ((_LATE, {"checkpoint_id": 1, "task": 2, "tm_id": 4, "host": 5}),),
    "checkpoint_declined": ((_DECLINED, {"checkpoint_id": 1, "task": 2, "tm_id": 4, "host": 5}),),
    "checkpoint_failed": (
        (
            r"^(?:Failed to trigger or complete checkpoint|Failed to trigger checkpoint|Triggering Checkpoint|Discarding checkpoint) (\d+)",
            {"checkpoint_id": 1},
        ),
        (
            r"(?:failed due to |since |because:? |CheckpointException: |failure threshold\. )([^\n]*)",
            {"reason": 1},
        ),
    ),
    "heartbeat_timeout": ((_HEARTBEAT, {"tm_id": (1, 3), "host": 2}),),
    "jm_heartbeat_timeout": (
        (_JM_HEARTBEAT, {"reason": 1}),
        (rf"JobManager responsible for {J}", {"job_id": 1}),
        (_TASK_LINE, {"task": 1}),
    ),
    "task_state": (
        (_TASK_LINE, {"task": 1, "from_state": 3, "to_state": 4, "tm_id": 5, "host": 6}),
        (r"(?:failure cause: ?|\n)([^\n]+)", {"reason": 1}),
    ),
    "job_state": (
        (_JOB_LINE, {"job_name": 1, "job_id": 2, "from_state": 3, "to_state": 4}),
        (_NAMED_TM, {"tm_id": 1}),
        (r"\n([^\n]+)", {"reason": 1}),
    ),
    "tm_released": ((_RELEASED, {"tm_id": 1, "host": 2}),),
    "container_memory_kill": (
        (_MEMORY_KILL_ID, {"tm_id": (1, 2, 3, 4, 5, 6)}),
        (r"'?((?:physical|PHYSICAL|virtual|VIRTUAL)(?='? memory)|OOMKilled)", {"reason": 1}),
    ),
    "jvm_oom": ((r"OutOfMemoryError:\s*([^.\n]*)", {"reason": 1}),),
    "registration_timeout": ((r"maximum registration duration (.+?)\.(?:\s|$)", {"reason": 1}),),
    "k8s_watch_gone": ((r"(too old resource version(?:: [^\n]*)?)", {"reason": 1}),),
    "job_restored": ((_RESTORED, {"reason": 1, "checkpoint_id": 2}),),
    "jm_started": ((r"Starting (\w+ClusterEntry[Pp]oint)", {"reason": 1}),),
}
_SLOTS = max(len(v) for v in _FIELD_RULES.values())
_FIELDS = ("checkpoint_id", "size_bytes", "duration_ms", "task", "tm_id", "host", "reason")
_FIELDS += ("from_state", "to_state", "job_name", "job_id")


def _match_slots(kind: Column, msg: Column) -> list[Column]:
    """Per slot, the groups of that slot's pattern for the record's kind (see _FIELD_RULES)."""
    slots = []
    for s in range(_SLOTS):
        expr = None
        for k, rules in _FIELD_RULES.items():
            if s >= len(rules):
                continue
            pattern = rules[s][0]
            n = re.compile(pattern).groups
            val = _groups(msg, pattern, n)
            expr = F.when(kind == k, val) if expr is None else expr.when(kind == k, val)
        assert expr is not None
        slots.append(expr)
    return slots


def _log_fields(
    kind: Column, msg: Column, slots: list[Column], mdc_job: Column, file_job: Column
) -> dict[str, Column]:
    """Kind-specific fields from the slot groups of :func:`_match_slots`.

    ``mdc_job`` is the job id the record's MDC names (JSON layouts) and ``file_job`` the one
    job the TaskManager whose log it is held then (files), for the lines of
    :data:`FREE_KINDS` only, after what the line says itself: what the other kinds name is
    in their own words.
    """
    by_field: dict[str, Column] = {}
    for f in _FIELDS:
        expr = None
        for k, rules in _FIELD_RULES.items():
            for s, (_, groups) in enumerate(rules):
                if f not in groups:
                    continue
                g = groups[f]
                idx = g if isinstance(g, tuple) else (g,)
                val = F.coalesce(*[_group(slots[s], i) for i in idx])
                expr = F.when(kind == k, val) if expr is None else expr.when(kind == k, val)
        assert expr is not None
        by_field[f] = expr
    classified = kind != "unparsed"
    free = kind.isin(*sorted(set(FREE_KINDS.values())))
    reason = F.coalesce(by_field["reason"], F.when(classified, _first_exception(msg)))
    return {
        **by_field,
        "checkpoint_id": by_field["checkpoint_id"].cast(LongType()),
        "duration_ms": by_field["duration_ms"].cast(LongType()),
        "size_bytes": by_field["size_bytes"].cast(LongType()),
        "job_id": F.when(free, F.coalesce(mdc_job, _rx(msg, _NAMED_JOB), file_job)).when(
            classified,
            F.coalesce(
                by_field["job_id"],
                _rx(msg, r"(?:for job|of job|job id|job) " + J),
                # A bare id is not a job id where these lines print an attempt or resource id.
                F.when(~kind.isin(*_BARE_HEX_NOT_JOB), _rx(msg, r"\b" + J + r"\b")),
            ),
        ),
        # Hadoop 2 says `physical`, Hadoop 3 `'PHYSICAL'`: one spelling for both.
        "reason": F.when(kind == "container_memory_kill", F.lower(reason)).otherwise(reason),
    }
