"""The emulated workspace: channels, messages, and the Web API methods and webhook on them.

Nothing here locks or knows about sockets: :class:`~lab.slack.server.SlackEmulator` holds
its lock around every call and carries the answers over HTTP.
"""

from __future__ import annotations

import base64
import copy
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from lab.slack.uploads import DOWNLOAD_PREFIX, UPLOAD_PREFIX, _Uploads

Message = dict[str, Any]
ApiMethod = Callable[[str, dict[str, Any]], dict[str, Any]]

TEAM_ID = "T000"
BOT_USER_ID = "U0FLINKWATCH"
BOT_ID = "B0FLINKWATCH"
WEBHOOK_PATH = "/services/T000/B000/XXXX"
WEBHOOK_CHANNEL = "webhook"


@dataclass
class _Reply:
    """An HTTP answer; a fault may hold it back or cut the connection instead."""

    status: int
    body: bytes
    content_type: str
    headers: dict[str, str] = field(default_factory=dict)
    #: Seconds to hold the answer back (a stall fault), outside the emulator's lock.
    stall_s: float = 0.0
    #: Close the connection instead of answering (a cut fault).
    cut: bool = False

    @classmethod
    def json(cls, payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> _Reply:
        body = json.dumps(payload).encode()
        return cls(status, body, "application/json; charset=utf-8", headers or {})

    @classmethod
    def text(cls, text: str, status: int, headers: dict[str, str] | None = None) -> _Reply:
        return cls(status, text.encode(), "text/plain; charset=utf-8", headers or {})


def _error(code: str) -> dict[str, Any]:
    # Slack reports API errors with HTTP 200; only transport trouble uses other statuses.
    return {"ok": False, "error": code}


def _flag(value: Any) -> bool:
    # Booleans arrive as JSON true, or as "1"/"true" once slack_sdk form-encodes them.
    return value is True or str(value).lower() in ("1", "true")


#: The OAuth scope each method needs, checked only when the emulator is given ``scopes``.
_SCOPES = {
    "chat.postMessage": "chat:write",
    "chat.update": "chat:write",
    "conversations.history": "channels:history",
    "conversations.replies": "channels:history",
    "conversations.info": "channels:read",
    "conversations.list": "channels:read",
    "files.getUploadURLExternal": "files:write",
    "files.completeUploadExternal": "files:write",
    "files.info": "files:read",
    "usergroups.users.list": "usergroups:read",
}
#: Methods that take no ``channel`` argument (completing an upload checks its own).
_CHANNEL_FREE = frozenset(
    {
        "auth.test",
        "conversations.list",
        "files.getUploadURLExternal",
        "files.completeUploadExternal",
        "files.info",
        "usergroups.users.list",
    }
)
#: Methods that write to a channel: refused in an archived one.
_WRITES = frozenset({"chat.postMessage", "chat.update"})


def _cursor(ts: str) -> str:
    # Opaque to clients, like Slack's (which also encodes the next message's ts).
    return base64.b64encode(f"next_ts:{ts}".encode()).decode()


def _uncursor(cursor: Any) -> float | None:
    """The ts a cursor points at; None for no cursor. Raises ValueError if it is not ours."""
    if not cursor:
        return None
    text = base64.b64decode(str(cursor), validate=True).decode()
    if not text.startswith("next_ts:"):
        msg = f"not a cursor: {cursor!r}"
        raise ValueError(msg)
    return float(text.removeprefix("next_ts:"))


def _number(value: Any, default: float) -> float:
    try:
        return float(value) if value not in (None, "") else default
    except (TypeError, ValueError):
        return default


def _parse_params(query: str, content_type: str, body: bytes) -> dict[str, Any] | None:
    """Merge query-string and body arguments the way Slack does; None if the body is bad."""
    params: dict[str, Any] = dict(parse_qsl(query, keep_blank_values=True))
    mime = content_type.split(";")[0].strip().lower()
    if not body:
        return params
    if mime == "application/json":
        try:
            data = json.loads(body)
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None
        params.update(data)
    else:
        params.update(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
    return params


def _decode_nested(params: dict[str, Any]) -> str | None:
    """Turn JSON-string blocks/metadata (form posts) into objects; return an error code if bad."""
    for key, code in (("blocks", "invalid_blocks_format"), ("metadata", "invalid_metadata_format")):
        value = params.get(key)
        if isinstance(value, str):
            try:
                params[key] = json.loads(value) if value.strip() else None
            except ValueError:
                return code
    if params.get("blocks") is not None and not isinstance(params["blocks"], list):
        return "invalid_blocks_format"
    meta = params.get("metadata")
    if meta is not None and not (
        isinstance(meta, dict)
        and isinstance(meta.get("event_type"), str)
        and isinstance(meta.get("event_payload"), dict)
    ):
        return "invalid_metadata_format"
    return None


class _Workspace:
    """Channels and their messages, served as Slack's Web API and one incoming webhook.

    Takes the arguments of the same names of :class:`~lab.slack.server.SlackEmulator`.
    """

    def __init__(
        self,
        token: str,
        channels: tuple[str, ...],
        archived: tuple[str, ...],
        without_bot: tuple[str, ...],
        scopes: tuple[str, ...] | None,
        max_page: int,
    ) -> None:
        self.token = token
        #: The workspace URL ``auth.test`` answers with; set once the server is bound.
        self.url = ""
        self._names: dict[str, str] = {}  # channel id -> bare name
        every = (*channels, *archived, *without_bot)
        for index, raw in enumerate(dict.fromkeys(c.removeprefix("#") for c in every), 1):
            self._names[f"C{index:07d}"] = raw
        self._archived = {self._id_of(c) for c in archived}
        self._without_bot = {self._id_of(c) for c in without_bot}
        self._scopes = None if scopes is None else frozenset(scopes)
        self._max_page = max_page
        self._store: dict[str, list[Message]] = {cid: [] for cid in self._names}
        self._store[WEBHOOK_CHANNEL] = []
        self._outbox: list[Message] = []
        self._last_us = 0
        #: Each press's response URL path and whom it answers (user, channel, message ts).
        self._response_urls: dict[str, dict[str, str]] = {}
        #: What the app answered presses with through their response URLs, oldest first.
        self.ephemeral: list[dict[str, Any]] = []
        self.uploads = _Uploads()
        #: User groups (``S…`` ids) and their members' user ids.
        self.usergroups: dict[str, tuple[str, ...]] = {}
        self._methods: dict[str, ApiMethod] = {
            "auth.test": self._auth_test,
            "chat.postMessage": self._post_message,
            "chat.update": self._update,
            "conversations.history": self._history,
            "conversations.replies": self._replies,
            "conversations.info": self._info,
            "conversations.list": self._list,
            "files.getUploadURLExternal": lambda _, p: self.uploads.open(p, self.url),
            "files.completeUploadExternal": self._complete_upload,
            "files.info": self._file_info,
            "usergroups.users.list": self._usergroup_users,
        }

    def set_scopes(self, scopes: tuple[str, ...] | None) -> None:
        """The token's scopes from now on; see ``SlackEmulator.set_scopes``."""
        self._scopes = None if scopes is None else frozenset(scopes)

    def _id_of(self, channel: str) -> str:
        bare = channel.removeprefix("#")
        return next(cid for cid, name in self._names.items() if name == bare)

    def messages(self, channel: str | None = None) -> list[Message]:
        """Copies of the top-level messages, oldest first; see ``SlackEmulator.messages``."""
        if channel is None:
            found = [m for msgs in self._store.values() for m in msgs]
            return copy.deepcopy(sorted(found, key=lambda m: float(m["ts"])))
        cid = WEBHOOK_CHANNEL if channel == WEBHOOK_CHANNEL else self._resolve(channel)
        if cid is None:
            raise KeyError(channel)
        return copy.deepcopy(self._store[cid])

    def pressable(self, channel: str, ts: str) -> tuple[Message, dict[str, Any]]:
        """A top-level message and its Web API view, for a user to press a button on.

        Raises:
            KeyError: no such channel or message.
        """
        cid = self._resolve(channel)
        found = None if cid is None else self._find(cid, ts)
        if found is None or found[1] is not None:
            msg = f"no top-level message {ts} in {channel}"
            raise KeyError(msg)
        return copy.deepcopy(found[0]), self._view(found[0], with_metadata=True)

    def response_url(self, path: str, user: str, channel: str, ts: str) -> None:
        """Accept answers to a press at ``path`` (its response URL), as meant for ``user``."""
        self._response_urls[path] = {"user": user, "channel": channel, "message_ts": ts}

    def take_new(self) -> list[Message]:
        """Copies of the messages stored since the last call, oldest first."""
        fresh, self._outbox = self._outbox, []
        return fresh

    def serve(
        self, method: str, path: str, query: str, content_type: str, auth: str, body: bytes
    ) -> _Reply:
        """Carry out one Web API or webhook request and answer it."""
        if path.startswith("/api/"):
            return _Reply.json(self._call_api(path[5:], query, content_type, auth, body))
        if path.startswith("/services/"):
            return self._webhook(method, path, body)
        if path.startswith("/actions/"):
            return self._respond(method, path, body)
        if path.startswith(UPLOAD_PREFIX):
            return _Reply(*self.uploads.receive(method, path, body))
        if path.startswith(DOWNLOAD_PREFIX):
            authorized = auth == f"Bearer {self.token}"
            return _Reply(*self.uploads.download(method, path, authorized))
        return _Reply.text("not_found", 404)

    def _respond(self, method: str, path: str, body: bytes) -> _Reply:
        """An app answering a press through its response URL (kept; nothing else changes).

        Only ephemeral answers that leave the message alone are taken: flinkwatch sends no
        others, and replacing the message would hide the incident's own updates.
        """
        whom = self._response_urls.get(path)
        if method != "POST" or whom is None:
            return _Reply.json(_error("invalid_response_url"), 404)
        try:
            payload = json.loads(body)
        except ValueError:
            payload = None
        if not isinstance(payload, dict) or not payload.get("text"):
            return _Reply.json(_error("no_text"), 400)
        if payload.get("response_type", "ephemeral") != "ephemeral" or payload.get(
            "replace_original"
        ) not in (False, None):
            return _Reply.json(_error("not_supported_by_emulator"), 400)
        self.ephemeral.append({**whom, "text": str(payload["text"])})
        return _Reply.json({"ok": True})

    def _call_api(
        self, name: str, query: str, content_type: str, auth: str, body: bytes
    ) -> dict[str, Any]:
        api = self._methods.get(name)
        if api is None:
            return _error("unknown_method")
        if auth != f"Bearer {self.token}":
            return _error("invalid_auth")
        params = _parse_params(query, content_type, body)
        if params is None:
            return _error("invalid_json")
        needed = _SCOPES.get(name)
        if self._scopes is not None and needed is not None and needed not in self._scopes:
            provided = ",".join(sorted(self._scopes))
            return {**_error("missing_scope"), "needed": needed, "provided": provided}
        problem = _decode_nested(params)
        if problem:
            return _error(problem)
        if name in _CHANNEL_FREE:
            return api("", params)
        cid = self._resolve(params.get("channel"))
        if cid is None:
            return _error("channel_not_found")
        if cid in self._without_bot and name != "conversations.info":
            return _error("not_in_channel")
        if cid in self._archived and name in _WRITES:
            return _error("is_archived")
        return api(cid, params)

    def _webhook(self, method: str, path: str, body: bytes) -> _Reply:
        if path != WEBHOOK_PATH:
            return _Reply.text("no_service", 404)
        if method != "POST":
            return _Reply.text("invalid_method", 405)
        try:
            payload = json.loads(body)
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            return _Reply.text("invalid_payload", 400)
        text, blocks = payload.get("text"), payload.get("blocks")
        attachments = payload.get("attachments")
        if attachments is not None and not isinstance(attachments, list):
            return _Reply.text("invalid_attachments", 400)
        # Slack takes a message of attachments alone (Alertmanager's Slack receiver sends
        # its title and text only there); their text is the message's text here.
        if not text and attachments:
            text = "\n".join(
                str(a.get(k) or "")
                for a in attachments
                if isinstance(a, dict)
                for k in ("title", "text")
                if a.get(k)
            )
        if not text and not blocks:
            return _Reply.text("no_text", 400)
        if blocks is not None and not isinstance(blocks, list):
            return _Reply.text("invalid_blocks", 400)
        self._add(WEBHOOK_CHANNEL, str(text or ""), blocks or None, None, None)
        return _Reply.text("ok", 200)

    def _next_ts(self) -> str:
        # Real-clock based so oldest/latest filters behave, but strictly increasing.
        self._last_us = max(time.time_ns() // 1000, self._last_us + 1)
        return f"{self._last_us // 1_000_000}.{self._last_us % 1_000_000:06d}"

    def _resolve(self, channel: Any) -> str | None:
        if not isinstance(channel, str):
            return None
        if channel in self._names:
            return channel
        bare = channel.removeprefix("#")
        return next((cid for cid, name in self._names.items() if name == bare), None)

    def _find(self, cid: str, ts: Any) -> tuple[Message, Message | None] | None:
        """The message with ``ts`` in channel ``cid`` and its thread parent (None if top-level)."""
        for top in self._store[cid]:
            if top["ts"] == ts:
                return top, None
            for reply in top["replies"]:
                if reply["ts"] == ts:
                    return reply, top
        return None

    def _add(
        self,
        cid: str,
        text: str,
        blocks: Any,
        metadata: Any,
        parent: Message | None,
        broadcast: bool = False,
        files: list[dict[str, Any]] | None = None,
    ) -> Message:
        message: Message = {
            "channel": cid,
            "channel_name": self._names.get(cid, cid),
            "ts": self._next_ts(),
            "text": text,
            "blocks": blocks,
            "metadata": metadata,
            "thread_ts": parent["ts"] if parent else None,
            "broadcast": broadcast and parent is not None,
            "updates": 0,
            "edited": [],
        }
        if files:
            message["files"] = files
        if parent is None:
            message["replies"] = []
            self._store[cid].append(message)
        else:
            parent["replies"].append(message)
        self._outbox.append(copy.deepcopy(message))
        return message

    @staticmethod
    def _view(message: Message, with_metadata: bool) -> dict[str, Any]:
        """A message in the shape the Web API returns it."""
        view: dict[str, Any] = {"type": "message", "user": BOT_USER_ID, "bot_id": BOT_ID}
        view.update(team=TEAM_ID, text=message["text"], ts=message["ts"])
        if message["blocks"]:
            view["blocks"] = message["blocks"]
        if message["thread_ts"]:
            view.update(thread_ts=message["thread_ts"], parent_user_id=BOT_USER_ID)
        elif message["replies"]:
            replies = message["replies"]
            view.update(thread_ts=message["ts"], reply_count=len(replies))
            view.update(reply_users=[BOT_USER_ID], latest_reply=replies[-1]["ts"])
        if message["edited"]:
            view["edited"] = {"user": BOT_USER_ID, "ts": message["edited"][-1]["edited_ts"]}
        if with_metadata and message["metadata"]:
            view["metadata"] = message["metadata"]
        if message.get("files"):
            view.update(files=message["files"], upload=True, display_as_bot=False)
        return view

    def _auth_test(self, cid: str, params: dict[str, Any]) -> dict[str, Any]:
        names = {"team": "flinkwatch-local", "user": "flinkwatch", "url": self.url}
        ids = {"team_id": TEAM_ID, "user_id": BOT_USER_ID, "bot_id": BOT_ID}
        return {"ok": True, **ids, **names, "is_enterprise_install": False}

    def _usergroup_users(self, cid: str, params: dict[str, Any]) -> dict[str, Any]:
        """``usergroups.users.list``: the user ids of one user group, as Slack lists them."""
        members = self.usergroups.get(str(params.get("usergroup", "")))
        if members is None:
            return _error("no_such_subteam")
        return {"ok": True, "users": list(members)}

    def _post_message(self, cid: str, params: dict[str, Any]) -> dict[str, Any]:
        if not params.get("text") and not params.get("blocks"):
            return _error("no_text")
        parent = None
        if params.get("thread_ts"):
            found = self._find(cid, str(params["thread_ts"]))
            if found is None:
                return _error("thread_not_found")
            parent = found[1] or found[0]  # answering a reply continues the same thread
        text = str(params.get("text") or "")
        # Form posts carry booleans as text.
        broadcast = str(params.get("reply_broadcast", "")).lower() in ("true", "1")
        message = self._add(
            cid, text, params.get("blocks"), params.get("metadata"), parent, broadcast
        )
        view = self._view(message, with_metadata=True)
        return {"ok": True, "channel": cid, "ts": message["ts"], "message": view}

    def _update(self, cid: str, params: dict[str, Any]) -> dict[str, Any]:
        found = self._find(cid, str(params.get("ts", "")))
        if found is None:
            return _error("message_not_found")
        changes = {k: params[k] for k in ("text", "blocks", "metadata") if params.get(k)}
        if not changes:
            return _error("no_text")
        message = found[0]
        previous = {k: message[k] for k in ("text", "blocks", "metadata")}
        message["edited"].append({**previous, "edited_ts": self._next_ts()})
        # Like Slack, fields left out of chat.update keep their old values.
        message.update(changes)
        message["updates"] += 1
        view = self._view(message, with_metadata=True)
        return dict(ok=True, channel=cid, ts=message["ts"], text=message["text"], message=view)

    def _page(
        self, items: list[Message], params: dict[str, Any], default: int, newest_first: bool
    ) -> dict[str, Any]:
        """The answer with one page of ``items`` (in reading order) from the cursor on.

        ``invalid_cursor`` when the cursor is not one this emulator gave out. The cursor
        names the ts of the next item, so messages posted between two pages shift nothing.
        """
        try:
            start = _uncursor(params.get("cursor"))
        except ValueError:
            return _error("invalid_cursor")
        if start is not None:
            items = [
                m
                for m in items
                if (float(m["ts"]) <= start if newest_first else float(m["ts"]) >= start)
            ]
        size = min(int(_number(params.get("limit"), default)) or default, self._max_page)
        page, rest = items[:size], items[size:]
        cursor = _cursor(rest[0]["ts"]) if rest else ""
        meta = _flag(params.get("include_all_metadata"))
        views = [self._view(m, meta) for m in page]
        more = {"has_more": bool(cursor), "response_metadata": {"next_cursor": cursor}}
        return {"ok": True, "messages": views, **more}

    def _history(self, cid: str, params: dict[str, Any]) -> dict[str, Any]:
        oldest = _number(params.get("oldest"), 0.0)
        latest = _number(params.get("latest"), float("inf"))
        inclusive = _flag(params.get("inclusive"))

        def wanted(ts: float) -> bool:
            return oldest <= ts <= latest if inclusive else oldest < ts < latest

        picked = [m for m in reversed(self._store[cid]) if wanted(float(m["ts"]))]
        return self._page(picked, params, 100, newest_first=True)

    def _replies(self, cid: str, params: dict[str, Any]) -> dict[str, Any]:
        found = self._find(cid, str(params.get("ts", "")))
        if found is None:
            return _error("thread_not_found")
        root = found[1] or found[0]
        return self._page([root, *root["replies"]], params, 1000, newest_first=False)

    def _channel(self, cid: str) -> dict[str, Any]:
        """A channel in the shape ``conversations.info``/``list`` return it."""
        return {
            "id": cid,
            "name": self._names[cid],
            "is_channel": True,
            "is_private": False,
            "is_archived": cid in self._archived,
            "is_member": cid not in self._without_bot,
        }

    def _info(self, cid: str, params: dict[str, Any]) -> dict[str, Any]:
        # Like Slack: conversations.info takes the channel id only, never a name.
        if params.get("channel") != cid:
            return _error("channel_not_found")
        return {"ok": True, "channel": self._channel(cid)}

    def _list(self, cid: str, params: dict[str, Any]) -> dict[str, Any]:
        skip_archived = _flag(params.get("exclude_archived"))
        ids = [c for c in self._names if not (skip_archived and c in self._archived)]
        try:
            start = int(base64.b64decode(str(params["cursor"])).decode().removeprefix("next:"))
        except KeyError:
            start = 0
        except ValueError:
            return _error("invalid_cursor")
        size = min(int(_number(params.get("limit"), 100)) or 100, self._max_page)
        page = ids[start : start + size]
        rest = start + size < len(ids)
        cursor = base64.b64encode(f"next:{start + size}".encode()).decode() if rest else ""
        channels = [self._channel(c) for c in page]
        return {"ok": True, "channels": channels, "response_metadata": {"next_cursor": cursor}}

    def _complete_upload(self, cid: str, params: dict[str, Any]) -> dict[str, Any]:
        """``files.completeUploadExternal``: share uploaded files as one message.

        In ``channel_id`` (or each of ``channels``), in the thread of ``thread_ts`` if
        given (a top-level message's ts: Slack's docs say never a reply's); without a
        channel the files stay private. Everything is checked before anything changes.
        """
        claimed, problem = self.uploads.claim(params.get("files"))
        if problem:
            return _error(problem)
        wanted = [str(params["channel_id"])] if params.get("channel_id") else []
        wanted += [c for c in str(params.get("channels") or "").split(",") if c]
        thread_ts = params.get("thread_ts") or None
        if thread_ts and len(wanted) != 1:
            return _error("invalid_arguments")  # a thread is in one channel
        targets: list[tuple[str, Message | None]] = []
        for name in dict.fromkeys(wanted):
            target = self._share_target(name, thread_ts)
            if isinstance(target, str):
                return _error(target)
            targets.append(target)
        self.uploads.complete(claimed)
        files = [upload for upload, _ in claimed]
        text = str(params.get("initial_comment") or "")
        for target_cid, parent in targets:
            views = [u.view(self.url, shares=False) for u in files]
            message = self._add(target_cid, text, None, None, parent, files=views)
            for upload in files:
                share = {"ts": message["ts"], "channel_name": self._names[target_cid]}
                if parent is not None:
                    share["thread_ts"] = parent["ts"]
                upload.shares.setdefault(target_cid, []).append(share)
        return {"ok": True, "files": [u.view(self.url) for u in files]}

    def _share_target(self, channel: str, thread_ts: Any) -> tuple[str, Message | None] | str:
        """The channel id and thread parent to share into, or the error code."""
        target = self._resolve(channel)
        if target is None:
            return "channel_not_found"
        if target in self._without_bot:
            return "not_in_channel"
        if target in self._archived:
            return "is_archived"
        if not thread_ts:
            return target, None
        found = self._find(target, str(thread_ts))
        if found is None:
            return "thread_not_found"
        if found[1] is not None:
            return "invalid_thread_ts"  # a reply's ts, not its thread's
        return target, found[0]

    def _file_info(self, cid: str, params: dict[str, Any]) -> dict[str, Any]:
        found = self.uploads.get(params.get("file"))
        if found is None:
            return _error("file_not_found")
        meta = {"response_metadata": {"next_cursor": ""}}
        return {"ok": True, "file": found.view(self.url), "comments": [], **meta}
