"""The composition root: the parts a config asks for, one config reference, an ordered close."""

from __future__ import annotations

import io
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from matplotlib import image

import streaming.runtime
from conf import AppConfig, ConfigError, load_config
from conf.reload import ConfigWatcher
from conf.running import RunningConfig
from detectors import Alert, AlertStatus, Severity
from lab.slack import SlackEmulator
from sinks.dispatch import deliver
from sinks.slack import SlackBotSink, SlackWebhookSink
from streaming.runtime import Runtime, StartError
from streaming.supervise import run_forever
from tests.sinks.charts.alerts import failures_alert
from tests.streaming.supervised import QuietPipeline

TOKEN = "xoxb-runtime-test"  # noqa: S105 - the emulator's
ENV = {
    "SLACK_BOT_TOKEN": TOKEN,
    "SLACK_WEBHOOK_URL": "http://127.0.0.1:1/hook",
    "SLACK_SIGNING_SECRET": "s3cret",
    "HOOK_SECRET": "k",
}


def app(tmp_path: Path, **sections: Any) -> AppConfig:
    return AppConfig.model_validate({"output": {"state_dir": str(tmp_path / "state")}, **sections})


def names(rt: Runtime) -> list[str]:
    return [s.name for s in rt.outputs.delivery_sinks()]


def alert(alert_id: str, job: str) -> Alert:
    return Alert(
        alert_id=alert_id,
        detector="checkpoint_failures",
        entity=f"job:{job}",
        status=AlertStatus.FIRING,
        severity=Severity.WARNING,
        event_time_ms=1_700_000_000_000,
        summary=f"3 checkpoints of {job} expired",
        job_id=job,
    )


def test_a_config_without_receivers_gets_the_alert_file_alone_and_no_dispatcher(
    tmp_path: Path,
) -> None:
    with Runtime(app(tmp_path), env={}, start=False) as rt:
        assert names(rt) == ["file"]
        assert (rt.slack, rt.alertmanager, rt.webhooks, rt.further) == (None, None, [], [])
        assert (rt.outputs.dispatcher, rt.resender, rt.actions) == (None, None, None)
        # What a run keeps beside the file: the Prometheus view, incidents, silences.
        assert [o.name for o in rt.outputs.observers] == ["prometheus", "console"]
        assert rt.outputs.correlator is not None and rt.outputs.silences is not None


BOT = {"mode": "bot", "api_url": "http://127.0.0.1:1/api/", "channel": "#flink-alerts"}
ROUTE_ON = [{"channel": "#team-a", "continue": True}, {"channel": "#team-b"}]


@pytest.mark.parametrize(
    ("sections", "wanted"),
    [
        ({"slack": {"mode": "webhook"}}, ["file", "slack"]),
        # A bot posts the incident's chart into its thread: a sink after the channels.
        ({"slack": BOT}, ["file", "slack", "slack_chart"]),
        # Two routes that continue: an incident can reach three channels, each a sink.
        (
            {"slack": {**BOT, "routes": [*ROUTE_ON[:1], *ROUTE_ON[:1], ROUTE_ON[1]]}},
            ["file", "slack", "slack:2", "slack:3", "slack_chart"],
        ),
        ({"alertmanager": {"urls": ["http://127.0.0.1:1"]}}, ["file", "alertmanager"]),
        (
            {
                "slack": {**BOT, "routes": ROUTE_ON},
                "alertmanager": {"urls": ["http://127.0.0.1:1"]},
                "webhooks": [
                    {"name": "oncall", "url": "http://127.0.0.1:1/x", "secret": "${HOOK_SECRET}"}
                ],
            },
            ["file", "slack", "alertmanager", "slack:2", "webhook:oncall", "slack_chart"],
        ),
    ],
    ids=["slack-webhook", "slack-bot", "continue-routes", "alertmanager", "everything"],
)
def test_each_receiver_the_config_names_is_a_sink_the_dispatcher_drains(
    tmp_path: Path, sections: dict[str, Any], wanted: list[str]
) -> None:
    with Runtime(app(tmp_path, **sections), env=ENV, start=False) as rt:
        assert names(rt) == wanted
        assert rt.outputs.dispatcher is not None
        assert [s.name for s in rt.outputs.dispatcher.sinks] == wanted[1:]
        mode = sections.get("slack", {}).get("mode")
        want = {"webhook": SlackWebhookSink, "bot": SlackBotSink}.get(mode, type(None))
        assert type(rt.slack) is want
        assert [s.name for s in rt.further] == [n for n in wanted if n.startswith("slack:")]
        # Alertmanager ends alerts not posted again: a re-sender comes with its sink.
        assert (rt.resender is not None) == ("alertmanager" in wanted)


