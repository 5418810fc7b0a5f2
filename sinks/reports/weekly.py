"""The weekly picture (``flinkwatch report``): incidents, time to resolve, false alarms.

Pure computation over alert transitions, read from the alert ledger and the alert file by
:mod:`sinks.reports.weekly_input`; no clock is read (``now_ms`` is given). The rules:

* An incident is the ledger's (correlated alerts share one id). In the alert file it is
  the record's ``incident_id`` when it has one, else its ``alert_id``: the alert that opens
  an incident lends it its id, and its firing, alone then, carries none. Both sources
  give the same incidents.
* An incident belongs to the window it opened in (its earliest firing is in
  ``[since, now]``), whatever came before its other members or after.
* Its detector is its root's: of its alerts, the one whose detector comes first in the
  causal order (each detector's ``profile.causal_rank``: a leak before the dead JVM before the
  restarts), then the earliest: the correlator's own rule.
* It is resolved once every one of its alerts has resolved; time to resolve runs from
  its first firing to the last resolve. An incident still open is counted as open and
  never enters the percentiles. Percentiles are nearest-rank: each is an observed value.
* Noise: an incident someone pressed "Resolve as noise" on in Slack, counted against its
  root detector (the false-alarm rate is noise / incidents). Only the ledger knows: from
  the alert file alone, noise is ``None``, not 0.
* Per job: an incident counts once for every job one of its alerts names, so a
  TaskManager lost under three jobs counts for each (the per-job counts may add up to
  more than the incidents).

Example:
    >>> report = build_report(records, since_ms=s, now_ms=n, noise=None)  # doctest: +SKIP
    >>> report.totals.incidents, [d.detector for d in report.detectors]  # doctest: +SKIP
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from conf.silences import parse_duration
from detectors import Alert, AlertStatus, Severity
from detectors.correlation import causal_rank
from sinks.files import iso_utc

#: The version of the JSON layout; a change that breaks a reader bumps it.
SCHEMA = 1
#: Jobs the "noisiest jobs" chart and summary show.
TOP_JOBS = 10
_DAY_MS = 86_400_000


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Window(_Frozen):
    """The report's window: incidents that opened from ``since`` to ``until`` (ISO UTC)."""

    since: str
    until: str


class Sources(_Frozen):
    """Where the transitions came from.

    Attributes:
        ledger: The ledger file read, if one was.
        alert_files: The alert files read.
        read: Transitions read from all of them, before the window.
        duplicates: Transitions found in more than one source, counted once.
        unreadable_lines: Alert-file lines that were not an alert (a line cut by a crash).
    """

    ledger: str | None = None
    alert_files: tuple[str, ...] = ()
    read: int = 0
    duplicates: int = 0
    unreadable_lines: int = 0


class TimeToResolve(_Frozen):
    """Time to resolve of the resolved incidents, in seconds (nearest-rank percentiles)."""

    resolved: int
    p50_s: float
    p90_s: float
    max_s: float


class NoisePress(_Frozen):
    """A "Resolve as noise" press: the Slack user id, and when (ISO UTC)."""

    by: str
    at: str


class JobRef(_Frozen):
    """A job an incident names: its id and its name (either may be unknown)."""

    job_id: str | None = None
    job_name: str | None = None

    @property
    def label(self) -> str:
        """``name (id)``, or what is known of the two."""
        if self.job_name and self.job_id:
            return f"{self.job_name} ({self.job_id})"
        return self.job_name or self.job_id or "?"


class Incident(_Frozen):
    """One incident of the window.

    Attributes:
        incident_id: The ledger's incident id (the alert that opened it).
        detector: Its root's detector.
        severity: The highest severity any of its alerts reached.
        opened: Its first firing (ISO UTC).
        resolved: When its last alert resolved; ``None`` while one is open.
        ttr_s: ``resolved - opened`` in seconds; ``None`` while open.
        alerts: How many alerts it took.
        detectors: The detectors of its alerts, in the order they joined.
        jobs: The jobs its alerts name.
        summary: Its root's firing summary (from the logs: untrusted text).
        noise: The "Resolve as noise" press, if any.
    """

    incident_id: str
    detector: str
    severity: Severity
    opened: str
    resolved: str | None
    ttr_s: float | None
    alerts: int
    detectors: tuple[str, ...]
    jobs: tuple[JobRef, ...]
    summary: str
    noise: NoisePress | None = None


