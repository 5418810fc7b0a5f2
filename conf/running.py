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

from typing import TYPE_CHECKING, Any

from detectors.base import Profile

if TYPE_CHECKING:
    from collections.abc import Mapping

    from conf.app import AppConfig
    from detectors import Detector


class RunningConfig:
    """The config in force: read at each use, swapped whole by a reload.

    One reference, so a reader sees the old config or the new one, never a mix; the
    swap is a single assignment, which needs no lock. The config's catalog (its
    detectors and rules, :meth:`AppConfig.catalog`) goes with it, made once per config.
    """

    def __init__(self, cfg: AppConfig) -> None:
        self._now = (cfg, cfg.catalog())

    @property
    def current(self) -> AppConfig:
        """The config in force now."""
        return self._now[0]

    @property
    def catalog(self) -> Mapping[str, type[Detector[Any, Any]]]:
        """What the config in force runs: its detectors and rules by name."""
        return self._now[1]

    def swap(self, cfg: AppConfig) -> None:
        """Put ``cfg`` in force for every reader's next use."""
        self._now = (cfg, cfg.catalog())

    def profile(self, name: str) -> Profile:
        """How a detector's or rule's incidents are told (a name not running: the default).

        A rule removed by a reload is still named by the resolves of its incidents.
        """
        cls = self._now[1].get(name)
        return cls.profile if cls is not None else Profile()

    def runbook(self, name: str) -> str:
        """A detector's or rule's runbook line ("" when it has none)."""
        return self.profile(name).runbook
