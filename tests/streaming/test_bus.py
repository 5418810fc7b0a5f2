"""The bus (``streaming/bus.py``): each detector gets its kinds and only the metrics it reads.

Both ends of the bus: the parse side puts an event on the bus once per entity scope that
wants it, the detect side fans it out to the detectors of that scope.
"""

from __future__ import annotations

import collections
import datetime as dt
import json
import random
import string
from pathlib import Path

import pytest

from conf import AppConfig
from detectors.idle_heap_growth import HEAP_USED
from detectors.model import LAST_CHECKPOINT_DURATION
from detectors.tm_ids import tm_entity
from streaming.bus import active_detectors, bus_records
from streaming.parsing import parse_logs
from streaming.routes import Routes, decode, scope_of
from streaming.rows import Forward, read
from tests.streaming.test_runner import Shard

pytestmark = pytest.mark.spark

JOB = "3f4c2a9b7d1e4f60a8b5c2d1e0f9a7b3"
TM = "container_e05_1699999999999_0042_01_000003"
T = dt.datetime(2024, 6, 3, 10, 0, tzinfo=dt.UTC)
SHIPPERS = Path(__file__).resolve().parents[1] / "data" / "shippers"


def _events(spark, rows):  # type: ignore[no-untyped-def]
    return spark.createDataFrame(
        [(*r, "flink.logs", 0, i, 0, T) for i, r in enumerate(rows)],
        "kind string, metric string, job_id string, tm_id string, topic string, "
        "partition int, offset long, seq int, event_time timestamp",
    ).selectExpr(
        "*",
        "cast(null as string) as error",
        *[
            f"cast(null as {t}) as {c}"
            for c, t in (
                ("job_name", "string"),
                ("host", "string"),
                ("task", "string"),
                ("checkpoint_id", "long"),
                ("duration_ms", "long"),
                ("size_bytes", "long"),
                ("from_state", "string"),
                ("to_state", "string"),
                ("reason", "string"),
                ("value", "double"),
                ("message", "string"),
            )
        ],
    )


def test_metric_events_reach_only_the_detectors_that_name_them(spark) -> None:
    events = _events(
        spark,
        [
            ("metric", LAST_CHECKPOINT_DURATION, JOB, None),
            ("metric", HEAP_USED, JOB, TM),
            ("metric", "flink_taskmanager_Status_JVM_CPU_Load", JOB, TM),  # nobody reads it
            ("checkpoint_expired", None, JOB, None),
        ],
    )
    cfg = AppConfig()
    bus = bus_records(events, cfg, dead_letters=False)
    # On the bus: the heap sample for the TaskManager only (no job-scope detector reads
    # it), the duration and the expiry for the job; nothing for the CPU load.
    assert sorted((r["topic"], r["key"]) for r in bus.collect()) == [
        (cfg.kafka.events_topic, f"job:{JOB}"),
        (cfg.kafka.events_topic, f"job:{JOB}"),
        (cfg.kafka.events_topic, f"tm:{TM}"),
    ]
    routes = Routes(active_detectors(cfg), cfg.catalog())
    got = sorted(
        (name, e.event.kind, e.event.metric)
        for r in bus.collect()
        for e in [decode(r["value"])]
        for name in routes.of(scope_of(r["key"]), e.event)
    )
    assert got == [
        ("checkpoint_creep", "checkpoint_expired", None),
        ("checkpoint_creep", "metric", LAST_CHECKPOINT_DURATION),
        ("checkpoint_failures", "checkpoint_expired", None),
        ("idle_heap_growth", "metric", HEAP_USED),
        # The job's own records: it is alive.
        ("job_lost", "checkpoint_expired", None),
        ("job_lost", "metric", LAST_CHECKPOINT_DURATION),
        ("late_barrier_acks", "checkpoint_expired", None),
    ]


def test_a_disabled_detector_gets_nothing_and_its_scope_may_vanish_from_the_bus(spark) -> None:
    events = _events(spark, [("metric", HEAP_USED, JOB, TM)])
    cfg = AppConfig.model_validate({"detectors": {"idle_heap_growth": {"enabled": False}}})
    assert bus_records(events, cfg, dead_letters=False).count() == 0


