"""The driver's ``/metrics`` endpoint: HTTP or HTTPS (optionally mutual TLS), optionally basic auth.

The response is prometheus-client's own WSGI app, answered by wsgiref's request handler,
so what a scrape returns is unchanged; this module only decides who gets it (basic auth),
over what (HTTP, HTTPS, mutual TLS) and on which ports. The connections themselves are
served by :mod:`sinks.inbound.http_server`: at most ``max_connections`` open, a total deadline
each, no thread per client.

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

import base64
import binascii
import hashlib
import hmac
import json
import logging
import os
import socket
import ssl
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

from prometheus_client import make_wsgi_app
from prometheus_client.registry import Collector

from conf import FlinkwatchError, MetricsConfig
from sinks.inbound.http_server import (
    RENDER_WORKERS,
    AppServer,
    Listener,
    ServerLoop,
    Site,
    bind,
    bound_port,
    family_of,
)

log = logging.getLogger(__name__)

REALM = "flinkwatch"

#: The path of the liveness answer.
HEALTH_PATH = "/healthz"
#: The path of ``flinkwatch explain``'s answer (the detectors' standing for one entity).
EXPLAIN_PATH = "/explain"

#: What answers ``/explain``: the query string in; an HTTP status and a JSON-ready body out.
Explainer = Callable[[str], tuple[int, Any]]


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
        return [b"401 Unauthorized: the metrics endpoint needs HTTP basic auth\n"]

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


def with_explain(app: WSGIApplication, explainer: Explainer) -> WSGIApplication:
    """``app`` with ``/explain`` answered by ``explainer`` as JSON; every other path by ``app``.

    Behind the same TLS and basic auth as ``/metrics`` (:meth:`MetricsEndpoint.serve` wraps
    the whole app): an entity's standing says as much about the fleet as its metrics.
    """
    statuses = {200: "200 OK", 400: "400 Bad Request", 503: "503 Service Unavailable"}

    def routed(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("PATH_INFO") != EXPLAIN_PATH:
            return app(environ, start_response)
        status, answer = explainer(str(environ.get("QUERY_STRING") or ""))
        body = json.dumps(answer).encode()
        start_response(
            statuses.get(status, f"{status} Error"),
            [
                ("Content-Type", "application/json"),
                ("Content-Length", str(len(body))),
                ("Cache-Control", "no-store"),
            ],
        )
        return [body]

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


class MetricsServer(AppServer):
    """The running ``/metrics`` endpoint (and its health port)."""

    def __init__(
        self,
        loop: ServerLoop,
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
        self,
        registry: Collector,
        progress_age_s: Callable[[], float] | None = None,
        explainer: Explainer | None = None,
    ) -> MetricsServer:
        """Serve ``registry`` in a daemon thread until :meth:`MetricsServer.close`.

        Args:
            registry: What ``/metrics`` answers.
            progress_age_s: Seconds since the job last made progress; given, ``/healthz``
                answers from it (on the metrics port, and on ``health_port`` if set).
            explainer: Given, ``/explain`` answers from it (on the metrics port only).

        Raises:
            OSError: an address cannot be bound.
        """
        app: WSGIApplication = make_wsgi_app(registry)
        liveness = None
        if progress_age_s is not None:
            liveness = Liveness(progress_age_s, self.health_max_age_s)
            app = with_health(app, liveness)
        if explainer is not None:
            app = with_explain(app, explainer)
        if self.auth is not None:
            app = basic_auth(app, self.auth)
        family, host = family_of(self.host, self.port)
        name = socket.getfqdn(host)
        socks: list[socket.socket] = []
        try:
            socks.append(bind(host, self.port, family))
            listeners = [Listener(socks[0], Site(app, name, bound_port(socks[0])), self.tls)]
            if liveness is not None and self.health_port is not None:
                socks.append(bind(host, self.health_port, family))
                site = Site(health_only(liveness), name, bound_port(socks[1]))
                listeners.append(Listener(socks[1], site, None))
            loop = ServerLoop(
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
