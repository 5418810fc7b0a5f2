"""flinkwatch's error hierarchy: one base, subclasses that carry their context.

``conf`` is imported by every other layer, so the base lives here (``detectors`` import
only this module of it: a detector raises nothing on purpose, the adapter isolates whatever
it raises, but loading a saved state can fail).

* :class:`FlinkwatchError`: every error flinkwatch raises on purpose.
* :class:`ConfigError`: a config that cannot be used; ``path`` and ``fields`` say where.
  ``conf.kafka_client.KafkaSettingsError`` (a variable unset, a CA file unreadable).
* ``sinks.base.DeliveryError``: a send that did not happen, with ``Retryable``,
  ``Ambiguous`` and ``Permanent`` kinds the ledger acts on.
* :class:`StateError`: a saved detector state of a newer version or a bad shape
  (``detectors.base.Detector.load``); the adapter drops it and closes its incident.
* ``sinks.metrics_server.MetricsEndpointError``, ``streaming.topics.KafkaConnectError``:
  the endpoint or the broker cannot be used as configured.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


class FlinkwatchError(Exception):
    """Base of every error flinkwatch raises on purpose."""


class ConfigError(FlinkwatchError):
    """A config that cannot be used; the message names the file and the field.

    Attributes:
        path: The config file, when there is one.
        fields: The dotted names of the offending fields (``slack.token_env``), if known.
    """

    def __init__(
        self, message: str, *, path: Path | None = None, fields: Sequence[str] = ()
    ) -> None:
        super().__init__(message)
        self.path = path
        self.fields = tuple(fields)


class StateError(FlinkwatchError):
    """A saved detector state that cannot be loaded: a newer version, or a bad shape.

    Attributes:
        detector: The detector whose state it is.
        version: The version the state was written with.
    """

    def __init__(self, message: str, *, detector: str, version: int | None) -> None:
        super().__init__(message)
        self.detector = detector
        self.version = version
