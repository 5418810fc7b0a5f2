"""``idle_heap_growth``: an idle TaskManager whose post-GC heap floor keeps rising.

The signature of the Kafka source ``offsetsToCommit`` leak (FLINK-33231): a
``KafkaSourceReader`` adds an entry to ``offsetsToCommit`` at every checkpoint
and only removes entries in the commit callback, which never runs when no
records were read. A job that receives nothing (and still checkpoints) leaks a
little heap per checkpoint until YARN or Kubernetes kills the TaskManager.

What the detector watches, per TaskManager (entity ``tm:<tm_id>``):

* **The heap floor.** ``Heap_Used`` samples are grouped into fixed event-time
  buckets of ``bucket_s``. A sample lower than the previous one by at least
  ``gc_drop_mb`` is a post-GC sample (heap used only goes down through a GC); a
  bucket's *floor* is its lowest post-GC sample, and a bucket without a GC has
  none. Using only post-GC minima keeps the raw sawtooth out: a slowly filling
  young generation (an idle JVM may collect only every 20-50 minutes) rises
  like a leak between two GCs but its floor stays flat.
* **Zero throughput.** Every ``numRecordsIn``/``numRecordsOut`` series of the
  TaskManager, task and operator level, counters and per-second rates. A source
  task's task-level ``numRecordsIn`` is 0 even while it ingests (its intake is
  its ``numRecordsOut``), so the TaskManager counts as idle only if *all* of
  them are flat: no rate above ``max_idle_rate`` and no counter taking a new
  value. Operator-level series of one chained task share the task label, so a
  counter "takes a new value" only if the value is none of the last
  ``_COUNTER_LEVELS`` values seen under that label (constant counters of up to
  that many chained operators interleave without looking like traffic).
* **Kafka commits** (optional evidence only): ``KafkaSourceReader_commitsSucceeded``
  not increasing is consistent with the leak. Checkpoint completions are keyed
  by job, not TaskManager, so they are not used.

At every bucket close the last ``window_s`` of buckets is judged. The condition
holds when: no throughput series moved; at least ``min_buckets`` buckets carry
both heap and throughput samples; at least ``min_gc_buckets`` buckets have a
floor, spread over at least half the window; the Theil-Sen slope of the floors
is at least ``min_growth_mb_per_h``; at least ``min_rising_fraction`` of
consecutive floors are non-decreasing (within ``floor_tolerance_mb``); and both
halves of the window grow at least ``min_half_growth_ratio`` of the window's
growth (a single step up, e.g. a cache loaded once, is not a leak). Too few GCs
to see the floor is no verdict: it neither fires nor clears a firing alert. A
verdict is stamped with the end of the bucket just closed, so transitions fall
on bucket boundaries whatever the scrape jitter. The earliest alert comes
``min_buckets * bucket_s`` after a TaskManager's first samples (50 min by default).

The alert resolves (after ``clear_for_s`` of the condition being false) when
records flow again, the floor stops rising, or the TaskManager stops sending
heap samples for ``stale_after_s`` (it was killed or stopped).

Severity: ``severity`` (default warning). The leak is slow: the alert fires
hours before the kill and a killed TaskManager is replaced and the job restarts
on its own, so by default this is a ticket, not a page. It becomes critical
when ``Heap_Max`` is known and the floor would reach it within
``critical_within_h`` at the measured rate: at firing time, or later as an
``escalated`` transition of the same incident (once).

State per TaskManager (bounded): at most ``window_s / bucket_s + 2`` buckets of
about 110 bytes, at most ``max_series`` counter series of at most
``_COUNTER_LEVELS`` values each, the throughput metric names seen (at most the
8 of :data:`THROUGHPUT_METRICS`), at most ``_MAX_JOBS`` job ids and the last
evaluation. Measured with ``len(json.dumps(state))``: about 3.3 KB for a
TaskManager with a handful of series, about 46 KB worst case with the defaults
(256 counter series of 8 17-digit values each, plus full buckets).
"""

from __future__ import annotations

import hashlib
from typing import Any, ClassVar, Self

from pydantic import Field, model_validator

