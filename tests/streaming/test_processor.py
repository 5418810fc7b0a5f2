"""The adapter's pure parts: pandas rows in, typed events and alert frames out."""

from __future__ import annotations

import json
import math

from conf import AppConfig, ParamsResolver
from detectors import REGISTRY, Alert, AlertStatus, Severity
from streaming.processor import (
    DetectorProcessor,
    alert_rows,
    fresh_rows,
    output_rows,
    rows_to_events,
)
from streaming.schemas import ALERT_SCHEMA, BUS_FIELDS


def frame(rows: list[dict]) -> list[dict]:
    """Input rows as the adapter gets them: every column, None where Spark has null."""
    return [{c: r.get(c) for c in BUS_FIELDS} for r in rows]


def test_events_come_out_in_event_time_then_offset_order() -> None:
    df = frame(
        [
            {
                "kind": "checkpoint_completed",
                "event_ms": 2000,
                "offset": 5,
                "checkpoint_id": 8.0,
                "value": math.nan,
            },
            {"kind": "checkpoint_expired", "event_ms": 1000, "offset": 9, "checkpoint_id": 7.0},
            {"kind": "checkpoint_expired", "event_ms": 1000, "offset": 3, "checkpoint_id": 6.0},
        ]
    )
    events = rows_to_events(df)
    assert [(e.time_ms, e.checkpoint_id) for e in events] == [(1000, 6), (1000, 7), (2000, 8)]
    assert all(isinstance(e.checkpoint_id, int) for e in events)
    assert events[2].value is None and events[2].job_id is None


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
    (row,) = output_rows(alert_rows([a]))
    assert list(row.asDict()) == [f.name for f in ALERT_SCHEMA.fields]
    named = row.asDict()
    assert (named["status"], named["severity"], named["event_ms"]) == ("resolved", "critical", 42)
    assert json.loads(named["evidence"]) == {"n": 3}


def _positions(rows: list[dict]) -> list[tuple[str, int, int]]:
    return sorted((r["src"], int(r["offset"]), int(r["seq"])) for r in rows)


def test_repeats_of_applied_records_are_dropped_per_source() -> None:
    seen: dict[str, list[int]] = {}
    first = frame(
        [
            {"src": "logs:0", "offset": 10, "seq": 0, "event_ms": 1},
            {"src": "metrics:1", "offset": 7, "seq": 0, "event_ms": 1},
            {"src": "metrics:1", "offset": 7, "seq": 1, "event_ms": 1},
        ]
    )
    assert len(fresh_rows(first, seen)) == 3
    assert seen == {"logs:0": [10, 0], "metrics:1": [7, 1]}
    # After a restart the parse query writes its last batch again, then goes on.
    again = frame(
        [
            {"src": "logs:0", "offset": 10, "seq": 0, "event_ms": 1},
            {"src": "metrics:1", "offset": 7, "seq": 1, "event_ms": 1},
            {"src": "metrics:1", "offset": 7, "seq": 2, "event_ms": 1},
            {"src": "logs:0", "offset": 11, "seq": 0, "event_ms": 2},
            {"src": "logs:0", "offset": 11, "seq": 0, "event_ms": 2},  # twice in one batch
            {"src": "logs:1", "offset": 3, "seq": 0, "event_ms": 2},  # a source not seen yet
        ]
    )
    assert _positions(fresh_rows(again, seen)) == [
        ("logs:0", 11, 0),
        ("logs:1", 3, 0),
        ("metrics:1", 7, 2),
    ]
    assert seen == {"logs:0": [11, 0], "metrics:1": [7, 2], "logs:1": [3, 0]}


def test_sources_remembered_per_entity_are_bounded() -> None:
    seen: dict[str, list[int]] = {}
    fresh_rows(
        frame([{"src": f"f{i}", "offset": 1, "seq": 0, "event_ms": 1} for i in range(40)]), seen
    )
    assert len(seen) == 16 and "f39" in seen and "f0" not in seen


class _State:
    def __init__(self) -> None:
        self.value: tuple[str] | None = None

    def get(self) -> tuple[str] | None:
        return self.value

    def update(self, value: tuple[str]) -> None:
        self.value = value

    def clear(self) -> None:
        self.value = None


