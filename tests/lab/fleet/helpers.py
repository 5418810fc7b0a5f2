"""What the fleet simulator's tests share: the records of a run, and how to read them."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from datetime import UTC, datetime

from lab.fleet import FleetSpec, SimRecord, generate, job_id, tm_id

START_MS = 1_717_000_000_000  # 2024-05-29 16:26:40 UTC

# FLINK_FORMATS.md §10, as published (both log4j generations) ...
DEFAULT_LAYOUT = re.compile(
    r"^(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3}) "
    r"(?P<level>TRACE|DEBUG|INFO |WARN |ERROR|FATAL) ?"
    r"(?P<logger>\S+)\s+(?:\[[^\]]*\] )?- (?P<msg>.*)$"
)
# ... and strictly: `%-5p %-60c %x - `, where log4j 2 renders the empty NDC as `[]`.
LOG4J2 = re.compile(r"^.{23} (?:INFO |WARN |ERROR) (?P<logger>\S+ *) \[\] - ")
LOG4J1 = re.compile(r"^.{23} (?:INFO |WARN |ERROR) (?P<logger>\S+ *)  - ")
# Lines after the first: stack frames, causes, exception headers.
CONTINUATION = re.compile(r"^(?:\tat |Caused by: |\t\.\.\. \d+ more$|[\w$]+(?:\.[\w$]+)+: )")
LABEL_VALUE = re.compile(r"^[a-zA-Z0-9:_]*$")
JOB_LABELS = {"host", "job_id", "job_name"}
TM_LABELS = {"host", "tm_id"}
TASK_LABELS = (
    TM_LABELS
    | JOB_LABELS
    | {
        "task_id",
        "task_name",
        "task_attempt_id",
        "task_attempt_num",
        "subtask_index",
    }
)
# Log messages (first lines) of the job's lifecycle.
COMPLETED = (
    r"^Completed checkpoint (\d+) for job \w+ \((\d+) bytes(?: in |, checkpointDuration=)(\d+) ms"
)
JOB_STATE = r"^Job \S+ \((\w+)\) switched from state (\w+) to (\w+)\.$"
RESTORED = (
    r"^Restoring job (\w+) from (?:latest valid checkpoint: )?Checkpoint (\d+) @ (\d+) for (\w+)"
    r"(?: located at \S+/chk-(\d+))?\.$"
)
TASK_STATE = r"^(.+) \((\d)/(\d)\) \(([0-9a-f_]+)\) switched from (\w+) to (\w+)"
# Versions where job 3 (Kubernetes, envelope) runs 1.11, so that the watch crash applies.
K8S_111 = ("1.11", "1.14", "1.18", "1.11")


def run(spec: FleetSpec, duration_s: float = 300) -> list[SimRecord]:
    return list(generate(spec, START_MS, duration_s))


def job_of(spec: FleetSpec, rec: SimRecord) -> int:
    """Which job a record belongs to, from its Kafka key (job id or TaskManager id).

    Replacement TaskManagers and a job resubmitted under a new id count as their job's.
    """
    for i in range(spec.jobs):
        if rec.key in {job_id(spec, i).encode(), job_id(spec, i, 1).encode()}:
            return i
        if rec.key in {tm_id(spec, i, k).encode() for k in range(spec.tms_per_job + 16)}:
            return i
    raise AssertionError(f"record key {rec.key!r} names no job")


def by_job(spec: FleetSpec, records: list[SimRecord], stream: str) -> dict[int, list[SimRecord]]:
    out: dict[int, list[SimRecord]] = defaultdict(list)
    for r in records:
        if r.stream == stream:
            out[job_of(spec, r)].append(r)
    return out


def log4j_ms(ts: str) -> int:
    dt = datetime.strptime(ts, "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=UTC)
    return round(dt.timestamp() * 1000)


def message(rec: SimRecord) -> str:
    """The log message (first line) of a record in any of the three layouts."""
    first = rec.value.decode().split("\n", 1)[0]
    if first.startswith('{"log"'):
        first = json.loads(rec.value)["log"].split("\n", 1)[0]
    elif first.startswith("{"):
        return json.loads(first)["message"]
    m = DEFAULT_LAYOUT.match(first)
    assert m, first
    return m["msg"]


def level(rec: SimRecord) -> str:
    first = rec.value.decode().split("\n", 1)[0]
    if first.startswith('{"log"'):
        first = json.loads(rec.value)["log"].split("\n", 1)[0]
    elif first.startswith("{"):
        return json.loads(first)["level"]
    m = DEFAULT_LAYOUT.match(first)
    assert m, first
    return m["level"].strip()


def messages(records: list[SimRecord], pattern: str) -> list[tuple[SimRecord, re.Match[str]]]:
    rx = re.compile(pattern)
    out = []
    for r in records:
        m = rx.search(message(r))
        if m:
            out.append((r, m))
    return out


def samples(spec: FleetSpec, records: list[SimRecord], name: str) -> dict[str, list[float]]:
    """Values of one metric per series (its label values joined), in time order."""
    out: dict[str, list[float]] = defaultdict(list)
    for r in records:
        if r.stream != "metric":
            continue
        m = json.loads(r.value)
        if m["name"] == name:
            labels = m.get("labels") or m["tags"]
            value = m["value"] if "value" in m else next(iter(m["fields"].values()))
            out["|".join(f"{k}={v}" for k, v in sorted(labels.items()))].append(value)
    return out


def points(
    records: list[SimRecord], name: str, key: bytes | None = None
) -> dict[str, list[tuple[int, float]]]:
    """(time ms, value) of one metric per series, keyed by tm_id (or task too), in time order."""
    out: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for r in records:
        if r.stream != "metric" or (key is not None and r.key != key):
            continue
        m = json.loads(r.value)
        if m["name"] != name:
            continue
        labels = m.get("labels") or m["tags"]
        value = m["value"] if "value" in m else next(iter(m["fields"].values()))
        series = labels.get("tm_id", "") + "|" + labels.get("task_name", "")
        out[series].append((r.time_ms, value))
    return out


def floors(series: list[tuple[int, float]], from_ms: int, to_ms: int) -> list[float]:
    """The lowest heap sample of each whole 5-minute window in [from_ms, to_ms)."""
    out = []
    for lo in range(from_ms, to_ms - 300_000 + 1, 300_000):
        window = [v for t, v in series if lo <= t < lo + 300_000]
        assert window, f"no sample in the window at {lo}"
        out.append(min(window))
    return out


def full(rec: SimRecord) -> str:
    """The whole log message of a record (first line and the lines after), in any layout."""
    text = rec.value.decode()
    if text.startswith('{"log"'):
        text = json.loads(text)["log"]
    elif text.startswith("{"):
        first, _, rest = text.partition("\n")
        return json.loads(first)["message"] + ("\n" + rest if rest else "")
    first, _, rest = text.partition("\n")
    m = DEFAULT_LAYOUT.match(first)
    assert m, first
    return m["msg"] + ("\n" + rest if rest else "")


def restart_after(logs: list[SimRecord], failed_ms: int) -> tuple[int, int]:
    """(restarted at, every task RUNNING again at) for the failover at ``failed_ms``.

    1.10+ go RUNNING -> RESTARTING -> RUNNING; the legacy scheduler RUNNING -> FAILING ->
    RESTARTING -> CREATED -> RUNNING.
    """
    states = [(r.time_ms, m[2], m[3]) for r, m in messages(logs, JOB_STATE)]
    restarting = [t for t, a, b in states if b == "RESTARTING" and t >= failed_ms]
    running = [t for t, a, b in states if b == "RUNNING" and t > failed_ms]
    assert restarting and running, states
    assert restarting[0] - failed_ms < 100
    back = running[0]
    redeployed = [
        r.time_ms for r, m in messages(logs, TASK_STATE) if m[6] == "RUNNING" and r.time_ms > back
    ]
    return back, max(redeployed[:6])
