"""The detect stage without Spark: entities, their detectors, repeats, failures, wake-ups."""

from __future__ import annotations

import json

import pytest

from conf import AppConfig
from detectors import REGISTRY, Alert, AlertStatus, Severity
from detectors.idle_heap_growth import HEAP_USED
from detectors.tm_ids import tm_entity
from streaming.bus import active_detectors
from streaming.clock import Clock, Lag, WakeUp
from streaming.entity import LAG_WINDOW_MS, Header, parse_saved
from streaming.packed import PackedStore, pack, unpack
from streaming.routes import Routes, decode
from streaming.rows import (
    DETECT_COLUMNS,
    DetectorFailure,
    EntityCount,
    alert_rows,
    output_rows,
    read,
)
from streaming.runner import EntityRunner, ShardRunner
from streaming.ticks import TICK_KEY, hold_value, tick_value
from tests.streaming import catalog_rules
from tests.streaming.catalog_rules import ExpiryRule, QuietRule

T0 = 1_700_000_000_000
JOB = "b" * 32
JOB_KEY = "job:" + JOB


class Store:
    """A shard's map state, in memory."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}
        self.reads = 0

    def get(self, entity: str) -> str | None:
        self.reads += 1
        return self.values.get(entity)

    def put(self, entity: str, text: str) -> None:
        self.values[entity] = text

    def delete(self, entity: str) -> None:
        self.values.pop(entity, None)


class Shard:
    """One shard as the Spark shell drives it: rows, then the shard's timer."""

    def __init__(self, cfg: AppConfig | None = None, **kwargs: object) -> None:
        cfg = cfg or AppConfig()
        routes = Routes(active_detectors(cfg), cfg.catalog())
        self.runner = EntityRunner(cfg.resolver(), routes, **kwargs)  # type: ignore[arg-type]
        self.shard = ShardRunner(self.runner)
        self.store = Store()
        self.wakes: dict[str, WakeUp] = {}
        self.last_timer: int | None = None
        self.name: str | None = None  # the shard's key, as the Spark shell passes it

    def batch(self, rows: list[dict], watermark: int = 0, **clock: int | None) -> list[dict]:
        values = [(r.pop("entity", JOB_KEY), json.dumps(r), r.pop("_bus", None)) for r in rows]
        out = self.shard.run(
            self.store,
            self.wakes,
            values,
            Clock(watermark, **clock),  # type: ignore[arg-type]
            shard=self.name,
        )
        self.last_timer = out.timer
        return output_rows(out.outputs)

    def timer(self) -> int | None:
        """The earliest watermark wake-up (records alone, no grace)."""
        return min(w[0] for w in self.wakes.values()) if self.wakes else None

    def saved(self, entity: str = JOB_KEY) -> tuple[Header, dict[str, dict]]:
        header, texts = parse_saved(self.store.values.get(entity))
        return header, {n: json.loads(t) for n, t in texts.items()}


def _expiry(i: int, **extra: object) -> dict:
    return {
        "src": "logs:0",
        "seq": 0,
        "job_id": JOB,
        "kind": "checkpoint_expired",
        "event_ms": T0 + i * 60_000,
        "offset": i,
        "checkpoint_id": 10 + i,
        **extra,
    }


def _statuses(rows: list[dict], detector: str | None = None) -> list[str]:
    return [
        r["status"]
        for r in rows
        if r["kind"] == "alert" and (detector is None or r["detector"] == detector)
    ]


def _failures(rows: list[dict], detector: str | None = None) -> list[DetectorFailure]:
    notes = [read(r) for r in rows if r["kind"] == "detector_error"]
    return [
        n for n in notes if isinstance(n, DetectorFailure) and detector in (None, n.about.detector)
    ]


def test_a_bus_value_decodes_to_its_event_and_position() -> None:
    value = json.dumps({**_expiry(3), "duration_ms": 1200, "value": 5e8})
    e = decode(value, 42)
    assert (e.src, e.offset, e.seq, e.bus_ms) == ("logs:0", 3, 0, 42)
    assert (e.event.kind, e.event.time_ms, e.event.checkpoint_id) == (
        "checkpoint_expired",
        T0 + 180_000,
        13,
    )
    assert isinstance(e.event.checkpoint_id, int) and e.event.job_name is None


def test_a_field_a_newer_release_added_is_ignored() -> None:
    e = decode(json.dumps({**_expiry(1), "zone": "eu-1"}))
    assert e.event.checkpoint_id == 11


def test_output_rows_match_the_output_schema() -> None:
    a = Alert(
        alert_id="x1",
        detector="checkpoint_failures",
        entity="job:7f",
        status=AlertStatus.RESOLVED,
        severity=Severity.CRITICAL,
        event_time_ms=42,
        summary="ok again",
        evidence={"n": 3},
    )
    (row,) = alert_rows([a])
    assert list(row) == list(DETECT_COLUMNS)
    assert (row["kind"], row["status"], row["severity"], row["event_ms"]) == (
        "alert",
        "resolved",
        "critical",
        42,
    )
    assert json.loads(row["evidence"]) == {"n": 3}


def test_events_reach_their_detectors_in_event_time_then_offset_order(monkeypatch) -> None:
    seen: list[tuple[int, int | None]] = []
    cls = REGISTRY["checkpoint_failures"]
    real = cls.on_event

    def spy(self, state, event):  # type: ignore[no-untyped-def]
        seen.append((event.time_ms, event.checkpoint_id))
        return real(self, state, event)

    monkeypatch.setattr(cls, "on_event", spy)
    Shard().batch(
        [
            {
                **_expiry(0),
                "kind": "checkpoint_completed",
                "event_ms": T0 + 2000,
                "offset": 5,
                "checkpoint_id": 8,
            },
            {**_expiry(0), "event_ms": T0 + 1000, "offset": 9, "checkpoint_id": 7},
            {**_expiry(0), "event_ms": T0 + 1000, "offset": 3, "checkpoint_id": 6},
        ]
    )
    assert seen == [(T0 + 1000, 6), (T0 + 1000, 7), (T0 + 2000, 8)]


