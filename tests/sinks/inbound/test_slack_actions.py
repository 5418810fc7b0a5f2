"""Acting from Slack: a user presses the incident message's buttons in the local Slack emulator.

Real local HTTP both ways: the emulator posts signed ``block_actions`` payloads to the
endpoint flinkwatch serves, and flinkwatch updates the message through slack-sdk's
``WebClient`` against the emulator. Transitions are recorded as the running job records
them (``AlertDelivery`` over ``Outputs``) and delivered by the Slack dispatcher's thread.
"""

from __future__ import annotations

import logging
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from slack_sdk import WebClient

from conf import AppConfig, ConfigError, SlackConfig
from conf.destinations import SlackActionsConfig
from detectors.correlation import Correlator
from lab.slack import SlackEmulator
from lab.slack.interactivity import sign
from sinks import AlertLedger
from sinks.dispatch import Dispatcher
from sinks.inbound.slack_actions import (
    ACK,
    ACTIONS_BLOCK,
    NOISE,
    PATH,
    SILENCE_1H,
    SILENCE_4H,
    SlackActions,
    signing_secret,
)
from sinks.silence_store import SilenceStore
from sinks.slack import SlackBotSink
from streaming.delivery import AlertDelivery, Outputs, PipelineStats
from tests.sinks.test_prometheus import bare_registry

TOKEN = "xoxb-0000-actions-token"
SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
JOB = "3f4c2a9b7d1e4f60a8b5c2d1e0f9a7b3"
OTHER_JOB = "aaaa2a9b7d1e4f60a8b5c2d1e0f9a7b3"
CHANNEL = "#flink-alerts"
ELSEWHERE = "#elsewhere"


def wait_until(check: Callable[[], Any], timeout_s: float = 60.0) -> Any:
    """Poll ``check`` until it returns something true, or fail at the deadline.

    The deadline only ends a test that hangs: on a busy machine (CI beside other work)
    the dispatcher thread's message update can take seconds.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout_s} s: {check}")
        time.sleep(0.02)


class Batch:
    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows

    def collect(self) -> list[dict[str, Any]]:
        return self.rows


def row(
    alert_id: str,
    job: str = JOB,
    status: str = "firing",
    detector: str = "checkpoint_failures",
) -> dict[str, Any]:
    return {
        "kind": "alert",
        "alert_id": alert_id,
        "detector": detector,
        "entity": f"job:{job}",
        "status": status,
        "severity": "warning",
        "event_ms": int(time.time() * 1000),
        "job_id": job,
        "job_name": "orders-enrich",
        "tm_id": None,
        "host": None,
        "summary": f"3 checkpoints of job {job} expired within 30 min",
        "evidence": "{}",
        "data": None,
    }


@dataclass
class Rig:
    emu: SlackEmulator
    ledger: AlertLedger
    actions: SlackActions
    deliver: AlertDelivery
    registry: CollectorRegistry
    silences_path: Path
    access: list[SlackActionsConfig]
    batches: int = 0

    def allow(self, **settings: Any) -> None:
        """Put ``slack.actions`` settings in force, as a reload does."""
        self.access[0] = SlackActionsConfig.model_validate(settings)

    def record(self, *rows: dict[str, Any]) -> None:
        self.deliver(Batch(list(rows)), self.batches)  # type: ignore[arg-type]
        self.batches += 1

    def page(self, alert_id: str, job: str = JOB) -> dict[str, Any]:
        """Record a firing and wait for its message in Slack and its delivery in the ledger.

        The message is in Slack before the dispatcher records it delivered (and where it
        is): a press in between finds an incident the endpoint does not know yet.
        """
        self.record(row(alert_id, job))
        wait_until(lambda: self.ledger.last_delivered("slack", alert_id))
        return wait_until(lambda: self.message_of(alert_id))

    def message_of(self, alert_id: str) -> dict[str, Any] | None:
        for m in self.emu.messages(CHANNEL):
            if alert_id in str(m["blocks"]):
                return m
        return None

    def now(self, ts: str) -> dict[str, Any]:
        return next(m for m in self.emu.messages(CHANNEL) if m["ts"] == ts)

    def sample(self, name: str, **labels: str) -> float | None:
        return self.registry.get_sample_value(name, labels)


@contextmanager
def rig_at(state_dir: Path, silences_path: Path) -> Iterator[Rig]:
    """The buttons' rig with the ledger in ``state_dir`` and the silences at ``silences_path``."""
    app = AppConfig.model_validate({"output": {"state_dir": str(state_dir)}})
    with SlackEmulator(token=TOKEN, channels=(CHANNEL, ELSEWHERE), signing_secret=SECRET) as emu:
        cfg = SlackConfig(
            mode="bot",
            api_url=emu.base_url,
            channel=CHANNEL,
            max_retries=0,
            interactivity_port=0,
        )
        ledger = AlertLedger(app.output.ledger_path)
        sink = SlackBotSink(TOKEN, ledger, lambda: cfg, lambda: "prod-eu")
        dispatcher = Dispatcher(ledger, [sink], poll_s=0.5).start()
        outputs = Outputs(
            ledger=ledger,
            dispatcher=dispatcher,
            correlator=Correlator(app.correlation),
            silences=SilenceStore(silences_path),
        )
        access = [SlackActionsConfig()]
        actions = SlackActions(
            sink, ledger, silences_path, dispatcher, SECRET, access=lambda: access[0]
        )
        registry = bare_registry(actions=actions)
        try:
            with actions.serve("127.0.0.1", 0) as server:
                emu.set_request_url(f"{server.origin}{PATH}")
                yield Rig(
                    emu,
                    ledger,
                    actions,
                    AlertDelivery(outputs, PipelineStats(), app),
                    registry,
                    silences_path,
                    access,
                )
        finally:
            dispatcher.stop()
            ledger.close()


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    with rig_at(tmp_path, tmp_path / "silences.sqlite") as r:
        yield r


