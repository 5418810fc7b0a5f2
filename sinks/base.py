"""The sink contract: sinks run on the driver and must tolerate replays."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from detectors import Alert


class AlertSink(ABC):
    """Receives the alert transitions of one micro-batch.

    A micro-batch can be delivered again after a crash (same ``batch_id``), so a
    sink must make a repeated call harmless.
    """

    name: str = "sink"

    @abstractmethod
    def deliver(self, batch_id: int, alerts: Sequence[Alert]) -> None:
        """Deliver the alerts of ``batch_id``, in order."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources; default: nothing to release."""
