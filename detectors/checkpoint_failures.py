"""``checkpoint_failures``: checkpoints of one job keep expiring.

One expired checkpoint is noise (a slow sink, a GC pause); several distinct
checkpoints expiring within a window means the job can no longer checkpoint and
will fail once ``execution.checkpointing.tolerable-failed-checkpoints`` runs out.
The alert resolves after ``resolve_after_completed`` checkpoints in a row complete.

State per job (bounded): the ids and times of expirations inside the window (at
most ``max_tracked`` entries), a counter of completions since the last expiry,
and the alert bookkeeping, about 0.5 KB serialised.
"""

from __future__ import annotations

from typing import ClassVar

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


class CheckpointFailuresParams(DetectorParams):
    """Thresholds of :class:`CheckpointFailures`."""

    min_expired: int = Field(
        default=3, ge=1, description="Distinct expired checkpoints that make an incident."
    )
    window_s: float = Field(
        default=1800, gt=0, description="Expirations older than this (seconds) no longer count."
    )
    resolve_after_completed: int = Field(
        default=2, ge=1, description="Completed checkpoints in a row that resolve the incident."
    )
    max_tracked: int = Field(default=50, ge=1, description="Expirations kept per job at most.")


class CheckpointFailures(Detector[CheckpointFailuresParams]):
    """Fire when at least ``min_expired`` checkpoints of a job expire within ``window_s``."""

    name: ClassVar[str] = "checkpoint_failures"
    runbook: ClassVar[str] = (
        "Checkpoints keep failing: the job cannot recover from a recent state. Read the failure "
        "reasons in the evidence; for expirations look for backpressure or a slow subtask, for "
        "declines the task's exception in the TaskManager log."
    )
    signals: ClassVar[dict[str, str]] = {
        "checkpoints_expired": "Distinct checkpoints of the job that expired within window_s.",
    }
    scope: ClassVar[Scope] = "job"
    kinds: ClassVar[frozenset[str]] = frozenset({"checkpoint_expired", "checkpoint_completed"})
    params_model: ClassVar[type[DetectorParams]] = CheckpointFailuresParams

    def signal_values(self, state: State) -> dict[str, float]:  # noqa: D102
        return {"checkpoints_expired": float(len(state.get("expired") or {}))}

    def on_event(self, state: State | None, event: Event, now_ms: int) -> Step:
        """Count expirations in the window; fire at the threshold, resolve on a streak."""
        p = self.params
        st = state or self._new_state(event)
        st["last_event_ms"] = max(int(st.get("last_event_ms", 0)), event.time_ms)
        st["job_name"] = event.job_name or st.get("job_name")
        alerts: list[Alert] = []
        if event.kind == "checkpoint_expired" and event.checkpoint_id is not None:
            expired = {int(k): v for k, v in st["expired"].items()}
            expired[event.checkpoint_id] = event.time_ms
            st["expired"] = self._trim(expired, event.time_ms)
            st["completed_streak"] = 0
            if not st["firing"] and len(st["expired"]) >= p.min_expired:
                st["firing"] = True
                st["incident_start_ms"] = event.time_ms
                alerts.append(
                    self.alert(
                        state=st,
                        status=AlertStatus.FIRING,
                        event_time_ms=event.time_ms,
                        summary=(
                            f"{len(st['expired'])} checkpoints of job "
                            f"{st.get('job_name') or st['job_id']} expired within "
                            f"{p.window_s / 60:.0f} min"
                        ),
                        evidence=self._evidence(st),
                    )
                )
        elif event.kind == "checkpoint_completed":
            st["completed_streak"] = int(st["completed_streak"]) + 1
            if st["firing"] and st["completed_streak"] >= p.resolve_after_completed:
                alerts.append(self._resolve(st, event.time_ms, "checkpoints complete again"))
        return Step(state=st, alerts=tuple(alerts), timer_ms=self._next_timer(st))

    def on_timer(self, state: State, now_ms: int) -> Step:
        """Age expirations out of the window; evict (and resolve) an idle job."""
        st = dict(state)
        st["expired"] = self._trim({int(k): v for k, v in st["expired"].items()}, now_ms)
        idle_ms = now_ms - int(st["last_event_ms"])
        if idle_ms >= self.params.idle_ttl_s * 1000:
            alerts: tuple[Alert, ...] = ()
            if st["firing"]:
                alerts = (self._resolve(st, now_ms, "no events from this job any more"),)
            return Step(state=None, alerts=alerts)
        return Step(state=st, timer_ms=self._next_timer(st))

    # ------------------------------------------------------------------------------

    def _new_state(self, event: Event) -> State:
        return {**self.identity(event), "expired": {}, "completed_streak": 0}

    def _trim(self, expired: dict[int, int], now_ms: int) -> dict[str, int]:
        horizon = now_ms - self.params.window_s * 1000
        kept = sorted((cid, t) for cid, t in expired.items() if t >= horizon)
        return {str(cid): t for cid, t in kept[-self.params.max_tracked :]}

    def _next_timer(self, st: State) -> int:
        idle_at = int(st["last_event_ms"]) + int(self.params.idle_ttl_s * 1000)
        if st["expired"]:
            oldest = min(int(t) for t in st["expired"].values())
            return min(idle_at, oldest + int(self.params.window_s * 1000) + 1)
        return idle_at

    def _resolve(self, st: State, time_ms: int, why: str) -> Alert:
        summary = f"job {st.get('job_name') or st['job_id']}: {why}"
        return self.resolve(st, time_ms, summary, self._evidence(st))

    def _evidence(self, st: State) -> dict[str, object]:
        return {
            "expired_checkpoints": sorted(int(k) for k in st["expired"]),
            "window_s": self.params.window_s,
            "completed_streak": st["completed_streak"],
        }