class _Handle:
    """The state server, in memory: one value state and the registered timers."""

    def __init__(self) -> None:
        self.state = _State()
        self.timers: set[int] = set()
        self.calls = 0

    def getValueState(self, *_: object) -> _State:  # noqa: N802 - Spark's name
        return self.state

    def registerTimer(self, ms: int) -> None:  # noqa: N802
        self.calls += 1
        self.timers.add(ms)

    def deleteTimer(self, ms: int) -> None:  # noqa: N802
        self.calls += 1
        self.timers.discard(ms)


class _Clock:
    def __init__(self, ms: int) -> None:
        self.ms = ms

    def getCurrentWatermarkInMs(self) -> int:  # noqa: N802
        return self.ms


class _Fired:
    def __init__(self, ms: int) -> None:
        self.ms = ms

    def getExpiryTimeInMs(self) -> int:  # noqa: N802
        return self.ms


def _processor() -> tuple[DetectorProcessor, _Handle]:
    cfg = AppConfig()
    proc = DetectorProcessor(ParamsResolver(cfg.detector_params(), tuple(cfg.overrides)))
    handle = _Handle()
    proc.init(handle)  # type: ignore[arg-type]
    return proc, handle


def _heap(t: int, offset: int) -> list[dict]:
    return frame(
        [
            {
                "kind": "metric",
                "event_ms": t,
                "src": "metrics:0",
                "offset": offset,
                "seq": 0,
                "tm_id": "tm-1",
                "host": "worker-1",
                "metric": "flink_taskmanager_Status_JVM_Memory_Heap_Used",
                "value": 5e8,
            }
        ]
    )


def test_a_deadline_that_moves_later_keeps_the_registered_timer() -> None:
    # Each timer call is a round trip to the JVM: a TaskManager's idle deadline moves with
    # every sample, and re-registering it would cost two calls per key per batch.
    proc, handle = _processor()
    key = ("idle_heap_growth", "tm:tm-1")
    t0 = 1_700_000_000_000
    for i in range(30):
        list(proc.handleInputRows(key, iter(_heap(t0 + i * 10_000, i)), _Clock(t0)))
    assert handle.calls == 1
    (first,) = handle.timers
    assert first == t0 + int(AppConfig().detector_params()["idle_heap_growth"].idle_ttl_s * 1000)
    # The kept timer fires before the real deadline: the entity stays, nothing is
    # alerted, and the next timer is the detector's deadline from its latest sample.
    out = list(proc.handleExpiredTimer(key, _Clock(first), _Fired(first)))
    assert all(r["status"] == "signal" for r in out)
    assert handle.state.value is not None
    idle_ms = first - t0
    assert handle.timers - {first} == {t0 + 290_000 + idle_ms}


def test_a_deadline_that_moves_earlier_replaces_the_timer() -> None:
    proc, handle = _processor()
    handle.state.value = (json.dumps({"_timer_ms": 10**15}),)
    handle.timers = {10**15}
    key = ("idle_heap_growth", "tm:tm-1")
    t0 = 1_700_000_000_000
    list(proc.handleInputRows(key, iter(_heap(t0, 1)), _Clock(t0)))
    (timer,) = handle.timers
    assert timer < 10**15
    assert _saved(handle)["_timer_ms"] == timer


def test_alerts_carry_the_job_name_from_its_state_lines() -> None:
    # Seen live: Flink logged `Job <name> (<id>) switched from state CREATED to RUNNING`
    # before the job's checkpoints expired, and the Slack message showed only the id.
    proc, handle = _processor()
    key = ("checkpoint_failures", "job:" + "a" * 32)
    t0 = 1_700_000_000_000
    base = {"src": "logs:0", "seq": 0, "job_id": "a" * 32}
    running = {
        **base,
        "kind": "job_state",
        "event_ms": t0,
        "offset": 1,
        "job_name": "orders-enrichment",
        "from_state": "CREATED",
        "to_state": "RUNNING",
    }
    out = list(proc.handleInputRows(key, iter(frame([running])), _Clock(t0)))
    assert out == []  # not this detector's event: nothing to say yet
    assert _saved(handle)["_job_name"] == "orders-enrichment"
    assert len(handle.timers) == 1  # the name is evicted like any state
    expiries = [
        {
            **base,
            "kind": "checkpoint_expired",
            "event_ms": t0 + i * 60_000,
            "offset": 2 + i,
            "checkpoint_id": 10 + i,
        }
        for i in range(1, 4)
    ]
    for e in expiries:
        out += proc.handleInputRows(key, iter(frame([e])), _Clock(t0))
    fired = [r for r in out if r["status"] == "firing"]
    assert len(fired) == 1 and fired[0]["job_name"] == "orders-enrichment"
    assert "orders-enrichment" in fired[0]["summary"]


