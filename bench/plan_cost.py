"""What a parse plan costs the driver to build and to plan, per stage (issue #34).

``python -m bench.plan_cost`` reads a small real run (``tests/data/real/growth_2_3``: its
log and its scrapes, as files), and in one local Spark session builds each plan ``--repeat``
times after ``--warm`` builds:

* ``logs`` / ``metrics``: one topic through its parser (``parse_logs`` / ``parse_metrics``);
* ``bus``: what the parse query writes (``streaming.bus.bus_records`` of both topics'
  counted events, dead letters included).

Per plan: ``build_s``, the Python calls that make the DataFrame (Spark analyses each
projection as it is added), ``plan_s``, optimizing it and making its physical plan (what
a streaming query does again at every micro-batch and every real-time commit), and the
optimized plan's size in characters (``optimized_chars``: it grows with each expression
inlined where a projection reads it). Medians and spreads, as JSON on stdout. Run it on an
idle machine and compare code in the same hour; nothing here asserts a time.

``--tasks`` adds, per plan, what each task pays to make the plan's projections
(``task_projections``): whole-stage code generation being off, every task of a ``ProjectExec``
generates its projection's Java source again (the compiled class is cached, the source is
not; ``UnsafeProjection.create``, as the task calls it), and the real-time parse starts a
task per raw partition at each commit. The seconds for all of the plan's projections, and
the ``--top`` columns that cost most alone (each alone also pays a projection's fixed cost,
about a millisecond).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench.replay import spread

REPO = Path(__file__).resolve().parent.parent
RUN = REPO / "tests" / "data" / "real" / "growth_2_3"


def measure(build: Callable[[], Any], warm: int, repeat: int) -> dict[str, Any]:
    """``build``'s DataFrame made and planned ``warm + repeat`` times; the last ``repeat``."""
    builds, plans = [], []
    df = None
    for i in range(warm + repeat):
        t0 = time.perf_counter()
        df = build()
        t1 = time.perf_counter()
        df._jdf.queryExecution().executedPlan()
        t2 = time.perf_counter()
        if i >= warm:
            builds.append(t1 - t0)
            plans.append(t2 - t1)
    assert df is not None
    optimized = df._jdf.queryExecution().optimizedPlan().treeString()
    return {
        "build_s": spread(builds),
        "plan_s": spread(plans),
        "optimized_chars": len(optimized),
    }


def _nodes(plan: Any) -> Iterator[Any]:
    """A physical plan's nodes (JVM objects), top down."""
    yield plan
    children = plan.children().iterator()
    while children.hasNext():
        yield from _nodes(children.next())


def _median_s(call: Callable[..., Any], repeat: int, *args: Any) -> float:
    """The median seconds of ``repeat`` calls ``call(*args)``, after one not counted."""
    call(*args)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        call(*args)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def task_projections(df: Any, repeat: int, top: int) -> dict[str, Any]:
    """What a task pays to make ``df``'s projections (the module's ``--tasks``)."""
    jvm = df.sparkSession.sparkContext._jvm
    create = jvm.org.apache.spark.sql.catalyst.expressions.UnsafeProjection.create
    one = jvm.scala.jdk.javaapi.CollectionConverters
    plan = df._jdf.queryExecution().executedPlan()
    projects = [n for n in _nodes(plan) if n.nodeName() == "Project"]
    total, columns = 0.0, []
    for node in projects:
        exprs, inputs = node.projectList(), node.child().output()
        total += _median_s(create, repeat, exprs, inputs)
        it = exprs.iterator()
        while it.hasNext():
            e = it.next()
            alone = one.asScala(jvm.java.util.Collections.singletonList(e)).toSeq()
            columns.append((_median_s(create, repeat, alone, inputs), e.toString()))
    columns.sort(key=lambda c: -c[0])
    return {
        "projections": len(projects),
        "task_s": round(total, 4),
        "top_columns": [
            {"ms": round(s * 1000, 2), "expression": e[:200]} for s, e in columns[:top]
        ],
    }


def main(argv: list[str] | None = None) -> None:
    """Measure each plan and print the JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--warm", type=int, default=2, help="builds not counted (default 2)")
    ap.add_argument("--repeat", type=int, default=4, help="builds counted (default 4)")
    ap.add_argument(
        "--tasks", action="store_true", help="also what each task pays for the projections"
    )
    ap.add_argument("--top", type=int, default=8, help="--tasks: the costliest columns shown")
    args = ap.parse_args(argv)

    from conf import load_config
    from streaming.bus import bus_records
    from streaming.events import counted, parse_limits, parsed_events
    from streaming.metric_parsing import parse_metrics
    from streaming.parsing import parse_logs
    from streaming.session import get_session
    from streaming.sources import file_records, stage_files

    # The whole plan in its string form, not cut at Spark's default length.
    extra = {"spark.sql.maxPlanStringLength": str(2**30)}
    spark = get_session(master="local[2]", require_kafka=False, extra=extra)
    cfg = load_config()
    lim = parse_limits(cfg)
    with tempfile.TemporaryDirectory(prefix="plan-cost-") as tmp:
        # The run's log and scrapes, each alone in a folder (a file source reads a folder).
        work = Path(tmp)
        log_dir = stage_files([RUN / "growth_2_3.log"], work / "logs")
        metric_dir = stage_files([RUN / "growth_2_3.jsonl"], work / "metrics")
        logs = file_records(spark, log_dir, kind="log", stream=False)
        metrics = file_records(spark, metric_dir, kind="metric", stream=False)
        plans: dict[str, Callable[[], Any]] = {
            "logs": lambda: parse_logs(logs, lim),
            "metrics": lambda: parse_metrics(metrics, lim, names=cfg.parsing.metric_names),
            "bus": lambda: bus_records(
                counted(parsed_events(logs, metrics, cfg)), cfg, dead_letters=True, partitions=4
            ),
        }
        result = {name: measure(build, args.warm, args.repeat) for name, build in plans.items()}
        if args.tasks:
            for name, build in plans.items():
                result[name]["task_projections"] = task_projections(build(), args.repeat, args.top)
    spark.stop()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
