"""``checkpoint_creep``: checkpoint durations of one job trend up towards the timeout.

A checkpoint that takes longer every time (state growing without bound, a sink
slowing down, skew building up) ends in expiries and a failing job, but only
after hours in which a human could still act. Two signals, one incident per job:

* **Trend.** Each completed checkpoint is a sample. The detector fires only when
  three robust tests agree: the upward trend over the last ``window`` samples is
  significant (Mann-Kendall ``z`` >= ``min_trend_z``; rank-based, so jitter and one
  10x outlier barely move it), the recent median (newest sixth of the window) is
  at least ``min_ratio`` x the baseline median, and that recent median is at least
  ``min_duration_ms`` (fast jobs never page, however their durations move). The
  baseline is the median of block medians (one per ``window / 6`` samples) over the
  last ``baseline_checkpoints``: it outlives the window, so a slow linear creep is
  still measured against the healthy level, and a short swing of a jittery or
  load-driven job rarely doubles it. The evidence adds the current Theil-Sen slope
  (median of pairwise slopes over the newest half of the window, per checkpoint and
  per hour) and the time until the checkpoint timeout is reached at that slope,
  linearly (it overestimates for an accelerating creep).
* **Stuck pending.** A checkpoint triggered and neither completed nor expired,
  declined or failed after ``pending_share`` x ``checkpoint_timeout_s``: an
  event-time timer at trigger + share x timeout catches it while metrics still
  show the last (healthy) duration. Completing a checkpoint subsumes the older
  pending ones, as in Flink. Savepoints are ignored (Flink >= 1.11 names them in
  the trigger line; before that they cannot be told apart).

Samples come from ``checkpoint_completed`` log lines and, for jobs without them,
from ``flink_jobmanager_job_lastCheckpointDuration``: a metric value is a new
sample only when it changes (and is not the -1 shown before the first
checkpoint), and only after two checkpoint intervals (at least 60 s) without a log
completion, so the same checkpoint never counts twice and logs win.
``lastCheckpointSize`` annotates metric samples of the same scrape.

A job started again under the same id counts its checkpoints from 1: an id lower
than the last one with a newer timestamp (a lower id with an older one is a line
delivered twice) drops the pending checkpoints of the old run, which will never
finish, and restarts the id bookkeeping. The samples are kept: the trend is indexed
by sample, not by id, so the reset is neither a trend break nor an outlier. A
pending checkpoint without outcome after 2 x the timeout is forgotten (the job or
its log went away).

Transitions are evaluated at the event time they are due (pending deadline, end of
the hysteresis): each is a timer, which fires at its own time before any later
event, so a replay gives the same alerts as the live job. The incident resolves once
the trend is gone and no checkpoint is overdue for ``clear_for_s``, and not while a
checkpoint is in flight (a job whose every checkpoint hangs would otherwise page once
per expiry).

State per job (bounded, :class:`CheckpointCreepState`): at most ``window`` samples
``[time, id, duration, size, source]``, ``baseline_checkpoints / (window / 6)`` block
medians, 16 pending checkpoints and 8 savepoint ids, plus scalars and the alert
bookkeeping. Serialised
with the defaults (measured in ``tests/detectors/test_checkpoint_creep.py``): about
0.8 KB after 5 checkpoints, 3.5 KB once the window and the baseline are full, 5.2 KB
worst case (16-digit ids and sizes, 16 pending checkpoints); each window slot adds
about 50 B.
"""

from __future__ import annotations

import math
from statistics import median
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from detectors import words
from detectors.base import Detector, DetectorParams, DetectorState, Evidence, Profile, Story
from detectors.model import LAST_CHECKPOINT_DURATION, LAST_CHECKPOINT_SIZE, Alert, Event
from detectors.stats import for_humans, mann_kendall_z, median_interval, next_cadence, theil_sen
from detectors.story import job

