"""A local stand-in for the Slack Web API and Slack incoming webhooks.

The Slack sink talks to Slack through the real ``slack_sdk`` clients. Tests and the demo need
that path exercised end to end (message formatting, threads, metadata, retries during an
outage) without a workspace, a token or the network. This module serves just enough of
Slack's HTTP surface on localhost for ``WebClient(base_url=...)`` and ``WebhookClient(url=...)``
to run unmodified, records what arrives, and can be told to fail so outages can be rehearsed.

Faults come in the shapes a client has to tell apart: a request refused before Slack did
anything (``fail_next``), and one Slack carried out but whose answer was lost: an error,
a stall past the client's timeout or a closed connection after the message was stored
(``fail_next(..., after_store=True)``, ``stall_next``, ``cut_next``). Reads page like
Slack's (``response_metadata.next_cursor``), with a page size tests can make small.
"""

from __future__ import annotations

import argparse
import base64
import copy
import json
import logging
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

Message = dict[str, Any]
ApiMethod = Callable[[str, dict[str, Any]], dict[str, Any]]

TEAM_ID = "T000"
BOT_USER_ID = "U0FLINKWATCH"
BOT_ID = "B0FLINKWATCH"
WEBHOOK_PATH = "/services/T000/B000/XXXX"
WEBHOOK_CHANNEL = "webhook"
_ADMIN_PREFIX = "/_admin/"
_ADMIN_FAULTS = ("/_admin/fail", "/_admin/stall", "/_admin/cut", "/_admin/down")
_logger = logging.getLogger(__name__)


@dataclass
class _Reply:
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


@dataclass
class _Fault:
    remaining: int
    status: int
    retry_after: int | None
    path_prefix: str
    #: Carry the request out first, then fail: the client cannot tell it happened.
    after_store: bool = False
    #: A stall instead of an error status: the answer comes this late (the status is
    #: the real one after a store, 504 otherwise).
    stall_s: float = 0.0
    #: No answer at all: the connection is closed once the request is read.
    cut: bool = False

    @property
    def name(self) -> str:
        kind = "stall" if self.stall_s else "cut" if self.cut else "fail"
        return f"{kind}_after_store" if self.after_store else kind


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
}
#: Methods that take no ``channel`` argument.
_CHANNEL_FREE = frozenset({"auth.test", "conversations.list"})
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


