"""``tm_lost``: a TaskManager is gone, and why, when the logs say.

A TaskManager is lost when the ResourceManager or the JobMaster stops hearing from it
(``The heartbeat of TaskManager with id X timed out.`` / ``Heartbeat of TaskManager with
id X timed out.`` / ``TaskManager with id X is no longer reachable.``) or when its
container is killed for memory: YARN's ``… beyond the 'PHYSICAL' memory limit … Killing
container.`` (the JVM then exits with 143) or Kubernetes' ``reason=OOMKilled`` (137) in
the ``Worker X is terminated`` diagnostics. The alert carries the cause:

- ``memory_kill``: YARN killed the container for exceeding its memory limit;
- ``oom_killed``: Kubernetes OOM-killed the pod;
- ``jvm_oom``: the JVM threw ``OutOfMemoryError`` (a record starting with it, or a
  fatal error whose cause is one) within ``cause_window_s`` before the timeout;
- ``unknown``: nothing in the logs explains the loss.

A kill pages at once (the TaskManager is certainly dead). A heartbeat timeout pages at
once when a cause was logged before it; otherwise it waits ``grace_s`` for a cause that
is logged just after (seed 000: the TaskManager's own ``OutOfMemoryError`` came 4 s after
the JobManager's timeout) and then pages with ``unknown``.

Flink also stops TaskManagers on purpose (idle after a job finished, no longer needed,
never registered): ``Stopping worker X.``, ``Stopping container X.``, ``Stopping
TaskManager pod X.``, ``Closing TaskExecutor connection X because: TaskExecutor exceeded
the idle timeout.`` A heartbeat timeout of a TaskManager released that way within
``release_window_s`` is expected and does not page.

The incident resolves once no loss signal for the TaskManager has arrived for
``clear_for_s`` (a lost TaskManager id does not come back; the longer default covers the
JobMaster's timeout, which can come minutes after the ResourceManager's).

State per TaskManager (bounded): the open incident, the last kill and OOM seen (one
each, lines cut to ``_MAX_LINE_CHARS``), the release time and at most ``max_job_ids`` job
ids; under 2 KB serialised.
"""

from __future__ import annotations

import copy
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
    State,
    Step,
)

#: Raw lines kept in the state and the evidence are cut to this length.
_MAX_LINE_CHARS = 500
#: The line of a multi-line message that says why the container died.
_KILL_LINE = re.compile(
    r"[^\n]*(?:beyond (?:the )?'?(?:physical|virtual)|is under oom|OOMKilled)"
    r"[^\n]*",
    re.IGNORECASE,
)
#: The process exit code in YARN / Kubernetes diagnostics (143 = SIGTERM, 137 = SIGKILL).
_EXIT_CODE = re.compile(r"Exit code is (-?\d+)|exitCode=(-?\d+)|non-zero exit code (-?\d+)")
#: YARN's container exit status (``-104`` physical, ``-103`` virtual memory) from Flink 1.14+.
_EXIT_STATUS = re.compile(r"Exit code:\s*(-?\d+)")
_OOM_LINE = re.compile(r"[^\n]*OutOfMemoryError[^\n]*")
_CAUSE_TEXT = {
    "memory_kill": "killed by YARN for exceeding its memory limit",
    "oom_killed": "OOMKilled by Kubernetes",
    "jvm_oom": "its JVM ran out of memory (OutOfMemoryError)",
    "unknown": "heartbeat timed out, no cause in the logs",
}


class TmLostParams(DetectorParams):
    """Thresholds of :class:`TmLost`."""

    grace_s: float = Field(
        default=20,
        ge=0,
        description=(
            "After a heartbeat timeout with no cause logged yet, wait this long (event-time "
            "seconds) for one before paging with cause unknown."
        ),
    )
    cause_window_s: float = Field(
        default=300,
        gt=0,
        description=(
            "An OutOfMemoryError or container kill of the TaskManager at most this long "
            "(seconds) before its heartbeat timeout is taken as the cause; covers "
            "heartbeat.timeout settings up to 5 min."
        ),
    )
    release_window_s: float = Field(
        default=600,
        ge=0,
        description=(
            "A heartbeat timeout up to this long (seconds) after Flink stopped the "
            "TaskManager on purpose (idle, no longer needed) is expected and does not page."
        ),
    )
    clear_for_s: float = Field(
        default=900,
        ge=0,
        description=(
            "Resolve once no loss signal (timeout, kill) for the TaskManager has arrived for "
            "this long (event-time seconds)."
        ),
    )
    max_job_ids: int = Field(
        default=10, ge=1, description="Job ids kept per TaskManager (jobs that failed with it)."
    )


