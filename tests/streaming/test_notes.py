"""What the runner tells besides alerts (``streaming/notes.py``): whom a note is about, and why.

How each note becomes a row of the detect query and back: ``test_rows.py``.
"""

from __future__ import annotations

from detectors.base import DetectorState
from streaming.notes import About, EntityCount, RowKind, SignalGone, failure, where


def _raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:  # noqa: BLE001 - the test wants it whatever it is
        return caught


def test_where_names_the_type_the_message_and_the_innermost_frame() -> None:
    text = where(_raised(KeyError("ts")))
    assert text.startswith("KeyError: 'ts' at test_notes.py:")
    assert where(ValueError("never raised")) == "ValueError: never raised"
    assert len(where(ValueError("x" * 1_000))) == len("ValueError: ") + 300


def test_about_takes_who_the_entity_is_from_the_detectors_state() -> None:
    state = DetectorState(
        entity="tm:orders-taskmanager-1-2", job_id="7f", tm_id="orders-taskmanager-1-2",
        host="10.0.0.7", last_event_ms=1_700_000_000_000,
    )  # fmt: skip
    about = About.of("tm_lost", state.entity, state)
    assert about.event_ms == 1_700_000_000_000
    assert about.labels() == {"job_id": "7f", "tm_id": "orders-taskmanager-1-2", "host": "10.0.0.7"}
    assert About.of("tm_lost", "cluster", None) == About("tm_lost", "cluster")
    assert About("tm_lost", "cluster").labels() == {}


def test_a_failure_says_where_it_raised_how_often_and_whether_the_entity_went() -> None:
    note = failure(
        "checkpoint_creep",
        "job:7f",
        None,
        _raised(ZeroDivisionError("x")),
        "on_timer",
        3,
        dropped=True,
    )
    assert note.kind is RowKind.DETECTOR_ERROR
    assert note.about == About("checkpoint_creep", "job:7f")
    data = note.data()
    assert (data["where"], data["failures"], data["dropped"]) == ("on_timer", 3, True)
    assert data["error"].startswith("ZeroDivisionError: x at test_notes.py:")


def test_a_shards_count_is_about_the_shard_and_a_bare_note_carries_nothing() -> None:
    count = EntityCount("7", 1234, due_ms=5_000)
    assert count.about == About("", "shard:7")
    assert count.data() == {"entities": 1234, "due_ms": 5_000}
    gone = SignalGone(About("checkpoint_creep", "job:7f"))
    assert (gone.kind, gone.data()) == (RowKind.SIGNAL_GONE, None)
