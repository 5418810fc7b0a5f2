"""The dispatcher: jobs run once per key and tried again; slow sinks served a few at a time."""

from __future__ import annotations

from pathlib import Path

from detectors import Alert, AlertStatus, Severity
from sinks import AlertLedger, DeliverySink, PermanentDeliveryError, RetryableDeliveryError
from sinks.base import Transition
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


class Receiver(DeliverySink):
    """Records what it got, and when: one shared log for every receiver of a test."""

    def __init__(self, name: str, log: list[str], per_pass: int | None = None) -> None:
        self.name, self.log, self.per_pass = name, log, per_pass

    def send(self, t: Transition) -> None:
        self.log.append(f"{self.name}:{t.alert.alert_id}")


def _firing(alert_id: str) -> Alert:
    return Alert(
        alert_id=alert_id,
        detector="checkpoint_failures",
        entity=f"job:{alert_id}",
        status=AlertStatus.FIRING,
        severity=Severity.WARNING,
        event_time_ms=1_700_000_000_000,
        summary="3 checkpoints expired",
    )


def test_a_sink_served_one_at_a_time_lets_a_new_page_past_its_queue(tmp_path: Path) -> None:
    # Charts are seconds of work each: a page recorded while three wait must go out after
    # one of them, not after all three.
    got: list[str] = []
    ledger = AlertLedger(tmp_path / "l.sqlite")
    page, chart = Receiver("page", got), Receiver("chart", got, per_pass=1)
    d = Dispatcher(ledger, [page, chart])
    ledger.record(0, [_firing("a"), _firing("b"), _firing("c")], [page, chart])
    assert d.drain_once() is False  # two charts still wait
    assert got == ["page:a", "page:b", "page:c", "chart:a"]
    ledger.record(1, [_firing("d")], [page, chart])
    assert d.drain_once() is False
    assert got[4:] == ["page:d", "chart:b"]
    while not d.drain_once():
        pass
    assert got[6:] == ["chart:c", "chart:d"]
    assert d.backlog == {"page": 0, "chart": 0}
