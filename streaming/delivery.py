"""The detect and parse queries' ``foreachBatch`` handlers, on the driver.

* :class:`AlertDelivery`: records a micro-batch's transitions in the ledger (before Spark
  commits the batch), then delivers them to the alert file, best effort; signal, error,
  refusal and entity-count rows feed the Prometheus views, the counters and the entity
  cap.
* :class:`ParseBatch` (files bus) and :class:`DeadLetterBatch` (Kafka bus): the event
  bus files, the counts and the dead-letter files.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from conf import AppConfig
from conf.silences import Silence, silence_for
from detectors import Alert, AlertStatus
from detectors.correlation import Correlator
from detectors.tm_ids import spelling_rank
from sinks import (
    AlertLedger,
    AlertObserver,
    DeadLetterFileSink,
    DeliverySink,
    LedgerError,
    Transition,
)
from sinks.besteffort import BestEffort
from sinks.dispatch import Dispatcher
from sinks.prometheus import SignalBoard
from sinks.silence_store import SilenceStore
from streaming.bus import bus_records
from streaming.checkpoints import CheckpointDir
from streaming.rows import (
    DetectorFailure,
    EntityCount,
    Forward,
    Refused,
    Signal,
    SignalGone,
    read,
)
from streaming.runner import STATE
from streaming.schemas import DEAD_LETTER_FIELDS, DEAD_LETTER_SCHEMA

log = logging.getLogger(__name__)

#: Name of the parse query's observed counts (``StreamingQueryProgress.observedMetrics``).
PARSE_COUNTS = "flinkwatch_parse_counts"


def in_order(alerts: Sequence[Alert]) -> list[Alert]:
    """Alerts in event-time order (a firing before its escalation before its resolve)."""
    order = {AlertStatus.FIRING: 0, AlertStatus.ESCALATED: 1, AlertStatus.RESOLVED: 2}
    return sorted(alerts, key=lambda a: (a.event_time_ms, a.alert_id, order[a.status]))


@dataclass
class PipelineStats:
    """Counters the pipeline keeps on the driver (also for the CLI summary)."""

    kinds: Counter[str] = field(default_factory=Counter)
    dead_letters: Counter[str] = field(default_factory=Counter)
    alerts: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    #: Each alerted TaskManager entity's spelling for people (the summary): the best its
    #: alerts carried. Counted by key, one row per TaskManager; read by its id.
    names: dict[str, str] = field(default_factory=dict)
    #: Detector calls that raised, by (detector, outcome): ``skipped`` (the event or
    #: timer was skipped, state kept as before) or ``dropped`` (the entity was given up).
    detector_errors: Counter[tuple[str, str]] = field(default_factory=Counter)
    #: Entities not admitted, by detector, while the detect query held spark.max_entities.
    entities_refused: Counter[str] = field(default_factory=Counter)
    #: Entities dropped because their saved state could not be read (a damaged value).
    state_damaged: int = 0
    #: Keyed sources' lines written back onto the bus for their entity
    #: (:mod:`streaming.forwards`); a batch run again counts its forwards again.
    forwarded: int = 0
    #: Micro-batches the ledger could not record (each failed, for Spark to run again).
    ledger_errors: int = 0
    #: Query failures by cause: ``storage_full`` (no space left on a volume flinkwatch
    #: writes: the ledger, the checkpoints) or ``other``.
    query_failures: Counter[str] = field(default_factory=Counter)
    #: Entities each shard of the detect query holds, from the shard's latest turn
    #: (:data:`~streaming.entity.ENTITY_COUNT` rows), and the checkpoint they belong to.
    shard_entities: dict[str, int] = field(default_factory=dict)
    entities_of: str | None = None
    #: When each shard's first entity is due (bus frontier, ms; ``None``: none is), from
    #: the same rows; cleared at each start of the queries (:meth:`forget_due`).
    shard_due: dict[str, int | None] = field(default_factory=dict)
    # Last batch counted per query; kept here, not in the handlers, because the handlers
    # are recreated when the queries restart and Spark then replays the last batch.
    counted: dict[str, int] = field(default_factory=dict)
    #: Batches of the detect query delivered since the start, and the latest one's id:
    #: a stop waits for the batch in flight (:meth:`wait_delivered`).
    delivered: int = 0
    delivered_batch: int | None = None
    #: What became of the detect query's batch in flight at the last stop.
    stop_note: str = ""
    #: Records the parse query's ``foreachBatch`` counted (files bus: replay), events and
    #: dead letters, and the newest event time among them (epoch ms): a replay's progress.
    records_read: int = 0
    newest_event_ms: int | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _batch_done: threading.Condition = field(default_factory=threading.Condition, repr=False)

    def count_alert(self, alert: Alert) -> None:
        """One recorded transition, under its entity (and a TaskManager's spelling kept).

        An entity's header only ever learns a better spelling, so a later alert's is
        kept unless a reporter's (less punctuation) came after a log line's.
        """
        self.alerts[(alert.detector, alert.entity, alert.status.value)] += 1
        if alert.tm_id and alert.entity.startswith("tm:"):
            known = self.names.get(alert.entity)
            rank = spelling_rank(alert.tm_id, logged=False)
            if known is None or rank >= spelling_rank(known, logged=False):
                self.names[alert.entity] = alert.tm_id

    def count_delivered(self, batch_id: int) -> None:
        """The detect query delivered ``batch_id``: Spark commits it when the handler returns."""
        with self._batch_done:
            self.delivered += 1
            self.delivered_batch = batch_id
            self._batch_done.notify_all()

    def wait_delivered(self, seen: int, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for a batch delivered after the ``seen``-th."""
        with self._batch_done:
            return self._batch_done.wait_for(lambda: self.delivered > seen, timeout_s)

    def first_count(self, query: str, batch_id: int) -> bool:
        """True the first time a batch of a query is counted."""
        with self._lock:
            if batch_id <= self.counted.get(query, -1):
                return False
            self.counted[query] = batch_id
            return True

    def count_ledger_error(self) -> None:
        """One micro-batch the ledger could not record."""
        with self._lock:
            self.ledger_errors += 1

    def count_query_failure(self, cause: str) -> None:
        """One query failure (``storage_full`` or ``other``)."""
        with self._lock:
            self.query_failures[cause] += 1

    def count_entities(self, checkpoint: str, counts: Sequence[EntityCount]) -> None:
        """Take each shard's entity count from its latest row (rows in batch order).

        A shard reports at each of its turns, and the first tick after a start goes to
        every shard, so the sum is complete seconds after a start. Counts of another
        checkpoint (a new shard count) are dropped.
        """
        with self._lock:
            if checkpoint != self.entities_of:
                self.shard_entities.clear()
                self.shard_due.clear()
                self.entities_of = checkpoint
            for c in counts:
                self.shard_entities[c.shard] = c.entities
                self.shard_due[c.shard] = c.due_ms

    def due(self) -> dict[str, int | None]:
        """A copy of :attr:`shard_due` (read from the driver's loop)."""
        with self._lock:
            return dict(self.shard_due)

    def forget_due(self) -> None:
        """Forget when the shards are due: the next tick goes to every shard."""
        with self._lock:
            self.shard_due.clear()

    def entities(self) -> int | None:
        """Entities the detect query holds (``None`` before any shard has reported)."""
        with self._lock:
            return sum(self.shard_entities.values()) if self.shard_entities else None

    def count_observed(self, query: str, batch_id: int, observed: dict[str, Any]) -> None:
        """Add the parse query's observed counts of one batch (once per batch id)."""
        row = observed.get(PARSE_COUNTS)
        if row is None or not self.first_count(query, batch_id):
            return
        values = row.asDict() if hasattr(row, "asDict") else dict(row)
        with self._lock:
            for name, n in values.items():
                if not n:
                    continue
                if name.startswith("k_"):
                    self.kinds[name[2:]] += int(n)
                elif name.startswith("e_"):
                    self.dead_letters[name[2:]] += int(n)


@dataclass
class Outputs:
    """Where the detect query's transitions go (all on the driver).

    Attributes:
        ledger: Records each transition once, in step with the batch commit.
        sinks: Delivery sinks drained inside the batch (the alert file), best effort
            (:class:`~sinks.besteffort.BestEffort`): a failure is counted, logged and
            tried again at a later batch, and never fails the batch.
        observers: See each new transition once (Prometheus view, console).
        dispatcher: Drains slow sinks (Slack) in its own thread, outside the batch.
        signals: The detectors' per-entity signal gauges.
        correlator: Groups related transitions into incidents as the ledger records
            them; rebuilt from the ledger after a restart (``None``: no incidents). A
            reload gives it its new settings (:meth:`streaming.runtime.Runtime.swap`).
        in_batch: Delivers ``sinks`` and keeps their failures (kept here, not in the
            batch handler, which is recreated each time the queries restart).
        silences: The command line's silences (``flinkwatch silence add``), read at
            each batch beside the config's (``None``: the config's only).
    """

    ledger: AlertLedger
    sinks: Sequence[DeliverySink] = ()
    observers: Sequence[AlertObserver] = ()
    dispatcher: Dispatcher | None = None
    signals: SignalBoard | None = None
    correlator: Correlator | None = None
    in_batch: BestEffort = field(default_factory=BestEffort)
    silences: SilenceStore | None = None

    def delivery_sinks(self) -> list[DeliverySink]:
        """Every sink a transition is queued for."""
        return [*self.sinks, *(self.dispatcher.sinks if self.dispatcher else [])]


#: Rows of the detect query that are not alert transitions.


class AlertDelivery:
    """``foreachBatch`` of the detect query: record in the ledger, then deliver.

    Args:
        outputs: Where transitions go.
        stats: The pipeline's counters.
        cfg: The config the query was started with.
        checkpoint: The detect query's checkpoint directory. Its ``metadata`` names the
            query (Spark writes it at the first start; a new or reset checkpoint gets a
            new id), so the ledger can tell a batch run again after a restart from the
            same batch id of another checkpoint (see :meth:`AlertLedger.record`).
            ``None``: batches are not compared.
        forward: Writes a batch's forwards onto the bus (:mod:`streaming.forwards`), before
            anything of the batch is recorded; ``None``: they are dropped (a replay applies
            them itself).
    """

    def __init__(
        self,
        outputs: Outputs,
        stats: PipelineStats,
        cfg: AppConfig,
        checkpoint: CheckpointDir | None = None,
        forward: Callable[[Sequence[Forward]], None] | None = None,
    ) -> None:
        self.out = outputs
        self.forward = forward
        self.stats = stats
        self.cfg = cfg
        self.checkpoint = checkpoint
        self._query: str | None = None
        self._asked = checkpoint is None
        self._stored: tuple[Silence, ...] = ()
        self._stored_at = 0

    def _query_id(self) -> str | None:
        """The id Spark gave the query in its checkpoint (read at the first batch)."""
        if self._asked or self.checkpoint is None:
            return self._query
        self._asked = True
        path = self.checkpoint / "metadata"
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
            self._query = str(meta["id"])
        except (OSError, ValueError, TypeError, KeyError) as exc:
            log.warning(
                "detect: no query id in %s (%s): a batch run again after a restart is not "
                "compared with its first run",
                path,
                exc,
            )
        return self._query

    def _silence(self, alert: Alert) -> str | None:
        # The config's at the alert's event time; the command line's now (sinks.silence_store).
        return silence_for(self.cfg.silences, alert, self.cfg.cluster) or silence_for(
            self._stored, alert, self.cfg.cluster, self._stored_at
        )

    def _read_silences(self) -> None:
        """The command line's silences in force now; the last ones read if the store fails."""
        if self.out.silences is None:
            return
        self._stored_at = int(time.time() * 1000)
        try:
            self._stored = self.out.silences.in_force(self._stored_at)
        except sqlite3.Error as exc:  # a locked or damaged store must not fail the batch
            log.warning(
                "silences: cannot read %s (%s); the last ones read apply",
                self.out.silences.path,
                exc,
            )

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        """Record and deliver one micro-batch of alert transitions (see :meth:`record`)."""
        self.record(batch.collect(), batch_id)

    def record(self, rows: Iterable[Mapping[str, Any]], batch_id: int) -> None:
        """Record and deliver one batch of the detect query's rows.

        The ledger is the record: if it cannot record the batch, the batch fails, so Spark
        does not commit it and runs it again (from the same offsets and state) when the
        queries restart. The alert file is a copy: a failure to write it is counted and
        tried again later, and never fails the batch.

        Raises:
            LedgerError: the ledger could not record the batch (nothing of it was).
        """
        items = [read(r) for r in rows]
        forwards = [x for x in items if isinstance(x, Forward)]
        if forwards and self.forward is not None:
            # First, and failing the batch if it fails: the batch runs again and writes
            # them again (the runner drops the repeats), none is lost.
            self.forward(forwards)
            self.stats.forwarded += len(forwards)
        alerts = [x for x in items if isinstance(x, Alert)]
        refused = [x for x in items if isinstance(x, Refused)]
        if refused and self.stats.first_count("entities_refused", batch_id):
            self.stats.entities_refused.update(x.about.detector for x in refused)
        counts = [x for x in items if isinstance(x, EntityCount)]
        if counts:
            self.stats.count_entities(self.checkpoint.name if self.checkpoint else "", counts)
        self._signals([x for x in items if isinstance(x, Signal | SignalGone)])
        failures = [x for x in items if isinstance(x, DetectorFailure)]
        self._detector_errors([f for f in failures if f.about.detector != STATE], batch_id)
        # Dropped because a saved state could not be read: the entity's (``state``) or
        # one detector's (``load``). What the runner could not read to close is closed
        # from the ledger.
        unread = [
            f for f in failures if f.dropped and (f.about.detector == STATE or f.where == "load")
        ]
        if unread:
            alerts += self._close_unread(unread, alerts)
        damaged = [f for f in failures if f.about.detector == STATE]
        if damaged:
            self._state_damaged(damaged, alerts, batch_id)
        correlator = self.out.correlator
        withheld, late = self._outcome("stale"), self._outcome("paged_late")
        self._read_silences()
        try:
            new = self.out.ledger.record(
                batch_id,
                in_order(alerts),
                self.out.delivery_sinks(),
                self._silence,
                correlator.observe if correlator is not None else None,
                self._max_age_ms(),
                # How far detection has got: signal rows carry their entity's newest event
                # time, so a batch without transitions still says whether flinkwatch is behind.
                max(
                    (x.event_time_ms if isinstance(x, Alert) else x.about.event_ms for x in items),
                    default=None,
                ),
                self._query_id(),
            )
        except LedgerError:
            self.stats.count_ledger_error()
            self._forget_unrecorded()
            raise
        self._say_stale(new, self._outcome("stale") - withheld)
        for t in new:
            self.stats.count_alert(t.alert)
        for obs in self.out.observers:
            try:
                obs.observe(new)
            except Exception:
                log.exception("observer=%s failed on batch %d", obs.name, batch_id)
        # Slack first: it is drained by its own thread and must not wait for the file.
        if self.out.dispatcher is not None and (new or self._outcome("paged_late") > late):
            self.out.dispatcher.wake()
        self.out.in_batch.deliver(self.out.ledger, self.out.sinks)
        self.stats.count_delivered(batch_id)

    def _forget_unrecorded(self) -> None:
        # The correlator took the batch's transitions in as the ledger recorded them, and
        # the ledger rolled them back: rebuilt from what the ledger holds, the run of the
        # batch that Spark makes again finds them new, as they are.
        old = self.out.correlator
        if old is None:
            return
        fresh = Correlator(old.params)
        try:
            fresh.restore(self.out.ledger.history())
        except Exception:  # noqa: BLE001 - the ledger's own error is the one to report
            log.exception("alert ledger: cannot rebuild the incidents from it")
            return
        self.out.correlator = fresh

    def _max_age_ms(self) -> int | None:
        age = self.cfg.output.page_max_age_s
        return None if age is None else int(age * 1000)

    def _outcome(self, wanted: str) -> int:
        """Deliveries with this outcome so far, over all sinks (``stale``: withheld as old)."""
        outcomes = self.out.ledger.outcomes
        return sum(n for (_sink, outcome), n in outcomes.items() if outcome == wanted)

    def _say_stale(self, new: Sequence[Transition], withheld: int) -> None:
        # Old transitions are recorded but not paged (a checkpoint reset reads history
        # again): one line per batch says so, so nobody wonders where the pages went.
        if not withheld:
            return
        oldest = min(t.alert.event_time_ms for t in new if not t.silenced_by)
        log.warning(
            "%d transition(s) recorded but not paged: older than output.page_max_age_s=%gs "
            "or of an incident that was (oldest from %s UTC); "
            "`flinkwatch deliveries list --state stale`",
            withheld,
            self.cfg.output.page_max_age_s or 0,
            time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(oldest / 1000)),
        )

    def _detector_errors(self, failures: Sequence[DetectorFailure], batch_id: int) -> None:
        # Raised on an executor, told here: the driver's log is the one people read, and
        # the counter is what an alert rule can watch. Counted once per batch id, and
        # logged once per detector and batch: a detector that raises on every event must
        # not flood the log.
        if not failures or not self.stats.first_count("detector_errors", batch_id):
            return
        by_detector: dict[str, list[DetectorFailure]] = {}
        for f in failures:
            outcome = "dropped" if f.dropped else "skipped"
            self.stats.detector_errors[(f.about.detector, outcome)] += 1
            by_detector.setdefault(f.about.detector, []).append(f)
        for detector, seen in by_detector.items():
            first = seen[0]
            dropped = sum(1 for f in seen if f.dropped)
            log.error(
                "detector=%s raised %d time(s) in batch %d (%d entities, %d dropped with their "
                "incidents resolved); first: entity=%s %s %s (%d in a row; %s)",
                detector,
                len(seen),
                batch_id,
                len({f.about.entity for f in seen}),
                dropped,
                first.about.entity,
                first.where,
                first.error,
                first.failures,
                "entity dropped" if first.dropped else "skipped, state kept as before",
            )

    def _close_unread(
        self, dropped: Sequence[DetectorFailure], alerts: Sequence[Alert]
    ) -> list[Alert]:
        """Resolves for the open incidents of states dropped unread, saying why.

        The runner closes what it can read; an entity's bytes may be unreadable
        altogether, so every incident the ledger holds open for it (for that detector,
        when only one detector's state was unreadable) is resolved here, unless the batch
        resolves it already.
        """
        whole = {f.about.entity for f in dropped if f.about.detector == STATE}
        one = {(f.about.entity, f.about.detector) for f in dropped if f.about.detector != STATE}
        resolved = {a.alert_id for a in alerts if a.status is AlertStatus.RESOLVED}
        return [
            t.alert.model_copy(
                update={
                    "status": AlertStatus.RESOLVED,
                    "summary": f"{t.alert.detector} stopped watching {t.alert.entity} (its "
                    "saved state was damaged and dropped); closing its open incident",
                    "evidence": {"reason": "its saved state was damaged"},
                }
            )
            for t in self.out.ledger.active()
            if (t.alert.entity in whole or (t.alert.entity, t.alert.detector) in one)
            and t.alert.alert_id not in resolved
        ]

    def _state_damaged(
        self, damaged: Sequence[DetectorFailure], alerts: Sequence[Alert], batch_id: int
    ) -> None:
        """Entities dropped with a damaged saved value: counted once per batch, logged."""
        if not self.stats.first_count("state_damaged", batch_id):
            return
        self.stats.state_damaged += len({f.about.entity for f in damaged if f.dropped})
        for f in damaged:
            n = sum(
                1
                for a in alerts
                if a.entity == f.about.entity and "saved state was damaged" in a.summary
            )
            log.error(
                "detect: the saved state of %s cannot be read (%s, in %s): %s "
                "(flinkwatch_state_damaged_total)",
                f.about.entity,
                f.error,
                f.where,
                f"entity dropped, {n} open incident(s) resolved; it starts again from its "
                "next records"
                if f.dropped
                else "what could be read of the shard is kept",
            )

    def _signals(self, notes: Sequence[Signal | SignalGone]) -> None:
        board = self.out.signals
        if board is None:
            return
        for n in notes:
            a = n.about
            if isinstance(n, SignalGone):
                board.drop(a.detector, a.entity)
            else:
                board.update(a.detector, a.entity, a.labels(), n.values)


