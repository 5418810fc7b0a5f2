"""``checkpoint_state_growth``: a job's checkpoint size keeps growing, and is still growing.

State that grows without bound ends in a dead TaskManager: with a heap state backend
the heap fills until the JVM spends its time in GC (seed 000: a 2 min sliding window
sliding every 2 s keeps 60 copies of every record; its state grew towards 1 GB on a
3 GB heap and the TaskManager died with ``GC overhead limit exceeded`` while taking a
checkpoint), with RocksDB the disk and the checkpoint duration follow. The size of
each completed checkpoint is the job's state size, so its trend is the early warning.

Samples are the sizes of ``Completed checkpoint N … (B bytes …)`` lines and, for jobs
without them, ``flink_jobmanager_job_lastCheckpointSize`` (a value is a new sample
when it changes; logs win while they are fresh). Savepoints (named in the trigger
line from 1.11) are left out: a canonical savepoint is no incremental checkpoint. At
most ``max_samples`` samples cover ``window_s``: a faster checkpoint interval keeps
the newest sample per ``window_s / max_samples`` seconds.

When a sample arrives the last ``window_s`` is judged. The condition holds when:

* the samples cover at least 90 % of the window (a job seen for less than that is
  not judged: its warm-up) and number ``min_samples``;
* the recent size (median of the newest quarter of the samples) is at least
  ``min_size_mb`` and at least ``min_growth_ratio`` x the median of the oldest quarter;
* the rise is significant over the window (Mann-Kendall ``z`` >= ``min_trend_z``;
  rank-based, so jitter and one outlier barely move it);
* it rose all along: from the oldest quarter's median to the middle quarter's and
  from there to the newest quarter's, each step is at least 30 % of the whole rise
  (a single step up, a cache loaded once, is no growth);
* it is still rising now: the Theil-Sen slope of the newest half is at least
  ``min_growth_mb_per_h`` and the newest quarter still grows at least half as fast
  as the window did. State that grew and levelled off (a window or a cache filling
  up to its working set, a job warming up) fails this test as soon as it levels.

A **surge** does not wait for the window: the newest 10 checkpoints' size at least
``surge_ratio`` x its level up to ``surge_within_s`` ago and still rising (Mann-Kendall
over them), with durations at least 3x their level then and ``surge_duration_share`` of
the job's checkpoint interval (learned from trigger spacing), fires on a job of any age.
Durations that follow are what tells state that drives the job towards its timeout from
a small window warming up.

The relative rise (``min_growth_ratio``) is needed to open an incident, unless the
heap projection below is within ``critical_within_h``; an open incident holds while
the other tests do: a state growing by a fixed amount an hour rises less and less
in relative terms, and is no smaller a problem for it.

A drop of more than half between two samples starts the series again. When the
checkpoint ids go on (a window firing and clearing the state of all keys at once)
the old series' peak is remembered and the size must pass it by 10 % to count:
state that only refills to where it was, the sawtooth of a tumbling window however
long, never fires after its first period. That first fill after a job starts
looks like growth if the window is longer than 90 % of ``window_s`` (2 h by default:
hourly windows are safe). When the ids start again (a new run of the job without its
state) the peak is forgotten too.

The incident resolves after ``clear_for_s`` of the condition being false (or the job
going idle for ``idle_ttl_s``). With ``state_heap_mb`` (the heap the job's state may
use, summed over its TaskManagers) and a state backend other than ``rocksdb``, the
evidence projects when the state reaches ``heap_share`` of that heap, and the
severity is critical when it has or will within ``critical_within_h`` (at firing,
or later as one ``escalated`` transition).

State per job (bounded): at most ``max_samples`` samples ``[time, bytes, source]`` of
about 30 B, the newest 10 checkpoints and 7 early levels for the surge test, 8 savepoint
ids, the peak before the last drop and the last verdict: ~3.4 KB with the defaults,
measured in ``tests/detectors/test_checkpoint_state_growth.py``.
A verdict costs O(``max_samples``²) comparisons (Mann-Kendall and Theil-Sen pairs),
about 2,000 with the defaults, once per kept sample.
"""

