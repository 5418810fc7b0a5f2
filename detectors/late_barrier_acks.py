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

State per job (bounded, :class:`LateBarrierAcksState`): at most ``max_checkpoints``
checkpoint attempts in the window (about 140 bytes each), and per-task / per-TaskManager / per-host
counters capped at ``max_tasks`` / ``max_hosts`` / ``max_hosts`` keys, each a
map of at most ``max_checkpoints`` attempt numbers (renumbered before they
reach 4 digits) to ack counts, keys cut to ``_MAX_KEY_CHARS``. When a map is
full the key seen in the fewest checkpoints is dropped, so the repeat offenders
stay. Serialised as JSON: about 1.5-2 KB during a typical incident
(3-5 late checkpoints, 5 tasks, 2 hosts) and at most about 34 KB with the
default caps (measured in the unit tests: 30 tracked checkpoints with 3-digit
attempt numbers, each late on all 32 tasks, 16 TaskManagers and 16 hosts, every
name at the 120-character cut).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from detectors import words
from detectors.base import Detector, DetectorParams, DetectorState, Evidence, Profile, Record, Story
from detectors.model import Alert, Event
from detectors.story import job

#: Longer task / TaskManager / host names are cut to this many characters in the state.
_MAX_KEY_CHARS = 120
#: Attempt numbers are renumbered from 0 when they reach this (state size).
_RENUMBER_AT = 1000
#: Checkpoint ids listed in the evidence at most (the newest ones).
_MAX_EVIDENCE_IDS = 20
#: Flink 1.16+ ExecutionAttemptID: ``<graph id>_<vertex id>_<subtask>_<attempt number>``.
_ATTEMPT_ID_116 = re.compile(r"^[0-9a-f]{32}_([0-9a-f]{32})_(\d+)_\d+$")


class LateBarrierAcksParams(DetectorParams):
    """Thresholds of :class:`LateBarrierAcks`."""

    min_checkpoints: int = Field(default=3, ge=2)
    """Distinct checkpoints with late acks within the window that make an incident."""
    window_s: float = Field(default=3600, gt=0)
    """Late checkpoints older than this (seconds) no longer count; wide enough for three checkpoint
    timeouts of 10 min plus the checkpoint interval."""
    clear_for_s: float = Field(default=1800, ge=0)
    """Resolve once no late ack has arrived for this long (event-time seconds); longer than a
    checkpoint timeout, since late acks of an ongoing incident come only once per expired
    checkpoint."""
    attempt_gap_s: float = Field(default=1200, gt=0)
    """Late acks of the same checkpoint id further apart than this (seconds) belong to different
    attempts (ids restart after a JobManager restart without HA)."""
    concentration_share: float = Field(default=0.6, gt=0, le=1)
    """Share of the located late acks (fraction) from one host that flags the incident as
    concentrated on that host."""
    top_n: int = Field(default=5, ge=1, le=20)
    """Tasks, TaskManagers and hosts listed in the evidence."""
    max_checkpoints: int = Field(default=30, ge=2)
    """Checkpoint attempts tracked per job at most."""
    max_tasks: int = Field(default=32, ge=1)
    """Tasks counted per job at most."""
    max_hosts: int = Field(default=16, ge=1)
    """Hosts, and TaskManagers, counted per job at most."""


class Attempt(Record):
    """One attempt of a checkpoint (ids restart, so one id may have several).

    Attributes:
        seq: The attempt's number in this job's state (the offender counters refer to it).
        id: The checkpoint id.
        first_ms: The first line of the attempt.
        last_ms: The latest line of the attempt.
        late_acks: Its late acks.
        located_acks: Its late acks that name a host.
        expired: It expired.
        aborted: It was declined or failed for another reason (its late acks do not count).
    """

    seq: int
    id: int
    first_ms: int
    last_ms: int
    late_acks: int = 0
    located_acks: int = 0
    expired: bool = False
    aborted: bool = False


class Offender(Record):
    """A task, TaskManager or host that acked late.

    Attributes:
        cps: Attempt number (:attr:`Attempt.seq`) → its late acks from this offender.
        last_ms: The offender's latest late ack.
    """

    cps: dict[int, int] = {}
    last_ms: int


