"""What the HTTP sinks (Alertmanager, webhooks) share: one POST, its answer classified.

A send to an HTTP receiver ends one of four ways, and the ledger needs to know which:

* taken (a 2xx);
* surely not taken, try again (:class:`~sinks.base.RetryableDeliveryError`): no
  connection, the request not written, 408, 429; and 401, 403, 404 or a redirect (3xx),
  a credential or URL an operator can fix, so the backlog waits for the fix rather than
  being dropped;
* maybe taken (:class:`~sinks.base.AmbiguousDeliveryError`): a 5xx, the deadline or a
  dropped connection after the request was written: the receiver may have acted on it;
* refused for good (:class:`~sinks.base.PermanentDeliveryError`): any other answer (400:
  a payload it will never take): skipped, the rest goes on.

A redirect is never followed: it would turn the POST into a GET to wherever it points
(an SSO proxy's login page), count that page's 200 as delivered and carry the
``Authorization`` and static headers to another host. The URL is a secret too (a
webhook's token is often in its path or query): errors and log lines name the receiver
by scheme, host and port only (:func:`redact_url`), and its answer is scrubbed of the URL
before it is kept.
"""

from __future__ import annotations

import datetime as dt
import http.client
import logging
import socket
import threading
import urllib.parse
from collections.abc import Mapping

from pydantic import SecretStr

from conf import ConfigError
from conf.kafka_options import env_ref
from sinks.base import (
    AmbiguousDeliveryError,
    DeliveryError,
    PermanentDeliveryError,
    RetryableDeliveryError,
)

log = logging.getLogger(__name__)

#: Answers that say the request was not taken, and may be the next time: the receiver
#: or a proxy before it overloaded or restarting (408, 429), or a credential or URL an
#: operator can fix (401, 403, 404).
_TRY_AGAIN = frozenset({401, 403, 404, 408, 429})
#: Answers that need an operator: logged as errors, not only counted.
_FIX_ME = frozenset({401, 403, 404})


def rfc3339(ms: int) -> str:
    """Epoch milliseconds as RFC 3339 in UTC, to the millisecond: ``2026-11-22T03:58:56.753Z``."""
    t = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def classify(status: int) -> type[DeliveryError] | None:
    """What an HTTP status means for the delivery (None: taken).

    A 5xx may come after the receiver acted on the request (a proxy whose upstream took
    it and died): ambiguous. 408 and 429 are a receiver unable to take it now; 401, 403
    and 404 a credential or URL an operator can fix: retryable, the backlog waits. Any
    other answer (400: a payload the receiver will never take) is permanent.
    """
    if 200 <= status < 300:
        return None
    if status >= 500:
        return AmbiguousDeliveryError
    if status in _TRY_AGAIN:
        return RetryableDeliveryError
    return PermanentDeliveryError


def redact_url(url: str) -> str:
    """``url`` as it may be shown: scheme, host and port; what follows is elided.

    A webhook's path and query often carry its token (a chat tool's incoming webhook, a
    pager's integration key), and the part before the host may carry a user and
    password; neither is ever shown. The sink's name says which webhook it is.

    Example:
        >>> redact_url("https://u:p@hooks.example:8443/T0/B1/s3cret?key=k")
        'https://hooks.example:8443/…'
    """
    try:
        parts = urllib.parse.urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return "<a URL that does not parse>"
    if not host:
        return "<a relative URL>" if url else ""
    netloc = f"[{host}]" if ":" in host else host
    if port is not None:
        netloc += f":{port}"
    rest = "/…" if (parts.path not in ("", "/") or parts.query or parts.fragment) else ""
    return f"{parts.scheme}://{netloc}{rest}"


