"""The pipeline's settings: ``parsing.metric_names``, naming rules a user adds, refused naming the field when unsafe."""

from __future__ import annotations

from pathlib import Path

import pytest

from conf import ConfigError, load_config
from conf.pipeline import MetricNameRule, _nested_quantifier


def _write(tmp_path: Path, name: str, rule: str) -> Path:
    f = tmp_path / name
    f.write_text(f"parsing:\n  metric_names:\n    - {rule}\n")
    return f


def test_a_rule_loads_with_its_labels(tmp_path: Path) -> None:
    f = _write(
        tmp_path,
        "graphite_prefix.yaml",
        r"""{match: 'prod\.([^.]+)\.taskmanager\.([^.]+)\.(Status\..+)', """
        r"""name: flink_taskmanager_$3, labels: {host: $1, tm_id: $2}}""",
    )
    (rule,) = load_config(f).parsing.metric_names
    assert rule.name == "flink_taskmanager_$3"
    assert rule.labels == {"host": "$1", "tm_id": "$2"}


@pytest.mark.parametrize(
    ("fixture", "rule", "says"),
    [
        ("unclosed_group.yaml", "{match: '([a-z]', name: x}", "not a regular expression"),
        ("nested_plus.yaml", "{match: '(a+)+b', name: x}", "repeats inside"),
        ("nested_dotted_star.yaml", r"{match: '(\w*\.)*x', name: x}", "repeats inside"),
        ("nested_counted.yaml", "{match: '(?:[a-z]{2,})*', name: x}", "repeats inside"),
        ("python_named_group.yaml", "{match: '(?P<h>.+)', name: x}", "named groups"),
        ("group_past_the_match.yaml", "{match: '(a)', name: 'x_$2'}", r"\$2 but the match has 1"),
        ("dollar_without_digit.yaml", "{match: '(a)', name: 'x_$h'}", "only"),
        ("label_backslash.yaml", r"{match: '(a)', name: x, labels: {host: '\1'}}", "not allowed"),
        ("unknown_label.yaml", "{match: '(a)', name: x, labels: {pod: $1}}", "pod"),
    ],
)
def test_an_unsafe_rule_is_refused_naming_the_field(
    tmp_path: Path, fixture: str, rule: str, says: str
) -> None:
    f = _write(tmp_path, fixture, rule)
    with pytest.raises(ConfigError, match=rf"(?s)parsing\.metric_names\.0.*{says}"):
        load_config(f)


@pytest.mark.parametrize(
    "pattern",
    [
        r"([^.]+)\.taskmanager\.([^.]+)\.(.+)",
        "(ab)+",
        "(a|b)?c+",
        r"\(a+\)+",  # escaped parentheses are no group
        "[(a+)]+",  # nor are they inside a class
        "(?:x{2})?",
    ],
)
def test_patterns_without_nested_quantifiers_pass(pattern: str) -> None:
    assert not _nested_quantifier(pattern)
    assert MetricNameRule(match=pattern, name="x").match == pattern
