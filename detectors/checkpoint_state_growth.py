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
a small window warming up (a tumbling window's first fill after a start grows as fast,
and its checkpoints stay quick). It is judged on every completed checkpoint, thinned
out of the window or not: seed 000's 2 min window fills, and levels, within the
``window_s / max_samples`` (2 min) between two window samples. After a drop the newest
checkpoints must pass the old peak by 10 %, as the window's refills must: RocksDB's
incremental checkpoints, small with a compaction's rewritten files now and then, are a
sawtooth, not a surge.

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

State per job (bounded, :class:`CheckpointStateGrowthState`): at most ``max_samples``
samples ``[time, bytes, source]`` of about 30 B, the newest 10 checkpoints and 7 early
levels for the surge test, 8 savepoint ids, the peak before the last drop and the last
verdict with its fitted line: ~3.6 KB with the defaults, measured in
``tests/detectors/test_checkpoint_state_growth.py``.
A verdict costs O(``max_samples``²) comparisons (Mann-Kendall and Theil-Sen pairs),
about 2,000 with the defaults, once per kept sample; the surge test 45 pairs per
checkpoint.
"""

from __future__ import annotations

import math
from statistics import median
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from detectors import words
from detectors.base import Detector, DetectorParams, DetectorState, Evidence, Profile, Story
from detectors.model import LAST_CHECKPOINT_SIZE, Alert, Event, Severity
from detectors.stats import for_humans, mann_kendall_z, median_interval, next_cadence, theil_sen
from detectors.story import job, mb, tm

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


class CheckpointStateGrowthParams(DetectorParams):
    """Thresholds of :class:`CheckpointStateGrowth`."""

    clear_for_s: float = Field(default=1800, ge=0)
    """Resolve after the growth condition has been false this long (s)."""
    window_s: float = Field(default=7200, ge=300)
    """How long the checkpoint size must keep growing (seconds); above the period of the job's
    longest window, whose first fill looks like growth."""
    min_samples: int = Field(default=10, ge=6)
    """Checkpoint sizes in the window needed for a verdict."""
    max_samples: int = Field(default=60, ge=20, le=1000)
    """Sizes kept per job; faster checkpoints are thinned to this many per window."""
    min_trend_z: float = Field(default=3.0, gt=0)
    """Mann-Kendall z the rise over the window must reach (3.0: p < 0.0014)."""
    min_growth_ratio: float = Field(default=1.2, gt=1.0)
    """Recent size over the size at the window's start (medians of quarters)."""
    min_growth_mb_per_h: float = Field(default=50.0, gt=0)
    """Theil-Sen slope of the newest half-window (MB/h)."""
    min_size_mb: float = Field(default=100.0, ge=0)
    """A recent size below this never fires (MB)."""
    surge_ratio: float = Field(default=10.0, gt=1.0)
    """Growth of the size over its level up to surge_within_s ago that pages at once, without
    waiting for window_s, while checkpoint durations follow (ratio)."""
    surge_within_s: float = Field(default=1800, ge=60)
    """How far back the surge test looks for the early level (seconds)."""
    surge_duration_share: float = Field(default=0.1, gt=0)
    """A surge also needs the recent checkpoint duration at this share of the job's checkpoint
    interval (learned from its triggers; 1 s when unknown) and 3x its early level (fraction)."""
    state_backend: Literal["unknown", "heap", "rocksdb"] = Field(default="unknown")
    """The jobs' state backend (logs do not tie it to a job): heap (hashmap, filesystem, memory) or
    rocksdb; set it per job in overrides."""
    state_heap_mb: float | None = Field(default=None, gt=0)
    """Heap the job's state may use, summed over its TaskManagers (MB); null: unknown."""
    heap_share: float = Field(default=0.5, gt=0, le=1.0)
    """Checkpoint size over state_heap_mb that counts as large for the heap."""
    critical_within_h: float = Field(default=2.0, ge=0)
    """Critical when the size reaches heap_share of the heap within this (h)."""


class Sample(NamedTuple):
    """One checkpoint size, saved as ``[time_ms, size_bytes, source]``."""

    t: int
    size: int
    src: str  # "l" (a log line) or "m" (the metric)


