"""The parse's Column expressions, made once per JVM: :func:`made_once`.

Every ``F.…`` call, operator and ``alias`` on a Column is a round trip to the driver's JVM
(about 0.15 ms here), and the parse of both topics makes some 16,000 of them: about 2 s of
the driver each time a parse plan is built (each start of the parse query, a reload, each
config of a replay, each ``flinkwatch doctor``), before Spark analyses anything. The
expressions depend on the config's parse limits and naming rules, not on the records: a
Column is an immutable JVM value, resolved only by the plan that uses it, so the ones made
for one plan serve the next.

The first time, the round trips are most of a plan's cost, and the driver's JVM and this
process take turns waiting on each other: :func:`side_by_side` builds two independent
plans at once, one in a thread of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from threading import Lock
from typing import Any, TypeVar

from pyspark import SparkContext
from pyspark.sql import Column, DataFrame, SparkSession

T = TypeVar("T")
U = TypeVar("U")

#: At most this many entries kept (one per parse stage and key: about a dozen per config),
#: the oldest dropped first: a job whose parse settings are reloaded again and again keeps
#: the recent configs' only (a config's entries hold ~16,000 JVM objects).
MAX_KEPT = 256

_made: dict[tuple[Hashable, ...], tuple[Any, Any]] = {}
_lock = Lock()


def made_once(key: tuple[Hashable, ...], build: Callable[[], T]) -> T:
    """``build()``, made the first time ``key`` is asked for in this JVM, then kept.

    ``key`` names the expressions and holds everything ``build`` reads (limits, flags,
    rules): two builds that could differ must not share one. A JVM of its own (a Python
    process that started a second gateway) makes its own.
    """
    gateway = SparkContext._gateway
    k = (id(gateway), *key)
    with _lock:
        kept = _made.get(k)
    if kept is not None:
        return kept[1]  # type: ignore[no-any-return]
    made = build()
    with _lock:
        while _made and len(_made) >= MAX_KEPT:
            del _made[next(iter(_made))]
        # The gateway is kept with them: its id is not reused while they are.
        return _made.setdefault(k, (gateway, made))[1]  # type: ignore[no-any-return]


def widened(
    df: DataFrame, key: tuple[Hashable, ...], build: Callable[[], Sequence[Sequence[Column]]]
) -> DataFrame:
    """``df`` with each of ``build()``'s lists of columns added in turn (made once per key).

    For a stage of projections that each add columns to all before them
    (``select("*", …)``), later ones reading the earlier ones' by name.
    """
    for columns in made_once(key, build):
        df = df.select("*", *columns)
    return df


def side_by_side(
    spark: SparkSession, here: Callable[[], T], beside: Callable[[], U]
) -> tuple[T, U]:
    """``here()`` in this thread and ``beside()`` in another, at the same time; both results.

    For two plans that share nothing (the logs' parse and the metrics'): each Py4J round
    trip leaves one side idle, so two builds at once take little more than the longer
    one. ``beside`` runs with ``spark`` as its JVM thread's active session, as ``here``
    does. An exception from either is raised here, after both have ended; when both
    raise, ``here``'s, with ``beside``'s in its notes.
    """

    def in_session() -> U:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        jvm.SparkSession.setActiveSession(spark._jsparkSession)
        return beside()

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="flinkwatch-plan") as pool:
        other = pool.submit(in_session)
        try:
            first = here()
        except BaseException as exc:
            also = other.exception()  # waits for it: nothing is left running
            if also is not None:
                exc.add_note(f"and beside it: {type(also).__name__}: {also}")
            raise
        return first, other.result()
