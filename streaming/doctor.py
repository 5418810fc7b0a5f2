"""What a sample of the input lets flinkwatch see: shapes, dead letters, and each detector's view.

``flinkwatch doctor`` (:mod:`streaming.cli.doctor`) parses a sample of the configured topics
(or of files) with the product's own parsers and hands this module one small table, a
:class:`Tally`: how many parsed events or dead letters of each shape, kind and reason, and
whether they named their job and their TaskManager. Everything here is plain Python over
that table, so the judgement is tested in milliseconds and the Spark side only counts.

A sample of a healthy cluster holds no incident: no expired checkpoint, no OOM. So a
detector is judged by the routine records that show its route is open, the ones a watched
entity logs or reports while nothing is wrong (a completed checkpoint naming its job, a
TaskManager's heap gauge naming the TaskManager). :data:`NEEDS` lists them per detector; a
test keeps every entry inside what the detector declares it reads (``kinds``, ``metrics``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from detectors import REGISTRY, Detector
from detectors.idle_heap_growth import HEAP_USED, THROUGHPUT_METRICS
from detectors.model import LAST_CHECKPOINT_DURATION, LAST_CHECKPOINT_SIZE

Input = Literal["logs", "metrics"]
#: Which process logged a line, by its logger (:func:`side_of_logger`).
Side = Literal["taskmanager", "jobmanager"]
#: What the entity an event is about must be named by for a detector to use it: its job,
#: its TaskManager, or (``source``) a TaskManager or host its record's source names, which
#: a line that names none itself is attributed to.
Naming = Literal["job", "tm", "source", "none"]

# Loggers only a TaskManager (or the TaskManager side of a mini-cluster) logs with, and
# loggers only a JobManager logs with. A logger in neither (a user's, a connector's) is
# not counted for either side.
_TM_LOGGERS = (
    "org.apache.flink.runtime.taskexecutor.",
    "org.apache.flink.runtime.taskmanager.",
    "org.apache.flink.runtime.io.network.",
    "org.apache.flink.streaming.runtime.tasks.",
    "org.apache.flink.runtime.state.",
)
_JM_LOGGERS = (
    "org.apache.flink.runtime.checkpoint.CheckpointCoordinator",
    "org.apache.flink.runtime.executiongraph.",
    "org.apache.flink.runtime.jobmaster.",
    "org.apache.flink.runtime.resourcemanager.",
    "org.apache.flink.runtime.dispatcher.",
    "org.apache.flink.runtime.entrypoint.",
    "org.apache.flink.kubernetes.",
    "org.apache.flink.yarn.",
)


def side_of_logger(logger: str | None) -> Side | None:
    """The process a log line comes from, by its logger; None when the logger says neither."""
    if not logger:
        return None
    if logger.startswith(_TM_LOGGERS):
        return "taskmanager"
    if logger.startswith(_JM_LOGGERS):
        return "jobmanager"
    return None


@dataclass(frozen=True)
class Count:
    """One row of the tally: how many records or events share these traits.

    Attributes:
        input: The topic role the record came from.
        shape: The record shape the parser recognised (``shape`` column of the parsers).
        kind: The event kind, None for a dead letter.
        error: The dead-letter reason, None for an event.
        job: Whether the event names its job.
        tm: Whether the event names its TaskManager.
        source: Whether the record's source names a TaskManager or host (the parser's
            ``own_tm``): a line of it that names none would be attributed to that one.
        side: The process that logged a log line, by its logger.
        metric: A metric event's name if a detector reads it, ``"other"`` if none does.
        n: How many.
    """

    input: Input
    shape: str
    kind: str | None
    error: str | None
    job: bool
    tm: bool
    side: Side | None
    metric: str | None
    n: int
    source: bool = False


@dataclass(frozen=True)
class Example:
    """A dead letter as it arrived, to show beside its reason."""

    input: Input
    error: str
    source: str
    partition: int
    offset: int
    raw: str


@dataclass(frozen=True)
class Tally:
    """The counted sample: what :mod:`streaming.cli.doctor` collects from Spark."""

    counts: tuple[Count, ...]
    examples: tuple[Example, ...] = ()
    #: Where the sample came from, per input (``flink.logs: last 10,000 of 2 partitions``).
    sources: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Signal:
    """Events that show a route is open: a kind (or a metric) named by what the detector needs."""

    kind: str
    metrics: frozenset[str] = frozenset()
    naming: Naming = "none"
    side: Side | None = None

    def matches(self, c: Count) -> bool:
        """Whether a tally row holds such events."""
        if c.kind != self.kind or c.error is not None:
            return False
        if self.metrics and c.metric not in self.metrics:
            return False
        if self.side is not None and c.side != self.side:
            return False
        return {"none": True, "job": c.job, "tm": c.tm, "source": c.source}[self.naming]


@dataclass(frozen=True)
class Need:
    """What a detector must see to judge: any of ``signals``, else ``missing`` says why not."""

    what: str
    signals: tuple[Signal, ...]
    missing: str


def _kinds(*kinds: str, naming: Naming = "job", side: Side | None = None) -> tuple[Signal, ...]:
    return tuple(Signal(k, naming=naming, side=side) for k in kinds)


def _metric(names: Iterable[str], naming: Naming) -> Signal:
    return Signal("metric", frozenset(names), naming)


_CHECKPOINT_LINES = _kinds("checkpoint_triggered", "checkpoint_completed")
_JM_LINES = tuple(
    Signal(k, side="jobmanager")
    for k in ("unparsed", "log_warn", "log_error", "checkpoint_triggered", "job_state")
)

#: Per detector, the routine events that show it can judge (what a healthy cluster sends).
NEEDS: dict[str, tuple[Need, ...]] = {
    "checkpoint_creep": (
        Need(
            "checkpoint durations per job",
            (
                Signal("checkpoint_completed", naming="job"),
                _metric({LAST_CHECKPOINT_DURATION}, "job"),
            ),
            "no completed checkpoint naming its job (the JobManager's CheckpointCoordinator "
            f"lines) and no {LAST_CHECKPOINT_DURATION} with a job_id",
        ),
    ),
    "checkpoint_failures": (
        Need(
            "the JobManager's checkpoint lines per job",
            _CHECKPOINT_LINES,
            "no `Triggering checkpoint` or `Completed checkpoint` line naming its job: expired "
            "and failed checkpoints are logged by the same JobManager logger",
        ),
    ),
    "late_barrier_acks": (
        Need(
            "the JobManager's checkpoint lines per job",
            _CHECKPOINT_LINES,
            "no JobManager checkpoint line naming its job: late acks are logged beside them",
        ),
    ),
    "checkpoint_state_growth": (
        Need(
            "checkpoint sizes per job",
            (
                Signal("checkpoint_completed", naming="job"),
                _metric({LAST_CHECKPOINT_SIZE}, "job"),
            ),
            f"no completed checkpoint naming its job and no {LAST_CHECKPOINT_SIZE} with a job_id",
        ),
    ),
    "idle_heap_growth": (
        Need(
            "heap per TaskManager",
            (_metric({HEAP_USED}, "tm"),),
            f"no heap metrics seen for any TaskManager ({HEAP_USED} with a tm_id)",
        ),
        Need(
            "throughput per TaskManager",
            (_metric(THROUGHPUT_METRICS, "tm"),),
            "no numRecordsIn/numRecordsOut metrics with a tm_id: it cannot tell an idle "
            "TaskManager from a busy one",
        ),
    ),
    "jvm_fatal": (
        Need(
            "TaskManager log lines whose source names their TaskManager or host",
            tuple(
                Signal(k, naming="source", side="taskmanager")
                for k in ("unparsed", "log_warn", "log_error", "task_state")
            ),
            "no TaskManager log line names its TaskManager: a TaskManager's fatal error or "
            "OutOfMemoryError cannot be attributed (ship pod or host metadata with the lines, "
            "or each TaskManager's whole log so its `Starting TaskManager with ResourceID` "
            "line names it; a bare KafkaAppender: a key per process, whose start line names "
            "it, logged once when the process starts, so a sample may begin after it)",
        ),
    ),
    "tm_lost": (
        Need(
            "the JobManager's log",
            _JM_LINES,
            "no JobManager log line: heartbeat timeouts and container kills are logged there",
        ),
    ),
    "jm_k8s_watch_crash": (
        Need(
            "the JobManager's log",
            _JM_LINES,
            "no JobManager log line: the watch error and the restart are logged there",
        ),
    ),
    "job_lost": (
        # A job is watched from its RUNNING line, or from its uptime gauge once a line of
        # its JobManager's log was read (only the log tells its end): gauges alone start
        # no watch.
        Need(
            "the JobManager's lines per job",
            (*_kinds("job_state", "job_restored"), *_CHECKPOINT_LINES),
            "no `Job … switched from state`, checkpoint or restore line naming a job: a job is "
            "watched from its RUNNING line, or from its uptime gauge once a line of its "
            "JobManager's log is read (its gauges just stop when it ends)",
        ),
    ),
    "restart_storm": (
        Need(
            "job state lines",
            (Signal("job_state", naming="job"),),
            "no `Job … switched from state` line naming its job",
        ),
    ),
    "new_error_pattern": (
        Need(
            "WARN or ERROR lines that name their job",
            _kinds("log_warn", "log_error"),
            "no WARN or ERROR line names its job (a JSON layout with Flink 1.19+'s "
            "`flink-job-id` MDC key names it on every line)",
        ),
    ),
}

#: A detector's verdict: it can judge, it judges part of what it could, it cannot page.
Verdict = Literal["ready", "partial", "blind"]


@dataclass(frozen=True)
class DetectorView:
    """One detector's view of the sample."""

    detector: str
    verdict: Verdict
    seen: tuple[str, ...]
    missing: tuple[str, ...]
    notes: tuple[str, ...]


