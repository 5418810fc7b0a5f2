"""The emulator itself: the HTTP server, its lifecycle, the fault API, the admin endpoints."""

from __future__ import annotations

import argparse
import json
import logging
import secrets
import signal
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from lab.slack.faults import _Fault, _Faults
from lab.slack.interactivity import block_actions, deliver
from lab.slack.workspace import (
    TEAM_ID,
    WEBHOOK_CHANNEL,
    WEBHOOK_PATH,
    Message,
    _error,
    _Reply,
    _Workspace,
)

_ADMIN_PREFIX = "/_admin/"
_ADMIN_FAULTS = ("/_admin/fail", "/_admin/stall", "/_admin/cut", "/_admin/down")
_logger = logging.getLogger(__name__)


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
        signing_secret: The app's signing secret; :meth:`click` signs presses with it.
        request_url: The app's interactivity request URL, where :meth:`click` posts
            presses (also :meth:`set_request_url`).
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
        signing_secret: str = "flinkwatch-local-signing-secret",  # noqa: S107 - fake Slack's
        request_url: str | None = None,
    ) -> None:
        if max_page < 1:
            msg = f"max_page must be at least 1, got {max_page}"
            raise ValueError(msg)
        self._address = (host, port)
        self._on_message = on_message
        self._lock = threading.Lock()
        self._workspace = _Workspace(token, channels, archived, without_bot, scopes, max_page)
        self._faults = _Faults()
        self.signing_secret = signing_secret
        self._request_url = request_url
        self._presses = 0
        # Set on stop, so a stalled answer does not outlive its emulator.
        self._stopping = threading.Event()
        self._log: list[dict[str, Any]] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> SlackEmulator:
        """Bind the socket and serve from a daemon thread; returns self."""
        if self._server is not None:
            return self
        self._stopping.clear()

        class BoundHandler(_Handler):
            emulator = self

        self._server = ThreadingHTTPServer(self._address, BoundHandler)
        # auth.test answers with the workspace's URL, which only the bound port completes.
        self._workspace.url = self.base_url[:-4]
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
        return self._workspace.token

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
                self._faults.add(
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
                self._faults.add(fault)

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
                self._faults.add(fault)

    def set_down(self, down: bool) -> None:
        """While down, every non-admin request gets HTTP 503."""
        with self._lock:
            self._faults.down = down

    def set_scopes(self, scopes: tuple[str, ...] | None) -> None:
        """Give the token these OAuth scopes from now on (None: every scope).

        As when a workspace admin adds a scope to the app: what was refused with
        ``missing_scope`` is answered from the next request on.
        """
        with self._lock:
            self._workspace.set_scopes(scopes)

    @property
    def request_url(self) -> str | None:
        """Where :meth:`click` posts presses."""
        return self._request_url

    def set_request_url(self, url: str | None) -> None:
        """Where :meth:`click` posts presses (the app's interactivity request URL)."""
        self._request_url = url

    def click(
        self,
        channel: str,
        ts: str,
        action_id: str,
        user: str = "U123",
        *,
        timestamp: float | None = None,
        signing_secret: str | None = None,
        action_ts: str | None = None,
        timeout_s: float = 10.0,
        team: str = TEAM_ID,
        user_team: str | None = None,
        enterprise: str | None = None,
        enterprise_install: bool = False,
    ) -> tuple[int, str]:
        """``user`` presses the button ``action_id`` on the message ``ts``, as in Slack.

        Posts a signed ``block_actions`` payload (``lab.slack.interactivity``) to the
        request URL and returns the app's answer. The payload's ``response_url`` points
        back here; what the app says through it is in :meth:`ephemeral`.

        Args:
            channel: The message's channel (name, "#name" or id).
            ts: The message's ts (a top-level message).
            action_id: The button pressed; it must be on the message.
            user: The presser's Slack user id.
            timestamp: The request's timestamp (default now): an old one is a replay.
            signing_secret: Sign with this instead (a forgery).
            action_ts: The press's ``action_ts`` (default now); Slack sending a press
                again sends the same one.
            timeout_s: How long to wait for the app's answer.
            team: The workspace the press says it comes from (another: a press the
                app got from another workspace's copy of the message).
            user_team: The presser's own workspace (default ``team``); another is a
                Slack Connect user of another organisation.
            enterprise: The Enterprise Grid organisation the press names (None: none).
            enterprise_install: The press says the app is installed org-wide.

        Raises:
            RuntimeError: no request URL is set.
            KeyError: no such message.
            LookupError: the message has no such button.
        """
        url = self._request_url
        if url is None:
            msg = "no request URL: SlackEmulator(request_url=...) or set_request_url()"
            raise RuntimeError(msg)
        now = time.time()
        with self._lock:
            message, view = self._workspace.pressable(channel, ts)
            self._presses += 1
            path = f"/actions/{TEAM_ID}/{self._presses}/{secrets.token_hex(8)}"
            self._workspace.response_url(path, user, message["channel"], ts)
        response_url = f"{self.base_url[:-5]}{path}"
        pressed_at = f"{now:.6f}" if action_ts is None else action_ts
        payload = block_actions(
            message,
            view,
            action_id,
            user,
            pressed_at,
            response_url,
            team=team,
            user_team=user_team,
            enterprise=enterprise,
            enterprise_install=enterprise_install,
        )
        stamp = str(int(now if timestamp is None else timestamp))
        secret = self.signing_secret if signing_secret is None else signing_secret
        return deliver(url, payload, secret, stamp, timeout_s)

    def set_usergroup(self, usergroup: str, users: tuple[str, ...] | None) -> None:
        """The members of a user group from now on (``usergroups.users.list``); None removes it."""
        with self._lock:
            if users is None:
                self._workspace.usergroups.pop(usergroup, None)
            else:
                self._workspace.usergroups[usergroup] = tuple(users)

    def ephemeral(self, user: str | None = None) -> list[dict[str, Any]]:
        """What the app told pressers alone (through response URLs), oldest first.

        Each is ``{"user", "channel", "message_ts", "text"}``; ``user`` filters.
        """
        with self._lock:
            return [dict(e) for e in self._workspace.ephemeral if user in (None, e["user"])]

    def messages(self, channel: str | None = None) -> list[Message]:
        """Top-level messages, oldest first, each with its thread under "replies".

        Args:
            channel: Name, "#name" or id; None means every channel, the webhook one included.

        Raises:
            KeyError: ``channel`` is not known.
        """
        with self._lock:
            return self._workspace.messages(channel)

    def files(self) -> list[dict[str, Any]]:
        """Every file asked an upload URL for, oldest first, as ``files.info`` shows it.

        Each also has ``content`` (the bytes posted to its upload URL; None before they
        arrived) and ``completed`` (``files.completeUploadExternal`` took it).
        """
        with self._lock:
            root = self._workspace.url
            return [
                {**u.view(root), "content": u.content, "completed": u.shared}
                for u in self._workspace.uploads.all()
            ]

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
            serve = partial(
                self._workspace.serve, method, url.path, url.query, content_type, auth, body
            )
            reply, fault = self._faults.route(url.path, serve)
            entry = {"method": method, "path": url.path, "status": reply.status}
            self._log.append({**entry, "time": time.time(), "fault": fault})
            fresh = self._workspace.take_new()
        # Outside the lock, so a callback may read the emulator without deadlocking.
        for message in fresh:
            try:
                if self._on_message is not None:
                    self._on_message(message)
            except Exception:
                # A broken observer must not turn into a Slack outage for the client.
                _logger.exception("on_message callback failed")
        return reply

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
    names = ", ".join(str(f["name"]) for f in message.get("files", []))
    shown = f"{message['text']} [file {names}]" if names else message["text"]
    text = " ".join(str(shown).split()) or "(blocks only)"
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