class TmLost(Detector[TmLostParams, Any]):
    """Fire when a TaskManager is lost (heartbeat timeout or kill), with the cause."""

    name: ClassVar[str] = "tm_lost"
    runbook: ClassVar[str] = (
        "A TaskManager died and its jobs restart. memory_kill / oom_killed: the process used "
        "more than its container limit: raise taskmanager.memory.process.size or the JVM "
        "overhead, or look for native/off-heap growth (RocksDB, a leak). jvm_oom: heap or "
        "metaspace exhausted: check state size and GC in its log. unknown: look at the host "
        "(node lost, long GC pause, network) around the time of the timeout."
    )
    signals: ClassVar[dict[str, str]] = {
        "tm_lost": "1 while the TaskManager's loss incident is open, else 0.",
    }
    scope: ClassVar[Scope] = "tm"
    kinds: ClassVar[frozenset[str]] = frozenset(
        {
            "heartbeat_timeout",
            "container_memory_kill",
            "jvm_oom",
            "fatal_error",
            "tm_released",
            "job_state",
        }
    )
    params_model: ClassVar[type[DetectorParams]] = TmLostParams

    def signal_values(self, state: State) -> dict[str, float]:  # noqa: D102
        return {"tm_lost": 1.0 if state.get("firing") else 0.0}

    def on_event(self, state: State | None, event: Event, now_ms: int) -> Step:
        """Record causes, releases and losses; fire on a kill or a timeout."""
        state, expired = self.expire_idle(state, event.time_ms)
        if state is None and not self._worth_state(event):
            # A failing job that names no TaskManager we track, an OOM of a healthy-so-far
            # JVM without an id, ...: nothing to remember.
            return Step(state=None, alerts=tuple(expired))
        st = copy.deepcopy(state) if state else self._new_state(event)
        t = event.time_ms
        st["last_event_ms"] = max(int(st["last_event_ms"]), t)
        st["host"] = st.get("host") or _own_host(event)
        alerts = expired + self._due(st, t)
        kind = event.kind
        if kind == "tm_released":
            self._on_released(st, t)
        elif kind == "container_memory_kill":
            alerts.extend(self._on_kill(st, event))
        elif kind in ("jvm_oom", "fatal_error"):
            alerts.extend(self._on_oom(st, event))
        elif kind == "heartbeat_timeout":
            alerts.extend(self._on_timeout(st, event))
        elif kind == "job_state":
            self._on_job_failure(st, event)
        return Step(state=st, alerts=tuple(alerts), timer_ms=self._next_timer(st))

    def on_timer(self, state: State, now_ms: int) -> Step:
        """Page a pending timeout with cause unknown; resolve; evict an idle TaskManager."""
        st = copy.deepcopy(state)
        alerts = self._due(st, now_ms)
        idle_ms = now_ms - int(st["last_event_ms"])
        if idle_ms >= self.params.idle_ttl_s * 1000 and st.get("pending_until") is None:
            if st["firing"]:
                alerts.append(self._resolved(st, now_ms, "no events about it any more"))
            return Step(state=None, alerts=tuple(alerts))
        return Step(state=st, alerts=tuple(alerts), timer_ms=self._next_timer(st))

    # Events -----------------------------------------------------------------------------

    @staticmethod
    def _worth_state(event: Event) -> bool:
        if event.kind == "job_state":
            return False
        if event.kind == "fatal_error":
            return _is_oom(event)
        return True

    def _on_released(self, st: State, t: int) -> None:
        st["released_ms"] = t
        if st.get("pending_until") is not None:
            # The timeout we were holding belongs to a TaskManager Flink stopped itself.
            st["pending_until"] = None
            st["first_ms"] = None
            st["suppressed"] = int(st["suppressed"]) + 1

    def _on_kill(self, st: State, event: Event) -> list[Alert]:
        msg = event.message or ""
        oom_killed = "oomkilled" in (event.reason or "").lower() or "OOMKilled" in msg
        line = _KILL_LINE.search(msg)
        st["kill"] = {
            "cause": "oom_killed" if oom_killed else "memory_kill",
            "t": event.time_ms,
            "line": (line.group(0) if line else msg.split("\n", 1)[0]).strip()[:_MAX_LINE_CHARS],
            "exit_code": _exit_code(msg),
            "exit_status": _group_int(_EXIT_STATUS.search(msg)),
        }
        self._signal(st, event.time_ms, "container_memory_kill")
        if st["firing"]:
            return []
        # A kill is a loss by itself: page now, whether or not a timeout follows.
        return [self._fire(st, event.time_ms, str(st["kill"]["cause"]))]

    def _on_oom(self, st: State, event: Event) -> list[Alert]:
        if not _is_oom(event):
            return []
        msg = event.message or ""
        line = _OOM_LINE.search(msg)
        st["oom"] = {
            "t": event.time_ms,
            "line": (line.group(0) if line else msg.split("\n", 1)[0]).strip()[:_MAX_LINE_CHARS],
        }
        if st.get("pending_until") is not None and not st["firing"]:
            # The cause arrived within the grace period: page now, with it.
            return [self._fire(st, event.time_ms, "jvm_oom")]
        if st["firing"] and st.get("cause") == "unknown":
            # Too late for the page, but the resolve will say it.
            st["late_cause"] = "jvm_oom"
        return []

    def _on_timeout(self, st: State, event: Event) -> list[Alert]:
        t = event.time_ms
        released = st.get("released_ms")
        if released is not None and 0 <= t - int(released) <= self.params.release_window_s * 1000:
            st["suppressed"] = int(st["suppressed"]) + 1
            return []
        st["timeouts"] = int(st["timeouts"]) + 1
        if st.get("timeout_line") is None:
            st["timeout_line"] = (event.message or "").split("\n", 1)[0][:_MAX_LINE_CHARS]
        self._signal(st, t, "heartbeat_timeout")
        if st["firing"] or st.get("pending_until") is not None:
            return []
        cause = self._recent_cause(st, t)
        if cause is not None:
            return [self._fire(st, t, cause)]
        st["pending_until"] = t + int(self.params.grace_s * 1000)
        if self.params.grace_s == 0:
            return self._due(st, t)
        return []

    def _on_job_failure(self, st: State, event: Event) -> None:
        # The parser sets tm_id on a job_state only when its cause names this TaskManager.
        if not event.job_id or event.tm_id != st.get("tm_id"):
            return
        jobs: list[str] = st["job_ids"]
        if event.job_id not in jobs and len(jobs) < self.params.max_job_ids:
            jobs.append(event.job_id)
        st["job_id"] = st.get("job_id") or event.job_id
        st["job_name"] = st.get("job_name") or event.job_name

    # Incident ---------------------------------------------------------------------------

    def _signal(self, st: State, t: int, kind: str) -> None:
        st["last_signal_ms"] = max(int(st.get("last_signal_ms") or t), t)
        if st.get("first_ms") is None:
            st["first_ms"] = t
        if kind not in st["signals"]:
            st["signals"].append(kind)

    def _recent_cause(self, st: State, t: int) -> str | None:
        window = self.params.cause_window_s * 1000
        kill = st.get("kill")
        if kill is not None and 0 <= t - int(kill["t"]) <= window:
            return str(kill["cause"])
        oom = st.get("oom")
        if oom is not None and 0 <= t - int(oom["t"]) <= window:
            return "jvm_oom"
        return None

    def _fire(self, st: State, t: int, cause: str) -> Alert:
        st["pending_until"] = None
        st["firing"] = True
        st["incident_start_ms"] = t
        st["cause"] = cause
        st["late_cause"] = None
        where = f" on {st['host']}" if st.get("host") else ""
        return self.alert(
            state=st,
            status=AlertStatus.FIRING,
            event_time_ms=t,
            summary=f"TaskManager {st['tm_id']}{where} lost: {_CAUSE_TEXT[cause]}",
            evidence=self._evidence(st),
        )

    def _due(self, st: State, now_ms: int) -> list[Alert]:
        """Transitions that came due by ``now_ms``, at the time each came due."""
        alerts: list[Alert] = []
        pending = st.get("pending_until")
        if pending is not None and now_ms >= int(pending):
            alerts.append(self._fire(st, int(pending), "unknown"))
        if st["firing"]:
            deadline = int(st["last_signal_ms"]) + int(self.params.clear_for_s * 1000)
            if now_ms >= deadline:
                minutes = self.params.clear_for_s / 60
                alerts.append(self._resolved(st, deadline, f"no loss signal for {minutes:.0f} min"))
        return alerts

    def _resolved(self, st: State, t: int, why: str) -> Alert:
        if st.get("late_cause"):
            st["cause"] = st["late_cause"]
        alert = self.resolve(st, t, f"TaskManager {st['tm_id']}: {why}", self._evidence(st))
        st["first_ms"] = None
        st["cause"] = None
        st["late_cause"] = None
        st["timeouts"] = 0
        st["timeout_line"] = None
        st["signals"] = []
        return alert

    def _next_timer(self, st: State) -> int:
        timers = [int(st["last_event_ms"]) + int(self.params.idle_ttl_s * 1000)]
        if st.get("pending_until") is not None:
            timers.append(int(st["pending_until"]))
        if st["firing"]:
            timers.append(int(st["last_signal_ms"]) + int(self.params.clear_for_s * 1000))
        return min(timers)

    def _evidence(self, st: State) -> dict[str, Any]:
        cause = str(st.get("cause") or "unknown")
        kill, oom = st.get("kill"), st.get("oom")
        if cause in ("memory_kill", "oom_killed") and kill is not None:
            diagnostics, exit_code = kill["line"], kill["exit_code"]
        elif cause == "jvm_oom" and oom is not None:
            diagnostics, exit_code = oom["line"], None
        else:
            diagnostics, exit_code = st.get("timeout_line"), None
        ev: dict[str, Any] = {
            "cause": cause,
            "diagnostics": diagnostics,
            "exit_code": exit_code,
            "heartbeat_timeouts": int(st["timeouts"]),
            "signals": list(st["signals"]),
            "job_ids": list(st["job_ids"]),
            "first_signal_ms": st.get("first_ms"),
        }
        if kill is not None and cause in ("memory_kill", "oom_killed"):
            ev["exit_status"] = kill.get("exit_status")
        if int(st["suppressed"]):
            ev["timeouts_ignored_after_release"] = int(st["suppressed"])
        return ev

    # State ------------------------------------------------------------------------------

    def _new_state(self, event: Event) -> State:
        st: State = self.identity(event)
        st.update(
            {
                "host": _own_host(event),
                "job_id": None,
                "job_name": None,
                "pending_until": None,
                "first_ms": None,
                "last_signal_ms": None,
                "cause": None,
                "late_cause": None,
                "timeouts": 0,
                "timeout_line": None,
                "signals": [],
                "kill": None,
                "oom": None,
                "released_ms": None,
                "suppressed": 0,
                "job_ids": [],
            }
        )
        return st


def _own_host(event: Event) -> str | None:
    """The TaskManager's host, if the event knows it.

    The JobManager's lines carry the host in the TaskManager id's metadata
    (``container_…(worker-7:8041)``); without it, their ``host`` is the shipper's, i.e. the
    JobManager's node. The TaskManager's own lines (OOM, fatal error) come from its node.
    """
    if event.host is None:
        return None
    if event.kind in ("jvm_oom", "fatal_error") or event.host in (event.message or ""):
        return event.host
    return None


def _is_oom(event: Event) -> bool:
    if event.kind == "jvm_oom":
        return True
    text = f"{event.reason or ''}\n{event.message or ''}"
    return "OutOfMemoryError" in text


def _group_int(m: re.Match[str] | None) -> int | None:
    if m is None:
        return None
    value = next((g for g in m.groups() if g is not None), None)
    return int(value) if value is not None else None


def _exit_code(msg: str) -> int | None:
    return _group_int(_EXIT_CODE.search(msg))
