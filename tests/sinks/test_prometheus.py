"""The driver's Prometheus exporter: exact sample values, and a real HTTP scrape."""

from __future__ import annotations

import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest, start_http_server

from conf import AppConfig
from conf.running import RunningConfig
from detectors import Alert, AlertStatus, Severity
from sinks import AlertLedger, Transition, transition_key
from sinks.prometheus import (
    ActiveAlerts,
    AlertCollector,
    ConfigCollector,
    DeliveryCollector,
    PipelineCollector,
    ProgressCollector,
    Pusher,
    SignalBoard,
    SignalCollector,
    SlackActionsCollector,
)


def alert(alert_id: str, status: AlertStatus, detector: str = "idle_heap_growth") -> Alert:
    return Alert(
        alert_id=alert_id,
        detector=detector,
        entity="tm:container_e05_1699999999999_0042_01_000003",
        status=status,
        severity=Severity.CRITICAL,
        event_time_ms=1,
        summary="heap floor +240 MB/h with zero input",
        tm_id="container_e05_1699999999999_0042_01_000003",
        job_id="3f4c2a9b7d1e4f60a8b5c2d1e0f9a7b3",
    )


def tr(seq: int, a: Alert, silenced_by: str | None = None) -> Transition:
    return Transition(seq, transition_key(a), a, silenced_by)


@dataclass
class P:
    input_rows_per_s: float = 120.0
    processed_rows_per_s: float = 300.0
    batch_ms: int = 1500
    state_rows: int = 80
    state_bytes: int = 250_200
    late_rows_dropped: int = 4
    watermark_ms: int | None = 1_700_000_000_000


@dataclass
class Stats:
    """The queries' counters, as :class:`~streaming.delivery.PipelineStats` keeps them."""

    kinds: dict[str, int] = field(default_factory=dict)
    dead_letters: dict[str, int] = field(default_factory=dict)
    detector_errors: dict[tuple[str, str], int] = field(default_factory=dict)
    entities_refused: dict[str, int] = field(default_factory=dict)
    state_damaged: int = 0
    ledger_errors: int = 0
    query_failures: dict[str, int] = field(default_factory=dict)
    held: int | None = None

    def entities(self) -> int | None:
        return self.held


@dataclass
class Ledger:
    outcomes: dict[tuple[str, str], int] = field(default_factory=dict)
    waiting: dict[str, int] = field(default_factory=dict)

    def backlog(self) -> dict[str, int]:
        return self.waiting


@dataclass
class Failures:
    errors: dict[str, int] = field(default_factory=dict)


@dataclass
class Sink:
    name: str


@dataclass
class Outs:
    """The detect query's outputs, as the delivery collector reads them."""

    ledger: Ledger = field(default_factory=Ledger)
    in_batch: Failures = field(default_factory=Failures)
    sinks: list[Sink] = field(default_factory=list)

    def delivery_sinks(self) -> list[Sink]:
        return self.sinks


@dataclass
class Reloads:
    succeeded: int = 0
    failed: int = 0
    active_hash: str = ""


@dataclass
class Progress:
    latest: dict[str, Any] = field(default_factory=dict)


def bare_registry(
    *,
    active: ActiveAlerts | None = None,
    cluster: str = "default",
    watermark_delay_s: float = 0.0,
    stats: Stats | None = None,
    outputs: Outs | None = None,
    board: SignalBoard | None = None,
    reloads: Reloads | None = None,
    progress: dict[str, Any] | None = None,
    actions: Any = None,
    clock: Any = None,
) -> CollectorRegistry:
    """A registry with each component's collector, over empty components but those given."""
    cfg = AppConfig(cluster=cluster)
    running = RunningConfig(
        cfg.model_copy(
            update={"spark": cfg.spark.model_copy(update={"watermark_delay_s": watermark_delay_s})}
        )
    )

    def in_force() -> str:
        return running.current.cluster

    reg = CollectorRegistry()
    reg.register(AlertCollector(active or ActiveAlerts(), in_force))
    reg.register(DeliveryCollector(outputs or Outs()))
    reg.register(SlackActionsCollector(actions))
    if board is not None:
        reg.register(SignalCollector(board, in_force))
    reg.register(PipelineCollector(stats or Stats()))
    reg.register(ConfigCollector(running, reloads))
    if clock is None:
        reg.register(ProgressCollector(Progress(progress or {})))
    else:
        reg.register(ProgressCollector(Progress(progress or {}), clock=clock))
    return reg