def test_an_entity_keeps_every_detector_of_its_scope_in_one_value() -> None:
    shard = Shard()
    out = shard.batch([_expiry(i) for i in (1, 2, 3)])
    assert _statuses(out) == ["firing"]  # checkpoint_failures: 3 expired
    _header, states = shard.saved()
    # job_lost keeps the job's records before its RUNNING line (not watched yet).
    assert set(states) == {
        "checkpoint_creep",
        "checkpoint_failures",
        "job_lost",
        "late_barrier_acks",
    }
    assert list(shard.store.values) == [JOB_KEY]


def test_alerts_carry_the_job_name_from_its_state_lines() -> None:
    # Seen live: Flink logged `Job <name> (<id>) switched from state CREATED to RUNNING`
    # before the job's checkpoints expired, and the Slack message showed only the id.
    shard = Shard()
    running = {
        **_expiry(0),
        "kind": "job_state",
        "job_name": "orders-enrichment",
        "from_state": "CREATED",
        "to_state": "RUNNING",
        "checkpoint_id": None,
    }
    out = shard.batch([running])
    assert [r for r in out if r["detector"] == "checkpoint_failures"] == []
    header, _states = shard.saved()
    assert header.name == "orders-enrichment"
    out = [r for i in (1, 2, 3) for r in shard.batch([_expiry(i)])]
    fired = [r for r in out if r["status"] == "firing" and r["detector"] == "checkpoint_failures"]
    assert len(fired) == 1 and fired[0]["job_name"] == "orders-enrichment"
    assert "orders-enrichment" in fired[0]["summary"]


def _pay_etl_rows() -> list[dict]:
    """The live report's job: named in its state line, then expiries each acked late."""
    running = {
        **_expiry(0),
        "kind": "job_state",
        "job_name": "<!channel> pay-etl",
        "from_state": "CREATED",
        "to_state": "RUNNING",
        "checkpoint_id": None,
    }
    rows = [running]
    for i in (1, 2, 3):
        rows.append(_expiry(i))
        late = {**_expiry(i), "kind": "checkpoint_late_ack"}
        rows.append({**late, "event_ms": late["event_ms"] + 50, "task": f"Source: pay ({i}/2)"})
        # The Prometheus reporter's filtered spelling of the name, on a metric label.
        metric = {**_expiry(i), "kind": "metric", "checkpoint_id": None}
        rows.append({**metric, "metric": "x", "value": 1.0, "job_name": "__channel__pay_etl"})
    return [{**r, "offset": n} for n, r in enumerate(rows)]  # one partition, in order


def test_every_text_of_an_alert_names_the_job_as_its_job_name_whatever_the_batches() -> None:
    # Seen live, in one of two identical runs: the Slack header named the job (the alert's
    # job_name, filled in by the runner) while the summary named only its id (the detector's
    # state was created in the batch that fired, before the runner named it).
    seen = {}
    for batches in ([_pay_etl_rows()], [[r] for r in _pay_etl_rows()]):
        shard = Shard()
        fired = [r for b in batches for r in shard.batch(b) if r["alert_id"]]
        assert {r["detector"] for r in fired} >= {"checkpoint_failures", "late_barrier_acks"}
        for r in fired:
            assert r["job_name"] == "<!channel> pay-etl", r
            assert "job <!channel> pay-etl" in r["summary"] and JOB not in r["summary"], r
        seen[len(batches)] = sorted((r["detector"], r["summary"]) for r in fired)
    one, many = seen.values()
    assert one == many


def test_a_name_alone_is_kept_until_the_idle_deadline() -> None:
    shard = Shard()
    running = {**_expiry(0), "kind": "job_state", "job_name": "orders", "to_state": "RUNNING"}
    shard.batch([running])
    idle = int(AppConfig().detectors.checkpoint_failures.idle_ttl_s * 1000)
    assert shard.timer() == T0 + idle
    shard.batch([], watermark=T0 + idle)
    # new_error_pattern keeps what a job learned for a week (its job state line starts the
    # learning): the entity goes at that detector's idle deadline.
    longest = int(AppConfig().detectors.new_error_pattern.idle_ttl_s * 1000)
    assert shard.timer() == T0 + longest
    shard.batch([], watermark=T0 + longest)
    assert shard.store.values == {} and shard.wakes == {}


def test_a_shard_says_after_each_turn_how_many_entities_it_holds() -> None:
    # The entity cap counts entities: not detector states (four per job here), not the
    # shard's state rows (one packed value, a wake-up table), not timers (one per shard).
    shard = Shard()
    shard.name = "7"

    def held(out: list[dict]) -> int:
        *_, last = out
        assert (last["kind"], last["entity"]) == ("entity_count", "shard:7")
        assert [r for r in out if r["kind"] == "entity_count"] == [last]
        count = read(last)
        assert isinstance(count, EntityCount) and count.shard == "7"
        return count.entities

    other, third = "c" * 32, "d" * 32
    out = shard.batch([_expiry(1), {**_expiry(1, job_id=other), "entity": "job:" + other}])
    assert held(out) == 2
    assert len(shard.saved()[1]) == 4 and len(shard.saved("job:" + other)[1]) == 4
    shard.runner.admit_new = False
    assert held(shard.batch([{**_expiry(2, job_id=third), "entity": "job:" + third}])) == 2
    shard.runner.admit_new = True
    assert held(shard.batch([{**_expiry(2, job_id=third), "entity": "job:" + third}])) == 3
    # A tick alone (every shard gets each one): the count all the same.
    ticked = shard.shard.run(
        shard.store, shard.wakes, [(TICK_KEY, tick_value(T0, 0, 1), None)], Clock(0), shard="7"
    )
    assert held(output_rows(ticked.outputs)) == 3
    # Idle entities are dropped: the count follows, down to none.
    assert held(shard.batch([], watermark=T0 + 30 * 86_400_000)) == 0
    assert shard.wakes == {}