def test_a_dead_letter_goes_to_its_topic_with_its_coordinates(spark) -> None:
    events = _events(spark, [("metric", HEAP_USED, JOB, TM)]).selectExpr(
        "* except (error, kind)",
        "'bad_type' as error",
        "cast(null as string) as kind",
        "cast(null as timestamp) as kafka_ts",
        "'x' as detail",
        "'{raw}' as raw",
    )
    cfg = AppConfig()
    (row,) = bus_records(events, cfg, dead_letters=True).collect()
    assert (row["topic"], row["key"]) == (cfg.kafka.deadletters_topic, "flink.logs:0")
    assert '"error":"bad_type"' in row["value"] and '"raw":"{raw}"' in row["value"]


def test_bus_records_are_placed_by_their_entity_and_dead_letters_left_to_kafka(spark) -> None:
    jobs = [f"{i:032x}" for i in range(1, 9)]
    events = _events(spark, [("checkpoint_expired", None, j, None) for j in jobs * 3]).unionByName(
        _events(spark, [("metric", HEAP_USED, JOB, TM)]).selectExpr(
            "* except (error)", "'bad_type' as error"
        )
    )
    events = events.selectExpr(
        "*", "cast(null as timestamp) as kafka_ts", "'x' as detail", "'{raw}' as raw"
    )
    cfg = AppConfig()
    rows = bus_records(events, cfg, dead_letters=True, partitions=3).collect()
    placed: dict[str, set[int]] = {}
    for r in rows:
        if r["topic"] == cfg.kafka.events_topic:
            placed.setdefault(r["key"], set()).add(r["partition"])
    # Each entity on one partition of the three, whatever the topic has; the entities
    # spread over them.
    assert sorted(placed) == sorted(f"job:{j}" for j in jobs)
    assert all(len(ps) == 1 and ps <= {0, 1, 2} for ps in placed.values())
    assert len(set().union(*placed.values())) > 1
    (dead,) = [r for r in rows if r["topic"] == cfg.kafka.deadletters_topic]
    assert dead["partition"] is None
    # Without a count (the files bus) there is no partition column at all.
    assert "partition" not in bus_records(events, cfg, dead_letters=True).columns


def test_a_rules_metric_goes_on_the_bus_for_its_scope_and_reaches_the_rule(spark) -> None:
    # The CPU load nobody reads: a TaskManager rule on it puts it on the bus for the
    # TaskManager, and the runner's routes hand it to the rule (the config's catalog).
    cpu = "flink_taskmanager_Status_JVM_CPU_Load"
    events = _events(spark, [("metric", cpu, JOB, TM)])
    rule = {"name": "cpu_high", "kind": "threshold", "scope": "tm", "metric": cpu, "value": 0.9}
    cfg = AppConfig.model_validate({"rules": [rule]})
    bus = bus_records(events, cfg, dead_letters=False).collect()
    assert [r["key"] for r in bus] == [f"tm:{TM}"]
    routes = Routes(active_detectors(cfg), cfg.catalog())
    assert routes.of("tm", decode(bus[0]["value"]).event) == ("cpu_high",)
    off = AppConfig.model_validate({"rules": [{**rule, "enabled": False}]})
    assert "cpu_high" not in active_detectors(off)
    assert bus_records(events, off, dead_letters=False).count() == 0


def _ids() -> list[str]:
    """TaskManager ids as logs and every reporter spell them, and random hostile ones."""
    rng = random.Random(33)
    real = [
        "localhost:40003-6cf67b",
        "localhost:40003_6cf67b",
        "localhost-40003-6cf67b",
        "615c9d0b-07b3-4ec5-b801-27ab5a4c6d94",
        "orders-enrichment-2-taskmanager-1-2",
        "flink-tm.prod.svc-0",
        "container_e05_1699999999999_0042_01_000003",
        "10.0.3.17:6122-a1b2c3",
        "",
    ]
    alphabet = string.printable + "äÄß€😀\u2028\u00a0$\\"
    return real + ["".join(rng.choices(alphabet, k=rng.randint(1, 40))) for _ in range(300)]


def test_the_bus_keys_a_taskmanager_as_the_detectors_do_whatever_its_spelling(spark) -> None:
    ids = _ids()
    events = _events(spark, [("metric", HEAP_USED, None, t) for t in ids])
    bus = bus_records(events, AppConfig(), dead_letters=False).collect()
    by_id = {decode(r["value"]).event.tm_id: r["key"] for r in bus}
    assert len(by_id) == len(set(ids))
    assert by_id == {t: tm_entity(t) for t in ids}
    assert by_id["localhost:40003-6cf67b"] == by_id["localhost:40003_6cf67b"]


