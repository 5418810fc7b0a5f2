"""``flinkwatch replay --report DIR``: every incident of a replay on one HTML page, charted.

Read from the replay's alert file (JSON lines, :func:`sinks.files.alert_record`), so the
page shows what the replay delivered: the incidents are the ones the replay put the
transitions in (an alert names its incident once it has company), rebuilt with the
correlator for the root-cause line and the members' time line. For each incident it
writes the chart of each member's deciding transition (the firing, or the escalation
that followed it) and, for an incident of several alerts, the incident's own chart, then
``index.html`` listing the incidents with those charts inline. A threshold change can be
judged on the page: with ``--baseline``, a first section compares the two configs' pages
(:mod:`sinks.reports.compare`): both timelines on one chart
(:mod:`sinks.reports.compare_chart`) and a table of what was gained, lost or moved.

Every text on the page comes from logs (job names, hosts, summaries) and is escaped.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from detectors.correlation import CorrelationParams, Correlator, IncidentView
from detectors.model import Alert, AlertStatus
from detectors.tm_ids import spellings
from sinks.charts import render
from sinks.charts.frame import who
from sinks.files import alert_from_record, iso_utc
from sinks.reports.compare import Comparison, moved
from sinks.reports.compare_chart import comparison_chart

_SAFE_NAME = re.compile(r"^[0-9A-Za-z_-]{1,64}$")

_STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; max-width: 1100px; }
section { border-top: 1px solid #ccc; padding: 0.8em 0; }
table { border-collapse: collapse; font-size: 0.9em; }
td, th { text-align: left; padding: 0.15em 0.8em 0.15em 0; vertical-align: top; }
.critical { color: #c0392b; } .warning { color: #b07a00; } .info { color: #1f77b4; }
.headline { font-style: italic; }
.none { color: #888; font-size: 0.9em; }
.gained { color: #009e73; } .lost { color: #d55e00; } .earlier { color: #0072b2; }
.later { color: #b07a00; } .unchanged { color: #888; }
img { display: block; margin: 0.4em 0; border: 1px solid #eee; }
"""


@dataclass
class _Incident:
    incident_id: str
    history: list[Alert] = field(default_factory=list)

    def deciding(self) -> dict[str, Alert]:
        """Per member, the transition that decided it: its escalation, else its firing."""
        out: dict[str, Alert] = {}
        for a in self.history:
            if a.status is not AlertStatus.RESOLVED or a.alert_id not in out:
                out[a.alert_id] = a
        return out

    def resolved_ms(self) -> dict[str, int]:
        return {
            a.alert_id: a.event_time_ms for a in self.history if a.status is AlertStatus.RESOLVED
        }


@dataclass(frozen=True)
class Report:
    """What :func:`write_report` wrote.

    Attributes:
        index: The HTML page.
        incidents: Incidents listed.
        charts: PNG files written.
    """

    index: Path
    incidents: int
    charts: int


def incidents_of(alerts_file: Path) -> list[_Incident]:
    """The replay's transitions grouped into the incidents the replay put them in, oldest first.

    An alert's records name its incident (``incident_id``) once the incident has more than
    one member; before that, and for an alert always alone, the incident is the alert's own.
    """
    by_id: dict[str, _Incident] = {}
    of_alert: dict[str, str] = {}
    for line in alerts_file.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        rec = json.loads(line)
        alert = alert_from_record(rec)
        iid = str(rec.get("incident_id") or of_alert.get(alert.alert_id) or alert.alert_id)
        of_alert.setdefault(alert.alert_id, iid)
        by_id.setdefault(iid, _Incident(iid)).history.append(alert)
    return sorted(by_id.values(), key=lambda i: (i.history[0].event_time_ms, i.incident_id))


def view_of(incident: _Incident, params: CorrelationParams) -> IncidentView:
    """The incident as of its last transition: its members, root and headline."""
    corr = Correlator(params)
    *before, last = incident.history
    corr.restore((a, incident.incident_id) for a in before)
    return corr.observe(last)


