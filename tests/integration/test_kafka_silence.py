"""Nothing arriving through the real broker: no batch for nothing, ticks page a silence."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_until, wait_while_progressing
from tests.integration.kafka_path import (
    JOB_A,
    config,
    expired_cycle,
    pipeline,
    read_alerts,
    running,
)

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def _last_batches(spark: Any) -> list[tuple[Any, Any, Any]]:
    """The detect query's last micro-batches, to tell what started an unexpected one."""
    q = next((q for q in spark.streams.active if q.name == "flinkwatch-detect"), None)
    try:
        progress = [json.loads(x.json) for x in (q.recentProgress[-4:] if q else [])]
    except (AttributeError, TypeError, ValueError) as exc:  # a message, not a second failure
        return [("progress unreadable", repr(exc), None)]
    return [
        (b.get("batchId"), b.get("numInputRows"), (b.get("eventTime") or {}).get("watermark"))
        for b in progress
    ]


def test_an_idle_detect_query_runs_no_batch_until_a_deadline_is_due(spark, kafka, tmp_path) -> None:
    """Issue #34: nothing arriving and no deadline due, the detect query starts no batch.

    Counted in the detect query's batches against the driver's looks at the ticks (its
    loop's progress), never in seconds. Before, a tick went to every shard each
    ``tick_interval_s``: a batch of every shard, for nothing.
    """
    cfg = config(kafka, "e2eidle", tmp_path / "state")
    # The parse query idles in micro-batches after idle_after_s with nothing read: a restart,
    # whose start writes a release mark to every bus partition, and the detect query runs a
    # batch of them. At the default 60 s that came inside the window watched below on a
    # slow run (2 batches, no tick): here it comes first and is waited for.
    sp = cfg.spark.model_copy(
        update={"trigger_interval_s": 0, "tick_interval_s": 0.5, "idle_after_s": 2}
    )
    cfg = cfg.model_copy(update={"spark": sp})
    kafka.create_topics(cfg.kafka.logs_topic, cfg.kafka.metrics_topic)
    # One job: its silence deadline is job_lost's silence_s (minutes) after its records
    # reached the bus; nothing else of it is due sooner.
    kafka.produce(cfg.kafka.logs_topic, expired_cycle(JOB_A, 1, 1, 1), key=JOB_A.encode())
    p = pipeline(spark, cfg, {})
    p.trigger = None
    with running(p):
        # The job as it stays with nothing to read: the parse query idling in micro-batches.
        def idling() -> bool:
            # The plan is set before the marks are written: the idle query's first batch
            # says it has started (marks written), the drained bus that the detect query
            # has committed them.
            plan = p.path.parse_plan
            return (
                plan is not None
                and plan.idle
                and p.path.quiet.newest_ms is not None
                and p.path.bus_drained(p)
            )

        wait_until(
            idling,
            timeout=240,  # the first real-time batch, its JIT included, then idle_after_s
            what="the parse query idling in micro-batches, its marks read",
        )
        # The catch-up marks around the parse query's start (or the first tick) go to every
        # shard: then each has said when it is due.
        wait_until(
            lambda: (
                p.path.ticker is not None
                and len(p.stats.due()) == cfg.spark.state_shards
                and any(at is not None for at in p.stats.due().values())
            ),
            timeout=240,  # the parse and detect queries' first batches, their JIT included
            what="every shard reporting when it is due",
        )
        ticker = p.path.ticker
        assert ticker is not None

        def looked(n: int) -> None:
            start = ticker.looks
            wait_until(lambda: ticker.looks >= start + n, timeout=120, what=f"{n} looks")

        # Settle: the batches of the records and of the first tick, and the no-data batch
        # Spark runs after one that moved the watermark, may still be to come or running.
        while True:
            batches = p.stats.delivered
            looked(8)
            if p.stats.delivered == batches and not _in_batch(spark):
                break
        sent = ticker.sent
        looked(40)  # ten seconds of the driver's loop, twenty tick intervals
        assert p.stats.delivered == batches, (
            f"the idle detect query ran batches: {p.stats.delivered - batches}, ticks "
            f"{ticker.sent - sent}, due {sorted(x for x in p.stats.due().values() if x)}, "
            f"the last batches (id, rows, watermark): {_last_batches(spark)}"
        )
        assert ticker.sent == sent, "ticks were written with nothing due"
        # Still alive: a record arrives, a batch runs for it.
        kafka.produce(cfg.kafka.logs_topic, expired_cycle(JOB_A, 2, 1, 3), key=JOB_A.encode())
        wait_until(lambda: p.stats.delivered > batches, timeout=120, what="a batch for a record")


def _watermark(spark) -> str | None:  # type: ignore[no-untyped-def]
    detect = next((q for q in spark.streams.active if q.name == "flinkwatch-detect"), None)
    last = detect.lastProgress if detect is not None else None
    return (last.eventTime or {}).get("watermark") if last is not None else None