CAPTURE = SHIPPERS / "tm_oom_2_3"


def test_a_keyed_appenders_taskmanager_lines_are_forwarded_by_its_own_start_line(spark) -> None:
    # The real capture: a bare KafkaAppender keyed by ${sys:log.file}, both processes on
    # one topic. The appender lost the dying TaskManager's last lines (its README); they
    # are in its log file, and follow its shipped records here under its key, as the
    # appender would have sent them.
    recs = [
        json.loads(line)
        for line in (CAPTURE / "tm_oom_2_3.kafka_pattern.records.jsonl").read_text().splitlines()
    ]
    tm_key = next(r["key"] for r in recs if "taskexecutor" in r["key"])
    tail = (CAPTURE / "tm_oom_2_3.taskmanager.log").read_text().split("\n2026-11-24 06:00:17")[1:]
    rows = [(r["value"], r["topic"], r["partition"], r["offset"], r["key"]) for r in recs]
    rows += [
        ("2026-11-24 06:00:17" + v, "flink.logs", 0, len(recs) + i, tm_key)
        for i, v in enumerate(tail)
    ]
    records = spark.createDataFrame(
        rows,
        "value string, topic string, partition int, offset long, source_key string",
    ).selectExpr("*", "cast(null as timestamp) as kafka_ts")
    bus = bus_records(parse_logs(records), AppConfig(), dead_letters=False).collect()
    tm_src, jm_src = (
        f"src:flink.logs:{k}" for k in (tm_key, next(r["key"] for r in recs if r["key"] != tm_key))
    )
    assert {r["key"] for r in bus if r["key"].startswith("src:")} == {tm_src, jm_src}
    shard = Shard()
    out = shard.batch(
        [{"entity": r["key"], **json.loads(r["value"])} for r in bus if r["key"].startswith("src:")]
    )
    forwards = [x for x in map(read, out) if isinstance(x, Forward)]
    got = collections.Counter((f.entity, decode(f.value).event.kind) for f in forwards)
    tm, job = tm_entity("localhost:38251-0bfbad"), "job:037e6ac51968b7dd30cc0efd8919ce1e"
    assert got == {(tm, "fatal_error"): 6, (job, "log_error"): 2}
    assert {decode(f.value).event.tm_id for f in forwards if f.entity == tm} == {
        "localhost:38251-0bfbad"
    }
    # The JobManager's key said it is one, and is forwarded nothing.
    assert shard.saved(jm_src)[0].me == {"jm": True}
    assert shard.saved(tm_src)[0].me == {
        "tm": "localhost:38251-0bfbad",
        "jobs": ["037e6ac51968b7dd30cc0efd8919ce1e"],
    }


def test_records_without_a_key_go_to_no_source(spark) -> None:
    events = _events(spark, [("fatal_error", None, None, None)])
    keyed = events.selectExpr("*", "cast(null as string) as source_key")
    keys = [r["key"] for r in bus_records(keyed, AppConfig(), dead_letters=False).collect()]
    assert keys and not [k for k in keys if k.startswith("src:")]


def test_a_record_late_to_the_bus_by_more_than_the_delay_moves_no_watermark(spark) -> None:  # type: ignore[no-untyped-def]
    # A catch-up's records reach the bus minutes after their time, from tasks that run
    # minutes apart: moving the watermark, the faster task's would make the slower's late.
    from pyspark.sql import functions as F

    from streaming.bus import detect_input

    t0 = int(T.timestamp() * 1000)
    bus = [
        (f"job:{JOB}", json.dumps({"kind": "metric", "event_ms": t0}), t0 + 2_000),  # live
        (f"job:{JOB}", json.dumps({"kind": "metric", "event_ms": t0}), t0 + 40_000),  # behind
        (f"job:{JOB}", json.dumps({"kind": "metric", "event_ms": t0 + 9_000}), t0 + 5_000),  # ahead
    ]
    records = spark.createDataFrame(bus, "key string, value string, bus long").select(
        "key", "value", F.timestamp_millis("bus").alias("bus_ts")
    )
    got = [
        r[0]
        for r in detect_input(records, 4, fresh_ms=30_000)
        .select(F.unix_millis("event_time"))
        .collect()
    ]
    assert got == [t0, None, t0 + 5_000]
    # Without a delay given (and on the files bus), every record moves it as before.
    got = [r[0] for r in detect_input(records, 4).select(F.unix_millis("event_time")).collect()]
    assert got == [t0, t0, t0 + 5_000]


