"""Correlation end to end: a replayed incident timeline becomes one incident.

``tests/data/incidents/seed_001/`` is seed 001's whole story on Flink 1.17: an idle
TaskManager whose heap floor rises (the Kafka source's offsetsToCommit leak,
FLINK-33231), YARN killing its container for exceeding physical memory (exit 143), the
JobMaster's heartbeat timeout 45 s later, and the job failing over three times while no
new container comes (NoResourceAvailableException), until one does.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streaming.cli import main

DATA = Path(__file__).resolve().parent.parent / "data" / "incidents"
JOB = "9b2e4d6f8a0c1e3f5a7b9c1d3e5f7a9b"
TM = "container_e08_1710100000000_0017_01_000002"


@pytest.mark.spark
def test_seed_001_timeline_is_one_incident_rooted_in_the_heap_leak(spark, tmp_path, capsys) -> None:
    d = DATA / "seed_001"
    out = tmp_path / "alerts.jsonl"
    rc = main(
        [
            "replay",
            "--logs",
            *map(str, sorted(d.glob("*.log"))),
            "--metrics",
            *map(str, sorted(d.glob("*.jsonl"))),
            "--output",
            str(out),
        ]
    )
    assert rc == 0
    alerts = [json.loads(line) for line in out.read_text().splitlines()]
    firing = {a["detector"]: a for a in alerts if a["status"] == "firing"}
    assert set(firing) >= {"idle_heap_growth", "tm_lost", "restart_storm"}
    heap, lost, storm = firing["idle_heap_growth"], firing["tm_lost"], firing["restart_storm"]
    assert heap["tm_id"] == lost["tm_id"] == TM
    assert storm["job_id"] == JOB
    assert lost["evidence"]["cause"] == "memory_kill"
    # In event time: the leak pages first, the kill pages at once, the restarts after.
    assert heap["event_time"] < lost["event_time"] < storm["event_time"]

    # Every transition of the three carries the incident the heap leak opened.
    chain = [a for a in alerts if a["detector"] in ("idle_heap_growth", "tm_lost", "restart_storm")]
    assert {a.get("incident_id") for a in chain[1:]} == {heap["alert_id"]}
    cause = storm["root_cause"]
    assert cause.startswith(f"TaskManager {TM} killed for memory after its heap grew")
    assert "offsetsToCommit leak (FLINK-33231)" in cause
    assert "job orders_cdc_gray restarting (3 restarts)" in cause
    printed = capsys.readouterr().out
    assert f"incident {heap['alert_id']} (idle_heap_growth -> tm_lost -> restart_storm" in printed