class DetectorStats(_Frozen):
    """One root detector's incidents.

    Attributes:
        detector: The detector.
        incidents: Incidents it is the root of.
        open: Of those, still open.
        alerts: Alerts of its own in any incident of the window (root or not).
        ttr: Time to resolve of its resolved incidents (``None``: none resolved).
        noise: Its incidents resolved as noise (``None``: not known, no ledger read).
        false_alarm_rate: ``noise / incidents`` (``None`` as ``noise``).
    """

    detector: str
    incidents: int
    open: int
    alerts: int
    ttr: TimeToResolve | None
    noise: int | None
    false_alarm_rate: float | None


class JobStats(_Frozen):
    """One job's incidents: how many, how many open or noise, and by which root detector."""

    job: JobRef
    incidents: int
    open: int
    noise: int | None
    detectors: dict[str, int]


class Day(_Frozen):
    """Incidents that opened on one UTC day, by root detector."""

    date: str
    incidents: int
    detectors: dict[str, int]


class Totals(_Frozen):
    """The window in numbers (fields as in :class:`DetectorStats`; ``transitions``: theirs)."""

    incidents: int
    resolved: int
    open: int
    alerts: int
    transitions: int
    jobs: int
    ttr: TimeToResolve | None
    noise: int | None
    false_alarm_rate: float | None


