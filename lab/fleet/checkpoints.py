"""A job's checkpoints: their durations and sizes, what the coordinator logs, their statistics.

Healthy checkpoints complete with a per-job base duration (jitter, rare spikes) and a
state size that wobbles around its level; the checkpoint incidents (expiry, creep, late
acknowledgements, declines) and a job that stops running make them fail, each as
Flink logs it.
"""

from __future__ import annotations

import math
import random
from collections import deque
from dataclasses import dataclass
from typing import Literal

from lab.fleet.identity import Identity, Task
from lab.fleet.ids import hex32
from lab.fleet.records import Records
from lab.fleet.state import NEVER, Break, RunState
from lab.fleet.wording import COMMIT_FAILURE_TRACE, JDK_FRAMES


@dataclass(frozen=True, slots=True)
class Profile:
    """How a job's checkpoints look when it is healthy.

    Attributes:
        base_duration_ms: The usual duration (jitter and rare spikes come on top).
        size_bytes: The level its state size wobbles around.

    """

    base_duration_ms: float
    size_bytes: float

    @staticmethod
    def draw(rng: random.Random) -> Profile:
        """A duration log-uniform in 200..3000 ms and a size log-uniform in 2 MB..800 MB."""
        base_duration_ms = math.exp(rng.uniform(math.log(200), math.log(3000)))
        size_bytes = float(int(math.exp(rng.uniform(math.log(2e6), math.log(8e8)))))
        return Profile(base_duration_ms, size_bytes)


@dataclass(slots=True)
class StateGrowth:
    """state_growth: the job's state size over time (planned by the incident, see incidents.py).

    Attributes:
        onset_ms: When the state starts growing.
        base: The job's usual checkpoint size.
        slope: Growth, bytes per ms.
        bytes_per_ms: How fast a snapshot is written out.
        peak_ms: When the state stops growing (the job fails over soon after).
        resume_ms: Restored: the excess halves every ``half_life_ms`` from here.
        tms: TaskManagers the state is spread over.
        half_life_ms: See ``resume_ms``.

    """

    onset_ms: int
    base: float
    slope: float
    bytes_per_ms: float
    peak_ms: int
    resume_ms: int
    tms: int
    half_life_ms: int = 0

    def size(self, t: int) -> float:
        """The state's size at ``t``, bytes."""
        grown = self.base + self.slope * (min(t, self.peak_ms) - self.onset_ms)
        if t < self.resume_ms:
            return grown
        halvings = (t - self.resume_ms) / self.half_life_ms
        return self.base + (grown - self.base) * math.pow(0.5, halvings)


@dataclass(frozen=True, slots=True)
class Statistics:
    """The checkpoint statistics the JobManager reports (-1: nothing completed yet)."""

    last_duration: int
    last_size: int
    completed: int
    failed: int