def registry_with(
    active: ActiveAlerts, reloads=(2, 1), board: SignalBoard | None = None
) -> CollectorRegistry:
    return bare_registry(
        active=active,
        cluster="prod-eu",
        watermark_delay_s=30.0,
        stats=Stats(
            kinds=Counter({"checkpoint_completed": 7, "metric": 30}),
            dead_letters=Counter({"invalid_json": 2}),
            detector_errors={("tm_lost", "skipped"): 2, ("tm_lost", "dropped"): 1},
            entities_refused={"idle_heap_growth": 40},
            state_damaged=3,
            ledger_errors=2,
            query_failures={"storage_full": 3},
            held=1234,
        ),
        outputs=Outs(
            Ledger(
                outcomes={("slack", "delivered"): 5, ("slack", "retry"): 2},
                waiting={"slack": 3, "file": 0},
            ),
            Failures({"file": 6, "slack": 0}),
            [Sink("file"), Sink("slack")],
        ),
        board=board,
        reloads=Reloads(reloads[0], reloads[1], "abc123def456"),
        progress={"flinkwatch-detect": P()},
        clock=lambda: 1_700_000_012.5,
    )


LABELS = {
    "detector": "idle_heap_growth",
    "severity": "critical",
    "cluster": "prod-eu",
    "job_id": "3f4c2a9b7d1e4f60a8b5c2d1e0f9a7b3",
    "job_name": "",
    "tm_id": "container_e05_1699999999999_0042_01_000003",
    "host": "",
    "silenced": "false",
}


def test_firing_alert_is_a_series_until_it_resolves() -> None:
    active = ActiveAlerts()
    reg = registry_with(active)
    active.observe([tr(1, alert("a1", AlertStatus.FIRING))])
    assert reg.get_sample_value("flinkwatch_alerts_active", LABELS) == 1.0
    active.observe([tr(2, alert("a1", AlertStatus.RESOLVED))])
    assert reg.get_sample_value("flinkwatch_alerts_active", LABELS) is None
    t = {"detector": "idle_heap_growth"}
    assert (
        reg.get_sample_value("flinkwatch_alert_transitions_total", {**t, "status": "firing"}) == 1.0
    )
    assert (
        reg.get_sample_value("flinkwatch_alert_transitions_total", {**t, "status": "resolved"})
        == 1.0
    )


def test_a_silenced_alert_is_marked_and_counted() -> None:
    active = ActiveAlerts()
    reg = registry_with(active)
    active.observe([tr(1, alert("a1", AlertStatus.FIRING), silenced_by="night-maintenance")])
    assert reg.get_sample_value("flinkwatch_alerts_active", {**LABELS, "silenced": "true"}) == 1.0
    assert reg.get_sample_value("flinkwatch_alerts_active", LABELS) is None
    assert (
        reg.get_sample_value(
            "flinkwatch_alerts_silenced_total",
            {"detector": "idle_heap_growth", "silence": "night-maintenance"},
        )
        == 1.0
    )


def test_an_escalation_after_the_logs_respelled_the_taskmanager_keeps_its_series() -> None:
    # Fired on the metrics' spelling; the escalation carries the logs' (the entity's
    # header learnt it in between). One incident, one series, not a second one.
    from detectors.correlation import Correlator

    scraped = alert("a1", AlertStatus.FIRING).model_copy(update={"tm_id": "localhost:40003_6cf67b"})
    up = scraped.model_copy(
        update={"status": AlertStatus.ESCALATED, "tm_id": "localhost:40003-6cf67b"}
    )
    c = Correlator()
    active = ActiveAlerts()
    reg = registry_with(active)
    active.observe([Transition(1, transition_key(scraped), scraped, incident=c.observe(scraped))])
    active.observe([Transition(2, transition_key(up), up, incident=c.observe(up))])
    body = generate_latest(reg).decode()
    assert body.count("flinkwatch_alerts_active{") == 1
    assert 'tm_id="localhost:40003_6cf67b"' in body


def test_open_incidents_survive_a_restart_through_the_ledger(tmp_path) -> None:
    ledger = AlertLedger(tmp_path / "ledger.sqlite")
    ledger.record(0, [alert("a1", AlertStatus.FIRING), alert("a2", AlertStatus.FIRING)], [])
    ledger.record(1, [alert("a2", AlertStatus.RESOLVED)], [])
    reg = registry_with(ActiveAlerts(seed=AlertLedger(tmp_path / "ledger.sqlite").active()))
    assert reg.get_sample_value("flinkwatch_alerts_active", LABELS) == 1.0
    body = generate_latest(reg).decode()
    assert body.count("flinkwatch_alerts_active{") == 1