def test_an_event_that_raises_is_skipped_and_its_half_change_is_not_saved(monkeypatch) -> None:
    clean = Shard()
    clean.batch([_expiry(1), _expiry(3)])
    cls = REGISTRY["checkpoint_failures"]
    real = cls.on_event

    def poisoned(self, state, event):  # type: ignore[no-untyped-def]
        if event.checkpoint_id == 12:
            state.failed = "half-changed"  # then fails: a bug in the detector
            raise ValueError("cannot handle checkpoint 12")
        return real(self, state, event)

    monkeypatch.setattr(cls, "on_event", poisoned)
    shard = Shard()
    out = shard.batch([_expiry(i) for i in (1, 2, 3)])
    (err,) = _failures(out)
    assert err.about.entity == JOB_KEY and "ValueError: cannot handle checkpoint 12" in err.error
    assert (err.where, err.failures, err.dropped) == ("on_event", 1, False)
    # What is saved is what the other two events make, as if the bad one never came;
    # and the event after it succeeded, so no failure is carried over.
    assert shard.saved()[1]["checkpoint_failures"] == clean.saved()[1]["checkpoint_failures"]
    assert shard.saved()[0].failures == {}


def _firing(shard: Shard) -> dict:
    out = shard.batch([_expiry(i) for i in (1, 2, 3, 4)])
    (fired,) = [
        r for r in out if r["status"] == "firing" and r["detector"] == "checkpoint_failures"
    ]
    return fired


def test_a_deadline_that_always_raises_gives_the_detector_up_and_resolves_its_incident(
    monkeypatch,
) -> None:
    shard = Shard()
    firing = _firing(shard)

    def broken(self, state, now_ms):  # type: ignore[no-untyped-def]
        state.firing = "half-changed"
        raise KeyError("window")

    monkeypatch.setattr(REGISTRY["checkpoint_failures"], "on_timer", broken)
    at = shard.saved()[0].due["checkpoint_failures"]
    for n in (1, 2):
        out = shard.batch([], watermark=at)
        assert [e.failures for e in _failures(out)] == [n]
        header, states = shard.saved()
        assert states["checkpoint_failures"]["firing"] is True
        assert header.failures["checkpoint_failures"] == n
        assert shard.timer() == at + 60_000  # retried soon, not after the idle TTL
        at = shard.timer()
    out = shard.batch([], watermark=at)
    errors = [(e.where, e.failures, e.dropped) for e in _failures(out)]
    assert errors == [("on_timer", 3, True)]
    (resolved,) = [r for r in out if r["status"] == "resolved"]
    assert resolved["alert_id"] == firing["alert_id"]
    assert "kept failing" in resolved["summary"]
    assert "checkpoint_failures" not in shard.saved()[1]


def test_events_that_keep_raising_drop_the_detector_after_three_in_a_row(monkeypatch) -> None:
    shard = Shard()
    _firing(shard)

    def broken(self, state, event):  # type: ignore[no-untyped-def]
        raise RuntimeError("boom")

    monkeypatch.setattr(REGISTRY["checkpoint_failures"], "on_event", broken)
    shard.batch([_expiry(5)])
    assert shard.saved()[0].failures["checkpoint_failures"] == 1
    out = shard.batch([_expiry(6), _expiry(7)])
    errors = _failures(out, "checkpoint_failures")
    assert [(e.failures, e.dropped) for e in errors] == [(2, False), (3, True)]
    assert _statuses(out, "checkpoint_failures") == ["resolved"]
    assert "signal_gone" in [r["kind"] for r in out if r["detector"] == "checkpoint_failures"]
    # The entity's other detectors go on.
    assert "checkpoint_failures" not in shard.saved()[1] and "checkpoint_creep" in shard.saved()[1]


def test_while_the_entity_cap_is_hit_new_entities_are_refused_and_known_ones_go_on() -> None:
    shard = Shard()
    shard.batch([_expiry(1)])
    shard.runner.admit_new = False
    before = dict(shard.store.values)
    out = shard.batch([_expiry(2)])
    assert [r for r in out if r["kind"] == "entity_refused"] == []
    assert shard.store.values[JOB_KEY] != before[JOB_KEY]  # known: watched as before
    other = "c" * 32
    out = shard.batch([{**_expiry(1, job_id=other), "entity": "job:" + other}])
    assert sorted((r["kind"], r["detector"]) for r in out) == [
        ("entity_refused", "checkpoint_creep"),
        ("entity_refused", "checkpoint_failures"),
        ("entity_refused", "job_lost"),
        ("entity_refused", "late_barrier_acks"),
    ]
    assert set(shard.store.values) == {JOB_KEY} and set(shard.wakes) == {JOB_KEY}


def test_each_event_is_replayed_at_most_once_however_many_raise(monkeypatch) -> None:
    # Rebuilding from the batch's start after every failure was quadratic: 2,000 events
    # with every second one raising cost half a million detector calls.
    cls = REGISTRY["checkpoint_failures"]
    real, calls = cls.on_event, {"n": 0}

    def flaky(self, state, event):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if event.checkpoint_id % 2:
            raise ValueError("odd checkpoint")
        return real(self, state, event)

    monkeypatch.setattr(cls, "on_event", flaky)
    rows = [{**_expiry(i), "event_ms": T0 + i * 1000} for i in range(1, 401)]
    out = Shard().batch(rows)
    assert len(_failures(out)) == 200
    assert calls["n"] <= 2 * len(rows)


def test_a_saved_state_of_a_newer_version_is_dropped_its_incident_closed_and_reported() -> None:
    # A rollback after a release that changed a detector's state layout: the old code
    # cannot read what the new one saved. The detector starts over rather than the query
    # failing, and its open incident does not stay firing forever.
    shard = Shard()
    _firing(shard)
    header, texts = parse_saved(shard.store.values[JOB_KEY])
    future = {**json.loads(texts["checkpoint_failures"]), "v": 99, "shape": "of the future"}
    texts["checkpoint_failures"] = json.dumps(future)
    from streaming.entity import saved_text

    shard.store.values[JOB_KEY] = saved_text(header, texts)
    out = shard.batch([_expiry(9)])
    (err,) = _failures(out)
    assert "StateError" in err.error and "newer" in err.error
    assert (err.where, err.failures, err.dropped) == ("load", 1, True)
    (resolved,) = [r for r in out if r["status"] == "resolved"]
    assert "saved state is unreadable" in resolved["summary"]
    # It starts over with the batch's event, in the current layout.
    state = shard.saved()[1]["checkpoint_failures"]
    assert state["v"] == 2 and state["failed"] == {"19": [T0 + 540_000, "expired"]}


