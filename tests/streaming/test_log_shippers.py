"""Real log shippers' output (Flink's KafkaAppender, rsyslog, the OpenTelemetry Collector).

``tests/data/shippers/tm_oom_2_3`` and ``layouts_expiry_2_3`` hold what the shippers of
``scripts/capture_shippers.py`` wrote into a real Kafka broker while they carried a real
Flink 2.3 standalone cluster's logs, beside the processes' own log files;
``otelcol_growth_2_3`` what the Collector's ``file_log`` receiver sent of a mini-cluster's
log. Each shipped topic must parse to the events the run's own files parse to: the same
kinds at the same times about the same jobs, checkpoints and TaskManagers.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streaming.parsing import parse_logs
from streaming.sources import file_records, stage_files

SHIPPERS = Path(__file__).resolve().parents[1] / "data" / "shippers"
LOG_CAPTURES = ("tm_oom_2_3", "layouts_expiry_2_3")
#: What makes two events the same event, whatever carried them.
SAME = ("kind", "event_time", "job_id", "checkpoint_id", "from_state", "to_state")
#: (capture folder, shipped file, the run's own files); the shipped file's records must parse.
ROUTES = [
    ("tm_oom_2_3", "tm_oom_2_3.kafka_pattern.log", "tm_oom_2_3.*manager.log"),
    ("tm_oom_2_3", "tm_oom_2_3.rsyslog_default.log", "tm_oom_2_3.*manager.log"),
    ("tm_oom_2_3", "tm_oom_2_3.rsyslog_json.log", "tm_oom_2_3.*manager.log"),
    (
        "layouts_expiry_2_3",
        "layouts_expiry_2_3.kafka_jsonlayout.log",
        "layouts_expiry_2_3.*manager.log",
    ),
    ("layouts_expiry_2_3", "layouts_expiry_2_3.kafka_ecs.log", "layouts_expiry_2_3.*manager.log"),
    ("otelcol_growth_2_3", "growth_2_3.otlp-logs.jsonl", "growth_2_3.log"),
]


def test_every_log_capture_says_how_it_was_made_and_keeps_its_records() -> None:
    for name in LOG_CAPTURES:
        folder = SHIPPERS / name
        how = (folder / "README.md").read_text()
        assert "capture_shippers.py" in how and "apache-flink" in how, name
        assert (folder / "log4j-console.properties").exists()
        for records in folder.glob("*.records.jsonl"):
            values = [json.loads(line)["value"] for line in records.read_text().splitlines()]
            replay = records.with_name(records.name.replace(".records.jsonl", ".log"))
            want = "".join(v if v.endswith("\n") else v + "\n" for v in values)
            # Exactly: log4j2's JsonLayout ends its events with \r\n.
            with replay.open(newline="") as f:
                assert f.read() == want, records.name


def _events(spark, tmp_path: Path, files: list[Path]) -> list:
    staged = stage_files(files, tmp_path / files[0].name)
    return parse_logs(file_records(spark, staged, kind="log", stream=False)).collect()


def _same(rows: list) -> set[tuple]:
    classified = [r for r in rows if r["kind"] not in (None, "unparsed", "log_warn", "log_error")]
    return {tuple(r[c] for c in SAME) for r in classified}


@pytest.mark.spark
@pytest.mark.parametrize(("folder", "shipped", "own"), ROUTES, ids=[r[1] for r in ROUTES])
def test_a_shipped_log_parses_to_the_events_of_the_runs_own_files(
    spark, tmp_path: Path, folder: str, shipped: str, own: str
) -> None:
    d = SHIPPERS / folder
    got = _events(spark, tmp_path, [d / shipped])
    assert [(r["error"], r["raw"][:120]) for r in got if r["error"]] == []
    own_rows = _events(spark, tmp_path, sorted(d.glob(own)))
    files, shipped_events = _same(own_rows), _same(got)
    # The files were copied while the processes still ran; the topics were read after:
    # compare up to the earlier of the two ends (of any line).
    end = min(max(r["event_time"] for r in own_rows), max(r["event_time"] for r in got))
    files = {e for e in files if e[1] <= end}
    shipped_events = {e for e in shipped_events if e[1] <= end}
    if shipped.endswith("kafka_pattern.log"):
        # The appender lost the dying TaskManager's last lines (its README): everything it
        # did deliver is the files' own, and what it lost is the OOM's.
        assert shipped_events < files
        assert {e[0] for e in files - shipped_events} >= {"fatal_error"}
    else:
        assert shipped_events == files


@pytest.mark.spark
def test_a_taskmanagers_own_log_names_it_and_its_one_job_in_its_fatal_and_free_lines(
    spark, tmp_path: Path
) -> None:
    # The TaskManager's file names no TaskManager in its OOM lines; its start line does.
    rows = _events(spark, tmp_path, [SHIPPERS / "tm_oom_2_3" / "tm_oom_2_3.taskmanager.log"])
    fatal = [r for r in rows if r["kind"] in ("fatal_error", "jm_heartbeat_timeout")]
    assert len(fatal) == 7
    assert {r["tm_id"] for r in fatal} == {"localhost:38251-0bfbad"}
    free = [r for r in rows if r["kind"] in ("log_warn", "log_error")]
    # Its WARN and ERROR lines after it took the job's slots (`Add job … for job leader
    # monitoring` at 05:58:59.165) name that job: it held only it. Before, none.
    added = "2026-11-24T05:58:59.165"  # Spark's session time zone is UTC
    assert {r["job_id"] for r in free if r["event_time"].isoformat() > added} == {
        "037e6ac51968b7dd30cc0efd8919ce1e"
    }
    assert {r["job_id"] for r in free if r["event_time"].isoformat() < added} == {None}
    # A file of shipper records interleaves processes: nothing in it speaks for the file.
    rows = _events(spark, tmp_path, [SHIPPERS / "tm_oom_2_3" / "tm_oom_2_3.rsyslog_json.log"])
    assert {r["tm_id"] for r in rows if r["kind"] == "fatal_error"} == {"vm"}
