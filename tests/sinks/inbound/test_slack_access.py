"""Who may press an incident's buttons: each check on its own, Slack's answers given as a table."""

from __future__ import annotations

from typing import Any

import pytest

from conf import SlackConfig
from conf.destinations import SlackActionsConfig
from sinks import RetryableDeliveryError
from sinks.inbound.slack_access import PressAccess, Refused
from sinks.inbound.slack_actions import Press


class Slack:
    """Slack's answers to the two methods PressAccess asks, and how often each was asked."""

    def __init__(self, auth: dict[str, Any], groups: dict[str, list[str]]) -> None:
        self.auth = auth
        self.groups = groups
        self.down = False
        self.asked: list[str] = []

    def __call__(self, method: str, **kw: Any) -> dict[str, Any]:
        self.asked.append(method)
        if self.down:
            raise RetryableDeliveryError("HTTP 503")
        if method == "auth_test":
            return self.auth
        return {"users": self.groups[kw["usergroup"]]}


def press(**kw: Any) -> Press:
    base: dict[str, Any] = {
        "user": "U0ALICE",
        "action_id": "silence_1h",
        "incident_id": "i1",
        "action_ts": "1.0",
        "response_url": None,
        "team_id": "T0HOME",
        "channel_id": "C0ALERTS",
        "message_ts": "111.222",
    }
    return Press(**{**base, **kw})


def actions(**kw: Any) -> SlackActionsConfig:
    return SlackConfig.model_validate({"actions": kw}).actions


def refused(check: Any, *args: Any) -> str | None:
    try:
        check(*args)
    except Refused as r:
        return r.reason
    return None


def test_a_press_from_the_bots_workspace_passes_and_slack_is_asked_once() -> None:
    slack = Slack({"team_id": "T0HOME"}, {})
    access = PressAccess(slack)
    assert refused(access.check_origin, press()) is None
    assert refused(access.check_origin, press(team_id="T0OTHER")) == "team"
    assert refused(access.check_origin, press(enterprise_id="E0ORG")) == "team"
    assert slack.asked == ["auth_test"]


def test_an_org_wide_install_takes_each_workspace_of_its_organisation() -> None:
    home = {"team_id": "T0HOME", "enterprise_id": "E0ORG", "is_enterprise_install": True}
    access = PressAccess(Slack(home, {}))
    org = {"enterprise_id": "E0ORG", "enterprise_install": True}
    assert refused(access.check_origin, press(team_id="T0SISTER", **org)) is None
    assert refused(access.check_origin, press(team_id="T0SISTER")) == "team"


def test_a_slack_connect_user_needs_their_team_allowed() -> None:
    outsider = press(user_team_id="T0PARTNER")
    assert refused(PressAccess(Slack({"team_id": "T0HOME"}, {})).check_origin, outsider) == (
        "external_user"
    )
    allowed = PressAccess(
        Slack({"team_id": "T0HOME"}, {}), lambda: actions(allowed_teams=["T0PARTNER"])
    )
    assert refused(allowed.check_origin, outsider) is None


def test_a_slack_that_cannot_say_its_workspace_leaves_the_press_unverified() -> None:
    slack = Slack({"team_id": "T0HOME"}, {})
    slack.down = True
    assert refused(PressAccess(slack).check_origin, press()) == "unverified"


def test_only_the_incidents_own_message_takes_presses() -> None:
    parent = {"channel": "C0ALERTS", "ts": "111.222"}
    assert refused(PressAccess.check_message, press(), parent) is None
    assert refused(PressAccess.check_message, press(channel_id="C0COPY"), parent) == "channel"
    assert refused(PressAccess.check_message, press(message_ts="333.444"), parent) == "channel"


@pytest.mark.parametrize(
    ("user", "reason"), [("U0ALICE", None), ("U0BOB", None), ("U0MALLORY", "user")]
)
def test_the_allow_lists_admit_users_and_group_members(user: str, reason: str | None) -> None:
    slack = Slack({"team_id": "T0HOME"}, {"S0ONCALL": ["U0BOB"]})
    access = PressAccess(
        slack, lambda: actions(allowed_users=["U0ALICE"], allowed_usergroups=["S0ONCALL"])
    )
    assert refused(access.check_user, press(user=user)) == reason
    assert refused(PressAccess(slack).check_user, press(user=user)) is None  # no lists: anyone


def test_a_group_read_before_stands_while_slack_is_down_and_one_never_read_is_unverified() -> None:
    slack = Slack({"team_id": "T0HOME"}, {"S0ONCALL": ["U0BOB"]})
    access = PressAccess(
        slack, lambda: actions(allowed_usergroups=["S0ONCALL"], usergroups_cache_s=1e-9)
    )
    assert refused(access.check_user, press(user="U0BOB")) is None
    slack.down = True
    assert refused(access.check_user, press(user="U0BOB")) is None
    assert slack.asked.count("usergroups_users_list") == 2  # kept past its time: asked again
    fresh = PressAccess(slack, lambda: actions(allowed_usergroups=["S0ONCALL"]))
    assert refused(fresh.check_user, press(user="U0BOB")) == "unverified"
