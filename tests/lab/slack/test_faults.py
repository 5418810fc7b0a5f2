"""Faults the emulator injects (``lab/slack/faults.py``), as the real slack_sdk clients meet them."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest
from slack_sdk import WebClient, WebhookClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry import builtin_handlers
from slack_sdk.http_retry.builtin_handlers import (
    RateLimitErrorRetryHandler,
    ServerErrorRetryHandler,
)
from slack_sdk.http_retry.builtin_interval_calculators import FixedValueRetryIntervalCalculator

from lab.slack import SlackEmulator
from tests.lab.slack.helpers import TOKEN, admin


def test_rate_limit_retry(
    client: WebClient, emulator: SlackEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    # slack_sdk sleeps Retry-After plus up to 1 s of jitter; drop the jitter to keep this fast.
    monkeypatch.setattr(builtin_handlers, "random", SimpleNamespace(random=lambda: 0.0))
    client.retry_handlers.append(RateLimitErrorRetryHandler(max_retry_count=1))
    emulator.fail_next(1, 429, retry_after=1)
    started = time.monotonic()
    assert client.chat_postMessage(channel="#alerts", text="after 429")["ok"]
    assert time.monotonic() - started >= 1.0
    assert emulator.requests == [("/api/chat.postMessage", 429), ("/api/chat.postMessage", 200)]
    assert len(emulator.messages("#alerts")) == 1


def test_rate_limit_without_retry_raises(client: WebClient, emulator: SlackEmulator) -> None:
    emulator.fail_next(1, 429, retry_after=7)
    with pytest.raises(SlackApiError) as err:
        client.auth_test()
    assert err.value.response.status_code == 429
    assert err.value.response.headers["Retry-After"] == "7"
    assert err.value.response["error"] == "ratelimited"


def test_server_error_retry(client: WebClient, emulator: SlackEmulator) -> None:
    fast = FixedValueRetryIntervalCalculator(0.01)
    client.retry_handlers.append(
        ServerErrorRetryHandler(max_retry_count=2, interval_calculator=fast)
    )
    emulator.fail_next(2, 500)
    assert client.chat_postMessage(channel="#alerts", text="after 500s")["ok"]
    assert [status for _, status in emulator.requests] == [500, 500, 200]
    assert len(emulator.messages()) == 1


def test_server_error_without_retry_raises(client: WebClient, emulator: SlackEmulator) -> None:
    emulator.fail_next(1, 500)
    with pytest.raises(SlackApiError) as err:
        client.chat_postMessage(channel="#alerts", text="lost")
    assert err.value.response.status_code == 500
    assert emulator.messages() == []
    assert client.chat_postMessage(channel="#alerts", text="next one works")["ok"]


def test_fault_path_prefix_and_webhook_failure(client: WebClient, emulator: SlackEmulator) -> None:
    emulator.fail_next(1, 500, path_prefix="/services")
    assert client.auth_test()["ok"]  # not matched by the prefix
    hook = WebhookClient(url=emulator.webhook_url, retry_handlers=[])
    assert hook.send(text="during outage").status_code == 500
    assert hook.send(text="after outage").status_code == 200
    assert [m["text"] for m in emulator.webhook_messages()] == ["after outage"]
    assert emulator.requests == [
        ("/api/auth.test", 200),
        ("/services/T000/B000/XXXX", 500),
        ("/services/T000/B000/XXXX", 200),
    ]


def test_set_down(client: WebClient, emulator: SlackEmulator) -> None:
    emulator.set_down(True)
    with pytest.raises(SlackApiError) as err:
        client.auth_test()
    assert err.value.response.status_code == 503
    assert (
        WebhookClient(url=emulator.webhook_url, retry_handlers=[]).send(text="x").status_code == 503
    )
    emulator.set_down(False)
    assert client.auth_test()["ok"]


def test_a_failure_after_the_store_hides_a_message_that_arrived(
    client: WebClient, emulator: SlackEmulator, seen: list[dict[str, Any]]
) -> None:
    emulator.fail_next(1, 500, path_prefix="/api/chat.postMessage", after_store=True)
    with pytest.raises(SlackApiError) as err:
        client.chat_postMessage(channel="#alerts", text="stored anyway")
    assert err.value.response.status_code == 500
    assert [m["text"] for m in emulator.messages("#alerts")] == ["stored anyway"]
    assert [m["text"] for m in seen] == ["stored anyway"]
    log = admin(emulator, "requests")
    assert [(e["status"], e["fault"]) for e in log] == [(500, "fail_after_store")]


def test_a_stall_after_the_store_times_the_client_out_on_a_stored_message(
    emulator: SlackEmulator,
) -> None:
    impatient = WebClient(token=TOKEN, base_url=emulator.base_url, timeout=1, retry_handlers=[])
    emulator.stall_next(1, 3.0, path_prefix="/api/chat.postMessage")
    with pytest.raises(TimeoutError):
        impatient.chat_postMessage(channel="#alerts", text="stored, answer lost")
    assert [m["text"] for m in emulator.messages("#alerts")] == ["stored, answer lost"]
    # A stall that does not store: the same timeout, nothing in the channel.
    emulator.stall_next(1, 3.0, path_prefix="/api/chat.postMessage", after_store=False)
    with pytest.raises(TimeoutError):
        impatient.chat_postMessage(channel="#alerts", text="never stored")
    assert len(emulator.messages("#alerts")) == 1
    assert impatient.auth_test()["ok"]  # a stall holds one answer back, not the emulator
    faults = [e["fault"] for e in admin(emulator, "requests")]
    assert faults == ["stall_after_store", "stall", None]


def test_a_cut_closes_the_connection_after_the_store(
    client: WebClient, emulator: SlackEmulator
) -> None:
    from http.client import RemoteDisconnected

    emulator.cut_next(1, path_prefix="/api/chat.postMessage")
    with pytest.raises(RemoteDisconnected):
        client.chat_postMessage(channel="#alerts", text="stored, connection cut")
    admin(emulator, "cut", {"after_store": False})
    with pytest.raises(RemoteDisconnected):
        client.chat_postMessage(channel="#alerts", text="cut before the store")
    assert [m["text"] for m in emulator.messages("#alerts")] == ["stored, connection cut"]
    assert [e["fault"] for e in admin(emulator, "requests")] == ["cut_after_store", "cut"]
