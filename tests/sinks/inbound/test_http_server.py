"""The bounded HTTP server on its own: a small WSGI app served with its caps, over real sockets."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterable, Iterator
from typing import Any

import pytest

from sinks.inbound.http_server import AppServer, _content_length, family_of, serve_app


def echo(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
    """Answers the request's body back, with its path."""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length)
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [environ["PATH_INFO"].encode() + b" " + body]


@pytest.fixture
def server() -> Iterator[AppServer]:
    with serve_app(
        echo, "127.0.0.1", 0, name="test", max_connections=8, deadline_s=1.0, max_body=16
    ) as s:
        yield s


def exchange(server: AppServer, request: bytes) -> bytes:
    with socket.create_connection((server.host, server.port), timeout=5) as c:
        c.sendall(request)
        out = b""
        while chunk := c.recv(65536):
            out += chunk
        return out


def post(path: str, body: bytes, length: str | None = None) -> bytes:
    size = str(len(body)) if length is None else length
    return (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {size}\r\nConnection: close\r\n\r\n"
    ).encode() + body


def test_a_request_within_the_caps_reaches_the_app_whole(server: AppServer) -> None:
    answer = exchange(server, post("/press", b"payload=1"))
    assert answer.startswith(b"HTTP/1.0 200 OK")
    assert answer.endswith(b"/press payload=1")
    assert server.origin == f"http://127.0.0.1:{server.port}"


def test_a_body_past_the_cap_is_answered_413_unread(server: AppServer) -> None:
    answer = exchange(server, post("/press", b"x" * 17))
    assert answer.startswith(b"HTTP/1.0 413 Content Too Large")


def test_a_length_that_is_no_number_is_answered_411(server: AppServer) -> None:
    answer = exchange(server, post("/press", b"x", length="-1"))
    assert answer.startswith(b"HTTP/1.0 411 Length Required")


def test_a_client_that_sends_nothing_is_closed_at_the_deadline(server: AppServer) -> None:
    start = time.monotonic()
    assert exchange(server, b"") == b""
    assert 0.9 <= time.monotonic() - start < 4
    assert server.stats.expired == 1


@pytest.mark.parametrize(
    ("head", "length"),
    [
        (b"GET / HTTP/1.1\r\nHost: x", 0),
        (b"POST / HTTP/1.1\r\ncontent-length:  12 ", 12),
        (b"POST / HTTP/1.1\r\nContent-Length: 007", 7),
        (b"POST / HTTP/1.1\r\nContent-Length: 1e3", None),
        (b"POST / HTTP/1.1\r\nContent-Length: " + b"9" * 40, 10**18),
    ],
)
def test_the_content_length_of_a_head(head: bytes, length: int | None) -> None:
    assert _content_length(head) == length


def test_an_address_is_bound_in_its_own_family() -> None:
    assert family_of("127.0.0.1", 0) == (socket.AF_INET, "127.0.0.1")