_MAX_PENDING = 16  # concurrent checkpoints tracked per job (Flink's default allows 1)
_MAX_SAVEPOINTS = 8  # savepoint ids remembered, to ignore their completion
_EVIDENCE_CAP = 60  # items per evidence list (the newest samples)
_ABANDON_AFTER = 2.0  # x timeout: a pending checkpoint without outcome is forgotten
_MIN_FRESH_MS = 60_000  # logs count as live for at least this long after a completion
# Mann-Kendall z the newest samples must reach for "still growing" in the cadence test
# (one-sided p < 0.01); the ratio to the job's early level guards against jitter.
_CADENCE_Z = 2.33


class Sample(NamedTuple):
    """One completed checkpoint, saved as ``[time, id, duration, size, source]``."""

    time_ms: int
    checkpoint_id: int | None
    duration_ms: int
    size_bytes: int | None
    source: Literal["l", "m"]  # log line or metric


class CheckpointCreepParams(DetectorParams):
    """Thresholds of :class:`CheckpointCreep`."""

    window: int = Field(default=60, ge=12, le=200)
    """Completed checkpoints the trend is computed over (checkpoints)."""
    min_samples: int = Field(default=20, ge=8)
    """Completed checkpoints needed before the trend is judged (checkpoints)."""
    min_trend_z: float = Field(default=3.5, gt=0)
    """Mann-Kendall z score the upward trend over the window must reach (unitless; 3.5 is p < 0.0003
    one-sided)."""
    min_ratio: float = Field(default=2.0, ge=1.0)
    """Recent median over the baseline median that makes a creep (ratio; recent = newest sixth of
    the window, baseline = median of block medians over baseline_checkpoints)."""
    baseline_checkpoints: int = Field(default=360, ge=20, le=2000)
    """How far back the baseline median reaches (checkpoints)."""
    min_duration_ms: float = Field(default=30_000, ge=0)
    """Recent median duration below which the trend never fires (ms)."""
    checkpoint_timeout_s: float = Field(default=600, gt=0)
    """Flink's execution.checkpointing.timeout of the monitored jobs; logs do not carry it
    (seconds)."""
    max_intervals: float = Field(default=3.0, gt=1.0)
    """Recent median duration, in the job's own checkpoint intervals (learned from the spacing of
    its triggers), that is a creep while durations keep growing, whatever the absolute duration
    or the job's age (intervals)."""
    max_timeout_share: float = Field(default=0.5, gt=0, le=1.0)
    """Recent median duration, as a share of the checkpoint timeout (learned from the job's
    expiries, else checkpoint_timeout_s), that is a creep while durations keep growing
    (fraction)."""
    cadence_samples: int = Field(default=10, ge=6)
    """Completed checkpoints needed before the cadence test (max_intervals, max_timeout_share) is
    judged (checkpoints)."""
    pending_share: float = Field(default=0.5, gt=0, le=1.0)
    """A checkpoint pending longer than this share of checkpoint_timeout_s is overdue (fraction)."""


class CheckpointCreepState(DetectorState):
    """What :class:`CheckpointCreep` keeps per job.

    Attributes:
        samples: The newest ``window`` completed checkpoints, oldest first.
        history: Block medians of the durations (one per ``window / 6`` samples), for
            the baseline.
        since_block: Samples added since the last block median.
        pending: Checkpoints triggered and not finished: id → trigger time.
        savepoints: Ids of the latest savepoints (their completion is no sample).
        max_triggered: The latest trigger ``(id, time)`` of this run of the job.
        last_completed: The latest completion ``(id, time)`` of this run of the job.
        last_log_ms: Time of the latest completion log line (logs win over metrics).
        metric_duration: The latest ``lastCheckpointDuration`` value.
        metric_size: The latest ``lastCheckpointSize`` value and its time.
        restarts: New runs of the job seen (checkpoint ids starting again).
        trend_on: The trend (or cadence) test held at the latest sample.
        slope_ms: The Theil-Sen slope at the latest sample (ms per checkpoint), ``None``
            before there are enough samples to judge.
        clock_ms: The latest time the condition was evaluated at (never goes back).
        timeout_ms: The job's checkpoint timeout, learned from an expiry.
        last_trigger: The latest trigger ``(id, time)``, for the cadence.
        cadence_ms: The job's checkpoint interval, learned from its triggers.
    """

    samples: list[Sample] = []
    history: list[int] = []
    since_block: int = 0
    pending: dict[int, int] = {}
    savepoints: list[int] = []
    max_triggered: tuple[int, int] | None = None
    last_completed: tuple[int, int] | None = None
    last_log_ms: int | None = None
    metric_duration: float | None = None
    metric_size: tuple[float, int] | None = None
    restarts: int = 0
    trend_on: bool = False
    slope_ms: float | None = None
    clock_ms: int = 0
    timeout_ms: int | None = None
    last_trigger: tuple[int, int] | None = None
    cadence_ms: int | None = None


