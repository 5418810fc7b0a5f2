"""What an entity keeps between micro-batches (``streaming/entity.py``): its saved value."""

from __future__ import annotations

import pytest

from detectors import AlertStatus
from detectors.base import DetectorState
from detectors.checkpoint_failures import CheckpointFailures
from streaming.clock import Lag
from streaming.entity import (
    LAG_WINDOW_MS,
    Header,
    close_incident,
    parse_saved,
    saved_text,
    signature,
)


def test_a_saved_value_reads_back_as_its_header_and_each_detectors_state() -> None:
    header = Header(seen={"logs/0": [41, 0, 1_000]}, name="orders", newest_ms=1_000)
    header.due["checkpoint_failures"] = 5_000
    header.held = [['{"kind":"metric","event_ms":2000}', 2_050]]  # waits for a catch-up
    texts = {"tm_lost": '{"v":1}', "checkpoint_failures": '{"v":2,"n":3}'}
    text = saved_text(header, texts)
    # The header first, then a detector a line, sorted: the same value saves the same text.
    assert text.splitlines()[1:] == ['checkpoint_failures\t{"v":2,"n":3}', 'tm_lost\t{"v":1}']
    again, read = parse_saved(text)
    assert again == header and read == texts
    assert parse_saved(None) == (Header(), {})
    assert parse_saved("") == (Header(), {})
    with pytest.raises(ValueError):
        parse_saved("not json\nx\t{}")


def test_the_header_leaves_empty_parts_out_and_keeps_its_short_keys() -> None:
    header = Header(newest_ms=7, failures={"tm_lost": 2})
    assert header.text() == '{"v":2,"t":7,"fail":{"tm_lost":2}}'
    # A newer layout's keys are ignored.
    assert Header.parse('{"v":3,"t":7,"fail":{"tm_lost":2},"new":1}') == header
    header.forget("tm_lost")
    assert header.text() == '{"v":2,"t":7}'


def test_the_lag_is_the_largest_of_the_last_two_windows() -> None:
    header = Header()
    assert header.lag_ms() is None
    header.note_lag(0, 800, 100)
    header.note_lag(10, 300, 400)
    assert header.lag_ms() == Lag(frontier_ms=400, bus_ms=800)
    header.note_lag(LAG_WINDOW_MS, 200, 0)  # the next window: the one before still counts
    assert header.lag_ms() == Lag(400, 800)
    header.note_lag(2 * LAG_WINDOW_MS, 100, -50)
    assert header.lag_ms() == Lag(0, 200)
    header.note_lag(LAG_WINDOW_MS + 5, 900, 700)  # a late record of the window before
    assert header.lag_ms() == Lag(700, 900)
    header.note_lag(9 * LAG_WINDOW_MS, 50, -20)  # after a gap, the old windows are gone
    assert header.lag_ms() == Lag(-20, 50)


def test_a_lag_saved_by_an_earlier_release_bounds_both() -> None:
    # Three numbers: the bus lag alone, which stands for both (the safe side: what a
    # record trails the records' frontier by is as a rule the smaller).
    header = Header.parse('{"v":2,"t":7,"lag":[0,800,300]}')
    assert header.lag_ms() == Lag(800, 800)
    header.note_lag(10, 100, 50)
    assert header.lag_ms() == Lag(800, 800)
    header.note_lag(LAG_WINDOW_MS, 100, 50)
    assert header.lag == [LAG_WINDOW_MS, 100, 800, 50, 800]


def test_a_signature_changes_with_the_run_or_the_values_not_their_order() -> None:
    assert signature("r1", {"a": 1.0, "b": 2.0}) == signature("r1", {"b": 2.0, "a": 1.0})
    assert signature("r1", {"a": 1.0}) != signature("r1", {"a": 1.5})
    assert signature("r1", {"a": 1.0}) != signature("r2", {"a": 1.0})
    assert signature("r1", {}).startswith("r1:")


