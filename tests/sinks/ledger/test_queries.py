"""The ledger's queries: deliveries listed by state, and failed ones sent again."""

from __future__ import annotations

from pathlib import Path

from sinks import (
    AlertLedger,
)
from sinks.dispatch import deliver
from tests.sinks.ledger.helpers import Sink, alert


def test_deliveries_are_listed_by_state_and_failed_ones_can_be_sent_again(
    tmp_path: Path,
) -> None:
    ledger, slack, file = AlertLedger(tmp_path / "l.sqlite"), Sink("slack"), Sink("file", False)
    slack.refuse = {"a:firing", "b:firing"}
    ledger.record(0, [alert("a"), alert("b"), alert("c")], [slack, file])
    deliver(ledger, slack)
    deliver(ledger, file)
    failed = ledger.deliveries(["failed"])
    assert [(d.seq, d.sink, d.state, d.attempts) for d in failed] == [
        (1, "slack", "failed", 1),
        (2, "slack", "failed", 1),
    ]
    assert failed[0].key == "a:firing" and failed[0].alert.summary == "3 checkpoints expired"
    assert failed[0].error == "channel_not_found"
    assert len(ledger.deliveries()) == 6  # every state

    slack.refuse = set()
    assert ledger.resend([1, 3]) == [(1, "slack")]  # seq 3 was delivered: left alone
    assert ledger.counts()[("slack", "pending")] == 1
    assert deliver(ledger, slack) == 0
    assert slack.sent == ["c:firing", "a:firing"]
    assert ledger.resend(None) == [(2, "slack")]  # every failed one
    assert ledger.resend(None) == []


def test_every_state_is_listed_the_stale_one_included(tmp_path: Path) -> None:
    now = 1_700_000_000_000 + 86_400_000
    ledger, slack = AlertLedger(tmp_path / "l.sqlite", clock=lambda: now), Sink("slack")
    ledger.record(0, [alert("old")], [slack], max_age_ms=3_600_000)
    assert [(d.key, d.state) for d in ledger.deliveries()] == [("old:firing", "stale")]
    assert ledger.resend(None) == []  # stale is not failed: never paged by resend