def test_the_buttons_come_with_the_bot_and_the_endpoint_only_when_started(tmp_path: Path) -> None:
    cfg = app(tmp_path, slack={**BOT, "interactivity_port": 0, "interactivity_host": "127.0.0.1"})
    with Runtime(cfg, env=ENV, start=False) as rt:
        assert rt.actions is not None and rt.actions_server is None
    with pytest.raises(ConfigError, match="SLACK_SIGNING_SECRET"):
        Runtime(cfg, env={"SLACK_BOT_TOKEN": TOKEN}, start=False)


def test_a_missing_secret_or_an_unusable_ledger_stops_the_build_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"\$SLACK_BOT_TOKEN"):
        Runtime(app(tmp_path, slack=BOT), env={}, start=False)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "state").write_text("a file where the state directory should be")
    with pytest.raises(StartError, match=r"alert ledger .*ledger.sqlite cannot be opened"):
        Runtime(app(tmp_path / "full"), env={}, start=False)


def test_a_replay_writes_the_ledger_and_its_file_and_nothing_else(tmp_path: Path) -> None:
    # The live job's receivers and secrets are not a replay's business.
    cfg = app(tmp_path, slack=BOT, alertmanager={"urls": ["http://127.0.0.1:1"]})
    out = tmp_path / "replayed.jsonl"
    with Runtime(
        cfg, replay=True, ledger_path=tmp_path / "work" / "l.sqlite", alerts_path=out
    ) as rt:
        assert names(rt) == ["file"] and rt.outputs.sinks[0].path == out  # type: ignore[attr-defined]
        assert rt.outputs.dispatcher is None and rt.outputs.observers == ()
        assert rt.outputs.silences is None and rt.outputs.signals is None
        assert rt.outputs.correlator is not None
    assert not cfg.output.ledger_path.exists()


def test_a_swap_is_what_the_sinks_and_the_correlator_read_next(tmp_path: Path) -> None:
    with SlackEmulator(token=TOKEN, channels=("#flink-alerts", "#flink-other")) as emu:
        first = app(tmp_path, slack={**BOT, "api_url": emu.base_url})
        with Runtime(first, env=ENV, start=False) as rt:
            assert rt.slack is not None
            rt.ledger.record(0, [alert("a1", "7f")], [rt.slack])
            deliver(rt.ledger, rt.slack)
            new = app(
                tmp_path,
                cluster="renamed",
                slack={**BOT, "api_url": emu.base_url, "channel": "#flink-other"},
                correlation={"window_s": 60},
            )
            rt.swap(new)
            assert rt.cfg is new
            assert rt.outputs.correlator is not None
            assert rt.outputs.correlator.params.window_s == 60
            rt.ledger.record(1, [alert("a2", "8e")], [rt.slack])
            deliver(rt.ledger, rt.slack)
        (before,) = emu.messages("#flink-alerts")
        assert "7f" in str(before["blocks"]) and "renamed" not in str(before["blocks"])
        (moved,) = emu.messages("#flink-other")
        assert "8e" in str(moved["blocks"]) and "renamed" in str(moved["blocks"])