from __future__ import annotations

import math
from statistics import median
from typing import Any, ClassVar, Literal

from pydantic import Field

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
from detectors.checkpoint_creep import SIZE_METRIC
from detectors.stats import (
    for_humans,
    learn_cadence,
    mann_kendall_z,
    median_interval,
    theil_sen,
)

_MB = 1024 * 1024
_HOUR_MS = 3_600_000
_MIN_COVERAGE = 0.9  # share of window_s the samples must span before a verdict
_RESET_DROP = 0.5  # a sample below this share of the previous one starts a new series
_KEEPS_GROWING = 0.5  # newest quarter's slope / the window's slope, at least
_HALF_SHARE = 0.3  # each half-window's slope / the window's slope, at least (no single step)
_ABOVE_PEAK = 1.1  # after a drop, the size must pass the old peak by this factor to count
_MAX_SAVEPOINTS = 8
_MIN_FRESH_MS = 60_000  # log completions count as live for at least this long
_EVIDENCE_CAP = 60  # sizes listed in the evidence, the newest
_RECENT = 10  # newest checkpoints kept unthinned for the surge test
_ANCHORS = 7  # early levels kept for the surge test, one per surge_within_s / 6
_SURGE_DURATION_RATIO = 3.0  # durations must have grown this much since the anchor
_SURGE_Z = 2.33  # Mann-Kendall z of the newest checkpoints' sizes: still growing (p < 0.01)
_SURGE_MIN_DURATION_MS = 1000  # without a known interval, the durations must reach this

# A sample: [time_ms, size_bytes, "l" (log) | "m" (metric)].
_T, _SIZE, _SRC = range(3)
_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.CRITICAL: 2}


class CheckpointStateGrowthParams(DetectorParams):
    """Thresholds of :class:`CheckpointStateGrowth`."""

    clear_for_s: float = Field(
        default=1800,
        ge=0,
        description="Resolve after the growth condition has been false this long (s).",
    )
    window_s: float = Field(
        default=7200,
        ge=300,
        description=(
            "How long the checkpoint size must keep growing (seconds); above the period "
            "of the job's longest window, whose first fill looks like growth."
        ),
    )
    min_samples: int = Field(
        default=10, ge=6, description="Checkpoint sizes in the window needed for a verdict."
    )
    max_samples: int = Field(
        default=60,
        ge=20,
        le=1000,
        description="Sizes kept per job; faster checkpoints are thinned to this many per window.",
    )
    min_trend_z: float = Field(
        default=3.0,
        gt=0,
        description="Mann-Kendall z the rise over the window must reach (3.0: p < 0.0014).",
    )
    min_growth_ratio: float = Field(
        default=1.2,
        gt=1.0,
        description="Recent size over the size at the window's start (medians of quarters).",
    )
    min_growth_mb_per_h: float = Field(
        default=50.0, gt=0, description="Theil-Sen slope of the newest half-window (MB/h)."
    )
    min_size_mb: float = Field(
        default=100.0, ge=0, description="A recent size below this never fires (MB)."
    )
    surge_ratio: float = Field(
        default=10.0,
        gt=1.0,
        description=(
            "Growth of the size over its level up to surge_within_s ago that pages at once, "
            "without waiting for window_s, while checkpoint durations follow (ratio)."
        ),
    )
    surge_within_s: float = Field(
        default=1800,
        ge=60,
        description="How far back the surge test looks for the early level (seconds).",
    )
    surge_duration_share: float = Field(
        default=0.1,
        gt=0,
        description=(
            "A surge also needs the recent checkpoint duration at this share of the job's "
            "checkpoint interval (learned from its triggers; 1 s when unknown) and 3x its "
            "early level (fraction)."
        ),
    )
    state_backend: Literal["unknown", "heap", "rocksdb"] = Field(
        default="unknown",
        description=(
            "The jobs' state backend (logs do not tie it to a job): heap (hashmap, "
            "filesystem, memory) or rocksdb; set it per job in overrides."
        ),
    )
    state_heap_mb: float | None = Field(
        default=None,
        gt=0,
        description=(
            "Heap the job's state may use, summed over its TaskManagers (MB); null: unknown."
        ),
    )
    heap_share: float = Field(
        default=0.5,
        gt=0,
        le=1.0,
        description="Checkpoint size over state_heap_mb that counts as large for the heap.",
    )
    critical_within_h: float = Field(
        default=2.0,
        ge=0,
        description="Critical when the size reaches heap_share of the heap within this (h).",
    )


