"""What the processes of a job log when they die or lose each other."""

from __future__ import annotations

import random

from lab.fleet.failover import Failover
from lab.fleet.identity import Identity, Task, TaskManager
from lab.fleet.ids import digest, hex32, job_id
from lab.fleet.metrics import TmState
from lab.fleet.records import Records
from lab.fleet.state import ASK_TIMEOUT_MS, REGISTRATION_TIMEOUT_MS, RunState
from lab.fleet.wording import (
    ENRICHED_METASPACE,
    FLINK_EXC,
    hadoop_size,
    hadoop_ts,
    release_of,
)

# The top frames of a Metaspace OutOfMemoryError: a user class being loaded.
_METASPACE_FRAMES = (
    "java.lang.ClassLoader.defineClass1(Native Method)",
    "java.lang.ClassLoader.defineClass(ClassLoader.java:1017)",
    "java.net.URLClassLoader.defineClass(URLClassLoader.java:550)",
    "org.apache.flink.util.ChildFirstClassLoader.loadClassWithoutExceptionHandling("
    "ChildFirstClassLoader.java:71)",
    "org.apache.flink.util.FlinkUserCodeClassLoader.loadClass(FlinkUserCodeClassLoader.java:48)",
)

# What an RPC thread runs out of, per kind: (OutOfMemoryError message, its top frames).
_OUT_OF_MEMORY: dict[str, tuple[str, tuple[str, ...]]] = {
    "gc_overhead": (
        "GC overhead limit exceeded",
        (
            "java.util.HashMap.resize(HashMap.java:704)",
            "java.util.HashMap.putVal(HashMap.java:663)",
            "java.io.ObjectStreamClass.lookup(ObjectStreamClass.java:391)",
            "java.io.ObjectInputStream.readObject(ObjectInputStream.java:422)",
            "org.apache.flink.runtime.rpc.messages.RemoteRpcInvocation$MethodInvocation."
            "readObject(RemoteRpcInvocation.java:204)",
        ),
    ),
    "heap": (
        "Java heap space",
        (
            "java.util.Arrays.copyOf(Arrays.java:3236)",
            "java.io.ByteArrayOutputStream.grow(ByteArrayOutputStream.java:118)",
            "java.io.ObjectOutputStream.writeObject(ObjectOutputStream.java:348)",
            "org.apache.flink.util.InstantiationUtil.serializeObject(InstantiationUtil.java:624)",
            "org.apache.flink.runtime.rpc.messages.RemoteRpcInvocation.<init>("
            "RemoteRpcInvocation.java:62)",
        ),
    ),
    "direct": (
        "Direct buffer memory",
        (
            "java.nio.Bits.reserveMemory(Bits.java:175)",
            "java.nio.DirectByteBuffer.<init>(DirectByteBuffer.java:118)",
            "java.nio.ByteBuffer.allocateDirect(ByteBuffer.java:317)",
            "org.apache.flink.shaded.netty4.io.netty.buffer.UnpooledDirectByteBuf.<init>("
            "UnpooledDirectByteBuf.java:64)",
            "org.apache.flink.shaded.netty4.io.netty.buffer.PooledByteBufAllocator."
            "newDirectBuffer(PooledByteBufAllocator.java:394)",
        ),
    ),
}


