"""What the steady runs measure besides latency: CPU per process and per query, batches.

* :class:`CpuSampler`: every second, the CPU time (``utime + stime`` of
  ``/proc/<pid>/stat``) of each process that takes part: the Kafka broker, the load
  producer, the driver's JVM, the Python workers under it (``pyspark.daemon`` and its
  forked workers, each its own CPU), this Python process (the driver;
  it also hosts the Slack emulator and the bench's samplers), and the whole machine's busy
  time (``/proc/stat``). Another process that exits keeps the last value sampled (up to a
  second of its CPU is lost). The samplers' own threads (:func:`instrument`) are counted
  apart, as ``instruments``, and left out of the driver's share: reading every process's
  memory each second costs this process ~0.03 cores that are the bench's, not flinkwatch's.
* :class:`StageCpu`: Spark's own accounting inside the JVM, from the UI's REST API
  (``/api/v1/applications/<id>/stages``): ``executorCpuTime`` and ``executorRunTime`` of
  every stage, attributed to the streaming query named on the first line of the stage's
  description (Spark describes a streaming batch's jobs by the query's name, then
  ``id = ...`` on the next line).
  A running stage's numbers grow with the executor heartbeats, a finished one's are
  final; each stage's last value counts, so a real-time parse stage that runs for
  ``spark.realtime_batch_s`` is counted as it goes.
* :class:`BatchWatch`: a query listener noting when each micro-batch of each query
  finished (wall clock) and how many rows it had: the first detect batch with data after
  a start.
"""

from __future__ import annotations

import bisect
import json
import logging
import os
import re
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lab.procs import children, cmdline, descendants
from streaming.listener import JsonProgressListener

log = logging.getLogger(__name__)

TICK = os.sysconf("SC_CLK_TCK")

#: The groups :class:`CpuSampler` reports, in the order of the result.
GROUPS = ("broker", "producer", "driver_jvm", "python_workers", "driver_python")


def is_python_worker(command: str) -> bool:
    """Whether a process's command line is PySpark's daemon or one of its Python workers."""
    return "pyspark.daemon" in command or "pyspark.worker" in command


def proc_cpu_s(pid: int, task: int | None = None) -> float | None:
    """``utime + stime`` of ``pid`` in seconds (None once it is gone); ``task``: one thread's."""
    path = f"/proc/{pid}/stat" if task is None else f"/proc/{pid}/task/{task}/stat"
    try:
        with open(path) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / TICK


def tree_cpu_s(pid: int) -> float:
    """CPU seconds of ``pid`` and every live process below it (one that ended is not counted)."""
    return sum(proc_cpu_s(p) or 0.0 for p in descendants(pid))


#: The bench's running sampling threads (native ids) → the most CPU seconds seen of each.
_INSTRUMENTS: dict[int, float] = {}
#: CPU seconds of the sampling threads that ended (their ids may be reused).
_RETIRED = [0.0]
_INSTRUMENTS_LOCK = threading.Lock()


def instrument(target: Callable[[], None], name: str) -> threading.Thread:
    """Run ``target`` in a daemon thread whose CPU is the bench's (``instruments``)."""

    def run() -> None:
        tid = threading.get_native_id()
        with _INSTRUMENTS_LOCK:
            _INSTRUMENTS[tid] = 0.0
        try:
            target()
        finally:
            with _INSTRUMENTS_LOCK:
                _INSTRUMENTS.pop(tid, None)
                _RETIRED[0] += time.thread_time()

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread


def instruments_cpu_s() -> float:
    """CPU seconds of the bench's sampling threads so far, the ended ones' included."""
    with _INSTRUMENTS_LOCK:
        for tid, seen in _INSTRUMENTS.items():
            s = proc_cpu_s(os.getpid(), task=tid)
            if s is not None and s > seen:
                _INSTRUMENTS[tid] = s
        return _RETIRED[0] + sum(_INSTRUMENTS.values())


def machine_busy_s() -> float:
    """CPU seconds the whole machine spent busy since boot (all cores)."""
    with open("/proc/stat") as f:
        cpu = [int(x) for x in f.readline().split()[1:]]
    return (sum(cpu) - cpu[3] - cpu[4]) / TICK


