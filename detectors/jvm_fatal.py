"""``jvm_fatal``: a TaskManager or JobManager JVM died of an OutOfMemoryError or a fatal error.

Flink stops its own process, and says so, in four places (FLINK_FORMATS.md §5):

* ``FatalExitExceptionHandler``: ``FATAL: Thread '<name>' produced an uncaught
  exception. Stopping the process...`` (any Flink thread, both process roles);
* ``Task``: ``Encountered fatal error <class> - terminating the JVM`` (a JVM-fatal
  error, or an OutOfMemoryError with ``taskmanager.jvm-exit-on-oom``);
* ``TaskManagerRunner`` / ``TaskExecutor``: ``Fatal error occurred while executing the
  TaskManager. Shutting it down...``, ``Fatal error occurred in TaskExecutor …``;
* ``ClusterEntrypoint`` / the ResourceManager: ``Fatal error occurred in the cluster
  entrypoint.``, ``Fatal error occurred in ResourceManager.``.

Each is followed by the exception as a stack trace. The first two always end the
process and fire, whatever the exception; the last two fire only when the exception
is an ``OutOfMemoryError`` (a registration timeout or a Kubernetes watch failure there
are the business of ``restart_storm`` and ``jm_k8s_watch_crash``). ``cause`` in the
evidence is the OOM kind (``gc_overhead``, ``heap_space``, ``metaspace``,
``direct_memory``, ``other`` for the rarer ones such as native threads) or
``fatal_exit`` for an uncaught exception that is not an OOM.

An ``OutOfMemoryError`` line on its own never fires: Flink also logs one as the cause
of a task failure while the TaskManager keeps running (it even enriches Metaspace and
direct-memory OOMs there), and a client or MiniCluster log shows one in a failed job's
stack trace. It only supplies the cause when a shipper cut the trace off the fatal
line: a fatal line without its exception waits ``cause_wait_s`` (event time) for the
process's next OOM line and then decides; an OOM line up to ``cause_wait_s`` before it
counts too.

The entity is the process: ``tm_id`` is the TaskManager resource id where the line
names it, else what the log shipper adds (the Kubernetes pod, the YARN container
directory in the file path, the host; see ``streaming/parsing.py``). A record without
any of them cannot be routed and is not seen. ``role`` is ``taskmanager`` or
``jobmanager`` from the wording, the id's shape (a YARN container ``…_000001`` is the
ApplicationMaster, a pod name says ``taskmanager``/``jobmanager``) or the stack frames,
else ``unknown``.

Every fatal exit of a process belongs to its open incident (``fatal_exits`` counts
exits at least a minute apart: a crash loop of a pod that keeps its name); the
incident resolves ``clear_for_s`` after the last one.

State per process (:class:`JvmFatalState`): the open incident's facts (texts cut to
``_TEXT_CHARS``), one pending fatal line and one recent OOM line: at most ~1.5 KB.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field

from detectors import words
from detectors.base import (
    Detector,
    DetectorParams,
    DetectorState,
    Evidence,
    Member,
    Profile,
    Record,
)
from detectors.model import Alert, Event, Severity
from detectors.story import process_headline

_TEXT_CHARS = 300  # evidence texts are cut to this
_SAME_CRASH_MS = 60_000  # fatal lines closer than this are one exit (runner + handler)

#: OutOfMemoryError detail text (JDK wording, Flink may append an explanation) → cause.
_OOM_CAUSES: tuple[tuple[str, str], ...] = (
    ("gc overhead limit exceeded", "gc_overhead"),
    ("java heap space", "heap_space"),
    ("metaspace", "metaspace"),
    ("direct buffer memory", "direct_memory"),
)
_OOM = re.compile(r"OutOfMemoryError\b(?::\s*([^\n]*))?")

#: (wording of the fatal line, how the process ends, whether it always ends it).
_EXITS: tuple[tuple[str, str, bool], ...] = (
    ("FATAL: Thread '", "fatal_exit_handler", True),
    ("Encountered fatal error", "task_terminating_jvm", True),
    ("Fatal error occurred while executing the TaskManager", "taskmanager_runner", False),
    ("Fatal error occurred in TaskExecutor", "task_executor", False),
    ("Fatal error occurred in the cluster entrypoint", "cluster_entrypoint", False),
    ("Fatal error occurred in ResourceManager", "resource_manager", False),
)
_THREAD = re.compile(r"^FATAL: Thread '(.*)' produced an uncaught exception")

# Wording and frames that only one role prints.
_JM_HINTS = (
    "cluster entrypoint",
    "Fatal error occurred in ResourceManager",
    "Flink Master",
    "org.apache.flink.runtime.entrypoint.",
    "org.apache.flink.runtime.dispatcher.",
    "org.apache.flink.runtime.jobmaster.",
    "org.apache.flink.runtime.resourcemanager.",
    "FATAL: Thread 'SourceCoordinator-",
)
_TM_HINTS = (
    "executing the TaskManager",
    "Fatal error occurred in TaskExecutor",
    "Encountered fatal error",
    "task executor has to be shutdown",
    "org.apache.flink.runtime.taskexecutor.",
    "org.apache.flink.runtime.taskmanager.",
    "org.apache.flink.streaming.runtime.tasks.",
    "FATAL: Thread 'Source Data Fetcher",
)

_HINTS = {
    "gc_overhead": (
        "The heap was full and GC could not free it. State on the heap (hashmap/filesystem "
        "backend) growing, e.g. a sliding window with a small slide keeping size/slide copies "
        "of every record (seed 000): move state to RocksDB, or give the TaskManager more heap."
    ),
    "heap_space": (
        "The heap was too small for what the process held: heap state, a large window or "
        "buffer in user code, or a big checkpoint being serialised. Check checkpoint size "
        "growth; raise the heap or move state to RocksDB."
    ),
    "metaspace": (
        "Classes kept loading: a class-loading leak across job restarts or resubmissions, or "
        "too small a metaspace (taskmanager.memory.jvm-metaspace.size)."
    ),
    "direct_memory": (
        "Direct (off-heap) memory ran out: user code or a connector allocating direct "
        "buffers, or network buffers for a high parallelism (taskmanager.memory.task.off-heap."
        "size, taskmanager.memory.framework.off-heap.size)."
    ),
    "other": "An OutOfMemoryError of a rarer kind (native threads, array size) or a JVM error.",
    "fatal_exit": "An uncaught exception in a Flink thread stopped the process: read its trace.",
}


def oom_cause(text: str | None) -> str | None:
    """The ``cause`` of the ``OutOfMemoryError`` in ``text``, ``None`` without one.

    The first ``OutOfMemoryError: <detail>`` decides; a bare class name (``Encountered
    fatal error java.lang.OutOfMemoryError - …``) only says it is one, of kind ``other``.

    Example:
        >>> oom_cause("java.lang.OutOfMemoryError: GC overhead limit exceeded")
        'gc_overhead'
        >>> oom_cause("Caused by: java.lang.OutOfMemoryError: unable to create native thread")
        'other'
    """
    found = _oom_line(text)
    return None if found is None else found[0]


def _oom_line(text: str | None) -> tuple[str, str | None] | None:
    """``(cause, the OOM's line)`` for the first OOM with a detail; line ``None`` if none has."""
    if not text:
        return None
    bare = False
    for m in _OOM.finditer(text):
        if m[1] is None:
            bare = True
            continue
        detail = m[1].lower()
        line = text[text.rfind("\n", 0, m.start()) + 1 : m.end()].strip()
        for needle, cause in _OOM_CAUSES:
            if detail.startswith(needle):
                return cause, line
        return "other", line
    return ("other", None) if bare else None


def _fallback_cause(fatal: FatalLine) -> str:
    """The cause of a fatal exit whose exception is no OutOfMemoryError."""
    return "fatal_exit" if fatal.how == "fatal_exit_handler" else "other"


def role_of(tm_id: str | None, text: str) -> str:
    """``taskmanager``, ``jobmanager`` or ``unknown`` for a process and its fatal record."""
    jm = any(h in text for h in _JM_HINTS)
    tm = any(h in text for h in _TM_HINTS)
    if jm != tm:
        return "jobmanager" if jm else "taskmanager"
    ident = (tm_id or "").lower()
    if "taskmanager" in ident or "taskexecutor" in ident:
        return "taskmanager"
    if "jobmanager" in ident:
        return "jobmanager"
    if re.fullmatch(r"container_(?:e\d+_)?\d+_\d+_\d+_\d+", ident):
        # The first container of every application attempt is its ApplicationMaster.
        return "jobmanager" if ident.endswith("_000001") else "taskmanager"
    if re.fullmatch(r"\S+:\d+-[0-9a-f]{6}", ident):
        return "taskmanager"  # a standalone TaskManager's resource id, host:port-xxxxxx
    return "unknown"


class JvmFatalParams(DetectorParams):
    """Parameters of :class:`JvmFatal`."""

    severity: Severity = Field(default=Severity.CRITICAL)
    """Severity of its alerts: info, warning or critical."""
    clear_for_s: float = Field(default=900, ge=0)
    """The incident resolves this long after the process's last fatal exit (s)."""
    cause_wait_s: float = Field(default=10, ge=0, le=300)
    """How long a fatal line without its exception waits for the process's OutOfMemoryError line (a
    shipper that sends the trace apart), event time (s)."""


class FatalLine(Record):
    """How a process ended, as its fatal line (and the OutOfMemoryError, once known) say.

    Attributes:
        how: Which fatal line (``fatal_exit_handler``, ``task_terminating_jvm``, ...).
        line: The fatal line, cut to ``_TEXT_CHARS``.
        thread: The thread an uncaught exception killed, when the line names it.
        role: ``taskmanager``, ``jobmanager`` or ``unknown``.
        cause: The OOM kind or ``fatal_exit`` (``None`` while not known).
        oom: The OutOfMemoryError's line, when there is one.
    """

    how: str
    line: str
    thread: str | None = None
    role: str
    cause: str | None = None
    oom: str | None = None


class PendingFatal(FatalLine):
    """A fatal line without its exception, waiting ``cause_wait_s`` for an OOM line.

    Attributes:
        t: When it was logged.
        always: The line always ends the process (it fires without an OOM).
        bare_oom: A line named an OutOfMemoryError without its detail.
    """

    t: int
    always: bool
    bare_oom: bool = False


class ExitFacts(FatalLine):
    """The open incident's exit (the first one) and when the latest came.

    Attributes:
        first_exit_ms: When the first fatal exit of the incident came.
        last_exit_ms: When the latest one came.
    """

    first_exit_ms: int
    last_exit_ms: int


class JvmFatalState(DetectorState):
    """What :class:`JvmFatal` keeps per process.

    Attributes:
        clock_ms: The latest event or deadline time seen (an earlier line is stamped so).
        pending: A fatal line waiting for its OOM line.
        oom: The latest OOM line without a fatal line yet: (time, cause, line).
        exits: Fatal exits of the open incident (a minute apart at least).
        last_exit_ms: When the latest fatal exit came.
        facts: The open incident's exit.
    """

    clock_ms: int = 0
    pending: PendingFatal | None = None
    oom: tuple[int, str, str] | None = None
    exits: int = 0
    last_exit_ms: int | None = None
    facts: ExitFacts | None = None


class JvmFatalEvidence(Evidence):
    """What a ``jvm_fatal`` alert shows.

    Attributes:
        cause: The OOM kind (``heap_space``, ``metaspace``, ...) or ``fatal_exit``.
        role: ``taskmanager``, ``jobmanager`` or ``unknown``.
        exit: Which fatal line ended the process.
        fatal_line: That line.
        thread: The thread an uncaught exception killed.
        oom: The OutOfMemoryError's line.
        fatal_exits: Fatal exits of the process in the incident.
        first_exit_ms: When the first came.
        last_exit_ms: When the latest came.
        hint: What the cause usually means and what to do.
    """

    cause: str = "other"
    role: str = "unknown"
    exit: str | None = None
    fatal_line: str | None = None
    thread: str | None = None
    oom: str | None = None
    fatal_exits: int
    first_exit_ms: int | None = None
    last_exit_ms: int | None = None
    hint: str = _HINTS["other"]


def _death(member: Member) -> tuple[int, str] | None:
    """``died (gc overhead)``: after a kill for memory, before a heartbeat timeout."""
    cause = str(member.evidence.get("cause") or "fatal error").replace("_", " ")
    return 1, f"died ({cause})"


def _role(member: Member) -> str | None:
    """The process that stopped, when its wording or id told."""
    return {"taskmanager": "TaskManager", "jobmanager": "JobManager"}.get(
        str(member.evidence.get("role"))
    )


class JvmFatal(Detector[JvmFatalParams, JvmFatalState]):
    """Fire when a Flink process stops itself on an OutOfMemoryError or uncaught exception."""

    name = "jvm_fatal"
    profile = Profile(
        runbook=(
            "A Flink JVM stopped itself. Read `cause` and the hint in the evidence; for heap OOMs "
            "check the job's checkpoint size (checkpoint_state_growth) and state backend, for "
            "metaspace a class-loading leak across restarts. Then check the job restarted and "
            "restored from a checkpoint, and whether the same process keeps dying (fatal_exits)."
        ),
        causal_rank=1,
        death=_death,
        role=_role,
        headline=process_headline,  # the process that died, and how
    )
    scope = "tm"
    kinds = frozenset({"fatal_error", "jvm_oom"})
    signals = {
        "process_fatal_exits": (
            "Fatal exits of the process (OutOfMemoryError or uncaught exception) in its open "
            "incident; 0 when none is open."
        ),
    }

    def signal_values(self, state: JvmFatalState) -> dict[str, float]:  # noqa: D102
        return {"process_fatal_exits": float(state.exits if state.firing else 0)}

    def new_state(self, event: Event, **fields: Any) -> JvmFatalState | None:
        """A process's first line: its clock starts at the event."""
        return super().new_state(event, clock_ms=event.time_ms, **fields)

    def on_event(self, state: JvmFatalState, event: Event) -> list[Alert]:
        """Fold a fatal or OOM line in; fire when a process is known to have died of it."""
        state.host = state.host or event.host
        at = self._tick(state, event.time_ms)
        # A line out of order is stamped with the clock. What fell due by then but after
        # the line's own time has not fired (only with a zero cause_wait_s or clear_for_s)
        # goes first, as it did when the line came in order.
        alerts = list(self._decide(state, at)) if at > event.time_ms else []
        text = event.message or event.reason or ""
        if event.kind == "jvm_oom":
            cause, line = _oom_line(text) or ("other", None)
            line = line or text.split("\n", 1)[0]
            if state.pending is not None:
                pending, state.pending = state.pending, None
                alerts.extend(self._exit(state, at, pending, cause, line))
            else:
                state.oom = (at, cause, line[:_TEXT_CHARS])
        elif event.kind == "fatal_error":
            alerts.extend(self._on_fatal(state, at, text))
        return alerts

    def on_timer(self, state: JvmFatalState, now_ms: int) -> tuple[Alert, ...]:
        """Decide a fatal line that waited for its cause; resolve."""
        return self._decide(state, now_ms)

    def next_deadline(self, state: JvmFatalState) -> int | None:
        """A fatal line's wait for its cause running out, or the resolve."""
        return min(self._due(state), default=None)

    def on_close(self, state: JvmFatalState, now_ms: int) -> tuple[Alert, ...]:
        """A process without lines: its open incident closes as a clear would."""
        return (self._resolved(state, now_ms),) if state.firing else ()

    def evidence(self, state: JvmFatalState) -> JvmFatalEvidence:
        """The open incident's exit, cause and hint."""
        f = state.facts
        if f is None:  # no incident open
            return JvmFatalEvidence(fatal_exits=state.exits)
        cause = f.cause or "other"
        return JvmFatalEvidence(
            cause=cause,
            role=f.role,
            exit=f.how,
            fatal_line=f.line,
            thread=f.thread,
            oom=f.oom,
            fatal_exits=state.exits,
            first_exit_ms=f.first_exit_ms,
            last_exit_ms=f.last_exit_ms,
            hint=_HINTS.get(cause, _HINTS["other"]),
        )

    def standing(self, state: JvmFatalState | None) -> str:
        """The open incident's exits, or a fatal or OOM line waiting for its other half."""
        if state is None:
            return "no fatal error or OutOfMemoryError line from this process"
        wait_ms = int(self.params.cause_wait_s * 1000)
        now = max(state.last_event_ms, state.clock_ms)
        facts = state.facts
        if state.firing and facts is not None:
            role = {"taskmanager": "TaskManager", "jobmanager": "JobManager"}.get(
                facts.role, "process"
            )
            cause = (facts.cause or "other").replace("_", " ")
            exits = words.plural(state.exits, "fatal exit")
            due = facts.last_exit_ms + int(self.params.clear_for_s * 1000)
            return words.clause(
                words.firing_since(state.incident_start_ms, now),
                f"{role} stopped ({cause}), {exits}, the latest {words.at(facts.last_exit_ms)}",
                f"resolves at {words.at(due)} if it does not exit again",
            )
        parts: list[str | None] = []
        pending = state.pending
        if pending is not None:
            then = "pages then" if pending.always or pending.bare_oom else "else no exit"
            parts.append(
                f"a fatal line at {words.at(pending.t)} waits for its OutOfMemoryError until "
                f"{words.at(pending.t + wait_ms)} ({then})"
            )
        if state.oom is not None:
            t, cause, _ = state.oom
            parts.append(
                f"an OutOfMemoryError ({cause.replace('_', ' ')}) at {words.at(t)}, no fatal "
                f"exit yet: a fatal line until {words.at(t + wait_ms)} makes it one"
            )
        if not parts:
            parts.append(f"no fatal exit open (its latest line {words.at(state.last_event_ms)})")
        return words.clause(*parts)

    # --- events ------------------------------------------------------------------

    def _on_fatal(self, st: JvmFatalState, at: int, text: str) -> list[Alert]:
        first = text.split("\n", 1)[0]
        how, always = next(
            ((how, always) for needle, how, always in _EXITS if needle in first),
            ("fatal_error", False),
        )
        thread = _THREAD.match(first)
        fatal = PendingFatal(
            t=at,
            how=how,
            always=always,
            line=first[:_TEXT_CHARS],
            thread=thread[1][:_TEXT_CHARS] if thread else None,
            role=role_of(st.tm_id, text),
        )
        found = _oom_line(text)
        if found is not None and found[1] is not None:
            return self._exit(st, at, fatal, found[0], found[1])
        recent = st.oom
        if recent is not None and at - recent[0] <= self.params.cause_wait_s * 1000:
            st.oom = None
            return self._exit(st, at, fatal, recent[1], recent[2])
        if "\n" in text.strip():
            # The record carries its exception, and it is no OutOfMemoryError with a detail.
            if found is not None:
                return self._exit(st, at, fatal, "other", first)
            if always:
                return self._exit(st, at, fatal, _fallback_cause(fatal), None)
            return []  # a shutdown for another reason: other detectors' business
        # The exception was shipped apart (or not at all): wait for an OOM line. A second
        # fatal line of the same exit (the runner after the handler) joins the first.
        pending = st.pending or fatal
        pending.always = pending.always or always
        pending.bare_oom = pending.bare_oom or found is not None
        if pending.role == "unknown":
            pending.role = fatal.role
        st.pending = pending
        return []

    def _exit(
        self, st: JvmFatalState, at: int, fatal: FatalLine, cause: str, oom: str | None
    ) -> list[Alert]:
        """Record one fatal exit; the first of an incident fires."""
        if st.last_exit_ms is None or at - st.last_exit_ms >= _SAME_CRASH_MS:
            st.exits += 1
        st.last_exit_ms = at
        oom = oom[:_TEXT_CHARS] if oom else None
        role = fatal.role
        if role == "unknown" and oom:
            role = role_of(st.tm_id, oom)
        facts = st.facts
        if st.firing and facts is not None:
            if facts.role == "unknown":
                facts.role = role
            facts.last_exit_ms = at
            return []
        st.facts = facts = ExitFacts(
            how=fatal.how,
            line=fatal.line,
            thread=fatal.thread,
            role=role,
            cause=cause,
            oom=oom,
            first_exit_ms=at,
            last_exit_ms=at,
        )
        return [self.fire(st, at, self._summary(st, facts), self.evidence(st))]

    # --- time --------------------------------------------------------------------

    def _tick(self, st: JvmFatalState, now_ms: int) -> int:
        """Move the clock on; forget an OOM line too old to explain a fatal line."""
        st.clock_ms = max(st.clock_ms, now_ms)
        if st.oom is not None and st.clock_ms - st.oom[0] > self.params.cause_wait_s * 1000:
            st.oom = None
        return st.clock_ms

    def _due(self, st: JvmFatalState) -> list[int]:
        times = []
        if st.pending is not None:
            times.append(st.pending.t + int(self.params.cause_wait_s * 1000))
        if st.firing and st.last_exit_ms is not None:
            times.append(st.last_exit_ms + int(self.params.clear_for_s * 1000))
        return sorted(times)

    def _decide(self, st: JvmFatalState, until_ms: int) -> tuple[Alert, ...]:
        """Decide what fell due up to ``until_ms``, one due time after the other."""
        alerts: list[Alert] = []
        wait_ms = int(self.params.cause_wait_s * 1000)
        while due := [t for t in self._due(st) if t <= until_ms]:
            pending = st.pending
            if pending is not None and pending.t + wait_ms == due[0]:
                # No OOM line came: a fatal line that always ends the process still does.
                st.pending = None
                if pending.always or pending.bare_oom:
                    cause = "other" if pending.bare_oom else _fallback_cause(pending)
                    alerts.extend(self._exit(st, due[0], pending, cause, None))
            else:
                alerts.append(self._resolved(st, due[0]))
        self._tick(st, until_ms)
        return tuple(alerts)

    # --- alerts ------------------------------------------------------------------

    def _who(self, st: JvmFatalState) -> str:
        role = st.facts.role if st.facts else "unknown"
        name = {"taskmanager": "TaskManager", "jobmanager": "JobManager"}.get(role, "process")
        where = f" on {st.host}" if st.host and st.host != st.tm_id else ""
        return f"{name} {st.tm_id}{where}"

    def _summary(self, st: JvmFatalState, f: ExitFacts) -> str:
        if f.cause == "fatal_exit":
            what = f"an uncaught exception in thread '{f.thread}'"
        else:
            what = f.oom or f"an OutOfMemoryError ({f.cause})"
        return f"{self._who(st)} stopped on {what}"

    def _resolved(self, st: JvmFatalState, at: int) -> Alert:
        minutes = self.params.clear_for_s / 60
        summary = f"{self._who(st)}: no fatal exit for {minutes:.0f} min"
        alert = self.resolve(st, at, summary, self.evidence(st))
        st.exits, st.last_exit_ms, st.facts = 0, None, None
        return alert
