"""``flinkwatch report``: files written, the summary printed, and clear refusals."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sinks.reports.weekly import Report
from streaming.cli import main
from streaming.cli import report as report_cli
from tests.sinks.reports.scenario import JOB_A, NOW, record_scenario


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A state directory with ten days recorded, and the command's clock at their end."""
    monkeypatch.setattr(report_cli, "_now_ms", lambda: NOW)
    record_scenario(tmp_path / "state")
    return tmp_path / "state"


def test_report_writes_json_and_html_and_prints_a_summary(
    state: Path, tmp_path: Path, capsys: Any
) -> None:
    out = tmp_path / "out"
    assert main(["report", "--state-dir", str(state), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    report = Report.from_json((out / "report.json").read_text())
    assert report.sources.ledger == str(state / "ledger.sqlite")
    assert report.totals.incidents == 7 and report.totals.noise == 3
    assert (out / "report.html").read_text().startswith("<!doctype html>")
    lines = printed.splitlines()
    assert lines[0] == ("incidents opened 2026-11-13T00:00:00.000Z .. 2026-11-20T00:00:00.000Z: 7")
    assert any(line.startswith("checkpoint_failures ") for line in lines)
    assert f"  {JOB_A[1]} ({JOB_A[0]}): 3 incidents, 2 noise" in lines
    assert lines[-2:] == [f"wrote {out / 'report.json'}", f"wrote {out / 'report.html'}"]


def test_since_widens_the_window(state: Path, tmp_path: Path, capsys: Any) -> None:
    assert (
        main(["report", "--since", "2026-11-10", "--state-dir", str(state), "--out", str(tmp_path)])
        == 0
    )
    report = Report.from_json((tmp_path / "report.json").read_text())
    assert report.totals.incidents == 9 and report.days[0].date == "2026-11-10"


def test_the_alert_file_alone_reports_without_noise_and_both_count_once(
    state: Path, tmp_path: Path, capsys: Any
) -> None:
    alerts = str(state / "alerts.jsonl")
    empty = tmp_path / "empty"
    args = ["report", "--alerts", alerts, "--out", str(tmp_path / "alone")]
    assert main([*args, "--state-dir", str(empty)]) == 0
    assert "noise is not known" in capsys.readouterr().err
    alone = Report.from_json((tmp_path / "alone" / "report.json").read_text())
    assert alone.totals.incidents == 7 and alone.totals.noise is None
    assert not (empty / "ledger.sqlite").exists()  # not created by looking for it

    both = tmp_path / "both"
    assert main(["report", "--alerts", alerts, "--state-dir", str(state), "--out", str(both)]) == 0
    report = Report.from_json((both / "report.json").read_text())
    for field in ("incidents", "resolved", "open", "alerts", "transitions", "jobs", "ttr"):
        assert getattr(report.totals, field) == getattr(alone.totals, field), field
    assert report.totals.noise == 3
    assert report.sources.duplicates == report.sources.read // 2 > 0


def test_an_empty_window_is_said_and_still_written(
    state: Path, tmp_path: Path, capsys: Any
) -> None:
    assert (
        main(["report", "--since", "30m", "--state-dir", str(state), "--out", str(tmp_path)]) == 0
    )
    assert "no incident opened in this window" in capsys.readouterr().out
    doc = json.loads((tmp_path / "report.json").read_text())
    assert doc["schema"] == 1 and doc["incidents"] == [] and doc["totals"]["incidents"] == 0
    assert "No incident opened in this window." in (tmp_path / "report.html").read_text()


def test_nothing_to_read_or_a_bad_since_is_refused_naming_it(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(report_cli, "_now_ms", lambda: NOW)
    out = ["--out", str(tmp_path / "out")]
    assert main(["report", "--state-dir", str(tmp_path), *out]) == 2
    err = capsys.readouterr().err
    assert f"no ledger at {tmp_path / 'ledger.sqlite'}" in err and "--alerts" in err
    assert not (tmp_path / "ledger.sqlite").exists()
    assert main(["report", "--alerts", str(tmp_path / "nope.jsonl"), *out]) == 2
    assert f"--alerts {tmp_path / 'nope.jsonl'}: no such file" in capsys.readouterr().err
    assert main(["report", "--since", "last week", "--state-dir", str(tmp_path), *out]) == 2
    assert "--since 'last week' is neither a duration" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_day_of_the_window_is_a_utc_day(state: Path, tmp_path: Path) -> None:
    assert main(["report", "--since", "1d", "--state-dir", str(state), "--out", str(tmp_path)]) == 0
    report = Report.from_json((tmp_path / "report.json").read_text())
    assert [d.date for d in report.days] == ["2026-11-19", "2026-11-20"]
    assert report.window.since == "2026-11-19T00:00:00.000Z"


def test_the_report_runs_without_spark(state: Path, tmp_path: Path) -> None:
    # The command reads SQLite and a file: it must not even import pyspark.
    code = (
        "import sys\n"
        "from streaming.cli import main\n"
        f"rc = main(['report', '--since', '2026-11-01', '--state-dir', {str(state)!r}, "
        f"'--out', {str(tmp_path)!r}])\n"
        "sys.exit(rc or ('pyspark' in sys.modules and 3))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "report.html").is_file()


def test_the_summary_in_the_docs_is_what_the_command_prints(
    state: Path, tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = (Path(__file__).parents[3] / "docs" / "commands.md").read_text()
    shown = docs.split("## flinkwatch report", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    assert main(["report", "--state-dir", str(state), "--out", "reports"]) == 0
    assert capsys.readouterr().out == shown
