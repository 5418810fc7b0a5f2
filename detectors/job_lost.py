"""``job_lost``: a job seen RUNNING is gone without an end: its JobManager died with it.

Without high availability a JobManager that dies takes its jobs along: a new one (a
supervisor, Kubernetes, YARN) recovers no job graph, and the JobManager's log and metrics
simply stop (a real Flink 2.3 standalone cluster: ``tests/data/real/jm_killed_2_3``).
Nothing says ``FAILED``; silence is the symptom. The TaskManagers notice:
``The heartbeat of JobManager with id R timed out.``, their tasks of the job fail with
``Disconnect from JobManager responsible for J.`` caused by that timeout (the parser
gives those records kind ``jm_heartbeat_timeout`` and the job id), and once the slots time
out ``Remove job J from job leader monitoring.`` (``job_released``).

A job's records are kept from the first, and it is watched from its ``job_state`` line
to RUNNING (records read before that line, a metric topic read ahead of the log topic,
count as its latest once the watch starts) until a terminal state
(``CANCELED``, ``FINISHED``, ``FAILED``: those end the watch quietly; a FAILED job is
``restart_storm``'s to tell).

A job that was already running when flinkwatch first read it (a new install, a fresh
checkpoint) has no RUNNING line to read until it restarts, which may be months away. Its
JobManager says so itself: ``flink_jobmanager_job_uptime`` reads the milliseconds since the
job switched to RUNNING while it runs, 0 while it does not (created, restarting, failing,
cancelling) and -1 once it ended or was suspended (Flink's ``UpTimeGauge``, 1.4 to 2.x
alike; the 2.0 docs call it deprecated, 2.3 still exports it), though a job that ends is
rather gone from the next scrape. So the watch also starts from an uptime sample above 0,
as if the RUNNING line had been read at the sample's time less the uptime: when the
JobManager switched the job (its RUNNING line comes 5 to 65 ms later in
``tests/data/real``), so the "RUNNING since" that the alert and ``flinkwatch explain`` show
is the job's own, not when flinkwatch first looked. Two conditions:

- a line of the job from its JobManager's log (a checkpoint, restore or state line) has
  been read: only the log tells a job's end, its gauges just stop (a cancelled job's are
  gone from the next scrape on, ``tests/data/real/job_cancelled_2_3``), so a job known from
  its gauges alone would page at every cancel;
- no state line of the job is later than that instant: a RESTARTING line read after an
  older sample (the metric topic read behind the log topic) keeps the job unwatched until
  its RUNNING line or a sample of the new run.

A completed checkpoint alone does not start a watch: it says the job ran at that instant,
neither since when nor in which state it is now (a lost job counts as back only in
RUNNING); it does show that the JobManager's log is read. Flink 1.16+'s ``runningTime``
(``JobStatusMetrics``) reads as uptime does, but no shipping configuration here ships it,
so it is not read. As after a RUNNING line, silence counts only once the job's rhythm is
learned (below).

While watched, its *telemetry* is every record of it the JobManager writes or exports:
state, checkpoint and restore lines, and the per-job gauges ``flink_jobmanager_job_uptime``,
``…_numRestarts`` and ``…_lastCheckpointDuration`` (exported at every scrape, whatever the
job's checkpointing). The alert fires, once per incident, at the first of these deadlines
(event time, through :meth:`~detectors.base.Detector.next_deadline`):

- a TaskManager reported the job's JobManager lost (``jm_heartbeat_timeout`` with the job
  id) and no telemetry came for ``confirm_s`` after it, or for the job's usual rhythm if
  that is longer (a JobManager that is alive, or a standby that takes the job over, shows
  itself within that);
- a TaskManager released the job (``job_released``: also after a normal end, or when the
  job runs on elsewhere) and no telemetry came for as long, once the job has a rhythm;
- no telemetry at all for ``silence_s``.

Jobs whose telemetry is sparse are not paged for their own rhythm. The rhythm is learned
from the job's periodic series, each gauge and the checkpoint attempts (triggers, and
triggers that failed before getting an id): every deadline is at least ``gap_factor``
times the period (longest recent interval) of its liveliest series still alive (and at
most ``max_silence_s``), and silence counts only once one of them has shown its period: a
job that exports and logs nothing periodic cannot be told silent, and one just started or
restarted has not shown it yet (a RUNNING line and a restore line a few ms apart say
nothing of a 3-minute checkpoint interval). A series that stops while the others go on (a
pipeline that no longer ships it) pages once, like a lost JobManager would, and then no
longer counts.

The alert names what was last seen: the job's state and since when, its last record and
when, and the TaskManagers that reported the JobManager lost (their pod or host, from the
shipper: a TaskManager's own lines do not name it). It resolves when the
job's telemetry comes back with the job RUNNING (a standby JobManager recovered it) and
stays for ``clear_for_s``, or when the job reaches a terminal state; an entity idle for
``idle_ttl_s`` closes as the base does. Severity is critical by default.

State per job (bounded, :class:`JobLostState`): the latest state and record, the last
``_INTERVALS`` intervals of at most four series, one TaskManager report and at most
``max_reporters`` reporter names: under 1 KB.
"""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import Field, model_validator