def buttons(message: dict[str, Any]) -> list[str]:
    return [
        e["action_id"]
        for b in message["blocks"] or []
        if b["type"] == "actions" and b.get("block_id") == ACTIONS_BLOCK
        for e in b["elements"]
    ]


def text_of(message: dict[str, Any]) -> str:
    return str(message["blocks"])


def test_a_new_incident_message_carries_the_buttons_and_a_resolved_one_does_not(
    rig: Rig,
) -> None:
    m = rig.page("inc-1")
    assert buttons(m) == [ACK, SILENCE_1H, SILENCE_4H, NOISE]
    rig.record(row("inc-1", status="resolved"))
    wait_until(lambda: rig.now(m["ts"])["updates"] == 1)
    assert buttons(rig.now(m["ts"])) == []


def test_acknowledge_shows_who_and_when_and_a_second_press_changes_nothing(rig: Rig) -> None:
    m = rig.page("inc-1")
    assert rig.emu.click(CHANNEL, m["ts"], ACK, user="U123") == (200, "")
    acked = wait_until(lambda: "Acknowledged by <@U123> at" in text_of(rig.now(m["ts"])))
    assert acked
    shown = text_of(rig.now(m["ts"]))
    assert re.search(r"Acknowledged by <@U123> at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", shown)
    # Someone else presses it too: the message keeps the first, and they are told.
    assert rig.emu.click(CHANNEL, m["ts"], ACK, user="U456") == (200, "")
    (told,) = wait_until(lambda: rig.emu.ephemeral("U456"))
    assert told["text"].startswith("Already acknowledged by <@U123> at")
    assert text_of(rig.now(m["ts"])) == shown
    assert "U456" not in shown
    assert rig.sample("flinkwatch_slack_actions_total", outcome="acted") == 1
    assert rig.sample("flinkwatch_slack_actions_total", outcome="repeated") == 1


def test_the_acknowledgement_stays_on_the_message_when_the_incident_resolves(rig: Rig) -> None:
    m = rig.page("inc-1")
    rig.emu.click(CHANNEL, m["ts"], ACK, user="U123")
    wait_until(lambda: "Acknowledged by <@U123>" in text_of(rig.now(m["ts"])))
    rig.record(row("inc-1", status="resolved"))
    wait_until(lambda: buttons(rig.now(m["ts"])) == [])
    assert "Acknowledged by <@U123>" in text_of(rig.now(m["ts"]))


