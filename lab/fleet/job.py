"""One simulated job, composed of its parts, and the fleet of them."""

from __future__ import annotations

import heapq
import random
from collections.abc import Iterator
from operator import attrgetter

from lab.fleet.background import Background
from lab.fleet.checkpoints import Checkpoints, Profile
from lab.fleet.crashes import Crashes
from lab.fleet.failover import Failover
from lab.fleet.identity import Identity
from lab.fleet.incidents import IncidentPlan, onsets_of
from lab.fleet.metrics import Load, Metrics
from lab.fleet.records import Records
from lab.fleet.spec import FleetSpec, SimRecord
from lab.fleet.state import Agenda, RunState


class Job:
    """One simulated job: its parts, its normal life, and the records it produces.

    A job owns its parts and wires them once: who it is (:class:`~lab.fleet.identity.Identity`:
    ids, wording, layout, graph), its records (:class:`~lab.fleet.records.Records`), what it
    is doing now and what is planned for it (:class:`~lab.fleet.state.RunState`,
    :class:`~lab.fleet.state.Agenda`), its checkpoints, its metrics, how it fails over, what
    its dying processes log, and the plans of its incidents. It runs the start-up and the
    loop that interleaves checkpoint cycles with the planned actions.

    Records are pushed onto a heap as whole checkpoint cycles are simulated, and handed
    out in event-time order once no later push can precede them: everything a cycle
    logs happens at or after its trigger, so all records before the next trigger are
    final. Incidents that fail the job over are planned when the job is created (their
    times are fixed then) and logged by actions that run in event-time order between the
    cycles, each logging at or after its own time; the lines they write may name
    checkpoints, so they are written when the simulation reaches them.

    Attributes:
        identity: Who the job is and what it runs.

    """

    def __init__(self, spec: FleetSpec, index: int, start_ms: int, end_ms: int) -> None:
        """Job ``index`` of ``spec``'s fleet, simulated from ``start_ms`` until ``end_ms``."""
        seed = spec.seed
        self.identity = ident = Identity(spec, index)
        self._end_ms = end_ms
        # Three generators: the job's (its normal life), the incidents' (so that a job's
        # records before an onset are the same as without the incident) and the metrics'
        # (in Metrics). The job's is drawn in this order, so that the same seed gives the
        # same job: its checkpoints' profile, its load, the TaskManager whose tasks
        # acknowledge late, its start.
        self._rng = rng = random.Random(f"{seed}/job/{index}")
        irng = random.Random(f"{seed}/incident/{index}")
        profile = Profile.draw(rng)
        load = Load.draw(rng)
        skewed_tm = rng.randrange(spec.tms_per_job)
        onsets = onsets_of(spec, index, start_ms)

        self._records = records = Records(ident)
        self._state = state = RunState(ident, start_ms, rng)
        self._agenda = agenda = Agenda()
        self._checkpoints = checkpoints = Checkpoints(
            ident, records, state, profile, skewed_tm, onsets, rng, irng
        )
        self._metrics = metrics = Metrics(
            ident, records, state, checkpoints, load, start_ms, end_ms
        )
        failover = Failover(ident, records, state, agenda, checkpoints, metrics, irng)
        crashes = Crashes(ident, records, state, failover, irng)
        plan = IncidentPlan(
            ident, records, state, agenda, checkpoints, metrics, failover, crashes, irng, end_ms
        )
        plan.plan(onsets)
        Background(ident, records, state, agenda, onsets, end_ms)

    def records(self) -> Iterator[SimRecord]:
        """All records of this job before its end, in event-time order."""
        checkpoints, agenda, metrics = self._checkpoints, self._agenda, self._metrics
        self._startup()
        checkpoints.start()
        while True:
            action_ms = agenda.next_ms()
            now = min(checkpoints.trigger, action_ms)
            if now >= self._end_ms:
                break
            metrics.until(now)
            yield from self._records.ready(now)
            if action_ms <= checkpoints.trigger:
                agenda.run_next()
                continue
            checkpoints.step()
        metrics.until(self._end_ms)
        yield from self._records.ready(self._end_ms)

    # -- the normal life ---------------------------------------------------------------

    def _startup(self) -> None:
        """Log the JobManager's view of the job going to RUNNING (ExecutionGraph lines)."""
        ident, state, records = self.identity, self._state, self._records
        rng, t0, n = self._rng, state.start_ms, ident.spec.tms_per_job
        records.log(
            t0,
            "job_state",
            "INFO",
            f"Job {ident.name} ({state.jid}) switched from state CREATED to RUNNING.",
            records.dispatcher(rng),
        )
        # (state, share of the start-up span after which a task reaches it): scheduling is
        # immediate, slot allocation and deployment take most of the time.
        steps = [("SCHEDULED", 0.0), ("DEPLOYING", 0.3), ("INITIALIZING", 0.6), ("RUNNING", 0.95)]
        if not ident.wording.initializing:
            del steps[2]
        span = state.running_ms - t0
        for task in ident.tasks:
            prev = "CREATED"
            for step, share in steps:
                t = t0 + 1 + task.vertex + int(span * share) + rng.randrange(0, span // 20)
                t = min(t, state.running_ms)
                records.log(
                    t,
                    "task_state",
                    "INFO",
                    f"{task.name} ({task.subtask + 1}/{n}) ({task.attempt_id}) switched from "
                    f"{prev} to {step}.",
                    records.dispatcher(rng),
                )
                prev = step


def generate(spec: FleetSpec, start_ms: int, duration_s: float) -> Iterator[SimRecord]:
    """All records of the fleet from ``start_ms`` for ``duration_s``, in event-time order.

    Deterministic: the same spec and start give the same records. Lazy: records are
    produced as they are consumed, with memory bounded by about one checkpoint cycle
    per job. Records with equal times keep a stable order.

    Args:
        spec: The fleet and its incidents.
        start_ms: Event time of the start, epoch milliseconds UTC.
        duration_s: Simulated seconds; records at or after ``start_ms + duration`` are cut.

    Returns:
        An iterator of :class:`SimRecord`, ``time_ms`` non-decreasing.

    Raises:
        ValueError: ``duration_s`` is negative.

    """
    if duration_s < 0:
        msg = f"duration_s must be >= 0, got {duration_s}"
        raise ValueError(msg)
    end_ms = start_ms + round(duration_s * 1000)
    first = spec.first_job
    jobs = [Job(spec, i, start_ms, end_ms) for i in range(first, first + spec.jobs)]
    return heapq.merge(*(j.records() for j in jobs), key=attrgetter("time_ms"))