class ParseBatch:
    """``foreachBatch`` of the parse query on the files bus: bus files, counts, dead letters."""

    def __init__(
        self, cfg: AppConfig, hop_dir: Path, dead_letters: DeadLetterFileSink, stats: PipelineStats
    ) -> None:
        self.cfg = cfg
        self.hop_dir = hop_dir
        self.dead_letters = dead_letters
        self.stats = stats

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        """Process one micro-batch of parsed records."""
        batch = batch.persist()
        try:
            # The newest event time rides on the count the batch needs anyway: a replay's
            # progress line says how far it has read at no extra pass over the batch.
            counts = (
                batch.select(
                    F.coalesce(F.col("error"), F.lit("")).alias("e"),
                    "kind",
                    F.unix_millis("event_time").alias("ms"),
                )
                .groupBy("e", "kind")
                .agg(F.count(F.lit(1)).alias("count"), F.max("ms").alias("newest"))
                .collect()
            )
            self._hop(bus_records(batch, self.cfg, dead_letters=False), batch_id)
            dead = Counter({r["e"]: r["count"] for r in counts if r["e"]})
            if dead:
                rows = (
                    batch.where(F.col("error").isNotNull())
                    .select(*DEAD_LETTER_FIELDS)
                    .toLocalIterator()
                )
                write_dead_letters(self.dead_letters, batch_id, rows)
        finally:
            batch.unpersist()
        # Counted last, once per batch id: a batch that fails above, or that Spark replays
        # after a crash, must not count twice.
        if not self.stats.first_count("parse", batch_id):
            return
        self.stats.dead_letters.update(dead)
        for r in counts:
            if not r["e"]:
                self.stats.kinds[r["kind"]] += r["count"]
        self.stats.records_read += sum(r["count"] for r in counts)
        newest = [r["newest"] for r in counts if r["newest"] is not None]
        if newest:
            self.stats.newest_event_ms = max(self.stats.newest_event_ms or 0, *newest)

    def _hop(self, records: DataFrame, batch_id: int) -> None:
        # Written next to the hop directory, then moved in under a name fixed by the batch
        # id: the detect query never sees a half-written file, and a replayed batch
        # replaces its own file instead of adding a second copy.
        tmp = self.hop_dir.parent / f".hop-tmp-{batch_id}"
        records.select("key", "value").coalesce(1).write.mode("overwrite").parquet(str(tmp))
        self.hop_dir.mkdir(parents=True, exist_ok=True)
        for i, part in enumerate(sorted(tmp.glob("part-*.parquet"))):
            os.replace(part, self.hop_dir / f"batch-{batch_id:010d}-{i}.parquet")
        shutil.rmtree(tmp, ignore_errors=True)


def write_dead_letters(sink: DeadLetterFileSink, batch_id: int, rows: Iterable[Any]) -> None:
    """Keep one batch's dead letters (Spark rows, streamed) and say so in one line."""
    path, reasons, dropped = sink.write(batch_id, (r.asDict() for r in rows))
    if path is None:
        return
    log.warning(
        "dead letters: %d in batch %d (%s) -> %s%s",
        sum(reasons.values()),
        batch_id,
        ", ".join(f"{k}={v}" for k, v in sorted(reasons.items())),
        path,
        f"; {dropped} more not kept (output.deadletters_max_per_batch)" if dropped else "",
    )


class DeadLetterBatch:
    """``foreachBatch`` of the dead-letter query: the topic's records → dead-letter files."""

    def __init__(self, sink: DeadLetterFileSink) -> None:
        self.sink = sink

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        """Write one batch of dead letters (a replayed batch rewrites its own file)."""
        # Streamed, one partition at a time: a batch of oversized garbage is never whole
        # in the driver.
        rows = (
            batch.select(
                F.from_json(F.col("value").cast(StringType()), DEAD_LETTER_SCHEMA).alias("d")
            )
            .select("d.*")
            .toLocalIterator()
        )
        write_dead_letters(self.sink, batch_id, rows)
