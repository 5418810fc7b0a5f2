"""The Slack emulator, driven by the real slack_sdk clients."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
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

TOKEN = "xoxb-test-token"
BLOCKS = [{"type": "section", "text": {"type": "mrkdwn", "text": "*checkpoint expired* job-a"}}]
METADATA = {
    "event_type": "flinkwatch_alert",
    "event_payload": {"alert_id": "a1", "status": "firing"},
}


@pytest.fixture
def seen() -> list[dict[str, Any]]:
    return []


@pytest.fixture
def emulator(seen: list[dict[str, Any]]) -> Iterator[SlackEmulator]:
    with SlackEmulator(token=TOKEN, channels=("#alerts", "ops"), on_message=seen.append) as emu:
        yield emu


@pytest.fixture
def client(emulator: SlackEmulator) -> WebClient:
    # No retry handlers at all: each test adds the ones it exercises.
    return WebClient(token=TOKEN, base_url=emulator.base_url, retry_handlers=[])


def admin(emulator: SlackEmulator, path: str, body: dict[str, Any] | None = None) -> Any:
    url = emulator.base_url.replace("/api/", f"/_admin/{path}")
    data = None if body is None else json.dumps(body).encode()
    with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=5) as resp:
        return json.loads(resp.read())


def test_urls_and_lifecycle() -> None:
    emu = SlackEmulator()
    with pytest.raises(RuntimeError):
        _ = emu.base_url
    with emu:
        assert emu.base_url == f"http://127.0.0.1:{emu.port}/api/"
        assert emu.webhook_url == f"http://127.0.0.1:{emu.port}/services/T000/B000/XXXX"
        assert WebClient(token="xoxb-flinkwatch-local", base_url=emu.base_url).auth_test()["ok"]
    emu.stop()  # idempotent


def test_auth_test(client: WebClient) -> None:
    resp = client.auth_test()
    assert resp["ok"] is True
    assert resp["team_id"] == "T000"
    assert resp["user_id"].startswith("U")


def test_post_update_thread_history_replies(
    client: WebClient, emulator: SlackEmulator, seen: list[dict[str, Any]]
) -> None:
    posted = client.chat_postMessage(
        channel="#alerts", text="job-a: checkpoints expiring", blocks=BLOCKS, metadata=METADATA
    )
    assert posted["channel"] == "C0000001"
    parent_ts = posted["ts"]
    assert posted["message"]["blocks"] == BLOCKS
    assert posted["message"]["metadata"] == METADATA

    updated = client.chat_update(channel="C0000001", ts=parent_ts, text="job-a: RESOLVED")
    assert updated["ts"] == parent_ts
    assert updated["message"]["text"] == "job-a: RESOLVED"
    assert updated["message"]["blocks"] == BLOCKS  # left out of the update, so kept
    assert "edited" in updated["message"]

    reply = client.chat_postMessage(
        channel="alerts", text="escalated to critical", thread_ts=parent_ts
    )
    assert float(reply["ts"]) > float(parent_ts)
    other = client.chat_postMessage(channel="#alerts", text="job-b: heap growing")

    plain = client.conversations_history(channel="C0000001")
    assert [m["ts"] for m in plain["messages"]] == [other["ts"], parent_ts]  # newest first
    assert plain["has_more"] is False
    assert all("metadata" not in m for m in plain["messages"])
    assert plain["messages"][1]["reply_count"] == 1

    with_meta = client.conversations_history(
        channel="#alerts", include_all_metadata=True, limit=1, oldest=parent_ts
    )
    assert [m["ts"] for m in with_meta["messages"]] == [other["ts"]]
    assert with_meta["has_more"] is False  # parent_ts itself is excluded: oldest is exclusive
    full = client.conversations_history(channel="#alerts", include_all_metadata=True)
    assert full["messages"][1]["metadata"] == METADATA

    thread = client.conversations_replies(
        channel="#alerts", ts=parent_ts, include_all_metadata=True
    )
    assert [m["text"] for m in thread["messages"]] == ["job-a: RESOLVED", "escalated to critical"]
    assert thread["messages"][0]["metadata"] == METADATA
    assert thread["messages"][1]["thread_ts"] == parent_ts

    stored = emulator.messages("#alerts")
    assert [m["text"] for m in stored] == ["job-a: RESOLVED", "job-b: heap growing"]
    assert stored[0]["updates"] == 1
    assert stored[0]["edited"][0]["text"] == "job-a: checkpoints expiring"
    assert stored[0]["replies"][0]["text"] == "escalated to critical"
    assert stored[0]["channel_name"] == "alerts"
    assert emulator.messages("ops") == []
    assert [m["text"] for m in seen] == [
        "job-a: checkpoints expiring",
        "escalated to critical",
        "job-b: heap growing",
    ]


def test_api_errors(client: WebClient, emulator: SlackEmulator) -> None:
    with pytest.raises(SlackApiError) as err:
        client.chat_postMessage(channel="#nope", text="x")
    assert err.value.response["error"] == "channel_not_found"
    with pytest.raises(SlackApiError) as err:
        client.chat_postMessage(channel="#alerts", text="x", thread_ts="1.000001")
    assert err.value.response["error"] == "thread_not_found"
    with pytest.raises(SlackApiError) as err:
        client.chat_update(channel="#alerts", ts="1.000001", text="x")
    assert err.value.response["error"] == "message_not_found"
    with pytest.raises(SlackApiError) as err:
        client.api_call("chat.doesNotExist")
    assert err.value.response["error"] == "unknown_method"
    assert err.value.response.status_code == 200
    with pytest.raises(SlackApiError) as err:
        WebClient(
            token="xoxb-wrong", base_url=emulator.base_url, retry_handlers=[]
        ).chat_postMessage(channel="#alerts", text="x")
    assert err.value.response["error"] == "invalid_auth"
    assert emulator.messages() == []


def test_form_encoded_json_strings(client: WebClient, emulator: SlackEmulator) -> None:
    # Raw api_call params are form-encoded; Slack accepts blocks/metadata as JSON strings there.
    params = {
        "channel": "C0000002",
        "text": "form",
        "blocks": json.dumps(BLOCKS),
        "metadata": json.dumps(METADATA),
    }
    client.api_call("chat.postMessage", params=params)
    (stored,) = emulator.messages("ops")
    assert stored["blocks"] == BLOCKS
    assert stored["metadata"] == METADATA


def test_webhook(emulator: SlackEmulator) -> None:
    hook = WebhookClient(url=emulator.webhook_url, retry_handlers=[])
    resp = hook.send(text="from webhook", blocks=BLOCKS)
    assert (resp.status_code, resp.body) == (200, "ok")
    assert hook.send_dict({}).status_code == 400
    assert (
        WebhookClient(url=emulator.webhook_url.replace("XXXX", "YYYY")).send(text="x").status_code
        == 404
    )
    (stored,) = emulator.webhook_messages()
    assert stored["text"] == "from webhook"
    assert stored["blocks"] == BLOCKS
    assert stored["channel"] == "webhook"


def test_webhook_takes_a_message_of_attachments_alone(emulator: SlackEmulator) -> None:
    # What Alertmanager's Slack receiver sends: no top-level text.
    hook = WebhookClient(url=emulator.webhook_url, retry_handlers=[])
    resp = hook.send_dict(
        {"channel": "#x", "attachments": [{"title": "[FIRING:1] A", "text": "job_id=7f"}]}
    )
    assert (resp.status_code, resp.body) == (200, "ok")
    assert hook.send_dict({"attachments": "x"}).status_code == 400
    (stored,) = emulator.webhook_messages()
    assert stored["text"] == "[FIRING:1] A\njob_id=7f"


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
    assert bad.value.code == 400


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
    assert bad.value.code == 400


@pytest.fixture
def small_pages() -> Iterator[SlackEmulator]:
    with SlackEmulator(token=TOKEN, channels=("#alerts",), max_page=2) as emu:
        yield emu


def test_history_pages_follow_the_cursor_and_new_posts_shift_nothing(
    small_pages: SlackEmulator,
) -> None:
    client = WebClient(token=TOKEN, base_url=small_pages.base_url, retry_handlers=[])
    for i in range(5):
        client.chat_postMessage(channel="#alerts", text=f"m{i}")
    first = client.conversations_history(channel="C0000001", limit=200)
    assert [m["text"] for m in first["messages"]] == ["m4", "m3"]  # capped at max_page
    assert first["has_more"] is True
    client.chat_postMessage(channel="#alerts", text="newer")  # lands before the cursor
    texts = [m["text"] for m in first["messages"]]
    cursor = first["response_metadata"]["next_cursor"]
    while cursor:
        page = client.conversations_history(channel="C0000001", limit=200, cursor=cursor)
        texts += [m["text"] for m in page["messages"]]
        cursor = page["response_metadata"]["next_cursor"]
    assert texts == ["m4", "m3", "m2", "m1", "m0"]
    with pytest.raises(SlackApiError) as err:
        client.conversations_history(channel="C0000001", cursor="bm9wZQ==")
    assert err.value.response["error"] == "invalid_cursor"


def test_thread_replies_page_oldest_first(small_pages: SlackEmulator) -> None:
    client = WebClient(token=TOKEN, base_url=small_pages.base_url, retry_handlers=[])
    root = client.chat_postMessage(channel="#alerts", text="root")["ts"]
    for i in range(3):
        client.chat_postMessage(channel="#alerts", text=f"r{i}", thread_ts=root)
    pages = []
    cursor = None
    while cursor != "":
        page = client.conversations_replies(channel="C0000001", ts=root, cursor=cursor)
        pages.append([m["text"] for m in page["messages"]])
        cursor = page["response_metadata"]["next_cursor"]
    assert pages == [["root", "r0"], ["r1", "r2"]]


def test_channel_info_and_list_show_archived_and_membership() -> None:
    with SlackEmulator(
        token=TOKEN, channels=("#alerts",), archived=("#old",), without_bot=("#ops",), max_page=2
    ) as emu:
        client = WebClient(token=TOKEN, base_url=emu.base_url, retry_handlers=[])
        info = client.conversations_info(channel="C0000002")["channel"]
        assert (info["name"], info["is_archived"], info["is_member"]) == ("old", True, True)
        ops = client.conversations_info(channel="C0000003")["channel"]
        assert (ops["is_archived"], ops["is_member"]) == (False, False)
        with pytest.raises(SlackApiError) as err:
            client.conversations_info(channel="#alerts")  # ids only, as in Slack
        assert err.value.response["error"] == "channel_not_found"
        names, cursor = [], None
        while cursor != "":
            page = client.conversations_list(limit=100, cursor=cursor)
            names += [c["name"] for c in page["channels"]]
            cursor = page["response_metadata"]["next_cursor"]
        assert names == ["alerts", "old", "ops"]
        live = client.conversations_list(exclude_archived=True)["channels"]
        assert [c["name"] for c in live] == ["alerts", "ops"]
        for channel, error in (("#old", "is_archived"), ("#ops", "not_in_channel")):
            with pytest.raises(SlackApiError) as err:
                client.chat_postMessage(channel=channel, text="x")
            assert err.value.response["error"] == error
        with pytest.raises(SlackApiError) as err:
            client.conversations_history(channel="C0000003")
        assert err.value.response["error"] == "not_in_channel"
        assert client.conversations_history(channel="C0000002")["ok"]  # archived: still readable
        assert emu.messages() == []


def test_a_token_without_a_scope_gets_missing_scope() -> None:
    with SlackEmulator(token=TOKEN, scopes=("chat:write",)) as emu:
        client = WebClient(token=TOKEN, base_url=emu.base_url, retry_handlers=[])
        assert client.chat_postMessage(channel="#alerts", text="x")["ok"]
        assert client.auth_test()["ok"]
        with pytest.raises(SlackApiError) as err:
            client.conversations_info(channel="C0000001")
        assert err.value.response["error"] == "missing_scope"
        assert err.value.response["needed"] == "channels:read"
        emu.set_scopes(("chat:write", "channels:read"))  # an admin added the scope
        assert client.conversations_info(channel="C0000001")["ok"]
        emu.set_scopes(None)
        assert client.conversations_history(channel="C0000001")["ok"]


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


def test_usergroups_users_list_lists_a_groups_members_as_set() -> None:
    with SlackEmulator(token=TOKEN, scopes=("chat:write",)) as emu:
        client = WebClient(token=TOKEN, base_url=emu.base_url, retry_handlers=[])
        emu.set_usergroup("S0ONCALL", ("U0ANA", "U0BEN"))
        with pytest.raises(SlackApiError) as err:
            client.usergroups_users_list(usergroup="S0ONCALL")
        assert err.value.response["needed"] == "usergroups:read"
        emu.set_scopes(None)
        assert client.usergroups_users_list(usergroup="S0ONCALL")["users"] == ["U0ANA", "U0BEN"]
        emu.set_usergroup("S0ONCALL", None)
        with pytest.raises(SlackApiError) as err:
            client.usergroups_users_list(usergroup="S0ONCALL")
        assert err.value.response["error"] == "no_such_subteam"
