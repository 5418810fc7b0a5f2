"""Supervision of the running queries: restarts, reloads, switches, a full volume, a stop.

:func:`run_forever` starts the queries of a :class:`~streaming.app.Pipeline` (through
:class:`Supervised`, what it needs of one), watches them, and restarts them on their
checkpoints when one fails, when the config changes, or when they must run in another
shape (the bus drained, the entity cap switched); the parse query alone when it is to
parse in another mode (caught up, idle raw topics, records again). How long to wait
after a failure, and when to give up, is a pure policy (:func:`streaming.restarts.after_failure`).
Stopping waits for the detect query's batch in flight, and keeps Spark's own noise about
cancelled tasks out of the log.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from pyspark.sql.streaming import StreamingQuery

from conf import AppConfig
from conf.reload import ConfigWatcher
from conf.running import RunningConfig
from streaming.catchup import Switch
from streaming.delivery import PipelineStats
from streaming.listener import DETECT_QUERY, PARSE_QUERY
from streaming.restarts import Restart, Streak, after_failure

log = logging.getLogger(__name__)


class Supervised(Protocol):
    """What :func:`run_forever` needs of the queries it runs (:class:`~streaming.app.Pipeline`).

    Attributes:
        config: The holder of the config in force; a reload swaps it before the queries
            start again.
        stats: What the queries count (``None``: nothing; no batch is waited for at a stop).
    """

    config: RunningConfig

    @property
    def cfg(self) -> AppConfig:
        """The config in force (``config``'s)."""

    @property
    def stats(self) -> PipelineStats | None:
        """What the queries count."""

    @property
    def parse_held(self) -> bool:
        """True while the parse query waits for the detect query to read the whole bus."""

    def start(self) -> Sequence[StreamingQuery]:
        """Start every query."""

    def start_parse(self, idle: bool = False) -> StreamingQuery:
        """Start the parse query alone (``idle``: in micro-batches for idle raw topics)."""

    def running(self) -> list[StreamingQuery]:
        """The queries running now (some may have started before a start failed)."""

    def count_progress(self, queries: Sequence[StreamingQuery]) -> None:
        """Count what the queries observed since last asked."""

    def tick(self, queries: Sequence[StreamingQuery]) -> None:
        """Give the ticker the parse query's progress."""

    def bus_drained(self) -> bool:
        """True when the detect query has committed every record the bus holds."""

    def parse_switch(self, ask_brokers: bool) -> Switch | None:
        """The mode the parse query is to switch to now, if another.

        ``ask_brokers``: whether a catching-up query may ask how far behind it is.
        """

    def admission(self) -> bool:
        """Whether the entity cap switched (the queries restart to apply it)."""

    def give_back_memory(self) -> None:
        """Between two parse queries of a switch: return the heap the last one grew."""


def run_forever(
    pipeline: Supervised,
    *,
    should_stop: Callable[[], bool] = lambda: False,
    watcher: ConfigWatcher | None = None,
    reload_requested: threading.Event | None = None,
    on_reload: Callable[[AppConfig], None] | None = None,
) -> int:
    """Run the queries until stopped; restart them on the same checkpoints after a failure.

    A valid change of the config file (or SIGHUP, via ``reload_requested``) restarts both
    queries on their checkpoints with the new config: detector state is kept, and a
    micro-batch cut short is replayed, which the sinks dedupe; an incident its first run
    opened and the replay (with the new settings) does not is closed by the ledger. The
    new config is put in force once the queries have stopped, before they start again, by
    ``on_reload`` (:meth:`streaming.runtime.Runtime.swap`: the one holder the pipeline and
    the sinks read, :attr:`Supervised.config`); without it, by swapping that holder alone.

    A failure because a volume is full (the ledger's, the checkpoints') is waited out: it
    is not counted against ``spark.max_restarts``, and the queries are started again after
    a back-off doubling up to a minute, until there is space. Spark has not committed the
    failed batch, so nothing is skipped while the event bus still holds its records.

    Returns:
        0 when stopped on request, 1 after ``max_restarts`` failures in a row.
    """
    swap = on_reload if on_reload is not None else pipeline.config.swap
    streak = Streak()
    while True:
        if should_stop():  # asked while Spark started, or during a back-off
            return 0
        try:
            queries = list(pipeline.start())
        except Exception as exc:
            # A query that cannot start (bad checkpoint, unreachable storage) must not leave
            # the other one running unsupervised: stop what started and retry as a failure.
            _stop_quietly(pipeline.running())
            why = storage_full(exc)
            _count_failure(pipeline, why)
            restart = _after_failure(pipeline, streak, why, None)
            streak = restart.streak
            if why is not None:
                _say_full(pipeline, "starting the queries", why, restart.wait_s)
                if _sleep_unless(should_stop, restart.wait_s):
                    return 0
                continue
            log.exception("starting the queries failed")
            if restart.give_up:
                return 1
            if _sleep_unless(should_stop, restart.wait_s):
                return 0
            continue
        log.info(
            "queries started: %s (config hash %s)",
            ", ".join(q.name or "?" for q in queries),
            watcher.stats.active_hash if watcher else "-",
        )
        started = time.monotonic()
        failed, new_cfg, switch = _watch(pipeline, queries, should_stop, watcher, reload_requested)
        stats = pipeline.stats
        note = _stop_quietly(queries, stats, pipeline.cfg.spark.stop_grace_s)
        if switch:
            continue
        if new_cfg is not None:
            log.info("config reload: restarting the queries on their checkpoints")
            swap(new_cfg)
            continue
        if failed is None:
            if stats is not None:
                stats.stop_note = note
            return 0
        exc = failed.exception()
        why = storage_full(exc)
        _count_failure(pipeline, why)
        restart = _after_failure(pipeline, streak, why, time.monotonic() - started)
        streak = restart.streak
        if why is not None:
            _say_full(pipeline, f"query {failed.name}", why, restart.wait_s)
            if _sleep_unless(should_stop, restart.wait_s):
                return 0
            continue
        failures = streak.failures
        spark_cfg = pipeline.cfg.spark
        if restart.give_up:
            log.error(
                "query %s failed %d times in a row; giving up: %s", failed.name, failures, exc
            )
            return 1
        log.error(
            "query %s failed (%s); restarting both queries from their checkpoints in %.0f s "
            "(attempt %d of %d)",
            failed.name,
            str(exc).splitlines()[0] if exc else "stopped",
            restart.wait_s,
            failures,
            spark_cfg.max_restarts,
        )
        if _sleep_unless(should_stop, restart.wait_s):
            return 0


def _after_failure(
    pipeline: Supervised, streak: Streak, full: str | None, ran_s: float | None
) -> Restart:
    spark = pipeline.cfg.spark
    return after_failure(
        streak,
        full=full is not None,
        ran_s=ran_s,
        max_restarts=spark.max_restarts,
        backoff_s=spark.restart_backoff_s,
    )


def _watch(
    pipeline: Supervised,
    queries: list[StreamingQuery],
    should_stop: Callable[[], bool],
    watcher: ConfigWatcher | None,
    reload_requested: threading.Event | None,
) -> tuple[StreamingQuery | None, AppConfig | None, bool]:
    """Watch the running queries until one fails, the config changes or they must switch.

    Returns:
        The failed query, the new config, and whether the queries are to be restarted in
        another shape (the bus drained, the entity cap switched, a parse query that could
        not start in its new mode); all empty when asked to stop. A parse query switching
        modes is restarted here, alone, in ``queries``.
    """
    next_poll = time.monotonic() + pipeline.cfg.reload_interval_s
    next_catchup = time.monotonic() + _CATCHUP_CHECK_S
    next_drain = time.monotonic() + _DRAIN_CHECK_S
    while not should_stop():
        pipeline.count_progress(queries)
        pipeline.tick(queries)
        failed = next((q for q in queries if not q.isActive), None)
        if failed is not None:
            return failed, None, False
        if pipeline.parse_held and time.monotonic() >= next_drain:
            next_drain = time.monotonic() + _DRAIN_CHECK_S
            if _drained(pipeline):
                log.info("bus: the detect query has read the bus; starting the parse query")
                return None, None, True
        ask = time.monotonic() >= next_catchup
        if ask:
            next_catchup = time.monotonic() + _CATCHUP_CHECK_S
        switch = _parse_switch(pipeline, ask)
        if switch is not None and not _restart_parse(pipeline, queries, switch):
            return None, None, True
        if ask and pipeline.admission():
            return None, None, True
        forced = reload_requested is not None and reload_requested.is_set()
        if watcher is not None and (forced or time.monotonic() >= next_poll):
            if reload_requested is not None:
                reload_requested.clear()
            new_cfg = watcher.poll(force=forced)
            if new_cfg is not None:
                return None, new_cfg, False
            next_poll = time.monotonic() + pipeline.cfg.reload_interval_s
        else:
            time.sleep(0.25)
    return None, None, False


#: What an error says when a volume is full: ENOSPC and EDQUOT as the JVM and the OS word
#: them, and SQLite's SQLITE_FULL (the ledger).
_FULL_WORDS = ("no space left on device", "disk quota exceeded", "database or disk is full")


def storage_full(exc: BaseException | None) -> str | None:
    """The line of a query failure that says a volume is full, or ``None``.

    A failure in ``foreachBatch`` reaches the driver as Spark's wrapper around the Python
    traceback, so the words are looked for in every line; the last such line is returned:
    a chained Python traceback ends with the error raised last, which says the most
    (the ledger's, naming its file, after SQLite's own).
    """
    if exc is None:
        return None
    found = [line for line in str(exc).splitlines() if any(w in line.lower() for w in _FULL_WORDS)]
    return found[-1].strip()[:500] if found else None


def _count_failure(pipeline: Supervised, why: str | None) -> None:
    if pipeline.stats is not None:
        pipeline.stats.count_query_failure("other" if why is None else "storage_full")


def _say_full(pipeline: Supervised, what: str, why: str, wait: float) -> None:
    log.error(
        "%s failed: a volume is full (%s). Detection waits; Spark did not commit the batch "
        "and runs it again once there is space, so nothing is lost while the event bus "
        "holds its records (24 h). Free space under output.state_dir=%s; next try in %.0f s "
        "(not counted against spark.max_restarts)",
        what,
        why,
        pipeline.cfg.output.state_dir,
        wait,
    )


#: How often a catching-up parse query asks the brokers whether it has caught up, and the
#: entity cap is looked at (seconds).
_CATCHUP_CHECK_S = 10.0
#: How often a held parse query checks whether the detect query has read the bus
#: (seconds): detection of new records waits for it.
_DRAIN_CHECK_S = 1.0


def _parse_switch(pipeline: Supervised, ask_brokers: bool) -> Switch | None:
    try:
        return pipeline.parse_switch(ask_brokers)
    except Exception as exc:  # Kafka unreachable for a moment: ask again later
        log.warning("parse: cannot tell whether the catch-up is done: %s", exc)
        return None


def _restart_parse(pipeline: Supervised, queries: list[StreamingQuery], switch: Switch) -> bool:
    """Restart the parse query alone in its new mode, in ``queries``; False if it cannot start.

    The detect and dead-letter queries read the bus and go on: a switch costs them
    nothing. The new query starts where the old one's last committed batch ended
    (:mod:`streaming.catchup`).
    """
    old = next((q for q in queries if q.name == PARSE_QUERY), None)
    if old is not None:
        _stop_quietly([old])
        queries.remove(old)
    # A catch-up's big micro-batches (or the busy hours before an idle spell) grew the
    # heap: while no parse query runs, give it back.
    pipeline.give_back_memory()
    try:
        queries.insert(0, pipeline.start_parse(idle=switch == "idle"))
    except Exception:
        log.exception("parse: starting it in its new mode failed; restarting the queries")
        return False
    return True


def _drained(pipeline: Supervised) -> bool:
    try:
        return pipeline.bus_drained()
    except Exception as exc:  # Kafka unreachable for a moment: ask again later
        log.warning("bus: cannot tell whether the detect query has read the bus: %s", exc)
        return False


def _sleep_unless(should_stop: Callable[[], bool], seconds: float) -> bool:
    """Sleep up to ``seconds``; True as soon as a stop is requested."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if should_stop():
            return True
        time.sleep(min(0.2, max(deadline - time.monotonic(), 0)))
    return should_stop()


#: JVM loggers that report a stopped query's interrupted tasks and threads as failures (the
#: real-time parse query's tasks are always running, so every stop interrupts them), and the
#: transformWithState state server, which logs every call a Python worker of an
#: interrupted detect task still makes, on the state store Spark aborted, as an ERROR
#: with its stack trace (STATE_STORE_OPERATION_OUT_OF_ORDER).
_STOP_NOISE = (
    "org.apache.spark.sql.execution.datasources.v2.WriteToDataSourceV2Exec",
    "org.apache.spark.sql.execution.datasources.v2.DataWritingSparkTask",
    "org.apache.spark.scheduler.TaskSetManager",
    "org.apache.spark.executor.Executor",
    "org.apache.spark.util.Utils",
    # Interrupted while it forked chmod for a checkpoint file (no native Hadoop library).
    "org.apache.hadoop.util.Shell",
    "org.apache.spark.sql.execution.python.streaming.TransformWithStateInPySparkStateServer",
)
#: Longest wait, after the queries stopped, for their interrupted tasks to end.
_TASKS_END_S = 10.0


def _stop_quietly(
    queries: Sequence[StreamingQuery], stats: PipelineStats | None = None, grace_s: float = 0.0
) -> str:
    """Stop ``queries`` in order; the detect query between two micro-batches if it can.

    A detect batch cut short is run again at the next start (Spark did not commit it;
    the sinks dedupe what it had recorded), but its interrupted tasks leave Python workers
    calling a state store Spark aborted. So when ``stats`` counts the detect query's
    deliveries, it is stopped at once if no batch runs, or as soon as the one in flight
    has been delivered, waiting up to ``grace_s``; after that the batch is abandoned.

    Returns:
        What became of the detect query's batch in flight ("" without a detect query).
    """
    # Stopping interrupts the running micro-batch; the callback's py4j thread then logs
    # the InterruptedException as an error, which on a requested stop is not one.
    py4j_log = logging.getLogger("py4j.clientserver")
    level = py4j_log.level
    py4j_log.setLevel(logging.CRITICAL)
    restore = _jvm_log_levels(_STOP_NOISE, "OFF") if queries else None
    note = ""
    try:
        for q in queries:
            if not q.isActive:
                continue
            if q.name == DETECT_QUERY and stats is not None:
                note = _finish_batch(q, stats, grace_s)
            q.stop()
        if restore:
            _settle()
    finally:
        py4j_log.setLevel(level)
        if restore:
            restore()
    return note


def _finish_batch(query: StreamingQuery, stats: PipelineStats, grace_s: float) -> str:
    """Wait until ``query`` runs no micro-batch (up to ``grace_s``); say how it went."""
    seen = stats.delivered  # before asking: a batch that ends meanwhile still counts
    if not _in_batch(query):
        return "no micro-batch in flight"
    deadline = time.monotonic() + grace_s

    def left() -> float:
        return max(deadline - time.monotonic(), 0.0)

    abandoned = (
        f"micro-batch in flight abandoned at spark.stop_grace_s={grace_s:g}, "
        "the next start runs it again"
    )
    # Woken by the delivery itself: with batches back to back (trigger_interval_s 0, a
    # backlog) the next one starts at once, which a poll of the status would not catch.
    while not stats.wait_delivered(seen, min(0.1, left())):
        if not _in_batch(query):  # a trigger that found no data, or a failure
            return "no micro-batch in flight"
        if not left():
            return abandoned
    batch = stats.delivered_batch
    # Spark commits the batch after the handler returned, then reports its progress;
    # stopped before, the next start would run the batch again (its transitions are
    # recorded, so nothing is sent twice, but the work is done twice).
    if _poll_until(lambda: _committed(query, batch), left(), every_s=0.01):
        return f"micro-batch {batch} finished first"
    return f"micro-batch {batch} delivered but not committed, the next start runs it again"


def _in_batch(query: StreamingQuery) -> bool:
    return bool(query.isActive and query.status.get("isTriggerActive"))


def _committed(query: StreamingQuery, batch_id: int | None) -> bool:
    if not query.isActive or batch_id is None:
        return True
    last = query.lastProgress
    return last is not None and last.batchId >= batch_id


def _settle() -> None:
    """Wait until Spark has taken in the stopped queries' last jobs and their tasks ended.

    ``stop()`` returns once a query's thread has ended, but the scheduler handles the job
    that thread submitted last, and then its cancellation, later, in order; and a task
    reports its interruption only once it has noticed it. Both used to come after the
    stop's loggers spoke again: the real-time parse query, stopped as it started,
    launched its tasks only then ("Aborting task"), or they reported while Spark stopped
    ("Exception in statusUpdate"). A job submitted now is handled after those events:
    once it has run, no task of the stopped queries is left to launch, and the wait for
    the launched ones to end (the scheduler's own count, not the status store's, which
    lags) covers the rest.
    """
    from pyspark import SparkContext

    sc = SparkContext._active_spark_context  # noqa: SLF001 - the scheduler's view is the JVM's
    jsc, jvm = sc._jsc if sc else None, sc._jvm if sc else None  # noqa: SLF001
    if jsc is None or jvm is None:
        return
    one = jvm.java.util.ArrayList()
    one.add(0)
    job = jsc.parallelize(one, 1).countAsync()  # a JVM job: no query to plan, no Python
    try:
        job.get(int(_TASKS_END_S), jvm.java.util.concurrent.TimeUnit.SECONDS)
    except Exception:  # noqa: BLE001 - no task slot in time (executors lost): do not hang
        job.cancel(True)
        return
    launched = jsc.sc().taskScheduler().taskIdToTaskSetManager()
    _poll_until(launched.isEmpty, _TASKS_END_S)


def _poll_until(done: Callable[[], bool], seconds: float, every_s: float = 0.1) -> bool:
    """Poll ``done`` up to ``seconds``; whether it held."""
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() >= deadline:
            return False
        time.sleep(every_s)
    return True


def _jvm_log_levels(names: Sequence[str], level: str) -> Callable[[], None] | None:
    """Set JVM loggers to ``level``; a function that puts them back (None: no JVM here)."""
    from pyspark import SparkContext

    jvm = SparkContext._jvm  # noqa: SLF001 - log4j levels are only reachable here
    if jvm is None:
        return None
    log4j = jvm.org.apache.logging.log4j
    config = log4j.core.config.Configurator
    before = {n: log4j.LogManager.getLogger(n).getLevel() for n in names}
    for n in names:
        config.setLevel(n, log4j.Level.getLevel(level))

    def restore() -> None:
        for n, lvl in before.items():
            config.setLevel(n, lvl)

    return restore
