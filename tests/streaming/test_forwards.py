"""A keyed source's lines attributed by what it said of itself, forwarded to their entity."""

from __future__ import annotations

import json

from detectors.tm_ids import tm_entity
from streaming.forwards import FREE_LINES, SELF_REPORTED, SourceSelf, encode
from streaming.routes import decode
from streaming.rows import Forward, read
from tests.streaming.test_runner import T0, Shard

TM = "localhost:38251-0bfbad"
TM_KEY = tm_entity(TM)
JOB = "037e6ac51968b7dd30cc0efd8919ce1e"
OTHER = "a" * 32
SRC = "src:flink.logs:/tmp/log/taskmanager/flink--taskexecutor-0-vm.log"
# The real capture's lines (tests/data/shippers/tm_oom_2_3), as the parser gives them.
START = "Starting TaskManager with ResourceID: " + TM
ADDED = f"Add job {JOB} for job leader monitoring."
REMOVED = f"Remove job {JOB} from job leader monitoring."
JM_START = "Starting StandaloneSessionClusterEntrypoint."
OOM = "Encountered fatal error java.lang.OutOfMemoryError - terminating the JVM"


def _line(offset: int, kind: str, message: str, **extra: object) -> dict:
    return {
        "entity": SRC,
        "kind": kind,
        "event_ms": T0 + offset * 1000,
        "src": "flink.logs:0",
        "offset": offset,
        "seq": 0,
        "message": message,
        **extra,
    }


def _forwards(rows: list[dict]) -> list[Forward]:
    return [x for x in map(read, rows) if isinstance(x, Forward)]


def test_a_source_learns_its_taskmanager_and_its_jobs_from_its_own_lines() -> None:
    me = SourceSelf()
    for line in (START, ADDED, f"Add job {OTHER} for job leader monitoring.", REMOVED):
        me.learn(line)
    assert (me.tm, me.jobs, me.mixed) == (TM, [OTHER], False)
    me.learn("Starting TaskManager with ResourceID: localhost:40001-aaaaaa")
    assert (me.tm, me.jobs) == ("localhost:40001-aaaaaa", [])  # a restart into the same key
    assert SourceSelf.of(me.saved()) == me
    me.learn(JM_START)
    assert me.mixed and SourceSelf.of(me.saved()).mixed


def test_a_taskmanagers_own_lines_are_forwarded_to_it_and_its_free_lines_to_its_one_job() -> None:
    shard = Shard()
    rows = shard.batch(
        [
            _line(0, "unparsed", START, level="INFO"),
            _line(1, "unparsed", ADDED, level="INFO"),
            _line(2, "fatal_error", OOM, reason="Java heap space", level="ERROR"),
            _line(3, "log_warn", "Failed to trigger or complete checkpoint 10", level="WARN"),
        ]
    )
    fwd = _forwards(rows)
    assert [f.entity for f in fwd] == [TM_KEY, f"job:{JOB}"]
    fatal, warn = (decode(f.value) for f in fwd)
    assert (fatal.event.kind, fatal.event.tm_id, fatal.event.reason) == (
        "fatal_error",
        TM,
        "Java heap space",
    )
    assert (warn.event.kind, warn.event.job_id, warn.event.tm_id) == ("log_warn", JOB, None)
    # Its own position space: a repeat is judged apart from the target's own records.
    assert [(e.src, e.offset, e.seq) for e in (fatal, warn)] == [
        ("fwd:flink.logs:0", 2, 0),
        ("fwd:flink.logs:0", 3, 0),
    ]
    assert [f.event_ms for f in fwd] == [T0 + 2000, T0 + 3000]
    # What it said of itself is kept for its next lines, in a later batch.
    later = shard.batch([_line(9, "jvm_oom", "java.lang.OutOfMemoryError: Java heap space")])
    assert [f.entity for f in _forwards(later)] == [TM_KEY]


def test_lines_that_name_their_own_entity_or_come_before_the_start_are_not_forwarded() -> None:
    shard = Shard()
    rows = shard.batch(
        [
            _line(0, "fatal_error", OOM),  # before the start line: whose is unknown
            _line(1, "unparsed", START),
            _line(2, "fatal_error", OOM, tm_id="other:1-abc"),  # names its own
            _line(3, "log_error", "boom"),  # no job held yet
            _line(4, "unparsed", ADDED),
            _line(5, "unparsed", f"Add job {OTHER} for job leader monitoring."),
            _line(6, "log_error", "boom"),  # two jobs: whose is unknown
            _line(7, "log_error", "boom", job_id=OTHER),  # names its own
        ]
    )
    assert _forwards(rows) == []


