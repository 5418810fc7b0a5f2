"""The ledger's SQLite file: its schema, older files brought up to it, one write lock.

The store, its queries and the sinks' memory (:mod:`sinks.ledger.store`,
:mod:`~sinks.ledger.queries`, :mod:`~sinks.ledger.memory`) share one connection through
:class:`LedgerFile`: the batch thread records while the dispatcher threads deliver, so
every write is one transaction under one lock (:meth:`LedgerFile._tx`).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from detectors.correlation import IncidentView
from detectors.model import FlinkwatchError

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS transitions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL UNIQUE,
    alert_id TEXT NOT NULL,
    status TEXT NOT NULL,
    batch_id INTEGER NOT NULL,
    silenced_by TEXT,
    alert TEXT NOT NULL,
    recorded_ms INTEGER NOT NULL,
    incident_id TEXT,
    incident TEXT,
    frontier_ms INTEGER,
    run TEXT
);
CREATE INDEX IF NOT EXISTS transitions_alert ON transitions (alert_id, seq);
CREATE TABLE IF NOT EXISTS deliveries (
    sink TEXT NOT NULL,
    seq INTEGER NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    updated_ms INTEGER NOT NULL,
    PRIMARY KEY (sink, seq)
);
CREATE INDEX IF NOT EXISTS deliveries_open ON deliveries (sink, state, seq);
CREATE TABLE IF NOT EXISTS ledger_meta (
    key TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS sink_memory (
    sink TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (sink, key)
);
"""

#: SQLite's result code for a full volume (``sqlite3.SQLITE_FULL`` from Python 3.11 on).
_SQLITE_FULL = 13


def now_ms() -> int:
    """Wall-clock epoch ms: the ledger's bookkeeping clock unless one is injected."""
    return int(time.time() * 1000)


def incident_of(text: str | None) -> IncidentView | None:
    """An incident as the ledger stored it (None: recorded without correlation)."""
    return IncidentView.model_validate_json(text) if text else None


class LedgerError(FlinkwatchError):
    """The ledger could not be written: a full volume, a read-only file, a damaged database.

    The write's transaction was rolled back whole: nothing of it is recorded.

    Attributes:
        path: The ledger file.
        full: The volume is full (SQLite's ``SQLITE_FULL``: ``ENOSPC`` underneath).
    """

    # Named by the path callers import it from: a failed query's log line quotes it.
    __module__ = "sinks.ledger"

    def __init__(self, path: Path, exc: sqlite3.Error) -> None:
        self.path = path
        self.full = getattr(exc, "sqlite_errorcode", None) == _SQLITE_FULL or (
            "disk is full" in str(exc)
        )
        hint = f"; free space on the volume of {path.parent}" if self.full else ""
        super().__init__(f"alert ledger {path}: {exc}{hint}")


class LedgerFile:
    """One SQLite ledger file, opened (or created) and brought up to the current schema.

    Thread-safe: every read and write holds one re-entrant lock.
    """

    def __init__(self, path: Path, clock: Callable[[], int] = now_ms) -> None:
        """Open (or create) the ledger file.

        Args:
            path: The SQLite file.
            clock: Wall-clock epoch ms, for bookkeeping only (injected in tests).
        """
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._clock = clock
        self._lock = threading.RLock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
        # WAL: the dispatcher reads while a batch writes. FULL: a transition the batch
        # was told is recorded survives a power cut too, not only a killed process.
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)
        self._migrate()

    def _migrate(self) -> None:
        # Older ledgers lack later columns: add them, empty.
        cols = {r[1] for r in self._db.execute("PRAGMA table_info(transitions)").fetchall()}
        added = (
            ("incident_id", "TEXT"),
            ("incident", "TEXT"),
            ("frontier_ms", "INTEGER"),
            ("run", "TEXT"),
        )
        for col, kind in added:
            if col not in cols:
                self._db.execute(f"ALTER TABLE transitions ADD COLUMN {col} {kind}")
        self._db.execute(
            "CREATE INDEX IF NOT EXISTS transitions_batch ON transitions (run, batch_id)"
        )
        self._db.execute(
            "CREATE INDEX IF NOT EXISTS transitions_incident ON transitions (incident_id, seq)"
        )

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            self._db.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; a failure rolls it back whole and raises :class:`LedgerError`."""
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    yield self._db
                    self._db.execute("COMMIT")
                except BaseException:
                    # A COMMIT that failed (SQLITE_FULL) leaves the transaction open.
                    self._rollback()
                    raise
            except sqlite3.Error as exc:
                raise LedgerError(self.path, exc) from exc

    def _rollback(self) -> None:
        if not self._db.in_transaction:
            return
        try:
            self._db.execute("ROLLBACK")
        except sqlite3.Error as exc:  # the error being raised says more than this one
            log.warning("alert ledger %s: rollback failed: %s", self.path, exc)