def test_silence_for_an_hour_silences_the_job_like_the_command_line(rig: Rig) -> None:
    m = rig.page("inc-1")
    pressed_ms = int(time.time() * 1000)
    assert rig.emu.click(CHANNEL, m["ts"], SILENCE_1H, user="U123") == (200, "")
    store = SilenceStore(rig.silences_path)
    try:
        (s,) = store.listing(int(time.time() * 1000))
    finally:
        store.close()
    assert s.given == (f"job_id={JOB}",)
    assert s.matchers.job_id == JOB and s.matchers.detector is None
    assert abs(s.ends_ms - (pressed_ms + 3_600_000)) < 5_000
    assert "Slack" in s.comment and "<@U123>" in s.comment
    assert s.created_by == "slack:U123"
    wait_until(lambda: f"Job `{JOB}` silenced by <@U123> until" in text_of(rig.now(m["ts"])))
    # Another incident of the same job, recorded from now on, does not page; another job does.
    rig.record(row("inc-2", detector="restart_storm"), row("inc-3", job=OTHER_JOB))
    states = {d.key: d.state for d in rig.ledger.deliveries(None)}
    assert states["inc-2:firing"] == "silenced"
    assert states["inc-3:firing"] in ("pending", "sending", "delivered")


def test_a_second_silence_press_within_the_first_adds_nothing_and_four_hours_extends(
    rig: Rig,
) -> None:
    m = rig.page("inc-1")
    rig.emu.click(CHANNEL, m["ts"], SILENCE_1H, user="U123")
    rig.emu.click(CHANNEL, m["ts"], SILENCE_1H, user="U456")
    (told,) = wait_until(lambda: rig.emu.ephemeral("U456"))
    assert "silenced already, by <@U123>" in told["text"]
    rig.emu.click(CHANNEL, m["ts"], SILENCE_4H, user="U456")
    store = SilenceStore(rig.silences_path)
    try:
        ends = sorted(s.ends_ms - s.created_ms for s in store.listing(int(time.time() * 1000)))
    finally:
        store.close()
    assert ends == [3_600_000, 4 * 3_600_000]


def test_resolve_as_noise_counts_a_false_alarm_of_the_detector_and_hides_nothing(
    rig: Rig,
) -> None:
    m = rig.page("inc-1")
    before = rig.sample("flinkwatch_false_alarms_total", detector="checkpoint_failures")
    assert before == 0
    assert rig.emu.click(CHANNEL, m["ts"], NOISE, user="U123") == (200, "")
    assert rig.emu.click(CHANNEL, m["ts"], NOISE, user="U456") == (200, "")
    assert rig.sample("flinkwatch_false_alarms_total", detector="checkpoint_failures") == 1
    assert rig.sample("flinkwatch_false_alarms_total", detector="restart_storm") == 0
    wait_until(lambda: "Resolved as noise by <@U123>" in text_of(rig.now(m["ts"])))
    # Later transitions still page: the resolve updates the message and replies in its thread.
    rig.record(row("inc-1", status="resolved"))
    wait_until(lambda: rig.now(m["ts"])["replies"])
    assert "Resolved as noise by <@U123>" in text_of(rig.now(m["ts"]))


def test_a_forged_signature_and_a_replayed_timestamp_are_refused_and_counted(rig: Rig) -> None:
    m = rig.page("inc-1")
    forged = rig.emu.click(CHANNEL, m["ts"], ACK, signing_secret="not-the-secret")
    stale = rig.emu.click(CHANNEL, m["ts"], SILENCE_1H, timestamp=time.time() - 600)
    assert forged[0] == 401 and "does not verify" in forged[1]
    assert stale[0] == 401 and "more than 300 s" in stale[1]
    assert rig.sample("flinkwatch_slack_actions_total", outcome="forged") == 1
    assert rig.sample("flinkwatch_slack_actions_total", outcome="stale") == 1
    assert rig.sample("flinkwatch_slack_actions_total", outcome="acted") == 0
    # Nothing happened: no silence, no acknowledgement, no update of the message.
    store = SilenceStore(rig.silences_path)
    try:
        assert store.listing(0, expired=True) == []
    finally:
        store.close()
    assert rig.ledger.recall("slack", "acts:inc-1") is None
    assert rig.now(m["ts"])["updates"] == 0


def post(rig: Rig, body: bytes, headers: dict[str, str]) -> int:
    req = urllib.request.Request(
        rig.emu.request_url or "", data=body, method="POST", headers=headers
    )
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def signed(body: bytes, at: float | None = None) -> dict[str, str]:
    ts = str(int(time.time() if at is None else at))
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": sign(SECRET, ts, body)}


def test_an_unsigned_or_malformed_request_is_refused_and_counted(rig: Rig) -> None:
    rig.page("inc-1")
    assert post(rig, b"payload=%7B%7D", {}) == 401
    assert post(rig, b"payload=not-json", signed(b"payload=not-json")) == 400
    body = b'payload={"type":"block_actions","user":{"id":"U1"},"actions":[]}'
    assert post(rig, body, signed(body)) == 400
    assert rig.sample("flinkwatch_slack_actions_total", outcome="forged") == 1
    assert rig.sample("flinkwatch_slack_actions_total", outcome="malformed") == 2


