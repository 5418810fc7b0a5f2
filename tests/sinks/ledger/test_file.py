"""The ledger's SQLite file: older files brought up to the schema, and a failed write rolled back whole."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from sinks.ledger import AlertLedger, LedgerError
from sinks.ledger.file import LedgerFile, incident_of
from tests.sinks.ledger.helpers import Sink, alert

#: The transitions table as the first ledgers wrote it: no incident, frontier or run.
_FIRST_TRANSITIONS = """
CREATE TABLE transitions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL UNIQUE,
    alert_id TEXT NOT NULL,
    status TEXT NOT NULL,
    batch_id INTEGER NOT NULL,
    silenced_by TEXT,
    alert TEXT NOT NULL,
    recorded_ms INTEGER NOT NULL
);
"""


def columns(path: Path) -> set[str]:
    with sqlite3.connect(path) as db:
        return {r[1] for r in db.execute("PRAGMA table_info(transitions)")}


def test_an_older_file_gets_the_later_columns_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    with sqlite3.connect(path) as db:
        db.executescript(_FIRST_TRANSITIONS)
        db.execute(
            "INSERT INTO transitions (key, alert_id, status, batch_id, alert, recorded_ms)"
            " VALUES ('a:firing', 'a', 'firing', 0, ?, 1)",
            (alert("a").model_dump_json(),),
        )
    LedgerFile(path).close()
    assert {"incident_id", "incident", "frontier_ms", "run"} <= columns(path)
    ledger = AlertLedger(path)
    assert ledger.record(0, [alert("a")], [Sink()]) == []  # the old row still counts
    assert [t.key for t in ledger.record(1, [alert("b")], [Sink()])] == ["b:firing"]


def test_opening_a_file_twice_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    LedgerFile(path).close()
    before = columns(path)
    LedgerFile(path).close()
    assert columns(path) == before


def test_a_failed_write_is_rolled_back_whole_and_named_by_its_file(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    ledger = LedgerFile(path)
    with pytest.raises(LedgerError, match=f"alert ledger {path}") as err:
        with ledger._tx() as db:
            db.execute("INSERT INTO ledger_meta (key, value) VALUES ('x', 1)")
            db.execute("INSERT INTO ledger_meta (key, value) VALUES ('x', 2)")  # not unique
    assert not err.value.full
    with ledger._tx() as db:
        assert db.execute("SELECT COUNT(*) FROM ledger_meta").fetchone() == (0,)


def test_a_full_volume_is_told_apart_and_says_where_to_free_space(tmp_path: Path) -> None:
    err = LedgerError(tmp_path / "l.sqlite", sqlite3.OperationalError("database or disk is full"))
    assert err.full
    assert str(err).endswith(f"; free space on the volume of {tmp_path}")
    assert type(err).__module__ == "sinks.ledger"


def test_an_incident_recorded_without_correlation_reads_back_as_none() -> None:
    assert incident_of(None) is None
    assert incident_of("") is None
