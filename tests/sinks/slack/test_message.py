"""The Slack messages: who is mentioned, and log and job text shown as text, never as markup."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from detectors import Alert, AlertStatus, Severity
from lab.slack import SlackEmulator
from sinks import AlertLedger, dispatch
from sinks.slack import SlackWebhookSink
from sinks.slack.message import esc, render
from tests.sinks.slack.helpers import JOB, alert, bot, config


def test_render_mentions_only_open_critical_alerts() -> None:
    kw = {"cluster": "c", "runbook_url": None, "mention": "<!here>"}
    assert render(alert(severity=Severity.CRITICAL), **kw)[0].startswith("<!here>")
    assert not render(alert(), **kw)[0].startswith("<!here>")
    resolved = render(alert(AlertStatus.RESOLVED, Severity.CRITICAL), **kw)
    assert not resolved[0].startswith("<!here>")
    assert "What to do" not in str(resolved[1])


def test_log_text_cannot_ping_the_channel_or_forge_a_link() -> None:
    import json

    from detectors.correlation import Correlator
    from sinks.slack.message import render_incident

    hostile = alert(severity=Severity.CRITICAL).model_copy(
        update={
            "job_name": "<!channel> pay now",
            "summary": "job <!channel> x: see <https://evil.example|Runbook> & co",
            "host": "<@U123>",
            "evidence": {"why": "x", "reason": "<!everyone>"},
        }
    )
    kw = {"cluster": "prod", "runbook_url": "https://wiki/flink", "mention": "<!here>"}

    def parsed(text: str, blocks: list) -> str:
        # What Slack parses as mrkdwn: the text and every block but the plain_text header.
        return text + json.dumps([b for b in blocks if b["type"] != "header"])

    text, blocks = render(hostile, **kw)
    out = parsed(text, blocks)
    for raw in ("<!channel>", "<!everyone>", "<@U123>", "<https://evil"):
        assert raw not in out
    assert "&lt;!channel&gt; pay now" in out and "&amp; co" in out
    # What the operator configured stays live: the mention and the runbook link.
    assert text.startswith("<!here> ") and "<https://wiki/flink#idle_heap_growth|Runbook>" in out
    # An incident of several alerts: its headline and every member's line likewise.
    correlator = Correlator()
    correlator.observe(hostile)
    lost = alert(alert_id="lost", detector="tm_lost", severity=Severity.CRITICAL).model_copy(
        update={"summary": "<!subteam^S1> TM lost", "evidence": {"cause": "memory_kill"}}
    )
    view = correlator.observe(lost)
    assert len(view.members) == 2
    text, blocks = render_incident(view, lost, **kw)
    out = parsed(text, blocks)
    assert "<!subteam" not in out and "<!channel>" not in out and "&lt;!subteam^S1&gt;" in out


#: Names a job can be given; each must reach Slack as the text it is, in every message kind.
HOSTILE = [
    "<!channel>",
    "<!here>",
    "<@U123>",
    "<http://x|y>",
    "&",
    "*bold*",
    "<!subteam^S9|@oncall>",
    "&lt;!channel&gt;",  # already looks escaped: must still show literally
]


MENTION = "<!subteam^SONCALL>"


RUNBOOK = re.compile(r"<https://wiki\.example/flink#\w+\|Runbook>")


def _texts(blocks: object, kind: str) -> list[str]:
    """Every text object of type ``kind`` (mrkdwn or plain_text) in Block Kit blocks."""
    if isinstance(blocks, list):
        return [t for b in blocks for t in _texts(b, kind)]
    if not isinstance(blocks, dict):
        return []
    own = [str(blocks["text"])] if blocks.get("type") == kind and "text" in blocks else []
    return own + [t for v in blocks.values() for t in _texts(v, kind)]


def _versions(messages: list[dict]) -> list[dict]:
    """Every version Slack was given: each message as posted and as each update left it."""
    out = []
    for m in messages:
        out += [m, *m["edited"]]
        out += _versions(m.get("replies", []))
    return out


def _hostile_alert(name: str, **kw: object) -> Alert:
    base = alert(detector="checkpoint_failures").model_copy(
        update={
            "entity": f"job:{JOB}",
            "job_name": f"{name} pay-etl",
            "tm_id": None,
            "host": name,
            "summary": f"3 checkpoints of job {name} pay-etl expired within 30 min",
            "evidence": {"reason": name, name: 1},
        }
    )
    return base.model_copy(update=kw)


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_job_name_reaches_slack_as_text_in_every_message_kind(
    slack: SlackEmulator, tmp_path: Path, name: str
) -> None:
    # Seen live: a job named `<!channel> pay-etl` got an escaped top-level message, then
    # the thread reply `late_barrier_acks firing: job <!channel> pay-etl: ...`, broadcast.
    from detectors.correlation import Correlator

    ledger = AlertLedger(tmp_path / "l.sqlite")
    routes = [{"channel": "#no-such-channel", "severities": ["critical"]}]
    sink = bot(slack, ledger, mention_on_critical=MENTION, routes=routes)
    correlator = Correlator()
    failures = _hostile_alert(name, alert_id="cf")
    late = _hostile_alert(
        name,
        alert_id="late",
        detector="late_barrier_acks",
        severity=Severity.CRITICAL,
        summary=f"job {name} pay-etl: late checkpoint acks in 3 checkpoints within 60 min",
    )
    other = "cc" * 16  # another job: a new critical incident, its route to a missing channel
    transitions = [
        failures,  # posts the incident's message
        late,  # joins it: update, thread reply broadcast (severity rose), with the mention
        failures.model_copy(
            update={"status": AlertStatus.ESCALATED, "severity": Severity.CRITICAL}
        ),  # update, reply broadcast
        late.model_copy(update={"status": AlertStatus.RESOLVED}),  # update, reply
        failures.model_copy(update={"status": AlertStatus.RESOLVED}),  # update, reply
        _hostile_alert(
            name, alert_id="routed", severity=Severity.CRITICAL, job_id=other, entity=f"job:{other}"
        ),  # a message of its own in the default channel, saying why
        _hostile_alert(
            name, alert_id="orphan", status=AlertStatus.RESOLVED, job_id="dd" * 16
        ),  # a resolve whose firing never reached Slack: a message of its own
    ]
    for i, a in enumerate(transitions):
        ledger.record(i, [a], [sink], correlate=correlator.observe)
        assert dispatch.deliver(ledger, sink) == 0
    cfg = config(slack, mode="webhook", mention_on_critical=MENTION)
    hook = SlackWebhookSink(slack.webhook_url, lambda: cfg, lambda: name)
    for i, a in enumerate(transitions[:3]):
        ledger.record(100 + i, [a.model_copy(update={"alert_id": f"w{i}"})], [hook])
        assert dispatch.deliver(ledger, hook) == 0

    posted = slack.messages()
    versions = _versions(posted)
    replies = [r for m in posted for r in m["replies"]]
    assert len(posted) == 6 and len(replies) == 4 and sum(r["broadcast"] for r in replies) == 2
    assert sum(len(m["edited"]) for m in posted) == 4
    assert any(v["text"].startswith("(route #no-such-channel failed") for v in versions)
    escaped = esc(f"{name} pay-etl")
    for v in versions:
        parsed = [v["text"], *_texts(v["blocks"], "mrkdwn")]
        for text in parsed:
            # What the operator configured stays live; nothing else may be markup.
            bare = RUNBOOK.sub("", text.replace(MENTION, ""))
            assert "<" not in bare and ">" not in bare, text
            assert re.fullmatch(r"([^&]|&(amp|lt|gt);)*", bare, re.S), text
        # Every text names the job as the header does: the one name, escaped.
        assert escaped in v["text"], v["text"]
        # plain_text is shown as it is: the header has the name unescaped.
        for header in _texts(v["blocks"], "plain_text"):
            assert f"{name} pay-etl" in header and "&amp;" not in header.replace(name, "")


def test_an_incident_lists_a_taskmanager_once_in_the_spelling_of_its_logs() -> None:
    from detectors.correlation import Correlator
    from sinks.slack.message import render_incident

    label, logged = "localhost:38251_0bfbad", "localhost:38251-0bfbad"
    heap = alert().model_copy(update={"tm_id": label, "entity": "tm:localhost_38251_0bfbad"})
    lost = alert(alert_id="lost", detector="tm_lost").model_copy(
        update={"tm_id": logged, "entity": "tm:localhost_38251_0bfbad"}
    )
    correlator = Correlator()
    correlator.observe(heap)
    view = correlator.observe(lost)
    _, blocks = render_incident(view, lost, cluster="prod", runbook_url=None, mention=None)
    (tms,) = [
        f["text"] for b in blocks for f in b.get("fields") or () if "*TaskManagers*" in f["text"]
    ]
    assert tms == f"*TaskManagers*\n`{logged}`"
