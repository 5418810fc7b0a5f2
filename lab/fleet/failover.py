"""How a job fails over and comes back: failed tasks, restart, restore, redeploy."""

from __future__ import annotations

import random
from collections.abc import Callable

from lab.fleet.checkpoints import Checkpoints
from lab.fleet.identity import Identity, Task, TaskManager
from lab.fleet.ids import job_id
from lab.fleet.metrics import Metrics
from lab.fleet.records import Records
from lab.fleet.state import Agenda, RunState


class Failover:
    """The job's side of a failover, whatever caused it, and of a new JobMaster.

    It draws from the incidents' generator: a failover happens only after an onset.
    """

    def __init__(
        self,
        identity: Identity,
        records: Records,
        state: RunState,
        agenda: Agenda,
        checkpoints: Checkpoints,
        metrics: Metrics,
        irng: random.Random,
    ) -> None:
        """The failovers of the job ``identity`` names; ``irng``: the incidents' generator."""
        self._id = identity
        self._records = records
        self._state = state
        self._agenda = agenda
        self._checkpoints = checkpoints
        self._metrics = metrics
        self._irng = irng

    def _thread(self) -> str:
        return self._records.dispatcher(self._irng)

    def job_to(self, t: int, job_state: str, trace: str = "") -> None:
        """Log the job's switch from its current state to ``job_state`` (ExecutionGraph)."""
        state = self._state
        self._records.log(
            t,
            "job_state",
            "INFO",
            f"Job {self._id.name} ({state.jid}) switched from state {state.job_state} to "
            f"{job_state}.",
            self._thread(),
            trace,
        )
        state.job_state = job_state

    def _heartbeat_trace(self, rid: str, rm_side: bool) -> str:
        """The TimeoutException a heartbeat timeout fails tasks with (JobMaster's, or the RM's)."""
        ver, w = self._id.ver, self._id.wording
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
        frames = self._records.frames(
            listener,
            f"org.apache.flink.runtime.heartbeat.{monitor}",
            "java.util.concurrent.Executors$RunnableAdapter.call(Executors.java:515)",
            "java.util.concurrent.FutureTask.run(FutureTask.java:264)",
            f"org.apache.flink.runtime.rpc.{actor}.handleRunAsync({actor.split('.')[1]}.java:440)",
        )
        return f"{head}\n{frames}"

    def heartbeat_failover(self, t: int, tm: TaskManager, rm_side: bool) -> None:
        """Heartbeats to ``tm`` time out; the job fails over.

        ``rm_side``: the ResourceManager's heartbeat times out too (it had not heard the
        TaskManager was gone), and, before 1.14, its exception is what fails the tasks
        (seed 000); otherwise the JobMaster's (logged from 1.14, seed 001).
        """
        irng, ver, log = self._irng, self._id.ver, self._records.log
        rid = self._id.rid(tm)
        if rm_side:
            log(
                t,
                "rm_heartbeat",
                "INFO",
                f"The heartbeat of TaskManager with id {rid} timed out.",
                self._thread(),
            )
            sep = "  " if (1, 10) <= ver < (1, 14) else " "
            log(
                t + 1,
                "rm_close",
                "INFO",
                f"Closing TaskExecutor connection {rid} because: The heartbeat of TaskManager "
                f"with id {rid}{sep}timed out.",
                self._thread(),
            )
            t += 2 + irng.randrange(0, 30)
        timeout = f"Heartbeat of TaskManager with id {rid} timed out."
        if ver >= (1, 14):
            log(t, "tm_heartbeat_timeout", "INFO", timeout, self._thread())
        if ver >= (1, 16):
            t += 1
            log(
                t,
                "tm_disconnect",
                "INFO",
                f"Disconnect TaskExecutor {rid} because: {timeout}",
                self._thread(),
            )
        trace = self._heartbeat_trace(rid, rm_side=rm_side and ver < (1, 14))
        self.fail_job(t, tm.index, trace)

    def fail_job(
        self,
        t: int,
        slot: int,
        trace: str | Callable[[Task], str],
        from_state: str = "RUNNING",
        others_from: str = "RUNNING",
        only: Task | None = None,
    ) -> None:
        """The tasks of ``slot`` (or ``only``) fail with ``trace``; every task restarts.

        The graph is one pipelined region (keyed exchanges), so a failed task restarts all
        of them: region failover lines (1.9+), the job RUNNING -> RESTARTING (1.10+;
        before, RUNNING -> FAILING -> RESTARTING), the other tasks cancelled.
        """
        ident, state, log = self._id, self._state, self._records.log
        irng, ver, n = self._irng, ident.ver, ident.spec.tms_per_job
        tm = state.slots[slot]
        state.tasks_running = False
        failed = [only] if only is not None else [k for k in ident.tasks if k.subtask == slot]
        for task in failed:
            t += irng.randrange(1, 10)
            head = (
                f"{task.name} ({task.subtask + 1}/{n}) ({state.attempt_id(task)}) switched from "
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
            log(t, "task_state", "INFO", text, self._thread(), cause)
        first = failed[0]
        t += 1
        if (1, 9) <= ver < (1, 16):
            vertex = f"{first.vertex_id}_{first.subtask}"
            log(
                t,
                "region_failover",
                "INFO",
                f"Calculating tasks to restart to recover the failed task {vertex}.",
                self._thread(),
            )
            log(
                t,
                "region_failover",
                "INFO",
                # (sic: the trailing space is Flink's)
                f"{len(ident.tasks)} tasks should be restarted to recover the failed task "
                f"{vertex}. ",
                self._thread(),
            )
        elif ver >= (1, 16):
            log(
                t,
                "restart_tasks",
                "INFO",
                f"{len(ident.tasks)} tasks will be restarted to recover the failed task "
                f"{state.attempt_id(first)}.",
                self._thread(),
            )
        t += 1
        if ver >= (1, 10):
            self.job_to(t, "RESTARTING")
        else:
            self.job_to(t, "FAILING", trace if isinstance(trace, str) else trace(first))
            log(
                t + 1,
                "job_state",
                "INFO",
                f"Try to restart or fail the job {ident.name} ({state.jid}) if no longer possible.",
                self._thread(),
            )
            self.job_to(t + 2, "RESTARTING")
        for task in ident.tasks:
            if task in failed:
                continue
            head = f"{task.name} ({task.subtask + 1}/{n}) ({state.attempt_id(task)}) switched from"
            tc = t + irng.randrange(1, 20)
            log(tc, "task_state", "INFO", f"{head} {others_from} to CANCELING.", self._thread())
            tc += irng.randrange(5, 400)
            log(tc, "task_state", "INFO", f"{head} CANCELING to CANCELED.", self._thread())

    def restart(
        self,
        t: int,
        deploy: int,
        running: int | None,
        slot: int | None,
        tm: TaskManager | None,
    ) -> None:
        """The restart delay is over: the job runs again, restored, its tasks redeployed.

        ``running``: when every task runs (None: the deployment to the last TaskManager
        never finishes; the caller fails it).
        """
        state, log = self._state, self._records.log
        if slot is not None and tm is not None:
            state.slots[slot] = tm
        state.deployment += 1
        state.attempt_no += 1
        if self._id.ver >= (1, 10):
            self.job_to(t, "RUNNING")
        else:
            log(
                t,
                "job_state",
                "INFO",
                f"Restarting the job {self._id.name} ({state.jid}).",
                self._thread(),
            )
            self.job_to(t, "CREATED")
            self.job_to(t + 1, "RUNNING")
        log(t + 2, "restore", "INFO", self._checkpoints.restore_text(t), self._thread())
        self._deploy(t + 3, deploy, running)

    def _deploy(self, t0: int, deploy: int, running: int | None) -> None:
        """Log a deployment of every task: CREATED -> SCHEDULED -> ... -> RUNNING.

        Scheduled from ``t0``, deployed from ``deploy``, all RUNNING by ``running``; then
        checkpoints resume. ``running`` None: the last TaskManager's tasks stay DEPLOYING
        (its RPCs time out), the others run.
        """
        ident, state, log = self._id, self._state, self._records.log
        irng, n = self._irng, ident.spec.tms_per_job
        stuck = ident.spec.tms_per_job - 1 if running is None else None
        end = deploy + irng.randrange(1_500, 3_000) if running is None else running
        steps = ["DEPLOYING", "INITIALIZING", "RUNNING"]
        if not ident.wording.initializing:
            steps.remove("INITIALIZING")
        for task in ident.tasks:
            head = f"{task.name} ({task.subtask + 1}/{n}) ({state.attempt_id(task)}) switched from"
            t = t0 + task.vertex + irng.randrange(0, 20)
            log(t, "task_state", "INFO", f"{head} CREATED to SCHEDULED.", self._thread())
            prev = "SCHEDULED"
            for i, step in enumerate(steps):
                if i == 0:
                    at = deploy + task.vertex + irng.randrange(0, 40)
                elif step == "RUNNING":
                    at = end - irng.randrange(0, 100)
                else:
                    at = deploy + (end - deploy) // 2 + irng.randrange(0, 100)
                t = min(max(at, t + 1), end)
                log(t, "task_state", "INFO", f"{head} {prev} to {step}.", self._thread())
                prev = step
                if task.subtask == stuck:
                    break
        if running is not None:
            self._agenda.at(running, lambda: self._resume(running))

    def _resume(self, t: int) -> None:
        """Every task runs again: task metrics and checkpoints resume."""
        self._state.tasks_running = True
        self._metrics.resume(t)
        self._checkpoints.restart_timer(t)

    def jobmaster_start(
        self,
        t: int,
        deploy: int,
        running: int,
        ha: bool,
        replace: tuple[int, TaskManager] | None = None,
    ) -> None:
        """A new JobMaster runs the job: recovered from its latest checkpoint (HA) or anew.

        Without HA the job is submitted again under a new job id and starts from nothing.
        Checkpoint statistics start over either way (they are not kept across JobMasters).
        """
        ident, state = self._id, self._state
        if replace is not None:
            state.slots[replace[0]] = replace[1]
        if not ha:
            state.run += 1
            state.jid = job_id(ident.spec, ident.index, state.run)
            self._records.key = state.jid.encode()
            self._metrics.new_job_id()
        state.jm_up = True
        self._checkpoints.new_jobmaster(t, resubmitted=not ha)
        state.deployment += 1
        state.attempt_no = 0
        self._records.log(t, "restore", "INFO", self._checkpoints.restore_text(t), self._thread())
        state.job_state = "CREATED"
        self.job_to(t + self._irng.randrange(5, 60), "RUNNING")
        self._deploy(t + 80, deploy, running)
