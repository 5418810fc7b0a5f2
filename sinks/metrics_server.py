"""The driver's ``/metrics`` endpoint: HTTP or HTTPS (optionally mutual TLS), optionally basic auth.

The response is prometheus-client's own WSGI app, answered by wsgiref's request handler,
so what a scrape returns is unchanged; this module only decides who gets it, over what, and
how long a client may take. prometheus-client's ``start_http_server`` (and the standard
library's threading servers) start a thread per connection with no cap and only a per-read
timeout, and its TLS handshake runs inside the accept loop: one client that never sends a
ClientHello stops every scrape after it, and clients that send a byte every 20 s hold a
thread each, forever (10,000 of them are 10,000 threads in the driver). Here connections
are tasks of one asyncio loop (the handshake, reading the request, writing the answer are
non-blocking), at most ``max_connections`` are open (one more closes the oldest that has
not sent its whole request), each has a total deadline, and only complete requests reach
the two threads that render the answer.

The certificate and key are re-read when their files change (cert-manager renews them in
place, Kubernetes swaps the mounted Secret), so a renewal needs no restart.

``/healthz`` answers whether the job is alive in the sense a restart would help: 200 while
the detect query made progress within ``health_max_age_s``, 503 after. What progress is
comes from the driver (a callable giving its age in seconds): this module knows no Spark.
It is served on the metrics port, behind the same TLS and basic auth, and with
``health_port`` also on a second listener that answers nothing else, in plain HTTP without
credentials, for a kubelet liveness probe (the kubelet has no client certificate and no
password).

Example:
    >>> endpoint = MetricsEndpoint.from_config(cfg.metrics)  # doctest: +SKIP
    >>> server = endpoint.serve(registry)  # doctest: +SKIP
    >>> server.url  # doctest: +SKIP
    'https://0.0.0.0:9250/metrics'
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import io
import logging
import math
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any, Self
from wsgiref.simple_server import WSGIRequestHandler
from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

from prometheus_client import make_wsgi_app
from prometheus_client.registry import Collector

from conf import FlinkwatchError, MetricsConfig

log = logging.getLogger(__name__)

#: The longest request head read (request line and headers); longer is closed unanswered.
MAX_HEAD_BYTES = 64 * 1024
#: Threads that render answers (the WSGI app); connections themselves take none.
RENDER_WORKERS = 2
#: Connections the kernel queues before the loop accepts them (capped by net.core.somaxconn):
#: a burst of clients is accepted, and the oldest slow one closed, rather than dropped.
LISTEN_BACKLOG = 1024
#: At most one warning this often while connections are closed to make room.
WARN_EVERY_S = 60.0

REALM = "flinkwatch"

#: The path of the liveness answer.
HEALTH_PATH = "/healthz"


class MetricsEndpointError(FlinkwatchError):
    """The endpoint cannot be set up as configured; the message names the setting."""


@dataclass(frozen=True)
class BasicAuth:
    """The one user and password the endpoint accepts."""

    username: str
    password: str = field(repr=False)


def basic_auth(app: WSGIApplication, auth: BasicAuth, realm: str = REALM) -> WSGIApplication:
    """``app`` behind HTTP basic auth: 401 with a ``WWW-Authenticate`` challenge otherwise.

    Every path and method needs the credentials. Both parts are compared as SHA-256
    digests with :func:`hmac.compare_digest`, so the time taken says nothing about how
    much of a guess was right, nor about the password's length.
    """
    want_user = _digest(auth.username.encode())
    want_password = _digest(auth.password.encode())
    challenge = f'Basic realm="{realm}", charset="UTF-8"'

    def guarded(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        given = _credentials(environ.get("HTTP_AUTHORIZATION", ""))
        if given is not None:
            user_ok = hmac.compare_digest(_digest(given[0]), want_user)
            password_ok = hmac.compare_digest(_digest(given[1]), want_password)
            # Both comparisons always run: `and` would skip the second on a wrong user.
            if user_ok & password_ok:
                return app(environ, start_response)
        start_response(
            "401 Unauthorized",
            [("WWW-Authenticate", challenge), ("Content-Type", "text/plain; charset=utf-8")],
        )
        return [b"401 Unauthorized: /metrics needs HTTP basic auth\n"]

    return guarded


def _digest(value: bytes) -> bytes:
    return hashlib.sha256(value).digest()


def _credentials(header: str) -> tuple[bytes, bytes] | None:
    """(user, password) of a ``Basic`` Authorization header; None if it is not one."""
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(token.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    user, colon, password = decoded.partition(b":")
    return (user, password) if colon else None


@dataclass(frozen=True)
class Liveness:
    """What ``/healthz`` answers: whether the job made progress recently.

    Attributes:
        age_s: Seconds since the job last showed progress (the driver's detect query
            finished a micro-batch or looked for new data), or since it started watching.
        max_age_s: Older than this is a stalled job: 503.

    Example:
        >>> Liveness(age_s=lambda: 12.0, max_age_s=600).verdict()
        (True, 'ok: last progress 12 s ago (limit 600 s)')
    """

    age_s: Callable[[], float]
    max_age_s: float

    def verdict(self) -> tuple[bool, str]:
        """(healthy, one line saying why)."""
        age = self.age_s()
        ok = age <= self.max_age_s
        word = "ok" if ok else "stalled"
        return ok, f"{word}: last progress {age:.0f} s ago (limit {self.max_age_s:g} s)"


def health_app(liveness: Liveness) -> WSGIApplication:
    """The ``/healthz`` answer: 200 or 503, with the verdict as text, never cached."""

    def app(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        ok, text = liveness.verdict()
        body = f"{text}\n".encode()
        start_response(
            "200 OK" if ok else "503 Service Unavailable",
            [
                ("Content-Type", "text/plain; charset=utf-8"),
                ("Content-Length", str(len(body))),
                ("Cache-Control", "no-store"),
            ],
        )
        return [body]

    return app


def with_health(app: WSGIApplication, liveness: Liveness) -> WSGIApplication:
    """``app`` with ``/healthz`` answered by ``liveness``; every other path by ``app``."""
    health = health_app(liveness)

    def routed(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == HEALTH_PATH:
            return health(environ, start_response)
        return app(environ, start_response)

    return routed


def health_only(liveness: Liveness) -> WSGIApplication:
    """``/healthz`` and nothing else (404): the health port serves no metrics."""
    health = health_app(liveness)

    def app(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == HEALTH_PATH:
            return health(environ, start_response)
        start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
        return [f"404 Not Found: this port answers {HEALTH_PATH} only\n".encode()]

    return app


class TlsFiles:
    """The server certificate and key (and a client CA), loaded into an SSL context.

    :meth:`context` re-reads the files when their size, mtime or inode changed. A new pair
    that does not load (the certificate replaced, the key not yet) keeps the previous
    context in force and is logged once; the next change is tried again.

    Raises:
        MetricsEndpointError: at construction, the files do not load (names them).
    """

    def __init__(self, cert_file: Path, key_file: Path, client_ca_file: Path | None = None) -> None:
        self.cert_file = Path(cert_file)
        self.key_file = Path(key_file)
        self.client_ca_file = None if client_ca_file is None else Path(client_ca_file)
        self._lock = threading.Lock()
        self._stamp = self._stat()
        self._rejected: object = None
        self._context = self._load()

    @property
    def mutual(self) -> bool:
        """Whether clients must present a certificate."""
        return self.client_ca_file is not None

    def _files(self) -> list[Path]:
        return [p for p in (self.cert_file, self.key_file, self.client_ca_file) if p]

    def _stat(self) -> object:
        try:
            return tuple(
                (st.st_ino, st.st_size, st.st_mtime_ns) for st in map(os.stat, self._files())
            )
        except OSError:
            return None  # in the middle of a swap; look again at the next connection

    def _load(self) -> ssl.SSLContext:
        # PROTOCOL_TLS_SERVER: TLS 1.2 or later and Python's vetted ciphers.
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            # An encrypted key would make OpenSSL prompt on the terminal; an empty
            # password makes it fail instead.
            ctx.load_cert_chain(self.cert_file, self.key_file, password=b"")
        except (OSError, ssl.SSLError) as exc:
            msg = (
                f"metrics.tls_cert_file {self.cert_file} / metrics.tls_key_file "
                f"{self.key_file}: cannot load the certificate and its (unencrypted) key: {exc}"
            )
            raise MetricsEndpointError(msg) from exc
        if self.client_ca_file is not None:
            try:
                ctx.load_verify_locations(cafile=self.client_ca_file)
            except (OSError, ssl.SSLError) as exc:
                msg = f"metrics.tls_client_ca_file {self.client_ca_file}: cannot load: {exc}"
                raise MetricsEndpointError(msg) from exc
            ctx.verify_mode = ssl.CERT_REQUIRED
        return ctx

    def context(self) -> ssl.SSLContext:
        """The context for a new connection, re-loaded first if the files changed."""
        stamp = self._stat()
        with self._lock:
            if stamp is None or stamp == self._stamp or stamp == self._rejected:
                return self._context
            try:
                self._context = self._load()
            except MetricsEndpointError as exc:
                self._rejected = stamp
                log.warning("metrics: keeping the previous certificate: %s", exc)
            else:
                self._stamp = stamp
                log.info("metrics: certificate re-read from %s", self.cert_file)
            return self._context


class _Site:
    """What wsgiref's request handler asks of its server: the base environ and the app."""

    def __init__(self, app: WSGIApplication, host: str, port: int) -> None:
        self.app = app
        # As WSGIServer.setup_environ has it.
        self.base_environ = {
            "SERVER_NAME": host,
            "GATEWAY_INTERFACE": "CGI/1.1",
            "SERVER_PORT": str(port),
            "REMOTE_HOST": "",
            "CONTENT_LENGTH": "",
            "SCRIPT_NAME": "",
        }

    def get_app(self) -> WSGIApplication:
        return self.app


