"""Which partition of the event bus an entity's records go to, and when that may change.

The runner drops a bus record as a repeat when its source position is at or before the
last one applied from that source (:func:`streaming.arrivals.fresh`). That holds because an
entity's records reach the detect query in the order the parse query wrote them, which
Kafka keeps within one partition only. Left to Kafka's partitioner, an entity's partition
is a hash of its key modulo the topic's partition count, so partitions added to the bus
(``kafka-topics --alter --partitions``) would move most entities: their records still
unread in the old partition would reach the detectors after newer ones read from the new
partition, and be dropped as repeats.

So the parse query places every bus record itself (Spark's Kafka sink honours a
``partition`` column): ``hash(entity) mod n``, where ``n`` is recorded in
``<state_dir>/bus-partitions.json``, on the driver's disk, not in the checkpoints (which
may be on HDFS or S3), so that a checkpoint reset (whose new detect query reads again
what the bus holds) keeps it. ``n``
changes only when the queries start and the detect query has read every record the bus
holds: then no entity has a record left unread anywhere, and the first records placed by
the new count are read after all the old ones. When the topic's partition count is not
the recorded one (partitions were added; no count is recorded yet, after an upgrade from
a release that let Kafka place the records or with a new ``state_dir``), the queries start
without the parse query, which waits until the detect query has read the bus to its end
(nothing else writes to the bus meanwhile: ticks follow the parse query). An empty bus, as
flinkwatch creates it, has nothing to wait for.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from conf import KafkaConfig
from streaming.catchup import backlog, committed_offsets, end_offsets
from streaming.checkpoints import CheckpointDir
from streaming.topics import KafkaTopicError

log = logging.getLogger(__name__)

#: The file, in ``output.state_dir``, holding per bus topic the count records are placed by.
RECORD_NAME = "bus-partitions.json"


@dataclass(frozen=True)
class Placement:
    """How the parse query places records on the event bus from this start on.

    Attributes:
        topic: The event bus topic.
        partitions: Records go to ``hash(entity) mod partitions``; ``None`` while held.
        topic_partitions: Partitions the topic has.
        held: The parse query waits until the detect query has read the whole bus.
    """

    topic: str
    partitions: int | None
    topic_partitions: int
    held: bool = False


def recorded(path: Path, topic: str) -> int | None:
    """The partition count ``topic``'s records are placed by, if one is recorded."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        # Unreadable is as good as absent: the count is then decided afresh, safely.
        log.warning("bus: cannot read %s (%s); deciding the bus placement afresh", path, exc)
        return None
    value = doc.get(topic) if isinstance(doc, dict) else None
    return value if isinstance(value, int) and value > 0 else None


def record(path: Path, topic: str, partitions: int) -> None:
    """Record that ``topic``'s records are placed by ``partitions`` (atomically)."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        doc = {}
    if not isinstance(doc, dict):
        doc = {}
    doc[topic] = partitions
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def decide(topic: str, known: int | None, partitions: int, unread: int) -> Placement:
    """The placement for a start, from the recorded count and the bus as it is now.

    Args:
        topic: The event bus topic.
        known: The recorded count (:func:`recorded`), ``None`` if none is.
        partitions: Partitions the topic has now.
        unread: Records of the bus the detect query has not read (committed) yet.
    """
    if known == partitions:
        return Placement(topic, partitions, partitions)
    if unread == 0:
        if known is not None:
            log.warning(
                "bus: topic %s has %d partitions, its records were placed by %d; the detect "
                "query has read all of them, so records are placed by %d from now on",
                topic,
                partitions,
                known,
                partitions,
            )
        return Placement(topic, partitions, partitions)
    why = (
        f"its records were placed by {known} of them"
        if known is not None
        else "how its records were placed is not recorded (an upgrade, or a new state_dir)"
    )
    log.warning(
        "bus: topic %s has %d partitions and %s: the parse query waits until the detect "
        "query has read the %d records the bus holds, then places records by %d, so that no "
        "entity's records are read out of order (they would be dropped as repeats). Nothing "
        "to do; detection of new records is delayed meanwhile",
        topic,
        partitions,
        why,
        unread,
        partitions,
    )
    return Placement(topic, None, partitions, held=True)


def bus_backlog(cfg: KafkaConfig, detect_checkpoint: CheckpointDir) -> tuple[int, int]:
    """Partitions of the event bus, and its records the detect query has not committed.

    Raises:
        KafkaConnectError: the brokers cannot be reached.
        KafkaTopicError: the topic does not exist.
    """
    topic = cfg.events_topic or ""
    first, end = end_offsets(cfg, [topic])
    parts = end.get(topic, {})
    if not parts:
        msg = f"the event bus topic {topic} does not exist (flinkwatch run creates it)"
        raise KafkaTopicError(msg)
    behind = backlog(committed_offsets(detect_checkpoint), first, {topic: parts}, True)
    return len(parts), behind.get(topic, 0)
