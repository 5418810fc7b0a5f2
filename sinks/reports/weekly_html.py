"""``report.html``: the weekly picture as one self-contained page that can be mailed.

Charts are PNGs drawn with matplotlib's object API (``Figure`` on an Agg canvas: no
pyplot, no display, no global state) and inlined as ``data:`` URLs; the page loads
nothing and runs nothing (its Content-Security-Policy says so to a browser).

Job names and summaries come from logs: every text is HTML-escaped on the page, and on
the charts stripped of control characters, cut short and kept out of matplotlib's
mathtext (a ``$`` in a job name is a dollar sign, not a formula).
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from sinks.reports.weekly import Incident, Report, TimeToResolve, printable, span_text

#: Rows a table of incidents shows; ``report.json`` holds them all.
MAX_ROWS = 50
#: Resolved incidents the "slowest to resolve" table shows.
SLOWEST = 10
_PALETTE = (
    "#4c72b0",
    "#dd8452",
    "#55a868",
    "#c44e52",
    "#8172b2",
    "#937860",
    "#da8bc3",
    "#8c8c8c",
    "#ccb974",
    "#64b5cd",
)
_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em auto; max-width: 60em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 2em; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { border-bottom: 1px solid #ddd; padding: .25em .6em; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
.meta { color: #666; font-size: .9em; }
img { max-width: 100%; }
"""


