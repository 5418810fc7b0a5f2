"""The sink contracts. Sinks run on the driver only.

Two kinds:

* :class:`DeliverySink` (Slack, the alert file): each alert transition must reach it
  exactly once. The :class:`~sinks.ledger.AlertLedger` records every transition in
  step with Spark's batch commit, and the dispatcher (:func:`sinks.dispatch.deliver`)
  hands each sink its pending ones in order; the sink only has to send one, and to
  say, after a crash in the middle of a send or a send whose outcome it could not
  learn, whether that send arrived (:meth:`DeliverySink.confirm`).
* :class:`AlertObserver` (the Prometheus view, the console): sees each new
  transition once per process; what it shows after a restart is rebuilt from the
  ledger, not redelivered.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from detectors import REGISTRY
from detectors.base import Member
from detectors.correlation import IncidentView
from detectors.model import Alert, AlertStatus, FlinkwatchError
from detectors.tm_ids import same_tm


def transition_key(alert: Alert) -> str:
    """The identity of one transition of one incident, the ledger's dedupe key.

    An incident fires once and resolves once; it can escalate once per severity.
    """
    if alert.status is AlertStatus.ESCALATED:
        return f"{alert.alert_id}:{alert.status.value}:{alert.severity.value}"
    return f"{alert.alert_id}:{alert.status.value}"


#: The runbook line of a detector or rule, by name ("" when it has none). A run passes
#: the running config's (:meth:`conf.RunningConfig.runbook`): a rule a reload added has
#: its own words in every sink.
Runbook = Callable[[str], str]


def builtin_runbook(detector: str) -> str:
    """A built-in detector's runbook line ("" for any other name)."""
    cls = REGISTRY.get(detector)
    return cls.profile.runbook if cls is not None else ""


@dataclass(frozen=True, slots=True)
class Transition:
    """One recorded alert transition, as the ledger hands it to sinks.

    Attributes:
        seq: Position in the ledger; sinks receive transitions in this order.
        key: :func:`transition_key` of the alert.
        alert: The alert as the detector emitted it.
        silenced_by: Name of the silence that matched, if any. Notifying sinks do not
            receive silenced transitions; the others mark them.
        recorded_ms: Wall-clock time the ledger recorded it (epoch ms).
        incident: The incident the alert belongs to, as it stood after this transition
            (``None``: recorded without correlation).
    """

    seq: int
    key: str
    alert: Alert
    silenced_by: str | None = None
    recorded_ms: int = 0
    incident: IncidentView | None = None

    @property
    def incident_id(self) -> str:
        """The incident's id; an uncorrelated alert is its own incident."""
        return self.incident.incident_id if self.incident else self.alert.alert_id

    @property
    def member(self) -> Member | None:
        """The incident's record of this alert (None: recorded without correlation).

        It keeps what an earlier transition named and a later one may not (a resolve
        without the job name), so a receiver that identifies an alert by its job sees
        the firing's.
        """
        if self.incident is None:
            return None
        return next((m for m in self.incident.members if m.alert_id == self.alert.alert_id), None)

    @property
    def tm_id(self) -> str | None:
        """The TaskManager as a receiver's label set names it: one spelling per incident.

        The member's (what the alert first named, kept to its resolve), unless a member
        that joined the incident before it named the same TaskManager in another
        spelling (it fired on the metrics' ``localhost:40003_6cf67b``, this one after the
        logs said ``localhost:40003-6cf67b``): then that member's. Members keep their
        order and their spelling, so the choice never changes within an alert, and a
        receiver that groups or inhibits by ``tm_id`` (Alertmanager's ``equal:
        [tm_id]``) sees one TaskManager.
        """
        m = self.member
        own = (m.tm_id if m else None) or self.alert.tm_id
        if own is None or self.incident is None:
            return own
        return next((x.tm_id for x in self.incident.members if same_tm(x.tm_id, own)), own)


class DeliveryError(FlinkwatchError):
    """A send that did not happen (or may not have: :class:`AmbiguousDeliveryError`)."""


class RetryableDeliveryError(DeliveryError):
    """Not delivered (receiver down, rate limiting, unreachable): try again later, in order."""


class AmbiguousDeliveryError(RetryableDeliveryError):
    """The send may have arrived: the receiver failed or went silent after taking it.

    An HTTP 5xx, a read timeout, a connection closed after the request was written.
    The ledger keeps the delivery ``sending`` and asks :meth:`DeliverySink.confirm`
    before sending it again. A subclass of :class:`RetryableDeliveryError`, so callers
    that only back off and retry need not know the difference.
    """


class PermanentDeliveryError(DeliveryError):
    """The receiver refused this transition (bad channel, bad payload): skip it, keep the rest."""


class DeliverySink(ABC):
    """Receives each alert transition exactly once, in ledger order."""

    #: Stable name; the ledger keys delivery progress by it.
    name: str = "sink"
    #: Pages a human: silenced transitions are withheld from it.
    notifies: bool = False
    #: Transitions one pass of the dispatcher sends it at most (``None``: all that are
    #: open). A slow sink, whose every send is seconds of work, takes one at a time, so a
    #: page recorded meanwhile waits for one send of it, not for its whole queue.
    per_pass: int | None = None
    #: The dispatcher's lane: sinks of one lane are served by one thread, in turn;
    #: ``None``: a lane of its own, so a receiver that hangs delays no other sink.
    lane: str | None = None

    @abstractmethod
    def send(self, t: Transition) -> None:
        """Deliver one transition.

        Raises:
            AmbiguousDeliveryError: it may have arrived; ask (:meth:`confirm`) before resending.
            RetryableDeliveryError: it did not arrive; try again later (the ledger keeps order).
            PermanentDeliveryError: this transition can never be delivered.
        """

    def wants(self, t: Transition) -> bool:
        """Whether this sink's routes take the transition (judged when it is recorded).

        A transition not wanted is recorded ``unrouted`` for the sink, unless the sink
        took an earlier transition of the same incident: an incident that reached a
        receiver reaches it to its end. Default: every transition.
        """
        return True

    def confirm(self, t: Transition) -> bool | None:
        """Whether a send cut by a crash, or one with an unknown outcome, arrived.

        Returns:
            True if it arrived, False if not, None if this sink cannot tell (it is then
            sent again, and counted as ``resent_unconfirmed``). The default cannot tell.

        Raises:
            RetryableDeliveryError: the receiver cannot be asked right now; the ledger
                asks again later rather than send blind.
        """
        return None

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources; default: nothing to release."""


class AlertObserver(ABC):
    """Sees every new transition once per process (replays after a crash are not repeated)."""

    name: str = "observer"

    @abstractmethod
    def observe(self, transitions: Sequence[Transition]) -> None:
        """Take note of newly recorded transitions, in order."""
