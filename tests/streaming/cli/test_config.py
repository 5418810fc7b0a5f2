"""``flinkwatch config check``: the file accepted or the bad field named; the routes a sample takes."""

from __future__ import annotations

import json

from streaming.cli import main


def test_config_check_accepts_the_default_and_names_the_bad_field(tmp_path, capsys) -> None:
    assert main(["config", "check", "conf/flinkwatch.yaml"]) == 0
    assert "OK" in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    bad.write_text("detectors:\n  checkpoint_failures:\n    min_expired: -1\n")
    assert main(["config", "check", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "bad.yaml" in err and "detectors.checkpoint_failures.min_expired" in err


def test_config_check_in_json_says_ok_and_on_error_the_field_and_message(tmp_path, capsys) -> None:
    assert main(["config", "check", "-o", "json", "conf/flinkwatch.yaml"]) == 0
    good = json.loads(capsys.readouterr().out)
    assert good["ok"] is True and good["file"] == "conf/flinkwatch.yaml"
    assert "checkpoint_failures" in good["detectors_enabled"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("detectors:\n  checkpoint_failures:\n    min_expired: -1\n")
    assert main(["config", "check", "--output", "json", str(bad)]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is False and out["file"] == str(bad)
    assert out["fields"] == ["detectors.checkpoint_failures.min_expired"]
    assert "greater than" in out["message"]


def test_config_check_prints_the_route_a_sample_jobs_incidents_take(tmp_path, capsys) -> None:
    conf = tmp_path / "c.yaml"
    conf.write_text(
        "cluster: prod-eu\n"
        "slack:\n"
        "  routes:\n"
        "    - {channel: '#pager', severities: [critical]}\n"
        "    - {channel: '#payments', match: {job_name: 'pay-.*', cluster: 'prod-.*'}}\n"
    )
    assert main(["config", "check", str(conf), "--sample", "job_name=pay-etl", "-o", "json"]) == 0
    routes = json.loads(capsys.readouterr().out)["routes"]
    by = {(r["detector"], r["severity"]): (r["channel"], r["route"]) for r in routes}
    assert by[("checkpoint_creep", "critical")] == ("#pager", "slack.routes[0]")
    assert by[("checkpoint_creep", "warning")] == ("#payments", "slack.routes[1]")
    other = ["--sample", "job_name=pay-etl", "--sample", "cluster=staging"]
    assert main(["config", "check", str(conf), *other]) == 0
    text = capsys.readouterr().out
    assert "checkpoint_creep" in text and "#flink-alerts  (slack.channel)" in text
    assert main(["config", "check", str(conf), "--sample", "team=payments"]) == 2


def test_config_check_prints_every_route_an_incident_continues_to(tmp_path, capsys) -> None:
    conf = tmp_path / "c.yaml"
    conf.write_text(
        "slack:\n"
        "  routes:\n"
        "    - {channel: '#payments', match: {job_name: 'pay-.*'}, continue: true}\n"
        "    - {channel: '#pager', severities: [critical]}\n"
    )
    assert main(["config", "check", str(conf), "--sample", "job_name=pay-etl", "-o", "json"]) == 0
    routes = json.loads(capsys.readouterr().out)["routes"]
    taken = [(r["route"], r["channel"]) for r in routes if r["detector"] == "checkpoint_creep"]
    assert taken == [
        ("slack.routes[0]", "#payments"),  # warning: the team's route, then nothing matches
        ("slack.routes[0]", "#payments"),  # critical: the team's, continued to the pager
        ("slack.routes[1]", "#pager"),
    ]


def test_config_check_shows_each_rule_on_a_line(capsys) -> None:
    assert main(["config", "check", "conf/examples/sink_stalled.yaml"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1:] == [
        "rules (1):",
        "  sink_stalled (threshold, per job): numRecordsInPerSecond {task ~ (?i).*(sink|writer).*} "
        "sum <= 0 while numRecordsOutPerSecond {task ~ Source:.*} sum > 0 for 10 min",
    ]
    assert main(["config", "check", "-o", "json", "conf/examples/backpressure.yaml"]) == 0
    (r,) = json.loads(capsys.readouterr().out)["rules"]
    assert (r["name"], r["kind"], r["enabled"]) == ("backpressure_high", "threshold", True)


def test_config_check_prints_the_route_a_sample_takes_for_a_rule_a_route_names(
    tmp_path, capsys
) -> None:
    conf = tmp_path / "c.yaml"
    conf.write_text(
        "rules:\n"
        "  - {name: expiry_burst, kind: frequency, kinds: [checkpoint_expired], count: 2,"
        " window_s: 600}\n"
        "slack:\n"
        "  routes:\n"
        "    - {channel: '#checkpoints', detectors: [expiry_burst]}\n"
    )
    assert main(["config", "check", str(conf), "--sample", "job_name=pay-etl", "-o", "json"]) == 0
    routes = json.loads(capsys.readouterr().out)["routes"]
    by = {(r["detector"], r["severity"]): (r["channel"], r["route"]) for r in routes}
    assert by[("expiry_burst", "warning")] == ("#checkpoints", "slack.routes[0]")
    assert by[("checkpoint_creep", "warning")] == ("#flink-alerts", "slack.channel")
