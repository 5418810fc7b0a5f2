"""``late_barrier_acks``: the same tasks ack checkpoints too late, again and again.

When a checkpoint expires, the JobManager logs ``Received late message for now
expired checkpoint attempt N from [task] T of job J [at <tm> @ <host> ...]`` for
every task whose acknowledgement arrives afterwards. One checkpoint with a burst
of late acks is noise (a GC pause, one slow upload). Late acks in several
*distinct* checkpoints within ``window_s`` mean barriers keep getting stuck
behind backed-up buffers, and when they come from the same tasks or the same
machine the cause is usually data skew or one overloaded TaskManager (seed 002).
The alert fires at the ``min_checkpoints``-th late checkpoint and names the
tasks, TaskManagers and hosts that were late most often; it resolves once no
late ack has arrived for ``clear_for_s``.

What counts as one late checkpoint:

- A checkpoint attempt counts once it has at least one late ack. An expiry with
  no late ack does not count (``checkpoint_failures`` covers expiry streaks).
- Checkpoint ids restart after a JobManager restart without HA, so an attempt
  is keyed by id *and* time: an ``expired`` line for an id that already has
  late acks opens a new attempt, and so do late acks further than
  ``attempt_gap_s`` from the previous late ack of that id.
- Before Flink 1.19 (FLINK-15922) the same "late message" is also logged for
  checkpoints aborted for other reasons (a task declined, a task failed). Those
  attempts, known from ``Decline checkpoint`` or a non-expiry
  ``checkpoint_failed`` reason, do not count: the late acks there say nothing
  about slow barriers.

Tasks are grouped by the attempt id the line prints. Flink 1.16+ prints
``<graph>_<vertex>_<subtask>_<attempt>``; the key kept is ``<vertex>/<subtask>``
so restarts of one subtask add up. Flink 1.4-1.8 print a bare 32-hex attempt id
and no location, so hosts and TaskManagers stay empty for those versions.

State per job (bounded): at most ``max_checkpoints`` checkpoint attempts in the
window (about 140 bytes each), and per-task / per-TaskManager / per-host
counters capped at ``max_tasks`` / ``max_hosts`` / ``max_hosts`` keys, each a
map of at most ``max_checkpoints`` attempt numbers (renumbered before they
reach 4 digits) to ack counts, keys cut to ``_MAX_KEY_CHARS``. When a map is
full the key seen in the fewest checkpoints is dropped, so the repeat offenders
stay. Serialised with ``json.dumps``: about 1.5-2 KB during a typical incident
(3-5 late checkpoints, 5 tasks, 2 hosts) and at most about 34 KB with the
default caps (measured in the unit tests: 30 tracked checkpoints with 3-digit
attempt numbers, each late on all 32 tasks, 16 TaskManagers and 16 hosts, every
name at the 120-character cut).
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar

from pydantic import Field

from detectors.base import (
    Alert,
    AlertStatus,
    Detector,
    DetectorParams,
    Event,
    Lifecycle,
    Scope,
    State,
    Step,
)

#: Longer task / TaskManager / host names are cut to this many characters in the state.
_MAX_KEY_CHARS = 120
#: Attempt numbers are renumbered from 0 when they reach this (state size).
_RENUMBER_AT = 1000
#: Checkpoint ids listed in the evidence at most (the newest ones).
_MAX_EVIDENCE_IDS = 20
#: Flink 1.16+ ExecutionAttemptID: ``<graph id>_<vertex id>_<subtask>_<attempt number>``.
_ATTEMPT_ID_116 = re.compile(r"^[0-9a-f]{32}_([0-9a-f]{32})_(\d+)_\d+$")
#: Counter maps kept per job, with the evidence key naming each entry.
_COUNTERS: tuple[tuple[str, str], ...] = (("tasks", "task"), ("tms", "tm_id"), ("hosts", "host"))


class LateBarrierAcksParams(DetectorParams):
    """Thresholds of :class:`LateBarrierAcks`."""

    min_checkpoints: int = Field(
        default=3,
        ge=2,
        description="Distinct checkpoints with late acks within the window that make an incident.",
    )
    window_s: float = Field(
        default=3600,
        gt=0,
        description=(
            "Late checkpoints older than this (seconds) no longer count; wide enough for three "
            "checkpoint timeouts of 10 min plus the checkpoint interval."
        ),
    )
    clear_for_s: float = Field(
        default=1800,
        ge=0,
        description=(
            "Resolve once no late ack has arrived for this long (event-time seconds); longer "
            "than a checkpoint timeout, since late acks of an ongoing incident come only once "
            "per expired checkpoint."
        ),
    )
    attempt_gap_s: float = Field(
        default=1200,
        gt=0,
        description=(
            "Late acks of the same checkpoint id further apart than this (seconds) belong to "
            "different attempts (ids restart after a JobManager restart without HA)."
        ),
    )
    concentration_share: float = Field(
        default=0.6,
        gt=0,
        le=1,
        description=(
            "Share of the located late acks (fraction) from one host that flags the incident "
            "as concentrated on that host."
        ),
    )
    top_n: int = Field(
        default=5, ge=1, le=20, description="Tasks, TaskManagers and hosts listed in the evidence."
    )
    max_checkpoints: int = Field(
        default=30, ge=2, description="Checkpoint attempts tracked per job at most."
    )
    max_tasks: int = Field(default=32, ge=1, description="Tasks counted per job at most.")
    max_hosts: int = Field(
        default=16, ge=1, description="Hosts, and TaskManagers, counted per job at most."
    )


class LateBarrierAcks(Detector[LateBarrierAcksParams, Any]):
    """Fire when late checkpoint acks recur in ``min_checkpoints`` checkpoints of a job."""

    name: ClassVar[str] = "late_barrier_acks"
    runbook: ClassVar[str] = (
        "Barriers reach some tasks after their checkpoint expired. If one host dominates, look at "
        "that host (disk, network, noisy neighbour) or move its TaskManagers; otherwise look for "
        "data skew or backpressure on the late tasks."
    )
    signals: ClassVar[dict[str, str]] = {
        "late_ack_checkpoints": "Checkpoints of the job with late barrier acks within window_s.",
        "late_acks": "Late barrier acks of the job within window_s.",
    }
    scope: ClassVar[Scope] = "job"
    kinds: ClassVar[frozenset[str]] = frozenset(
        {"checkpoint_late_ack", "checkpoint_expired", "checkpoint_declined", "checkpoint_failed"}
    )
    params_model: ClassVar[type[DetectorParams]] = LateBarrierAcksParams

    def signal_values(self, state: State) -> dict[str, float]:  # noqa: D102
        live = [r for r in state["checkpoints"] if not r["aborted"]]
        return {
            "late_ack_checkpoints": float(sum(1 for r in live if int(r["late_acks"]) > 0)),
            "late_acks": float(sum(int(r["late_acks"]) for r in live)),
        }

    def on_event(self, state: State | None, event: Event, now_ms: int) -> Step:
        """Attach the event to its checkpoint attempt; fire at the threshold."""
        st = _copy(state) if state else self._new_state(event)
        t = event.time_ms
        st["last_event_ms"] = max(int(st["last_event_ms"]), t)
        st["job_name"] = event.job_name or st.get("job_name")
        alerts: list[Alert] = []
        # A resolve that came due before this event (its timer has not run yet).
        resolved = self._resolve_if_due(st, t)
        if resolved is not None:
            alerts.append(resolved)
        self._prune(st, t)
        cp = event.checkpoint_id
        if cp is not None:
            if event.kind == "checkpoint_late_ack":
                fired = self._on_late_ack(st, event, cp)
                if fired is not None:
                    alerts.append(fired)
            elif event.kind == "checkpoint_expired" or (
                event.kind == "checkpoint_failed" and "expired" in (event.reason or "").lower()
            ):
                self._on_expired(st, cp, t)
            elif event.kind == "checkpoint_declined" or (
                event.kind == "checkpoint_failed" and event.reason
            ):
                self._on_aborted(st, cp, t)
        return Step(state=st, alerts=tuple(alerts), timer_ms=self._next_timer(st))

    def on_timer(self, state: State, now_ms: int) -> Step:
        """Resolve once late acks stopped; evict (and resolve) an idle job."""
        st = _copy(state)
        alerts: list[Alert] = []
        resolved = self._resolve_if_due(st, now_ms)
        if resolved is not None:
            alerts.append(resolved)
        self._prune(st, now_ms)
        if now_ms - int(st["last_event_ms"]) >= self.params.idle_ttl_s * 1000:
            if st["firing"]:
                Lifecycle.update(st, False, now_ms, clear_for_ms=0)
                alerts.append(self._resolved(st, now_ms, "no events from this job any more"))
            return Step(state=None, alerts=tuple(alerts))
        return Step(state=st, alerts=tuple(alerts), timer_ms=self._next_timer(st))

    # Checkpoint attempts --------------------------------------------------------------

    def _on_late_ack(self, st: State, event: Event, cp: int) -> Alert | None:
        t = event.time_ms
        rec = self._find(st, cp, t) or self._new_record(st, cp, t)
        rec["first_ms"] = min(int(rec["first_ms"]), t)
        rec["last_ms"] = max(int(rec["last_ms"]), t)
        rec["late_acks"] = int(rec["late_acks"]) + 1
        if rec["aborted"]:
            return None
        seq, cap_tasks, cap_hosts = int(rec["seq"]), self.params.max_tasks, self.params.max_hosts
        if event.task:
            self._bump(st["tasks"], _task_key(event.task), seq, t, cap_tasks)
        if event.tm_id:
            self._bump(st["tms"], event.tm_id[:_MAX_KEY_CHARS], seq, t, cap_hosts)
        if event.host:
            rec["located_acks"] = int(rec["located_acks"]) + 1
            self._bump(st["hosts"], event.host[:_MAX_KEY_CHARS], seq, t, cap_hosts)
        clear_for_ms = int(self.params.clear_for_s * 1000)
        if not st["firing"] and self._late_count(st) < self.params.min_checkpoints:
            return None
        transition = Lifecycle.update(st, True, t, clear_for_ms=clear_for_ms)
        # "Late acks keep arriving" is true at this instant only: the clear period starts now
        # and the next late ack restarts it.
        st["clear_since_ms"] = t
        if transition != "firing":
            return None
        ev = self._evidence(st)
        return self.alert(
            state=st,
            status=AlertStatus.FIRING,
            event_time_ms=t,
            summary=self._firing_summary(st, ev),
            evidence=ev,
        )

    def _on_expired(self, st: State, cp: int, t: int) -> None:
        rec = self._find(st, cp, t)
        if rec is None or int(rec["late_acks"]) > 0 or rec["aborted"]:
            # Late acks only follow an expiry, so an expiry after them is another attempt.
            rec = self._new_record(st, cp, t)
        rec["expired"] = True

    def _on_aborted(self, st: State, cp: int, t: int) -> None:
        rec = self._find(st, cp, t)
        if rec is None or (rec["expired"] and not rec["aborted"]):
            # An expired attempt is over; an abort with its id belongs to a newer attempt.
            rec = self._new_record(st, cp, t)
        elif not rec["aborted"] and int(rec["late_acks"]) > 0:
            self._drop_seq(st, int(rec["seq"]))
        rec["aborted"] = True
        rec["last_ms"] = max(int(rec["last_ms"]), t)

    def _find(self, st: State, cp: int, t: int) -> dict[str, Any] | None:
        gap_ms = self.params.attempt_gap_s * 1000
        for rec in reversed(st["checkpoints"]):
            if int(rec["id"]) == cp and t - int(rec["last_ms"]) <= gap_ms:
                found: dict[str, Any] = rec
                return found
        return None

    def _new_record(self, st: State, cp: int, t: int) -> dict[str, Any]:
        if int(st["next_seq"]) >= max(_RENUMBER_AT, 2 * self.params.max_checkpoints):
            self._renumber(st)
        rec: dict[str, Any] = {
            "seq": int(st["next_seq"]),
            "id": cp,
            "first_ms": t,
            "last_ms": t,
            "late_acks": 0,
            "located_acks": 0,
            "expired": False,
            "aborted": False,
        }
        st["next_seq"] = int(st["next_seq"]) + 1
        records: list[dict[str, Any]] = st["checkpoints"]
        records.append(rec)
        while len(records) > self.params.max_checkpoints:
            self._drop_seq(st, int(records.pop(0)["seq"]))
        return rec

    @staticmethod
    def _renumber(st: State) -> None:
        """Number the tracked attempts 0..n-1 again, so attempt numbers stay short."""
        new_of = {str(r["seq"]): str(i) for i, r in enumerate(st["checkpoints"])}
        for i, rec in enumerate(st["checkpoints"]):
            rec["seq"] = i
        for name, _label in _COUNTERS:
            for entry in st[name].values():
                entry["cps"] = {new_of[k]: n for k, n in entry["cps"].items() if k in new_of}
        st["next_seq"] = len(st["checkpoints"])

    def _prune(self, st: State, now_ms: int) -> None:
        horizon = now_ms - self.params.window_s * 1000
        kept = []
        for rec in st["checkpoints"]:
            if int(rec["last_ms"]) >= horizon:
                kept.append(rec)
            else:
                self._drop_seq(st, int(rec["seq"]))
        st["checkpoints"] = kept
        if not kept:
            # Nothing refers to attempt numbers any more: keep them short.
            st["next_seq"] = 0

    @staticmethod
    def _late_count(st: State) -> int:
        return sum(1 for r in st["checkpoints"] if int(r["late_acks"]) > 0 and not r["aborted"])

    # Offender counters ------------------------------------------------------------------

    @staticmethod
    def _bump(counters: dict[str, Any], key: str, seq: int, t: int, cap: int) -> None:
        entry = counters.get(key)
        if entry is None:
            if len(counters) >= cap:
                # Keep the repeat offenders: drop the key seen in the fewest checkpoints.
                victim = min(
                    counters,
                    key=lambda k: (
                        len(counters[k]["cps"]),
                        sum(counters[k]["cps"].values()),
                        counters[k]["last_ms"],
                    ),
                )
                del counters[victim]
            entry = counters[key] = {"cps": {}, "last_ms": t}
        cps = entry["cps"]
        cps[str(seq)] = int(cps.get(str(seq), 0)) + 1
        entry["last_ms"] = max(int(entry["last_ms"]), t)

    @staticmethod
    def _drop_seq(st: State, seq: int) -> None:
        for name, _label in _COUNTERS:
            counters = st[name]
            for key in list(counters):
                counters[key]["cps"].pop(str(seq), None)
                if not counters[key]["cps"]:
                    del counters[key]

    # Lifecycle ----------------------------------------------------------------------------

    def _resolve_if_due(self, st: State, now_ms: int) -> Alert | None:
        clear_for_ms = int(self.params.clear_for_s * 1000)
        deadline = Lifecycle.resolve_deadline(st, clear_for_ms)
        if deadline is None or now_ms < deadline:
            return None
        # Resolve at the deadline itself, not at whenever the timer or next event ran.
        Lifecycle.update(st, False, deadline, clear_for_ms=clear_for_ms)
        minutes = self.params.clear_for_s / 60
        return self._resolved(st, deadline, f"no late checkpoint acks for {minutes:.0f} min")

    def _resolved(self, st: State, time_ms: int, why: str) -> Alert:
        summary = f"job {st.get('job_name') or st['job_id']}: {why}"
        alert = self.resolve(st, time_ms, summary, self._evidence(st))
        # A new incident needs min_checkpoints late checkpoints of its own.
        self._reset_tracking(st)
        return alert

    def _next_timer(self, st: State) -> int:
        idle_at = int(st["last_event_ms"]) + int(self.params.idle_ttl_s * 1000)
        deadline = Lifecycle.resolve_deadline(st, int(self.params.clear_for_s * 1000))
        return idle_at if deadline is None else min(idle_at, deadline)

    # Output -------------------------------------------------------------------------------

    def _evidence(self, st: State) -> dict[str, Any]:
        late = [r for r in st["checkpoints"] if int(r["late_acks"]) > 0 and not r["aborted"]]
        total = sum(int(r["late_acks"]) for r in late)
        ev: dict[str, Any] = {
            "late_checkpoints": len(late),
            "checkpoint_ids": [int(r["id"]) for r in late][-_MAX_EVIDENCE_IDS:],
            "expired_checkpoints": sum(1 for r in st["checkpoints"] if r["expired"]),
            "late_acks": total,
            "window_s": self.params.window_s,
        }
        # Host and TaskManager shares are of the late acks that name a location (none
        # before Flink 1.9, and `Unknown location` is possible later).
        located = sum(int(r["located_acks"]) for r in late)
        for name, label in _COUNTERS:
            rows = self._top(st[name], label)
            denominator = total if name == "tasks" else located
            for row in rows:
                row["share"] = round(row["late_acks"] / denominator, 3) if denominator else 0.0
            ev[f"top_{name}"] = rows[: self.params.top_n]
        top_hosts = ev["top_hosts"]
        concentrated = bool(top_hosts) and top_hosts[0]["share"] >= self.params.concentration_share
        ev["located_late_acks"] = located
        ev["concentrated"] = concentrated
        ev["concentrated_host"] = top_hosts[0]["host"] if concentrated else None
        return ev

    @staticmethod
    def _top(counters: dict[str, Any], label: str) -> list[dict[str, Any]]:
        counted = sorted(
            (-len(entry["cps"]), -sum(int(n) for n in entry["cps"].values()), key)
            for key, entry in counters.items()
        )
        return [{label: key, "checkpoints": -c, "late_acks": -n} for c, n, key in counted]

    def _firing_summary(self, st: State, ev: dict[str, Any]) -> str:
        job = st.get("job_name") or st["job_id"]
        head = (
            f"job {job}: late checkpoint acks in {ev['late_checkpoints']} checkpoints within "
            f"{self.params.window_s / 60:.0f} min"
        )
        if ev["concentrated"]:
            share = ev["top_hosts"][0]["share"]
            return f"{head}; {share:.0%} of them from host {ev['concentrated_host']}"
        if ev["top_tasks"]:
            top = ev["top_tasks"][0]
            return f"{head}; most often task {top['task']} ({top['checkpoints']} checkpoints)"
        return head

    # State --------------------------------------------------------------------------------

    def _new_state(self, event: Event) -> State:
        st: State = self.identity(event)
        self._reset_tracking(st)
        return st

    @staticmethod
    def _reset_tracking(st: State) -> None:
        st["checkpoints"] = []
        st["next_seq"] = 0
        for name, _label in _COUNTERS:
            st[name] = {}


def _copy(state: State) -> State:
    """A deep copy, so the caller's state is never changed (JSON data: a round trip is fastest)."""
    copied: State = json.loads(json.dumps(state))
    return copied


def _task_key(task: str) -> str:
    """Group attempts of one subtask: ``<vertex id>/<subtask>`` for Flink 1.16+ attempt ids."""
    m = _ATTEMPT_ID_116.match(task)
    if m:
        return f"{m.group(1)}/{m.group(2)}"
    return task[:_MAX_KEY_CHARS]
