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
envelope); records without one are taken as one JobManager. State (bounded,
:class:`JmK8sWatchCrashState`): at most ``max_jobmanagers`` crash records and job lists
of at most ``max_jobs`` ids each, about 1 KB per open crash.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field

from detectors import words
from detectors.base import (
    Detector,
    DetectorParams,
    DetectorState,
    Evidence,
    Incident,
    Profile,
    Record,
    Story,
    given_up_words,
)
from detectors.model import Alert, Event, Severity

_TOO_OLD = "too old resource version"
_JM_FATAL = re.compile(
    r"^Fatal error occurred in (?:ResourceManager|the cluster entrypoint)", re.MULTILINE
)
_VERSIONS = re.compile(r"too old resource version: (\d+) \((\d+)\)")
_TERMINAL = frozenset({"FINISHED", "CANCELED", "FAILED"})
_MAX_LINE_CHARS = 300
_MAX_CRASH_TIMES = 10  # crash times kept per JobManager


class JmK8sWatchCrashParams(DetectorParams):
    """Thresholds of :class:`JmK8sWatchCrash`."""

    pair_s: float = Field(default=10, ge=0)
    """A fatal-error line and a lone 'too old resource version' line this close (seconds) are one
    crash (a shipper split the stack trace)."""
    restart_timeout_s: float = Field(default=600, gt=0)
    """Escalate to critical when no job of the crashed JobManager is RUNNING again this long
    (seconds) after the crash."""
    recovery_window_s: float = Field(default=1800, gt=0)
    """Restores and jobs reaching RUNNING up to this long (seconds) after the crash belong to its
    recovery."""
    clear_for_s: float = Field(default=600, ge=0)
    """Resolve this long (event-time seconds) after the last job came back."""
    loop_crashes: int = Field(default=3, ge=2)
    """Crashes of one JobManager within loop_window_s that make a crash loop: its incident (one for
    the whole loop) escalates to critical."""
    loop_window_s: float = Field(default=3600, gt=0)
    """How far back crashes of one JobManager count towards a loop (seconds)."""
    max_jobs: int = Field(default=20, ge=1)
    """Job ids tracked per JobManager."""
    max_jobmanagers: int = Field(default=8, ge=1)
    """JobManagers (crashes and job lists) tracked at most."""


class JmCrash(Incident):
    """One open crash of a JobManager: its incident (``incident_start_ms``: when it crashed).

    Attributes:
        last_crash_ms: When it crashed again within the incident, the latest time.
        crash_times: Its crashes within ``loop_window_s`` (at most ``_MAX_CRASH_TIMES``).
        stalled: No job was back ``restart_timeout_s`` after the crash.
        job_id: The job the alert names, once known.
        fatal_lines: Fatal lines of the crash (ResourceManager, entrypoint, again).
        line: The ``too old resource version`` line.
        resource_version: The resource version the watch had.
        jm_started_ms: When the JobManager started again.
        restored: Jobs restored from a checkpoint: job id → checkpoint id.
        lost: Jobs RUNNING again without a restore before: their state is lost.
        back_ms: When the latest job came back.
        no_checkpoint: ``No checkpoint found during restore.`` lines.
        jobs_before: Jobs the JobManager ran before the crash.
        severity: The incident's severity now.
    """

    incident_start_ms: int
    last_crash_ms: int | None = None
    crash_times: list[int] = []
    stalled: bool = False
    job_id: str | None = None
    fatal_lines: int = 1
    line: str = ""
    resource_version: str | None = None
    jm_started_ms: int | None = None
    restored: dict[str, int] = {}
    lost: list[str] = []
    back_ms: int | None = None
    no_checkpoint: int = 0
    jobs_before: list[str] = []
    severity: Severity

    def latest(self) -> int:
        """When the JobManager crashed last: its recovery is measured from there."""
        return self.last_crash_ms or self.incident_start_ms

    def times(self) -> list[int]:
        """Its crash times (the first alone if none were kept)."""
        return list(self.crash_times or [self.incident_start_ms])


class JmPending(Record):
    """The pieces of a crash a shipper split, of one host, waiting for each other.

    Attributes:
        fatal_ms: When the fatal line without a cause came.
        watch_ms: When the lone ``too old resource version`` line came.
        line: The ``too old resource version`` line.
    """

    fatal_ms: int | None = None
    watch_ms: int | None = None
    line: str | None = None