def test_a_rule_a_reload_adds_pages_in_slack_with_its_own_runbook(tmp_path: Path) -> None:
    rule = {"name": "expiry_burst", "kind": "frequency", "kinds": ["checkpoint_expired"]}
    rule |= {"count": 2, "window_s": 600, "runbook": "Look at the checkpoint storage."}
    with SlackEmulator(token=TOKEN, channels=("#flink-alerts",)) as emu:
        slack = {**BOT, "api_url": emu.base_url}
        with Runtime(app(tmp_path, slack=slack), env=ENV, start=False) as rt:
            assert rt.slack is not None
            rt.swap(app(tmp_path, slack=slack, rules=[rule]))
            paged = alert("r1", "7f").model_copy(update={"detector": "expiry_burst"})
            rt.ledger.record(0, [paged], [rt.slack])
            deliver(rt.ledger, rt.slack)
        (message,) = emu.messages("#flink-alerts")
        assert "expiry_burst: 7f" in str(message["blocks"])
        assert "*What to do*: Look at the checkpoint storage." in str(message["blocks"])


@dataclass
class FakeQuery:
    name: str = "flinkwatch-detect"
    isActive: bool = True  # noqa: N815 - Spark's name

    def stop(self) -> None:
        self.isActive = False


@dataclass
class FakePipeline(QuietPipeline):
    """Records the runtime's config at each start of the queries."""

    config: RunningConfig
    runtime: Runtime
    seen: list[tuple[int, int]] = field(default_factory=list)
    spark: Any = None

    def start(self) -> list[FakeQuery]:
        self.seen.append(
            (self.cfg.correlation.max_members, self.runtime.cfg.correlation.max_members)
        )
        return [FakeQuery()]


def test_each_part_registers_its_own_collector_in_the_runtimes_one_registry(
    tmp_path: Path,
) -> None:
    from prometheus_client import CollectorRegistry

    from streaming.delivery import PipelineStats
    from streaming.listener import ProgressLogger

    registry = CollectorRegistry()
    stats = PipelineStats()
    with Runtime(app(tmp_path, cluster="prod"), env={}, start=False, registry=registry) as rt:
        assert rt.registry is registry
        rt.register_metrics(FakeStats(stats), ProgressLogger(), None)  # type: ignore[arg-type]
        collectors = {type(c).__name__ for c in registry._collector_to_names}
        assert collectors == {
            "AlertCollector",
            "DeliveryCollector",
            "SlackActionsCollector",
            "SignalCollector",
            "PipelineCollector",
            "ConfigCollector",
            "ProgressCollector",
        }
        stats.kinds["checkpoint_completed"] += 2
        assert (
            registry.get_sample_value("flinkwatch_events_total", {"kind": "checkpoint_completed"})
            == 2
        )
        assert registry.get_sample_value("flinkwatch_sink_errors_total", {"sink": "file"}) == 0
        # The cluster label is the config in force: a swap moves it.
        firing = alert("a1", "7f")
        rt.outputs.observers[0].observe([rt.ledger.record(0, [firing], [])[0]])
        labels = {"detector": "checkpoint_failures", "job_id": "7f", "cluster": "prod"}
        assert _active(registry, labels) == 1.0
        rt.swap(app(tmp_path, cluster="prod-2"))
        assert _active(registry, {**labels, "cluster": "prod-2"}) == 1.0


@dataclass
class FakeStats:
    """A pipeline as :meth:`Runtime.register_metrics` reads it: its counters."""

    stats: Any


def _active(registry: Any, labels: dict[str, str]) -> float | None:
    for fam in registry.collect():
        for s in fam.samples:
            if s.name == "flinkwatch_alerts_active" and labels.items() <= s.labels.items():
                return float(s.value)
    return None


def test_a_reload_swaps_the_runtimes_config_before_the_queries_start_again(
    tmp_path: Path,
) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(f"reload_interval_s: 0.01\noutput: {{state_dir: {tmp_path}}}\n")
    first = load_config(f)
    with Runtime(first, env={}, start=False) as rt:
        p = FakePipeline(rt.running, rt)
        polls = {"n": 0}

        def should_stop() -> bool:
            polls["n"] += 1
            if polls["n"] == 3:
                f.write_text(
                    f"reload_interval_s: 0.01\noutput: {{state_dir: {tmp_path}}}\n"
                    "correlation: {max_members: 5}\n"
                )
            return len(p.seen) >= 2

        watcher = ConfigWatcher(f, first)
        assert run_forever(p, should_stop=should_stop, watcher=watcher, on_reload=rt.swap) == 0  # type: ignore[arg-type]
        assert p.seen == [(20, 20), (5, 5)]
        assert rt.outputs.correlator is not None
        assert rt.outputs.correlator.params.max_members == 5


