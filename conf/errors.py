"""flinkwatch's error hierarchy, as ``conf`` has always offered it.

The classes are defined in :mod:`detectors.model`, the module every floor can import:
``detectors`` raises :class:`StateError` and cannot import ``conf`` (``conf`` imports
``detectors``: the config union comes from the registry). Importing them from here
keeps working; new code imports them from :mod:`detectors.model` (or ``ConfigError``
and ``FlinkwatchError`` from :mod:`conf`). The hierarchy is described there.
"""

from __future__ import annotations

from detectors.model import ConfigError, FlinkwatchError, StateError

__all__ = ["ConfigError", "FlinkwatchError", "StateError"]
