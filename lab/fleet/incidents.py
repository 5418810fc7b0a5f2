"""How the incidents that fail a job over play out: their plans, fixed when the job is made.

The checkpoint incidents act where they bite, as each checkpoint is simulated (see
checkpoints.py); those that lose a process are planned ahead: their times are fixed when
the job is created, and what they log is queued on the job's agenda.
"""

from __future__ import annotations

import math
import random
from functools import partial

from lab.fleet.checkpoints import Checkpoints, StateGrowth
from lab.fleet.crashes import Crashes
from lab.fleet.failover import Failover
from lab.fleet.identity import Identity, TaskManager
from lab.fleet.metrics import Metrics, TmState
from lab.fleet.records import Records
from lab.fleet.spec import FleetSpec
from lab.fleet.state import (
    ASK_TIMEOUT_MS,
    HEARTBEAT_INTERVAL_MS,
    HEARTBEAT_TIMEOUT_MS,
    NEVER,
    REGISTRATION_TIMEOUT_MS,
    RESTART_DELAY_MS,
    Agenda,
    Break,
    RunState,
)


def onsets_of(spec: FleetSpec, index: int, start_ms: int) -> dict[str, int]:
    """The earliest onset of each incident kind of job ``index``, epoch ms.

    A new kind adds itself to ``IncidentKind`` and acts where it bites: in
    :class:`~lab.fleet.checkpoints.Checkpoints` for checkpoint outcomes, in
    :class:`~lab.fleet.metrics.Metrics` for TaskManager metrics, or with a plan of its own
    (:class:`IncidentPlan`).
    """
    onsets: dict[str, int] = {}
    for inc in spec.incidents:
        if inc.job_index == index:
            t = start_ms + round(inc.onset_s * 1000)
            onsets[inc.kind] = min(t, onsets.get(inc.kind, t))
    return onsets