def test_a_key_where_a_jobmanager_starts_too_is_several_processes_and_forwards_nothing() -> None:
    shard = Shard()
    rows = shard.batch(
        [
            _line(0, "unparsed", JM_START),
            _line(1, "unparsed", START),
            _line(2, "fatal_error", OOM),
        ]
    )
    assert _forwards(rows) == []


def test_a_keyed_line_with_a_host_goes_to_the_hosts_taskmanager_until_its_source_says_more() -> (
    None
):
    """rsyslog keyed by its file names the machine (`vm`), the key's start line the process."""
    shard = Shard()
    rows = shard.batch(
        [
            _line(0, "fatal_error", OOM, host="vm"),  # before the start line: its host's
            _line(1, "unparsed", START, host="vm"),
            _line(2, "fatal_error", OOM, host="vm"),  # the start line's TaskManager
        ]
    )
    assert [f.entity for f in _forwards(rows)] == [tm_entity("vm"), TM_KEY]
    assert [decode(f.value).event.tm_id for f in _forwards(rows)] == ["vm", TM]
    # A key holding a JobManager too says nothing of whose a line is: the host again.
    mixed = Shard()
    rows = mixed.batch(
        [
            _line(0, "unparsed", JM_START, host="vm"),
            _line(1, "unparsed", START, host="vm"),
            _line(2, "fatal_error", OOM, host="vm"),
            _line(3, "unparsed", ADDED, host="vm"),
            _line(4, "log_error", "boom", host="vm"),
        ]
    )
    assert [f.entity for f in _forwards(rows)] == [tm_entity("vm")]


def test_a_source_that_said_nothing_of_itself_keeps_no_state() -> None:
    shard = Shard()
    shard.batch([_line(0, "log_warn", "a warning"), _line(1, "fatal_error", OOM)])
    assert SRC not in shard.store.values and SRC not in shard.wakes
    shard.batch([_line(2, "unparsed", START)])
    header, _ = shard.saved(SRC)
    assert header.me == {"tm": TM}
    assert shard.wakes[SRC].watermark_ms == T0 + 2000 + 7 * 86_400_000


def test_a_batch_run_again_repeats_its_forwards_and_the_target_applies_each_once() -> None:
    source = Shard()
    before = dict(source.store.values)
    lines = [_line(0, "unparsed", START), _line(50, "fatal_error", OOM, reason="Java heap space")]
    first = _forwards(source.batch([dict(r) for r in lines]))
    # The same batch again from the state before it (a crash before the commit).
    source.store.values = before
    source.wakes.clear()
    again = _forwards(source.batch([dict(r) for r in lines]))
    assert first == again and len(first) == 1
    target = Shard()
    # The target's own record at offset 60 of the same raw partition came first: the
    # forward at offset 50 is not taken for a repeat of it.
    own = {
        "entity": TM_KEY,
        "kind": "jm_heartbeat_timeout",
        "tm_id": TM,
        "event_ms": T0 + 60_000,
        "src": "flink.logs:0",
        "offset": 60,
        "seq": 0,
    }
    target.batch([own])
    fwd = [{"entity": f.entity, **json.loads(f.value)} for f in [*first, *again]]  # written twice
    target.batch(fwd)
    # The fatal line waited for its cause (jvm_fatal's cause_wait_s): past it, one exit.
    rows = target.batch([], watermark=T0 + 3_600_000)
    fired = [r for r in rows if r["kind"] == "alert" and r["detector"] == "jvm_fatal"]
    assert [(r["status"], r["tm_id"], r["entity"]) for r in fired][:1] == [("firing", TM, TM_KEY)]
    assert json.loads(fired[0]["evidence"])["fatal_exits"] == 1
    # Written again by a later run of the source's batch: nothing new.
    later = target.batch([{"entity": f.entity, **json.loads(f.value)} for f in first])
    assert [r for r in later if r["kind"] == "alert"] == []
    header, _ = target.saved(TM_KEY)
    assert header.seen["fwd:flink.logs:0"][:2] == [50, 0]


def test_a_forward_encodes_to_the_bus_value_it_came_from() -> None:
    value = json.dumps(
        {"kind": "fatal_error", "event_ms": T0, "src": "t:0", "offset": 4, "seq": 1, "reason": "x"}
    )
    e = decode(value)
    assert decode(encode(e)) == e


def test_the_forwarded_kinds_are_the_parsers_self_reported_and_free_kinds() -> None:
    from streaming import log_kinds, parsing

    assert SELF_REPORTED == parsing._SELF_REPORTED
    assert set(FREE_LINES) == set(log_kinds.FREE_KINDS.values())
