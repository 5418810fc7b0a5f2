"""The flinkwatch benchmark: throughput, alert latency, memory and state, and the peer.

One command (``make bench``, or ``python -m bench.run``) on the local machine:

1. starts its own Kafka broker (``scripts/stack.sh`` on a free port, purged at the end;
   not for the replay phase alone);
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
7. **catchup**: `flinkwatch run`'s live layout started on a backlog of the fleet's records
   (``--catchup-minutes``): rows dropped as late, false alerts, incidents alerted, time to
   catch up (:mod:`bench.catchup`).
8. **replay**: ``flinkwatch replay`` in a fresh process, on a small real Flink run and on
   an hour of the 100-job fleet written to files first; wall time and CPU of its process
   tree, median of 3 (:mod:`bench.replay`).

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
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench import yaml_setting
from bench.plot import draw
from lab.procs import children, cmdline, free_port_pair, free_port_run

if TYPE_CHECKING:  # for the annotations; the modules are imported where used, as above
    from pyspark.sql import SparkSession

    from conf import AppConfig
    from streaming.app import Pipeline
    from streaming.runtime import Runtime

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
            # The repository's venv, or (a worktree without one) this interpreter.
            "PYTHON": str(
                REPO / ".venv" / "bin" / "python"
                if (REPO / ".venv" / "bin" / "python").exists()
                else sys.executable
            ),
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

    def pid(self) -> int | None:
        """The broker's pid (``scripts/stack.sh`` keeps it in a file), None if not running."""
        try:
            return int((WORK / "kafka" / "broker.pid").read_text())
        except (OSError, ValueError):
            return None


def _proc_kb(path: str, field: str) -> int:
    """A ``field: N kB`` line of a /proc file, in bytes (0 when the process is gone)."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _rss(pid: int) -> int:
    return _proc_kb(f"/proc/{pid}/status", "VmRSS:")


#: The RSS sampler reads PSS at every this many samples (seconds).
PSS_EVERY = 5


def _pss(pid: int) -> int:
    return _proc_kb(f"/proc/{pid}/smaps_rollup", "Pss:")


def rss_part(this_process: bool, command: str) -> str:
    """Which part of the tree a process is, by its command line, for the RSS by part.

    The CPU's groups (:data:`bench.measure.GROUPS`) where they apply: ``driver_python``,
    this process (the pipeline's driver, and the bench's own load, Slack emulator and
    samplers); ``driver_jvm``; ``python_workers``; then ``other`` (the broker and the load
    producer are not in the tree).
    """
    from bench.measure import is_python_worker

    if this_process:
        return "driver_python"
    if is_python_worker(command):
        return "python_workers"
    if "java" in command.split(" ", 1)[0]:
        return "driver_jvm"
    return "other"


class RssSampler:
    """Memory of this process and its descendants (not the load producer), sampled.

    RSS every second, PSS every ``PSS_EVERY`` seconds.

    Two sums: RSS, what the issue's target names, counts a page shared by several
    processes once in each: a Python worker forked from PySpark's daemon, or a process
    the JVM forks, adds the pages it shares with its parent again for as long as it
    runs, so the sum jumps by gigabytes for an instant. PSS divides each shared page
    among its sharers, so the sum counts it once: the footprint a container limit sees.
    """

    def __init__(self) -> None:
        self.peak = 0
        self.samples: list[tuple[float, int]] = []
        self.pss_samples: list[tuple[float, int]] = []
        #: Each RSS sample's sum by process kind (:func:`rss_part`), in step with ``samples``.
        self.parts: list[dict[str, int]] = []
        self._stop = threading.Event()

    def tree_rss(self) -> int:
        """RSS of the tree now."""
        return self.tree_memory(pss=False)[0]

    def tree_memory(self, pss: bool = True) -> tuple[int, int]:
        """RSS and PSS of the tree now (PSS 0 unless ``pss``)."""
        rss, pss_sum, _parts = self._tree(pss)
        return rss, pss_sum

    def _tree(self, pss: bool) -> tuple[int, int, dict[str, int]]:
        kids = children()
        rss, pss_sum, todo = 0, 0, [os.getpid()]
        parts: dict[str, int] = {}
        while todo:
            pid = todo.pop()
            line = cmdline(pid)
            if pid != os.getpid() and "PacedProducer" in line:
                continue
            own = _rss(pid)
            rss += own
            kind = rss_part(pid == os.getpid(), line)
            parts[kind] = parts.get(kind, 0) + own
            pss_sum += _pss(pid) if pss else 0
            todo.extend(kids.get(pid, []))
        return rss, pss_sum, parts

    def start(self) -> RssSampler:
        """Sample in a daemon thread: RSS every second, PSS every ``PSS_EVERY``-th."""
        from bench.measure import instrument

        def run() -> None:
            n = 0
            while not self._stop.wait(1.0):
                # PSS walks every mapping of the JVM (smaps_rollup): most of the samplers'
                # CPU when read every second.
                rss, pss, parts = self._tree(pss=n % PSS_EVERY == 0)
                now = time.time()
                self.peak = max(self.peak, rss)
                self.samples.append((now, rss))
                self.parts.append(parts)
                if n % PSS_EVERY == 0:
                    self.pss_samples.append((now, pss))
                n += 1

        instrument(run, "bench-rss")
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


def _config(
    bootstrap: str,
    prefix: str,
    state: Path,
    trigger_s: float,
    detectors: dict[str, dict[str, Any]] | None = None,
    slack_url: str | None = None,
    spark: dict[str, Any] | None = None,
) -> AppConfig:
    """The job's config; ``detectors``: parameters other than the defaults.

    ``spark``: more keys of the ``spark`` section (``--spark``), to compare settings.

    ``slack_url``: the local Slack emulator's Web API, where the job's bot posts (its
    token is :data:`TOKEN`, given to :func:`_runtime`).
    """
    from conf import AppConfig

    slack = {
        "mode": "bot",
        "api_url": slack_url,
        "channel": "#flink-alerts",
        "max_retries": 2,
        "retry_backoff_s": 0.5,
        "max_backoff_s": 2,
    }
    return AppConfig.model_validate(
        {
            "cluster": "bench",
            "kafka": {
                "bootstrap_servers": bootstrap,
                "logs_topic": f"{prefix}.logs",
                "metrics_topic": f"{prefix}.metrics",
                "events_topic": f"{prefix}.events",
                "deadletters_topic": f"{prefix}.deadletters",
            },
            "spark": {"trigger_interval_s": trigger_s, **(spark or {})},
            # The backlog phase replays hours of history: its alerts must reach the
            # (local) Slack like live ones to be measured, however old.
            "output": {"state_dir": str(state), "console": False, "page_max_age_s": None},
            "metrics": {"enabled": False},
            **({"slack": slack} if slack_url else {}),
            **({"detectors": detectors} if detectors else {}),
        }
    )


def _runtime(cfg: AppConfig) -> Runtime:
    """What `flinkwatch run` wires around its queries, from ``cfg`` (Slack: the emulator)."""
    from streaming.runtime import Runtime

    return Runtime(cfg, env={"SLACK_BOT_TOKEN": TOKEN})


def _pipeline(spark: SparkSession, runtime: Runtime, trigger: dict[str, Any] | None) -> Pipeline:
    """The live layout of `flinkwatch run`: ``trigger=None`` parses in real-time mode."""
    from streaming.topics import ensure_bus_topics

    ensure_bus_topics(runtime.cfg.kafka)
    return runtime.pipeline(spark, trigger=trigger)


def _parse_mode(pipe: Pipeline) -> str | None:
    """How the live layout's parse query runs now (its path's plan), if it runs."""
    from streaming.bus_paths import KafkaPath

    plan = pipe.path.parse_plan if isinstance(pipe.path, KafkaPath) else None
    return plan.mode if plan else None


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
    cfg = _config(broker.bootstrap, "bench", state, 1.0, slack_url=slack_url)
    runtime = _runtime(cfg)
    pipe = _pipeline(spark, runtime, {"availableNow": True})
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
    routes = Routes(active_detectors(cfg), cfg.catalog())
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
    runtime.close()
    pipe.close()
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


@dataclass
class Meters:
    """What runs beside every steady run: RSS, CPU per process, Spark's stage CPU, batches."""

    rss: RssSampler
    batches: Any  # bench.measure.BatchWatch
    cpu: Any = None  # bench.measure.CpuSampler
    stages: Any = None  # bench.measure.StageCpu


