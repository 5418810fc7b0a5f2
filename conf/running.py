"""The one holder of the config in force while a run lasts.

A run reads its config from one place: the sinks, the Prometheus collectors and the
Slack buttons read :attr:`RunningConfig.current` at each use, and a reload puts a new
config in force with one :meth:`RunningConfig.swap`. Settings marked restart-only keep
their effect from the start whatever the holder says (what was built with them stays).

Example:
    >>> running = RunningConfig(AppConfig())  # doctest: +SKIP
    >>> running.swap(load_config("conf/flinkwatch.yaml"))  # doctest: +SKIP
    >>> running.current.cluster  # doctest: +SKIP
    'default'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conf.app import AppConfig


class RunningConfig:
    """The config in force: read at each use, swapped whole by a reload.

    One reference, so a reader sees the old config or the new one, never a mix; the
    swap is a single assignment, which needs no lock.
    """

    def __init__(self, cfg: AppConfig) -> None:
        self._cfg = cfg

    @property
    def current(self) -> AppConfig:
        """The config in force now."""
        return self._cfg

    def swap(self, cfg: AppConfig) -> None:
        """Put ``cfg`` in force for every reader's next use."""
        self._cfg = cfg