class FakeSpark:
    def __init__(self, order: list[str]) -> None:
        self.order = order
        self.streams = self
        self.sparkContext = self  # noqa: N815 - Spark's name
        self._jvm = None  # as after a JVM's end: no state store maintenance to stop

    def removeListener(self, _listener: object) -> None:  # noqa: N802 - Spark's name
        self.order.append("listener removed")

    def stop(self) -> None:
        self.order.append("spark")


def test_close_stops_everything_once_spark_first_the_ledger_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    order: list[str] = []

    def spy(name: str, fn: Any) -> Any:
        def called(*args: Any, **kwargs: Any) -> Any:
            order.append(name)
            return fn(*args, **kwargs)

        return called

    with SlackEmulator(token=TOKEN, channels=("#flink-alerts",)) as emu:
        cfg = app(
            tmp_path,
            slack={
                **BOT,
                "api_url": emu.base_url,
                "interactivity_port": 0,
                "interactivity_host": "127.0.0.1",
            },
            alertmanager={"urls": ["http://127.0.0.1:1"]},
        )
        rt = Runtime(cfg, env=ENV)
        # The route check runs in the background; it writes what it found to the ledger.
        for t in threading.enumerate():
            if t.name == "flinkwatch-slack-routes":
                t.join(30)
        rt.attach(FakeSpark(order), object())  # type: ignore[arg-type]
        assert rt.resender is not None and rt.actions_server is not None
        assert rt.outputs.dispatcher is not None
        rt.resender.stop = spy("resender", rt.resender.stop)  # type: ignore[method-assign]
        rt.actions_server.close = spy("buttons", rt.actions_server.close)  # type: ignore[method-assign]
        rt.outputs.dispatcher.stop = spy("dispatcher", rt.outputs.dispatcher.stop)  # type: ignore[method-assign]
        monkeypatch.setattr(streaming.runtime, "flush", spy("flush", streaming.runtime.flush))
        rt.ledger.close = spy("ledger", rt.ledger.close)  # type: ignore[method-assign]
        with rt:
            assert rt.close() == "all delivered"
        assert rt.close() == "all delivered"  # and nothing stopped twice
    assert order == [
        "listener removed",
        "spark",
        "resender",
        "buttons",
        "dispatcher",
        "flush",
        "ledger",
    ]


def test_a_run_pages_an_incident_then_posts_its_real_chart_in_the_thread(tmp_path: Path) -> None:
    # The product's wiring, end to end but for Spark: the real renderer, the real client,
    # the ledger and the dispatcher; the page first, its chart once, in its thread.
    fired = failures_alert()
    with SlackEmulator(token=TOKEN, channels=("#flink-alerts",)) as emu:
        cfg = app(tmp_path, slack={**BOT, "api_url": emu.base_url})
        with Runtime(cfg, env=ENV, start=False) as rt:
            out = rt.outputs
            assert out.correlator is not None and out.dispatcher is not None
            out.ledger.record(0, [fired], out.delivery_sinks(), correlate=out.correlator.observe)
            while not out.dispatcher.drain_once():
                pass
            out.ledger.record(0, [fired], out.delivery_sinks())  # a replayed batch
            assert out.dispatcher.drain_once()
        (page,) = emu.messages("#flink-alerts")
        assert "expired" in page["text"]
        (reply,) = page["replies"]
        (shown,) = reply["files"]
        (stored,) = emu.files()
        assert stored["id"] == shown["id"] and stored["completed"]
        png = stored["content"]
        assert png.startswith(b"\x89PNG\r\n\x1a\n") and 5_000 < len(png) < 150_000
        assert image.imread(io.BytesIO(png)).shape[:2] == (360, 720)


