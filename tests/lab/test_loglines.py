"""lab.loglines reads every log case as the Spark parser is held to read it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from lab.loglines import classify, event_of, file_events

DATA = Path(__file__).resolve().parent.parent / "data"
CASES = yaml.safe_load((DATA / "parsing" / "log_cases.yaml").read_text(encoding="utf-8"))
EVENTS = [
    c for c in CASES if "kind" in (c["expect"][0] if isinstance(c["expect"], list) else c["expect"])
]


@pytest.mark.parametrize("case", EVENTS, ids=[c["id"] for c in EVENTS])
def test_every_log_case_gets_its_kind_and_job_id(case: dict) -> None:
    want = case["expect"][0] if isinstance(case["expect"], list) else case["expect"]
    ev = event_of(case["value"], 1_700_000_000_000)
    assert ev is not None
    assert ev.kind == want["kind"]
    if "job_id" in want:
        assert ev.job_id == want["job_id"]
    if "reason" in want and want["kind"] in ("log_warn", "log_error"):
        assert ev.reason == want["reason"]


def test_levels_make_the_free_kinds_only_for_lines_no_rule_takes() -> None:
    assert classify("Something odd happened", "WARN") == "log_warn"
    assert classify("Something odd happened", "FATAL") == "log_error"
    assert classify("Something odd happened", "INFO") == "unparsed"
    assert classify("Something odd happened", None) == "unparsed"
    assert classify("Checkpoint 7 of job x expired before completing.", "WARN") == (
        "checkpoint_expired"
    )


def test_a_file_is_split_into_records_with_their_stack_traces() -> None:
    events = file_events(DATA / "new_error_pattern" / "text_unattributed_and_learned_trap_2_3.log")
    errors = [e for e in events if e.kind == "log_error"]
    assert len(errors) == 10
    assert {e.reason for e in errors if e.job_id is None} == {
        "java.io.IOException: Connection reset by peer"
    }