from detectors.base import (
    Alert,
    AlertStatus,
    Detector,
    DetectorParams,
    Event,
    Lifecycle,
    Scope,
    Severity,
    State,
    Step,
)
from detectors.stats import theil_sen

HEAP_USED = "flink_taskmanager_Status_JVM_Memory_Heap_Used"
HEAP_MAX = "flink_taskmanager_Status_JVM_Memory_Heap_Max"
COMMITS_SUCCEEDED = "flink_taskmanager_job_task_operator_KafkaSourceReader_commitsSucceeded"
#: Every series whose movement proves the TaskManager is not idle.
THROUGHPUT_METRICS: frozenset[str] = frozenset(
    {
        "flink_taskmanager_job_task_numRecordsIn",
        "flink_taskmanager_job_task_operator_numRecordsIn",
        "flink_taskmanager_job_task_numRecordsInPerSecond",
        "flink_taskmanager_job_task_operator_numRecordsInPerSecond",
        "flink_taskmanager_job_task_numRecordsOut",
        "flink_taskmanager_job_task_numRecordsOutPerSecond",
        "flink_taskmanager_job_task_operator_numRecordsOut",
        "flink_taskmanager_job_task_operator_numRecordsOutPerSecond",
    }
)

HINT = (
    "likely the Kafka source offsetsToCommit leak (FLINK-33231): "
    "upgrade flink-connector-kafka to 3.0.1 / 3.1.0 or later"
)

_MB = 1024 * 1024
_HOUR_MS = 3_600_000
_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.CRITICAL: 2}
#: Distinct recent values remembered per counter label (chained operators share one label).
_COUNTER_LEVELS = 8
#: Job ids remembered per TaskManager (a session cluster TM may run several jobs).
_MAX_JOBS = 4
#: Upper bound on buckets per window, so the state stays small whatever the config.
_MAX_WINDOW_BUCKETS = 288