def test_the_detect_input_reads_each_bus_value_once_and_drops_what_has_no_time(spark) -> None:  # type: ignore[no-untyped-def]
    # A filter on the head's time would be pushed below the projection that reads it, and
    # every bus record parsed twice (measured: 13 % of the JVM's samples replaying an hour).
    from pyspark.sql import functions as F

    from streaming.bus import detect_input
    from streaming.ticks import TICK_KEY

    t0 = int(T.timestamp() * 1000)
    bus = [
        (f"job:{JOB}", json.dumps({"kind": "metric", "event_ms": t0})),
        (f"job:{JOB}", json.dumps({"kind": "metric"})),  # no time: dropped
        (f"job:{JOB}", "not json"),  # dropped
        (TICK_KEY, json.dumps({"kind": "tick", "event_ms": t0 + 1_000})),  # to every shard
        (TICK_KEY, json.dumps({"kind": "tick", "event_ms": t0, "shards": [1]})),  # to shard 1
    ]
    rows = detect_input(spark.createDataFrame(bus, "key string, value string"), 4)
    got = sorted(
        (r["entity"], r["shard"], r["t"])
        for r in rows.select("entity", "shard", F.unix_millis("event_time").alias("t")).collect()
    )
    [(_, job_shard, job_t)] = [g for g in got if g[0] != TICK_KEY]
    assert job_t == t0 and 0 <= job_shard < 4
    assert sorted(g[1] for g in got if g[0] == TICK_KEY) == [0, 1, 1, 2, 3]
    assert all(g[2] is None for g in got if g[0] == TICK_KEY)
    plan = rows._jdf.queryExecution().optimizedPlan().toString()
    assert plan.count("from_json(") == 1, plan


def test_a_replays_detect_input_takes_the_time_from_the_bus_records_column(spark) -> None:  # type: ignore[no-untyped-def]
    # A replay's bus records go to its detect input in the same job: the time is a column
    # there, so neither the bus value's JSON nor a row generator is evaluated for it (each
    # interpreted row by row), and the rows are those the JSON gives, shard keys and all.
    from pyspark.sql import functions as F

    from streaming.bus import detect_input

    jobs = [f"{i:032x}" for i in range(1, 13)]
    good = _events(spark, [("checkpoint_expired", None, j, None) for j in jobs]).withColumn(
        "event_time", F.timestamp_millis(F.lit(int(T.timestamp() * 1000)) + F.col("offset"))
    )
    bad = _events(spark, [("metric", HEAP_USED, JOB, TM)]).selectExpr(
        "* except (error)", "'bad_type' as error"
    )
    events = good.unionByName(bad).selectExpr(
        "*", "cast(null as timestamp) as kafka_ts", "'x' as detail", "'{raw}' as raw"
    )
    bus = bus_records(events, AppConfig(), dead_letters=True, event_ms=True)
    assert "event_ms" in bus.columns
    shards, partitions = 8, 2  # shard keys that are not the shard numbers
    fields = ["shard", "entity", "value", "bus_ms", F.unix_millis("event_time").alias("t")]
    by_column = detect_input(bus, shards, partitions)
    by_json = detect_input(bus.drop("event_ms"), shards, partitions)
    got = sorted(tuple(r) for r in by_column.select(*fields).collect())
    assert got == sorted(tuple(r) for r in by_json.select(*fields).collect())
    # Every job's event, at its own time; the dead letter has none, so no shard gets it.
    assert sorted(r[1] for r in got) == sorted(f"job:{j}" for j in jobs)
    assert sorted(r[4] for r in got) == [int(T.timestamp() * 1000) + i for i in range(12)]
    # Nothing the bus records' own plan does not have (the stack of their scopes).
    plans = [d._jdf.queryExecution().optimizedPlan().toString() for d in (bus, by_column, by_json)]
    assert [p.count("from_json(") for p in plans] == [0, 0, 1], plans
    assert [p.count("Generate ") for p in plans] == [1, 1, 2], plans
