"""How incidents play out: checkpoints that fail, and the plans of those that fail a job over."""

from __future__ import annotations

import math
from functools import partial
from typing import Literal

from lab.fleet.base import (
    _ASK_TIMEOUT_MS,
    _HEARTBEAT_INTERVAL_MS,
    _HEARTBEAT_TIMEOUT_MS,
    _NEVER,
    _REGISTRATION_TIMEOUT_MS,
    _RESTART_DELAY_MS,
    _Break,
    _Task,
    _TaskManager,
)
from lab.fleet.crashes import _Crashes
from lab.fleet.ids import _hex32
from lab.fleet.metrics import _Growth, _TmState
from lab.fleet.wording import _JDK_FRAMES


class _Incidents(_Crashes):
    """The job's incidents: failed checkpoints as they happen, failovers planned ahead."""

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
        rng, w, jid = self.rng, self.w, self.jid
        expired = trigger + self.timeout_ms
        self._log(
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
                f"{_JDK_FRAMES}"
            )
            self._log(
                last,
                "failure",
                "WARN",
                f"Failed to trigger or complete checkpoint {n} for job {jid}. "
                f"({self.consecutive_failed} consecutive failed attempts so far)",
                "Checkpoint Timer",
                trace,
            )
        self.consecutive_failed += 1
        self.changes.append((expired, 0, 0, 0, 1))

        acks: list[tuple[int, _Task]] = []
        skewed = self.skewed_tm
        if late == "one_tm":
            # All from the skewed TaskManager: its co-process task (the one behind on
            # barrier alignment) first, then its sources.
            on_tm = [t for t in self.tasks if t.subtask == skewed]
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
            on_tm = [t for t in self.tasks if t.subtask == skewed]
            others = [t for t in self.tasks if t.subtask != skewed]
            n_skewed = min(rng.randint(3, 6), len(on_tm))
            n_other = min(sum(rng.random() < 0.25 for _ in range(n_skewed)), len(others))
            acks = [(last + rng.randrange(200, 2500), t) for t in rng.sample(others, n_other)]
            acks += [(last + rng.randrange(800, 6000), t) for t in rng.sample(on_tm, n_skewed)]
        elif late == "stateful":
            # Slow state uploads: the co-process subtasks (the ones with keyed state) finish
            # their snapshots at about the time the whole checkpoint would have taken (or,
            # far into the creep, give up on it when the next checkpoint's barrier comes).
            span = min(would_take, self.timeout_ms * 3 // 2)
            for task in self.tasks:
                if task.vertex == 2:
                    t = trigger + int(span * rng.uniform(0.85, 1.0))
                    if t > expired:
                        acks.append((max(t, last + 1), task))
        acks.sort(key=lambda a: a[0])
        for t, task in acks:
            aid = self._attempt_id(task)
            if w.late_with_location:
                text = (
                    f"Received late message for now expired checkpoint attempt {n} from task "
                    f"{aid} of job {jid} at {self.slots[task.subtask].location}."
                )
            else:
                text = (
                    f"Received late message for now expired checkpoint attempt {n} from "
                    f"{aid} of job {jid}."
                )
            self._log(t, "late", "WARN", text, self._io_thread())
        return expired

    def _lost(self, n: int, trigger: int, brk: _Break) -> int:
        """Checkpoint ``n`` cannot complete: the job stops running before it would.

        It expires if the timeout comes first, else it is aborted (silently, counted as
        failed) when the job fails over.
        """
        if trigger + self.timeout_ms < brk.abort_ms:
            return self._expire(n, trigger, late="none")
        self.changes.append((brk.abort_ms, 0, 0, 0, 1))
        return brk.abort_ms

    def _decline(self, n: int, trigger: int, duration: int) -> int:
        """checkpoint_declines: a stateful task's asynchronous snapshot fails; it declines ``n``.

        The JobManager logs the decline (with the task's location from 1.9 and the cause
        from 1.12), then the failure (1.7-1.10 "Discarding checkpoint", 1.15+ the
        CheckpointFailureManager's WARN); 1.11-1.14 log the decline only.
        """
        irng, w, ver, jid = self.irng, self.w, self.ver, self.jid
        t = trigger + max(int(duration * irng.uniform(0.3, 0.9)), 3)
        task = irng.choice([tk for tk in self.tasks if tk.vertex == 2])
        aid = self._attempt_id(task)
        if ver < (1, 9):
            text = f"Decline checkpoint {n} by task {aid} of job {jid}."
        else:
            text = (
                f"Decline checkpoint {n} by task {aid} of job {jid} at "
                f"{self.slots[task.subtask].location}."
            )
        materialize = self._materialize_failure(n, task)
        self._log(
            t, "decline", "INFO", text, self._idispatcher(), materialize if ver >= (1, 12) else ""
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
            self._log(
                t,
                "failure",
                "WARN",
                f"Failed to trigger or complete checkpoint {n} for job {jid}. "
                f"({self.consecutive_failed} consecutive failed attempts so far)",
                self._io_thread_i(),
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
            self._log(
                t,
                "discard",
                "INFO",
                f"Discarding checkpoint {n} of job {jid}.",
                self._idispatcher(),
                trace,
            )
        self.consecutive_failed += 1
        self.changes.append((t, 0, 0, 0, 1))
        return t

    def _materialize_failure(self, n: int, task: _Task) -> str:
        """The cause a task declines checkpoint ``n`` with: its snapshot could not be written.

        On YARN the checkpoint directory's HDFS quota is used up; on Kubernetes the S3
        bucket refuses the upload (rotated credentials). Both last until someone acts, so
        every checkpoint from the onset fails the same way. Causes cross the RPC boundary
        as Flink's ``SerializedThrowable``, which prints the original's message.
        """
        w, k, par = self.w, task.subtask, self.spec.tms_per_job
        jar = w.frame_jar if w.log4j2 else ""
        jdk = " [?:?]" if w.log4j2 else ""
        suffix = self._attempt_suffix()
        if self.k8s:
            request = _hex32(self.spec.seed, "s3-request", self.index, n)[:16].upper()
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
            used = quota + self.irng.randrange(2**20, 2**30)
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

    # -- incidents that fail the job over: plans ---------------------------------------

    def _plan_incidents(self) -> None:
        """Fix the times of the failovers the job's incidents cause, and queue their lines."""
        onsets = self.onset_ms
        if "idle_heap_leak" in onsets:
            self._plan_leak(onsets["idle_heap_leak"])
        if "tm_memory_kill" in onsets:
            t = onsets["tm_memory_kill"]
            self._plan_memory_kill(0, t, t + self.irng.randrange(40_000, 50_000))
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
        irng = self.irng
        for st in self.tm_states:
            st.idle_ms = onset
            # An idle TaskManager still allocates (timers, heartbeats, metrics, empty
            # polls), only less: a smaller, slower sawtooth, each cycle 1-2 minutes.
            st.idle_band = (st.ceiling - st.floor) * irng.uniform(0.3, 0.5)
            st.idle_growth = st.idle_band / irng.uniform(60, 120)
        leaking = self.tm_states[0]
        leak_per_ms = self.spec.heap_leak_mb_per_h * 2**20 / 3_600_000
        start = onset
        while True:
            leaking.leak_ms = start
            leaking.leak_per_ms = leak_per_ms
            # Killed when the floor reaches the maximum: no collection frees anything anymore.
            kill = start + math.ceil((leaking.heap_max - leaking.floor) / leak_per_ms)
            # The JobMaster heard from it last up to one heartbeat interval (10 s) before
            # the kill, and gives up heartbeat.timeout (50 s) after that.
            failover = kill + irng.randrange(40_000, 50_000)
            if kill >= self.end_ms:
                return
            replacement = self._plan_memory_kill(0, kill, failover)
            if replacement is None:
                return
            replacement.idle_ms = replacement.next_ms
            replacement.idle_band = leaking.idle_band
            replacement.idle_growth = leaking.idle_growth
            leaking, start = replacement, replacement.next_ms

    def _plan_memory_kill(self, slot: int, kill: int, failover: int) -> _TmState | None:
        """The TaskManager of ``slot`` is killed for memory at ``kill``; the job restarts.

        YARN kills a container over its physical memory limit, Kubernetes OOM-kills the
        pod; the ResourceManager reports it when it hears of it, the JobMaster's heartbeat
        times out at ``failover``, the job fails over and is restored from its latest
        checkpoint on a new TaskManager. Returns the new TaskManager's metric state, if it
        starts before the end.
        """
        irng = self.irng
        dead = self._tm_state_of(slot, kill)
        dead.dead_ms = kill
        # YARN reports completed containers on the next allocate heartbeat (every 5 s);
        # Kubernetes' watch reports the pod at once.
        reported = kill + (irng.randrange(300, 5000) if not self.k8s else irng.randrange(50, 900))
        tm = dead.tm
        self._at(kill, lambda: self._log_memory_kill(kill, reported, tm, dead))
        self.breaks.append(_Break(kill, failover))
        self._at(failover, lambda: self._heartbeat_failover(failover, tm, rm_side=False))
        # The ResourceManager asks for a new worker as soon as it knows the old one is gone.
        return self._plan_restart(failover, slot, reported + irng.randrange(8_000, 25_000))

    def _plan_restart(
        self, failover: int, slot: int | None, tm_ready: int | None = None
    ) -> _TmState | None:
        """After the failover at ``failover``: the restart delay, a restore, a redeploy.

        ``slot``'s TaskManager is replaced by a new one that registers at ``tm_ready``.
        Returns the new TaskManager's metric state, if it starts before the end.
        """
        irng = self.irng
        restart = failover + _RESTART_DELAY_MS + irng.randrange(0, 40)
        ready = restart if tm_ready is None else tm_ready
        deploy = max(restart, ready) + irng.randrange(20, 200)
        running = deploy + irng.randrange(1_500, 3_000)
        new: _TmState | None = None
        tm: _TaskManager | None = None
        if slot is not None:
            tm, new = self._start_taskmanager(slot, ready)
        self._at(restart, lambda: self._restart(restart, deploy, running, slot, tm))
        return new

    def _start_taskmanager(self, slot: int, ready: int) -> tuple[_TaskManager, _TmState | None]:
        """A new TaskManager (the next container or pod) for ``slot``, registered at ``ready``.

        Returns it, and its metric state if it starts before the end.
        """
        tm = self._taskmanager(slot, self.tm_started)
        self.tm_started += 1
        self.kube_tm[tm.tm_id] = self._kube(tm.tm_id, tm.node)
        return tm, self._new_tm_state(tm, ready) if ready < self.end_ms else None

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
        irng, n = self.irng, self.spec.tms_per_job
        victim = max(self.tm_states, key=lambda st: st.floor)
        target = self.base_size + n * (0.9 * victim.heap_max - victim.floor) / 1.5
        fill_ms = round(self.spec.state_growth_fill_s * 1000)
        thrash = onset + fill_ms
        failover = thrash + _HEARTBEAT_TIMEOUT_MS + irng.randrange(0, 3_000)
        fatal = failover + irng.randrange(2_000, 9_000)
        growth = _Growth(
            onset_ms=onset,
            base=self.base_size,
            slope=max(target - self.base_size, 0.0) / fill_ms,
            bytes_per_ms=irng.uniform(60_000, 150_000),  # 60-150 MB/s to the checkpoint storage
            peak_ms=thrash,
            resume_ms=_NEVER,
            tms=n,
            half_life_ms=self.interval_ms,
        )
        self.growth = growth
        if thrash >= self.end_ms:
            return
        victim.dead_ms = thrash
        tm = victim.tm
        self.breaks.append(_Break(thrash, failover))
        self._at(failover, lambda: self._heartbeat_failover(failover, tm, rm_side=True))
        self._at(fatal, lambda: self._log_jvm_fatal("gc_overhead", fatal, tm, exit_report=True))
        self._plan_restart(failover, tm.index, fatal + irng.randrange(10_000, 25_000))
        growth.resume_ms = failover + _RESTART_DELAY_MS

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
        irng = self.irng
        st = self._tm_state_of(0, onset)
        tm = st.tm
        st.dead_ms = onset
        if kind == "tm_metaspace_oom":
            failover = onset + irng.randrange(5, 80)
            exited = onset + irng.randrange(1_000, 4_000)
            self._at(onset, lambda: self._log_jvm_fatal("metaspace", onset, tm, exit_report=True))
            self.breaks.append(_Break(onset, failover))
            self._at(failover, lambda: self._metaspace_failover(failover, tm))
            self._plan_restart(failover, 0, exited + irng.randrange(8_000, 25_000))
            return
        oom = "heap" if kind == "tm_heap_oom" else "direct"
        failover = onset + irng.randrange(40_000, 50_000)
        self._at(onset, lambda: self._log_jvm_fatal(oom, onset, tm, exit_report=True))
        self.breaks.append(_Break(onset, failover))
        self._at(failover, lambda: self._heartbeat_failover(failover, tm, rm_side=False))
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
        irng = self.irng
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
            lost = crash + _HEARTBEAT_TIMEOUT_MS + irng.randrange(0, _HEARTBEAT_INTERVAL_MS)
        deploy = submit + irng.randrange(2_000, 10_000)
        running = deploy + irng.randrange(1_500, 3_000)
        self.breaks.append(_Break(crash, crash))
        self._at(crash, lambda: self._log_watch_crash(crash))
        old_id = self.job_id
        self._at(lost, lambda: self._log_tms_lost_jobmanager(lost, old_id, heartbeat=not ha))
        self._at(start, lambda: self._log_entrypoint_start(start, ha))
        self._at(submit, lambda: self._jobmaster_start(submit, deploy, running, ha))

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
        irng, n = self.irng, self.spec.tms_per_job
        slot = n - 1
        st = self._tm_state_of(slot, onset)
        tm = st.tm
        st.dead_ms = onset
        fail = onset + irng.randrange(40_000, 50_000)
        self.breaks.append(_Break(onset, fail))
        first = fail
        self._at(fail, lambda: self._heartbeat_failover(first, tm, rm_side=True))
        delay = _RESTART_DELAY_MS
        for _ in range(3):
            restart = fail + delay + irng.randrange(0, 40)
            deploy = restart + irng.randrange(50, 400)
            fail = deploy + _ASK_TIMEOUT_MS + irng.randrange(5, 60)
            self._at(restart, partial(self._restart, restart, deploy, None, None, None))
            self._at(fail, partial(self._deploy_timeout, fail, deploy, tm))
            delay *= 2
        lost = fail + irng.randrange(20_000, 40_000)
        self._at(lost, lambda: self._leadership_lost(lost))
        regto = first + _REGISTRATION_TIMEOUT_MS + irng.randrange(0, 2_000)
        self._at(regto, lambda: self._log_registration_timeout(regto, tm))
        regained = lost + 300_000 + irng.randrange(0, 20_000)
        ready = regto + irng.randrange(15_000, 40_000)
        new_tm, _ = self._start_taskmanager(slot, ready)
        deploy = max(regained, ready) + irng.randrange(200, 2_000)
        running = deploy + irng.randrange(1_500, 3_000)
        self._at(
            regained,
            lambda: self._jobmaster_start(regained, deploy, running, True, (slot, new_tm)),
        )
