"""A keyed source's own lines, attributed by what the source said of itself: forwards.

A bare log4j2 ``KafkaAppender`` ships a process's lines with no envelope: a fatal line
(``Encountered fatal error java.lang.OutOfMemoryError``) or a free WARN/ERROR line names
no TaskManager and no job. Its record *key* is per process when the user sets one
(``${sys:log.file}``, ``${env:HOSTNAME}``), and the process's own log says who it is
(``Starting TaskManager with ResourceID: X``) and which jobs it holds (``Add job J for
job leader monitoring`` / ``Remove job J …``), as a log file does
(:mod:`streaming.sources`). The parse query is stateless and cannot remember that, so it
puts such lines on the bus under a *source* entity, ``src:<topic>:<key>``
(:mod:`streaming.bus`), and the runner keeps what the source said of itself in that
entity's header (:class:`SourceSelf`). Each line of the source that names no one comes
out of the detect query as a :class:`~streaming.notes.Forward`: the same event with the
TaskManager (and the job, when the TaskManager holds exactly one) filled in, addressed to
that entity, which may live in any shard. The driver writes forwards back onto the bus
before the batch commits; the next batch applies them. A forward keeps its record's
offset and seq under a position space of its own (``fwd:<topic>:<partition>``), so a
batch run again repeats them and the target drops the repeats, while the target's own
records of that partition are judged apart. Pure Python: the runner's side, tested
without Spark.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from detectors.tm_ids import tm_entity
from streaming.routes import BusEvent

#: Entity prefix of a keyed source (``src:<topic>:<key>``).
SOURCE_PREFIX = "src:"
#: Position prefix of forwarded events: their repeats are judged apart from the target's
#: own records of the same partition.
FORWARD_PREFIX = "fwd:"
#: Kinds a process logs about itself (streaming.parsing ``_SELF_REPORTED``): forwarded to
#: the source's TaskManager when they name none.
SELF_REPORTED = ("fatal_error", "jvm_oom", "jm_heartbeat_timeout", "job_released")
#: Free WARN/ERROR lines (streaming.parsing ``FREE_KINDS``): forwarded to the source's one
#: job when they name none.
FREE_LINES = ("log_warn", "log_error")
#: Substrings of the lines that say who a source is (the parse query's cheap guard).
SAYS = ("Starting TaskManager with ResourceID", " job leader monitoring", "ClusterEntry")
#: How long (the source's event time) a source that fell silent is remembered. A process
#: says who it is once, at its start, and may then log nothing for days: this is the
#: process's life, not a detector's idle time.
SOURCE_IDLE_MS = 7 * 86_400_000

#: What a process's log says of itself, as Java and Python regexes alike: the same patterns
#: read a log file in Spark (streaming.sources) and a keyed source's lines here.
TM_START = r"Starting TaskManager with ResourceID: ([^\s\"\\,]+)"
JOB_ADDED = r"Add job ([0-9a-f]{32}) for job leader monitoring"
JOB_REMOVED = r"Remove job ([0-9a-f]{32}) from job leader monitoring"
JM_START = r"Starting \w+ClusterEntry[Pp]oint"
_TM_START, _JOB_ADDED = re.compile(TM_START), re.compile(JOB_ADDED)
_JOB_REMOVED, _JM_START = re.compile(JOB_REMOVED), re.compile(JM_START)


def is_source(entity: str) -> bool:
    """Whether an entity key is a keyed source's (:data:`SOURCE_PREFIX`)."""
    return entity.startswith(SOURCE_PREFIX)


@dataclass
class SourceSelf:
    """What a keyed source said of itself, as of its last line applied.

    Attributes:
        tm: The TaskManager it is (its last start line).
        jobs: The jobs that TaskManager holds slots of, in the order added.
        mixed: A JobManager started in it too: the key holds several processes (a topic
            keyed by one constant), so nothing of it is attributed.
    """

    tm: str | None = None
    jobs: list[str] = field(default_factory=list)
    mixed: bool = False

    @classmethod
    def of(cls, saved: dict[str, Any] | None) -> SourceSelf:
        """From the header's saved form (:meth:`saved`)."""
        d = saved or {}
        return cls(d.get("tm"), list(d.get("jobs") or []), bool(d.get("jm")))

    def saved(self) -> dict[str, Any]:
        """The header's saved form (empty parts left out)."""
        d: dict[str, Any] = {"tm": self.tm, "jobs": self.jobs, "jm": self.mixed}
        return {k: v for k, v in d.items() if v}

    def learn(self, message: str | None) -> None:
        """Fold one line of the source in: a start, a job added or removed."""
        if not message or not any(s in message for s in SAYS):
            return
        if _JM_START.search(message):
            self.mixed = True
        if m := _TM_START.search(message):
            # A restart into the same key: the jobs were the process before's.
            self.tm, self.jobs = m.group(1), []
        if (m := _JOB_ADDED.search(message)) and m.group(1) not in self.jobs:
            self.jobs.append(m.group(1))
        if (m := _JOB_REMOVED.search(message)) and m.group(1) in self.jobs:
            self.jobs.remove(m.group(1))

    def forward(self, e: BusEvent) -> tuple[str, BusEvent] | None:
        """The entity and event a line of the source is forwarded as; ``None``: not one.

        A self-reported line that names no TaskManager goes to the source's TaskManager
        (failing that, to its host's, as a record without a key would), naming it; a free
        WARN/ERROR line that names no job to its one job, naming it (several jobs: whose
        it is cannot be told). The same lines a log file's start
        line attributes (streaming.parsing, ``source_tm``/``source_job``).
        """
        ev = e.event
        if e.src is None:
            return None
        # Its host, where the source has not said which TaskManager it is (or holds more
        # than one process): what the line would have named without a key.
        tm = (None if self.mixed else self.tm) or ev.host
        if ev.kind in SELF_REPORTED and ev.tm_id is None and tm is not None:
            target, ev = tm_entity(tm), ev._replace(tm_id=tm)
        elif self.mixed:
            return None
        elif ev.kind in FREE_LINES and ev.job_id is None and len(self.jobs) == 1:
            target, ev = f"job:{self.jobs[0]}", ev._replace(job_id=self.jobs[0])
        else:
            return None
        return target, e._replace(event=ev, src=FORWARD_PREFIX + e.src, bus_ms=None)


def encode(e: BusEvent) -> str:
    """A bus event as the bus's value (what :func:`streaming.routes.decode` reads back)."""
    d: dict[str, Any] = {"event_ms": e.event.time_ms, "src": e.src, "offset": e.offset}
    d["seq"] = e.seq
    for k, v in e.event._asdict().items():
        if k != "time_ms" and v is not None:
            d[k] = v
    return json.dumps(d, separators=(",", ":"))
