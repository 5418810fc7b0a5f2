"""The peer benchmark: flinkwatch against a real Prometheus with equivalent PromQL rules.

One real-time run of a simulated Flink fleet with one incident of each mission kind
injected at a known onset. The same records feed both sides at the same time:

* **flinkwatch** (``flinkwatch run`` as a subprocess) reads the fleet's logs and metric
  records from Kafka and posts incidents to a local Slack emulator;
* **Prometheus** (the Debian package's binary, via :mod:`lab.promserver`) scrapes the
  fleet's metrics from a local HTTP endpoint that serves the latest value of every series
  in the text exposition format, as a Prometheus reporter on each JobManager and
  TaskManager would, and evaluates ``bench/peer_rules.yml`` (rules equivalent to the
  detectors, at the same shortened windows) at the common 15 s scrape/evaluation setting.

Time-to-alert per incident and side is the wall time the alert became visible (the Slack
emulator received the firing message; ``/api/v1/alerts`` first showed the rule firing for
the incident's job, polled every second) minus the wall time of the incident's onset.
Records are sent at their event time, so event time and wall time coincide.

flinkwatch is started and warmed up (a small healthy fleet with other job ids, until its
detect query has committed a few micro-batches) before the measured fleet starts, so
neither Spark's start-up nor its slow first micro-batches count; Prometheus needs none.

Run it as ``python -m bench.peer --bootstrap 127.0.0.1:9092`` (prints the result as
JSON), or call :func:`run_peer` (``bench.run`` does).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import yaml
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import TopicAlreadyExistsError

from detectors.tm_ids import tm_key
from lab.fleet import FleetSpec, Incident, SimRecord, generate, job_id, tm_id
from lab.procs import descendants, kill_all
from lab.promserver import (
    AlertmanagerServer,
    PrometheusError,
    PrometheusServer,
    find_binary,
)
from lab.slack import WEBHOOK_CHANNEL, SlackEmulator

REPO = Path(__file__).resolve().parent.parent
RULES = REPO / "bench" / "peer_rules.yml"

TOKEN = "xoxb-peer-local"  # noqa: S105 - the local Slack emulator's token, not a secret
_TOKEN_ENV = "FW_PEER_SLACK_TOKEN"  # noqa: S105 - the name of a variable
_CHANNEL = "#flink-alerts"
#: flinkwatch's alerts also go through Alertmanager, one per group_wait (None: its
#: default, 30 s): how much later a team paging from Alertmanager is paged than Slack.
VIA_ALERTMANAGER: dict[str, float | None] = {
    "flinkwatch_via_am_group_wait_0s": 0.0,
    "flinkwatch_via_am_group_wait_30s": None,
}

#: The injected incidents: (kind, job index, onset in seconds after the start). Onsets are
#: early so that even the slowest detector (idle_heap_growth needs a whole window of zero
#: throughput after the onset) has room to fire within a 12-minute run.
INCIDENTS: tuple[Incident, ...] = (
    Incident("checkpoint_expiry", 1, 60.0),
    Incident("late_acks_skew", 2, 60.0),
    Incident("checkpoint_creep", 3, 30.0),
    Incident("idle_heap_leak", 4, 30.0),
    # More expiries at staggered onsets: page latency needs a distribution, not one value.
    Incident("checkpoint_expiry", 5, 100.0),
    Incident("checkpoint_expiry", 6, 150.0),
    Incident("checkpoint_expiry", 7, 210.0),
    Incident("checkpoint_expiry", 8, 260.0),
    Incident("checkpoint_expiry", 9, 330.0),
    Incident("checkpoint_expiry", 10, 400.0),
)

#: Per incident kind: the flinkwatch detector meant for it and the PromQL rule mirroring
#: that detector (None: no metric carries the evidence).
MISSION: dict[str, tuple[str, str | None]] = {
    "checkpoint_expiry": ("checkpoint_failures", "FlinkCheckpointFailures"),
    "late_acks_skew": ("late_barrier_acks", None),
    "checkpoint_creep": ("checkpoint_creep", "FlinkCheckpointCreep"),
    "idle_heap_leak": ("idle_heap_growth", "FlinkIdleHeapGrowth"),
}

#: Detector parameters of the run; ``bench/peer_rules.yml`` mirrors them. The production
#: defaults need hours of history (idle_heap_growth: a 1 h window of 5-minute buckets;
#: checkpoint_creep: 20 checkpoints before judging, a 30 s duration floor against a 600 s
#: timeout), so both sides get windows a real-time run can fill. checkpoint_failures and
#: late_barrier_acks keep their defaults (3 checkpoints within 30 / 60 min).
FLINKWATCH_DETECTORS: dict[str, dict[str, Any]] = {
    "checkpoint_creep": {
        # 24 checkpoints (~4 min at the 10 s interval), judged from 12 on.
        "window": 24,
        "min_samples": 12,
        # The simulated jobs' timeout, and 10 % of it as the floor (README: "use 5-10 % of
        # a small timeout").
        "checkpoint_timeout_s": 60,
        "min_duration_ms": 6000,
    },
    "idle_heap_growth": {
        # 1-minute buckets over 7 minutes: an idle simulated TaskManager collects every
        # 1-2 min, so 7 buckets hold the 3 post-GC floors (min_gc_buckets) the slope needs.
        "bucket_s": 60,
        "window_s": 420,
        "min_buckets": 6,
    },
}


def peer_fleet() -> FleetSpec:
    """The simulated fleet of the run: 12 jobs of 2 TaskManagers, four incidents.

    Checkpoints every 10 s with a 60 s timeout, metrics every 15 s (the reporter interval
    matching the scrape interval). The creep (+12 % per checkpoint from a ~0.5 s start)
    reaches the timeout about 8 minutes after its onset; the leak (1200 MB/h) raises an
    idle TaskManager's heap floor by ~20 MB a minute, several times the floor's noise,
    and stays far from Heap_Max within the run.
    """
    return FleetSpec(
        jobs=12,
        tms_per_job=2,
        checkpoint_interval_s=10.0,
        checkpoint_timeout_s=60.0,
        metric_interval_s=15.0,
        incidents=INCIDENTS,
        heap_leak_mb_per_h=1200.0,
        creep_per_checkpoint=0.12,
    )


# --- the reporter endpoint --------------------------------------------------------------

Labels = tuple[tuple[str, str], ...]
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
#: Telegraf adds the scraped URL as a tag; a reporter does not expose it as a label.
_TELEGRAF_ONLY_TAGS = frozenset({"url"})


def parse_metric(value: bytes) -> list[tuple[str, Labels, float]]:
    """The samples of one simulated metric record: ``(name, labels, value)`` each.

    Both formats the simulator writes are read: canonical (``name``/``value``/``labels``)
    and Telegraf JSON (``name``/``fields``/``tags``), where a field named ``value``,
    ``gauge`` or ``counter`` is the value of ``name`` and any other field is a metric of
    its own (``<name>_<field>``, Telegraf's Prometheus input ``metric_version = 2``).
    Malformed records and non-numeric values give no samples.
    """
    try:
        doc = json.loads(value)
    except ValueError:
        return []
    if not isinstance(doc, dict) or not isinstance(doc.get("name"), str):
        return []
    name = doc["name"]
    if "fields" in doc:
        tags = doc.get("tags") or {}
        labels = _labels({k: v for k, v in tags.items() if k not in _TELEGRAF_ONLY_TAGS})
        out = []
        for fname, fvalue in (doc.get("fields") or {}).items():
            metric = name if fname in ("value", "gauge", "counter") else f"{name}_{fname}"
            number = _number(fvalue)
            if number is not None:
                out.append((metric, labels, number))
        return out
    number = _number(doc.get("value"))
    if number is None:
        return []
    return [(name, _labels(doc.get("labels") or {}), number)]


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _labels(raw: dict[str, Any]) -> Labels:
    return tuple(sorted((k, str(v)) for k, v in raw.items() if _LABEL_NAME.match(k)))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class MetricBoard:
    """The latest value of every series, rendered as a Prometheus text exposition.

    A reporter serves the current value of each metric and no timestamp (the scrape time
    is the sample's time), and a series disappears with the process that reports it: a
    series not updated for ``stale_after_s`` is dropped, as a killed TaskManager's would be.
    Thread-safe: the producer updates it while the HTTP server renders it.
    """

    def __init__(self, stale_after_s: float) -> None:
        self.stale_after_s = stale_after_s
        self._lock = threading.Lock()
        self._series: dict[tuple[str, Labels], tuple[float, float]] = {}

    def update(self, record: SimRecord, now: float | None = None) -> None:
        """Take the samples of one metric record (log records are ignored)."""
        if record.stream != "metric":
            return
        samples = parse_metric(record.value)
        seen = time.time() if now is None else now
        with self._lock:
            for name, labels, number in samples:
                self._series[(name, labels)] = (number, seen)

    def __len__(self) -> int:
        with self._lock:
            return len(self._series)

    def render(self, now: float | None = None) -> bytes:
        """The exposition text: series grouped by metric, no timestamps.

        One ``# TYPE`` line per metric (Flink's reporter exports every metric as a gauge),
        its series under it.
        """
        cutoff = (time.time() if now is None else now) - self.stale_after_s
        with self._lock:
            for key in [k for k, (_, seen) in self._series.items() if seen < cutoff]:
                del self._series[key]
            items = sorted(self._series.items())
        lines: list[str] = []
        current = None
        for (name, labels), (number, _) in items:
            if name != current:
                lines.append(f"# TYPE {name} gauge")
                current = name
            body = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
            lines.append(f"{name}{{{body}}} {number!r}")
        return ("\n".join(lines) + "\n").encode()


class ReporterEndpoint:
    """An HTTP server on 127.0.0.1 serving a :class:`MetricBoard` at ``/metrics``."""

    def __init__(self, board: MetricBoard) -> None:
        self.board = board
        self.scrapes = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> ReporterEndpoint:
        """Bind a free port and serve from a daemon thread."""
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server API
                if self.path.split("?", 1)[0] != "/metrics":
                    self.send_error(404)
                    return
                body = endpoint.board.render()
                endpoint.scrapes += 1
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass  # one line per scrape would drown the run's log

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    @property
    def target(self) -> str:
        """``host:port`` for a scrape config."""
        if self._server is None:
            msg = "endpoint not started"
            raise RuntimeError(msg)
        return f"127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        """Stop serving. Safe to call twice."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()


# --- producing in real time -------------------------------------------------------------


@dataclass
class Producer:
    """Sends the fleet to Kafka at event time and feeds the board at the same moment.

    Runs in a thread. Each record is sent when the wall clock reaches its event time; if
    the machine falls behind, records go out at once and the lag is reported.
    """

    spec: FleetSpec
    start_ms: int
    duration_s: float
    bootstrap: str
    logs_topic: str
    metrics_topic: str
    board: MetricBoard
    keep: Callable[[SimRecord], bool] | None = None
    sent: int = 0
    max_lag_s: float = 0.0
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Producer:
        """Start the producing thread."""
        self._thread = threading.Thread(target=self._run, name="peer-producer", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Stop early (or wait for the end) and join the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        failures: list[BaseException] = []
        producer: KafkaProducer | None = None
        try:
            # A short linger: records are paced one by one, and batching them longer
            # would only add to the time an incident's evidence takes to reach Kafka.
            producer = KafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=5)
            for rec in generate(self.spec, self.start_ms, self.duration_s):
                if self.keep is not None and not self.keep(rec):
                    continue
                delay = rec.time_ms / 1000 - time.time()
                if self._stop.is_set() or (delay > 0 and self._stop.wait(delay)):
                    return
                self.max_lag_s = max(self.max_lag_s, -delay)
                topic = self.logs_topic if rec.stream == "log" else self.metrics_topic
                future = producer.send(
                    topic, value=rec.value, key=rec.key, timestamp_ms=rec.time_ms
                )
                future.add_errback(failures.append)
                self.board.update(rec)
                self.sent += 1
            producer.flush()
            if failures:
                msg = f"kafka rejected {len(failures)} of {self.sent} records: {failures[0]}"
                raise RuntimeError(msg)
        except BaseException as exc:  # reported by run_peer, not lost in a thread
            self.error = exc
        finally:
            if producer is not None:
                producer.close()
            self.done.set()


def create_topics(bootstrap: str, topics: list[str], partitions: int = 2) -> None:
    """Create ``topics`` if missing (kafka-python's admin client)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="flinkwatch-peer")
    try:
        missing = [t for t in topics if t not in set(admin.list_topics())]
        if missing:
            try:
                admin.create_topics(
                    [NewTopic(t, num_partitions=partitions, replication_factor=1) for t in missing]
                )
            except TopicAlreadyExistsError:
                pass
    finally:
        admin.close()


def warmup_fleet(spec: FleetSpec) -> FleetSpec:
    """A small healthy fleet to warm flinkwatch up with; its ids differ from ``spec``'s."""
    return FleetSpec(
        jobs=2,
        tms_per_job=spec.tms_per_job,
        checkpoint_interval_s=spec.checkpoint_interval_s,
        checkpoint_timeout_s=spec.checkpoint_timeout_s,
        metric_interval_s=spec.metric_interval_s,
        seed=spec.seed + 1000,
    )


def _no_triggers(rec: SimRecord) -> bool:
    # The warm-up stops in the middle of a checkpoint; without trigger lines no checkpoint
    # of it is ever pending, so its end does not look like a hanging checkpoint.
    return b"Triggering checkpoint" not in rec.value


def _commits(state_dir: Path) -> int:
    """Micro-batches the detect query has committed (its checkpoint's commit log)."""
    dirs = (state_dir / "checkpoints").glob("detect-kafka*/commits")
    return sum(1 for d in dirs for p in d.iterdir() if p.name.isdigit())


# --- flinkwatch as a process ------------------------------------------------------------


class FlinkwatchProcess:
    """``flinkwatch run`` in its own process group (so a kill takes its JVM too)."""

    def __init__(self, config: Path, log_path: Path, token: str) -> None:
        self.config, self.log_path, self.token = config, log_path, token
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the job; its output goes to ``log_path``."""
        with self.log_path.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "streaming.cli", "run", "--config", str(self.config)],
                cwd=REPO,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1", _TOKEN_ENV: self.token},
                start_new_session=True,
            )

    def wait_started(self, timeout: float) -> float:
        """Wait for ``queries started`` in the log; return the seconds it took."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if self.proc is not None and self.proc.poll() is not None:
                msg = f"flinkwatch exited with {self.proc.returncode}; log:\n{self.tail()}"
                raise RuntimeError(msg)
            if "queries started" in self.log_path.read_text(errors="replace"):
                return time.monotonic() - t0
            time.sleep(0.5)
        msg = f"flinkwatch did not start its queries within {timeout:.0f} s; log:\n{self.tail()}"
        raise RuntimeError(msg)

    @property
    def alive(self) -> bool:
        """Whether the process is still running."""
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 120.0) -> int | None:
        """SIGTERM (a clean shutdown), then SIGKILL to what is left of it; the exit code."""
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        # Listed now: once the driver exits, its JVM (in a session of its own) and the
        # Python workers are no longer below it.
        tree = descendants(proc.pid)
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        kill_all(tree)
        return proc.wait()

    def tail(self, lines: int = 40) -> str:
        """The last lines of the job's log."""
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])