def test_a_detector_disabled_by_a_reload_closes_its_incident_and_forgets_its_state() -> None:
    shard = Shard()
    _firing(shard)
    off = AppConfig.model_validate({"detectors": {"checkpoint_failures": {"enabled": False}}})
    shard.runner = EntityRunner(off.resolver(), Routes(active_detectors(off), off.catalog()))
    shard.shard = ShardRunner(shard.runner)
    out = shard.batch([{**_expiry(8), "kind": "checkpoint_triggered"}])
    assert _statuses(out, "checkpoint_failures") == ["resolved"]
    assert "checkpoint_failures" not in shard.saved()[1]


def test_an_entity_is_woken_at_its_earliest_deadline_and_the_shard_at_its_earliest_entity() -> None:
    shard = Shard()
    _firing(shard)
    other = "c" * 32
    shard.batch([{**_expiry(20, job_id=other), "entity": "job:" + other}])
    header, _ = shard.saved()
    assert shard.wakes[JOB_KEY][0] == min(header.due.values()) < shard.wakes["job:" + other][0]
    assert shard.last_timer == min(w[0] for w in shard.wakes.values())
    # Only the due entity is read when the shard is woken.
    shard.store.reads = 0
    shard.batch([], watermark=shard.wakes[JOB_KEY][0])
    assert shard.store.reads == 1


def test_a_deadline_fires_once_the_fleet_clock_is_past_it_not_a_watermark_delay_later() -> None:
    # A checkpoint pending past half its timeout: with only the watermark it paged
    # watermark_delay_s (30 s) after the deadline; the bus's newest event time says sooner.
    # The job's records arrive 50 ms behind the records' frontier (the watermark + delay
    # of the batch that reads them is 50 ms past them) and on the bus 50 ms after their
    # event time.
    delay, grace, behind = 30_000, 2_000, 50
    shard = Shard()
    trig = {**_expiry(0), "kind": "checkpoint_triggered", "checkpoint_id": 50, "_bus": T0 + 50}
    for i in range(1, 10):  # a history of fast checkpoints, one a minute
        t = T0 + i * 60_000
        shard.batch(
            [
                {**trig, "event_ms": t, "offset": 2 * i, "checkpoint_id": i, "_bus": t + 50},
                {
                    **trig,
                    "kind": "checkpoint_completed",
                    "event_ms": t + 1000,
                    "offset": 2 * i + 1,
                    "checkpoint_id": i,
                    "duration_ms": 1000,
                    "_bus": t + 1050,
                },
            ],
            watermark=t - delay + behind,
            delay_ms=delay,
            grace_ms=grace,
        )
    start = T0 + 600_000
    shard.batch(
        [{**trig, "event_ms": start, "offset": 99, "checkpoint_id": 10, "_bus": start + 50}],
        watermark=start - delay + behind,
        delay_ms=delay,
        grace_ms=grace,
    )
    creep = shard.saved()[0].due["checkpoint_creep"]
    # The shard is woken once the bus's newest event time (watermark + delay) is the grace
    # and the entity's lag (50 ms) past the deadline.
    assert shard.wakes[JOB_KEY] == WakeUp(creep, creep + grace + 50, creep + grace + 50)
    assert shard.last_timer == creep - (delay - grace - 50)
    out = shard.batch([], watermark=creep - delay + grace + 49, delay_ms=delay, grace_ms=grace)
    assert _statuses(out) == []
    out = shard.batch([], watermark=creep - delay + grace + 50, delay_ms=delay, grace_ms=grace)
    assert _statuses(out, "checkpoint_creep") == ["firing"]
    (fired,) = [r for r in out if r["alert_id"]]
    assert fired["event_ms"] == creep  # stamped with the deadline, as a punctual timer would


def test_without_a_bus_time_deadlines_wait_for_the_watermark() -> None:
    shard = Shard()
    _firing(shard)
    header, _ = shard.saved()
    assert shard.wakes[JOB_KEY] == WakeUp(*[min(header.due.values())] * 3)  # no delay, no lag


def test_signals_are_emitted_when_they_change_and_again_after_a_restart() -> None:
    shard = Shard(token="run1")
    out = shard.batch([_expiry(1)])
    assert "signal" in [r["kind"] for r in out if r["detector"] == "checkpoint_failures"]
    out = shard.batch(
        [{**_expiry(1), "kind": "checkpoint_triggered", "offset": 50, "checkpoint_id": 90}]
    )
    assert [r for r in out if r["detector"] == "checkpoint_failures"] == []  # nothing new
    restarted = Shard(token="run2")
    restarted.store, restarted.wakes = shard.store, shard.wakes
    out = restarted.batch(
        [{**_expiry(1), "kind": "checkpoint_triggered", "offset": 51, "checkpoint_id": 91}]
    )
    assert "signal" in [r["kind"] for r in out if r["detector"] == "checkpoint_failures"]


@pytest.mark.parametrize("value", ["not json", "5", '"a string"', "[1, 2]"])
def test_an_unreadable_bus_value_is_reported_and_the_rest_goes_on(value: str) -> None:
    shard = Shard()
    rows = [(JOB_KEY, value, None), (JOB_KEY, json.dumps(_expiry(1)), None)]
    out = shard.shard.run(shard.store, shard.wakes, rows, Clock(0))
    (err,) = _failures(output_rows(out.outputs))
    assert err.about.detector == "bus" and err.where == "decode"
    assert out.bad == 1 and JOB_KEY in shard.store.values