def latency(
    spark: Any,
    broker: Broker,
    progress: Any,
    slack: Any,
    args: argparse.Namespace,
    rate: float,
    meters: Meters,
    *,
    minutes: float | None = None,
    name: str = "steady",
    restart: bool = False,
) -> dict[str, Any]:
    """A steady real-time stream with incidents of every kind: time to the Slack message.

    ``minutes`` (default ``--latency-minutes``) and ``name`` (its topics and files) let the
    soak reuse it for an hour; ``restart`` stops the queries 3 minutes before the input
    ends and starts them again on the same checkpoints (the input goes on), measuring
    the time to the first detect batch and to the first page after it.
    """
    from bench import incidents as inc
    from bench.load import compile_producer, producer_command, write_load
    from bench.measure import cpu_split, entity_lags, live_state_bytes, top_threads
    from lab.fleet import generate
    from streaming.supervise import run_forever

    per_job = _records_per_job_per_s(args.tms)
    jobs = max(1, round(rate / per_job))
    minutes = minutes or args.latency_minutes
    run_s = minutes * 60
    restart_at = max(90.0, run_s - 180) if restart else None
    # The restart gets an incident of its own, decided about when the queries come back.
    extra = [("checkpoint_expiry", restart_at - 15)] if restart_at else []
    planned, skipped = inc.plan(jobs, args.tms, args.incidents, run_s, extra=extra)
    spec = inc.spec(jobs, args.tms, planned, seed=23)
    # Lead time: generating (~100k records/s here, halved for safety) and starting the
    # queries (~30 s) must both fit before the first record is due.
    lead_s = 60 + jobs * per_job * run_s / 50_000
    start_ms = int((time.time() + lead_s) * 1000)
    load = write_load(generate(spec, start_ms, run_s), WORK / f"{name}-{int(rate)}.bin")
    log.info(
        "%s: %d jobs x %d TMs, %d records over %.0f min (%.0f records/s), %d incidents "
        "(%s); starts in %.0f s",
        name,
        jobs,
        args.tms,
        load.records,
        minutes,
        load.records / run_s,
        len(planned),
        ", ".join(sorted({c.kind for c in planned})),
        start_ms / 1000 - time.time(),
    )
    if skipped:
        log.warning("%s: incidents that do not fit %d jobs: %s", name, jobs, skipped)
    state = WORK / f"{name}-{int(rate)}"
    cfg = _config(
        broker.bootstrap,
        f"{name}{int(rate)}",
        state,
        args.trigger_s,
        detectors=inc.DETECTORS,
        slack_url=slack.base_url,
        spark=args.spark,
    )
    arrivals: dict[str, tuple[float, bool]] = {}
    slack.on_arrival = lambda alert_id, at, reply: arrivals.setdefault(alert_id, (at, reply))
    runtime = _runtime(cfg)
    pipe = _pipeline(spark, runtime, None)

    def run_queries() -> tuple[threading.Event, threading.Thread, float]:
        stop = threading.Event()
        began = time.time()
        t = threading.Thread(
            target=lambda: run_forever(pipe, should_stop=stop.is_set), name="bench-run", daemon=True
        )
        t.start()
        return stop, t, began

    stop, runner, t_start = run_queries()
    state_over_time: list[tuple[float, int, int]] = []
    classes = compile_producer(WORK)
    wait = start_ms / 1000 - time.time() - 2
    if wait < 0:
        log.warning(
            "%s: generation ran %.0f s over the lead; the first records are late", name, -wait
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
    t_input = time.time()
    if meters.cpu is not None:
        meters.cpu.producer_pid = prod.pid
    restarted: dict[str, Any] = {}
    next_state = time.time()
    while prod.poll() is None:
        time.sleep(1)
        d = progress.latest.get("flinkwatch-detect")
        if time.time() >= next_state:
            next_state += 60
            if d is not None:
                state_over_time.append((time.time(), d.state_rows, d.state_bytes))
        if restart_at is not None and not restarted and time.time() >= start_ms / 1000 + restart_at:
            # Stop the queries (as a deployment or a config change does) and start them
            # again on the same checkpoints while the input goes on.
            restarted = {
                "at_s": round(time.time() - start_ms / 1000, 1),
                "entities": d.state_rows if d else None,
                "state_bytes": d.state_bytes if d else None,
            }
            t0 = time.time()
            stop.set()
            runner.join(timeout=300)
            restarted["stop_s"] = round(time.time() - t0, 1)
            stop, runner, t_restart = run_queries()
            restarted["started_wall"] = t_restart
            log.info("%s: queries stopped in %.1f s and started again", name, time.time() - t0)
    t_input_end = time.time()
    if meters.cpu is not None:
        meters.cpu.sample()
        meters.cpu.producer_pid = None
    if meters.stages is not None:
        meters.stages.poll()
    out = prod.stdout.read() if prod.stdout else ""
    produced = json.loads(out.strip().splitlines()[-1])
    d = progress.latest.get("flinkwatch-detect")
    # How far event time in the detector lags the wall clock when the input stops: a
    # pipeline slower than its input falls further behind the longer it runs.
    lag_s = round(time.time() - d.watermark_ms / 1000, 1) if d and d.watermark_ms else None
    time.sleep(30)  # let the last batches and deliveries finish
    d = progress.latest.get("flinkwatch-detect")
    if d is not None:
        state_over_time.append((time.time(), d.state_rows, d.state_bytes))
    stop.set()
    runner.join(timeout=120)
    runtime.close()
    # The ticker's producer: left open, it polls for the bus topic after the phase
    # deletes it, a core's worth during the phases after (the replay's times).
    pipe.close()
    t_end = time.time()
    live = live_state_bytes(spark, str(pipe.detect_checkpoint))
    lags = entity_lags(spark, str(pipe.detect_checkpoint))

    # Who paged for what.
    alerts_file = state / "alerts.jsonl"
    lines = alerts_file.read_text().splitlines() if alerts_file.exists() else []
    fired = [a for a in map(json.loads, lines) if a.get("status") == "firing"]
    acc = inc.account(spec, start_ms, fired, arrivals, end_s=run_s)
    stages, unsplit = _stages(spark, cfg, acc.pop("deciding"), state / "ledger.sqlite")
    # Disk: an hour at 5,000 records/s is ~7 GB of load file and more in Kafka.
    load.path.unlink(missing_ok=True)
    _drop_topics(broker, cfg)

    # CPU per second of input over the input's window.
    input_s = t_input_end - t_input
    cpu = meters.cpu.series.delta(t_input, t_input_end) if meters.cpu is not None else {}
    spark_cpu = (
        meters.stages.series.delta(t_input, t_input_end) if meters.stages is not None else {}
    )
    per_s = cpu_split(cpu, spark_cpu, input_s)
    steady = _steady_cpu(meters, t_input, t_input_end)
    first_batch = meters.batches.first("flinkwatch-detect", t_start)
    if restarted:
        t_restart = restarted.pop("started_wall")
        again = meters.batches.first("flinkwatch-detect", t_restart)
        pages_after = sorted((at, a) for a, (at, _r) in arrivals.items() if at >= t_restart)
        restarted.update(
            {
                "first_detect_batch_s": round(again - t_restart, 1) if again else None,
                "first_page_s": round(pages_after[0][0] - t_restart, 1) if pages_after else None,
                "first_page_alert": next(
                    (
                        {"detector": a["detector"], "entity": a["entity"]}
                        for a in fired
                        if pages_after and a["alert_id"] == pages_after[0][1]
                    ),
                    None,
                ),
                "parse_mode_after": _parse_mode(pipe),
            }
        )
    in_run = [
        (t, b, p)
        for (t, b), p in zip(list(meters.rss.samples), list(meters.rss.parts), strict=False)
        if t_start <= t <= t_end
    ]
    rss = [(t, b) for t, b, _p in in_run]
    pss = [(t, b) for t, b in list(meters.rss.pss_samples) if t_start <= t <= t_end]
    entities = jobs + jobs * args.tms
    return {
        "name": name,
        "fleet": {"jobs": jobs, "taskmanagers": jobs * args.tms},
        "records": load.records,
        "input_records_per_s": round(load.records / run_s),
        "minutes": minutes,
        "producer": produced,
        "trigger_s": args.trigger_s,
        "incidents": len(planned),
        "incident_kinds": dict(sorted(Counter(c.kind for c in planned).items())),
        "not_injected": skipped,
        "detector_params": inc.DETECTORS,
        "fleet_params": inc.FLEET,
        "alerts_delivered": acc["alert_latency_s"]["n"],
        **acc,
        "false_positive_jobs": sorted(
            {str(f["job_index"]) for f in acc["false_pages"] if f["job_index"] is not None}
        ),
        # Where the time went, per incident's first page: the deciding record's event time
        # (it is produced then) -> its event on the bus (Kafka append time) -> the
        # transition in the ledger -> the Slack message.
        "stages_s": stages,
        "stages_unsplit": unsplit,
        "watermark_lag_at_end_s": lag_s,
        "first_detect_batch_s": {
            "from_queries_start": round(first_batch - t_start, 1) if first_batch else None,
            "from_first_record": round(first_batch - start_ms / 1000, 1) if first_batch else None,
            "input_began_after_s": round(start_ms / 1000 - t_start, 1),
        },
        **({"restart": restarted} if restarted else {}),
        "cpu_window_s": round(input_s, 1),
        "cpu_s_per_input_s": per_s,
        # From the input's STEADY_AFTER_S on: what a job that runs for weeks costs, without
        # its first minutes' JIT compiling (C2's work is mostly there).
        "cpu_s_per_input_s_steady": steady,
        # The same per record: flat if the pipeline's cost grows with its input.
        "cpu_us_per_record": {
            k: round(v / max(1.0, load.records / run_s) * 1e6) for k, v in per_s.items()
        },
        "cpu_s": {k: round(v, 1) for k, v in sorted(cpu.items())},
        "spark_stage_s": {k: round(v, 1) for k, v in sorted(spark_cpu.items())},
        # What the driver JVM's CPU went to, by thread name (jvm_other is most of it).
        "jvm_threads_cpu_s": top_threads(meters.cpu.threads.delta(t_input, t_input_end))
        if meters.cpu is not None
        else {},
        "state_rows": d.state_rows if d else None,
        "state_bytes": d.state_bytes if d else None,
        "state_bytes_per_job": round(d.state_bytes / jobs) if d else None,
        "state_bytes_per_entity": round(d.state_bytes / entities) if d else None,
        "state_over_time": [
            {"t_s": round(t - t_input), "rows": r, "bytes": b} for t, r, b in state_over_time
        ],
        # The values themselves at the last batch (state_bytes is RocksDB's files on disk).
        "live_state_bytes": live,
        "live_state_bytes_per_job": round(live / jobs) if live is not None else None,
        "entity_lag_s": lags,
        "peak_rss_bytes": max((b for _t, b in rss), default=None),
        # The peak sample's sum by part (rss_part): which process holds it.
        "peak_rss_parts": max(in_run, key=lambda s: s[1])[2] if in_run else None,
        "rss_over_time": _per_minute(rss, t_input),
        # Each shared page once (RssSampler says why the RSS sum overstates).
        "peak_pss_bytes": max((b for _t, b in pss), default=None),
        "pss_over_time": _per_minute(pss, t_input),
    }


def _drop_topics(broker: Broker, cfg: Any) -> None:
    """Delete a finished run's raw, bus and dead-letter topics (their disk)."""
    from kafka.admin import KafkaAdminClient

    k = cfg.kafka
    topics = [k.logs_topic, k.metrics_topic, k.events_topic, k.deadletters_topic]
    try:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="bench")
        try:
            admin.delete_topics([t for t in topics if t in set(admin.list_topics())])
        finally:
            admin.close()
    except Exception as exc:  # noqa: BLE001 - only disk is at stake
        log.warning("could not delete the run's topics %s: %s", topics, exc)


