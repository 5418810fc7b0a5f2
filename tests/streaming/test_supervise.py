"""The supervision loop and the alert delivery callback, with fake queries and sinks."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from conf import AppConfig, SparkConfig, load_config
from conf.reload import ConfigWatcher
from conf.running import RunningConfig
from detectors import AlertStatus
from detectors.checkpoint_failures import CheckpointFailures, CheckpointFailuresParams
from sinks import AlertLedger, DeliverySink, RetryableDeliveryError
from sinks.besteffort import BestEffort
from streaming.delivery import AlertDelivery, Outputs, PipelineStats
from streaming.rows import (
    About,
    DetectorFailure,
    EntityCount,
    Refused,
    Signal,
    SignalGone,
    note_row,
)
from streaming.supervise import run_forever
from tests.streaming.supervised import QuietPipeline


class FakeQuery:
    def __init__(self, name: str, fail_after: int | None) -> None:
        self.name = name
        self._polls = 0
        self._fail_after = fail_after
        self.stopped = False

    @property
    def isActive(self) -> bool:  # noqa: N802 - Spark's name
        self._polls += 1
        return not self.stopped and (self._fail_after is None or self._polls <= self._fail_after)

    def exception(self) -> Exception | None:
        return None if self.stopped else RuntimeError("Kafka broker unreachable")

    def stop(self) -> None:
        self.stopped = True


@dataclass
class FakePipeline(QuietPipeline):
    config: RunningConfig
    fail_after: list[int | None]
    starts: int = 0
    configs: list[AppConfig] = field(default_factory=list)
    queries: list[FakeQuery] = field(default_factory=list)
    spark: Any = None

    def start(self) -> list[FakeQuery]:
        fail = self.fail_after[min(self.starts, len(self.fail_after) - 1)]
        self.starts += 1
        self.configs.append(self.cfg)
        self.queries = [FakeQuery("flinkwatch-parse", fail), FakeQuery("flinkwatch-detect", None)]
        return self.queries


def cfg(**spark: Any) -> AppConfig:
    return AppConfig(
        spark=SparkConfig(**{"restart_backoff_s": 0.01, **spark}), reload_interval_s=0.01
    )


def test_a_failed_query_restarts_both_then_runs_until_stopped() -> None:
    p = FakePipeline(RunningConfig(cfg()), fail_after=[1, 1, None])
    rc = run_forever(p, should_stop=lambda: p.starts >= 3)  # type: ignore[arg-type]
    assert (rc, p.starts) == (0, 3)


def test_gives_up_after_max_restarts_in_a_row() -> None:
    p = FakePipeline(RunningConfig(cfg(max_restarts=2)), fail_after=[1])
    assert run_forever(p) == 1  # type: ignore[arg-type]
    assert p.starts == 3


def test_a_stop_during_the_back_off_does_not_restart() -> None:
    p = FakePipeline(RunningConfig(cfg(restart_backoff_s=30)), fail_after=[1])
    # The stop arrives once the failure was seen (the healthy query has been stopped).
    rc = run_forever(p, should_stop=lambda: bool(p.queries) and p.queries[1].stopped)  # type: ignore[arg-type]
    assert (rc, p.starts) == (0, 1)


@dataclass
class HeldPipeline(FakePipeline):
    """Its first start holds the parse query back until the bus is read (streaming.placement)."""

    answers: list[bool | Exception] = field(default_factory=list)
    asked: int = 0

    @property
    def parse_held(self) -> bool:
        return self.starts == 1

    def bus_drained(self) -> bool:
        self.asked += 1
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_a_held_parse_query_starts_once_the_detect_query_has_read_the_bus(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import streaming.supervise

    monkeypatch.setattr(streaming.supervise, "_DRAIN_CHECK_S", 0.01)
    # Kafka unreachable for a moment is asked again; it does not fail the queries.
    p = HeldPipeline(
        RunningConfig(cfg()), fail_after=[None], answers=[OSError("no broker"), False, True]
    )
    looks = {"n": 0}

    def should_stop() -> bool:
        looks["n"] += 1  # a bound, in case the parse query is never started
        return p.starts >= 2 or looks["n"] > 40

    with caplog.at_level(logging.INFO, logger="streaming.supervise"):
        rc = run_forever(p, should_stop=should_stop)  # type: ignore[arg-type]
    assert (rc, p.starts, p.asked) == (0, 2, 3)
    said = [r.getMessage() for r in caplog.records]
    assert "bus: the detect query has read the bus; starting the parse query" in said
    assert not [m for m in said if "failed" in m]


@dataclass
class SwitchingPipeline(FakePipeline):
    """Its parse query is to switch modes as ``switches`` says, one answer per look."""

    switches: list[str | None | Exception] = field(default_factory=list)
    parse_starts: list[bool] = field(default_factory=list)
    start_fails: bool = False
    #: What ran, in order: "gave back" (memory) and "started" (a parse query).
    steps: list[str] = field(default_factory=list)

    def give_back_memory(self) -> None:
        self.steps.append("gave back")

    def parse_switch(self, ask_brokers: bool) -> str | None:
        answer = self.switches.pop(0) if self.switches else None
        if isinstance(answer, Exception):
            raise answer
        return answer

    def start_parse(self, idle: bool = False) -> FakeQuery:
        self.parse_starts.append(idle)
        self.steps.append("started")
        if self.start_fails:
            raise RuntimeError("no broker")
        query = FakeQuery("flinkwatch-parse", None)
        self.queries = [query, *self.queries[1:]]
        return query


def test_a_parse_query_switching_modes_restarts_alone_the_others_run_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Kafka unreachable for a moment is asked again; it does not fail the queries.
    p = SwitchingPipeline(
        RunningConfig(cfg()), fail_after=[None], switches=[None, OSError("no broker"), "idle"]
    )
    first_parse: list[FakeQuery] = []

    def should_stop() -> bool:
        if not first_parse and p.queries:
            first_parse.append(p.queries[0])
        if p.parse_starts == [True]:
            p.switches = ["realtime"]
        return len(p.parse_starts) >= 2

    with caplog.at_level(logging.WARNING, logger="streaming.supervise"):
        assert run_forever(p, should_stop=should_stop) == 0  # type: ignore[arg-type]
    assert p.starts == 1  # the detect query was never restarted
    assert p.parse_starts == [True, False]  # idle micro-batches, then real time
    assert first_parse[0].stopped
    # The heap the last parse query grew goes back before the next one starts.
    assert p.steps == ["gave back", "started", "gave back", "started"]
    said = [r.getMessage() for r in caplog.records]
    assert said == ["parse: cannot tell whether the catch-up is done: no broker"]


def test_a_parse_query_that_cannot_start_in_its_new_mode_restarts_every_query() -> None:
    p = SwitchingPipeline(
        RunningConfig(cfg()), fail_after=[None], switches=["idle"], start_fails=True
    )
    first: list[FakeQuery] = []

    def should_stop() -> bool:
        first.extend([] if first else p.queries)
        return p.starts >= 2

    assert run_forever(p, should_stop=should_stop) == 0  # type: ignore[arg-type]
    assert p.parse_starts == [True]
    # Its detect query stopped with it, and both started again.
    assert [q.stopped for q in first] == [True, True] and p.starts == 2


def test_a_valid_config_edit_restarts_the_queries_with_the_new_config(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("reload_interval_s: 0.01\ndetectors:\n  checkpoint_failures: {min_expired: 3}\n")
    first = load_config(f)
    p = FakePipeline(RunningConfig(first), fail_after=[None])
    watcher = ConfigWatcher(f, first)
    polls = {"n": 0}

    def should_stop() -> bool:
        polls["n"] += 1
        if polls["n"] == 3:
            f.write_text(
                "reload_interval_s: 0.01\ndetectors:\n  checkpoint_failures: {min_expired: 4}\n"
            )
        return p.starts >= 2

    assert run_forever(p, should_stop=should_stop, watcher=watcher) == 0  # type: ignore[arg-type]
    assert [c.detector_params()["checkpoint_failures"].min_expired for c in p.configs] == [3, 4]


class Recording(DeliverySink):
    def __init__(self, name: str, fail: bool = False) -> None:
        self.name = name
        self.fail = fail
        self.sent: list[str] = []

    def send(self, t: Any) -> None:
        if self.fail:
            raise RetryableDeliveryError("disk full")
        self.sent.append(t.key)


class FakeBatch:
    def __init__(self, rows: list[dict]) -> None:
        self.rows = rows

    def collect(self) -> list[dict]:
        return self.rows


ROW = {
    "kind": "alert",
    "alert_id": "a1",
    "detector": "checkpoint_failures",
    "entity": "job:7f",
    "status": "firing",
    "severity": "warning",
    "event_ms": 1,
    "job_id": "7f",
    "job_name": None,
    "tm_id": None,
    "host": None,
    "summary": "s",
    "evidence": "{}",
    "data": None,
}
#: Whom the notes in these tests are about (the alert row's job).
ABOUT = About("checkpoint_failures", "job:7f", 1, "7f")


def test_a_failing_sink_does_not_block_the_others_nor_fail_the_batch_and_catches_up_later(
    tmp_path: Path,
) -> None:
    ok, bad = Recording("ok"), Recording("bad", fail=True)
    stats, now = PipelineStats(), [0.0]
    outputs = Outputs(
        ledger=AlertLedger(tmp_path / "ledger.sqlite"),
        sinks=[bad, ok],
        in_batch=BestEffort(clock=lambda: now[0]),
    )
    deliver = AlertDelivery(outputs, stats, cfg())
    deliver(FakeBatch([ROW]), 0)  # type: ignore[arg-type]
    assert ok.sent == ["a1:firing"] and bad.sent == []
    assert outputs.in_batch.errors == {"bad": 1}
    bad.fail = False
    now[0] += 1
    deliver(FakeBatch([ROW]), 0)  # type: ignore[arg-type]  # Spark replays the batch
    deliver(FakeBatch([ROW]), 0)  # type: ignore[arg-type]  # a second replay
    assert bad.sent == ["a1:firing"]
    assert ok.sent == ["a1:firing"]
    assert stats.alerts == {("checkpoint_failures", "job:7f", "firing"): 1}


def test_signal_rows_feed_the_board_and_never_reach_the_sinks(tmp_path: Path) -> None:
    from sinks.prometheus import SignalBoard

    sink, board = Recording("file"), SignalBoard()
    outputs = Outputs(ledger=AlertLedger(tmp_path / "l.sqlite"), sinks=[sink], signals=board)
    deliver = AlertDelivery(outputs, PipelineStats(), cfg())
    signal = note_row(Signal(ABOUT, {"checkpoints_expired": 2.0}))
    deliver(FakeBatch([signal]), 0)  # type: ignore[arg-type]
    assert sink.sent == []
    assert board.snapshot() == [
        ("checkpoint_failures", {"job_id": "7f"}, {"checkpoints_expired": 2.0})
    ]
    deliver(FakeBatch([note_row(SignalGone(ABOUT))]), 1)  # type: ignore[arg-type]
    assert board.snapshot() == []


def test_disabling_a_detector_mid_incident_closes_the_incident() -> None:
    from streaming.bus import active_detectors
    from streaming.routes import Routes
    from streaming.runner import EntityRunner

    proc = EntityRunner(cfg().resolver(), Routes(active_detectors(cfg()), cfg().catalog()))
    state = {"entity": "job:7f", "job_id": "7f", "firing": True, "incident_start_ms": 100}
    (closing,) = proc._close("checkpoint_failures", state, 500, "detector disabled")
    assert (closing.status, closing.event_time_ms, closing.job_id) == (
        AlertStatus.RESOLVED,
        500,
        "7f",
    )
    assert "(detector disabled)" in closing.summary
    # The same id the incident fired with: built from the incident's start time.
    det = CheckpointFailures(CheckpointFailuresParams())
    fired = det.fire(det.load(state), 100, "x", {})
    assert closing.alert_id == fired.alert_id
    assert state["firing"] is True  # the adapter's copy of the state is not touched
    assert proc._close("checkpoint_failures", {**state, "firing": False}, 500, "off") == []


def test_a_reloaded_trigger_interval_reaches_the_restarted_detect_query(tmp_path: Path) -> None:
    from streaming.app import Pipeline

    p = Pipeline(
        spark=None,  # type: ignore[arg-type]
        config=RunningConfig(cfg(trigger_interval_s=1.0)),
        logs=lambda: None,  # type: ignore[arg-type,return-value]
        metrics=lambda: None,  # type: ignore[arg-type,return-value]
        outputs=None,  # type: ignore[arg-type]
        checkpoint_dir=tmp_path,
        deadletter_dir=tmp_path,
        bus="kafka",
    )
    assert p.trigger_options() == {"processingTime": "1000 milliseconds"}
    # run_forever swaps the config on a reload and starts the queries again.
    p.config.swap(cfg(trigger_interval_s=0.25))
    assert p.trigger_options() == {"processingTime": "250 milliseconds"}
    # Replay and tests pin a trigger of their own; it wins.
    p.trigger = {"availableNow": True}
    assert p.trigger_options() == {"availableNow": True}


def test_detector_errors_are_logged_and_counted_once_on_the_driver(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sink, stats = Recording("file"), PipelineStats()
    deliver = AlertDelivery(
        Outputs(ledger=AlertLedger(tmp_path / "l.sqlite"), sinks=[sink]), stats, cfg()
    )
    error = "KeyError: 'ts' at checkpoint_failures.py:88"
    raised = note_row(DetectorFailure(ABOUT, error, "on_timer", 3, dropped=True))
    again = note_row(DetectorFailure(replace(ABOUT, entity="job:80"), error, "on_event"))
    with caplog.at_level(logging.ERROR, logger="streaming.delivery"):
        deliver(FakeBatch([raised, again]), 4)  # type: ignore[arg-type]
        deliver(FakeBatch([raised, again]), 4)  # type: ignore[arg-type]  # replayed
    assert sink.sent == []
    assert stats.detector_errors == {
        ("checkpoint_failures", "dropped"): 1,
        ("checkpoint_failures", "skipped"): 1,
    }
    (line,) = [r.getMessage() for r in caplog.records]  # one line per detector and batch
    assert "raised 2 time(s) in batch 4 (2 entities, 1 dropped" in line
    assert "job:7f" in line and "KeyError" in line and "entity dropped" in line


def test_an_entity_dropped_with_damaged_state_is_counted_logged_and_its_incidents_resolved(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Its bytes did not decompress: the runner cannot name its incidents, the ledger can.
    sink, stats = Recording("file"), PipelineStats()
    ledger = AlertLedger(tmp_path / "l.sqlite")
    deliver = AlertDelivery(Outputs(ledger=ledger, sinks=[sink]), stats, cfg())
    other = {**ROW, "alert_id": "b2", "entity": "job:80", "job_id": "80"}
    deliver(FakeBatch([ROW, other]), 1)  # type: ignore[arg-type]
    error = "EntityDamaged: job:7f: its saved value is damaged (error: invalid block type)"
    damaged = note_row(DetectorFailure(About("state", "job:7f"), error, "unpack", dropped=True))
    with caplog.at_level(logging.ERROR, logger="streaming.delivery"):
        deliver(FakeBatch([damaged]), 2)  # type: ignore[arg-type]
        deliver(FakeBatch([damaged]), 2)  # type: ignore[arg-type]  # replayed
    assert stats.state_damaged == 1
    assert [t.alert.alert_id for t in ledger.active()] == ["b2"]  # only the other job's
    (resolve,) = [a for a, _ in ledger.history() if a.status is AlertStatus.RESOLVED]
    assert resolve.alert_id == "a1" and "saved state was damaged" in resolve.summary
    assert sink.sent[-1] == "a1:resolved"
    (line,) = [r.getMessage() for r in caplog.records if "damaged" in r.getMessage()]
    assert "job:7f" in line and "invalid block type" in line and "1 open incident" in line
    # One detector's state unreadable (not JSON): that detector's incident, no other.
    third = {**ROW, "alert_id": "c3", "entity": "job:80", "detector": "checkpoint_creep"}
    deliver(FakeBatch([third]), 3)  # type: ignore[arg-type]
    about = About("checkpoint_creep", "job:80")
    unread = note_row(DetectorFailure(about, "StateError: not JSON", "load", dropped=True))
    deliver(FakeBatch([unread]), 4)  # type: ignore[arg-type]
    assert [t.alert.alert_id for t in ledger.active()] == ["b2"]
    assert stats.state_damaged == 1  # counted as a detector error, not as damaged state


def test_old_transitions_are_not_paged_and_the_log_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    slack = Recording("slack")
    slack.notifies = True
    now_ms = int(time.time() * 1000)
    deliver = AlertDelivery(
        Outputs(ledger=AlertLedger(tmp_path / "l.sqlite"), sinks=[slack]), PipelineStats(), cfg()
    )
    old = {**ROW, "alert_id": "old", "event_ms": now_ms - 2 * 86_400_000}
    new = {**ROW, "alert_id": "new", "event_ms": now_ms - 5_000}
    with caplog.at_level(logging.WARNING, logger="streaming.delivery"):
        deliver(FakeBatch([old, new]), 0)  # type: ignore[arg-type]
    assert slack.sent == ["new:firing"]
    (line,) = [r.getMessage() for r in caplog.records]
    assert "1 transition(s) recorded but not paged: older than output.page_max_age_s=3600s" in line


def _cap_pipeline(tmp_path: Path, **spark: Any) -> Any:
    from streaming.app import Pipeline

    return Pipeline(
        spark=None,  # type: ignore[arg-type]
        config=RunningConfig(AppConfig.model_validate({"spark": spark})),
        outputs=Outputs(ledger=AlertLedger(tmp_path / "l.sqlite")),
        checkpoint_dir=tmp_path,
        deadletter_dir=tmp_path,
    )


def _shards_hold(pipeline: Any, batch: int, **held: int) -> None:
    """A detect batch whose shards (``s0=...``) say how many entities they hold."""
    rows = [note_row(EntityCount(k[1:], n)) for k, n in held.items()]
    AlertDelivery(pipeline.outputs, pipeline.stats, pipeline.cfg)(FakeBatch(rows), batch)  # type: ignore[arg-type]


def test_past_the_entity_cap_new_entities_are_refused_until_below_90_percent(
    tmp_path: Path,
) -> None:
    pipeline = _cap_pipeline(tmp_path, max_entities=1000, entity_cap_min_dwell_s=0)
    assert not pipeline.admission()  # no shard has said yet
    _shards_hold(pipeline, 0, s0=600, s1=400)
    assert pipeline.stats.entities() == 1000
    assert not pipeline.admission()  # at the cap, not past it
    _shards_hold(pipeline, 1, s1=401)  # a shard without work keeps its count
    assert pipeline.admission() and not pipeline.admit_new
    _shards_hold(pipeline, 2, s0=549)
    assert not pipeline.admission()  # evictions under way (950): still closed
    _shards_hold(pipeline, 3, s1=350)
    assert pipeline.stats.entities() == 899
    assert pipeline.admission() and pipeline.admit_new


def test_the_entity_cap_switch_holds_for_its_minimum_dwell(tmp_path: Path, monkeypatch) -> None:
    now = [1000.0]
    monkeypatch.setattr("streaming.app.time.monotonic", lambda: now[0])
    pipeline = _cap_pipeline(tmp_path, max_entities=1000, entity_cap_min_dwell_s=300)
    _shards_hold(pipeline, 0, s0=1001)
    assert pipeline.admission() and not pipeline.admit_new  # the first switch: at once
    _shards_hold(pipeline, 1, s0=100)  # idle entities evicted at once
    now[0] += 10
    assert not pipeline.admission()
    now[0] += 289
    assert not pipeline.admission() and not pipeline.admit_new
    now[0] += 1
    assert pipeline.admission() and pipeline.admit_new
    _shards_hold(pipeline, 2, s0=1500)  # a flood again, at once
    now[0] += 1
    assert not pipeline.admission() and pipeline.admit_new
    now[0] += 299
    assert pipeline.admission() and not pipeline.admit_new


def test_entity_counts_of_another_detect_checkpoint_are_not_added(tmp_path: Path) -> None:
    # spark.state_shards changed: a new checkpoint, whose shards are other shards.
    stats = PipelineStats()
    stats.count_entities("detect-kafka-shards32-packed1", [EntityCount("31", 9)])
    stats.count_entities("detect-kafka-shards8-packed1", [EntityCount("3", 0)])
    assert stats.shard_entities == {"3": 0} and stats.entities() == 0


def test_refused_entities_are_counted_once_per_batch(tmp_path: Path) -> None:
    stats, sink = PipelineStats(), Recording("file")
    deliver = AlertDelivery(
        Outputs(ledger=AlertLedger(tmp_path / "l.sqlite"), sinks=[sink]), stats, cfg()
    )
    refused = note_row(Refused(ABOUT))
    deliver(FakeBatch([refused, note_row(Refused(replace(ABOUT, entity="job:80")))]), 3)  # type: ignore[arg-type]
    deliver(FakeBatch([refused]), 3)  # type: ignore[arg-type]  # replayed
    assert stats.entities_refused == {"checkpoint_failures": 2}
    assert sink.sent == []


def test_an_incident_that_opened_while_flinkwatch_was_down_pages_once_it_caught_up(
    tmp_path: Path,
) -> None:
    # The batch's rows tell the ledger how far detection has got (signals carry the
    # entity's newest event time): the first batch after three hours down is far behind.
    now = {"ms": 1_700_000_000_000}
    slack = Recording("slack")
    slack.notifies = True
    ledger = AlertLedger(tmp_path / "l.sqlite", clock=lambda: now["ms"])
    deliver = AlertDelivery(Outputs(ledger=ledger, sinks=[slack]), PipelineStats(), cfg())
    signal = note_row(Signal(ABOUT, {}))
    deliver(FakeBatch([{**signal, "event_ms": now["ms"] - 5_000}]), 0)  # type: ignore[arg-type]
    now["ms"] += 3 * 3_600_000
    opened = {**ROW, "event_ms": now["ms"] - 2 * 3_600_000}
    deliver(FakeBatch([opened]), 1)  # type: ignore[arg-type]
    assert slack.sent == []  # old, and flinkwatch is still catching up
    caught_up = {**signal, "entity": "job:80", "event_ms": now["ms"] - 3_000}
    deliver(FakeBatch([caught_up]), 2)  # type: ignore[arg-type]
    assert slack.sent == ["a1:firing"]


def test_a_batch_run_again_after_a_reload_without_an_incident_closes_it(tmp_path: Path) -> None:
    # Spark's checkpoint names the query; its batch ids are compared, no other's.
    checkpoint = tmp_path / "detect-kafka-shards32"
    checkpoint.mkdir()
    (checkpoint / "metadata").write_text('{"id":"5b1e6c2a-query"}\n')
    slack = Recording("slack")
    slack.notifies = True
    ledger = AlertLedger(tmp_path / "l.sqlite")
    outputs = Outputs(ledger=ledger, sinks=[slack])
    fired = {**ROW, "event_ms": int(time.time() * 1000)}
    AlertDelivery(outputs, PipelineStats(), cfg(), checkpoint)(FakeBatch([fired]), 7)  # type: ignore[arg-type]
    # The reload stopped the query before Spark committed batch 7; the restarted query
    # (a new handler) runs batch 7 again and, with the new settings, raises nothing.
    again = AlertDelivery(outputs, PipelineStats(), cfg(), checkpoint)
    again(FakeBatch([]), 7)  # type: ignore[arg-type]
    assert slack.sent == ["a1:firing", "a1:resolved"]
    assert ledger.active() == []


class DetectInFlight:
    """The detect query in a micro-batch, as a stop sees it.

    Its ``deliver_at``-th status look has the delivery handler return (``None``: never);
    Spark reports the batch committed at the second look at its progress after that.
    """

    name = "flinkwatch-detect"

    def __init__(self, stats: PipelineStats, stops: list[str], deliver_at: int | None) -> None:
        self.stats, self.stops, self.deliver_at = stats, stops, deliver_at
        self.looks = 0
        self.progress_looks = 0
        self.stopped_with: tuple[int, bool] | None = None

    @property
    def isActive(self) -> bool:  # noqa: N802 - Spark's name
        return self.stopped_with is None

    @property
    def status(self) -> dict[str, Any]:
        self.looks += 1
        if self.looks == self.deliver_at:
            self.stats.count_delivered(7)
        return {"isTriggerActive": True}  # batches back to back: never seen idle

    @property
    def lastProgress(self) -> Any:  # noqa: N802 - Spark's name
        if self.stats.delivered:
            self.progress_looks += 1
        return SimpleNamespace(batchId=7 if self.progress_looks >= 2 else 6)

    def exception(self) -> Exception | None:
        return None

    def stop(self) -> None:
        self.stops.append(self.name)
        self.stopped_with = (self.stats.delivered, self.progress_looks >= 2)


@dataclass
class StoppingPipeline(QuietPipeline):
    config: RunningConfig
    deliver_at: int | None
    stats: PipelineStats = field(default_factory=PipelineStats)
    stops: list[str] = field(default_factory=list)
    detect: DetectInFlight | None = None
    spark: Any = None

    def start(self) -> list[Any]:
        self.detect = DetectInFlight(self.stats, self.stops, self.deliver_at)
        return [ParseQuery(self.stops), self.detect]


class ParseQuery(FakeQuery):
    def __init__(self, stops: list[str]) -> None:
        super().__init__("flinkwatch-parse", None)
        self.stops = stops

    def stop(self) -> None:
        self.stops.append(self.name)
        super().stop()


def asked_once() -> Any:
    """A ``should_stop`` that answers yes from its second call on (after the start)."""
    calls = iter([False])
    return lambda: next(calls, True)


def test_a_stop_lets_the_detect_batch_in_flight_finish_and_commit_first() -> None:
    p = StoppingPipeline(RunningConfig(cfg(stop_grace_s=30)), deliver_at=3)
    assert run_forever(p, should_stop=asked_once()) == 0  # type: ignore[arg-type]
    assert p.stops == ["flinkwatch-parse", "flinkwatch-detect"]
    assert p.detect is not None and p.detect.stopped_with == (1, True)  # delivered, committed
    assert p.stats.stop_note == "micro-batch 7 finished first"


def test_a_detect_batch_longer_than_the_grace_is_abandoned_and_the_stop_says_so() -> None:
    p = StoppingPipeline(RunningConfig(cfg(stop_grace_s=0.3)), deliver_at=None)
    assert run_forever(p, should_stop=asked_once()) == 0  # type: ignore[arg-type]
    assert p.detect is not None and p.detect.stopped_with == (0, False)
    assert p.stats.stop_note == (
        "micro-batch in flight abandoned at spark.stop_grace_s=0.3, the next start runs it again"
    )
