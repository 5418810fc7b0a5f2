"""Correlation: alerts about the same job or TaskManager become one incident.

A leaking TaskManager pages as ``idle_heap_growth``, is then killed (``tm_lost``, cause
``memory_kill``) and its job restarts (``restart_storm``): three detectors, one thing
wrong. The :class:`Correlator` puts each alert transition into an incident, so a
notifier can keep one message per incident and say what probably started it.

Rules:

* An alert is linked to the jobs and TaskManagers it names: its own ``job_id`` and
  ``tm_id`` plus the ones in its evidence (the link fields ``job_ids`` and ``tm_ids``), so a
  restart whose cause names a lost TaskManager joins that TaskManager's incident.
* A firing alert joins the oldest incident that shares a link and is still open
  (a member not resolved) or closed less than ``window_s`` ago, in event time;
  otherwise it opens a new incident. An incident never absorbs another.
* Escalations and resolves follow their alert's incident. The incident resolves
  when its last member resolves.
* The incident's root is the member that comes first in a causal order (a heap leak
  or growing state before the JVM dies, a dead JVM before the lost TaskManager, a
  lost TaskManager before the restarts), ties broken by time; the headline is built
  from the root and what followed.

Pure Python with injected event time: the same alerts in the same order give the
same incidents, live or in ``replay``. The caller keeps the transitions (the alert
ledger) and rebuilds a correlator from them after a restart.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from detectors import REGISTRY
from detectors.base import Member, Profile, Story
from detectors.model import Alert, AlertStatus, Severity
from detectors.tm_ids import same_tm, spellings, tm_entity, tm_key

#: Where a detector not (or no longer) registered sits in the causal order.
_MIDDLE = 3


class CorrelationParams(BaseModel):
    """How alerts are grouped into incidents (config section ``correlation``)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    enabled: bool = Field(default=True)
    """Group related alerts into incidents (one message each)."""
    window_s: float = Field(default=3600, ge=0)
    """A related alert joins an incident while a member is firing or up to this long (event-time
    seconds) after the incident resolved."""
    max_members: int = Field(default=20, ge=1)
    """Alerts one incident takes at most; more open a new one."""