class JmK8sWatchCrashState(DetectorState):
    """What :class:`JmK8sWatchCrash` keeps for the whole fleet (keys are hosts, ``""``: none).

    The state's own incident stays closed: each crash is an incident of its own.

    Attributes:
        v: 2: a crash is an :class:`Incident` (version 1 named its start ``start_ms``).
        crashes: The open crash of each JobManager.
        jobs: The jobs each JobManager runs: job id → when it last changed state.
        pending: Split crash pieces waiting for their other half.
        loops: Crash times of JobManagers whose incident closed (a loop counts them).
    """

    v: int = 2
    crashes: dict[str, JmCrash] = {}
    jobs: dict[str, dict[str, int]] = {}
    pending: dict[str, JmPending] = {}
    loops: dict[str, list[int]] = {}


class JmK8sWatchCrashEvidence(Evidence):
    """What a ``jm_k8s_watch_crash`` alert shows.

    Attributes:
        restored: ``checkpoint``, ``none`` (state lost) or ``unknown`` (not seen yet).
        restored_job_ids: Jobs restored from a checkpoint.
        lost_job_ids: Jobs that restarted without their state.
        checkpoints: The checkpoint each restored job came back from.
        jobs_before_crash: Jobs the JobManager ran before the crash.
        jm_restarted: The JobManager started again.
        jm_restart_s: Seconds from the (latest) crash to the restart.
        recovery_s: Seconds from the (latest) crash to the latest job back.
        no_checkpoint_lines: ``No checkpoint found during restore.`` lines.
        fatal_lines: Fatal lines of the crash.
        resource_version: The resource version the watch had.
        diagnostics: The ``too old resource version`` line.
        crashes: Crashes of the incident within ``loop_window_s``.
        crash_times_ms: Their times.
        job_ids: The jobs restored or lost (link field).
    """

    restored: Literal["checkpoint", "none", "unknown"]
    restored_job_ids: list[str]
    lost_job_ids: list[str]
    checkpoints: dict[str, int]
    jobs_before_crash: list[str]
    jm_restarted: bool
    jm_restart_s: float | None
    recovery_s: float | None
    no_checkpoint_lines: int
    fatal_lines: int
    resource_version: str | None
    diagnostics: str
    crashes: int
    crash_times_ms: list[int]


def _headline(story: Story) -> str:
    """The crash, and how far the jobs' recovery got."""
    after = {
        "checkpoint": "jobs came back from their latest checkpoint",
        "none": "jobs restarted WITHOUT state (no HA)",
    }.get(str(story.root.evidence.get("restored")), "recovery not seen yet")
    return f"JobManager crashed on a Kubernetes watch error (too old resource version); {after}"


