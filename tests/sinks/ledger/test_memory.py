"""What the sinks may ask of the ledger (SinkMemory), on the ledger itself."""

from __future__ import annotations

from pathlib import Path

from sinks import AlertLedger
from sinks.dispatch import deliver
from sinks.ledger import SinkMemory
from tests.sinks.ledger.helpers import Sink, alert


def test_a_sink_keeps_its_facts_apart_from_other_sinks_and_changes_them_at_once(
    tmp_path: Path,
) -> None:
    memory: SinkMemory = AlertLedger(tmp_path / "l.sqlite")
    memory.remember("slack", "inc", {"ts": "1"})
    assert memory.recall("slack", "inc") == {"ts": "1"}
    assert memory.recall("slack:2", "inc") is None
    before, after = memory.amend("slack", "inc", lambda v: {**(v or {}), "acts": 1})
    assert (before, after) == ({"ts": "1"}, {"ts": "1", "acts": 1})
    memory.forget("slack", "inc")
    assert memory.recall("slack", "inc") is None


def test_a_sink_sees_its_oldest_open_delivery_and_what_it_last_delivered(tmp_path: Path) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    memory: SinkMemory = ledger
    sink = Sink()
    assert memory.first_open("slack") is None
    [a, b] = ledger.record(0, [alert("a"), alert("b")], [sink])
    assert memory.first_open("slack") == a.seq
    assert memory.last_delivered("slack", "a") is None
    deliver(ledger, sink)
    assert memory.first_open("slack") is None
    last = memory.last_delivered("slack", "b")
    assert last is not None and last.key == b.key