class IncidentPlan:
    """The plans of a job's incidents that fail it over.

    Incidents draw from their own generator (``irng``), so that a job's records before an
    onset are the same as without the incident.
    """

    def __init__(
        self,
        identity: Identity,
        records: Records,
        state: RunState,
        agenda: Agenda,
        checkpoints: Checkpoints,
        metrics: Metrics,
        failover: Failover,
        crashes: Crashes,
        irng: random.Random,
        end_ms: int,
    ) -> None:
        """The plans for the job ``identity`` names, until ``end_ms``."""
        self._id = identity
        self._records = records
        self._state = state
        self._agenda = agenda
        self._checkpoints = checkpoints
        self._metrics = metrics
        self._failover = failover
        self._crashes = crashes
        self._irng = irng
        self._end_ms = end_ms

    def plan(self, onsets: dict[str, int]) -> None:
        """Fix the times of the failovers the incidents at ``onsets`` cause; queue their lines."""
        if "idle_heap_leak" in onsets:
            self._plan_leak(onsets["idle_heap_leak"])
        if "tm_memory_kill" in onsets:
            t = onsets["tm_memory_kill"]
            self._plan_memory_kill(0, t, t + self._irng.randrange(40_000, 50_000))
        if "state_growth" in onsets:
            self._plan_state_growth(onsets["state_growth"])
        for kind in ("tm_heap_oom", "tm_direct_oom", "tm_metaspace_oom"):
            if kind in onsets:
                self._plan_jvm_fatal(kind, onsets[kind])
        if "k8s_watch_crash" in onsets:
            self._plan_watch_crash(onsets["k8s_watch_crash"], ha=True)
        if "k8s_watch_crash_no_ha" in onsets:
            self._plan_watch_crash(onsets["k8s_watch_crash_no_ha"], ha=False)
        if "restart_storm" in onsets:
            self._plan_storm(onsets["restart_storm"])

    def _plan_leak(self, onset: int) -> None:
        """Make the job idle from ``onset`` and TaskManager 0 leak until it is killed.

        Every replacement TaskManager runs the same leaking source reader and is killed
        in turn once its heap is full.
        """
        irng = self._irng
        for st in self._metrics.tm_states:
            st.idle_ms = onset
            # An idle TaskManager still allocates (timers, heartbeats, metrics, empty
            # polls), only less: a smaller, slower sawtooth, each cycle 1-2 minutes.
            st.idle_band = (st.ceiling - st.floor) * irng.uniform(0.3, 0.5)
            st.idle_growth = st.idle_band / irng.uniform(60, 120)
        leaking = self._metrics.tm_states[0]
        leak_per_ms = self._id.spec.heap_leak_mb_per_h * 2**20 / 3_600_000
        start = onset
        while True:
            leaking.leak_ms = start
            leaking.leak_per_ms = leak_per_ms
            # Killed when the floor reaches the maximum: no collection frees anything anymore.
            kill = start + math.ceil((leaking.heap_max - leaking.floor) / leak_per_ms)
            # The JobMaster heard from it last up to one heartbeat interval (10 s) before
            # the kill, and gives up heartbeat.timeout (50 s) after that.
            failover = kill + irng.randrange(40_000, 50_000)
            if kill >= self._end_ms:
                return
            replacement = self._plan_memory_kill(0, kill, failover)
            if replacement is None:
                return
            replacement.idle_ms = replacement.next_ms
            replacement.idle_band = leaking.idle_band
            replacement.idle_growth = leaking.idle_growth
            leaking, start = replacement, replacement.next_ms

    def _plan_memory_kill(self, slot: int, kill: int, failover: int) -> TmState | None:
        """The TaskManager of ``slot`` is killed for memory at ``kill``; the job restarts.

        YARN kills a container over its physical memory limit, Kubernetes OOM-kills the
        pod; the ResourceManager reports it when it hears of it, the JobMaster's heartbeat
        times out at ``failover``, the job fails over and is restored from its latest
        checkpoint on a new TaskManager. Returns the new TaskManager's metric state, if it
        starts before the end.
        """
        irng, agenda = self._irng, self._agenda
        dead = self._metrics.taskmanager_at(slot, kill)
        dead.dead_ms = kill
        # YARN reports completed containers on the next allocate heartbeat (every 5 s);
        # Kubernetes' watch reports the pod at once.
        k8s = self._id.k8s
        reported = kill + (irng.randrange(300, 5000) if not k8s else irng.randrange(50, 900))
        tm = dead.tm
        agenda.at(kill, lambda: self._crashes.log_memory_kill(kill, reported, tm, dead))
        self._state.breaks.append(Break(kill, failover))
        agenda.at(failover, lambda: self._failover.heartbeat_failover(failover, tm, rm_side=False))
        # The ResourceManager asks for a new worker as soon as it knows the old one is gone.
        return self._plan_restart(failover, slot, reported + irng.randrange(8_000, 25_000))

    def _plan_restart(
        self, failover: int, slot: int | None, tm_ready: int | None = None
    ) -> TmState | None:
        """After the failover at ``failover``: the restart delay, a restore, a redeploy.

        ``slot``'s TaskManager is replaced by a new one that registers at ``tm_ready``.
        Returns the new TaskManager's metric state, if it starts before the end.
        """
        irng = self._irng
        restart = failover + RESTART_DELAY_MS + irng.randrange(0, 40)
        ready = restart if tm_ready is None else tm_ready
        deploy = max(restart, ready) + irng.randrange(20, 200)
        running = deploy + irng.randrange(1_500, 3_000)
        new: TmState | None = None
        tm: TaskManager | None = None
        if slot is not None:
            tm, new = self._start_taskmanager(slot, ready)
        self._agenda.at(restart, lambda: self._failover.restart(restart, deploy, running, slot, tm))
        return new

    def _start_taskmanager(self, slot: int, ready: int) -> tuple[TaskManager, TmState | None]:
        """A new TaskManager (the next container or pod) for ``slot``, registered at ``ready``.

        Returns it, and its metric state if it starts before the end.
        """
        state = self._state
        number = state.tm_started
        tm = self._id.taskmanager(slot, number)
        state.tm_started += 1
        self._records.add_taskmanager(tm)
        if ready >= self._end_ms:
            return tm, None
        return tm, self._metrics.new_taskmanager(tm, number, ready)

    def _plan_state_growth(self, onset: int) -> None:
        """state_growth (seed 000): heap state grows until one TaskManager thrashes and dies.

        The checkpoint size grows by the same amount every checkpoint interval (keyed state
        of a key space that keeps growing, or windows keeping many copies of every record),
        so that the fullest TaskManager's live heap reaches 90% of its maximum
        ``state_growth_fill_s`` after the onset (heap state takes about 1.5 times its
        serialized size, spread over the TaskManagers). Then it spends its time in GC: it
        stops answering (no metrics, no heartbeats), the ResourceManager's and the
        JobMaster's heartbeats time out 50 s later and the job fails over; a few seconds
        after that the TaskManager gives up with ``OutOfMemoryError: GC overhead limit
        exceeded`` (the FATAL line of Flink's FatalExitExceptionHandler) and exits. The job
        is restored from its latest checkpoint on a new TaskManager; the growth is over by
        then (the key space stops growing), and the state shrinks back, halving its excess
        every checkpoint interval.
        """
        irng, n, agenda = self._irng, self._id.spec.tms_per_job, self._agenda
        checkpoints = self._checkpoints
        base_size = checkpoints.base_size
        victim = max(self._metrics.tm_states, key=lambda st: st.floor)
        target = base_size + n * (0.9 * victim.heap_max - victim.floor) / 1.5
        fill_ms = round(self._id.spec.state_growth_fill_s * 1000)
        thrash = onset + fill_ms
        failover = thrash + HEARTBEAT_TIMEOUT_MS + irng.randrange(0, 3_000)
        fatal = failover + irng.randrange(2_000, 9_000)
        growth = StateGrowth(
            onset_ms=onset,
            base=base_size,
            slope=max(target - base_size, 0.0) / fill_ms,
            bytes_per_ms=irng.uniform(60_000, 150_000),  # 60-150 MB/s to the checkpoint storage
            peak_ms=thrash,
            resume_ms=NEVER,
            tms=n,
            half_life_ms=checkpoints.interval_ms,
        )
        checkpoints.growth = growth
        if thrash >= self._end_ms:
            return
        victim.dead_ms = thrash
        tm = victim.tm
        self._state.breaks.append(Break(thrash, failover))
        agenda.at(failover, lambda: self._failover.heartbeat_failover(failover, tm, rm_side=True))
        agenda.at(
            fatal, lambda: self._crashes.log_jvm_fatal("gc_overhead", fatal, tm, exit_report=True)
        )
        self._plan_restart(failover, tm.index, fatal + irng.randrange(10_000, 25_000))
        growth.resume_ms = failover + RESTART_DELAY_MS

    def _plan_jvm_fatal(self, kind: str, onset: int) -> None:
        """tm_*_oom: TaskManager 0's JVM runs out of one kind of memory at ``onset`` and exits.

        ``tm_heap_oom`` and ``tm_direct_oom``: an RPC thread gets ``Java heap space`` or
        ``Direct buffer memory``; FatalExitExceptionHandler logs FATAL and halts the
        process, the ResourceManager sees the container or pod exit (239), and the
        JobMaster's heartbeat times out 40-50 s later. ``tm_metaspace_oom``: a task fails
        with ``Metaspace`` (enriched from 1.11), the JobManager fails the job over at once
        and the TaskManager shuts itself down (TaskExecutor and TaskManagerRunner ERROR
        lines, exit code 1). Either way the job is restored on a new TaskManager.
        """
        irng, agenda, crashes = self._irng, self._agenda, self._crashes
        st = self._metrics.taskmanager_at(0, onset)
        tm = st.tm
        st.dead_ms = onset
        if kind == "tm_metaspace_oom":
            failover = onset + irng.randrange(5, 80)
            exited = onset + irng.randrange(1_000, 4_000)
            agenda.at(
                onset, lambda: crashes.log_jvm_fatal("metaspace", onset, tm, exit_report=True)
            )
            self._state.breaks.append(Break(onset, failover))
            agenda.at(failover, lambda: crashes.metaspace_failover(failover, tm))
            self._plan_restart(failover, 0, exited + irng.randrange(8_000, 25_000))
            return
        oom = "heap" if kind == "tm_heap_oom" else "direct"
        failover = onset + irng.randrange(40_000, 50_000)
        agenda.at(onset, lambda: crashes.log_jvm_fatal(oom, onset, tm, exit_report=True))
        self._state.breaks.append(Break(onset, failover))
        agenda.at(failover, lambda: self._failover.heartbeat_failover(failover, tm, rm_side=False))
        self._plan_restart(failover, 0, onset + irng.randrange(10_000, 25_000))

    def _plan_watch_crash(self, onset: int, ha: bool) -> None:
        """k8s_watch_crash (seed 003): the JobManager dies of a watch error and comes back.

        The TaskManager pods watch gets HTTP 410 (``too old resource version``), which
        Flink 1.10.2-1.12.1 treats as fatal: ``Fatal error occurred in ResourceManager.``,
        ``Fatal error occurred in the cluster entrypoint.``, the process exits. Kubernetes
        restarts the container 10-30 s later (entrypoint start lines); with HA the job is
        recovered from its latest checkpoint, without HA it is submitted again under a new
        job id, from nothing (``No checkpoint found during restore.``). The TaskManager pods
        survive and take the new deployment.
        """
        irng, agenda, crashes = self._irng, self._agenda, self._crashes
        crash = onset
        start = crash + irng.randrange(10_000, 30_000)
        submit = start + irng.randrange(3_000, 8_000)
        if ha:
            # ZooKeeper revokes the dead JobManager's leadership when its session expires;
            # only then can the new one be granted it.
            lost = crash + irng.randrange(40_000, 60_000)
            submit = max(submit, lost + irng.randrange(500, 3_000))
        else:
            # Without HA nothing tells the TaskManagers of a new leader: they notice the old
            # JobManager is gone when its heartbeat times out.
            lost = crash + HEARTBEAT_TIMEOUT_MS + irng.randrange(0, HEARTBEAT_INTERVAL_MS)
        deploy = submit + irng.randrange(2_000, 10_000)
        running = deploy + irng.randrange(1_500, 3_000)
        self._state.breaks.append(Break(crash, crash))
        agenda.at(crash, lambda: crashes.log_watch_crash(crash))
        old_id = self._id.job_id
        agenda.at(lost, lambda: crashes.log_tms_lost_jobmanager(lost, old_id, heartbeat=not ha))
        agenda.at(start, lambda: crashes.log_entrypoint_start(start, ha))
        agenda.at(submit, lambda: self._failover.jobmaster_start(submit, deploy, running, ha))

    def _plan_storm(self, onset: int) -> None:
        """restart_storm (seed 004): a flapping TaskManager, restarts, lost leadership.

        The last TaskManager's node starts dropping packets at the onset: it stops
        reporting, its heartbeat times out and the job fails over. It keeps re-registering
        its slots, so each restart deploys to it and the deployment times out
        (``Cannot deploy task ... not responding after a rpcTimeout of 10000 ms``, caused
        by an ``AskTimeoutException``): four failovers within about 2.5 minutes, with
        exponential-delay restarts (10, 20, 40 s). During the 80 s backoff after the
        fourth, the JobManager loses ZooKeeper and its leadership (TaskManagers log
        ``JobManager for job ... lost leadership.``) and the job is suspended; the flapping
        TaskManager, cut off from the ResourceManager, dies of a
        ``RegistrationTimeoutException`` 5 minutes after it lost it. Leadership comes back
        5 minutes after it was lost: a new JobMaster restores the latest checkpoint and
        deploys to a new TaskManager. The job is not RUNNING for about 5.5 minutes at the
        end, and barely ran in the 2.5 before.
        """
        irng, n = self._irng, self._id.spec.tms_per_job
        agenda, crashes, failover = self._agenda, self._crashes, self._failover
        slot = n - 1
        st = self._metrics.taskmanager_at(slot, onset)
        tm = st.tm
        st.dead_ms = onset
        fail = onset + irng.randrange(40_000, 50_000)
        self._state.breaks.append(Break(onset, fail))
        first = fail
        agenda.at(fail, lambda: failover.heartbeat_failover(first, tm, rm_side=True))
        delay = RESTART_DELAY_MS
        for _ in range(3):
            restart = fail + delay + irng.randrange(0, 40)
            deploy = restart + irng.randrange(50, 400)
            fail = deploy + ASK_TIMEOUT_MS + irng.randrange(5, 60)
            agenda.at(restart, partial(failover.restart, restart, deploy, None, None, None))
            agenda.at(fail, partial(crashes.deploy_timeout, fail, deploy, tm))
            delay *= 2
        lost = fail + irng.randrange(20_000, 40_000)
        agenda.at(lost, lambda: crashes.leadership_lost(lost))
        regto = first + REGISTRATION_TIMEOUT_MS + irng.randrange(0, 2_000)
        agenda.at(regto, lambda: crashes.log_registration_timeout(regto, tm))
        regained = lost + 300_000 + irng.randrange(0, 20_000)
        ready = regto + irng.randrange(15_000, 40_000)
        new_tm, _ = self._start_taskmanager(slot, ready)
        deploy = max(regained, ready) + irng.randrange(200, 2_000)
        running = deploy + irng.randrange(1_500, 3_000)
        agenda.at(
            regained,
            lambda: failover.jobmaster_start(regained, deploy, running, True, (slot, new_tm)),
        )