def test_a_body_past_the_cap_is_refused_unread(rig: Rig) -> None:
    big = b"payload=" + b"x" * (300 * 1024)
    assert post(rig, big, signed(big)) == 413
    assert rig.sample("flinkwatch_slack_actions_total", outcome="malformed") == 0


def test_a_press_on_an_incident_flinkwatch_forgot_is_answered_kindly(rig: Rig) -> None:
    m = rig.page("inc-1")
    rig.ledger.forget("slack", "inc-1")  # as pruning does, once the incident is long over
    assert rig.emu.click(CHANNEL, m["ts"], ACK, user="U123") == (200, "")
    (told,) = wait_until(lambda: rig.emu.ephemeral("U123"))
    assert "no longer knows incident `inc-1`" in told["text"]
    assert rig.sample("flinkwatch_slack_actions_total", outcome="unknown_incident") == 1


def test_slack_sending_the_same_press_again_does_it_once(rig: Rig) -> None:
    m = rig.page("inc-1")
    pressed = f"{time.time():.6f}"
    for _ in range(2):
        assert rig.emu.click(CHANNEL, m["ts"], SILENCE_1H, "U123", action_ts=pressed) == (200, "")
    store = SilenceStore(rig.silences_path)
    try:
        assert len(store.listing(int(time.time() * 1000))) == 1
    finally:
        store.close()
    assert rig.sample("flinkwatch_slack_actions_total", outcome="repeated") == 1
    assert rig.emu.ephemeral() == []  # a retry is not news to the presser


def test_buttons_need_the_bot_and_the_signing_secret() -> None:
    with pytest.raises(ValueError, match="needs slack.mode: bot"):
        SlackConfig(mode="webhook", interactivity_port=9260)
    cfg = SlackConfig(mode="bot", interactivity_port=9260, signing_secret_env="MY_SECRET")
    with pytest.raises(ConfigError, match=r"\$MY_SECRET"):
        signing_secret(cfg, {})
    assert signing_secret(cfg, {"MY_SECRET": " s3cret\n"}) == "s3cret"
    with pytest.raises(ValueError, match="must differ from metrics.port"):
        AppConfig.model_validate({"slack": {"mode": "bot", "interactivity_port": 9250}})


def test_the_run_serves_the_buttons_on_the_configured_port_and_stops_without_a_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from streaming.runtime import buttons_secret as _signing_secret
    from streaming.runtime import slack_actions as _slack_actions

    app = AppConfig.model_validate(
        {
            "output": {"state_dir": str(tmp_path)},
            "slack": {"mode": "bot", "interactivity_port": 0, "interactivity_host": "127.0.0.1"},
        }
    )
    monkeypatch.delenv("SLACK_SIGNING_SECRET", raising=False)
    with pytest.raises(ConfigError, match="SLACK_SIGNING_SECRET"):
        _signing_secret(app)
    monkeypatch.setenv("SLACK_SIGNING_SECRET", SECRET)
    ledger = AlertLedger(app.output.ledger_path)
    sink = SlackBotSink(TOKEN, ledger, lambda: app.slack, lambda: "prod-eu")
    outputs = Outputs(ledger=ledger, dispatcher=Dispatcher(ledger, [sink]))
    wired = _slack_actions(app, sink, outputs, _signing_secret(app))
    assert wired is not None
    actions, server = wired
    try:
        body = b"payload=x"
        req = urllib.request.Request(f"{server.origin}{PATH}", data=body, headers=signed(body))
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(req, timeout=5)
        refused.value.close()
        assert refused.value.code == 400
        assert actions.outcomes["malformed"] == 1
    finally:
        server.close()
        ledger.close()


def raw_post(url: str, head: bytes, body: bytes = b"payload=x") -> tuple[int, bytes]:
    """POST through a bare socket: header bytes urllib would refuse or rewrite go as given.

    Returns the answer's status (0 when the connection closed unanswered) and its body.
    """
    parts = urllib.parse.urlsplit(url)
    request = (
        f"POST {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\n".encode()
        + head
        + (b"" if b"content-length" in head.lower() else b"Content-Length: %d\r\n" % len(body))
        + b"\r\n"
        + body
    )
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    fields = status_line.split()
    return (int(fields[1]) if len(fields) > 1 else 0), rest.partition(b"\r\n\r\n")[2]


