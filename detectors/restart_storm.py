"""``restart_storm``: a job keeps restarting or failing over, or takes too long to recover.

Restarts are read from the job's state transitions (``Job NAME (J) switched from state
RUNNING to RESTARTING.``, legacy ``… FAILING`` then ``… RESTARTING``) and JobManager
failovers from leadership loss (``JobManager for job J … lost leadership.`` on the
TaskManagers, ``… was revoked leadership …`` on the JobManager) or from a job that was
RUNNING starting again from ``CREATED``/``INITIALIZING`` with no terminal state between
(a JobManager that came back without telling us it left). The alert fires when

- ``min_restarts`` restarts and failovers fall within ``window_s``, or
- the job stays out of RUNNING for longer than ``max_recovery_s`` after a failure or
  failover (seed 004: a lost NodeManager or TaskManager leaves the job broken until
  YARN's or Flink's timeouts expire).

A planned stop is not a restart: ``CANCELLING``/``CANCELED`` and ``FINISHED`` (stop with a
savepoint) end the run, and the next ``CREATED → RUNNING`` of the same
job id is a new run, not a failover. One restart that recovers quickly never fires.

The causes are read from the stack trace that follows the transition line (kept in the
record's message when the shipper keeps a record's lines together): a TaskManager's
heartbeat timeout or unreachability (its id goes to ``tm_ids``), an RPC ask timeout, a
registration timeout, lost leadership, an OutOfMemoryError, the checkpoint failure
threshold, or else the exception class.

The alert resolves once the job has been RUNNING for ``clear_for_s`` with no restart; a
stop (CANCELED, FINISHED) resolves it at once. A job that ends FAILED while the alert
fires escalates it to critical (its restarts are exhausted).

Region failovers that restart only part of a job do not change the job's state and name
no job id in their log lines, so they are not counted.

State per job (bounded, :class:`RestartStormState`): at most ``max_tracked`` restarts in
the window (time, cause and up to two TaskManager ids each), the current and longest
not-RUNNING episode, at most ``max_tm_ids`` TaskManager ids and 5 restored checkpoint
ids: about 1 KB typical, under 8 KB with the default caps.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Literal, NamedTuple

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
from detectors.story import job, num

#: States that end a run on purpose or for good.
# SUSPENDED is not here: Flink suspends a job when its JobMaster loses leadership, and the
# time until the new leader runs it again is exactly the outage to count.
_TERMINAL = frozenset({"FINISHED", "CANCELED", "FAILED"})
#: States a new run (or a JobManager that came back) starts from.
_FRESH = frozenset({"CREATED", "INITIALIZING"})
#: A leadership loss this shortly before the job ends was the end, not a failover.
_RETRACT_MS = 30_000
#: A FAILING transition's cause is used for the RESTARTING that follows within this long.
_PAIR_MS = 60_000
_RESTORE_AFTER_RUNNING_MS = 5_000  # a restore this soon after RUNNING is that run's own
_EVIDENCE_CAP = 60  # restarts the evidence's timeline lists at most (the newest)
#: (cause, pattern) in priority order; the first that matches the failure text wins.
_CAUSES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "tm_heartbeat_timeout",
        re.compile(r"[Hh]eartbeat of TaskManager with id ([^\s(]+?)(?:\([^)]*\))?\s+timed out"),
    ),
    ("tm_unreachable", re.compile(r"TaskManager with id ([^\s(]+?)(?:\([^)]*\))? is no longer")),
    ("container_memory_kill", re.compile(r"beyond (?:the )?'?(?:physical|PHYSICAL)|OOMKilled")),
    ("jvm_oom", re.compile(r"OutOfMemoryError")),
    ("registration_timeout", re.compile(r"RegistrationTimeoutException")),
    (
        "rpc_timeout",
        re.compile(r"AskTimeoutException|Ask timed out on|TimeoutException: Invocation of"),
    ),
    (
        "lost_leadership",
        re.compile(r"lost leadership|revoked leadership|is no longer the leader"),
    ),
    ("checkpoint_failure_threshold", re.compile(r"Exceeded checkpoint tolerable failure")),
    ("no_resource", re.compile(r"NoResourceAvailableException")),
)
_EXCEPTION = re.compile(r"(?m)^(?:Caused by: )?(?:[\w$]+\.)*([\w$]*(?:Exception|Error))\b")


class RestartStormParams(DetectorParams):
    """Thresholds of :class:`RestartStorm`."""

    min_restarts: int = Field(default=3, ge=2)
    """Restarts and failovers within window_s that make an incident."""
    window_s: float = Field(default=1800, gt=0)
    """Restarts older than this (seconds) no longer count."""
    max_recovery_s: float = Field(default=300, gt=0)
    """A job out of RUNNING longer than this (seconds) after a failure or failover fires, however
    few restarts it had."""
    clear_for_s: float = Field(default=600, ge=0)
    """Resolve once the job has been RUNNING this long (event-time seconds) with no restart."""
    failover_dedupe_s: float = Field(default=120, ge=0)
    """Leadership-loss lines of one job this close together (seconds) are one failover (every
    TaskManager logs its own)."""
    max_tracked: int = Field(default=50, ge=2)
    """Restarts kept per job at most."""
    max_tm_ids: int = Field(default=10, ge=1)
    """TaskManager ids named in failure causes kept per job."""


class Restart(Record):
    """One restart or failover of the job.

    Attributes:
        t: When it happened.
        cause: What caused it (see :func:`_classify`).
        tms: Up to two TaskManagers its cause names.
        failover: A JobManager failover (lost leadership, a comeback), not a restart.
        seen: The job came back already: certain, it needs no confirmation.
    """

    t: int
    cause: str
    tms: list[str]
    failover: bool
    seen: bool = False


class PendingFailure(Record):
    """A legacy ``FAILING`` transition whose cause the ``RESTARTING`` after it takes."""

    t: int
    cause: str
    tms: list[str]


class RestartStormState(DetectorState):
    """What :class:`RestartStorm` keeps per job.

    Attributes:
        status: The job's latest state.
        down_since: Since when it is out of RUNNING after a failure or failover.
        down_cause: ``failure`` or ``failover``, while down.
        running_since: Since when it is RUNNING.
        last_down_ms: How long the last not-RUNNING episode lasted.
        longest_down_ms: The longest episode of the incident.
        restarts: Restarts and failovers in the window, the newest ``max_tracked``.
        last_restart_ms: Time of the latest restart.
        failover_ms: Time of the latest failover (leadership-loss lines are merged).
        pending_failure: A ``FAILING`` transition waiting for its ``RESTARTING``.
        tm_ids: TaskManagers named in the causes, the newest ``max_tm_ids``.
        restored: The newest 5 checkpoint ids the job was restored from.
        severity: The open incident's severity.
        fired_for: Why the open incident fired: ``restarts`` or ``slow_recovery``.
        evaluated_ms: Up to when the restart count was judged (confirmations after it).
    """

    status: str | None = None
    down_since: int | None = None
    down_cause: Literal["failure", "failover"] | None = None
    running_since: int | None = None
    last_down_ms: int | None = None
    longest_down_ms: int = 0
    restarts: list[Restart] = []
    last_restart_ms: int | None = None
    failover_ms: int | None = None
    pending_failure: PendingFailure | None = None
    tm_ids: list[str] = []
    restored: list[int] = []
    severity: Severity | None = None
    fired_for: Literal["restarts", "slow_recovery"] | None = None
    evaluated_ms: int | None = None


class RestartMark(NamedTuple):
    """One restart of the window, for a chart: ``[time_ms, cause, failover]``."""

    time_ms: int
    cause: str
    failover: bool


class RestartStormEvidence(Evidence):
    """What a ``restart_storm`` alert shows (``tm_ids``: the TaskManagers its causes name).

    Attributes:
        restarts: Restarts and failovers within the window.
        failovers: How many of them were failovers.
        not_running_s: The current not-RUNNING episode, or else the last one (s).
        longest_not_running_s: The incident's longest episode (s).
        causes: Restarts per cause, most first.
        status: The job's latest state.
        fired_for: Why the incident fired: ``restarts`` or ``slow_recovery``.
        restored_checkpoints: The checkpoints the job was restored from, the newest 5.
        window_s: The ``window_s`` parameter.
        timeline: The restarts and failovers of ``restarts``, the newest 60, oldest first.
    """

    restarts: int
    failovers: int
    not_running_s: float
    longest_not_running_s: float
    causes: dict[str, int]
    status: str | None
    fired_for: str | None
    restored_checkpoints: list[int]
    window_s: float
    timeline: list[RestartMark] = []


def _aftermath(member: Member) -> str | None:
    """``job X restarting (3 restarts)``, after the cause's line."""
    n = num(member.evidence.get("restarts"))
    return f"{job(member)} restarting" + (f" ({n} restarts)" if n else "")