def test_alertmanager_is_drained_by_the_dispatcher_with_its_own_back_off(tmp_path) -> None:
    from conf import AppConfig
    from sinks import AlertLedger
    from sinks.alertmanager import alertmanager_sink
    from streaming.runtime import build_outputs as _outputs

    cfg = AppConfig.model_validate(
        {
            "output": {"state_dir": str(tmp_path / "state")},
            "alertmanager": {"urls": ["http://127.0.0.1:1"], "retry_backoff_s": 1},
        }
    )
    ledger = AlertLedger(tmp_path / "l.sqlite")
    am = alertmanager_sink(lambda: cfg.alertmanager, lambda: cfg.cluster, ledger)
    out = _outputs(cfg, ledger, None, am)
    try:
        assert [s.name for s in out.dispatcher.sinks] == ["alertmanager"]
        assert out.dispatcher._backoffs["alertmanager"] == (1.0, 60.0)
        assert [s.name for s in out.delivery_sinks()] == ["file", "alertmanager"]
    finally:
        out.dispatcher.stop()
    # Nothing configured: no dispatcher thread at all.
    assert _outputs(AppConfig(), ledger, None, None).dispatcher is None


def test_each_webhook_is_drained_by_the_dispatcher_with_its_own_back_off(tmp_path) -> None:
    from conf import AppConfig
    from sinks import AlertLedger
    from sinks.webhook import webhook_sinks
    from streaming.runtime import build_outputs as _outputs

    hook = {"url": "http://127.0.0.1:1/x", "secret": "${S}"}
    cfg = AppConfig.model_validate(
        {
            "output": {"state_dir": str(tmp_path / "state")},
            "webhooks": [
                {"name": "oncall", **hook, "retry_backoff_s": 1},
                {"name": "chat", **hook, "max_backoff_s": 10},
            ],
        }
    )
    ledger = AlertLedger(tmp_path / "l.sqlite")
    hooks = webhook_sinks(cfg.webhooks, lambda: cfg.cluster, env={"S": "k"})
    out = _outputs(cfg, ledger, None, None, hooks)
    try:
        assert [s.name for s in out.dispatcher.sinks] == ["webhook:oncall", "webhook:chat"]
        assert out.dispatcher._backoffs["webhook:oncall"] == (1.0, 60.0)
        assert out.dispatcher._backoffs["webhook:chat"] == (5.0, 10.0)
        assert [s.name for s in out.delivery_sinks()] == ["file", "webhook:oncall", "webhook:chat"]
    finally:
        out.dispatcher.stop()


def test_slack_routes_are_checked_at_start_and_after_a_reload_that_changes_them(
    tmp_path, caplog
) -> None:
    from conf import AppConfig
    from lab.slack import SlackEmulator
    from sinks import AlertLedger
    from sinks.slack import SlackBotSink
    from streaming.runtime import route_checks

    with SlackEmulator(channels=("#flink-alerts",)) as emu:
        slack = {"mode": "bot", "api_url": emu.base_url, "channel": "#flink-alerts"}
        start = AppConfig.model_validate({"slack": slack})
        current = {"cfg": start}
        sink = SlackBotSink(
            emu.token, AlertLedger(tmp_path / "l.sqlite"), lambda: current["cfg"].slack, lambda: "c"
        )
        check = route_checks(sink, run=lambda work: work())
        check(start)
        check(start)  # every pass of the run loop: no change, no new check
        fixed = start.model_copy(update={"cluster": "renamed"})
        check(fixed)  # a reload that leaves channel and routes alone
        assert [p for p, _ in emu.requests].count("/api/auth.test") == 1
        typo = {**slack, "routes": [{"channel": "#flink-pagr"}]}
        current["cfg"] = AppConfig.model_validate({"slack": typo})
        check(current["cfg"])
        assert [p for p, _ in emu.requests].count("/api/auth.test") == 2
    assert "slack: route slack.routes[0] (#flink-pagr): channel not found" in caplog.text
    # Webhook mode: nothing to check, nothing started.
    started: list[object] = []
    route_checks(object(), run=started.append)(start)
    assert started == []