from detectors import words
from detectors.base import (
    Detector,
    DetectorParams,
    DetectorState,
    Discard,
    Evidence,
    Member,
    Profile,
    Record,
    Story,
)
from detectors.model import LAST_CHECKPOINT_DURATION, Alert, Event, Severity
from detectors.story import job

#: States that end a job for good.
_TERMINAL = frozenset({"CANCELED", "FINISHED", "FAILED"})
#: The JobManager's per-job gauges read as the job's heartbeat: exported for every job at
#: every scrape, whatever its checkpointing (``lastCheckpointDuration`` reads -1 until a
#: checkpoint completes, and is on the bus for checkpoint_creep already).
UPTIME = "flink_jobmanager_job_uptime"
NUM_RESTARTS = "flink_jobmanager_job_numRestarts"
HEARTBEAT_METRICS = frozenset({UPTIME, NUM_RESTARTS, LAST_CHECKPOINT_DURATION})
#: TaskManager records about the job's JobManager: reports, not the job's own telemetry.
_REPORTS = frozenset({"jm_heartbeat_timeout", "job_released"})
#: Intervals kept per periodic series to learn the job's rhythm.
_INTERVALS = 4
#: The series of checkpoint attempts (a trigger, or a trigger that failed before an id).
_CHECKPOINTS = "checkpoints"
_MAX_LINE_CHARS = 300
_MAX_REPORTER_CHARS = 40  # a reporter's name in the standing line is cut to this

Why = Literal["jm_lost", "released", "silence"]
#: Each reason in words, for :meth:`JobLost.standing`.
_WHY: dict[str, str] = {
    "jm_lost": "JobManager reported lost",
    "released": "released by a TaskManager",
    "silence": "silence",
}


class JobLostParams(DetectorParams):
    """Thresholds of :class:`JobLost`."""

    severity: Severity = Field(default=Severity.CRITICAL)
    """Severity of its alerts: info, warning or critical (the job is gone)."""
    silence_s: float = Field(default=180, gt=0)
    """Page when a job seen RUNNING sends no log line or metric for this long (event-time seconds)
    without a terminal state; well above the metric scrape and checkpoint intervals."""
    confirm_s: float = Field(default=30, ge=0)
    """After a TaskManager reported the job's JobManager lost, page if the job shows no sign of
    life for this long (seconds); with HA, above the time a standby takes to recover a job."""
    gap_factor: float = Field(default=3, ge=1)
    """No deadline is shorter than this many times the period of the job's liveliest periodic
    telemetry (a gauge, its checkpoint attempts): sparse telemetry is not silence."""
    max_silence_s: float = Field(default=1800, gt=0)
    """The longest a job may stay silent before it pages, however sparse its telemetry
    (seconds)."""
    clear_for_s: float = Field(default=60, ge=0)
    """Resolve once the job has been back (telemetry, RUNNING) this long (event-time seconds)."""
    max_reporters: int = Field(default=5, ge=1)
    """TaskManagers named per incident as having reported the JobManager lost."""

    @model_validator(mode="after")
    def _deadlines_before_idle(self) -> Self:
        # A silent job must page before the base forgets it as idle.
        if not self.silence_s <= self.max_silence_s < self.idle_ttl_s:
            msg = (
                f"need silence_s ({self.silence_s:g}) <= max_silence_s "
                f"({self.max_silence_s:g}) < idle_ttl_s ({self.idle_ttl_s:g})"
            )
            raise ValueError(msg)
        return self


