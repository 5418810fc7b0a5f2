"""Where alerts go: Slack routes, and the sinks' settings refused naming the field."""

from __future__ import annotations

import pytest
from pydantic import ValidationError


def test_routes_continue_to_each_later_match_once_and_the_default_takes_only_the_rest() -> None:
    from conf import SlackConfig
    from detectors import Alert, AlertStatus, Severity

    cfg = SlackConfig.model_validate(
        {
            "routes": [
                {"channel": "#team", "match": {"job_name": "pay-.*"}, "continue": True},
                {"channel": "#team", "severities": ["critical"], "continue": True},
                {"channel": "#pager", "severities": ["critical"]},
                {"channel": "#late"},
            ]
        }
    )
    assert cfg.max_channels == 3

    def taken(job_name: str | None, severity: Severity, config: SlackConfig = cfg) -> list[str]:
        a = Alert(
            alert_id="a",
            detector="checkpoint_creep",
            entity="job:x",
            status=AlertStatus.FIRING,
            severity=severity,
            event_time_ms=0,
            summary="s",
            job_name=job_name,
        )
        return [ch for _, ch in config.routes_for(a, "prod")]

    assert taken("pay-etl", Severity.CRITICAL) == ["#team", "#pager"]  # #team once
    assert taken("pay-etl", Severity.WARNING) == ["#team", "#late"]
    assert taken("orders", Severity.WARNING) == ["#late"]
    # Nothing matched at all: the default channel.
    only_the_team = cfg.model_copy(update={"routes": cfg.routes[:1]})
    assert taken(None, Severity.WARNING, only_the_team) == ["#flink-alerts"]


def test_a_route_for_a_taskmanager_takes_its_alerts_in_either_spelling() -> None:
    # The id copied from a Grafana panel of Flink's own metrics (`_`) routes the alerts
    # that carry its logs' spelling (`-`), and a webhook's route is the same match.
    from conf import SlackConfig, WebhookConfig
    from detectors import Alert
    from tests.sinks.spellings import tm_alert

    cfg = SlackConfig.model_validate(
        {"routes": [{"channel": "#tm-3", "match": {"tm_id": "localhost:40003_6cf67b"}}]}
    )
    hook = WebhookConfig.model_validate(
        {
            "name": "h",
            "url": "https://x.example/h",
            "format": "pagerduty",
            "routing_key": "${PD_KEY}",
            "route": {"match": {"tm_id": "localhost:40003-6cf67b"}},
        }
    ).route
    assert hook is not None

    def about(tm_id: str) -> Alert:
        return tm_alert("a", "jvm_fatal", tm_id)

    for spelling in ("localhost:40003-6cf67b", "localhost:40003_6cf67b"):
        assert cfg.channel_for(about(spelling), "prod") == "#tm-3"
        assert hook.matches(about(spelling), "prod")
    assert cfg.channel_for(about("localhost:40004-6cf67b"), "prod") == "#flink-alerts"
    assert not hook.matches(about("localhost:40004_6cf67b"), "prod")


def test_who_may_press_is_given_by_ids_not_names() -> None:
    from conf import SlackConfig

    ok = SlackConfig.model_validate(
        {"actions": {"allowed_users": ["U0SRE", "W0ADMIN"], "allowed_teams": ["T0PARTNER"]}}
    )
    assert ok.actions.allowed_users == ("U0SRE", "W0ADMIN")
    with pytest.raises(ValidationError, match=r"not Slack user ids.*'@alice'"):
        SlackConfig.model_validate({"actions": {"allowed_users": ["@alice"]}})
    with pytest.raises(ValidationError, match="not Slack user group ids"):
        SlackConfig.model_validate({"actions": {"allowed_usergroups": ["oncall"]}})


def test_a_yaml_off_turns_slack_off_and_a_route_names_only_known_detectors() -> None:
    from conf import AppConfig, SlackConfig

    assert SlackConfig.model_validate({"mode": False}).mode == "off"
    # The names are the config's (its rules among them): checked on the whole config.
    routes = {"routes": [{"channel": "#x", "detectors": ["heap_magic"]}]}
    with pytest.raises(
        ValidationError, match=r"slack.routes.0.detectors: unknown detector\(s\) \['heap_magic'\]"
    ):
        AppConfig.model_validate({"slack": routes})
    hook = {
        "name": "h",
        "url": "http://x/",
        "secret": "${HOOK_SECRET}",
        "route": {"detectors": ["nope"]},
    }
    with pytest.raises(ValidationError, match=r"webhooks.0.route.detectors: .*\['nope'\]"):
        AppConfig.model_validate({"webhooks": [hook]})
    ok = {"routes": [{"channel": "#x", "detectors": ["tm_lost"]}]}
    assert AppConfig.model_validate({"slack": ok}).slack.routes[0].detectors == ("tm_lost",)


def test_alertmanager_urls_are_http_bases_each_given_once() -> None:
    from conf import AlertmanagerConfig

    with pytest.raises(ValidationError, match="not an http"):
        AlertmanagerConfig(urls=("am-0:9093",))
    with pytest.raises(ValidationError, match="given twice"):
        AlertmanagerConfig(urls=("http://am-0:9093", "http://am-0:9093"))


def test_an_alertmanager_url_given_twice_with_and_without_a_trailing_slash_is_refused() -> None:
    """Both would be the same member after the slash is cut: every alert sent to it twice."""
    from conf import AlertmanagerConfig

    with pytest.raises(ValidationError, match="given twice"):
        AlertmanagerConfig(urls=("http://am-0:9093", "http://am-0:9093/"))
    assert AlertmanagerConfig(urls=("http://am-0:9093/",)).urls == ("http://am-0:9093",)
