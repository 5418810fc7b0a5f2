"""A replay's shard without Spark: records in batch 0, the deadlines due at the end in batch 1.

The Spark tests of the whole command (``test_real_runs``, ``test_scenarios``,
``test_shipper_replays``, ``test_cli``) pin the alerts; these pin the time rule that a
streaming replay had and the batch replay keeps: a deadline fires when its entity's own
later records pass it, or when the final watermark (the newest record less
``spark.watermark_delay_s``) reaches it, and not otherwise. One Spark test pins that the
shards run alike in the driver (a short replay) and in Python workers (a long one), and
that a short replay parses each source's files in one task.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import streaming.replay
from conf import AppConfig
from sinks import DeadLetterFileSink
from streaming.bus import active_detectors
from streaming.cli import main
from streaming.delivery import PipelineStats
from streaming.explain import Asked
from streaming.replay import ShardReplay, replay, same_parse
from streaming.replay_session import session_settings
from streaming.runtime import Runtime
from streaming.sources import file_records, stage_files

REAL = Path(__file__).resolve().parent.parent / "data" / "real"
SHIPPERS = REAL.parent / "shippers"

T0 = 1_700_000_000_000
JOB = "b" * 32
DELAY = 30_000


def _checkpoint(kind: str, i: int, t: int, **extra: object) -> tuple[str, str, None]:
    value = {
        "src": "job.log:0",
        "seq": 0,
        "offset": 2 * i + (kind == "checkpoint_completed"),
        "job_id": JOB,
        "kind": kind,
        "event_ms": t,
        "checkpoint_id": i,
        **extra,
    }
    return ("job:" + JOB, json.dumps(value), None)


def _stuck_checkpoint() -> list[tuple[str, str, None]]:
    """Nine fast checkpoints a minute apart, then one triggered that never completes."""
    rows = []
    for i in range(1, 10):
        t = T0 + i * 60_000
        rows.append(_checkpoint("checkpoint_triggered", i, t))
        rows.append(_checkpoint("checkpoint_completed", i, t + 1000, duration_ms=1000))
    rows.append(_checkpoint("checkpoint_triggered", 10, T0 + 600_000))
    return rows


def _replay() -> ShardReplay:
    cfg = AppConfig()
    return ShardReplay(cfg.resolver(), active_detectors(cfg), DELAY, grace_ms=2_000)


def _fired(out: list[tuple[int, dict]], detector: str) -> list[tuple[int, str, int]]:
    return [
        (b, r["status"], r["event_ms"])
        for b, r in out
        if r["kind"] == "alert" and r["detector"] == detector
    ]


def test_deadlines_due_by_the_final_watermark_fire_in_the_last_batch_at_their_own_time() -> None:
    out = list(_replay().run("0", _stuck_checkpoint(), T0 + 3_600_000))
    (fired, resolved) = _fired(out, "checkpoint_creep")
    # Paged at its deadline (the checkpoint pending past half its timeout), resolved after
    # the quiet that follows; both stamped with their own times, not the end's.
    assert fired[:2] == (1, "firing") and T0 + 600_000 < fired[2] < T0 + 3_600_000
    assert resolved[:2] == (1, "resolved") and fired[2] < resolved[2] < T0 + 3_600_000
    # Every shard says how many entities it holds after each of its turns.
    assert [(b, r["entity"]) for b, r in out if r["kind"] == "entity_count"] == [
        (0, "shard:0"),
        (1, "shard:0"),
    ]


def test_the_final_watermark_fires_a_deadline_it_reaches_and_not_one_a_millisecond_later() -> None:
    out = list(_replay().run("0", _stuck_checkpoint(), T0 + 3_600_000))
    deadline = _fired(out, "checkpoint_creep")[0][2]
    at = list(_replay().run("0", _stuck_checkpoint(), deadline))
    assert _fired(at, "checkpoint_creep") == [(1, "firing", deadline)]
    before = list(_replay().run("0", _stuck_checkpoint(), deadline - 1))
    assert _fired(before, "checkpoint_creep") == []
    assert {b for b, _ in before} == {0}  # the shard's timer was not reached: no turn


def test_an_entitys_own_later_record_fires_its_deadline_with_the_records() -> None:
    rows = _stuck_checkpoint()
    rows.append(_checkpoint("checkpoint_triggered", 11, T0 + 3_600_000))
    # No final watermark at all: only the job's record an hour later moves its time.
    assert [
        (b, s) for b, s, _ in _fired(list(_replay().run("0", rows, None)), "checkpoint_creep")
    ] == [
        (0, "firing"),
        (0, "resolved"),
    ]
    assert _fired(list(_replay().run("0", _stuck_checkpoint(), None)), "checkpoint_creep") == []


def test_only_a_short_replay_runs_its_jvm_with_the_quick_compiler_alone() -> None:
    small = session_settings(200_000)["spark.driver.extraJavaOptions"].split()
    assert "-XX:TieredStopAtLevel=1" in small
    assert "-Xss16m" in small  # the parser's regexes need the live job's thread stack
    assert "spark.driver.extraJavaOptions" not in session_settings(700 * 2**20)


def test_only_a_short_replay_evaluates_its_expressions_without_generated_classes() -> None:
    assert session_settings(200_000)["spark.sql.codegen.factoryMode"] == "NO_CODEGEN"
    assert "spark.sql.codegen.factoryMode" not in session_settings(700 * 2**20)


def test_a_session_over_files_is_sized_by_them_and_keeps_a_counting_commands_partitions(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # doctor and parse over files start a replay's session (streaming/cli): sized by the
    # input, with their own two shuffle partitions, not the detect state's count.
    from conf import load_config
    from streaming import replay_session

    started: list[replay_session.SessionSpec] = []
    monkeypatch.setattr(
        replay_session.SessionSpec, "start", lambda spec: started.append(spec) or "session"
    )
    (tmp_path / "tm.log").write_text("2026-11-26 10:00:00,000 INFO  x - y\n")
    cfg = load_config(text="spark:\n  shuffle_partitions: 4\n")
    assert replay_session.replay_session(cfg, tmp_path, partitions=2) == ("session", True)
    assert replay_session.replay_session(cfg, tmp_path) == ("session", True)
    counting, replaying = started
    assert (counting.shuffle_partitions, replaying.shuffle_partitions) == (2, 4)
    assert not counting.require_kafka
    assert counting.extra["spark.sql.codegen.factoryMode"] == "NO_CODEGEN"  # a small input


def test_a_rule_of_the_config_runs_in_the_replay_after_its_shard_travels_to_a_worker() -> None:
    import pickle

    rule = {"name": "checkpoint_pace", "kind": "frequency", "kinds": ["checkpoint_triggered"]}
    cfg = AppConfig.model_validate({"rules": [rule | {"count": 5, "window_s": 600}]})
    shard = ShardReplay(cfg.resolver(), active_detectors(cfg), DELAY, 2_000)
    # What applyInPandas sends a Python worker: the rule goes as its definition.
    again = pickle.loads(pickle.dumps(shard))
    fired = _fired(list(again.run("0", _stuck_checkpoint(), T0 + 3_600_000)), "checkpoint_pace")
    assert fired[0] == (0, "firing", T0 + 5 * 60_000)


def test_a_shard_of_a_long_replay_gives_its_records_rows_and_its_dead_letters_in_record_order() -> (
    None
):
    import pandas as pd

    from streaming.replay import LETTER_BATCH, LETTERS, SHARD_STATE

    shard = ShardReplay(
        AppConfig().resolver(), active_detectors(AppConfig()), DELAY, 2_000, letters_kept=2
    )
    letters = [
        {"topic": "m.jsonl", "partition": 0, "offset": o, "seq": 0, "error": "invalid_json"}
        for o in (7, 2, 5)
    ]
    # As the one pass wraps them: an event time of its own, so the shards' input keeps them.
    wrapped = [json.dumps({"event_ms": 0, "letter": json.dumps(d)}) for d in letters]
    rows = _stuck_checkpoint()
    pdf = pd.DataFrame(
        {
            "entity": [e for e, _, _ in rows] + [LETTERS] * 3,
            "value": [v for _, v, _ in rows] + wrapped,
        }
    )
    out = shard(("0",), pdf).to_dict("records")

    # The records: batch 0 and the shard's state, as the shard run alone gives them.
    def said(b: int, r: dict) -> tuple:
        return (b, r["kind"], r["detector"], r["status"], r["data"])

    assert [said(r["batch"], r) for r in out if r["batch"] != LETTER_BATCH] == [
        said(b, r) for b, r in shard.first("0", rows)
    ]
    assert [r["batch"] for r in out if r["kind"] == "state"] == [SHARD_STATE]
    # The letters: the first two by their place in the input whole, the third counted.
    sent = [json.loads(r["data"]) for r in out if r["batch"] == LETTER_BATCH]
    assert sent == [letters[1], letters[2], {"more": 1}]


def test_the_driver_ends_a_shard_from_its_state_row_as_one_runner_keeping_it_would() -> None:
    from streaming.clock import Clock
    from streaming.replay import SHARD_STATE, Entities
    from streaming.rows import output_rows

    shard, end = _replay(), T0 + 3_600_000
    first = list(shard.first("0", _stuck_checkpoint()))
    (state,) = [r for b, r in first if b == SHARD_STATE]
    # The row as a worker's collect gives it to the driver: its state is JSON text.
    assert isinstance(state["data"], str)
    ended = [r for b, r in first if b != SHARD_STATE] + [r for _, r in shard.last(state, end)]
    # The reference: one runner keeping the store and the wake-ups in memory between
    # the records and the end (the replay before the state travelled).
    runner, store, wakes = shard._runner(), Entities(), {}
    kept = runner.run(store, wakes, _stuck_checkpoint(), Clock(0, DELAY, 2_000), {}, shard="0")
    last = runner.run(store, wakes, [], Clock(end, DELAY, 2_000), {}, shard="0")
    assert ended == output_rows(kept.outputs) + output_rows(last.outputs)
    assert _fired([(1, r) for r in output_rows(last.outputs)], "checkpoint_creep")[0][:2] == (
        1,
        "firing",
    )


def test_the_shards_dead_letters_merge_to_the_first_by_place_and_a_count_of_the_rest() -> None:
    from streaming.replay import _letter_rows

    def letter(topic: str, offset: int) -> dict:
        return {"topic": topic, "partition": 0, "offset": offset, "seq": 0, "error": "x"}

    def row(d: dict) -> dict:
        return {"data": json.dumps(d)}

    # Two shards, each its first two by place and how many more it had.
    shards = [
        [row(letter("b.jsonl", 1)), row(letter("b.jsonl", 4)), row({"more": 3})],
        [row(letter("a.jsonl", 9)), row(letter("b.jsonl", 2))],
    ]
    got = list(_letter_rows([r for s in shards for r in s], kept=2))
    assert [(r["topic"], r["offset"]) for r in got[:2]] == [("a.jsonl", 9), ("b.jsonl", 1)]
    # Every field as the dead-letter schema has it, null where the letter said nothing.
    assert got[0]["kafka_ts"] is None and got[0]["raw"] is None
    assert len(got) == 2 + 3 + 2  # the shards' 3 more, and the 2 of theirs past the file's 2
    assert all(r["error"] is None for r in got[2:])


def test_two_configs_share_one_parse_unless_their_parsing_sections_differ() -> None:
    base = AppConfig()
    tuned = AppConfig.model_validate(
        {"detectors": {"checkpoint_failures": {"min_expired": 2}}, "spark": {"state_shards": 8}}
    )
    assert same_parse(base, tuned)
    for parsing in ({"log_timezone": "Europe/Berlin"}, {"max_record_bytes": 1024}):
        assert not same_parse(base, AppConfig.model_validate({"parsing": parsing}))


@pytest.mark.spark
def test_the_shards_give_the_same_alerts_and_end_states_in_this_process_as_in_workers(
    spark, tmp_path, monkeypatch
) -> None:
    # The short replay runs its shards in the driver, the long one in Python workers
    # (applyInPandas), its dead letters travelling with them: the same real run through
    # each gives the same file, line for line, and keeps the same dead letters. The short
    # one also parses each source's files in one task (a file is a partition otherwise).
    parsed = streaming.replay.parsed_events
    partitions: dict[bool, tuple[int, int]] = {}

    def counted(logs, metrics, cfg):  # type: ignore[no-untyped-def]
        partitions[here] = (logs.rdd.getNumPartitions(), metrics.rdd.getNumPartitions())
        return parsed(logs, metrics, cfg)

    monkeypatch.setattr(streaming.replay, "parsed_events", counted)
    run = REAL / "expiry_2_3"
    logs = stage_files(sorted(run.glob("*.log")), tmp_path / "logs")
    metrics = stage_files(sorted(run.glob("*.jsonl")), tmp_path / "metrics")
    bad = ['{"name": "flink_taskmanager_Status_JVM_Memory_Heap_Used", "fields": ', "\x00" * 9]
    (metrics / "bad.jsonl").write_text("\n".join([*bad, "not json at all"]) + "\n")
    cfg = AppConfig()
    asked = (Asked(job="3631d292e50708eb38e1304df762587a"),)
    got = {}
    for here in (True, False):
        out = tmp_path / f"here-{here}"
        runtime = Runtime(
            cfg, replay=True, ledger_path=out / "ledger.sqlite", alerts_path=out / "alerts.jsonl"
        )
        stats = PipelineStats()
        try:
            saved = replay(
                file_records(spark, logs, kind="log", stream=False),
                file_records(spark, metrics, kind="metric", stream=False),
                cfg,
                runtime.outputs,
                # Two kept of three: the file keeps the first, the third is counted.
                DeadLetterFileSink(out / "dead", max_per_batch=2),
                stats,
                explain=asked,
                here=here,
            )
        finally:
            runtime.close()
        letters = [json.loads(line) for line in (out / "dead" / "batch-00000000.jsonl").open()]
        got[here] = ((out / "alerts.jsonl").read_text(), saved, stats.delivered, letters)
    assert partitions[True] == (1, 1)
    assert partitions[False][1] == 2  # the run's metric file and bad.jsonl
    alerts, saved, delivered, letters = got[True]
    assert len(alerts.splitlines()) == 4  # expected.json's alerts of this run
    assert saved and delivered == 2
    assert [(d["topic"].endswith("bad.jsonl"), d["offset"]) for d in letters] == [
        (True, 0),
        (True, 1),
    ]
    assert got[True] == got[False]
    # Files of malformed records alone, in one pass: the letters kept, no event so no
    # newest event time (their own time, 0, is not one) and no batch for the end.
    only_bad = stage_files([metrics / "bad.jsonl"], tmp_path / "only-bad")
    out = tmp_path / "only-bad-out"
    runtime = Runtime(
        cfg, replay=True, ledger_path=out / "ledger.sqlite", alerts_path=out / "alerts.jsonl"
    )
    stats = PipelineStats()
    try:
        replay(
            file_records(spark, logs, kind="log", stream=False).limit(0),
            file_records(spark, only_bad, kind="metric", stream=False),
            cfg,
            runtime.outputs,
            DeadLetterFileSink(out / "dead"),
            stats,
            here=False,
        )
    finally:
        runtime.close()
    assert (stats.delivered, stats.records_read) == (1, 3)
    assert len((out / "dead" / "batch-00000000.jsonl").read_text().splitlines()) == 3


def test_a_keyed_capture_replays_to_the_alerts_of_the_processes_own_files(spark, tmp_path) -> None:
    # The real KafkaAppender capture (keyed by ${sys:log.file}), with the dying TaskManager's
    # last lines, which the appender lost (the capture's README), from its own log file
    # under its key: the replay attributes its fatal lines by the key's start line
    # (streaming.forwards) and pages what the processes' files page.
    capture = SHIPPERS / "tm_oom_2_3"
    recs = [
        json.loads(line)
        for line in (capture / "tm_oom_2_3.kafka_pattern.records.jsonl").read_text().splitlines()
    ]
    tm_key = next(r["key"] for r in recs if "taskexecutor" in r["key"])
    log = (capture / "tm_oom_2_3.taskmanager.log").read_text()
    tail = log.split("\n2026-11-24 06:00:17")[1:]
    recs += [
        {**recs[-1], "offset": len(recs) + i, "key": tm_key, "value": "2026-11-24 06:00:17" + v}
        for i, v in enumerate(tail)
    ]
    keyed = tmp_path / "tm_oom_2_3.keyed.records.jsonl"
    keyed.write_text("".join(json.dumps(r) + "\n" for r in recs))
    out = tmp_path / "alerts.jsonl"
    args = ["replay", "--output", str(out), "--logs", str(keyed)]
    assert main([*args, "--metrics", str(capture / "tm_oom_2_3.jsonl")]) == 0
    got = sorted(
        (a["detector"], a["status"], a["event_time"], a.get("tm_id"))
        for a in map(json.loads, out.read_text().splitlines())
    )
    files = json.loads((capture / "expected.json").read_text())["routes"]["files"]["alerts"]
    assert got == sorted((a["detector"], a["status"], a["event_time"], a["entity"]) for a in files)


@pytest.mark.spark
def test_a_released_parse_frees_its_kept_blocks_and_no_others(spark) -> None:
    from streaming.replay import KeptParse

    parsing = AppConfig().parsing
    dropped = KeptParse(parsing, spark.range(100).localCheckpoint(), {})
    stays = KeptParse(parsing, spark.range(50).localCheckpoint(), {})
    ctx = spark.sparkContext._jsc.sc()

    def cached() -> set[int]:
        return {int(i.id()) for i in ctx.getRDDStorageInfo() if i.numCachedPartitions() > 0}

    def kept_rdd(k: KeptParse) -> int:
        return int(k.events._jdf.queryExecution().logical().rdd().id())

    assert {kept_rdd(dropped), kept_rdd(stays)} <= cached()
    dropped.release()
    # Freed now, not at the JVM's next collection; the other parse is still whole.
    assert kept_rdd(dropped) not in cached()
    assert stays.events.count() == 50 and kept_rdd(stays) in cached()