class LossReport(Record):
    """A TaskManager's word on the job's JobManager, since the job's last record.

    Attributes:
        t: When it was logged.
        kind: ``jm_heartbeat_timeout`` (the JobManager stopped answering) or
            ``job_released`` (the TaskManager let go of the job).
        reporter: The TaskManager (its id, else its host), when the record says.
        line: What it said.
    """

    t: int
    kind: str
    reporter: str | None = None
    line: str = ""


class Series(Record):
    """One periodic series of the job (a gauge, or its checkpoint attempts).

    Attributes:
        last: Its latest sample.
        intervals: Its last intervals (ms), outages of an incident left out.
    """

    last: int
    intervals: list[int] = []


class JobLostState(DetectorState):
    """What :class:`JobLost` keeps per job.

    Attributes:
        status: The job's latest state.
        status_ms: When it switched to it.
        running_ms: When it last switched to RUNNING (the watch starts there): its RUNNING
            line's time, or its uptime gauge's sample time less the uptime.
        up_since_ms: When its latest uptime sample above 0 says the job switched to
            RUNNING (``None`` once a later sample reads 0).
        logged: A line of the job from its JobManager's log was read.
        seen_ms: The job's latest record (a TaskManager's report is not one).
        seen_what: What that record was.
        series: The job's periodic series by name, for its rhythm.
        report: The first TaskManager report since ``seen_ms``.
        reporters: TaskManagers that reported the JobManager lost in the incident.
        why: Why the open incident fired.
    """

    status: str | None = None
    status_ms: int | None = None
    running_ms: int | None = None
    up_since_ms: int | None = None
    logged: bool = False
    seen_ms: int = 0
    seen_what: str = ""
    series: dict[str, Series] = {}
    report: LossReport | None = None
    reporters: list[str] = []
    why: Why | None = None


class JobLostEvidence(Evidence):
    """What a ``job_lost`` alert shows.

    Attributes:
        why: ``jm_lost`` (a TaskManager reported the JobManager gone), ``released`` (a
            TaskManager let go of the job) or ``silence`` (nothing from the job).
        last_state: The job's latest state.
        last_state_ms: When it switched to it.
        last_seen_ms: The job's latest record.
        last_seen: What that record was.
        silent_s: Seconds from that record to this transition.
        reported_ms: When a TaskManager reported the JobManager lost or released the job.
        report: What it said.
        reported_by: The TaskManagers that did (ids or hosts, when the records say).
        silence_s: The silence the deadline used (learned rhythm included), seconds.
    """

    why: Why | None
    last_state: str | None
    last_state_ms: int | None
    last_seen_ms: int
    last_seen: str
    silent_s: float
    reported_ms: int | None
    report: str | None
    reported_by: list[str]
    silence_s: float


def _headline(story: Story) -> str:
    """The page's own words: ``job X lost: TaskManager T lost its JobManager (…); …``."""
    return story.root.summary


def _aftermath(member: Member) -> str | None:
    """``job X lost with its JobManager``, after the line of what killed it."""
    return f"{job(member)} lost with its JobManager (no end state)"


