"""Sinks: where alert transitions and dead letters go. They run on the driver only."""

from sinks.base import (
    AlertObserver,
    AmbiguousDeliveryError,
    DeliverySink,
    PermanentDeliveryError,
    RetryableDeliveryError,
    Transition,
    transition_key,
)
from sinks.files import DeadLetterFileSink, JsonLinesAlertSink, LogAlertSink
from sinks.ledger import AlertLedger, LedgerError

__all__ = [
    "AlertLedger",
    "AlertObserver",
    "AmbiguousDeliveryError",
    "DeadLetterFileSink",
    "DeliverySink",
    "JsonLinesAlertSink",
    "LedgerError",
    "LogAlertSink",
    "PermanentDeliveryError",
    "RetryableDeliveryError",
    "Transition",
    "transition_key",
]