class Checkpoints:
    """The job's checkpoints: the trigger schedule, each checkpoint's outcome, the statistics.

    Attributes:
        trigger: When the next checkpoint is triggered (:data:`~lab.fleet.state.NEVER`
            while the job is not running).
        next_id: The next checkpoint's id.
        interval_ms: The checkpoint interval.
        timeout_ms: A checkpoint not complete this long after its trigger expires.
        base_size: The job's usual state size.
        growth: The state's growth, once a ``state_growth`` incident is planned.

    """

    def __init__(
        self,
        identity: Identity,
        records: Records,
        state: RunState,
        profile: Profile,
        skewed_tm: int,
        onsets: dict[str, int],
        rng: random.Random,
        irng: random.Random,
    ) -> None:
        """Checkpoints as ``profile`` says, changed by the checkpoint incidents' ``onsets``.

        ``skewed_tm`` is the TaskManager whose tasks acknowledge late (all of them, as in
        seed 002); ``rng`` is the job's generator, ``irng`` the incidents'.
        """
        spec = identity.spec
        self._id = identity
        self._records = records
        self._state = state
        self._rng = rng
        self._irng = irng
        self._onsets = onsets
        self._skewed_tm = skewed_tm
        self._base_duration_ms = profile.base_duration_ms
        self._size_bytes = profile.size_bytes
        self.base_size = profile.size_bytes
        self._size_wobble = 0.0  # log-space offset from the level, see _cycle
        self.interval_ms = round(spec.checkpoint_interval_s * 1000)
        self.timeout_ms = round(spec.checkpoint_timeout_s * 1000)
        self._max_healthy_ms = max(1, int(self.timeout_ms * 0.8))
        self._creep = 1.0  # checkpoint_creep: duration factor over the job's base
        self._skew_seen = 0  # late_acks_skew: checkpoints since the onset
        self.growth: StateGrowth | None = None
        self.trigger = NEVER
        self.next_id = 1
        # Completed checkpoints a restart may restore: (completed at, id, trigger timestamp).
        self._restorable: deque[tuple[int, int, int]] = deque(maxlen=4)
        # The JobManager's statistics, and their changes not reported yet:
        # (time, duration, size, completed, failed).
        self._stats = Statistics(-1, -1, 0, 0)
        self._consecutive_failed = 0
        self._changes: deque[tuple[int, int, int, int, int]] = deque()

    # -- the schedule ------------------------------------------------------------------

    def start(self) -> None:
        """Schedule the first checkpoint, up to one interval after every task runs."""
        self.trigger = self._state.running_ms + self._rng.randrange(0, self.interval_ms + 1)

    def step(self) -> None:
        """Trigger the checkpoint due now and schedule the next one.

        A job that failed over triggers none: the restart schedules them again once every
        task runs (:meth:`restart_timer`).
        """
        rng, trigger = self._rng, self.trigger
        if not self._state.tasks_running:
            self.trigger = NEVER
            return
        done = self._cycle(self.next_id, trigger)
        self.next_id += 1
        # Fixed-rate trigger with a few ms of scheduling jitter; with one concurrent
        # checkpoint allowed, a checkpoint still pending delays the next one until it
        # completes or expires.
        trigger = max(trigger + self.interval_ms, done + rng.randrange(1, 12))
        self.trigger = trigger + rng.randrange(0, 4)

    def restart_timer(self, t: int) -> None:
        """Every task runs again at ``t``: the checkpoint scheduler starts over."""
        # It starts with a random initial delay of up to one interval.
        self.trigger = t + self._irng.randrange(500, self.interval_ms + 1)

    # -- what the JobManager knows ----------------------------------------------------

    def statistics_at(self, t: int) -> Statistics:
        """The statistics the JobManager reports at ``t`` (``t`` never decreases)."""
        changes = self._changes
        if not changes or changes[0][0] > t:
            return self._stats
        last_duration, last_size, completed, failed = (
            self._stats.last_duration,
            self._stats.last_size,
            self._stats.completed,
            self._stats.failed,
        )
        while changes and changes[0][0] <= t:
            _, dur, size, ok, fail = changes.popleft()
            if ok:
                last_duration, last_size = dur, size
            completed += ok
            failed += fail
        self._stats = Statistics(last_duration, last_size, completed, failed)
        return self._stats

    def new_jobmaster(self, t: int, resubmitted: bool) -> None:
        """A new JobMaster takes the job over at ``t``: its statistics start over.

        ``resubmitted``: the job runs under a new id, from nothing: no checkpoint to
        restore, ids from 1.
        """
        if resubmitted:
            self._restorable.clear()
            self.next_id = 1
        while self._changes and self._changes[0][0] <= t:
            self._changes.popleft()
        self._stats = Statistics(-1, -1, 0, 0)
        self._consecutive_failed = 0

    def restore_text(self, t: int) -> str:
        """What the CheckpointCoordinator logs when it restores the job's state at ``t``."""
        ident = self._id
        done = [c for c in self._restorable if c[0] <= t]
        if not done:
            return "No checkpoint found during restore."
        _, cid, at = done[-1]
        jid = self._state.jid
        if ident.ver < (1, 12):
            return (
                f"Restoring job {jid} from latest valid checkpoint: Checkpoint {cid} @ {at} "
                f"for {jid}."
            )
        if ident.k8s:
            path = f"s3://flink-state/{ident.name}/checkpoints/{jid}/chk-{cid}"
        else:
            path = f"hdfs://nameservice1/flink/checkpoints/{jid}/chk-{cid}"
        return f"Restoring job {jid} from Checkpoint {cid} @ {at} for {jid} located at {path}."

    # -- one checkpoint ----------------------------------------------------------------

    def _cycle(self, n: int, trigger: int) -> int:
        """Log checkpoint ``n`` triggered at ``trigger``; return when it completed or expired."""
        rng, w, jid = self._rng, self._id.wording, self._state.jid
        log = self._records.log
        at = trigger - rng.randrange(0, 3)  # the trigger timestamp precedes the log line
        if w.trigger_type is None:
            text = f"Triggering checkpoint {n} @ {at} for job {jid}."
        else:
            text = f"Triggering checkpoint {n} (type={w.trigger_type}) @ {at} for job {jid}."
        log(trigger, "trigger", "INFO", text, "Checkpoint Timer")

        spike = 3.0 if rng.random() < 0.02 else 1.0
        jitter = rng.lognormvariate(0, 0.25)
        duration = int(self._base_duration_ms * jitter * spike)
        duration = min(max(duration, 5), self._max_healthy_ms)
        onsets = self._onsets
        # From the onset no checkpoint completes, including one already in flight.
        onset = onsets.get("checkpoint_expiry")
        if onset is not None and trigger + duration >= onset:
            return self._expire(n, trigger)
        onset = onsets.get("late_acks_skew")
        if onset is not None and trigger + duration >= onset:
            self._skew_seen += 1
            if self._skew_seen % 2 == 1:
                return self._expire(n, trigger, late="skewed")
        growth = self.growth
        if growth is not None and trigger >= growth.onset_ms:
            # A snapshot of heap state is written out at the storage's pace.
            extra = growth.size(trigger) - growth.base
            duration = max(duration + int(extra / growth.bytes_per_ms), 5)
        brk = next((b for b in self._state.breaks if b.abort_ms > trigger), None)
        if brk is not None and trigger + duration >= brk.stuck_ms:
            return self._lost(n, trigger, brk)
        onset = onsets.get("checkpoint_declines")
        if onset is not None and trigger + duration >= onset:
            return self._decline(n, trigger, duration)
        onset = onsets.get("checkpoint_creep")
        creeping = onset is not None and trigger >= onset
        if creeping:
            step = self._id.spec.creep_per_checkpoint * self._irng.uniform(0.8, 1.2)
            self._creep = min(self._creep * (1 + step), 1e6)
            duration = max(int(self._base_duration_ms * self._creep * jitter * spike), 5)
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
        self._size_wobble = 0.9 * self._size_wobble + rng.gauss(0, 0.01)
        if creeping:
            self._size_bytes *= 1 + step * self._irng.uniform(0.5, 0.9)
        wobbled = self._size_bytes * math.exp(self._size_wobble)
        size = int(self._irng.uniform(2_000, 40_000)) if idle else int(wobbled)
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
        log(done, "complete", "INFO", text, self._records.io_thread(rng))
        self._changes.append((done, duration, size, 1, 0))
        self._restorable.append((done, n, at))
        self._consecutive_failed = 0
        self._chatter(n, trigger, done)
        return done

    def _chatter(self, n: int, trigger: int, done: int) -> None:
        """INFO lines other classes log when a checkpoint completes, plus a rare WARN."""
        ident, state = self._id, self._state
        rng, w, tasks_per_vertex = self._rng, ident.wording, ident.spec.tms_per_job
        log = self._records.log
        budget = ident.spec.chatter_per_checkpoint
        suffix = state.attempt_suffix()
        if w.kafka_source:
            for source in (ident.main_source, ident.side_source)[:budget]:
                log(
                    done + rng.randrange(1, 8),
                    "source_done",
                    "INFO",
                    f"Marking checkpoint {n} as completed for source {source}.",
                    f"SourceCoordinator-{source}",
                )
                budget -= 1
        if w.legacy_sink and budget > 0:
            # Every sink subtask commits its transaction; rotate which ones are shown.
            sinks = [t for t in ident.tasks if t.vertex == 2]
            for j in range(min(budget, len(sinks))):
                task = sinks[(n + j) % len(sinks)]
                k = task.subtask
                # FlinkKafkaProducer cycles through a pool of 5 transactional ids per subtask,
                # and each reuse re-initialises the producer, which bumps its epoch.
                txn = k * 5 + n % 5
                tid = f"{task.name}-{ident.sink_uid}-{txn}"
                # The transaction began when the previous checkpoint's snapshot was taken.
                txn_start = max(trigger - self.interval_ms, state.running_ms) + rng.randrange(1, 40)
                holder = (
                    f"TransactionHolder{{handle=KafkaTransactionState [transactionalId={tid}, "
                    f"producerId={ident.producer_id_base + txn}, epoch={n // 5}], "
                    f"transactionStartTime={txn_start}}}"
                )
                thread = f"{task.name} ({k + 1}/{tasks_per_vertex}){suffix}"
                log(
                    done + rng.randrange(5, 60),
                    "txn_commit",
                    "INFO",
                    f"FlinkKafkaProducer {k + 1}/{tasks_per_vertex} - checkpoint {n} complete, "
                    f"committing transaction {holder} from checkpoint {n}",
                    thread,
                    tm=state.slots[k],
                )
        if rng.random() < 0.01:
            # The Kafka group coordinator moved: one source subtask's async offset commit fails.
            k = rng.randrange(tasks_per_vertex)
            if w.kafka_source:
                site, text = (
                    "commit_failed_reader",
                    f"Failed to commit consumer offsets for checkpoint {n}",
                )
                thread = f"{ident.main_source} -> Map ({k + 1}/{tasks_per_vertex}){suffix}"
            else:
                site, text = (
                    "commit_failed_legacy",
                    f"Consumer subtask {k} failed async Kafka commit.",
                )
                thread = (
                    f"Kafka Fetcher for {ident.main_source} -> Map ({k + 1}/{tasks_per_vertex})"
                )
            t = done + rng.randrange(20, 400)
            log(t, site, "WARN", text, thread, COMMIT_FAILURE_TRACE, tm=state.slots[k])

    # -- checkpoints that fail ---------------------------------------------------------

    def _expire(
        self,
        n: int,
        trigger: int,
        late: Literal["one_tm", "skewed", "stateful", "none"] = "one_tm",
        would_take: int = 0,
    ) -> int:
        """Checkpoint ``n`` never completes: expiry, the 1.15+ WARN, late acknowledgements.

        ``late`` says who acknowledges after the expiry: ``one_tm`` 1-3 tasks of the
        skewed TaskManager; ``skewed`` 3-6 tasks, ~80% of them on the skewed TaskManager;
        ``stateful`` the co-process subtasks still busy when the checkpoint would have
        completed (``would_take`` ms after the trigger); ``none`` nobody.
        """
        ident, state = self._id, self._state
        rng, w, jid = self._rng, ident.wording, state.jid
        log = self._records.log
        expired = trigger + self.timeout_ms
        log(
            expired,
            "expire",
            "INFO",
            f"Checkpoint {n} of job {jid} expired before completing.",
            "Checkpoint Timer",
        )
        last = expired
        if w.failure_manager_warn:
            last = expired + rng.randrange(0, 3)
            trace = (
                "org.apache.flink.runtime.checkpoint.CheckpointException: Checkpoint expired "
                "before completing.\n\tat org.apache.flink.runtime.checkpoint.CheckpointCoordinator"
                f"$CheckpointCanceller.run(CheckpointCoordinator.java:{w.expire_line}){w.frame_jar}\n"
                f"{JDK_FRAMES}"
            )
            log(
                last,
                "failure",
                "WARN",
                f"Failed to trigger or complete checkpoint {n} for job {jid}. "
                f"({self._consecutive_failed} consecutive failed attempts so far)",
                "Checkpoint Timer",
                trace,
            )
        self._consecutive_failed += 1
        self._changes.append((expired, 0, 0, 0, 1))

        acks: list[tuple[int, Task]] = []
        skewed = self._skewed_tm
        if late == "one_tm":
            # All from the skewed TaskManager: its co-process task (the one behind on
            # barrier alignment) first, then its sources.
            on_tm = [t for t in ident.tasks if t.subtask == skewed]
            on_tm.sort(key=lambda t: t.is_source)
            tasks = on_tm[: rng.randint(1, 3)]
            times = sorted(last + rng.randrange(300, 6000) for _ in tasks)
            acks = list(zip(times, tasks, strict=True))
        elif late == "skewed":
            # The skewed TaskManager's tasks (a subtask acknowledges once, so it sends at
            # most one per task), and per each of them one more from another TaskManager
            # with probability 1/4: 80% from the skewed one on average, 3-6 in all with
            # one slot per TaskManager. The others were only a little late; the skewed
            # ones straggle further behind.
            on_tm = [t for t in ident.tasks if t.subtask == skewed]
            others = [t for t in ident.tasks if t.subtask != skewed]
            n_skewed = min(rng.randint(3, 6), len(on_tm))
            n_other = min(sum(rng.random() < 0.25 for _ in range(n_skewed)), len(others))
            acks = [(last + rng.randrange(200, 2500), t) for t in rng.sample(others, n_other)]
            acks += [(last + rng.randrange(800, 6000), t) for t in rng.sample(on_tm, n_skewed)]
        elif late == "stateful":
            # Slow state uploads: the co-process subtasks (the ones with keyed state) finish
            # their snapshots at about the time the whole checkpoint would have taken (or,
            # far into the creep, give up on it when the next checkpoint's barrier comes).
            span = min(would_take, self.timeout_ms * 3 // 2)
            for task in ident.tasks:
                if task.vertex == 2:
                    t = trigger + int(span * rng.uniform(0.85, 1.0))
                    if t > expired:
                        acks.append((max(t, last + 1), task))
        acks.sort(key=lambda a: a[0])
        for t, task in acks:
            aid = state.attempt_id(task)
            if w.late_with_location:
                text = (
                    f"Received late message for now expired checkpoint attempt {n} from task "
                    f"{aid} of job {jid} at {state.slots[task.subtask].location}."
                )
            else:
                text = (
                    f"Received late message for now expired checkpoint attempt {n} from "
                    f"{aid} of job {jid}."
                )
            log(t, "late", "WARN", text, self._records.io_thread(rng))
        return expired

    def _lost(self, n: int, trigger: int, brk: Break) -> int:
        """Checkpoint ``n`` cannot complete: the job stops running before it would.

        It expires if the timeout comes first, else it is aborted (silently, counted as
        failed) when the job fails over.
        """
        if trigger + self.timeout_ms < brk.abort_ms:
            return self._expire(n, trigger, late="none")
        self._changes.append((brk.abort_ms, 0, 0, 0, 1))
        return brk.abort_ms

    def _decline(self, n: int, trigger: int, duration: int) -> int:
        """checkpoint_declines: a stateful task's asynchronous snapshot fails; it declines ``n``.

        The JobManager logs the decline (with the task's location from 1.9 and the cause
        from 1.12), then the failure (1.7-1.10 "Discarding checkpoint", 1.15+ the
        CheckpointFailureManager's WARN); 1.11-1.14 log the decline only.
        """
        ident, state, records = self._id, self._state, self._records
        irng, w, ver, jid = self._irng, ident.wording, ident.ver, state.jid
        t = trigger + max(int(duration * irng.uniform(0.3, 0.9)), 3)
        task = irng.choice([tk for tk in ident.tasks if tk.vertex == 2])
        aid = state.attempt_id(task)
        if ver < (1, 9):
            text = f"Decline checkpoint {n} by task {aid} of job {jid}."
        else:
            text = (
                f"Decline checkpoint {n} by task {aid} of job {jid} at "
                f"{state.slots[task.subtask].location}."
            )
        materialize = self._materialize_failure(n, task)
        records.log(
            t,
            "decline",
            "INFO",
            text,
            records.dispatcher(irng),
            materialize if ver >= (1, 12) else "",
        )
        jar = w.frame_jar if w.log4j2 else ""
        if w.failure_manager_warn:
            t += irng.randrange(0, 3)
            trace = (
                "org.apache.flink.runtime.checkpoint.CheckpointException: Asynchronous task "
                "checkpoint failed.\n\tat org.apache.flink.runtime.messages.checkpoint."
                f"SerializedCheckpointException.unwrap(SerializedCheckpointException.java:51){jar}\n"
                "\tat org.apache.flink.runtime.checkpoint.CheckpointCoordinator."
                f"receiveDeclineMessage(CheckpointCoordinator.java:1035){jar}\n"
                f"Caused by: {materialize}"
            )
            records.log(
                t,
                "failure",
                "WARN",
                f"Failed to trigger or complete checkpoint {n} for job {jid}. "
                f"({self._consecutive_failed} consecutive failed attempts so far)",
                records.io_thread(irng),
                trace,
            )
        elif (1, 7) <= ver < (1, 11):
            trace = (
                "org.apache.flink.runtime.checkpoint.CheckpointException: Checkpoint was "
                "declined.\n\tat org.apache.flink.runtime.checkpoint.CheckpointCoordinator."
                f"receiveDeclineMessage(CheckpointCoordinator.java:905){jar}\n"
                # Before 1.12 the cause is not wrapped for the RPC yet.
                "Caused by: "
                + materialize.replace(
                    "org.apache.flink.util.SerializedThrowable", "java.lang.Exception", 1
                )
            )
            records.log(
                t,
                "discard",
                "INFO",
                f"Discarding checkpoint {n} of job {jid}.",
                records.dispatcher(irng),
                trace,
            )
        self._consecutive_failed += 1
        self._changes.append((t, 0, 0, 0, 1))
        return t

    def _materialize_failure(self, n: int, task: Task) -> str:
        """The cause a task declines checkpoint ``n`` with: its snapshot could not be written.

        On YARN the checkpoint directory's HDFS quota is used up; on Kubernetes the S3
        bucket refuses the upload (rotated credentials). Both last until someone acts, so
        every checkpoint from the onset fails the same way. Causes cross the RPC boundary
        as Flink's ``SerializedThrowable``, which prints the original's message.
        """
        ident = self._id
        w, k, par = ident.wording, task.subtask, ident.spec.tms_per_job
        jar = w.frame_jar if w.log4j2 else ""
        jdk = " [?:?]" if w.log4j2 else ""
        suffix = self._state.attempt_suffix()
        if ident.k8s:
            request = hex32(ident.spec.seed, "s3-request", ident.index, n)[:16].upper()
            cause = (
                "Access Denied (Service: Amazon S3; Status Code: 403; Error Code: AccessDenied; "
                f"Request ID: {request}; Proxy: null)"
            )
            cause_frames = (
                "\tat com.amazonaws.http.AmazonHttpClient$RequestExecutor.handleErrorResponse("
                f"AmazonHttpClient.java:1879){jdk}\n"
                "\tat org.apache.hadoop.fs.s3a.S3AFileSystem.putObjectDirect("
                f"S3AFileSystem.java:2573){jdk}"
            )
        else:
            quota = 10 * 2**40
            used = quota + self._irng.randrange(2**20, 2**30)
            cause = (
                "The DiskSpace quota of /flink/checkpoints is exceeded: quota = "
                f"{quota} B = 10 TB but diskspace consumed = {used} B = {used / 2**40:.2f} TB"
            )
            cause_frames = (
                "\tat org.apache.hadoop.hdfs.server.namenode.DirectoryWithQuotaFeature."
                f"verifyDiskspaceQuota(DirectoryWithQuotaFeature.java:211){jdk}\n"
                "\tat org.apache.hadoop.hdfs.DFSOutputStream.addBlock(DFSOutputStream.java:1081)"
                f"{jdk}"
            )
        return (
            f"org.apache.flink.util.SerializedThrowable: Could not materialize checkpoint {n} "
            f"for operator {task.name} ({k + 1}/{par}){suffix}.\n"
            "\tat org.apache.flink.streaming.runtime.tasks.AsyncCheckpointRunnable."
            f"handleExecutionException(AsyncCheckpointRunnable.java:257){jar}\n"
            "\tat org.apache.flink.streaming.runtime.tasks.AsyncCheckpointRunnable.run("
            f"AsyncCheckpointRunnable.java:128){jar}\n"
            "\tat java.util.concurrent.ThreadPoolExecutor.runWorker(ThreadPoolExecutor.java:1128)"
            f"{jdk}\n"
            f"\tat java.lang.Thread.run(Thread.java:829){jdk}\n"
            f"Caused by: org.apache.flink.util.SerializedThrowable: {cause}\n{cause_frames}"
        )