class SlackEmulator:
    """An in-process fake Slack: Web API methods, one incoming webhook, fault injection.

    Args:
        token: The bot token clients must send as ``Authorization: Bearer <token>``.
        port: TCP port to bind; 0 picks a free one.
        host: Interface to bind.
        channels: Channel names ("#alerts" or "alerts"); each gets an id "C0000001", ...
        on_message: Called with a copy of every newly stored message (posts, replies and
            webhook posts), outside the emulator's lock and possibly from several
            server threads at once.
        archived: Channels (also created) that are archived: readable, refuse posts
            with ``is_archived``.
        without_bot: Channels (also created) the bot is not a member of: every method
            but ``conversations.info``/``list`` answers ``not_in_channel``.
        scopes: The token's OAuth scopes; a method needing another one answers
            ``missing_scope``. None grants every scope.
        max_page: The most items one page of ``conversations.history``/``replies``/
            ``list`` holds, whatever ``limit`` asks (Slack caps it too); the rest
            follows through ``response_metadata.next_cursor``.
    """

    def __init__(
        self,
        token: str = "xoxb-flinkwatch-local",  # noqa: S107 - a fake token for a fake Slack
        port: int = 0,
        host: str = "127.0.0.1",
        channels: tuple[str, ...] = ("#alerts",),
        on_message: Callable[[Message], object] | None = None,
        *,
        archived: tuple[str, ...] = (),
        without_bot: tuple[str, ...] = (),
        scopes: tuple[str, ...] | None = None,
        max_page: int = 1000,
    ) -> None:
        if max_page < 1:
            msg = f"max_page must be at least 1, got {max_page}"
            raise ValueError(msg)
        self._token = token
        self._address = (host, port)
        self._on_message = on_message
        self._lock = threading.Lock()
        self._names: dict[str, str] = {}  # channel id -> bare name
        every = (*channels, *archived, *without_bot)
        for index, raw in enumerate(dict.fromkeys(c.removeprefix("#") for c in every), 1):
            self._names[f"C{index:07d}"] = raw
        self._archived = {self._id_of(c) for c in archived}
        self._without_bot = {self._id_of(c) for c in without_bot}
        self._scopes = None if scopes is None else frozenset(scopes)
        self._max_page = max_page
        # Set on stop, so a stalled answer does not outlive its emulator.
        self._stopping = threading.Event()
        self._store: dict[str, list[Message]] = {cid: [] for cid in self._names}
        self._store[WEBHOOK_CHANNEL] = []
        self._outbox: list[Message] = []
        self._log: list[dict[str, Any]] = []
        self._faults: list[_Fault] = []
        self._down = False
        self._last_us = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._methods: dict[str, ApiMethod] = {
            "auth.test": self._auth_test,
            "chat.postMessage": self._post_message,
            "chat.update": self._update,
            "conversations.history": self._history,
            "conversations.replies": self._replies,
            "conversations.info": self._info,
            "conversations.list": self._list,
        }

    def _id_of(self, channel: str) -> str:
        bare = channel.removeprefix("#")
        return next(cid for cid, name in self._names.items() if name == bare)

    def start(self) -> SlackEmulator:
        """Bind the socket and serve from a daemon thread; returns self."""
        if self._server is not None:
            return self
        self._stopping.clear()

        class BoundHandler(_Handler):
            emulator = self

        self._server = ThreadingHTTPServer(self._address, BoundHandler)
        # A short poll keeps stop() quick, which matters with one emulator per test.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port. Safe to call twice."""
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> SlackEmulator:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound TCP port (only once started)."""
        if self._server is None:
            msg = "SlackEmulator is not started"
            raise RuntimeError(msg)
        return int(self._server.server_address[1])

    @property
    def token(self) -> str:
        """The bot token the emulator accepts."""
        return self._token

    @property
    def base_url(self) -> str:
        """Web API root for ``WebClient(base_url=...)``; ends with "/api/"."""
        return f"http://{self._address[0]}:{self.port}/api/"

    @property
    def webhook_url(self) -> str:
        """The one incoming-webhook URL this emulator accepts."""
        return f"http://{self._address[0]}:{self.port}{WEBHOOK_PATH}"

    def fail_next(
        self,
        count: int,
        status: int = 500,
        retry_after: int | None = None,
        path_prefix: str = "",
        *,
        after_store: bool = False,
    ) -> None:
        """Make the next ``count`` requests whose path starts with ``path_prefix`` fail.

        Args:
            count: How many matching requests fail.
            status: HTTP status to answer; 429 gets Slack's ``ratelimited`` JSON body.
            retry_after: Seconds sent in a ``Retry-After`` header, if given.
            path_prefix: e.g. "/api/chat.postMessage" or "/services"; "" matches everything.
            after_store: Carry the request out first (store the message), then answer
                ``status``: the client sees a failure of something that happened.
        """
        if count < 0 or not 400 <= status <= 599:
            msg = f"need count >= 0 and a 4xx/5xx status, got count={count} status={status}"
            raise ValueError(msg)
        if count:
            with self._lock:
                self._faults.append(
                    _Fault(count, status, retry_after, path_prefix, after_store=after_store)
                )

    def stall_next(
        self, count: int, seconds: float, path_prefix: str = "", *, after_store: bool = True
    ) -> None:
        """Hold the answer to the next ``count`` matching requests back for ``seconds``.

        With a client timeout shorter than ``seconds`` the client gives up without an
        answer: a read timeout.

        Args:
            count: How many matching requests stall.
            seconds: How long each answer is held back.
            path_prefix: As for :meth:`fail_next`.
            after_store: Carry the request out first and answer it late (default); else
                do nothing and answer HTTP 504 late.
        """
        if count < 0 or seconds <= 0:
            msg = f"need count >= 0 and seconds > 0, got count={count} seconds={seconds}"
            raise ValueError(msg)
        if count:
            fault = _Fault(count, 504, None, path_prefix, after_store=after_store, stall_s=seconds)
            with self._lock:
                self._faults.append(fault)

    def cut_next(self, count: int, path_prefix: str = "", *, after_store: bool = True) -> None:
        """Close the connection of the next ``count`` matching requests without an answer.

        The client sees the connection end after it wrote its request (``RemoteDisconnected``).

        Args:
            count: How many matching requests are cut.
            path_prefix: As for :meth:`fail_next`.
            after_store: Carry the request out first (default), or not at all.
        """
        if count < 0:
            msg = f"need count >= 0, got count={count}"
            raise ValueError(msg)
        if count:
            fault = _Fault(count, 502, None, path_prefix, after_store=after_store, cut=True)
            with self._lock:
                self._faults.append(fault)

    def set_down(self, down: bool) -> None:
        """While down, every non-admin request gets HTTP 503."""
        with self._lock:
            self._down = down

    def messages(self, channel: str | None = None) -> list[Message]:
        """Top-level messages, oldest first, each with its thread under "replies".

        Args:
            channel: Name, "#name" or id; None means every channel, the webhook one included.

        Raises:
            KeyError: ``channel`` is not known.
        """
        with self._lock:
            if channel is None:
                found = [m for msgs in self._store.values() for m in msgs]
                return copy.deepcopy(sorted(found, key=lambda m: float(m["ts"])))
            cid = WEBHOOK_CHANNEL if channel == WEBHOOK_CHANNEL else self._resolve(channel)
            if cid is None:
                raise KeyError(channel)
            return copy.deepcopy(self._store[cid])

    def webhook_messages(self) -> list[Message]:
        """Messages that arrived through the incoming webhook, oldest first."""
        return self.messages(WEBHOOK_CHANNEL)

    @property
    def requests(self) -> list[tuple[str, int]]:
        """(path, HTTP status) of every non-admin request so far, failures included."""
        with self._lock:
            return [(entry["path"], entry["status"]) for entry in self._log]

    def _handle(
        self, method: str, raw_path: str, content_type: str, auth: str, body: bytes
    ) -> _Reply:
        url = urlsplit(raw_path)
        if url.path.startswith(_ADMIN_PREFIX):
            return self._admin(method, url.path, body)
        with self._lock:
            reply, fault = self._route(method, url.path, url.query, content_type, auth, body)
            entry = {"method": method, "path": url.path, "status": reply.status}
            self._log.append({**entry, "time": time.time(), "fault": fault})
            fresh, self._outbox = self._outbox, []
        # Outside the lock, so a callback may read the emulator without deadlocking.
        for message in fresh:
            try:
                if self._on_message is not None:
                    self._on_message(message)
            except Exception:
                # A broken observer must not turn into a Slack outage for the client.
                _logger.exception("on_message callback failed")
        return reply

    def _route(
        self, method: str, path: str, query: str, content_type: str, auth: str, body: bytes
    ) -> tuple[_Reply, str | None]:
        """The answer, and the name of the fault that shaped it (None: no fault)."""
        if self._down:
            return _Reply.text("service unavailable (emulated outage)", 503), "down"
        fault = next((f for f in self._faults if path.startswith(f.path_prefix)), None)
        if fault is None:
            return self._serve_path(method, path, query, content_type, auth, body), None
        fault.remaining -= 1
        if fault.remaining <= 0:
            self._faults.remove(fault)
        # After a store the request is carried out as usual, and its answer replaced
        # (or delayed): the client cannot tell that it happened.
        done = (
            self._serve_path(method, path, query, content_type, auth, body)
            if fault.after_store
            else None
        )
        if fault.stall_s:
            late = done or _Reply.text("emulated stall", 504)
            late.stall_s = fault.stall_s
            return late, fault.name
        if fault.cut:
            return _Reply(fault.status, b"", "text/plain", cut=True), fault.name
        headers = {} if fault.retry_after is None else {"Retry-After": str(fault.retry_after)}
        if fault.status == 429:
            return _Reply.json(_error("ratelimited"), 429, headers), fault.name
        failed = _Reply.text(f"emulated failure: HTTP {fault.status}", fault.status, headers)
        return failed, fault.name

    def _serve_path(
        self, method: str, path: str, query: str, content_type: str, auth: str, body: bytes
    ) -> _Reply:
        if path.startswith("/api/"):
            return _Reply.json(self._call_api(path[5:], query, content_type, auth, body))
        if path.startswith("/services/"):
            return self._webhook(method, path, body)
        return _Reply.text("not_found", 404)

    def _call_api(
        self, name: str, query: str, content_type: str, auth: str, body: bytes
    ) -> dict[str, Any]:
        api = self._methods.get(name)
        if api is None:
            return _error("unknown_method")
        if auth != f"Bearer {self._token}":
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

    def _admin(self, method: str, path: str, body: bytes) -> _Reply:
        if method == "GET" and path == "/_admin/messages":
            return _Reply.json(self.messages())
        if method == "GET" and path == "/_admin/requests":
            with self._lock:
                return _Reply.json(self._log)
        if method != "POST" or path not in _ADMIN_FAULTS:
            return _Reply.json(_error("unknown_admin_endpoint"), 404)
        try:
            data = json.loads(body or b"{}")
            if path == "/_admin/down":
                self.set_down(bool(data.get("down", True)))
            elif path == "/_admin/cut":
                self.cut_next(
                    int(data.get("count", 1)),
                    str(data.get("path_prefix", "")),
                    after_store=bool(data.get("after_store", True)),
                )
            elif path == "/_admin/stall":
                self.stall_next(
                    int(data.get("count", 1)),
                    float(data["seconds"]),
                    str(data.get("path_prefix", "")),
                    after_store=bool(data.get("after_store", True)),
                )
            else:
                retry_after = data.get("retry_after")
                self.fail_next(
                    int(data.get("count", 1)),
                    int(data.get("status", 500)),
                    None if retry_after is None else int(retry_after),
                    str(data.get("path_prefix", "")),
                    after_store=bool(data.get("after_store", False)),
                )
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            return _Reply.json(_error(f"bad_request: {exc}"), 400)
        return _Reply.json({"ok": True})

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
        return view

    def _auth_test(self, cid: str, params: dict[str, Any]) -> dict[str, Any]:
        names = {"team": "flinkwatch-local", "user": "flinkwatch", "url": self.base_url[:-4]}
        return {"ok": True, "team_id": TEAM_ID, "user_id": BOT_USER_ID, "bot_id": BOT_ID, **names}

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
    ) -> tuple[list[Message], str] | None:
        """One page of ``items`` (in reading order) from the cursor on, and the next cursor.

        None when the cursor is not one this emulator gave out. The cursor names the ts
        of the next item, so messages posted between two pages shift nothing.
        """
        try:
            start = _uncursor(params.get("cursor"))
        except ValueError:
            return None
        if start is not None:
            items = [
                m
                for m in items
                if (float(m["ts"]) <= start if newest_first else float(m["ts"]) >= start)
            ]
        size = min(int(_number(params.get("limit"), default)) or default, self._max_page)
        page, rest = items[:size], items[size:]
        return page, _cursor(rest[0]["ts"]) if rest else ""

    def _history(self, cid: str, params: dict[str, Any]) -> dict[str, Any]:
        oldest = _number(params.get("oldest"), 0.0)
        latest = _number(params.get("latest"), float("inf"))
        inclusive = _flag(params.get("inclusive"))

        def wanted(ts: float) -> bool:
            return oldest <= ts <= latest if inclusive else oldest < ts < latest

        picked = [m for m in reversed(self._store[cid]) if wanted(float(m["ts"]))]
        paged = self._page(picked, params, 100, newest_first=True)
        if paged is None:
            return _error("invalid_cursor")
        page, cursor = paged
        meta = _flag(params.get("include_all_metadata"))
        views = [self._view(m, meta) for m in page]
        more = {"has_more": bool(cursor), "response_metadata": {"next_cursor": cursor}}
        return {"ok": True, "messages": views, **more}

    def _replies(self, cid: str, params: dict[str, Any]) -> dict[str, Any]:
        found = self._find(cid, str(params.get("ts", "")))
        if found is None:
            return _error("thread_not_found")
        root = found[1] or found[0]
        paged = self._page([root, *root["replies"]], params, 1000, newest_first=False)
        if paged is None:
            return _error("invalid_cursor")
        page, cursor = paged
        meta = _flag(params.get("include_all_metadata"))
        views = [self._view(m, meta) for m in page]
        more = {"has_more": bool(cursor), "response_metadata": {"next_cursor": cursor}}
        return {"ok": True, "messages": views, **more}

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


class _Handler(BaseHTTPRequestHandler):
    """Thin HTTP adapter; every decision is made by :class:`SlackEmulator`."""

    emulator: SlackEmulator
    server_version = "SlackEmulator/1.0"

    def do_GET(self) -> None:  # noqa: N802 - name fixed by BaseHTTPRequestHandler
        self._serve()

    def do_POST(self) -> None:  # noqa: N802 - name fixed by BaseHTTPRequestHandler
        self._serve()

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length > 0 else b""
        reply = self.emulator._handle(
            self.command,
            self.path,
            self.headers.get("Content-Type", ""),
            self.headers.get("Authorization", ""),
            body,
        )
        if reply.stall_s and self.emulator._stopping.wait(reply.stall_s):
            return  # stopped while stalling: the client gets no answer at all
        if reply.cut:
            self.close_connection = True
            return
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(reply.body)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(reply.body)
        except (BrokenPipeError, ConnectionResetError):
            # A stalled answer: the client timed out and left, as the fault intends.
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - base signature
        """Silenced: the request log replaces per-request lines on stderr."""


def _print_message(message: Message) -> None:
    text = " ".join(str(message["text"]).split()) or "(blocks only)"
    thread = f" [reply to {message['thread_ts']}]" if message["thread_ts"] else ""
    print(f"#{message['channel_name']} {message['ts']}{thread} {text}", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the emulator in the foreground, printing each message, until Ctrl-C."""
    parser = argparse.ArgumentParser(description="Local Slack Web API + webhook emulator.")
    parser.add_argument("--port", type=int, default=0, help="port to bind (0: a free one)")
    parser.add_argument("--token", default="xoxb-flinkwatch-local", help="accepted bot token")
    parser.add_argument(
        "--channel", action="append", help="channel to create (repeatable; default #alerts)"
    )
    args = parser.parse_args(argv)
    channels = tuple(args.channel) if args.channel else ("#alerts",)
    emulator = SlackEmulator(
        token=args.token, port=args.port, channels=channels, on_message=_print_message
    )
    # Shells start background jobs with SIGINT ignored; restore it so kill -INT still stops us.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with emulator:
        print(f"Slack Web API base_url: {emulator.base_url}", flush=True)
        print(f"Incoming webhook url:   {emulator.webhook_url}", flush=True)
        print(f"Token: {args.token}  channels: {', '.join(channels)}", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            print("stopping", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
