"""The replay report: every incident of an alert file on one page, its charts beside it."""

from __future__ import annotations

import html
import io
import json
import re
from pathlib import Path

from matplotlib import image

from detectors import Alert, AlertStatus
from detectors.correlation import CorrelationParams, Correlator
from sinks.base import Transition, transition_key
from sinks.files import JsonLinesAlertSink
from sinks.reports.compare import compare, read_pages
from sinks.reports.replay import incidents_of, write_report
from tests.sinks.charts.alerts import (
    HOSTILE,
    MIN,
    PNG_MAGIC,
    creep_alert,
    failures_alert,
    idle_heap_alert,
    late_alert,
    restart_alert,
)


def replayed(path: Path, alerts: list[Alert], params: CorrelationParams | None = None) -> Path:
    """The alert file a replay writes: each transition with its incident, in time order."""
    corr = Correlator(params)
    sink = JsonLinesAlertSink(path)
    for seq, a in enumerate(sorted(alerts, key=lambda a: a.event_time_ms)):
        sink.send(Transition(seq, transition_key(a), a, incident=corr.observe(a)))
    return path


def resolved(a: Alert, after_ms: int) -> Alert:
    return a.model_copy(
        update={"status": AlertStatus.RESOLVED, "event_time_ms": a.event_time_ms + after_ms}
    )


def images(page: str) -> list[str]:
    return re.findall(r'<img src="([^"]+)"', page)


def test_a_correlated_incident_and_a_lone_alert_are_listed_with_their_charts(tmp_path) -> None:
    creep, failures, late = creep_alert(), failures_alert(), late_alert()
    other = restart_alert().model_copy(update={"job_id": "0" * 32, "entity": "job:" + "0" * 32})
    alerts = [creep, failures, late, resolved(failures, 9 * MIN), other]
    path = replayed(tmp_path / "alerts.jsonl", alerts)
    report = write_report(path, tmp_path / "report", CorrelationParams())
    page = report.index.read_text(encoding="utf-8")
    assert report.incidents == 2 and page.count("<section") == 2
    # The lone restart storm (fired first) comes first, then the incident of three.
    first, second = page.split("<section")[1:]
    assert "restart_storm" in first and 'class="headline"' not in first
    for a in (creep, failures, late):
        assert html.escape(a.summary) in second
    assert "checkpoint_failures, late_barrier_acks, checkpoint_creep" in second
    assert "get barrier acks after they expired" in second  # the root-cause line
    # The failures member resolved: its time is there; the others are not resolved.
    assert "2026-11-23T02:36:20.000Z" in second and second.count("not resolved") == 2
    # One chart for the lone alert; the incident's and one per member for the incident.
    pictures = images(page)
    assert len(pictures) == report.charts == 5
    assert pictures[1] == f"incident-{failures.alert_id}.png"
    assert set(pictures[2:]) == {f"{a.alert_id}.png" for a in (creep, failures, late)}
    for name in pictures:
        data = (tmp_path / "report" / name).read_bytes()
        assert data[:8] == PNG_MAGIC
        assert image.imread(io.BytesIO(data), format="png").shape[:2] == (360, 720)


def test_an_incident_names_its_taskmanager_alike_in_its_heading_rows_and_charts(
    tmp_path,
) -> None:
    # The heap alert fired on the metrics' spelling, tm_lost after the logs named it.
    from tests.sinks.spellings import ENTITY, SCRAPED, lost_after

    heap = idle_heap_alert().model_copy(update={"entity": ENTITY, "tm_id": SCRAPED})
    lost = lost_after(heap, MIN)
    path = replayed(tmp_path / "alerts.jsonl", [heap, lost])
    page = write_report(path, tmp_path / "report", CorrelationParams()).index.read_text()
    assert page.count("<section") == 1
    assert "localhost:40003-6cf67b" in page and "localhost:40003_6cf67b" not in page


def test_incidents_are_the_ones_the_replay_put_the_transitions_in(tmp_path) -> None:
    creep, late = creep_alert(), late_alert()
    # Correlation off: each alert its own incident, even about the same job.
    path = replayed(tmp_path / "off.jsonl", [creep, late], CorrelationParams(enabled=False))
    assert [len(i.history) for i in incidents_of(path)] == [1, 1]
    path = replayed(tmp_path / "on.jsonl", [creep, late, resolved(late, MIN)])
    (incident,) = incidents_of(path)
    assert incident.incident_id == late.alert_id  # the alert that opened it
    # The creep fired after the late acks resolved, within the window: the same incident.
    assert [(a.detector, a.status) for a in incident.history] == [
        ("late_barrier_acks", AlertStatus.FIRING),
        ("late_barrier_acks", AlertStatus.RESOLVED),
        ("checkpoint_creep", AlertStatus.FIRING),
    ]