def test_signals_are_gauges_per_entity_that_go_away_with_it() -> None:
    board = SignalBoard()
    reg = registry_with(ActiveAlerts(), board=board)
    job = {"job_id": "3f4c2a9b7d1e4f60a8b5c2d1e0f9a7b3", "job_name": "orders"}
    board.update(
        "checkpoint_creep",
        "job:3f4c",
        job,
        {"checkpoint_duration_last_seconds": 42.5, "checkpoint_duration_slope_seconds": 0.8},
    )
    tm = {"tm_id": "container_e05_1699999999999_0042_01_000003", "host": "worker-7"}
    board.update("idle_heap_growth", "tm:c3", tm, {"taskmanager_records_per_second": 0.0})
    labels = {"cluster": "prod-eu", **job}
    assert reg.get_sample_value("flinkwatch_checkpoint_duration_last_seconds", labels) == 42.5
    assert reg.get_sample_value("flinkwatch_checkpoint_duration_slope_seconds", labels) == 0.8
    assert (
        reg.get_sample_value(
            "flinkwatch_taskmanager_records_per_second", {"cluster": "prod-eu", **tm}
        )
        == 0.0
    )
    board.drop("checkpoint_creep", "job:3f4c")
    assert reg.get_sample_value("flinkwatch_checkpoint_duration_last_seconds", labels) is None


def test_a_flood_of_entities_gets_series_only_up_to_the_cap() -> None:
    board = SignalBoard(max_entities=3)
    reg = registry_with(ActiveAlerts(), board=board)
    for i in range(10):
        board.update("tm_lost", f"tm:{i}", {"tm_id": str(i)}, {"tm_lost": 1.0})
    board.update("tm_lost", "tm:0", {"tm_id": "0"}, {"tm_lost": 2.0})
    series = [s for s in reg.collect() if s.name == "flinkwatch_tm_lost"]
    assert sorted(x.labels["tm_id"] for x in series[0].samples) == ["0", "1", "2"]
    refused = {"detector": "tm_lost"}
    assert reg.get_sample_value("flinkwatch_signal_entities_refused_total", refused) == 7.0
    board.drop("tm_lost", "tm:1")  # one goes away: the next new one gets its series
    board.update("tm_lost", "tm:9", {"tm_id": "9"}, {"tm_lost": 1.0})
    assert (
        reg.get_sample_value("flinkwatch_tm_lost", {"cluster": "prod-eu", "tm_id": "9", "host": ""})
        == 1.0
    )


def test_a_signal_series_keeps_its_first_job_name_spelling() -> None:
    # Logs say "orders-enrich", Flink's metric reporters "orders_enrich": the series must
    # not flip between them with each batch.
    board = SignalBoard()
    reg = registry_with(ActiveAlerts(), board=board)
    job_id = "3f4c2a9b7d1e4f60a8b5c2d1e0f9a7b3"
    board.update(
        "restart_storm",
        "job:3f4c",
        {"job_id": job_id, "job_name": "orders-enrich"},
        {"job_restarts": 1.0},
    )
    board.update(
        "restart_storm",
        "job:3f4c",
        {"job_id": job_id, "job_name": "orders_enrich"},
        {"job_restarts": 2.0},
    )
    body = generate_latest(reg).decode()
    assert body.count("flinkwatch_job_restarts{") == 1
    labels = {"cluster": "prod-eu", "job_id": job_id, "job_name": "orders-enrich"}
    assert reg.get_sample_value("flinkwatch_job_restarts", labels) == 2.0


def test_pipeline_health_and_reload_outcomes_are_exported() -> None:
    reg = registry_with(ActiveAlerts())
    assert reg.get_sample_value("flinkwatch_events_total", {"kind": "metric"}) == 30.0
    assert reg.get_sample_value("flinkwatch_dead_letters_total", {"reason": "invalid_json"}) == 2.0
    assert reg.get_sample_value("flinkwatch_config_reloads_total", {"outcome": "success"}) == 2.0
    assert reg.get_sample_value("flinkwatch_config_reloads_total", {"outcome": "failure"}) == 1.0
    assert reg.get_sample_value("flinkwatch_config_info", {"hash": "abc123def456"}) == 1.0
    q = {"query": "flinkwatch-detect"}
    assert reg.get_sample_value("flinkwatch_batch_duration_seconds", q) == 1.5
    assert reg.get_sample_value("flinkwatch_state_bytes", q) == 250_200.0
    assert reg.get_sample_value("flinkwatch_late_rows_dropped_total", q) == 4.0
    assert reg.get_sample_value("flinkwatch_watermark_lag_seconds", q) == 12.5
    assert reg.get_sample_value("flinkwatch_watermark_delay_seconds") == 30.0
    slack = {"sink": "slack"}
    assert reg.get_sample_value("flinkwatch_deliveries_total", {**slack, "outcome": "retry"}) == 2.0
    assert reg.get_sample_value("flinkwatch_delivery_backlog", slack) == 3.0
    raised = {"detector": "tm_lost", "outcome": "dropped"}
    assert reg.get_sample_value("flinkwatch_detector_errors_total", raised) == 1.0
    refused = {"detector": "idle_heap_growth"}
    assert reg.get_sample_value("flinkwatch_entities_refused_total", refused) == 40.0
    assert reg.get_sample_value("flinkwatch_state_damaged_total") == 3.0


