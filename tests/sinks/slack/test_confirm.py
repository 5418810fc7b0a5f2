"""Asking Slack whether a send whose answer was lost arrived, instead of posting it again."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from detectors import AlertStatus
from lab.slack import SlackEmulator
from sinks import AlertLedger, RetryableDeliveryError, dispatch
from sinks.slack import further_channels
from tests.sinks.slack.helpers import TOKEN, alert, bot, deliver, keys, named


def test_a_copy_in_a_further_channel_cut_by_a_crash_is_found_not_posted_again(
    tmp_path: Path,
) -> None:
    with SlackEmulator(token=TOKEN, channels=("#flink-alerts", "#payments", "#platform")) as emu:
        path = tmp_path / "l.sqlite"
        ledger = AlertLedger(path)
        routes = [{"channel": "#payments", "continue": True}, {"channel": "#platform"}]
        first = bot(emu, ledger, routes=routes)
        [second] = further_channels(first)
        [t] = ledger.record(0, [named("p", "pay-etl")], [first, second])
        ledger.mark("slack:2", t.seq, "sending")
        second.send(t)  # it arrived; the process died before the ledger heard
        restarted = AlertLedger(path)
        again = bot(emu, restarted, routes=routes)
        for sink in (again, *further_channels(again)):
            assert dispatch.deliver(restarted, sink) == 0
        assert restarted.outcomes[("slack:2", "confirmed")] == 1
        assert keys(emu.messages("#platform")) == ["p:firing"]
        assert keys(emu.messages("#payments")) == ["p:firing"]


def test_after_a_crash_mid_send_the_message_is_found_by_its_metadata_not_reposted(
    slack: SlackEmulator, tmp_path: Path
) -> None:
    path = tmp_path / "l.sqlite"
    ledger = AlertLedger(path)
    sink = bot(slack, ledger)
    deliver(ledger, sink, 0, alert(alert_id="seen"))  # the channel id is known from here on
    for status in (AlertStatus.FIRING, AlertStatus.RESOLVED):
        [t] = ledger.record(1 + (status is AlertStatus.RESOLVED), [alert(status)], [sink])
        ledger.mark("slack", t.seq, "sending")
        sink.send(t)  # it arrived; the process died before the ledger heard
        restarted = AlertLedger(path)
        assert dispatch.deliver(restarted, bot(slack, restarted)) == 0
        assert restarted.outcomes[("slack", "confirmed")] == 1
    msgs = {m["metadata"]["event_payload"]["alert_id"]: m for m in slack.messages("#flink-alerts")}
    assert sorted(msgs) == ["a1", "seen"]
    assert len(msgs["a1"]["replies"]) == 1


LOST_ANSWERS: dict[str, Callable[[SlackEmulator], None]] = {
    "500": lambda emu: emu.fail_next(1, 500, path_prefix="/api/chat.postMessage", after_store=True),
    "timeout": lambda emu: emu.stall_next(1, 3.0, path_prefix="/api/chat.postMessage"),
    "cut": lambda emu: emu.cut_next(1, path_prefix="/api/chat.postMessage"),
}


@pytest.mark.parametrize("lost", LOST_ANSWERS.values(), ids=LOST_ANSWERS.keys())
def test_a_post_slack_stored_but_did_not_answer_is_confirmed_not_posted_again(
    slack: SlackEmulator, tmp_path: Path, lost: Callable[[SlackEmulator], None]
) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    sink = bot(slack, ledger, timeout_s=1)
    lost(slack)
    ledger.record(0, [alert()], [sink])
    with pytest.raises(RetryableDeliveryError):
        dispatch.deliver(ledger, sink)
    assert ledger.counts()[("slack", "sending")] == 1  # outcome unknown: not back to pending
    assert dispatch.deliver(ledger, sink) == 0
    assert keys(slack.messages("#flink-alerts")) == ["a1:firing"]
    assert ledger.outcomes[("slack", "confirmed")] == 1
    # The confirmed message is the incident's: its resolve goes into that thread.
    deliver(ledger, sink, 1, alert(AlertStatus.RESOLVED))
    [msg] = slack.messages("#flink-alerts")
    assert keys(msg["replies"]) == ["a1:resolved"]


def test_a_post_that_timed_out_before_slack_stored_it_is_sent_after_asking(
    slack: SlackEmulator, tmp_path: Path
) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    sink = bot(slack, ledger, timeout_s=1)
    slack.stall_next(1, 3.0, path_prefix="/api/chat.postMessage", after_store=False)
    ledger.record(0, [alert()], [sink])
    with pytest.raises(RetryableDeliveryError):
        dispatch.deliver(ledger, sink)
    assert dispatch.deliver(ledger, sink) == 0
    assert keys(slack.messages("#flink-alerts")) == ["a1:firing"]
    assert ledger.outcomes[("slack", "delivered")] == 1


def test_a_thread_reply_slack_stored_but_answered_500_is_not_replied_twice(
    slack: SlackEmulator, tmp_path: Path
) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    sink = bot(slack, ledger)
    deliver(ledger, sink, 0, alert())
    slack.fail_next(1, 500, path_prefix="/api/chat.postMessage", after_store=True)
    ledger.record(1, [alert(AlertStatus.RESOLVED)], [sink])
    with pytest.raises(RetryableDeliveryError):
        dispatch.deliver(ledger, sink)
    assert dispatch.deliver(ledger, sink) == 0
    [msg] = slack.messages("#flink-alerts")
    assert keys(msg["replies"]) == ["a1:resolved"]


@pytest.fixture
def busy():
    with SlackEmulator(token=TOKEN, channels=("#flink-alerts", "#flink-pager"), max_page=2) as emu:
        yield emu


def test_confirming_in_a_busy_channel_follows_the_cursor(
    busy: SlackEmulator, tmp_path: Path
) -> None:
    from slack_sdk import WebClient

    human = WebClient(token=TOKEN, base_url=busy.base_url, retry_handlers=[])
    ledger = AlertLedger(tmp_path / "l.sqlite")
    sink = bot(busy, ledger, timeout_s=1)
    busy.stall_next(1, 3.0, path_prefix="/api/chat.postMessage")
    ledger.record(0, [alert()], [sink])
    with pytest.raises(RetryableDeliveryError):
        dispatch.deliver(ledger, sink)
    for i in range(5):  # the channel moves on: flinkwatch's message is on page 3 of 3
        human.chat_postMessage(channel="#flink-alerts", text=f"chatter {i}")
    assert dispatch.deliver(ledger, sink) == 0
    assert keys(busy.messages("#flink-alerts")) == ["a1:firing"]
    reads = [p for p, _ in busy.requests if p.endswith("conversations.history")]
    assert len(reads) == 3

    # The same in a busy thread, read oldest first: the reply comes after the humans'
    # and is on page 3 of conversations.replies.
    [parent] = [m for m in busy.messages("#flink-alerts") if m.get("metadata")]
    for i in range(3):
        human.chat_postMessage(channel="#flink-alerts", text=f"on it {i}", thread_ts=parent["ts"])
    busy.fail_next(1, 500, path_prefix="/api/chat.postMessage", after_store=True)
    ledger.record(1, [alert(AlertStatus.RESOLVED)], [sink])
    with pytest.raises(RetryableDeliveryError):
        dispatch.deliver(ledger, sink)
    assert dispatch.deliver(ledger, sink) == 0
    [msg] = [m for m in busy.messages("#flink-alerts") if m["ts"] == parent["ts"]]
    assert keys(msg["replies"]) == ["a1:resolved"]
    assert len([p for p, _ in busy.requests if p.endswith("conversations.replies")]) == 3


@pytest.mark.parametrize("channel", ["#flink-alerts", "C0000001"], ids=["by-name", "by-id"])
def test_a_send_slack_will_not_let_us_look_for_waits_and_is_never_posted_twice(
    tmp_path: Path, channel: str
) -> None:
    # Without channels:read (a channel by name, not posted to yet) or channels:history
    # flinkwatch cannot tell whether a message of unknown outcome arrived: it waits, in
    # order, rather than posting it a second time, and goes on once the scope is granted.
    with SlackEmulator(token=TOKEN, channels=("#flink-alerts",), scopes=("chat:write",)) as emu:
        ledger = AlertLedger(tmp_path / "l.sqlite")
        sink = bot(emu, ledger, channel=channel, routes=[])
        emu.fail_next(1, 500, path_prefix="/api/chat.postMessage", after_store=True)
        ledger.record(0, [alert(alert_id="a"), alert(alert_id="b")], [sink])
        for _ in range(3):
            with pytest.raises(RetryableDeliveryError):
                dispatch.deliver(ledger, sink)
        assert keys(emu.messages("#flink-alerts")) == ["a:firing"]  # not sent again
        assert ledger.counts()[("slack", "sending")] == 1
        assert ledger.backlog() == {"slack": 2}  # "b" waits behind it
        [waiting] = ledger.deliveries(["sending"])
        assert waiting.error is not None and "missing_scope" in waiting.error
        emu.set_scopes(None)  # the workspace admin adds the scopes
        assert dispatch.deliver(ledger, sink) == 0
        assert keys(emu.messages("#flink-alerts")) == ["a:firing", "b:firing"]
        assert ledger.outcomes[("slack", "confirmed")] == 1
        assert ledger.outcomes[("slack", "resent_unconfirmed")] == 0


def test_a_search_past_the_page_limit_goes_on_at_the_next_try_instead_of_posting_again(
    busy: SlackEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from slack_sdk import WebClient

    import sinks.slack.transport

    monkeypatch.setattr(
        sinks.slack.transport, "MAX_PAGES", 2
    )  # pages of 2 (busy): 4 messages a try
    human = WebClient(token=TOKEN, base_url=busy.base_url, retry_handlers=[])
    ledger = AlertLedger(tmp_path / "l.sqlite")
    sink = bot(busy, ledger)
    deliver(ledger, sink, 0, alert(alert_id="seen"))  # the channel's id is known from here on
    busy.fail_next(1, 500, path_prefix="/api/chat.postMessage", after_store=True)
    ledger.record(1, [alert()], [sink])
    with pytest.raises(RetryableDeliveryError, match="HTTP 500"):
        dispatch.deliver(ledger, sink)
    for i in range(6):  # the channel moves on: flinkwatch's message is on page 4, newest first
        human.chat_postMessage(channel="#flink-alerts", text=f"chatter {i}")
    with pytest.raises(RetryableDeliveryError, match="next try"):
        dispatch.deliver(ledger, sink)
    assert keys(busy.messages("#flink-alerts")) == ["seen:firing", "a1:firing"]  # not again
    assert dispatch.deliver(ledger, sink) == 0
    assert keys(busy.messages("#flink-alerts")) == ["seen:firing", "a1:firing"]
    assert ledger.outcomes[("slack", "confirmed")] == 1
    # The second try went on from the first one's cursor: 2 pages, then 2 more.
    reads = [p for p, _ in busy.requests if p.endswith("conversations.history")]
    assert len(reads) == 4
