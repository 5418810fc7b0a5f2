"""A replay says how far it has got at least every 10 s, and sums up at the end."""

from __future__ import annotations

import threading
from collections import Counter
from types import SimpleNamespace

from streaming.cli.replay_run import replay_counts
from streaming.delivery import PipelineStats
from streaming.replay_progress import ReplayCounts, ReplayProgress

T0_MS = 1_795_319_936_000  # 2026-11-22T03:58:56Z


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _progress(counts: list[ReplayCounts], clock: Clock, lines: list[str]) -> ReplayProgress:
    return ReplayProgress(lambda: counts[-1], clock=clock, emit=lines.append)


def test_a_line_every_ten_seconds_with_records_event_time_and_alerts() -> None:
    clock, lines = Clock(), []
    counts = [ReplayCounts()]
    progress = _progress(counts, clock, lines)
    for second in range(1, 26):  # polled every second, as the replay's thread does
        clock.now += 1
        if second == 12:
            counts.append(
                ReplayCounts(
                    records=1_234_567, newest_event_ms=T0_MS + 753, alerts=12, parse_batches=1
                )
            )
        progress.poll()
    assert lines == [
        "replay: reading the files (their records are counted once parsed)",
        "replay: 1,234,567 records read, event time 2026-11-22T03:58:56Z, 12 alerts "
        "(parse batches 1, detect batches 0)",
    ]


def test_no_line_before_ten_seconds_and_a_summary_with_the_rate_at_the_end() -> None:
    clock, lines = Clock(), []
    counts = [ReplayCounts(records=50_000, newest_event_ms=T0_MS, alerts=3, detect_batches=2)]
    progress = _progress(counts, clock, lines)
    clock.now += 9.9
    assert not progress.poll()
    clock.now += 0.1
    progress.finish()
    assert lines == [
        "replay: done in 10.0 s: 50,000 records read (5,000/s), "
        "event time 2026-11-22T03:58:56Z, 3 alerts"
    ]


def test_the_polling_thread_stops_and_a_failed_replay_gets_no_summary() -> None:
    lines: list[str] = []
    progress = ReplayProgress(ReplayCounts, emit=lines.append)
    progress.start()(False)
    assert lines == []
    stop = threading.Event()
    stop.set()
    progress.run_until(stop)  # returns at once once stopped
    progress.start()(True)
    assert len(lines) == 1 and lines[0].startswith("replay: done in ")


def test_the_counts_come_from_the_pipelines_counters() -> None:
    stats = PipelineStats()
    stats.records_read = 42
    stats.newest_event_ms = T0_MS
    stats.alerts = Counter({("tm_lost", "tm:a", "firing"): 2, ("tm_lost", "tm:a", "resolved"): 1})
    stats.counted["parse"] = 4  # batch ids 0..4 counted
    stats.delivered = 3
    assert replay_counts(stats) == ReplayCounts(
        records=42, newest_event_ms=T0_MS, alerts=3, parse_batches=5, detect_batches=3
    )
    assert replay_counts(PipelineStats()) == ReplayCounts()


def test_a_line_says_how_far_the_running_spark_stages_are() -> None:
    clock, lines = Clock(), []
    counts = [ReplayCounts(tasks=54, tasks_done=20)]
    progress = _progress(counts, clock, lines)
    clock.now += 10
    progress.poll()
    # The parse has counted and found nothing (empty files): now 0 is a count, and said.
    counts.append(ReplayCounts(parse_batches=1, tasks=2, tasks_done=1))
    clock.now += 10
    progress.poll()
    assert lines == [
        "replay: reading the files (their records are counted once parsed); "
        "Spark: 20 of 54 tasks done",
        "replay: 0 records read, event time none yet, 0 alerts (parse batches 1, detect "
        "batches 0); Spark: 1 of 2 tasks done",
    ]


class Tracker:
    """Spark's status tracker as the progress thread reads it: stage ids, then each stage."""

    def __init__(self, stages: dict[int, tuple[int, int]], fail: bool = False) -> None:
        self.stages, self.fail = stages, fail

    def getActiveStageIds(self) -> list[int]:  # noqa: N802 (Spark's name)
        if self.fail:
            from py4j.protocol import Py4JError

            raise Py4JError("the context is stopping")
        return [*self.stages, 99]

    def getStageInfo(self, stage: int) -> SimpleNamespace | None:  # noqa: N802
        if stage not in self.stages:
            return None  # ended between the two calls
        total, done = self.stages[stage]
        return SimpleNamespace(numTasks=total, numCompletedTasks=done)


def test_the_tasks_are_those_of_the_stages_running_and_none_once_spark_is_gone() -> None:
    stats = PipelineStats()
    got = replay_counts(stats, Tracker({3: (54, 20), 4: (2, 0)}))  # type: ignore[arg-type]
    assert (got.tasks, got.tasks_done) == (56, 20)
    failed = replay_counts(stats, Tracker({3: (54, 20)}, fail=True))  # type: ignore[arg-type]
    assert (failed.tasks, failed.tasks_done) == (0, 0)