def test_an_open_incident_given_up_is_resolved_even_from_a_state_it_cannot_load() -> None:
    detector = CheckpointFailures(CheckpointFailures.params_model())
    assert close_incident(detector, None, 5_000, "state damaged") == []
    quiet = DetectorState(entity="job:7f")
    assert close_incident(detector, quiet, 5_000, "state damaged") == []
    # A saved state of a newer layout: the fields every state has are enough.
    saved = {"v": 99, "entity": "job:7f", "job_id": "7f", "firing": True,
             "incident_start_ms": 1_000, "shape": "new"}  # fmt: skip
    (alert,) = close_incident(detector, saved, 5_000, "state damaged")
    assert (alert.status, alert.entity, alert.event_time_ms) == (
        AlertStatus.RESOLVED,
        "job:7f",
        5_000,
    )
    assert "stopped watching this entity (state damaged)" in alert.summary
    assert close_incident(detector, {"entity": 3, "firing": True}, 5_000, "x") == []


def test_every_crash_a_cluster_state_keys_is_resolved_when_flinkwatch_gives_it_up() -> None:
    """Two JobManagers crashed: their incidents live in the state's keys, not in its own."""
    from detectors.jm_k8s_watch_crash import JmK8sWatchCrash
    from detectors.model import Event
    from detectors.testing import drive

    too_old = "io.fabric8.kubernetes.client.KubernetesClientException: too old resource version"
    det = JmK8sWatchCrash(JmK8sWatchCrash.params_model())
    message = f"Fatal error occurred in ResourceManager.\n{too_old}"
    crashes = [
        Event(kind="fatal_error", time_ms=t, reason=too_old, message=message, host=host)
        for t, host in ((1_000, "jm-0"), (2_000, "jm-1"))
    ]
    state, fired = drive(det, crashes)
    assert state is not None and not state.firing
    assert [a.status for a in fired] == [AlertStatus.FIRING, AlertStatus.FIRING]

    closed = close_incident(det, state, 9_000, "it kept failing")

    assert [(a.status, a.alert_id, a.host) for a in closed] == [
        (AlertStatus.RESOLVED, a.alert_id, a.host) for a in fired
    ]
    assert all("stopped watching this entity (it kept failing)" in a.summary for a in closed)
    # The state given up is the caller's to drop; the crashes in it are not touched.
    assert len(state.crashes) == 2


def test_a_taskmanager_keeps_the_spelling_its_logs_gave_over_any_metric_label() -> None:
    header = Header()
    header.spell_tm("localhost:40003_6cf67b", logged=False)  # Prometheus
    header.spell_tm("localhost-40003-6cf67b", logged=False)  # StatsD: more punctuation left
    assert header.tm == "localhost-40003-6cf67b"
    header.spell_tm("localhost:40003-6cf67b", logged=True)
    header.spell_tm("localhost:40003_6cf67b", logged=False)
    header.spell_tm(None, logged=True)
    assert header.tm == "localhost:40003-6cf67b"
    # Saved and read back with its rank: a later batch's metric label does not take it over.
    again = Header.parse(header.text())
    assert again == header and '"tm":"localhost:40003-6cf67b"' in header.text()
    again.spell_tm("localhost-40003-6cf67b", logged=False)
    assert again.tm == "localhost:40003-6cf67b"


def test_the_lag_windows_take_the_configured_width() -> None:
    # spark.lag_window_s: 300 keeps a slow moment for 5-10 minutes, not one to two.
    header = Header()
    header.note_lag(0, 5_000, 4_000, 300_000)
    header.note_lag(4 * 60_000, 100, 50, 300_000)
    assert header.lag_ms() == Lag(4_000, 5_000)  # the same five-minute window
    short = Header()
    short.note_lag(0, 5_000, 4_000)
    short.note_lag(4 * 60_000, 100, 50)
    assert short.lag_ms() == Lag(50, 100)  # LAG_WINDOW_MS: gone after two minutes
