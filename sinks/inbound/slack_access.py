"""Who may press an incident's buttons, and from where (``slack.actions``).

A press is signed by Slack, which proves it came through Slack, not that its presser may
act: a guest, a Slack Connect user of another organisation, or a copy of the message in
another channel would otherwise silence paging everywhere. :class:`PressAccess` checks a
press's workspace and organisation against the bot's own (Slack's ``auth.test``, asked
once), its message against the one the ledger recorded, and its presser against the
allow-lists of users and user groups (groups read with ``usergroups.users.list``, kept a
while). A refusal is a :class:`Refused` naming its reason, which the endpoint counts.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from conf.destinations import SlackActionsConfig
from sinks.base import DeliveryError

if TYPE_CHECKING:
    from sinks.inbound.slack_actions import Press

log = logging.getLogger(__name__)


def _short(value: Any) -> str | None:
    """A short string field as Slack sent it (None: absent or not a string)."""
    return value[:100] if isinstance(value, str) and value else None


@dataclass(frozen=True)
class Workspace:
    """Where the bot's token belongs (Slack's ``auth.test``): presses come from there."""

    team_id: str
    enterprise_id: str | None
    enterprise_install: bool


class Refused(Exception):
    """A press from someone, or somewhere, that may not act (counted by ``reason``).

    Attributes:
        reason: One of :data:`~sinks.prometheus.SLACK_ACTION_REFUSALS`.
        why: What the presser is told (and the log says).
    """

    def __init__(self, why: str, *, reason: str) -> None:
        super().__init__(why)
        self.reason = reason
        self.why = why


class PressAccess:
    """The checks a signed press passes before it acts.

    Args:
        api: Calls a Slack Web API method (``auth_test``, ``usergroups_users_list``).
        access: Who may press (``slack.actions``), read at each press: a reload applies
            from the next one.
    """

    def __init__(
        self,
        api: Callable[..., Any],
        access: Callable[[], SlackActionsConfig] = SlackActionsConfig,
    ) -> None:
        self.api = api
        self.access = access
        self._lock = threading.Lock()
        self._workspace: Workspace | None = None
        #: Each user group's members, and when they were read (monotonic seconds).
        self._members: dict[str, tuple[float, frozenset[str]]] = {}

    def check_origin(self, press: Press) -> None:
        """Refuse a press from another workspace or organisation, or by an outsider.

        Raises:
            Refused: ``team``, ``external_user`` or ``unverified``.
        """
        home = self._home()
        if press.enterprise_install != home.enterprise_install or (
            press.enterprise_id != home.enterprise_id
        ):
            where = (
                f"organisation `{press.enterprise_id}`"
                if press.enterprise_id
                else "no organisation"
            )
            install = "an org-wide install" if press.enterprise_install else "a workspace install"
            msg = (
                f"This press came under {where} ({install}); flinkwatch's bot is in workspace "
                f"`{home.team_id}`" + (f" of `{home.enterprise_id}`" if home.enterprise_id else "")
            )
            raise Refused(msg, reason="team")
        # An org-wide install takes presses from each of the organisation's workspaces.
        if not home.enterprise_install and press.team_id != home.team_id:
            msg = (
                f"This press came from workspace `{press.team_id}`; flinkwatch's incidents "
                f"are in `{home.team_id}`"
            )
            raise Refused(msg, reason="team")
        outsider = press.user_team_id is not None and press.user_team_id != press.team_id
        if outsider and press.user_team_id not in self.access().allowed_teams:
            msg = (
                f"You are a member of another organisation's workspace (`{press.user_team_id}`, "
                "Slack Connect); flinkwatch takes presses from it only when "
                "slack.actions.allowed_teams lists it"
            )
            raise Refused(msg, reason="external_user")

    def _home(self) -> Workspace:
        """The bot's workspace, asked of Slack once (``auth.test``).

        Raises:
            Refused: ``unverified``: Slack cannot be asked now.
        """
        home = self._workspace
        if home is not None:
            return home
        try:
            resp = self.api("auth_test")
            home = Workspace(
                team_id=str(resp["team_id"]),
                enterprise_id=_short(resp.get("enterprise_id")),
                enterprise_install=resp.get("is_enterprise_install") is True,
            )
        except (DeliveryError, KeyError, TypeError) as exc:
            msg = (
                f"flinkwatch could not ask Slack which workspace its bot is in ({exc}); press again"
            )
            raise Refused(msg, reason="unverified") from None
        self._workspace = home
        return home

    @staticmethod
    def check_message(press: Press, parent: Mapping[str, Any]) -> None:
        """Refuse a press on anything but the incident's own message.

        Raises:
            Refused: ``channel``.
        """
        if press.channel_id != parent.get("channel") or press.message_ts != parent.get("ts"):
            msg = (
                f"This is not the incident's message (that is in <#{parent.get('channel')}>, "
                "the first channel it was posted to)"
            )
            raise Refused(msg, reason="channel")

    def check_user(self, press: Press) -> None:
        """Refuse a presser outside ``slack.actions.allowed_users``/``allowed_usergroups``.

        Raises:
            Refused: ``user``, or ``unverified`` when a group that might hold the presser
                cannot be read and was never read before.
        """
        access = self.access()
        if not access.allowed_users and not access.allowed_usergroups:
            return
        if press.user in access.allowed_users:
            return
        unread: list[str] = []
        for group in access.allowed_usergroups:
            members = self._group(group, access.usergroups_cache_s)
            if isinstance(members, str):
                unread.append(f"`{group}` ({members})")
            elif press.user in members:
                return
        if unread:
            msg = (
                f"flinkwatch could not read the members of user group {', '.join(unread)}; "
                "press again later"
            )
            raise Refused(msg, reason="unverified")
        msg = (
            "Only the users of slack.actions.allowed_users and the members of "
            "slack.actions.allowed_usergroups may act on incidents from Slack"
        )
        raise Refused(msg, reason="user")

    def _group(self, group: str, keep_s: float) -> frozenset[str] | str:
        """A user group's members (kept ``keep_s``), or why they cannot be read.

        A group read before keeps its last members while Slack cannot be asked.
        """
        now = time.monotonic()
        with self._lock:
            kept = self._members.get(group)
        if kept is not None and now - kept[0] < keep_s:
            return kept[1]
        try:
            resp = self.api("usergroups_users_list", usergroup=group)
            members = frozenset(str(u) for u in resp["users"])
        except (DeliveryError, KeyError, TypeError) as exc:
            if kept is not None:
                log.warning(
                    "slack actions: user group %s cannot be read (%s); its members as read "
                    "%.0f s ago stand",
                    group,
                    exc,
                    now - kept[0],
                )
                return kept[1]
            return str(exc)
        with self._lock:
            self._members[group] = (now, members)
        return members
