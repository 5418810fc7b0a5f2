"""A job's records: log lines rendered in its layout, metric samples, in event-time order."""

from __future__ import annotations

import heapq
import json
import random
from collections.abc import Iterator

from lab.fleet.identity import Identity, TaskManager
from lab.fleet.spec import SimRecord
from lab.fleet.wording import PROCESS_SITES, iso_ts, log4j_ts


def _kube(pod: str, node: str) -> str:
    """The ``kubernetes`` object of a Fluent Bit envelope, rendered once per pod."""
    return json.dumps({"pod_name": pod, "namespace_name": "flink", "host": node})


class Records:
    """The records one job has produced and not yet handed out.

    Records can be queued in any order; :meth:`ready` hands them out in event-time order
    (equal times in the order they were queued).

    Attributes:
        key: The Kafka key of the JobManager's records: the job id it runs now (a
            JobManager without HA resubmits the job under a new one).

    """

    def __init__(self, identity: Identity) -> None:
        self._id = identity
        self.key = identity.job_id.encode()
        self._kube_jm = _kube(identity.jm_pod, identity.jm_node)
        self._kube_tm: dict[str, str] = {tm.tm_id: _kube(tm.tm_id, tm.node) for tm in identity.tms}
        self._heap: list[tuple[int, int, SimRecord]] = []
        self._seq = 0

    def add_taskmanager(self, tm: TaskManager) -> None:
        """Ship the logs of ``tm``, a TaskManager started to replace a lost one."""
        self._kube_tm[tm.tm_id] = _kube(tm.tm_id, tm.node)

    def push(self, rec: SimRecord) -> None:
        """Queue ``rec``."""
        self._seq += 1
        heapq.heappush(self._heap, (rec.time_ms, self._seq, rec))

    def ready(self, horizon: int) -> Iterator[SimRecord]:
        """Hand out every queued record before ``horizon``, in event-time order."""
        heap = self._heap
        while heap and heap[0][0] < horizon:
            yield heapq.heappop(heap)[2]

    def log(
        self,
        t: int,
        site: str,
        level: str,
        msg: str,
        thread: str,
        trace: str = "",
        tm: TaskManager | None = None,
    ) -> None:
        """Render one log record in the job's layout and queue it (``tm``: a TaskManager's log)."""
        ident = self._id
        logger, file, line = ident.sites[site]
        ts = log4j_ts(t)
        if ident.layout == "json":
            # 1.19+ puts the job id in the MDC of a job's lines, and a JSON layout prints it.
            mdc = ident.wording.mdc_job_id and site not in PROCESS_SITES
            text = (
                f'{{"level":"{level}","timestamp":"{ts}","thread":{json.dumps(thread)},'
                f'"file":"{file}","line":"{line}","message":{json.dumps(msg)}'
                + (f',"flink-job-id":"{self.key.decode()}"' if mdc else "")
                + "}"
            )
            if trace:
                text = f"{text}\n{trace}"
        else:
            # %d %-5p %-60c %x - %m: log4j 2 renders the empty NDC as "[]", log4j 1 as ""
            # (hence two spaces before the dash).
            ndc = "[] " if ident.wording.log4j2 else " "
            text = f"{ts} {level:<5} {logger:<60} {ndc}- {msg}"
            if trace:
                text = f"{text}\n{trace}"
            if ident.layout == "envelope":
                kube = self._kube_jm if tm is None else self._kube_tm[tm.tm_id]
                text = (
                    f'{{"log": {json.dumps(text)}, "stream": "stdout", "time": "{iso_ts(t)}", '
                    f'"kubernetes": {kube}}}'
                )
        key = self.key if tm is None else tm.tm_id.encode()
        self.push(SimRecord("log", t, key, text.encode()))

    def frames(self, *frames: str) -> str:
        """Stack frames as log4j prints them (log4j 2 appends the jar of Flink's classes)."""
        w = self._id.wording
        jar = w.frame_jar if w.log4j2 else ""
        jdk = " [?:?]" if w.log4j2 else ""
        return "\n".join(
            f"\tat {f}{jar if f.startswith('org.apache.flink') else jdk}" for f in frames
        )

    def dispatcher(self, rng: random.Random) -> str:
        """A name of one of the JobManager's RPC dispatcher threads, drawn from ``rng``."""
        rpc = "pekko" if self._id.wording.pekko else "akka"
        return f"flink-{rpc}.actor.default-dispatcher-{rng.randrange(2, 40)}"

    def io_thread(self, rng: random.Random) -> str:
        """A name of one of the JobManager's I/O threads, drawn from ``rng``."""
        return f"{self._id.wording.io_thread}-{rng.randrange(1, 9)}"
