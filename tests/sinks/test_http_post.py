"""One POST to an HTTP receiver, against hostile local receivers: redirects, drips, secrets."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from conf import WebhookConfig
from sinks import AlertLedger, AmbiguousDeliveryError, RetryableDeliveryError, dispatch
from sinks.alertmanager import alertmanager_sink
from sinks.http_post import post
from sinks.webhook import WebhookSink, webhook_sinks
from tests.sinks.receivers import Hung, Recording
from tests.sinks.test_alertmanager import alert, cfg

#: What a webhook URL of a chat tool or pager often carries: a token in its path and query.
PATH_TOKEN = "T0KEN-in-the-path-4f9a2c"
QUERY_TOKEN = "t0ken-in-the-query-77b1"
ENV = {
    "WH_AUTH": "Bearer hook-credential-5e1d",
    "WH_SECRET": "signing-secret-0a9f",
    "AM_TOKEN": "am-bearer-token-c3d7",
}


def hook(base: str, **kw: object) -> WebhookSink:
    c = WebhookConfig.model_validate(
        {
            "name": "oncall",
            "url": f"{base}/hooks/{PATH_TOKEN}?token={QUERY_TOKEN}",
            "secret": "${WH_SECRET}",
            "headers": {"Authorization": "${WH_AUTH}", "X-Team": "data-platform"},
            **kw,
        }
    )
    (sink,) = webhook_sinks([c], lambda: "prod", env=ENV)
    return sink


@pytest.fixture
def elsewhere() -> Iterator[Recording]:
    """Another host (port) that a redirect points to: records whatever reaches it."""
    r = Recording()
    yield r
    r.close()


# --- item 1: redirects ----------------------------------------------------------------


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_a_failure_naming_its_location_and_no_credential_follows_it(
    tmp_path: Path, elsewhere: Recording, status: int
) -> None:
    # An SSO proxy in front of the receiver answers with a login page elsewhere.
    login = f"{elsewhere.url}/login?return_to=/hooks/{PATH_TOKEN}"
    proxy = Recording(status, {"Location": login})
    try:
        ledger = AlertLedger(tmp_path / "l.sqlite")
        webhook = hook(proxy.url)
        c = cfg(urls=(proxy.url,), bearer_token="${AM_TOKEN}")
        am = alertmanager_sink(lambda: c, lambda: "prod", ledger, env=ENV)
        assert am is not None
        ledger.record(0, [alert()], [webhook, am])
        for sink in (webhook, am):
            with pytest.raises(RetryableDeliveryError) as err:
                dispatch.deliver(ledger, sink)
            # Surely not taken (the proxy did not pass it on): pending, not `sending`.
            assert not isinstance(err.value, AmbiguousDeliveryError)
            assert f"HTTP {status}" in str(err.value)
            assert f"127.0.0.1:{elsewhere.port}" in str(err.value)  # where it pointed
            assert PATH_TOKEN not in str(err.value)  # its query held the webhook's path
        assert elsewhere.got == []  # nothing followed the redirect, no credential left
        assert [m for m, *_ in proxy.got] == ["POST", "POST"]
        assert ledger.backlog() == {webhook.name: 1, "alertmanager": 1}
        assert ledger.counts().get((webhook.name, "delivered"), 0) == 0
    finally:
        proxy.close()


# --- item 2: a total deadline per request ---------------------------------------------


def test_a_receiver_that_drips_its_answer_is_cut_at_the_timeout() -> None:
    # Each read gets a byte within the time-out; only a deadline on the whole request ends it.
    drip = Hung("drip", drip_s=0.05, pad=300)
    try:
        problem = post(f"{drip.url}/x", b"{}", {}, 0.5, sink="webhook:t")
        assert isinstance(problem, AmbiguousDeliveryError)  # written, then no whole answer
        assert "no answer" in str(problem)
        assert drip.requests == 1
        assert drip.answered == 0  # given up while the receiver was still dripping
    finally:
        drip.close()


def test_a_receiver_that_never_answers_is_maybe_taken() -> None:
    silent = Hung("silent")
    try:
        problem = post(f"{silent.url}/x", b"{}", {}, 0.3, sink="webhook:t")
        assert isinstance(problem, AmbiguousDeliveryError)
        assert silent.requests == 1
    finally:
        silent.close()


# --- item 12: a webhook's URL is a secret ------------------------------------------------


def test_a_webhook_url_with_a_token_is_in_no_log_line_and_no_ledger_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    receiver = Recording()  # its error pages echo the path asked for
    ledger = AlertLedger(tmp_path / "l.sqlite")
    webhook = hook(receiver.url)
    caplog.set_level(logging.DEBUG)
    raised: list[str] = []
    stored: list[str] = []

    def deliver() -> None:
        try:
            dispatch.deliver(ledger, webhook)
        except RetryableDeliveryError as exc:
            raised.append(str(exc))
        stored.extend(d.error or "" for d in ledger.deliveries())

    ledger.record(0, [alert(alert_id=f"a{i}") for i in range(3)], [webhook])
    try:
        for status in (404, 500, 400):  # retryable, maybe taken, refused for good
            receiver.answers = [status]
            deliver()
    finally:
        receiver.close()
    ledger.record(1, [alert(alert_id="a9")], [webhook])
    deliver()  # nothing listens any more: not reached
    assert len(raised) == 3
    for status in (404, 500, 400):
        assert any(f"HTTP {status}" in e for e in stored), status
    assert any("not reached" in e for e in stored)
    assert all(f"127.0.0.1:{receiver.port}" in e for e in raised)  # named by its host
    for text in [*raised, *stored, caplog.text]:
        for secret in (PATH_TOKEN, QUERY_TOKEN, *ENV.values()):
            assert secret not in text
