"""A job's metrics: the JobManager's checkpoint statistics, TaskManager heap and GC, tasks.

Metric noise has its own generators (one for the setup, one per TaskManager for its
samples) so that injecting an incident (which changes how much randomness the log side,
or one TaskManager, draws) does not reshuffle every other metric value.
"""

from __future__ import annotations

import json
import math
import random
import re
from dataclasses import dataclass

from lab.fleet.checkpoints import Checkpoints
from lab.fleet.identity import Identity, Task, TaskManager
from lab.fleet.records import Records
from lab.fleet.spec import SimRecord
from lab.fleet.state import NEVER, RunState

_UNALLOWED = re.compile(r"[^a-zA-Z0-9:_]")


def label(value: str) -> str:
    """Filter a label value as Flink's Prometheus reporter does (FLINK_METRICS.md §1)."""
    return _UNALLOWED.sub("_", value)


@dataclass(frozen=True, slots=True)
class Series:
    """One metric series with its JSON prefix and suffix rendered once."""

    key: bytes
    head: str
    tail: str
    telegraf: bool

    @staticmethod
    def of(name: str, labels: dict[str, str], key: str, telegraf: bool, url: str) -> Series:
        """Series ``name`` with ``labels``, keyed ``key``; ``url``: the scrape Telegraf tags."""
        if telegraf:
            # Telegraf's JSON serializer (Go maps: keys sorted, no spaces). The prometheus
            # input with metric_version=1 names the field after the sample type, and Flink
            # exposes every metric as a gauge.
            tags = json.dumps({**labels, "url": url}, sort_keys=True, separators=(",", ":"))
            head = '{"fields":{"gauge":'
            tail = f'}},"name":{json.dumps(name)},"tags":{tags},"timestamp":'
        else:
            head = f'{{"name": {json.dumps(name)}, "value": '
            tail = f', "labels": {json.dumps(labels)}}}'
        return Series(key.encode(), head, tail, telegraf)

    def record(self, t_ms: int, value: str) -> SimRecord:
        """The sample ``value`` at ``t_ms`` as a record."""
        if self.telegraf:
            text = f"{self.head}{value}{self.tail}{t_ms // 1000}}}"
        else:
            text = f'{self.head}{value}, "timestamp": {t_ms}{self.tail}'
        return SimRecord("metric", t_ms, self.key, text.encode())


@dataclass(slots=True)
class TaskSeries:
    """One subtask's throughput series and the counters behind them."""

    task: Task
    s_rate_in: Series
    s_rate_out: Series
    s_count_in: Series
    s_count_out: Series
    count_in: float = 0.0
    count_out: float = 0.0


@dataclass(slots=True)
class TmState:
    """What one TaskManager's metrics remember between samples."""

    tm: TaskManager
    next_ms: int
    used: float
    floor: float  # the post-GC heap (live set) of the busy TaskManager
    ceiling: float
    growth: float  # heap bytes allocated per second
    heap_max: int
    gc_count: int
    gc_time: int
    phase: float  # of the throughput wave
    s_used: Series
    s_max: Series
    s_gc_count: Series
    s_gc_time: Series
    last_ms: int  # of the previous sample (counters add rate x elapsed time)
    rng: random.Random  # noise of its samples
    # Its tasks' series, for one deployment of one job id (a restart deploys new attempts,
    # whose counters start from zero).
    tasks: tuple[TaskSeries, ...] = ()
    tasks_of: tuple[int, str] = (-1, "")
    # idle_heap_leak: from idle_ms the tasks process nothing and the heap cycles in a
    # smaller band, more slowly; from leak_ms the floor rises by leak_per_ms.
    idle_ms: int = NEVER
    idle_band: float = 0.0
    idle_growth: float = 0.0
    leak_ms: int = NEVER
    leak_per_ms: float = 0.0
    dead_ms: int = NEVER  # killed or unreachable: no samples from here on


@dataclass(frozen=True, slots=True)
class Load:
    """How busy a job is: records per second of each main-source subtask, and of the side one."""

    records_per_s: float
    side_per_s: float

    @staticmethod
    def draw(rng: random.Random) -> Load:
        """200-5,000 records per second on the main source, 0.5-40 on the side one."""
        records_per_s = rng.uniform(200, 5000)
        side_per_s = rng.uniform(0.5, 40)
        return Load(records_per_s, side_per_s)


