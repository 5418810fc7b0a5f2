"""A press as Slack sends it (``lab/slack/interactivity.py``): signed, shaped, posted."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

import pytest
from slack_sdk import WebClient
from slack_sdk.signature import SignatureVerifier

from lab.slack import TEAM_ID, Message, SlackEmulator
from lab.slack.interactivity import APP_ID, block_actions, deliver, find_button, sign
from tests.lab.slack.helpers import TOKEN

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
BUTTONS = [
    {"type": "section", "text": {"type": "mrkdwn", "text": "*checkpoint expired* job-a"}},
    {
        "type": "actions",
        "block_id": "incident",
        "elements": [
            {
                "type": "button",
                "action_id": "ack",
                "text": {"type": "plain_text", "text": "Acknowledge"},
                "value": "inc-1",
            },
            {
                "type": "button",
                "action_id": "noise",
                "text": {"type": "plain_text", "text": "Resolve as noise"},
                "value": "inc-1",
                "style": "danger",
            },
        ],
    },
]


@pytest.fixture
def posted(emulator: SlackEmulator) -> tuple[Message, dict[str, Any]]:
    """A message with two buttons, as stored and as the Web API shows it."""
    client = WebClient(token=TOKEN, base_url=emulator.base_url, retry_handlers=[])
    client.chat_postMessage(channel="#alerts", text="job-a: checkpoints expiring", blocks=BUTTONS)
    (message,) = emulator.messages("#alerts")
    view = client.conversations_history(channel=message["channel"])["messages"][0]
    return message, view


def test_the_signature_is_the_one_slack_sdk_verifies() -> None:
    body = b'payload={"type":"block_actions"}'
    stamp = str(int(time.time()))
    verifier = SignatureVerifier(SECRET)
    assert verifier.is_valid(body, stamp, sign(SECRET, stamp, body))
    assert not verifier.is_valid(body, stamp, sign("another secret", stamp, body))
    assert not verifier.is_valid(body + b" ", stamp, sign(SECRET, stamp, body))


def test_a_button_is_found_by_its_action_id_and_a_missing_one_refused(
    posted: tuple[Message, dict[str, Any]],
) -> None:
    message, _ = posted
    block_id, button = find_button(message, "noise")
    assert (block_id, button["value"], button["style"]) == ("incident", "inc-1", "danger")
    with pytest.raises(LookupError, match="has no button 'silence'"):
        find_button(message, "silence")


def test_a_press_names_the_presser_the_message_and_the_button(
    posted: tuple[Message, dict[str, Any]],
) -> None:
    message, view = posted
    payload = block_actions(message, view, "ack", "U0ANA", "1795400000.000100", "http://r/1")
    assert payload["type"] == "block_actions" and payload["api_app_id"] == APP_ID
    assert payload["user"]["id"] == "U0ANA" and payload["user"]["team_id"] == TEAM_ID
    assert payload["team"]["id"] == TEAM_ID and payload["enterprise"] is None
    assert payload["container"]["message_ts"] == message["ts"]
    assert payload["channel"] == {"id": message["channel"], "name": "alerts"}
    assert payload["message"] == view and payload["response_url"] == "http://r/1"
    (action,) = payload["actions"]
    assert (action["action_id"], action["block_id"], action["value"]) == (
        "ack",
        "incident",
        "inc-1",
    )
    assert action["action_ts"] == "1795400000.000100"


def test_a_press_from_another_organisation_says_so(
    posted: tuple[Message, dict[str, Any]],
) -> None:
    message, view = posted
    payload = block_actions(
        message,
        view,
        "ack",
        "U0BEN",
        "1.0",
        "http://r/1",
        user_team="T0OTHER",
        enterprise="E0GRID",
        enterprise_install=True,
    )
    assert payload["user"]["team_id"] == "T0OTHER" and payload["team"]["id"] == TEAM_ID
    assert payload["enterprise"] == {"id": "E0GRID", "name": "E0GRID"}
    assert payload["is_enterprise_install"] is True


@pytest.fixture
def request_url() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A local request URL that keeps what it is sent; a press of ``noise`` gets HTTP 403."""
    got: list[dict[str, Any]] = []

    class App(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - name fixed by BaseHTTPRequestHandler
            body = self.rfile.read(int(self.headers["Content-Length"]))
            got.append({"headers": dict(self.headers), "body": body})
            payload = json.loads(parse_qs(body.decode())["payload"][0])
            status = 403 if payload["actions"][0]["action_id"] == "noise" else 200
            self.send_response(status)
            self.end_headers()
            self.wfile.write(b"refused" if status == 403 else b"")

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - base signature
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), App)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/slack/actions", got
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_a_press_is_posted_form_encoded_and_signed_and_the_answer_returned(
    posted: tuple[Message, dict[str, Any]], request_url: tuple[str, list[dict[str, Any]]]
) -> None:
    message, view = posted
    url, got = request_url
    stamp = str(int(time.time()))
    payload = block_actions(message, view, "ack", "U0ANA", "1.0", "http://r/1")
    assert deliver(url, payload, SECRET, stamp) == (200, "")
    assert deliver(url, {**payload, "actions": [{"action_id": "noise"}]}, SECRET, stamp) == (
        403,
        "refused",
    )
    first = got[0]
    assert first["headers"]["Content-Type"] == "application/x-www-form-urlencoded"
    assert first["headers"]["X-Slack-Request-Timestamp"] == stamp
    verifier = SignatureVerifier(SECRET)
    assert verifier.is_valid(first["body"], stamp, first["headers"]["X-Slack-Signature"])
    assert json.loads(parse_qs(first["body"].decode())["payload"][0]) == payload