class Scrub:
    """Removes a URL's secret parts from text that may reach a log line or the ledger.

    The receiver's own answer can hold them too: an error page that echoes the path it
    was asked for.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.shown = redact_url(url)
        parts = urllib.parse.urlsplit(url)
        path_query = parts.path + (f"?{parts.query}" if parts.query else "")
        userinfo = parts.netloc.rpartition("@")[0]
        pieces = {path_query, parts.path, parts.query, userinfo} - {"", "/"}
        # Longest first, so a path with its query goes whole before the path alone.
        self._pieces = sorted(pieces, key=len, reverse=True)

    def __call__(self, text: object) -> str:
        """``text`` with the URL redacted and its path, query and user elided."""
        out = str(text).replace(self.url, self.shown)
        for p in self._pieces:
            out = out.replace(p, "…")
        return out


class _Deadline:
    """Ends a request that is not done by its deadline, whatever phase it is in.

    A socket time-out bounds each read, not the whole request: a receiver that sends a
    byte within every time-out would hold a post for ever. At the deadline this shuts the
    connection's socket down from a timer thread, which makes the blocked read fail.
    """

    def __init__(self, conn: http.client.HTTPConnection, timeout_s: float) -> None:
        self._conn = conn
        self._lock = threading.Lock()
        self._over = False
        self.expired = False
        self._timer = threading.Timer(timeout_s, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> _Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()
        with self._lock:
            self._over = True

    def _expire(self) -> None:
        with self._lock:
            if self._over:
                return
            self.expired = True
            sock = self._conn.sock
            if sock is None:
                return
            try:
                # socket.socket's own shutdown: a TLS socket's would tear its state down
                # under the reading thread; the raw one only makes the read fail.
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
            except OSError:
                pass  # closed meanwhile


#: Bytes of a refusal's body kept for the error (a receiver's reason, not its page).
_ANSWER_BYTES = 300


def post(
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    timeout_s: float,
    *,
    sink: str,
    hint: str = "the URL and the credentials",
) -> DeliveryError | None:
    """POST ``body`` to ``url``; None when a 2xx took it, else the failure, classified.

    ``timeout_s`` bounds the whole request (connect, send, the answer to its last byte),
    not each read. A redirect is never followed: a 3xx is a failure that names where it
    pointed (an SSO proxy's login page would otherwise count as delivered and receive the
    credentials). Errors and log lines show the URL redacted (:func:`redact_url`).

    Args:
        url: The full URL.
        body: The request body, sent as it is (signatures are made over these bytes).
        headers: The request's headers.
        timeout_s: Deadline of the whole request, in seconds.
        sink: The sink's name, for the log.
        hint: What to check when the receiver answers 401, 403, 404 or a redirect.

    Returns:
        None, or the error to raise (or to weigh against other receivers' answers).
    """
    scrub = Scrub(url)
    shown = scrub.shown
    parts = urllib.parse.urlsplit(url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    conn_type = (
        http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    )
    conn = conn_type(parts.hostname or "", parts.port, timeout=timeout_s)
    all_headers = {"Content-Length": str(len(body)), **headers}
    written = False
    location = None
    try:
        with _Deadline(conn, timeout_s) as deadline:
            try:
                conn.connect()
            except OSError as exc:
                # Not connected: nothing was sent.
                why = "time-out" if deadline.expired else f"{type(exc).__name__}: {exc}"
                return RetryableDeliveryError(scrub(f"{shown}: not reached: {why}"))
            try:
                conn.request("POST", target, body=body, headers=all_headers)
                written = True
                resp = conn.getresponse()
                status = resp.status
                location = resp.getheader("Location")
                # A 2xx's status line says it was taken; only a refusal's reason is read.
                answer = b"" if 200 <= status < 300 else resp.read(_ANSWER_BYTES)
            except (OSError, http.client.HTTPException) as exc:
                why = "time-out" if deadline.expired else f"{type(exc).__name__}: {exc}"
                if not written:
                    return RetryableDeliveryError(scrub(f"{shown}: not sent: {why}"))
                # Written, then no whole answer (a time-out, the connection dropped): maybe
                # taken.
                return AmbiguousDeliveryError(scrub(f"{shown}: no answer: {why}"))
    finally:
        conn.close()
    text = answer.decode("utf-8", "replace").strip()
    if 300 <= status < 400:
        # The request went no further than the proxy that answered: not taken, and an
        # operator must fix the URL (or what stands in front of the receiver).
        where = redact_url(urllib.parse.urljoin(url, location)) if location else "nowhere"
        log.error(
            "sink=%s %s answered HTTP %d, a redirect to %s, which is not followed: check %s",
            sink,
            shown,
            status,
            where,
            hint,
        )
        return RetryableDeliveryError(
            f"{shown}: HTTP {status}: a redirect to {where}, not followed"
        )
    kind = classify(status)
    if kind is None:
        return None
    if status in _FIX_ME:
        log.error(
            "sink=%s %s answered HTTP %d: check %s; the backlog waits for them",
            sink,
            shown,
            status,
            hint,
        )
    return kind(scrub(f"{shown}: HTTP {status} {text}").strip())


def env_secret(value: SecretStr | str, field: str, env: Mapping[str, str]) -> str:
    """The secret a config field names as ``${ENV_VAR}``, read from ``env``.

    Raises:
        ConfigError: the variable is empty or unset (names the field and the variable).
    """
    raw = value.get_secret_value() if isinstance(value, SecretStr) else value
    var = env_ref(raw) or ""
    # A Kubernetes Secret made with --from-file keeps the file's final newline.
    found = env.get(var, "").rstrip("\r\n")
    if not found:
        msg = f"{field}: environment variable {var} is empty or unset"
        raise ConfigError(msg, fields=(field,))
    return found