class IdleHeapGrowthParams(DetectorParams):
    """Thresholds of :class:`IdleHeapGrowth`."""

    clear_for_s: float = Field(
        default=900,
        ge=0,
        description=(
            "Hysteresis: a firing alert resolves only after its condition has been false "
            "this long (event-time seconds); the condition is judged once per bucket."
        ),
    )
    bucket_s: float = Field(
        default=300,
        ge=10,
        description="Event-time bucket length; a bucket's post-GC minimum is its floor (seconds).",
    )
    window_s: float = Field(
        default=3600,
        gt=0,
        description="How long the floor must rise with zero throughput (seconds).",
    )
    min_buckets: int = Field(
        default=10,
        ge=2,
        description="Buckets of the window that must carry both heap and throughput samples.",
    )
    min_gc_buckets: int = Field(
        default=3,
        ge=3,
        description="Buckets of the window with a GC (a floor point), spread over half of it.",
    )
    min_growth_mb_per_h: float = Field(
        default=50.0,
        gt=0,
        description="Theil-Sen slope of the floor that counts as a leak (MB per hour).",
    )
    min_rising_fraction: float = Field(
        default=0.8,
        ge=0,
        le=1,
        description="Share of consecutive floors that must be non-decreasing (fraction).",
    )
    floor_tolerance_mb: float = Field(
        default=8.0,
        ge=0,
        description="A floor this much below the previous one still counts as non-decreasing (MB).",
    )
    min_half_growth_ratio: float = Field(
        default=0.4,
        ge=0,
        le=1,
        description=(
            "Each half of the window must grow at least this share of the whole window's "
            "growth, so a single step up is not a leak (fraction)."
        ),
    )
    gc_drop_mb: float = Field(
        default=1.0,
        gt=0,
        description="A drop in heap used at least this large marks a GC (MB).",
    )
    max_idle_rate: float = Field(
        default=0.0,
        ge=0,
        description="A records-per-second rate at or below this counts as zero (records/s).",
    )
    stale_after_s: float = Field(
        default=900,
        gt=0,
        description="A firing TaskManager without heap samples this long is cleared (seconds).",
    )
    critical_within_h: float = Field(
        default=2.0,
        ge=0,
        description="Critical, not `severity`, if the floor reaches Heap_Max within this (hours).",
    )
    max_series: int = Field(
        default=256,
        ge=1,
        description="Counter series tracked per TaskManager; beyond, idleness is unproven (count).",
    )

    @model_validator(mode="after")
    def _window_fits_buckets(self) -> Self:
        slots = int(self.window_s // self.bucket_s)
        if slots > _MAX_WINDOW_BUCKETS:
            msg = f"window_s / bucket_s must be at most {_MAX_WINDOW_BUCKETS} (got {slots})"
            raise ValueError(msg)
        if slots < max(self.min_buckets, self.min_gc_buckets):
            msg = f"window_s / bucket_s ({slots}) must be at least min_buckets and min_gc_buckets"
            raise ValueError(msg)
        return self


class IdleHeapGrowth(Detector[IdleHeapGrowthParams, Any]):
    """Fire when a TaskManager's post-GC heap floor rises for a window with zero throughput."""

    name: ClassVar[str] = "idle_heap_growth"
    runbook: ClassVar[str] = (
        "A TaskManager's heap floor rises while it reads nothing: likely the Kafka source's "
        "offsetsToCommit leak (FLINK-33231). Upgrade flink-connector-kafka to 3.0.1 / 3.1.0 or "
        "later, or restart the TaskManager before it reaches Heap_Max (heap dump first if "
        "unsure)."
    )
    signals: ClassVar[dict[str, str]] = {
        "taskmanager_heap_floor_growth_bytes_per_hour": (
            "Theil-Sen slope of the post-GC heap floor over window_s (at the last closed bucket)."
        ),
        "taskmanager_records_per_second": (
            "Highest records-in/out rate of the TaskManager in its last closed bucket."
        ),
    }
    scope: ClassVar[Scope] = "tm"
    kinds: ClassVar[frozenset[str]] = frozenset({"metric"})
    metrics: ClassVar[frozenset[str]] = frozenset(
        {HEAP_USED, HEAP_MAX, COMMITS_SUCCEEDED} | THROUGHPUT_METRICS
    )
    params_model: ClassVar[type[DetectorParams]] = IdleHeapGrowthParams

    def signal_values(self, state: State) -> dict[str, float]:  # noqa: D102
        out: dict[str, float] = {}
        facts = state.get("facts") or {}
        if facts.get("growth_mb_per_h") is not None:
            out["taskmanager_heap_floor_growth_bytes_per_hour"] = facts["growth_mb_per_h"] * _MB
        closed = state.get("buckets", [])[:-1]  # the newest bucket is still filling
        if closed:
            out["taskmanager_records_per_second"] = float(closed[-1]["rate"])
        return out

    def on_event(self, state: State | None, event: Event, now_ms: int) -> Step:
        """Fold one sample into its bucket; judge the window whenever a bucket closes."""
        st = state or self._new_state(event)
        self._note_identity(st, event)
        alerts: list[Alert] = []
        if event.value is not None and event.metric in self.metrics:
            start = self._bucket_start(event.time_ms)
            buckets: list[dict[str, Any]] = st["buckets"]
            if not buckets or start > int(buckets[-1]["t"]):
                if buckets:
                    alerts.extend(self._judge(st))
                buckets.append(self._new_bucket(start))
                self._trim(st, start)
            bucket = next((b for b in reversed(buckets) if int(b["t"]) == start), None)
            if bucket is not None:
                self._fold(st, bucket, event)
        st["last_event_ms"] = max(int(st["last_event_ms"]), event.time_ms)
        return Step(state=st, alerts=tuple(alerts), timer_ms=self._next_timer(st))

    def on_timer(self, state: State, now_ms: int) -> Step:
        """Resolve a TaskManager that went silent; evict it after the idle TTL."""
        st = dict(state)
        alerts: list[Alert] = []
        clear_ms = int(self.params.clear_for_s * 1000)
        if st["firing"] and st.get("clear_since_ms") is None:
            stale_at = self._stale_at(st)
            if now_ms >= stale_at:
                st["clear_since_ms"] = stale_at
                st["why"] = "stopped sending heap metrics (killed or stopped?)"
        deadline = Lifecycle.resolve_deadline(st, clear_ms)
        if deadline is not None and now_ms >= deadline:
            if Lifecycle.update(st, False, deadline, clear_for_ms=clear_ms) == "resolved":
                alerts.append(self._resolved(st, deadline))
        idle_at = int(st["last_event_ms"]) + int(self.params.idle_ttl_s * 1000)
        if now_ms >= idle_at:
            if st["firing"]:
                st["firing"] = False
                st["why"] = "no metrics from this TaskManager any more"
                alerts.append(self._resolved(st, idle_at))
            return Step(state=None, alerts=tuple(alerts))
        return Step(state=st, alerts=tuple(alerts), timer_ms=self._next_timer(st))

    # --- folding samples ------------------------------------------------------------

    def _new_state(self, event: Event) -> State:
        return {
            **self.identity(event),
            # The job is set only once the TaskManager is known to run a single job.
            "job_id": None,
            "job_name": None,
            "jobs": {},
            "buckets": [],
            "series": {},
            "names": {},
            "last_heap": None,
            "last_heap_ms": None,
            "heap_max": None,
            "severity": None,
            "cond": False,
            "why": None,
            "facts": None,
        }

    @staticmethod
    def _note_identity(st: State, event: Event) -> None:
        st["host"] = event.host or st.get("host")
        if not event.job_id:
            return
        jobs: dict[str, Any] = st["jobs"]
        if event.job_id not in jobs and len(jobs) < _MAX_JOBS:
            jobs[event.job_id] = event.job_name
        elif event.job_id in jobs and event.job_name:
            jobs[event.job_id] = event.job_name
        # The alert names a job only when the TaskManager runs exactly one.
        only = len(jobs) == 1
        st["job_id"] = next(iter(jobs)) if only else None
        st["job_name"] = next(iter(jobs.values())) if only else None

    def _bucket_start(self, time_ms: int) -> int:
        size = int(self.params.bucket_s * 1000)
        return time_ms - time_ms % size

    @staticmethod
    def _new_bucket(start: int) -> dict[str, Any]:
        # n: heap samples, gc: lowest post-GC heap (the floor),
        # tp: throughput samples, act: throughput moved, rate: highest rate,
        # unk: a counter could not be tracked, cn/ci: commit samples / commits moved.
        return {
            "t": start, "n": 0, "gc": None, "tp": 0, "act": 0, "rate": 0.0,
            "unk": 0, "cn": 0, "ci": 0,
        }  # fmt: skip

    def _trim(self, st: State, open_start: int) -> None:
        # Closed buckets are judged over the window before this one; keep one spare.
        horizon = open_start - int(self.params.window_s * 1000) - int(self.params.bucket_s * 1000)
        st["buckets"] = [b for b in st["buckets"] if int(b["t"]) >= horizon]

    def _fold(self, st: State, bucket: dict[str, Any], event: Event) -> None:
        metric, value, t = str(event.metric), float(event.value or 0.0), event.time_ms
        if metric == HEAP_USED:
            self._fold_heap(st, bucket, value, t)
        elif metric == HEAP_MAX:
            if value > 0:
                st["heap_max"] = value
        elif metric == COMMITS_SUCCEEDED:
            bucket["cn"] += 1
            moved = self._counter_moved(st, metric, event.task, value)
            if moved is None:
                return
            bucket["ci"] = max(int(bucket["ci"]), int(moved))
        else:
            bucket["tp"] += 1
            st["names"][metric] = t
            if metric.endswith("PerSecond"):
                bucket["rate"] = max(float(bucket["rate"]), value)
                if value > self.params.max_idle_rate:
                    bucket["act"] = 1
                return
            moved = self._counter_moved(st, metric, event.task, value)
            if moved is None:
                bucket["unk"] = 1
            elif moved:
                bucket["act"] = 1

    def _fold_heap(self, st: State, bucket: dict[str, Any], value: float, t: int) -> None:
        last_ms = st.get("last_heap_ms")
        if last_ms is not None and t < int(last_ms):
            return  # out of order: it would fake or hide a GC drop
        bucket["n"] += 1
        last = st.get("last_heap")
        if last is not None and float(last) - value >= self.params.gc_drop_mb * _MB:
            bucket["gc"] = value if bucket["gc"] is None else min(float(bucket["gc"]), value)
        st["last_heap"], st["last_heap_ms"] = value, t

    def _counter_moved(self, st: State, metric: str, task: str | None, value: float) -> bool | None:
        """Whether a counter sample is a value its label has not shown lately (None: untracked)."""
        key = hashlib.sha1(f"{metric}|{task}".encode(), usedforsecurity=False).hexdigest()[:10]
        series: dict[str, list[float]] = st["series"]
        levels = series.get(key)
        if levels is None:
            if len(series) >= self.params.max_series:
                return None
            series[key] = [value]  # the first sample is a baseline, not movement
            return False
        moved = value not in levels
        if not moved:
            levels.remove(value)
        levels.append(value)
        del levels[:-_COUNTER_LEVELS]
        return moved

    # --- judging the window -----------------------------------------------------------

    def _judge(self, st: State) -> list[Alert]:
        """Judge the window that ends with the bucket closing now; emit transitions.

        The verdict is stamped with the end of that bucket, not with the sample that
        happened to close it, so transitions fall on bucket boundaries whatever the
        scrape jitter, and a resolve by timer and one by a later sample agree.
        """
        at_ms = int(st["buckets"][-1]["t"]) + int(self.params.bucket_s * 1000)
        cond, why, facts = self._evaluate(st)
        if cond is None:
            # Too few GCs to see the floor says nothing either way: a firing alert
            # neither resolves nor flaps on an idle JVM that collects rarely.
            if not st["firing"]:
                st["cond"], st["why"], st["facts"] = False, why, facts
            return []
        st["cond"], st["why"], st["facts"] = cond, why, facts
        clear_ms = int(self.params.clear_for_s * 1000)
        transition = Lifecycle.update(st, cond, at_ms, clear_for_ms=clear_ms)
        if transition == "firing":
            st["severity"] = self._severity(facts).value
            return [self._firing(st, at_ms, facts)]
        if transition == "resolved":
            return [self._resolved(st, at_ms)]
        if st["firing"] and cond:
            # Heap_Max came within reach while firing: page again, once, on the same incident.
            severity = self._severity(facts)
            if _RANK[severity] > _RANK[Severity(st["severity"] or self.params.severity)]:
                st["severity"] = severity.value
                return [self._firing(st, at_ms, facts, AlertStatus.ESCALATED)]
        return []

    def _evaluate(self, st: State) -> tuple[bool | None, str, dict[str, Any]]:
        p = self.params
        size = int(p.bucket_s * 1000)
        closed: list[dict[str, Any]] = st["buckets"]
        end = int(closed[-1]["t"])
        start = end - (int(p.window_s // p.bucket_s) - 1) * size
        win = [b for b in closed if int(b["t"]) >= start]
        floors = [(int(b["t"]), float(b["gc"]) / _MB) for b in win if b["gc"] is not None]
        growth = self._growth(floors)
        facts = self._facts(st, win, floors, growth, start, end + size)
        if any(b["act"] for b in win):
            return False, f"records flowing (highest rate {facts['max_rate']:g}/s)", facts
        if any(b["unk"] for b in win):
            return False, "too many throughput series to prove zero input", facts
        covered = sum(1 for b in win if b["n"] and b["tp"])
        if covered < p.min_buckets:
            return False, f"only {covered} buckets with heap and throughput samples", facts
        if len(floors) < p.min_gc_buckets or floors[-1][0] - floors[0][0] < p.window_s * 1000 / 2:
            return None, f"too few GCs to see the floor ({len(floors)} buckets)", facts
        if growth < p.min_growth_mb_per_h:
            return False, f"floor no longer rising ({growth:.0f} MB/h)", facts
        if facts["rising_fraction"] < p.min_rising_fraction:
            return False, "floor not rising steadily", facts
        n = len(floors)
        halves = (self._growth(floors[: (n + 1) // 2]), self._growth(floors[n // 2 :]))
        if min(halves) < p.min_half_growth_ratio * growth:
            return False, "floor rose in one step, not steadily", facts
        return True, "floor rising with zero throughput", facts

    @staticmethod
    def _growth(floors: list[tuple[int, float]]) -> float:
        return theil_sen([(t / _HOUR_MS, mb) for t, mb in floors])

    def _facts(
        self,
        st: State,
        win: list[dict[str, Any]],
        floors: list[tuple[int, float]],
        growth: float,
        start: int,
        end: int,
    ) -> dict[str, Any]:
        tol = self.params.floor_tolerance_mb
        pairs = list(zip(floors, floors[1:], strict=False))
        rising = sum(1 for (_, a), (_, b) in pairs if b >= a - tol) / len(pairs) if pairs else 0.0
        floor_mb = floors[-1][1] if floors else None
        heap_max_mb = float(st["heap_max"]) / _MB if st.get("heap_max") else None
        hours_left = None
        if floor_mb is not None and heap_max_mb is not None and growth > 0:
            hours_left = round(max(heap_max_mb - floor_mb, 0.0) / growth, 1)
        commits = [b for b in win if b["cn"]]
        seen = [int(b["t"]) for b in win if b["n"] and b["tp"]]
        return {
            "growth_mb_per_h": round(growth, 1),
            "floor_mb": None if floor_mb is None else round(floor_mb, 1),
            "floors_mb": [round(mb, 1) for _, mb in floors],
            "heap_max_mb": None if heap_max_mb is None else round(heap_max_mb, 1),
            "hours_to_heap_max": hours_left,
            "rising_fraction": round(rising, 2),
            "gc_buckets": len(floors),
            "window_start_ms": start,
            "idle_s": (end - min(seen)) // 1000 if seen else 0,
            "window_end_ms": end,
            "throughput_series": sorted(n for n, t in st["names"].items() if int(t) >= start),
            "throughput_samples": sum(int(b["tp"]) for b in win),
            "max_rate": max((float(b["rate"]) for b in win), default=0.0),
            "kafka_commits_succeeded": (
                None if not commits else "increasing" if any(b["ci"] for b in commits) else "flat"
            ),
            "jobs": dict(st["jobs"]),
        }

    def _severity(self, facts: dict[str, Any]) -> Severity:
        left = facts.get("hours_to_heap_max")
        if left is not None and left <= self.params.critical_within_h:
            return Severity.CRITICAL
        return self.params.severity

    # --- alerts and timers ----------------------------------------------------------

    def _firing(
        self,
        st: State,
        at_ms: int,
        facts: dict[str, Any],
        status: AlertStatus = AlertStatus.FIRING,
    ) -> Alert:
        left = facts["hours_to_heap_max"]
        eta = f", Heap_Max in ~{left:g} h at this rate" if left is not None else ""
        return self.alert(
            state=st,
            status=status,
            event_time_ms=at_ms,
            severity=Severity(st["severity"]),
            summary=(
                f"TaskManager {st['tm_id']}: post-GC heap floor rising "
                f"{facts['growth_mb_per_h']:.0f} MB/h (now {facts['floor_mb']:.0f} MB{eta}) "
                f"with zero records in/out for {facts['idle_s'] / 60:.0f} min; {HINT}"
            ),
            evidence={**facts, "window_s": self.params.window_s, "hint": HINT},
        )

    def _resolved(self, st: State, at_ms: int) -> Alert:
        return self.resolve(
            st,
            at_ms,
            f"TaskManager {st['tm_id']}: {st['why']}",
            {**(st["facts"] or {}), "why": st["why"], "hint": HINT},
            severity=Severity(st["severity"] or self.params.severity),
        )

    def _stale_at(self, st: State) -> int:
        last = st.get("last_heap_ms")
        base = int(last) if last is not None else int(st["last_event_ms"])
        return base + int(self.params.stale_after_s * 1000)

    def _next_timer(self, st: State) -> int:
        timer = int(st["last_event_ms"]) + int(self.params.idle_ttl_s * 1000)
        if st["firing"]:
            deadline = Lifecycle.resolve_deadline(st, int(self.params.clear_for_s * 1000))
            timer = min(timer, deadline if deadline is not None else self._stale_at(st))
        return timer