class Metrics:
    """A job's metric samples, every ``metric_interval_s``, queued with its records.

    Attributes:
        tm_states: What the samples of each TaskManager the job ever ran remember, in the
            order they started; incidents change them (an idle job, a leak, a death).

    """

    def __init__(
        self,
        identity: Identity,
        records: Records,
        state: RunState,
        checkpoints: Checkpoints,
        load: Load,
        start_ms: int,
        end_ms: int,
    ) -> None:
        """Set up the job's series and its TaskManagers' heaps (from the metrics generator)."""
        self._id = identity
        self._records = records
        self._state = state
        self._checkpoints = checkpoints
        self._load = load
        self._end_ms = end_ms
        spec = identity.spec
        rng = random.Random(f"{spec.seed}/metrics/{identity.index}")
        self._metric_ms = round(spec.metric_interval_s * 1000)
        self.new_job_id()
        self._next_job_tick = state.running_ms + rng.randrange(0, self._metric_ms)

        gib = 1024 * 1024 * 1024
        heap_max = int(rng.choice((1, 2, 4)) * gib * rng.uniform(0.9, 0.97)) // 2**20 * 2**20
        self._heap_max = heap_max
        self.tm_states = [
            self._tm_state(tm, start_ms + rng.randrange(1000, 3000), rng, f"tm/{tm.index}")
            for tm in identity.tms
        ]

    def new_job_id(self) -> None:
        """The JobManager's series, for the job id the job runs under now."""
        ident, jid = self._id, self._state.jid
        jm_labels = {
            "host": label(ident.jm_host),
            "job_id": jid,
            "job_name": label(ident.name),
        }
        jm_url = f"http://{ident.jm_host}:9249/metrics"

        def job_series(name: str) -> Series:
            return Series.of(f"flink_jobmanager_job_{name}", jm_labels, jid, ident.telegraf, jm_url)

        self._s_duration = job_series("lastCheckpointDuration")
        self._s_size = job_series("lastCheckpointSize")
        self._s_completed = job_series("numberOfCompletedCheckpoints")
        self._s_failed = job_series("numberOfFailedCheckpoints")

    def new_taskmanager(self, tm: TaskManager, number: int, first_ms: int) -> TmState:
        """Metrics of TaskManager ``number``, started to replace a lost one, from ``first_ms``."""
        ident = self._id
        setup = random.Random(f"{ident.spec.seed}/metrics/{ident.index}/setup/{number}")
        st = self._tm_state(tm, first_ms - self._metric_ms, setup, f"tm/{number}")
        st.next_ms = max(st.next_ms, first_ms)
        st.last_ms = first_ms
        self.tm_states.append(st)
        return st

    def taskmanager_at(self, slot: int, t: int) -> TmState:
        """The metric state of the TaskManager that runs ``slot`` at ``t`` (when planning)."""
        return [st for st in self.tm_states if st.tm.index == slot and st.next_ms <= t][-1]

    def resume(self, t: int) -> None:
        """Every task runs again from ``t``: their counters count from there."""
        for st in self.tm_states:
            st.last_ms = max(st.last_ms, t)

    def _tm_state(self, tm: TaskManager, first_ms: int, rng: random.Random, name: str) -> TmState:
        labels = {"host": label(tm.host), "tm_id": label(tm.tm_id)}
        url = f"http://{tm.host}:9249/metrics"
        telegraf = self._id.telegraf

        def series(metric: str) -> Series:
            return Series.of(f"flink_taskmanager_{metric}", labels, tm.tm_id, telegraf, url)

        heap_max = self._heap_max
        floor = heap_max * rng.uniform(0.12, 0.3)
        ceiling = heap_max * rng.uniform(0.6, 0.85)
        gc_count = rng.randrange(0, 50)
        return TmState(
            tm=tm,
            next_ms=first_ms + rng.randrange(0, self._metric_ms),
            used=rng.uniform(floor, ceiling),
            floor=floor,
            ceiling=ceiling,
            # One collection every 40-150 s: several in any 5-minute window, so the floor
            # (the lowest sample of a window) is always a post-GC value.
            growth=(ceiling - floor) / rng.uniform(40, 150),
            heap_max=heap_max,
            gc_count=gc_count,
            gc_time=gc_count * rng.randrange(8, 25),
            phase=rng.uniform(0, 2 * math.pi),
            s_used=series("Status_JVM_Memory_Heap_Used"),
            s_max=series("Status_JVM_Memory_Heap_Max"),
            s_gc_count=series("Status_JVM_GarbageCollector_G1_Young_Generation_Count"),
            s_gc_time=series("Status_JVM_GarbageCollector_G1_Young_Generation_Time"),
            last_ms=self._state.running_ms,
            rng=random.Random(f"{self._id.spec.seed}/metrics/{self._id.index}/{name}"),
        )

    def _task_series(self, st: TmState) -> tuple[TaskSeries, ...]:
        """The series of the tasks ``st``'s TaskManager runs in the current deployment."""
        ident, state = self._id, self._state
        if st.tasks_of == (state.deployment, state.jid):
            return st.tasks
        tm = st.tm
        labels = {"host": label(tm.host), "tm_id": label(tm.tm_id)}
        url = f"http://{tm.host}:9249/metrics"
        tasks = []
        for task in ident.tasks:
            if task.subtask != tm.index:
                continue
            task_labels = {
                **labels,
                "job_id": state.jid,
                "job_name": label(ident.name),
                "task_id": task.vertex_id,
                "task_name": label(task.name),
                "task_attempt_id": state.attempt_id(task),
                "task_attempt_num": str(state.attempt_no),
                "subtask_index": str(task.subtask),
            }

            def series(metric: str, labels: dict[str, str] = task_labels) -> Series:
                return Series.of(
                    f"flink_taskmanager_job_task_{metric}", labels, tm.tm_id, ident.telegraf, url
                )

            tasks.append(
                TaskSeries(
                    task,
                    series("numRecordsInPerSecond"),
                    series("numRecordsOutPerSecond"),
                    series("numRecordsIn"),
                    series("numRecordsOut"),
                )
            )
        st.tasks, st.tasks_of = tuple(tasks), (state.deployment, state.jid)
        return st.tasks

    def until(self, horizon: int) -> None:
        """Queue every metric sample before ``horizon``."""
        step, end, push = self._metric_ms, self._end_ms, self._records.push
        while self._next_job_tick < horizon and self._next_job_tick < end:
            t = self._next_job_tick
            stats = self._checkpoints.statistics_at(t)
            if self._state.jm_up:
                push(self._s_duration.record(t, str(stats.last_duration)))
                push(self._s_size.record(t, str(stats.last_size)))
                push(self._s_completed.record(t, str(stats.completed)))
                push(self._s_failed.record(t, str(stats.failed)))
            self._next_job_tick += step
        for st in self.tm_states:
            stop = min(horizon, end, st.dead_ms)
            while st.next_ms < stop:
                self._tm_sample(st, st.next_ms)
                st.next_ms += step

    def _tm_sample(self, st: TmState, t: int) -> None:
        rng, state, push = st.rng, self._state, self._records.push
        busy = t < st.idle_ms
        extra = self._state_heap(t)
        if busy and extra:
            used = self._full_heap(st, extra)
        elif busy:
            # Heap: allocation grows it steadily; a GC drops it back near the floor (sawtooth).
            used = st.used + st.growth * (self._metric_ms / 1000) * rng.uniform(0.7, 1.3)
            if used > st.ceiling:
                used = st.floor * rng.uniform(0.95, 1.1) + (used - st.ceiling) * 0.2
                st.gc_count += 1
                st.gc_time += rng.randrange(5, 60)
        else:
            used = self._idle_heap(st, t)
        st.used = used
        push(st.s_used.record(t, str(int(used))))
        push(st.s_max.record(t, str(st.heap_max)))
        push(st.s_gc_count.record(t, str(st.gc_count)))
        push(st.s_gc_time.record(t, str(st.gc_time)))
        if not state.tasks_running or st.tm is not state.slots[st.tm.index]:
            return
        tasks = self._task_series(st)
        elapsed_s = max(t - st.last_ms, 0) / 1000
        st.last_ms = max(st.last_ms, t)
        if not busy:
            # Idle: meters read 0 and counters stand still.
            for ts in tasks:
                push(ts.s_rate_in.record(t, "0.0"))
                push(ts.s_rate_out.record(t, "0.0"))
                push(ts.s_count_in.record(t, str(int(ts.count_in))))
                push(ts.s_count_out.record(t, str(int(ts.count_out))))
            return
        # Throughput: a slow hourly wave plus noise. A source task has no network input, so
        # its task-level numRecordsIn stays 0 (FLINK_METRICS.md §2); its output is the rate.
        wave = 1 + 0.2 * math.sin(st.phase + t / 3_600_000 * 2 * math.pi)
        main = self._load.records_per_s * wave * rng.uniform(0.93, 1.07)
        side = self._load.side_per_s * rng.uniform(0.5, 1.5)
        for ts in tasks:
            vertex = ts.task.vertex
            if vertex == 0:
                rate_in, rate_out = 0.0, main
            elif vertex == 1:
                rate_in, rate_out = 0.0, side
            else:
                rate_in = main + side
                rate_out = main * rng.uniform(0.97, 1.0)
            ts.count_in += rate_in * elapsed_s
            ts.count_out += rate_out * elapsed_s
            push(ts.s_rate_in.record(t, f"{rate_in:.1f}"))
            push(ts.s_rate_out.record(t, f"{rate_out:.1f}"))
            push(ts.s_count_in.record(t, str(int(ts.count_in))))
            push(ts.s_count_out.record(t, str(int(ts.count_out))))

    def _state_heap(self, t: int) -> float:
        """Heap bytes the state_growth state adds to every TaskManager's live set at ``t``."""
        growth = self._checkpoints.growth
        if growth is None or t < growth.onset_ms:
            return 0.0
        return (growth.size(t) - growth.base) * 1.5 / growth.tms

    def _full_heap(self, st: TmState, extra: float) -> float:
        """Heap used of a busy TaskManager whose live set is ``extra`` bytes larger.

        The fuller the heap, the less each collection frees and the more of them it takes
        to make room for the same allocation, each longer: GC time climbs steeply as the
        floor nears the maximum.
        """
        rng = st.rng
        floor = min(st.floor + extra, st.heap_max * 0.97)
        ceiling = min(st.ceiling + extra, st.heap_max * 0.98)
        room = max(ceiling - floor, 2**20)
        alloc = st.growth * (self._metric_ms / 1000) * rng.uniform(0.7, 1.3)
        used = max(st.used + alloc, floor)
        if used > ceiling:
            collections = min(max(1, int(alloc / room)), 1000)
            slow = 1 + 20 * max(floor / st.heap_max - 0.7, 0)
            st.gc_count += collections
            st.gc_time += int(collections * rng.randrange(5, 60) * slow)
            used = floor * rng.uniform(1.0, 1.05) + min(used - ceiling, room) * 0.2
        return min(used, float(st.heap_max))

    def _idle_heap(self, st: TmState, t: int) -> float:
        """Heap used of an idle TaskManager at ``t`` (its floor rising if it leaks)."""
        rng = st.rng
        floor = st.floor + st.leak_per_ms * max(t - st.leak_ms, 0)
        ceiling = min(floor + st.idle_band, st.heap_max)
        alloc = st.idle_growth * (self._metric_ms / 1000) * rng.uniform(0.7, 1.3)
        # What leaked since the last sample is live: it adds to the heap and stays.
        used = max(st.used + alloc + st.leak_per_ms * self._metric_ms, floor)
        if used > ceiling:
            # The floor is what survives a collection, so it comes back within 1%. The less
            # room above it, the more collections it takes to make room for the same
            # allocation, and the longer each one (a heap nearly full of live objects).
            room = max(ceiling - floor, 2**20)
            collections = min(max(1, int(alloc / room)), 1000)
            slow = 1 + 20 * max(floor / st.heap_max - 0.8, 0)
            st.gc_count += collections
            st.gc_time += int(collections * rng.randrange(5, 60) * slow)
            used = floor * rng.uniform(1.0, 1.01) + min(used - ceiling, alloc) * 0.05
        return min(used, st.heap_max)
