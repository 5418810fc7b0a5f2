"""flinkwatch's error hierarchy, with :class:`ConfigError` where the config lives.

:class:`FlinkwatchError` (the base) and :class:`StateError` are defined in
:mod:`detectors.model`, the bottom floor: the detectors raise ``StateError`` and import
nothing of ``conf`` (``conf`` imports ``detectors``: the config union comes from the
registry). A detector never raises ``ConfigError``: its parameters are pydantic models
whose validators raise ``ValueError``, and loading the config turns that into a
``ConfigError`` naming the field. The hierarchy is described in :mod:`detectors.model`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from detectors.model import FlinkwatchError, StateError

__all__ = ["ConfigError", "FlinkwatchError", "StateError"]


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