def test_a_tick_moves_deadlines_when_nothing_else_arrives() -> None:
    # The whole cluster stopped: no record moves event time, but the ticks do; they go to
    # every shard and carry no event time of their own (they make no record late).
    delay, grace = 30_000, 2_000
    shard = Shard()
    _firing(shard)
    due, ticks = shard.wakes[JOB_KEY][0], {}
    clock = Clock(0, delay, grace)

    def tick(t: int, p: int) -> list[tuple[str, str, None]]:
        return [("tick", tick_value(t, p, 2), None)]

    out = shard.shard.run(shard.store, shard.wakes, tick(due + delay - 1, 0), clock, ticks)
    out = shard.shard.run(shard.store, shard.wakes, tick(due + delay - 1, 1), clock, ticks)
    assert out.outputs == [] and shard.wakes[JOB_KEY][0] == due  # not yet
    out = shard.shard.run(shard.store, shard.wakes, tick(due + delay, 0), clock, ticks)
    assert shard.wakes[JOB_KEY][0] == due  # one partition only: others may hold older records
    out = shard.shard.run(shard.store, shard.wakes, tick(due + delay, 1), clock, ticks)
    assert shard.wakes[JOB_KEY][0] > due  # the entity's deadline was judged


def test_a_tick_of_now_does_not_decide_for_an_entity_whose_records_arrive_hours_late() -> None:
    # History replayed into Kafka, or a shipper an hour behind: the tick says what the raw
    # topics held now, which says nothing of records stamped an hour ago still to come.
    delay, grace, late = 30_000, 2_000, 3_600_000
    shard = Shard()
    rows = [{**_expiry(i), "_bus": T0 + i * 60_000 + late} for i in (1, 2, 3, 4)]
    shard.batch(rows, watermark=T0, delay_ms=delay, grace_ms=grace)
    deadline = shard.saved()[0].due["checkpoint_failures"]
    ticks: dict[str, int] = {}
    clock = Clock(T0, delay, grace)

    def tick(t: int) -> list[tuple[str, str, None]]:
        return [("tick", tick_value(t, 0, 1), None)]

    shard.shard.run(shard.store, shard.wakes, tick(deadline + grace), clock, ticks)
    assert shard.saved()[0].due["checkpoint_failures"] == deadline  # not decided
    shard.shard.run(shard.store, shard.wakes, tick(deadline + grace + late), clock, ticks)
    assert shard.saved()[0].due["checkpoint_failures"] != deadline  # now it is


def _deadline_after_firing(shard: Shard, delay: int, grace: int, lag: int) -> int:
    """The job's records reach the bus ``lag`` after their event time, and arrive ``lag``
    behind the records' frontier (each read by a batch whose watermark + delay is past it)."""
    for i in (1, 2, 3, 4):
        t = T0 + i * 60_000
        row = {**_expiry(i), "_bus": t + lag}
        shard.batch([row], watermark=t + lag - delay, delay_ms=delay, grace_ms=grace)
    return shard.saved()[0].due["checkpoint_failures"]


def _other(t: int, bus: int | None) -> dict:
    """A record of another entity of the shard, at event time ``t``, on the bus at ``bus``."""
    row = {"entity": "tm:tm-1", "kind": "metric", "event_ms": t, "src": "metrics:0", "offset": t}
    return row if bus is None else {**row, "_bus": bus}


@pytest.mark.parametrize(
    ("past", "bus_after", "judged"),
    [
        (1, 50, True),  # the batch's own record is past the deadline by lag and grace
        (-1, 50, False),  # one millisecond short
        (1, None, False),  # the files bus: no bus time, only the watermark counts
        (600_000, -600_001, False),  # a host clock 10 min ahead: capped at its bus time
    ],
    ids=["passed", "short", "files-bus", "clock-ahead"],
)
def test_a_deadline_the_batch_passes_is_judged_in_that_batch(
    past: int, bus_after: int | None, judged: bool
) -> None:
    # Spark's watermark moves at the end of a micro-batch, so deadlines waited one more
    # batch (seconds under load) after the records that passed them were read.
    delay, grace, lag = 30_000, 2_000, 100
    shard = Shard()
    deadline = _deadline_after_firing(shard, delay, grace, lag)
    t = deadline + grace + lag + past
    bus = None if bus_after is None else t + bus_after
    shard.batch([_other(t, bus)], watermark=T0 + 4 * 60_000 - delay, delay_ms=delay, grace_ms=grace)
    assert (shard.saved()[0].due["checkpoint_failures"] != deadline) is judged


def test_records_late_on_the_bus_with_every_other_record_hold_no_deadline_back() -> None:
    # A parse that puts records on the bus 5 s after their event time, all of them (its
    # batch's end, a pause of the broker): the records' frontier is as late as they are,
    # so a deadline waits for the grace alone past it. A tick is the bus's own time: what
    # it decides waits for the 5 s as well.
    delay, grace, late = 30_000, 1_000, 5_000
    shard = Shard()
    for i in (1, 2, 3, 4):
        t = T0 + i * 60_000
        row = {**_expiry(i), "_bus": t + late}
        shard.batch([row], watermark=t - delay, delay_ms=delay, grace_ms=grace)
    deadline = shard.saved()[0].due["checkpoint_failures"]
    assert shard.wakes[JOB_KEY] == WakeUp(deadline, deadline + grace, deadline + grace + late)
    (count,) = [
        o for o in _run_tick(shard, deadline + grace, delay, grace) if o.kind == "entity_count"
    ]
    assert shard.saved()[0].due["checkpoint_failures"] == deadline  # a tick: not yet
    assert count.data()["due_ms"] == deadline + grace + late  # the tick that will wake it
    t = deadline + grace
    shard.batch(
        [_other(t, t + late)], watermark=T0 + 4 * 60_000 - delay, delay_ms=delay, grace_ms=grace
    )
    assert shard.saved()[0].due["checkpoint_failures"] != deadline  # the records' frontier


