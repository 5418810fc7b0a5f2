"""The sinks drained inside the micro-batch: a failing one is counted, backed off and never raised."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from sinks import AlertLedger, DeliverySink, Transition
from sinks.besteffort import BestEffort
from tests.sinks.ledger.helpers import alert


class Disk(DeliverySink):
    """The alert file's stand-in: a volume that can be full."""

    name = "file"

    def __init__(self) -> None:
        self.full = False
        self.written: list[str] = []

    def send(self, t: Transition) -> None:
        if self.full:
            raise OSError(28, "No space left on device")
        self.written.append(t.key)


def test_a_failing_sink_is_counted_backed_off_and_written_in_order_once_it_can_be(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    now = [0.0]
    health = BestEffort(clock=lambda: now[0], backoff_s=1.0, max_backoff_s=4.0, log_every_s=60.0)
    ledger, disk = AlertLedger(tmp_path / "l.sqlite"), Disk()
    disk.full = True
    ledger.record(0, [alert("a")], [disk])
    health.deliver(ledger, [disk])  # never raises
    assert health.errors["file"] == 1 and health.failing("file")
    health.deliver(ledger, [disk])  # backing off: not tried again yet
    assert health.errors["file"] == 1
    now[0] = 1.0
    health.deliver(ledger, [disk])
    assert health.errors["file"] == 2
    assert len([r for r in caplog.records if r.levelno == logging.ERROR]) == 1  # once a minute

    disk.full = False
    ledger.record(1, [alert("b")], [disk])
    now[0] = 3.0
    health.deliver(ledger, [disk])
    assert disk.written == ["a:firing", "b:firing"]
    assert not health.failing("file")
    assert "written again after 3 s of failures" in caplog.text


def test_a_later_line_says_how_many_failures_it_stands_for(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    now = [0.0]
    health = BestEffort(clock=lambda: now[0], backoff_s=0.5, max_backoff_s=0.5, log_every_s=2.0)
    ledger, disk = AlertLedger(tmp_path / "l.sqlite"), Disk()
    disk.full = True
    ledger.record(0, [alert("a")], [disk])
    for step in range(5):
        now[0] = step * 0.5
        health.deliver(ledger, [disk])
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 2  # five failures: at 0 s, and at 2 s for the four since
    assert "No space left on device" in errors[0]
    assert errors[1].endswith("; 4 more failure(s) since the last line")


def test_a_failure_delivered_elsewhere_is_counted_too() -> None:
    health = BestEffort()
    health.count("slack", RuntimeError("HTTP 503"))
    assert health.errors["slack"] == 1 and not health.failing("slack")
