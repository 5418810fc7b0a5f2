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

State per TaskManager (bounded, :class:`TmLostState`): the open incident, the last kill
and OOM seen (one each, lines cut to ``_MAX_LINE_CHARS``), the release time and at most
``max_job_ids`` job ids; under 2 KB serialised. A timeout waiting for its cause keeps the
state: ``grace_s`` must be shorter than ``idle_ttl_s``.
"""

from __future__ import annotations

import re
from typing import Any, Literal, Self

from pydantic import Field, model_validator

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
from detectors.model import Alert, Event
from detectors.story import process_headline

#: Why a TaskManager was lost (the alert's ``cause``).
Cause = Literal["memory_kill", "oom_killed", "jvm_oom", "unknown"]
_KILL_CAUSES = ("memory_kill", "oom_killed")
#: Causes that mean the process ran out of memory, as a headline says them.
_MEMORY_CAUSES = {"memory_kill": "killed for memory", "oom_killed": "OOMKilled", "jvm_oom": "OOM"}

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
_CAUSE_TEXT: dict[Cause, str] = {
    "memory_kill": "killed by YARN for exceeding its memory limit",
    "oom_killed": "OOMKilled by Kubernetes",
    "jvm_oom": "its JVM ran out of memory (OutOfMemoryError)",
    "unknown": "heartbeat timed out, no cause in the logs",
}


class TmLostParams(DetectorParams):
    """Thresholds of :class:`TmLost`."""

    grace_s: float = Field(default=20, ge=0)
    """After a heartbeat timeout with no cause logged yet, wait this long (event-time seconds) for
    one before paging with cause unknown."""
    cause_window_s: float = Field(default=300, gt=0)
    """An OutOfMemoryError or container kill of the TaskManager at most this long (seconds) before
    its heartbeat timeout is taken as the cause; covers heartbeat.timeout settings up to 5 min."""
    release_window_s: float = Field(default=600, ge=0)
    """A heartbeat timeout up to this long (seconds) after Flink stopped the TaskManager on purpose
    (idle, no longer needed) is expected and does not page."""
    clear_for_s: float = Field(default=900, ge=0)
    """Resolve once no loss signal (timeout, kill) for the TaskManager has arrived for this long
    (event-time seconds)."""
    max_job_ids: int = Field(default=10, ge=1)
    """Job ids kept per TaskManager (jobs that failed with it)."""

    @model_validator(mode="after")
    def _grace_before_idle(self) -> Self:
        # A timeout waiting for its cause must page before the idle TaskManager is dropped.
        if self.grace_s >= self.idle_ttl_s:
            msg = f"grace_s ({self.grace_s:g}) must be below idle_ttl_s ({self.idle_ttl_s:g})"
            raise ValueError(msg)
        return self


class TmKill(Record):
    """The last container kill of a TaskManager.

    Attributes:
        cause: ``memory_kill`` (YARN) or ``oom_killed`` (Kubernetes).
        t: When it was logged.
        line: The line that says why the container died.
        exit_code: The process's exit code (143, 137), when logged.
        exit_status: YARN's container exit status (-104, -103), when logged.
    """

    cause: Cause
    t: int
    line: str
    exit_code: int | None = None
    exit_status: int | None = None


class TmOom(Record):
    """The last ``OutOfMemoryError`` of a TaskManager: when, and its line."""

    t: int
    line: str


class TmLostState(DetectorState):
    """What :class:`TmLost` keeps per TaskManager (``job_id``: the first job it failed).

    Attributes:
        pending_until: A timeout without a cause pages (``unknown``) at this time.
        first_ms: The incident's first loss signal.
        last_signal_ms: The latest loss signal; the resolve counts from it.
        cause: The open incident's cause.
        late_cause: A cause logged after an ``unknown`` page; the resolve says it.
        timeouts: Heartbeat timeouts of the incident.
        timeout_line: Its first heartbeat timeout line.
        signals: The kinds of loss signal seen in the incident.
        kill: The last container kill.
        oom: The last ``OutOfMemoryError``.
        released_ms: When Flink last stopped the TaskManager on purpose.
        suppressed: Timeouts not paged because Flink had released the TaskManager.
        job_ids: Jobs that failed because of the TaskManager (at most ``max_job_ids``).
    """

    pending_until: int | None = None
    first_ms: int | None = None
    last_signal_ms: int | None = None
    cause: Cause | None = None
    late_cause: Cause | None = None
    timeouts: int = 0
    timeout_line: str | None = None
    signals: list[str] = []
    kill: TmKill | None = None
    oom: TmOom | None = None
    released_ms: int | None = None
    suppressed: int = 0
    job_ids: list[str] = []


class TmLostEvidence(Evidence):
    """What a ``tm_lost`` alert shows.

    Attributes:
        cause: ``memory_kill``, ``oom_killed``, ``jvm_oom`` or ``unknown``.
        diagnostics: The line that shows the cause (the kill, the OOM or the timeout).
        exit_code: The process's exit code, for a kill.
        heartbeat_timeouts: Heartbeat timeouts of the incident.
        signals: The kinds of loss signal seen (``container_memory_kill``,
            ``heartbeat_timeout``).
        first_signal_ms: The incident's first loss signal.
        exit_status: YARN's container exit status; only for a kill.
        timeouts_ignored_after_release: Timeouts not paged because Flink had released
            the TaskManager; only when there were some.
        job_ids: The jobs that failed because of the TaskManager (link field).
    """

    cause: Cause
    diagnostics: str | None
    exit_code: int | None
    heartbeat_timeouts: int
    signals: list[str]
    first_signal_ms: int | None
    exit_status: int | None = None
    timeouts_ignored_after_release: int = 0

    def as_dict(self) -> dict[str, Any]:
        """As the alert carries it: ``exit_status`` for a kill, the ignored count if any."""
        out = super().as_dict()
        if self.cause not in _KILL_CAUSES:
            del out["exit_status"]
        if not self.timeouts_ignored_after_release:
            del out["timeouts_ignored_after_release"]
        return out


def _death(member: Member) -> tuple[int, str] | None:
    """A memory cause is the best word on how it died; ``lost`` only if none knows more."""
    cause = str(member.evidence.get("cause") or "unknown")
    if cause in _MEMORY_CAUSES:
        return 0, _MEMORY_CAUSES[cause]
    return 2, "lost (heartbeat timeout, cause unknown)" if cause == "unknown" else cause


class TmLost(Detector[TmLostParams, TmLostState]):
    """Fire when a TaskManager is lost (heartbeat timeout or kill), with the cause."""

    name = "tm_lost"
    profile = Profile(
        runbook=(
            "A TaskManager died and its jobs restart. memory_kill / oom_killed: the process used "
            "more than its container limit: raise taskmanager.memory.process.size or the JVM "
            "overhead, or look for native/off-heap growth (RocksDB, a leak). jvm_oom: heap or "
            "metaspace exhausted: check state size and GC in its log. unknown: look at the host "
            "(node lost, long GC pause, network) around the time of the timeout."
        ),
        idle_words="no events about it any more",
        causal_rank=2,
        death=_death,
        headline=process_headline,  # the process that died, and how
    )
    signals = {
        "tm_lost": "1 while the TaskManager's loss incident is open, else 0.",
    }
    scope = "tm"
    kinds = frozenset(
        {
            "heartbeat_timeout",
            "container_memory_kill",
            "jvm_oom",
            "fatal_error",
            "tm_released",
            "job_state",
        }
    )

    def signal_values(self, state: TmLostState) -> dict[str, float]:  # noqa: D102
        return {"tm_lost": 1.0 if state.firing else 0.0}

    def job_name_from(self, state: TmLostState, event: Event) -> str | None:
        """The name of the first job whose failing line named it; later jobs' names do not count.

        ``job_id`` is the first job that failed with the TaskManager; the base would
        take the name of whichever job's line came last.
        """
        if event.kind == "job_state" and event.job_id and not state.job_name:
            return super().job_name_from(state, event)
        return None

    def new_state(self, event: Event, **fields: Any) -> TmLostState | None:
        """A TaskManager's first loss signal; the job comes from jobs failing with it."""
        if not self._worth_state(event):
            # A failing job that names no TaskManager we track, an OOM of a healthy-so-far
            # JVM without an id, ...: nothing to remember.
            return None
        return super().new_state(event._replace(job_id=None, job_name=None, host=None), **fields)

    def on_event(self, state: TmLostState, event: Event) -> list[Alert]:
        """Record causes, releases and losses; fire on a kill or a timeout."""
        # The host comes from the TaskManager's own lines.
        state.host = state.host or _own_host(event)
        alerts: list[Alert] = []
        kind = event.kind
        if kind == "tm_released":
            self._on_released(state, event.time_ms)
        elif kind == "container_memory_kill":
            alerts.extend(self._on_kill(state, event))
        elif kind in ("jvm_oom", "fatal_error"):
            alerts.extend(self._on_oom(state, event))
        elif kind == "heartbeat_timeout":
            alerts.extend(self._on_timeout(state, event))
        elif kind == "job_state":
            self._on_job_failure(state, event)
        return alerts

    def on_timer(self, state: TmLostState, now_ms: int) -> list[Alert]:
        """Page a pending timeout with cause unknown; resolve once the signals stopped."""
        return self._due(state, now_ms)

    def standing(self, state: TmLostState | None) -> str:
        """A timeout waiting for its cause, the open loss and what resolves it, or releases."""
        if state is None:
            return "no heartbeat timeout, memory kill or OutOfMemoryError for this TaskManager"
        p, now = self.params, state.last_event_ms
        if state.firing:
            cause = _CAUSE_TEXT[state.cause or "unknown"]
            seen = (
                f" ({words.plural(state.timeouts, 'heartbeat timeout')})" if state.timeouts else ""
            )
            last = state.last_signal_ms
            clear_at = self._clear_at(state)
            return words.clause(
                f"{words.firing_since(state.incident_start_ms, now)}: {cause}",
                f"latest loss signal {words.at(last)}{seen}" if last is not None else None,
                f"resolves at {words.at(clear_at)} if no loss signal comes" if clear_at else None,
            )
        if state.pending_until is not None:
            first = state.first_ms if state.first_ms is not None else now
            return (
                f"heartbeat timed out at {words.at(first)}; waiting for a cause until "
                f"{words.at(state.pending_until)}, then pages with cause unknown"
            )
        parts: list[str | None] = ["not lost: no heartbeat timeout or kill open"]
        if state.oom is not None:
            until = state.oom.t + int(p.cause_window_s * 1000)
            parts.append(
                f"an OutOfMemoryError at {words.at(state.oom.t)} explains a timeout until "
                f"{words.at(until)}"
            )
        if state.released_ms is not None:
            until = state.released_ms + int(p.release_window_s * 1000)
            parts.append(
                f"stopped by Flink at {words.at(state.released_ms)}: timeouts until "
                f"{words.at(until)} are expected"
            )
        if state.suppressed:
            parts.append(f"{words.plural(state.suppressed, 'timeout')} ignored after a release")
        return words.clause(*parts)

    # Events -----------------------------------------------------------------------------

    @staticmethod
    def _worth_state(event: Event) -> bool:
        if event.kind == "job_state":
            return False
        if event.kind == "fatal_error":
            return _is_oom(event)
        return True

    @staticmethod
    def _on_released(st: TmLostState, t: int) -> None:
        st.released_ms = t
        if st.pending_until is not None:
            # The timeout we were holding belongs to a TaskManager Flink stopped itself.
            st.pending_until = None
            st.first_ms = None
            st.suppressed += 1

    def _on_kill(self, st: TmLostState, event: Event) -> list[Alert]:
        msg = event.message or ""
        oom_killed = "oomkilled" in (event.reason or "").lower() or "OOMKilled" in msg
        line = _KILL_LINE.search(msg)
        st.kill = TmKill(
            cause="oom_killed" if oom_killed else "memory_kill",
            t=event.time_ms,
            line=(line.group(0) if line else msg.split("\n", 1)[0]).strip()[:_MAX_LINE_CHARS],
            exit_code=_exit_code(msg),
            exit_status=_group_int(_EXIT_STATUS.search(msg)),
        )
        self._signal(st, event.time_ms, "container_memory_kill")
        if st.firing:
            return []
        # A kill is a loss by itself: page now, whether or not a timeout follows.
        return [self._fire(st, event.time_ms, st.kill.cause)]

    def _on_oom(self, st: TmLostState, event: Event) -> list[Alert]:
        if not _is_oom(event):
            return []
        msg = event.message or ""
        line = _OOM_LINE.search(msg)
        st.oom = TmOom(
            t=event.time_ms,
            line=(line.group(0) if line else msg.split("\n", 1)[0]).strip()[:_MAX_LINE_CHARS],
        )
        if st.pending_until is not None and not st.firing:
            # The cause arrived within the grace period: page now, with it.
            return [self._fire(st, event.time_ms, "jvm_oom")]
        if st.firing and st.cause == "unknown":
            # Too late for the page, but the resolve will say it.
            st.late_cause = "jvm_oom"
        return []

    def _on_timeout(self, st: TmLostState, event: Event) -> list[Alert]:
        t = event.time_ms
        released = st.released_ms
        if released is not None and 0 <= t - released <= self.params.release_window_s * 1000:
            st.suppressed += 1
            return []
        st.timeouts += 1
        if st.timeout_line is None:
            st.timeout_line = (event.message or "").split("\n", 1)[0][:_MAX_LINE_CHARS]
        self._signal(st, t, "heartbeat_timeout")
        if st.firing or st.pending_until is not None:
            return []
        cause = self._recent_cause(st, t)
        if cause is not None:
            return [self._fire(st, t, cause)]
        st.pending_until = t + int(self.params.grace_s * 1000)
        if self.params.grace_s == 0:
            return self._due(st, t)
        return []

    def _on_job_failure(self, st: TmLostState, event: Event) -> None:
        # The parser sets tm_id on a job_state only when its cause names this TaskManager.
        if not event.job_id or event.tm_id != st.tm_id:
            return
        if event.job_id not in st.job_ids and len(st.job_ids) < self.params.max_job_ids:
            st.job_ids.append(event.job_id)
        st.job_id = st.job_id or event.job_id

    # Incident ---------------------------------------------------------------------------

    @staticmethod
    def _signal(st: TmLostState, t: int, kind: str) -> None:
        st.last_signal_ms = max(st.last_signal_ms or t, t)
        if st.first_ms is None:
            st.first_ms = t
        if kind not in st.signals:
            st.signals.append(kind)

    def _recent_cause(self, st: TmLostState, t: int) -> Cause | None:
        window = self.params.cause_window_s * 1000
        if st.kill is not None and 0 <= t - st.kill.t <= window:
            return st.kill.cause
        if st.oom is not None and 0 <= t - st.oom.t <= window:
            return "jvm_oom"
        return None

    def _fire(self, st: TmLostState, t: int, cause: Cause) -> Alert:
        st.pending_until = None
        st.cause = cause
        st.late_cause = None
        where = f" on {st.host}" if st.host else ""
        summary = f"{self.subject(st)}{where} lost: {_CAUSE_TEXT[cause]}"
        return self.fire(st, t, summary, self.evidence(st))

    def _due(self, st: TmLostState, now_ms: int) -> list[Alert]:
        """Transitions that came due by ``now_ms``, at the time each came due."""
        alerts: list[Alert] = []
        if st.pending_until is not None and now_ms >= st.pending_until:
            alerts.append(self._fire(st, st.pending_until, "unknown"))
        clear_at = self._clear_at(st)
        if clear_at is not None and now_ms >= clear_at:
            minutes = self.params.clear_for_s / 60
            alerts.append(self._close(st, clear_at, f"no loss signal for {minutes:.0f} min"))
        return alerts

    def _clear_at(self, st: TmLostState) -> int | None:
        """When the open incident resolves if no loss signal comes."""
        if not st.firing or st.last_signal_ms is None:
            return None
        return st.last_signal_ms + int(self.params.clear_for_s * 1000)

    def on_close(self, state: TmLostState, now_ms: int) -> list[Alert]:
        """No events about it any more: :meth:`_close`, saying ``idle_words``."""
        return [self._close(state, now_ms, self.profile.idle_words)] if state.firing else []

    def _close(self, state: TmLostState, time_ms: int, why: str) -> Alert:
        """The resolve, with a cause that was logged too late for the page."""
        if state.late_cause:
            state.cause = state.late_cause
        summary = f"{self.subject(state)}: {why}"
        alert = self.resolve(state, time_ms, summary, self.evidence(state))
        state.first_ms = None
        state.cause = None
        state.late_cause = None
        state.timeouts = 0
        state.timeout_line = None
        state.signals = []
        return alert

    def next_deadline(self, state: TmLostState) -> int | None:
        """A pending timeout paging with cause unknown, or the resolve."""
        due = [t for t in (state.pending_until, self._clear_at(state)) if t is not None]
        return min(due, default=None)

    def evidence(self, state: TmLostState) -> TmLostEvidence:
        """The cause, the line that shows it, the loss signals and the jobs hit."""
        cause = state.cause or "unknown"
        kill, oom = state.kill, state.oom
        diagnostics: str | None
        exit_code = exit_status = None
        if cause in _KILL_CAUSES and kill is not None:
            diagnostics, exit_code, exit_status = kill.line, kill.exit_code, kill.exit_status
        elif cause == "jvm_oom" and oom is not None:
            diagnostics = oom.line
        else:
            diagnostics = state.timeout_line
        return TmLostEvidence(
            cause=cause,
            diagnostics=diagnostics,
            exit_code=exit_code,
            heartbeat_timeouts=state.timeouts,
            signals=list(state.signals),
            job_ids=tuple(state.job_ids),
            first_signal_ms=state.first_ms,
            exit_status=exit_status,
            timeouts_ignored_after_release=state.suppressed,
        )


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
