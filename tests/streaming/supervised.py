"""What the supervision's fake pipelines share: the parts of the protocol they do not play.

:func:`streaming.supervise.run_forever` reaches a pipeline through
:class:`streaming.supervise.Supervised` only; a fake subclasses this and overrides what
its test is about.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from conf import AppConfig
from conf.running import RunningConfig
from streaming.delivery import PipelineStats


class QuietPipeline:
    """Counts nothing, holds nothing back, ticks nothing, never switches the parse query."""

    config: RunningConfig
    stats: PipelineStats | None = None

    @property
    def cfg(self) -> AppConfig:
        return self.config.current

    @property
    def parse_held(self) -> bool:
        return False

    def running(self) -> list[Any]:
        return []

    def count_progress(self, queries: Sequence[Any]) -> None:
        pass

    def tick(self, queries: Sequence[Any]) -> None:
        pass

    def bus_drained(self) -> bool:
        return True

    def parse_switch(self, ask_brokers: bool) -> None:
        return None

    def admission(self) -> bool:
        return False

    def give_back_memory(self) -> None:
        pass
