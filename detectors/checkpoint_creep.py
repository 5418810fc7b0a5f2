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
the hysteresis), whichever of an event or the timer notices first, so a replay
gives the same alerts as the live job. The incident resolves once the trend is gone
and no checkpoint is overdue for ``clear_for_s``, and not while a checkpoint is in
flight (a job whose every checkpoint hangs would otherwise page once per expiry).

State per job (bounded): at most ``window`` samples ``[time, id, duration, size,
source]``, ``baseline_checkpoints / (window / 6)`` block medians, 16 pending
checkpoints and 8 savepoint ids, plus scalars and the alert bookkeeping. Serialised
with the defaults (measured in ``tests/detectors/test_checkpoint_creep.py``): about
0.7 KB after 5 checkpoints, 3.4 KB once the window and the baseline are full, 5.2 KB
worst case (16-digit ids and sizes, 16 pending checkpoints); each window slot adds
about 50 B.
"""

from __future__ import annotations

import math
from statistics import median
from typing import Any, ClassVar

from pydantic import Field

from detectors.base import (
    Alert,
    AlertStatus,
    Detector,
    DetectorParams,
    Event,
    Lifecycle,
    Scope,
    State,
    Step,
)
from detectors.stats import for_humans, learn_cadence, mann_kendall_z, median_interval

DURATION_METRIC = "flink_jobmanager_job_lastCheckpointDuration"
SIZE_METRIC = "flink_jobmanager_job_lastCheckpointSize"

_MAX_PENDING = 16  # concurrent checkpoints tracked per job (Flink's default allows 1)
_MAX_SAVEPOINTS = 8  # savepoint ids remembered, to ignore their completion
_EVIDENCE_CAP = 60  # items per evidence list (the newest samples)
_ABANDON_AFTER = 2.0  # x timeout: a pending checkpoint without outcome is forgotten
_MIN_FRESH_MS = 60_000  # logs count as live for at least this long after a completion
# Mann-Kendall z the newest samples must reach for "still growing" in the cadence test
# (one-sided p < 0.01); the ratio to the job's early level guards against jitter.
_CADENCE_Z = 2.33

# A sample: [time_ms, checkpoint_id | None, duration_ms, size_bytes | None, "l" | "m"].
_T, _ID, _DUR, _SIZE, _SRC = range(5)


class CheckpointCreepParams(DetectorParams):
    """Thresholds of :class:`CheckpointCreep`."""

    window: int = Field(
        default=60,
        ge=12,
        le=200,
        description="Completed checkpoints the trend is computed over (checkpoints).",
    )
    min_samples: int = Field(
        default=20,
        ge=8,
        description="Completed checkpoints needed before the trend is judged (checkpoints).",
    )
    min_trend_z: float = Field(
        default=3.5,
        gt=0,
        description=(
            "Mann-Kendall z score the upward trend over the window must reach (unitless; "
            "3.5 is p < 0.0003 one-sided)."
        ),
    )
    min_ratio: float = Field(
        default=2.0,
        ge=1.0,
        description=(
            "Recent median over the baseline median that makes a creep (ratio; recent = "
            "newest sixth of the window, baseline = median of block medians over "
            "baseline_checkpoints)."
        ),
    )
    baseline_checkpoints: int = Field(
        default=360,
        ge=20,
        le=2000,
        description="How far back the baseline median reaches (checkpoints).",
    )
    min_duration_ms: float = Field(
        default=30_000,
        ge=0,
        description="Recent median duration below which the trend never fires (ms).",
    )
    checkpoint_timeout_s: float = Field(
        default=600,
        gt=0,
        description=(
            "Flink's execution.checkpointing.timeout of the monitored jobs; logs do not "
            "carry it (seconds)."
        ),
    )
    max_intervals: float = Field(
        default=3.0,
        gt=1.0,
        description=(
            "Recent median duration, in the job's own checkpoint intervals (learned from the "
            "spacing of its triggers), that is a creep while durations keep growing, whatever "
            "the absolute duration or the job's age (intervals)."
        ),
    )
    max_timeout_share: float = Field(
        default=0.5,
        gt=0,
        le=1.0,
        description=(
            "Recent median duration, as a share of the checkpoint timeout (learned from the "
            "job's expiries, else checkpoint_timeout_s), that is a creep while durations keep "
            "growing (fraction)."
        ),
    )
    cadence_samples: int = Field(
        default=10,
        ge=6,
        description=(
            "Completed checkpoints needed before the cadence test (max_intervals, "
            "max_timeout_share) is judged (checkpoints)."
        ),
    )
    pending_share: float = Field(
        default=0.5,
        gt=0,
        le=1.0,
        description=(
            "A checkpoint pending longer than this share of checkpoint_timeout_s is "
            "overdue (fraction)."
        ),
    )


class CheckpointCreep(Detector[CheckpointCreepParams, Any]):
    """Fire when checkpoint durations trend up significantly, or a checkpoint hangs."""

    name: ClassVar[str] = "checkpoint_creep"
    runbook: ClassVar[str] = (
        "Checkpoints are slowing towards the timeout. Check backpressure and busy/idle time of "
        "the slowest subtask, state size growth, and the checkpoint storage's latency; unaligned "
        "checkpoints or more parallelism buy time, a timeout raise only hides it."
    )
    signals: ClassVar[dict[str, str]] = {
        "checkpoint_duration_last_seconds": "Duration of the job's latest completed checkpoint.",
        "checkpoint_duration_slope_seconds": (
            "Theil-Sen slope of checkpoint durations, seconds per checkpoint (newest half of "
            "the window; known once min_samples checkpoints completed)."
        ),
    }
    scope: ClassVar[Scope] = "job"
    kinds: ClassVar[frozenset[str]] = frozenset(
        {
            "checkpoint_triggered",
            "checkpoint_completed",
            "checkpoint_expired",
            "checkpoint_declined",
            "checkpoint_failed",
            "metric",
        }
    )
    metrics: ClassVar[frozenset[str]] = frozenset({DURATION_METRIC, SIZE_METRIC})
    params_model: ClassVar[type[DetectorParams]] = CheckpointCreepParams

    # --- entry points ------------------------------------------------------------

    def signal_values(self, state: State) -> dict[str, float]:  # noqa: D102
        out: dict[str, float] = {}
        if state["samples"]:
            out["checkpoint_duration_last_seconds"] = float(state["samples"][-1][_DUR]) / 1000
        stats = self._trend(state)
        if stats is not None:
            out["checkpoint_duration_slope_seconds"] = stats["slope_ms_per_checkpoint"] / 1000
        return out

    def on_event(self, state: State | None, event: Event, now_ms: int) -> Step:
        """Fold one checkpoint line or metric sample in; fire or resolve when due."""
        st = state or self._new_state(event)
        st["last_event_ms"] = max(int(st["last_event_ms"]), event.time_ms)
        st["job_name"] = event.job_name or st.get("job_name")
        st["host"] = event.host or st.get("host")
        at = max(int(st["clock_ms"]), event.time_ms)
        # Deadlines that passed before this event are decided at their own time first.
        alerts = self._advance(st, at)
        if event.kind == "checkpoint_triggered":
            self._on_triggered(st, event)
        elif event.kind == "checkpoint_completed":
            self._on_completed(st, event)
        elif event.kind in ("checkpoint_expired", "checkpoint_declined", "checkpoint_failed"):
            if event.checkpoint_id is not None:
                trig = st["pending"].pop(str(event.checkpoint_id), None)
                if event.kind == "checkpoint_expired" and trig is not None:
                    # Flink expires a checkpoint when its timeout runs out: this job's timeout.
                    st["timeout_ms"] = max(event.time_ms - int(trig), 1)
        elif event.kind == "metric":
            self._on_metric(st, event)
        alerts.extend(self._evaluate(st, at))
        return Step(state=st, alerts=tuple(alerts), timer_ms=self._next_timer(st))

    def on_timer(self, state: State, now_ms: int) -> Step:
        """Fire for a checkpoint pending too long, finish a resolve, evict an idle job."""
        st = dict(state)
        idle_at = int(st["last_event_ms"]) + int(self.params.idle_ttl_s * 1000)
        alerts = self._advance(st, min(now_ms, idle_at))
        if now_ms >= idle_at:
            if st.get("firing"):
                alerts.append(self._resolved(st, idle_at, "no events from this job any more"))
            return Step(state=None, alerts=tuple(alerts))
        return Step(state=st, alerts=tuple(alerts), timer_ms=self._next_timer(st))

    # --- events ------------------------------------------------------------------

    def _new_state(self, event: Event) -> State:
        return {
            **self.identity(event),
            "samples": [],
            "history": [],
            "since_block": 0,
            "pending": {},
            "savepoints": [],
            "max_triggered": None,
            "last_completed": None,
            "last_log_ms": None,
            "metric_duration": None,
            "metric_size": None,
            "restarts": 0,
            "trend_on": False,
            "clock_ms": event.time_ms,
            "last_event_ms": event.time_ms,
            "firing": False,
            "incident_start_ms": None,
            "clear_since_ms": None,
        }

    def _on_triggered(self, st: State, event: Event) -> None:
        cid = event.checkpoint_id
        if cid is None or not self._next_id(st, "max_triggered", cid, event.time_ms):
            return
        if "avepoint" in (event.reason or "").lower():
            st["savepoints"] = [*st["savepoints"], cid][-_MAX_SAVEPOINTS:]
            return
        learn_cadence(st, cid, event.time_ms)
        pending = {int(k): int(v) for k, v in st["pending"].items()}
        pending[cid] = event.time_ms
        kept = sorted(pending.items())[-_MAX_PENDING:]
        st["pending"] = {str(k): v for k, v in kept}

    def _on_completed(self, st: State, event: Event) -> None:
        cid, duration = event.checkpoint_id, event.duration_ms
        if cid is not None:
            if cid in st["savepoints"]:
                # Savepoints are never subsumed and may complete after later checkpoints.
                st["savepoints"] = [x for x in st["savepoints"] if x != cid]
                return
            if not self._next_id(st, "last_completed", cid, event.time_ms):
                return
            # Completing a checkpoint subsumes every older pending one.
            st["pending"] = {k: v for k, v in st["pending"].items() if int(k) > cid}
        if duration is None or duration < 0:
            return
        st["last_log_ms"] = event.time_ms
        self._add_sample(st, [event.time_ms, cid, duration, event.size_bytes, "l"])

    def _next_id(self, st: State, key: str, cid: int, time_ms: int) -> bool:
        """Record a trigger/completion id; ``False`` for a repeated or stale line.

        Within one run of a job, triggers and completions both come in increasing id
        order. A lower (or equal) id with a newer time is a new run of the job whose
        ids start again; with the same or an older time it is a line delivered twice.
        """
        last = st[key]
        if last is not None:
            last_id, last_ms = int(last[0]), int(last[1])
            if cid <= last_id:
                if time_ms <= last_ms:
                    return False
                self._restarted(st)
        st[key] = [cid, time_ms]
        return True

    def _on_metric(self, st: State, event: Event) -> None:
        value = event.value
        if value is None or not math.isfinite(value):
            return
        if event.metric == SIZE_METRIC:
            st["metric_size"] = [value, event.time_ms]
            samples = st["samples"]
            if samples and samples[-1][_SRC] == "m" and samples[-1][_T] == event.time_ms:
                samples[-1][_SIZE] = int(value) if value >= 0 else None
            return
        if event.metric != DURATION_METRIC:
            return
        previous, st["metric_duration"] = st["metric_duration"], value
        # -1 before the first checkpoint; an unchanged value is the same checkpoint.
        if value < 0 or value == previous or self._logs_live(st, event.time_ms):
            return
        # The size scraped at the same time, if it came first; else it fills in later.
        size = st["metric_size"]
        same_scrape = size is not None and size[1] == event.time_ms and size[0] >= 0
        size_bytes = int(size[0]) if same_scrape else None
        self._add_sample(st, [event.time_ms, None, int(value), size_bytes, "m"])

    def _logs_live(self, st: State, time_ms: int) -> bool:
        last = st["last_log_ms"]
        if last is None:
            return False
        interval = median_interval(st["samples"])
        fresh = max(_MIN_FRESH_MS, 2 * interval) if interval else _MIN_FRESH_MS
        return time_ms - int(last) <= fresh

    def _restarted(self, st: State) -> None:
        # A new run of the job: its old pending checkpoints will never finish and its
        # ids start again. Samples stay; the trend is indexed by sample, not by id.
        st["restarts"] = int(st["restarts"]) + 1
        st["pending"] = {}
        st["savepoints"] = []
        st["max_triggered"] = None
        st["last_completed"] = None

    def _add_sample(self, st: State, sample: list[Any]) -> None:
        st["samples"] = samples = [*st["samples"], sample][-self.params.window :]
        block = self._block()
        st["since_block"] = int(st["since_block"]) + 1
        if st["since_block"] >= block and len(samples) >= block:
            # One median per block of checkpoints: a long baseline in a few numbers.
            block_median = round(median(s[_DUR] for s in samples[-block:]))
            cap = max(1, self.params.baseline_checkpoints // block)
            st["history"] = [*st["history"], block_median][-cap:]
            st["since_block"] = 0
        stats = self._trend(st)
        st["trend_on"] = bool(stats and stats["creeping"])

    def _block(self) -> int:
        return max(5, self.params.window // 6)

    # --- time --------------------------------------------------------------------

    def _due_times(self, st: State) -> list[int]:
        """Future event times at which the condition or the lifecycle may change."""
        timeout_ms = self.params.checkpoint_timeout_s * 1000
        times = []
        for trig in st["pending"].values():
            times.append(int(trig) + int(self.params.pending_share * timeout_ms))
            times.append(int(trig) + int(_ABANDON_AFTER * timeout_ms))
        resolve = Lifecycle.resolve_deadline(st, self._clear_ms())
        if resolve is not None:
            times.append(resolve)
        clock = int(st["clock_ms"])
        return sorted(t for t in times if t > clock)

    def _advance(self, st: State, until_ms: int) -> list[Alert]:
        """Evaluate at every due time up to ``until_ms``, in order."""
        alerts: list[Alert] = []
        while True:
            due = [t for t in self._due_times(st) if t <= until_ms]
            if not due:
                break
            alerts.extend(self._evaluate(st, due[0]))
        st["clock_ms"] = max(int(st["clock_ms"]), until_ms)
        return alerts

    def _evaluate(self, st: State, at_ms: int) -> list[Alert]:
        st["clock_ms"] = max(int(st["clock_ms"]), at_ms)
        abandon_ms = _ABANDON_AFTER * self.params.checkpoint_timeout_s * 1000
        st["pending"] = {k: v for k, v in st["pending"].items() if at_ms - int(v) < abandon_ms}
        overdue = self._overdue(st, at_ms)
        condition = bool(st["trend_on"]) or bool(overdue)
        if st.get("firing") and not condition and st["pending"]:
            # A checkpoint is in flight: whether it completes or hangs like the last one
            # decides the incident, so it does not resolve before that checkpoint ends
            # (a job whose every checkpoint expires would otherwise page once per expiry).
            if st.get("clear_since_ms") is None:
                st["clear_since_ms"] = at_ms
            return []
        transition = Lifecycle.update(st, condition, at_ms, clear_for_ms=self._clear_ms())
        if transition == "firing":
            return [self._firing(st, at_ms, overdue)]
        if transition == "resolved":
            return [
                self._resolved(
                    st, at_ms, "checkpoint durations no longer creeping and none overdue"
                )
            ]
        return []

    def _overdue(self, st: State, at_ms: int) -> list[tuple[int, int]]:
        """Pending ``(checkpoint id, trigger time)`` older than share x timeout."""
        limit = self.params.pending_share * self.params.checkpoint_timeout_s * 1000
        return sorted((int(k), int(v)) for k, v in st["pending"].items() if at_ms - int(v) >= limit)

    def _next_timer(self, st: State) -> int:
        idle_at = int(st["last_event_ms"]) + int(self.params.idle_ttl_s * 1000)
        return min([idle_at, *self._due_times(st)])

    def _timeout_s(self, st: State) -> float:
        learned = st.get("timeout_ms")
        return float(learned) / 1000 if learned else self.params.checkpoint_timeout_s

    def _clear_ms(self) -> int:
        return int(self.params.clear_for_s * 1000)

    # --- statistics --------------------------------------------------------------

    def _trend(self, st: State) -> dict[str, Any] | None:
        """Robust trend statistics over the window, or ``None`` when too few samples."""
        p = self.params
        samples = st["samples"]
        n = len(samples)
        if n < min(p.min_samples, p.cadence_samples):
            return None
        y = [float(s[_DUR]) for s in samples]
        k = max(5, n // 6)
        recent = median(y[-k:])
        history = st["history"]
        baseline = float(median(history)) if history else median(y[:k])
        ratio = recent / max(baseline, 1.0)
        z = mann_kendall_z(y)
        # The current slope: Theil-Sen over the newest half of the window, so an
        # accelerating creep is projected from where it is now, not from its start.
        m = min(n, max(10, n // 2))
        newest = y[-m:]
        slope = median((newest[j] - newest[i]) / (j - i) for i in range(m) for j in range(i + 1, m))
        level = median(newest[i] - slope * i for i in range(m)) + slope * (m - 1)
        interval = median_interval(samples[-m:])
        per_hour = slope * 3_600_000 / interval if interval else None
        timeout_ms = float(st.get("timeout_ms") or p.checkpoint_timeout_s * 1000)
        projected: float | None = None
        if slope > 0 and interval:
            projected = max(0.0, (timeout_ms - level) / slope * interval / 1000)
        cadence = st.get("cadence_ms")
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
            "creeping": trend or paced,
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
        }

    # --- alerts ------------------------------------------------------------------

    def _firing(self, st: State, at_ms: int, overdue: list[tuple[int, int]]) -> Alert:
        who = st.get("job_name") or st["job_id"]
        stats = self._trend(st)
        parts = []
        if stats and st["trend_on"]:
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
        return self.alert(
            state=st,
            status=AlertStatus.FIRING,
            event_time_ms=at_ms,
            summary="; ".join(parts),
            evidence=self._evidence(st, at_ms, overdue, stats),
        )

    def _resolved(self, st: State, at_ms: int, why: str) -> Alert:
        return self.resolve(
            st,
            at_ms,
            f"job {st.get('job_name') or st['job_id']}: {why}",
            self._evidence(st, at_ms, self._overdue(st, at_ms), self._trend(st)),
        )

    def _evidence(
        self,
        st: State,
        at_ms: int,
        overdue: list[tuple[int, int]],
        stats: dict[str, Any] | None,
    ) -> dict[str, Any]:
        samples = st["samples"][-_EVIDENCE_CAP:]
        sources = {s[_SRC] for s in samples}
        evidence: dict[str, Any] = {
            "signals": [
                *(["trend"] if st["trend_on"] else []),
                *(["pending"] if overdue else []),
            ],
            "durations_ms": [s[_DUR] for s in samples],
            "sizes_bytes": [s[_SIZE] for s in samples],
            "checkpoint_ids": [s[_ID] for s in samples],
            "source": {"l": "log", "m": "metric"}.get("".join(sorted(sources)), "mixed")
            if sources
            else None,
            "checkpoint_timeout_s": self._timeout_s(st),
            "restarts_seen": st["restarts"],
            "pending_checkpoints": [
                {"checkpoint_id": cid, "pending_for_s": round((at_ms - trig) / 1000)}
                for cid, trig in overdue[:_MAX_PENDING]
            ],
        }
        keys = (
            "test",
            "checkpoint_every_s",
            "intervals",
            "timeout_share",
            "samples",
            "baseline_checkpoints",
            "mann_kendall_z",
            "baseline_median_ms",
            "recent_median_ms",
            "ratio",
            "slope_ms_per_checkpoint",
            "slope_ms_per_hour",
            "checkpoint_interval_s",
            "projected_timeout_in_s",
        )
        for key in keys:
            evidence[key] = stats.get(key) if stats else None
        return evidence


def _duration(ms: float) -> str:
    """``850 ms`` or ``12.4 s``: sub-second checkpoints are common on fast jobs."""
    return f"{ms:.0f} ms" if abs(ms) < 1000 else f"{ms / 1000:.1f} s"