class Checkpoint(NamedTuple):
    """A completed checkpoint for the surge test, saved as ``[time_ms, size, duration]``."""

    t: int
    size: int
    duration: int | None


class Level(NamedTuple):
    """An early level for the surge test (medians of 5), as ``[time_ms, size, duration]``."""

    t: int
    size: float
    duration: float | None


class CheckpointStateGrowthState(DetectorState):
    """What :class:`CheckpointStateGrowth` keeps per job.

    Attributes:
        samples: The window's sizes, one before it and the provisional newest one.
        peak: The largest size before the last drop: a new series has to pass it.
        last_id: The newest checkpoint id of a completion line.
        savepoints: Ids of triggered savepoints whose completion is still to come.
        last_log_ms: Time of the newest completion line (logs win while fresh).
        metric_size: The size metric's last value (a new sample when it changes).
        recent: The newest checkpoints, unthinned, for the surge test.
        anchors: Early levels for the surge test, one per ``surge_within_s / 6``.
        last_trigger: The latest checkpoint trigger, ``(id, time)``.
        cadence_ms: The job's checkpoint interval, learned from its triggers.
        cond: The last verdict's condition: growing (sustained, while firing) or a surge.
        slope: The newest half-window's slope, bytes per hour (a signal).
        facts: The last verdict, as the evidence shows it (``None`` before one).
        severity: The open incident's severity.
    """

    samples: list[Sample] = []
    peak: int | None = None
    last_id: int | None = None
    savepoints: list[int] = []
    last_log_ms: int | None = None
    metric_size: float | None = None
    recent: list[Checkpoint] = []
    anchors: list[Level] = []
    last_trigger: tuple[int, int] | None = None
    cadence_ms: int | None = None
    cond: bool = False
    slope: int | None = None
    facts: dict[str, Any] | None = None
    severity: Severity | None = None


class Surge(BaseModel):
    """Orders of magnitude in minutes, durations following (see the module docstring).

    Attributes:
        size_bytes: The newest 5 checkpoints' median size.
        since_bytes: The early level's size.
        ratio: The first over the second.
        duration_ms: The newest 5 checkpoints' median duration.
        since_duration_ms: The early level's duration.
        checkpoint_every_s: The job's checkpoint interval, when learned.
        over_s: How long ago the early level was.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    size_bytes: int
    since_bytes: int
    ratio: float
    duration_ms: int
    since_duration_ms: int
    checkpoint_every_s: float | None
    over_s: int


class GrowthFit(BaseModel):
    """The line the verdict fitted: Theil-Sen over the newest half of the window.

    Attributes:
        from_ms: The first sample it was fitted over.
        to_ms: The newest sample.
        from_bytes: The line's size at ``from_ms``.
        to_bytes: The line's size at ``to_ms`` (Sen's median intercept).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    from_ms: int
    to_ms: int
    from_bytes: int
    to_bytes: int