class Report(_Frozen):
    """The report: what ``report.json`` holds (``"schema": 1``) and ``report.html`` shows.

    Attributes:
        schema_version: :data:`SCHEMA` (``schema`` in JSON).
        window: The window.
        sources: What was read.
        totals: The window in numbers.
        detectors: Per root detector, most incidents first.
        days: Every UTC day of the window, oldest first, zero days too.
        jobs: Per job, noisiest first (most incidents, then most noise).
        incidents: Every incident, in the order they opened.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    schema_version: int = Field(default=SCHEMA, alias="schema")
    window: Window
    sources: Sources
    totals: Totals
    detectors: tuple[DetectorStats, ...]
    days: tuple[Day, ...]
    jobs: tuple[JobStats, ...]
    incidents: tuple[Incident, ...]

    @property
    def noisiest(self) -> tuple[JobStats, ...]:
        """The :data:`TOP_JOBS` noisiest jobs."""
        return self.jobs[:TOP_JOBS]

    @property
    def noise_known(self) -> bool:
        """Whether presses of "Resolve as noise" were read (the ledger was)."""
        return self.totals.noise is not None

    def to_json(self) -> str:
        """The JSON document (``report.json``), keys in a fixed order."""
        return self.model_dump_json(by_alias=True, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Report:
        """Read back what :meth:`to_json` wrote."""
        return cls.model_validate_json(text)


@dataclass(frozen=True, slots=True)
class Record:
    """One alert transition and the incident it belongs to, from either source."""

    alert: Alert
    incident_id: str


#: The "Resolve as noise" press on an incident (by id), if any.
NoiseLookup = Callable[[str], NoisePress | None]


def build_report(
    records: Iterable[Record],
    *,
    since_ms: int,
    now_ms: int,
    noise: NoiseLookup | None,
    sources: Sources | None = None,
) -> Report:
    """The report of the incidents that opened from ``since_ms`` to ``now_ms``.

    Args:
        records: Every transition known (earlier ones too: an incident that opened
            before the window and took a member in it is not the window's), deduplicated.
        since_ms: The window's start (epoch ms).
        now_ms: Now: the window's end; later transitions are ignored.
        noise: Looks up an incident's noise press; ``None``: noise is not known.
        sources: What was read, reported as given.
    """
    by_incident: defaultdict[str, list[Alert]] = defaultdict(list)
    for r in records:
        if r.alert.event_time_ms <= now_ms:
            by_incident[r.incident_id].append(r.alert)
    incidents: list[Incident] = []
    transitions = 0
    for iid, alerts in by_incident.items():
        opened = min(
            (a.event_time_ms for a in alerts if a.status is AlertStatus.FIRING), default=None
        )
        if opened is None or not since_ms <= opened <= now_ms:
            continue
        press = noise(iid) if noise is not None else None
        incidents.append(_incident(iid, alerts, opened, press))
        transitions += len(alerts)
    incidents.sort(key=lambda i: (i.opened, i.incident_id))
    known = noise is not None
    jobs = _jobs(incidents, known)
    return Report(
        window=Window(since=iso_utc(since_ms), until=iso_utc(now_ms)),
        sources=sources or Sources(),
        totals=Totals(
            incidents=len(incidents),
            resolved=sum(1 for i in incidents if i.ttr_s is not None),
            open=sum(1 for i in incidents if i.ttr_s is None),
            alerts=sum(i.alerts for i in incidents),
            transitions=transitions,
            jobs=len(jobs),
            ttr=time_to_resolve([i.ttr_s for i in incidents if i.ttr_s is not None]),
            noise=sum(1 for i in incidents if i.noise) if known else None,
            false_alarm_rate=_rate(incidents) if known else None,
        ),
        detectors=_detectors(incidents, known),
        days=_days(incidents, since_ms, now_ms),
        jobs=jobs,
        incidents=tuple(incidents),
    )


def _incident(iid: str, alerts: list[Alert], opened_ms: int, press: NoisePress | None) -> Incident:
    alerts = sorted(alerts, key=lambda a: a.event_time_ms)
    first: dict[str, Alert] = {}
    resolved: dict[str, int] = {}
    jobs: dict[str, JobRef] = {}
    for a in alerts:
        first.setdefault(a.alert_id, a)
        if a.status is AlertStatus.RESOLVED:
            resolved[a.alert_id] = a.event_time_ms
        key = a.job_id or (f"name:{a.job_name}" if a.job_name else None)
        if key is not None:
            # A resolve may not name what the firing did: keep what is known.
            was = jobs.get(key, JobRef())
            jobs[key] = JobRef(job_id=a.job_id or was.job_id, job_name=a.job_name or was.job_name)
    root = min(first.values(), key=lambda a: (causal_rank(a.detector), a.event_time_ms, a.alert_id))
    done_ms = max(resolved.values()) if resolved.keys() >= first.keys() else None
    return Incident(
        incident_id=iid,
        detector=root.detector,
        severity=max((a.severity for a in alerts), key=lambda s: s.rank),
        opened=iso_utc(opened_ms),
        resolved=iso_utc(done_ms) if done_ms is not None else None,
        ttr_s=(done_ms - opened_ms) / 1000 if done_ms is not None else None,
        alerts=len(first),
        detectors=tuple(dict.fromkeys(a.detector for a in first.values())),
        jobs=tuple(jobs.values()),
        summary=root.summary,
        noise=press,
    )


def nearest_rank(values: Sequence[float], pct: float) -> float:
    """The ``pct`` percentile by nearest rank: the smallest value with ``pct`` % at or below it.

    Raises:
        ValueError: no values.
    """
    if not values:
        msg = "no values"
        raise ValueError(msg)
    ordered = sorted(values)
    return ordered[max(1, math.ceil(pct / 100 * len(ordered))) - 1]


def time_to_resolve(seconds: Sequence[float]) -> TimeToResolve | None:
    """p50, p90 and max of resolved incidents' times to resolve (``None``: none)."""
    if not seconds:
        return None
    return TimeToResolve(
        resolved=len(seconds),
        p50_s=nearest_rank(seconds, 50),
        p90_s=nearest_rank(seconds, 90),
        max_s=max(seconds),
    )


def _rate(incidents: Sequence[Incident]) -> float | None:
    if not incidents:
        return None
    return round(sum(1 for i in incidents if i.noise) / len(incidents), 4)


def _detectors(incidents: Sequence[Incident], known: bool) -> tuple[DetectorStats, ...]:
    rooted: defaultdict[str, list[Incident]] = defaultdict(list)
    own: Counter[str] = Counter()
    for i in incidents:
        rooted[i.detector].append(i)
        own.update(i.detectors)
    out = [
        DetectorStats(
            detector=d,
            incidents=len(mine),
            open=sum(1 for i in mine if i.ttr_s is None),
            alerts=own[d],
            ttr=time_to_resolve([i.ttr_s for i in mine if i.ttr_s is not None]),
            noise=sum(1 for i in mine if i.noise) if known else None,
            false_alarm_rate=_rate(mine) if known else None,
        )
        for d, mine in rooted.items()
    ]
    return tuple(sorted(out, key=lambda s: (-s.incidents, s.detector)))


def _jobs(incidents: Sequence[Incident], known: bool) -> tuple[JobStats, ...]:
    of_job: dict[str, list[Incident]] = defaultdict(list)
    refs: dict[str, JobRef] = {}
    for i in incidents:
        for j in i.jobs:
            key = j.job_id or f"name:{j.job_name}"
            of_job[key].append(i)
            was = refs.get(key, JobRef())
            refs[key] = JobRef(job_id=j.job_id or was.job_id, job_name=j.job_name or was.job_name)
    out = [
        JobStats(
            job=refs[key],
            incidents=len(mine),
            open=sum(1 for i in mine if i.ttr_s is None),
            noise=sum(1 for i in mine if i.noise) if known else None,
            detectors=dict(sorted(Counter(i.detector for i in mine).items())),
        )
        for key, mine in of_job.items()
    ]
    return tuple(
        sorted(out, key=lambda s: (-s.incidents, -(s.noise or 0), s.job.label, s.job.job_id or ""))
    )


def _days(incidents: Sequence[Incident], since_ms: int, now_ms: int) -> tuple[Day, ...]:
    per: defaultdict[str, Counter[str]] = defaultdict(Counter)
    for i in incidents:
        per[i.opened[:10]][i.detector] += 1
    first, last = (since_ms // _DAY_MS, now_ms // _DAY_MS)
    out = []
    for day in range(first, last + 1):
        date = iso_utc(day * _DAY_MS)[:10]
        counts = per.get(date, Counter())
        out.append(
            Day(date=date, incidents=sum(counts.values()), detectors=dict(sorted(counts.items())))
        )
    return tuple(out)


# --- the window --------------------------------------------------------------------------

_DATE = re.compile(r"^\d{4}-\d\d-\d\d")


def parse_since(text: str, now_ms: int) -> int:
    """The window's start: ``7d``, ``24h``, ``90m``, ``1h30m`` back from now, or an ISO date.

    A date alone (``2026-11-16``) is its midnight UTC; a time without a zone is UTC.

    Raises:
        ValueError: neither, or a start after now (the message quotes ``text``).
    """
    text = text.strip()
    if _DATE.match(text):
        try:
            at = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            msg = f"{text!r} is not an ISO date or time (2026-11-16, 2026-11-16T08:00:00Z)"
            raise ValueError(msg) from None
        if at.tzinfo is None:
            at = at.replace(tzinfo=dt.UTC)
        since = int(at.timestamp() * 1000)
        if since > now_ms:
            msg = f"{text!r} is after now ({iso_utc(now_ms)})"
            raise ValueError(msg)
        return since
    try:
        span = parse_duration(text)
    except ValueError:
        msg = (
            f"{text!r} is neither a duration back from now (7d, 24h, 90m, 1h30m) nor an ISO "
            "date or time (2026-11-16, 2026-11-16T08:00:00Z)"
        )
        raise ValueError(msg) from None
    return now_ms - int(span.total_seconds() * 1000)


# --- the text summary --------------------------------------------------------------------

#: Control characters (a terminal's escape sequences among them): job names and summaries
#: come from logs, and a summary printed to a terminal must not drive it.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(text: str, width: int | None = 60) -> str:
    """``text`` without control characters, cut to ``width`` (``None``: whole)."""
    clean = _CONTROL.sub("?", text)
    return clean if width is None or len(clean) <= width else clean[: width - 1] + "…"


def span_text(seconds: float) -> str:
    """A duration as ``45s``, ``12m``, ``1h05m`` or ``2d03h``."""
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    m = s // 60
    if m < 60:
        return f"{m}m"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h}h{m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d{h:02d}h"


def _ttr_text(ttr: TimeToResolve | None) -> str:
    if ttr is None:
        return "-"
    return f"{span_text(ttr.p50_s)}/{span_text(ttr.p90_s)}/{span_text(ttr.max_s)}"


def _noise_text(noise: int | None, rate: float | None) -> str:
    if noise is None:
        return "?"
    return f"{noise} ({rate:.0%})" if rate is not None and noise else str(noise)


def summary_lines(report: Report, top: int = 5) -> list[str]:
    """A few lines for a terminal: totals, the top detectors, the noisiest jobs."""
    t = report.totals
    lines = [f"incidents opened {report.window.since} .. {report.window.until}: {t.incidents}"]
    if not t.incidents:
        lines.append("no incident opened in this window")
        return lines
    noise = f"{t.noise} resolved as noise" if t.noise is not None else "noise not known (no ledger)"
    lines.append(
        f"  {t.resolved} resolved, {t.open} open; {t.alerts} alerts, {t.jobs} jobs; {noise}"
    )
    lines.append(f"  time to resolve p50/p90/max: {_ttr_text(t.ttr)}")
    shown = report.detectors[:top]
    width = max(len("detector"), *(len(printable(d.detector)) for d in shown))
    spans = [_ttr_text(d.ttr) for d in shown]
    span_w = max(len("p50/p90/max"), *(len(x) for x in spans))
    lines.append(f"{'detector':<{width}}  incidents  open  {'p50/p90/max':<{span_w}}  noise")
    for d, span in zip(shown, spans, strict=True):
        lines.append(
            f"{printable(d.detector):<{width}}  {d.incidents:>9}  {d.open:>4}  "
            f"{span:<{span_w}}  {_noise_text(d.noise, d.false_alarm_rate)}"
        )
    lines.append("noisiest jobs:")
    for j in report.noisiest[:top]:
        parts = [f"{j.incidents} incident{'s' if j.incidents != 1 else ''}"]
        parts += [f"{j.noise} noise"] if j.noise else []
        parts += [f"{j.open} open"] if j.open else []
        lines.append(f"  {printable(j.job.label)}: {', '.join(parts)}")
    return lines
