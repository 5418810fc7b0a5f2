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

At every bucket close the last ``window_s`` of buckets is judged. A bucket with samples
closes at its end (a deadline: live, as soon as the records' frontier passes it by the
grace and the TaskManager's lag), not when the TaskManager's next sample arrives, a scrape
interval later; a sample of it that arrives later still is folded in after the verdict and
counts in the next window's. The condition
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

State per TaskManager (bounded, :class:`IdleHeapGrowthState`): at most
``window_s / bucket_s + 2`` buckets of about 130 bytes, at most ``max_series``
counter series of at most ``_COUNTER_LEVELS`` values each, the throughput metric
names seen (at most the 8 of :data:`THROUGHPUT_METRICS`), at most ``_MAX_JOBS`` job
ids and the last evaluation. Measured as saved (JSON): about 3.9 KB for a
TaskManager with a handful of series, about 46 KB worst case with the defaults
(256 counter series of 8 17-digit values each, plus full buckets).
"""

from __future__ import annotations

import functools
import hashlib
from typing import Any, Literal, NamedTuple, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from detectors import words
from detectors.base import Detector, DetectorParams, DetectorState, Evidence, Profile, Record, Story
from detectors.model import Alert, Event, Severity
from detectors.stats import theil_sen
from detectors.story import num, tm

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

LEAK = "likely the Kafka source offsetsToCommit leak (FLINK-33231)"
HINT = f"{LEAK}: upgrade flink-connector-kafka to 3.0.1 / 3.1.0 or later"

_MB = 1024 * 1024
_HOUR_MS = 3_600_000
#: Distinct recent values remembered per counter label (chained operators share one label).
_COUNTER_LEVELS = 8
#: Job ids remembered per TaskManager (a session cluster TM may run several jobs).
_MAX_JOBS = 4
#: Upper bound on buckets per window, so the state stays small whatever the config.
_MAX_WINDOW_BUCKETS = 288
#: Buckets whose throughput the evidence lists at most (the newest).
_EVIDENCE_CAP = 60


@functools.lru_cache(maxsize=4096)
def _series_key(metric: str, task: str | None) -> str:
    """A counter label's short key in the state (a fleet's labels repeat every scrape)."""
    return hashlib.sha1(f"{metric}|{task}".encode(), usedforsecurity=False).hexdigest()[:10]


class IdleHeapGrowthParams(DetectorParams):
    """Thresholds of :class:`IdleHeapGrowth`."""

    clear_for_s: float = Field(default=900, ge=0)
    """Hysteresis: a firing alert resolves only after its condition has been false this long
    (event-time seconds); the condition is judged once per bucket."""
    bucket_s: float = Field(default=300, ge=10)
    """Event-time bucket length; a bucket's post-GC minimum is its floor, and the window is
    judged as each bucket ends (seconds)."""
    window_s: float = Field(default=3600, gt=0)
    """How long the floor must rise with zero throughput (seconds)."""
    min_buckets: int = Field(default=10, ge=2)
    """Buckets of the window that must carry both heap and throughput samples."""
    min_gc_buckets: int = Field(default=3, ge=3)
    """Buckets of the window with a GC (a floor point), spread over half of it."""
    min_growth_mb_per_h: float = Field(default=50.0, gt=0)
    """Theil-Sen slope of the floor that counts as a leak (MB per hour)."""
    min_rising_fraction: float = Field(default=0.8, ge=0, le=1)
    """Share of consecutive floors that must be non-decreasing (fraction)."""
    floor_tolerance_mb: float = Field(default=8.0, ge=0)
    """A floor this much below the previous one still counts as non-decreasing (MB)."""
    min_half_growth_ratio: float = Field(default=0.4, ge=0, le=1)
    """Each half of the window must grow at least this share of the whole window's growth, so a
    single step up is not a leak (fraction)."""
    gc_drop_mb: float = Field(default=1.0, gt=0)
    """A drop in heap used at least this large marks a GC (MB)."""
    max_idle_rate: float = Field(default=0.0, ge=0)
    """A records-per-second rate at or below this counts as zero (records/s)."""
    stale_after_s: float = Field(default=900, gt=0)
    """A firing TaskManager without heap samples this long is cleared (seconds)."""
    critical_within_h: float = Field(default=2.0, ge=0)
    """Critical, not `severity`, if the floor reaches Heap_Max within this (hours)."""
    max_series: int = Field(default=256, ge=1)
    """Counter series tracked per TaskManager; beyond, idleness is unproven (count)."""

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


class Bucket(Record):
    """One event-time bucket of a TaskManager's samples (short keys: a window has many).

    Attributes:
        t: Start of the bucket, epoch milliseconds.
        n: Heap samples.
        gc: Lowest post-GC heap sample (the bucket's floor), bytes; ``None``: no GC.
        tp: Throughput samples.
        act: A throughput series moved.
        rate: Highest records-per-second rate.
        unk: A counter could not be tracked (too many series).
        cn: Kafka commit samples.
        ci: The Kafka commit count moved.
    """

    t: int
    n: int = 0
    gc: float | None = None
    tp: int = 0
    act: bool = False
    rate: float = 0.0
    unk: bool = False
    cn: int = 0
    ci: bool = False


class BucketView(NamedTuple):
    """One bucket of the window, for a chart: ``[start_ms, floor_mb, rate, moved]``.

    ``floor_mb`` is its post-GC floor (``None``: no GC in it), ``rate`` its highest
    records-per-second sample (``None``: no throughput sample), ``moved`` whether a
    throughput counter took a new value or a rate was above ``max_idle_rate``.
    """

    t: int
    floor_mb: float | None
    rate: float | None
    moved: bool


class HeapFloorFacts(BaseModel):
    """What the latest verdict measured over the window (the core of the evidence).

    Attributes:
        growth_mb_per_h: Theil-Sen slope of the floors (MB per hour).
        floor_mb: The latest floor (MB), ``None`` without a GC in the window.
        floors_mb: The floors of the window, oldest first (MB).
        heap_max_mb: ``Heap_Max`` (MB), when known.
        hours_to_heap_max: When the floor reaches ``Heap_Max`` at this rate (hours).
        rising_fraction: Share of consecutive floors that did not fall.
        gc_buckets: Buckets of the window with a floor.
        window_start_ms: Start of the window judged.
        idle_s: How long the window shows the TaskManager with samples and zero throughput.
        window_end_ms: End of the window judged (the verdict's time).
        throughput_series: Throughput metric names seen in the window.
        throughput_samples: Throughput samples in the window.
        max_rate: Highest records-per-second rate in the window.
        kafka_commits_succeeded: ``increasing``, ``flat``, or ``None`` without samples.
        jobs: The TaskManager's jobs: id → name (when known).
        buckets: The window's buckets, heap floor beside records in/out, the newest 60
            (for a chart).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    growth_mb_per_h: float
    floor_mb: float | None
    floors_mb: list[float]
    heap_max_mb: float | None
    hours_to_heap_max: float | None
    rising_fraction: float
    gc_buckets: int
    window_start_ms: int
    idle_s: int
    window_end_ms: int
    throughput_series: list[str]
    throughput_samples: int
    max_rate: float
    kafka_commits_succeeded: Literal["increasing", "flat"] | None
    jobs: dict[str, str | None]
    buckets: list[BucketView] = []


class IdleHeapGrowthState(DetectorState):
    """What :class:`IdleHeapGrowth` keeps per TaskManager.

    ``job_id`` and ``job_name`` are set only while the TaskManager is known to run a
    single job.

    Attributes:
        jobs: Jobs seen on the TaskManager (at most ``_MAX_JOBS``): id → name.
        buckets: The buckets of the window, oldest first; the last one is filling.
        series: Recent values per counter label (a hash of metric and task).
        names: Throughput metric name → time last seen.
        last_heap: The latest heap sample (bytes), to see a GC drop.
        last_heap_ms: Its time.
        heap_max: ``Heap_Max`` (bytes), when known.
        severity: The open incident's severity.
        cond: The latest verdict.
        why: Why, in words.
        facts: What the latest verdict measured.
        judged_ms: The end of the latest bucket judged (its deadline may come before
            the next bucket's first sample: that sample does not judge it again).
    """

    v: int = 2
    jobs: dict[str, str | None] = {}
    buckets: list[Bucket] = []
    series: dict[str, list[float]] = {}
    names: dict[str, int] = {}
    last_heap: float | None = None
    last_heap_ms: int | None = None
    heap_max: float | None = None
    severity: Severity | None = None
    cond: bool = False
    why: str | None = None
    facts: HeapFloorFacts | None = None
    judged_ms: int | None = None


class IdleHeapGrowthEvidence(HeapFloorFacts, Evidence):
    """What an ``idle_heap_growth`` alert shows: the verdict's facts, with these.

    Attributes:
        hint: The likely cause and its fix.
        window_s: The window judged (firing and escalated alerts only).
        why: Why the incident resolved (resolved alerts only).
    """

    hint: str = HINT
    window_s: float | None = None
    why: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _linked(cls, data: Any) -> Any:
        # The TaskManager's jobs are what the alert links to (correlation joins them).
        if isinstance(data, dict) and data.get("jobs") and data.get("job_ids") is None:
            return {**data, "job_ids": tuple(data["jobs"])}
        return data

    def as_dict(self) -> dict[str, Any]:
        """The evidence as an alert carries it (``window_s`` or ``why`` only where set)."""
        out = super().as_dict()
        for key in ("window_s", "why"):
            if out[key] is None:
                del out[key]
        return out


def _headline(story: Story) -> str:
    """``TaskManager X killed for memory after its heap grew N MB/h with zero input: …``."""
    who = tm(story.root)
    rate = num(story.root.evidence.get("growth_mb_per_h"), " MB/h")
    by = f" {rate}" if rate else ""
    if story.death:
        return f"{who} {story.death} after its heap grew{by} with zero input: {LEAK}"
    return f"{who} heap floor grows{by} with zero input: {LEAK}"


class IdleHeapGrowth(Detector[IdleHeapGrowthParams, IdleHeapGrowthState]):
    """Fire when a TaskManager's post-GC heap floor rises for a window with zero throughput."""

    name = "idle_heap_growth"
    profile = Profile(
        runbook=(
            "A TaskManager's heap floor rises while it reads nothing: likely the Kafka source's "
            "offsetsToCommit leak (FLINK-33231). Upgrade flink-connector-kafka to 3.0.1 / 3.1.0 or "
            "later, or restart the TaskManager before it reaches Heap_Max (heap dump first if "
            "unsure)."
        ),
        idle_words="no metrics from this TaskManager any more",
        causal_rank=0,
        headline=_headline,
    )
    signals = {
        "taskmanager_heap_floor_growth_bytes_per_hour": (
            "Theil-Sen slope of the post-GC heap floor over window_s (at the last closed bucket)."
        ),
        "taskmanager_records_per_second": (
            "Highest records-in/out rate of the TaskManager in its last closed bucket."
        ),
    }
    scope = "tm"
    kinds = frozenset({"metric"})
    metrics = frozenset({HEAP_USED, HEAP_MAX, COMMITS_SUCCEEDED} | THROUGHPUT_METRICS)

    def __init__(self, params: IdleHeapGrowthParams) -> None:
        super().__init__(params)
        # Read at every sample (its bucket, the filling bucket's end for the next deadline).
        self._bucket_ms = int(params.bucket_s * 1000)

    def signal_values(self, state: IdleHeapGrowthState) -> dict[str, float]:  # noqa: D102
        out: dict[str, float] = {}
        if state.facts is not None:
            out["taskmanager_heap_floor_growth_bytes_per_hour"] = state.facts.growth_mb_per_h * _MB
        # The newest bucket is closed once judged (its end passed), else still filling.
        closed = state.buckets if self._newest_judged(state) else state.buckets[:-1]
        if closed:
            out["taskmanager_records_per_second"] = closed[-1].rate
        return out

    @classmethod
    def migrate(cls, old: dict[str, Any], from_version: int) -> dict[str, Any]:
        """Version 1 had no ``judged_ms``: its newest bucket was not judged yet."""
        if from_version != 1:
            return super().migrate(old, from_version)
        return old

    def on_event(self, state: IdleHeapGrowthState, event: Event) -> list[Alert]:
        """Fold one sample into its bucket; judge the window whenever a bucket closes."""
        self._note_identity(state, event)
        if event.value is None or event.metric not in self.metrics:
            return []
        start = self._bucket_start(event.time_ms)
        alerts = self._open_bucket(state, start)
        buckets = state.buckets  # never empty once a bucket is open
        bucket = (
            buckets[-1]
            if buckets[-1].t == start  # the filling bucket: all but a late sample's
            else next((b for b in reversed(buckets) if b.t == start), None)
        )
        if bucket is not None:
            self._fold(state, bucket, event)
        return alerts

    def on_timer(self, state: IdleHeapGrowthState, now_ms: int) -> tuple[Alert, ...]:
        """Judge a bucket that ended; resolve a TaskManager that went silent or cleared."""
        ended = self._filling_end(state)
        judged = self._judge(state) if ended is not None and now_ms >= ended else []
        return (*judged, *self._clear_due(state, now_ms))

    def on_close(self, state: IdleHeapGrowthState, now_ms: int) -> tuple[Alert, ...]:
        """A TaskManager without metrics: its incident closes, saying why in its evidence."""
        if not state.firing:
            return ()
        state.why = self.profile.idle_words
        return (self._resolved(state, now_ms),)

    def standing(self, state: IdleHeapGrowthState | None) -> str:
        """The latest verdict on the window: why it holds or not, the floor's rise, Heap_Max."""
        if state is None:
            return "no heap or throughput metrics for this TaskManager"
        p, facts = self.params, state.facts
        if facts is None:
            buckets = words.plural(len(state.buckets), "bucket")
            return (
                f"{buckets} of {words.span(p.bucket_s)} so far, none closed: no verdict yet "
                f"(the first page needs {words.span(p.min_buckets * p.bucket_s)} of samples)"
            )
        floor = f"floor {facts.floor_mb:,.0f} MB, " if facts.floor_mb is not None else ""
        rise = (
            f"{floor}{facts.growth_mb_per_h:+,.0f} MB/h (pages at {p.min_growth_mb_per_h:g}), "
            f"GCs in {words.plural(facts.gc_buckets, 'bucket')} (needs {p.min_gc_buckets})"
        )
        left = facts.hours_to_heap_max
        heap = f"Heap_Max in ~{words.span(left * 3600)} at this rate" if left is not None else None
        if not state.firing:
            return words.clause(state.why, rise, heap)
        clear_ms = int(p.clear_for_s * 1000)
        due = state.resolve_deadline(clear_ms)
        resolve = (
            f"clearing ({state.why}), resolves at {words.at(due)}"
            if due is not None
            else f"resolves {words.span_ms(clear_ms)} after records flow or the floor stops rising"
        )
        since = words.firing_since(state.incident_start_ms, state.last_event_ms)
        return words.clause(since, rise, heap, resolve)

    def evidence(self, state: IdleHeapGrowthState) -> IdleHeapGrowthEvidence | dict[str, Any]:
        """The latest verdict's facts and why the incident resolves."""
        if state.facts is None:  # no verdict yet
            return {"why": state.why, "hint": HINT}
        return IdleHeapGrowthEvidence(**state.facts.model_dump(), why=state.why)

    # --- folding samples ------------------------------------------------------------

    @staticmethod
    def _note_identity(st: IdleHeapGrowthState, event: Event) -> None:
        # Every sample of the TaskManager says the same: a field is written only when it
        # changes (a state write is a Python call, :class:`~detectors.base.Record`).
        if event.host and event.host != st.host:
            st.host = event.host
        job_id, name, jobs = event.job_id, event.job_name, st.jobs
        if not job_id and not name:
            return
        if job_id and job_id not in jobs and len(jobs) < _MAX_JOBS:
            jobs[job_id] = name
        elif job_id in jobs and name:
            jobs[job_id] = name
        # The alert names a job only when the TaskManager runs exactly one.
        only_id, only_name = next(iter(jobs.items())) if len(jobs) == 1 else (None, None)
        if st.job_id != only_id:
            st.job_id = only_id
        if st.job_name != only_name:
            st.job_name = only_name

    def _bucket_start(self, time_ms: int) -> int:
        return time_ms - time_ms % self._bucket_ms

    def _open_bucket(self, st: IdleHeapGrowthState, start: int) -> list[Alert]:
        """Open the bucket starting at ``start`` if it is new; judge the one it closes."""
        if st.buckets and start <= st.buckets[-1].t:
            return []
        alerts = self._judge(st) if st.buckets and not self._newest_judged(st) else []
        st.buckets.append(Bucket(t=start))
        self._trim(st, start)
        return alerts

    def _trim(self, st: IdleHeapGrowthState, open_start: int) -> None:
        # Closed buckets are judged over the window before this one; keep one spare.
        horizon = open_start - int(self.params.window_s * 1000) - self._bucket_ms
        st.buckets = [b for b in st.buckets if b.t >= horizon]

    def _fold(self, st: IdleHeapGrowthState, bucket: Bucket, event: Event) -> None:
        metric, value, t = str(event.metric), float(event.value or 0.0), event.time_ms
        if metric == HEAP_USED:
            self._fold_heap(st, bucket, value, t)
        elif metric == HEAP_MAX:
            if value > 0:
                st.heap_max = value
        elif metric == COMMITS_SUCCEEDED:
            bucket.cn += 1
            moved = self._counter_moved(st, metric, event.task, value)
            if moved is None:
                return
            bucket.ci = bucket.ci or moved
        else:
            bucket.tp += 1
            st.names[metric] = t
            if metric.endswith("PerSecond"):
                bucket.rate = max(bucket.rate, value)
                if value > self.params.max_idle_rate:
                    bucket.act = True
                return
            moved = self._counter_moved(st, metric, event.task, value)
            if moved is None:
                bucket.unk = True
            elif moved:
                bucket.act = True

    def _fold_heap(self, st: IdleHeapGrowthState, bucket: Bucket, value: float, t: int) -> None:
        if st.last_heap_ms is not None and t < st.last_heap_ms:
            return  # out of order: it would fake or hide a GC drop
        bucket.n += 1
        last = st.last_heap
        if last is not None and last - value >= self.params.gc_drop_mb * _MB:
            bucket.gc = value if bucket.gc is None else min(bucket.gc, value)
        st.last_heap, st.last_heap_ms = value, t

    def _counter_moved(
        self, st: IdleHeapGrowthState, metric: str, task: str | None, value: float
    ) -> bool | None:
        """Whether a counter sample is a value its label has not shown lately (None: untracked)."""
        key = _series_key(metric, task)
        levels = st.series.get(key)
        if levels is None:
            if len(st.series) >= self.params.max_series:
                return None
            st.series[key] = [value]  # the first sample is a baseline, not movement
            return False
        moved = value not in levels
        if not moved:
            levels.remove(value)
        levels.append(value)
        del levels[:-_COUNTER_LEVELS]
        return moved

    # --- judging the window -----------------------------------------------------------

    def _judge(self, st: IdleHeapGrowthState) -> list[Alert]:
        """Judge the window that ends with the bucket closing now; emit transitions.

        The verdict is stamped with the end of that bucket, not with the sample that
        happened to close it, so transitions fall on bucket boundaries whatever the
        scrape jitter, and a resolve by timer and one by a later sample agree.
        """
        at_ms = st.judged_ms = self._end(st)
        cond, why, facts = self._evaluate(st)
        if cond is None:
            # Too few GCs to see the floor says nothing either way: a firing alert
            # neither resolves nor flaps on an idle JVM that collects rarely.
            if not st.firing:
                st.cond, st.why, st.facts = False, why, facts
            return []
        st.cond, st.why, st.facts = cond, why, facts
        clear_ms = int(self.params.clear_for_s * 1000)
        transition = st.hysteresis(cond, at_ms, clear_for_ms=clear_ms)
        if transition == "firing":
            st.severity = self._severity(facts)
            return [self.fire(st, at_ms, *self._page(st, facts), st.severity)]
        if transition == "resolved":
            return [self._resolved(st, at_ms)]
        if st.firing and cond:
            # Heap_Max came within reach while firing: page again, once, on the same incident.
            severity = self._severity(facts)
            if severity.rank > (st.severity or self.params.severity).rank:
                st.severity = severity
                return [self.escalate(st, at_ms, *self._page(st, facts), st.severity)]
        return []

    def _evaluate(self, st: IdleHeapGrowthState) -> tuple[bool | None, str, HeapFloorFacts]:
        p = self.params
        size = int(p.bucket_s * 1000)
        end = st.buckets[-1].t
        start = end - (int(p.window_s // p.bucket_s) - 1) * size
        win = [b for b in st.buckets if b.t >= start]
        floors = [(b.t, b.gc / _MB) for b in win if b.gc is not None]
        growth = self._growth(floors)
        facts = self._facts(st, win, floors, growth, start, end + size)
        if any(b.act for b in win):
            return False, f"records flowing (highest rate {facts.max_rate:g}/s)", facts
        if any(b.unk for b in win):
            return False, "too many throughput series to prove zero input", facts
        covered = sum(1 for b in win if b.n and b.tp)
        if covered < p.min_buckets:
            return False, f"only {covered} buckets with heap and throughput samples", facts
        if len(floors) < p.min_gc_buckets or floors[-1][0] - floors[0][0] < p.window_s * 1000 / 2:
            return None, f"too few GCs to see the floor ({len(floors)} buckets)", facts
        if growth < p.min_growth_mb_per_h:
            return False, f"floor no longer rising ({growth:.0f} MB/h)", facts
        if facts.rising_fraction < p.min_rising_fraction:
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
        st: IdleHeapGrowthState,
        win: list[Bucket],
        floors: list[tuple[int, float]],
        growth: float,
        start: int,
        end: int,
    ) -> HeapFloorFacts:
        tol = self.params.floor_tolerance_mb
        pairs = list(zip(floors, floors[1:], strict=False))
        rising = sum(1 for (_, a), (_, b) in pairs if b >= a - tol) / len(pairs) if pairs else 0.0
        floor_mb = floors[-1][1] if floors else None
        heap_max_mb = st.heap_max / _MB if st.heap_max else None
        hours_left = None
        if floor_mb is not None and heap_max_mb is not None and growth > 0:
            hours_left = round(max(heap_max_mb - floor_mb, 0.0) / growth, 1)
        commits = [b for b in win if b.cn]
        seen = [b.t for b in win if b.n and b.tp]
        return HeapFloorFacts(
            growth_mb_per_h=round(growth, 1),
            floor_mb=None if floor_mb is None else round(floor_mb, 1),
            floors_mb=[round(mb, 1) for _, mb in floors],
            heap_max_mb=None if heap_max_mb is None else round(heap_max_mb, 1),
            hours_to_heap_max=hours_left,
            rising_fraction=round(rising, 2),
            gc_buckets=len(floors),
            window_start_ms=start,
            idle_s=(end - min(seen)) // 1000 if seen else 0,
            window_end_ms=end,
            throughput_series=sorted(n for n, t in st.names.items() if t >= start),
            throughput_samples=sum(b.tp for b in win),
            max_rate=max((b.rate for b in win), default=0.0),
            kafka_commits_succeeded=(
                None if not commits else "increasing" if any(b.ci for b in commits) else "flat"
            ),
            jobs=dict(st.jobs),
            buckets=[
                BucketView(
                    b.t,
                    None if b.gc is None else round(b.gc / _MB, 1),
                    b.rate if b.tp else None,
                    b.act,
                )
                for b in win[-_EVIDENCE_CAP:]
            ],
        )

    def _severity(self, facts: HeapFloorFacts) -> Severity:
        left = facts.hours_to_heap_max
        if left is not None and left <= self.params.critical_within_h:
            return Severity.CRITICAL
        return self.params.severity

    # --- alerts and timers ----------------------------------------------------------

    def _page(self, st: IdleHeapGrowthState, facts: HeapFloorFacts) -> tuple[str, Evidence]:
        """What the firing and the escalated page say, and their evidence."""
        left = facts.hours_to_heap_max
        eta = f", Heap_Max in ~{left:g} h at this rate" if left is not None else ""
        summary = (
            f"TaskManager {st.tm_id}: post-GC heap floor rising "
            f"{facts.growth_mb_per_h:.0f} MB/h (now {facts.floor_mb:.0f} MB{eta}) "
            f"with zero records in/out for {facts.idle_s / 60:.0f} min; {HINT}"
        )
        return summary, IdleHeapGrowthEvidence(**facts.model_dump(), window_s=self.params.window_s)

    def _resolved(self, st: IdleHeapGrowthState, at_ms: int) -> Alert:
        summary = f"TaskManager {st.tm_id}: {st.why}"
        return self.resolve(st, at_ms, summary, self.evidence(st), severity=st.severity)

    def _clear_due(self, st: IdleHeapGrowthState, now_ms: int) -> tuple[Alert, ...]:
        """A firing TaskManager without heap samples starts to clear; resolve when due."""
        clear_ms = int(self.params.clear_for_s * 1000)
        if st.firing and st.clear_since_ms is None:
            stale_at = self._stale_at(st)
            if now_ms >= stale_at:
                st.clear_since_ms = stale_at
                st.why = "stopped sending heap metrics (killed or stopped?)"
        deadline = st.resolve_deadline(clear_ms)
        if deadline is None or now_ms < deadline:
            return ()
        if st.buckets and deadline == self._end(st):
            # Due when the filling bucket ends: that bucket is complete, and its verdict
            # (what the sample closing it would bring) decides first.
            judged = self._open_bucket(st, deadline)
            deadline = st.resolve_deadline(clear_ms)
            if deadline is None:  # resolved by the verdict, or the condition holds again
                return tuple(judged)
        if st.hysteresis(False, deadline, clear_for_ms=clear_ms) == "resolved":
            return (self._resolved(st, deadline),)
        return ()

    def _stale_at(self, st: IdleHeapGrowthState) -> int:
        base = st.last_heap_ms if st.last_heap_ms is not None else st.last_event_ms
        return base + int(self.params.stale_after_s * 1000)

    def _end(self, st: IdleHeapGrowthState) -> int:
        """The end of the newest bucket (there is one)."""
        return st.buckets[-1].t + self._bucket_ms

    def _newest_judged(self, st: IdleHeapGrowthState) -> bool:
        """Whether the newest bucket's verdict is in (its end passed before a later sample)."""
        return bool(st.buckets) and st.judged_ms == self._end(st)

    def _filling_end(self, st: IdleHeapGrowthState) -> int | None:
        """The end of the newest bucket while it holds samples and is not judged yet."""
        if not st.buckets:
            return None
        last = st.buckets[-1]
        end = last.t + self._bucket_ms
        # An empty bucket (one a resolve by timer opened) waits for a sample, as before.
        return end if st.judged_ms != end and (last.n or last.tp or last.cn) else None

    def next_deadline(self, state: IdleHeapGrowthState) -> int | None:
        """The newest bucket's end; while firing, the resolve or the stale deadline too."""
        ended = self._filling_end(state)
        if not state.firing:
            return ended
        deadline = state.resolve_deadline(int(self.params.clear_for_s * 1000))
        due = deadline if deadline is not None else self._stale_at(state)
        return due if ended is None else min(due, ended)
