"""What every part of a simulated job shares: its identity, graph, state and records."""

from __future__ import annotations

import heapq
import json
import math
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lab.fleet.ids import (
    _JOB_TEMPLATES,
    _LAYOUT_BY_SLOT,
    _TELEGRAF_SLOT,
    _digest,
    _hex32,
    _k8s_suffix,
    _on_k8s,
    job_id,
    job_name,
    tm_id,
)
from lab.fleet.spec import FleetSpec, SimRecord
from lab.fleet.wording import _iso_ts, _log4j_ts, _parse_version, _sites_of, _Wording

if TYPE_CHECKING:
    from lab.fleet.metrics import _Growth


@dataclass(frozen=True, slots=True)
class _TaskManager:
    index: int  # the subtask it runs: TaskManager k runs subtask k of every vertex
    tm_id: str
    host: str  # the FQDN in TaskManagerLocation and the "host" metric label (unfiltered)
    data_port: int
    node: str  # Kubernetes node (the envelope's "host"); empty on YARN
    rpc_port: int  # of its RPC endpoint (akka.tcp://flink@host:port/user/rpc/taskmanager_0)

    @property
    def location(self) -> str:
        return f"{self.tm_id} @ {self.host} (dataPort={self.data_port})"


@dataclass(frozen=True, slots=True)
class _Task:
    vertex: int
    subtask: int
    name: str  # vertex name, e.g. "Source: kafka-orders -> Map"
    vertex_id: str
    attempt_id: str  # of the first deployment
    is_source: bool


_NEVER = 2**62  # a time after every simulation's end


@dataclass(frozen=True, slots=True)
class _Break:
    """A time the job stops running: checkpoints in flight cannot complete from ``stuck_ms``.

    They expire if their timeout comes first, else they are aborted (counted as failed,
    silently) at ``abort_ms``, when the job fails over.
    """

    stuck_ms: int
    abort_ms: int


# The simulated jobs restart with restart-strategy fixed-delay and a delay of 10 s (a value
# seen in production configurations; Flink's own default delay is 1 s).
_RESTART_DELAY_MS = 10_000
# heartbeat.interval and heartbeat.timeout, Flink's defaults.
_HEARTBEAT_INTERVAL_MS = 10_000
_HEARTBEAT_TIMEOUT_MS = 50_000
# The registration timeout of a TaskManager that lost its ResourceManager (Flink's default,
# taskmanager.registration.timeout) and the RPC timeout (akka.ask.timeout / pekko.ask.timeout).
_REGISTRATION_TIMEOUT_MS = 300_000
_ASK_TIMEOUT_MS = 10_000


