"""``flinkwatch replay`` once its session runs: the comparison it prints, where its files go."""

from __future__ import annotations

import argparse
from pathlib import Path

from sinks.reports.compare import Change
from streaming.cli.replay_run import baseline_output, print_comparison


def test_the_comparison_prints_how_it_ran_then_its_text(tmp_path, capsys) -> None:
    out = tmp_path / "alerts.jsonl"
    line = (
        '{{"alert_id": "{id}", "detector": "checkpoint_failures", "status": "firing", '
        '"severity": "warning", "entity": "job:a", "event_time": "{t}", "summary": "s", '
        '"job_name": "orders"}}\n'
    )
    out.write_text(line.format(id="n", t="2026-11-22T17:37:35.679Z"))
    (tmp_path / "alerts.baseline.jsonl").write_text(
        line.format(id="b", t="2026-11-22T17:38:49.686Z")
    )
    args = argparse.Namespace(config="new.yaml", baseline="old.yaml", format=None)
    comparison = print_comparison(args, out, one_parse=False)
    assert [d.change for d in comparison.differences] == [Change.EARLIER]
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        "new.yaml against baseline old.yaml, the same files (two parses: their parsing sections differ)"
    )
    assert lines[1].startswith("pages: baseline 1, new 1; gained 0, lost 0, earlier 1,")
    assert lines[3].split()[-5:] == ["1", "min", "14", "s", "earlier"]


def test_the_baselines_alerts_go_beside_the_output() -> None:
    assert baseline_output(Path("out/alerts.jsonl")) == Path("out/alerts.baseline.jsonl")
    assert baseline_output(Path("out/alerts")) == Path("out/alerts.baseline.jsonl")