class JobLost(Detector[JobLostParams, JobLostState]):
    """Fire when a RUNNING job's JobManager is lost, or the job falls silent without an end."""

    name = "job_lost"
    profile = Profile(
        runbook=(
            "The job's JobManager is gone and nothing ended the job: without HA a restarted "
            "JobManager recovers no job, so it is not running at all. Check the JobManager process "
            "(killed, OOM, node lost) and whether the job is listed (flink list / REST /jobs); "
            "resubmit it from its latest retained checkpoint or savepoint. With HA, a standby "
            "should have taken it over: check ZooKeeper/Kubernetes leader election."
        ),
        idle_words="no events about this job any more",
        causal_rank=2,
        headline=_headline,
        aftermath=_aftermath,
    )
    scope = "job"
    kinds = frozenset(
        {
            "job_state",
            "checkpoint_triggered",
            "checkpoint_completed",
            "checkpoint_expired",
            "checkpoint_failed",
            "job_restored",
            "jm_heartbeat_timeout",
            "job_released",
            "metric",
        }
    )
    metrics = HEARTBEAT_METRICS
    signals = {
        "job_lost": "1 while the job is considered lost, else 0.",
    }

    def signal_values(self, state: JobLostState) -> dict[str, float]:  # noqa: D102
        return {"job_lost": 1.0 if state.firing else 0.0}

    # Events -----------------------------------------------------------------------------

    def job_name_from(self, state: JobLostState, event: Event) -> str | None:
        """The base's, but a metric's job name does not replace the log's.

        The Prometheus reporter filters label values (``orders-enrichment`` becomes
        ``orders_enrichment``); the job's state line names it as Flink does.
        """
        if state.job_name and event.kind == "metric":
            return None
        return super().job_name_from(state, event)

    def new_state(self, event: Event, **fields: Any) -> JobLostState | None:
        """A job's own records are kept from the first; it is watched once seen RUNNING.

        Records read before the RUNNING line (a metric topic read ahead of the log topic,
        a batch later in arrival, earlier in event time) still count as the job's latest
        record once the watch starts; a TaskManager's report or an end opens nothing.
        """
        if event.kind in _REPORTS or (event.kind == "job_state" and event.to_state in _TERMINAL):
            return None
        return super().new_state(event, **fields)

    def on_event(self, state: JobLostState, event: Event) -> list[Alert] | Discard:
        """Follow the job's records and the TaskManagers' reports; forget a job that ended."""
        kind, t = event.kind, event.time_ms
        alerts: list[Alert] = []
        if kind in _REPORTS:
            self._on_report(state, event)
        else:
            ended, back = self._on_telemetry(state, event)
            if ended is not None:
                if state.firing:
                    alerts.append(self._close(state, t, f"the job ended ({ended})"))
                # A new run of the same job id starts a new watch (its RUNNING line, its uptime).
                return Discard(alerts)
            if back is not None:
                alerts.append(back)
        return alerts

    def on_timer(self, state: JobLostState, now_ms: int) -> list[Alert]:
        """Page at the first deadline that passed (a resolve needs the job's records)."""
        due = self._deadline(state)
        if due is None or now_ms < due[0]:
            return []
        return [self._fire(state, due[0], due[1])]

    def _on_telemetry(self, st: JobLostState, event: Event) -> tuple[str | None, Alert | None]:
        """A record of the job itself: the terminal state it reached, or its resolve."""
        t = event.time_ms
        if event.kind == "job_state" and event.to_state:
            st.status, st.status_ms = event.to_state, t
            if event.to_state == "RUNNING":
                st.running_ms = t
            if event.to_state in _TERMINAL:
                return event.to_state, None
        if event.kind == "metric" and event.metric == UPTIME and event.value is not None:
            if event.value == -1:
                return "uptime -1: no longer running", None  # the JobManager says it ended
            if event.value > 0:
                st.up_since_ms = t - int(event.value)
            elif st.up_since_ms is not None and t > st.up_since_ms:
                st.up_since_ms = None  # that run is over (restarting)
        elif event.kind != "metric":
            st.logged = True
        if st.running_ms is None:
            self._watch_from_uptime(st)
        # Its series learn from it whatever came before (each keeps to its own order).
        self._sample(st, event)
        if t < st.seen_ms:
            return None, None  # older than what we saw (another host's late record)
        if st.firing:
            back = self._back(st, t, silent_again=t - st.seen_ms >= self._threshold(st))
        else:
            back = None
            if st.report is not None and t >= st.report.t:
                # The job showed itself after a TaskManager's report: it was not lost.
                st.report = None
                st.reporters = []
        st.seen_ms, st.seen_what = t, _what(event)
        return None, back

    @staticmethod
    def _watch_from_uptime(st: JobLostState) -> None:
        """Watch a job no RUNNING line was read for, from its JobManager's uptime gauge."""
        since = st.up_since_ms
        if since is None or not st.logged:
            return  # not running by its gauge, or its end could not be seen
        if st.status_ms is not None and since < st.status_ms:
            return  # a later state line of its own (RESTARTING, CREATED) says otherwise
        st.status, st.status_ms, st.running_ms = "RUNNING", since, since

    @staticmethod
    def _sample(st: JobLostState, event: Event) -> None:
        """A sample of one of the job's periodic series: its interval is part of the rhythm.

        While the job counts as lost the series only move on: an outage is no interval.
        """
        if event.kind == "metric":
            key = event.metric
        elif event.kind == "checkpoint_triggered" or (
            event.kind == "checkpoint_failed" and event.checkpoint_id is None
        ):
            key = _CHECKPOINTS
        else:
            return
        if key is None:
            return
        t = event.time_ms
        series = st.series.get(key)
        if series is None:
            st.series[key] = Series(last=t)
        elif t > series.last:
            if not st.firing:
                series.intervals = [*series.intervals, t - series.last][-_INTERVALS:]
            series.last = t

    def _on_report(self, st: JobLostState, event: Event) -> None:
        if event.time_ms < st.seen_ms:
            return  # the job showed itself after it
        reporter = event.tm_id or event.host
        if reporter and reporter not in st.reporters:
            st.reporters = [*st.reporters, reporter][: self.params.max_reporters]
        if st.firing:
            if event.kind == "jm_heartbeat_timeout":
                st.clear_since_ms = None  # lost again before the resolve
            return
        report = st.report
        # A heartbeat timeout outranks a release: it says why.
        if report is None or (
            report.kind == "job_released" and event.kind == "jm_heartbeat_timeout"
        ):
            line = (event.reason or event.message or "").split("\n", 1)[0]
            st.report = LossReport(
                t=event.time_ms, kind=event.kind, reporter=reporter, line=line[:_MAX_LINE_CHARS]
            )

    def standing(self, state: JobLostState | None) -> str:
        """The job's last state and record, and when its silence pages or what resolves it."""
        if state is None or state.running_ms is None:
            return self._unwatched(state)
        status = (
            f"{state.status} since {words.at(state.status_ms)}"
            if state.status and state.status_ms is not None
            else "state unknown"
        )
        last = f"last record {words.at(state.seen_ms)} ({state.seen_what})"
        if state.firing:
            back, clear = state.clear_since_ms, words.span(self.params.clear_for_s)
            resolve = (
                f"back since {words.at(back)}, resolves after {clear}"
                if back is not None
                else f"resolves after {clear} back in RUNNING"
            )
            since = words.firing_since(state.incident_start_ms, state.last_event_ms)
            last += f", state {state.status}" if state.status else ""
            return words.clause(f"{since}: {_WHY[state.why or 'silence']}", last, resolve)
        report = state.report
        said = None
        if report is not None:
            # What it said stays in the page; the line keeps to who and when.
            last = f"last record {words.at(state.seen_ms)}"
            reporter = words.cut(report.reporter or "", _MAX_REPORTER_CHARS)
            who = f"TaskManager {reporter}" if reporter else "a TaskManager"
            what = "lost its JobManager" if report.kind == "jm_heartbeat_timeout" else "released it"
            said = f"{who} {what} at {words.at(report.t)}"
        due = self._deadline(state)
        watch = (
            "no periodic telemetry yet: its silence cannot be told"
            if due is None
            else f"pages at {words.at(due[0])} if nothing comes"
        )
        return words.clause(status, last, said, watch)

    @staticmethod
    def _unwatched(state: JobLostState | None) -> str:
        """Why a job is not watched: what it lacks to start the watch."""
        if state is not None and state.up_since_ms is not None and not state.logged:
            return (
                f"not watched: its uptime gauge says RUNNING since {words.at(state.up_since_ms)}, "
                "but no line of its JobManager's log was read (only the log tells its end)"
            )
        if state is not None and state.status and state.status_ms is not None:
            return (
                f"not watched: {state.status} since {words.at(state.status_ms)}, "
                "no switch to RUNNING seen after it"
            )
        return (
            "not watched: no switch to RUNNING seen for this job, nor an uptime gauge above 0 "
            "(or it ended)"
        )

    # Deadlines --------------------------------------------------------------------------

    def _rhythm_ms(self, st: JobLostState) -> int:
        """The shortest silence the job's rhythm allows: gap_factor x its liveliest period.

        A series' period is its longest recent interval. The liveliest series still alive
        at the job's latest record sets the rhythm (gauges every 15 s, not checkpoints every
        10 min: a JobManager that is alive keeps them all going); a series that stopped
        while the others went on (a pipeline that no longer ships it) does not.
        """
        factor = self.params.gap_factor
        periods = {k: max(s.intervals) for k, s in st.series.items() if s.intervals}
        live = [p for k, p in periods.items() if st.seen_ms - st.series[k].last <= factor * p]
        chosen = live or list(periods.values())
        return int(factor * min(chosen, default=0))

    def _threshold(self, st: JobLostState) -> int:
        """How long the job may be silent before it pages."""
        silence = max(int(self.params.silence_s * 1000), self._rhythm_ms(st))
        return min(silence, int(self.params.max_silence_s * 1000))

    def _deadline(self, st: JobLostState) -> tuple[int, Why] | None:
        """When and why the job counts as lost if nothing more comes."""
        if st.firing or st.running_ms is None:
            return None
        due: list[tuple[int, Why]] = []
        armed = any(s.intervals for s in st.series.values())  # a series showed its period
        if armed:
            due.append((st.seen_ms + self._threshold(st), "silence"))
        report = st.report
        if report is not None:
            confirm = int(self.params.confirm_s * 1000)
            # A JobManager that is alive shows itself within the job's usual rhythm.
            wait = min(max(confirm, self._rhythm_ms(st)), self._threshold(st))
            if report.kind == "jm_heartbeat_timeout":
                due.append((report.t + wait, "jm_lost"))
            elif armed:  # a release alone says little about a job with no rhythm
                due.append((report.t + wait, "released"))
        return min(due, default=None)

    def next_deadline(self, state: JobLostState) -> int | None:
        """The first deadline at which the job counts as lost."""
        due = self._deadline(state)
        return due[0] if due is not None else None

    # Incident ---------------------------------------------------------------------------

    def _fire(self, st: JobLostState, t: int, why: Why) -> Alert:
        st.why = why
        report = st.report
        silent = (t - st.seen_ms) / 1000
        last = f"nothing from it for {silent:.0f} s (last: {st.seen_what})"
        state = f"last state {st.status}" if st.status else "state unknown"
        if why == "jm_lost" and report is not None:
            who = f"TaskManager {report.reporter}" if report.reporter else "a TaskManager"
            head = f"{who} lost its JobManager ({report.line.rstrip('.')})"
        elif why == "released" and report is not None:
            who = f"TaskManager {report.reporter}" if report.reporter else "a TaskManager"
            head = f"{who} released it and the job went silent"
        else:
            head = "its JobManager went silent with no end state"
        summary = f"{self.subject(st)} lost: {head}; {last}, {state}"
        return self.fire(st, t, summary, self.evidence(st, t))

    def _back(self, st: JobLostState, t: int, *, silent_again: bool) -> Alert | None:
        """A record of a lost job: resolve once it has been RUNNING and reporting long enough.

        A job back in another state (RESTARTING under a new JobManager) is not back yet,
        and one that fell silent again starts over.
        """
        if st.status != "RUNNING":
            st.clear_since_ms = None
            return None
        if st.clear_since_ms is None or silent_again:
            st.clear_since_ms = t
        if t - st.clear_since_ms >= int(self.params.clear_for_s * 1000):
            return self._close(st, t, "the job is RUNNING and reporting again")
        return None

    def _close(self, state: JobLostState, time_ms: int, why: str) -> Alert:
        """The resolve; the next incident starts with no report and no reporters."""
        summary = f"{self.subject(state)}: {why}"
        alert = self.resolve(state, time_ms, summary, self.evidence(state))
        state.why = None
        state.report = None
        state.reporters = []
        return alert

    def evidence(self, state: JobLostState, t: int | None = None) -> JobLostEvidence:
        """What was last seen of the job, and who reported its JobManager lost."""
        t = state.last_event_ms if t is None else t
        report = state.report
        return JobLostEvidence(
            why=state.why,
            last_state=state.status,
            last_state_ms=state.status_ms,
            last_seen_ms=state.seen_ms,
            last_seen=state.seen_what,
            silent_s=round(max(0, t - state.seen_ms) / 1000, 3),
            reported_ms=report.t if report else None,
            report=report.line if report else None,
            reported_by=list(state.reporters),
            silence_s=self._threshold(state) / 1000,
        )


def _what(event: Event) -> str:
    """A record of the job, as the alert names it."""
    kind = event.kind
    if kind == "metric":
        return f"metric {event.metric} = {event.value:g}" if event.value is not None else "metric"
    if kind == "job_state":
        return f"job state {event.from_state} -> {event.to_state}"
    if kind.startswith("checkpoint_"):
        what = kind.removeprefix("checkpoint_")
        cp = event.checkpoint_id
        return f"checkpoint {cp} {what}" if cp is not None else f"a checkpoint {what}"
    if kind == "job_restored":
        return "job restored from a checkpoint"
    return kind