class _Exchange(WSGIRequestHandler):
    """One request, parsed and answered by wsgiref's own handler, in memory.

    The event loop has read the request head off the socket already; this turns it into
    the response bytes (status line, headers, body) in a worker thread, so a worker never
    waits on a client.
    """

    response = b""

    def setup(self) -> None:  # noqa: D102
        self.rfile = io.BytesIO(self.request)
        self.wfile = self._out = io.BytesIO()

    def finish(self) -> None:  # noqa: D102
        self.response = self._out.getvalue()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: D102
        pass  # one line per scrape is noise; failures show in Prometheus' `up`


@dataclass
class ConnectionStats:
    """What the endpoint did with connections it did not answer (for the log and tests).

    Attributes:
        evicted: Closed to make room under ``max_connections``: the oldest that had not
            sent its whole request yet.
        refused: Closed at once: every open connection was being answered.
        expired: Closed at the request deadline (handshake, request or response too slow).
        failed: Closed for a bad handshake or request (plain HTTP on HTTPS, no client
            certificate, a head past 64 KiB, a reset).
    """

    evicted: int = 0
    refused: int = 0
    expired: int = 0
    failed: int = 0


@dataclass(frozen=True)
class _Listener:
    """One listening socket, what it serves and whether over TLS.

    ``max_body`` is the largest request body read (by ``Content-Length``); 0 reads none,
    as ``/metrics`` and ``/healthz`` take none. A longer body is answered 413 unread.
    """

    sock: socket.socket
    site: _Site
    tls: TlsFiles | None
    max_body: int = 0