JOB = "b" * 32


def _expiry(t0: int, i: int) -> dict:
    return {
        "src": "logs:0",
        "seq": 0,
        "job_id": JOB,
        "kind": "checkpoint_expired",
        "event_ms": t0 + i * 60_000,
        "offset": i,
        "checkpoint_id": 10 + i,
    }


def _saved(handle: _Handle) -> dict:
    """The saved header and state as one dict (``_seen`` left out)."""
    assert handle.state.value is not None
    head, _, body = handle.state.value[0].partition("\n")
    both = {**json.loads(head), **(json.loads(body) if body else {})}
    return {k: v for k, v in both.items() if k != "_seen"}


def test_an_event_that_raises_is_skipped_and_its_half_change_is_not_saved(monkeypatch) -> None:
    t0 = 1_700_000_000_000
    key = ("checkpoint_failures", "job:" + JOB)
    clean, clean_handle = _processor()
    list(clean.handleInputRows(key, iter(frame([_expiry(t0, 1), _expiry(t0, 3)])), _Clock(t0)))

    cls = REGISTRY["checkpoint_failures"]
    real = cls.on_event

    def poisoned(self, state, event):  # type: ignore[no-untyped-def]
        if event.checkpoint_id == 12:
            state.failed = "half-changed"  # then fails: a bug in the detector
            raise ValueError("cannot handle checkpoint 12")
        return real(self, state, event)

    monkeypatch.setattr(cls, "on_event", poisoned)
    proc, handle = _processor()
    rows = [_expiry(t0, i) for i in (1, 2, 3)]
    out = list(proc.handleInputRows(key, iter(frame(rows)), _Clock(t0)))
    (err,) = [r for r in out if r["status"] == "detector_error"]
    assert (
        err["entity"] == "job:" + JOB
        and "ValueError: cannot handle checkpoint 12" in err["summary"]
    )
    assert json.loads(err["evidence"]) == {"where": "on_event", "failures": 1, "dropped": False}
    # What is saved is what the other two events make, as if the bad one never came;
    # and the event after it succeeded, so no failure is carried over.
    assert _saved(handle) == _saved(clean_handle)


def _firing(proc: DetectorProcessor, key: tuple[str, str], t0: int) -> list:
    rows = [_expiry(t0, i) for i in (1, 2, 3, 4)]
    out = list(proc.handleInputRows(key, iter(frame(rows)), _Clock(t0)))
    assert [r["status"] for r in out if r["status"] == "firing"] == ["firing"]
    return out


def test_a_timer_that_always_raises_gives_the_entity_up_and_resolves_its_incident(
    monkeypatch,
) -> None:
    t0 = 1_700_000_000_000
    key = ("checkpoint_failures", "job:" + JOB)
    proc, handle = _processor()
    firing = [r for r in _firing(proc, key, t0) if r["status"] == "firing"][0]

    def broken(self, state, now_ms):  # type: ignore[no-untyped-def]
        state.firing = "half-changed"
        raise KeyError("window")

    monkeypatch.setattr(REGISTRY["checkpoint_failures"], "on_timer", broken)
    at = t0 + 3_600_000
    for n in (1, 2):
        out = list(proc.handleExpiredTimer(key, _Clock(at), _Fired(at)))
        assert [json.loads(r["evidence"])["failures"] for r in out] == [n]
        saved = _saved(handle)
        assert saved["firing"] is True and saved["_failures"] == n
        assert saved["_timer_ms"] == at + 60_000  # retried soon, not after the idle TTL
        at = saved["_timer_ms"]
    out = list(proc.handleExpiredTimer(key, _Clock(at), _Fired(at)))
    assert json.loads(out[0]["evidence"]) == {"where": "on_timer", "failures": 3, "dropped": True}
    (resolved,) = [r for r in out if r["status"] == "resolved"]
    assert resolved["alert_id"] == firing["alert_id"]
    assert "kept failing" in resolved["summary"]
    assert handle.state.value is None


