"""A bounded HTTP server for WSGI apps: connections are asyncio tasks, two threads render.

prometheus-client's ``start_http_server`` (and the standard library's threading servers)
start a thread per connection with no cap and only a per-read timeout, and its TLS
handshake runs inside the accept loop: one client that never sends a ClientHello stops
every request after it, and clients that send a byte every 20 s hold a thread each,
forever. Here connections are tasks of one asyncio loop (the handshake, reading the
request, writing the answer are non-blocking), at most ``max_connections`` are open (one
more closes the oldest that has not sent its whole request), each has a total deadline,
and only complete requests reach the threads that render the answer. The ``/metrics``
endpoint (:mod:`sinks.inbound.metrics_server`) and the Slack buttons' endpoint
(:mod:`sinks.inbound.slack_actions`) are served by it.
"""

from __future__ import annotations

import asyncio
import io
import logging
import math
import socket
import ssl
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from types import TracebackType
from typing import Any, Protocol, Self
from wsgiref.simple_server import WSGIRequestHandler
from wsgiref.types import WSGIApplication

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


class TlsSource(Protocol):
    """Where a listener's TLS context comes from (asked once per new connection)."""

    def context(self) -> ssl.SSLContext:
        """The context for a new connection."""
        ...


class Site:
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

    def get_app(self) -> WSGIApplication:  # noqa: D102
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
class Listener:
    """One listening socket, what it serves and whether over TLS.

    ``max_body`` is the largest request body read (by ``Content-Length``); 0 reads none,
    as ``/metrics`` and ``/healthz`` take none. A longer body is answered 413 unread.
    """

    sock: socket.socket
    site: Site
    tls: TlsSource | None
    max_body: int = 0


class ServerLoop:
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
        listeners: list[Listener],
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
        """Start the loop's thread; return once it listens (or raise why it cannot)."""
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
        """Stop listening, cancel every connection, stop the loop and its renderers."""
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
        self, listener: Listener, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
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
        listener: Listener,
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

    def _answer(self, head: bytes, client: tuple[Any, ...], site: Site) -> bytes:
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


#: Digits of a ``Content-Length`` read as a number; more is past any body cap (and past
#: what ``int()`` converts: 4300 digits raise).
_LENGTH_DIGITS = 18


def _content_length(head: bytes) -> int | None:
    """The ``Content-Length`` of a request head (0 without one); None if it is not a number.

    A number of more than :data:`_LENGTH_DIGITS` digits (leading zeros aside) is read as
    the largest such: past every cap, it is answered 413 like any other too long.
    """
    for line in head.split(b"\r\n")[1:]:
        name, colon, value = line.partition(b":")
        if colon and name.strip().lower() == b"content-length":
            text = value.strip()
            if not text.isdigit():  # bytes: ASCII digits only
                return None
            text = text.lstrip(b"0") or b"0"
            return int(text) if len(text) <= _LENGTH_DIGITS else 10**_LENGTH_DIGITS
    return 0


def family_of(host: str, port: int) -> tuple[int, str]:
    """The address family and address to bind (IPv6 for ``::``), as prometheus-client does."""
    family, _, _, _, sockaddr = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    return int(family), str(sockaddr[0])


class AppServer:
    """A running listener; :meth:`close` stops it (also as a context manager)."""

    def __init__(self, loop: ServerLoop, address: tuple[Any, ...]) -> None:
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
    family, bind_host = family_of(host, port)
    sock = bind(bind_host, port, family)
    try:
        site = Site(app, socket.getfqdn(bind_host), bound_port(sock))
        loop = ServerLoop(
            [Listener(sock, site, None, max_body)],
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


def bound_port(sock: socket.socket) -> int:
    """The port a socket is bound to (the real one when 0 was asked for)."""
    return int(sock.getsockname()[1])


def bind(host: str, port: int, family: int) -> socket.socket:
    """A listening socket on ``host:port`` with a deep accept queue."""
    return socket.create_server(
        (host, port), family=socket.AddressFamily(family), backlog=LISTEN_BACKLOG
    )