@dataclass(frozen=True)
class ShapeRow:
    """Records of one shape on one input."""

    input: Input
    shape: str
    records: int
    parsed: int
    dead: int


@dataclass(frozen=True)
class KindRow:
    """Events of one kind: how many, and how many name a job and a TaskManager."""

    kind: str
    events: int
    with_job: int
    with_tm: int


@dataclass(frozen=True)
class ReasonRow:
    """Dead letters of one reason, with one example."""

    input: Input
    reason: str
    records: int
    example: Example | None


@dataclass(frozen=True)
class Diagnosis:
    """Everything ``flinkwatch doctor`` prints."""

    sources: Mapping[str, str]
    shapes: tuple[ShapeRow, ...]
    reasons: tuple[ReasonRow, ...]
    kinds: tuple[KindRow, ...]
    detectors: tuple[DetectorView, ...]


def _total(counts: Iterable[Count]) -> int:
    return sum(c.n for c in counts)


def _shapes(counts: tuple[Count, ...]) -> tuple[ShapeRow, ...]:
    keys = sorted({(c.input, c.shape) for c in counts}, key=lambda k: (k[0], k[1]))
    rows = []
    for inp, shape in keys:
        mine = [c for c in counts if (c.input, c.shape) == (inp, shape)]
        dead = _total(c for c in mine if c.error is not None)
        rows.append(ShapeRow(inp, shape, _total(mine), _total(mine) - dead, dead))
    return tuple(sorted(rows, key=lambda r: (r.input, -r.records, r.shape)))