def test_events_that_keep_raising_drop_the_entity_after_three_in_a_row(monkeypatch) -> None:
    t0 = 1_700_000_000_000
    key = ("checkpoint_failures", "job:" + JOB)
    proc, handle = _processor()
    _firing(proc, key, t0)

    def broken(self, state, event):  # type: ignore[no-untyped-def]
        raise RuntimeError("boom")

    monkeypatch.setattr(REGISTRY["checkpoint_failures"], "on_event", broken)
    out = list(proc.handleInputRows(key, iter(frame([_expiry(t0, 5)])), _Clock(t0)))
    assert _saved(handle)["_failures"] == 1
    out = list(proc.handleInputRows(key, iter(frame([_expiry(t0, 6), _expiry(t0, 7)])), _Clock(t0)))
    errors = [json.loads(r["evidence"]) for r in out if r["status"] == "detector_error"]
    assert [(e["failures"], e["dropped"]) for e in errors] == [(2, False), (3, True)]
    assert [r["status"] for r in out if r["status"] == "resolved"] == ["resolved"]
    assert handle.state.value is None


def test_while_the_entity_cap_is_hit_new_entities_are_refused_and_known_ones_go_on() -> None:
    cfg = AppConfig()
    proc = DetectorProcessor(ParamsResolver(cfg.detector_params(), tuple(cfg.overrides)), False)
    handle = _Handle()
    t0 = 1_700_000_000_000
    key = ("checkpoint_failures", "job:" + JOB)
    handle.state.value = (json.dumps({"entity": key[1], "job_id": JOB, "firing": False}),)
    proc.init(handle)  # type: ignore[arg-type]
    list(proc.handleInputRows(key, iter(frame([_expiry(t0, 1)])), _Clock(t0)))
    assert _saved(handle)["entity"] == key[1]  # known: watched as before
    fresh = _Handle()
    proc.init(fresh)  # type: ignore[arg-type]
    new_key = ("checkpoint_failures", "job:" + "c" * 32)
    out = list(proc.handleInputRows(new_key, iter(frame([_expiry(t0, 1)])), _Clock(t0)))
    assert [(r["status"], r["detector"], r["entity"]) for r in out] == [
        ("entity_refused", "checkpoint_failures", new_key[1])
    ]
    assert fresh.state.value is None and not fresh.timers


def test_each_event_is_replayed_at_most_once_however_many_raise(monkeypatch) -> None:
    # Rebuilding from the batch's start after every failure was quadratic: 2,000 events
    # with every second one raising cost half a million detector calls.
    t0 = 1_700_000_000_000
    key = ("checkpoint_failures", "job:" + JOB)
    cls = REGISTRY["checkpoint_failures"]
    real, calls = cls.on_event, {"n": 0}

    def flaky(self, state, event):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if event.checkpoint_id % 2:
            raise ValueError("odd checkpoint")
        return real(self, state, event)

    monkeypatch.setattr(cls, "on_event", flaky)
    proc, _handle = _processor()
    rows = [{**_expiry(t0, i), "event_ms": t0 + i * 1000} for i in range(1, 401)]
    out = list(proc.handleInputRows(key, iter(frame(rows)), _Clock(t0)))
    assert len([r for r in out if r["status"] == "detector_error"]) == 200
    assert calls["n"] <= 2 * len(rows)


def test_an_entity_dropped_in_a_batch_with_a_name_line_loses_its_series(monkeypatch) -> None:
    t0 = 1_700_000_000_000
    key = ("checkpoint_failures", "job:" + JOB)
    proc, handle = _processor()
    _firing(proc, key, t0)

    def broken(self, state, event):  # type: ignore[no-untyped-def]
        raise RuntimeError("boom")

    monkeypatch.setattr(REGISTRY["checkpoint_failures"], "on_event", broken)
    named = {
        **_expiry(t0, 9),
        "kind": "job_state",
        "job_name": "orders",
        "from_state": "RUNNING",
        "to_state": "RESTARTING",
        "checkpoint_id": None,
    }
    rows = [_expiry(t0, 5), _expiry(t0, 6), _expiry(t0, 7), named]
    out = list(proc.handleInputRows(key, iter(frame(rows)), _Clock(t0)))
    assert "signal_gone" in [r["status"] for r in out]


