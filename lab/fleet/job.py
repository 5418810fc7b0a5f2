"""One simulated job's normal life (start-up, checkpoints), and the fleet of them."""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator
from operator import attrgetter

from lab.fleet.base import _NEVER
from lab.fleet.incidents import _Incidents
from lab.fleet.spec import FleetSpec, SimRecord
from lab.fleet.wording import _COMMIT_FAILURE_TRACE


class _Job(_Incidents):
    """One simulated job: its constants, its state and the records it produces.

    Records are pushed onto a heap as whole checkpoint cycles are simulated, and handed
    out in event-time order once no later push can precede them: everything a cycle
    logs happens at or after its trigger, so all records before the next trigger are
    final. Incidents that fail the job over are planned when the job is created (their
    times are fixed then) and logged by actions that run in event-time order between the
    cycles, each logging at or after its own time; the lines they write may name
    checkpoints, so they are written when the simulation reaches them.

    Each concern is a layer of its own, each built on the one before: ``_JobBase``
    (identity, graph, state, writing records), ``_Metrics``, ``_Failover`` (failed tasks,
    restart, redeploy), ``_Crashes`` (what dying processes log), ``_Incidents`` (failed
    checkpoints, failover plans), and this class: the start-up, the checkpoint cycles,
    and the loop that runs them with the planned actions.
    """

    def __init__(self, spec: FleetSpec, index: int, start_ms: int, end_ms: int) -> None:
        super().__init__(spec, index, start_ms, end_ms)
        self._init_metrics(start_ms)
        self._plan_incidents()

    def records(self) -> Iterator[SimRecord]:
        """All records of this job before ``end_ms``, in event-time order."""
        self._startup()
        rng = self.rng
        self.trigger = self.running_ms + rng.randrange(0, self.interval_ms + 1)
        while True:
            action_ms = self.actions[0][0] if self.actions else _NEVER
            now = min(self.trigger, action_ms)
            if now >= self.end_ms:
                break
            self._metrics_until(now)
            yield from self._ready(now)
            if action_ms <= self.trigger:
                heapq.heappop(self.actions)[2]()
                continue
            trigger = self.trigger
            if not self.tasks_running:
                # Failed over: the restart triggers again once every task runs.
                self.trigger = _NEVER
                continue
            done = self._cycle(self.checkpoint, trigger)
            self.checkpoint += 1
            # Fixed-rate trigger with a few ms of scheduling jitter; with one concurrent
            # checkpoint allowed, a checkpoint still pending delays the next one until it
            # completes or expires.
            trigger = max(trigger + self.interval_ms, done + rng.randrange(1, 12))
            self.trigger = trigger + rng.randrange(0, 4)
        self._metrics_until(self.end_ms)
        yield from self._ready(self.end_ms)

    def _ready(self, horizon: int) -> Iterator[SimRecord]:
        heap = self.heap
        while heap and heap[0][0] < horizon:
            yield heapq.heappop(heap)[2]

    # -- the normal life ---------------------------------------------------------------

    def _startup(self) -> None:
        """Log the JobManager's view of the job going to RUNNING (ExecutionGraph lines)."""
        rng, t0, n = self.rng, self.start_ms, self.spec.tms_per_job
        self._log(
            t0,
            "job_state",
            "INFO",
            f"Job {self.name} ({self.jid}) switched from state CREATED to RUNNING.",
            self._dispatcher(),
        )
        # (state, share of the start-up span after which a task reaches it): scheduling is
        # immediate, slot allocation and deployment take most of the time.
        steps = [("SCHEDULED", 0.0), ("DEPLOYING", 0.3), ("INITIALIZING", 0.6), ("RUNNING", 0.95)]
        if not self.w.initializing:
            del steps[2]
        span = self.running_ms - t0
        for task in self.tasks:
            prev = "CREATED"
            for state, share in steps:
                t = t0 + 1 + task.vertex + int(span * share) + rng.randrange(0, span // 20)
                t = min(t, self.running_ms)
                self._log(
                    t,
                    "task_state",
                    "INFO",
                    f"{task.name} ({task.subtask + 1}/{n}) ({task.attempt_id}) switched from "
                    f"{prev} to {state}.",
                    self._dispatcher(),
                )
                prev = state

    def _cycle(self, n: int, trigger: int) -> int:
        """Log checkpoint ``n`` triggered at ``trigger``; return when it completed or expired."""
        rng, w, jid = self.rng, self.w, self.jid
        at = trigger - rng.randrange(0, 3)  # the trigger timestamp precedes the log line
        if w.trigger_type is None:
            text = f"Triggering checkpoint {n} @ {at} for job {jid}."
        else:
            text = f"Triggering checkpoint {n} (type={w.trigger_type}) @ {at} for job {jid}."
        self._log(trigger, "trigger", "INFO", text, "Checkpoint Timer")

        spike = 3.0 if rng.random() < 0.02 else 1.0
        jitter = rng.lognormvariate(0, 0.25)
        duration = int(self.base_duration_ms * jitter * spike)
        duration = min(max(duration, 5), self.max_healthy_ms)
        onsets = self.onset_ms
        # From the onset no checkpoint completes, including one already in flight.
        onset = onsets.get("checkpoint_expiry")
        if onset is not None and trigger + duration >= onset:
            return self._expire(n, trigger)
        onset = onsets.get("late_acks_skew")
        if onset is not None and trigger + duration >= onset:
            self.skew_seen += 1
            if self.skew_seen % 2 == 1:
                return self._expire(n, trigger, late="skewed")
        growth = self.growth
        if growth is not None and trigger >= growth.onset_ms:
            # A snapshot of heap state is written out at the storage's pace.
            extra = growth.size(trigger) - growth.base
            duration = max(duration + int(extra / growth.bytes_per_ms), 5)
        brk = next((b for b in self.breaks if b.abort_ms > trigger), None)
        if brk is not None and trigger + duration >= brk.stuck_ms:
            return self._lost(n, trigger, brk)
        onset = onsets.get("checkpoint_declines")
        if onset is not None and trigger + duration >= onset:
            return self._decline(n, trigger, duration)
        onset = onsets.get("checkpoint_creep")
        creeping = onset is not None and trigger >= onset
        if creeping:
            step = self.spec.creep_per_checkpoint * self.irng.uniform(0.8, 1.2)
            self.creep = min(self.creep * (1 + step), 1e6)
            duration = max(int(self.base_duration_ms * self.creep * jitter * spike), 5)
            if duration >= self.timeout_ms:
                return self._expire(n, trigger, late="stateful", would_take=duration)
        onset = onsets.get("idle_heap_leak")
        idle = onset is not None and trigger >= onset
        if idle:
            # Nothing to process: barriers pass at once and there is hardly any new state.
            duration = max(int(duration * 0.3), 5)

        # A healthy job's state wobbles around its level (key space and TTLs bound it): a
        # mean-reverting AR(1) in log space. A random walk would climb 20 % in
        # five minutes on about one job in 500 an hour, and that is growth, not health.
        self.size_wobble = 0.9 * self.size_wobble + rng.gauss(0, 0.01)
        if creeping:
            self.size_bytes *= 1 + step * self.irng.uniform(0.5, 0.9)
        wobbled = self.size_bytes * math.exp(self.size_wobble)
        size = int(self.irng.uniform(2_000, 40_000)) if idle else int(wobbled)
        if growth is not None and trigger >= growth.onset_ms:
            size = int(size * growth.size(trigger) / growth.base)
        if w.completed_new:
            finalization = rng.randrange(0, 6)
            done = trigger + duration + finalization
            text = (
                f"Completed checkpoint {n} for job {jid} ({size} bytes, "
                f"checkpointDuration={duration} ms, finalizationTime={finalization} ms)."
            )
        else:
            done = trigger + duration
            text = f"Completed checkpoint {n} for job {jid} ({size} bytes in {duration} ms)."
        self._log(done, "complete", "INFO", text, self._io_thread())
        self.changes.append((done, duration, size, 1, 0))
        self.restorable.append((done, n, at))
        self.consecutive_failed = 0
        self._chatter(n, trigger, done)
        return done

    def _chatter(self, n: int, trigger: int, done: int) -> None:
        """INFO lines other classes log when a checkpoint completes, plus a rare WARN."""
        rng, w, tasks_per_vertex = self.rng, self.w, self.spec.tms_per_job
        budget = self.spec.chatter_per_checkpoint
        suffix = self._attempt_suffix()
        if w.kafka_source:
            for source in (self.main_source, self.side_source)[:budget]:
                self._log(
                    done + rng.randrange(1, 8),
                    "source_done",
                    "INFO",
                    f"Marking checkpoint {n} as completed for source {source}.",
                    f"SourceCoordinator-{source}",
                )
                budget -= 1
        if w.legacy_sink and budget > 0:
            # Every sink subtask commits its transaction; rotate which ones are shown.
            sinks = [t for t in self.tasks if t.vertex == 2]
            for j in range(min(budget, len(sinks))):
                task = sinks[(n + j) % len(sinks)]
                k = task.subtask
                # FlinkKafkaProducer cycles through a pool of 5 transactional ids per subtask,
                # and each reuse re-initialises the producer, which bumps its epoch.
                txn = k * 5 + n % 5
                tid = f"{task.name}-{self.sink_uid}-{txn}"
                # The transaction began when the previous checkpoint's snapshot was taken.
                txn_start = max(trigger - self.interval_ms, self.running_ms) + rng.randrange(1, 40)
                holder = (
                    f"TransactionHolder{{handle=KafkaTransactionState [transactionalId={tid}, "
                    f"producerId={self.producer_id_base + txn}, epoch={n // 5}], "
                    f"transactionStartTime={txn_start}}}"
                )
                thread = f"{task.name} ({k + 1}/{tasks_per_vertex}){suffix}"
                self._log(
                    done + rng.randrange(5, 60),
                    "txn_commit",
                    "INFO",
                    f"FlinkKafkaProducer {k + 1}/{tasks_per_vertex} - checkpoint {n} complete, "
                    f"committing transaction {holder} from checkpoint {n}",
                    thread,
                    tm=self.slots[k],
                )
        if rng.random() < 0.01:
            # The Kafka group coordinator moved: one source subtask's async offset commit fails.
            k = rng.randrange(tasks_per_vertex)
            if w.kafka_source:
                site, text = (
                    "commit_failed_reader",
                    f"Failed to commit consumer offsets for checkpoint {n}",
                )
                thread = f"{self.main_source} -> Map ({k + 1}/{tasks_per_vertex}){suffix}"
            else:
                site, text = (
                    "commit_failed_legacy",
                    f"Consumer subtask {k} failed async Kafka commit.",
                )
                thread = f"Kafka Fetcher for {self.main_source} -> Map ({k + 1}/{tasks_per_vertex})"
            t = done + rng.randrange(20, 400)
            self._log(t, site, "WARN", text, thread, _COMMIT_FAILURE_TRACE, tm=self.slots[k])


def generate(spec: FleetSpec, start_ms: int, duration_s: float) -> Iterator[SimRecord]:
    """All records of the fleet from ``start_ms`` for ``duration_s``, in event-time order.

    Deterministic: the same spec and start give the same records. Lazy: records are
    produced as they are consumed, with memory bounded by about one checkpoint cycle
    per job. Records with equal times keep a stable order.

    Args:
        spec: The fleet and its incidents.
        start_ms: Event time of the start, epoch milliseconds UTC.
        duration_s: Simulated seconds; records at or after ``start_ms + duration`` are cut.

    Returns:
        An iterator of :class:`SimRecord`, ``time_ms`` non-decreasing.

    Raises:
        ValueError: ``duration_s`` is negative.

    """
    if duration_s < 0:
        msg = f"duration_s must be >= 0, got {duration_s}"
        raise ValueError(msg)
    end_ms = start_ms + round(duration_s * 1000)
    first = spec.first_job
    jobs = [_Job(spec, i, start_ms, end_ms) for i in range(first, first + spec.jobs)]
    return heapq.merge(*(j.records() for j in jobs), key=attrgetter("time_ms"))