def _reasons(tally: Tally) -> tuple[ReasonRow, ...]:
    keys = {(c.input, c.error) for c in tally.counts if c.error is not None}
    rows = []
    for inp, err in keys:
        assert err is not None
        n = _total(c for c in tally.counts if c.input == inp and c.error == err)
        ex = next((e for e in tally.examples if e.input == inp and e.error == err), None)
        rows.append(ReasonRow(inp, err, n, ex))
    return tuple(sorted(rows, key=lambda r: (r.input, -r.records, r.reason)))


def _kind_rows(counts: tuple[Count, ...]) -> tuple[KindRow, ...]:
    kinds = sorted({c.kind for c in counts if c.kind is not None})
    rows = []
    for k in kinds:
        mine = [c for c in counts if c.kind == k]
        rows.append(
            KindRow(
                k,
                _total(mine),
                _total(c for c in mine if c.job),
                _total(c for c in mine if c.tm),
            )
        )
    return tuple(sorted(rows, key=lambda r: (-r.events, r.kind)))


def _notes(name: str, counts: tuple[Count, ...]) -> tuple[str, ...]:
    """What limits a detector short of blindness: events it could use but cannot place."""
    notes = []
    if name == "new_error_pattern":
        tm_lines = [
            c for c in counts if c.kind in ("log_warn", "log_error") and c.side == "taskmanager"
        ]
        nameless = _total(c for c in tm_lines if not c.job)
        if nameless and nameless == _total(tm_lines):
            notes.append(
                f"TaskManager lines name no job ({nameless:,} WARN/ERROR lines): "
                "new_error_pattern sees only JobManager lines"
            )
    if name in ("jvm_fatal", "tm_lost"):
        # A line whose source (its file or Kafka key) names its TaskManager is placed.
        fatal = [
            c for c in counts if c.kind in ("fatal_error", "jvm_oom") and not (c.tm or c.source)
        ]
        if fatal:
            notes.append(
                f"{_total(fatal):,} fatal error or OutOfMemoryError lines name no TaskManager: "
                "their process cannot be told"
            )
    return tuple(notes)


def _view(name: str, needs: tuple[Need, ...], counts: tuple[Count, ...]) -> DetectorView:
    seen, missing = [], []
    for need in needs:
        n = _total(c for c in counts if any(s.matches(c) for s in need.signals))
        if n:
            seen.append(f"{need.what}: {n:,} events")
        else:
            missing.append(need.missing)
    verdict: Verdict = "blind" if not seen else ("partial" if missing else "ready")
    notes = _notes(name, counts)
    if verdict == "ready" and notes:
        verdict = "partial"
    return DetectorView(name, verdict, tuple(seen), tuple(missing), notes)


