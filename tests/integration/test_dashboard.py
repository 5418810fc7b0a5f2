"""Every panel of the Grafana dashboard returns data from a real Prometheus.

One ``flinkwatch run`` process reads a simulated Flink fleet from the real broker: four
jobs, each with one of the mission incidents (checkpoint expiry, late barrier acks with a
host skew, checkpoint creep, the idle heap leak), and four more of which two lose a
TaskManager (a memory kill, a heap OutOfMemoryError), in the wording of several Flink versions,
plus a few malformed records and a silence for one detector. Debian's Prometheus scrapes
it, and each panel query is sent to Prometheus's query API after the substitution Grafana
makes ("All" selected: ``allValue``; ``$__rate_interval``: 4 x the datasource's scrape
interval, as Grafana computes it for a short range). The variables' own queries go to the
label-values API Grafana uses for them.
"""

from __future__ import annotations

import heapq
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from lab.fleet import FleetSpec, Incident, generate, job_id, produce
from lab.promserver import PrometheusServer
from tests.conftest import REPO, RUN_SPARK_OPTIONS, wait_until, wait_while_progressing
from tests.deploy.manifests import (
    DOCKER,
    Target,
    all_values,
    dashboard,
    grafana_escape,
    label_values_query,
    load_yaml,
    render,
    targets,
    variables,
)
from tests.integration.test_prometheus_server import need_binary

pytestmark = [pytest.mark.kafka]

LOGS, METRICS = "dash.logs", "dash.metrics"
CLUSTER = "dash-test"
SILENCE = "late-acks-drill"
SIMULATED_S = 12 * 60

#: One incident of each mission kind, early enough to fire within the simulated span.
SPEC = FleetSpec(
    jobs=4,
    tms_per_job=2,
    incidents=(
        Incident("checkpoint_expiry", 0, 60.0),
        Incident("late_acks_skew", 1, 60.0),
        Incident("checkpoint_creep", 2, 30.0),
        Incident("idle_heap_leak", 3, 30.0),
    ),
    heap_leak_mb_per_h=1200.0,
    creep_per_checkpoint=0.12,
)

#: Four more jobs whose TaskManagers die, for the failure panels: a container killed for
#: memory (job 4) and a heap OutOfMemoryError (job 7: a Fluent Bit envelope names the pod,
#: so the TaskManager's own FATAL line has an identity). Both jobs fail over and restart.
SPEC_B = FleetSpec(
    jobs=4,
    first_job=4,
    tms_per_job=2,
    metric_interval_s=60,
    chatter_per_checkpoint=0,
    incidents=(Incident("tm_memory_kill", 4, 120.0), Incident("tm_heap_oom", 7, 120.0)),
)

#: Windows a 12-minute fleet can fill (the defaults want hours of history), as bench/peer.py.
DETECTORS = {
    "checkpoint_creep": {
        "window": 24,
        "min_samples": 12,
        "checkpoint_timeout_s": 60,
        "min_duration_ms": 6000,
    },
    "idle_heap_growth": {"bucket_s": 60, "window_s": 420, "min_buckets": 6},
    "checkpoint_state_growth": {"window_s": 600},
}

#: Records that must end as dead letters, by reason.
MALFORMED = {
    LOGS: [b""],  # empty
    METRICS: [
        b"{not json",  # invalid_json
        b'{"name": "flink_jobmanager_numRunningJobs", "value": "many", "timestamp": 1763800000000}',
    ],
}
DEAD_LETTER_REASONS = {"empty", "invalid_json", "bad_type"}


def rate_interval() -> str:
    """Grafana's ``$__rate_interval`` for a short range: 4 x the datasource's timeInterval."""
    (ds,) = load_yaml(DOCKER / "grafana/provisioning/datasources/prometheus.yaml")["datasources"]
    seconds = int(re.fullmatch(r"(\d+)s", ds["jsonData"]["timeInterval"])[1])  # type: ignore[index]
    return f"{4 * seconds}s"