def test_a_catch_up_holds_the_deadlines_until_every_partition_is_released() -> None:
    # flinkwatch comes back to an hour of backlog: a micro-batch's metric task has put
    # minutes of records on the bus before its log task starts, so the newest time (and
    # the watermark that follows it) runs past the checkpoint completions still to come.
    # Held, the shard decides nothing but by ticks; released on every partition, it does.
    delay, grace = 30_000, 1_000
    shard = Shard()
    for i in (1, 2, 3, 4):
        t = T0 + i * 60_000
        shard.batch(
            [{**_expiry(i), "_bus": t + 50}], watermark=t - delay, delay_ms=delay, grace_ms=grace
        )
    deadline = shard.saved()[0].due["checkpoint_failures"]
    ticks: dict[str, int] = {}
    held: dict[str, int] = {}

    def run(rows: list[tuple[str, str, int | None]], watermark: int) -> None:
        clock = Clock(watermark, delay, grace)
        shard.shard.run(shard.store, shard.wakes, rows, clock, ticks, "0", held=held)

    def marks(hold: bool, *parts: int) -> list[tuple[str, str, int | None]]:
        return [(TICK_KEY, hold_value(hold, T0, p), None) for p in parts]

    far = deadline + 600_000
    other = _other(far, far + 50)
    record = [(other.pop("entity"), json.dumps(other), other.pop("_bus"))]
    run([*marks(True, 0, 1), *record], watermark=far - delay)
    assert shard.saved()[0].due["checkpoint_failures"] == deadline  # held: not decided
    run(marks(False, 0), watermark=far - delay)
    assert shard.saved()[0].due["checkpoint_failures"] == deadline  # partition 1 still holds
    run(marks(False, 1), watermark=far - delay)
    assert shard.saved()[0].due["checkpoint_failures"] != deadline  # released: decided


def test_a_record_ahead_of_the_frontier_counts_as_no_lag() -> None:
    # A first batch: no watermark yet, so the frontier before it is 1970; the entity keeps
    # no 13-digit negative lag, and a record behind it its real lag.
    shard = Shard()
    shard.batch([{**_expiry(1), "_bus": T0 + 60_000 + 40}])
    assert shard.saved()[0].lag == [T0 + 60_000 - (T0 + 60_000) % LAG_WINDOW_MS, 40, 40, 0, 0]
    t = T0 + 60_000
    shard.batch([{**_expiry(2), "event_ms": t + 1, "_bus": t + 900}], watermark=t + 700)
    assert shard.saved()[0].lag_ms() == Lag(frontier_ms=699, bus_ms=899)


def test_the_clock_s_lag_window_sizes_the_entity_s_lag_windows() -> None:
    shard = Shard()
    shard.batch([{**_expiry(1), "_bus": T0 + 60_000 + 40}], lag_window_ms=300_000)
    t = T0 + 60_000
    assert shard.saved()[0].lag == [t - t % 300_000, 40, 40, 0, 0]


def _run_tick(shard: Shard, t: int, delay: int, grace: int) -> list:
    clock = Clock(T0, delay, grace)
    value = tick_value(t, 0, 1)
    return shard.shard.run(
        shard.store, shard.wakes, [("tick", value, None)], clock, {}, "0"
    ).outputs


def test_a_record_stamped_ahead_of_its_bus_time_fires_no_deadline_of_its_entity_early() -> None:
    # A scraper whose clock runs 40 s ahead of the log's: its checkpoint metric, on the
    # bus 2 s after checkpoint 6's trigger, is stamped 42 s after it. The entity's
    # detectors must not take it for 42 s having passed ("checkpoint 6 pending for 0.5
    # min" 2 s after the trigger): the record moves the entity's time no further than
    # its bus time.
    cfg = AppConfig.model_validate(
        {"detectors": {"checkpoint_creep": {"checkpoint_timeout_s": 60}}}
    )
    delay, grace = 30_000, 1_000
    shard = Shard(cfg)
    trig = {**_expiry(0), "kind": "checkpoint_triggered", "checkpoint_id": 6}
    t = trig["event_ms"]
    metric = {
        "src": "metrics:0",
        "seq": 0,
        "offset": 1,
        "job_id": JOB,
        "kind": "metric",
        "metric": "flink_jobmanager_job_lastCheckpointDuration",
        "value": 800.0,
        "event_ms": t + 42_000,
        "_bus": t + 2_050,
    }
    clock = {"watermark": t - delay, "delay_ms": delay, "grace_ms": grace}
    out = shard.batch([{**trig, "_bus": t + 50}], **clock)
    out += shard.batch([metric], **clock)
    assert _statuses(out, "checkpoint_creep") == []
    # Checkpoint 6 completes 5 s after its trigger: nothing was overdue.
    done = {**trig, "kind": "checkpoint_completed", "offset": 2, "duration_ms": 5000}
    out = shard.batch([{**done, "event_ms": t + 5_000, "_bus": t + 5_050}], **clock)
    assert _statuses(out, "checkpoint_creep") == []
    # A checkpoint that does stay pending past half the timeout still pages, at its deadline.
    trig7 = {**trig, "checkpoint_id": 7, "offset": 3, "event_ms": t + 60_000, "_bus": t + 60_050}
    shard.batch([trig7], **clock)
    late = {**metric, "offset": 4, "event_ms": t + 132_000, "_bus": t + 92_100}
    out = shard.batch([late], **clock)
    (fired,) = [r for r in out if r["kind"] == "alert" and r["detector"] == "checkpoint_creep"]
    assert fired["status"] == "firing" and fired["event_ms"] == t + 90_000


def _catch_up(held: bool) -> tuple[list[dict], Shard]:
    """Checkpoint 6 of a job read as a catch-up reads it: its metrics 40 s ahead of its log
    lines (another topic's share of a micro-batch), its completion a batch later."""
    cfg = AppConfig.model_validate(
        {"detectors": {"checkpoint_creep": {"checkpoint_timeout_s": 60}}}
    )
    shard = Shard(cfg)
    trig = {**_expiry(0), "kind": "checkpoint_triggered", "checkpoint_id": 6}
    t = trig["event_ms"]
    metrics = [
        {"src": "metrics:0", "seq": 0, "offset": i, "job_id": JOB, "kind": "metric",
         "metric": "flink_jobmanager_job_lastCheckpointDuration", "value": 800.0,
         "event_ms": t + s, "_bus": t + 600_000}
        for i, s in enumerate((10_000, 25_000, 40_000))
    ]  # fmt: skip
    done = {**trig, "kind": "checkpoint_completed", "offset": 2, "duration_ms": 5000}
    out: list[dict] = []
    for rows, hold in (
        ([{**trig, "_bus": t + 600_000}, *metrics], held),
        ([{**done, "event_ms": t + 5_000, "_bus": t + 601_000}], held),
        ([], False),  # the release
    ):
        values = [(r.pop("entity", JOB_KEY), json.dumps(r), r.pop("_bus", None)) for r in rows]
        clock = Clock(t - 30_000, 30_000, 1_000, held=hold)
        out += output_rows(shard.shard.run(shard.store, shard.wakes, values, clock).outputs)
    return out, shard


