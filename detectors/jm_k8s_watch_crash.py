"""``jm_k8s_watch_crash``: the JobManager died on a Kubernetes watch "too old resource version".

From Flink 1.10.2 to 1.12.1 (FLINK-15836 until FLINK-20417) the ResourceManager treats
the pod watch closing with HTTP 410 Gone (``KubernetesClientException: too old resource
version: N (M)``, e.g. after an API server restart) as fatal: ``Fatal error occurred in
ResourceManager.`` then ``Fatal error occurred in the cluster entrypoint.``, and the
JobManager process exits (seed 003). Kubernetes restarts it; with HA its jobs come back
from their latest checkpoint (``Restoring job J from latest valid checkpoint: …``),
without HA they start from nothing (``No checkpoint found during restore.``, or no
restore line at all) and their state is lost.

The alert fires at the fatal error (a fatal line whose cause is the too-old exception,
or a fatal line and a lone too-old exception line within ``pair_s`` when a shipper split
the stack trace). It then follows the restart: the ``Starting …ClusterEntrypoint.`` line
and, per job that reaches RUNNING again within ``recovery_window_s``, whether it was
restored from a checkpoint. A job that came back without one escalates the alert to
critical (``restored: none``), and so does a JobManager that shows no job back within
``restart_timeout_s``. It resolves ``clear_for_s`` after the last job came back.

Flink 1.12.2+ re-creates the watch instead (``Creating a new watch on TaskManager
pods.``, DEBUG ``HTTP_GONE``): those lines never fire.

The detector is cluster-scoped: every JobManager of the fleet shares one state. Crashes
are kept apart by the ``host`` of their log records (the node, from a shipper's
envelope); records without one are taken as one JobManager. State (bounded): at most
``max_jobmanagers`` crash records and job lists of at most ``max_jobs`` ids each, about
1 KB per open crash.
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
    Severity,
    State,
    Step,
)

_TOO_OLD = "too old resource version"
_JM_FATAL = re.compile(
    r"^Fatal error occurred in (?:ResourceManager|the cluster entrypoint)", re.MULTILINE
)
_VERSIONS = re.compile(r"too old resource version: (\d+) \((\d+)\)")
_TERMINAL = frozenset({"FINISHED", "CANCELED", "FAILED"})
_MAX_LINE_CHARS = 300
_MAX_CRASH_TIMES = 10  # crash times kept per JobManager


def _latest(crash: dict[str, Any]) -> int:
    """When the JobManager crashed last: its recovery is measured from there."""
    return int(crash.get("last_crash_ms") or crash["start_ms"])


class JmK8sWatchCrashParams(DetectorParams):
    """Thresholds of :class:`JmK8sWatchCrash`."""

    pair_s: float = Field(
        default=10,
        ge=0,
        description=(
            "A fatal-error line and a lone 'too old resource version' line this close "
            "(seconds) are one crash (a shipper split the stack trace)."
        ),
    )
    restart_timeout_s: float = Field(
        default=600,
        gt=0,
        description=(
            "Escalate to critical when no job of the crashed JobManager is RUNNING again "
            "this long (seconds) after the crash."
        ),
    )
    recovery_window_s: float = Field(
        default=1800,
        gt=0,
        description=(
            "Restores and jobs reaching RUNNING up to this long (seconds) after the crash "
            "belong to its recovery."
        ),
    )
    clear_for_s: float = Field(
        default=600,
        ge=0,
        description="Resolve this long (event-time seconds) after the last job came back.",
    )
    loop_crashes: int = Field(
        default=3,
        ge=2,
        description=(
            "Crashes of one JobManager within loop_window_s that make a crash loop: its "
            "incident (one for the whole loop) escalates to critical."
        ),
    )
    loop_window_s: float = Field(
        default=3600,
        gt=0,
        description="How far back crashes of one JobManager count towards a loop (seconds).",
    )
    max_jobs: int = Field(default=20, ge=1, description="Job ids tracked per JobManager.")
    max_jobmanagers: int = Field(
        default=8, ge=1, description="JobManagers (crashes and job lists) tracked at most."
    )


class JmK8sWatchCrash(Detector[JmK8sWatchCrashParams, Any]):
    """Fire when a JobManager crashes on a Kubernetes watch error; escalate if state is lost."""

    name: ClassVar[str] = "jm_k8s_watch_crash"
    runbook: ClassVar[str] = (
        "The JobManager exited on a Kubernetes pod-watch error (too old resource version; "
        "Flink 1.10.2-1.12.1, fixed in 1.12.2 by FLINK-20417). Check that the jobs are RUNNING "
        "again; restored: none means they restarted without state: restore them from the last "
        "retained checkpoint or savepoint, enable HA and upgrade Flink."
    )
    signals: ClassVar[dict[str, str]] = {
        "jm_crashes_open": "JobManager crash incidents still open (recovery not finished).",
    }
    scope: ClassVar[Scope] = "cluster"
    kinds: ClassVar[frozenset[str]] = frozenset(
        {
            "fatal_error",
            "k8s_watch_gone",
            "jm_started",
            "job_restored",
            "no_checkpoint_found",
            "job_state",
        }
    )
    params_model: ClassVar[type[DetectorParams]] = JmK8sWatchCrashParams

    def signal_values(self, state: State) -> dict[str, float]:  # noqa: D102
        return {"jm_crashes_open": float(len(state.get("crashes") or {}))}

    def on_event(self, state: State | None, event: Event, now_ms: int) -> Step:
        """Detect the crash, follow the restart and the jobs' recovery."""
        state, expired = self.expire_idle(state, event.time_ms)
        st = copy.deepcopy(state) if state else self._new_state(event)
        t = event.time_ms
        st["last_event_ms"] = max(int(st["last_event_ms"]), t)
        alerts = expired + self._due(st, t)
        src = event.host or ""
        kind = event.kind
        if kind in ("fatal_error", "k8s_watch_gone"):
            alerts.extend(self._on_fatal_or_watch(st, event, src))
        elif kind == "jm_started":
            crash = self._crash_for(st, src, lambda c: c["jm_started_ms"] is None)
            if crash is not None:
                crash["jm_started_ms"] = t
        elif kind == "job_restored" and event.job_id:
            crash = self._crash_for(st, src, lambda c: True)
            if crash is not None and event.checkpoint_id is not None:
                crash["restored"][event.job_id] = event.checkpoint_id
        elif kind == "no_checkpoint_found":
            crash = self._crash_for(st, src, lambda c: True)
            if crash is not None:
                crash["no_checkpoint"] = int(crash["no_checkpoint"]) + 1
        elif kind == "job_state" and event.job_id and event.to_state:
            alerts.extend(self._on_job_state(st, event, src))
        return Step(state=st, alerts=tuple(alerts), timer_ms=self._next_timer(st))

    def on_timer(self, state: State, now_ms: int) -> Step:
        """Escalate a JobManager that did not bring its jobs back; resolve; evict."""
        st = copy.deepcopy(state)
        alerts = self._due(st, now_ms)
        if now_ms - int(st["last_event_ms"]) >= self.params.idle_ttl_s * 1000:
            for src in list(st["crashes"]):
                alerts.append(self._close(st, src, now_ms, "no events any more"))
            return Step(state=None, alerts=tuple(alerts))
        return Step(state=st, alerts=tuple(alerts), timer_ms=self._next_timer(st))

    # Crash --------------------------------------------------------------------------------

    def _on_fatal_or_watch(self, st: State, event: Event, src: str) -> list[Alert]:
        text = f"{event.message or ''}\n{event.reason or ''}"
        too_old = _TOO_OLD in text
        jm_fatal = event.kind == "fatal_error" and _JM_FATAL.search(event.message or "")
        if not too_old and not jm_fatal:
            # Another fatal error, or 1.12.2+ re-creating the watch: not this incident.
            return []
        t = event.time_ms
        pair_ms = self.params.pair_s * 1000
        for other_src in [s for s in st["pending"] if s != src]:
            seen = st["pending"][other_src]
            last = max(int(v) for v in (seen["fatal_ms"], seen["watch_ms"], 0) if v is not None)
            if t - last > pair_ms:
                del st["pending"][other_src]
        pending = st["pending"].setdefault(src, {"fatal_ms": None, "watch_ms": None, "line": None})
        if too_old:
            pending["line"] = _too_old_line(text)
        if jm_fatal and too_old:
            return self._crash(st, src, t, str(pending["line"]))
        if jm_fatal:
            pending["fatal_ms"] = t
            other = pending.get("watch_ms")
        else:
            pending["watch_ms"] = t
            other = pending.get("fatal_ms")
        if other is not None and abs(t - int(other)) <= pair_ms:
            return self._crash(st, src, min(t, int(other)), str(pending["line"] or ""))
        return []

    def _crash(self, st: State, src: str, t: int, line: str) -> list[Alert]:
        st["pending"].pop(src, None)
        alerts: list[Alert] = []
        crash = st["crashes"].get(src)
        if crash is not None:
            if crash["jm_started_ms"] is None:
                # The entrypoint's fatal line after the ResourceManager's: the same crash.
                crash["fatal_lines"] = int(crash["fatal_lines"]) + 1
                return []
            return self._again(st, src, crash, t, line)
        if len(st["crashes"]) >= self.params.max_jobmanagers:
            oldest = min(st["crashes"], key=lambda s: int(st["crashes"][s]["start_ms"]))
            alerts.append(self._close(st, oldest, t, "too many JobManagers tracked"))
        # The crashed process's jobs are gone with it; those that come back register again.
        before = sorted(st["jobs"].pop(src, {}))
        versions = _VERSIONS.search(line)
        # Crashes of this JobManager in an incident that closed lately still count.
        times = [*self._recent(st, src, t), t]
        looping = len(times) >= self.params.loop_crashes
        crash = {
            "start_ms": t,
            "stalled": False,
            "job_id": None,
            "fatal_lines": 1,
            "line": line[:_MAX_LINE_CHARS],
            "resource_version": versions.group(1) if versions else None,
            "jm_started_ms": None,
            "restored": {},
            "lost": [],
            "back_ms": None,
            "no_checkpoint": 0,
            "jobs_before": before[: self.params.max_jobs],
            "severity": (Severity.CRITICAL if looping else self.params.severity).value,
            "crash_times": times,
        }
        st["crashes"][src] = crash
        view = self._view(st, src)
        where = f" on {src}" if src else ""
        alerts.append(
            self.alert(
                state=view,
                status=AlertStatus.FIRING,
                event_time_ms=t,
                summary=(
                    f"JobManager{where} crashed: Kubernetes pod watch failed with 'too old "
                    "resource version' (fatal before Flink 1.12.2)"
                    + (f"; {self._loop_text(times)}" if looping else "")
                ),
                evidence=self._evidence(crash, t),
                severity=Severity.CRITICAL if looping else None,
            )
        )
        return alerts

    def _again(self, st: State, src: str, crash: dict[str, Any], t: int, line: str) -> list[Alert]:
        """The JobManager crashed again before its incident closed: the same incident."""
        window_ms = self.params.loop_window_s * 1000
        earlier = crash.get("crash_times") or [crash["start_ms"]]
        times = [x for x in [*earlier, t] if t - x <= window_ms]
        before = sorted(st["jobs"].pop(src, {}))
        crash.update(
            crash_times=times[-_MAX_CRASH_TIMES:],
            last_crash_ms=t,
            jm_started_ms=None,
            back_ms=None,
            stalled=False,
            restored={},
            fatal_lines=int(crash["fatal_lines"]) + 1,
            line=line[:_MAX_LINE_CHARS] or crash["line"],
        )
        if before:
            crash["jobs_before"] = before[: self.params.max_jobs]
        if len(times) < self.params.loop_crashes:
            return []
        return self._escalate(st, src, t, self._loop_text(times))

    def _loop_text(self, times: list[int]) -> str:
        minutes = (times[-1] - times[0]) / 60_000
        return f"it crashed {len(times)} times in {minutes:.0f} min (a crash loop)"

    def _recent(self, st: State, src: str, t: int) -> list[int]:
        window_ms = self.params.loop_window_s * 1000
        return [x for x in (st.get("loops") or {}).get(src, []) if t - x <= window_ms]

    def _crash_for(self, st: State, src: str, wanted: Any) -> dict[str, Any] | None:
        """The open crash an event about a restart belongs to (its host's, else the only one)."""
        crash: dict[str, Any] | None = st["crashes"].get(src)
        if crash is not None and wanted(crash):
            return crash
        candidates = [c for c in st["crashes"].values() if wanted(c)]
        return candidates[0] if len(candidates) == 1 else None

    # Jobs ---------------------------------------------------------------------------------

    def _on_job_state(self, st: State, event: Event, src: str) -> list[Alert]:
        job, to, t = str(event.job_id), str(event.to_state), event.time_ms
        jobs = st["jobs"].setdefault(src, {})
        if to in _TERMINAL:
            jobs.pop(job, None)
        else:
            jobs[job] = t
            if len(jobs) > self.params.max_jobs:
                del jobs[min(jobs, key=lambda j: int(jobs[j]))]
        if len(st["jobs"]) > self.params.max_jobmanagers:
            stale = min(
                (s for s in st["jobs"] if s != src),
                key=lambda s: max(st["jobs"][s].values(), default=0),
            )
            del st["jobs"][stale]
        # Only a job the new JobManager starts counts as back: RESTARTING -> RUNNING is a
        # failover inside some JobManager (on 1.10+ logged before its restore line), and
        # would read as "restarted without state" for whichever crash is open.
        if to != "RUNNING" or (event.from_state or "CREATED") not in ("CREATED", "INITIALIZING"):
            return []
        crash = self._crash_for(st, src, lambda c: _latest(c) <= t)
        if crash is None or t - _latest(crash) > self.params.recovery_window_s * 1000:
            return []
        if job in crash["lost"]:
            return []
        crash["back_ms"] = t
        if job in crash["restored"]:
            return []
        # Back in RUNNING with no restore line before it: it started from nothing.
        if len(crash["lost"]) < self.params.max_jobs:
            crash["lost"].append(job)
        lost = ", ".join(crash["lost"])
        return self._escalate(
            st, self._src_of(st, crash), t, f"job {lost} restarted WITHOUT its state (no HA)"
        )

    # Transitions --------------------------------------------------------------------------

    def _escalate(self, st: State, src: str, t: int, why: str) -> list[Alert]:
        crash = st["crashes"][src]
        if crash["severity"] == Severity.CRITICAL.value:
            return []
        crash["severity"] = Severity.CRITICAL.value
        return [
            self.alert(
                state=self._view(st, src),
                status=AlertStatus.ESCALATED,
                event_time_ms=t,
                summary=f"JobManager crash (too old resource version): {why}",
                evidence=self._evidence(crash, t),
                severity=Severity.CRITICAL,
            )
        ]

    def _due(self, st: State, now_ms: int) -> list[Alert]:
        alerts: list[Alert] = []
        for src in sorted(st["crashes"], key=lambda s: int(st["crashes"][s]["start_ms"])):
            crash = st["crashes"][src]
            back = crash["back_ms"]
            if back is None:
                deadline = _latest(crash) + int(self.params.restart_timeout_s * 1000)
                if now_ms >= deadline and crash["severity"] != Severity.CRITICAL.value:
                    after = f"{self.params.restart_timeout_s:.0f} s after the crash"
                    why = (
                        f"no job RUNNING again {after}"
                        if crash["jm_started_ms"] is not None
                        else f"the JobManager has not restarted {after}"
                    )
                    crash["stalled"] = True
                    alerts.extend(self._escalate(st, src, deadline, why))
                continue
            resolve_at = int(back) + int(self.params.clear_for_s * 1000)
            if now_ms >= resolve_at:
                alerts.append(self._close(st, src, resolve_at, "jobs are RUNNING again"))
        return alerts

    def _close(self, st: State, src: str, t: int, why: str) -> Alert:
        crash = st["crashes"].pop(src)
        # Remembered for loop_window_s: the next crash of this JobManager may be one more.
        loops = st.setdefault("loops", {})
        loops[src] = list(crash.get("crash_times") or [crash["start_ms"]])[-_MAX_CRASH_TIMES:]
        while len(loops) > self.params.max_jobmanagers:
            del loops[min(loops, key=lambda s: max(loops[s], default=0))]
        view = self._view(st, src, crash)
        return self.resolve(
            view,
            t,
            f"JobManager crash (too old resource version): {why}",
            self._evidence(crash, t),
            severity=Severity(crash["severity"]),
        )

    def _next_timer(self, st: State) -> int:
        timers = [int(st["last_event_ms"]) + int(self.params.idle_ttl_s * 1000)]
        for crash in st["crashes"].values():
            if crash["back_ms"] is None:
                if crash["severity"] != Severity.CRITICAL.value:
                    timers.append(_latest(crash) + int(self.params.restart_timeout_s * 1000))
            else:
                timers.append(int(crash["back_ms"]) + int(self.params.clear_for_s * 1000))
        return min(timers)

    # Output -------------------------------------------------------------------------------

    @staticmethod
    def _src_of(st: State, crash: dict[str, Any]) -> str:
        return str(next(s for s, c in st["crashes"].items() if c is crash))

    def _view(self, st: State, src: str, crash: dict[str, Any] | None = None) -> State:
        """The alert identity of one crash: one incident per crash in the shared state."""
        c = crash if crash is not None else st["crashes"][src]
        if c.get("job_id") is None:
            # The job is named once known: the only one it ran, else the first one back.
            jobs = list(c["jobs_before"]) if len(c["jobs_before"]) == 1 else []
            c["job_id"] = next(iter(jobs + sorted(c["restored"]) + list(c["lost"])), None)
        return {
            "entity": st["entity"],
            "incident_start_ms": c["start_ms"],
            "job_id": c["job_id"],
            "job_name": None,
            "tm_id": None,
            "host": src or None,
        }

    def _evidence(self, crash: dict[str, Any], t: int) -> dict[str, Any]:
        restored_ids = sorted(crash["restored"])
        lost = list(crash["lost"])
        if lost:
            restored = "none"
        elif restored_ids:
            restored = "checkpoint"
        elif crash.get("stalled") and crash["jm_started_ms"] is not None:
            restored = "none"
            lost = list(crash["jobs_before"])
        else:
            restored = "unknown"
        started = crash["jm_started_ms"]
        back = crash["back_ms"]
        return {
            "restored": restored,
            "job_ids": sorted(set(restored_ids) | set(lost)),
            "restored_job_ids": restored_ids,
            "lost_job_ids": lost,
            "checkpoints": {j: int(c) for j, c in sorted(crash["restored"].items())},
            "jobs_before_crash": list(crash["jobs_before"]),
            "jm_restarted": started is not None,
            "jm_restart_s": round((int(started) - _latest(crash)) / 1000, 3)
            if started is not None
            else None,
            "recovery_s": round((int(back) - _latest(crash)) / 1000, 3)
            if back is not None
            else None,
            "no_checkpoint_lines": int(crash["no_checkpoint"]),
            "fatal_lines": int(crash["fatal_lines"]),
            "resource_version": crash["resource_version"],
            "diagnostics": crash["line"],
            "crashes": len(crash.get("crash_times") or [crash["start_ms"]]),
            "crash_times_ms": list(crash.get("crash_times") or [crash["start_ms"]]),
        }

    # State --------------------------------------------------------------------------------

    def _new_state(self, event: Event) -> State:
        st: State = self.identity(event)
        st.update({"crashes": {}, "jobs": {}, "pending": {}})
        return st


def _too_old_line(text: str) -> str:
    for line in text.split("\n"):
        if _TOO_OLD in line:
            return line.strip()
    return ""