def _in_batch(spark) -> bool:  # type: ignore[no-untyped-def]
    detect = next((q for q in spark.streams.active if q.name == "flinkwatch-detect"), None)
    return detect is not None and bool(detect.status.get("isTriggerActive"))


def _records(log: str) -> list[str]:
    """A log file's records as a multiline-aware shipper sends them (a stack trace stays)."""
    return re.split(r"\n(?=\d{4}-\d\d-\d\d )", log.strip())


@pytest.mark.parametrize("ticks", [True, False], ids=["ticks", "no_ticks"])
def test_a_whole_cluster_falling_silent_pages_with_ticks_only(
    spark, kafka, tmp_path, ticks: bool
) -> None:
    """Issue #22: a real Flink 2.3 cluster stopped altogether (both JVMs killed).

    Nothing more is logged or scraped: in event time nothing moves. The ticks, flinkwatch's
    own evidence that the raw topics held nothing more, move it: job_lost pages for the
    silence. Without them it cannot (the test that it could fail).
    """
    run = Path("tests/data/real/cluster_stopped_2_3")
    prefix = f"e2esilent{int(ticks)}"
    cfg = config(kafka, prefix, tmp_path / "state")
    # The run is replayed hours after it was captured: the job's silence counts from when
    # its records reached the bus, as for a shipper that late. 20 s, not 180 s, of it (the
    # job's own rhythm, ~15 s between its scrapes, is the least job_lost waits).
    silence_s = 20
    # The run's 85 s of event time within the watermark, whichever topic the real-time
    # parse reads first (a busy machine starts its partitions' tasks unevenly: the metrics
    # read first made the job's RUNNING line late).
    cfg = cfg.model_copy(
        update={
            "spark": cfg.spark.model_copy(
                update={
                    "parse_mode": "realtime",
                    "watermark_delay_s": 120,
                    "tick_interval_s": 1.0 if ticks else None,
                    # The deadline also waits for the job's largest delivery lag in its
                    # last one or two lag windows: records hours old that reach the bus
                    # together lag by the run's spread in event time within them (up to
                    # its 85 s in 60-s windows; 10-20 s in these). 55 s for this test
                    # against 106 with the default (a quiet machine).
                    "lag_window_s": 10,
                }
            ),
            "detectors": cfg.detectors.model_copy(
                update={
                    "job_lost": cfg.detectors.job_lost.model_copy(update={"silence_s": silence_s})
                }
            ),
        }
    )
    kafka.create_topics(cfg.kafka.logs_topic, cfg.kafka.metrics_topic)
    for f in sorted(run.glob("*.log")):
        kafka.produce(cfg.kafka.logs_topic, _records(f.read_text()), key=f.stem.encode())
    kafka.produce(cfg.kafka.metrics_topic, (run / f"{run.name}.jsonl").read_text().splitlines())
    p = pipeline(spark, cfg, {})
    p.trigger = None
    with running(p):
        # The records are hours old: their own watermark is 150 s short of the silence
        # deadline (30 s after the job's last record); the ticks are of now.
        wait_while_progressing(
            lambda: (
                p.stats.kinds["job_state"] >= 1 and p.path.ticker is not None
                if ticks
                else p.stats.kinds["job_state"] >= 1
            ),
            progress=lambda: (sum(p.stats.kinds.values()), p.stats.delivered),
            what="the run parsed",
        )
        if ticks:
            ticker = p.path.ticker
            assert ticker is not None

            def before_due() -> bool:
                # The shards say when they are due in the bus's time: here the silence
                # plus the records' spread in event time after they reached the bus
                # (an entity's deadline waits for its slowest record, streaming.clock).
                due = [at for at in p.stats.due().values() if at is not None]
                return not due or time.time() * 1000 < min(due)

            # Waited on as long as the deadline is ahead, or ticks and batches move.
            wait_while_progressing(
                lambda: read_alerts(cfg.output.alerts_path, "job_lost"),
                progress=lambda: (ticker.sent, p.stats.delivered, before_due()),
                what="job_lost paging for the silence",
            )
        else:
            # Everything read, and the detect query's batches of it done. Records hours late
            # to the bus move no watermark (a catch-up's), and without ticks nothing else
            # moves event time past the job's last record.
            wait_while_progressing(
                lambda: p.path.bus_drained(p) and not _in_batch(spark),
                progress=lambda: (_watermark(spark), p.stats.delivered),
                what="the detect query reading the whole bus",
            )
            assert _watermark(spark) == "1970-01-01T00:00:00.000Z"
    lost = read_alerts(cfg.output.alerts_path, "job_lost")
    if not ticks:
        assert lost == []
        return
    (alert,) = lost
    assert alert["status"] == "firing" and alert["severity"] == "critical"
    assert alert["evidence"]["why"] == "silence"
    # Stamped with the silence deadline: silence_s after the job's last record (04:43:19).
    assert alert["event_time"].startswith("2026-11-23T04:43:39")