def render_html(report: Report) -> str:
    """The page: totals, the three charts, and the tables behind them."""
    w = report.window
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta http-equiv="Content-Security-Policy" '
        "content=\"default-src 'none'; img-src data:; style-src 'unsafe-inline'\">",
        f"<title>flinkwatch report {_e(w.since)} .. {_e(w.until)}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>flinkwatch: incidents opened {_e(w.since)} .. {_e(w.until)}</h1>",
        f'<p class="meta">{_e(_sources_text(report))}</p>',
        _totals_table(report),
    ]
    if not report.incidents:
        parts.append("<p>No incident opened in this window.</p></body></html>")
        return "\n".join(parts) + "\n"
    parts += [
        "<h2>Incidents per day</h2>",
        _img(days_chart(report), "incidents per day, stacked by root detector"),
        "<h2>Detectors</h2>",
        _detectors_table(report),
        _img(ttr_chart(report), "time to resolve per detector, p50 and p90, max marked"),
        "<h2>Noisiest jobs</h2>",
        _img(jobs_chart(report), "the noisiest jobs: incidents and those resolved as noise"),
        _jobs_table(report),
        "<h2>Resolved as noise</h2>",
        _noise_section(report),
        "<h2>Still open</h2>",
        _incident_table([i for i in report.incidents if i.ttr_s is None], "nothing is open"),
        f"<h2>Slowest to resolve (top {SLOWEST})</h2>",
        _incident_table(_slowest(report), "no incident resolved"),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def _e(text: object) -> str:
    return html.escape(printable(str(text), None), quote=True)


def _sources_text(report: Report) -> str:
    s = report.sources
    read = [f"ledger {s.ledger}"] if s.ledger else []
    read += [f"alert file {p}" for p in s.alert_files]
    text = f"Read {', '.join(read) or 'nothing'}: {s.read} transitions"
    if s.duplicates:
        text += f" ({s.duplicates} in more than one source, counted once)"
    if s.unreadable_lines:
        text += f"; {s.unreadable_lines} unreadable lines skipped"
    if not report.noise_known:
        text += ". Noise is not known: only the ledger records the Slack buttons"
    return text + "."


def _ttr_cells(ttr: TimeToResolve | None) -> str:
    if ttr is None:
        return '<td class="n">-</td>' * 3
    return "".join(f'<td class="n">{span_text(v)}</td>' for v in (ttr.p50_s, ttr.p90_s, ttr.max_s))


def _noise_cells(noise: int | None, rate: float | None) -> str:
    if noise is None:
        return '<td class="n">?</td><td class="n">?</td>'
    shown = f"{rate:.0%}" if rate is not None else "-"
    return f'<td class="n">{noise}</td><td class="n">{shown}</td>'


def _totals_table(report: Report) -> str:
    t = report.totals
    rows = [
        ("incidents", t.incidents),
        ("resolved", t.resolved),
        ("still open", t.open),
        ("alerts in them", t.alerts),
        ("jobs concerned", t.jobs),
        ("resolved as noise", "not known" if t.noise is None else t.noise),
    ]
    body = "".join(f'<tr><th>{_e(k)}</th><td class="n">{_e(v)}</td></tr>' for k, v in rows)
    if t.ttr is not None:
        body += f"<tr><th>time to resolve p50 / p90 / max</th>{_ttr_cells(t.ttr)}</tr>"
    return f"<table>{body}</table>"


def _detectors_table(report: Report) -> str:
    head = (
        "<tr><th>root detector</th><th>incidents</th><th>open</th><th>alerts</th>"
        "<th>p50</th><th>p90</th><th>max</th><th>noise</th><th>false alarms</th></tr>"
    )
    rows = [
        f'<tr><td>{_e(d.detector)}</td><td class="n">{d.incidents}</td>'
        f'<td class="n">{d.open}</td><td class="n">{d.alerts}</td>{_ttr_cells(d.ttr)}'
        f"{_noise_cells(d.noise, d.false_alarm_rate)}</tr>"
        for d in report.detectors
    ]
    return f"<table>{head}{''.join(rows)}</table>"


def _jobs_table(report: Report) -> str:
    head = (
        "<tr><th>job</th><th>id</th><th>incidents</th><th>open</th><th>noise</th>"
        "<th>root detectors</th></tr>"
    )
    rows = [
        f"<tr><td>{_e(j.job.job_name or '')}</td><td>{_e(j.job.job_id or '')}</td>"
        f'<td class="n">{j.incidents}</td><td class="n">{j.open}</td>'
        f'<td class="n">{"?" if j.noise is None else j.noise}</td>'
        f"<td>{_e(', '.join(f'{d} {n}' for d, n in j.detectors.items()))}</td></tr>"
        for j in report.noisiest
    ]
    more = len(report.jobs) - len(report.noisiest)
    tail = f'<p class="meta">{more} more jobs in report.json.</p>' if more > 0 else ""
    return f"<table>{head}{''.join(rows)}</table>{tail}"


def _noise_section(report: Report) -> str:
    if not report.noise_known:
        return (
            "<p>Not known: no ledger was read (the alert file does not keep Slack's buttons).</p>"
        )
    return _incident_table(
        [i for i in report.incidents if i.noise], "no page was resolved as noise"
    )


def _slowest(report: Report) -> list[Incident]:
    done = [i for i in report.incidents if i.ttr_s is not None]
    return sorted(done, key=lambda i: -(i.ttr_s or 0))[:SLOWEST]


def _incident_table(incidents: Sequence[Incident], none: str) -> str:
    if not incidents:
        return f"<p>{_e(none[0].upper() + none[1:])}.</p>"
    head = (
        "<tr><th>opened</th><th>root detector</th><th>severity</th><th>to resolve</th>"
        "<th>jobs</th><th>summary</th><th>noise</th></tr>"
    )
    rows = []
    for i in incidents[:MAX_ROWS]:
        noise = f"{i.noise.by} at {i.noise.at}" if i.noise else ""
        ttr = span_text(i.ttr_s) if i.ttr_s is not None else "open"
        rows.append(
            f"<tr><td>{_e(i.opened)}</td><td>{_e(i.detector)}</td><td>{_e(i.severity.value)}</td>"
            f'<td class="n">{ttr}</td><td>{_e(", ".join(j.label for j in i.jobs))}</td>'
            f"<td>{_e(i.summary)}</td><td>{_e(noise)}</td></tr>"
        )
    more = len(incidents) - MAX_ROWS
    tail = f'<p class="meta">{more} more in report.json.</p>' if more > 0 else ""
    return f"<table>{head}{''.join(rows)}</table>{tail}"


def _img(png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return f'<p><img alt="{_e(alt)}" src="data:image/png;base64,{data}"></p>'


# --- the charts ----------------------------------------------------------------------------


def _label(text: str, width: int = 40) -> str:
    """Text from logs as a chart shows it: printable, short, a ``$`` a dollar sign."""
    return printable(text, width).replace("$", r"\$")


def _png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)  # the figure draws on Agg: no display, no pyplot
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _colours(report: Report) -> dict[str, str]:
    # By name, so a detector keeps its colour from one week's report to the next.
    names = sorted(d.detector for d in report.detectors)
    return {d: _PALETTE[i % len(_PALETTE)] for i, d in enumerate(names)}


def days_chart(report: Report) -> bytes:
    """Incidents opened per UTC day, stacked by root detector (PNG)."""
    fig = Figure(figsize=(9, 3.2), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    xs = range(len(report.days))
    bottom = [0] * len(report.days)
    for d, colour in _colours(report).items():
        ys = [day.detectors.get(d, 0) for day in report.days]
        ax.bar(xs, ys, bottom=bottom, color=colour, label=_label(d), width=0.8)
        bottom = [b + y for b, y in zip(bottom, ys, strict=True)]
    step = -(-len(report.days) // 10)  # at most ten dates under the bars, so they never touch
    ax.set_xticks(list(xs)[::step], [day.date[5:] for day in report.days][::step])
    ax.set_ylabel("incidents")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    return _png(fig)


def ttr_chart(report: Report) -> bytes:
    """Time to resolve per root detector: p50 and p90 bars, the max marked (PNG)."""
    rows = [d for d in report.detectors if d.ttr is not None][::-1]
    fig = Figure(figsize=(8, 0.6 + 0.45 * max(len(rows), 1)), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    if not rows:
        ax.text(0.5, 0.5, "no incident resolved", ha="center", va="center")
        ax.set_axis_off()
        return _png(fig)
    longest = max(d.ttr.max_s for d in rows if d.ttr is not None)
    unit, per = ("hours", 3600.0) if longest >= 3 * 3600 else ("minutes", 60.0)
    ys = range(len(rows))
    p50 = [d.ttr.p50_s / per if d.ttr else 0 for d in rows]
    p90 = [d.ttr.p90_s / per if d.ttr else 0 for d in rows]
    top = [d.ttr.max_s / per if d.ttr else 0 for d in rows]
    ax.barh([y + 0.2 for y in ys], p50, height=0.4, color="#4c72b0", label="p50")
    ax.barh([y - 0.2 for y in ys], p90, height=0.4, color="#dd8452", label="p90")
    ax.plot(top, list(ys), "k|", markersize=12, label="max")
    ax.set_yticks(list(ys), [_label(d.detector) for d in rows])
    ax.set_xlabel(f"time to resolve ({unit})")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    return _png(fig)


def jobs_chart(report: Report) -> bytes:
    """The noisiest jobs: incidents, and of them those resolved as noise (PNG)."""
    jobs = list(report.noisiest)[::-1]
    fig = Figure(figsize=(8, 0.6 + 0.4 * max(len(jobs), 1)), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    ys = list(range(len(jobs)))
    ax.barh(ys, [j.incidents for j in jobs], color="#8c8c8c", label="incidents")
    if report.noise_known:
        ax.barh(ys, [j.noise or 0 for j in jobs], color="#c44e52", label="resolved as noise")
    ax.set_yticks(ys, [_label(j.job.label, 48) for j in jobs])
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("incidents")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    return _png(fig)