def test_while_the_parse_catches_up_an_entity_applies_its_events_as_all_its_sources_reach_them() -> (
    None
):
    out, shard = _catch_up(held=True)
    assert _statuses(out, "checkpoint_creep") == []
    assert shard.saved()[0].held == []  # the release applied what waited
    # Not held, the metric 40 s on decides checkpoint 6 before its completion is read.
    out, _shard = _catch_up(held=False)
    assert _statuses(out, "checkpoint_creep") == ["firing"]


def _damaged(rows: list[dict]) -> list[DetectorFailure]:
    return [f for f in _failures(rows, "state") if f.dropped]


def test_one_entity_whose_saved_value_cannot_be_read_is_dropped_and_the_rest_of_the_shard_goes_on() -> (
    None
):
    # A value that does not decompress raised out of the shard's turn: the task failed,
    # Spark ran the batch again into the same error, and the job exited.
    other = "c" * 32
    shard = Shard()
    _firing(shard)
    packed = PackedStore(None)
    for entity, text in shard.store.values.items():
        packed.put(entity, text)
    meta, data = unpack(packed.value())
    data[JOB_KEY] = b"\x78\x01not zlib"
    store = PackedStore(pack(meta, data))
    rows = [{**_expiry(i, job_id=other), "entity": "job:" + other} for i in (5, 6, 7, 8)]
    values = [(r.pop("entity"), json.dumps(r), None) for r in rows]
    due = shard.wakes[JOB_KEY][0]
    out = shard.shard.run(store, shard.wakes, values, Clock(due))
    (damaged,) = _damaged(output_rows(out.outputs))
    assert damaged.about.entity == JOB_KEY and damaged.where == "unpack"
    assert "not zlib" not in damaged.error and "Error" in damaged.error
    assert JOB_KEY not in shard.wakes and store.get(JOB_KEY) is None  # dropped from state
    assert _statuses(output_rows(out.outputs), "checkpoint_failures") == [
        "firing"
    ]  # the other job's
    assert store.get("job:" + other) is not None


