"""The whole config: per-job overrides, the first match winning, and the bus topics per cluster."""

from __future__ import annotations

import re

import pytest

from conf import ConfigError, load_config
from tests.conf.helpers import write

OVERRIDES = """
detectors:
  checkpoint_failures: {min_expired: 3}
overrides:
  - match: {job_name: "orders-.*"}
    detectors:
      checkpoint_failures: {min_expired: 6, severity: critical}
  - match: {job_id: "3f4c2a9b7d1e4f60a8b5c2d1e0f9a7b3"}
    detectors:
      checkpoint_failures: {enabled: false}
"""


def test_first_matching_override_wins_over_the_base(tmp_path) -> None:
    cfg = load_config(write(tmp_path / "c.yaml", OVERRIDES))
    r = cfg.resolver()
    assert r.params("checkpoint_failures", "aa" * 16, "orders-enrichment").min_expired == 6
    # Metric labels carry the filtered name (orders_enrichment): it matches too.
    assert r.params("checkpoint_failures", None, "orders_enrichment").severity == "critical"
    assert (
        r.params("checkpoint_failures", "3f4c2a9b7d1e4f60a8b5c2d1e0f9a7b3", "billing").enabled
        is False
    )
    assert r.params("checkpoint_failures", "bb" * 16, "billing").min_expired == 3
    assert r.params("checkpoint_failures", None, None).min_expired == 3


def test_override_with_a_bad_value_names_the_override_and_field(tmp_path) -> None:
    f = write(
        tmp_path / "bad_override.yaml",
        "overrides:\n  - match: {job_id: x}\n    detectors:\n      checkpoint_failures: {window_s: -1}\n",
    )
    with pytest.raises(
        ConfigError, match=r"overrides\.0.*detectors\.checkpoint_failures\.window_s"
    ):
        load_config(f)


def test_override_needs_a_matcher_and_a_valid_pattern(tmp_path) -> None:
    with pytest.raises(ConfigError, match="job_id and/or job_name"):
        load_config(write(tmp_path / "no_match.yaml", "overrides:\n  - match: {}\n"))
    with pytest.raises(ConfigError, match="regular expression"):
        load_config(write(tmp_path / "bad_regex.yaml", "overrides:\n  - match: {job_name: '('}\n"))


def test_bus_topics_are_named_after_the_cluster_unless_set() -> None:
    from conf import AppConfig, KafkaConfig

    assert AppConfig().kafka.events_topic == "flinkwatch.default.events"
    cfg = AppConfig.model_validate({"cluster": "prod-eu"})
    assert (cfg.kafka.events_topic, cfg.kafka.deadletters_topic) == (
        "flinkwatch.prod-eu.events",
        "flinkwatch.prod-eu.deadletters",
    )
    mine = AppConfig(cluster="x", kafka=KafkaConfig(events_topic="bus", logs_topic="l"))
    assert (mine.kafka.events_topic, mine.kafka.deadletters_topic) == (
        "bus",
        "flinkwatch.x.deadletters",
    )


WINDOW = "starts_at: '2026-01-01T00:00:00Z', ends_at: '2026-01-02T00:00:00Z'"


@pytest.mark.parametrize(
    ("text", "what"),
    [
        (
            "webhooks:\n"
            "  - {name: oncall, url: 'http://127.0.0.1:1/a', secret: '${FW_T}'}\n"
            "  - {name: oncall, url: 'http://127.0.0.1:1/b', secret: '${FW_T}'}\n",
            "webhook names must be unique: ['oncall']",
        ),
        (
            "silences:\n"
            f"  - {{name: upgrade, matchers: {{job_name: a}}, comment: x, {WINDOW}}}\n"
            f"  - {{name: upgrade, matchers: {{job_name: b}}, comment: y, {WINDOW}}}\n",
            "silence names must be unique: ['upgrade']",
        ),
    ],
    ids=["webhooks", "silences"],
)
def test_a_webhook_or_silence_name_given_twice_is_refused(tmp_path, text, what) -> None:
    """A webhook's name is its sink's (``webhook:<name>``), a silence's is in every record."""
    with pytest.raises(ConfigError, match=re.escape(what)):
        load_config(write(tmp_path / "twice.yaml", text))


def test_the_catalog_is_the_built_in_detectors_and_a_class_per_rule() -> None:
    import pickle

    from conf import AppConfig
    from detectors import REGISTRY

    rule = {"name": "expiry_burst", "kind": "frequency", "kinds": ["checkpoint_expired"]}
    cfg = AppConfig.model_validate({"rules": [{**rule, "count": 3, "window_s": 600}]})
    catalog = cfg.catalog()
    assert set(catalog) == {*REGISTRY, "expiry_burst"}
    made = catalog["expiry_burst"]
    assert (made.name, made.scope, made.kinds) == ("expiry_burst", "job", {"checkpoint_expired"})
    # What travels to the executors is the rule, not its class: the resolver made again
    # from its pickle makes the class again.
    again = pickle.loads(pickle.dumps(cfg.resolver()))
    assert again.detector_class("expiry_burst").kinds == made.kinds
    assert again.detector_class("tm_lost") is REGISTRY["tm_lost"]
    with pytest.raises(KeyError):
        again.detector_class("nope")
    assert again.profile("nope").runbook == ""


def test_a_route_may_name_a_rule_and_a_config_whose_only_check_is_a_rule_runs() -> None:
    from conf import AppConfig

    rule = {"name": "expiry_burst", "kind": "frequency", "kinds": ["checkpoint_expired"]}
    rule |= {"count": 3, "window_s": 600}
    off = {name: {"enabled": False} for name in AppConfig().detector_params()}
    route = {"channel": "#checkpoints", "detectors": ["expiry_burst"]}
    cfg = AppConfig.model_validate(
        {"rules": [rule], "detectors": off, "slack": {"routes": [route]}}
    )
    assert cfg.slack.routes[0].detectors == ("expiry_burst",)
    with pytest.raises(ValueError, match="every detector is disabled"):
        AppConfig.model_validate({"rules": [{**rule, "enabled": False}], "detectors": off})


def test_every_example_config_loads_with_its_rules() -> None:
    from pathlib import Path

    examples = sorted(Path("conf/examples").glob("*.yaml"))
    assert len(examples) >= 2
    for path in examples:
        cfg = load_config(path)
        assert cfg.rules, path


RULE = "  - {name: %s, kind: frequency, kinds: [log_error], count: 3, window_s: 60%s}\n"


@pytest.mark.parametrize(
    ("rules", "field", "words"),
    [
        (RULE % ("errs", "") + RULE % ("errs", ""), "<root>", "rule names must be unique"),
        (RULE % ("tm_lost", ""), "<root>", "rules.0.name: 'tm_lost' is a built-in detector's name"),
        (
            RULE % ("a1", "") + RULE % ("a2", ", pattern: '(?<!Task)Manager'"),
            "rules.1.pattern",
            "RE2 syntax, which has no backreferences",
        ),
        (RULE % ("a1", ", count: 100000"), "rules.0.count", "less than or equal to 500"),
        ("  - {name: x1, kind: nope}\n", "rules.0", "does not match any of the expected tags"),
    ],
)
def test_a_bad_rule_is_refused_naming_the_field(tmp_path, rules, field, words) -> None:
    path = write(tmp_path / "c.yaml", "rules:\n" + rules)
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    assert field in exc.value.fields
    assert words in str(exc.value)