def _per_minute(samples: list[tuple[float, int]], t0: float) -> list[dict[str, Any]]:
    """RSS samples (every second) as one row per minute: the value then and the minute's peak."""
    out: list[dict[str, Any]] = []
    for t, b in samples:
        minute = int((t - t0) // 60)
        if not out or out[-1]["_m"] != minute:
            out.append({"_m": minute, "t_s": round(t - t0), "bytes": b, "peak_bytes": b})
        else:
            out[-1]["peak_bytes"] = max(out[-1]["peak_bytes"], b)
    for row in out:
        del row["_m"]
    return out


#: A steady run's CPU is also given from this many seconds after its input began.
STEADY_AFTER_S = 180.0


def _steady_cpu(meters: Meters, t_input: float, t_end: float) -> dict[str, float | None]:
    """:func:`bench.measure.cpu_split` from ``STEADY_AFTER_S`` into the input to its end.

    Empty when the input is too short to leave two minutes after that.
    """
    from bench.measure import cpu_split

    t0 = t_input + STEADY_AFTER_S
    if meters.cpu is None or meters.stages is None or t_end - t0 < 120:
        return {}
    cpu = meters.cpu.series.delta(t0, t_end)
    return cpu_split(cpu, meters.stages.series.delta(t0, t_end), t_end - t0)


def _stages(
    spark: Any, cfg: Any, deciding: list[dict[str, Any]], ledger: Path
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split each first page's latency by the bus record's append time and the ledger.

    The bus record of the deciding event is the alert entity's record with the alert's
    event time. A verdict stamped with a deadline (a checkpoint pending too long, a
    bucket's end) has no such record: those are counted apart, with the time from their
    event time to the ledger and the delivery.
    """
    recorded = _recorded_ms(ledger) if ledger.exists() else {}
    wanted = []
    for a in deciding:
        rec_s = recorded.get(a["alert_id"])
        t = _event_s(a)
        wanted.append((a["entity"], round(t * 1000), t - 5, (rec_s or a["_arrival"]) + 1))
    on_bus = _bus_times(spark, cfg, wanted)
    split: dict[str, list[float]] = {"parse_to_bus": [], "detect": [], "delivery": []}
    apart: dict[str, list[float]] = {"event_to_ledger": [], "delivery": []}
    by_detector: dict[str, int] = {}
    for a in deciding:
        t = _event_s(a)
        at = a["_arrival"]
        rec_s = recorded.get(a["alert_id"])
        bus_s = on_bus.get((a["entity"], round(t * 1000)))
        if bus_s is not None and rec_s is not None:
            split["parse_to_bus"].append(bus_s - t)
            split["detect"].append(rec_s - bus_s)
            split["delivery"].append(at - rec_s)
        elif rec_s is not None:
            apart["event_to_ledger"].append(rec_s - t)
            apart["delivery"].append(at - rec_s)
            by_detector[a["detector"]] = by_detector.get(a["detector"], 0) + 1
    return (
        {k: _percentiles(sorted(v)) for k, v in split.items()},
        {
            "n": len(apart["delivery"]),
            "by_detector": dict(sorted(by_detector.items())),
            **{k: _percentiles(sorted(v)) for k, v in apart.items()},
        },
    )


def _event_s(alert: dict[str, Any]) -> float:
    return dt.datetime.fromisoformat(alert["event_time"].replace("Z", "+00:00")).timestamp()


def _bus_times(
    spark: Any, cfg: Any, wanted: list[tuple[str, int, float, float]]
) -> dict[tuple[str, int], float]:
    """When each ``(entity, event ms)`` reached the event bus (Kafka append time).

    ``wanted`` holds ``(entity, event ms, from s, to s)``: each record is looked for
    between the two wall times (the bus is stamped ``LogAppendTime``); overlapping ranges
    are read as one batch query.
    """
    from pyspark.sql import functions as F

    from conf.kafka_client import kafka_settings

    if not wanted:
        return {}
    ranges: list[list[float]] = []
    for _e, _ms, lo, hi in sorted(wanted, key=lambda w: w[2]):
        if ranges and lo <= ranges[-1][1]:
            ranges[-1][1] = max(ranges[-1][1], hi)
        else:
            ranges.append([lo, hi])
    keys = sorted({w[0] for w in wanted})
    pairs = {(w[0], w[1]) for w in wanted}
    out: dict[tuple[str, int], float] = {}
    for lo, hi in ranges:
        rows = (
            spark.read.format("kafka")
            .options(**kafka_settings(cfg.kafka).spark(reader=True))
            .option("subscribe", cfg.kafka.events_topic)
            .option("startingTimestamp", str(int(lo * 1000)))
            .option("endingTimestamp", str(int(hi * 1000)))
            .option("startingOffsetsByTimestampStrategy", "latest")
            .option("failOnDataLoss", "false")
            .load()
            .select(F.col("key").cast("string").alias("k"), "value", "timestamp")
            .where(F.col("k").isin(*keys))
            .select(
                "k",
                F.get_json_object(F.col("value").cast("string"), "$.event_ms")
                .cast("long")
                .alias("ms"),
                "timestamp",
            )
            .collect()
        )
        for r in rows:
            key = (r["k"], int(r["ms"] or 0))
            if key in pairs:
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
    """Records/s one simulated job of the steady fleets emits (measured from the simulator)."""
    from bench.incidents import VERSIONS, spec
    from lab.fleet import generate

    fleet = spec(len(VERSIONS), tms, [], seed=5)
    n = sum(1 for _ in generate(fleet, 1_700_000_000_000, 600))
    return n / len(VERSIONS) / 600


def _percentiles(xs: list[float]) -> dict[str, float | int | None]:
    from bench.incidents import percentiles

    return percentiles(xs)


# --- putting it together ---------------------------------------------------------------


class _Slack:
    """The local Slack emulator, noting when each alert's firing message arrived.

    ``on_arrival(alert_id, wall, reply)``: ``reply`` is True for a thread reply (an alert
    that joined an incident whose message was posted before).
    """

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
            self.on_arrival(payload.get("alert_id"), at, bool(message.get("thread_ts")))

    @property
    def base_url(self) -> str:
        return self.emulator.base_url


def _span(xs: Any) -> str:
    """Seconds of one or more incidents: ``37-50 s (6 of 7)``; older results held one value."""
    if not isinstance(xs, list):
        return f"{xs} s"
    got = sorted(x for x in xs if x is not None)
    if not got:
        return f"none of {len(xs)}"
    body = f"{got[0]} s" if len(got) == 1 else f"{got[0]}-{got[-1]} s"
    return body if len(got) == len(xs) else f"{body} ({len(got)} of {len(xs)})"


def _steady_rows(lt: dict[str, Any]) -> list[tuple[str, str]]:
    """Table rows of one steady run."""
    rate = f"{lt['input_records_per_s']:,} records/s"
    lat = lt["alert_latency_s"]
    rows = [
        (
            f"alert latency at {rate}",
            f"p50 {lat['p50']} / p95 {lat['p95']} / p99 {lat['p99']} s (n={lat['n']} of "
            f"{lt['incidents']}), {lt['fleet']['jobs']} jobs, trigger {lt['trigger_s']} s",
        )
    ]
    misses = lt.get("misses")
    if misses is not None:
        missed = ", ".join(f"{k} x{len(v)}" for k, v in sorted(misses.items())) or "none"
        rows.append(
            (
                f"  misses / false pages at {rate}",
                f"{missed} / {len(lt.get('false_pages') or [])}",
            )
        )
    st = lt.get("stages_s") or {}
    if st:
        rows.append(
            (
                f"  stages (p50 / p99) at {rate}",
                ", ".join(
                    f"{k} {(v or {}).get('p50')} / {(v or {}).get('p99')} s" for k, v in st.items()
                )
                + f" (n={(st.get('detect') or {}).get('n')}; "
                f"{(lt.get('stages_unsplit') or {}).get('n', 0)} deadline verdicts unsplit)",
            )
        )
    for key, what in (("cpu_s_per_input_s", ""), ("cpu_s_per_input_s_steady", ", steady")):
        cpu = lt.get(key) or {}
        if cpu:
            rows.append(
                (
                    f"  CPU s per s of input at {rate}{what}",
                    ", ".join(f"{k} {v}" for k, v in cpu.items()),
                )
            )
    if lt.get("peak_rss_bytes") is not None:
        rows.append(
            (
                f"  peak RSS, state at {rate}",
                f"{lt['peak_rss_bytes'] / 2**30:.2f} GiB (PSS "
                f"{(lt.get('peak_pss_bytes') or 0) / 2**30:.2f}); {lt.get('state_rows')} rows, "
                f"{lt.get('state_bytes_per_job')} bytes per job on disk, "
                f"{lt.get('live_state_bytes_per_job')} in the values",
            )
        )
    return rows


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
        (
            "idle `flinkwatch run` (empty topics), cores of its process tree",
            _idle_row(r.get("idle") or {}),
        ),
        ("pipeline records/s", f"{r.get('pipeline_records_per_s') or 0:,}"),
        ("baseline records/s (read + count)", f"{r.get('baseline_records_per_s') or 0:,}"),
        ("ratio pipeline / baseline", f"{r.get('ratio')}"),
        ("peak RSS (driver + JVM + workers)", f"{(r.get('peak_rss_bytes') or 0) / 2**30:.2f} GiB"),
        ("state per job (100-job backlog)", f"{r.get('state_bytes_per_job')} bytes"),
    ]
    for lt in r.get("latency") or []:
        rows.extend(_steady_rows(lt))
    for c in r.get("catchup") or []:
        rows.append(
            (
                f"catch-up of {c['minutes']:g} min ({c['records']:,} records)",
                f"{c['rows_dropped_late']:,} rows dropped as late, {c['false_alerts']} false "
                f"alerts ({c['false_paged']} paged), {c['detected']}/{c['incidents']} incidents "
                f"alerted, caught up in {c['caught_up_s']} s",
            )
        )
    fdb = r.get("first_detect_batch_s") or {}
    if any(v is not None for v in fdb.values()):
        rows.append(
            (
                "first detect batch after a start / restart",
                f"{fdb.get('start')} s / {fdb.get('restart')} s (first page "
                f"{fdb.get('restart_first_page_s')} s after the restart, "
                f"{fdb.get('restart_entities')} entities)",
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
                f"{soak.get('minutes') or (rss[-1].get('t_s') or 0) // 60} min",
                f"RSS {(rss[0].get('bytes') or 0) / 2**30:.2f} -> "
                f"{(rss[-1].get('bytes') or 0) / 2**30:.2f} GiB (peak "
                f"{(soak.get('peak_rss_bytes') or 0) / 2**30:.2f}; PSS peak "
                f"{(soak.get('peak_pss_bytes') or 0) / 2**30:.2f}), state rows "
                f"{states[0].get('rows')} -> {states[-1].get('rows')}, alert p50 "
                f"{lat.get('p50')} / p99 {lat.get('p99')} s (n={lat.get('n')} of "
                f"{soak.get('incidents')})",
            )
        )
        if "cpu_s_per_input_s" in soak:
            rows.extend(_steady_rows(soak)[1:])
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
    rp = r.get("replay") or {}
    for what, key in (("small real run", "small"), ("an hour of 100 jobs", "hour_100_jobs")):
        wall, cpu = rp.get(f"{key}_wall_s"), rp.get(f"{key}_cpu_s")
        if wall and cpu:
            rows.append(
                (
                    f"`flinkwatch replay`, {what}",
                    f"{wall['median']} s wall ({wall['min']}-{wall['max']}), "
                    f"{cpu['median']} CPU s, median of {len(wall['runs'])}",
                )
            )
    watch = rp.get("watch_small")
    if watch:
        answer, own = watch["answer_s"], watch["try_s"]
        rows.append(
            (
                "`flinkwatch replay --watch`, small real run: a save to its answer",
                f"{answer['median']} s ({answer['min']}-{answer['max']}; the try itself "
                f"{own['median']} s), {len(answer['runs'])} saves after a first try of "
                f"{watch['first_try_s']} s; {watch['idle_cores']} cores while it waits",
            )
        )
    for kind, fw in (r.get("flinkwatch_time_to_alert_s") or {}).items():
        am = (r.get("prometheus_time_to_alert_s") or {}).get(kind)
        rows.append(
            (
                f"time to first page: {kind}",
                f"flinkwatch {_span(fw)}, Prometheus + Alertmanager {_span(am)}",
            )
        )
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
    for side, q in pages.items():
        if side.startswith("flinkwatch_via_am_"):
            wait = side.rsplit("_", 1)[1]
            rows.append(
                (
                    f"page latency, deciding record -> Alertmanager (group_wait {wait})",
                    f"p50 {q.get('p50')} / p99 {q.get('p99')} s (n={q.get('n')})",
                )
            )
    w = max(len(k) for k, _ in rows)
    return "\n".join(f"| {k.ljust(w)} | {v} |" for k, v in rows)


def _session(args: argparse.Namespace) -> tuple[Any, str]:
    """The bench's Spark session, its UI on a free loopback port; returns it and the UI URL.

    The UI's REST API gives each stage's executor CPU; it keeps enough stages and jobs
    between two polls of :class:`bench.measure.StageCpu`.
    """
    from conf import AppConfig
    from streaming.session import SessionSpec, driver_java

    port = free_port_run(1)
    # One session for every phase, each with its own config: the session's part of the
    # config, as `flinkwatch run` reads it. Real-time parsing keeps a task per raw
    # partition (2 topics x 2) running.
    options = {
        "spark.ui.retainedStages": str(args.ui_retained),
        "spark.ui.retainedJobs": str(args.ui_retained),
        "spark.sql.ui.retainedExecutions": "200",
        # --spark options={...}: Spark settings tried on this session, as a config's would be.
        **args.spark.get("options", {}),
    }
    if args.jvm:
        # flinkwatch's own options (the class archive's too), then these.
        jvm = shlex.split(args.jvm)
        options["spark.driver.extraJavaOptions"] = driver_java("local[8]", *jvm)
    spark_cfg = {"master": "local[8]", "shuffle_partitions": 2, "ui_port": port, "options": options}
    spark = SessionSpec.of(AppConfig.model_validate({"spark": spark_cfg})).start()
    url = spark.sparkContext.uiWebUrl or f"http://127.0.0.1:{port}"
    ui_port = url.rsplit(":", 1)[1]
    return spark, f"http://127.0.0.1:{ui_port}"


def _idle_row(idle: dict[str, Any]) -> str:
    cores = idle.get("cores") or {}
    batches = [r.get("batches_in_window") for r in idle.get("runs") or []]
    return (
        f"median {cores.get('median')} (min {cores.get('min')}, max {cores.get('max')}); "
        f"batches in the window {batches}"
    )


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns 0."""
    p = argparse.ArgumentParser(prog="bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=100, help="backlog fleet: Flink jobs")
    p.add_argument("--tms", type=int, default=4, help="TaskManagers per job")
    p.add_argument("--hours", type=float, default=2.0, help="backlog: hours of fleet records")
    p.add_argument(
        "--rate",
        type=float,
        nargs="+",
        default=[500, 2_000, 5_000, 10_000, 20_000],
        help="steady input records/s, one run each",
    )
    p.add_argument("--soak-minutes", type=float, default=60.0, help="the soak's length")
    p.add_argument("--soak-rate", type=float, default=5_000.0, help="the soak's records/s")
    p.add_argument("--latency-minutes", type=float, default=8.0, help="each steady run's length")
    p.add_argument("--incidents", type=int, default=40, help="incidents per steady run")
    p.add_argument(
        "--restart-rate",
        type=float,
        default=10_000.0,
        help="restart: the steady run at this rate restarts its queries 3 min before its end "
        "(a run of --restart-minutes of its own if no --rate matches)",
    )
    p.add_argument(
        "--restart-minutes", type=float, default=5.0, help="restart: length of its own run"
    )
    p.add_argument(
        "--trigger-s",
        type=float,
        default=None,
        help="detect trigger of the steady runs (0: back to back; default: the config's)",
    )
    p.add_argument(
        "--spark",
        type=yaml_setting,
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="idle and steady runs: keys of the config's spark section, e.g. parse_mode=microbatch "
        "(VALUE read as YAML)",
    )
    p.add_argument("--ui-retained", type=int, default=1000, help="Spark UI: stages and jobs kept")
    p.add_argument(
        "--jvm",
        default="",
        help="steady runs: JVM options added to the driver's (--jvm=-XX:TieredStopAtLevel=1)",
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
    p.add_argument("--idle-runs", type=int, default=2, help="idle: runs of `flinkwatch run`")
    p.add_argument(
        "--idle-warmup-s",
        type=float,
        default=90.0,
        help="idle: warm-up per run (then until the parse query idles)",
    )
    p.add_argument("--idle-window-s", type=float, default=60.0, help="idle: measured per run")
    p.add_argument(
        "--replay-runs", type=int, default=3, help="replay: runs of each input (the median)"
    )
    p.add_argument(
        "--catchup-minutes",
        type=float,
        nargs="+",
        default=[20.0, 3.0],
        help="catchup: backlogs (minutes of the fleet) `flinkwatch run` starts on, one run each",
    )
    p.add_argument("--skip", nargs="*", default=[], choices=list(PHASES))
    args = p.parse_args(argv)
    args.spark = dict(args.spark)
    if args.trigger_s is None:
        from conf import SparkConfig

        args.trigger_s = args.spark.get("trigger_interval_s", SparkConfig().trigger_interval_s)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)-5s %(name)s: %(message)s"
    )
    for noisy in ("kafka", "py4j", "sinks", "streaming"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    os.environ["SLACK_BOT_TOKEN"] = TOKEN

    from streaming.listener import ProgressLogger

    result: dict[str, Any] = {
        "run_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "args": vars(args),
    }
    _carry_over(result, args.skip)
    steady = "latency" not in args.skip
    restart_on = "restart" not in args.skip
    # The restart rides on the steady run at its rate, or gets a run of its own.
    restart_alone = restart_on and not (steady and args.restart_rate in args.rate)
    topics = ["bench.logs", "bench.metrics"]
    topics += [f"steady{int(r)}.{s}" for r in args.rate for s in ("logs", "metrics")]
    topics += [f"soak{int(args.soak_rate)}.{s}" for s in ("logs", "metrics")]
    topics += [f"restart{int(args.restart_rate)}.{s}" for s in ("logs", "metrics")]
    topics += [f"idle{n}.{s}" for n in range(args.idle_runs) for s in ("logs", "metrics")]
    topics += [f"catchup{int(m)}.{s}" for m in args.catchup_minutes for s in ("logs", "metrics")]
    # The replay phase reads files: alone it needs no broker.
    broker = Broker(topics, 2).start() if set(PHASES) - {"replay"} - set(args.skip) else None
    rss = RssSampler().start()
    slack = _Slack()
    slack.emulator.start()
    meters: Meters | None = None
    try:
        if "idle" not in args.skip:
            # First, before this process starts a Spark session of its own beside it.
            from bench.idle import idle

            result["idle"] = idle(
                broker.bootstrap,
                WORK,
                args.idle_runs,
                args.idle_warmup_s,
                args.idle_window_s,
                args.spark,
            )
            _save(result)
        local = not {"throughput", "latency", "soak", "restart", "catchup"} <= set(args.skip)
        if local:
            from bench.measure import BatchWatch, CpuSampler, StageCpu

            spark, ui = _session(args)
            progress = ProgressLogger(every_s=60)
            spark.streams.addListener(progress)
            batches = BatchWatch()
            spark.streams.addListener(batches)
            jvm = spark.sparkContext._jvm  # noqa: SLF001 - the JVM's own pid
            meters = Meters(
                rss=rss,
                batches=batches,
                cpu=CpuSampler(
                    jvm_pid=int(jvm.java.lang.ProcessHandle.current().pid()),
                    broker_pid=broker.pid,
                ).start(),
                stages=StageCpu(ui, spark.sparkContext.applicationId).start(),
            )
            log.info("Spark UI (stage CPU) at %s", ui)
        if "throughput" not in args.skip:
            rss.peak = 0
            t = result["throughput"] = throughput(spark, broker, progress, slack.base_url, args)
            t["peak_rss_bytes"] = rss.peak
            _save(result)
            result["pipeline_records_per_s"] = t["pipeline_records_per_s"]
            result["baseline_records_per_s"] = t["baseline_records_per_s"]
            result["ratio"] = round(t["pipeline_records_per_s"] / t["baseline_records_per_s"], 3)
            result["state_bytes_per_job"] = t["state_bytes_per_job"]
        if "catchup" not in args.skip:
            from bench.catchup import catchup_phase

            result["catchup"] = catchup_phase(spark, broker, progress, slack, args)
            _save(result)
        if steady and meters is not None:
            runs = result["latency"] = []
            for rate in args.rate:
                rss.peak = 0
                again = restart_on and rate == args.restart_rate
                runs.append(
                    latency(spark, broker, progress, slack, args, rate, meters, restart=again)
                )
                if again:
                    result["restart"] = {"rate": rate, **runs[-1]["restart"]}
                result["trigger_s"] = args.trigger_s
                result["alert_latency_s"] = runs[0]["alert_latency_s"]
                _save(result)
        if restart_alone and meters is not None:
            run = latency(
                spark,
                broker,
                progress,
                slack,
                args,
                args.restart_rate,
                meters,
                minutes=args.restart_minutes,
                name="restart",
                restart=True,
            )
            result["restart"] = {
                "rate": args.restart_rate,
                **run.pop("restart", {}),
                "run": {k: run[k] for k in ("input_records_per_s", "fleet", "alert_latency_s")},
                "first_detect_batch_at_start_s": run["first_detect_batch_s"],
            }
            _save(result)
        if "soak" not in args.skip and meters is not None:
            # An hour at a constant fleet: RSS and state sampled each minute, flat or not.
            rss.peak = 0
            result["soak"] = latency(
                spark,
                broker,
                progress,
                slack,
                args,
                args.soak_rate,
                meters,
                minutes=args.soak_minutes,
                name="soak",
            )
            _save(result)
        # The memory target is for the 100-job fleet: the throughput phase's peak.
        if "throughput" not in args.skip or "peak_rss_bytes" not in result:
            result["peak_rss_bytes"] = (result.get("throughput") or {}).get(
                "peak_rss_bytes", rss.peak
            )
        if meters is not None:
            meters.cpu.stop()
            meters.stages.stop()
            result["spark_ui"] = {
                "stage_descriptions": meters.stages.descriptions,
                "poll_errors": meters.stages.errors,
            }
        if local:
            spark.stop()
        if "cluster" not in args.skip:
            from bench.cluster import cluster_phase

            c = result["cluster"] = cluster_phase(broker, args, WORK)
            result["cluster_records_per_s"] = {n: r["records_per_s"] for n, r in c["runs"].items()}
            _save(result)
        if "replay" not in args.skip:
            from bench.replay import replay_phase
            from bench.replay_watch import watch_phase

            rp = replay_phase(WORK / "replay", jobs=args.jobs, tms=args.tms, runs=args.replay_runs)
            result["replay"] = {**rp, "watch_small": watch_phase(WORK / "replay" / "watch")}
            _save(result)
        if "peer" not in args.skip:
            from bench.peer import run_peer

            peer = result["peer"] = run_peer(
                bootstrap=broker.bootstrap, workdir=WORK / "peer", minutes=args.peer_minutes
            )
            result.update(peer_summary(peer))
    finally:
        rss.stop()
        slack.emulator.stop()
        if broker is not None:
            broker.stop()
    summary = _save(result)
    print(summary)  # noqa: T201
    return 0


def peer_summary(peer: dict[str, Any]) -> dict[str, Any]:
    """The peer's headline numbers: time to the first page per kind, misses, page latency.

    Per kind, every incident's seconds from its onset to each side's first page (whichever
    detector or rule sent it; None: no page), flinkwatch's Slack message and Alertmanager's.
    """
    by_kind: dict[str, dict[str, list[float | None]]] = {"flinkwatch": {}, "prometheus": {}}
    misses: dict[str, list[dict[str, Any]]] = {"flinkwatch": [], "prometheus_alertmanager": []}
    for inc in peer.get("incidents", []):
        fw = inc.get("flinkwatch_page_s", inc.get("flinkwatch_s"))
        am = inc.get("alertmanager_page_s", inc.get("prometheus_s"))
        by_kind["flinkwatch"].setdefault(inc["kind"], []).append(fw)
        by_kind["prometheus"].setdefault(inc["kind"], []).append(am)
        for side in inc.get("missed_by") or []:
            misses[side].append({"kind": inc["kind"], "job_index": inc["job_index"]})
    pages: dict[str, list[float]] = {"flinkwatch": [], "prometheus_alertmanager": []}
    for inc in peer.get("incidents", []):
        for side, v in (inc.get("page_latency_s") or {}).items():
            if v is not None:
                pages.setdefault(side, []).append(v)
    return {
        "flinkwatch_time_to_alert_s": by_kind["flinkwatch"],
        "prometheus_time_to_alert_s": by_kind["prometheus"],
        "page_misses": misses,
        "page_latency_s": {k: _percentiles(sorted(v)) for k, v in pages.items()},
    }


#: The top-level result keys each phase writes.
PHASES: dict[str, tuple[str, ...]] = {
    "idle": ("idle",),
    "throughput": (
        "throughput",
        "pipeline_records_per_s",
        "baseline_records_per_s",
        "ratio",
        "state_bytes_per_job",
        "peak_rss_bytes",
    ),
    "latency": ("latency", "trigger_s", "alert_latency_s"),
    "restart": ("restart",),
    "soak": ("soak",),
    "catchup": ("catchup",),
    "cluster": ("cluster", "cluster_records_per_s"),
    "replay": ("replay",),
    "peer": (
        "peer",
        "flinkwatch_time_to_alert_s",
        "prometheus_time_to_alert_s",
        "page_misses",
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


def _derived(result: dict[str, Any]) -> None:
    """Headline keys drawn from the phases' own (fresh or carried over)."""
    runs = result.get("latency") or []
    restart = result.get("restart") or {}
    at = next((r for r in runs if r.get("restart")), runs[0] if runs else None)
    start = ((at or {}).get("first_detect_batch_s") or {}).get("from_queries_start")
    if start is None:
        start = (restart.get("first_detect_batch_at_start_s") or {}).get("from_queries_start")
    rp = result.get("replay") or {}
    result["replay_wall_s"] = {
        "small": (rp.get("small_wall_s") or {}).get("median"),
        "hour_100_jobs": (rp.get("hour_100_jobs_wall_s") or {}).get("median"),
    }
    result["first_detect_batch_s"] = {
        "start": start,
        "restart": restart.get("first_detect_batch_s"),
        "restart_first_page_s": restart.get("first_page_s"),
        "restart_entities": restart.get("entities"),
    }


def _save(result: dict[str, Any]) -> str:
    """Write the results so far (after every phase: a late failure keeps the early numbers).

    Also draws ``latency_vs_rate.png`` from the steady runs.
    """
    RESULTS.mkdir(parents=True, exist_ok=True)
    _derived(result)
    draw(result, RESULTS / "latency_vs_rate.png")
    text = json.dumps(result, indent=2)
    (RESULTS / "latest.json").write_text(text + "\n")
    stamp = result["run_at"].replace(":", "").replace("-", "")[:15]
    (RESULTS / f"{stamp}.json").write_text(text + "\n")
    summary = table(result)
    (RESULTS / "latest.md").write_text(summary + "\n")
    return summary


if __name__ == "__main__":
    raise SystemExit(main())