class Series:
    """Cumulative counters sampled over time: ``(wall, {name: value})``."""

    def __init__(self) -> None:
        self.t: list[float] = []
        self.v: list[dict[str, float]] = []
        self._lock = threading.Lock()

    def add(self, t: float, values: dict[str, float]) -> None:
        """Append one sample."""
        with self._lock:
            self.t.append(t)
            self.v.append(values)

    def at(self, t: float) -> dict[str, float]:
        """The last sample at or before ``t`` (the first one if none is)."""
        with self._lock:
            if not self.t:
                return {}
            i = max(0, bisect.bisect_right(self.t, t) - 1)
            return self.v[i]

    def delta(self, t0: float, t1: float) -> dict[str, float]:
        """How much each counter grew from ``t0`` to ``t1``."""
        a, b = self.at(t0), self.at(t1)
        return {k: b[k] - a.get(k, 0.0) for k in b}


@dataclass
class CpuSampler:
    """CPU seconds per process group, sampled every second in a daemon thread.

    ``jvm_pid`` is the driver JVM; ``broker_pid`` a callable (the broker's pid file);
    ``producer_pid`` is set while a load producer runs.
    """

    jvm_pid: int
    broker_pid: Callable[[], int | None]
    producer_pid: int | None = None
    every_s: float = 1.0
    #: Every this many samples, the JVM's threads too (``/proc/<pid>/task``, by name).
    threads_every: int = 5
    #: Every this many samples, look for the Python workers again (a /proc scan).
    rescan_every: int = 10
    series: Series = field(default_factory=Series)
    threads: Series = field(default_factory=Series)
    _thread_peak: dict[int, tuple[str, float]] = field(default_factory=dict)
    _workers: list[int] = field(default_factory=list)
    _n: int = 0
    _peak: dict[int, float] = field(default_factory=dict)
    _group: dict[int, str] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)

    def _members(self) -> dict[int, str]:
        """Pid → group: the driver, the JVM, the broker, the producer, the Python workers.

        The workers under the JVM are looked for every ``rescan_every`` samples.
        """
        out = {os.getpid(): "driver_python", self.jvm_pid: "driver_jvm"}
        broker = self.broker_pid()
        if broker:
            out[broker] = "broker"
        if self.producer_pid:
            out[self.producer_pid] = "producer"
        if self._n % self.rescan_every == 0:
            kids = children()
            todo = list(kids.get(self.jvm_pid, []))
            workers = []
            while todo:
                pid = todo.pop()
                if is_python_worker(cmdline(pid)):
                    workers.append(pid)
                todo.extend(kids.get(pid, []))
            self._workers = workers
        out.update(dict.fromkeys(self._workers, "python_workers"))
        return out

    def sample(self) -> None:
        """Take one sample now.

        Every process counts its own CPU, and keeps the most seen after it exits or leaves
        the scan (the producer changes with every run), so a group's total never falls.
        The Python workers count their own too: adding the daemon's ``cutime`` (the
        workers it forked and reaped) would count each reaped worker twice. (A sum of the
        live workers with their reaped children's, as this was, ended a 5,011 records/s
        run's window on 2026-11-27 212 CPU s below its start: a negative share.) A worker
        that lives and exits between two scans is missed.
        """
        totals = dict.fromkeys(GROUPS, 0.0)
        for pid, group in self._members().items():
            s = proc_cpu_s(pid)
            if s is not None and s >= self._peak.get(pid, 0.0):
                self._peak[pid] = s
                self._group[pid] = group
        for pid, s in self._peak.items():
            g = self._group.get(pid)
            if g in totals:
                totals[g] += s
        totals["machine"] = machine_busy_s()
        totals["instruments"] = instruments_cpu_s()
        now = time.time()
        self.series.add(now, totals)
        self._n += 1
        if self._n % self.threads_every == 1:
            self._sample_threads(now)

    def _sample_threads(self, now: float) -> None:
        """CPU of the JVM's threads, summed by name (digits dropped: one pool, one name)."""
        try:
            tids = os.listdir(f"/proc/{self.jvm_pid}/task")
        except OSError:
            return
        for tid in tids:
            try:
                with open(f"/proc/{self.jvm_pid}/task/{tid}/stat") as f:
                    text = f.read()
            except OSError:
                continue
            name = text[text.index("(") + 1 : text.rindex(")")]
            fields = text.rsplit(")", 1)[1].split()
            cpu = (int(fields[11]) + int(fields[12])) / TICK
            key = int(tid)
            if cpu >= self._thread_peak.get(key, ("", 0.0))[1]:
                self._thread_peak[key] = (thread_group(name), cpu)
        totals: dict[str, float] = {}
        for group, cpu in self._thread_peak.values():
            totals[group] = totals.get(group, 0.0) + cpu
        self.threads.add(now, totals)

    def start(self) -> CpuSampler:
        """Sample now and then every ``every_s`` seconds."""
        self.sample()

        def run() -> None:
            while not self._stop.wait(self.every_s):
                try:
                    self.sample()
                except Exception:  # noqa: BLE001, S112 - a missed sample is no failure
                    continue

        instrument(run, "bench-cpu")
        return self

    def stop(self) -> None:
        """Stop sampling."""
        self._stop.set()