class _JobBase:
    """What every part of a simulated job shares: who it is, its graph, its state.

    Its parts (metrics, failover, crashes, incidents, the job's normal life) are layered
    on it, each on the one before. The attributes are set in the order the job's random
    generator is drawn from, so that the same seed gives the same job.
    """

    def __init__(self, spec: FleetSpec, index: int, start_ms: int, end_ms: int) -> None:
        self._init_identity(spec, index, end_ms)
        self._init_graph()
        self._init_checkpoints()
        self._init_incidents(start_ms)
        self._init_run_state(start_ms)

    def _init_identity(self, spec: FleetSpec, index: int, end_ms: int) -> None:
        """Version, layout, deployment, ids, and where the JobManager and TaskManagers run."""
        self.spec = spec
        self.index = index
        self.end_ms = end_ms
        seed = spec.seed
        version = spec.flink_versions[index % len(spec.flink_versions)]
        ver = _parse_version(version)
        self.ver = ver
        self.w = _Wording.of(ver)
        self.sites = _sites_of(ver, _on_k8s(index))
        self.layout = _LAYOUT_BY_SLOT[index % 4]
        self.k8s = _on_k8s(index)
        self.telegraf = index % 4 == _TELEGRAF_SLOT
        self.job_id = job_id(spec, index)
        self.jid = self.job_id  # a JobManager without HA resubmits the job under a new id
        self.name = job_name(spec, index)
        self.key = self.job_id.encode()
        self.rng = random.Random(f"{seed}/job/{index}")

        self.jm_host, jm_node = self._place("jm")
        self.jm_pod = (
            f"{self.name}-{_k8s_suffix(seed, 10, 'rs', index)}-{_k8s_suffix(seed, 5, 'pod', index)}"
        )
        self.tms: tuple[_TaskManager, ...] = tuple(
            self._taskmanager(k, k) for k in range(spec.tms_per_job)
        )
        self.kube_jm = self._kube(self.jm_pod, jm_node)
        self.kube_tm: dict[str, str] = {tm.tm_id: self._kube(tm.tm_id, tm.node) for tm in self.tms}

    def _init_graph(self) -> None:
        """Two Kafka sources and a keyed co-process into a Kafka sink, one subtask per TM.

        Sink naming follows the API in use: the legacy SinkFunction is "Sink: <name>", a
        Sink V2 writes "<name>: Writer" and "<name>: Committer".
        """
        seed, index, n = self.spec.seed, self.index, self.spec.tms_per_job
        _, main_topic, side_topic, out_topic = _JOB_TEMPLATES[index % len(_JOB_TEMPLATES)]
        self.main_source = f"Source: kafka-{main_topic}"
        self.side_source = f"Source: kafka-{side_topic}"
        if self.w.legacy_sink:
            sink = f"KeyedCoProcess -> Sink: kafka-{out_topic}"
        else:
            sink = f"KeyedCoProcess -> kafka-{out_topic}: Writer -> kafka-{out_topic}: Committer"
        vertex_names = (f"{self.main_source} -> Map", self.side_source, sink)
        self.graph_id = _hex32(seed, "graph", index)
        tasks = []
        for v, vname in enumerate(vertex_names):
            vid = _hex32(seed, "vertex", index, v)
            for k in range(n):
                if self.w.new_attempt_ids:
                    attempt = f"{self.graph_id}_{vid}_{k}_0"
                else:
                    attempt = _hex32(seed, "attempt", index, v, k)
                tasks.append(_Task(v, k, vname, vid, attempt, v < 2))
        self.tasks: tuple[_Task, ...] = tuple(tasks)
        self.sink_uid = _hex32(seed, "sink-uid", index)
        self.producer_id_base = 1000 + int.from_bytes(_digest(seed, "pid", index)[:2]) % 60000

    def _init_checkpoints(self) -> None:
        """How the job's checkpoints behave and how busy it is.

        A per-job base duration (log-uniform 200..3000 ms) with jitter and rare spikes, and
        a state size that wobbles around its level.
        """
        rng, spec = self.rng, self.spec
        self.base_duration_ms = math.exp(rng.uniform(math.log(200), math.log(3000)))
        self.size_bytes = float(int(math.exp(rng.uniform(math.log(2e6), math.log(8e8)))))
        self.base_size = self.size_bytes
        self.size_wobble = 0.0  # log-space offset from the level, see Job's checkpoints
        self.interval_ms = round(spec.checkpoint_interval_s * 1000)
        self.timeout_ms = round(spec.checkpoint_timeout_s * 1000)
        self.max_healthy_ms = max(1, int(self.timeout_ms * 0.8))
        self.records_per_s = rng.uniform(200, 5000)  # per main-source subtask
        self.side_per_s = rng.uniform(0.5, 40)

    def _init_incidents(self, start_ms: int) -> None:
        """The job's incidents: their onsets and the state the checkpoint ones keep."""
        # Earliest onset per incident kind. A new kind adds itself to IncidentKind and
        # INCIDENT_KINDS and acts where it bites: _cycle for checkpoint outcomes, _tm_sample
        # for TaskManager metrics, or a plan of its own (_plan_incidents).
        self.onset_ms: dict[str, int] = {}
        for inc in self.spec.incidents:
            if inc.job_index == self.index:
                t = start_ms + round(inc.onset_s * 1000)
                self.onset_ms[inc.kind] = min(t, self.onset_ms.get(inc.kind, t))
        # The TaskManager whose tasks acknowledge late (all of them, as in seed 002).
        self.skewed_tm = self.rng.randrange(self.spec.tms_per_job)
        # Incidents draw from their own generator, so that a job's records before an onset
        # are the same as without the incident.
        self.irng = random.Random(f"{self.spec.seed}/incident/{self.index}")
        self.creep = 1.0  # checkpoint_creep: duration factor over the job's base
        self.skew_seen = 0  # late_acks_skew: checkpoints since the onset

    def _init_run_state(self, start_ms: int) -> None:
        """What the job is doing now; actions (incident sequences) change it at their time."""
        self.job_state = "RUNNING"
        self.tasks_running = True
        self.jm_up = True  # the JobManager process runs (and reports the job's metrics)
        self.slots: list[_TaskManager] = list(self.tms)  # the TaskManager of each subtask
        # TaskManagers started so far (the next one's number).
        self.tm_started = self.spec.tms_per_job
        self.deployment = 0  # deployments of the tasks so far (each has new attempt ids)
        self.attempt_no = 0  # the attempt number a deployment shows (0 with a new JobMaster)
        self.run = 0  # submissions of the job (a new id each, without HA)
        self.breaks: list[_Break] = []
        self.actions: list[tuple[int, int, Callable[[], None]]] = []
        # Completed checkpoints a restart may restore: (completed at, id, trigger timestamp).
        self.restorable: deque[tuple[int, int, int]] = deque(maxlen=4)
        self.trigger = _NEVER
        self.checkpoint = 1
        self.growth: _Growth | None = None  # state_growth

        # Job lifecycle and state as the JobManager's metrics see it.
        self.start_ms = start_ms + self.rng.randrange(0, 4000)
        self.running_ms = self.start_ms + self.rng.randrange(1500, 3000)
        self.last_duration = -1
        self.last_size = -1
        self.completed = 0
        self.failed = 0
        self.consecutive_failed = 0
        self.changes: deque[tuple[int, int, int, int, int]] = deque()  # (t, dur, size, ok, fail)

        self.heap: list[tuple[int, int, SimRecord]] = []
        self.seq = 0

    # -- identities --------------------------------------------------------------------

    def _place(self, *parts: object) -> tuple[str, str]:
        """Host and node: EMR-style FQDNs on YARN; pod IPs (no reverse DNS) on Kubernetes."""
        d = _digest(self.spec.seed, "place", self.index, *parts)
        if self.k8s:
            node = 1 + d[0] % 6
            return f"10.244.{node}.{2 + d[1] % 250}", f"node-{node}"
        return f"ip-10-0-{1 + d[0] % 4}-{10 + d[1] % 240}.ec2.internal", ""

    def _taskmanager(self, slot: int, number: int) -> _TaskManager:
        """TaskManager number ``number`` of the job (started in that order), running ``slot``."""
        seed, index = self.spec.seed, self.index
        host, node = self._place("tm", number)
        if self.k8s:
            port, rpc = 6121, 6122
        else:
            port = 32768 + int.from_bytes(_digest(seed, "port", index, number)[:2]) % 28000
            rpc = 32768 + int.from_bytes(_digest(seed, "rpc", index, number)[:2]) % 28000
        return _TaskManager(slot, tm_id(self.spec, index, number), host, port, node, rpc)

    def _attempt_id(self, task: _Task) -> str:
        """The execution attempt id of ``task`` in the current deployment."""
        if self.deployment == 0:
            return task.attempt_id
        if self.w.new_attempt_ids:
            return f"{self.graph_id}_{task.vertex_id}_{task.subtask}_{self.attempt_no}"
        return _hex32(
            self.spec.seed, "attempt", self.index, task.vertex, task.subtask, self.deployment
        )

    def _rpc_address(self, host: str, port: int, endpoint: str) -> str:
        """An RPC endpoint address: ``akka.tcp://flink@host:port/user/rpc/<endpoint>``."""
        scheme = "pekko" if self.w.pekko else "akka"
        path = "/user/rpc/" if self.ver >= (1, 11) else "/user/"
        return f"{scheme}.tcp://flink@{host}:{port}{path}{endpoint}"

    def _rid(self, tm: _TaskManager) -> str:
        """The ResourceID as heartbeat messages print it (1.12+ on YARN: with its NodeManager)."""
        if self.ver >= (1, 12) and not self.k8s:
            return f"{tm.tm_id}({tm.host}:8041)"
        return tm.tm_id

    # -- records -----------------------------------------------------------------------

    @staticmethod
    def _kube(pod: str, node: str) -> str:
        return json.dumps({"pod_name": pod, "namespace_name": "flink", "host": node})

    def _push(self, rec: SimRecord) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (rec.time_ms, self.seq, rec))

    def _log(
        self,
        t: int,
        site: str,
        level: str,
        msg: str,
        thread: str,
        trace: str = "",
        tm: _TaskManager | None = None,
    ) -> None:
        """Render one log record in the job's layout and queue it (``tm``: a TaskManager's log)."""
        logger, file, line = self.sites[site]
        ts = _log4j_ts(t)
        if self.layout == "json":
            text = (
                f'{{"level":"{level}","timestamp":"{ts}","thread":{json.dumps(thread)},'
                f'"file":"{file}","line":"{line}","message":{json.dumps(msg)}}}'
            )
            if trace:
                text = f"{text}\n{trace}"
        else:
            # %d %-5p %-60c %x - %m: log4j 2 renders the empty NDC as "[]", log4j 1 as ""
            # (hence two spaces before the dash).
            ndc = "[] " if self.w.log4j2 else " "
            text = f"{ts} {level:<5} {logger:<60} {ndc}- {msg}"
            if trace:
                text = f"{text}\n{trace}"
            if self.layout == "envelope":
                kube = self.kube_jm if tm is None else self.kube_tm[tm.tm_id]
                text = (
                    f'{{"log": {json.dumps(text)}, "stream": "stdout", "time": "{_iso_ts(t)}", '
                    f'"kubernetes": {kube}}}'
                )
        key = self.key if tm is None else tm.tm_id.encode()
        self._push(SimRecord("log", t, key, text.encode()))

    def _frames(self, *frames: str) -> str:
        """Stack frames as log4j prints them (log4j 2 appends the jar of Flink's classes)."""
        jar = self.w.frame_jar if self.w.log4j2 else ""
        jdk = " [?:?]" if self.w.log4j2 else ""
        return "\n".join(
            f"\tat {f}{jar if f.startswith('org.apache.flink') else jdk}" for f in frames
        )

    def _attempt_suffix(self) -> str:
        """What ends a task's name on its TaskManager (1.12+: ``#<attempt number>``)."""
        return f"#{self.attempt_no}" if self.w.attempt_suffix else ""

    def _dispatcher(self) -> str:
        rpc = "pekko" if self.w.pekko else "akka"
        return f"flink-{rpc}.actor.default-dispatcher-{self.rng.randrange(2, 40)}"

    def _io_thread(self) -> str:
        return f"{self.w.io_thread}-{self.rng.randrange(1, 9)}"

    def _idispatcher(self) -> str:
        """A dispatcher thread name for incident lines (from the incident generator)."""
        rpc = "pekko" if self.w.pekko else "akka"
        return f"flink-{rpc}.actor.default-dispatcher-{self.irng.randrange(2, 40)}"

    def _io_thread_i(self) -> str:
        """An I/O thread name for incident lines (from the incident generator)."""
        return f"{self.w.io_thread}-{self.irng.randrange(1, 9)}"

    def _at(self, t: int, action: Callable[[], None]) -> None:
        """Run ``action`` when the simulation reaches ``t`` (it logs at ``t`` or later)."""
        self.seq += 1
        heapq.heappush(self.actions, (t, self.seq, action))
