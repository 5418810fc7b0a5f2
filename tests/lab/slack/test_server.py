"""The emulator itself (``lab/slack/server.py``): its URLs and lifecycle, the admin API."""

from __future__ import annotations

import urllib.error

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from lab.slack import SlackEmulator
from tests.lab.slack.helpers import METADATA, TOKEN, admin


def test_urls_and_lifecycle() -> None:
    emu = SlackEmulator()
    with pytest.raises(RuntimeError):
        _ = emu.base_url
    with emu:
        assert emu.base_url == f"http://127.0.0.1:{emu.port}/api/"
        assert emu.webhook_url == f"http://127.0.0.1:{emu.port}/services/T000/B000/XXXX"
        assert WebClient(token="xoxb-flinkwatch-local", base_url=emu.base_url).auth_test()["ok"]
    emu.stop()  # idempotent


def test_admin_api(client: WebClient, emulator: SlackEmulator) -> None:
    assert admin(
        emulator, "fail", {"count": 1, "status": 429, "retry_after": 3, "path_prefix": "/api/chat"}
    ) == {"ok": True}
    with pytest.raises(SlackApiError) as err:
        client.chat_postMessage(channel="#alerts", text="x")
    assert err.value.response.headers["Retry-After"] == "3"

    assert admin(emulator, "down", {"down": True}) == {"ok": True}
    with pytest.raises(SlackApiError):
        client.auth_test()
    admin(emulator, "down", {"down": False})

    posted = client.chat_postMessage(channel="#alerts", text="kept", metadata=METADATA)
    client.chat_update(channel="#alerts", ts=posted["ts"], text="kept, edited")
    client.chat_postMessage(channel="#alerts", text="reply", thread_ts=posted["ts"])
    (message,) = admin(emulator, "messages")
    assert message["channel"] == "C0000001"
    assert message["channel_name"] == "alerts"
    assert message["ts"] == posted["ts"]
    assert message["text"] == "kept, edited"
    assert message["metadata"] == METADATA
    assert message["updates"] == 1
    assert [e["text"] for e in message["edited"]] == ["kept"]
    assert message["replies"][0]["thread_ts"] == posted["ts"]

    log = admin(emulator, "requests")
    assert [(e["method"], e["path"], e["status"]) for e in log[:2]] == [
        ("POST", "/api/chat.postMessage", 429),
        ("POST", "/api/auth.test", 503),
    ]
    assert all(isinstance(e["time"], float) for e in log)

    with pytest.raises(urllib.error.HTTPError) as bad:
        admin(emulator, "fail", {"count": 1, "status": 200})
    bad.value.close()
    assert bad.value.code == 400


def test_stall_and_store_faults_through_the_admin_api(emulator: SlackEmulator) -> None:
    admin(emulator, "stall", {"seconds": 3, "path_prefix": "/api/chat"})
    admin(emulator, "fail", {"status": 503, "after_store": True})
    impatient = WebClient(token=TOKEN, base_url=emulator.base_url, timeout=1, retry_handlers=[])
    with pytest.raises(TimeoutError):
        impatient.chat_postMessage(channel="#alerts", text="one")
    with pytest.raises(SlackApiError):
        impatient.chat_postMessage(channel="#alerts", text="two")
    assert [m["text"] for m in emulator.messages("#alerts")] == ["one", "two"]
    with pytest.raises(urllib.error.HTTPError) as bad:
        admin(emulator, "stall", {"count": 1})
    bad.value.close()
    assert bad.value.code == 400