class PendingCheckpoint(BaseModel):
    """A checkpoint pending longer than ``pending_share`` of the timeout."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    checkpoint_id: int
    pending_for_s: int


class CreepFit(BaseModel):
    """The line the trend test fitted: Theil-Sen over the newest samples, per checkpoint.

    Attributes:
        samples: How many of the newest samples it was fitted over.
        level_ms: Where the line is at the newest sample (Sen's median intercept).
        slope_ms: Its slope, ms per checkpoint.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    samples: int
    level_ms: float
    slope_ms: float


class CheckpointCreepEvidence(Evidence):
    """What a ``checkpoint_creep`` alert shows.

    The statistics (from ``test`` on) are ``None`` before ``min(min_samples,
    cadence_samples)`` checkpoints completed.

    Attributes:
        signals: What holds: ``trend`` (durations creep), ``pending`` (a checkpoint hangs).
        durations_ms: Durations of the newest samples (at most 60), oldest first.
        sizes_bytes: Their checkpoint sizes, when known.
        checkpoint_ids: Their checkpoint ids (``None`` for metric samples).
        source: Where the samples come from: ``log``, ``metric`` or ``mixed``.
        checkpoint_timeout_s: The checkpoint timeout (learned from an expiry, else the
            configured one).
        restarts_seen: New runs of the job seen.
        pending_checkpoints: The overdue pending checkpoints.
        test: Which test found the creep: ``trend``, ``cadence`` or none.
        checkpoint_every_s: The job's checkpoint interval learned from its triggers.
        intervals: The recent median duration in checkpoint intervals.
        timeout_share: The recent median duration as a share of the timeout.
        samples: Samples in the window.
        baseline_checkpoints: Checkpoints the baseline's block medians cover.
        mann_kendall_z: Mann-Kendall z of the durations in the window.
        baseline_median_ms: The baseline median duration.
        recent_median_ms: The median duration of the newest sixth of the window.
        ratio: ``recent_median_ms / baseline_median_ms``.
        slope_ms_per_checkpoint: Theil-Sen slope over the newest half of the window.
        slope_ms_per_hour: The same slope per hour, at the samples' spacing.
        checkpoint_interval_s: Median spacing of the newest samples.
        projected_timeout_in_s: When the timeout is reached at that slope, linearly.
        times_ms: When the samples of ``durations_ms`` completed (the same length).
        fit: The fitted line, for a chart (with the statistics).
    """

    signals: list[Literal["trend", "pending"]]
    durations_ms: list[int]
    sizes_bytes: list[int | None]
    checkpoint_ids: list[int | None]
    source: Literal["log", "metric", "mixed"] | None
    checkpoint_timeout_s: float
    restarts_seen: int
    pending_checkpoints: list[PendingCheckpoint]
    test: Literal["trend", "cadence"] | None = None
    checkpoint_every_s: float | None = None
    intervals: float | None = None
    timeout_share: float | None = None
    samples: int | None = None
    baseline_checkpoints: int | None = None
    mann_kendall_z: float | None = None
    baseline_median_ms: int | None = None
    recent_median_ms: int | None = None
    ratio: float | None = None
    slope_ms_per_checkpoint: float | None = None
    slope_ms_per_hour: int | None = None
    checkpoint_interval_s: float | None = None
    projected_timeout_in_s: int | None = None
    times_ms: list[int] = []
    fit: CreepFit | None = None


def _headline(story: Story) -> str:
    """``checkpoint durations of job J creep towards the timeout``."""
    return f"checkpoint durations of {job(story.root)} creep towards the timeout"


class CheckpointCreep(Detector[CheckpointCreepParams, CheckpointCreepState]):
    """Fire when checkpoint durations trend up significantly, or a checkpoint hangs."""

    name = "checkpoint_creep"
    profile = Profile(
        runbook=(
            "Checkpoints are slowing towards the timeout. Check backpressure and busy/idle time of "
            "the slowest subtask, state size growth, and the checkpoint storage's latency; "
            "unaligned checkpoints or more parallelism buy time, a timeout raise only hides it."
        ),
        idle_words="no events from this job any more",
        causal_rank=3,
        headline=_headline,
    )
    signals = {
        "checkpoint_duration_last_seconds": "Duration of the job's latest completed checkpoint.",
        "checkpoint_duration_slope_seconds": (
            "Theil-Sen slope of checkpoint durations, seconds per checkpoint (newest half of "
            "the window; known once min_samples checkpoints completed)."
        ),
    }
    scope = "job"
    kinds = frozenset(
        {
            "checkpoint_triggered",
            "checkpoint_completed",
            "checkpoint_expired",
            "checkpoint_declined",
            "checkpoint_failed",
            "metric",
        }
    )
    metrics = frozenset({LAST_CHECKPOINT_DURATION, LAST_CHECKPOINT_SIZE})

    # --- entry points ------------------------------------------------------------

    def signal_values(self, state: CheckpointCreepState) -> dict[str, float]:  # noqa: D102
        out: dict[str, float] = {}
        if state.samples:
            out["checkpoint_duration_last_seconds"] = state.samples[-1].duration_ms / 1000
        if state.slope_ms is not None:
            out["checkpoint_duration_slope_seconds"] = state.slope_ms / 1000
        return out

    def new_state(self, event: Event, **fields: Any) -> CheckpointCreepState | None:
        """A job's first line: its clock starts at the event."""
        return super().new_state(event, clock_ms=event.time_ms, **fields)

    def on_event(self, state: CheckpointCreepState, event: Event) -> list[Alert]:
        """Fold one checkpoint line or metric sample in; fire or resolve when due."""
        state.host = event.host or state.host
        if event.kind == "checkpoint_triggered":
            self._on_triggered(state, event)
        elif event.kind == "checkpoint_completed":
            self._on_completed(state, event)
        elif event.kind in ("checkpoint_expired", "checkpoint_declined", "checkpoint_failed"):
            if event.checkpoint_id is not None:
                trig = state.pending.pop(event.checkpoint_id, None)
                if event.kind == "checkpoint_expired" and trig is not None:
                    # Flink expires a checkpoint when its timeout runs out: this job's timeout.
                    state.timeout_ms = max(event.time_ms - trig, 1)
        elif event.kind == "metric":
            self._on_metric(state, event)
        # A late event is folded in at the latest time already evaluated.
        return self._evaluate(state, max(state.clock_ms, event.time_ms))

    def on_timer(self, state: CheckpointCreepState, now_ms: int) -> list[Alert]:
        """Fire for a checkpoint pending too long, forget an abandoned one, finish a resolve."""
        return self._evaluate(state, now_ms)

    # --- events ------------------------------------------------------------------

    def _on_triggered(self, st: CheckpointCreepState, event: Event) -> None:
        cid = event.checkpoint_id
        if cid is None or not self._is_next(st, st.max_triggered, cid, event.time_ms):
            return
        st.max_triggered = (cid, event.time_ms)
        if "avepoint" in (event.reason or "").lower():
            st.savepoints = [*st.savepoints, cid][-_MAX_SAVEPOINTS:]
            return
        st.cadence_ms = next_cadence(st.last_trigger, st.cadence_ms, cid, event.time_ms)
        st.last_trigger = (cid, event.time_ms)
        st.pending[cid] = event.time_ms
        st.pending = dict(sorted(st.pending.items())[-_MAX_PENDING:])

    def _on_completed(self, st: CheckpointCreepState, event: Event) -> None:
        cid, duration = event.checkpoint_id, event.duration_ms
        if cid is not None:
            if cid in st.savepoints:
                # Savepoints are never subsumed and may complete after later checkpoints.
                st.savepoints = [x for x in st.savepoints if x != cid]
                return
            if not self._is_next(st, st.last_completed, cid, event.time_ms):
                return
            st.last_completed = (cid, event.time_ms)
            # Completing a checkpoint subsumes every older pending one.
            st.pending = {k: v for k, v in st.pending.items() if k > cid}
        if duration is None or duration < 0:
            return
        st.last_log_ms = event.time_ms
        self._add_sample(st, Sample(event.time_ms, cid, duration, event.size_bytes, "l"))

    def _is_next(
        self, st: CheckpointCreepState, last: tuple[int, int] | None, cid: int, time_ms: int
    ) -> bool:
        """Whether a trigger/completion id is new (after ``last``); ``False`` for a repeat.

        Within one run of a job, triggers and completions both come in increasing id
        order. A lower (or equal) id with a newer time is a new run of the job whose
        ids start again; with the same or an older time it is a line delivered twice.
        """
        if last is not None and cid <= last[0]:
            if time_ms <= last[1]:
                return False
            self._restarted(st)
        return True

    def _on_metric(self, st: CheckpointCreepState, event: Event) -> None:
        value = event.value
        if value is None or not math.isfinite(value):
            return
        if event.metric == LAST_CHECKPOINT_SIZE:
            st.metric_size = (value, event.time_ms)
            last = st.samples[-1] if st.samples else None
            if last is not None and last.source == "m" and last.time_ms == event.time_ms:
                st.samples[-1] = last._replace(size_bytes=int(value) if value >= 0 else None)
            return
        if event.metric != LAST_CHECKPOINT_DURATION:
            return
        previous, st.metric_duration = st.metric_duration, value
        # -1 before the first checkpoint; an unchanged value is the same checkpoint.
        if value < 0 or value == previous or self._logs_live(st, event.time_ms):
            return
        # The size scraped at the same time, if it came first; else it fills in later.
        size = st.metric_size
        same_scrape = size is not None and size[1] == event.time_ms and size[0] >= 0
        size_bytes = int(size[0]) if size is not None and same_scrape else None
        self._add_sample(st, Sample(event.time_ms, None, int(value), size_bytes, "m"))

    def _logs_live(self, st: CheckpointCreepState, time_ms: int) -> bool:
        if st.last_log_ms is None:
            return False
        interval = median_interval(st.samples)
        fresh = max(_MIN_FRESH_MS, 2 * interval) if interval else _MIN_FRESH_MS
        return time_ms - st.last_log_ms <= fresh

    def _restarted(self, st: CheckpointCreepState) -> None:
        # A new run of the job: its old pending checkpoints will never finish and its
        # ids start again. Samples stay; the trend is indexed by sample, not by id.
        st.restarts += 1
        st.pending = {}
        st.savepoints = []
        st.max_triggered = None
        st.last_completed = None

    def _add_sample(self, st: CheckpointCreepState, sample: Sample) -> None:
        st.samples = samples = [*st.samples, sample][-self.params.window :]
        block = self._block()
        st.since_block += 1
        if st.since_block >= block and len(samples) >= block:
            # One median per block of checkpoints: a long baseline in a few numbers.
            block_median = round(median(s.duration_ms for s in samples[-block:]))
            cap = max(1, self.params.baseline_checkpoints // block)
            st.history = [*st.history, block_median][-cap:]
            st.since_block = 0
        stats = self._trend(st)
        st.trend_on = stats is not None and stats["test"] is not None
        # Kept for the signal gauge: it changes only here, and the statistics cost 0.1 ms.
        st.slope_ms = None if stats is None else stats["slope_ms_per_checkpoint"]

    def _block(self) -> int:
        return max(5, self.params.window // 6)

    # --- time --------------------------------------------------------------------

    def next_deadline(self, state: CheckpointCreepState) -> int | None:
        """The next event time at which the condition or the lifecycle may change."""
        timeout_ms = self.params.checkpoint_timeout_s * 1000
        times = []
        for trig in state.pending.values():
            times.append(trig + int(self.params.pending_share * timeout_ms))
            times.append(trig + int(_ABANDON_AFTER * timeout_ms))
        resolve = state.resolve_deadline(self._clear_ms())
        if resolve is not None:
            times.append(resolve)
        return min((t for t in times if t > state.clock_ms), default=None)

    def _evaluate(self, st: CheckpointCreepState, at_ms: int) -> list[Alert]:
        st.clock_ms = max(st.clock_ms, at_ms)
        abandon_ms = _ABANDON_AFTER * self.params.checkpoint_timeout_s * 1000
        st.pending = {k: v for k, v in st.pending.items() if at_ms - v < abandon_ms}
        overdue = self._overdue(st, at_ms)
        condition = st.trend_on or bool(overdue)
        if st.firing and not condition and st.pending:
            # A checkpoint is in flight: whether it completes or hangs like the last one
            # decides the incident, so it does not resolve before that checkpoint ends
            # (a job whose every checkpoint expires would otherwise page once per expiry).
            if st.clear_since_ms is None:
                st.clear_since_ms = at_ms
            return []
        if condition and not st.firing:
            return [self._firing(st, at_ms, overdue)]
        if st.hysteresis(condition, at_ms, clear_for_ms=self._clear_ms()) == "resolved":
            why = "checkpoint durations no longer creeping and none overdue"
            return [self._close(st, at_ms, why)]
        return []

    def _overdue(self, st: CheckpointCreepState, at_ms: int) -> list[tuple[int, int]]:
        """Pending ``(checkpoint id, trigger time)`` older than share x timeout."""
        limit = self.params.pending_share * self.params.checkpoint_timeout_s * 1000
        return sorted((k, v) for k, v in st.pending.items() if at_ms - v >= limit)

    def _timeout_s(self, st: CheckpointCreepState) -> float:
        return st.timeout_ms / 1000 if st.timeout_ms else float(self.params.checkpoint_timeout_s)

    def _clear_ms(self) -> int:
        return int(self.params.clear_for_s * 1000)

    # --- statistics --------------------------------------------------------------

    def _trend(self, st: CheckpointCreepState) -> dict[str, Any] | None:
        """Robust trend statistics over the window, or ``None`` when too few samples.

        The keys are the statistics fields of :class:`CheckpointCreepEvidence`; ``test``
        names the test that finds a creep (``None``: no creep).
        """
        p = self.params
        samples = st.samples
        n = len(samples)
        if n < min(p.min_samples, p.cadence_samples):
            return None
        y = [float(s.duration_ms) for s in samples]
        k = max(5, n // 6)
        recent = median(y[-k:])
        history = st.history
        baseline = float(median(history)) if history else median(y[:k])
        ratio = recent / max(baseline, 1.0)
        z = mann_kendall_z(y)
        # The current slope: Theil-Sen over the newest half of the window, so an
        # accelerating creep is projected from where it is now, not from its start.
        # Indexed by sample, not by time: the trend is per checkpoint.
        m = min(n, max(10, n // 2))
        newest = y[-m:]
        slope = theil_sen(list(enumerate(newest)))
        # Where the fitted line is at the newest sample (Sen's median intercept).
        level = median(newest[i] - slope * i for i in range(m)) + slope * (m - 1)
        interval = median_interval(samples[-m:])
        per_hour = slope * 3_600_000 / interval if interval else None
        timeout_ms = float(st.timeout_ms or p.checkpoint_timeout_s * 1000)
        projected: float | None = None
        if slope > 0 and interval:
            projected = max(0.0, (timeout_ms - level) / slope * interval / 1000)
        cadence = st.cadence_ms
        trend = (
            n >= p.min_samples
            and z >= p.min_trend_z
            and slope > 0
            and ratio >= p.min_ratio
            and recent >= p.min_duration_ms
        )
        # Against the job's own pace: durations of several intervals (or a large share of
        # the timeout) that are still growing, on a job of any age.
        early = min(baseline, median(y[:k]))
        too_long = (cadence is not None and recent >= p.max_intervals * float(cadence)) or (
            recent >= p.max_timeout_share * timeout_ms
        )
        paced = (
            n >= p.cadence_samples
            and too_long
            and slope > 0
            and recent / max(early, 1.0) >= p.min_ratio
            and mann_kendall_z(y[-max(p.cadence_samples, n // 2) :]) >= _CADENCE_Z
        )
        return {
            "test": "trend" if trend else "cadence" if paced else None,
            "checkpoint_every_s": None if cadence is None else round(float(cadence) / 1000, 1),
            "intervals": None if not cadence else round(recent / float(cadence), 1),
            "timeout_share": round(recent / timeout_ms, 2),
            "samples": n,
            "baseline_checkpoints": len(history) * self._block(),
            "mann_kendall_z": round(z, 2),
            "baseline_median_ms": round(baseline),
            "recent_median_ms": round(recent),
            "ratio": round(ratio, 2),
            "slope_ms_per_checkpoint": round(slope, 1),
            "slope_ms_per_hour": None if per_hour is None else round(per_hour),
            "checkpoint_interval_s": None if not interval else round(interval / 1000, 1),
            "projected_timeout_in_s": None if projected is None else round(projected),
            "fit": CreepFit(samples=m, level_ms=round(level, 1), slope_ms=round(slope, 1)),
        }

    # --- alerts ------------------------------------------------------------------

    def _firing(
        self, st: CheckpointCreepState, at_ms: int, overdue: list[tuple[int, int]]
    ) -> Alert:
        who = st.job_name or st.job_id
        stats = self._trend(st)
        parts = []
        if stats and st.trend_on:
            text = (
                f"checkpoint duration of job {who} is creeping up: recent median "
                f"{_duration(stats['recent_median_ms'])}, {stats['ratio']:.1f}x its "
                f"baseline, +{_duration(stats['slope_ms_per_checkpoint'])} per checkpoint"
            )
            if stats["intervals"] is not None and stats["intervals"] >= 1:
                text += (
                    f", {stats['intervals']:.0f}x its checkpoint interval "
                    f"({stats['checkpoint_every_s']:g} s)"
                )
            if stats["timeout_share"] >= self.params.max_timeout_share:
                text += f", {stats['timeout_share']:.0%} of its {self._timeout_s(st):g} s timeout"
            if stats["projected_timeout_in_s"] is not None:
                text += (
                    f"; the {self._timeout_s(st):.0f} s timeout is reached in "
                    f"~{for_humans(stats['projected_timeout_in_s'])} at this rate"
                )
            parts.append(text)
        if overdue:
            cid, trig = overdue[0]
            parts.append(
                f"checkpoint {cid} of job {who} pending for {(at_ms - trig) / 60_000:.1f} min "
                f"without completing (timeout {self.params.checkpoint_timeout_s:.0f} s)"
            )
        return self.fire(st, at_ms, "; ".join(parts), self._evidence(st, at_ms, stats))

    def standing(self, state: CheckpointCreepState | None) -> str:
        """Samples against what the tests need, the trend and its projection; what resolves."""
        if state is None:
            return "no checkpoint seen for this job"
        p = self.params
        now = max(state.last_event_ms, state.clock_ms)
        n = len(state.samples)
        stats = self._trend(state)
        seen = f"{n} of {p.min_samples} checkpoints" if n < p.min_samples else f"{n} checkpoints"
        trend: list[str | None]
        if stats is None:
            last = state.samples[-1].duration_ms if state.samples else None
            latest = f", the latest took {_duration(last)}" if last is not None else ""
            need = min(p.min_samples, p.cadence_samples)
            trend = [f"{seen}{latest}; no trend judged before {need}"]
        else:
            slope, z = stats["slope_ms_per_checkpoint"], stats["mann_kendall_z"]
            sig = "significant" if z >= p.min_trend_z else "not significant"
            proj = stats["projected_timeout_in_s"]
            # Firing, the thresholds are behind it: the line keeps to where it is now.
            pages = "" if state.firing else f" (pages at {p.min_ratio:g}x and "
            pages += "" if state.firing else f"{_duration(p.min_duration_ms)})"
            judged = f" ({sig} at {p.min_trend_z:g})" if not state.firing else ""
            timeout_s = self._timeout_s(state)
            timeout = words.span(timeout_s) if timeout_s >= 1 else _duration(timeout_s * 1000)
            # The cadence test pages on the median's share of the timeout: say it when it holds.
            share = stats["timeout_share"] if stats["test"] == "cadence" else None
            pace = "" if state.firing else " at this pace"
            trend = [
                f"{seen}, median {_duration(stats['recent_median_ms'])} = "
                f"{stats['ratio']:.1f}x baseline{pages}"
                + (f", {share:.0%} of the timeout" if share is not None else ""),
                f"{'-' if slope <= -0.5 else '+'}{_duration(abs(slope))}/checkpoint, "
                f"z {z:.1f}{judged}",
                None if proj is None else f"{timeout} timeout in ~{words.span(proj)}{pace}",
            ]
        overdue = self._overdue(state, now)
        if overdue:
            cid, trig = overdue[0]
            trend.append(f"checkpoint {cid} pending for {words.span_ms(now - trig)} (overdue)")
        if not state.firing:
            return words.clause(*trend)
        clear_ms = self._clear_ms()
        resolve: str | None
        if state.trend_on or overdue:
            resolve = f"resolves {words.span_ms(clear_ms)} after it clears"
        elif state.pending:
            resolve = f"resolve waits for checkpoint {min(state.pending)} in flight"
        else:
            at = state.resolve_deadline(clear_ms)
            resolve = f"resolves at {words.at(at)}" if at is not None else None
        since = words.firing_since(state.incident_start_ms, now)
        return words.clause(since, *trend, resolve)

    def on_close(self, state: CheckpointCreepState, now_ms: int) -> list[Alert]:
        """No events any more: :meth:`_close`, saying ``idle_words``."""
        return [self._close(state, now_ms, self.profile.idle_words)] if state.firing else []

    def _close(self, state: CheckpointCreepState, time_ms: int, why: str) -> Alert:
        """The resolve, with the evidence as of its own time (not the detector's clock)."""
        evidence = self._evidence(state, time_ms, self._trend(state))
        return self.resolve(state, time_ms, f"{self.subject(state)}: {why}", evidence)

    def evidence(self, state: CheckpointCreepState) -> CheckpointCreepEvidence:
        """The samples, the trend and the overdue checkpoints, as of ``state.clock_ms``."""
        return self._evidence(state, state.clock_ms, self._trend(state))

    def _evidence(
        self, st: CheckpointCreepState, at_ms: int, stats: dict[str, Any] | None
    ) -> CheckpointCreepEvidence:
        samples = st.samples[-_EVIDENCE_CAP:]
        sources = {s.source for s in samples}
        overdue = self._overdue(st, at_ms)
        signals: list[Literal["trend", "pending"]] = ["trend"] if st.trend_on else []
        return CheckpointCreepEvidence(
            signals=[*signals, "pending"] if overdue else signals,
            durations_ms=[s.duration_ms for s in samples],
            sizes_bytes=[s.size_bytes for s in samples],
            checkpoint_ids=[s.checkpoint_id for s in samples],
            source=_SOURCES.get("".join(sorted(sources)), "mixed") if sources else None,
            checkpoint_timeout_s=self._timeout_s(st),
            restarts_seen=st.restarts,
            pending_checkpoints=[
                PendingCheckpoint(checkpoint_id=cid, pending_for_s=round((at_ms - trig) / 1000))
                for cid, trig in overdue[:_MAX_PENDING]
            ],
            **(stats or {}),
            times_ms=[s.time_ms for s in samples],
        )


_SOURCES: dict[str, Literal["log", "metric"]] = {"l": "log", "m": "metric"}


def _duration(ms: float) -> str:
    """``850 ms`` or ``12.4 s``: sub-second checkpoints are common on fast jobs."""
    return f"{ms:.0f} ms" if abs(ms) < 1000 else f"{ms / 1000:.1f} s"
