"""A local stand-in for the Slack Web API and Slack incoming webhooks.

The Slack sink talks to Slack through the real ``slack_sdk`` clients. Tests and the demo need
that path exercised end to end (message formatting, threads, metadata, retries during an
outage) without a workspace, a token or the network. This package serves just enough of
Slack's HTTP surface on localhost for ``WebClient(base_url=...)`` and ``WebhookClient(url=...)``
to run unmodified, records what arrives, and can be told to fail so outages can be rehearsed.

Faults come in the shapes a client has to tell apart: a request refused before Slack did
anything (``fail_next``), and one Slack carried out but whose answer was lost: an error,
a stall past the client's timeout or a closed connection after the message was stored
(``fail_next(..., after_store=True)``, ``stall_next``, ``cut_next``). Reads page like
Slack's (``response_metadata.next_cursor``), with a page size tests can make small.

The emulator is :class:`SlackEmulator` (``server.py``: HTTP, lifecycle, the fault API); what
it stores and how the Web API methods answer is ``workspace.py``, the files uploaded as
``files_upload_v2`` uploads them ``uploads.py``; the faults it can inject are ``faults.py``.
"""

from lab.slack.server import SlackEmulator, main
from lab.slack.workspace import (
    BOT_ID,
    BOT_USER_ID,
    TEAM_ID,
    WEBHOOK_CHANNEL,
    WEBHOOK_PATH,
    Message,
)

__all__ = [
    "BOT_ID",
    "BOT_USER_ID",
    "TEAM_ID",
    "WEBHOOK_CHANNEL",
    "WEBHOOK_PATH",
    "Message",
    "SlackEmulator",
    "main",
]
