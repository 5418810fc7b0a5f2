"""The evidence chart, through the real slack-sdk client, against the local Slack emulator."""

from __future__ import annotations

import io
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.image import imread

from conf import SlackConfig
from detectors import Alert, AlertStatus, Severity
from detectors.correlation import Correlator, IncidentView
from lab.slack import SlackEmulator
from sinks import AlertLedger, RetryableDeliveryError, dispatch
from sinks.dispatch import Dispatcher
from sinks.slack import SlackBotSink
from sinks.slack.chart import SlackChartSink, chart_tag, slack_chart_sink

TOKEN = "xoxb-0000-chart-token"
TM = "container_e05_1699999999999_0042_01_000003"
#: The test chart's size in pixels (inches times dpi).
WIDTH, HEIGHT, DPI = 300, 150, 100
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def alert(
    alert_id: str = "a1",
    status: AlertStatus = AlertStatus.FIRING,
    detector: str = "idle_heap_growth",
    **kw: Any,
) -> Alert:
    base: dict[str, Any] = {
        "alert_id": alert_id,
        "detector": detector,
        "entity": f"tm:{TM}",
        "status": status,
        "severity": Severity.WARNING,
        "event_time_ms": 1_763_776_800_000,
        "summary": f"{alert_id}: post-GC heap floor rising 240 MB/h",
        "job_id": "3f4c2a9b7d1e4f60",
        "job_name": "orders-enrich",
        "tm_id": TM,
        "evidence": {"floors_mb": [1200.0, 1450.0, 1610.0, 1890.5]},
    }
    return Alert.model_validate({**base, **kw})


def draw(a: Alert, incident: IncidentView | None) -> bytes:
    """A tiny real chart: the alert's heap floors."""
    fig = Figure(figsize=(WIDTH / DPI, HEIGHT / DPI), dpi=DPI)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    floors = (a.evidence or {}).get("floors_mb", [0.0])
    ax.plot(range(len(floors)), floors)
    ax.set_title(a.detector, fontsize=8)
    out = io.BytesIO()
    fig.savefig(out, format="png")
    return out.getvalue()


@pytest.fixture
def slack():
    with SlackEmulator(token=TOKEN, channels=("#flink-alerts",)) as emu:
        yield emu


def config(emu: SlackEmulator, **kw: Any) -> SlackConfig:
    base = {"mode": "bot", "api_url": emu.base_url, "channel": "#flink-alerts", "max_retries": 0}
    return SlackConfig.model_validate({**base, **kw})


def sinks(
    emu: SlackEmulator,
    ledger: AlertLedger,
    render: Callable[[Alert, IncidentView | None], bytes | None] = draw,
    **kw: Any,
) -> tuple[SlackBotSink, SlackChartSink]:
    cfg = config(emu, **kw)
    bot = SlackBotSink(TOKEN, ledger, lambda: cfg, lambda: "prod-eu")
    chart = slack_chart_sink(bot, lambda: cfg, render)
    assert chart is not None
    return bot, chart


def record(ledger: AlertLedger, both: tuple[SlackBotSink, SlackChartSink], *alerts: Alert, **kw):
    return ledger.record(len(ledger.history()), list(alerts), list(both), **kw)


def deliver(ledger: AlertLedger, both: tuple[SlackBotSink, SlackChartSink]) -> None:
    for sink in both:  # the dispatcher's order: the text page first
        dispatch.deliver(ledger, sink)


def charts(emu: SlackEmulator) -> dict[str, list[dict[str, Any]]]:
    """Per incident message ts: the file messages in its thread."""
    return {
        m["ts"]: [r for r in m["replies"] if r.get("files")] for m in emu.messages("#flink-alerts")
    }


def uploads(emu: SlackEmulator) -> list[str]:
    return [p for p, _ in emu.requests if "files." in p or "/upload/" in p]


