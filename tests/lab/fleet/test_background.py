"""A job's background of WARN and ERROR lines, and the new_error incident."""

from __future__ import annotations

import json
import re
from collections import Counter

from lab.fleet import FleetSpec, Incident, job_id
from tests.lab.fleet.helpers import by_job, full, level, message, run

# Job i runs VERSIONS[i % 4] in layout i % 4 (0, 2 default, 1 JSON, 3 envelope).
VERSIONS = ("1.11", "2.0", "1.18", "1.14")


def _lines(logs, pattern: str):
    return [r for r in logs if re.search(pattern, message(r))]


def test_the_background_is_rare_repetitive_and_varies_only_in_its_ids() -> None:
    spec = FleetSpec(jobs=12, flink_versions=VERSIONS, metric_interval_s=600)
    logs = by_job(spec, run(spec, 3600), "log")
    decoders = 0
    for recs in logs.values():
        drops = _lines(recs, r"^Dropping record at offset \d+ of partition [\w-]+: ")
        if drops:
            decoders += 1
            assert all(level(r) == "ERROR" for r in drops)
            # One reason per job, ids that vary, every 1-10 minutes.
            assert len({message(r).split(": ", 1)[1] for r in drops}) == 1
            assert len({message(r) for r in drops}) == len(drops)
            gaps = [b.time_ms - a.time_ms for a, b in zip(drops, drops[1:], strict=False)]
            assert all(60_000 <= g < 600_000 for g in gaps)
            assert 6 <= len(drops) <= 60
            assert drops[0].time_ms - recs[0].time_ms < 45_000  # soon after the start
        gated = _lines(recs, r"^Association with remote system \[(akka|pekko)\.tcp://flink@")
        assert all(level(r) == "WARN" for r in gated)
        share = (len(drops) + len(gated)) / len(recs)
        assert share < 0.05
    assert 4 <= decoders <= 11  # two jobs of three have a noisy decoder


def test_only_a_json_layout_on_1_19_names_the_job_in_the_mdc_and_never_on_process_lines() -> None:
    spec = FleetSpec(jobs=4, flink_versions=("1.11", "2.0", "1.18", "1.14"), metric_interval_s=600)
    records = run(spec, 3600)
    logs = by_job(spec, records, "log")
    # Job 1: JSON on 2.0. Its job lines carry flink-job-id, its process lines do not.
    keys = Counter()
    for r in logs[1]:
        obj = json.loads(r.value.decode().split("\n", 1)[0])
        keys[(obj["file"], "flink-job-id" in obj)] += 1
        if "flink-job-id" in obj:
            assert obj["flink-job-id"] == job_id(spec, 1)
    assert keys[("CheckpointCoordinator.java", True)] > 0
    assert not keys[("ReliableDeliverySupervisor.scala", True)]
    # The other jobs name none (text layouts, and JSON before 1.19).
    spec14 = FleetSpec(jobs=2, metric_interval_s=600)  # job 1: JSON on 1.14
    assert not [r for r in run(spec14, 600) if b"flink-job-id" in r.value]
    assert not [r for i in (0, 2, 3) for r in logs[i] if b"flink-job-id" in r.value]


def test_new_error_logs_a_lookup_failure_every_few_seconds_from_its_onset() -> None:
    spec = FleetSpec(
        jobs=2,
        flink_versions=VERSIONS,
        metric_interval_s=600,
        incidents=(Incident("new_error", 1, 300.0),),
    )
    logs = by_job(spec, run(spec, 900), "log")
    fails = _lines(logs[1], r"^Lookup of key \d+ in the reference service failed after 3 retries$")
    start = fails[0].time_ms - min(r.time_ms for r in logs[1])
    assert 295_000 < start < 305_000
    assert all(level(r) == "ERROR" for r in fails)
    assert all("java.net.SocketTimeoutException: Read timed out" in full(r) for r in fails)
    gaps = [b.time_ms - a.time_ms for a, b in zip(fails, fails[1:], strict=False)]
    assert gaps and all(5_000 <= g < 40_000 for g in gaps)
    assert not _lines(logs[0], r"^Lookup of key")
