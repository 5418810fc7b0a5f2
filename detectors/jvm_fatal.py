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

State per process: the open incident's facts (texts cut to ``_TEXT_CHARS``), one
pending fatal line and one recent OOM line: at most ~1.5 KB.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from pydantic import Field

from detectors.base import (
    Alert,
    AlertStatus,
    Detector,
    DetectorParams,
    Event,
    Scope,
    Severity,
    State,
    Step,
)

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


def _fallback_cause(fatal: dict[str, Any]) -> str:
    """The cause of a fatal exit whose exception is no OutOfMemoryError."""
    return "fatal_exit" if fatal["how"] == "fatal_exit_handler" else "other"


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

    severity: Severity = Field(
        default=Severity.CRITICAL, description="Severity of its alerts: info, warning or critical."
    )
    clear_for_s: float = Field(
        default=900,
        ge=0,
        description="The incident resolves this long after the process's last fatal exit (s).",
    )
    cause_wait_s: float = Field(
        default=10,
        ge=0,
        le=300,
        description=(
            "How long a fatal line without its exception waits for the process's "
            "OutOfMemoryError line (a shipper that sends the trace apart), event time (s)."
        ),
    )


class JvmFatal(Detector[JvmFatalParams, Any]):
    """Fire when a Flink process stops itself on an OutOfMemoryError or uncaught exception."""

    name: ClassVar[str] = "jvm_fatal"
    scope: ClassVar[Scope] = "tm"
    kinds: ClassVar[frozenset[str]] = frozenset({"fatal_error", "jvm_oom"})
    params_model: ClassVar[type[DetectorParams]] = JvmFatalParams
    runbook: ClassVar[str] = (
        "A Flink JVM stopped itself. Read `cause` and the hint in the evidence; for heap OOMs "
        "check the job's checkpoint size (checkpoint_state_growth) and state backend, for "
        "metaspace a class-loading leak across restarts. Then check the job restarted and "
        "restored from a checkpoint, and whether the same process keeps dying (fatal_exits)."
    )
    signals: ClassVar[dict[str, str]] = {
        "process_fatal_exits": (
            "Fatal exits of the process (OutOfMemoryError or uncaught exception) in its open "
            "incident; 0 when none is open."
        ),
    }

    def signal_values(self, state: State) -> dict[str, float]:  # noqa: D102
        return {"process_fatal_exits": float(state["exits"] if state.get("firing") else 0)}

    def on_event(self, state: State | None, event: Event, now_ms: int) -> Step:
        """Fold a fatal or OOM line in; fire when a process is known to have died of it."""
        st = dict(state) if state else self._new_state(event)
        st["host"] = st.get("host") or event.host
        at = max(int(st["clock_ms"]), event.time_ms)
        st["last_event_ms"] = max(int(st["last_event_ms"]), event.time_ms)
        alerts = self._advance(st, at)
        text = event.message or event.reason or ""
        if event.kind == "jvm_oom":
            cause, line = _oom_line(text) or ("other", None)
            line = line or text.split("\n", 1)[0]
            pending = st["pending"]
            if pending is not None:
                st["pending"] = None
                alerts.extend(self._exit(st, at, {**pending, "cause": cause, "oom": line}))
            else:
                st["oom"] = [at, cause, line[:_TEXT_CHARS]]
        elif event.kind == "fatal_error":
            alerts.extend(self._on_fatal(st, at, text))
        return Step(state=st, alerts=tuple(alerts), timer_ms=self._next_timer(st))

    def on_timer(self, state: State, now_ms: int) -> Step:
        """Decide a fatal line that waited for its cause; resolve; evict an idle process."""
        st = dict(state)
        idle_at = int(st["last_event_ms"]) + int(self.params.idle_ttl_s * 1000)
        alerts = self._advance(st, min(now_ms, idle_at))
        if now_ms >= idle_at:
            if st["firing"]:
                alerts.append(self._resolved(st, idle_at))
            return Step(state=None, alerts=tuple(alerts))
        return Step(state=st, alerts=tuple(alerts), timer_ms=self._next_timer(st))

    # --- events ------------------------------------------------------------------

    def _new_state(self, event: Event) -> State:
        return {
            **self.identity(event),
            "clock_ms": event.time_ms,
            "pending": None,
            "oom": None,
            "exits": 0,
            "last_exit_ms": None,
            "facts": None,
        }

    def _on_fatal(self, st: State, at: int, text: str) -> list[Alert]:
        first = text.split("\n", 1)[0]
        how, always = next(
            ((how, always) for needle, how, always in _EXITS if needle in first),
            ("fatal_error", False),
        )
        thread = _THREAD.match(first)
        fatal: dict[str, Any] = {
            "t": at,
            "how": how,
            "always": always,
            "line": first[:_TEXT_CHARS],
            "thread": thread[1][:_TEXT_CHARS] if thread else None,
            "role": role_of(st.get("tm_id"), text),
            "cause": None,
            "oom": None,
        }
        found = _oom_line(text)
        if found is not None and found[1] is not None:
            return self._exit(st, at, {**fatal, "cause": found[0], "oom": found[1]})
        recent = st["oom"]
        if recent is not None and at - int(recent[0]) <= self.params.cause_wait_s * 1000:
            st["oom"] = None
            return self._exit(st, at, {**fatal, "cause": recent[1], "oom": recent[2]})
        if "\n" in text.strip():
            # The record carries its exception, and it is no OutOfMemoryError with a detail.
            if found is not None:
                return self._exit(st, at, {**fatal, "cause": "other", "oom": first})
            if always:
                return self._exit(st, at, {**fatal, "cause": _fallback_cause(fatal)})
            return []  # a shutdown for another reason: other detectors' business
        # The exception was shipped apart (or not at all): wait for an OOM line. A second
        # fatal line of the same exit (the runner after the handler) joins the first.
        pending = st["pending"] or {**fatal, "bare_oom": False}
        pending["always"] = bool(pending["always"] or always)
        pending["bare_oom"] = bool(pending["bare_oom"] or found is not None)
        if pending["role"] == "unknown":
            pending["role"] = fatal["role"]
        st["pending"] = pending
        return []

    def _exit(self, st: State, at: int, fatal: dict[str, Any]) -> list[Alert]:
        """Record one fatal exit; the first of an incident fires."""
        last = st["last_exit_ms"]
        if last is None or at - int(last) >= _SAME_CRASH_MS:
            st["exits"] = int(st["exits"]) + 1
        st["last_exit_ms"] = at
        oom = fatal.get("oom")
        fatal = {k: v for k, v in fatal.items() if k not in ("t", "always", "bare_oom")}
        fatal["oom"] = str(oom)[:_TEXT_CHARS] if oom else None
        if fatal["role"] == "unknown" and oom:
            fatal["role"] = role_of(st.get("tm_id"), str(oom))
        if st["firing"]:
            facts = st["facts"] or {}
            if facts.get("role") == "unknown" and fatal["role"] != "unknown":
                facts["role"] = fatal["role"]
            st["facts"] = {**facts, "last_exit_ms": at}
            return []
        st["facts"] = {**fatal, "first_exit_ms": at, "last_exit_ms": at}
        st["firing"] = True
        st["incident_start_ms"] = at
        st["clear_since_ms"] = None
        return [
            self.alert(
                state=st,
                status=AlertStatus.FIRING,
                event_time_ms=at,
                summary=self._summary(st),
                evidence=self._evidence(st),
            )
        ]

    # --- time --------------------------------------------------------------------

    def _due(self, st: State) -> list[int]:
        times = []
        if st["pending"] is not None:
            times.append(int(st["pending"]["t"]) + int(self.params.cause_wait_s * 1000))
        if st["firing"] and st["last_exit_ms"] is not None:
            times.append(int(st["last_exit_ms"]) + int(self.params.clear_for_s * 1000))
        return sorted(times)

    def _advance(self, st: State, until_ms: int) -> list[Alert]:
        """Decide what fell due up to ``until_ms``, one due time after the other."""
        alerts: list[Alert] = []
        wait_ms = int(self.params.cause_wait_s * 1000)
        while True:
            due = [t for t in self._due(st) if t <= until_ms]
            if not due:
                break
            pending = st["pending"]
            if pending is not None and int(pending["t"]) + wait_ms == due[0]:
                # No OOM line came: a fatal line that always ends the process still does.
                st["pending"] = None
                if pending["always"] or pending["bare_oom"]:
                    cause = "other" if pending["bare_oom"] else _fallback_cause(pending)
                    alerts.extend(self._exit(st, due[0], {**pending, "cause": cause}))
            else:
                alerts.append(self._resolved(st, due[0]))
        if st["oom"] is not None and until_ms - int(st["oom"][0]) > self.params.cause_wait_s * 1000:
            st["oom"] = None
        st["clock_ms"] = max(int(st["clock_ms"]), until_ms)
        return alerts

    def _next_timer(self, st: State) -> int:
        idle_at = int(st["last_event_ms"]) + int(self.params.idle_ttl_s * 1000)
        return min([idle_at, *self._due(st)])

    # --- alerts ------------------------------------------------------------------

    def _who(self, st: State) -> str:
        role = (st["facts"] or {}).get("role", "unknown")
        name = {"taskmanager": "TaskManager", "jobmanager": "JobManager"}.get(role, "process")
        where = f" on {st['host']}" if st.get("host") and st["host"] != st.get("tm_id") else ""
        return f"{name} {st.get('tm_id')}{where}"

    def _summary(self, st: State) -> str:
        f = st["facts"]
        if f["cause"] == "fatal_exit":
            what = f"an uncaught exception in thread '{f['thread']}'"
        else:
            what = f["oom"] or f"an OutOfMemoryError ({f['cause']})"
        return f"{self._who(st)} stopped on {what}"

    def _resolved(self, st: State, at: int) -> Alert:
        minutes = self.params.clear_for_s / 60
        alert = self.resolve(
            st,
            at,
            f"{self._who(st)}: no fatal exit for {minutes:.0f} min",
            self._evidence(st),
        )
        st["exits"], st["last_exit_ms"], st["facts"] = 0, None, None
        return alert

    def _evidence(self, st: State) -> dict[str, Any]:
        f = st["facts"] or {}
        cause = f.get("cause") or "other"
        return {
            "cause": cause,
            "role": f.get("role", "unknown"),
            "exit": f.get("how"),
            "fatal_line": f.get("line"),
            "thread": f.get("thread"),
            "oom": f.get("oom"),
            "fatal_exits": st["exits"],
            "first_exit_ms": f.get("first_exit_ms"),
            "last_exit_ms": f.get("last_exit_ms"),
            "hint": _HINTS.get(cause, _HINTS["other"]),
        }