def write_report(
    alerts_file: Path,
    directory: Path,
    params: CorrelationParams,
    comparison: Comparison | None = None,
) -> Report:
    """Write ``directory/index.html`` and a PNG per chart for every incident of a replay.

    With a ``comparison`` (``replay --baseline``) the page opens with it: both runs'
    timelines on one chart (``comparison.png``) and the table of differences.
    """
    directory.mkdir(parents=True, exist_ok=True)
    sections: list[str] = []
    charts = 0
    if comparison is not None:
        picture = _write(directory / "comparison.png", comparison_chart(comparison))
        charts += picture is not None
        sections.append(_comparison_section(comparison, picture))
    incidents = incidents_of(alerts_file)
    for incident in incidents:
        view = view_of(incident, params)
        pictures: dict[str, str | None] = {}
        if len(view.members) >= 2:
            name = f"incident-{_file_name(incident.incident_id)}.png"
            pictures["incident"] = _write(directory / name, render(incident.history[-1], view))
        for alert_id, alert in incident.deciding().items():
            pictures[alert_id] = _write(directory / f"{_file_name(alert_id)}.png", render(alert))
        charts += sum(1 for p in pictures.values() if p)
        sections.append(_section(incident, view, pictures))
    index = directory / "index.html"
    transitions = sum(len(i.history) for i in incidents)
    count = f"{len(incidents)} incident{'' if len(incidents) == 1 else 's'}"
    head = f"{count}, {transitions} alert transitions, from {_e(alerts_file)}; times in UTC"
    page = (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>flinkwatch replay: {count}</title>"
        f"<style>{_STYLE}</style></head>\n<body>\n<h1>flinkwatch replay</h1>\n"
        f"<p>{head}</p>\n" + "\n".join(sections) + "\n</body></html>\n"
    )
    index.write_text(page, encoding="utf-8")
    return Report(index=index, incidents=len(incidents), charts=charts)


def _write(path: Path, data: bytes | None) -> str | None:
    if data is None:
        return None
    path.write_bytes(data)
    return path.name


def _file_name(alert_id: str) -> str:
    """A file name from an id: the id itself when it is plain (the detectors' hex ids)."""
    if _SAFE_NAME.match(alert_id):
        return alert_id
    return hashlib.sha1(alert_id.encode(), usedforsecurity=False).hexdigest()[:16]


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _img(name: str | None, alt: str) -> str:
    if name is None:
        return f'<p class="none">no chart: {_e(alt)} has no series to draw</p>'
    return f'<img src="{_e(name)}" width="720" height="360" alt="{_e(alt)}">'


def _comparison_section(comparison: Comparison, picture: str | None) -> str:
    t = comparison.totals()
    out = [
        '<section id="comparison">',
        "<h2>against the baseline config</h2>",
        f"<p>pages: baseline {comparison.baseline_pages}, new {comparison.new_pages}; "
        + ", ".join(f'<span class="{c.value}">{c.value} {n}</span>' for c, n in t.items())
        + "</p>",
    ]
    if picture is None:
        out.append('<p class="none">no pages in either run</p>')
    else:
        out.append(_img(picture, "both runs' pages"))
        out.append(
            "<table><tr><th>detector</th><th>job / TaskManager</th><th>change</th>"
            "<th>baseline paged</th><th>new paged</th><th>moved</th></tr>"
        )
        for d in comparison.differences:
            when = [iso_utc(p.paged_ms) if p else "-" for p in (d.baseline, d.new)]
            out.append(
                f"<tr><td>{_e(d.page.detector)}</td><td>{_e(d.page.subject)}</td>"
                f'<td class="{_e(d.change.value)}">{_e(d.change.value)}</td>'
                f"<td>{_e(when[0])}</td><td>{_e(when[1])}</td><td>{_e(moved(d.delta_ms))}</td></tr>"
            )
        out.append("</table>")
    out.append("</section>")
    return "\n".join(out)


def _section(incident: _Incident, view: IncidentView, pictures: dict[str, str | None]) -> str:
    deciding = incident.deciding()
    resolved = incident.resolved_ms()
    detectors = list(dict.fromkeys(m.detector for m in view.members))
    root = deciding.get(view.root_alert_id) or incident.history[0]
    sev = view.severity.value
    # One TaskManager named alike in every row, whichever spelling each alert fired on.
    spelled = spellings(a.tm_id for a in incident.history if a.tm_id)
    out = [
        f'<section id="incident-{_e(_file_name(incident.incident_id))}">',
        f'<h2><span class="{_e(sev)}">{_e(sev)}</span> {_e(", ".join(detectors))}: '
        f"{_e(who(root, spelled))}</h2>",
    ]
    if len(view.members) >= 2:
        out.append(f'<p class="headline">{_e(view.headline)}</p>')
        out.append(_img(pictures.get("incident"), "the incident"))
    out.append(
        "<table><tr><th>detector</th><th>job / TaskManager</th><th>severity</th>"
        "<th>fired</th><th>resolved</th><th>summary</th></tr>"
    )
    for alert_id, a in deciding.items():
        gone = resolved.get(alert_id)
        first = next(x for x in incident.history if x.alert_id == alert_id)
        out.append(
            f"<tr><td>{_e(a.detector)}</td><td>{_e(who(a, spelled))}</td>"
            f'<td class="{_e(a.severity.value)}">{_e(a.severity.value)}</td>'
            f"<td>{_e(iso_utc(first.event_time_ms))}</td>"
            f"<td>{_e(iso_utc(gone)) if gone is not None else 'not resolved'}</td>"
            f"<td>{_e(a.summary)}</td></tr>"
        )
    out.append("</table>")
    for alert_id, a in deciding.items():
        out.append(_img(pictures.get(alert_id), f"{a.detector} of {who(a, spelled)}"))
    out.append("</section>")
    return "\n".join(out)