def rule_needs(cls: type[Detector[Any, Any]]) -> tuple[Need, ...]:
    """What a rule must see to judge: its metrics naming its entity, or log lines that do.

    A rule counting log lines (a frequency of errors, say) can judge when lines naming
    its job or TaskManager arrive at all: its own kinds may rightly be absent.
    """
    naming: Naming = "tm" if cls.scope == "tm" else "job"
    who = "TaskManager" if naming == "tm" else "job"
    needs = []
    if cls.metrics:
        names = ", ".join(sorted(cls.metrics))
        needs.append(
            Need(
                f"{names} per {who}",
                (_metric(cls.metrics, naming),),
                f"no {names} naming its {who}",
            )
        )
    lines = sorted(cls.kinds - {"metric"})
    if lines:
        routine = ("unparsed", "log_warn", "log_error", "checkpoint_triggered", "job_state")
        needs.append(
            Need(
                f"log lines per {who}",
                _kinds(*sorted({*lines, *routine}), naming=naming),
                f"no log line naming its {who}",
            )
        )
    return tuple(needs)


def diagnose(
    tally: Tally,
    detectors: Iterable[str] | None = None,
    catalog: Mapping[str, type[Detector[Any, Any]]] = REGISTRY,
) -> Diagnosis:
    """The sample's shapes, dead letters, kinds, and each enabled detector's view of it.

    ``catalog`` is what the config runs (``AppConfig.catalog``): a rule's view is made
    from the events it reads (:func:`rule_needs`).
    """
    needs = {n: NEEDS[n] if n in NEEDS else rule_needs(c) for n, c in catalog.items()}
    names = [d for d in (detectors if detectors is not None else catalog) if needs.get(d)]
    return Diagnosis(
        sources=dict(tally.sources),
        shapes=_shapes(tally.counts),
        reasons=_reasons(tally),
        kinds=_kind_rows(tally.counts),
        detectors=tuple(_view(d, needs[d], tally.counts) for d in names),
    )


def _cut(text: str, n: int = 160) -> str:
    one = text.replace("\n", "\\n")
    return one if len(one) <= n else one[: n - 1] + "…"


def render_text(d: Diagnosis) -> list[str]:
    """The diagnosis as a person reads it, one line a string."""
    out = ["Sample"]
    out += [f"  {inp}: {what}" for inp, what in d.sources.items()] or ["  (nothing)"]
    out += ["", "Record shapes"]
    for s in d.shapes:
        dead = f", {s.dead:,} dead letters" if s.dead else ""
        out.append(
            f"  {s.input:<8} {s.shape:<20} {s.records:>9,} records ({s.parsed:,} parsed{dead})"
        )
    if not d.shapes:
        out.append("  no records")
    out += ["", "Dead letters"]
    for r in d.reasons:
        out.append(f"  {r.input:<8} {r.reason:<24} {r.records:>9,}")
        if r.example is not None:
            e = r.example
            out.append(f"           e.g. {e.source}[{e.partition}]@{e.offset}: {_cut(e.raw)}")
    if not d.reasons:
        out.append("  none")
    out += ["", "Events", f"  {'kind':<24} {'events':>9} {'naming a job':>13} {'naming a TM':>12}"]
    for k in d.kinds:
        out.append(f"  {k.kind:<24} {k.events:>9,} {k.with_job:>13,} {k.with_tm:>12,}")
    out += ["", "Detectors"]
    for v in d.detectors:
        out.append(f"  {v.verdict.upper():<8} {v.detector}")
        out += [f"           sees {s}" for s in v.seen]
        out += [f"           cannot page: {m}" for m in v.missing if v.verdict == "blind"]
        out += [f"           misses: {m}" for m in v.missing if v.verdict != "blind"]
        out += [f"           note: {n}" for n in v.notes]
    return out


def as_json(d: Diagnosis) -> dict[str, object]:
    """The diagnosis for a script (``-o json``)."""
    return {
        "schema": 1,
        "sources": dict(d.sources),
        "shapes": [vars(s) for s in d.shapes],
        "dead_letters": [
            {
                "input": r.input,
                "reason": r.reason,
                "records": r.records,
                "example": vars(r.example) if r.example else None,
            }
            for r in d.reasons
        ],
        "kinds": [vars(k) for k in d.kinds],
        "detectors": [
            {
                "detector": v.detector,
                "verdict": v.verdict,
                "seen": list(v.seen),
                "missing": list(v.missing),
                "notes": list(v.notes),
            }
            for v in d.detectors
        ],
    }
