"""What a sink may keep in the ledger and read back: its memory, behind a narrow protocol.

A sink that keeps state across sends and restarts (the Slack message of an incident,
a search left half way, a channel's id, what was done to an incident from Slack)
keeps it here, in the ledger's file, so it commits with the deliveries it belongs to.
The sinks receive :class:`SinkMemory`, not the ledger: they can read and keep their
facts and see what was delivered to them, and cannot record, judge or deliver.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol

from detectors.model import Alert
from sinks.base import Transition
from sinks.ledger.file import LedgerFile

#: Changes a kept fact (None: there is none) into the one to keep.
Change = Callable[[dict[str, Any] | None], dict[str, Any]]


class SinkMemory(Protocol):
    """A sink's small facts, kept by sink name, and what the ledger delivered to it.

    :class:`~sinks.ledger.AlertLedger` is one; a test may hand a sink a dict-backed fake.
    """

    def recall(self, sink: str, key: str) -> dict[str, Any] | None:
        """A fact kept by :meth:`remember`, or None."""
        ...

    def remember(self, sink: str, key: str, value: dict[str, Any]) -> None:
        """Keep a small fact for a sink (the Slack message of an incident, say)."""
        ...

    def forget(self, sink: str, key: str) -> None:
        """Drop a fact kept by :meth:`remember` (nothing if there is none)."""
        ...

    def amend(
        self, sink: str, key: str, change: Change
    ) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        """Read, change and keep a fact at once; the fact before and after."""
        ...

    def last_delivered(self, sink: str, incident_id: str) -> Transition | None:
        """The newest transition of an incident the sink has: what its message shows."""
        ...

    def first_open(self, sink: str) -> int | None:
        """The ``seq`` of the oldest transition still to be delivered to the sink (None: none)."""
        ...


class ReceiverHistory(Protocol):
    """What a receiver that is told an alert's whole state needs of the ledger (Alertmanager)."""

    def previous(self, t: Transition) -> Alert | None:
        """The alert's transition recorded just before ``t`` (None: ``t`` is its first)."""
        ...

    def standing(self, sink: str) -> list[Transition]:
        """What ``sink`` was last told of each open incident with nothing on its way to it."""
        ...


class MemoryTable(LedgerFile):
    """The ``sink_memory`` table: small JSON facts by (sink, key)."""

    def remember(self, sink: str, key: str, value: dict[str, Any]) -> None:
        """Keep a small fact for a sink (the Slack message of an incident, say)."""
        with self._tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO sink_memory (sink, key, value) VALUES (?, ?, ?)",
                (sink, key, json.dumps(value)),
            )

    def amend(
        self, sink: str, key: str, change: Change
    ) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        """Read, change and keep a fact in one write transaction: concurrent changes queue.

        Two people pressing the same button at once (or Slack sending a press twice) are
        two calls; the second sees what the first kept. ``change`` runs inside the
        transaction: if it raises, nothing is kept.

        Returns:
            The fact before and after.
        """
        with self._tx() as db:
            row = db.execute(
                "SELECT value FROM sink_memory WHERE sink = ? AND key = ?", (sink, key)
            ).fetchone()
            before = json.loads(row[0]) if row else None
            after = change(before)
            db.execute(
                "INSERT OR REPLACE INTO sink_memory (sink, key, value) VALUES (?, ?, ?)",
                (sink, key, json.dumps(after)),
            )
        return before, after

    def forget(self, sink: str, key: str) -> None:
        """Drop a fact kept by :meth:`remember` (nothing if there is none)."""
        with self._tx() as db:
            db.execute("DELETE FROM sink_memory WHERE sink = ? AND key = ?", (sink, key))

    def recall(self, sink: str, key: str) -> dict[str, Any] | None:
        """A fact kept by :meth:`remember`, or None."""
        with self._lock:
            row = self._db.execute(
                "SELECT value FROM sink_memory WHERE sink = ? AND key = ?", (sink, key)
            ).fetchone()
        return json.loads(row[0]) if row else None