def thread_group(name: str) -> str:
    """A JVM thread's name without its numbers: one group per pool.

    Linux keeps 15 characters of a name (``Executor task l``, ``GC Thread#3``).
    """
    return re.sub(r"\d+", "#", name).strip() or "?"


def top_threads(delta: dict[str, float], n: int = 12) -> dict[str, float]:
    """The ``n`` thread groups that used the most CPU seconds, rounded."""
    top = sorted(delta.items(), key=lambda kv: -kv[1])[:n]
    return {k: round(v, 1) for k, v in top if v >= 0.05}


def _get(url: str, timeout: float = 10.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 - the driver's UI
        return json.load(r)


@dataclass
class StageCpu:
    """Executor CPU and run time per streaming query, from the driver's REST API.

    Polls every ``every_s`` seconds; a stage is attributed to the query named on the first
    line of its description (``other`` when it has none: the bench's own batch reads).
    """

    ui: str
    app_id: str
    every_s: float = 5.0
    series: Series = field(default_factory=Series)
    #: (stage id, attempt) → (query, cpu s, run s), its latest numbers.
    stages: dict[tuple[int, int], tuple[str, float, float]] = field(default_factory=dict)
    descriptions: dict[str, str] = field(default_factory=dict)
    errors: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def poll(self) -> None:
        """One poll of every retained stage."""
        try:
            stages = _get(f"{self.ui}/api/v1/applications/{self.app_id}/stages")
        except (OSError, ValueError):
            self.errors += 1
            return
        for s in stages:
            if s.get("status") == "SKIPPED":
                continue
            desc = s.get("description") or ""
            query = desc.split("\n", 1)[0].strip() or "other"
            if query not in self.descriptions:
                self.descriptions[query] = desc[:200]
            key = (int(s["stageId"]), int(s.get("attemptId", 0)))
            self.stages[key] = (
                query,
                (s.get("executorCpuTime") or 0) / 1e9,
                (s.get("executorRunTime") or 0) / 1e3,
            )
        totals: dict[str, float] = {}
        for query, cpu, run in self.stages.values():
            totals[f"{query}:cpu"] = totals.get(f"{query}:cpu", 0.0) + cpu
            totals[f"{query}:run"] = totals.get(f"{query}:run", 0.0) + run
        self.series.add(time.time(), totals)

    def start(self) -> StageCpu:
        """Poll now and then every ``every_s`` seconds."""
        self.poll()

        def run() -> None:
            while not self._stop.wait(self.every_s):
                self.poll()

        instrument(run, "bench-stages")
        return self

    def stop(self) -> None:
        """Poll once more and stop."""
        self._stop.set()
        self.poll()


class BatchWatch(JsonProgressListener):
    """When each query's micro-batches finished (wall clock), with their input rows."""

    def __init__(self) -> None:
        self.batches: list[tuple[float, str, int, int]] = []
        self._lock = threading.Lock()

    def onQueryStarted(self, event: Any) -> None:  # noqa: D102, N802
        return

    def onQueryProgress(self, event: Any) -> None:  # noqa: D102, N802
        p = event.progress
        with self._lock:
            self.batches.append((time.time(), p.name or "", p.batchId, p.numInputRows))

    def onQueryIdle(self, event: Any) -> None:  # noqa: D102, N802
        return

    def onQueryTerminated(self, event: Any) -> None:  # noqa: D102, N802
        return

    def first(self, name: str, after: float) -> float | None:
        """Wall time of the first batch of ``name`` with rows finished after ``after``."""
        with self._lock:
            return next(
                (t for t, n, _b, rows in self.batches if n == name and rows and t >= after),
                None,
            )


def cpu_split(
    cpu: dict[str, float], stages: dict[str, float], input_s: float
) -> dict[str, float | None]:
    """CPU seconds per second of input, per stage, from the groups' and the queries' deltas.

    ``parse_jvm`` and ``detect_jvm`` are the two queries' executor CPU, ``jvm_other`` the
    driver JVM's CPU beyond them (the dead-letter query, Kafka clients, state store
    maintenance, GC, the driver's scheduling and the UI); ``detect_python`` the Python
    workers' (only the detect query runs Python), ``driver_python`` this process's but
    the bench's sampling threads' (``instruments``, outside ``total``).
    """
    if input_s <= 0:
        return {}
    parse = stages.get("flinkwatch-parse:cpu", 0.0)
    detect = stages.get("flinkwatch-detect:cpu", 0.0)
    jvm = cpu.get("driver_jvm", 0.0)
    instruments = cpu.get("instruments", 0.0)
    out = {
        "parse_jvm": parse,
        "detect_jvm": detect,
        "detect_python": cpu.get("python_workers", 0.0),
        "driver_python": cpu.get("driver_python", 0.0) - instruments,
        "jvm_other": jvm - parse - detect,
        "broker": cpu.get("broker", 0.0),
        "producer": cpu.get("producer", 0.0),
    }
    out["total"] = sum(out.values())
    out["instruments"] = instruments
    out["machine"] = cpu.get("machine", 0.0)
    return {k: round(v / input_s, 3) for k, v in out.items()}


def live_state_bytes(spark: Any, checkpoint: str) -> int | None:
    """The detect query's state as its values hold it: the packed shards' bytes summed.

    The listener's ``state_bytes`` is RocksDB's files on disk, which keep a shard's older
    values until a compaction drops them (every turn rewrites its shard); this is what
    the state is at the last committed batch, read with Spark's state data source.
    ``None`` where the checkpoint cannot be read.
    """
    from pyspark.sql import functions as F  # noqa: N812 - PySpark's own convention

    try:
        df = spark.read.format("statestore").option("stateVarName", "shard").load(checkpoint)
        total = df.select(F.sum(F.length(F.col("value.packed")))).first()[0]
    except Exception as exc:  # noqa: BLE001 - a measurement, never the bench's failure
        log.warning("live state of %s unread: %s", checkpoint, str(exc)[:300])
        return None
    return int(total or 0)


def entity_lags(spark: Any, checkpoint: str) -> dict[str, Any] | None:
    """Each entity's lags as its state holds them at the end, by scope.

    The lags (:class:`streaming.clock.Lag`, the largest of the last two windows) are what
    a deadline verdict waits for beside ``spark.deadline_grace_s``: ``frontier`` how far
    behind the records' frontier the entity's records arrived (what records decide by),
    ``bus`` how long they took from their event time to the bus (what a tick decides by).
    Percentiles in seconds per lag and scope (``job``, ``tm``, ``cluster``); ``None``
    where the checkpoint cannot be read.
    """
    from bench.incidents import percentiles
    from streaming.entity import parse_saved
    from streaming.packed import PackedStore
    from streaming.routes import scope_of

    try:
        df = spark.read.format("statestore").option("stateVarName", "shard").load(checkpoint)
        stores = [PackedStore(bytes(r[0])) for r in df.select("value.packed").collect()]
    except Exception as exc:  # noqa: BLE001 - a measurement, never the bench's failure
        log.warning("lags of %s unread: %s", checkpoint, str(exc)[:300])
        return None
    lags: dict[str, dict[str, list[float]]] = {"frontier": {}, "bus": {}}
    for store in stores:
        for entity in store.entities():
            lag = parse_saved(store.get(entity))[0].lag_ms()
            if lag is not None:
                scope = scope_of(entity)
                lags["frontier"].setdefault(scope, []).append(max(lag.frontier_ms, 0) / 1000)
                lags["bus"].setdefault(scope, []).append(max(lag.bus_ms, 0) / 1000)
    return {k: {s: percentiles(xs) for s, xs in sorted(v.items())} for k, v in lags.items()}
