"""The catch-up phase: `flinkwatch run` started on a backlog, as after an outage or a restart.

For each length of ``--catchup-minutes``, the 100-job fleet's records of that many minutes
(incidents of every kind, :mod:`bench.incidents`) are written to the raw topics first, all
at once, ending a few seconds before the queries start; then the live layout runs (the
parse query catching up in micro-batches or in real time as :mod:`streaming.catchup`
decides, the detect query beside it) until the parse query runs in real time with nothing
left to read. What it measures is what a catch-up must not do: rows the detect query
dropped as older than the watermark, alerts about jobs without an incident or before one
(false alerts), incidents never alerted; and how long the catch-up took.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse

    from pyspark.sql import SparkSession

    from bench.run import Broker

log = logging.getLogger(__name__)

#: How long the parse query must have been reading in real time with nothing new before
#: the catch-up counts as over.
SETTLE_S = 30.0


def catchup_phase(
    spark: SparkSession, broker: Broker, progress: Any, slack: Any, args: argparse.Namespace
) -> list[dict[str, Any]]:
    """One catch-up per length in ``args.catchup_minutes``."""
    return [
        catchup(spark, broker, progress, slack, args, minutes) for minutes in args.catchup_minutes
    ]


def catchup(
    spark: SparkSession,
    broker: Broker,
    progress: Any,
    slack: Any,
    args: argparse.Namespace,
    minutes: float,
) -> dict[str, Any]:
    """A backlog of ``minutes`` of the fleet, caught up by the live layout."""
    from bench import incidents as inc
    from bench.load import compile_producer, send, write_load
    from bench.run import WORK, _config, _parse_mode, _pipeline, _runtime
    from lab.fleet import generate
    from streaming.supervise import run_forever

    name = f"catchup{int(minutes)}"
    run_s = minutes * 60
    planned, skipped = inc.plan(args.jobs, args.tms, args.incidents, run_s)
    spec = inc.spec(args.jobs, args.tms, planned, seed=5)
    start_ms = int(time.time() * 1000 - run_s * 1000 - 30_000)
    load = write_load(generate(spec, start_ms, run_s), WORK / f"{name}.bin")
    classes = compile_producer(WORK)
    sent = send(classes, broker.bootstrap, f"{name}.logs", f"{name}.metrics", load.path, False)
    log.info("%s: %d records (%d logs) written at %.0f/s", name, load.records, load.logs,
             sent["records_per_s"])  # fmt: skip
    state = WORK / name
    cfg = _config(
        broker.bootstrap, name, state, args.trigger_s, detectors=inc.DETECTORS,
        slack_url=slack.base_url,
    )  # fmt: skip
    arrivals: dict[str, tuple[float, bool]] = {}
    slack.on_arrival = lambda alert_id, at, reply: arrivals.setdefault(alert_id, (at, reply))
    dropped_before = _dropped(progress)
    runtime = _runtime(cfg)
    pipe = _pipeline(spark, runtime, None)
    stop = threading.Event()
    runner = threading.Thread(
        target=lambda: run_forever(pipe, should_stop=stop.is_set), name=name, daemon=True
    )
    before = progress.latest.get("flinkwatch-parse")  # the previous run's, if any
    t0 = time.time()
    runner.start()
    caught_up = _wait_caught_up(pipe, progress, _parse_mode, t0, before)
    time.sleep(SETTLE_S)  # the detect query's last batches and their deliveries
    stop.set()
    runner.join(timeout=120)
    runtime.close()
    pipe.close()
    lines = (state / "alerts.jsonl").read_text().splitlines()
    fired = [a for a in map(json.loads, lines) if a.get("status") == "firing"]
    acc = inc.account(spec, start_ms, fired, arrivals, end_s=run_s)
    load.path.unlink(missing_ok=True)
    detected = sum(1 for r in acc["per_incident"] if r.get("detected_s") is not None)
    return {
        "minutes": minutes,
        "records": load.records,
        "log_records": load.logs,
        "fleet": {"jobs": args.jobs, "taskmanagers": args.jobs * args.tms},
        "incidents": len(planned),
        "not_injected": skipped,
        "detected": detected,
        "misses": acc["misses"],
        "false_alerts": len(acc["false_pages"]),
        "false_paged": sum(1 for f in acc["false_pages"] if f["paged"]),
        "false_alerts_by": dict(Counter(f["detector"] for f in acc["false_pages"])),
        "rows_dropped_late": _dropped(progress) - dropped_before,
        "caught_up_s": round(caught_up - t0, 1) if caught_up else None,
    }


def _dropped(progress: Any) -> int:
    d = progress.latest.get("flinkwatch-detect")
    return int(d.late_rows_dropped) if d is not None else 0


def _wait_caught_up(pipe: Any, progress: Any, mode: Any, t0: float, before: Any) -> float | None:
    """When this run's parse query first ran in real time, released, and read nothing.

    ``None``: not within 15 minutes.
    """
    while time.time() - t0 < 900:
        time.sleep(1)
        parse = progress.latest.get("flinkwatch-parse")
        ticker = getattr(pipe.path, "ticker", None)
        if ticker is None or ticker.held or parse is None or parse is before:
            continue
        if mode(pipe) == "realtime" and parse.input_rows == 0:
            return time.time()
    log.warning("catch-up: the parse query did not catch up in 15 minutes")
    return None
