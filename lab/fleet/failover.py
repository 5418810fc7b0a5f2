"""How a job fails over and comes back: failed tasks, restart, restore, redeploy."""

from __future__ import annotations

from collections.abc import Callable

from lab.fleet.base import _Task, _TaskManager
from lab.fleet.ids import job_id
from lab.fleet.metrics import _Metrics


class _Failover(_Metrics):
    """The job's side of a failover, whatever caused it, and of a new JobMaster."""

    def _job_to(self, t: int, state: str, trace: str = "") -> None:
        """Log the job's switch from its current state to ``state`` (ExecutionGraph)."""
        self._log(
            t,
            "job_state",
            "INFO",
            f"Job {self.name} ({self.jid}) switched from state {self.job_state} to {state}.",
            self._idispatcher(),
            trace,
        )
        self.job_state = state

    def _heartbeat_trace(self, rid: str, rm_side: bool) -> str:
        """The TimeoutException a heartbeat timeout fails tasks with (JobMaster's, or the RM's)."""
        ver, w = self.ver, self.w
        actor = "pekko.PekkoRpcActor" if w.pekko else "akka.AkkaRpcActor"
        monitor = (
            "HeartbeatMonitorImpl.run(HeartbeatMonitorImpl.java:109)"
            if ver < (1, 14)
            else "DefaultHeartbeatMonitor.run(DefaultHeartbeatMonitor.java:158)"
        )
        if rm_side:
            # 1.10-1.13 put two spaces before "timed out" in the exception (not in the log line).
            sep = "  " if (1, 10) <= ver < (1, 14) else " "
            head = (
                "java.util.concurrent.TimeoutException: The heartbeat of TaskManager with id "
                f"{rid}{sep}timed out."
            )
            listener = (
                "org.apache.flink.runtime.resourcemanager.ResourceManager$"
                "TaskManagerHeartbeatListener.notifyHeartbeatTimeout(ResourceManager.java:1146)"
            )
        else:
            head = (
                "java.util.concurrent.TimeoutException: Heartbeat of TaskManager with id "
                f"{rid} timed out."
            )
            line = 1149 if ver < (1, 10) else 1299 if ver < (1, 14) else 1641
            listener = (
                "org.apache.flink.runtime.jobmaster.JobMaster$TaskManagerHeartbeatListener."
                f"notifyHeartbeatTimeout(JobMaster.java:{line})"
            )
        frames = self._frames(
            listener,
            f"org.apache.flink.runtime.heartbeat.{monitor}",
            "java.util.concurrent.Executors$RunnableAdapter.call(Executors.java:515)",
            "java.util.concurrent.FutureTask.run(FutureTask.java:264)",
            f"org.apache.flink.runtime.rpc.{actor}.handleRunAsync({actor.split('.')[1]}.java:440)",
        )
        return f"{head}\n{frames}"

    def _heartbeat_failover(self, t: int, tm: _TaskManager, rm_side: bool) -> None:
        """Heartbeats to ``tm`` time out; the job fails over.

        ``rm_side``: the ResourceManager's heartbeat times out too (it had not heard the
        TaskManager was gone), and, before 1.14, its exception is what fails the tasks
        (seed 000); otherwise the JobMaster's (logged from 1.14, seed 001).
        """
        irng, ver = self.irng, self.ver
        rid = self._rid(tm)
        if rm_side:
            self._log(
                t,
                "rm_heartbeat",
                "INFO",
                f"The heartbeat of TaskManager with id {rid} timed out.",
                self._idispatcher(),
            )
            sep = "  " if (1, 10) <= ver < (1, 14) else " "
            self._log(
                t + 1,
                "rm_close",
                "INFO",
                f"Closing TaskExecutor connection {rid} because: The heartbeat of TaskManager "
                f"with id {rid}{sep}timed out.",
                self._idispatcher(),
            )
            t += 2 + irng.randrange(0, 30)
        timeout = f"Heartbeat of TaskManager with id {rid} timed out."
        if ver >= (1, 14):
            self._log(t, "tm_heartbeat_timeout", "INFO", timeout, self._idispatcher())
        if ver >= (1, 16):
            t += 1
            self._log(
                t,
                "tm_disconnect",
                "INFO",
                f"Disconnect TaskExecutor {rid} because: {timeout}",
                self._idispatcher(),
            )
        trace = self._heartbeat_trace(rid, rm_side=rm_side and ver < (1, 14))
        self._fail_job(t, tm.index, trace)

    def _fail_job(
        self,
        t: int,
        slot: int,
        trace: str | Callable[[_Task], str],
        from_state: str = "RUNNING",
        others_from: str = "RUNNING",
        only: _Task | None = None,
    ) -> None:
        """The tasks of ``slot`` (or ``only``) fail with ``trace``; every task restarts.

        The graph is one pipelined region (keyed exchanges), so a failed task restarts all
        of them: region failover lines (1.9+), the job RUNNING -> RESTARTING (1.10+;
        before, RUNNING -> FAILING -> RESTARTING), the other tasks cancelled.
        """
        irng, ver, n = self.irng, self.ver, self.spec.tms_per_job
        tm = self.slots[slot]
        self.tasks_running = False
        failed = [only] if only is not None else [k for k in self.tasks if k.subtask == slot]
        for task in failed:
            t += irng.randrange(1, 10)
            head = (
                f"{task.name} ({task.subtask + 1}/{n}) ({self._attempt_id(task)}) switched from "
                f"{from_state} to FAILED"
            )
            if ver < (1, 11):
                text = f"{head}."
            elif ver < (1, 12):
                slot_id = f"{irng.getrandbits(31):x}"
                logical = "org.apache.flink.runtime.jobmaster.slotpool.SingleLogicalSlot"
                text = f"{head} on {logical}@{slot_id}."
            else:
                text = f"{head} on {tm.location}."
            cause = trace if isinstance(trace, str) else trace(task)
            self._log(t, "task_state", "INFO", text, self._idispatcher(), cause)
        first = failed[0]
        t += 1
        if (1, 9) <= ver < (1, 16):
            vertex = f"{first.vertex_id}_{first.subtask}"
            self._log(
                t,
                "region_failover",
                "INFO",
                f"Calculating tasks to restart to recover the failed task {vertex}.",
                self._idispatcher(),
            )
            self._log(
                t,
                "region_failover",
                "INFO",
                # (sic: the trailing space is Flink's)
                f"{len(self.tasks)} tasks should be restarted to recover the failed task "
                f"{vertex}. ",
                self._idispatcher(),
            )
        elif ver >= (1, 16):
            self._log(
                t,
                "restart_tasks",
                "INFO",
                f"{len(self.tasks)} tasks will be restarted to recover the failed task "
                f"{self._attempt_id(first)}.",
                self._idispatcher(),
            )
        t += 1
        if ver >= (1, 10):
            self._job_to(t, "RESTARTING")
        else:
            self._job_to(t, "FAILING", trace if isinstance(trace, str) else trace(first))
            self._log(
                t + 1,
                "job_state",
                "INFO",
                f"Try to restart or fail the job {self.name} ({self.jid}) if no longer possible.",
                self._idispatcher(),
            )
            self._job_to(t + 2, "RESTARTING")
        for task in self.tasks:
            if task in failed:
                continue
            head = f"{task.name} ({task.subtask + 1}/{n}) ({self._attempt_id(task)}) switched from"
            tc = t + irng.randrange(1, 20)
            self._log(
                tc, "task_state", "INFO", f"{head} {others_from} to CANCELING.", self._idispatcher()
            )
            tc += irng.randrange(5, 400)
            self._log(
                tc, "task_state", "INFO", f"{head} CANCELING to CANCELED.", self._idispatcher()
            )

    def _restart(
        self,
        t: int,
        deploy: int,
        running: int | None,
        slot: int | None,
        tm: _TaskManager | None,
    ) -> None:
        """The restart delay is over: the job runs again, restored, its tasks redeployed.

        ``running``: when every task runs (None: the deployment to the last TaskManager
        never finishes; the caller fails it).
        """
        if slot is not None and tm is not None:
            self.slots[slot] = tm
        self.deployment += 1
        self.attempt_no += 1
        if self.ver >= (1, 10):
            self._job_to(t, "RUNNING")
        else:
            self._log(
                t,
                "job_state",
                "INFO",
                f"Restarting the job {self.name} ({self.jid}).",
                self._idispatcher(),
            )
            self._job_to(t, "CREATED")
            self._job_to(t + 1, "RUNNING")
        self._log(t + 2, "restore", "INFO", self._restore_text(t), self._idispatcher())
        self._deploy(t + 3, deploy, running)

    def _restore_text(self, t: int) -> str:
        """What the CheckpointCoordinator logs when it restores the job's state at ``t``."""
        done = [c for c in self.restorable if c[0] <= t]
        if not done:
            return "No checkpoint found during restore."
        _, cid, at = done[-1]
        jid = self.jid
        if self.ver < (1, 12):
            return (
                f"Restoring job {jid} from latest valid checkpoint: Checkpoint {cid} @ {at} "
                f"for {jid}."
            )
        if self.k8s:
            path = f"s3://flink-state/{self.name}/checkpoints/{jid}/chk-{cid}"
        else:
            path = f"hdfs://nameservice1/flink/checkpoints/{jid}/chk-{cid}"
        return f"Restoring job {jid} from Checkpoint {cid} @ {at} for {jid} located at {path}."

    def _deploy(self, t0: int, deploy: int, running: int | None) -> None:
        """Log a deployment of every task: CREATED -> SCHEDULED -> ... -> RUNNING.

        Scheduled from ``t0``, deployed from ``deploy``, all RUNNING by ``running``; then
        checkpoints resume. ``running`` None: the last TaskManager's tasks stay DEPLOYING
        (its RPCs time out), the others run.
        """
        irng, n = self.irng, self.spec.tms_per_job
        stuck = self.spec.tms_per_job - 1 if running is None else None
        end = deploy + irng.randrange(1_500, 3_000) if running is None else running
        steps = ["DEPLOYING", "INITIALIZING", "RUNNING"]
        if not self.w.initializing:
            steps.remove("INITIALIZING")
        for task in self.tasks:
            head = f"{task.name} ({task.subtask + 1}/{n}) ({self._attempt_id(task)}) switched from"
            t = t0 + task.vertex + irng.randrange(0, 20)
            self._log(t, "task_state", "INFO", f"{head} CREATED to SCHEDULED.", self._idispatcher())
            prev = "SCHEDULED"
            for i, state in enumerate(steps):
                if i == 0:
                    at = deploy + task.vertex + irng.randrange(0, 40)
                elif state == "RUNNING":
                    at = end - irng.randrange(0, 100)
                else:
                    at = deploy + (end - deploy) // 2 + irng.randrange(0, 100)
                t = min(max(at, t + 1), end)
                self._log(
                    t, "task_state", "INFO", f"{head} {prev} to {state}.", self._idispatcher()
                )
                prev = state
                if task.subtask == stuck:
                    break
        if running is not None:
            self._at(running, lambda: self._resume(running))

    def _resume(self, t: int) -> None:
        """Every task runs again: task metrics and checkpoints resume."""
        self.tasks_running = True
        for st in self.tm_states:
            st.last_ms = max(st.last_ms, t)
        # The checkpoint scheduler starts with a random initial delay of up to one interval.
        self.trigger = t + self.irng.randrange(500, self.interval_ms + 1)

    def _jobmaster_start(
        self,
        t: int,
        deploy: int,
        running: int,
        ha: bool,
        replace: tuple[int, _TaskManager] | None = None,
    ) -> None:
        """A new JobMaster runs the job: recovered from its latest checkpoint (HA) or anew.

        Without HA the job is submitted again under a new job id and starts from nothing.
        Checkpoint statistics start over either way (they are not kept across JobMasters).
        """
        if replace is not None:
            self.slots[replace[0]] = replace[1]
        if not ha:
            self.run += 1
            self.jid = job_id(self.spec, self.index, self.run)
            self.key = self.jid.encode()
            self.restorable.clear()
            self.checkpoint = 1
            self._job_series()
        self.jm_up = True
        while self.changes and self.changes[0][0] <= t:
            self.changes.popleft()
        self.last_duration = self.last_size = -1
        self.completed = self.failed = self.consecutive_failed = 0
        self.deployment += 1
        self.attempt_no = 0
        self._log(t, "restore", "INFO", self._restore_text(t), self._idispatcher())
        self.job_state = "CREATED"
        self._job_to(t + self.irng.randrange(5, 60), "RUNNING")
        self._deploy(t + 80, deploy, running)
