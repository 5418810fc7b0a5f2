"""A local stand-in for the Slack Web API and Slack incoming webhooks.

The Slack sink talks to Slack through the real ``slack_sdk`` clients. Tests and the demo need
that path exercised end to end (message formatting, threads, metadata, retries during an
outage) without a workspace, a token or the network. This module serves just enough of
Slack's HTTP surface on localhost for ``WebClient(base_url=...)`` and ``WebhookClient(url=...)``
to run unmodified, records what arrives, and can be told to fail so outages can be rehearsed.
"""

from __future__ import annotations

import argparse
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
_logger = logging.getLogger(__name__)


@dataclass
class _Reply:
    status: int
    body: bytes
    content_type: str
    headers: dict[str, str] = field(default_factory=dict)

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


def _error(code: str) -> dict[str, Any]:
    # Slack reports API errors with HTTP 200; only transport trouble uses other statuses.
    return {"ok": False, "error": code}


def _flag(value: Any) -> bool:
    # Booleans arrive as JSON true, or as "1"/"true" once slack_sdk form-encodes them.
    return value is True or str(value).lower() in ("1", "true")


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
    """

    def __init__(
        self,
        token: str = "xoxb-flinkwatch-local",  # noqa: S107 - a fake token for a fake Slack
        port: int = 0,
        host: str = "127.0.0.1",
        channels: tuple[str, ...] = ("#alerts",),
        on_message: Callable[[Message], object] | None = None,
    ) -> None:
        self._token = token
        self._address = (host, port)
        self._on_message = on_message
        self._lock = threading.Lock()
        self._names: dict[str, str] = {}  # channel id -> bare name
        for index, raw in enumerate(dict.fromkeys(c.removeprefix("#") for c in channels), 1):
            self._names[f"C{index:07d}"] = raw
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
        }

    def start(self) -> SlackEmulator:
        """Bind the socket and serve from a daemon thread; returns self."""
        if self._server is not None:
            return self

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
        self, count: int, status: int = 500, retry_after: int | None = None, path_prefix: str = ""
    ) -> None:
        """Make the next ``count`` requests whose path starts with ``path_prefix`` fail.

        Args:
            count: How many matching requests fail.
            status: HTTP status to answer; 429 gets Slack's ``ratelimited`` JSON body.
            retry_after: Seconds sent in a ``Retry-After`` header, if given.
            path_prefix: e.g. "/api/chat.postMessage" or "/services"; "" matches everything.
        """
        if count < 0 or not 400 <= status <= 599:
            msg = f"need count >= 0 and a 4xx/5xx status, got count={count} status={status}"
            raise ValueError(msg)
        if count:
            with self._lock:
                self._faults.append(_Fault(count, status, retry_after, path_prefix))

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
            reply = self._route(method, url.path, url.query, content_type, auth, body)
            self._log.append(
                {"method": method, "path": url.path, "status": reply.status, "time": time.time()}
            )
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
    ) -> _Reply:
        if self._down:
            return _Reply.text("service unavailable (emulated outage)", 503)
        fault = next((f for f in self._faults if path.startswith(f.path_prefix)), None)
        if fault is not None:
            fault.remaining -= 1
            if fault.remaining <= 0:
                self._faults.remove(fault)
            headers = {} if fault.retry_after is None else {"Retry-After": str(fault.retry_after)}
            if fault.status == 429:
                return _Reply.json(_error("ratelimited"), 429, headers)
            return _Reply.text(f"emulated failure: HTTP {fault.status}", fault.status, headers)
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
        problem = _decode_nested(params)
        cid = self._resolve(params.get("channel"))
        if problem or (cid is None and name != "auth.test"):
            return _error(problem or "channel_not_found")
        return api(cid or "", params)

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
        if method != "POST" or path not in ("/_admin/fail", "/_admin/down"):
            return _Reply.json(_error("unknown_admin_endpoint"), 404)
        try:
            data = json.loads(body or b"{}")
            if path == "/_admin/down":
                self.set_down(bool(data.get("down", True)))
            else:
                retry_after = data.get("retry_after")
                self.fail_next(
                    int(data.get("count", 1)),
                    int(data.get("status", 500)),
                    None if retry_after is None else int(retry_after),
                    str(data.get("path_prefix", "")),
                )
        except (AttributeError, TypeError, ValueError) as exc:
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

    def _history(self, cid: str, params: dict[str, Any]) -> dict[str, Any]:
        oldest = _number(params.get("oldest"), 0.0)
        latest = _number(params.get("latest"), float("inf"))
        inclusive = _flag(params.get("inclusive"))
        limit = int(_number(params.get("limit"), 100)) or 100

        def wanted(ts: float) -> bool:
            return oldest <= ts <= latest if inclusive else oldest < ts < latest

        picked = [m for m in reversed(self._store[cid]) if wanted(float(m["ts"]))]
        meta = _flag(params.get("include_all_metadata"))
        views = [self._view(m, meta) for m in picked[:limit]]
        return {"ok": True, "messages": views, "has_more": len(picked) > limit}

    def _replies(self, cid: str, params: dict[str, Any]) -> dict[str, Any]:
        found = self._find(cid, str(params.get("ts", "")))
        if found is None:
            return _error("thread_not_found")
        root = found[1] or found[0]
        thread = [root, *root["replies"]]
        limit = int(_number(params.get("limit"), 1000)) or 1000
        meta = _flag(params.get("include_all_metadata"))
        views = [self._view(m, meta) for m in thread[:limit]]
        return {"ok": True, "messages": views, "has_more": len(thread) > limit}


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
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(reply.body)))
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(reply.body)

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