class IncidentView(BaseModel):
    """An incident as of one transition: what a notifier renders.

    Attributes:
        incident_id: The id of the alert that opened it (an alert alone is its own
            incident, so its id does not change when correlation is turned off).
        headline: The root-cause line.
        root_alert_id: The member the headline starts from.
        severity: The highest severity any member reached.
        status: ``firing`` while any member is, else ``resolved``.
        members: Every member, in the order they joined.
        opened: This transition opened the incident.
        severity_rose: This transition raised the incident's severity.
        joined: This transition added a member to an existing incident.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    incident_id: str
    headline: str
    root_alert_id: str
    severity: Severity
    status: AlertStatus
    members: tuple[Member, ...]
    opened: bool = False
    severity_rose: bool = False
    joined: bool = False

    @property
    def root(self) -> Member:
        """The member the headline starts from."""
        return next(m for m in self.members if m.alert_id == self.root_alert_id)


def links(alert: Alert) -> frozenset[str]:
    """The jobs and TaskManagers an alert is about (``job:<id>``, ``tm:<id>``)."""
    ev = alert.evidence or {}
    out: set[str] = set()
    jobs = [alert.job_id, *_strings(ev.get("job_ids"))]
    tms = [alert.tm_id, *_strings(ev.get("tm_ids"))]
    out.update(f"job:{j}" for j in jobs if j)
    # Keyed as the TaskManager's entity is: a log's and a metric's spelling of it join.
    out.update(tm_entity(t) for t in tms if t)
    return frozenset(out)


def _strings(v: object) -> list[str]:
    if isinstance(v, dict):
        return [str(k) for k in v]
    if isinstance(v, list | tuple):
        return [x for x in v if isinstance(x, str)]
    return []


@dataclass
class _Incident:
    incident_id: str
    links: set[str]
    members: dict[str, Member] = field(default_factory=dict)
    severity: Severity = Severity.INFO

    def open(self) -> bool:
        return any(m.status is not AlertStatus.RESOLVED for m in self.members.values())

    def last_ms(self) -> int:
        return max(m.last_ms for m in self.members.values())


class Correlator:
    """Assigns alert transitions to incidents; state is in memory, bounded by the window."""

    def __init__(self, params: CorrelationParams | None = None) -> None:
        self.params = params or CorrelationParams()
        self._incidents: dict[str, _Incident] = {}
        self._of_alert: dict[str, str] = {}

    def restore(self, history: Iterable[tuple[Alert, str]]) -> None:
        """Replay recorded transitions with the incident each was put in (after a restart)."""
        for alert, incident_id in history:
            self._apply(alert, incident_id)

    def observe(self, alert: Alert) -> IncidentView:
        """Put one transition into its incident and return the incident as it now stands."""
        incident_id = self._of_alert.get(alert.alert_id)
        if incident_id is None:
            incident_id = self._choose(alert)
        return self._apply(alert, incident_id)

    def incident_of(self, alert_id: str) -> str | None:
        """The incident an alert was put in, while it is remembered."""
        return self._of_alert.get(alert_id)

    def open_incidents(self) -> int:
        """Incidents with a member still firing."""
        return sum(1 for i in self._incidents.values() if i.open())

    # ------------------------------------------------------------------------------

    def _choose(self, alert: Alert) -> str:
        p = self.params
        if not p.enabled or alert.status is not AlertStatus.FIRING:
            # A resolve or escalation of an alert not seen (pruned, or before correlation
            # was on) stays on its own, as before.
            return alert.alert_id
        mine = links(alert)
        horizon = alert.event_time_ms - int(p.window_s * 1000)
        candidates = [
            inc
            for inc in self._incidents.values()
            if inc.links & mine
            and len(inc.members) < p.max_members
            and (inc.open() or inc.last_ms() >= horizon)
        ]
        if not candidates:
            return alert.alert_id
        return min(
            candidates, key=lambda i: min(m.first_ms for m in i.members.values())
        ).incident_id

    def _apply(self, alert: Alert, incident_id: str) -> IncidentView:
        self._expire(alert.event_time_ms)
        inc = self._incidents.get(incident_id)
        opened = inc is None
        if inc is None:
            inc = self._incidents[incident_id] = _Incident(incident_id, set())
        joined = not opened and alert.alert_id not in inc.members
        prev = inc.members.get(alert.alert_id)
        inc.members[alert.alert_id] = Member(
            **{
                **dict(alert),
                "first_ms": prev.first_ms if prev else alert.event_time_ms,
                # A later transition may not name what an earlier one did.
                "job_id": alert.job_id or (prev.job_id if prev else None),
                "job_name": alert.job_name or (prev.job_name if prev else None),
                # The TaskManager as first named, though a later transition spells it as
                # its logs do: the sinks' label set must not change within an alert.
                "tm_id": prev.tm_id
                if prev and same_tm(prev.tm_id, alert.tm_id)
                else alert.tm_id or (prev.tm_id if prev else None),
                "host": alert.host or (prev.host if prev else None),
            }
        )
        inc.links |= links(alert)
        self._of_alert[alert.alert_id] = incident_id
        rose = alert.severity.rank > inc.severity.rank and not opened
        if opened or rose:
            inc.severity = alert.severity
        members = tuple(inc.members.values())
        root = min(members, key=lambda m: (causal_rank(m.detector), m.first_ms))
        return IncidentView(
            incident_id=incident_id,
            headline=headline(members, root),
            root_alert_id=root.alert_id,
            severity=inc.severity,
            status=AlertStatus.FIRING if inc.open() else AlertStatus.RESOLVED,
            members=members,
            opened=opened,
            severity_rose=rose and alert.status is not AlertStatus.RESOLVED,
            joined=joined,
        )

    def _expire(self, now_ms: int) -> None:
        # Closed incidents older than the window can take no new member: forget them.
        horizon = now_ms - int(self.params.window_s * 1000)
        for iid in [
            iid
            for iid, inc in self._incidents.items()
            if not inc.open() and inc.last_ms() < horizon
        ]:
            for aid in self._incidents.pop(iid).members:
                self._of_alert.pop(aid, None)


# --- the root-cause line ---------------------------------------------------------------


def causal_rank(detector: str) -> int:
    """A detector's place in the causal order (one no longer registered: the middle)."""
    cls = REGISTRY.get(detector)
    return cls.profile.causal_rank if cls is not None else _MIDDLE


def headline(members: tuple[Member, ...], root: Member) -> str:
    """The root-cause line of an incident: what started it and what followed.

    The root's detector words the line (its :class:`Profile`'s ``headline``), told how a
    process died by whichever member knows best (``death``); what followed
    (``aftermath``) and the other detectors are appended. A TaskManager is named in its
    best spelling among the members (one fired on the metrics' ``localhost:40003_6cf67b``
    reads as the logs' ``localhost:40003-6cf67b`` once a member carries that).
    """
    best = spellings(m.tm_id for m in members if m.tm_id)

    def spelled(m: Member) -> Member:
        return m.model_copy(update={"tm_id": best[tm_key(m.tm_id)]}) if m.tm_id else m

    members, root = tuple(spelled(m) for m in members), spelled(root)
    first: dict[str, Member] = {}
    for m in sorted(members, key=lambda m: m.first_ms):
        first.setdefault(m.detector, m)
    known: dict[str, Profile] = {d: REGISTRY[d].profile for d in first if d in REGISTRY}
    deaths = sorted(
        (death, d) for d, told in known.items() if (death := told.death(first[d])) is not None
    )
    roles = [r for d, told in known.items() if (r := told.role(first[d])) is not None]
    story = Story(
        root=root,
        first=first,
        death=deaths[0][0][1] if deaths else None,
        dead=first[deaths[0][1]] if deaths else None,
        role=roles[0] if roles else "TaskManager",
    )
    told = {root.detector} | {d for _, d in deaths}
    text = known.get(root.detector, Profile()).headline(story)
    for d, profile in known.items():
        after = profile.aftermath(first[d]) if d not in told else None
        if after:
            text += f"; {after}"
            told.add(d)
    others = [d for d in first if d not in told]
    if others:
        text += "; also " + ", ".join(others)
    return text
