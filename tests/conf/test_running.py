"""The one holder of the config in force."""

from __future__ import annotations

from conf import AppConfig
from conf.running import RunningConfig


def test_a_swap_is_what_every_reader_gets_next() -> None:
    first, second = AppConfig(cluster="a"), AppConfig(cluster="b")
    running = RunningConfig(first)
    reader = lambda: running.current.cluster  # noqa: E731 - a part that reads at each use
    assert running.current is first and reader() == "a"
    running.swap(second)
    assert running.current is second and reader() == "b"
