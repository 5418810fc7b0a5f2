"""The self-monitoring rules: they fire on the failure they name, and not on a healthy job.

The rules (docker/prometheus/rules.yml, the same groups as k8s/monitoring.yaml's
PrometheusRule) are evaluated by the real ``promtool test rules`` over synthetic series.
The annotations are stripped for the unit tests (promtool compares rendered annotations
too); ``promtool check rules`` checks them, templates included, on the shipped files.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.manifests import RULES, k8s_object, load_yaml, promtool

JOB = 'job="flinkwatch", instance="fw:9250"'
WHO = {"job": "flinkwatch", "instance": "fw:9250"}


def need_promtool() -> Path:
    tool = promtool()
    if tool is None:
        pytest.fail("no promtool: run `scripts/prometheus.sh fetch` (make test does)")
    return tool


def rule(name: str) -> dict[str, Any]:
    for group in load_yaml(RULES)["groups"]:
        for r in group["rules"]:
            if r.get("alert") == name:
                return dict(r)
    raise LookupError(name)


def firing(eval_time: str, alert: str, **labels: str) -> dict[str, Any]:
    """An assertion that ``alert`` fires at ``eval_time`` with exactly these labels."""
    severity = rule(alert)["labels"]["severity"]
    return {
        "eval_time": eval_time,
        "alertname": alert,
        "exp_alerts": [{"exp_labels": {**labels, "severity": severity}}],
    }


def silent(eval_time: str, alert: str) -> dict[str, Any]:
    """An assertion that ``alert`` is not firing at ``eval_time``."""
    return {"eval_time": eval_time, "alertname": alert, "exp_alerts": []}


def check(tmp_path: Path, series: dict[str, str], *asserts: dict[str, Any]) -> None:
    """Run promtool's rule unit test: ``series`` sampled every minute, then ``asserts``."""
    doc = load_yaml(RULES)
    for group in doc["groups"]:
        for r in group["rules"]:
            r.pop("annotations", None)
    rules = tmp_path / "rules.yml"
    rules.write_text(yaml.safe_dump(doc))
    test = {
        "rule_files": [str(rules)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": s, "values": v} for s, v in series.items()],
                "alert_rule_test": list(asserts),
            }
        ],
    }
    path = tmp_path / "test.yml"
    path.write_text(yaml.safe_dump(test))
    out = subprocess.run(
        [str(need_promtool()), "test", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_shipped_rules_and_their_templates_pass_promtool(tmp_path: Path) -> None:
    rule_object = k8s_object("PrometheusRule")
    extracted = tmp_path / "prometheusrule.yml"
    extracted.write_text(yaml.safe_dump({"groups": rule_object["spec"]["groups"]}))
    for path in (RULES, extracted):
        out = subprocess.run(
            [str(need_promtool()), "check", "rules", str(path)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stdout + out.stderr


def test_kubernetes_and_compose_evaluate_the_same_rules() -> None:
    assert k8s_object("PrometheusRule")["spec"]["groups"] == load_yaml(RULES)["groups"]


def test_rules_select_the_job_both_setups_scrape_as() -> None:
    jobs = {
        m
        for group in load_yaml(RULES)["groups"]
        for r in group["rules"]
        for m in re.findall(r'job="([^"]+)"', r["expr"])
    }
    assert jobs == {"flinkwatch"}
    # Kubernetes: the ServiceMonitor names the job after the Service; compose: the scrape job.
    assert k8s_object("Service", "flinkwatch")["metadata"]["name"] in jobs
    scrape = load_yaml(RULES.parent / "prometheus.yml")["scrape_configs"]
    assert jobs <= {j["job_name"] for j in scrape}


def test_every_alert_has_a_severity_and_a_description() -> None:
    for group in load_yaml(RULES)["groups"]:
        for r in group["rules"]:
            assert r["labels"]["severity"] in {"info", "warning", "critical"}
            assert r["annotations"]["summary"] and r["annotations"]["description"]


def test_down_fires_after_five_minutes_without_scrapes(tmp_path: Path) -> None:
    check(
        tmp_path,
        {f"up{{{JOB}}}": "1 1 0x10"},
        silent("6m", "FlinkwatchDown"),  # pending since 2m
        firing("8m", "FlinkwatchDown", **WHO),
        silent("8m", "FlinkwatchAbsent"),
    )
    check(tmp_path, {f"up{{{JOB}}}": "1x20"}, silent("15m", "FlinkwatchDown"))


def test_absent_fires_when_no_target_is_scraped(tmp_path: Path) -> None:
    check(
        tmp_path,
        {'up{job="prometheus", instance="localhost:9090"}': "1x20"},
        silent("9m", "FlinkwatchAbsent"),
        firing("11m", "FlinkwatchAbsent", job="flinkwatch"),
    )


def test_no_progress_fires_when_nothing_was_parsed_for_twenty_minutes(tmp_path: Path) -> None:
    stalled = {
        f'flinkwatch_events_total{{{JOB}, kind="metric"}}': "100x30",
        f'flinkwatch_config_info{{{JOB}, hash="abc"}}': "1x30",
    }
    check(
        tmp_path,
        stalled,
        silent("4m", "FlinkwatchNoProgress"),
        firing("6m", "FlinkwatchNoProgress", **WHO),
    )
    # A job that never parsed a record at all has no event series; it fires too.
    never = {f'flinkwatch_config_info{{{JOB}, hash="abc"}}': "1x30"}
    check(tmp_path, never, firing("6m", "FlinkwatchNoProgress", **WHO))
    flowing = {**stalled, f'flinkwatch_events_total{{{JOB}, kind="metric"}}': "0+50x30"}
    check(tmp_path, flowing, silent("25m", "FlinkwatchNoProgress"))


def test_detection_lagging_fires_on_the_detect_query_only(tmp_path: Path) -> None:
    check(
        tmp_path,
        {f'flinkwatch_watermark_lag_seconds{{{JOB}, query="flinkwatch-detect"}}': "700x20"},
        silent("9m", "FlinkwatchDetectionLagging"),
        firing("11m", "FlinkwatchDetectionLagging", **WHO),
    )
    check(
        tmp_path,
        {
            f'flinkwatch_watermark_lag_seconds{{{JOB}, query="flinkwatch-detect"}}': "30x20",
            f'flinkwatch_watermark_lag_seconds{{{JOB}, query="flinkwatch-parse"}}': "700x20",
        },
        silent("15m", "FlinkwatchDetectionLagging"),
    )


def test_a_watermark_ahead_of_the_clock_fires(tmp_path: Path) -> None:
    lag = f'flinkwatch_watermark_lag_seconds{{{JOB}, query="flinkwatch-parse"}}'
    check(
        tmp_path,
        {lag: "-3600x20"},
        silent("1m", "FlinkwatchWatermarkAhead"),
        firing("3m", "FlinkwatchWatermarkAhead", **WHO),
    )
    check(tmp_path, {lag: "30x20"}, silent("10m", "FlinkwatchWatermarkAhead"))


def test_dead_letter_surge_needs_a_share_and_a_rate(tmp_path: Path) -> None:
    dead = f'flinkwatch_dead_letters_total{{{JOB}, reason="invalid_json"}}'
    events = f'flinkwatch_events_total{{{JOB}, kind="metric"}}'
    # 1/s dead against 10/s parsed: 9 %.
    check(
        tmp_path,
        {dead: "0+60x30", events: "0+600x30"},
        silent("9m", "FlinkwatchDeadLetterSurge"),
        firing("12m", "FlinkwatchDeadLetterSurge", **WHO),
    )
    # Nothing parses at all (a shipper switched format): 100 %.
    check(tmp_path, {dead: "0+60x30"}, firing("12m", "FlinkwatchDeadLetterSurge", **WHO))
    # A high share of a trickle (0.05/s) is not a surge, nor is a steady 0.2 % of 100/s.
    check(tmp_path, {dead: "0+3x30", events: "0+6x30"}, silent("20m", "FlinkwatchDeadLetterSurge"))
    check(
        tmp_path, {dead: "0+12x30", events: "0+6000x30"}, silent("20m", "FlinkwatchDeadLetterSurge")
    )


def test_delivery_backlog_fires_per_sink_when_it_does_not_drain(tmp_path: Path) -> None:
    check(
        tmp_path,
        {
            f'flinkwatch_delivery_backlog{{{JOB}, sink="slack"}}': "0 0 3x20",
            f'flinkwatch_delivery_backlog{{{JOB}, sink="file"}}': "0x22",
        },
        silent("11m", "FlinkwatchDeliveryBacklog"),
        firing("13m", "FlinkwatchDeliveryBacklog", sink="slack", **WHO),
    )
    # A burst that drains within the minute is normal operation.
    check(
        tmp_path,
        {f'flinkwatch_delivery_backlog{{{JOB}, sink="slack"}}': "0 3 0 2 0 4 0 1 0 0 0 0 0 0 0"},
        silent("14m", "FlinkwatchDeliveryBacklog"),
    )


def test_slack_refused_fires_on_the_first_refusal_and_on_later_ones(tmp_path: Path) -> None:
    failed = f'flinkwatch_deliveries_total{{{JOB}, sink="slack", outcome="failed"}}'
    # The counter's series appears with its first refusal (1): increase() alone misses it.
    check(
        tmp_path,
        {failed: "_x5 1x40"},
        silent("4m", "FlinkwatchSlackRefused"),
        firing("6m", "FlinkwatchSlackRefused", **WHO),
        silent("40m", "FlinkwatchSlackRefused"),
    )
    check(
        tmp_path,
        {failed: "1x10 2x35"},
        firing("12m", "FlinkwatchSlackRefused", **WHO),
        silent("45m", "FlinkwatchSlackRefused"),
    )
    delivered = f'flinkwatch_deliveries_total{{{JOB}, sink="slack", outcome="delivered"}}'
    check(tmp_path, {delivered: "0+3x40"}, silent("35m", "FlinkwatchSlackRefused"))


def test_charts_refused_fires_on_a_refused_chart_and_not_for_the_pages(tmp_path: Path) -> None:
    chart = f'flinkwatch_deliveries_total{{{JOB}, sink="slack_chart", outcome="failed"}}'
    page = f'flinkwatch_deliveries_total{{{JOB}, sink="slack", outcome="failed"}}'
    check(
        tmp_path,
        {chart: "_x5 1x40"},
        silent("4m", "FlinkwatchChartsRefused"),
        firing("6m", "FlinkwatchChartsRefused", **WHO),
        silent("6m", "FlinkwatchSlackRefused"),
        silent("40m", "FlinkwatchChartsRefused"),
    )
    # A refused page is the other rule's, not this one's.
    check(tmp_path, {page: "_x5 1x40"}, silent("6m", "FlinkwatchChartsRefused"))


def test_config_rejected_fires_after_a_rejected_reload(tmp_path: Path) -> None:
    check(
        tmp_path,
        {
            f'flinkwatch_config_reloads_total{{{JOB}, outcome="failure"}}': "0 0 1x20",
            f'flinkwatch_config_reloads_total{{{JOB}, outcome="success"}}': "0+1x22",
        },
        silent("1m", "FlinkwatchConfigRejected"),
        firing("3m", "FlinkwatchConfigRejected", outcome="failure", **WHO),
        silent("14m", "FlinkwatchConfigRejected"),
    )


def test_late_rows_dropped_fires_when_rows_keep_being_dropped(tmp_path: Path) -> None:
    late = f'flinkwatch_late_rows_dropped_total{{{JOB}, query="flinkwatch-detect"}}'
    check(
        tmp_path,
        {late: "0+5x40"},
        silent("14m", "FlinkwatchLateRowsDropped"),
        firing("17m", "FlinkwatchLateRowsDropped", **WHO),
    )
    check(tmp_path, {late: "0x40"}, silent("30m", "FlinkwatchLateRowsDropped"))


def test_alert_file_failing_fires_while_writes_fail_and_transitions_wait(tmp_path: Path) -> None:
    errors = f'flinkwatch_sink_errors_total{{{JOB}, sink="file"}}'
    backlog = f'flinkwatch_delivery_backlog{{{JOB}, sink="file"}}'
    # The volume fills at 6m: a failed write a minute (the back-off's ceiling), 1 to 4
    # transitions waiting; space again at 21m, the file catches up.
    check(
        tmp_path,
        {errors: "0x5 1+1x14 15x20", backlog: "0x5 1x5 4x8 0x20"},
        silent("6m", "FlinkwatchAlertFileFailing"),
        firing("8m", "FlinkwatchAlertFileFailing", **WHO),
        silent("22m", "FlinkwatchAlertFileFailing"),
    )
    # One failed write that the next try fixed is no alert.
    check(
        tmp_path,
        {errors: "0x5 1x20", backlog: "0x5 1 0x20"},
        silent("9m", "FlinkwatchAlertFileFailing"),
    )
    # Nor is a backlog without failures (Slack's is FlinkwatchDeliveryBacklog's).
    check(tmp_path, {errors: "0x20", backlog: "3x20"}, silent("15m", "FlinkwatchAlertFileFailing"))


def test_storage_full_fires_at_the_first_failure_of_its_cause(tmp_path: Path) -> None:
    full = f'flinkwatch_query_failures_total{{{JOB}, cause="storage_full"}}'
    other = f'flinkwatch_query_failures_total{{{JOB}, cause="other"}}'
    check(
        tmp_path,
        {full: "0x3 1+1x10 11x20", other: "0x35"},
        silent("2m", "FlinkwatchStorageFull"),
        firing("4m", "FlinkwatchStorageFull", **WHO),
        silent("30m", "FlinkwatchStorageFull"),  # space again at 13m
    )
    check(tmp_path, {full: "0x20", other: "0+1x20"}, silent("15m", "FlinkwatchStorageFull"))


def test_ledger_failing_fires_when_a_batch_could_not_be_recorded(tmp_path: Path) -> None:
    ledger = f"flinkwatch_ledger_errors_total{{{JOB}}}"
    check(
        tmp_path,
        {ledger: "0x3 1 2 2x20"},
        silent("2m", "FlinkwatchLedgerFailing"),
        firing("4m", "FlinkwatchLedgerFailing", **WHO),
        silent("20m", "FlinkwatchLedgerFailing"),
    )
    check(tmp_path, {ledger: "0x20"}, silent("15m", "FlinkwatchLedgerFailing"))


def test_entities_refused_fires_while_the_cap_refuses_entities(tmp_path: Path) -> None:
    refused = f'flinkwatch_entities_refused_total{{{JOB}, detector="tm_lost"}}'
    quiet = f'flinkwatch_entities_refused_total{{{JOB}, detector="job_lost"}}'
    check(
        tmp_path,
        {refused: "0x5 0+7x10 70x20", quiet: "0x35"},
        silent("5m", "FlinkwatchEntitiesRefused"),
        firing("7m", "FlinkwatchEntitiesRefused", **WHO),
        silent("30m", "FlinkwatchEntitiesRefused"),
    )
    check(tmp_path, {refused: "0x30", quiet: "0x30"}, silent("20m", "FlinkwatchEntitiesRefused"))


def test_detector_errors_fire_per_detector_that_raised(tmp_path: Path) -> None:
    raised = f'flinkwatch_detector_errors_total{{{JOB}, detector="tm_lost", outcome="skipped"}}'
    dropped = f'flinkwatch_detector_errors_total{{{JOB}, detector="tm_lost", outcome="dropped"}}'
    fine = f'flinkwatch_detector_errors_total{{{JOB}, detector="job_lost", outcome="skipped"}}'
    check(
        tmp_path,
        {raised: "0x5 1 2 3x30", dropped: "0x6 1x30", fine: "0x37"},
        silent("5m", "FlinkwatchDetectorErrors"),
        firing("7m", "FlinkwatchDetectorErrors", detector="tm_lost", **WHO),
        silent("30m", "FlinkwatchDetectorErrors"),
    )


def test_state_damaged_fires_when_an_entity_was_dropped_for_unreadable_state(
    tmp_path: Path,
) -> None:
    damaged = f"flinkwatch_state_damaged_total{{{JOB}}}"
    check(
        tmp_path,
        {damaged: "0x5 1x30"},
        silent("5m", "FlinkwatchStateDamaged"),
        firing("7m", "FlinkwatchStateDamaged", **WHO),
        silent("30m", "FlinkwatchStateDamaged"),
    )
    check(tmp_path, {damaged: "0x30"}, silent("20m", "FlinkwatchStateDamaged"))