def test_hostile_text_is_escaped_everywhere(tmp_path) -> None:
    evil = "<img src=x onerror=alert(1)>&\"'" + HOSTILE
    creep = creep_alert(name=evil)
    alert = creep.model_copy(update={"summary": f"creep of {evil}"})
    odd = alert.model_copy(update={"alert_id": "../../etc/passwd", "detector": "checkpoint_creep"})
    path = replayed(tmp_path / "alerts.jsonl", [odd])
    report = write_report(path, tmp_path / "report", CorrelationParams())
    page = report.index.read_text(encoding="utf-8")
    assert "<img src=x" not in page and "onerror=alert(1)>" not in page
    assert html.escape(evil) in page
    # An id that is no plain name gives a file inside the report, named by its hash.
    (name,) = images(page)
    assert re.fullmatch(r"[0-9a-f]{16}\.png", name) and (tmp_path / "report" / name).exists()
    assert sorted(p.name for p in (tmp_path / "report").iterdir()) == sorted([name, "index.html"])


def test_an_alert_without_a_chart_says_so(tmp_path) -> None:
    lost = restart_alert().model_copy(update={"detector": "tm_lost", "evidence": {}})
    path = replayed(tmp_path / "alerts.jsonl", [lost])
    report = write_report(path, tmp_path / "report", CorrelationParams())
    page = report.index.read_text(encoding="utf-8")
    assert report.charts == 0 and images(page) == []
    assert "no chart: tm_lost of job orders-etl has no series to draw" in page


def test_an_empty_replay_writes_a_page_of_no_incidents(tmp_path) -> None:
    path = tmp_path / "alerts.jsonl"
    path.write_text("")
    report = write_report(path, tmp_path / "report", CorrelationParams())
    assert report.incidents == 0 and "0 incidents" in report.index.read_text()
    assert json.loads(json.dumps(report.charts)) == 0


def test_a_comparison_opens_the_page_with_both_timelines_and_the_table(tmp_path) -> None:
    creep, failures = creep_alert(), failures_alert()
    new_file = replayed(tmp_path / "alerts.jsonl", [creep, failures])
    earlier = failures.model_copy(
        update={"alert_id": "f0f0f0f0f0f0f0f0", "event_time_ms": failures.event_time_ms + MIN}
    )
    base_file = replayed(tmp_path / "alerts.baseline.jsonl", [earlier, late_alert()])
    comparison = compare(read_pages(base_file), read_pages(new_file))
    report = write_report(new_file, tmp_path / "report", CorrelationParams(), comparison)
    page = report.index.read_text(encoding="utf-8")
    first = page.split("<section")[1]
    assert first.startswith(' id="comparison"')
    assert images(first) == ["comparison.png"]
    data = (tmp_path / "report" / "comparison.png").read_bytes()
    assert image.imread(io.BytesIO(data), format="png").shape[:2] == (360, 720)
    assert report.charts == 1 + len(images(page.split("</section>", 1)[1]))
    # One row per page, its change colour-coded by class, the move in human units.
    rows = re.findall(r"<tr><td>([^<]+)</td>.*?class=\"(\w+)\"", first)
    assert rows == [
        ("checkpoint_creep", "gained"),
        ("checkpoint_failures", "earlier"),
        ("late_barrier_acks", "lost"),
    ]
    assert "<td>1 min earlier</td>" in first
    assert "gained 1</span>" in first and "unchanged 0</span>" in first


def test_a_comparison_of_two_quiet_runs_says_so_without_a_chart(tmp_path) -> None:
    path = tmp_path / "alerts.jsonl"
    path.write_text("")
    report = write_report(path, tmp_path / "report", CorrelationParams(), compare([], []))
    page = report.index.read_text(encoding="utf-8")
    assert 'id="comparison"' in page and "no pages in either run" in page
    assert report.charts == 0 and not (tmp_path / "report" / "comparison.png").exists()
