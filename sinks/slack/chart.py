"""The evidence chart: a small picture of what decided an incident, in its Slack thread.

Bot mode only. When an incident opens, and when a related alert joins it, a PNG drawn
by an injected renderer is uploaded into the incident's thread with slack-sdk's
``files_upload_v2``. The chart is a delivery sink of its own (``slack_chart``), so the
ledger delivers it exactly once like any transition, and it backs off on its own: a
chart that cannot be drawn or uploaded never holds back the text page, which is the
``slack`` sink's.

The chart follows the page, never the other way round: it waits (retryably) while the
``slack`` sink has a text page up to and including its own transition still to send,
and it is posted into the thread of the message that sink remembered for the incident.

Exactly once: the chart's title and file name carry a short tag derived from the
transition's ledger key (:func:`chart_tag`). After a crash in the middle of an upload, or
an upload whose outcome is unknown, :meth:`SlackChartSink.confirm` looks for that tag in
the thread (``conversations.replies``) before uploading again.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable

from conf import SlackConfig
from detectors import Alert, AlertStatus
from detectors.correlation import IncidentView
from sinks.base import DeliverySink, PermanentDeliveryError, RetryableDeliveryError, Transition
from sinks.slack.lifecycle import SlackBotSink

log = logging.getLogger(__name__)

#: Draws the chart of an alert (in its incident, if correlated) as PNG bytes; None: no chart.
Render = Callable[[Alert, IncidentView | None], bytes | None]
#: Replies asked for per page of a thread, and pages read per try of a search.
_PAGE = 200
_MAX_PAGES = 50
#: Slack's limit on an image's description.
_MAX_ALT_TXT = 1000


def chart_tag(key: str) -> str:
    """The short tag naming one transition's chart in Slack (its title and file name).

    Derived from the ledger key alone, so a second process finds the first one's upload.
    """
    return "fw-" + hashlib.sha256(key.encode()).hexdigest()[:12]


def charted(t: Transition) -> bool:
    """Whether ``t`` gets a chart: it opens an incident, or a related alert joins one."""
    if t.alert.status is not AlertStatus.FIRING:
        return False
    return t.incident is None or t.incident.opened or t.incident.joined


class SlackChartSink(DeliverySink):
    """Uploads each incident's evidence chart into its thread, after the text page.

    Args:
        bot: The first channel's bot sink: its client, its typed errors, and the incident
            messages it keeps in its memory (which also says what it has still to send).
        cfg: The Slack section, read at each use (``slack.charts`` turns charts off live).
        render: Draws the chart; runs on the dispatcher's thread. It may return None
            (nothing worth drawing). An exception in it refuses that chart alone.
    """

    name = "slack_chart"
    #: Served after the text page, in the same dispatcher thread: the page it follows is
    #: posted first.
    lane = "slack"
    #: Silenced and too-old transitions are withheld from it as from the text page, so it
    #: never waits for a page that will not come.
    notifies = True
    #: A chart is drawn and uploaded (three round trips): one per dispatcher pass, so a page
    #: recorded meanwhile goes out after one chart, not after a queue of them.
    per_pass = 1

    def __init__(self, bot: SlackBotSink, cfg: Callable[[], SlackConfig], render: Render) -> None:
        self._bot = bot
        self._memory = bot.memory
        self._cfg = cfg
        self._render = render

    def wants(self, t: Transition) -> bool:
        """An incident opening, or a member joining one, while ``slack.charts`` is on."""
        return self._cfg().charts and charted(t)

    def send(self, t: Transition) -> None:
        """Draw the chart and upload it into the incident's thread.

        Raises:
            RetryableDeliveryError: the text page is not posted yet, or Slack cannot take
                the upload now.
            AmbiguousDeliveryError: the upload may have been shared (5xx, no answer).
            PermanentDeliveryError: the incident has no message to follow, the chart could
                not be drawn, or Slack refused the upload (the channel is gone, no
                ``files:write``).
        """
        # The ledger also routes here the later transitions of an incident that was
        # charted (a receiver takes an incident to its end): those have no chart.
        if not (self._cfg().charts and charted(t)):
            return
        ahead = self._memory.first_open(self._bot.name)
        if ahead is not None and ahead <= t.seq:
            msg = "the text page is not posted yet"
            raise RetryableDeliveryError(msg)
        parent = self._memory.recall(self._bot.name, t.incident_id)
        if parent is None:
            msg = "the incident has no Slack message to follow (its text page was refused)"
            raise PermanentDeliveryError(msg)
        png = self._draw(t)
        if png is None:
            log.info("sink=%s %s: nothing to chart", self.name, t.key)
            return
        tag = chart_tag(t.key)
        what = f"{t.alert.detector} joined the incident" if not _opens(t) else t.alert.detector
        self._bot.api(
            "files_upload_v2",
            channel=parent["channel"],
            thread_ts=parent["ts"],
            file=png,
            filename=f"flinkwatch-{tag}.png",
            title=f"Evidence: {what} ({tag})",
            alt_txt=f"Chart of the evidence: {t.alert.summary}"[:_MAX_ALT_TXT],
        )

    def _draw(self, t: Transition) -> bytes | None:
        try:
            return self._render(t.alert, t.incident)
        except Exception as exc:
            # A renderer's bug must cost this chart only: a crash would stop the sink, and
            # every later chart waits behind it in order.
            log.exception("sink=%s %s: the chart could not be drawn", self.name, t.key)
            msg = f"the chart could not be drawn: {type(exc).__name__}: {exc}"
            raise PermanentDeliveryError(msg) from None

    def confirm(self, t: Transition) -> bool:
        """Look for the chart's tag among the files in the incident's thread.

        Returns:
            True if the chart is there, False if surely not (or there is no thread).

        Raises:
            RetryableDeliveryError: Slack cannot be asked now, will not let us look (a
                missing ``channels:history``), or the thread is longer than the pages a
                try reads. The chart waits rather than be posted twice.
        """
        parent = self._memory.recall(self._bot.name, t.incident_id)
        if parent is None:
            return False
        tag = chart_tag(t.key)
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            try:
                resp = self._bot.api(
                    "conversations_replies",
                    channel=parent["channel"],
                    ts=parent["ts"],
                    limit=_PAGE,
                    cursor=cursor,
                )
            except PermanentDeliveryError as exc:
                if "thread_not_found" in str(exc):
                    return False  # the incident's message is gone, and its thread with it
                log.error("slack: cannot check whether the chart of %s arrived (%s)", t.key, exc)
                msg = f"cannot confirm the chart of {t.key}: {exc}"
                raise RetryableDeliveryError(msg) from None
            for m in resp.get("messages", []):
                for f in m.get("files") or []:
                    if tag in str(f.get("title", "")) or tag in str(f.get("name", "")):
                        return True
            cursor = (resp.get("response_metadata") or {}).get("next_cursor") or None
            if cursor is None:
                return False
        msg = f"confirming the chart of {t.key}: the thread is longer than {_MAX_PAGES} pages"
        raise RetryableDeliveryError(msg)


def _opens(t: Transition) -> bool:
    return t.incident is None or t.incident.opened


def slack_chart_sink(
    slack: DeliverySink | None, cfg: Callable[[], SlackConfig], render: Render
) -> SlackChartSink | None:
    """The evidence chart's sink, following ``slack``'s messages; None without a bot.

    A webhook cannot upload files and has no thread to put one in, so only bot mode
    charts. The sink is made whatever ``slack.charts`` says, which it reads at each use:
    a reload turns charts on or off.

    Args:
        slack: The Slack sink :func:`sinks.slack.slack_sink` made (None: Slack is off).
        cfg: The Slack section, read at each use.
        render: Draws an alert's chart as PNG bytes (None: nothing to draw).
    """
    if not isinstance(slack, SlackBotSink):
        return None
    return SlackChartSink(slack, cfg, render)