@dataclass
class Stack:
    """The running job, the Prometheus scraping it, and what the panels returned."""

    prom: PrometheusServer
    metrics_port: int
    results: dict[Target, list[dict[str, Any]]] = field(default_factory=dict)
    #: Every reason the dead-letter panel showed while the panels filled: a rate over a
    #: few seconds shows each burst for that long only, and the logs' and the metrics'
    #: dead letters need not arrive within the same few seconds.
    dead_reasons: set[str] = field(default_factory=set)
    #: The evaluation time (Unix seconds) of the last poll, and of every query after it.
    at: float = 0.0

    def poll(self, targets: list[Target], values: dict[str, str]) -> bool:
        """Query every panel once; whether all show data and every dead letter was seen.

        Every panel is evaluated at the same instant, as one dashboard refresh is: queried
        one after another at Prometheus's "now", an incident that opened between two
        panels' queries was in one panel and not the other (a CI run's failure). The
        instant is the newest finished scrape's: a scrape's samples carry its start time
        but are seen only once it ends, so a scrape under way at "now" would still split
        the panels.
        """
        self.at = self.last_scrape()
        self.results = {t: self.query(t, values) for t in targets}
        for t, rows in self.results.items():
            if t.panel == "Dead letters per second":
                self.dead_reasons |= {r["metric"]["reason"] for r in rows}
        return all(self.results.values()) and self.dead_reasons >= DEAD_LETTER_REASONS

    def last_scrape(self) -> float:
        """When the job's newest finished scrape began (Unix seconds); now before the first."""
        rows = self.prom.query('timestamp(up{job="flinkwatch"})')
        return max((float(r["value"][1]) for r in rows), default=time.time())

    def query(self, t: Target, values: dict[str, str]) -> list[dict[str, Any]]:
        """A panel's query with these variables, at the instant of the last poll."""
        return self.prom.query(render(t.expr, values, rate_interval()), self.at)

    def label_values(self, var: str, values: dict[str, str]) -> list[str]:
        selector, label = label_values_query(variables(dashboard())[var]["query"])
        params = {"match[]": render(selector, values, rate_interval())} if selector else None
        return sorted(self.prom.api(f"label/{label}/values", params))


def _metrics_port(log: str) -> int | None:
    """The port the run's /metrics listens on, from its log (``metrics.port: 0``)."""
    m = re.search(r"metrics: https?://127\.0\.0\.1:(\d+)/metrics", log)
    return int(m.group(1)) if m else None


