"""Silences added from the command line, kept beside the ledger so they survive restarts.

``flinkwatch silence add`` is how an SRE silences a noisy job in the middle of the night
(as ``amtool silence add`` does for Alertmanager): no YAML to edit, no ConfigMap to
re-apply. The silences live in ``<state_dir>/silences.sqlite``; the running job reads the
ones not yet over once per micro-batch, beside the config file's. Unlike the config's,
which are judged at the alert's event time (a replay silences what the live job would
have), these are judged when the transition is recorded, as Alertmanager judges its own
when it notifies: "silence this job for an hour" means no page from now on, whatever the
event time of what is recorded next (a few seconds earlier, or a backlog's).

SQLite because the command and the running job are two processes writing and reading
the same few rows: its locking makes each add and expire whole.
"""

from __future__ import annotations

import datetime as dt
import json
import secrets
import sqlite3
import threading
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from conf.silences import Matchers, Silence
from detectors.model import FlinkwatchError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS silences (
    id TEXT PRIMARY KEY,
    matchers TEXT NOT NULL,
    given TEXT NOT NULL,
    starts_ms INTEGER NOT NULL,
    ends_ms INTEGER NOT NULL,
    comment TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    expired_ms INTEGER
)
"""


_COLUMNS = "id, matchers, given, starts_ms, ends_ms, comment, created_by, created_ms, expired_ms"


class SilenceNotFoundError(FlinkwatchError):
    """No silence has that id."""


class StoredSilence(BaseModel):
    """A silence from the command line, as stored.

    Attributes:
        id: Its id (``s-`` and 8 hex digits), what ``silence expire`` takes.
        matchers: Which alerts it covers.
        given: The matchers as they were typed (``job_name="pay-etl"``), for people.
        starts_ms: From when (epoch ms, alert event time).
        ends_ms: Until when; an expired silence ends when it was expired.
        comment: Why (required: the next person on call reads it).
        created_by: Who added it.
        created_ms: When it was added.
        expired_ms: When it was expired by hand (``None``: not).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    matchers: Matchers
    given: tuple[str, ...]
    starts_ms: int
    ends_ms: int
    comment: str
    created_by: str
    created_ms: int
    expired_ms: int | None = None

    def state(self, now_ms: int) -> str:
        """``pending`` (starts later), ``active`` or ``expired``."""
        if now_ms >= self.ends_ms:
            return "expired"
        return "pending" if now_ms < self.starts_ms else "active"

    def silence(self) -> Silence:
        """As the config's silences are judged (its name is its id)."""
        return Silence(
            name=self.id,
            matchers=self.matchers,
            starts_at=_utc(self.starts_ms),
            ends_at=_utc(self.ends_ms),
            comment=self.comment,
        )


def new_silence_id() -> str:
    """A new silence id (``s-`` and 8 hex digits)."""
    return f"s-{secrets.token_hex(4)}"


def _utc(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)


class SilenceStore:
    """The command line's silences in ``path`` (SQLite), created on first use.

    Args:
        path: The store's file (``output.silences_path``).
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # A writer holds the lock for microseconds; the job and the command wait for it.
        # The job builds the store on its main thread and reads it in Spark's
        # foreachBatch thread: one connection, shared, its uses serialised by _lock.
        self._db = sqlite3.connect(
            str(self.path), timeout=10, isolation_level=None, check_same_thread=False
        )
        self._lock = threading.Lock()
        self._db.execute(_SCHEMA)

    def add(
        self,
        matchers: Matchers,
        given: tuple[str, ...],
        starts_ms: int,
        ends_ms: int,
        comment: str,
        created_by: str,
        now_ms: int,
        silence_id: str | None = None,
    ) -> StoredSilence:
        """Store a new silence and return it.

        Args:
            matchers: Which alerts it covers.
            given: The matchers as typed.
            starts_ms: From when.
            ends_ms: Until when.
            comment: Why.
            created_by: Who.
            now_ms: Now.
            silence_id: Its id, chosen and recorded elsewhere first (a Slack press, in
                the ledger); adding again under an id the store has adds nothing and
                returns the stored silence. ``None``: a new id.

        Raises:
            ValueError: it ends before it starts, or has no comment.
        """
        if ends_ms <= starts_ms:
            msg = "a silence must end after it starts"
            raise ValueError(msg)
        if not comment.strip():
            msg = "say why (--comment): the next person on call reads it"
            raise ValueError(msg)
        s = StoredSilence(
            id=silence_id or new_silence_id(),
            matchers=matchers,
            given=given,
            starts_ms=starts_ms,
            ends_ms=ends_ms,
            comment=comment.strip(),
            created_by=created_by,
            created_ms=now_ms,
        )
        # A new id that is taken already is a clash (IntegrityError), a given one a repeat.
        verb = "INSERT" if silence_id is None else "INSERT OR IGNORE"
        with self._lock:
            added = self._db.execute(
                f"{verb} INTO silences (id, matchers, given, starts_ms, ends_ms, "  # noqa: S608
                "comment, created_by, created_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    s.id,
                    s.matchers.model_dump_json(exclude_none=True),
                    json.dumps(list(s.given)),
                    s.starts_ms,
                    s.ends_ms,
                    s.comment,
                    s.created_by,
                    s.created_ms,
                ),
            ).rowcount
        if not added:
            (s,) = self._select("WHERE id = ?", (s.id,))
        return s

    def expire(self, silence_id: str, now_ms: int) -> StoredSilence:
        """End a silence now (one already over stays as it was).

        Raises:
            SilenceNotFoundError: no silence has that id.
        """
        with self._lock:
            self._db.execute(
                "UPDATE silences SET ends_ms = ?, expired_ms = ? WHERE id = ? AND ends_ms > ?",
                (now_ms, now_ms, silence_id, now_ms),
            )
        found = self._select("WHERE id = ?", (silence_id,))
        if not found:
            msg = f"no silence {silence_id!r} (flinkwatch silence list --all)"
            raise SilenceNotFoundError(msg)
        return found[0]

    def listing(self, now_ms: int, *, expired: bool = False) -> list[StoredSilence]:
        """Silences not yet over (and, with ``expired``, those over), oldest first."""
        if expired:
            return self._select("", ())
        return self._select("WHERE ends_ms > ?", (now_ms,))

    def in_force(self, now_ms: int) -> tuple[Silence, ...]:
        """What the job judges transitions by (at ``now_ms``): the silences not over."""
        return tuple(s.silence() for s in self._select("WHERE ends_ms > ?", (now_ms,)))

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()

    def _select(self, where: str, args: tuple[object, ...]) -> list[StoredSilence]:
        # ``where`` is one of this class's own fixed clauses; values are bound.
        query = f"SELECT {_COLUMNS} FROM silences {where} ORDER BY created_ms, id"  # noqa: S608
        with self._lock:
            rows = self._db.execute(query, args).fetchall()
        return [
            StoredSilence(
                id=r[0],
                matchers=Matchers.model_validate_json(r[1]),
                given=tuple(json.loads(r[2])),
                starts_ms=r[3],
                ends_ms=r[4],
                comment=r[5],
                created_by=r[6],
                created_ms=r[7],
                expired_ms=r[8],
            )
            for r in rows
        ]
