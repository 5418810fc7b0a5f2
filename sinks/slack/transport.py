"""Talking to Slack: slack-sdk clients whose failures say whether Slack acted.

slack-sdk retries, ``max_retries`` times inside one call, only what surely did not
happen: a 429 (honouring ``Retry-After``) and a request that never reached Slack
(connecting or writing it failed). Anything else that fails is either refused
(:class:`~sinks.base.PermanentDeliveryError`), surely not done
(:class:`~sinks.base.RetryableDeliveryError`) or possibly done (an HTTP 5xx,
``internal_error``, a read timeout, a connection closed after the request was written:
:class:`~sinks.base.AmbiguousDeliveryError`).

Secrets: the token and the webhook URL are scrubbed from every message this package
logs or raises, and from what the slack-sdk clients log.
"""

from __future__ import annotations

import http.client
import logging
import urllib.error
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler
from slack_sdk.http_retry.handler import RetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.webhook import WebhookClient

from conf import SlackConfig
from sinks.base import AmbiguousDeliveryError, PermanentDeliveryError, RetryableDeliveryError

log = logging.getLogger(__name__)

_AUTH_ERRORS = frozenset(
    {"invalid_auth", "not_authed", "token_revoked", "token_expired", "account_inactive"}
)
#: Slack ``error`` values worth waiting out that say the request was not carried out:
#: a rate limit, a truncated request, or a credential an operator can fix (the backlog
#: is delivered once they do) rather than a message to drop.
_NOT_DONE_ERRORS = frozenset({"ratelimited", "request_timeout", *_AUTH_ERRORS})
#: Slack's side failing: its docs say of internal_error and fatal_error that "some
#: aspect of the operation" may have succeeded; service_unavailable does not say.
_MAYBE_DONE_ERRORS = frozenset({"fatal_error", "internal_error", "service_unavailable"})
#: Items asked for per page of a Slack read (Slack recommends at most 200).
PAGE = 200
#: Pages read per try of a search; the next try goes on from where this one stopped.
MAX_PAGES = 50


def _never_sent(error: BaseException | None) -> bool:
    """True when urllib failed to connect or to write the request: nothing reached Slack.

    urllib wraps exactly the OSErrors of connecting and of writing the request in
    ``URLError`` (``AbstractHTTPHandler.do_open``); what fails while waiting for or
    reading the answer (a read timeout, a reset, a close without an answer) comes
    unwrapped, and by then Slack may have acted on the request. slack-sdk catches
    ``HTTPError`` (a ``URLError`` with an answer) itself.
    """
    return isinstance(error, urllib.error.URLError) and not isinstance(
        error, urllib.error.HTTPError
    )


class _NeverSentRetryHandler(RetryHandler):
    """Retries a request that never reached Slack, and nothing else.

    slack-sdk's ``ConnectionErrorRetryHandler`` also retries ``ConnectionResetError``
    and ``RemoteDisconnected``, which come after the request was written: Slack may
    have stored the message, and the retry posts it again.
    """

    def _can_retry(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        return response is None and _never_sent(error)


def _retry_handlers(n: int) -> list[RetryHandler]:
    # No ServerErrorRetryHandler: after a 5xx the message may exist; the ledger asks.
    return [RateLimitErrorRetryHandler(max_retry_count=n), _NeverSentRetryHandler(n)]


class Secrets:
    """Scrubs secrets from text that may reach a log line or an exception."""

    def __init__(self, *secrets: str | None) -> None:
        self.secrets = [s for s in secrets if s]

    def __call__(self, text: object) -> str:
        """``text`` as a string, each secret replaced by ``***``."""
        out = str(text)
        for s in self.secrets:
            out = out.replace(s, "***")
        return out


#: slack-sdk's ERROR line for a body that is not JSON (a proxy's or Slack's own error page
#: during an outage). The call's failure carries the same words to the caller that retries
#: it, and its WARNING says so once, with what happens next; the ERROR beside it, at every
#: try of an outage, would say a handled outage is an error.
_UNDECODED = "Failed to decode Slack API response"


class _ScrubFilter(logging.Filter):
    """Rewrites every record of the slack-sdk clients' logger without the known secrets.

    Drops the :data:`_UNDECODED` records: what they say reaches the log with the failure.
    """

    def __init__(self) -> None:
        super().__init__()
        self.scrub = Secrets()

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if text.startswith(_UNDECODED):
            return False
        record.msg, record.args = self.scrub(text), ()
        return True


_SDK_FILTER = _ScrubFilter()


def _client_logger(*secrets: str) -> logging.Logger:
    """The logger handed to the slack-sdk clients.

    Their DEBUG lines carry the webhook URL and whole payloads, so it stops at INFO
    and scrubs what passes.
    """
    _SDK_FILTER.scrub.secrets.extend(s for s in secrets if s)
    logger = logging.getLogger("sinks.slack.sdk")
    logger.setLevel(logging.INFO)
    if _SDK_FILTER not in logger.filters:
        logger.addFilter(_SDK_FILTER)
    return logger


def webhook_client(url: str, c: SlackConfig) -> WebhookClient:
    """An incoming webhook's client (``url`` is a secret), retrying what never reached Slack."""
    return WebhookClient(
        url,
        timeout=int(c.timeout_s),
        retry_handlers=_retry_handlers(c.max_retries),
        logger=_client_logger(url),
    )


class SlackApi:
    """The Web API with a bot token: one call, its failure typed by what it says.

    Args:
        token: The bot token (a secret).
        c: The Slack section at the start (API URL, time-out, retries).
    """

    def __init__(self, token: str, c: SlackConfig) -> None:
        self.scrub = Secrets(token)
        self._client = WebClient(
            token=token,
            base_url=c.api_url or WebClient.BASE_URL,
            timeout=int(c.timeout_s),
            retry_handlers=_retry_handlers(c.max_retries),
            logger=_client_logger(token),
        )

    def call(self, method: str, **kwargs: Any) -> Any:
        """One Web API call; its failure typed by what it says about the request.

        Raises:
            RetryableDeliveryError: Slack surely did not carry it out (429, auth, no
                connection); try again.
            AmbiguousDeliveryError: it may have been carried out (5xx, internal_error,
                no answer after the request was written).
            PermanentDeliveryError: Slack refused it.
        """
        try:
            return getattr(self._client, method)(**kwargs)
        except SlackApiError as exc:
            error = str(exc.response.get("error", "")) if exc.response is not None else ""
            status = exc.response.status_code if exc.response is not None else 0
            needed = exc.response.get("needed") if exc.response is not None else None
            why = f"{error} (needs {needed})" if needed else error
            detail = self.scrub(f"{method}: HTTP {status} {why or exc}")
            if status == 429 or error in _NOT_DONE_ERRORS:
                if error in _AUTH_ERRORS:
                    log.error("slack: %s; fix the token, the backlog waits for it", detail)
                raise RetryableDeliveryError(detail) from None
            if status >= 500 or error in _MAYBE_DONE_ERRORS:
                raise AmbiguousDeliveryError(detail) from None
            raise PermanentDeliveryError(detail) from None
        except urllib.error.URLError as exc:
            raise RetryableDeliveryError(self.scrub(f"{method}: {exc}")) from None
        except (OSError, http.client.HTTPException) as exc:
            detail = self.scrub(f"{method}: no answer: {type(exc).__name__}: {exc}")
            raise AmbiguousDeliveryError(detail) from None
        except SlackClientError as exc:
            raise RetryableDeliveryError(self.scrub(f"{method}: {exc}")) from None
