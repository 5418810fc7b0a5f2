"""The parse's expressions, made once per JVM (``streaming/jvm_columns.py``)."""

from __future__ import annotations

import threading

import pytest
from pyspark import SparkContext

from streaming import jvm_columns
from streaming.jvm_columns import made_once, side_by_side
from streaming.metric_parsing import parse_metrics
from streaming.parse_columns import ParseLimits
from tests.conftest import records_df


def test_made_once_builds_once_per_key_and_per_jvm(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []

    def build(what: str) -> object:
        built.append(what)
        return object()

    monkeypatch.setattr(SparkContext, "_gateway", object())
    monkeypatch.setattr(jvm_columns, "_made", {})  # the session's real ones stay kept
    first = made_once(("test", 1), lambda: build("one"))
    assert made_once(("test", 1), lambda: build("again")) is first
    other = made_once(("test", 2), lambda: build("two"))
    assert other is not first
    # Another JVM (another gateway): its own expressions.
    monkeypatch.setattr(SparkContext, "_gateway", object())
    assert made_once(("test", 1), lambda: build("new jvm")) is not first
    assert built == ["one", "two", "new jvm"]


def test_only_the_newest_sets_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    # A job whose parse settings are reloaded again and again does not keep every old set.
    monkeypatch.setattr(SparkContext, "_gateway", object())
    monkeypatch.setattr(jvm_columns, "_made", {})
    monkeypatch.setattr(jvm_columns, "MAX_KEPT", 3)
    built: list[int] = []

    def make(i: int) -> object:
        return made_once(("kept", i), lambda: built.append(i) or object())

    first = [make(i) for i in range(4)]
    assert make(3) is first[3] and make(2) is first[2]
    assert make(0) is not first[0]  # the oldest went first
    assert built == [0, 1, 2, 3, 0]


@pytest.mark.spark
def test_the_limits_are_part_of_what_is_kept(spark) -> None:
    # Two configs in one process (a replay against a baseline, a reload): each parse reads
    # with its own limits, whichever was built first.
    line = "prometheus,host=jm_0 " + ",".join(f"flink_m{i}={i}" for i in range(5))
    records = records_df(spark, [line + " 1710183765000000000"])

    def errors(cap: int) -> list[str | None]:
        out = parse_metrics(records, ParseLimits(max_points_per_record=cap)).orderBy("seq")
        return [r.error for r in out.select("error").collect()]

    assert errors(3) == [None, None, None, "too_many_points"]
    assert errors(10) == [None] * 5
    assert errors(3) == [None, None, None, "too_many_points"]


@pytest.mark.spark
def test_side_by_side_builds_in_two_threads_with_the_session_active(spark) -> None:
    jvm = spark.sparkContext._jvm
    seen: dict[str, object] = {}

    def beside() -> str:
        seen["thread"] = threading.get_ident()
        active = jvm.SparkSession.getActiveSession()
        seen["session"] = active.isDefined() and active.get().equals(spark._jsparkSession)
        return "metrics"

    assert side_by_side(spark, lambda: "logs", beside) == ("logs", "metrics")
    assert seen == {"thread": seen["thread"], "session": True}
    assert seen["thread"] != threading.get_ident()


@pytest.mark.spark
def test_side_by_side_raises_either_sides_error_once_both_have_ended(spark) -> None:
    started, raising, ended = threading.Event(), threading.Event(), threading.Event()

    def here() -> None:
        started.wait(30)
        raising.set()
        raise ValueError("the logs' parse")

    def beside() -> str:
        started.set()
        raising.wait(30)  # still running when ``here`` raises
        ended.set()
        return "metrics"

    with pytest.raises(ValueError, match="the logs' parse"):
        side_by_side(spark, here, beside)
    assert ended.is_set()

    def fails() -> None:
        raise ValueError("the metrics' parse")

    with pytest.raises(ValueError, match="the metrics' parse"):
        side_by_side(spark, lambda: "logs", fails)

    def logs_fail() -> None:
        raise ValueError("the logs' parse")

    # Both fail: the first is raised, the other is not lost.
    with pytest.raises(ValueError, match="the logs' parse") as both:
        side_by_side(spark, logs_fail, fails)
    assert both.value.__notes__ == ["and beside it: ValueError: the metrics' parse"]
