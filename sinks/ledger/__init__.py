"""The alert ledger: every transition recorded once, delivered to each sink once.

A SQLite file on the driver, in four parts:

* :mod:`~sinks.ledger.store`: the transition store. The detect query's ``foreachBatch``
  records a batch's transitions (:meth:`AlertLedger.record`) before Spark commits the
  batch, and queues each for every sink.
* :mod:`~sinks.ledger.policy`: the page policy, pure: where a transition's delivery to
  a sink starts (silences, routes, what is too old to page, a resolve following its
  incident).
* :mod:`~sinks.ledger.memory`: the narrow protocol (:class:`SinkMemory`) the sinks
  receive instead of the ledger, to keep small facts (the Slack message of an incident)
  and see what was delivered to them.
* :mod:`~sinks.ledger.queries`: the reads of the command line, the report and the metrics.

Delivery is a second, independent step per sink, run by the dispatcher
(:func:`sinks.dispatch.deliver`): ``pending`` → ``sending`` → ``delivered`` (or
``failed``; for a notifying sink also ``silenced``, or ``stale`` when the transition
was already old when it was recorded). ``sending`` is committed before the send starts,
so after a crash the ledger knows which sends may have happened and the sink is asked
(:meth:`~sinks.base.DeliverySink.confirm`) instead of guessing.
"""

from sinks.ledger.file import LedgerError
from sinks.ledger.memory import ReceiverHistory, SinkMemory
from sinks.ledger.policy import Silencer
from sinks.ledger.queries import DELIVERY_STATES, OPEN_STATES, Delivery
from sinks.ledger.store import AlertLedger, Correlate, Recipient

__all__ = [
    "DELIVERY_STATES",
    "OPEN_STATES",
    "AlertLedger",
    "Correlate",
    "Delivery",
    "LedgerError",
    "ReceiverHistory",
    "Recipient",
    "Silencer",
    "SinkMemory",
]
