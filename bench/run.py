"""The flinkwatch benchmark: throughput, alert latency, memory and state, and the peer.

One command (``make bench``, or ``python -m bench.run``) on the local machine:

1. starts its own Kafka broker (``scripts/stack.sh`` on a free port, purged at the end);
2. **throughput**: writes a backlog of a simulated 100-job / 400-TaskManager fleet into
   Kafka, then drains it twice in one Spark session: a baseline query that only reads
   Kafka and counts, and the full pipeline (parse + every detector + ledger, alert file and
   Slack to the local emulator); records/s of each and their ratio;
3. **alert latency**: a steady real-time stream at each ``--rate`` records/s (a fleet sized
   to produce it) with checkpoint-expiry incidents at known times, the job in its live
   layout (real-time parse, event bus on Kafka); latency is the Slack emulator's arrival
   time of an incident's message minus the event time of the record that made it true
   (the producer sends every record at its event time; its own lateness is reported
   too), split into parse-to-bus, detect and delivery by the bus record's Kafka append
   time and the ledger's record time; then the **soak**: the same at ``--soak-rate`` for
   ``--soak-minutes``, RSS and state sampled;
4. **memory and state**: peak RSS of this process tree (driver Python, driver JVM, Python
   workers) sampled every second, and the detect query's state rows and bytes per
   monitored job and TaskManager, over time;
5. **the peer**: a real Prometheus with PromQL rules equivalent to the detectors, and a real
   Alertmanager behind it paging the local Slack, against the same injected incidents,
   in real time (:mod:`bench.peer`); page latency from the deciding record to Slack;
6. **cluster**: one backlog drained by the full pipeline on a local Spark standalone
   cluster with one worker, then two (one core each): records/s per worker count, CPU per
   process and the load average (:mod:`bench.cluster`).

Results: ``bench/results/latest.json``, a dated copy, and a table on stdout (also written
as ``bench/results/latest.md``). Phases skipped with ``--skip`` keep their results from the
previous ``latest.json`` (``carried_over`` names them and their run). Benchmarks are not
tests: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from lab.procs import children, cmdline, free_port_pair

REPO = Path(__file__).resolve().parent.parent
WORK = REPO / "bench" / ".work"
RESULTS = REPO / "bench" / "results"
TOKEN = "xoxb-bench-local"  # noqa: S105 - the local emulator's token

log = logging.getLogger("bench")


# --- the machine, the broker, memory ---------------------------------------------------


def machine() -> dict[str, Any]:
    """Cores, memory and CPU model of this machine."""
    mem = 0
    model = ""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) * 1024
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {"cores": os.cpu_count(), "memory_bytes": mem, "cpu": model}


class Broker:
    """A Kafka broker of the benchmark's own (``scripts/stack.sh``), purged on stop."""

    def __init__(self, topics: list[str], partitions: int) -> None:
        self.port = free_port_pair()
        self.env = {
            **os.environ,
            "FLINKWATCH_KAFKA_PORT": str(self.port),
            "FLINKWATCH_KAFKA_DIR": str(WORK / "kafka"),
            "FLINKWATCH_TOPICS": " ".join(topics),
            "FLINKWATCH_PARTITIONS": str(partitions),
            "PYTHON": str(REPO / ".venv" / "bin" / "python"),
        }
        self.bootstrap = f"127.0.0.1:{self.port}"

    def _stack(self, *args: str) -> None:
        subprocess.run([str(REPO / "scripts" / "stack.sh"), *args], env=self.env, check=True)

    def start(self) -> Broker:
        """Start a fresh broker with the topics."""
        self._stack("down", "--purge")
        self._stack("up")
        return self

    def stop(self) -> None:
        """Stop the broker and delete its data."""
        self._stack("down", "--purge")


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class RssSampler:
    """Peak RSS of this process and its descendants (not the load producer), every second."""

    def __init__(self) -> None:
        self.peak = 0
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()

    def tree_rss(self) -> int:
        """RSS of the tree now."""
        kids = children()
        total, todo = 0, [os.getpid()]
        while todo:
            pid = todo.pop()
            if pid != os.getpid() and "PacedProducer" in cmdline(pid):
                continue
            total += _rss(pid)
            todo.extend(kids.get(pid, []))
        return total

    def start(self) -> RssSampler:
        """Sample in a daemon thread."""

        def run() -> None:
            while not self._stop.wait(1.0):
                rss = self.tree_rss()
                self.peak = max(self.peak, rss)
                self.samples.append((time.time(), rss))

        threading.Thread(target=run, name="bench-rss", daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop sampling."""
        self._stop.set()


# --- the phases ------------------------------------------------------------------------


def _spec(jobs: int, tms: int, incidents: list[tuple[str, int, float]], seed: int) -> Any:
    from lab.fleet import FleetSpec, Incident

    return FleetSpec(
        jobs=jobs,
        tms_per_job=tms,
        seed=seed,
        incidents=tuple(Incident(k, j, t) for k, j, t in incidents),  # type: ignore[arg-type]
    )


def _outputs(state: Path, slack_url: str) -> Any:
    from conf import SlackConfig
    from sinks import AlertLedger, JsonLinesAlertSink
    from sinks.dispatch import Dispatcher
    from sinks.prometheus import ActiveAlerts, SignalBoard
    from sinks.slack import SlackBotSink
    from streaming.delivery import Outputs

    ledger = AlertLedger(state / "ledger.sqlite")
    cfg = SlackConfig(mode="bot", api_url=slack_url, channel="#flink-alerts", max_retries=2)
    slack = SlackBotSink(TOKEN, ledger, lambda: cfg, lambda: "bench")
    dispatcher = Dispatcher(ledger, [slack], backoff_s=0.5, max_backoff_s=2).start()
    return Outputs(
        ledger=ledger,
        sinks=[JsonLinesAlertSink(state / "alerts.jsonl")],
        observers=[ActiveAlerts()],
        dispatcher=dispatcher,
        signals=SignalBoard(),
    )


def _config(bootstrap: str, prefix: str, state: Path, trigger_s: float) -> Any:
    from conf import AppConfig

    return AppConfig.model_validate(
        {
            "kafka": {
                "bootstrap_servers": bootstrap,
                "logs_topic": f"{prefix}.logs",
                "metrics_topic": f"{prefix}.metrics",
                "events_topic": f"{prefix}.events",
                "deadletters_topic": f"{prefix}.deadletters",
            },
            "spark": {"trigger_interval_s": trigger_s},
            # The backlog phase replays hours of history: its alerts must reach the
            # (local) Slack like live ones to be measured, however old.
            "output": {"state_dir": str(state), "console": False, "page_max_age_s": None},
            "metrics": {"enabled": False},
        }
    )


def _pipeline(spark: Any, cfg: Any, outputs: Any, trigger: dict[str, Any] | None) -> Any:
    """The live layout of `flinkwatch run`: ``trigger=None`` parses in real-time mode."""
    from streaming.app import Pipeline
    from streaming.topics import ensure_bus_topics

    ensure_bus_topics(cfg.kafka)
    return Pipeline(
        spark=spark,
        cfg=cfg,
        outputs=outputs,
        checkpoint_dir=cfg.output.checkpoint_dir,
        deadletter_dir=cfg.output.deadletter_path,
        trigger=trigger,
        bus="kafka",
    )


def throughput(
    spark: Any, broker: Broker, progress: Any, slack_url: str, args: argparse.Namespace
) -> dict[str, Any]:
    """Backlog of the 100-job fleet: baseline read-and-count vs the full pipeline."""
    from bench.load import compile_producer, send, write_load
    from lab.fleet import generate

    jobs, hours = args.jobs, args.hours
    # A few incidents of each kind, so detectors do real work on the backlog too.
    incidents = [
        ("checkpoint_expiry", 1, 600.0),
        ("checkpoint_creep", 2, 300.0),
        ("idle_heap_leak", 3, 300.0),
        ("late_acks_skew", 4, 600.0),
    ]
    spec = _spec(jobs, args.tms, [i for i in incidents if i[1] < jobs], seed=11)
    t0 = time.monotonic()
    start_ms = int(time.time() * 1000) - int(hours * 3_600_000) - 600_000
    load = write_load(generate(spec, start_ms, hours * 3600), WORK / "backlog.bin")
    gen_s = time.monotonic() - t0
    log.info(
        "backlog: %d records (%d logs, %.0f MB), %d jobs x %d TMs, %.1f h, generated in %.0f s",
        load.records,
        load.logs,
        load.bytes / 1e6,
        jobs,
        args.tms,
        hours,
        gen_s,
    )
    classes = compile_producer(WORK)
    produced = send(
        classes, broker.bootstrap, "bench.logs", "bench.metrics", load.path, paced=False
    )
    log.info("backlog: sent at %.0f records/s", produced["records_per_s"])

    # Baseline: the same topics, the same connector and batch bounds, just counted.
    cfg = _config(broker.bootstrap, "bench", WORK / "baseline", 1.0)
    from streaming.sources import kafka_records

    counted = {"n": 0}

    def count(batch: Any, _batch_id: int) -> None:
        counted["n"] += batch.count()

    t0 = time.monotonic()
    q = (
        kafka_records(spark, cfg.kafka, cfg.kafka.logs_topic)
        .unionByName(kafka_records(spark, cfg.kafka, cfg.kafka.metrics_topic))
        .writeStream.foreachBatch(count)
        .option("checkpointLocation", str(WORK / "baseline" / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    base_s = time.monotonic() - t0
    log.info("baseline: %d records in %.1f s", counted["n"], base_s)

    state = WORK / "pipeline"
    cfg = _config(broker.bootstrap, "bench", state, 1.0)
    outputs = _outputs(state, slack_url)
    pipe = _pipeline(spark, cfg, outputs, {"availableNow": True})
    t0 = time.monotonic()
    q = pipe.start_parse()
    q.awaitTermination()
    pipe.count_progress([q])
    parse_s = time.monotonic() - t0
    # What the detectors get (outside the timed window): rows per detector after routing.
    from detectors import Event
    from streaming.bus import active_detectors, bus_events
    from streaming.routes import Routes, scope_of
    from streaming.sources import kafka_stream

    bus = bus_events(
        kafka_stream(spark, cfg.kafka, cfg.kafka.events_topic, stream=False).selectExpr(
            "cast(key as string) key", "cast(value as string) value"
        )
    )
    routes = Routes(active_detectors(cfg))
    routed: dict[str, int] = {}
    bus_records = 0
    scoped = bus.selectExpr("substring_index(entity, ':', 1) as scope", "kind", "metric")
    for r in scoped.groupBy("scope", "kind", "metric").count().collect():
        bus_records += r["count"]
        event = Event(r["kind"], 0, metric=r["metric"])
        for name in routes.of(scope_of(r["scope"] + ":"), event):
            routed[name] = routed.get(name, 0) + r["count"]
    t1 = time.monotonic()
    q = pipe.start_detect()
    q.awaitTermination()
    pipe_s = parse_s + time.monotonic() - t1
    time.sleep(3)  # the listener's last progress event
    detect = progress.latest.get("flinkwatch-detect")
    outputs.dispatcher.stop()
    processed = sum(pipe.stats.kinds.values()) + sum(pipe.stats.dead_letters.values())
    alerts = dict(sorted((f"{d}:{s}", n) for (d, _e, s), n in pipe.stats.alerts.items()))
    log.info(
        "pipeline: %d records in %.1f s (parse %.1f s); alerts %s",
        processed,
        pipe_s,
        parse_s,
        alerts,
    )
    entities = jobs + jobs * args.tms
    return {
        "records": load.records,
        "records_bytes": load.bytes,
        "log_records": load.logs,
        "fleet": {"jobs": jobs, "taskmanagers": jobs * args.tms, "hours": hours},
        "generate_s": round(gen_s, 1),
        "producer_records_per_s": round(produced["records_per_s"]),
        "baseline_s": round(base_s, 1),
        "baseline_records": counted["n"],
        "baseline_records_per_s": round(counted["n"] / base_s),
        "pipeline_s": round(pipe_s, 1),
        "pipeline_parse_s": round(parse_s, 1),
        "parse_records_per_s": round(processed / parse_s),
        "bus_records": bus_records,
        "detector_input_rows": routed,
        "detect_rows_per_s": round(sum(routed.values()) / (pipe_s - parse_s)),
        "pipeline_records": processed,
        "pipeline_records_per_s": round(processed / pipe_s),
        "alerts": alerts,
        "state_rows": detect.state_rows if detect else None,
        "state_bytes": detect.state_bytes if detect else None,
        "state_bytes_per_job": round(detect.state_bytes / jobs) if detect else None,
        "state_bytes_per_entity": round(detect.state_bytes / entities) if detect else None,
    }


def latency(
    spark: Any,
    broker: Broker,
    progress: Any,
    slack: Any,
    args: argparse.Namespace,
    rate: float,
    *,
    minutes: float | None = None,
    name: str = "steady",
) -> dict[str, Any]:
    """A steady real-time stream with checkpoint-expiry incidents: time to the Slack message.

    ``minutes`` (default ``--latency-minutes``) and ``name`` (its topics and files) let the
    soak reuse it for an hour.
    """
    from bench.load import compile_producer, producer_command, write_load
    from lab.fleet import generate, job_id
    from streaming.app import run_forever

    per_job = _records_per_job_per_s(args.tms)
    jobs = max(1, round(rate / per_job))
    minutes = minutes or args.latency_minutes
    n_inc = min(args.incidents, jobs)
    # Onsets spread over the run after a minute of warm-up; each expires its checkpoints
    # from then on (60 s timeout), so the third expiry comes ~3 minutes after the onset.
    span = max(minutes * 60 - 330, 60)
    incidents = [
        ("checkpoint_expiry", i * (jobs // n_inc), 60 + span * i / n_inc) for i in range(n_inc)
    ]
    spec = _spec(jobs, args.tms, incidents, seed=23)
    # Lead time: generating (~100k records/s here, halved for safety) and starting the
    # queries (~30 s) must both fit before the first record is due.
    lead_s = 60 + jobs * per_job * minutes * 60 / 50_000
    start_ms = int((time.time() + lead_s) * 1000)
    load = write_load(generate(spec, start_ms, minutes * 60), WORK / f"{name}-{int(rate)}.bin")
    log.info(
        "steady: %d jobs x %d TMs, %d records over %.0f min (%.0f records/s), %d incidents; "
        "starts in %.0f s",
        jobs,
        args.tms,
        load.records,
        minutes,
        load.records / (minutes * 60),
        n_inc,
        start_ms / 1000 - time.time(),
    )
    state = WORK / f"{name}-{int(rate)}"
    cfg = _config(broker.bootstrap, f"{name}{int(rate)}", state, args.trigger_s)
    arrivals: dict[str, float] = {}
    slack.on_arrival = lambda alert_id, at: arrivals.setdefault(alert_id, at)
    outputs = _outputs(state, slack.base_url)
    pipe = _pipeline(spark, cfg, outputs, None)
    stop = threading.Event()
    runner = threading.Thread(
        target=lambda: run_forever(pipe, should_stop=stop.is_set), daemon=True
    )
    runner.start()
    state_over_time: list[tuple[float, int, int]] = []
    classes = compile_producer(WORK)
    wait = start_ms / 1000 - time.time() - 2
    if wait < 0:
        log.warning(
            "steady: generation ran %.0f s over the lead; the first records are late", -wait
        )
    time.sleep(max(wait, 0))
    prod = subprocess.Popen(
        producer_command(
            classes,
            broker.bootstrap,
            cfg.kafka.logs_topic,
            cfg.kafka.metrics_topic,
            load.path,
            True,
        ),
        stdout=subprocess.PIPE,
        text=True,
    )
    while prod.poll() is None:
        time.sleep(5)
        d = progress.latest.get("flinkwatch-detect")
        if d is not None:
            state_over_time.append((time.time(), d.state_rows, d.state_bytes))
    out = prod.stdout.read() if prod.stdout else ""
    produced = json.loads(out.strip().splitlines()[-1])
    d = progress.latest.get("flinkwatch-detect")
    # How far event time in the detector lags the wall clock when the input stops: a
    # pipeline slower than its input falls further behind the longer it runs.
    lag_s = round(time.time() - d.watermark_ms / 1000, 1) if d and d.watermark_ms else None
    time.sleep(30)  # let the last batches and deliveries finish
    stop.set()
    runner.join(timeout=120)
    outputs.dispatcher.stop()
    by_job = {job_id(spec, j): t for _k, j, t in incidents}
    alerts_file = state / "alerts.jsonl"
    lines = alerts_file.read_text().splitlines() if alerts_file.exists() else []
    fired = [json.loads(x) for x in lines if '"checkpoint_failures"' in x and '"firing"' in x]
    lat = []
    stages: dict[str, list[float]] = {"parse_to_bus": [], "detect": [], "delivery": []}
    on_bus = _bus_times(spark, cfg, {a["job_id"] for a in fired if a.get("job_id") in by_job})
    recorded = _recorded_ms(state / "ledger.sqlite")
    for a in fired:
        at = arrivals.get(a["alert_id"])
        if at is None or a.get("job_id") not in by_job:
            continue
        event_s = dt.datetime.fromisoformat(a["event_time"].replace("Z", "+00:00")).timestamp()
        lat.append(at - event_s)
        bus_s = on_bus.get((a["job_id"], round(event_s * 1000)))
        rec_s = recorded.get(a["alert_id"])
        if bus_s is not None and rec_s is not None:
            stages["parse_to_bus"].append(bus_s - event_s)
            stages["detect"].append(rec_s - bus_s)
            stages["delivery"].append(at - rec_s)
    lat.sort()
    return {
        "fleet": {"jobs": jobs, "taskmanagers": jobs * args.tms},
        "records": load.records,
        "input_records_per_s": round(load.records / (minutes * 60)),
        "producer": produced,
        "trigger_s": args.trigger_s,
        "incidents": n_inc,
        "alerts_delivered": len(lat),
        "false_positive_jobs": sorted(
            {a["job_id"] for a in fired if a.get("job_id") not in by_job}
        ),
        "alert_latency_s": _percentiles(lat),
        # Where the time went, per delivered alert: the deciding record's event time (it is
        # produced then) -> its event on the bus (Kafka append time) -> the transition in
        # the ledger -> the Slack message.
        "stages_s": {k: _percentiles(sorted(v)) for k, v in stages.items()},
        "watermark_lag_at_end_s": lag_s,
        "state_over_time": [
            {"t_s": round(t - state_over_time[0][0]), "rows": r, "bytes": b}
            for t, r, b in state_over_time[:: max(1, len(state_over_time) // 20)]
        ]
        if state_over_time
        else [],
    }


def _bus_times(spark: Any, cfg: Any, jobs: set[str]) -> dict[tuple[str, int], float]:
    """When each checkpoint expiry of ``jobs`` reached the event bus (Kafka append time)."""
    from pyspark.sql import functions as F

    from streaming.sources import kafka_stream

    if not jobs:
        return {}
    rows = (
        kafka_stream(spark, cfg.kafka, cfg.kafka.events_topic, stream=False)
        .select(
            F.col("key").cast("string").alias("k"),
            F.col("value").cast("string").alias("v"),
            "timestamp",
        )
        .where(
            F.col("k").isin(*[f"job:{j}" for j in jobs])
            & F.col("v").contains('"checkpoint_expired"')
        )
        .select("k", F.get_json_object("v", "$.event_ms").cast("long").alias("ms"), "timestamp")
        .collect()
    )
    out: dict[tuple[str, int], float] = {}
    for r in rows:
        key = (r["k"].removeprefix("job:"), int(r["ms"]))
        out[key] = min(out.get(key, float("inf")), r["timestamp"].timestamp())
    return out


def _recorded_ms(ledger: Path) -> dict[str, float]:
    """When each firing transition was recorded in the ledger (wall clock, seconds)."""
    import sqlite3

    con = sqlite3.connect(ledger)
    try:
        rows = con.execute(
            "SELECT alert_id, MIN(recorded_ms) FROM transitions WHERE status = 'firing' "
            "GROUP BY alert_id"
        ).fetchall()
    finally:
        con.close()
    return {a: ms / 1000 for a, ms in rows}


def _records_per_job_per_s(tms: int) -> float:
    """Records/s one simulated job emits in steady state (measured from the simulator)."""
    from lab.fleet import generate

    spec = _spec(4, tms, [], seed=5)
    n = sum(1 for _ in generate(spec, 1_700_000_000_000, 600))
    return n / 4 / 600


def _percentiles(xs: list[float]) -> dict[str, float | None]:
    if not xs:
        return {"p50": None, "p95": None, "p99": None, "max": None, "n": 0}

    def q(p: float) -> float:
        return round(xs[min(len(xs) - 1, int(p * len(xs)))], 2)

    return {"p50": q(0.5), "p95": q(0.95), "p99": q(0.99), "max": round(xs[-1], 2), "n": len(xs)}


# --- putting it together ---------------------------------------------------------------


class _Slack:
    """The local Slack emulator, noting when each incident's first message arrived."""

    def __init__(self) -> None:
        from lab.slack import SlackEmulator

        self.on_arrival: Any = None
        self.emulator = SlackEmulator(
            token=TOKEN, channels=("#flink-alerts",), on_message=self._got
        )

    def _got(self, message: dict[str, Any]) -> None:
        at = time.time()
        payload = (message.get("metadata") or {}).get("event_payload") or {}
        key = str(payload.get("key", ""))
        if self.on_arrival is not None and key.endswith(":firing"):
            self.on_arrival(payload.get("alert_id"), at)

    @property
    def base_url(self) -> str:
        return self.emulator.base_url


def table(r: dict[str, Any]) -> str:
    """The readable summary of a result."""
    t = r.get("throughput") or {}
    rows = [
        (
            "machine",
            f"{r['machine']['cores']} cores, {r['machine']['memory_bytes'] / 2**30:.0f} GiB",
        ),
        (
            "backlog",
            f"{t.get('records', 0):,} records, {t.get('fleet', {}).get('jobs')} jobs / "
            f"{t.get('fleet', {}).get('taskmanagers')} TMs, {t.get('fleet', {}).get('hours')} h",
        ),
        ("pipeline records/s", f"{r.get('pipeline_records_per_s') or 0:,}"),
        ("baseline records/s (read + count)", f"{r.get('baseline_records_per_s') or 0:,}"),
        ("ratio pipeline / baseline", f"{r.get('ratio')}"),
        ("peak RSS (driver + JVM + workers)", f"{(r.get('peak_rss_bytes') or 0) / 2**30:.2f} GiB"),
        ("state per job (100-job backlog)", f"{r.get('state_bytes_per_job')} bytes"),
    ]
    for lt in r.get("latency") or []:
        lat = lt["alert_latency_s"]
        rows.append(
            (
                f"alert latency at {lt['input_records_per_s']:,} records/s",
                f"p50 {lat['p50']} / p95 {lat['p95']} / p99 {lat['p99']} s (n={lat['n']} of "
                f"{lt['incidents']}), {lt['fleet']['jobs']} jobs, trigger {lt['trigger_s']} s",
            )
        )
        st = lt.get("stages_s") or {}
        if st:
            rows.append(
                (
                    f"  stages (p50 / p99) at {lt['input_records_per_s']:,} records/s",
                    ", ".join(
                        f"{k} {(v or {}).get('p50')} / {(v or {}).get('p99')} s"
                        for k, v in st.items()
                    ),
                )
            )
    soak = r.get("soak") or {}
    if soak:
        rss = soak.get("rss_over_time") or [{}]
        states = soak.get("state_over_time") or [{}]
        lat = soak.get("alert_latency_s") or {}
        rows.append(
            (
                f"soak, {soak.get('input_records_per_s')} records/s for "
                f"{(rss[-1].get('t_s') or 0) // 60} min",
                f"RSS {(rss[0].get('bytes') or 0) / 2**30:.2f} -> "
                f"{(rss[-1].get('bytes') or 0) / 2**30:.2f} GiB (peak "
                f"{(soak.get('peak_rss_bytes') or 0) / 2**30:.2f}), state rows "
                f"{states[0].get('rows')} -> {states[-1].get('rows')}, alert p50 "
                f"{lat.get('p50')} / p99 {lat.get('p99')} s (n={lat.get('n')})",
            )
        )
    c = r.get("cluster") or {}
    for n, run in (c.get("runs") or {}).items():
        cpu = run.get("cpu") or {}
        rows.append(
            (
                f"cluster, {n} worker(s) x 1 core: records/s",
                f"{run['records_per_s']:,} ({run['records']:,} records in {run['drain_s']} s; "
                f"run used {cpu.get('cores_used_by_run')} cores, machine "
                f"{cpu.get('cores_used_by_machine')}, load avg {cpu.get('loadavg_1m_mean')})",
            )
        )
    for kind, s in (r.get("flinkwatch_time_to_alert_s") or {}).items():
        p = (r.get("prometheus_time_to_alert_s") or {}).get(kind)
        rows.append((f"time to alert: {kind}", f"flinkwatch {s} s, Prometheus {p} s"))
    pages = r.get("page_latency_s") or {}
    if pages:
        fw, am = pages.get("flinkwatch") or {}, pages.get("prometheus_alertmanager") or {}
        rows.append(
            (
                "page latency, deciding record -> Slack",
                f"flinkwatch p50 {fw.get('p50')} / p99 {fw.get('p99')} s (n={fw.get('n')}); "
                f"Prometheus + Alertmanager p50 {am.get('p50')} / p99 {am.get('p99')} s "
                f"(n={am.get('n')})",
            )
        )
    w = max(len(k) for k, _ in rows)
    return "\n".join(f"| {k.ljust(w)} | {v} |" for k, v in rows)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns 0."""
    p = argparse.ArgumentParser(prog="bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=100, help="backlog fleet: Flink jobs")
    p.add_argument("--tms", type=int, default=4, help="TaskManagers per job")
    p.add_argument("--hours", type=float, default=2.0, help="backlog: hours of fleet records")
    p.add_argument(
        "--rate", type=float, nargs="+", default=[500, 10_000], help="steady input records/s"
    )
    p.add_argument("--soak-minutes", type=float, default=60.0, help="the soak's length")
    p.add_argument("--soak-rate", type=float, default=500.0, help="the soak's records/s")
    p.add_argument("--latency-minutes", type=float, default=6.0, help="each steady run's length")
    p.add_argument("--incidents", type=int, default=40, help="incidents in the steady run")
    p.add_argument(
        "--trigger-s",
        type=float,
        default=0.0,
        help="detect trigger of the steady runs (0: back to back)",
    )
    p.add_argument("--peer-minutes", type=float, default=12.0, help="real-time peer run")
    p.add_argument(
        "--workers", type=int, nargs="+", default=[1, 2], help="cluster: worker counts to measure"
    )
    p.add_argument("--cluster-hours", type=float, default=0.5, help="cluster: backlog hours")
    p.add_argument(
        "--cluster-partitions", type=int, default=4, help="cluster: Kafka and shuffle partitions"
    )
    p.add_argument("--worker-memory", default="2g", help="cluster: memory each worker offers")
    p.add_argument("--executor-memory", default="1536m", help="cluster: spark.executor.memory")
    p.add_argument("--skip", nargs="*", default=[], choices=list(PHASES))
    args = p.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)-5s %(name)s: %(message)s"
    )
    for noisy in ("kafka", "py4j", "sinks", "streaming"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    os.environ["SLACK_BOT_TOKEN"] = TOKEN

    from streaming.listener import ProgressLogger
    from streaming.session import get_session

    result: dict[str, Any] = {
        "run_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "args": vars(args),
    }
    _carry_over(result, args.skip)
    topics = ["bench.logs", "bench.metrics"]
    topics += [f"steady{int(r)}.{s}" for r in args.rate for s in ("logs", "metrics")]
    topics += [f"soak{int(args.soak_rate)}.{s}" for s in ("logs", "metrics")]
    broker = Broker(topics, 2).start()
    rss = RssSampler().start()
    slack = _Slack()
    slack.emulator.start()
    try:
        local = not {"throughput", "latency", "soak"} <= set(args.skip)
        if local:
            # Real-time parsing keeps a task per raw partition (2 topics x 2) running.
            spark = get_session(master="local[8]", shuffle_partitions=2)
            progress = ProgressLogger(every_s=60)
            spark.streams.addListener(progress)
        if "throughput" not in args.skip:
            rss.peak = 0
            t = result["throughput"] = throughput(spark, broker, progress, slack.base_url, args)
            t["peak_rss_bytes"] = rss.peak
            _save(result)
            result["pipeline_records_per_s"] = t["pipeline_records_per_s"]
            result["baseline_records_per_s"] = t["baseline_records_per_s"]
            result["ratio"] = round(t["pipeline_records_per_s"] / t["baseline_records_per_s"], 3)
            result["state_bytes_per_job"] = t["state_bytes_per_job"]
        if "latency" not in args.skip:
            runs = result["latency"] = []
            for rate in args.rate:
                rss.peak = 0
                runs.append(latency(spark, broker, progress, slack, args, rate))
                runs[-1]["peak_rss_bytes"] = rss.peak
                result["trigger_s"] = args.trigger_s
                result["alert_latency_s"] = runs[0]["alert_latency_s"]
                _save(result)
        if "soak" not in args.skip:
            # An hour at a constant fleet: RSS and state sampled, flat or not.
            rss.peak = 0
            rss.samples.clear()
            soak = latency(
                spark,
                broker,
                progress,
                slack,
                args,
                args.soak_rate,
                minutes=args.soak_minutes,
                name="soak",
            )
            t0 = rss.samples[0][0] if rss.samples else 0.0
            soak["peak_rss_bytes"] = rss.peak
            soak["rss_over_time"] = [
                {"t_s": round(t - t0), "bytes": b}
                for t, b in rss.samples[:: max(1, len(rss.samples) // 60)]
            ]
            result["soak"] = soak
            _save(result)
        # The memory target is for the 100-job fleet: the throughput phase's peak.
        if "throughput" not in args.skip or "peak_rss_bytes" not in result:
            result["peak_rss_bytes"] = (result.get("throughput") or {}).get(
                "peak_rss_bytes", rss.peak
            )
        if local:
            spark.stop()
        if "cluster" not in args.skip:
            from bench.cluster import cluster_phase

            c = result["cluster"] = cluster_phase(broker, args, WORK)
            result["cluster_records_per_s"] = {n: r["records_per_s"] for n, r in c["runs"].items()}
            _save(result)
        if "peer" not in args.skip:
            from bench.peer import run_peer

            peer = result["peer"] = run_peer(
                bootstrap=broker.bootstrap, workdir=WORK / "peer", minutes=args.peer_minutes
            )
            by_kind: dict[str, dict[str, Any]] = {"flinkwatch": {}, "prometheus": {}}
            for inc in peer.get("incidents", []):
                by_kind["flinkwatch"][inc["kind"]] = inc.get("flinkwatch_s")
                by_kind["prometheus"][inc["kind"]] = inc.get("prometheus_s")
            result["flinkwatch_time_to_alert_s"] = by_kind["flinkwatch"]
            result["prometheus_time_to_alert_s"] = by_kind["prometheus"]
            pages: dict[str, list[float]] = {"flinkwatch": [], "prometheus_alertmanager": []}
            for inc in peer.get("incidents", []):
                for side, v in (inc.get("page_latency_s") or {}).items():
                    if v is not None:
                        pages[side].append(v)
            result["page_latency_s"] = {k: _percentiles(sorted(v)) for k, v in pages.items()}
    finally:
        rss.stop()
        slack.emulator.stop()
        broker.stop()
    summary = _save(result)
    print(summary)  # noqa: T201
    return 0


#: The top-level result keys each phase writes.
PHASES: dict[str, tuple[str, ...]] = {
    "throughput": (
        "throughput",
        "pipeline_records_per_s",
        "baseline_records_per_s",
        "ratio",
        "state_bytes_per_job",
        "peak_rss_bytes",
    ),
    "latency": ("latency", "trigger_s", "alert_latency_s"),
    "soak": ("soak",),
    "cluster": ("cluster", "cluster_records_per_s"),
    "peer": (
        "peer",
        "flinkwatch_time_to_alert_s",
        "prometheus_time_to_alert_s",
        "page_latency_s",
    ),
}


def _carry_over(result: dict[str, Any], skipped: list[str]) -> None:
    """Keep the skipped phases' results of the previous ``latest.json``, saying so."""
    try:
        previous = json.loads((RESULTS / "latest.json").read_text())
    except (OSError, ValueError):
        return
    carried = dict(previous.get("carried_over") or {})
    for phase in skipped:
        if not any(k in previous for k in PHASES[phase]):
            continue
        for k in PHASES[phase]:
            if k in previous:
                result[k] = previous[k]
        result.setdefault("carried_over", {})[phase] = carried.get(phase, previous["run_at"])
        result.setdefault("carried_over_args", previous.get("carried_over_args", previous["args"]))


def _save(result: dict[str, Any]) -> str:
    """Write the results so far (after every phase: a late failure keeps the early numbers)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    text = json.dumps(result, indent=2)
    (RESULTS / "latest.json").write_text(text + "\n")
    stamp = result["run_at"].replace(":", "").replace("-", "")[:15]
    (RESULTS / f"{stamp}.json").write_text(text + "\n")
    summary = table(result)
    (RESULTS / "latest.md").write_text(summary + "\n")
    return summary


if __name__ == "__main__":
    raise SystemExit(main())