def test_an_entity_whose_header_is_not_json_is_dropped_its_incident_closed_saying_why() -> None:
    shard = Shard()
    fired = _firing(shard)
    head, _, rest = shard.store.values[JOB_KEY].partition("\n")
    shard.store.values[JOB_KEY] = head[: len(head) // 2] + "\n" + rest
    out = shard.batch([{**_expiry(9), "kind": "checkpoint_triggered"}])
    (damaged,) = _damaged(out)
    assert damaged.about.entity == JOB_KEY and damaged.where == "load"
    (resolved,) = [r for r in out if r["status"] == "resolved"]
    assert resolved["alert_id"] == fired["alert_id"]
    assert "saved state was damaged" in resolved["summary"]
    # The entity starts again from the batch's event.
    header, states = shard.saved()
    assert header.newest_ms == _expiry(9)["event_ms"] and "checkpoint_failures" in states


def test_a_tick_stamped_ahead_of_its_own_bus_time_moves_no_deadline_past_that_time() -> None:
    # A tick written by a driver whose clock runs ahead: its bus time (the broker's) says
    # when it was written, and no tick can say more than that.
    delay, grace = 30_000, 2_000
    shard = Shard()
    _firing(shard)
    due, ticks = shard.wakes[JOB_KEY][0], {}
    clock = Clock(0, delay, grace)
    ahead = [("tick", tick_value(due + delay + 600_000, 0, 1), due - 60_000)]
    shard.shard.run(shard.store, shard.wakes, ahead, clock, ticks)
    assert shard.wakes[JOB_KEY][0] == due  # not judged
    on_time = [("tick", tick_value(due + delay + 600_000, 0, 1), due + delay)]
    shard.shard.run(shard.store, shard.wakes, on_time, clock, ticks)
    assert shard.wakes[JOB_KEY][0] > due  # now it is


# Rules: what runs is the config's catalog -------------------------------------------------


def _with_rules(shard: Shard, *rules: ExpiryRule | QuietRule) -> None:
    """The shard's runner as a reload leaves it: the config's detectors and ``rules``."""
    shard.shard = catalog_rules.runner(AppConfig(), *rules)
    shard.runner = shard.shard.runner


def _alerts(rows: list[dict], detector: str) -> list[dict]:
    return [r for r in rows if r["kind"] == "alert" and r["detector"] == detector]


def test_a_rule_in_the_catalog_gets_its_events_and_fires_beside_the_detectors() -> None:
    shard = Shard()
    _with_rules(shard, ExpiryRule(at_least=3))
    out = shard.batch([_expiry(i) for i in (1, 2, 3, 4)])
    (fired,) = _alerts(out, "expiries")
    assert (fired["status"], fired["entity"], fired["job_id"]) == ("firing", JOB_KEY, JOB)
    assert fired["summary"] == f"job {JOB}: 3 checkpoints expired"
    assert _statuses(out, "checkpoint_failures") == ["firing"]  # the built-in as before
    header, states = shard.saved()
    assert states["expiries"]["seen"] == 4 and "expiries" in header.due


def test_a_rule_removed_by_a_reload_resolves_its_open_incident_saying_why() -> None:
    shard = Shard()
    _with_rules(shard, ExpiryRule())
    (fired,) = _alerts(shard.batch([_expiry(1), _expiry(2)]), "expiries")
    _with_rules(shard)  # the reload's config has no rule
    out = shard.batch([{**_expiry(3), "kind": "checkpoint_triggered"}])
    (resolved,) = _alerts(out, "expiries")
    assert resolved["status"] == "resolved" and resolved["alert_id"] == fired["alert_id"]
    assert resolved["summary"] == (
        "expiries stopped watching this entity (removed from the config); closing its open incident"
    )
    assert resolved["severity"] == "warning"
    header, states = shard.saved()
    assert "expiries" not in states and "expiries" not in header.due


def test_a_removed_rule_resolves_when_its_entity_next_wakes_without_any_event() -> None:
    shard = Shard()
    _with_rules(shard, ExpiryRule())
    shard.batch([_expiry(1), _expiry(2)])
    _with_rules(shard)
    at = shard.timer()  # the entity's next wake-up (a deadline of any of its detectors)
    assert at is not None
    assert _statuses(shard.batch([], watermark=at - 1), "expiries") == []
    assert _statuses(shard.batch([], watermark=at), "expiries") == ["resolved"]
    assert "expiries" not in shard.saved()[1]


def test_a_rule_disabled_by_a_reload_resolves_saying_the_rule_was_disabled() -> None:
    shard = Shard()
    _with_rules(shard, ExpiryRule())
    shard.batch([_expiry(1), _expiry(2)])
    _with_rules(shard, ExpiryRule(enabled=False))
    out = shard.batch([{**_expiry(3), "kind": "checkpoint_triggered"}])
    (resolved,) = _alerts(out, "expiries")
    assert "(rule disabled)" in resolved["summary"]
    assert "expiries" not in shard.saved()[1]


def test_a_rule_changed_in_place_keeps_its_state_and_its_open_incident() -> None:
    # A new threshold: the state still loads, so the count goes on and the incident
    # opened under the old threshold stays open (no resolve, no second page).
    shard = Shard()
    _with_rules(shard, ExpiryRule(at_least=2))
    shard.batch([_expiry(1), _expiry(2)])
    _with_rules(shard, ExpiryRule(at_least=5))
    out = shard.batch([_expiry(3)])
    assert _statuses(out, "expiries") == []
    state = shard.saved()[1]["expiries"]
    assert state["seen"] == 3 and state["firing"] is True


def test_a_rule_whose_new_definition_cannot_load_its_state_resolves_and_starts_over() -> None:
    shard = Shard()
    _with_rules(shard, ExpiryRule())
    (fired,) = _alerts(shard.batch([_expiry(1), _expiry(2)]), "expiries")
    _with_rules(shard, QuietRule())  # same name, another kind: a count's state is not its
    out = shard.batch([_expiry(3)])
    (resolved,) = _alerts(out, "expiries")
    assert resolved["alert_id"] == fired["alert_id"]
    assert "the rule's definition changed; it starts over" in resolved["summary"]
    assert shard.saved()[1]["expiries"]["last_checkpoint"] == 13  # the new kind's, from now


POD = "orders-enrichment-taskmanager-1-3"  # as the TaskManager's logs spell it
POD_LABEL = "orders_enrichment_taskmanager_1_3"  # as the Prometheus reporter does
POD_KEY = tm_entity(POD)


def _heap(i: int) -> dict:
    return {
        "entity": POD_KEY,
        "src": "metrics:0",
        "seq": 0,
        "kind": "metric",
        "event_ms": T0 + i * 15_000,
        "offset": i,
        "tm_id": POD_LABEL,
        "metric": HEAP_USED,
        "value": 1e9,
    }


def _fatal(i: int) -> dict:
    return {
        "entity": POD_KEY,
        "src": "logs:0",
        "seq": 0,
        "kind": "fatal_error",
        "event_ms": T0 + i * 15_000,
        "offset": i,
        "tm_id": POD,
        "reason": "java.lang.OutOfMemoryError: Java heap space",
        "message": "FATAL: Thread 'main' produced an uncaught exception. Stopping the process...\n"
        "java.lang.OutOfMemoryError: Java heap space",
    }


def test_a_taskmanager_s_metrics_and_logs_are_one_entity_named_as_its_logs_spell_it() -> None:
    # Seen on the real tm_oom_2_3 run: the heap metrics keyed `tm:localhost:38251_0bfbad`,
    # the heartbeat and OOM lines `tm:localhost:38251-0bfbad`; two entities.
    shard = Shard()
    shard.batch([_heap(i) for i in range(3)])
    header, states = shard.saved(POD_KEY)
    assert header.tm == POD_LABEL and states["idle_heap_growth"]["tm_id"] == POD_LABEL
    out = shard.batch([_fatal(3), _heap(4)])
    fired = _alerts(out, "jvm_fatal")
    assert [(a["status"], a["tm_id"], a["entity"]) for a in fired] == [("firing", POD, POD_KEY)]
    assert POD in fired[0]["summary"] and POD_LABEL not in fired[0]["summary"]
    # One entity holds both detectors; the heap's state now names the logs' spelling too,
    # and a metric label after the log line does not take it back.
    assert list(shard.store.values) == [POD_KEY]
    header, states = shard.saved(POD_KEY)
    assert header.tm == POD
    assert {n: s["tm_id"] for n, s in states.items()} == {
        "idle_heap_growth": POD,
        "jvm_fatal": POD,
        "tm_lost": POD,  # it waits for the heartbeat timeout an OOM is the cause of
    }
    shard.batch([_heap(5)])
    assert shard.saved(POD_KEY)[0].tm == POD
    assert parse_saved(shard.store.values[POD_KEY])[0].tm == POD  # saved, not only in memory


def test_an_incident_fired_before_the_logs_spelled_its_taskmanager_resolves_in_their_spelling() -> (
    None
):
    rule = {"name": "heap_high", "kind": "threshold", "scope": "tm", "metric": HEAP_USED}
    cfg = AppConfig.model_validate({"rules": [{**rule, "value": 5e8, "for_s": 30}]})
    shard = Shard(cfg)
    fired = _alerts(shard.batch([_heap(i) for i in range(4)]), "heap_high")
    assert [(a["status"], a["tm_id"]) for a in fired] == [("firing", POD_LABEL)]
    shard.batch([_fatal(4)])
    low = [{**_heap(i), "value": 1e6} for i in range(5, 60)]
    resolved = _alerts(shard.batch(low), "heap_high")
    assert [(a["status"], a["tm_id"]) for a in resolved] == [("resolved", POD)]
    assert resolved[0]["alert_id"] == fired[0]["alert_id"]