class JmK8sWatchCrash(Detector[JmK8sWatchCrashParams, JmK8sWatchCrashState]):
    """Fire when a JobManager crashes on a Kubernetes watch error; escalate if state is lost."""

    name = "jm_k8s_watch_crash"
    profile = Profile(
        runbook=(
            "The JobManager exited on a Kubernetes pod-watch error (too old resource version; "
            "Flink 1.10.2-1.12.1, fixed in 1.12.2 by FLINK-20417). Check that the jobs are RUNNING "
            "again; restored: none means they restarted without state: restore them from the last "
            "retained checkpoint or savepoint, enable HA and upgrade Flink."
        ),
        causal_rank=0,
        headline=_headline,
    )
    signals = {
        "jm_crashes_open": "JobManager crash incidents still open (recovery not finished).",
    }
    scope = "cluster"
    kinds = frozenset(
        {
            "fatal_error",
            "k8s_watch_gone",
            "jm_started",
            "job_restored",
            "no_checkpoint_found",
            "job_state",
        }
    )

    @classmethod
    def migrate(cls, old: dict[str, Any], from_version: int) -> dict[str, Any]:
        """Version 1: each open crash as an incident (its start named ``start_ms``)."""
        crashes = {
            src: {k: v for k, v in crash.items() if k != "start_ms"}
            | {"firing": True, "incident_start_ms": crash["start_ms"]}
            for src, crash in old.get("crashes", {}).items()
        }
        return old | {"crashes": crashes}

    def signal_values(self, state: JmK8sWatchCrashState) -> dict[str, float]:  # noqa: D102
        return {"jm_crashes_open": float(len(state.crashes))}

    def on_event(self, state: JmK8sWatchCrashState, event: Event) -> list[Alert]:
        """Detect the crash, follow the restart and the jobs' recovery."""
        t = event.time_ms
        alerts: list[Alert] = []
        src = event.host or ""
        kind = event.kind
        if kind in ("fatal_error", "k8s_watch_gone"):
            alerts.extend(self._on_fatal_or_watch(state, event, src))
        elif kind == "jm_started":
            crash = self._crash_for(state, src, lambda c: c.jm_started_ms is None)
            if crash is not None:
                crash.jm_started_ms = t
        elif kind == "job_restored" and event.job_id:
            crash = self._crash_for(state, src, lambda c: True)
            if crash is not None and event.checkpoint_id is not None:
                crash.restored[event.job_id] = event.checkpoint_id
        elif kind == "no_checkpoint_found":
            crash = self._crash_for(state, src, lambda c: True)
            if crash is not None:
                crash.no_checkpoint += 1
        elif kind == "job_state" and event.job_id and event.to_state:
            alerts.extend(self._on_job_state(state, event, src))
        return alerts

    def on_timer(self, state: JmK8sWatchCrashState, now_ms: int) -> list[Alert]:
        """Escalate a JobManager that did not bring its jobs back; resolve recovered ones."""
        return self._due(state, now_ms)

    def next_deadline(self, state: JmK8sWatchCrashState) -> int | None:
        """A recovered crash resolving, or one whose jobs are not back escalating."""
        due: list[int] = []
        for crash in state.crashes.values():
            if crash.back_ms is not None:
                due.append(crash.back_ms + int(self.params.clear_for_s * 1000))
            elif crash.severity is not Severity.CRITICAL:
                due.append(crash.latest() + int(self.params.restart_timeout_s * 1000))
        return min(due, default=None)

    def on_close(self, state: JmK8sWatchCrashState, now_ms: int) -> list[Alert]:
        """The fleet went quiet: every open crash closes."""
        return [
            self._close(state, src, now_ms, self.profile.idle_words) for src in list(state.crashes)
        ]

    def give_up(self, state: JmK8sWatchCrashState, time_ms: int, why: str) -> list[Alert]:
        """Every open crash resolves, each naming its JobManager: they are the incidents."""
        words = given_up_words(self.name, why)
        return [
            self.resolve(
                state,
                time_ms,
                words,
                {"reason": why},
                crash.severity,
                incident=crash,
                labels=self._labels(crash, src),
            )
            for src, crash in sorted(state.crashes.items(), key=lambda c: c[1].incident_start_ms)
        ]

    def standing(self, state: JmK8sWatchCrashState | None) -> str:
        """Each open crash and how far its recovery got; else the JobManagers watched."""
        if state is None:
            return "no JobManager fatal error, start or job state line seen"
        now = state.last_event_ms
        if not state.crashes:
            jobs = sum(len(j) for j in state.jobs.values())
            jms = words.plural(len(state.jobs), "JobManager")
            parts = [f"no JobManager crash open; {words.plural(jobs, 'job')} on {jms} watched"]
            for src, pending in sorted(state.pending.items())[:1]:
                half = "fatal line" if pending.fatal_ms is not None else "watch error"
                parts.append(f"a lone {half} on {src or 'a JobManager'} waits for its other half")
            for src in sorted(state.loops)[:1]:
                n = len(self._recent(state, src, now))
                if n:
                    loop = f"{self.params.loop_crashes} make a loop"
                    recent = words.plural(n, "recent crash", "recent crashes")
                    parts.append(f"{src or 'a JobManager'}: {recent} ({loop})")
            return words.clause(*parts)
        # The first crash told in full, the others by their JobManager: one line.
        crashes = sorted(state.crashes.items(), key=lambda c: c[1].incident_start_ms)
        src, crash = crashes[0]
        others = [words.cut(s or "a JobManager", 30) for s, _ in crashes[1:3]]
        more = (
            f"{words.plural(len(crashes) - 1, 'more crash', 'more crashes')} open "
            f"({', '.join(others)}{', ...' if len(crashes) > 3 else ''})"
            if others
            else None
        )
        return words.clause(self._crash_standing(src, crash, now), more)

    def _crash_standing(self, src: str, crash: JmCrash, now: int) -> str:
        p, latest = self.params, crash.latest()
        since = words.firing_since(crash.incident_start_ms, now)
        where = f" on {words.cut(src, 40)}" if src else ""
        # A crash loop: the latest crash, from which its recovery counts.
        again = f" (again at {words.at(latest)})" if latest != crash.incident_start_ms else ""
        head = f"{since}: JobManager{where} crashed{again}"
        if crash.jm_started_ms is None:
            after = "not restarted yet"
        else:
            after = f"restarted after {words.span_ms(crash.jm_started_ms - latest)}"
        back = (
            f"{words.plural(len(crash.restored), 'job')} restored, {len(crash.lost)} without state"
        )
        if crash.back_ms is not None:
            due = f"resolves at {words.at(crash.back_ms + int(p.clear_for_s * 1000))}"
        elif crash.severity is not Severity.CRITICAL:
            critical = words.at(latest + int(p.restart_timeout_s * 1000))
            due = f"critical at {critical} if no job is back"
        else:
            due = "critical: no job back"
        return f"{head}, {after}, {back}, {due}"

    # Crash --------------------------------------------------------------------------------

    def _on_fatal_or_watch(self, st: JmK8sWatchCrashState, event: Event, src: str) -> list[Alert]:
        text = f"{event.message or ''}\n{event.reason or ''}"
        too_old = _TOO_OLD in text
        jm_fatal = event.kind == "fatal_error" and _JM_FATAL.search(event.message or "")
        if not too_old and not jm_fatal:
            # Another fatal error, or 1.12.2+ re-creating the watch: not this incident.
            return []
        t = event.time_ms
        pair_ms = self.params.pair_s * 1000
        for other_src in [s for s in st.pending if s != src]:
            seen = st.pending[other_src]
            last = max(v for v in (seen.fatal_ms, seen.watch_ms, 0) if v is not None)
            if t - last > pair_ms:
                del st.pending[other_src]
        pending = st.pending.setdefault(src, JmPending())
        if too_old:
            pending.line = _too_old_line(text)
        if jm_fatal and too_old:
            return self._crash(st, src, t, pending.line or "")
        if jm_fatal:
            pending.fatal_ms = t
            other = pending.watch_ms
        else:
            pending.watch_ms = t
            other = pending.fatal_ms
        if other is not None and abs(t - other) <= pair_ms:
            return self._crash(st, src, min(t, other), pending.line or "")
        return []

    def _crash(self, st: JmK8sWatchCrashState, src: str, t: int, line: str) -> list[Alert]:
        st.pending.pop(src, None)
        alerts: list[Alert] = []
        crash = st.crashes.get(src)
        if crash is not None:
            if crash.jm_started_ms is None:
                # The entrypoint's fatal line after the ResourceManager's: the same crash.
                crash.fatal_lines += 1
                return []
            return self._again(st, src, crash, t, line)
        if len(st.crashes) >= self.params.max_jobmanagers:
            oldest = min(st.crashes, key=lambda s: st.crashes[s].incident_start_ms)
            alerts.append(self._close(st, oldest, t, "too many JobManagers tracked"))
        # The crashed process's jobs are gone with it; those that come back register again.
        before = sorted(st.jobs.pop(src, {}))
        versions = _VERSIONS.search(line)
        # Crashes of this JobManager in an incident that closed lately still count.
        times = [*self._recent(st, src, t), t]
        looping = len(times) >= self.params.loop_crashes
        crash = JmCrash(
            incident_start_ms=t,
            line=line[:_MAX_LINE_CHARS],
            resource_version=versions.group(1) if versions else None,
            jobs_before=before[: self.params.max_jobs],
            severity=Severity.CRITICAL if looping else self.params.severity,
            crash_times=times,
        )
        st.crashes[src] = crash
        where = f" on {src}" if src else ""
        summary = (
            f"JobManager{where} crashed: Kubernetes pod watch failed with 'too old resource "
            "version' (fatal before Flink 1.12.2)"
            + (f"; {self._loop_text(times)}" if looping else "")
        )
        evidence = self._evidence(crash)
        who = self._labels(crash, src)
        alerts.append(
            self.fire(st, t, summary, evidence, crash.severity, incident=crash, labels=who)
        )
        return alerts

    def _again(
        self, st: JmK8sWatchCrashState, src: str, crash: JmCrash, t: int, line: str
    ) -> list[Alert]:
        """The JobManager crashed again before its incident closed: the same incident."""
        window_ms = self.params.loop_window_s * 1000
        times = [x for x in [*crash.times(), t] if t - x <= window_ms]
        before = sorted(st.jobs.pop(src, {}))
        crash.crash_times = times[-_MAX_CRASH_TIMES:]
        crash.last_crash_ms = t
        crash.jm_started_ms = None
        crash.back_ms = None
        crash.stalled = False
        crash.restored = {}
        crash.fatal_lines += 1
        crash.line = line[:_MAX_LINE_CHARS] or crash.line
        if before:
            crash.jobs_before = before[: self.params.max_jobs]
        if len(times) < self.params.loop_crashes:
            return []
        return self._escalate(st, src, t, self._loop_text(times))

    def _loop_text(self, times: list[int]) -> str:
        minutes = (times[-1] - times[0]) / 60_000
        return f"it crashed {len(times)} times in {minutes:.0f} min (a crash loop)"

    def _recent(self, st: JmK8sWatchCrashState, src: str, t: int) -> list[int]:
        window_ms = self.params.loop_window_s * 1000
        return [x for x in st.loops.get(src, []) if t - x <= window_ms]

    @staticmethod
    def _crash_for(
        st: JmK8sWatchCrashState, src: str, wanted: Callable[[JmCrash], bool]
    ) -> JmCrash | None:
        """The open crash an event about a restart belongs to (its host's, else the only one)."""
        crash = st.crashes.get(src)
        if crash is not None and wanted(crash):
            return crash
        candidates = [c for c in st.crashes.values() if wanted(c)]
        return candidates[0] if len(candidates) == 1 else None

    # Jobs ---------------------------------------------------------------------------------

    def _on_job_state(self, st: JmK8sWatchCrashState, event: Event, src: str) -> list[Alert]:
        job, to, t = str(event.job_id), str(event.to_state), event.time_ms
        jobs = st.jobs.setdefault(src, {})
        if to in _TERMINAL:
            jobs.pop(job, None)
        else:
            jobs[job] = t
            if len(jobs) > self.params.max_jobs:
                del jobs[min(jobs, key=lambda j: jobs[j])]
        if len(st.jobs) > self.params.max_jobmanagers:
            stale = min(
                (s for s in st.jobs if s != src),
                key=lambda s: max(st.jobs[s].values(), default=0),
            )
            del st.jobs[stale]
        # Only a job the new JobManager starts counts as back: RESTARTING -> RUNNING is a
        # failover inside some JobManager (on 1.10+ logged before its restore line), and
        # would read as "restarted without state" for whichever crash is open.
        if to != "RUNNING" or (event.from_state or "CREATED") not in ("CREATED", "INITIALIZING"):
            return []
        crash = self._crash_for(st, src, lambda c: c.latest() <= t)
        if crash is None or t - crash.latest() > self.params.recovery_window_s * 1000:
            return []
        if job in crash.lost:
            return []
        crash.back_ms = t
        if job in crash.restored:
            return []
        # Back in RUNNING with no restore line before it: it started from nothing.
        if len(crash.lost) < self.params.max_jobs:
            crash.lost.append(job)
        lost = ", ".join(crash.lost)
        return self._escalate(
            st, self._src_of(st, crash), t, f"job {lost} restarted WITHOUT its state (no HA)"
        )

    # Transitions --------------------------------------------------------------------------

    def _escalate(self, st: JmK8sWatchCrashState, src: str, t: int, why: str) -> list[Alert]:
        crash = st.crashes[src]
        if crash.severity is Severity.CRITICAL:
            return []
        crash.severity = Severity.CRITICAL
        summary = f"JobManager crash (too old resource version): {why}"
        evidence, who = self._evidence(crash), self._labels(crash, src)
        return [self.escalate(st, t, summary, evidence, crash.severity, incident=crash, labels=who)]

    def _due(self, st: JmK8sWatchCrashState, now_ms: int) -> list[Alert]:
        """Escalations and resolves that came due by ``now_ms``, at the time each came due."""
        alerts: list[Alert] = []
        for src in sorted(st.crashes, key=lambda s: st.crashes[s].incident_start_ms):
            crash = st.crashes[src]
            if crash.back_ms is None:
                deadline = crash.latest() + int(self.params.restart_timeout_s * 1000)
                if now_ms >= deadline and crash.severity is not Severity.CRITICAL:
                    after = f"{self.params.restart_timeout_s:.0f} s after the crash"
                    why = (
                        f"no job RUNNING again {after}"
                        if crash.jm_started_ms is not None
                        else f"the JobManager has not restarted {after}"
                    )
                    crash.stalled = True
                    alerts.extend(self._escalate(st, src, deadline, why))
                continue
            resolve_at = crash.back_ms + int(self.params.clear_for_s * 1000)
            if now_ms >= resolve_at:
                alerts.append(self._close(st, src, resolve_at, "jobs are RUNNING again"))
        return alerts

    def _close(self, st: JmK8sWatchCrashState, src: str, t: int, why: str) -> Alert:
        crash = st.crashes.pop(src)
        # Remembered for loop_window_s: the next crash of this JobManager may be one more.
        loops = st.loops
        loops[src] = crash.times()[-_MAX_CRASH_TIMES:]
        while len(loops) > self.params.max_jobmanagers:
            del loops[min(loops, key=lambda s: max(loops[s], default=0))]
        summary = f"JobManager crash (too old resource version): {why}"
        evidence, who = self._evidence(crash), self._labels(crash, src)
        return self.resolve(st, t, summary, evidence, crash.severity, incident=crash, labels=who)

    # Output -------------------------------------------------------------------------------

    @staticmethod
    def _src_of(st: JmK8sWatchCrashState, crash: JmCrash) -> str:
        return next(s for s, c in st.crashes.items() if c is crash)

    @staticmethod
    def _labels(c: JmCrash, src: str) -> dict[str, str | None]:
        """Whom a crash's alert names: its JobManager's host and job, not the fleet's state."""
        if c.job_id is None:
            # The job is named once known: the only one it ran, else the first one back.
            jobs = list(c.jobs_before) if len(c.jobs_before) == 1 else []
            c.job_id = next(iter(jobs + sorted(c.restored) + list(c.lost)), None)
        return {"job_id": c.job_id, "job_name": None, "tm_id": None, "host": src or None}

    @staticmethod
    def _evidence(crash: JmCrash) -> JmK8sWatchCrashEvidence:
        """What one crash's alert shows: how far its recovery got."""
        restored_ids = sorted(crash.restored)
        lost = list(crash.lost)
        restored: Literal["checkpoint", "none", "unknown"]
        if lost:
            restored = "none"
        elif restored_ids:
            restored = "checkpoint"
        elif crash.stalled and crash.jm_started_ms is not None:
            restored = "none"
            lost = list(crash.jobs_before)
        else:
            restored = "unknown"
        started, back, latest = crash.jm_started_ms, crash.back_ms, crash.latest()
        return JmK8sWatchCrashEvidence(
            restored=restored,
            job_ids=tuple(sorted(set(restored_ids) | set(lost))),
            restored_job_ids=restored_ids,
            lost_job_ids=lost,
            checkpoints=dict(sorted(crash.restored.items())),
            jobs_before_crash=list(crash.jobs_before),
            jm_restarted=started is not None,
            jm_restart_s=round((started - latest) / 1000, 3) if started is not None else None,
            recovery_s=round((back - latest) / 1000, 3) if back is not None else None,
            no_checkpoint_lines=crash.no_checkpoint,
            fatal_lines=crash.fatal_lines,
            resource_version=crash.resource_version,
            diagnostics=crash.line,
            crashes=len(crash.times()),
            crash_times_ms=crash.times(),
        )


def _too_old_line(text: str) -> str:
    for line in text.split("\n"):
        if _TOO_OLD in line:
            return line.strip()
    return ""