def _metrics_up(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            return b"flinkwatch_config_info" in r.read()
    except OSError:
        return False


#: The job's counters that move while it works through the fleet.
PROGRESS = ("flinkwatch_events_total", "flinkwatch_alert_transitions_total")


def _counters(port: int) -> tuple[float, ...]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
            text = r.read().decode()
    except OSError:
        return ()
    sums = dict.fromkeys(PROGRESS, 0.0)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in sums:
                sums[sample.name] += sample.value
    return tuple(sums.values())


@pytest.fixture(scope="module")
def stack(kafka: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    work = tmp_path_factory.mktemp("dashboard")
    kafka.create_topics(LOGS, METRICS)
    # The fleet ends now, so the job's watermark and its timers sit where a live job's would.
    start_ms = int(time.time() * 1000) - SIMULATED_S * 1000
    fleet = heapq.merge(
        generate(SPEC, start_ms, SIMULATED_S),
        generate(SPEC_B, start_ms, SIMULATED_S),
        key=attrgetter("time_ms"),
    )
    sent = produce(fleet, kafka.bootstrap, LOGS, METRICS)
    assert sent > 1000
    for topic, values in MALFORMED.items():
        kafka.produce(topic, values)
    conf = work / "flinkwatch.yaml"
    conf.write_text(
        yaml.safe_dump(
            {
                "kafka": {
                    "bootstrap_servers": kafka.bootstrap,
                    "logs_topic": LOGS,
                    "metrics_topic": METRICS,
                },
                # The whole fleet (12 minutes of it) is on the raw topics before the job
                # starts: its catch-up reads logs and metrics unevenly, and with the default
                # 30 s delay the topic read behind lost rows as late (and the panels their
                # incidents) on some runs. A delay over the fleet's span loses none.
                "spark": {
                    "trigger_interval_s": 1.0,
                    "watermark_delay_s": 900,
                    "options": RUN_SPARK_OPTIONS,
                },
                "output": {"state_dir": str(work / "state"), "console": False},
                # Its own port, as the kernel gives it: a port the test picked and freed
                # for it was once taken first by the run's own PySpark accumulator server.
                "metrics": {"port": 0},
                "cluster": CLUSTER,
                "silences": [
                    {
                        "name": SILENCE,
                        "matchers": {"detector": "late_barrier_acks"},
                        "starts_at": "2000-01-01T00:00:00Z",
                        "ends_at": "2100-01-01T00:00:00Z",
                    }
                ],
                "detectors": DETECTORS,
            }
        )
    )
    log = (work / "run.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streaming.cli", "run", "--config", str(conf)],
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        wait_until(
            lambda: _metrics_port((work / "run.log").read_text()) is not None,
            timeout=240,
            what="flinkwatch's /metrics to listen",
        )
        port = _metrics_port((work / "run.log").read_text())
        assert port is not None
        wait_until(lambda: _metrics_up(port), timeout=60, what="flinkwatch's /metrics")
        with PrometheusServer(
            need_binary(), work / "prom", [f"127.0.0.1:{port}"], scrape_interval_s=1.0
        ) as prom:
            s = Stack(prom, port)
            everything = targets(dashboard())
            values = all_values(dashboard())

            def progress() -> tuple[int, tuple[float, ...]]:
                # The job still working through the fleet (its counters move) or the panels
                # still filling: on a busy machine this takes longer, not forever.
                assert proc.poll() is None, (work / "run.log").read_text()[-3000:]
                return sum(bool(r) for r in s.results.values()), _counters(port)

            try:
                wait_while_progressing(
                    lambda: s.poll(everything, values), progress, what="every panel to fill"
                )
            except AssertionError as exc:
                # The tests below name the panels still empty.
                print(exc)  # noqa: T201
            yield s
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def test_every_panel_query_returns_data(stack: Stack) -> None:
    empty = [f"{t.panel} [{t.ref_id}]: {t.expr}" for t, r in stack.results.items() if not r]
    assert not empty, "panels without data:\n" + "\n".join(empty)
    assert len(stack.results) >= 30


def test_open_incident_panels_show_every_firing_detector_by_label(stack: Stack) -> None:
    by_title = {t.panel: r for t, r in stack.results.items()}
    rows = [r["metric"] for r in by_title["Open incidents"]]
    expiring = job_id(SPEC, 0)
    assert {("checkpoint_failures", expiring, "false", CLUSTER)} <= {
        (m["detector"], m.get("job_id"), m["silenced"], m["cluster"]) for m in rows
    }
    # Late acks follow expiries too, so the expiring job may have a late-ack incident as well.
    silenced = {(m["detector"], m.get("job_id")) for m in rows if m["silenced"] == "true"}
    assert ("late_barrier_acks", job_id(SPEC, 1)) in silenced
    assert {detector for detector, _ in silenced} == {"late_barrier_acks"}
    assert float(by_title["Silenced"][0]["value"][1]) == len(silenced)
    (silenced_transitions,) = by_title["Silenced transitions"]
    assert silenced_transitions["metric"] == {"detector": "late_barrier_acks", "silence": SILENCE}
    # The per-detector graph has a series for every detector with an open incident.
    graphed = {r["metric"]["detector"] for r in by_title["Open incidents by detector"]}
    assert graphed == {m["detector"] for m in rows}


def test_signal_panels_show_the_incident_entities(stack: Stack) -> None:
    by_title: dict[str, list[dict[str, Any]]] = {}
    for t, r in stack.results.items():
        by_title.setdefault(t.panel, []).extend(r)
    expired = {
        r["metric"]["job_id"]: float(r["value"][1])
        for r in by_title["Failed checkpoints in window"]
        if r["metric"]["__name__"] == "flinkwatch_checkpoints_expired"
    }
    assert expired[job_id(SPEC, 0)] >= 3
    late = {r["metric"]["job_id"]: float(r["value"][1]) for r in by_title["Late barrier acks"]}
    assert late[job_id(SPEC, 1)] > 0
    growth = by_title["Heap floor growth per hour"]
    assert max(float(r["value"][1]) for r in growth) > 100 * 2**20  # the 1200 MB/h leak
    assert by_title["Dead letters per second"]
    assert stack.dead_reasons == DEAD_LETTER_REASONS


def shown(stack: Stack, label: str) -> set[str]:
    """Values of ``label`` in the series the panels filtered by it show now.

    Prometheus leaves out empty labels: a job whose name is not known yet has none.
    """
    return {
        r["metric"][label]
        for t, result in stack.results.items()
        if f'{label}=~"${label}"' in t.expr
        for r in result
        if r["metric"].get(label)
    }


def test_variables_list_the_fleet(stack: Stack) -> None:
    values = all_values(dashboard())
    assert stack.label_values("cluster", values) == [CLUSTER]
    assert stack.label_values("instance", values) == [f"127.0.0.1:{stack.metrics_port}"]
    # Every job and host a panel shows can be picked.
    jobs = stack.label_values("job_name", values)
    assert shown(stack, "job_name") <= set(jobs)
    assert len(shown(stack, "job_name")) >= SPEC.jobs - 1  # a name may not be known yet
    hosts = stack.label_values("host", values)
    assert shown(stack, "host") <= set(hosts)
    assert len(hosts) >= 2


def test_choosing_a_job_and_a_host_narrows_their_panels(stack: Stack) -> None:
    values = all_values(dashboard())
    job_name = sorted(shown(stack, "job_name"))[0]
    host = sorted(shown(stack, "host"))[0]
    narrowed = {**values, "job_name": grafana_escape(job_name), "host": grafana_escape(host)}
    per_job = [t for t in stack.results if 'job_name=~"$job_name"' in t.expr]
    per_host = [t for t in stack.results if 'host=~"$host"' in t.expr]
    seen_job = seen_host = 0
    for t in per_job:
        result = stack.query(t, narrowed)
        assert {r["metric"].get("job_name") for r in result} <= {job_name}, t.panel
        seen_job += len(result)
    for t in per_host:
        result = stack.query(t, narrowed)
        assert {r["metric"].get("host") for r in result} <= {host}, t.panel
        seen_host += len(result)
    assert seen_job and seen_host
    # With "All", the same panels show more than the one job and the one host.
    assert sum(len(stack.results[t]) for t in per_job) > seen_job
    assert sum(len(stack.results[t]) for t in per_host) > seen_host


def test_health_panels_see_the_job_as_it_is(stack: Stack) -> None:
    by_title = {t.panel: r for t, r in stack.results.items() if t.ref_id == "A"}
    (up,) = by_title["Up"]
    assert up["value"][1] == "1"
    (info,) = by_title["Config in force"]
    assert re.fullmatch(r"[0-9a-f]{12}", info["metric"]["hash"])
    queries = {r["metric"]["query"] for r in by_title["Micro-batch rows per second"]}
    assert queries == {"flinkwatch-parse", "flinkwatch-detect", "flinkwatch-deadletters"}
    kinds = {r["metric"]["kind"] for r in by_title["Records parsed per second"]}
    assert {"metric", "checkpoint_completed", "checkpoint_expired"} <= kinds
    sinks = {r["metric"]["sink"] for r in by_title["Delivery backlog"]}
    assert "file" in sinks
    delivered = {(r["metric"]["sink"], r["metric"]["outcome"]) for r in by_title["Deliveries"]}
    assert ("file", "delivered") in delivered
    lag = {
        r["metric"].get("query", "delay"): float(r["value"][1]) for r in by_title["Watermark lag"]
    }
    # The fleet ends at the start of the test: detection is minutes, not hours, behind.
    assert 0 < lag["flinkwatch-detect"] < 3600
