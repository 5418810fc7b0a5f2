"""What the Slack emulator's tests share: the token, a message's blocks and metadata, the admin API."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from lab.slack import SlackEmulator

TOKEN = "xoxb-test-token"
BLOCKS = [{"type": "section", "text": {"type": "mrkdwn", "text": "*checkpoint expired* job-a"}}]
METADATA = {
    "event_type": "flinkwatch_alert",
    "event_payload": {"alert_id": "a1", "status": "firing"},
}


def admin(emulator: SlackEmulator, path: str, body: dict[str, Any] | None = None) -> Any:
    url = emulator.base_url.replace("/api/", f"/_admin/{path}")
    data = None if body is None else json.dumps(body).encode()
    with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=5) as resp:
        return json.loads(resp.read())