def test_the_chart_arrives_once_in_the_incidents_thread_as_a_png(
    slack: SlackEmulator, tmp_path: Path
) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    both = sinks(slack, ledger)
    [t] = record(ledger, both, alert())
    deliver(ledger, both)
    deliver(ledger, both)  # nothing left: nothing posted again

    [(parent_ts, [shared])] = charts(slack).items()
    assert shared["thread_ts"] == parent_ts
    [file] = shared["files"]
    tag = chart_tag(t.key)
    assert tag in file["title"] and file["name"] == f"flinkwatch-{tag}.png"
    [kept] = slack.files()
    assert kept["completed"] and kept["id"] == file["id"]
    png = kept["content"]
    assert png.startswith(PNG_MAGIC)
    assert 1_000 < len(png) < 200_000
    assert imread(io.BytesIO(png)).shape[:2] == (HEIGHT, WIDTH)
    # Slack serves the file to the token's bearer: the bytes are the ones drawn.
    req = urllib.request.Request(file["url_private"], headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(req, timeout=5) as resp:
        assert resp.read() == png == draw(t.alert, t.incident)
    assert ledger.counts()[("slack_chart", "delivered")] == 1
    assert uploads(slack).count("/api/files.completeUploadExternal") == 1


def test_the_chart_waits_for_the_text_page_and_follows_it(
    slack: SlackEmulator, tmp_path: Path
) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    bot, chart = sinks(slack, ledger)
    slack.fail_next(1, 503, path_prefix="/api/chat.postMessage")  # refused, not stored
    record(ledger, (bot, chart), alert())
    with pytest.raises(RetryableDeliveryError):
        dispatch.deliver(ledger, bot)
    with pytest.raises(RetryableDeliveryError, match="text page is not posted yet"):
        dispatch.deliver(ledger, chart)
    assert ledger.counts()[("slack_chart", "pending")] == 1
    assert slack.messages("#flink-alerts") == [] and uploads(slack) == []

    deliver(ledger, (bot, chart))
    [(_, [shared])] = charts(slack).items()
    assert len(shared["files"]) == 1
    assert ledger.backlog() == {}


def test_a_failing_chart_does_not_delay_another_incidents_text_page(
    slack: SlackEmulator, tmp_path: Path
) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    both = sinks(slack, ledger)
    now = [0.0]
    dispatcher = Dispatcher(ledger, both, backoff_s=5, clock=lambda: now[0])
    slack.fail_next(1, 429, retry_after=30, path_prefix="/api/files.getUploadURLExternal")
    record(ledger, both, alert("first"))
    assert not dispatcher.drain_once()  # the page went out; its chart is rate limited
    assert len(slack.messages("#flink-alerts")) == 1 and slack.files() == []

    record(ledger, both, alert("second"))
    dispatcher.drain_once()  # the chart sink is backing off; the text page is not
    assert len(slack.messages("#flink-alerts")) == 2
    assert ledger.backlog() == {"slack_chart": 2}  # both charts wait, in order

    now[0] += 5
    assert not dispatcher.drain_once()  # one chart a pass: a new page would go next
    assert [len(files) for files in charts(slack).values()] == [1, 0]
    assert dispatcher.drain_once()
    assert [len(files) for files in charts(slack).values()] == [1, 1]


def test_a_chart_that_cannot_be_drawn_is_refused_alone(
    slack: SlackEmulator, tmp_path: Path
) -> None:
    def broken_for_first(a: Alert, incident: IncidentView | None) -> bytes:
        if a.alert_id == "first":
            raise ValueError("no floors to plot")
        return draw(a, incident)

    ledger = AlertLedger(tmp_path / "l.sqlite")
    both = sinks(slack, ledger, broken_for_first)
    record(ledger, both, alert("first"), alert("second"))
    deliver(ledger, both)
    assert [len(files) for files in charts(slack).values()] == [0, 1]
    [failed] = ledger.deliveries(["failed"])
    assert failed.sink == "slack_chart" and "no floors to plot" in (failed.error or "")
    assert ledger.counts()[("slack", "delivered")] == 2


def test_nothing_to_draw_posts_nothing_and_counts_as_delivered(
    slack: SlackEmulator, tmp_path: Path
) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    both = sinks(slack, ledger, lambda a, incident: None)
    record(ledger, both, alert())
    deliver(ledger, both)
    assert uploads(slack) == []
    assert ledger.counts()[("slack_chart", "delivered")] == 1


def test_resolves_and_escalations_are_not_charted_and_a_joining_alert_is(
    slack: SlackEmulator, tmp_path: Path
) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    both = sinks(slack, ledger)
    correlator = Correlator()
    heap = alert("heap")
    lost = alert("lost", detector="tm_lost", job_id=None, evidence={"cause": "memory_kill"})
    life = [
        heap,
        lost,  # joins the heap incident through the TaskManager
        heap.model_copy(update={"status": AlertStatus.ESCALATED, "severity": Severity.CRITICAL}),
        lost.model_copy(update={"status": AlertStatus.RESOLVED}),
        heap.model_copy(update={"status": AlertStatus.RESOLVED, "severity": Severity.CRITICAL}),
    ]
    for a in life:
        record(ledger, both, a, correlate=correlator.observe)
        deliver(ledger, both)
    [(_, shared)] = charts(slack).items()
    titles = [m["files"][0]["title"] for m in shared]
    assert len(titles) == 2
    assert "idle_heap_growth" in titles[0] and "tm_lost joined the incident" in titles[1]
    assert ledger.backlog() == {}


def test_charts_turned_off_post_nothing_and_a_webhook_has_none(
    slack: SlackEmulator, tmp_path: Path
) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    both = sinks(slack, ledger, charts=False)
    record(ledger, both, alert())
    deliver(ledger, both)
    assert uploads(slack) == []
    assert ledger.counts()[("slack_chart", "unrouted")] == 1
    assert slack_chart_sink(None, lambda: config(slack), draw) is None


def test_a_token_without_files_write_refuses_the_chart_not_the_page(tmp_path: Path) -> None:
    scopes = ("chat:write", "channels:history")
    with SlackEmulator(token=TOKEN, channels=("#flink-alerts",), scopes=scopes) as emu:
        ledger = AlertLedger(tmp_path / "l.sqlite")
        both = sinks(emu, ledger)
        record(ledger, both, alert())
        deliver(ledger, both)
        assert len(emu.messages("#flink-alerts")) == 1 and emu.files() == []
        [failed] = ledger.deliveries(["failed"])
        assert failed.sink == "slack_chart" and "files:write" in (failed.error or "")


LOST_ANSWERS: dict[str, Callable[[SlackEmulator], None]] = {
    "500": lambda emu: emu.fail_next(
        1, 500, path_prefix="/api/files.completeUploadExternal", after_store=True
    ),
    "timeout": lambda emu: emu.stall_next(1, 3.0, path_prefix="/api/files.completeUploadExternal"),
    "cut": lambda emu: emu.cut_next(1, path_prefix="/api/files.completeUploadExternal"),
}


@pytest.mark.parametrize("lost", LOST_ANSWERS.values(), ids=LOST_ANSWERS.keys())
def test_an_upload_shared_without_an_answer_is_confirmed_not_posted_again(
    slack: SlackEmulator, tmp_path: Path, lost: Callable[[SlackEmulator], None]
) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    bot, chart = sinks(slack, ledger, timeout_s=1)
    record(ledger, (bot, chart), alert())
    dispatch.deliver(ledger, bot)
    lost(slack)
    with pytest.raises(RetryableDeliveryError):
        dispatch.deliver(ledger, chart)
    assert ledger.counts()[("slack_chart", "sending")] == 1  # outcome unknown
    assert dispatch.deliver(ledger, chart) == 0
    assert ledger.outcomes[("slack_chart", "confirmed")] == 1
    [(_, [shared])] = charts(slack).items()
    assert len(shared["files"]) == 1 and len(slack.files()) == 1


def test_after_a_crash_the_chart_is_found_if_it_was_posted_and_posted_if_not(
    slack: SlackEmulator, tmp_path: Path
) -> None:
    path = tmp_path / "l.sqlite"
    ledger = AlertLedger(path)
    both = sinks(slack, ledger)
    posted, cut_short = record(ledger, both, alert("posted"), alert("cut-short"))
    dispatch.deliver(ledger, both[0])
    for t in (posted, cut_short):
        ledger.mark("slack_chart", t.seq, "sending")
    both[1].send(posted)  # it arrived; the process died before the ledger heard

    restarted = AlertLedger(path)
    assert dispatch.deliver(restarted, sinks(slack, restarted)[1]) == 0
    assert restarted.outcomes[("slack_chart", "confirmed")] == 1
    assert restarted.outcomes[("slack_chart", "delivered")] == 1
    assert [len(files) for files in charts(slack).values()] == [1, 1]
    assert len(slack.files()) == 2
