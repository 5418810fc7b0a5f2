"""Where a Slack bot's incidents go: the channel of each place, and Slack's id of a channel.

An incident whose routes ``continue`` goes to several channels; its ``place``-th
channel (1-based, see :meth:`conf.SlackConfig.routes_for`) is served by a sink of its
own. :class:`Channels` is a value: the config it reads, the API it asks and the memory
where channel ids are kept under its sink's name. It answers which channel an alert
goes to, finds a channel's id (Slack's read APIs want ids, not names) and checks that
every configured channel can take alerts.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass

from conf import SlackConfig
from detectors import Alert
from sinks.base import PermanentDeliveryError, RetryableDeliveryError
from sinks.ledger import SinkMemory
from sinks.slack import transport
from sinks.slack.transport import SlackApi

log = logging.getLogger(__name__)

_CHANNEL_ID = re.compile(r"^[CGD][A-Z0-9]{6,}$")


class CannotTell(Exception):
    """Slack will not say whether a message is there (a missing scope, no access)."""


@dataclass(frozen=True, slots=True)
class RouteProblem:
    """A configured channel that cannot take alerts (see :meth:`Channels.check`).

    Attributes:
        route: Where the channel is configured: ``slack.channel`` or ``slack.routes[i]``.
        channel: The channel as configured.
        problem: What is wrong: not found, archived, the bot is not a member.
    """

    route: str
    channel: str
    problem: str


@dataclass(frozen=True)
class Channels:
    """The channels of one place of a Slack bot, and their ids.

    Attributes:
        cfg: The Slack section, read at each use.
        cluster: The cluster's name, read at each use (routes match it).
        api: The bot's Web API.
        memory: Where channel ids are kept (``channel:<name>``), under ``owner``.
        owner: The name of the sink these channels serve.
        place: Which of an incident's channels (1: the first).
    """

    cfg: Callable[[], SlackConfig]
    cluster: Callable[[], str]
    api: SlackApi
    memory: SinkMemory
    owner: str
    place: int = 1

    def of(self, a: Alert) -> str | None:
        """The channel of a new incident whose first alert is ``a``, here (None: none)."""
        taken = self.cfg().routes_for(a, self.cluster())
        return taken[self.place - 1][1] if len(taken) >= self.place else None

    def remember_id(self, name: str, channel_id: str) -> None:
        """Keep Slack's id of a channel posted to by name."""
        self.memory.remember(self.owner, f"channel:{name}", {"id": channel_id})

    def id_of(self, name: str) -> str | None:
        """Slack's id of a configured channel (read APIs want it); None if there is none.

        Raises:
            CannotTell: the token may not list channels.
        """
        known = self.memory.recall(self.owner, f"channel:{name}")
        if known is not None:
            return str(known["id"])
        if _CHANNEL_ID.match(name):
            return name
        try:
            found = self.lookup([name])
        except PermanentDeliveryError as exc:
            raise CannotTell(str(exc)) from None
        return found.get(name)

    def lookup(self, names: list[str]) -> dict[str, str]:
        """Channel ids by configured name, from ``conversations.list`` (remembered).

        Names not in the list are absent: no such channel, or a private one the bot is
        not in; either way the bot cannot post there.

        Raises:
            CannotTell: the list is longer than ``MAX_PAGES`` pages and a name is not
                on them.
        """
        wanted = {n.removeprefix("#"): n for n in names}
        found: dict[str, str] = {}
        cursor: str | None = None
        for _ in range(transport.MAX_PAGES):
            resp = self.api.call(
                "conversations_list",
                types="public_channel,private_channel",
                limit=transport.PAGE,
                cursor=cursor,
            )
            for ch in resp.get("channels", []):
                name = wanted.get(str(ch.get("name")))
                if name is not None:
                    found[name] = str(ch["id"])
                    self.remember_id(name, found[name])
            cursor = (resp.get("response_metadata") or {}).get("next_cursor") or None
            if cursor is None or len(found) == len(wanted):
                return found
        missing = sorted(set(names) - set(found))
        msg = f"conversations_list: {missing} not within {transport.MAX_PAGES} pages"
        raise CannotTell(msg)

    def check(self, started_with: int) -> list[RouteProblem]:
        """Ask Slack whether every configured channel can take alerts; warn about each that cannot.

        Uses ``auth.test``, ``conversations.list`` (for channels given by name) and
        ``conversations.info``. What the token has no scope for is skipped and noted at
        info; a Slack that cannot be reached is noted and nothing is checked.

        Args:
            started_with: The channels per incident flinkwatch made sinks for at the start.

        Returns:
            The problems, in configuration order; each is also logged as a warning that
            names the route.
        """
        c = self.cfg()
        if c.max_channels > started_with:
            log.warning(
                "slack: routes with continue now take an incident to up to %d channels, but "
                "flinkwatch started with %d: restart it to add the others",
                c.max_channels,
                started_with,
            )
        where = [("slack.channel", c.channel)]
        where += [(f"slack.routes[{i}]", r.channel) for i, r in enumerate(c.routes)]
        try:
            self.api.call("auth_test")
            problem_of = self._problems(sorted({ch for _, ch in where}))
        except RetryableDeliveryError as exc:
            log.warning("slack: cannot check the routes now (%s)", exc)
            return []
        except PermanentDeliveryError as exc:
            log.warning("slack: auth.test refused (%s); routes not checked", exc)
            return []
        out = [RouteProblem(r, ch, why) for r, ch in where if (why := problem_of.get(ch))]
        for p in out:
            if p.route == "slack.channel":
                then = "alerts routed nowhere else cannot be delivered"
            elif problem_of.get(c.channel):
                then = f"its alerts cannot be delivered ({c.channel} cannot take them either)"
            else:
                then = f"its alerts go to {c.channel} instead"
            log.warning("slack: route %s (%s): %s; %s", p.route, p.channel, p.problem, then)
        if not out:
            total = len({ch for _, ch in where})
            log.info("slack: routes checked: %d of %d channel(s) fine", len(problem_of), total)
        return out

    def _problems(self, channels: list[str]) -> dict[str, str | None]:
        """What is wrong with each channel Slack let us look at (None: nothing).

        A channel the token has no scope to look at is absent.
        """
        ids: dict[str, str | None] = {ch: ch for ch in channels if _CHANNEL_ID.match(ch)}
        names = [ch for ch in channels if ch not in ids]
        if names:
            try:
                found = self.lookup(names)
            except (PermanentDeliveryError, CannotTell) as exc:
                log.info("slack: cannot look channel names up (%s); not checked: %s", exc, names)
            else:
                ids.update({n: found.get(n) for n in names})
        out: dict[str, str | None] = {}
        for ch, cid in ids.items():
            if cid is None:
                out[ch] = "channel not found (or private without the bot)"
                continue
            try:
                info = self.api.call("conversations_info", channel=cid)["channel"]
            except PermanentDeliveryError as exc:
                if "channel_not_found" in str(exc):
                    out[ch] = "channel not found"
                elif "missing_scope" in str(exc):
                    log.info("slack: cannot check %s (%s)", ch, exc)
                else:
                    out[ch] = str(exc)
                continue
            if info.get("is_archived"):
                out[ch] = "channel is archived"
            elif info.get("is_member") is False:
                out[ch] = (
                    "the bot is not a member (posts fail with not_in_channel unless the "
                    "app has chat:write.public)"
                )
            else:
                out[ch] = None
        return out
