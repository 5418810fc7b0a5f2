"""What a simulated job is doing now, what is planned for it, and Flink's timings."""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass

from lab.fleet.identity import Identity, Task, TaskManager
from lab.fleet.ids import hex32

NEVER = 2**62  # a time after every simulation's end

# The simulated jobs restart with restart-strategy fixed-delay and a delay of 10 s (a value
# seen in production configurations; Flink's own default delay is 1 s).
RESTART_DELAY_MS = 10_000
# heartbeat.interval and heartbeat.timeout, Flink's defaults.
HEARTBEAT_INTERVAL_MS = 10_000
HEARTBEAT_TIMEOUT_MS = 50_000
# The registration timeout of a TaskManager that lost its ResourceManager (Flink's default,
# taskmanager.registration.timeout) and the RPC timeout (akka.ask.timeout / pekko.ask.timeout).
REGISTRATION_TIMEOUT_MS = 300_000
ASK_TIMEOUT_MS = 10_000


@dataclass(frozen=True, slots=True)
class Break:
    """A time the job stops running: checkpoints in flight cannot complete from ``stuck_ms``.

    They expire if their timeout comes first, else they are aborted (counted as failed,
    silently) at ``abort_ms``, when the job fails over.
    """

    stuck_ms: int
    abort_ms: int


class Agenda:
    """Actions planned for given times: an incident's lines, a failover, a restart.

    Each runs when the simulation reaches its time and logs at that time or later; those
    with equal times run in the order they were planned.
    """

    def __init__(self) -> None:
        self._actions: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = 0

    def at(self, t: int, action: Callable[[], None]) -> None:
        """Run ``action`` when the simulation reaches ``t``."""
        self._seq += 1
        heapq.heappush(self._actions, (t, self._seq, action))

    def next_ms(self) -> int:
        """When the next action is due (:data:`NEVER` if none is planned)."""
        return self._actions[0][0] if self._actions else NEVER

    def run_next(self) -> None:
        """Run the action due first."""
        heapq.heappop(self._actions)[2]()


class RunState:
    """What the job is doing now; planned actions change it at their time.

    Attributes:
        start_ms: When the job was submitted (it logs CREATED -> RUNNING).
        running_ms: When every task of its first deployment runs.
        jid: The job id it runs under now (a new one after a resubmission without HA).
        run: Submissions of the job so far, less one.
        job_state: The job's state as the JobManager logs it (RUNNING, RESTARTING, ...).
        tasks_running: Whether every task runs (task metrics and checkpoints go on).
        jm_up: Whether the JobManager process runs (and reports the job's metrics).
        slots: The TaskManager that runs each subtask.
        tm_started: TaskManagers started so far (the next one's number).
        deployment: Deployments of the tasks so far (each has new attempt ids).
        attempt_no: The attempt number the current deployment shows (0 with a new JobMaster).
        breaks: The times the job stopped running, in the order planned.

    """

    def __init__(self, identity: Identity, start_ms: int, rng: random.Random) -> None:
        """Draw the job's start from ``rng``: submitted within 4 s of ``start_ms``."""
        self._id = identity
        self.start_ms = start_ms + rng.randrange(0, 4000)
        self.running_ms = self.start_ms + rng.randrange(1500, 3000)
        self.jid = identity.job_id
        self.run = 0
        self.job_state = "RUNNING"
        self.tasks_running = True
        self.jm_up = True
        self.slots: list[TaskManager] = list(identity.tms)
        self.tm_started = identity.spec.tms_per_job
        self.deployment = 0
        self.attempt_no = 0
        self.breaks: list[Break] = []

    def attempt_id(self, task: Task) -> str:
        """The execution attempt id of ``task`` in the current deployment."""
        ident = self._id
        if self.deployment == 0:
            return task.attempt_id
        if ident.wording.new_attempt_ids:
            return f"{ident.graph_id}_{task.vertex_id}_{task.subtask}_{self.attempt_no}"
        return hex32(
            ident.spec.seed, "attempt", ident.index, task.vertex, task.subtask, self.deployment
        )

    def attempt_suffix(self) -> str:
        """What ends a task's name on its TaskManager (1.12+: ``#<attempt number>``)."""
        return f"#{self.attempt_no}" if self._id.wording.attempt_suffix else ""
