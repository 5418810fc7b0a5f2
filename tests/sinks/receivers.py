"""Hostile HTTP receivers on local ports, for the HTTP sinks' tests.

:class:`Hung` is a raw TCP receiver that reads a request and then never answers, or
drips its answer one byte at a time; :class:`Recording` answers every request (any
method) with a set status and headers and records what it got.
"""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Literal


def _read_request(conn: socket.socket) -> bytes | None:
    """One HTTP request's bytes (headers and a Content-Length body); None: closed first."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        body += chunk
    return data


class Hung:
    """Takes connections and requests, then never answers (``silent``) or drips (``drip``).

    ``drip`` sends a valid answer one byte every ``drip_s``, its headers padded to
    ``pad`` bytes, so each read of the client gets a byte well within any time-out.

    Attributes:
        requests: Requests read in full.
        closed: Connections the client closed (or reset) before the answer was done.
        dripping: Connections where the first byte of the answer went out.
        answered: Connections whose whole answer went out.
    """

    def __init__(
        self, mode: Literal["silent", "drip"], *, drip_s: float = 0.1, pad: int = 600
    ) -> None:
        self.mode = mode
        self.drip_s = drip_s
        self.pad = pad
        self.requests = 0
        self.closed = 0
        self.dripping = 0
        self.answered = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._conns: list[socket.socket] = []
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.05)  # a closed socket does not wake a blocked accept()
        self.port = int(self._sock.getsockname()[1])
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _count(self, what: str) -> None:
        with self._lock:
            setattr(self, what, getattr(self, what) + 1)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(None)
            with self._lock:
                self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            if _read_request(conn) is None:
                self._count("closed")
                return
            self._count("requests")
            if self.mode == "silent":
                conn.recv(1)  # b"" when the client gives up (or the server closes)
                if not self._stop.is_set():
                    self._count("closed")
                return
            answer = (
                b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Pad: " + b"x" * self.pad + b"\r\n\r\n"
            )
            for i in range(len(answer)):
                if self._stop.wait(self.drip_s):
                    return
                conn.sendall(answer[i : i + 1])
                if i == 0:
                    self._count("dripping")
            self._count("answered")
        except OSError:
            if not self._stop.is_set():
                self._count("closed")
        finally:
            conn.close()

    def close(self) -> None:
        """Stop, and end every connection (a client still waiting sees it dropped)."""
        self._stop.set()
        self._thread.join(5)
        self._sock.close()
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already gone


class Recording:
    """Answers every request (any method) with ``status`` and ``headers``, and records it.

    The answer's body echoes the request's path, as many error pages do.

    Attributes:
        answers: Statuses of the next answers, first first; then ``status``.
        got: (method, path, headers, body) of each request.
    """

    def __init__(self, status: int = 200, headers: dict[str, str] | None = None) -> None:
        self.status = status
        self.headers = dict(headers or {})
        self.answers: list[int] = []
        self.got: list[tuple[str, str, dict[str, str], bytes]] = []
        me = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                me.got.append((self.command, self.path, dict(self.headers), body))
                echo = f"no route for {self.path}".encode()
                self.send_response(me.answers.pop(0) if me.answers else me.status)
                for k, v in me.headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(echo)))
                self.end_headers()
                self.wfile.write(echo)

            do_GET = do_POST = do_PUT = do_HEAD = _any  # noqa: N815 - names fixed by the base

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.server.server_address[1])
        self._thread = threading.Thread(
            target=lambda: self.server.serve_forever(poll_interval=0.05), daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(5)