class LateBarrierAcksState(DetectorState):
    """What :class:`LateBarrierAcks` keeps per job.

    Attributes:
        checkpoints: The checkpoint attempts in the window, oldest first.
        next_seq: The number of the next attempt.
        tasks: Late tasks by ``<vertex>/<subtask>`` (or attempt id).
        tms: Late TaskManagers by resource id.
        hosts: Late hosts by name.
    """

    checkpoints: list[Attempt] = []
    next_seq: int = 0
    tasks: dict[str, Offender] = {}
    tms: dict[str, Offender] = {}
    hosts: dict[str, Offender] = {}


class LateCheckpoint(BaseModel):
    """One late checkpoint attempt of the window, for a chart.

    Attributes:
        checkpoint_id: The checkpoint id.
        time_ms: The attempt's first line (its expiry or first late ack).
        late_acks: Its late acks.
        by_host: Its late acks from each host of ``top_hosts``, in that order (numbers, not
            names: a name is listed once); the rest came from other hosts or named none.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    checkpoint_id: int
    time_ms: int
    late_acks: int
    by_host: list[int]


class LateBarrierAcksEvidence(Evidence):
    """What a ``late_barrier_acks`` alert shows.

    Attributes:
        late_checkpoints: Checkpoint attempts with late acks in the window (not aborted).
        checkpoint_ids: Their checkpoint ids, the newest 20.
        expired_checkpoints: Tracked attempts that expired.
        late_acks: The late acks of those checkpoints.
        window_s: The window they are counted in.
        top_tasks: The tasks late in the most checkpoints, ``top_n`` rows ``{"task",
            "checkpoints", "late_acks", "share"}``; the share is of all late acks.
        top_tms: The same per TaskManager (``"tm_id"``); the share is of the located acks.
        top_hosts: The same per host (``"host"``); the share is of the located acks.
        located_late_acks: The late acks that name a location.
        concentrated: One host sent at least ``concentration_share`` of the located acks.
        concentrated_host: That host.
        per_checkpoint: The late checkpoints, the newest 20, with their late acks per host.
    """

    late_checkpoints: int
    checkpoint_ids: list[int]
    expired_checkpoints: int
    late_acks: int
    window_s: float
    top_tasks: list[dict[str, Any]]
    top_tms: list[dict[str, Any]]
    top_hosts: list[dict[str, Any]]
    located_late_acks: int
    concentrated: bool
    concentrated_host: str | None
    per_checkpoint: list[LateCheckpoint] = []


def _headline(story: Story) -> str:
    """``checkpoints of job J get barrier acks after they expired[, concentrated on H]``."""
    host = story.root.evidence.get("concentrated_host")
    where = f", concentrated on {host} (skew or backpressure there)" if host else ""
    return f"checkpoints of {job(story.root)} get barrier acks after they expired{where}"


class LateBarrierAcks(Detector[LateBarrierAcksParams, LateBarrierAcksState]):
    """Fire when late checkpoint acks recur in ``min_checkpoints`` checkpoints of a job."""

    name = "late_barrier_acks"
    profile = Profile(
        runbook=(
            "Barriers reach some tasks after their checkpoint expired. If one host dominates, look "
            "at that host (disk, network, noisy neighbour) or move its TaskManagers; otherwise "
            "look for data skew or backpressure on the late tasks."
        ),
        idle_words="no events from this job any more",
        causal_rank=3,
        headline=_headline,
    )
    signals = {
        "late_ack_checkpoints": "Checkpoints of the job with late barrier acks within window_s.",
        "late_acks": "Late barrier acks of the job within window_s.",
    }
    scope = "job"
    kinds = frozenset(
        {"checkpoint_late_ack", "checkpoint_expired", "checkpoint_declined", "checkpoint_failed"}
    )

    def signal_values(self, state: LateBarrierAcksState) -> dict[str, float]:  # noqa: D102
        live = [r for r in state.checkpoints if not r.aborted]
        return {
            "late_ack_checkpoints": float(sum(1 for r in live if r.late_acks > 0)),
            "late_acks": float(sum(r.late_acks for r in live)),
        }

    def on_event(self, state: LateBarrierAcksState, event: Event) -> list[Alert]:
        """Attach the event to its checkpoint attempt; fire at the threshold."""
        t = event.time_ms
        alerts: list[Alert] = []
        self._prune(state, t)
        cp = event.checkpoint_id
        if cp is not None:
            if event.kind == "checkpoint_late_ack":
                alerts.extend(self._on_late_ack(state, event, cp))
            elif event.kind == "checkpoint_expired" or (
                event.kind == "checkpoint_failed" and "expired" in (event.reason or "").lower()
            ):
                self._on_expired(state, cp, t)
            elif event.kind == "checkpoint_declined" or (
                event.kind == "checkpoint_failed" and event.reason
            ):
                self._on_aborted(state, cp, t)
        return alerts

    def on_timer(self, state: LateBarrierAcksState, now_ms: int) -> list[Alert]:
        """Resolve once late acks stopped for ``clear_for_s``; prune the window.

        Pruned at every deadline, the idle one too: a job gone quiet closes its incident
        with the late acks still in the window.
        """
        alerts = self._resolve_if_due(state, now_ms)
        self._prune(state, now_ms)
        return alerts

    def standing(self, state: LateBarrierAcksState | None) -> str:
        """Late checkpoints in the window against ``min_checkpoints``; what resolves it."""
        if state is None:
            return "no late barrier ack, expiry or decline seen for this job"
        p = self.params
        late = [r for r in state.checkpoints if r.late_acks > 0 and not r.aborted]
        of = "" if state.firing else f" of {p.min_checkpoints}"
        held = f"{len(late)}{of} checkpoints with late acks within {words.span(p.window_s)}"
        if late:
            acks = words.plural(sum(r.late_acks for r in late), "late ack")
            latest = (
                "" if state.firing else f", the latest {words.at(max(r.last_ms for r in late))}"
            )
            held += f" ({acks}{latest})"
        top = self._top(state.hosts, "host", sum(r.located_acks for r in late))
        # A host named only when it sent most of them: a hint of skew, not a list.
        host = (
            f"most from {words.cut(top[0]['host'], 60)} ({top[0]['share']:.0%})"
            if top and late and top[0]["share"] >= 0.5
            else None
        )
        aborted = sum(1 for r in state.checkpoints if r.aborted)
        ignored = f"{aborted} aborted, not counted" if aborted else None
        if state.firing:
            due = self.next_deadline(state)
            resolve = f"resolves at {words.at(due)} if no late ack comes" if due else None
            since = words.firing_since(state.incident_start_ms, state.last_event_ms)
            return words.clause(since, held, host, resolve)
        ages = (
            f"the oldest counts until {words.at(late[0].last_ms + int(p.window_s * 1000))}"
            if late
            else None
        )
        return words.clause(held, host, ignored, ages)

    # Checkpoint attempts --------------------------------------------------------------

    def _on_late_ack(self, st: LateBarrierAcksState, event: Event, cp: int) -> list[Alert]:
        t = event.time_ms
        rec = self._find(st, cp, t) or self._new_record(st, cp, t)
        rec.first_ms = min(rec.first_ms, t)
        rec.last_ms = max(rec.last_ms, t)
        rec.late_acks += 1
        if rec.aborted:
            return []
        seq, cap_tasks, cap_hosts = rec.seq, self.params.max_tasks, self.params.max_hosts
        if event.task:
            self._bump(st.tasks, _task_key(event.task), seq, t, cap_tasks)
        if event.tm_id:
            self._bump(st.tms, event.tm_id[:_MAX_KEY_CHARS], seq, t, cap_hosts)
        if event.host:
            rec.located_acks += 1
            self._bump(st.hosts, event.host[:_MAX_KEY_CHARS], seq, t, cap_hosts)
        if not st.firing and self._late_count(st) < self.params.min_checkpoints:
            return []
        alerts = []
        if not st.firing:
            ev = self.evidence(st)
            alerts.append(self.fire(st, t, self._firing_summary(st, ev), ev))
        # "Late acks keep arriving" is true at this instant only: the clear period starts now
        # and the next late ack restarts it.
        st.clear_since_ms = t
        return alerts

    def _on_expired(self, st: LateBarrierAcksState, cp: int, t: int) -> None:
        rec = self._find(st, cp, t)
        if rec is None or rec.late_acks > 0 or rec.aborted:
            # Late acks only follow an expiry, so an expiry after them is another attempt.
            rec = self._new_record(st, cp, t)
        rec.expired = True

    def _on_aborted(self, st: LateBarrierAcksState, cp: int, t: int) -> None:
        rec = self._find(st, cp, t)
        if rec is None or (rec.expired and not rec.aborted):
            # An expired attempt is over; an abort with its id belongs to a newer attempt.
            rec = self._new_record(st, cp, t)
        elif not rec.aborted and rec.late_acks > 0:
            self._drop_seq(st, rec.seq)
        rec.aborted = True
        rec.last_ms = max(rec.last_ms, t)

    def _find(self, st: LateBarrierAcksState, cp: int, t: int) -> Attempt | None:
        gap_ms = self.params.attempt_gap_s * 1000
        for rec in reversed(st.checkpoints):
            if rec.id == cp and t - rec.last_ms <= gap_ms:
                return rec
        return None

    def _new_record(self, st: LateBarrierAcksState, cp: int, t: int) -> Attempt:
        if st.next_seq >= max(_RENUMBER_AT, 2 * self.params.max_checkpoints):
            self._renumber(st)
        rec = Attempt(seq=st.next_seq, id=cp, first_ms=t, last_ms=t)
        st.next_seq += 1
        st.checkpoints.append(rec)
        while len(st.checkpoints) > self.params.max_checkpoints:
            self._drop_seq(st, st.checkpoints.pop(0).seq)
        return rec

    @staticmethod
    def _renumber(st: LateBarrierAcksState) -> None:
        """Number the tracked attempts 0..n-1 again, so attempt numbers stay short."""
        new_of = {rec.seq: i for i, rec in enumerate(st.checkpoints)}
        for i, rec in enumerate(st.checkpoints):
            rec.seq = i
        for counters in (st.tasks, st.tms, st.hosts):
            for entry in counters.values():
                entry.cps = {new_of[k]: n for k, n in entry.cps.items() if k in new_of}
        st.next_seq = len(st.checkpoints)

    def _prune(self, st: LateBarrierAcksState, now_ms: int) -> None:
        horizon = now_ms - self.params.window_s * 1000
        kept = []
        for rec in st.checkpoints:
            if rec.last_ms >= horizon:
                kept.append(rec)
            else:
                self._drop_seq(st, rec.seq)
        st.checkpoints = kept
        if not kept:
            # Nothing refers to attempt numbers any more: keep them short.
            st.next_seq = 0

    @staticmethod
    def _late_count(st: LateBarrierAcksState) -> int:
        return sum(1 for r in st.checkpoints if r.late_acks > 0 and not r.aborted)

    # Offender counters ------------------------------------------------------------------

    @staticmethod
    def _bump(counters: dict[str, Offender], key: str, seq: int, t: int, cap: int) -> None:
        entry = counters.get(key)
        if entry is None:
            if len(counters) >= cap:
                # Keep the repeat offenders: drop the key seen in the fewest checkpoints.
                victim = min(
                    counters,
                    key=lambda k: (
                        len(counters[k].cps),
                        sum(counters[k].cps.values()),
                        counters[k].last_ms,
                    ),
                )
                del counters[victim]
            entry = counters[key] = Offender(last_ms=t)
        entry.cps[seq] = entry.cps.get(seq, 0) + 1
        entry.last_ms = max(entry.last_ms, t)

    @staticmethod
    def _drop_seq(st: LateBarrierAcksState, seq: int) -> None:
        for counters in (st.tasks, st.tms, st.hosts):
            for key in list(counters):
                counters[key].cps.pop(seq, None)
                if not counters[key].cps:
                    del counters[key]

    # Lifecycle ----------------------------------------------------------------------------

    def next_deadline(self, state: LateBarrierAcksState) -> int | None:
        """The pending resolve."""
        return state.resolve_deadline(int(self.params.clear_for_s * 1000))

    def _resolve_if_due(self, st: LateBarrierAcksState, now_ms: int) -> list[Alert]:
        deadline = self.next_deadline(st)
        if deadline is None or now_ms < deadline:
            return []
        # Resolve at the deadline itself, even when the timer runs late. A new incident
        # then needs min_checkpoints late ones of its own.
        minutes = self.params.clear_for_s / 60
        summary = f"{self.subject(st)}: no late checkpoint acks for {minutes:.0f} min"
        alert = self.resolve(st, deadline, summary, self.evidence(st))
        self._reset_tracking(st)
        return [alert]

    @staticmethod
    def _reset_tracking(st: LateBarrierAcksState) -> None:
        st.checkpoints, st.next_seq = [], 0
        st.tasks, st.tms, st.hosts = {}, {}, {}

    # Output -------------------------------------------------------------------------------

    def evidence(self, state: LateBarrierAcksState) -> LateBarrierAcksEvidence:
        """The late checkpoints in the window and who was late most often."""
        late = [r for r in state.checkpoints if r.late_acks > 0 and not r.aborted]
        total = sum(r.late_acks for r in late)
        # Host and TaskManager shares are of the late acks that name a location (none
        # before Flink 1.9, and `Unknown location` is possible later).
        located = sum(r.located_acks for r in late)
        top_hosts = self._top(state.hosts, "host", located)
        concentrated = bool(top_hosts) and top_hosts[0]["share"] >= self.params.concentration_share
        return LateBarrierAcksEvidence(
            late_checkpoints=len(late),
            checkpoint_ids=[r.id for r in late][-_MAX_EVIDENCE_IDS:],
            expired_checkpoints=sum(1 for r in state.checkpoints if r.expired),
            late_acks=total,
            window_s=self.params.window_s,
            top_tasks=self._top(state.tasks, "task", total),
            top_tms=self._top(state.tms, "tm_id", located),
            top_hosts=top_hosts,
            located_late_acks=located,
            concentrated=concentrated,
            concentrated_host=top_hosts[0]["host"] if concentrated else None,
            per_checkpoint=[
                LateCheckpoint(
                    checkpoint_id=r.id,
                    time_ms=r.first_ms,
                    late_acks=r.late_acks,
                    by_host=[state.hosts[h["host"]].cps.get(r.seq, 0) for h in top_hosts],
                )
                for r in late[-_MAX_EVIDENCE_IDS:]
            ],
        )

    def _top(self, counters: dict[str, Offender], label: str, of: int) -> list[dict[str, Any]]:
        """The ``top_n`` offenders: most checkpoints, then most late acks; shares of ``of``."""
        counted = sorted(
            (-len(entry.cps), -sum(entry.cps.values()), key) for key, entry in counters.items()
        )
        return [
            {
                label: key,
                "checkpoints": -c,
                "late_acks": -n,
                "share": round(-n / of, 3) if of else 0.0,
            }
            for c, n, key in counted[: self.params.top_n]
        ]

    def _firing_summary(self, st: LateBarrierAcksState, ev: LateBarrierAcksEvidence) -> str:
        head = (
            f"{self.subject(st)}: late checkpoint acks in {ev.late_checkpoints} checkpoints "
            f"within {self.params.window_s / 60:.0f} min"
        )
        if ev.concentrated:
            share = ev.top_hosts[0]["share"]
            return f"{head}; {share:.0%} of them from host {ev.concentrated_host}"
        if ev.top_tasks:
            top = ev.top_tasks[0]
            return f"{head}; most often task {top['task']} ({top['checkpoints']} checkpoints)"
        return head


def _task_key(task: str) -> str:
    """Group attempts of one subtask: ``<vertex id>/<subtask>`` for Flink 1.16+ attempt ids."""
    m = _ATTEMPT_ID_116.match(task)
    if m:
        return f"{m.group(1)}/{m.group(2)}"
    return task[:_MAX_KEY_CHARS]
