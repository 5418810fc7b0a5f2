"""What the emulator stores and how its Web API methods answer (``lab/slack/workspace.py``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from slack_sdk import WebClient, WebhookClient
from slack_sdk.errors import SlackApiError

from lab.slack import SlackEmulator
from tests.lab.slack.helpers import BLOCKS, METADATA, TOKEN


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
