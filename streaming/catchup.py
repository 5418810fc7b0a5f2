"""Catch up in micro-batches, parse in real time once caught up.

The detectors keep one event-time watermark over all events. In real-time mode every raw
partition is read as fast as its task can: after an outage the small logs partitions are
back at "now" in seconds while the metrics partitions are still an hour behind, and the
watermark, pushed by the logs, makes every metric event of that hour late (Spark drops
late rows). Micro-batches read all partitions in proportion to their backlog, so event
time advances evenly. So: behind by more than ``spark.realtime_max_lag`` records, the
parse query runs in micro-batches (each topic's share of ``kafka.max_offsets_per_trigger``
in proportion to its backlog); caught up, it runs in real time.

Idle, real time costs more than micro-batches: its long-running tasks poll Kafka, and each
``spark.realtime_batch_s`` commit is planned and compiled anew (0.08 cores with nothing to
read at 30 s, 0.2 at 5 s, where a micro-batch query that finds no new offsets runs no batch
at all). So once
the running query's progress shows no record read for ``spark.idle_after_s``, the parse
query runs in micro-batches on the detect query's trigger, and in real time again as soon
as one of them reads records (:func:`decide`, from the progress reports, never a clock of
the driver's).

The two modes keep separate checkpoints (Spark does not document reusing one for the
other). Switching starts the other mode's query on a fresh checkpoint at the offsets the
last committed batch of the previous one ended at: nothing is skipped, and at most one
batch is parsed again, whose events the adapter drops as repeats.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from conf import AppConfig, KafkaConfig
from streaming import checkpoints
from streaming.checkpoints import CheckpointDir

log = logging.getLogger(__name__)

Offsets = dict[str, dict[str, int]]
Mode = Literal["realtime", "microbatch"]
MODES: tuple[Mode, ...] = ("realtime", "microbatch")
#: Why the parse query runs in its mode: so configured (``spark.parse_mode: microbatch``, a
#: pinned trigger), in real time, catching up a backlog, or idle raw topics.
Reason = Literal["configured", "realtime", "backlog", "idle"]
#: What the parse query is to switch to: real time (or catching up first, if the backlog
#: says so when it starts), or micro-batches while idle.
Switch = Literal["realtime", "idle"]


def committed_offsets(checkpoint: CheckpointDir) -> Offsets | None:
    """Per topic and partition, where the last committed batch of a query ended."""
    offsets, commits = checkpoint / "offsets", checkpoint / "commits"
    if not offsets.is_dir() or not commits.is_dir():
        return None
    # One listing per directory, not a look-up per batch: on HDFS or S3 each is a request.
    committed = {p.name for p in commits.iterdir()}
    done = sorted(
        int(p.name) for p in offsets.iterdir() if p.name.isdigit() and p.name in committed
    )
    if not done:
        return None
    out: Offsets = {}
    # "v1", the batch metadata, then one line of {"topic": {"partition": offset}} per source.
    for line in (offsets / str(done[-1])).read_text().splitlines()[2:]:
        doc = json.loads(line)
        if isinstance(doc, dict):
            out.update({t: {p: int(o) for p, o in parts.items()} for t, parts in doc.items()})
    return out


def _last_commit_mtime(checkpoint: CheckpointDir) -> float:
    commits = checkpoint / "commits"
    times = [p.stat().st_mtime for p in commits.iterdir()] if commits.is_dir() else []
    return max(times, default=0.0)


def end_offsets(cfg: KafkaConfig, topics: list[str]) -> tuple[Offsets, Offsets]:
    """The first and the next offset of every partition of ``topics``."""
    from kafka import KafkaConsumer, TopicPartition

    from conf.kafka_client import kafka_settings
    from streaming.topics import connect

    consumer = connect(
        KafkaConsumer,
        kafka_settings(cfg).python,
        wait_s=0,  # one attempt: a query restart after a failure tries again
        client_id="flinkwatch-admin",
        enable_auto_commit=False,
    )
    try:
        parts = [
            TopicPartition(t, p) for t in topics for p in consumer.partitions_for_topic(t) or ()
        ]
        first, end = consumer.beginning_offsets(parts), consumer.end_offsets(parts)
    finally:
        consumer.close()

    def nested(d: dict[TopicPartition, int]) -> Offsets:
        out: Offsets = {}
        for tp, off in d.items():
            out.setdefault(tp.topic, {})[str(tp.partition)] = int(off)
        return out

    return nested(first), nested(end)


def backlog(resume: Offsets | None, first: Offsets, end: Offsets, earliest: bool) -> dict[str, int]:
    """Records per topic between where parsing resumes and the end of the topic."""
    out: dict[str, int] = {}
    for topic, parts in end.items():
        total = 0
        for p, stop in parts.items():
            start = (resume or {}).get(topic, {}).get(p)
            if start is None:
                start = first.get(topic, {}).get(p, 0) if earliest else stop
            total += max(stop - start, 0)
        out[topic] = total
    return out


@dataclass(frozen=True)
class ParsePlan:
    """How the parse query starts this time."""

    mode: Mode
    reason: Reason
    checkpoint: CheckpointDir
    #: Spark ``startingOffsets`` per topic (JSON), for a fresh checkpoint after a switch.
    starting: dict[str, str]
    #: ``maxOffsetsPerTrigger`` per topic (micro-batches only).
    max_offsets: dict[str, int]
    backlog: dict[str, int]

    @property
    def catching_up(self) -> bool:
        """True while micro-batches catch up a backlog before a configured real-time mode."""
        return self.reason == "backlog"

    @property
    def idle(self) -> bool:
        """True while micro-batches stand in for a configured real-time mode on idle topics."""
        return self.reason == "idle"


def plan(
    cfg: AppConfig, checkpoint_dir: CheckpointDir, *, realtime: bool, idle: bool = False
) -> ParsePlan:
    """Choose the mode, the checkpoint and where to start, from the backlog.

    ``realtime``: real time is configured; ``idle``: the raw topics were idle, so
    micro-batches unless a backlog came meanwhile (then the catch-up's, as after any start).
    """
    topics = [cfg.kafka.logs_topic, cfg.kafka.metrics_topic]
    dirs = {m: checkpoint_dir / f"parse-{m}" for m in MODES}
    newest = max(MODES, key=lambda m: _last_commit_mtime(dirs[m]))
    if _last_commit_mtime(dirs[newest]) == 0.0:
        resume = None
    else:
        resume = committed_offsets(dirs[newest])
    first, end = end_offsets(cfg.kafka, topics)
    behind = backlog(resume, first, end, cfg.kafka.starting_offsets == "earliest")
    total = sum(behind.values())
    reason: Reason = "realtime"
    if not realtime:
        reason = "configured"
    elif total > cfg.spark.realtime_max_lag:
        reason = "backlog"
    elif idle:
        reason = "idle"
    mode: Mode = "realtime" if reason == "realtime" else "microbatch"
    starting: dict[str, str] = {}
    if resume is not None and newest != mode:
        # The other mode ran last: start afresh where it ended.
        checkpoints.remove(dirs[mode])
        starting = {t: json.dumps({t: resume[t]}) for t in topics if t in resume}
    limit = cfg.kafka.max_offsets_per_trigger or 0
    max_offsets = {
        t: max(1000, round(limit * behind.get(t, 0) / total)) if total and limit else limit
        for t in topics
    }
    if reason == "backlog":
        log.info(
            "parse: %d records behind (%s): catching up in micro-batches, real-time parsing "
            "once fewer than %d",
            total,
            ", ".join(f"{t} {n}" for t, n in behind.items()),
            cfg.spark.realtime_max_lag,
        )
    return ParsePlan(mode, reason, dirs[mode], starting, max_offsets, behind)


def caught_up(cfg: AppConfig, checkpoint: CheckpointDir) -> bool:
    """True when a catching-up parse query is within ``spark.realtime_max_lag`` of the end."""
    resume = committed_offsets(checkpoint)
    if resume is None:
        return False
    first, end = end_offsets(cfg.kafka, [cfg.kafka.logs_topic, cfg.kafka.metrics_topic])
    return sum(backlog(resume, first, end, True).values()) <= cfg.spark.realtime_max_lag


@dataclass
class Quiet:
    """How long the running parse query has read no record, from its progress reports.

    Each report says when its batch started, how long it ran and how many rows it read
    (in real-time mode one report per ``spark.realtime_batch_s``): the quiet runs from the
    end of the last batch that read rows, or of the first (its start-up, a minute on a
    starved machine, is not quiet), to the end of the newest, on Spark's own stamps. A new
    query starts a new one.
    """

    #: When the quiet began (epoch ms), ``None`` before the first report.
    since_ms: int | None = None
    #: The end of the newest batch reported (epoch ms).
    newest_ms: int | None = None
    #: Whether any batch of this query read rows.
    read: bool = False

    def add(self, progress: Any) -> None:
        """Take one progress report (a ``StreamingQueryProgress``) into account."""
        start = int(datetime.fromisoformat(progress.timestamp).timestamp() * 1000)
        end = start + int((progress.durationMs or {}).get("triggerExecution", 0))
        if progress.numInputRows:
            self.read = True
            self.since_ms = end if self.since_ms is None else max(self.since_ms, end)
        elif self.since_ms is None:
            self.since_ms = end
        self.newest_ms = end if self.newest_ms is None else max(self.newest_ms, end)

    @property
    def quiet_s(self) -> float:
        """Seconds of the query's own batches without a record read."""
        if self.since_ms is None or self.newest_ms is None:
            return 0.0
        return max(self.newest_ms - self.since_ms, 0) / 1000


def decide(
    running: ParsePlan, quiet: Quiet, idle_after_s: float, caught_up: Callable[[], bool] | None
) -> Switch | None:
    """Which mode the parse query should be in now, when not the one it runs in.

    Behind (catching up), it stays in micro-batches until ``caught_up`` says the backlog is
    within ``spark.realtime_max_lag`` (``None``: not asked this time, it is a round trip to
    the brokers). In real time, it idles in micro-batches once its batches read nothing
    for ``idle_after_s`` (0: never). Idle, it goes back to real time as soon as a
    micro-batch read records (the start then checks the backlog again: records that came
    by the million are caught up first). Configured micro-batches never switch.
    """
    if running.reason == "idle":
        return "realtime" if quiet.read else None
    if running.reason == "backlog":
        return "realtime" if caught_up is not None and caught_up() else None
    if running.reason == "realtime" and idle_after_s and quiet.quiet_s >= idle_after_s:
        return "idle"
    return None
