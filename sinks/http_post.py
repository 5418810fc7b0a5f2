"""What the HTTP sinks (Alertmanager, webhooks) share: one POST, its answer classified.

A send to an HTTP receiver ends one of four ways, and the ledger needs to know which:

* taken (a 2xx);
* surely not taken, try again (:class:`~sinks.base.RetryableDeliveryError`): no
  connection, the request not written, 408, 429; and 401, 403, 404, a credential or URL
  an operator can fix, so the backlog waits for the fix rather than being dropped;
* maybe taken (:class:`~sinks.base.AmbiguousDeliveryError`): a 5xx, a time-out or a
  dropped connection after the request was written: the receiver may have acted on it;
* refused for good (:class:`~sinks.base.PermanentDeliveryError`): any other answer (400:
  a payload it will never take): skipped, the rest goes on.
"""

from __future__ import annotations

import datetime as dt
import http.client
import logging
import urllib.error
import urllib.request
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

    Args:
        url: The full URL.
        body: The request body, sent as it is (signatures are made over these bytes).
        headers: The request's headers.
        timeout_s: Connect and read time-out.
        sink: The sink's name, for the log.
        hint: What to check when the receiver answers 401, 403 or 404.

    Returns:
        None, or the error to raise (or to weigh against other receivers' answers).
    """
    req = urllib.request.Request(url, data=body, headers=dict(headers), method="POST")  # noqa: S310 - http(s) only, checked by the config
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:  # noqa: S310
            resp.read()
            status = int(resp.status)
            answer = ""
    except urllib.error.HTTPError as exc:
        status, answer = exc.code, exc.read(300).decode("utf-8", "replace").strip()
    except urllib.error.URLError as exc:
        # urllib wraps what fails while connecting and writing the request: not taken.
        return RetryableDeliveryError(f"{url}: not reached: {exc.reason}")
    except (OSError, http.client.HTTPException) as exc:
        # Written, then no answer (a read time-out, the connection dropped): maybe taken.
        return AmbiguousDeliveryError(f"{url}: no answer: {type(exc).__name__}: {exc}")
    kind = classify(status)
    if kind is None:
        return None
    if status in _FIX_ME:
        log.error(
            "sink=%s %s answered HTTP %d: check %s; the backlog waits for them",
            sink,
            url,
            status,
            hint,
        )
    return kind(f"{url}: HTTP {status} {answer}".strip())


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
