"""The idle phase measures the steady idle cost, after the parse query's switch."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from bench import idle


class Running:
    """A process that has not exited (the one attribute ``_settle`` asks)."""

    def poll(self) -> int | None:
        return None


def commit(state: Path, query: str, batch: int) -> None:
    commits = state / "checkpoints" / query / "commits"
    commits.mkdir(parents=True, exist_ok=True)
    (commits / str(batch)).write_text("v1\n")


@pytest.fixture
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The module's clock, its sleeps noted and skipped (the ``time`` module left alone)."""
    slept: list[float] = []
    monkeypatch.setattr(idle, "time", SimpleNamespace(monotonic=time.monotonic, sleep=slept.append))
    return slept


def test_the_window_waits_for_the_parse_query_to_idle_in_micro_batches(
    tmp_path: Path, no_sleep: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    commit(tmp_path, "parse-realtime", 0)
    polls = []

    def commits(state: Path) -> dict[str, int]:
        polls.append(state)
        if len(polls) == 3:  # the switch happens while it waits
            commit(tmp_path, "parse-microbatch", 0)
        return original(state)

    original = idle._commits
    monkeypatch.setattr(idle, "_commits", commits)
    proc: Any = Running()
    assert idle._settle(proc, tmp_path, {}) is True
    assert len(polls) == 3
    assert no_sleep == [1.0, 1.0, idle._SETTLE_S]


def test_a_config_that_never_switches_is_measured_after_the_warm_up(
    tmp_path: Path, no_sleep: list[float]
) -> None:
    proc: Any = Running()
    assert idle._settle(proc, tmp_path, {"parse_mode": "microbatch"}) is None
    assert idle._settle(proc, tmp_path, {"idle_after_s": 0}) is None
    assert no_sleep == []


def test_no_switch_in_the_limit_is_said_and_the_window_goes_on(
    tmp_path: Path, no_sleep: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(idle, "_SETTLE_LIMIT_S", -1.0)
    proc: Any = Running()
    assert idle._settle(proc, tmp_path, {}) is False
    assert no_sleep == []