class Crashes:
    """Lines of lost TaskManagers and JobManagers: kills, fatal errors, timeouts, leadership.

    It draws from the incidents' generator: a process dies only after an onset.
    """

    def __init__(
        self,
        identity: Identity,
        records: Records,
        state: RunState,
        failover: Failover,
        irng: random.Random,
    ) -> None:
        """The crashes of the job ``identity`` names; ``irng``: the incidents' generator."""
        self._id = identity
        self._records = records
        self._log = records.log
        self._state = state
        self._failover = failover
        self._irng = irng

    def _thread(self) -> str:
        return self._records.dispatcher(self._irng)

    # -- a TaskManager killed, or out of memory ----------------------------------------

    def log_memory_kill(self, kill: int, reported: int, tm: TaskManager, st: TmState) -> None:
        """YARN or Kubernetes kills ``tm`` for memory; the ResourceManager reports it.

        YARN (Hadoop 3 wording) sends SIGTERM, which the TaskManager's signal handler
        logs, and the ResourceManager passes the container's diagnostics on as the job's
        version does. Kubernetes kills an OOMKilled container outright (exit code 137) and
        the watch reports the pod's termination.
        """
        irng = self._irng
        if self._id.k8s:
            self._log_worker_terminated(reported, tm, self._pod_diagnostics(137, "OOMKilled"))
            return
        self._log(
            kill + irng.randrange(0, 20),
            "tm_signal",
            "ERROR",
            "RECEIVED SIGNAL 15: SIGTERM. Shutting down as requested.",
            "SIGTERM handler",
            tm=tm,
        )
        gib = 2**30
        # A TaskManager process is about twice its heap plus managed and network memory.
        limit = (2 * max(1, round(st.heap_max / gib)) + 1) * gib
        vlimit = int(limit * 2.1)  # yarn.nodemanager.vmem-pmem-ratio
        # Killed as soon as it is over (the check runs every 3 s): "3.0 GB of 3 GB".
        over = irng.randrange(2**20, 40 * 2**20)
        vused = int(vlimit * irng.uniform(0.93, 0.99))
        pid = irng.randrange(10_000, 60_000)
        app = "application_" + "_".join(tm.tm_id.split("_")[2:4])
        java = (
            f"/usr/lib/jvm/java-openjdk/bin/java -Xmx{st.heap_max} -Xms{st.heap_max} "
            "-XX:MaxMetaspaceSize=268435456 "
            f"-Dlog.file=/var/log/hadoop-yarn/containers/{app}/{tm.tm_id}/taskmanager.log "
            "-Dlog4j.configuration=file:./log4j.properties "
            "-Dlog4j.configurationFile=file:./log4j.properties "
            "org.apache.flink.yarn.YarnTaskExecutorRunner --configDir ."
        )
        diagnostics = (
            f"{hadoop_ts(kill)}Container [pid={pid},containerID={tm.tm_id}] is running "
            f"{over}B beyond the 'PHYSICAL' memory limit. Current usage: "
            f"{hadoop_size(limit + over)} of {hadoop_size(limit)} physical memory used; "
            f"{hadoop_size(vused)} of {hadoop_size(vlimit)} virtual memory used. "
            f"Killing container.\nDump of the process-tree for {tm.tm_id} :\n"
            "\t|- PID PPID PGRPID SESSID CMD_NAME USER_MODE_TIME(MILLIS) SYSTEM_TIME(MILLIS) "
            "VMEM_USAGE(BYTES) RSSMEM_USAGE(PAGES) FULL_CMD_LINE\n"
            f"\t|- {pid} {pid - 2} {pid} {pid} (java) {irng.randrange(10**5, 10**7)} "
            f"{irng.randrange(10**4, 10**6)} {vused} {(limit + over) // 4096} {java}\n"
            f"{hadoop_ts(kill + 14)}Container killed on request. Exit code is 143\n"
            f"{hadoop_ts(kill + 21)}Container exited with a non-zero exit code 143. "
        )
        self._log_worker_terminated(reported, tm, diagnostics, exit_status=-104)

    def _log_worker_terminated(
        self, t: int, tm: TaskManager, diagnostics: str, exit_status: int | None = None
    ) -> None:
        """The ResourceManager's report of a TaskManager container or pod that terminated.

        ``exit_status``: a YARN container's (None for a pod), which YARN's report shows
        from 1.14 on.
        """
        if self._id.ver < (1, 12):
            # 1.5-1.11: the ResourceManager passes the raw diagnostics on.
            text = f"Closing TaskExecutor connection {tm.tm_id} because: {diagnostics}"
        elif exit_status is None or self._id.ver < (1, 14):
            text = f"Worker {tm.tm_id} is terminated. Diagnostics: {diagnostics}"
        else:
            text = (
                f"Worker {tm.tm_id} is terminated. Diagnostics: Container {tm.tm_id} "
                f"marked as failed.\n Exit code:{exit_status}.\n Diagnostics:{diagnostics}"
            )
        self._log(t, "worker_terminated", "INFO", text, self._thread())

    def _pod_diagnostics(self, code: int, reason: str) -> str:
        """KubernetesPod.getTerminatedDiagnostics() of a TaskManager pod."""
        # The main container is "flink-main-container" since pod templates (1.13).
        container = "flink-main-container" if self._id.ver >= (1, 13) else "flink-task-manager"
        text = (
            "Pod terminated, container termination statuses: "
            f"[{container}(exitCode={code}, reason={reason}, message=null)]"
        )
        if self._id.ver >= (1, 13):
            text += ", pod status: Failed(reason=null, message=null)"
        return text

    def _log_exit(self, t: int, tm: TaskManager, code: int, connected: bool) -> None:
        """The ResourceManager hears that ``tm``'s process exited with ``code``.

        Before 1.12 it logs that only while the TaskManager is still connected (closing the
        connection is what it logs); from 1.12 every terminated worker is logged.
        """
        if self._id.ver < (1, 12) and not connected:
            return
        if self._id.k8s:
            self._log_worker_terminated(t, tm, self._pod_diagnostics(code, "Error"))
            return
        diagnostics = (
            f"{hadoop_ts(t - 400)}Exception from container-launch.\nContainer id: {tm.tm_id}\n"
            f"Exit code: {code}\n\n{hadoop_ts(t - 390)}Container exited with a non-zero exit "
            f"code {code}. "
        )
        self._log_worker_terminated(t, tm, diagnostics, exit_status=code)

    def log_jvm_fatal(self, oom: str, t: int, tm: TaskManager, exit_report: bool) -> None:
        """``tm``'s JVM fails for lack of memory; it logs why and exits.

        ``oom``: ``gc_overhead``, ``heap`` or ``direct`` (an uncaught error in a thread
        with Flink's FatalExitExceptionHandler: FATAL, exit code 239), or ``metaspace`` (a
        task fails and the TaskExecutor shuts the process down: exit code 1).
        """
        if oom == "metaspace":
            self._log_metaspace_shutdown(t, tm)
            code = 1
        else:
            self._log_fatal_exit(oom, t, tm)
            code = 239  # FatalExitExceptionHandler halts with -17
        if exit_report:
            # A process exit reaches the ResourceManager within seconds; a heartbeat timeout
            # before it (gc_overhead) has closed the connection already.
            t_exit = t + self._irng.randrange(500, 3_000)
            self._log_exit(t_exit, tm, code, connected=oom != "gc_overhead")

    def _metaspace_trace(self, depth: int) -> str:
        """The Metaspace OutOfMemoryError (enriched from 1.11) with its top ``depth`` frames."""
        message = ENRICHED_METASPACE if self._id.ver >= (1, 11) else "Metaspace"
        frames = self._records.frames(*_METASPACE_FRAMES[:depth])
        return f"java.lang.OutOfMemoryError: {message}\n{frames}"

    def _log_metaspace_shutdown(self, t: int, tm: TaskManager) -> None:
        """A task on ``tm`` fails with a Metaspace error; the TaskExecutor shuts ``tm`` down."""
        irng, ver, n = self._irng, self._id.ver, self._id.spec.tms_per_job
        trace = self._metaspace_trace(len(_METASPACE_FRAMES))
        task = self._id.stateful_task(tm)
        suffix = self._state.attempt_suffix()
        head = (
            f"{task.name} ({task.subtask + 1}/{n}){suffix} ({self._state.attempt_id(task)}) "
            "switched from RUNNING to FAILED"
        )
        if (1, 13) <= ver < (1, 17):
            # The cause is stringified into the message itself.
            text, extra = f"{head} with failure cause: {trace}", ""
        elif ver >= (1, 17):
            text, extra = f"{head} with failure cause:", trace
        else:
            text, extra = f"{head}.", trace
        level = "WARN" if ver >= (1, 11) else "INFO"
        thread = f"{task.name} ({task.subtask + 1}/{n}){suffix}"
        self._log(t, "tm_task", level, text, thread, extra, tm=tm)
        executor = (t + irng.randrange(1, 5), self._thread())
        runner = (t + irng.randrange(5, 12), self._thread())
        self._log_taskexecutor_fatal(tm, trace, executor, runner)

    def _log_taskexecutor_fatal(
        self, tm: TaskManager, trace: str, executor: tuple[int, str], runner: tuple[int, str]
    ) -> None:
        """``tm``'s TaskExecutor hits a fatal error and its TaskManagerRunner shuts it down.

        ``executor`` and ``runner``: the time and thread of TaskExecutor's ERROR line and
        of TaskManagerRunner's.
        """
        (t_executor, executor_thread), (t_runner, runner_thread) = executor, runner
        address = self._id.rpc_address(tm.host, tm.rpc_port, "taskmanager_0")
        self._log(
            t_executor,
            "task_executor",
            "ERROR",
            f"Fatal error occurred in TaskExecutor {address}.",
            executor_thread,
            trace,
            tm=tm,
        )
        self._log(
            t_runner,
            "tm_runner",
            "ERROR",
            "Fatal error occurred while executing the TaskManager. Shutting it down...",
            runner_thread,
            trace,
            tm=tm,
        )

    def _log_fatal_exit(self, oom: str, t: int, tm: TaskManager) -> None:
        """An RPC thread of ``tm`` runs out of ``oom`` memory: FATAL, and the JVM halts."""
        irng = self._irng
        rpc = "pekko" if self._id.wording.pekko else "akka"
        thread = f"flink-{rpc}.actor.default-dispatcher-{irng.randrange(2, 700)}"
        message, frames = _OUT_OF_MEMORY[oom]
        trace = f"java.lang.OutOfMemoryError: {message}\n{self._records.frames(*frames)}"
        self._log(
            t,
            "fatal_exit",
            "ERROR",
            f"FATAL: Thread '{thread}' produced an uncaught exception. Stopping the process...",
            thread,
            trace,
            tm=tm,
        )
        if self._id.ver >= (1, 17):
            # FLINK-30299: the handler dumps every thread before it halts the JVM.
            dump = (
                '"main" Id=1 WAITING on java.util.concurrent.CompletableFuture$Signaller@'
                f"{irng.getrandbits(31):x}\n\tat sun.misc.Unsafe.park(Native Method)\n"
                f'"{thread}" Id={irng.randrange(40, 900)} RUNNABLE\n'
                f"\tat {frames[0]}"
            )
            self._log(
                t + irng.randrange(2, 9),
                "fatal_exit",
                "ERROR",
                "Thread dump: ",
                thread,
                dump,
                tm=tm,
            )

    def metaspace_failover(self, t: int, tm: TaskManager) -> None:
        """The JobManager hears of the task that failed with a Metaspace error; fails over."""
        self._failover.fail_job(
            t, tm.index, self._metaspace_trace(2), only=self._id.stateful_task(tm)
        )

    # -- the JobManager dies and comes back (k8s_watch_crash) --------------------------

    def log_watch_crash(self, t: int) -> None:
        """The pods watch gets HTTP 410; Flink 1.10.2-1.12.1 treat it as fatal (seed 003)."""
        irng = self._irng
        old = 5_000_000_000 + irng.randrange(0, 10**9)
        exc = (
            "io.fabric8.kubernetes.client.KubernetesClientException: too old resource version: "
            f"{old} ({old + irng.randrange(100_000, 900_000)})"
        )
        trace = f"{exc}\n" + self._records.frames(
            "io.fabric8.kubernetes.client.dsl.internal.WatchConnectionManager$1.onMessage("
            "WatchConnectionManager.java:259)",
            "org.apache.flink.kubernetes.shaded.okhttp3.internal.ws.RealWebSocket.onReadMessage("
            "RealWebSocket.java:323)",
            "org.apache.flink.kubernetes.shaded.okhttp3.internal.ws.WebSocketReader."
            "readMessageFrame(WebSocketReader.java:219)",
            "java.util.concurrent.ThreadPoolExecutor.runWorker(ThreadPoolExecutor.java:1149)",
            "java.lang.Thread.run(Thread.java:748)",
        )
        # The fabric8 frames are shaded into flink-dist too: every frame carries its jar.
        if self._id.wording.log4j2:
            trace = trace.replace(" [?:?]", " [?:1.8.0_282]")
        thread = "OkHttp https://10.96.0.1/..."
        self._log(t, "rm_fatal", "ERROR", "Fatal error occurred in ResourceManager.", thread, trace)
        self._log(
            t + 1,
            "entrypoint",
            "ERROR",
            "Fatal error occurred in the cluster entrypoint.",
            thread,
            trace,
        )
        self._log(
            t + 11,
            "blob",
            "INFO",
            "Stopped BLOB server at 0.0.0.0:6124",
            "BlobServer shutdown hook",
        )
        self._state.jm_up = False
        self._state.tasks_running = False

    def log_tms_lost_jobmanager(self, t: int, jid: str, heartbeat: bool) -> None:
        """Every TaskManager of the job drops its JobManager connection (TaskExecutor lines)."""
        irng = self._irng
        for tm in self._state.slots:
            at = t + irng.randrange(0, 400)
            if heartbeat:
                jm = hex32(self._id.spec.seed, "jm-resource", self._id.index, self._state.run)
                text = f"The heartbeat of JobManager with id {jm} timed out."
            else:
                text = (
                    f"JobManager for job {jid} with leader id {self._leader_id()} lost leadership."
                )
            self._log_jobmanager_gone(at, tm, text, jid)

    def _log_jobmanager_gone(self, t: int, tm: TaskManager, why: str, jid: str) -> None:
        """``tm`` logs ``why`` its JobManager of job ``jid`` is gone, and drops the connection."""
        self._log(t, "task_executor", "INFO", why, self._thread(), tm=tm)
        self._log(
            t + self._irng.randrange(1, 6),
            "task_executor",
            "INFO",
            f"Close JobManager connection for job {jid}.",
            self._thread(),
            tm=tm,
        )

    def _leader_id(self) -> str:
        """The current JobMaster's leader id (a JobMasterId: 32 hex digits)."""
        return hex32(
            self._id.spec.seed,
            "leader",
            self._id.index,
            self._state.run,
            self._state.attempt_no,
            self._state.deployment,
        )

    def log_entrypoint_start(self, t: int, ha: bool) -> None:
        """The restarted JobManager container's first lines (ClusterEntrypoint).

        Without HA the new process will run the job under a new id: its records are keyed
        by that one from the start.
        """
        irng = self._irng
        if not ha:
            self._records.key = job_id(self._id.spec, self._id.index, self._state.run + 1).encode()
        release = release_of(self._id.ver)
        rev = hex32(self._id.spec.seed, "rev", release)[:7]
        entry = "KubernetesApplicationClusterEntrypoint"
        rule = "-" * 80
        lines = (
            rule,
            f" Starting {entry} (Version: {release}, Scala: 2.12, Rev:{rev}, "
            "Date:2021-12-10T09:41:12+01:00)",
            " OS current user: flink",
            " JVM: OpenJDK 64-Bit Server VM - Oracle Corporation - 1.8/25.282-b08",
            f" Maximum heap size: {irng.choice((989, 1963, 3925))} MiBytes",
            rule,
            "Registered UNIX signal handlers for [TERM, HUP, INT]",
            f"Starting {entry}.",
        )
        for line in lines:
            self._log(t, "entrypoint", "INFO", line, "main")
            t += irng.randrange(1, 40)

    # -- a flapping TaskManager and lost leadership (restart_storm) --------------------

    def deploy_timeout(self, t: int, deploy: int, tm: TaskManager) -> None:
        """The deployment to the flapping TaskManager times out (restart_storm)."""
        ver, w, n = self._id.ver, self._id.wording, self._id.spec.tms_per_job
        rpc = "pekko" if w.pekko else "akka"
        uid = -int.from_bytes(digest(self._id.spec.seed, "actor", tm.tm_id)[:4]) // 2
        actor = self._id.rpc_address(tm.host, tm.rpc_port, "taskmanager_0")
        ask = (
            f"Ask timed out on [Actor[{actor}#{uid}]] after [{ASK_TIMEOUT_MS} ms]. Message of "
            "type [org.apache.flink.runtime.rpc.messages.RemoteRpcInvocation]."
        )
        if ver >= (1, 11):
            # Only newer Akka builds add this sentence (FLINK_FORMATS.md §7).
            ask += (
                " A typical reason for `AskTimeoutException` is that the recipient actor didn't "
                "send a reply."
            )
        pattern = "org.apache.pekko.pattern" if w.pekko else "akka.pattern"
        if ver < (1, 15):
            cause = f"Caused by: {pattern}.AskTimeoutException: {ask}"
        else:
            time_type = "Duration" if ver >= (2, 0) else "Time"
            system = "Pekko" if w.pekko else "Akka"
            cause = (
                "Caused by: java.util.concurrent.TimeoutException: Invocation of "
                "[RemoteRpcInvocation(TaskExecutorGateway.submitTask(TaskDeploymentDescriptor, "
                f"JobMasterId, {time_type}))] at recipient [{actor}] timed out. This is usually "
                f"caused by: 1) {system} failed sending the message silently, due to problems "
                "like oversized payload or serialization failures. In that case, you should "
                "find detailed error information in the logs. 2) The recipient needs more time "
                "for responding, due to problems like slow machines or network jitters. In that "
                f"case, you can try to increase {rpc}.ask.timeout.\n"
                + self._records.frames(
                    "org.apache.flink.runtime.jobmaster.RpcTaskManagerGateway.submitTask("
                    "RpcTaskManagerGateway.java:59)"
                )
                + f"\nCaused by: {pattern}.AskTimeoutException: {ask}"
            )

        def trace(task: Task) -> str:
            name = f"{task.name} ({task.subtask + 1}/{n}) ({self._state.attempt_id(task)})"
            return (
                f"java.lang.Exception: Cannot deploy task {name} - TaskManager ({tm.location}) "
                f"not responding after a rpcTimeout of {ASK_TIMEOUT_MS} ms\n"
                + self._records.frames(
                    "org.apache.flink.runtime.executiongraph.Execution.lambda$deploy$5("
                    "Execution.java:616)",
                    "java.util.concurrent.CompletableFuture.uniWhenComplete("
                    "CompletableFuture.java:859)",
                )
                + f"\n{cause}"
            )

        self._failover.fail_job(t, tm.index, trace, from_state="DEPLOYING")

    def leadership_lost(self, t: int) -> None:
        """The JobManager loses ZooKeeper and the job's leadership; the job is suspended."""
        irng, ver, jid = self._irng, self._id.ver, self._state.jid
        port = (
            6123
            if self._id.k8s
            else 30000
            + int.from_bytes(digest(self._id.spec.seed, "jm-rpc", self._id.index)[:2]) % 30000
        )
        address = self._id.rpc_address(self._id.jm_host, port, f"jobmanager_{1 + self._state.run}")
        if ver < (1, 11):
            text: str | None = (
                f"JobManager for job {self._id.name} ({jid}) was revoked leadership at {address}."
            )
        elif ver < (1, 13):
            text = (
                f"JobManager for job {self._id.name} ({jid}) at {address} was revoked leadership."
            )
        elif ver >= (1, 18):
            leader = self._leader_id()
            uuid = f"{leader[:8]}-{leader[8:12]}-{leader[12:16]}-{leader[16:20]}-{leader[20:]}"
            text = (
                f"JobMasterServiceLeadershipRunner for job {jid} was revoked leadership with "
                f"leader id {uuid}. Stopping current JobMasterServiceProcess."
            )
        else:
            text = None  # 1.13-1.17 log the revocation at DEBUG only
        if text is not None:
            self._log(t, "jm_leadership", "INFO", text, self._thread())
        if ver < (1, 13):
            cause = f"{FLINK_EXC}: JobManager is no longer the leader."
        elif ver < (1, 15):
            cause = f"{FLINK_EXC}: Stopping JobMaster for job {self._id.name}({jid})."
        else:
            cause = f"{FLINK_EXC}: Stopping JobMaster for job '{self._id.name}' ({jid})."
        trace = f"{cause}\n" + self._records.frames(
            "org.apache.flink.runtime.jobmaster.JobMaster.onStop(JobMaster.java:426)",
            "org.apache.flink.runtime.rpc.RpcEndpoint.internalCallOnStop(RpcEndpoint.java:214)",
        )
        self._failover.job_to(t + irng.randrange(2, 30), "SUSPENDED", trace)
        # The TaskManagers still reachable hear it from ZooKeeper (seed 004).
        flapping = self._state.slots[-1]
        for tm in self._state.slots:
            if tm is flapping:
                continue
            at = t + irng.randrange(100, 2_000)
            lost = f"JobManager for job {jid} with leader id {self._leader_id()} lost leadership."
            self._log_jobmanager_gone(at, tm, lost, jid)

    def log_registration_timeout(self, t: int, tm: TaskManager) -> None:
        """The flapping TaskManager never got back to the ResourceManager: it gives up."""
        limit = f"{REGISTRATION_TIMEOUT_MS} ms" if self._id.ver < (1, 16) else "PT5M"
        trace = (
            "org.apache.flink.runtime.taskexecutor.exceptions.RegistrationTimeoutException: "
            f"Could not register at the ResourceManager within the specified maximum "
            f"registration duration {limit}. This indicates a problem with this instance. "
            "Terminating now.\n"
            + self._records.frames(
                "org.apache.flink.runtime.taskexecutor.TaskExecutor.registrationTimeout("
                "TaskExecutor.java:1494)",
                "org.apache.flink.runtime.taskexecutor.TaskExecutor.lambda$startRegistrationTimeout"
                "$17(TaskExecutor.java:1479)",
            )
        )
        thread = self._thread()
        runner = (t + self._irng.randrange(2, 20), thread)
        self._log_taskexecutor_fatal(tm, trace, (t, thread), runner)
