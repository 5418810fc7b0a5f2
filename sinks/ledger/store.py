"""The transition store: each transition recorded once, queued once for every sink.

The detect query's ``foreachBatch`` records the batch's transitions
(:meth:`AlertLedger.record`) before it returns, that is before Spark commits the batch.
If the process dies before the commit, Spark replays the batch and the store, keyed by
:func:`~sinks.base.transition_key`, adds nothing twice. Where each new transition's
delivery to a sink starts (``pending``, ``silenced``, ``stale``, ``unrouted``) is the
page policy's decision (:mod:`sinks.ledger.policy`); the store reads what the policy
needs and writes what it decides, in the batch's one transaction.

The store never calls a sink's ``send`` or ``confirm``: the dispatcher
(:func:`sinks.dispatch.deliver`) takes the open deliveries (:meth:`AlertLedger.pending`)
and moves each along (:meth:`AlertLedger.mark`).
"""

from __future__ import annotations

import logging
import sqlite3
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from detectors.correlation import IncidentView
from detectors.model import Alert, AlertStatus
from sinks.base import Transition, transition_key
from sinks.ledger import policy
from sinks.ledger.file import now_ms
from sinks.ledger.memory import MemoryTable
from sinks.ledger.policy import Earlier, Silencer
from sinks.ledger.queries import LedgerQueries

log = logging.getLogger(__name__)

#: Puts a new transition into its incident (see :class:`~detectors.correlation.Correlator`).
Correlate = Callable[[Alert], IncidentView]
#: How far detection's newest event time moves before the ledger writes it down again
#: (it only needs to tell "an hour behind" from "up to date").
_FRONTIER_STEP_MS = 60_000


class Recipient(Protocol):
    """What the store asks of a sink when it queues a transition for it: no send."""

    @property
    def name(self) -> str:
        """The sink's name; deliveries are kept by it."""
        ...

    @property
    def notifies(self) -> bool:
        """Whether it pages a human (silenced and too-old transitions are withheld)."""
        ...

    def wants(self, t: Transition) -> bool:
        """Whether its routes take the transition."""
        ...