class CheckpointStateGrowthEvidence(Evidence):
    """What a ``checkpoint_state_growth`` alert shows.

    The verdict's fields (``growing`` to ``surge``) are there once one was reached: a job
    judged over its window has them all, a young job that surged only ``surge``.

    Attributes:
        growing: The window's growth opens an incident.
        sustained: The window's growth holds an open incident.
        size_bytes: The recent size: the median of the newest quarter of the samples.
        window_start_size_bytes: The median of the oldest quarter.
        growth_ratio: The recent size over the window's start.
        mann_kendall_z: The rise's significance (only computed when the rest holds).
        slope_bytes_per_hour: Theil-Sen slope of the newest half-window.
        middle_size_bytes: The median of the middle quarter.
        newest_quarter_vs_window_slope: The newest quarter's slope over the window's.
        samples: Samples in the window.
        peak_before_drop_bytes: The peak the size had to pass after a drop.
        heap_share_now: The recent size's share of ``state_heap_mb``.
        heap_share_in_s: When the size reaches ``heap_share`` of the heap (0: it has).
        surge: The surge, if the newest checkpoints surged.
        sizes_bytes: The newest sizes, at most 60.
        times_ms: Their times.
        source: Where they came from: ``log``, ``metric`` or ``mixed``.
        window_s: The ``window_s`` parameter.
        state_backend: The ``state_backend`` parameter.
        state_heap_mb: The ``state_heap_mb`` parameter.
        hint: What usually makes state grow, and what to do.
        fit: The line the verdict fitted (its slope is ``slope_bytes_per_hour``).
        heap_share: The ``heap_share`` parameter; only with ``state_heap_mb`` and a heap
            backend, where the heap projection is made.
        recent: The newest checkpoints ``[time_ms, size, duration]``, unthinned (at most
            10): what the surge test judges.
    """

    growing: bool | None = None
    sustained: bool | None = None
    size_bytes: int | None = None
    window_start_size_bytes: int | None = None
    growth_ratio: float | None = None
    mann_kendall_z: float | None = None
    slope_bytes_per_hour: int | None = None
    middle_size_bytes: int | None = None
    newest_quarter_vs_window_slope: float | None = None
    samples: int | None = None
    peak_before_drop_bytes: int | None = None
    heap_share_now: float | None = None
    heap_share_in_s: int | None = None
    surge: Surge | None = None
    sizes_bytes: list[int]
    times_ms: list[int]
    source: str | None
    window_s: float
    state_backend: str
    state_heap_mb: float | None
    hint: str
    fit: GrowthFit | None = None
    heap_share: float | None = None
    recent: list[Checkpoint] = []

    def as_dict(self) -> dict[str, Any]:
        """The fields given: a verdict not reached leaves its fields out, no heap no share."""
        out = self.model_dump(mode="json", exclude_unset=True)
        if out.get("heap_share") is None:
            out.pop("heap_share", None)
        return out


def _headline(story: Story) -> str:
    """The growth, and the TaskManager it killed if one died: too large for the heap.

    The size is the one the summary gives: the window's recent level for a trend, the
    newest checkpoints' for a surge (a surge in a young job comes before the window
    is covered, and its evidence has no window level). Left out if neither is known.
    """
    ev = story.root.evidence
    surge = ev.get("surge")
    if isinstance(surge, dict) and not (ev.get("growing") or ev.get("sustained")):
        size = mb(surge.get("size_bytes"))
    else:
        size = mb(ev.get("size_bytes"))
    now = f" (now {size})" if size else ""
    died = f"; {tm(story.dead, story.role)} {story.death}" if story.death else ""
    return (
        f"checkpoint state of {job(story.root)} keeps growing{now}{died}: state "
        "too large for the heap; check the window shape and the state backend"
    )