class RestartStorm(Detector[RestartStormParams, RestartStormState]):
    """Fire on repeated restarts/failovers of a job, or on a recovery that takes too long."""

    name = "restart_storm"
    profile = Profile(
        runbook=(
            "The job keeps restarting or cannot get back to RUNNING. Read the counted causes: a "
            "TaskManager named in tm_ids died (see tm_lost for why); rpc/registration timeouts or "
            "lost leadership point at the JobManager, ZooKeeper or the network; an exception class "
            "points at the job's code or data. Until it is fixed the job makes no progress."
        ),
        idle_words="no events from this job any more",
        causal_rank=5,
        aftermath=_aftermath,
    )
    signals = {
        "job_restarts": "Restarts and failovers of the job within window_s.",
        "job_not_running_seconds": "How long the job has been out of RUNNING (0 when RUNNING).",
    }
    scope = "job"
    kinds = frozenset({"job_state", "leadership_lost", "job_restored"})

    def signal_values(self, state: RestartStormState) -> dict[str, float]:  # noqa: D102
        down = state.down_since
        return {
            "job_restarts": float(len(state.restarts)),
            "job_not_running_seconds": (
                max(0.0, (state.last_event_ms - down) / 1000) if down else 0.0
            ),
        }

    def on_event(self, state: RestartStormState, event: Event) -> list[Alert]:
        """Count restarts and failovers, track the not-RUNNING episode, fire and resolve."""
        t = event.time_ms
        alerts: list[Alert] = []
        self._prune(state, t)
        if event.kind == "job_state" and event.to_state:
            alerts.extend(self._on_transition(state, event))
        elif event.kind == "leadership_lost":
            if state.status not in _TERMINAL | {"CANCELLING"}:
                # TaskManagers also log it when a job ends: only a running job fails over.
                self._on_failover(state, t, "lost_leadership", [])
        elif event.kind == "job_restored" and event.checkpoint_id is not None:
            since = state.running_since
            if (
                state.status == "RUNNING"
                and state.down_since is None
                and (since is None or t - since > _RESTORE_AFTER_RUNNING_MS)
            ):
                # Restored while we saw it RUNNING for a while: a new JobManager took it
                # over (a crashed one restarted by Kubernetes or YARN). A failover inside
                # one JobManager logs RESTARTING -> RUNNING just before its restore line
                # (1.10+), so a restore right after RUNNING is that failover's.
                self._on_failover(state, t, "jobmanager_restart", [], seen=True)
            state.restored = [*state.restored, event.checkpoint_id][-5:]
        fired = self._evaluate(state, t)
        if fired is not None:
            alerts.append(fired)
        return alerts

    def on_timer(self, state: RestartStormState, now_ms: int) -> list[Alert]:
        """Confirm failovers, fire a recovery that is taking too long, resolve."""
        alerts = self._due(state, now_ms)
        self._prune(state, now_ms)
        return alerts

    def standing(self, state: RestartStormState | None) -> str:
        """Restarts in the window against ``min_restarts``, the job's state; what resolves it."""
        if state is None:
            return "no state change, failover or restore of this job seen"
        p, now = self.params, state.last_event_ms
        n = self._confirmed(state, now)
        # Firing, the limit is behind it.
        count = words.plural(n, "restart") if state.firing else f"{n} of {p.min_restarts} restarts"
        held = f"{count} within {words.span(p.window_s)}"
        counted = Counter(r.cause for r in state.restarts).most_common(1)
        if counted:
            held += f" (mostly {counted[0][0].replace('_', ' ')})"
        down, up = state.down_since, state.running_since
        where: str | None
        if down is not None:
            # Down after a failure or failover; a JobManager that took the job over may
            # still show it RUNNING (its restore line came): down all the same.
            where = f"job down since {words.at(down)} ({state.down_cause or 'failure'}"
            where += f", {state.status})" if state.status else ")"
            if not state.firing:
                due = down + int(p.max_recovery_s * 1000)
                where += f": pages at {words.at(due)} unless back by then"
        elif state.status == "RUNNING" and up is not None:
            where = f"job RUNNING since {words.at(up)}"
        else:
            where = f"job {state.status}" if state.status else None
        if not state.firing:
            # Down, the recovery's deadline is what matters; up, when the count goes down.
            ages = (
                f"the oldest counts until {words.at(state.restarts[0].t + int(p.window_s * 1000))}"
                if state.restarts and down is None
                else None
            )
            return words.clause(held, where, ages)
        due_r = self._resolve_deadline(state)
        resolve = (
            f"resolves at {words.at(due_r)}"
            if due_r is not None
            else f"resolves after {words.span(p.clear_for_s)} back in RUNNING"
        )
        since = words.firing_since(state.incident_start_ms, now)
        if state.fired_for == "slow_recovery":
            since += ": recovery too slow"
        return words.clause(since, held, where, resolve)

    # Transitions ------------------------------------------------------------------------

    def _on_transition(self, st: RestartStormState, event: Event) -> list[Alert]:
        t, to, prev = event.time_ms, str(event.to_state), st.status
        st.status = to
        text = event.message or event.reason or ""
        alerts: list[Alert] = []
        if to == "FAILING":
            cause, tms = _classify(text)
            st.pending_failure = PendingFailure(t=t, cause=cause, tms=tms)
            self._go_down(st, t)
        elif to == "RESTARTING":
            cause, tms = _classify(text)
            pending = st.pending_failure
            if (cause == "unknown" or not text) and pending and t - pending.t <= _PAIR_MS:
                cause, tms = pending.cause, list(pending.tms)
            st.pending_failure = None
            self._add_restart(st, t, cause, tms)
            self._go_down(st, t)
        elif to == "RUNNING":
            if event.from_state in _FRESH and prev == "RUNNING" and st.down_since is None:
                # CREATED -> RUNNING of a job we saw RUNNING, with nothing in between: a
                # JobManager that crashed and came back (1.11 and older log no INITIALIZING).
                self._on_failover(st, t, "jobmanager_restart", [], seen=True)
            self._go_up(st, t)
        elif to == "SUSPENDED":
            # Its JobMaster lost leadership: down until a new leader runs it.
            self._on_failover(st, t, "suspended", [])
        elif to in _FRESH:
            if prev == "RUNNING" and st.down_since is None:
                # RUNNING again from scratch with no stop in between: its JobManager restarted.
                self._on_failover(st, t, "jobmanager_restart", [], seen=True)
        elif to in _TERMINAL:
            alerts.extend(self._on_end(st, t, to))
        return alerts

    def _on_failover(
        self, st: RestartStormState, t: int, cause: str, tms: list[str], *, seen: bool = False
    ) -> None:
        """A failover; ``seen``: the job is back already (a comeback), so it is certain.

        Leadership-loss lines come from every TaskManager and may precede a planned stop:
        they are merged within ``failover_dedupe_s`` and confirmed later. A comeback is a
        new JobManager running the job: each one counts, however soon after the last.
        """
        last = st.failover_ms
        dedupe = self.params.failover_dedupe_s * 1000
        if st.down_since is not None and st.down_cause == "failover":
            return  # already down for this failover; more TaskManagers reporting it
        if not seen and last is not None and t - last <= dedupe:
            return
        st.failover_ms = t
        self._add_restart(st, t, cause, tms, failover=True, seen=seen)
        self._go_down(st, t, failover=True)

    def _add_restart(
        self,
        st: RestartStormState,
        t: int,
        cause: str,
        tms: list[str],
        *,
        failover: bool = False,
        seen: bool = False,
    ) -> None:
        restart = Restart(t=t, cause=cause, tms=tms[:2], failover=failover, seen=seen)
        st.restarts = [*st.restarts, restart][-self.params.max_tracked :]
        for tm in tms:
            if tm not in st.tm_ids:
                st.tm_ids.append(tm)
        st.tm_ids = st.tm_ids[-self.params.max_tm_ids :]
        st.last_restart_ms = t

    @staticmethod
    def _go_down(st: RestartStormState, t: int, *, failover: bool = False) -> None:
        if st.down_since is None:
            st.down_since = t
            st.down_cause = "failover" if failover else "failure"

    @staticmethod
    def _go_up(st: RestartStormState, t: int) -> None:
        since = st.down_since
        if since is not None:
            st.last_down_ms = t - since
            st.longest_down_ms = max(st.longest_down_ms, t - since)
        st.down_since = None
        st.down_cause = None
        st.running_since = t

    def _on_end(self, st: RestartStormState, t: int, to: str) -> list[Alert]:
        failover = st.failover_ms
        if (
            st.down_cause == "failover"
            and failover is not None
            and t - failover <= _RETRACT_MS
            and st.restarts
            and st.restarts[-1].failover
        ):
            # The leadership loss was the job ending (TaskManagers log it too, and their
            # clocks may run ahead of the JobManager's): not a failover after all.
            st.restarts.pop()
            st.failover_ms = None
            st.down_since = None
            st.down_cause = None
        self._go_up(st, t)
        st.running_since = None
        st.pending_failure = None
        if not st.firing:
            if to != "FAILED":
                # A planned stop: the next run starts with a clean slate.
                st.restarts = []
                st.tm_ids = []
            return []
        if to == "FAILED":
            if st.severity == Severity.CRITICAL:
                return []
            st.severity = Severity.CRITICAL
            summary = f"job {self._job(st)} FAILED after {len(st.restarts)} restarts"
            return [self.escalate(st, t, summary, self.evidence(st, t), Severity.CRITICAL)]
        alert = self._close(st, t, f"job was stopped ({to})")
        st.restarts = []
        st.tm_ids = []
        return [alert]

    # Incident ---------------------------------------------------------------------------

    def _evaluate(self, st: RestartStormState, t: int) -> Alert | None:
        st.evaluated_ms = max(st.evaluated_ms or t, t)
        if st.firing:
            return None
        if self._confirmed(st, t) >= self.params.min_restarts:
            return self._fire(st, t, "restarts")
        return None

    @staticmethod
    def _confirmed(st: RestartStormState, t: int) -> int:
        """Restarts that count at ``t``: a leadership loss only once the job did not end."""
        return sum(1 for r in st.restarts if not r.failover or r.seen or r.t + _RETRACT_MS <= t)

    @staticmethod
    def _confirmations(st: RestartStormState) -> list[int]:
        """Times at which leadership losses not yet evaluated become failovers for sure."""
        done = st.evaluated_ms or 0
        return sorted(
            r.t + _RETRACT_MS
            for r in st.restarts
            if r.failover and not r.seen and r.t + _RETRACT_MS > done
        )

    def _fire(
        self, st: RestartStormState, t: int, why: Literal["restarts", "slow_recovery"]
    ) -> Alert:
        st.fired_for = why
        st.severity = self.params.severity
        job = self._job(st)
        if why == "restarts":
            summary = (
                f"job {job} restarted {len(st.restarts)} times within "
                f"{self.params.window_s / 60:.0f} min"
            )
        else:
            down = (t - (st.down_since or t)) / 1000
            what = "failover" if st.down_cause == "failover" else "failure"
            summary = f"job {job} not RUNNING for {down:.0f} s after a {what}"
        counted = Counter(r.cause for r in st.restarts).most_common(1)
        if counted:
            summary += f" (mostly {counted[0][0].replace('_', ' ')})"
        return self.fire(st, t, summary, self.evidence(st, t))

    def _due(self, st: RestartStormState, now_ms: int) -> list[Alert]:
        """Transitions that came due by ``now_ms``, each at the time it came due."""
        alerts: list[Alert] = []
        for confirm_at in self._confirmations(st):
            if confirm_at > now_ms:
                break
            fired = self._evaluate(st, confirm_at)
            if fired is not None:
                alerts.append(fired)
        down = st.down_since
        if not st.firing and down is not None:
            deadline = down + int(self.params.max_recovery_s * 1000)
            if now_ms >= deadline:
                alerts.append(self._fire(st, deadline, "slow_recovery"))
        deadline_r = self._resolve_deadline(st)
        if deadline_r is not None and now_ms >= deadline_r:
            minutes = self.params.clear_for_s / 60
            alerts.append(
                self._close(st, deadline_r, f"RUNNING for {minutes:.0f} min without a restart")
            )
        return alerts

    def _resolve_deadline(self, st: RestartStormState) -> int | None:
        if not st.firing or st.down_since is not None or st.running_since is None:
            return None
        start = max(st.running_since, st.last_restart_ms or 0)
        return start + int(self.params.clear_for_s * 1000)

    def on_close(self, state: RestartStormState, now_ms: int) -> list[Alert]:
        """A job gone quiet resolves as any other: :meth:`_close`, saying ``idle_words``."""
        return [self._close(state, now_ms, self.profile.idle_words)] if state.firing else []

    def _close(self, state: RestartStormState, time_ms: int, why: str) -> Alert:
        """The resolve, at the severity the incident reached; the storm's facts reset."""
        severity = state.severity or self.params.severity
        summary = f"job {self._job(state)}: {why}"
        alert = self.resolve(state, time_ms, summary, self.evidence(state, time_ms), severity)
        state.severity = None
        state.fired_for = None
        state.longest_down_ms = 0
        return alert

    def _prune(self, st: RestartStormState, now_ms: int) -> None:
        horizon = now_ms - self.params.window_s * 1000
        st.restarts = [r for r in st.restarts if r.t >= horizon]

    def next_deadline(self, state: RestartStormState) -> int | None:
        """The next deadline: a failover confirmed, a recovery too slow, or the resolve."""
        timers: list[int] = []
        if not state.firing:
            if state.down_since is not None:
                timers.append(state.down_since + int(self.params.max_recovery_s * 1000))
            timers.extend(self._confirmations(state)[:1])
        deadline = self._resolve_deadline(state)
        if deadline is not None:
            timers.append(deadline)
        return min(timers, default=None)

    # Output -----------------------------------------------------------------------------

    @staticmethod
    def _job(st: RestartStormState) -> str:
        return str(st.job_name or st.job_id)

    def evidence(self, state: RestartStormState, t: int | None = None) -> RestartStormEvidence:
        """The restarts in the window and the not-RUNNING episodes, as of ``t``.

        ``t`` defaults to the job's latest event.
        """
        t = state.last_event_ms if t is None else t
        down = state.down_since
        current = (t - down) / 1000 if down is not None else None
        longest = max(state.longest_down_ms / 1000, current or 0.0)
        return RestartStormEvidence(
            restarts=len(state.restarts),
            failovers=sum(1 for r in state.restarts if r.failover),
            not_running_s=round(
                current if current is not None else (state.last_down_ms or 0) / 1000, 3
            ),
            longest_not_running_s=round(longest, 3),
            causes=dict(Counter(r.cause for r in state.restarts).most_common()),
            tm_ids=tuple(state.tm_ids),
            status=state.status,
            fired_for=state.fired_for,
            restored_checkpoints=list(state.restored),
            window_s=self.params.window_s,
            timeline=[
                RestartMark(r.t, r.cause, r.failover) for r in state.restarts[-_EVIDENCE_CAP:]
            ],
        )


def _classify(text: str) -> tuple[str, list[str]]:
    """The cause of a failure from the stack trace after a transition, and the TMs it names."""
    if not text:
        return "unknown", []
    for cause, pattern in _CAUSES:
        if pattern.search(text) is None:
            continue
        # The TaskManager patterns capture its id; every one the trace names is kept.
        tms = sorted({m.group(1) for m in pattern.finditer(text)}) if pattern.groups else []
        return cause, tms
    exc = _EXCEPTION.search(text)
    return (exc.group(1) if exc else "unknown"), []
