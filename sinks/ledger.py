"""The alert ledger: every transition recorded once, delivered to each sink once.

A SQLite file on the driver. The detect query's ``foreachBatch`` records the batch's
transitions (:meth:`AlertLedger.record`) before it returns, that is before Spark
commits the batch. If the process dies before the commit, Spark replays the batch
and the ledger, keyed by :func:`~sinks.base.transition_key`, adds nothing twice.

A batch cut short after it was recorded (a reload stops the queries mid-batch) is run
again by Spark from the state before it, possibly with new settings, and may not raise
what the first run did: an incident the first run opened and the second did not is one
no detector holds, so the ledger closes it (see :meth:`AlertLedger.record`, ``run``). A
resolve is final: nothing of an incident after it opens it again.

Delivery is a second, independent step per sink: ``pending`` → ``sending`` →
``delivered`` (or ``failed``; for a notifying sink also ``silenced``, or ``stale`` when the
transition was already old when it was recorded, see :meth:`AlertLedger.record`). ``sending`` is
committed before the send starts, so after a crash the ledger knows which sends may
have happened and asks the sink (:meth:`~sinks.base.DeliverySink.confirm`) instead
of guessing. A send that fails without saying whether it arrived
(:class:`~sinks.base.AmbiguousDeliveryError`) is the same case without the crash: it
stays ``sending``, with the error noted, and is asked about before any resend. A send
that surely did not arrive (:class:`~sinks.base.RetryableDeliveryError`) goes back to
``pending``.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from detectors.correlation import IncidentView
from detectors.model import Alert, AlertStatus, FlinkwatchError
from sinks.base import (
    AmbiguousDeliveryError,
    DeliverySink,
    PermanentDeliveryError,
    RetryableDeliveryError,
    Transition,
    transition_key,
)

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

#: Delivery states that still need work.
OPEN_STATES = ("pending", "sending")
#: Every delivery state.
DELIVERY_STATES = ("pending", "sending", "delivered", "failed", "silenced", "stale", "unrouted")
#: Delivery states of a transition that was (or is being) sent: later ones follow it.
_PAGED_STATES = ("pending", "sending", "delivered", "failed")
#: SQLite's result code for a full volume (``sqlite3.SQLITE_FULL`` from Python 3.11 on).
_SQLITE_FULL = 13
#: How far detection's newest event time moves before the ledger writes it down again
#: (it only needs to tell "an hour behind" from "up to date").
_FRONTIER_STEP_MS = 60_000


@dataclass(frozen=True, slots=True)
class Delivery:
    """One transition's delivery to one sink, as :meth:`AlertLedger.deliveries` lists it.

    Attributes:
        seq: The transition's position in the ledger.
        sink: The sink's name.
        state: One of :data:`DELIVERY_STATES`.
        attempts: Sends started so far.
        error: The last failure (or why it is still open), if any.
        updated_ms: Wall-clock time of the last change (epoch ms).
        key: The transition's key (see :func:`~sinks.base.transition_key`).
        alert: The alert.
    """

    seq: int
    sink: str
    state: str
    attempts: int
    error: str | None
    updated_ms: int
    key: str
    alert: Alert


Silencer = Callable[[Alert], str | None]
#: Puts a new transition into its incident (see :class:`~detectors.correlation.Correlator`).
Correlate = Callable[[Alert], IncidentView]


def _incident(text: str | None) -> IncidentView | None:
    return IncidentView.model_validate_json(text) if text else None


def _now_ms() -> int:
    return int(time.time() * 1000)


class LedgerError(FlinkwatchError):
    """The ledger could not be written: a full volume, a read-only file, a damaged database.

    The write's transaction was rolled back whole: nothing of it is recorded.

    Attributes:
        path: The ledger file.
        full: The volume is full (SQLite's ``SQLITE_FULL``: ``ENOSPC`` underneath).
    """

    def __init__(self, path: Path, exc: sqlite3.Error) -> None:
        self.path = path
        self.full = getattr(exc, "sqlite_errorcode", None) == _SQLITE_FULL or (
            "disk is full" in str(exc)
        )
        hint = f"; free space on the volume of {path.parent}" if self.full else ""
        super().__init__(f"alert ledger {path}: {exc}{hint}")


class AlertLedger:
    """Durable record of alert transitions and of their delivery to each sink.

    Thread-safe: the batch thread records, the dispatcher thread delivers.
    """

    def __init__(self, path: Path, clock: Callable[[], int] = _now_ms) -> None:
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
        #: Outcomes of sends, by (sink, outcome), for the metrics.
        self.outcomes: Counter[tuple[str, str]] = Counter()
        row = self._db.execute("SELECT value FROM ledger_meta WHERE key = 'frontier_ms'").fetchone()
        #: The newest event time detection has output (see :meth:`record`), and as written.
        self._frontier: int | None = int(row[0]) if row else None
        self._frontier_saved = self._frontier
        #: Whether an incident withheld while flinkwatch was behind may wait for its page.
        self._held = True

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

    # --- recording (the batch thread) ----------------------------------------------

    def record(
        self,
        batch_id: int,
        alerts: Sequence[Alert],
        sinks: Sequence[DeliverySink],
        silencer: Silencer | None = None,
        correlate: Correlate | None = None,
        max_age_ms: int | None = None,
        frontier_ms: int | None = None,
        run: str | None = None,
    ) -> list[Transition]:
        """Record a batch's transitions and queue each for every sink, in one transaction.

        A transition already recorded (a replayed batch) is ignored, and so is any but a
        resolve of an incident that has resolved: a resolve is final.

        A batch run again (``run`` and ``batch_id`` seen before: Spark replays a batch it
        did not commit, from the state before it) may not raise what its first run did,
        when the restart came with new settings (a reload, the entity cap) or what ran
        before was stopped half way. An incident the first run opened that this one does
        not open is held by no detector and would stay open forever: it is closed here,
        with a resolve that says so (evidence ``reason``), before the batch's own
        transitions. What else the first run raised and this one does not stands (an
        escalation, a resolve).

        What is too old to page (``max_age_ms``). After a checkpoint reset the query reads
        history again, and last month's incidents must not page today; a flinkwatch that
        was down must not page what ended while it was. So a firing older than the limit
        is recorded but not sent to notifying sinks (``stale``), and its incident's later
        transitions follow it (:meth:`_stale`), with two exceptions, for an incident that
        is still going on: an escalation of it is news and judged by its own age; and if
        flinkwatch itself was behind when it recorded the firing (detection's newest
        event time before this batch was older than the limit: it was down, or catching
        up), the incident's latest transition is paged, once, as soon as detection is
        within the limit of now again with the incident still open (``paged_late``).

        Args:
            batch_id: The micro-batch, kept for tracing.
            alerts: The batch's transitions in order.
            sinks: The delivery sinks each new transition is queued for.
            silencer: Returns the name of the silence an alert falls under, or None.
            correlate: Puts each new transition into its incident; called once per new
                transition, in order, so the caller's correlator mirrors the ledger.
            max_age_ms: A transition whose event time is older than this (by the ledger's
                clock) is not paged (see above). ``None``: no limit.
            frontier_ms: The newest event time in the batch's output, signals included:
                how far detection has got (the alerts' own times count too).
            run: The query whose batch this is (its checkpoint's id): batch ids of one
                query are compared, and only then. ``None``: nothing is compared.

        Returns:
            The transitions that were new, in order.

        Raises:
            LedgerError: the batch could not be recorded (a full volume, say); nothing of
                it was, and the caller must not let Spark commit the batch.
        """
        new: list[Transition] = []
        withheld: Counter[str] = Counter()
        paged: Counter[str] = Counter()
        now = self._clock()
        before = self._frontier
        behind = max_age_ms is not None and before is not None and now - before > max_age_ms
        with self._tx() as db:
            if run is not None:
                alerts = [*self._not_raised_again(db, run, batch_id, alerts, frontier_ms), *alerts]
            for alert in alerts:
                key = transition_key(alert)
                if alert.status is not AlertStatus.RESOLVED and self._closed(db, alert.alert_id):
                    if not db.execute("SELECT 1 FROM transitions WHERE key = ?", (key,)).fetchone():
                        log.info("%s: its incident has resolved already; not recorded", key)
                    continue
                silenced = self._silence_of(db, alert, silencer)
                seq = self._insert(db, key, alert, batch_id, silenced, now, before, run)
                if seq is None:
                    continue
                incident = correlate(alert) if correlate else None
                if incident is not None:
                    db.execute(
                        "UPDATE transitions SET incident_id = ?, incident = ? WHERE seq = ?",
                        (incident.incident_id, incident.model_dump_json(), seq),
                    )
                old = max_age_ms is not None and now - alert.event_time_ms > max_age_ms
                t = Transition(seq, key, alert, silenced, now, incident)
                for sink in sinks:
                    state = self._first_state(db, t, sink, old)
                    if state == "stale":
                        withheld[sink.name] += 1
                        self._held = self._held or behind
                    db.execute(
                        "INSERT INTO deliveries (sink, seq, state, updated_ms) VALUES (?, ?, ?, ?)",
                        (sink.name, seq, state, now),
                    )
                new.append(t)
            newest = self._advance(db, [frontier_ms or 0, *(a.event_time_ms for a in alerts)])
            swept = (
                max_age_ms is not None
                and self._held
                and newest is not None
                and now - newest <= max_age_ms
            )
            if swept:
                for sink in sinks:
                    if sink.notifies:
                        paged[sink.name] = self._page_held(db, sink.name, max_age_ms or 0)
        self._frontier = newest
        self._held = self._held and not swept
        for sink_name, n in withheld.items():
            self.outcomes[(sink_name, "stale")] += n
        for sink_name, n in paged.items():
            if n:
                self.outcomes[(sink_name, "paged_late")] += n
        return new

    @staticmethod
    def _insert(
        db: sqlite3.Connection,
        key: str,
        alert: Alert,
        batch_id: int,
        silenced: str | None,
        now: int,
        frontier: int | None,
        run: str | None,
    ) -> int | None:
        """Insert one transition; its ``seq``, or ``None`` when it was recorded before."""
        cur = db.execute(
            "INSERT OR IGNORE INTO transitions (key, alert_id, status, batch_id, "
            "silenced_by, alert, recorded_ms, frontier_ms, run) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                key,
                alert.alert_id,
                alert.status.value,
                batch_id,
                silenced,
                alert.model_dump_json(),
                now,
                frontier,
                run,
            ),
        )
        return int(cur.lastrowid or 0) if cur.rowcount else None

    def _first_state(
        self, db: sqlite3.Connection, t: Transition, sink: DeliverySink, old: bool
    ) -> str:
        """Where a new transition's delivery to one sink starts.

        ``unrouted`` when the sink does not take it (and took none of its incident before),
        ``silenced`` or ``stale`` for a notifying sink (see :meth:`record`), else ``pending``.

        A resolve goes to a notifying sink that got a page of its incident (its firing or
        an escalation: no page is left open, whatever was silenced since), and is
        withheld from one that got none (no lone "resolved").
        """
        if not sink.wants(t) and not self._routed_before(db, t, sink.name):
            return "unrouted"
        if sink.notifies and t.alert.status is AlertStatus.RESOLVED:
            got = self._states(db, t.alert.alert_id, sink.name)
            if got & set(_PAGED_STATES):
                return "pending"
            if "silenced" in got:
                return "silenced"
        if sink.notifies and t.silenced_by:
            return "silenced"
        if sink.notifies and self._stale(db, t.alert, sink.name, old):
            return "stale"
        return "pending"

    @staticmethod
    def _closed(db: sqlite3.Connection, alert_id: str) -> bool:
        """Whether the incident's latest recorded transition is its resolve."""
        row = db.execute(
            "SELECT status FROM transitions WHERE alert_id = ? ORDER BY seq DESC LIMIT 1",
            (alert_id,),
        ).fetchone()
        return row is not None and row[0] == AlertStatus.RESOLVED.value

    @staticmethod
    def _not_raised_again(
        db: sqlite3.Connection,
        run: str,
        batch_id: int,
        alerts: Sequence[Alert],
        frontier_ms: int | None,
    ) -> list[Alert]:
        """Resolves of the open incidents an earlier run of this batch opened and this one did not.

        Each is the incident's latest transition, resolved, at the batch's newest time.
        """
        raised = {transition_key(a) for a in alerts}
        opened = db.execute(
            "SELECT key, alert_id FROM transitions "
            "WHERE run = ? AND batch_id = ? AND status = 'firing' ORDER BY seq",
            (run, batch_id),
        ).fetchall()
        out: list[Alert] = []
        for key, alert_id in opened:
            if key in raised:
                continue
            last = db.execute(
                "SELECT alert, status FROM transitions WHERE alert_id = ? "
                "ORDER BY seq DESC LIMIT 1",
                (alert_id,),
            ).fetchone()
            if last[1] == AlertStatus.RESOLVED.value:
                continue
            latest = Alert.model_validate_json(last[0])
            at = max([latest.event_time_ms, frontier_ms or 0, *(a.event_time_ms for a in alerts)])
            out.append(
                latest.model_copy(
                    update={
                        "status": AlertStatus.RESOLVED,
                        "event_time_ms": at,
                        "summary": (
                            f"{latest.detector} no longer holds this incident: the micro-batch "
                            "that raised it was cut short by a restart (a config reload, say) "
                            "and did not raise it when run again; closed by flinkwatch"
                        ),
                        "evidence": {
                            "reason": "not raised again after a restart",
                            "batch": batch_id,
                        },
                    }
                )
            )
            log.warning(
                "alert=%s %s: batch %d was run again after a restart and did not raise it; "
                "no detector holds it, so it is resolved",
                alert_id,
                key,
                batch_id,
            )
        return out

    def _advance(self, db: sqlite3.Connection, times: Sequence[int]) -> int | None:
        """Detection's newest event time with ``times``; written down once it moved a step."""
        newest = max(times, default=0)
        if not newest or (self._frontier is not None and newest <= self._frontier):
            return self._frontier
        if self._frontier_saved is None or newest - self._frontier_saved >= _FRONTIER_STEP_MS:
            db.execute(
                "INSERT OR REPLACE INTO ledger_meta (key, value) VALUES ('frontier_ms', ?)",
                (newest,),
            )
            self._frontier_saved = newest
        return newest

    def _page_held(self, db: sqlite3.Connection, sink: str, max_age_ms: int) -> int:
        """Page the incidents withheld while flinkwatch was behind that are still open.

        Each such incident's latest transition goes from ``stale`` to ``pending``: it pages
        once, as what the incident is now. One whose every transition to the sink is not
        ``stale`` (paged, silenced) or that has resolved is left alone.

        Returns:
            How many were paged.
        """
        held = db.execute(
            "SELECT DISTINCT t.alert_id FROM deliveries d JOIN transitions t ON t.seq = d.seq "
            "WHERE d.sink = ? AND d.state = 'stale' AND t.status = 'firing' "
            "AND t.frontier_ms IS NOT NULL AND t.recorded_ms - t.frontier_ms > ?",
            (sink, max_age_ms),
        ).fetchall()
        n = 0
        for (alert_id,) in held:
            rows = db.execute(
                "SELECT t.seq, t.key, t.status, d.state FROM transitions t JOIN deliveries d "
                "ON d.seq = t.seq AND d.sink = ? WHERE t.alert_id = ? ORDER BY t.seq",
                (sink, alert_id),
            ).fetchall()
            if rows[-1][2] == AlertStatus.RESOLVED.value or any(r[3] != "stale" for r in rows):
                continue
            seq, key = rows[-1][0], rows[-1][1]
            db.execute(
                "UPDATE deliveries SET state = 'pending', updated_ms = ? "
                "WHERE sink = ? AND seq = ?",
                (self._clock(), sink, seq),
            )
            log.warning(
                "sink=%s %s: withheld as old while flinkwatch was behind, still open now that "
                "it caught up: paged",
                sink,
                key,
            )
            n += 1
        return n

    @staticmethod
    def _routed_before(db: sqlite3.Connection, t: Transition, sink: str) -> bool:
        """Whether ``sink`` took an earlier transition of ``t``'s incident (it takes the rest)."""
        return (
            db.execute(
                "SELECT 1 FROM deliveries d JOIN transitions t ON t.seq = d.seq "
                "WHERE d.sink = ? AND d.state != 'unrouted' AND d.seq < ? "
                "AND (t.incident_id = ? OR (t.incident_id IS NULL AND t.alert_id = ?)) LIMIT 1",
                (sink, t.seq, t.incident_id, t.incident_id),
            ).fetchone()
            is not None
        )

    @staticmethod
    def _stale(db: sqlite3.Connection, alert: Alert, sink: str, old: bool) -> bool:
        """Whether a transition is withheld from ``sink`` for its age.

        A firing is judged by its own age. A later transition follows its incident, like
        a silence: sent if an earlier one was sent (a message left red forever is worse
        than a late resolve), however late it comes. Of an incident withheld so far, a
        resolve is withheld too (no message about an incident nobody was paged for), and
        an escalation is judged by its own age: a recent one is news about an incident
        going on now, which pages as what it is now.
        """
        if alert.status is AlertStatus.FIRING:
            return old
        states = AlertLedger._states(db, alert.alert_id, sink)
        if states & set(_PAGED_STATES):
            return False
        if alert.status is AlertStatus.RESOLVED and "stale" in states:
            return True
        return old

    @staticmethod
    def _states(db: sqlite3.Connection, alert_id: str, sink: str) -> set[str]:
        """The states of the sink's deliveries of the alert's transitions so far."""
        return {
            str(r[0])
            for r in db.execute(
                "SELECT d.state FROM deliveries d JOIN transitions t ON t.seq = d.seq "
                "WHERE t.alert_id = ? AND d.sink = ?",
                (alert_id, sink),
            ).fetchall()
        }

    @staticmethod
    def _silence_of(db: sqlite3.Connection, alert: Alert, silencer: Silencer | None) -> str | None:
        if alert.status is AlertStatus.RESOLVED:
            # A resolve follows its incident, not a silence of now: silenced if everything
            # before it was (the firing's silence names it), not if anything of it went
            # out unsilenced (an escalation paged once the firing's silence was over).
            # Which sinks then get it is judged per sink (_first_state).
            rows = db.execute(
                "SELECT silenced_by FROM transitions WHERE alert_id = ? ORDER BY seq",
                (alert.alert_id,),
            ).fetchall()
            if rows:
                return None if any(r[0] is None for r in rows) else str(rows[0][0])
        return silencer(alert) if silencer else None

    # --- delivering (any thread) -------------------------------------------------------

    def pending(self, sink: str, limit: int = 100) -> list[tuple[Transition, str]]:
        """The sink's open deliveries in order, with their state (``pending``/``sending``)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT t.seq, t.key, t.alert, t.silenced_by, t.recorded_ms, t.incident, d.state "
                "FROM deliveries d JOIN transitions t ON t.seq = d.seq "
                "WHERE d.sink = ? AND d.state IN ('pending', 'sending') ORDER BY d.seq LIMIT ?",
                (sink, limit),
            ).fetchall()
        return [
            (Transition(seq, key, Alert.model_validate_json(a), sil, rec, _incident(inc)), state)
            for seq, key, a, sil, rec, inc, state in rows
        ]

    def mark(self, sink: str, seq: int, state: str, error: str | None = None) -> None:
        """Move one delivery to ``state`` (committed before this returns)."""
        with self._tx() as db:
            db.execute(
                "UPDATE deliveries SET state = ?, error = ?, updated_ms = ?, "
                "attempts = attempts + (CASE WHEN ? = 'sending' THEN 1 ELSE 0 END) "
                "WHERE sink = ? AND seq = ?",
                (state, error, self._clock(), state, sink, seq),
            )

    def _note(self, sink: str, seq: int, error: str) -> None:
        """Record why a delivery is still open without moving it (nor counting an attempt)."""
        with self._tx() as db:
            db.execute(
                "UPDATE deliveries SET error = ?, updated_ms = ? WHERE sink = ? AND seq = ?",
                (error[:500], self._clock(), sink, seq),
            )

    def deliver(self, sink: DeliverySink, limit: int = 1000, at_most: int | None = None) -> int:
        """Send the sink's open transitions in order until one fails retryably.

        ``at_most`` ends the call after that many transitions were handled (sent,
        confirmed or refused); ``None``: every open one.

        Returns:
            How many are still open for the sink.

        Raises:
            RetryableDeliveryError: the first retryable failure (an
                :class:`~sinks.base.AmbiguousDeliveryError` if the send may have
                arrived); later transitions wait behind it, so the sink receives them
                in order.
        """
        handled = 0
        while True:
            batch = self.pending(sink.name, limit=min(limit, 100))
            if not batch:
                return 0
            for t, state in batch:
                if at_most is not None and handled >= at_most:
                    return self.backlog().get(sink.name, 0)
                handled += 1
                if state == "sending":
                    # A crash mid-send, or a send without an answer: only the sink can
                    # tell whether it arrived.
                    try:
                        arrived = sink.confirm(t)
                    except RetryableDeliveryError as exc:
                        # Sending blind could page twice; wait, in order, and ask again.
                        self._note(sink.name, t.seq, f"cannot confirm yet: {exc}")
                        self.outcomes[(sink.name, "retry")] += 1
                        raise
                    if arrived:
                        log.info("sink=%s %s: found delivered, not sent again", sink.name, t.key)
                        self.mark(sink.name, t.seq, "delivered")
                        self.outcomes[(sink.name, "confirmed")] += 1
                        continue
                    if arrived is None:
                        log.warning(
                            "sink=%s %s: earlier send's outcome unknown and the sink cannot "
                            "tell; sending again",
                            sink.name,
                            t.key,
                        )
                        self.outcomes[(sink.name, "resent_unconfirmed")] += 1
                self.mark(sink.name, t.seq, "sending")
                try:
                    sink.send(t)
                except AmbiguousDeliveryError as exc:
                    # It may have arrived: it stays `sending`, so the next pass asks the
                    # sink before sending it again.
                    log.warning(
                        "sink=%s %s: outcome unknown (%s); will confirm before resending",
                        sink.name,
                        t.key,
                        exc,
                    )
                    self._note(sink.name, t.seq, f"outcome unknown: {exc}")
                    self.outcomes[(sink.name, "unknown")] += 1
                    raise
                except RetryableDeliveryError as exc:
                    # Not sent: back to pending, so no confirm() is needed for it.
                    self.mark(sink.name, t.seq, "pending", str(exc)[:500])
                    self.outcomes[(sink.name, "retry")] += 1
                    raise
                except PermanentDeliveryError as exc:
                    log.error("sink=%s %s: refused, skipped: %s", sink.name, t.key, exc)
                    self.mark(sink.name, t.seq, "failed", str(exc)[:500])
                    self.outcomes[(sink.name, "failed")] += 1
                    continue
                self.mark(sink.name, t.seq, "delivered")
                self.outcomes[(sink.name, "delivered")] += 1

    def deliveries(self, states: Sequence[str] | None = None) -> list[Delivery]:
        """Deliveries in ledger order (then by sink), of these states (None: all)."""
        wanted = set(states if states is not None else DELIVERY_STATES)
        with self._lock:
            rows = self._db.execute(
                "SELECT d.seq, d.sink, d.state, d.attempts, d.error, d.updated_ms, t.key, t.alert "
                "FROM deliveries d JOIN transitions t ON t.seq = d.seq ORDER BY d.seq, d.sink"
            ).fetchall()
        return [
            Delivery(seq, sink, state, n, err, ms, key, Alert.model_validate_json(a))
            for seq, sink, state, n, err, ms, key, a in rows
            if state in wanted
        ]

    def resend(self, seqs: Sequence[int] | None) -> list[tuple[int, str]]:
        """Move failed deliveries back to ``pending``: the next :meth:`deliver` sends them.

        For an operator who fixed what made a sink refuse them (a channel, a scope).
        Deliveries in any other state are left alone.

        Args:
            seqs: The transitions whose failed deliveries (to any sink) to resend;
                None: every failed delivery.

        Returns:
            The (seq, sink) of each delivery moved, in order.
        """
        with self._tx() as db:
            rows = db.execute(
                "SELECT seq, sink FROM deliveries WHERE state = 'failed' ORDER BY seq, sink"
            ).fetchall()
            moved = [(int(q), str(k)) for q, k in rows if seqs is None or q in set(seqs)]
            for seq, sink in moved:
                db.execute(
                    "UPDATE deliveries SET state = 'pending', updated_ms = ? "
                    "WHERE sink = ? AND seq = ?",
                    (self._clock(), sink, seq),
                )
        for seq, sink in moved:
            log.info("sink=%s seq=%d: failed delivery queued again", sink, seq)
        return moved

    def backlog(self) -> dict[str, int]:
        """Open (pending or sending) deliveries per sink."""
        out: dict[str, int] = {}
        for (sink, state), n in self.counts().items():
            if state in OPEN_STATES:
                out[sink] = out.get(sink, 0) + n
        return out

    def counts(self) -> dict[tuple[str, str], int]:
        """Deliveries by (sink, state): the backlog and its history."""
        with self._lock:
            rows = self._db.execute(
                "SELECT sink, state, COUNT(*) FROM deliveries GROUP BY sink, state"
            ).fetchall()
        return {(s, st): int(n) for s, st, n in rows}

    # --- what is firing now, and what sinks remember ----------------------------------

    def active(self) -> list[Transition]:
        """The latest transition of every incident that has not resolved."""
        with self._lock:
            rows = self._db.execute(
                "SELECT t.seq, t.key, t.alert, t.silenced_by, t.recorded_ms FROM transitions t "
                "JOIN (SELECT alert_id, MAX(seq) AS seq FROM transitions GROUP BY alert_id) last "
                "ON last.seq = t.seq WHERE t.status != 'resolved' ORDER BY t.seq"
            ).fetchall()
        return [Transition(s, k, Alert.model_validate_json(a), sil, r) for s, k, a, sil, r in rows]

    def standing(self, sink: str) -> list[Transition]:
        """What ``sink`` was last told of each open incident that has nothing on its way to it.

        For a receiver that wants open alerts repeated (Alertmanager times out an alert
        not posted again). Per alert: its latest transition ``delivered`` to the sink,
        with the incident as it stood then; left out when the alert has resolved
        (recorded, even if not yet sent), when a transition of it is still ``pending`` or
        ``sending`` to the sink (the dispatcher is about to change what the sink holds:
        repeating the older state now could undo it), and when nothing of it was
        delivered (silenced, stale, refused). Unlike :meth:`active`, which is what is
        firing, this is what the sink holds.
        """
        with self._lock:
            rows = self._db.execute(
                "SELECT t.seq, t.key, t.alert, t.silenced_by, t.recorded_ms, t.incident "
                "FROM transitions t JOIN ("
                "  SELECT t2.alert_id, MAX(t2.seq) AS seq FROM transitions t2 JOIN deliveries d2 "
                "  ON d2.seq = t2.seq AND d2.sink = ? WHERE d2.state = 'delivered' "
                "  GROUP BY t2.alert_id"
                ") last ON last.seq = t.seq "
                "WHERE NOT EXISTS (SELECT 1 FROM transitions r "
                "  WHERE r.alert_id = t.alert_id AND r.status = 'resolved') "
                "AND NOT EXISTS (SELECT 1 FROM transitions o JOIN deliveries od "
                "  ON od.seq = o.seq AND od.sink = ? "
                "  WHERE o.alert_id = t.alert_id AND od.state IN ('pending', 'sending')) "
                "ORDER BY t.seq",
                (sink, sink),
            ).fetchall()
        return [
            Transition(seq, key, Alert.model_validate_json(a), sil, rec, _incident(inc))
            for seq, key, a, sil, rec, inc in rows
        ]

    def previous(self, t: Transition) -> Alert | None:
        """The transition of ``t``'s alert recorded just before ``t`` (None: ``t`` is its first)."""
        with self._lock:
            row = self._db.execute(
                "SELECT alert FROM transitions WHERE alert_id = ? AND seq < ? "
                "ORDER BY seq DESC LIMIT 1",
                (t.alert.alert_id, t.seq),
            ).fetchone()
        return Alert.model_validate_json(row[0]) if row else None

    def history(self) -> list[tuple[Alert, str]]:
        """Every recorded transition with its incident id, in order (to rebuild a correlator)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT alert, COALESCE(incident_id, alert_id) FROM transitions ORDER BY seq"
            ).fetchall()
        return [(Alert.model_validate_json(a), str(i)) for a, i in rows]

    def remember(self, sink: str, key: str, value: dict[str, Any]) -> None:
        """Keep a small fact for a sink (the Slack message of an incident, say)."""
        with self._tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO sink_memory (sink, key, value) VALUES (?, ?, ?)",
                (sink, key, json.dumps(value)),
            )

    def amend(
        self, sink: str, key: str, change: Callable[[dict[str, Any] | None], dict[str, Any]]
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

    def last_delivered(self, sink: str, incident_id: str) -> Transition | None:
        """The newest transition of an incident the sink has: what its message shows."""
        with self._lock:
            row = self._db.execute(
                "SELECT t.seq, t.key, t.alert, t.silenced_by, t.recorded_ms, t.incident "
                "FROM transitions t JOIN deliveries d ON d.seq = t.seq AND d.sink = ? "
                "WHERE COALESCE(t.incident_id, t.alert_id) = ? AND d.state = 'delivered' "
                "ORDER BY t.seq DESC LIMIT 1",
                (sink, incident_id),
            ).fetchone()
        if row is None:
            return None
        seq, key, a, sil, rec, inc = row
        return Transition(seq, key, Alert.model_validate_json(a), sil, rec, _incident(inc))

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

    def prune(self, older_than_ms: int) -> int:
        """Forget closed incidents whose every transition is settled and older than the cutoff.

        Returns:
            How many transitions were deleted.
        """
        with self._tx() as db:
            doomed = [
                r[0]
                for r in db.execute(
                    "SELECT alert_id FROM transitions GROUP BY alert_id "
                    "HAVING MAX(recorded_ms) < ? AND SUM(status = 'resolved') > 0",
                    (older_than_ms,),
                ).fetchall()
            ]
            busy = {
                r[0]
                for r in db.execute(
                    "SELECT DISTINCT t.alert_id FROM deliveries d JOIN transitions t "
                    "ON t.seq = d.seq WHERE d.state IN ('pending', 'sending')"
                ).fetchall()
            }
            gone = [a for a in doomed if a not in busy]
            n = 0
            for alert_id in gone:
                db.execute(
                    "DELETE FROM deliveries WHERE seq IN "
                    "(SELECT seq FROM transitions WHERE alert_id = ?)",
                    (alert_id,),
                )
                n += db.execute("DELETE FROM transitions WHERE alert_id = ?", (alert_id,)).rowcount
                # The incident's message, what was done about it from Slack, and any
                # search for one of its sends left half way.
                prefix = f"search:{alert_id}:"
                db.execute(
                    "DELETE FROM sink_memory WHERE key IN (?, ?) OR substr(key, 1, ?) = ?",
                    (alert_id, f"acts:{alert_id}", len(prefix), prefix),
                )
        return n