class AlertLedger(LedgerQueries, MemoryTable):
    """Durable record of alert transitions and of their delivery to each sink.

    Thread-safe: the batch thread records, the dispatcher threads deliver.
    """

    def __init__(self, path: Path, clock: Callable[[], int] = now_ms) -> None:
        """Open (or create) the ledger file.

        Args:
            path: The SQLite file.
            clock: Wall-clock epoch ms, for bookkeeping only (injected in tests).
        """
        super().__init__(path, clock)
        #: Outcomes of sends, by (sink, outcome), for the metrics.
        self.outcomes: Counter[tuple[str, str]] = Counter()
        row = self._db.execute("SELECT value FROM ledger_meta WHERE key = 'frontier_ms'").fetchone()
        #: The newest event time detection has output (see :meth:`record`), and as written.
        self._frontier: int | None = int(row[0]) if row else None
        self._frontier_saved = self._frontier
        #: Whether an incident withheld while flinkwatch was behind may wait for its page.
        self._held = True

    # --- recording (the batch thread) ----------------------------------------------

    def record(
        self,
        batch_id: int,
        alerts: Sequence[Alert],
        sinks: Sequence[Recipient],
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
        transitions follow it (:func:`~sinks.ledger.policy.stale`), with two exceptions,
        for an incident that is still going on: an escalation of it is news and judged by
        its own age; and if flinkwatch itself was behind when it recorded the firing
        (detection's newest event time before this batch was older than the limit: it was
        down, or catching up), the incident's latest transition is paged, once, as soon as
        detection is within the limit of now again with the incident still open
        (``paged_late``).

        Args:
            batch_id: The micro-batch, kept for tracing.
            alerts: The batch's transitions in order.
            sinks: The delivery sinks each new transition is queued for (asked whether
                they want it, never sent to here).
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
        behind = policy.behind(now, self._frontier, max_age_ms)
        with self._tx() as db:
            if run is not None:
                alerts = [*self._not_raised_again(db, run, batch_id, alerts, frontier_ms), *alerts]
            for alert in alerts:
                t = self._record_one(db, alert, batch_id, now, run, silencer, correlate)
                if t is None:
                    continue
                old = policy.too_old(now, alert.event_time_ms, max_age_ms)
                for sink_name in self._queue(db, t, sinks, now, old=old):
                    withheld[sink_name] += 1
                    self._held = self._held or behind
                new.append(t)
            newest = self._advance(db, [frontier_ms or 0, *(a.event_time_ms for a in alerts)])
            swept = self._held and policy.caught_up(now, newest, max_age_ms)
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

    def _queue(
        self,
        db: sqlite3.Connection,
        t: Transition,
        sinks: Sequence[Recipient],
        now: int,
        *,
        old: bool,
    ) -> list[str]:
        """Queue a new transition for every sink; the sinks it is stale for (not paged)."""
        stale: list[str] = []
        for sink in sinks:
            state = policy.first_state(
                t.alert.status,
                notifies=sink.notifies,
                silenced=t.silenced_by is not None,
                old=old,
                seen=self._earlier(db, t, sink),
            )
            if state == "stale":
                stale.append(sink.name)
            db.execute(
                "INSERT INTO deliveries (sink, seq, state, updated_ms) VALUES (?, ?, ?, ?)",
                (sink.name, t.seq, state, now),
            )
        return stale

    def _record_one(
        self,
        db: sqlite3.Connection,
        alert: Alert,
        batch_id: int,
        now: int,
        run: str | None,
        silencer: Silencer | None,
        correlate: Correlate | None,
    ) -> Transition | None:
        """Insert one transition with its silence and incident; None when not new."""
        key = transition_key(alert)
        if not policy.admitted(alert.status, self._latest_status(db, alert.alert_id)):
            if not db.execute("SELECT 1 FROM transitions WHERE key = ?", (key,)).fetchone():
                log.info("%s: its incident has resolved already; not recorded", key)
            return None
        earlier = self._silences(db, alert.alert_id) if alert.status is AlertStatus.RESOLVED else []
        silenced = policy.silence_of(alert, earlier, silencer)
        seq = self._insert(db, key, alert, batch_id, silenced, now, self._frontier, run)
        if seq is None:
            return None
        incident = correlate(alert) if correlate else None
        if incident is not None:
            db.execute(
                "UPDATE transitions SET incident_id = ?, incident = ? WHERE seq = ?",
                (incident.incident_id, incident.model_dump_json(), seq),
            )
        return Transition(seq, key, alert, silenced, now, incident)

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

    def _earlier(self, db: sqlite3.Connection, t: Transition, sink: Recipient) -> Earlier:
        """What the policy needs to know of what ``sink`` got of ``t``'s incident so far."""
        wanted = sink.wants(t)
        routed = not wanted and self._routed_before(db, t, sink.name)
        states = self._states(db, t.alert.alert_id, sink.name) if sink.notifies else frozenset()
        return Earlier(wanted, routed, states)

    @staticmethod
    def _latest_status(db: sqlite3.Connection, alert_id: str) -> AlertStatus | None:
        """The status of the incident's latest recorded transition (None: none yet)."""
        row = db.execute(
            "SELECT status FROM transitions WHERE alert_id = ? ORDER BY seq DESC LIMIT 1",
            (alert_id,),
        ).fetchone()
        return AlertStatus(row[0]) if row is not None else None

    @staticmethod
    def _silences(db: sqlite3.Connection, alert_id: str) -> list[str | None]:
        """The silences the alert's transitions were recorded under, in order."""
        rows = db.execute(
            "SELECT silenced_by FROM transitions WHERE alert_id = ? ORDER BY seq", (alert_id,)
        ).fetchall()
        return [None if r[0] is None else str(r[0]) for r in rows]

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
            out.append(policy.closing_resolve(latest, at, batch_id))
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

        Each such incident's latest transition goes from ``stale`` to ``pending``
        (:func:`~sinks.ledger.policy.held_page`).

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
            page = policy.held_page([(AlertStatus(r[2]), str(r[3])) for r in rows])
            if page is None:
                continue
            seq, key = rows[page][0], rows[page][1]
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
    def _states(db: sqlite3.Connection, alert_id: str, sink: str) -> frozenset[str]:
        """The states of the sink's deliveries of the alert's transitions so far."""
        return frozenset(
            str(r[0])
            for r in db.execute(
                "SELECT d.state FROM deliveries d JOIN transitions t ON t.seq = d.seq "
                "WHERE t.alert_id = ? AND d.sink = ?",
                (alert_id, sink),
            ).fetchall()
        )

    # --- the outbox's moves (the dispatcher's threads) ----------------------------------

    def mark(self, sink: str, seq: int, state: str, error: str | None = None) -> None:
        """Move one delivery to ``state`` (committed before this returns)."""
        with self._tx() as db:
            db.execute(
                "UPDATE deliveries SET state = ?, error = ?, updated_ms = ?, "
                "attempts = attempts + (CASE WHEN ? = 'sending' THEN 1 ELSE 0 END) "
                "WHERE sink = ? AND seq = ?",
                (state, error, self._clock(), state, sink, seq),
            )

    def note(self, sink: str, seq: int, error: str) -> None:
        """Record why a delivery is still open without moving it (nor counting an attempt)."""
        with self._tx() as db:
            db.execute(
                "UPDATE deliveries SET error = ?, updated_ms = ? WHERE sink = ? AND seq = ?",
                (error[:500], self._clock(), sink, seq),
            )

    def resend(self, seqs: Sequence[int] | None) -> list[tuple[int, str]]:
        """Move failed deliveries back to ``pending``: the dispatcher's next pass sends them.

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