def test_headers_that_are_not_numbers_or_ascii_are_refused_as_forged_without_a_traceback(
    rig: Rig, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    # '²'.isdigit() is True but int('²') raises; 5000 digits pass isdigit() and exceed
    # int()'s limit; a non-ASCII signature makes hmac.compare_digest raise.
    now = str(int(time.time())).encode()
    heads = [
        b"X-Slack-Request-Timestamp: \xb2\r\nX-Slack-Signature: v0=00\r\n",
        b"X-Slack-Request-Timestamp: " + b"9" * 5000 + b"\r\nX-Slack-Signature: v0=00\r\n",
        b"X-Slack-Request-Timestamp: " + now + b"\r\nX-Slack-Signature: v0=\xb2\r\n",
    ]
    url = rig.emu.request_url or ""
    with caplog.at_level(logging.DEBUG):
        for head in heads * 2:
            status, body = raw_post(url, head)
            assert status == 401, body
    assert rig.sample("flinkwatch_slack_actions_total", outcome="forged") == 6
    assert rig.sample("flinkwatch_slack_actions_total", outcome="error") == 0
    assert "Traceback" not in capfd.readouterr().err
    # One warning for the six (the limiter's one a minute), and no traceback in any log.
    warned = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warned) == 1, [r.getMessage() for r in warned]
    assert not any(r.exc_info for r in caplog.records)


def test_a_content_length_past_int_limits_is_refused_unread(
    rig: Rig, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG):
        status, _ = raw_post(rig.emu.request_url or "", b"Content-Length: " + b"9" * 5000 + b"\r\n")
    assert status == 413
    assert "Traceback" not in capfd.readouterr().err
    assert not any(r.exc_info for r in caplog.records)


def test_a_signed_payload_nested_past_the_json_parsers_depth_is_malformed(
    rig: Rig, capfd: pytest.CaptureFixture[str]
) -> None:
    body = b"payload=" + b"[" * 200_000
    assert post(rig, body, signed(body)) == 400
    assert rig.sample("flinkwatch_slack_actions_total", outcome="malformed") == 1
    assert "Traceback" not in capfd.readouterr().err


# --- who may press, and from where (issue #35, item 5) -------------------------------


def nothing_done(rig: Rig, incident: str = "inc-1") -> bool:
    """No acknowledgement, silence or noise recorded, no silence stored."""
    store = SilenceStore(rig.silences_path)
    try:
        silences = store.listing(0, expired=True)
    finally:
        store.close()
    return rig.ledger.recall("slack", f"acts:{incident}") is None and silences == []


def refused(rig: Rig, reason: str) -> float | None:
    return rig.sample("flinkwatch_slack_actions_refused_total", reason=reason)


def test_a_press_from_another_workspace_or_organisation_is_refused_told_and_counted(
    rig: Rig,
) -> None:
    m = rig.page("inc-1")
    status, answer = rig.emu.click(CHANNEL, m["ts"], SILENCE_4H, "U123", team="T0THEIRS")
    assert status == 200 and "workspace" in answer
    (told,) = wait_until(lambda: rig.emu.ephemeral("U123"))
    assert "T0THEIRS" in told["text"] and "nothing done" in told["text"]
    # The same workspace id, but pressed under an Enterprise Grid organisation (or an
    # org-wide install) that this bot's token does not belong to.
    for other in ({"enterprise": "E0THEIRS"}, {"enterprise_install": True}):
        assert rig.emu.click(CHANNEL, m["ts"], ACK, "U123", **other)[0] == 200
    assert refused(rig, "team") == 3
    assert rig.sample("flinkwatch_slack_actions_total", outcome="refused") == 3
    assert rig.sample("flinkwatch_slack_actions_total", outcome="acted") == 0
    assert nothing_done(rig)
    assert rig.now(m["ts"])["updates"] == 0


def test_a_slack_connect_user_of_another_organisation_is_refused_unless_their_team_is_allowed(
    rig: Rig,
) -> None:
    m = rig.page("inc-1")
    status, _ = rig.emu.click(CHANNEL, m["ts"], SILENCE_4H, "U0GUEST", user_team="T0PARTNER")
    assert status == 200
    (told,) = wait_until(lambda: rig.emu.ephemeral("U0GUEST"))
    assert "another organisation" in told["text"]
    assert refused(rig, "external_user") == 1
    assert nothing_done(rig)
    rig.allow(allowed_teams=["T0PARTNER"])
    assert rig.emu.click(CHANNEL, m["ts"], ACK, "U0GUEST", user_team="T0PARTNER")[0] == 200
    wait_until(lambda: "Acknowledged by <@U0GUEST>" in text_of(rig.now(m["ts"])))
    assert refused(rig, "external_user") == 1