class CheckpointStateGrowth(Detector[CheckpointStateGrowthParams, CheckpointStateGrowthState]):
    """Fire when a job's checkpoint size grows steadily over a window and still grows."""

    name = "checkpoint_state_growth"
    profile = Profile(
        runbook=(
            "The job's state keeps growing. Look for windows whose slide is much smaller than "
            "their size (each record is kept size/slide times), keyed state without TTL, and a key "
            "space that grows (ids, timestamps as keys). With a heap state backend the TaskManager "
            "will die in GC (seed 000): move state to RocksDB or add heap before the projected "
            "time."
        ),
        idle_words="no checkpoints from this job any more",
        causal_rank=0,
        headline=_headline,
    )
    scope = "job"
    kinds = frozenset({"checkpoint_triggered", "checkpoint_completed", "metric"})
    metrics = frozenset({LAST_CHECKPOINT_SIZE})
    signals = {
        "checkpoint_size_bytes": "Size of the job's latest completed checkpoint.",
        "checkpoint_size_growth_bytes_per_hour": (
            "Theil-Sen slope of the checkpoint size over the newest half of window_s, bytes "
            "per hour (known once the window is covered)."
        ),
    }

    # --- entry points ------------------------------------------------------------

    def signal_values(self, state: CheckpointStateGrowthState) -> dict[str, float]:  # noqa: D102
        out: dict[str, float] = {}
        if state.samples:
            out["checkpoint_size_bytes"] = float(state.samples[-1].size)
        if state.slope is not None:
            out["checkpoint_size_growth_bytes_per_hour"] = float(state.slope)
        return out

    def on_event(self, state: CheckpointStateGrowthState, event: Event) -> list[Alert]:
        """Fold one checkpoint line or size sample in; judge the window on a new sample."""
        alerts: list[Alert] = []
        sample: Sample | None = None
        cid = event.checkpoint_id
        if event.kind == "checkpoint_triggered":
            if cid is not None and "savepoint" in (event.reason or "").lower():
                state.savepoints = [*state.savepoints, cid][-_MAX_SAVEPOINTS:]
            elif cid is not None:
                cadence = next_cadence(state.last_trigger, state.cadence_ms, cid, event.time_ms)
                state.cadence_ms = cadence
                state.last_trigger = (cid, event.time_ms)
        elif event.kind == "checkpoint_completed":
            sample = self._log_sample(state, event)
        elif event.kind == "metric" and event.metric == LAST_CHECKPOINT_SIZE:
            sample = self._metric_sample(state, event)
        if sample is not None:
            appended = self._add(state, sample)
            # Every completed checkpoint is a surge sample, thinned or not: a surge is over
            # within the window_s / max_samples (2 min) a thinned window waits between
            # verdicts, and judged only then it passed unseen once the state levelled.
            if appended or event.kind == "checkpoint_completed":
                alerts.extend(self._judge(state, event.time_ms, window=appended))
        return alerts

    def on_timer(self, state: CheckpointStateGrowthState, now_ms: int) -> list[Alert]:
        """Finish a pending resolve: the condition has been false for ``clear_for_s``."""
        return self._resolve_due(state, now_ms)

    # --- samples -----------------------------------------------------------------

    def _log_sample(self, st: CheckpointStateGrowthState, event: Event) -> Sample | None:
        if event.size_bytes is None or event.size_bytes < 0:
            return None
        cid = event.checkpoint_id
        if cid is not None and cid in st.savepoints:
            st.savepoints = [x for x in st.savepoints if x != cid]
            return None
        st.last_log_ms = event.time_ms
        if cid is not None:
            if st.last_id is not None and cid < st.last_id:
                # Ids start again: a new run of the job, its old state and peak are gone.
                st.samples, st.peak = [], None
                st.recent, st.anchors = [], []
            st.last_id = cid
        self._note_recent(st, Checkpoint(event.time_ms, event.size_bytes, event.duration_ms))
        return Sample(event.time_ms, event.size_bytes, "l")

    def _note_recent(self, st: CheckpointStateGrowthState, checkpoint: Checkpoint) -> None:
        """Every checkpoint, unthinned, for the surge test; an early level now and then."""
        st.recent = recent = [*st.recent, checkpoint][-_RECENT:]
        if len(recent) < 5:
            return
        every_ms = self.params.surge_within_s * 1000 / 6
        if not st.anchors or checkpoint.t - st.anchors[-1].t >= every_ms:
            durations = [r.duration for r in recent[-5:] if r.duration is not None]
            level = Level(
                checkpoint.t,
                median(r.size for r in recent[-5:]),
                median(durations) if durations else None,
            )
            st.anchors = [*st.anchors, level][-_ANCHORS:]

    def _metric_sample(self, st: CheckpointStateGrowthState, event: Event) -> Sample | None:
        value = event.value
        if value is None or not math.isfinite(value) or value < 0:
            return None
        previous, st.metric_size = st.metric_size, value
        if value == previous:
            return None  # the same checkpoint, scraped again
        if st.last_log_ms is not None:
            interval = median_interval(st.samples)
            fresh = max(_MIN_FRESH_MS, 2 * interval) if interval else _MIN_FRESH_MS
            if event.time_ms - st.last_log_ms <= fresh:
                return None  # the log lines carry the same checkpoints
        return Sample(event.time_ms, int(value), "m")

    def _add(self, st: CheckpointStateGrowthState, sample: Sample) -> bool:
        """Add a sample; ``True`` if the window gained one and is worth judging again.

        The newest sample is provisional while it is closer than ``window_s / max_samples``
        to the one before: a new sample replaces it (thinning a fast checkpoint interval)
        and is not judged again, the window barely moved.
        A late sample (older than the newest) is ignored: the trend is in event time.
        """
        samples = st.samples
        if samples and sample.t < samples[-1].t:
            return False
        if samples and sample.size < _RESET_DROP * samples[-1].size:
            # The state dropped (a window cleared all its keys): a new series, which has to
            # pass the old peak before its refilling counts as growth.
            st.peak = max([s.size for s in samples] + [st.peak or 0])
            samples = []
        spacing = self.params.window_s * 1000 / self.params.max_samples
        appended = not (len(samples) >= 2 and samples[-1].t - samples[-2].t < spacing)
        if appended:
            samples.append(sample)
        else:
            samples[-1] = sample
        horizon = sample.t - int(self.params.window_s * 1000)
        # Keep one sample at or before the window's start, so coverage can be complete.
        start = max(0, next((i for i, s in enumerate(samples) if s.t > horizon), 0) - 1)
        # The window's samples, one before it and the provisional newest one.
        st.samples = samples[start:][-(self.params.max_samples + 2) :]
        return appended

    # --- judging -----------------------------------------------------------------

    def _judge(self, st: CheckpointStateGrowthState, at_ms: int, window: bool) -> list[Alert]:
        """Judge the surge, and the window too when it gained a sample (its verdict stands)."""
        if window:
            facts = self._evaluate(st) or {}
        else:
            facts = {k: v for k, v in (st.facts or {}).items() if k != "surge"}
        surge = self._surge(st, at_ms)
        if facts or surge:
            facts["surge"] = surge.model_dump() if surge else None
        key = "sustained" if st.firing else "growing"
        st.cond = bool(facts.get(key)) or surge is not None
        st.slope = facts.get("slope_bytes_per_hour")
        st.facts = facts or None
        transition = st.hysteresis(st.cond, at_ms, clear_for_ms=self._clear_ms())
        if transition == "firing":
            st.severity = self._severity(facts)
            return [self.fire(st, at_ms, *self._page(st), st.severity)]
        if transition == "resolved":
            return [self._close(st, at_ms, "checkpoint size no longer growing")]
        if st.firing and st.cond:
            severity = self._severity(facts)
            if severity.rank > (st.severity or self.params.severity).rank:
                st.severity = severity
                return [self.escalate(st, at_ms, *self._page(st), st.severity)]
        return []

    def _resolve_due(self, st: CheckpointStateGrowthState, now_ms: int) -> list[Alert]:
        """The resolve due by ``now_ms`` (no sample held the incident), at its deadline."""
        deadline = st.resolve_deadline(self._clear_ms())
        if deadline is None or now_ms < deadline:
            return []
        return [self._close(st, deadline, "checkpoint size no longer growing")]

    def _evaluate(self, st: CheckpointStateGrowthState) -> dict[str, Any] | None:
        """The window's trend statistics (the evidence's verdict); ``None`` before it is covered."""
        p = self.params
        samples = st.samples
        if len(samples) < 2:
            return None
        end = samples[-1].t
        span = end - samples[0].t
        win = [s for s in samples if s.t >= end - p.window_s * 1000]
        if span < _MIN_COVERAGE * p.window_s * 1000 or len(win) < p.min_samples:
            return None
        t = [float(s.t) for s in win]
        y = [float(s.size) for s in win]
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
        newest = list(zip(t[h:], y[h:], strict=True))
        slope_half = theil_sen(newest)
        # The fitted line's end, where Sen's median intercept puts it (for a chart).
        fit_end = median(yi - slope_half * (ti - t[-1]) for ti, yi in newest)
        fit = {
            "from_ms": int(t[h]),
            "to_ms": int(t[-1]),
            "from_bytes": round(fit_end - slope_half * (t[-1] - t[h])),
            "to_bytes": round(fit_end),
        }
        slope_quarter = theil_sen(list(zip(t[-q:], y[-q:], strict=True)))
        per_h = slope_half * _HOUR_MS
        peak = st.peak
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
            "fit": fit,
        }
        facts.update(heap)
        return facts

    def _surge(self, st: CheckpointStateGrowthState, at_ms: int) -> Surge | None:
        """Orders of magnitude in minutes, durations following, still growing: or None.

        Judged on the newest checkpoints against the earliest level of the last
        ``surge_within_s``, so a young job pages within minutes. A warm-up that levels off
        fails the still-growing test as soon as it levels, and one whose checkpoints stay
        fast fails the duration test.
        """
        p = self.params
        recent = st.recent
        anchors = [a for a in st.anchors if at_ms - a.t <= p.surge_within_s * 1000]
        early = anchors[0] if anchors else None
        if len(recent) < _RECENT or early is None or early.duration is None:
            return None
        early_dur = early.duration
        sizes = [float(r.size) for r in recent]
        durations = [r.duration for r in recent[-5:] if r.duration is not None]
        if not durations:
            return None
        size_now, dur_now = median(sizes[-5:]), median(durations)
        cadence = st.cadence_ms
        dur_floor = p.surge_duration_share * cadence if cadence else _SURGE_MIN_DURATION_MS
        peak = st.peak
        if (
            size_now < p.surge_ratio * max(early.size, 1.0)
            or dur_now < max(_SURGE_DURATION_RATIO * early_dur, dur_floor)
            or median(sizes[:5]) >= size_now
            # After a drop (a compaction, a window clearing) only passing the old peak counts:
            # a saw-tooth's refill is no surge.
            or (peak is not None and size_now < _ABOVE_PEAK * peak)
            or mann_kendall_z(sizes) < _SURGE_Z
        ):
            return None
        return Surge(
            size_bytes=round(size_now),
            since_bytes=round(early.size),
            ratio=round(size_now / max(early.size, 1.0), 1),
            duration_ms=round(dur_now),
            since_duration_ms=round(early_dur),
            checkpoint_every_s=None if not cadence else round(cadence / 1000, 1),
            over_s=round((at_ms - early.t) / 1000),
        )

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

    def next_deadline(self, state: CheckpointStateGrowthState) -> int | None:
        """Just after a pending resolve's deadline: a sample stamped with it is judged first."""
        deadline = state.resolve_deadline(self._clear_ms())
        return None if deadline is None else deadline + 1

    def _clear_ms(self) -> int:
        return int(self.params.clear_for_s * 1000)

    # --- alerts ------------------------------------------------------------------

    def _page(self, st: CheckpointStateGrowthState) -> tuple[str, CheckpointStateGrowthEvidence]:
        """What the firing and the escalated page say, and their evidence."""
        ev = self.evidence(st)
        who = st.job_name or st.job_id
        surge = ev.surge
        if ev.growing or ev.sustained or not surge:
            text = (
                f"checkpoint size of job {who} keeps growing: {_mb(ev.size_bytes or 0)} now, "
                f"{ev.growth_ratio or 0:.1f}x in {self.params.window_s / 60:.0f} min, "
                f"+{_mb(ev.slope_bytes_per_hour or 0)}/h"
            )
        else:
            text = (
                f"checkpoint size of job {who} surged {surge.ratio:.0f}x in "
                f"{surge.over_s / 60:.0f} min ({_mb(surge.since_bytes)} -> "
                f"{_mb(surge.size_bytes)}) and is still growing; checkpoints take "
                f"{surge.duration_ms / 1000:.1f} s (were {surge.since_duration_ms / 1000:.1f} s)"
            )
            if surge.checkpoint_every_s:
                text += f", interval {surge.checkpoint_every_s:g} s"
        if ev.heap_share_in_s is not None:
            share = f"{self.params.heap_share:.0%} of the {self.params.state_heap_mb:.0f} MB heap"
            if ev.heap_share_in_s == 0:
                text += f"; already above {share}"
            else:
                text += f"; reaches {share} in ~{for_humans(ev.heap_share_in_s)}"
        return text, ev

    def standing(self, state: CheckpointStateGrowthState | None) -> str:
        """The window's coverage or verdict, a surge, the heap; what resolves the incident."""
        if state is None or not state.samples:
            return "no checkpoint size seen for this job"
        p, facts, samples = self.params, state.facts or {}, state.samples
        if "size_bytes" not in facts:
            covered = (samples[-1].t - samples[0].t) / 1000
            held = (
                f"{len(samples)} sizes over {words.span(covered)} of the {words.span(p.window_s)} "
                f"window (judged from 90 %); now {words.size(samples[-1].size)}"
            )
        else:
            held = (
                f"{words.size(facts['size_bytes'])}, {facts['growth_ratio']:.1f}x in "
                f"{words.span(p.window_s)} (pages at {p.min_growth_ratio:g}x), "
                f"{round(facts['slope_bytes_per_hour'] / _MB):+,} MB/h "
                f"(needs {p.min_growth_mb_per_h:g}): {self._verdict(facts)}"
            )
        surge = facts.get("surge")
        surged = f"surged {surge['ratio']:g}x and still growing" if surge else None
        eta = facts.get("heap_share_in_s")
        heap = None if eta is None else f"{p.heap_share:.0%} of the heap in ~{words.span(eta)}"
        if not state.firing:
            return words.clause(held, surged, heap)
        due = state.resolve_deadline(self._clear_ms())
        resolve = f"resolves at {words.at(due)}" if due is not None else "resolves once not growing"
        since = words.firing_since(state.incident_start_ms, state.last_event_ms)
        return words.clause(since, held, surged, heap, resolve)

    def _verdict(self, facts: dict[str, Any]) -> str:
        """The window's verdict in words: growing, or the first test the growth failed."""
        p = self.params
        if facts["growing"]:
            return "growing"
        if facts["sustained"]:
            return "growing, too little yet to open an incident"
        size, start = facts["size_bytes"], facts["window_start_size_bytes"]
        middle, rise = facts["middle_size_bytes"], facts["size_bytes"] - start
        peak, z = facts.get("peak_before_drop_bytes"), facts.get("mann_kendall_z")
        quarter = facts.get("newest_quarter_vs_window_slope")
        steady = rise > 0 and min(middle - start, size - middle) >= _HALF_SHARE * rise
        failed = (
            (size < p.min_size_mb * _MB, f"below {p.min_size_mb:g} MB"),
            (peak is not None and size < _ABOVE_PEAK * peak, "below its peak before a drop"),
            (not steady, "not rising all along"),
            (facts["slope_bytes_per_hour"] < p.min_growth_mb_per_h * _MB, "rising too slowly"),
            (quarter is None or quarter < _KEEPS_GROWING, "levelling off"),
            (z is None or z < p.min_trend_z, "rise not significant"),
        )
        return next((said for fails, said in failed if fails), "not growing")

    def on_close(self, state: CheckpointStateGrowthState, now_ms: int) -> list[Alert]:
        """No checkpoints any more: :meth:`_close`, saying ``idle_words``."""
        return [self._close(state, now_ms, self.profile.idle_words)] if state.firing else []

    def _close(self, state: CheckpointStateGrowthState, time_ms: int, why: str) -> Alert:
        """The resolve, at the severity the incident reached."""
        severity, state.severity = state.severity, None
        summary = f"{self.subject(state)}: {why}"
        return self.resolve(state, time_ms, summary, self.evidence(state), severity)

    def evidence(self, state: CheckpointStateGrowthState) -> CheckpointStateGrowthEvidence:
        """The last verdict, the newest sizes and the parameters they were judged with."""
        p = self.params
        samples = state.samples[-_EVIDENCE_CAP:]
        sources = "".join(sorted({s.src for s in samples}))
        # The heap share the projection is made against, where it is made (for a chart).
        heap = p.state_heap_mb is not None and p.state_backend != "rocksdb"
        return CheckpointStateGrowthEvidence(
            **(state.facts or {}),
            heap_share=p.heap_share if heap else None,
            recent=list(state.recent),
            sizes_bytes=[s.size for s in samples],
            times_ms=[s.t for s in samples],
            source={"l": "log", "m": "metric"}.get(sources, "mixed") if sources else None,
            window_s=p.window_s,
            state_backend=p.state_backend,
            state_heap_mb=p.state_heap_mb,
            hint=_hint(p.state_backend),
        )


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
