"""The dispatcher: jobs run once per key and tried again; slow sinks served a few at a time."""

from __future__ import annotations

from pathlib import Path

from conf import AlertmanagerConfig, SlackConfig, WebhookConfig
from detectors import Alert, AlertStatus, Severity
from lab.slack import SlackEmulator
from sinks import AlertLedger, DeliverySink, PermanentDeliveryError, RetryableDeliveryError
from sinks.alertmanager import AlertmanagerSink
from sinks.base import Transition
from sinks.dispatch import JOB_TRIES, Dispatcher
from sinks.slack import SlackBotSink
from sinks.webhook import webhook_sinks
from tests.conftest import wait_until
from tests.sinks.receivers import Hung


def test_a_job_asked_for_again_before_it_ran_runs_once(tmp_path: Path) -> None:
    ran: list[str] = []
    d = Dispatcher(AlertLedger(tmp_path / "l.sqlite"), [])
    d.submit("refresh:a", lambda: ran.append("first"))
    d.submit("refresh:b", lambda: ran.append("b"))
    d.submit("refresh:a", lambda: ran.append("second"))
    assert d.run_jobs() == 0
    assert ran == ["b", "second"]


def test_a_job_that_fails_retryably_is_tried_again_then_given_up(tmp_path: Path) -> None:
    tries: list[int] = []

    def slack_down() -> None:
        tries.append(1)
        raise RetryableDeliveryError("slack is down")

    def refused() -> None:
        tries.append(2)
        raise PermanentDeliveryError("message_not_found")

    d = Dispatcher(AlertLedger(tmp_path / "l.sqlite"), [])
    d.submit("down", slack_down)
    d.submit("refused", refused)
    assert d.run_jobs() == 1  # the refused one is dropped at once
    while d.run_jobs():
        pass
    assert tries.count(1) == JOB_TRIES and tries.count(2) == 1


class Receiver(DeliverySink):
    """Records what it got, and when: one shared log for every receiver of a test."""

    def __init__(self, name: str, log: list[str], per_pass: int | None = None) -> None:
        self.name, self.log, self.per_pass = name, log, per_pass

    def send(self, t: Transition) -> None:
        self.log.append(f"{self.name}:{t.alert.alert_id}")


def _firing(alert_id: str) -> Alert:
    return Alert(
        alert_id=alert_id,
        detector="checkpoint_failures",
        entity=f"job:{alert_id}",
        status=AlertStatus.FIRING,
        severity=Severity.WARNING,
        event_time_ms=1_700_000_000_000,
        summary="3 checkpoints expired",
    )


def test_a_sink_served_one_at_a_time_lets_a_new_page_past_its_queue(tmp_path: Path) -> None:
    # Charts are seconds of work each: a page recorded while three wait must go out after
    # one of them, not after all three.
    got: list[str] = []
    ledger = AlertLedger(tmp_path / "l.sqlite")
    page, chart = Receiver("page", got), Receiver("chart", got, per_pass=1)
    d = Dispatcher(ledger, [page, chart])
    ledger.record(0, [_firing("a"), _firing("b"), _firing("c")], [page, chart])
    assert d.drain_once() is False  # two charts still wait
    assert got == ["page:a", "page:b", "page:c", "chart:a"]
    ledger.record(1, [_firing("d")], [page, chart])
    assert d.drain_once() is False
    assert got[4:] == ["page:d", "chart:b"]
    while not d.drain_once():
        pass
    assert got[6:] == ["chart:c", "chart:d"]
    assert d.backlog == {"page": 0, "chart": 0}


# --- one hung receiver holds back no other sink (issue #35, item 2) -------------------

TOKEN = "xoxb-0000-dispatch-token"


def test_a_hung_alertmanager_and_a_dripping_webhook_do_not_hold_back_a_slack_page(
    tmp_path: Path,
) -> None:
    silent = Hung("silent")  # takes the post, never answers
    drip = Hung("drip", drip_s=0.2, pad=1000)  # answers a byte at a time, for minutes
    d: Dispatcher | None = None
    try:
        with SlackEmulator(token=TOKEN, channels=("#flink-alerts",)) as emu:
            ledger = AlertLedger(tmp_path / "l.sqlite")
            slack_cfg = SlackConfig.model_validate(
                {"mode": "bot", "api_url": emu.base_url, "channel": "#flink-alerts"}
            )
            bot = SlackBotSink(TOKEN, ledger, lambda: slack_cfg, lambda: "prod")
            am_cfg = AlertmanagerConfig(urls=(silent.url,), timeout_s=60)
            am = AlertmanagerSink(ledger, lambda: am_cfg, lambda: "prod")
            hook_cfg = WebhookConfig(
                name="hook", url=f"{drip.url}/x", secret="${WH_SECRET}", timeout_s=60
            )
            (hook,) = webhook_sinks([hook_cfg], lambda: "prod", env={"WH_SECRET": "s3cret"})
            d = Dispatcher(ledger, [bot, am, hook]).start()
            ledger.record(0, [_firing("a")], [am, hook])
            d.wake()
            wait_until(lambda: silent.requests and drip.dripping, 120, "both posts under way")
            ledger.record(1, [_firing("b")], [bot])  # a page while both posts hang
            d.wake()

            def hung_posts_ended() -> int:
                return silent.closed + drip.closed + drip.answered

            wait_until(
                lambda: emu.messages("#flink-alerts") or hung_posts_ended(),
                120,
                "the Slack page, or the end of a hung post",
            )
            # The page went out while both hung posts were still waiting for their answers.
            assert len(emu.messages("#flink-alerts")) == 1
            assert hung_posts_ended() == 0
            assert ledger.backlog() == {am.name: 1, hook.name: 1}
    finally:
        silent.close()
        drip.close()
        if d is not None:
            d.stop()


def test_one_backoff_doubles_to_its_ceiling_per_sink_and_a_crash_waits_the_ceiling() -> None:
    from sinks.dispatch import Backoff

    b = Backoff(1.0, 5.0, {"am": (2.0, 60.0)})
    assert b.ready("file", 0.0) and b.due("file") is None
    assert [b.failed("file", 0.0) for _ in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert not b.ready("file", 4.9) and b.ready("file", 5.0)
    assert [b.failed("am", 0.0) for _ in range(3)] == [2.0, 4.0, 8.0]
    assert b.recovered("file") and not b.recovered("file")
    assert b.failed("file", 10.0) == 1.0  # a success starts it over
    assert b.crashed("bug", 0.0) == 5.0 and b.crashed("am", 0.0) == 60.0