def test_a_press_on_a_copy_of_the_message_in_another_channel_is_refused(rig: Rig) -> None:
    m = rig.page("inc-1")
    # The same buttons (same incident id) on a message in another channel: another
    # flinkwatch posting through the same Slack app, say.
    client = WebClient(token=TOKEN, base_url=rig.emu.base_url)
    copy = client.chat_postMessage(channel=ELSEWHERE, text=m["text"], blocks=m["blocks"])
    assert rig.emu.click(ELSEWHERE, copy["ts"], SILENCE_1H, "U123")[0] == 200
    (told,) = wait_until(lambda: rig.emu.ephemeral("U123"))
    assert "not the incident's message" in told["text"]
    assert refused(rig, "channel") == 1
    assert nothing_done(rig)
    # The incident's own message still takes it.
    assert rig.emu.click(CHANNEL, m["ts"], SILENCE_1H, "U123")[0] == 200
    assert rig.sample("flinkwatch_slack_actions_total", outcome="acted") == 1


def test_with_an_allow_list_only_listed_users_and_members_of_listed_groups_may_press(
    rig: Rig,
) -> None:
    rig.emu.set_usergroup("S0ONCALL", ("U0ONCALL", "U0LEAD"))
    rig.allow(allowed_users=["U0SRE"], allowed_usergroups=["S0ONCALL"])
    m = rig.page("inc-1")
    assert rig.emu.click(CHANNEL, m["ts"], SILENCE_4H, "U0INTERN")[0] == 200
    (told,) = wait_until(lambda: rig.emu.ephemeral("U0INTERN"))
    assert "slack.actions.allowed_users" in told["text"]
    assert refused(rig, "user") == 1
    assert nothing_done(rig)
    assert rig.emu.click(CHANNEL, m["ts"], ACK, "U0ONCALL")[0] == 200
    assert rig.emu.click(CHANNEL, m["ts"], SILENCE_1H, "U0SRE")[0] == 200
    wait_until(lambda: "silenced by <@U0SRE>" in text_of(rig.now(m["ts"])))
    assert "Acknowledged by <@U0ONCALL>" in text_of(rig.now(m["ts"]))
    # Membership is read once and kept a while (slack.actions.usergroups_cache_s).
    assert rig.emu.click(CHANNEL, m["ts"], NOISE, "U0LEAD")[0] == 200
    looked_up = [p for p, _ in rig.emu.requests if p == "/api/usergroups.users.list"]
    assert looked_up == ["/api/usergroups.users.list"]
    assert rig.sample("flinkwatch_slack_actions_total", outcome="acted") == 3
    assert refused(rig, "user") == 1


def test_a_group_slack_cannot_list_refuses_its_members_saying_why(rig: Rig) -> None:
    rig.allow(allowed_usergroups=["S0GONE"])
    m = rig.page("inc-1")
    assert rig.emu.click(CHANNEL, m["ts"], ACK, "U123")[0] == 200
    (told,) = wait_until(lambda: rig.emu.ephemeral("U123"))
    assert "S0GONE" in told["text"] and "no_such_subteam" in told["text"]
    assert refused(rig, "unverified") == 1
    assert nothing_done(rig)


def test_a_group_read_before_keeps_its_members_while_slack_cannot_list_it(rig: Rig) -> None:
    rig.emu.set_usergroup("S0ONCALL", ("U0ONCALL",))
    rig.allow(allowed_usergroups=["S0ONCALL"], usergroups_cache_s=0.001)
    m = rig.page("inc-1")
    assert rig.emu.click(CHANNEL, m["ts"], ACK, "U0ONCALL")[0] == 200
    rig.emu.fail_next(1, 500, path_prefix="/api/usergroups.users.list")
    assert rig.emu.click(CHANNEL, m["ts"], NOISE, "U0ONCALL")[0] == 200
    failed = [s for p, s in rig.emu.requests if p == "/api/usergroups.users.list"]
    assert failed == [200, 500]
    assert rig.sample("flinkwatch_slack_actions_total", outcome="acted") == 2
    assert refused(rig, "unverified") == 0