def flinkwatch_config(
    *,
    bootstrap: str,
    logs_topic: str,
    metrics_topic: str,
    state_dir: Path,
    slack_url: str,
    alertmanager_urls: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The job's config for the run (as a dict for YAML)."""
    return {
        "alertmanager": {"urls": list(alertmanager_urls), "retry_backoff_s": 1, "max_backoff_s": 5},
        "kafka": {
            "bootstrap_servers": bootstrap,
            "logs_topic": logs_topic,
            "metrics_topic": metrics_topic,
            "starting_offsets": "earliest",
        },
        "spark": {"trigger_interval_s": 1.0},
        "output": {"state_dir": str(state_dir), "console": True},
        "metrics": {"enabled": False},
        "cluster": "peer-bench",
        "slack": {
            "mode": "bot",
            "token_env": _TOKEN_ENV,
            "api_url": slack_url,
            "channel": _CHANNEL,
            "max_retries": 1,
            "retry_backoff_s": 1,
            "max_backoff_s": 5,
        },
        "detectors": FLINKWATCH_DETECTORS,
    }


# --- who alerted about what -------------------------------------------------------------


def _filtered(value: str) -> str:
    """A label value as Flink's reporter filters it (``FLINK_METRICS.md`` §1)."""
    return re.sub(r"[^a-zA-Z0-9:_]", "_", value)


@dataclass(frozen=True)
class FleetIndex:
    """Maps job ids and TaskManager ids (raw or label-filtered) to fleet positions."""

    jobs: dict[str, int]
    tms: dict[str, tuple[int, int]]

    @staticmethod
    def of(spec: FleetSpec) -> FleetIndex:
        """Index every job and TaskManager of ``spec``."""
        jobs = {job_id(spec, i): i for i in range(spec.jobs)}
        tms: dict[str, tuple[int, int]] = {}
        for i in range(spec.jobs):
            for k in range(spec.tms_per_job):
                raw = tm_id(spec, i, k)
                tms[raw] = tms[_filtered(raw)] = tms[tm_key(raw)] = (i, k)
        return FleetIndex(jobs, tms)

    def locate(self, job: str | None, tm: str | None) -> tuple[int | None, int | None]:
        """``(job index, TaskManager index)`` from ids, each None if unknown."""
        if tm and tm in self.tms:
            return self.tms[tm]
        return (self.jobs.get(job or ""), None)

    def find_in(self, message: dict[str, Any]) -> tuple[int | None, int | None]:
        """The job and TaskManager a flinkwatch Slack message is about.

        The message's fields name them (``*Job*`` and ``*TaskManager*``, each id in
        backticks); the summary may mention other TaskManagers (late acks name the
        stragglers), so it is read only when the fields name nothing known.
        """
        job: int | None = None
        tm: tuple[int, int] | None = None
        for block in message.get("blocks") or []:
            for f in block.get("fields") or []:
                text = str(f.get("text", ""))
                ids = text.split("`")[1::2]
                if text.startswith("*Job*") and ids:
                    job = self.jobs.get(ids[0], job)
                elif text.startswith("*TaskManager*") and ids:
                    tm = self.tms.get(ids[0], tm)
        if tm is not None:
            return tm
        if job is not None:
            return job, None
        text = str(message.get("text", ""))
        hits = [i for jid, i in self.jobs.items() if jid in text]
        return (hits[0] if len(hits) == 1 else None), None


@dataclass
class Firing:
    """One alert seen firing on one side."""

    # "flinkwatch", "prometheus" (its API shows it firing), "alertmanager" (paged), or one
    # of VIA_ALERTMANAGER (flinkwatch's alert paged by an Alertmanager it posts to).
    side: str
    name: str  # detector or alertname
    job_index: int | None
    tm_index: int | None
    wall: float  # when it became visible (epoch seconds)


class SlackWatch:
    """Records the firing messages the Slack emulator receives, with their arrival time."""

    _DETECTOR: ClassVar[re.Pattern[str]] = re.compile(r"\] ([a-z_]+)(?: \(escalated\))?: ")

    def __init__(self, index: FleetIndex, am_side: str = "alertmanager") -> None:
        self.index = index
        #: The side of Alertmanager's pages (its Slack receiver posts to the webhook).
        self.am_side = am_side
        self.firings: list[Firing] = []
        self.unmatched: list[str] = []
        self._lock = threading.Lock()

    _AM_LINE: ClassVar[re.Pattern[str]] = re.compile(r"^(\w+) job_id=(\S*) tm_id=(\S*)$", re.M)

    def on_message(self, message: dict[str, Any]) -> None:
        """The emulator's callback: keep incident posts (thread replies are updates)."""
        wall = time.time()
        if message.get("channel") == WEBHOOK_CHANNEL:
            self._alertmanager(str(message.get("text", "")), wall)
            return
        if message.get("thread_ts"):
            return
        payload = (message.get("metadata") or {}).get("event_payload") or {}
        if not str(payload.get("key", "")).endswith(":firing"):
            return
        text = str(message.get("text", ""))
        m = self._DETECTOR.search(text)
        job, tm = self.index.find_in(message)
        with self._lock:
            if m is None or job is None:
                self.unmatched.append(text[:200])
                return
            self.firings.append(Firing("flinkwatch", m.group(1), job, tm, wall))

    def _alertmanager(self, text: str, wall: float) -> None:
        """A page from Alertmanager's Slack receiver: one line per alert of the group."""
        if not text.startswith("[FIRING") and "[FIRING" not in text.split("\n", 1)[0]:
            return
        with self._lock:
            for name, job, tm in self._AM_LINE.findall(text):
                j, t = self.index.locate(job or None, tm or None)
                if j is None:
                    self.unmatched.append(text[:200])
                    continue
                self.firings.append(Firing(self.am_side, name, j, t, wall))


class PrometheusWatch:
    """Polls ``/api/v1/alerts`` and keeps the first time each alert was seen firing."""

    def __init__(self, server: PrometheusServer, index: FleetIndex) -> None:
        self.server, self.index = server, index
        self.firings: dict[tuple[str, str, str], Firing] = {}
        self.errors = 0

    def poll(self) -> None:
        """One poll; new firing alerts are recorded at the poll's wall time."""
        try:
            alerts = self.server.alerts()
        except (PrometheusError, OSError, urllib.error.URLError):
            self.errors += 1
            return
        wall = time.time()
        for a in alerts:
            if a.get("state") != "firing":
                continue
            labels = a.get("labels", {})
            key = (labels.get("alertname", ""), labels.get("job_id", ""), labels.get("tm_id", ""))
            if key in self.firings:
                continue
            job, tm = self.index.locate(labels.get("job_id"), labels.get("tm_id"))
            self.firings[key] = Firing("prometheus", key[0], job, tm, wall)


# --- the run ----------------------------------------------------------------------------


def _first(
    firings: list[Firing], *, job: int, name: str | None = None, tm: int | None = None
) -> Firing | None:
    hits = [
        f
        for f in firings
        if f.job_index == job
        and (name is None or f.name == name)
        and (tm is None or f.tm_index in (None, tm))
    ]
    return min(hits, key=lambda f: f.wall, default=None)


def _after(f: Firing | None, onset_wall: float) -> float | None:
    return None if f is None else round(f.wall - onset_wall, 1)


def _false_positive(f: Firing, incidents: dict[int, Incident]) -> bool:
    """An alert about a job without an incident, or about a TaskManager that does not leak.

    The leaking TaskManager is TaskManager 0 of an ``idle_heap_leak`` job (the simulator's
    choice); its sibling is idle too but its heap floor is flat.
    """
    inc = incidents.get(f.job_index) if f.job_index is not None else None
    if inc is None:
        return True
    return inc.kind == "idle_heap_leak" and f.tm_index not in (None, 0)


def detected_at(alerts_file: Path, index: FleetIndex) -> list[Firing]:
    """The firing transitions in flinkwatch's alert file, at their event time.

    Event time equals wall time in this run, so the gap between this and the Slack
    arrival is flinkwatch's processing and delivery latency. (idle_heap_growth stamps a
    transition with the end of the bucket it judged, and decides it when that end passes,
    as any deadline.)
    """
    out: list[Firing] = []
    if not alerts_file.exists():
        return out
    for line in alerts_file.read_text().splitlines():
        a = json.loads(line)
        if a.get("status") != "firing":
            continue
        entity = str(a.get("entity", ""))
        tm = entity[3:] if entity.startswith("tm:") else None
        job, tm_index = index.locate(a.get("job_id"), tm)
        when = dt.datetime.fromisoformat(str(a["event_time"]).replace("Z", "+00:00"))
        out.append(Firing("flinkwatch", str(a["detector"]), job, tm_index, when.timestamp()))
    return out


def summarize(
    spec: FleetSpec, start_wall: float, firings: list[Firing], detected: list[Firing]
) -> tuple[list[dict[str, Any]], dict[str, int], list[dict[str, Any]]]:
    """Per incident the times to alert; false positives per side; every firing, in order.

    ``firings`` are the alerts as they became visible (both sides), ``detected``
    flinkwatch's transitions at their event time.
    """
    incidents = {inc.job_index: inc for inc in spec.incidents}
    rows = []
    for inc in spec.incidents:
        detector, rule = MISSION[inc.kind]
        onset_wall = start_wall + inc.onset_s
        tm = 0 if inc.kind == "idle_heap_leak" else None
        fw = [f for f in firings if f.side == "flinkwatch"]
        prom = [f for f in firings if f.side == "prometheus"]
        paged = [f for f in firings if f.side == "alertmanager"]
        via_pages = {side: [f for f in firings if f.side == side] for side in VIA_ALERTMANAGER}
        decided = _first(detected, job=inc.job_index, name=detector, tm=tm)
        am_page = None if rule is None else _first(paged, job=inc.job_index, name=rule, tm=tm)
        # flinkwatch pages an incident once (related alerts join its message): its page is
        # the job's first message, decided by the job's first transition, whichever
        # detector that was (a checkpoint pending too long before the expiries, say).
        fw_page = _first(fw, job=inc.job_index, tm=tm)
        fw_decided = _first(detected, job=inc.job_index, tm=tm)
        am_first = _first(paged, job=inc.job_index, tm=tm)
        prom_first = _first(prom, job=inc.job_index, tm=tm)
        missed = [
            side
            for side, page in (("flinkwatch", fw_page), ("prometheus_alertmanager", am_first))
            if page is None
        ]
        rows.append(
            {
                "kind": inc.kind,
                "job_index": inc.job_index,
                "job_id": job_id(spec, inc.job_index),
                **({"tm_id": tm_id(spec, inc.job_index, tm)} if tm is not None else {}),
                "onset_s": inc.onset_s,
                "detector": detector,
                "rule": rule,
                # Seconds from the onset to each side's first page for the incident,
                # whichever detector or rule sent it (a job whose checkpoints expire is
                # paged for the checkpoint pending too long before the third expiry).
                "flinkwatch_page_s": _after(fw_page, onset_wall),
                "alertmanager_page_s": _after(am_first, onset_wall),
                "missed_by": missed,
                # The same for the detector and the rule meant for the kind.
                "flinkwatch_s": _after(
                    _first(fw, job=inc.job_index, name=detector, tm=tm), onset_wall
                ),
                "prometheus_s": None
                if rule is None
                else _after(_first(prom, job=inc.job_index, name=rule, tm=tm), onset_wall),
                # When flinkwatch's detector decided (event time), before Spark and Slack.
                "flinkwatch_detected_s": _after(
                    _first(detected, job=inc.job_index, name=detector, tm=tm), onset_wall
                ),
                "alertmanager_s": _after(am_page, onset_wall),
                # Page latency: from the record that decided the incident (flinkwatch's
                # deciding record, sent at its event time) to each side's Slack message.
                "page_latency_s": {
                    "flinkwatch": _after(fw_page, fw_decided.wall) if fw_decided else None,
                    "prometheus_alertmanager": _after(am_page, decided.wall) if decided else None,
                    # flinkwatch's own alert paged by Alertmanager (its Slack receiver).
                    **{
                        side: _after(_first(via, job=inc.job_index, tm=tm), fw_decided.wall)
                        if fw_decided
                        else None
                        for side, via in via_pages.items()
                    },
                },
                # What pages first for this job, whichever detector or rule it is.
                "flinkwatch_first": None
                if fw_page is None
                else {"name": fw_page.name, "s": _after(fw_page, onset_wall)},
                "alertmanager_first": None
                if am_first is None
                else {"name": am_first.name, "s": _after(am_first, onset_wall)},
                "prometheus_first": None
                if prom_first is None
                else {"name": prom_first.name, "s": _after(prom_first, onset_wall)},
            }
        )
    false_positives = {
        side: sum(1 for f in firings if f.side == side and _false_positive(f, incidents))
        for side in ("flinkwatch", "prometheus", "alertmanager", *VIA_ALERTMANAGER)
    }
    listing = [
        {
            "side": f.side,
            "name": f.name,
            "job_index": f.job_index,
            "tm_index": f.tm_index,
            "at_s": round(f.wall - start_wall, 1),
            "incident": incidents[f.job_index].kind if f.job_index in incidents else None,
            "false_positive": _false_positive(f, incidents),
        }
        for f in sorted(firings, key=lambda f: f.wall)
    ]
    return rows, false_positives, listing


def _rule_health(server: PrometheusServer) -> dict[str, Any]:
    """Each rule's health and last error (an expression that errors never fires)."""
    out: dict[str, Any] = {}
    for group in server.api("rules").get("groups", []):
        for rule in group.get("rules", []):
            out[rule["name"]] = {"health": rule.get("health"), "error": rule.get("lastError")}
    return out


def prometheus_binary() -> Path:
    """The prometheus binary (alertmanager sits beside it): .stack's, else on PATH."""
    binary = find_binary()
    if binary is None:
        msg = (
            "no prometheus binary: run scripts/prometheus.sh fetch (Debian's prometheus "
            "package, unpacked into .stack/prometheus) or put prometheus on PATH"
        )
        raise RuntimeError(msg)
    return binary


def run_peer(
    *,
    bootstrap: str,
    workdir: Path,
    minutes: float = 12.0,
    scrape_s: float = 15.0,
    log: Callable[[str], object] = print,
    grace_s: float = 20.0,
    warmup_s: float = 60.0,
    start_timeout_s: float = 600.0,
) -> dict[str, Any]:
    """One real-time peer run: the same incidents, flinkwatch and Prometheus side by side.

    Args:
        bootstrap: Kafka bootstrap servers (the broker must be running).
        workdir: Where the job's config, state and log and Prometheus' files go; the
            ``state`` and ``prometheus`` subdirectories are recreated.
        minutes: Length of the simulated (and real) run.
        scrape_s: Prometheus scrape and rule evaluation interval. The rules' windows are
            written for the 15 s default; other values are for experiments.
        log: Progress lines.
        grace_s: After the last record, how long both sides still get to alert (the
            records of the last seconds take a few micro-batches to reach flinkwatch's
            detectors; Prometheus keeps scraping the last values meanwhile).
        warmup_s: Before the measured fleet, a small healthy fleet (other job ids) is
            produced for at least this long and until flinkwatch's detect query has
            committed a few micro-batches: a fresh job's first batches take tens of
            seconds (Python workers starting, code generation), a cost a long-running
            deployment pays once, not per incident.
        start_timeout_s: How long flinkwatch may take to start its queries, and to
            finish warming up.

    Returns:
        ``fleet``, ``scrape_s``, ``run_s``, ``incidents`` (per incident:
        ``flinkwatch_page_s`` and ``alertmanager_page_s``, seconds from the onset to each
        side's first page for the incident, whichever detector or rule sent it, None if
        none; ``missed_by``, the sides that did not page; ``flinkwatch_s`` and
        ``prometheus_s``, the same for the detector / rule meant for the kind; plus
        whatever fired first for that job on each side), ``false_positives`` per side,
        ``alerts`` (every firing), ``rules``, ``flinkwatch_params`` and run diagnostics.

    Raises:
        RuntimeError: No prometheus binary, flinkwatch did not start, or producing failed.

    """
    binary = prometheus_binary()
    workdir = Path(workdir).resolve()
    state_dir, prom_dir = workdir / "state", workdir / "prometheus"
    for d in (state_dir, prom_dir):
        shutil.rmtree(d, ignore_errors=True)
    workdir.mkdir(parents=True, exist_ok=True)

    spec = peer_fleet()
    index = FleetIndex.of(spec)
    # Fresh topics per run: job ids are deterministic, so records of an earlier run in the
    # same topics would replay as old incidents.
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d%H%M%S")
    logs_topic, metrics_topic = f"peer-{stamp}.logs", f"peer-{stamp}.metrics"
    create_topics(bootstrap, [logs_topic, metrics_topic])
    log(f"peer: topics {logs_topic}, {metrics_topic} on {bootstrap}")

    slack_watch = SlackWatch(index)
    via_watches: list[SlackWatch] = []
    emulator = SlackEmulator(
        token=TOKEN, channels=(_CHANNEL,), on_message=slack_watch.on_message
    ).start()
    board = MetricBoard(stale_after_s=3 * spec.metric_interval_s)
    endpoint = ReporterEndpoint(board).start()
    alertmanager = AlertmanagerServer(
        binary.with_name("alertmanager"), prom_dir / "alertmanager", emulator.webhook_url, _CHANNEL
    ).start()
    # flinkwatch's own alerts through Alertmanager, as a team that pages from it would
    # see them: one Alertmanager per group_wait, each to its own Slack webhook.
    via: dict[str, tuple[SlackEmulator, AlertmanagerServer]] = {}
    for side, group_wait in VIA_ALERTMANAGER.items():
        watch = SlackWatch(index, am_side=side)
        emu = SlackEmulator(token=TOKEN, channels=(_CHANNEL,), on_message=watch.on_message)
        am = AlertmanagerServer(
            binary.with_name("alertmanager"),
            prom_dir / side,
            emu.start().webhook_url,
            _CHANNEL,
            group_wait_s=group_wait,
        ).start()
        via[side] = (emu, am)
        via_watches.append(watch)
    prometheus = PrometheusServer(
        binary,
        prom_dir,
        targets=[endpoint.target],
        scrape_interval_s=scrape_s,
        rule_files=[RULES],
        evaluation_interval_s=scrape_s,
        alertmanagers=[alertmanager.target],
    )
    config_path = workdir / "flinkwatch.yaml"
    config_path.write_text(
        yaml.safe_dump(
            flinkwatch_config(
                bootstrap=bootstrap,
                logs_topic=logs_topic,
                metrics_topic=metrics_topic,
                state_dir=state_dir,
                slack_url=emulator.base_url,
                alertmanager_urls=tuple(f"http://{am.target}" for _, am in via.values()),
            ),
            sort_keys=False,
        )
    )
    job = FlinkwatchProcess(config_path, workdir / "flinkwatch.log", TOKEN)
    producer: Producer | None = None
    prom_watch = PrometheusWatch(prometheus, index)
    try:
        prometheus.start()
        log(f"peer: prometheus {binary} on {prometheus.url}, scraping {endpoint.target}")
        job.start()
        startup_s = job.wait_started(start_timeout_s)
        log(f"peer: flinkwatch queries started after {startup_s:.0f} s")
        warm_spec = warmup_fleet(spec)
        warm = Producer(
            warm_spec,
            int(time.time() * 1000),
            start_timeout_s,
            bootstrap,
            logs_topic,
            metrics_topic,
            MetricBoard(stale_after_s=0),  # Prometheus does not see the warm-up
            keep=_no_triggers,
        ).start()
        t0 = time.monotonic()
        while time.monotonic() - t0 < warmup_s or _commits(state_dir) < 3:
            if warm.error is not None or not job.alive or warm.done.is_set():
                msg = f"warm-up failed ({warm.error}); flinkwatch log:\n{job.tail()}"
                raise RuntimeError(msg)
            time.sleep(1)
        warm.stop()
        warm_s = time.monotonic() - t0
        log(f"peer: warmed up for {warm_s:.0f} s ({warm.sent} records of a healthy fleet)")

        start_ms = int(time.time() * 1000)
        start_wall = start_ms / 1000
        producer = Producer(
            spec, start_ms, minutes * 60, bootstrap, logs_topic, metrics_topic, board
        ).start()
        log(
            f"peer: producing {spec.jobs} jobs in real time for {minutes:g} min; incidents: "
            + ", ".join(f"{i.kind}@job{i.job_index}+{i.onset_s:g}s" for i in spec.incidents)
        )
        end = start_wall + minutes * 60 + grace_s
        next_report = start_wall + 60
        for _ in _ticks(end):
            prom_watch.poll()
            if producer.error is not None:
                msg = f"producing failed: {producer.error}"
                raise RuntimeError(msg) from producer.error
            if not job.alive:
                msg = f"flinkwatch exited during the run; log:\n{job.tail()}"
                raise RuntimeError(msg)
            if time.time() >= next_report:
                next_report += 60
                log(
                    f"peer: +{time.time() - start_wall:.0f} s: {producer.sent} records sent "
                    f"(lag max {producer.max_lag_s:.1f} s), {len(board)} series, alerts "
                    f"flinkwatch {len(slack_watch.firings)} / prometheus "
                    f"{len(prom_watch.firings)}"
                )
        run_s = round(time.time() - start_wall, 1)
        health = _rule_health(prometheus)
    finally:
        if producer is not None:
            producer.stop()
        code = job.stop()
        prometheus.stop()
        alertmanager.stop()
        for emu, am in via.values():
            am.stop()
            emu.stop()
        endpoint.stop()
        emulator.stop()
        log(f"peer: flinkwatch stopped (exit code {code})")

    firings = [
        *slack_watch.firings,
        *prom_watch.firings.values(),
        *(f for w in via_watches for f in w.firings),
    ]
    detected = detected_at(state_dir / "alerts.jsonl", index)
    incidents, false_positives, listing = summarize(spec, start_wall, firings, detected)
    return {
        "fleet": {
            "jobs": spec.jobs,
            "tms_per_job": spec.tms_per_job,
            "checkpoint_interval_s": spec.checkpoint_interval_s,
            "checkpoint_timeout_s": spec.checkpoint_timeout_s,
            "metric_interval_s": spec.metric_interval_s,
            "heap_leak_mb_per_h": spec.heap_leak_mb_per_h,
            "creep_per_checkpoint": spec.creep_per_checkpoint,
            "seed": spec.seed,
        },
        "scrape_s": scrape_s,
        "evaluation_s": scrape_s,
        "minutes": minutes,
        "run_s": run_s,
        "grace_s": grace_s,
        "incidents": incidents,
        "false_positives": false_positives,
        "alerts": listing,
        "rules": str(RULES.relative_to(REPO)),
        "via_alertmanager_group_wait_s": {k: v or 30.0 for k, v in VIA_ALERTMANAGER.items()},
        "rule_health": health,
        "flinkwatch_params": FLINKWATCH_DETECTORS,
        "diagnostics": {
            "flinkwatch_startup_s": round(startup_s, 1),
            "warmup_s": round(warm_s, 1),
            "records_sent": producer.sent if producer is not None else 0,
            "producer_max_lag_s": round(producer.max_lag_s, 2) if producer is not None else None,
            "scrapes_served": endpoint.scrapes,
            "prometheus_poll_errors": prom_watch.errors,
            "slack_unmatched": slack_watch.unmatched,
            "workdir": str(workdir),
        },
    }


def _ticks(end: float, every_s: float = 1.0) -> Iterator[float]:
    """Yield about every ``every_s`` seconds (wall clock) until ``end``."""
    while (now := time.time()) < end:
        yield now
        time.sleep(max(0.0, min(every_s, end - time.time())))


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.peer --bootstrap HOST:PORT``: one run, the result as JSON."""
    p = argparse.ArgumentParser(prog="python -m bench.peer", description=__doc__.split("\n")[0])
    p.add_argument("--bootstrap", required=True, help="Kafka bootstrap servers (running)")
    p.add_argument("--minutes", type=float, default=12.0, help="length of the real-time run")
    p.add_argument("--scrape-s", type=float, default=15.0, help="scrape/evaluation interval")
    p.add_argument("--workdir", type=Path, help="default: a new directory under the temp dir")
    args = p.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="flinkwatch-peer-"))

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    result = run_peer(
        bootstrap=args.bootstrap,
        workdir=workdir,
        minutes=args.minutes,
        scrape_s=args.scrape_s,
        log=progress,
    )
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
