"""flinkwatch's error hierarchy: one base, subclasses that carry their context.

``conf`` is imported by every other layer but ``detectors`` (which raise nothing on
purpose: the adapter isolates whatever they raise), so the base lives here.

* :class:`FlinkwatchError`: every error flinkwatch raises on purpose.
* :class:`ConfigError`: a config that cannot be used; ``path`` and ``fields`` say where.
  ``conf.kafka_client.KafkaSettingsError`` (a variable unset, a CA file unreadable).
* ``sinks.base.DeliveryError``: a send that did not happen, with ``Retryable``,
  ``Ambiguous`` and ``Permanent`` kinds the ledger acts on.
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
