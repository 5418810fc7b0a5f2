"""Sinks: where alert transitions and dead letters go. They run on the driver only."""

from sinks.base import AlertSink
from sinks.files import DeadLetterFileSink, JsonLinesAlertSink, LogAlertSink

__all__ = ["AlertSink", "DeadLetterFileSink", "JsonLinesAlertSink", "LogAlertSink"]
