"""The Grafana dashboard covers what flinkwatch exports (static checks).

tests/integration/test_dashboard.py runs every panel query against a real Prometheus
scraping a running job; these checks need neither and say which metric lacks a panel.
"""

from __future__ import annotations

import re

from detectors import REGISTRY
from tests.deploy.manifests import (
    REPO,
    all_values,
    dashboard,
    label_values_query,
    panels,
    render,
    targets,
    used_variables,
    variables,
)

DASH = dashboard()
EXPRS = [t.expr for t in targets(DASH)]


def documented_metrics() -> list[str]:
    """Every metric in the metrics reference's table."""
    doc = (REPO / "docs" / "metrics.md").read_text(encoding="utf-8")
    return re.findall(r"^\| `(flinkwatch_\w+)` \|", doc, flags=re.M)


def shown(metric: str) -> bool:
    return any(re.search(rf"\b{metric}\b", e) for e in EXPRS)


def test_every_detector_signal_has_a_panel() -> None:
    missing = [
        f"flinkwatch_{signal} ({name})"
        for name, cls in sorted(REGISTRY.items())
        for signal in cls.signals
        if not shown(f"flinkwatch_{signal}")
    ]
    assert not missing, f"detector signals without a panel: {missing}"


def test_every_documented_metric_has_a_panel() -> None:
    metrics = documented_metrics()
    assert len(metrics) >= 20  # the table was found
    missing = [m for m in metrics if not shown(m)]
    assert not missing, f"documented metrics without a panel: {missing}"


def test_active_alert_panels_show_every_detector() -> None:
    alert_exprs = [e for e in EXPRS if "flinkwatch_alerts_active" in e]
    assert len(alert_exprs) >= 3
    for e in alert_exprs:
        # Filtering by detector would hide a detector added later.
        assert not re.search(r"\bdetector\s*(=|=~|!=)", e), e
    (table,) = [p for p in panels(DASH) if p["type"] == "table"]
    (target,) = table["targets"]
    assert "detector" in target["expr"] and target["format"] == "table" and target["instant"]


def test_every_variable_a_query_uses_is_defined() -> None:
    defined = set(variables(DASH))
    for t in targets(DASH):
        unknown = used_variables(t.expr) - defined - {"__rate_interval"}
        assert not unknown, f"{t.panel}: {unknown}"
    for name, v in variables(DASH).items():
        if v["type"] == "query":
            selector, label = label_values_query(v["query"])
            assert selector is not None and label
            assert used_variables(selector) <= defined - {name}
            assert v["allValue"] == ".*" and v["includeAll"]


def test_all_selected_renders_plain_promql() -> None:
    values = all_values(DASH)
    for t in targets(DASH):
        rendered = render(t.expr, values, "1m")
        assert "$" not in rendered, rendered


def test_panels_use_the_datasource_variable_and_fit_the_grid() -> None:
    assert variables(DASH)["datasource"]["type"] == "datasource"
    rows = [p["id"] for p in DASH["panels"] if p["type"] == "row"]
    ids = rows + [p["id"] for p in panels(DASH)]
    assert len(ids) == len(set(ids))
    for p in panels(DASH):
        assert p["datasource"]["uid"] == "${datasource}", p["title"]
        assert p["gridPos"]["x"] + p["gridPos"]["w"] <= 24
        assert p.get("description"), p["title"]
        assert p["targets"], p["title"]
    assert DASH["uid"] == "flinkwatch"
