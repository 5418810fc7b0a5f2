"""The driver's ``/metrics`` endpoint: HTTP or HTTPS (optionally mutual TLS), optionally basic auth.

The response is prometheus-client's own WSGI app, so what a scrape returns is unchanged;
this module only decides who gets it and over what. prometheus-client's
``start_http_server`` takes a certificate but no credentials, and it wraps the listening
socket in TLS, so the handshake runs inside the accept loop: one client that connects and
never sends a ClientHello (a port scanner, a half-open probe) stops every scrape after it.
Here the accept loop only accepts; each connection's handshake runs in that connection's
thread under a deadline.

The certificate and key are re-read when their files change (cert-manager renews them in
place, Kubernetes swaps the mounted Secret), so a renewal needs no restart.

Example:
    >>> endpoint = MetricsEndpoint.from_config(cfg.metrics)  # doctest: +SKIP
    >>> server = endpoint.serve(registry)  # doctest: +SKIP
    >>> server.url  # doctest: +SKIP
    'https://0.0.0.0:9250/metrics'
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import os
import socket
import ssl
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from socketserver import ThreadingMixIn
from types import TracebackType
from typing import Any, Self
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer
from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

from prometheus_client import make_wsgi_app
from prometheus_client.registry import Collector

from conf import FlinkwatchError, MetricsConfig

log = logging.getLogger(__name__)

#: Seconds a connection may take for its TLS handshake, and then for each read or write.
#: Scrapes finish in well under a second; this only bounds clients that stall.
CONNECTION_TIMEOUT_S = 30.0

REALM = "flinkwatch"


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


class _Handler(WSGIRequestHandler):
    # Read and write deadline per connection (StreamRequestHandler applies it).
    timeout = CONNECTION_TIMEOUT_S

    def log_message(self, format: str, *args: Any) -> None:  # noqa: D102
        pass  # one line per scrape is noise; failures show in Prometheus' `up`


class _Server(ThreadingMixIn, WSGIServer):
    """A thread per connection; with ``tls``, the handshake happens in that thread."""

    # Threads never block interpreter exit (nor pile up in a list to be joined).
    daemon_threads = True

    def __init__(self, address: tuple[str, int], family: int, tls: TlsFiles | None) -> None:
        self.address_family = family  # read by TCPServer.__init__ to create the socket
        self.tls = tls
        super().__init__(address, _Handler)

    def finish_request(self, request: Any, client_address: Any) -> None:
        if self.tls is None:
            super().finish_request(request, client_address)
            return
        request.settimeout(CONNECTION_TIMEOUT_S)
        try:
            conn = self.tls.context().wrap_socket(request, server_side=True)
        except OSError as exc:  # ssl.SSLError, timeouts, resets: this client's problem only
            # Plain HTTP on the HTTPS port, no client certificate, a TCP probe: each is
            # seen by its client; at debug level here, as a probe does it every few seconds.
            log.debug("metrics: TLS handshake with %s failed: %s", client_address, exc)
            return
        try:
            super().finish_request(conn, client_address)
        finally:
            self.shutdown_request(conn)


def _family(host: str, port: int) -> tuple[int, str]:
    """The address family and address to bind (IPv6 for ``::``), as prometheus-client does."""
    family, _, _, _, sockaddr = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    return int(family), str(sockaddr[0])


class MetricsServer:
    """A running endpoint; :meth:`close` stops it (also as a context manager)."""

    def __init__(self, httpd: _Server, thread: threading.Thread, scheme: str) -> None:
        self._httpd = httpd
        self._thread = thread
        self.scheme = scheme

    @property
    def host(self) -> str:
        """The bound address."""
        return str(self._httpd.server_address[0])

    @property
    def port(self) -> int:
        """The bound port (the real one when 0 was asked for)."""
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """``<scheme>://<host>:<port>/metrics``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}/metrics"

    def close(self) -> None:
        """Stop serving and release the port."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class MetricsEndpoint:
    """Where and how ``/metrics`` is served: address, TLS files, credentials.

    Build it with :meth:`from_config` before Spark starts, so that a missing password or
    an unreadable key stops the job at once; :meth:`serve` then only binds the port.
    """

    def __init__(
        self,
        host: str,
        port: int,
        tls: TlsFiles | None = None,
        auth: BasicAuth | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.tls = tls
        self.auth = auth

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
        return cls(cfg.host, cfg.port, tls=tls, auth=auth)

    @property
    def scheme(self) -> str:
        """``https`` or ``http``."""
        return "https" if self.tls is not None else "http"

    def describe(self) -> str:
        """The protection in force, for a log line: ``tls=off|on|mutual auth=none|basic``."""
        tls = "off" if self.tls is None else "mutual" if self.tls.mutual else "on"
        return f"tls={tls} auth={'basic' if self.auth else 'none'}"

    def serve(self, registry: Collector) -> MetricsServer:
        """Serve ``registry`` in a daemon thread until :meth:`MetricsServer.close`.

        Raises:
            OSError: the address cannot be bound.
        """
        app: WSGIApplication = make_wsgi_app(registry)
        if self.auth is not None:
            app = basic_auth(app, self.auth)
        family, host = _family(self.host, self.port)
        httpd = _Server((host, self.port), family, self.tls)
        httpd.set_app(app)
        thread = threading.Thread(
            target=httpd.serve_forever, name="flinkwatch-metrics", daemon=True
        )
        thread.start()
        return MetricsServer(httpd, thread, self.scheme)