class _Loop:
    """The endpoint's one I/O thread: asyncio servers and a small pool that renders.

    Every connection is a task in the loop, not a thread: reading the request head, the
    TLS handshake and writing the response are non-blocking, so idle or slow clients cost
    a socket each and nothing else, and a scrape is never queued behind them. At most
    ``max_connections`` are open: one more closes the oldest connection that has not sent
    its whole request (a slow client; a scrape sends its request at once). Each connection
    has ``deadline_s`` in all, from accept to the last byte of the response. Only complete
    requests reach the ``workers`` threads, which run the WSGI app. The listeners (the
    metrics port, the health port) share the cap, the deadline and the workers.
    """

    def __init__(
        self,
        listeners: list[_Listener],
        *,
        max_connections: int,
        deadline_s: float,
        workers: int,
        name: str = "metrics",
    ) -> None:
        self.listeners = listeners
        self.max_connections = max_connections
        self.deadline_s = deadline_s
        self.name = name
        self.stats = ConnectionStats()
        self.pool = ThreadPoolExecutor(workers, thread_name_prefix=f"flinkwatch-{name}-render")
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name=f"flinkwatch-{name}", daemon=True)
        self._ready = threading.Event()
        self._failed: BaseException | None = None
        self._servers: list[asyncio.Server] = []
        #: Every open connection's task and its stream (insertion order: oldest first).
        self._open: dict[asyncio.Task[None], asyncio.StreamWriter] = {}
        #: The open connections still waiting for their whole request.
        self._waiting: dict[asyncio.Task[None], None] = {}
        self._warned_at = -math.inf

    def start(self) -> None:
        self.thread.start()
        self._ready.wait()
        if self._failed is not None:
            raise self._failed

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            for listener in self.listeners:
                self._servers.append(
                    self.loop.run_until_complete(
                        asyncio.start_server(
                            partial(self._connection, listener),
                            sock=listener.sock,
                            limit=MAX_HEAD_BYTES,
                            backlog=LISTEN_BACKLOG,
                        )
                    )
                )
        except BaseException as exc:  # noqa: BLE001 - handed to the thread that started us
            self._failed = exc
            self._ready.set()
            self.loop.close()
            return
        self._ready.set()
        try:
            self.loop.run_forever()
        finally:
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()

    def close(self) -> None:
        if self.loop.is_closed():
            return
        done = asyncio.run_coroutine_threadsafe(self._close(), self.loop)
        try:
            done.result(timeout=10)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=10)
            self.pool.shutdown(wait=False, cancel_futures=True)

    async def _close(self) -> None:
        for server in self._servers:
            server.close()  # stops accepting and closes the listening socket
        for task, writer in list(self._open.items()):
            writer.transport.abort()
            task.cancel()
        await asyncio.gather(*self._open, return_exceptions=True)

    # --- one connection -----------------------------------------------------------------

    async def _connection(
        self, listener: _Listener, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        if task is None or not self._make_room():  # start_server runs each in a task
            self.stats.refused += 1
            writer.transport.abort()
            return
        self._open[task] = writer
        self._waiting[task] = None
        peer = writer.get_extra_info("peername")
        try:
            async with asyncio.timeout(self.deadline_s):
                await self._exchange(listener, task, reader, writer, peer)
        except TimeoutError:
            self.stats.expired += 1
            log.debug("%s: %s not done within %g s; closed", self.name, peer, self.deadline_s)
        except (OSError, EOFError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            # Plain HTTP on the HTTPS port, no client certificate, a probe, a reset: each is
            # seen by its client; at debug level here, as a probe does it every few seconds.
            # (A connection closed to make room ends here too, counted as evicted.)
            if task in self._open:
                self.stats.failed += 1
                log.debug("%s: connection from %s closed: %r", self.name, peer, exc)
        except asyncio.CancelledError:
            # Only close() cancels a connection; the task ends quietly (Python 3.11's
            # streams log a cancelled connection task as an error).
            pass
        finally:
            self._waiting.pop(task, None)
            self._open.pop(task, None)
            writer.transport.abort()  # closed already when the answer went out

    async def _exchange(
        self,
        listener: _Listener,
        task: asyncio.Task[None],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        peer: Any,
    ) -> None:
        if listener.tls is not None:
            await writer.start_tls(listener.tls.context(), ssl_handshake_timeout=self.deadline_s)
        request = await reader.readuntil(b"\r\n\r\n")
        if listener.max_body:
            length = _content_length(request)
            if length is None or length > listener.max_body:
                # Unread: a client that says it sends more than the cap gets no worker.
                response = _TOO_LARGE if length is not None else _BAD_LENGTH
                await self._reply(writer, response)
                return
            # Still waiting (and evictable) until the body is in: a slow body is a slow client.
            request += await reader.readexactly(length)
        del self._waiting[task]
        client = peer if isinstance(peer, tuple) else ("", 0)
        response = await self.loop.run_in_executor(
            self.pool, self._answer, request, client, listener.site
        )
        await self._reply(writer, response)

    @staticmethod
    async def _reply(writer: asyncio.StreamWriter, response: bytes) -> None:
        # Drained only when every byte is with the kernel: then closing loses nothing.
        writer.transport.set_write_buffer_limits(high=0)
        writer.write(response)
        await writer.drain()
        writer.close()
        await writer.wait_closed()

    def _answer(self, head: bytes, client: tuple[Any, ...], site: _Site) -> bytes:
        """The response to one request head (in a worker thread)."""
        try:
            return _Exchange(head, client, site).response  # type: ignore[arg-type]
        except Exception:  # wsgiref answers the app's own errors; this is anything else
            log.exception("%s: answering %s failed", self.name, client)
            return b"HTTP/1.0 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n"

    def _make_room(self) -> bool:
        """Close the oldest connection still waiting for its request if all are taken.

        False: every open connection is being answered; the new one cannot be taken.
        """
        if len(self._open) < self.max_connections:
            return True
        oldest = next(iter(self._waiting), None)
        if oldest is None:
            return False
        self._waiting.pop(oldest)
        # Its read fails at once and its task ends; the socket is closed now.
        self._open.pop(oldest).transport.abort()
        self.stats.evicted += 1
        now = time.monotonic()
        if now - self._warned_at >= WARN_EVERY_S:
            self._warned_at = now
            log.warning(
                "%s: %d connections open (the cap); closing the oldest "
                "that has not sent its request (%d so far): slow or stalled clients",
                self.name,
                self.max_connections,
                self.stats.evicted,
            )
        return True


_TOO_LARGE = b"HTTP/1.0 413 Content Too Large\r\nContent-Length: 0\r\n\r\n"
_BAD_LENGTH = b"HTTP/1.0 411 Length Required\r\nContent-Length: 0\r\n\r\n"


def _content_length(head: bytes) -> int | None:
    """The ``Content-Length`` of a request head (0 without one); None if it is not a number."""
    for line in head.split(b"\r\n")[1:]:
        name, colon, value = line.partition(b":")
        if colon and name.strip().lower() == b"content-length":
            text = value.strip()
            return int(text) if text.isdigit() else None
    return 0


def _family(host: str, port: int) -> tuple[int, str]:
    """The address family and address to bind (IPv6 for ``::``), as prometheus-client does."""
    family, _, _, _, sockaddr = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    return int(family), str(sockaddr[0])


class AppServer:
    """A running listener; :meth:`close` stops it (also as a context manager)."""

    def __init__(self, loop: _Loop, address: tuple[Any, ...]) -> None:
        self._loop = loop
        self._address = address

    @property
    def host(self) -> str:
        """The bound address."""
        return str(self._address[0])

    @property
    def port(self) -> int:
        """The bound port (the real one when 0 was asked for)."""
        return int(self._address[1])

    @property
    def origin(self) -> str:
        """``http://<host>:<port>`` (an IPv6 host in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def stats(self) -> ConnectionStats:
        """Connections closed unanswered, by why."""
        return self._loop.stats

    def close(self) -> None:
        """Stop serving, close every connection and release the port."""
        self._loop.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def serve_app(
    app: WSGIApplication,
    host: str,
    port: int,
    *,
    name: str,
    max_connections: int,
    deadline_s: float,
    max_body: int,
    workers: int = RENDER_WORKERS,
) -> AppServer:
    """Serve ``app`` in plain HTTP on ``host:port`` with the endpoint's bounds.

    The same loop as ``/metrics``: at most ``max_connections`` open, ``deadline_s`` per
    connection from accept to the last byte, and a request body of at most ``max_body``
    bytes (read before a worker sees the request; longer is answered 413).

    Raises:
        OSError: the address cannot be bound.
    """
    family, bind_host = _family(host, port)
    sock = _bind(bind_host, port, family)
    try:
        site = _Site(app, socket.getfqdn(bind_host), _port(sock))
        loop = _Loop(
            [_Listener(sock, site, None, max_body)],
            max_connections=max_connections,
            deadline_s=deadline_s,
            workers=workers,
            name=name,
        )
        loop.start()
    except BaseException:
        sock.close()
        raise
    return AppServer(loop, sock.getsockname())


class MetricsServer(AppServer):
    """The running ``/metrics`` endpoint (and its health port)."""

    def __init__(
        self,
        loop: _Loop,
        address: tuple[Any, ...],
        scheme: str,
        health_address: tuple[Any, ...] | None = None,
    ) -> None:
        super().__init__(loop, address)
        self.scheme = scheme
        self._health_address = health_address

    @property
    def url(self) -> str:
        """``<scheme>://<host>:<port>/metrics``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}/metrics"

    @property
    def health_url(self) -> str | None:
        """``http://<host>:<health port>/healthz``; None without a health port."""
        if self._health_address is None:
            return None
        host = str(self._health_address[0])
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{int(self._health_address[1])}{HEALTH_PATH}"


class MetricsEndpoint:
    """Where and how ``/metrics`` is served: address, TLS files, credentials.

    Build it with :meth:`from_config` before Spark starts, so that a missing password or
    an unreadable key stops the job at once; :meth:`serve` then only binds the port.
    ``health_port`` adds a plain-HTTP listener for ``/healthz`` alone; ``health_max_age_s``
    is the progress age past which ``/healthz`` answers 503.
    """

    def __init__(
        self,
        host: str,
        port: int,
        tls: TlsFiles | None = None,
        auth: BasicAuth | None = None,
        *,
        max_connections: int = 64,
        deadline_s: float = 10.0,
        health_port: int | None = None,
        health_max_age_s: float = 600.0,
    ) -> None:
        self.host = host
        self.port = port
        self.tls = tls
        self.auth = auth
        self.max_connections = max_connections
        self.deadline_s = deadline_s
        self.health_port = health_port
        self.health_max_age_s = health_max_age_s

    @classmethod
    def from_config(
        cls, cfg: MetricsConfig, env: Mapping[str, str] | None = None
    ) -> MetricsEndpoint:
        """The endpoint ``cfg`` describes, its files loaded and its password read.

        Basic auth without TLS is allowed (on a loopback address, or behind a proxy that
        terminates TLS) but logged as a warning: the password crosses the network as
        clear text.

        Raises:
            MetricsEndpointError: the password variable is empty or unset, or the TLS
                files do not load; the message names the setting.
        """
        environ = os.environ if env is None else env
        tls = None
        if cfg.tls_cert_file is not None and cfg.tls_key_file is not None:
            tls = TlsFiles(cfg.tls_cert_file, cfg.tls_key_file, cfg.tls_client_ca_file)
        auth = None
        if cfg.basic_auth_username is not None:
            var = cfg.basic_auth_password_env
            # Stripped as Prometheus strips its password_file, so one Secret can feed both.
            password = environ.get(var, "").strip()
            if not password:
                msg = f"metrics.basic_auth_username is set but ${var} is empty or unset"
                raise MetricsEndpointError(msg)
            auth = BasicAuth(cfg.basic_auth_username, password)
            if tls is None:
                log.warning(
                    "metrics: basic auth without TLS sends the password in clear text; "
                    "set metrics.tls_cert_file and metrics.tls_key_file"
                )
        return cls(
            cfg.host,
            cfg.port,
            tls=tls,
            auth=auth,
            max_connections=cfg.max_connections,
            deadline_s=cfg.request_deadline_s,
            health_port=cfg.health_port,
            health_max_age_s=cfg.health_max_age_s,
        )

    @property
    def scheme(self) -> str:
        """``https`` or ``http``."""
        return "https" if self.tls is not None else "http"

    def describe(self) -> str:
        """The protection in force, for a log line: ``tls=off|on|mutual auth=none|basic``."""
        tls = "off" if self.tls is None else "mutual" if self.tls.mutual else "on"
        return f"tls={tls} auth={'basic' if self.auth else 'none'}"

    def serve(
        self, registry: Collector, progress_age_s: Callable[[], float] | None = None
    ) -> MetricsServer:
        """Serve ``registry`` in a daemon thread until :meth:`MetricsServer.close`.

        Args:
            registry: What ``/metrics`` answers.
            progress_age_s: Seconds since the job last made progress; given, ``/healthz``
                answers from it (on the metrics port, and on ``health_port`` if set).

        Raises:
            OSError: an address cannot be bound.
        """
        app: WSGIApplication = make_wsgi_app(registry)
        liveness = None
        if progress_age_s is not None:
            liveness = Liveness(progress_age_s, self.health_max_age_s)
            app = with_health(app, liveness)
        if self.auth is not None:
            app = basic_auth(app, self.auth)
        family, host = _family(self.host, self.port)
        name = socket.getfqdn(host)
        socks: list[socket.socket] = []
        try:
            socks.append(_bind(host, self.port, family))
            listeners = [_Listener(socks[0], _Site(app, name, _port(socks[0])), self.tls)]
            if liveness is not None and self.health_port is not None:
                socks.append(_bind(host, self.health_port, family))
                site = _Site(health_only(liveness), name, _port(socks[1]))
                listeners.append(_Listener(socks[1], site, None))
            loop = _Loop(
                listeners,
                max_connections=self.max_connections,
                deadline_s=self.deadline_s,
                workers=RENDER_WORKERS,
            )
            loop.start()
        except BaseException:
            for sock in socks:
                sock.close()
            raise
        health = socks[1].getsockname() if len(socks) > 1 else None
        return MetricsServer(loop, socks[0].getsockname(), self.scheme, health)


def _port(sock: socket.socket) -> int:
    """The port a socket is bound to (the real one when 0 was asked for)."""
    return int(sock.getsockname()[1])


def _bind(host: str, port: int, family: int) -> socket.socket:
    return socket.create_server(
        (host, port), family=socket.AddressFamily(family), backlog=LISTEN_BACKLOG
    )