class CheckpointStateGrowth(Detector[CheckpointStateGrowthParams, Any]):
    """Fire when a job's checkpoint size grows steadily over a window and still grows."""

    name: ClassVar[str] = "checkpoint_state_growth"
    scope: ClassVar[Scope] = "job"
    kinds: ClassVar[frozenset[str]] = frozenset(
        {"checkpoint_triggered", "checkpoint_completed", "metric"}
    )
    metrics: ClassVar[frozenset[str]] = frozenset({SIZE_METRIC})
    params_model: ClassVar[type[DetectorParams]] = CheckpointStateGrowthParams
    runbook: ClassVar[str] = (
        "The job's state keeps growing. Look for windows whose slide is much smaller than their "
        "size (each record is kept size/slide times), keyed state without TTL, and a key space "
        "that grows (ids, timestamps as keys). With a heap state backend the TaskManager will "
        "die in GC (seed 000): move state to RocksDB or add heap before the projected time."
    )
    signals: ClassVar[dict[str, str]] = {
        "checkpoint_size_bytes": "Size of the job's latest completed checkpoint.",
        "checkpoint_size_growth_bytes_per_hour": (
            "Theil-Sen slope of the checkpoint size over the newest half of window_s, bytes "
            "per hour (known once the window is covered)."
        ),
    }

    # --- entry points ------------------------------------------------------------

    def signal_values(self, state: State) -> dict[str, float]:  # noqa: D102
        out: dict[str, float] = {}
        if state["samples"]:
            out["checkpoint_size_bytes"] = float(state["samples"][-1][_SIZE])
        if state.get("slope") is not None:
            out["checkpoint_size_growth_bytes_per_hour"] = float(state["slope"])
        return out

    def on_event(self, state: State | None, event: Event, now_ms: int) -> Step:
        """Fold one checkpoint line or size sample in; judge the window on a new sample."""
        st = state or self._new_state(event)
        st["last_event_ms"] = max(int(st["last_event_ms"]), event.time_ms)
        st["job_name"] = event.job_name or st.get("job_name")
        alerts: list[Alert] = []
        sample: list[Any] | None = None
        if event.kind == "checkpoint_triggered":
            if event.checkpoint_id is not None and "savepoint" in (event.reason or "").lower():
                st["savepoints"] = [*st["savepoints"], event.checkpoint_id][-_MAX_SAVEPOINTS:]
            elif event.checkpoint_id is not None:
                learn_cadence(st, event.checkpoint_id, event.time_ms)
        elif event.kind == "checkpoint_completed":
            sample = self._log_sample(st, event)
        elif event.kind == "metric" and event.metric == SIZE_METRIC:
            sample = self._metric_sample(st, event)
        if sample is not None and self._add(st, sample):
            alerts.extend(self._judge(st, event.time_ms))
        elif st["firing"]:
            alerts.extend(self._lifecycle_only(st, event.time_ms))
        return Step(state=st, alerts=tuple(alerts), timer_ms=self._next_timer(st))

    def on_timer(self, state: State, now_ms: int) -> Step:
        """Finish a pending resolve; evict an idle job (resolving its incident)."""
        st = dict(state)
        idle_at = int(st["last_event_ms"]) + int(self.params.idle_ttl_s * 1000)
        at = min(now_ms, idle_at)
        alerts = self._lifecycle_only(st, at) if st["firing"] else []
        if now_ms >= idle_at:
            if st["firing"]:
                alerts.append(self._resolved(st, idle_at, "no checkpoints from this job any more"))
            return Step(state=None, alerts=tuple(alerts))
        return Step(state=st, alerts=tuple(alerts), timer_ms=self._next_timer(st))

    # --- samples -----------------------------------------------------------------

    def _new_state(self, event: Event) -> State:
        return {
            **self.identity(event),
            "samples": [],
            "peak": None,
            "last_id": None,
            "savepoints": [],
            "last_log_ms": None,
            "metric_size": None,
            "cond": False,
            "slope": None,
            "facts": None,
            "severity": None,
        }

    def _log_sample(self, st: State, event: Event) -> list[Any] | None:
        if event.size_bytes is None or event.size_bytes < 0:
            return None
        if event.checkpoint_id is not None and event.checkpoint_id in st["savepoints"]:
            st["savepoints"] = [x for x in st["savepoints"] if x != event.checkpoint_id]
            return None
        st["last_log_ms"] = event.time_ms
        cid, last = event.checkpoint_id, st["last_id"]
        if cid is not None:
            if last is not None and cid < int(last):
                # Ids start again: a new run of the job, its old state and peak are gone.
                st["samples"], st["peak"] = [], None
                st["recent"], st["anchors"] = [], []
            st["last_id"] = cid
        self._note_recent(st, event.time_ms, int(event.size_bytes), event.duration_ms)
        return [event.time_ms, int(event.size_bytes), "l"]

    def _note_recent(self, st: State, t: int, size: int, duration: int | None) -> None:
        """Every checkpoint, unthinned, for the surge test; an early level now and then."""
        recent = [*(st.get("recent") or []), [t, size, duration]][-_RECENT:]
        st["recent"] = recent
        if len(recent) < 5:
            return
        anchors = st.get("anchors") or []
        every_ms = self.params.surge_within_s * 1000 / 6
        if not anchors or t - int(anchors[-1][0]) >= every_ms:
            durations = [r[2] for r in recent[-5:] if r[2] is not None]
            level = [
                t,
                median(r[1] for r in recent[-5:]),
                median(durations) if durations else None,
            ]
            st["anchors"] = [*anchors, level][-_ANCHORS:]

    def _metric_sample(self, st: State, event: Event) -> list[Any] | None:
        value = event.value
        if value is None or not math.isfinite(value) or value < 0:
            return None
        previous, st["metric_size"] = st["metric_size"], value
        if value == previous:
            return None  # the same checkpoint, scraped again
        last_log = st["last_log_ms"]
        if last_log is not None:
            interval = median_interval(st["samples"])
            fresh = max(_MIN_FRESH_MS, 2 * interval) if interval else _MIN_FRESH_MS
            if event.time_ms - int(last_log) <= fresh:
                return None  # the log lines carry the same checkpoints
        return [event.time_ms, int(value), "m"]

    def _add(self, st: State, sample: list[Any]) -> bool:
        """Add a sample; ``True`` if the window gained one and is worth judging again.

        The newest sample is provisional while it is closer than ``window_s / max_samples``
        to the one before: a new sample replaces it (thinning a fast checkpoint interval)
        and is not judged again, the window barely moved.
        A late sample (older than the newest) is ignored: the trend is in event time.
        """
        samples: list[list[Any]] = st["samples"]
        if samples and sample[_T] < samples[-1][_T]:
            return False
        if samples and sample[_SIZE] < _RESET_DROP * samples[-1][_SIZE]:
            # The state dropped (a window cleared all its keys): a new series, which has to
            # pass the old peak before its refilling counts as growth.
            st["peak"] = max([s[_SIZE] for s in samples] + [int(st["peak"] or 0)])
            samples = []
        spacing = self.params.window_s * 1000 / self.params.max_samples
        appended = not (len(samples) >= 2 and samples[-1][_T] - samples[-2][_T] < spacing)
        if appended:
            samples.append(sample)
        else:
            samples[-1] = sample
        horizon = sample[_T] - int(self.params.window_s * 1000)
        # Keep one sample at or before the window's start, so coverage can be complete.
        start = max(0, next((i for i, s in enumerate(samples) if s[_T] > horizon), 0) - 1)
        # The window's samples, one before it and the provisional newest one.
        st["samples"] = samples[start:][-(self.params.max_samples + 2) :]
        return appended

    # --- judging -----------------------------------------------------------------

    def _judge(self, st: State, at_ms: int) -> list[Alert]:
        facts = self._evaluate(st) or {}
        surge = self._surge(st, at_ms)
        facts = {**facts, "surge": surge} if facts or surge else {}
        key = "sustained" if st["firing"] else "growing"
        st["cond"] = bool(facts.get(key)) or surge is not None
        st["slope"] = facts.get("slope_bytes_per_hour")
        st["facts"] = facts or None
        transition = Lifecycle.update(st, st["cond"], at_ms, clear_for_ms=self._clear_ms())
        if transition == "firing":
            st["severity"] = self._severity(facts).value
            return [self._firing(st, at_ms, AlertStatus.FIRING)]
        if transition == "resolved":
            return [self._resolved(st, at_ms, "checkpoint size no longer growing")]
        if st["firing"] and st["cond"]:
            severity = self._severity(facts)
            if _RANK[severity] > _RANK[Severity(st["severity"] or self.params.severity)]:
                st["severity"] = severity.value
                return [self._firing(st, at_ms, AlertStatus.ESCALATED)]
        return []

    def _lifecycle_only(self, st: State, at_ms: int) -> list[Alert]:
        """Complete a resolve that fell due without a new sample."""
        transition = Lifecycle.update(st, bool(st["cond"]), at_ms, clear_for_ms=self._clear_ms())
        if transition == "resolved":
            return [self._resolved(st, at_ms, "checkpoint size no longer growing")]
        return []

    def _evaluate(self, st: State) -> dict[str, Any] | None:
        """Trend statistics over the window, or ``None`` before it is covered."""
        p = self.params
        samples = st["samples"]
        if len(samples) < 2:
            return None
        end = int(samples[-1][_T])
        span = end - int(samples[0][_T])
        win = [s for s in samples if s[_T] >= end - p.window_s * 1000]
        if span < _MIN_COVERAGE * p.window_s * 1000 or len(win) < p.min_samples:
            return None
        t = [float(s[_T]) for s in win]
        y = [float(s[_SIZE]) for s in win]
        n = len(y)
        q = max(3, n // 4)
        start_size, recent = median(y[:q]), median(y[-q:])
        ratio = recent / max(start_size, 1.0)
        # Growth from the oldest quarter to the middle one and from there to the newest,
        # in medians: robust to jitter, and a single step lands in one of the two only.
        mid = (n - q) // 2
        middle = median(y[mid : mid + q])
        rise = recent - start_size
        steady = rise > 0 and min(middle - start_size, recent - middle) >= _HALF_SHARE * rise
        # The window's average slope, between the oldest and newest quarter's centres.
        span_ms = median(t[-q:]) - median(t[:q])
        slope_avg = rise / span_ms if span_ms > 0 else 0.0
        h = n // 2
        slope_half = theil_sen(list(zip(t[h:], y[h:], strict=True)))
        slope_quarter = theil_sen(list(zip(t[-q:], y[-q:], strict=True)))
        per_h = slope_half * _HOUR_MS
        peak = st["peak"]
        # Rising significantly, all along, and still now: holds an open incident. Opening
        # one also takes a relative rise (min_growth_ratio) or the heap coming into reach:
        # a big state growing by a fixed amount an hour rises less and less in relative terms.
        cheap = (
            recent >= p.min_size_mb * _MB
            and steady
            and per_h >= p.min_growth_mb_per_h * _MB
            and slope_quarter >= _KEEPS_GROWING * slope_avg
            and (peak is None or recent >= _ABOVE_PEAK * float(peak))
        )
        # Mann-Kendall is the costly test (n^2 / 2 pairs): only when the others pass.
        z = mann_kendall_z(y) if cheap else None
        sustained = cheap and z is not None and z >= p.min_trend_z
        heap = self._heap(recent, per_h)
        heap_soon = heap["heap_share_in_s"] is not None and (
            heap["heap_share_in_s"] <= p.critical_within_h * 3600
        )
        facts: dict[str, Any] = {
            "growing": sustained and (ratio >= p.min_growth_ratio or heap_soon),
            "sustained": sustained,
            "size_bytes": round(recent),
            "window_start_size_bytes": round(start_size),
            "growth_ratio": round(ratio, 2),
            "mann_kendall_z": None if z is None else round(z, 2),
            "slope_bytes_per_hour": round(per_h),
            "middle_size_bytes": round(middle),
            "newest_quarter_vs_window_slope": (
                round(slope_quarter / slope_avg, 2) if slope_avg > 0 else None
            ),
            "samples": n,
            "peak_before_drop_bytes": peak,
        }
        facts.update(heap)
        return facts

    def _surge(self, st: State, at_ms: int) -> dict[str, Any] | None:
        """Orders of magnitude in minutes, durations following, still growing: or None.

        Judged on the newest checkpoints against the earliest level of the last
        ``surge_within_s``, so a young job pages within minutes. A warm-up that levels off
        fails the still-growing test as soon as it levels, and one whose checkpoints stay
        fast fails the duration test.
        """
        p = self.params
        recent = st.get("recent") or []
        anchors = [
            a for a in st.get("anchors") or [] if at_ms - int(a[0]) <= p.surge_within_s * 1000
        ]
        if len(recent) < _RECENT or not anchors or anchors[0][2] is None:
            return None
        _, early_size, early_dur = anchors[0]
        sizes = [float(r[1]) for r in recent]
        durations = [r[2] for r in recent[-5:] if r[2] is not None]
        if not durations:
            return None
        size_now, dur_now = median(sizes[-5:]), median(durations)
        cadence = st.get("cadence_ms")
        dur_floor = p.surge_duration_share * cadence if cadence else _SURGE_MIN_DURATION_MS
        if (
            size_now < p.surge_ratio * max(float(early_size), 1.0)
            or dur_now < max(_SURGE_DURATION_RATIO * float(early_dur), dur_floor)
            or median(sizes[:5]) >= size_now
            or mann_kendall_z(sizes) < _SURGE_Z
        ):
            return None
        return {
            "size_bytes": round(size_now),
            "since_bytes": round(float(early_size)),
            "ratio": round(size_now / max(float(early_size), 1.0), 1),
            "duration_ms": round(dur_now),
            "since_duration_ms": round(float(early_dur)),
            "checkpoint_every_s": None if not cadence else round(float(cadence) / 1000, 1),
            "over_s": round((at_ms - int(anchors[0][0])) / 1000),
        }

    def _heap(self, size: float, per_h: float) -> dict[str, Any]:
        p = self.params
        heap = p.state_heap_mb
        if heap is None or p.state_backend == "rocksdb":
            return {"heap_share_now": None, "heap_share_in_s": None}
        limit = p.heap_share * heap * _MB
        share = size / (heap * _MB)
        if size >= limit:
            eta: float | None = 0.0
        elif per_h > 0:
            eta = (limit - size) / per_h * 3600
        else:
            eta = None
        return {
            "heap_share_now": round(share, 3),
            "heap_share_in_s": None if eta is None else round(eta),
        }

    def _severity(self, facts: dict[str, Any] | None) -> Severity:
        eta = (facts or {}).get("heap_share_in_s")
        if eta is not None and eta <= self.params.critical_within_h * 3600:
            return Severity.CRITICAL
        return self.params.severity

    def _next_timer(self, st: State) -> int:
        idle_at = int(st["last_event_ms"]) + int(self.params.idle_ttl_s * 1000)
        resolve = Lifecycle.resolve_deadline(st, self._clear_ms())
        return min(idle_at, resolve) if resolve is not None else idle_at

    def _clear_ms(self) -> int:
        return int(self.params.clear_for_s * 1000)

    # --- alerts ------------------------------------------------------------------

    def _firing(self, st: State, at_ms: int, status: AlertStatus) -> Alert:
        f = st["facts"]
        who = st.get("job_name") or st["job_id"]
        surge = f.get("surge")
        if f.get("growing") or f.get("sustained") or not surge:
            text = (
                f"checkpoint size of job {who} keeps growing: {_mb(f['size_bytes'])} now, "
                f"{f['growth_ratio']:.1f}x in {self.params.window_s / 60:.0f} min, "
                f"+{_mb(f['slope_bytes_per_hour'])}/h"
            )
        else:
            text = (
                f"checkpoint size of job {who} surged {surge['ratio']:.0f}x in "
                f"{surge['over_s'] / 60:.0f} min ({_mb(surge['since_bytes'])} -> "
                f"{_mb(surge['size_bytes'])}) and is still growing; checkpoints take "
                f"{surge['duration_ms'] / 1000:.1f} s "
                f"(were {surge['since_duration_ms'] / 1000:.1f} s)"
            )
            if surge["checkpoint_every_s"]:
                text += f", interval {surge['checkpoint_every_s']:g} s"
        if f.get("heap_share_in_s") is not None:
            share = f"{self.params.heap_share:.0%} of the {self.params.state_heap_mb:.0f} MB heap"
            if f["heap_share_in_s"] == 0:
                text += f"; already above {share}"
            else:
                text += f"; reaches {share} in ~{for_humans(f['heap_share_in_s'])}"
        return self.alert(
            state=st,
            status=status,
            event_time_ms=at_ms,
            summary=text,
            evidence=self._evidence(st),
            severity=Severity(st["severity"]) if st["severity"] else None,
        )

    def _resolved(self, st: State, at_ms: int, why: str) -> Alert:
        alert = self.resolve(
            st,
            at_ms,
            f"job {st.get('job_name') or st['job_id']}: {why}",
            self._evidence(st),
            severity=Severity(st["severity"]) if st["severity"] else None,
        )
        st["severity"] = None
        return alert

    def _evidence(self, st: State) -> dict[str, Any]:
        p = self.params
        samples = st["samples"][-_EVIDENCE_CAP:]
        sources = {s[_SRC] for s in samples}
        return {
            **(st["facts"] or {}),
            "sizes_bytes": [s[_SIZE] for s in samples],
            "times_ms": [s[_T] for s in samples],
            "source": {"l": "log", "m": "metric"}.get("".join(sorted(sources)), "mixed")
            if sources
            else None,
            "window_s": p.window_s,
            "state_backend": p.state_backend,
            "state_heap_mb": p.state_heap_mb,
            "hint": _hint(p.state_backend),
        }


def _hint(backend: str) -> str:
    windows = (
        "A sliding window keeps size/slide copies of every record (2 min sliding by 2 s: 60); "
        "keyed state without TTL and a growing key space never shrink."
    )
    if backend == "rocksdb":
        return f"{windows} State is in RocksDB: watch local disk and checkpoint duration."
    heap = (
        "With a heap backend (hashmap/filesystem) the state lives on the JVM heap and the "
        "TaskManager dies in GC when it fills (seed 000): RocksDB moves it off-heap."
    )
    return f"{windows} {heap}"


def _mb(n: float) -> str:
    return f"{n / _MB:,.0f} MB"
