"""Dispatcher jobs: run in its thread, once per key, tried again while the receiver fails."""

from __future__ import annotations

from pathlib import Path

from sinks import AlertLedger, PermanentDeliveryError, RetryableDeliveryError
from sinks.dispatch import JOB_TRIES, Dispatcher


def test_a_job_asked_for_again_before_it_ran_runs_once(tmp_path: Path) -> None:
    ran: list[str] = []
    d = Dispatcher(AlertLedger(tmp_path / "l.sqlite"), [])
    d.submit("refresh:a", lambda: ran.append("first"))
    d.submit("refresh:b", lambda: ran.append("b"))
    d.submit("refresh:a", lambda: ran.append("second"))
    assert d.run_jobs() == 0
    assert ran == ["b", "second"]


def test_a_job_that_fails_retryably_is_tried_again_then_given_up(tmp_path: Path) -> None:
    tries: list[int] = []

    def slack_down() -> None:
        tries.append(1)
        raise RetryableDeliveryError("slack is down")

    def refused() -> None:
        tries.append(2)
        raise PermanentDeliveryError("message_not_found")

    d = Dispatcher(AlertLedger(tmp_path / "l.sqlite"), [])
    d.submit("down", slack_down)
    d.submit("refused", refused)
    assert d.run_jobs() == 1  # the refused one is dropped at once
    while d.run_jobs():
        pass
    assert tries.count(1) == JOB_TRIES and tries.count(2) == 1