def test_a_saved_state_of_a_newer_version_is_dropped_its_incident_closed_and_reported() -> None:
    # A rollback after a release that changed a detector's state layout: the old code
    # cannot read what the new one saved. The entity starts over rather than the query
    # failing, and its open incident does not stay firing forever.
    t0 = 1_700_000_000_000
    key = ("checkpoint_failures", "job:" + JOB)
    proc, handle = _processor()
    _firing(proc, key, t0)
    saved = _saved(handle)
    handle.state.value = (json.dumps({**saved, "v": 99, "shape": "of the future"}),)
    out = list(proc.handleInputRows(key, iter(frame([_expiry(t0, 9)])), _Clock(t0)))
    (err,) = [r for r in out if r["status"] == "detector_error"]
    assert "StateError" in err["summary"] and "newer" in err["summary"]
    assert json.loads(err["evidence"]) == {"where": "load", "failures": 1, "dropped": True}
    (resolved,) = [r for r in out if r["status"] == "resolved"]
    assert "saved state is unreadable" in resolved["summary"]
    # The entity starts over with the batch's event, in the current layout.
    assert _saved(handle)["v"] == 2 and _saved(handle)["failed"] == {
        "19": [t0 + 540_000, "expired"]
    }


def test_a_value_saved_in_the_one_object_layout_carries_on() -> None:
    # Before the header and the state were split, the adapter's keys sat among the
    # detector's fields in one JSON object; checkpoints written then must keep working.
    t0 = 1_700_000_000_000
    key = ("checkpoint_failures", "job:" + JOB)
    proc, handle = _processor()
    firing = [r for r in _firing(proc, key, t0) if r["status"] == "firing"][0]
    handle.state.value = (json.dumps(_saved(handle)),)
    rows = [{**_expiry(t0, 40 + i), "kind": "checkpoint_completed"} for i in range(2)]
    later = [{**r, "event_ms": t0 + 3_600_000 + i} for i, r in enumerate(rows)]
    out = list(proc.handleInputRows(key, iter(frame(later)), _Clock(t0)))
    assert [(r["status"], r["alert_id"]) for r in out if r["alert_id"]] == [
        ("resolved", firing["alert_id"])
    ]
    assert "\n" in handle.state.value[0]  # saved again in the split layout


def test_a_timer_kept_from_an_earlier_batch_does_not_replay_a_passed_deadline() -> None:
    # The adapter keeps an earlier registered timer rather than moving it (a JVM round trip
    # per key per batch). When it fires, the detector's own deadline is what counts: before
    # the header kept it, checkpoint_creep re-judged a hanging checkpoint at the stale time,
    # resolved it, and paged again for the same hang.
    job = "c" * 32
    t0 = 1_700_000_000_000
    key = ("checkpoint_creep", "job:" + job)
    offset = iter(range(1, 1000))

    def ev(kind: str, t: int, cid: int | None = None, dur: int | None = None) -> dict:
        return {
            "src": "logs:0",
            "offset": next(offset),
            "seq": 0,
            "job_id": job,
            "kind": kind,
            "event_ms": t,
            "checkpoint_id": cid,
            "duration_ms": dur,
            "size_bytes": 1000 if dur else None,
        }

    at = [t0 + 60_000 * i for i in range(11)]
    first = [ev("checkpoint_triggered", at[9], 109)]
    for i in range(9):
        first[:0] = [ev("checkpoint_triggered", at[i], 100 + i)]
        first[1:1] = [ev("checkpoint_completed", at[i] + 3000, 100 + i, 3000)]
    batches = [
        sorted(first, key=lambda r: r["event_ms"]),
        [
            ev("checkpoint_completed", at[9] + 3000, 109, 3000),
            ev("checkpoint_triggered", at[10], 110),
        ],
        [ev("checkpoint_failed", at[10] + 400_000)],
        [ev("checkpoint_completed", at[10] + 500_000, 110, 500_000)],
        [ev("checkpoint_triggered", at[10] + 560_000, 111)],
        [ev("checkpoint_failed", at[10] + 900_000)],
    ]
    proc, handle = _processor()
    watermark, pages = 0, []
    for rows in batches:
        out = list(proc.handleInputRows(key, iter(frame(rows)), _Clock(watermark)))
        for t in sorted(t for t in handle.timers if t <= watermark):  # as Spark: rows, then timers
            handle.timers.discard(t)
            out += proc.handleExpiredTimer(key, _Clock(watermark), _Fired(t))
        pages += [(r["status"], r["alert_id"]) for r in out if r["alert_id"]]
        watermark = max(r["event_ms"] for r in rows) - 30_000
    assert [status for status, _ in pages] == ["firing"]
