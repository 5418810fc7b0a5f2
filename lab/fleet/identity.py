"""Who one simulated job is: its version and wording, layout, deployment, hosts and graph.

All of it follows from the spec's seed and the job's index (no random generator is
drawn), and none of it changes while the job runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.fleet.ids import (
    digest,
    hex32,
    job_id,
    job_name,
    k8s_suffix,
    layout_of,
    on_k8s,
    sends_telegraf,
    tm_id,
    topics_of,
)
from lab.fleet.spec import FleetSpec
from lab.fleet.wording import Wording, parse_version, sites_of


@dataclass(frozen=True, slots=True)
class TaskManager:
    """One TaskManager process of a job.

    Attributes:
        index: The subtask it runs: TaskManager ``k`` runs subtask ``k`` of every vertex.
        tm_id: Its resource id (a YARN container id or a pod name).
        host: The FQDN in its TaskManagerLocation and the ``host`` metric label (unfiltered).
        data_port: Its data port.
        node: Its Kubernetes node (the Fluent Bit envelope's ``host``); empty on YARN.
        rpc_port: The port of its RPC endpoint
            (``akka.tcp://flink@host:port/user/rpc/taskmanager_0``).

    """

    index: int
    tm_id: str
    host: str
    data_port: int
    node: str
    rpc_port: int

    @property
    def location(self) -> str:
        """As Flink prints a TaskManagerLocation: ``<id> @ <host> (dataPort=<port>)``."""
        return f"{self.tm_id} @ {self.host} (dataPort={self.data_port})"


@dataclass(frozen=True, slots=True)
class Task:
    """One subtask of the job's graph.

    Attributes:
        vertex: Its vertex: 0 the main source, 1 the side source, 2 the keyed co-process
            and sink (the stateful one).
        subtask: Its subtask index, which is also the TaskManager it runs on.
        name: The vertex name, e.g. ``"Source: kafka-orders -> Map"``.
        vertex_id: The vertex id (32 hex).
        attempt_id: Its execution attempt id in the first deployment.
        is_source: Whether it is a source subtask.

    """

    vertex: int
    subtask: int
    name: str
    vertex_id: str
    attempt_id: str
    is_source: bool


class Identity:
    """Who job ``index`` of a fleet is, and what it runs.

    Attributes:
        spec: The fleet.
        index: The job's index in the fleet.
        ver: Its Flink version, ``(major, minor)``.
        wording: What its version writes.
        sites: Where each message is logged from: ``(logger, file, line)`` by site name.
        layout: Its log layout.
        k8s: Whether it runs on Kubernetes (else on YARN).
        telegraf: Whether its metrics come through Telegraf.
        job_id: The id of its first submission.
        name: The job's name.
        jm_host: The JobManager's host.
        jm_node: The JobManager's Kubernetes node (empty on YARN).
        jm_pod: The JobManager's pod name.
        tms: The TaskManagers it starts with, one per subtask.
        main_source: The main source's vertex name.
        side_source: The side source's vertex name.
        graph_id: The execution graph's id.
        tasks: Every subtask of its three vertices.
        sink_uid: The transactional sink's operator uid.
        producer_id_base: The Kafka producer id of the sink's first transactional id.

    """

    def __init__(self, spec: FleetSpec, index: int) -> None:
        self.spec = spec
        self.index = index
        seed = spec.seed
        self.ver = parse_version(spec.flink_versions[index % len(spec.flink_versions)])
        self.wording = Wording.of(self.ver)
        self.sites = sites_of(self.ver, on_k8s(index))
        self.layout = layout_of(index)
        self.k8s = on_k8s(index)
        self.telegraf = sends_telegraf(index)
        self.job_id = job_id(spec, index)
        self.name = job_name(spec, index)

        self.jm_host, self.jm_node = self.place("jm")
        self.jm_pod = (
            f"{self.name}-{k8s_suffix(seed, 10, 'rs', index)}-{k8s_suffix(seed, 5, 'pod', index)}"
        )
        self.tms: tuple[TaskManager, ...] = tuple(
            self.taskmanager(k, k) for k in range(spec.tms_per_job)
        )
        self._init_graph()

    def _init_graph(self) -> None:
        """Two Kafka sources and a keyed co-process into a Kafka sink, one subtask per TM.

        Sink naming follows the API in use: the legacy SinkFunction is "Sink: <name>", a
        Sink V2 writes "<name>: Writer" and "<name>: Committer".
        """
        seed, index, n = self.spec.seed, self.index, self.spec.tms_per_job
        main_topic, side_topic, out_topic = topics_of(index)
        self.main_source = f"Source: kafka-{main_topic}"
        self.side_source = f"Source: kafka-{side_topic}"
        if self.wording.legacy_sink:
            sink = f"KeyedCoProcess -> Sink: kafka-{out_topic}"
        else:
            sink = f"KeyedCoProcess -> kafka-{out_topic}: Writer -> kafka-{out_topic}: Committer"
        vertex_names = (f"{self.main_source} -> Map", self.side_source, sink)
        self.graph_id = hex32(seed, "graph", index)
        tasks = []
        for v, vname in enumerate(vertex_names):
            vid = hex32(seed, "vertex", index, v)
            for k in range(n):
                if self.wording.new_attempt_ids:
                    attempt = f"{self.graph_id}_{vid}_{k}_0"
                else:
                    attempt = hex32(seed, "attempt", index, v, k)
                tasks.append(Task(v, k, vname, vid, attempt, v < 2))
        self.tasks: tuple[Task, ...] = tuple(tasks)
        self.sink_uid = hex32(seed, "sink-uid", index)
        self.producer_id_base = 1000 + int.from_bytes(digest(seed, "pid", index)[:2]) % 60000

    def place(self, *parts: object) -> tuple[str, str]:
        """Host and node: EMR-style FQDNs on YARN; pod IPs (no reverse DNS) on Kubernetes."""
        d = digest(self.spec.seed, "place", self.index, *parts)
        if self.k8s:
            node = 1 + d[0] % 6
            return f"10.244.{node}.{2 + d[1] % 250}", f"node-{node}"
        return f"ip-10-0-{1 + d[0] % 4}-{10 + d[1] % 240}.ec2.internal", ""

    def taskmanager(self, slot: int, number: int) -> TaskManager:
        """TaskManager number ``number`` of the job (started in that order), running ``slot``."""
        seed, index = self.spec.seed, self.index
        host, node = self.place("tm", number)
        if self.k8s:
            port, rpc = 6121, 6122
        else:
            port = 32768 + int.from_bytes(digest(seed, "port", index, number)[:2]) % 28000
            rpc = 32768 + int.from_bytes(digest(seed, "rpc", index, number)[:2]) % 28000
        return TaskManager(slot, tm_id(self.spec, index, number), host, port, node, rpc)

    def stateful_task(self, tm: TaskManager) -> Task:
        """The co-process subtask ``tm`` runs (the one with keyed state and user classes)."""
        return next(k for k in self.tasks if k.vertex == 2 and k.subtask == tm.index)

    def rpc_address(self, host: str, port: int, endpoint: str) -> str:
        """An RPC endpoint address: ``akka.tcp://flink@host:port/user/rpc/<endpoint>``."""
        scheme = "pekko" if self.wording.pekko else "akka"
        path = "/user/rpc/" if self.ver >= (1, 11) else "/user/"
        return f"{scheme}.tcp://flink@{host}:{port}{path}{endpoint}"

    def rid(self, tm: TaskManager) -> str:
        """The ResourceID as heartbeat messages print it (1.12+ on YARN: with its NodeManager)."""
        if self.ver >= (1, 12) and not self.k8s:
            return f"{tm.tm_id}({tm.host}:8041)"
        return tm.tm_id
