"""``checkpoint_failures``: checkpoints of one job keep failing.

One failed checkpoint is noise (a slow sink, a GC pause, a task restoring); several
distinct checkpoints failing within a window means the job can no longer checkpoint
and will fail once ``execution.checkpointing.tolerable-failed-checkpoints`` runs out.

A checkpoint fails in the logs of every Flink version as one or more of:

* ``Checkpoint N [of job J] expired before completing.`` (``checkpoint_expired``);
* ``Decline checkpoint N by task A [of job J] [at TM]`` (``checkpoint_declined``), from
  1.12 followed by the decline's reason or cause as a stack trace;
* ``Failed to trigger or complete checkpoint N for job J. (K consecutive failed
  attempts so far)`` with the ``CheckpointException`` (1.15+), ``Failed to trigger
  checkpoint …`` and ``Discarding checkpoint N …`` (older), ``Triggering Checkpoint N
  for job J failed due to …`` (1.14+): all ``checkpoint_failed``.

The lines of one checkpoint count once (its id is the key; many tasks may decline
it, and from 1.15 every failure is logged twice). Each failed checkpoint gets a
reason from :func:`failure_reason`, the most specific of its lines. As in Flink's own
``CheckpointFailureManager``, reasons that come with restarts, finishing tasks and
trigger races (tasks not running or not ready, the coordinator suspending, a
checkpoint subsumed, a task failing) do not count, and neither do savepoints (named
in the trigger line from 1.11; ``checkpoint_triggered`` events record their ids), so
a savepoint declined while a job stops is not an incident. The evidence lists what
did not count next to what did.

The incident fires when, within ``window_s``, ``min_expired`` distinct checkpoints
expired or ``min_failed`` distinct checkpoints failed for a counted reason, or (if
``min_streak`` is set) when that many counted failures came in a row without a
completed checkpoint between them, however far apart (jobs with a long checkpoint
interval). It resolves after ``resolve_after_completed`` checkpoints in a row
complete and no counted failure came for ``clear_for_s`` (a job whose every other
checkpoint expires stays one incident), or when the job goes idle for ``idle_ttl_s``.

State per job (bounded, :class:`CheckpointFailuresState`): at most ``max_tracked``
failed checkpoints ``(time, reason)`` inside the window, as many ids of the current
streak, ``_MAX_UNCOUNTED`` failures without an id, ``_MAX_SAVEPOINTS`` savepoint ids,
one example text per reason, and the alert bookkeeping: about 0.6 KB for an incident of
three expiries, at most ~9 KB with the defaults (measured in
``tests/detectors/test_checkpoint_failures.py``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from pydantic import Field

from detectors import words
from detectors.base import Detector, DetectorParams, DetectorState, Evidence, Profile
from detectors.model import Alert, Event

_MAX_SAVEPOINTS = 8  # savepoint ids remembered, to leave their failures out
_MAX_UNCOUNTED = 20  # failures without a checkpoint id kept for the evidence
_EXAMPLE_CHARS = 200  # one example text per reason, this long at most
_EVIDENCE_CAP = 60  # failures the evidence's timeline lists at most (the newest)

#: Reason keys that a more specific line of the same checkpoint may replace.
_GENERIC = frozenset({"declined", "unknown", "other"})

# (text in Flink's CheckpointFailureReason messages, reason key, counts), first match wins.
# Keys that do not count follow Flink's CheckpointFailureManager, which leaves them out of
# the tolerable-failure counter: they come with restarts, finishing tasks and trigger races.
_REASONS: tuple[tuple[str, str, bool], ...] = (
    ("not all required tasks are currently running", "tasks_not_running", False),
    ("is not being executed at the moment", "tasks_not_running", False),
    ("is not in state running", "tasks_not_running", False),
    ("checkpoint coordinator is suspending", "coordinator_stopped", False),
    ("checkpointcoordinator shutdown", "coordinator_stopped", False),
    ("periodic checkpoint scheduler is shut down", "coordinator_stopped", False),
    ("maximum number of concurrent checkpoints", "throttled", False),
    ("maximum number of queued checkpoint requests", "throttled", False),
    ("minimum time between checkpoints", "throttled", False),
    ("another checkpoint request has already been queued", "throttled", False),
    ("has been subsumed", "subsumed", False),
    ("barrier from newer checkpoint", "subsumed", False),
    ("tasks not ready", "task_not_ready", False),
    ("task is closing", "task_not_ready", False),
    ("operators partially closed", "task_not_ready", False),
    ("input stream is finished", "task_not_ready", False),
    ("received cancellation from one of its inputs", "cancellation_barrier", False),
    ("task has failed", "task_failure", False),
    ("the job has failed", "task_failure", False),
    ("failoverregion is restarting", "task_failure", False),
    ("task local checkpoint failure", "task_failure", False),
    ("unknown task for the checkpoint to notify", "task_failure", False),
    ("sharing the channelstate file", "channel_state_shared", False),
    ("trigger checkpoint failure", "trigger_failure", False),
    ("blocking output edge", "trigger_failure", False),
    ("exceeded checkpoint tolerable failure threshold", "tolerable_threshold_exceeded", False),
    ("expired before completing", "expired", True),
    ("asynchronous task checkpoint failed", "async_failure", True),
    ("failure to finalize checkpoint", "finalize_failure", True),
    ("io-problem detected", "io_exception", True),
    ("an exception occurred while triggering the checkpoint", "trigger_exception", True),
    ("alignment phase needed to buffer more", "alignment_limit", True),
    ("does not support checkpointing", "not_supported", True),
    ("checkpoint was declined", "declined", True),
)
_COUNTED = frozenset({key for _, key, counts in _REASONS if counts} | _GENERIC)


def failure_reason(event: Event) -> str:
    """The reason key of one checkpoint failure line (see ``_REASONS``).

    Flink's ``CheckpointException`` text ends in ``Failure reason: <reason>`` when a
    task name precedes it; only the reason is matched, so an operator's name cannot
    look like a reason.

    Example:
        >>> failure_reason(Event(kind="checkpoint_failed", time_ms=0, checkpoint_id=7,
        ...     reason="Task name with subtask : Map (1/2)#0 Failure reason: "
        ...            "Checkpoint was declined (tasks not ready)"))
        'task_not_ready'
    """
    if event.kind == "checkpoint_expired":
        return "expired"
    if "tolerable failure threshold" in (event.message or event.reason or ""):
        # 1.17+ appends the latest failure's reason; the line itself is the job failing.
        return "tolerable_threshold_exceeded"
    reason = (event.reason or "").rsplit("Failure reason:", 1)[-1]
    for text in (reason.lower(), (_first_line(event.message) or "").lower()):
        for needle, key, _counts in _REASONS:
            if needle in text:
                return key
    if event.kind == "checkpoint_declined":
        # Before 1.12 a decline carries no reason; from 1.13 only its cause (an
        # IOException from a sink, say), which is a decline all the same.
        return "declined"
    if event.checkpoint_id is None:
        # `Failed to trigger checkpoint for job J (N consecutive failed attempts so far).`
        return "trigger_failure"
    return "other" if event.reason else "unknown"


def counts(key: str) -> bool:
    """Whether failures with this reason key count towards an incident."""
    return key in _COUNTED


def _first_line(message: str | None) -> str | None:
    return message.split("\n", 1)[0] if message else None


class CheckpointFailuresParams(DetectorParams):
    """Thresholds of :class:`CheckpointFailures`."""

    min_expired: int = Field(default=3, ge=1)
    """Distinct expired checkpoints that make an incident."""
    min_failed: int | None = Field(default=None, ge=1)
    """Distinct checkpoints failed for a counted reason (expired, declined, async failure, ...) that
    make an incident; null: the same as min_expired."""
    min_streak: int | None = Field(default=None, ge=1)
    """Counted failures in a row, without a completed checkpoint between them and however far apart,
    that make an incident; null: off."""
    window_s: float = Field(default=1800, gt=0)
    """Failures older than this (seconds) no longer count."""
    resolve_after_completed: int = Field(default=2, ge=1)
    """Completed checkpoints in a row that resolve the incident."""
    max_tracked: int = Field(default=50, ge=1)
    """Failed checkpoints kept per job at most."""


class CheckpointFailuresState(DetectorState):
    """What :class:`CheckpointFailures` keeps per job (version 2; 1 kept expirations only).

    Attributes:
        failed: Failed checkpoints inside the window: id → (first failure time, reason key).
        uncounted: Failures without a checkpoint id, (time, reason key), for the evidence.
        streak_ids: Ids of the counted failures since the last completed checkpoint.
        savepoints: Ids of the latest savepoints (their failures do not count).
        examples: One example text per reason key.
        completed_streak: Checkpoints completed in a row since the last counted failure.
        last_failure_ms: Time of the latest counted failure (hysteresis counts from it).
    """

    v: int = 2
    failed: dict[str, tuple[int, str]] = {}
    uncounted: list[tuple[int, str]] = []
    streak_ids: list[int] = []
    savepoints: list[int] = []
    examples: dict[str, str] = {}
    completed_streak: int = 0
    last_failure_ms: int | None = None


class FailureMark(NamedTuple):
    """One failure of the window, for a chart: ``[time_ms, checkpoint_id, reason, counted]``."""

    time_ms: int
    checkpoint_id: int | None
    reason: str
    counted: bool


class CheckpointFailuresEvidence(Evidence):
    """What a ``checkpoint_failures`` alert shows.

    Attributes:
        expired_checkpoints: Ids of the expired checkpoints inside the window.
        failed_checkpoints: Ids of the checkpoints failed for a counted reason.
        reasons: Counted failures per reason key, most first.
        not_counted: Failures that did not count, per reason key.
        examples: One example text per reason key.
        streak: Counted failures in a row without a completed checkpoint.
        window_s: The window the failures are counted in.
        completed_streak: Checkpoints completed in a row since.
        timeline: The failures inside the window (counted or not, a checkpoint's first
            failure), the newest 60, oldest first.
    """

    expired_checkpoints: list[int]
    failed_checkpoints: list[int]
    reasons: dict[str, int]
    not_counted: dict[str, int]
    examples: dict[str, str]
    streak: int
    window_s: float
    completed_streak: int
    timeline: list[FailureMark] = []


class CheckpointFailures(Detector[CheckpointFailuresParams, CheckpointFailuresState]):
    """Fire when checkpoints of a job keep expiring, being declined or failing."""

    name = "checkpoint_failures"
    profile = Profile(
        runbook=(
            "Checkpoints keep failing: the job cannot recover from a recent state. Read the "
            "failure reasons in the evidence; for expirations look for backpressure or a slow "
            "subtask, for declines the task's exception in the TaskManager log."
        ),
        idle_words="no events from this job any more",
        causal_rank=4,
    )
    signals = {
        "checkpoints_expired": "Distinct checkpoints of the job that expired within window_s.",
        "checkpoints_failed": (
            "Distinct checkpoints of the job that failed for a counted reason (expired "
            "included) within window_s."
        ),
    }
    scope = "job"
    kinds = frozenset(
        {
            "checkpoint_triggered",
            "checkpoint_completed",
            "checkpoint_expired",
            "checkpoint_declined",
            "checkpoint_failed",
        }
    )

    def signal_values(self, state: CheckpointFailuresState) -> dict[str, float]:  # noqa: D102
        failed = state.failed.values()
        return {
            "checkpoints_expired": float(sum(1 for _, key in failed if key == "expired")),
            "checkpoints_failed": float(sum(1 for _, key in failed if counts(key))),
        }

    @classmethod
    def migrate(cls, old: dict[str, Any], from_version: int) -> dict[str, Any]:
        """Version 1 kept ``expired``: checkpoint id → time; other failures were not kept."""
        if from_version != 1:
            return super().migrate(old, from_version)
        expired = old.pop("expired", None) or {}
        old["failed"] = {cid: [int(t), "expired"] for cid, t in expired.items()}
        return old

    def on_event(self, state: CheckpointFailuresState, event: Event) -> list[Alert]:
        """Fold one checkpoint line in; fire at a threshold, resolve on completions."""
        alerts: list[Alert] = []
        cid = event.checkpoint_id
        if event.kind == "checkpoint_triggered":
            if cid is not None and "savepoint" in (event.reason or "").lower():
                state.savepoints = [*state.savepoints, cid][-_MAX_SAVEPOINTS:]
        elif event.kind == "checkpoint_completed":
            if cid is None or cid not in state.savepoints:
                state.completed_streak += 1
                state.streak_ids = []
                alerts.extend(self._recovered(state, event.time_ms))
        elif self._record_failure(state, event) and not state.firing and self._breached(state):
            summary = self._summary(state)
            alerts.append(self.fire(state, event.time_ms, summary, self.evidence(state)))
        return alerts

    def on_timer(self, state: CheckpointFailuresState, now_ms: int) -> list[Alert]:
        """Resolve when due; age failures out of the window."""
        recovered = self._recovered(state, now_ms)
        if not recovered:
            self._trim(state, now_ms)
        return recovered

    def next_deadline(self, state: CheckpointFailuresState) -> int | None:
        """The next deadline: the resolve (if only time is missing) or a failure ageing out."""
        due: list[int] = []
        clear_at = self._clear_at(state)
        streak = state.completed_streak >= self.params.resolve_after_completed
        if state.firing and streak and clear_at is not None:
            # Due then unless a failure comes first (which resets the streak).
            due.append(clear_at)
        times = [t for t, _ in state.failed.values()] + [t for t, _ in state.uncounted]
        if times:
            due.append(min(times) + int(self.params.window_s * 1000) + 1)
        return min(due) if due else None

    # ------------------------------------------------------------------------------

    def _record_failure(self, st: CheckpointFailuresState, event: Event) -> bool:
        """Merge one failure line into the state; ``True`` if a counted failure is new."""
        cid = event.checkpoint_id
        key = failure_reason(event)
        if cid is not None and cid in st.savepoints:
            key = "savepoint"
        text = event.reason or _first_line(event.message)
        if text and key not in st.examples:
            st.examples[key] = text[:_EXAMPLE_CHARS]
        if cid is None:
            # Nothing to tie it to a checkpoint: evidence only (trigger failures while
            # tasks are not running, the job-level "tolerable failure threshold").
            st.uncounted = [*st.uncounted, (event.time_ms, key)][-_MAX_UNCOUNTED:]
            self._trim(st, event.time_ms)
            return False
        known = st.failed.get(str(cid))
        if known is not None and (known[1] not in _GENERIC or key in _GENERIC):
            return False  # a line of a checkpoint already counted, nothing more specific
        st.failed[str(cid)] = (known[0] if known else event.time_ms, key)
        was_counted = known is not None and counts(known[1])
        if counts(key) and not was_counted:
            st.streak_ids = [*st.streak_ids, cid][-self.params.max_tracked :]
            st.completed_streak = 0
            st.last_failure_ms = max(st.last_failure_ms or 0, event.time_ms)
        elif was_counted and not counts(key):
            # A later line said why, and the reason is one that does not count.
            st.streak_ids = [x for x in st.streak_ids if x != cid]
        self._trim(st, event.time_ms)
        return counts(key) and not was_counted

    def _breached(self, st: CheckpointFailuresState) -> bool:
        p = self.params
        expired = sum(1 for _, key in st.failed.values() if key == "expired")
        counted = sum(1 for _, key in st.failed.values() if counts(key))
        min_failed = p.min_failed if p.min_failed is not None else p.min_expired
        streak = p.min_streak is not None and len(st.streak_ids) >= p.min_streak
        return expired >= p.min_expired or counted >= min_failed or streak

    def _trim(self, st: CheckpointFailuresState, now_ms: int) -> None:
        horizon = now_ms - self.params.window_s * 1000
        kept = sorted((int(cid), v) for cid, v in st.failed.items() if v[0] >= horizon)
        st.failed = {str(cid): v for cid, v in kept[-self.params.max_tracked :]}
        st.uncounted = [u for u in st.uncounted if u[0] >= horizon]
        keys = {key for _, key in st.failed.values()} | {key for _, key in st.uncounted}
        st.examples = {k: v for k, v in st.examples.items() if k in keys}

    def _recovered(self, st: CheckpointFailuresState, t: int) -> list[Alert]:
        """Resolve once enough checkpoints completed in a row and failures stopped.

        A job that alternates (every other checkpoint expires) must not page once per
        pair of completions: the incident also waits ``clear_for_s`` after the last
        counted failure. The failures of a closed incident are forgotten, so the next
        incident is counted from scratch.
        """
        if not st.firing or st.completed_streak < self.params.resolve_after_completed:
            return []
        at = self._clear_at(st)
        if at is not None and t < at:
            return []
        summary = f"{self.subject(st)}: checkpoints complete again"
        resolved = self.resolve(st, max(t, at or t), summary, self.evidence(st))
        st.failed, st.streak_ids = {}, []
        return [resolved]

    def _clear_at(self, st: CheckpointFailuresState) -> int | None:
        last = st.last_failure_ms
        return None if last is None else last + int(self.params.clear_for_s * 1000)

    def _summary(self, st: CheckpointFailuresState) -> str:
        p = self.params
        reasons = self._reasons(st, counted=True)
        n = sum(reasons.values())
        who = st.job_name or st.job_id
        min_failed = p.min_failed if p.min_failed is not None else p.min_expired
        if n < min_failed and reasons.get("expired", 0) < p.min_expired:
            # Fired by the streak: fewer failures than the thresholds within the window.
            return (
                f"{len(st.streak_ids)} checkpoints of job {who} failed in a row without a "
                "completed checkpoint"
            )
        within = f"within {p.window_s / 60:.0f} min"
        if set(reasons) == {"expired"}:
            return f"{n} checkpoints of job {who} expired {within}"
        parts = ", ".join(f"{c} {k.replace('_', ' ')}" for k, c in reasons.items())
        return f"{n} checkpoints of job {who} failed {within} ({parts})"

    def _reasons(self, st: CheckpointFailuresState, *, counted: bool) -> dict[str, int]:
        out: dict[str, int] = {}
        for _, key in st.failed.values():
            if counts(key) == counted:
                out[key] = out.get(key, 0) + 1
        if not counted:
            for _, key in st.uncounted:
                out[key] = out.get(key, 0) + 1
        return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))

    def standing(self, state: CheckpointFailuresState | None) -> str:
        """Failures in the window against the thresholds, or what resolves the incident."""
        if state is None:
            return "no checkpoint seen for this job"
        p = self.params
        failed = state.failed.values()
        expired = sum(1 for _, key in failed if key == "expired")
        counted = sum(1 for _, key in failed if counts(key))
        min_failed = p.min_failed if p.min_failed is not None else p.min_expired
        # Firing, the thresholds are behind it.
        of_expired, of_failed = (
            ("", "") if state.firing else (f" of {p.min_expired}", f" of {min_failed}")
        )
        held = (
            f"{expired}{of_expired} expired, {counted}{of_failed} failed "
            f"within {words.span(p.window_s)}"
        )
        if p.min_streak is not None:
            held += f", {len(state.streak_ids)} of {p.min_streak} in a row"
        other = self._reasons(state, counted=False)
        ignored = (
            f"{sum(other.values())} not counted ({next(iter(other)).replace('_', ' ')})"
            if other
            else None
        )
        done = f"{words.plural(state.completed_streak, 'checkpoint')} completed in a row"
        if not state.firing:
            return words.clause(held, ignored, done)
        resolve = (
            f"resolves after {p.resolve_after_completed} completed in a row "
            f"({state.completed_streak} so far)"
        )
        clear_at = self._clear_at(state)
        if clear_at is not None:
            resolve += f" and no failure until {words.at(clear_at)}"
        since = words.firing_since(state.incident_start_ms, state.last_event_ms)
        return words.clause(since, held, resolve)

    def evidence(self, state: CheckpointFailuresState) -> CheckpointFailuresEvidence:
        """The failures inside the window, by reason, with examples."""
        failed = sorted((int(k), v) for k, v in state.failed.items())
        return CheckpointFailuresEvidence(
            expired_checkpoints=[cid for cid, v in failed if v[1] == "expired"],
            failed_checkpoints=[cid for cid, v in failed if counts(v[1])],
            reasons=self._reasons(state, counted=True),
            not_counted=self._reasons(state, counted=False),
            examples=dict(sorted(state.examples.items())),
            streak=len(state.streak_ids),
            window_s=self.params.window_s,
            completed_streak=state.completed_streak,
            timeline=sorted(
                [FailureMark(t, cid, key, counts(key)) for cid, (t, key) in failed]
                + [FailureMark(t, None, key, False) for t, key in state.uncounted],
                key=lambda m: (m.time_ms, m.checkpoint_id or 0),
            )[-_EVIDENCE_CAP:],
        )
