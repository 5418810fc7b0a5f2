"""Slack's side of interactivity: a user pressing a button, sent as Slack sends it.

Slack posts a press to the app's request URL as a form-encoded ``payload=<JSON>`` of type
``block_actions`` and signs it with the app's signing secret: ``X-Slack-Signature`` is
``v0=`` and the hex HMAC-SHA256 of ``v0:{timestamp}:{body}``, ``X-Slack-Request-Timestamp``
the timestamp (<https://api.slack.com/authentication/verifying-requests-from-slack>).
The signature is computed here with :mod:`hmac`, not with slack-sdk, so a mistake in how
flinkwatch uses slack-sdk's verifier cannot hide behind the same mistake on this side.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlencode

from lab.slack.workspace import TEAM_ID, Message

#: The app id presses carry.
APP_ID = "A0FLINKWATCH"


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """Slack's v0 request signature of ``body`` sent at ``timestamp``."""
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def find_button(message: Message, action_id: str) -> tuple[str, dict[str, Any]]:
    """The ``block_id`` and the button with ``action_id`` on a message.

    Raises:
        LookupError: the message has no such button (a user cannot press it).
    """
    for block in message.get("blocks") or []:
        if block.get("type") != "actions":
            continue
        for element in block.get("elements", []):
            if element.get("action_id") == action_id:
                return str(block.get("block_id", "")), element
    msg = f"message {message['ts']} has no button {action_id!r}"
    raise LookupError(msg)


def block_actions(
    message: Message,
    view: dict[str, Any],
    action_id: str,
    user: str,
    action_ts: str,
    response_url: str,
    *,
    team: str = TEAM_ID,
    user_team: str | None = None,
    enterprise: str | None = None,
    enterprise_install: bool = False,
) -> dict[str, Any]:
    """The ``block_actions`` payload of ``user`` pressing ``action_id`` on ``message``.

    Args:
        message: The stored message (for its channel and blocks).
        view: The message as the Web API shows it (what Slack puts in the payload).
        action_id: The button pressed.
        user: The presser's user id.
        action_ts: When (Slack's ``action_ts``: seconds with microseconds).
        response_url: Where the app may answer the presser.
        team: The workspace the press comes from (``team.id``).
        user_team: The presser's own workspace (``user.team_id``; default ``team``): a
            Slack Connect user of another organisation has another.
        enterprise: The Enterprise Grid organisation's id (``enterprise.id``); None: none.
        enterprise_install: Whether the app is installed for the whole organisation.
    """
    block_id, button = find_button(message, action_id)
    home = team if user_team is None else user_team
    return {
        "type": "block_actions",
        "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": home},
        "api_app_id": APP_ID,
        "token": "legacy-verification-token-unused",
        "container": {
            "type": "message",
            "message_ts": message["ts"],
            "channel_id": message["channel"],
            "is_ephemeral": False,
        },
        "trigger_id": f"{action_ts}.{user}",
        "team": {"id": team, "domain": "flinkwatch-local" if team == TEAM_ID else team.lower()},
        "enterprise": None if enterprise is None else {"id": enterprise, "name": enterprise},
        "is_enterprise_install": enterprise_install,
        "channel": {"id": message["channel"], "name": message["channel_name"]},
        "message": view,
        "state": {"values": {}},
        "response_url": response_url,
        "actions": [
            {
                "action_id": action_id,
                "block_id": block_id,
                "text": button.get("text"),
                "value": button.get("value"),
                "style": button.get("style"),
                "type": "button",
                "action_ts": action_ts,
            }
        ],
    }


def deliver(
    url: str, payload: dict[str, Any], secret: str, timestamp: str, timeout_s: float = 10.0
) -> tuple[int, str]:
    """Post a payload to a request URL as Slack does; (HTTP status, body) of the answer."""
    body = urlencode({"payload": json.dumps(payload)}).encode()
    request = urllib.request.Request(  # noqa: S310 - the test's own http:// request URL
        url,
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "X-Slack-Request-Timestamp": timestamp,
            "X-Slack-Signature": sign(secret, timestamp, body),
            "User-Agent": "Slackbot 1.0 (+https://api.slack.com/robots)",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as resp:  # noqa: S310
            return int(resp.status), resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode("utf-8", "replace")
