"""The ledger read back: deliveries, backlogs, what is open, what each sink holds.

For the command line (``flinkwatch deliveries``), the report, the metrics, a restart
rebuilding what it shows (:meth:`LedgerQueries.active`, :meth:`~LedgerQueries.history`)
and the sinks that ask what they were delivered (:mod:`sinks.ledger.memory`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from detectors.model import Alert
from sinks.base import Transition
from sinks.ledger.file import LedgerFile, incident_of

#: Delivery states that still need work.
OPEN_STATES = ("pending", "sending")
#: Every delivery state.
DELIVERY_STATES = ("pending", "sending", "delivered", "failed", "silenced", "stale", "unrouted")


@dataclass(frozen=True, slots=True)
class Delivery:
    """One transition's delivery to one sink, as :meth:`LedgerQueries.deliveries` lists it.

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


class LedgerQueries(LedgerFile):
    """Reads of the transitions and their deliveries; none of them writes."""

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
            (Transition(seq, key, Alert.model_validate_json(a), sil, rec, incident_of(inc)), state)
            for seq, key, a, sil, rec, inc, state in rows
        ]

    def first_open(self, sink: str) -> int | None:
        """The ``seq`` of the sink's oldest open (pending or sending) delivery; None: none."""
        with self._lock:
            row = self._db.execute(
                "SELECT seq FROM deliveries WHERE sink = ? AND state IN ('pending', 'sending') "
                "ORDER BY seq LIMIT 1",
                (sink,),
            ).fetchone()
        return int(row[0]) if row else None

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
            Transition(seq, key, Alert.model_validate_json(a), sil, rec, incident_of(inc))
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
        return Transition(seq, key, Alert.model_validate_json(a), sil, rec, incident_of(inc))