def test_sink_ledger_and_query_failures_are_counted_with_every_series_from_zero() -> None:
    reg = registry_with(ActiveAlerts())
    assert reg.get_sample_value("flinkwatch_sink_errors_total", {"sink": "file"}) == 6.0
    assert reg.get_sample_value("flinkwatch_sink_errors_total", {"sink": "slack"}) == 0.0
    assert reg.get_sample_value("flinkwatch_ledger_errors_total") == 2.0
    failures = "flinkwatch_query_failures_total"
    assert reg.get_sample_value(failures, {"cause": "storage_full"}) == 3.0
    assert reg.get_sample_value(failures, {"cause": "other"}) == 0.0


def test_the_entities_the_detect_query_holds_are_a_gauge_once_counted() -> None:
    assert registry_with(ActiveAlerts()).get_sample_value("flinkwatch_detect_entities") == 1234.0
    unknown = bare_registry()
    assert unknown.get_sample_value("flinkwatch_detect_entities") is None


def test_metrics_are_served_over_http() -> None:
    active = ActiveAlerts()
    active.observe([tr(1, alert("a1", AlertStatus.FIRING))])
    server, thread = start_http_server(0, addr="127.0.0.1", registry=registry_with(active))
    port = server.server_port
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            body = response.read().decode()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    assert (
        'flinkwatch_alerts_active{cluster="prod-eu",detector="idle_heap_growth",host="",'
        'job_id="3f4c2a9b7d1e4f60a8b5c2d1e0f9a7b3"'
    ) in body
    assert 'flinkwatch_dead_letters_total{reason="invalid_json"} 2.0' in body


def test_pusher_puts_the_registry_under_job_and_cluster_and_survives_an_outage() -> None:
    import http.server
    import threading

    got: list[tuple[str, str, bytes]] = []

    class Gateway(http.server.BaseHTTPRequestHandler):
        def do_PUT(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers["Content-Length"]))
            got.append((self.command, self.path, body))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Gateway)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    active = ActiveAlerts()
    active.observe([tr(1, alert("a1", AlertStatus.FIRING))])
    try:
        down = Pusher(
            registry_with(active), "http://127.0.0.1:9", "flinkwatch", 1.0, lambda: "prod-eu"
        )
        assert down.push_once() is False and down.failing
        url = f"http://127.0.0.1:{server.server_port}"
        pusher = Pusher(registry_with(active), url, "flinkwatch", 1.0, lambda: "prod-eu")
        assert pusher.push_once() is True
    finally:
        server.shutdown()
        server.server_close()
    [(method, path, body)] = got
    assert (method, path) == ("PUT", "/metrics/job/flinkwatch/cluster/prod-eu")
    assert b"flinkwatch_alerts_active{" in body and b'detector="idle_heap_growth"' in body


def test_a_watermark_ahead_of_the_clock_shows_as_a_negative_lag() -> None:
    ahead = P(watermark_ms=1_700_000_000_000 + 3_600_000)
    reg = bare_registry(
        cluster="c", progress={"flinkwatch-detect": ahead}, clock=lambda: 1_700_000_000.0
    )
    lag = reg.get_sample_value("flinkwatch_watermark_lag_seconds", {"query": "flinkwatch-detect"})
    assert lag == -3600.0


def test_error_and_refusal_counters_exist_at_zero_for_every_detector() -> None:
    # A panel or rule with rate() needs the series before the first error, not from it.
    from detectors import REGISTRY

    reg = registry_with(ActiveAlerts(), board=SignalBoard())
    for det in REGISTRY:
        for outcome in ("skipped", "dropped"):
            labels = {"detector": det, "outcome": outcome}
            want = 1.0 if (det, outcome) == ("tm_lost", "dropped") else 0.0
            if (det, outcome) == ("tm_lost", "skipped"):
                want = 2.0
            assert reg.get_sample_value("flinkwatch_detector_errors_total", labels) == want
        assert (
            reg.get_sample_value("flinkwatch_signal_entities_refused_total", {"detector": det})
            == 0.0
        )
        assert (
            reg.get_sample_value("flinkwatch_entities_refused_total", {"detector": det}) is not None
        )
