"""What the parse stage costs on a backlog, without Kafka: CPU seconds of the JVM and records/s.

``python -m bench.parse_cost`` writes the backlog phase's fleet (``bench/run.py``
``throughput``: 100 jobs, 4 TaskManagers each, its four incidents) once, as Parquet files
shaped like the Kafka source's rows (``value``, ``topic``, ``partition``, ``offset``,
``kafka_ts``; two partitions a topic, offsets in order, the record's time as its Kafka
timestamp), then drains it as a *batch* DataFrame to Spark's ``noop`` sink, in one Spark
session, ``--repeat`` times each:

* ``baseline``: the records read and written, nothing parsed (the read's own cost);
* ``logs`` / ``metrics``: one topic through its parser (``parse_logs`` / ``parse_metrics``);
* ``parse``: both (``streaming.events.parsed_events``);
* ``bus``: what the parse query writes to Kafka (``streaming.bus.bus_records`` of the
  counted events, dead letters included): the parse plus the bus records' JSON.

Per run: wall seconds, CPU seconds of the JVM (``/proc/<pid>/stat``, user + system) and
records/s; then per mode the median and the spread. ``--conf key=value`` sets a Spark
setting for the session (``spark.sql.codegen.wholeStage=true`` tries fused code
generation). Whole-stage codegen that fails to compile is logged by Spark as "grows beyond
64 KB": grep the run's stderr for it. Numbers depend on the machine: run it on an idle one;
nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import zlib
from pathlib import Path
from typing import Any

from bench import key_value

REPO = Path(__file__).resolve().parent.parent
WORK = REPO / "bench" / ".work" / "parse_cost"
MODES = ("baseline", "logs", "metrics", "parse", "bus")
# bench/run.py's throughput phase: a few incidents of each kind.
INCIDENTS = [
    ("checkpoint_expiry", 1, 600.0),
    ("checkpoint_creep", 2, 300.0),
    ("idle_heap_leak", 3, 300.0),
    ("late_acks_skew", 4, 600.0),
]
START_MS = 1_763_800_000_000
PARTITIONS = 2  # per topic, as the parse query's raw partitions
ROWS_PER_GROUP = 25_000  # Parquet row groups: Spark's unit of splitting a file into tasks


def write_backlog(jobs: int, tms: int, hours: float, into: Path) -> dict[str, int]:
    """The fleet's records as Parquet under ``into`` (``logs/``, ``metrics/``), once."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from bench.run import _spec
    from lab.fleet import generate

    done = into / "backlog.json"
    if done.exists():
        return dict(json.loads(done.read_text()))
    spec = _spec(jobs, tms, [i for i in INCIDENTS if i[1] < jobs], seed=11)
    cols: dict[str, dict[str, list[Any]]] = {
        s: {"value": [], "partition": [], "offset": [], "ts": []} for s in ("log", "metric")
    }
    offsets: dict[tuple[str, int], int] = {}
    for r in generate(spec, START_MS, hours * 3600):
        p = zlib.crc32(r.key) % PARTITIONS if r.key else 0
        o = offsets.get((r.stream, p), 0)
        offsets[(r.stream, p)] = o + 1
        c = cols[r.stream]
        c["value"].append(r.value.decode())
        c["partition"].append(p)
        c["offset"].append(o)
        c["ts"].append(r.time_ms)
    counts = {}
    for stream, c in cols.items():
        topic = f"bench.{stream}s"
        table = pa.table(
            {
                "value": pa.array(c["value"], pa.string()),
                "topic": pa.array([topic] * len(c["value"]), pa.string()),
                "partition": pa.array(c["partition"], pa.int32()),
                "offset": pa.array(c["offset"], pa.int64()),
                "kafka_ts": pa.array(c["ts"], pa.timestamp("ms", tz="UTC")),
            }
        )
        out = into / f"{stream}s"
        out.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, out / "part-0.parquet", row_group_size=ROWS_PER_GROUP)
        counts[f"{stream}s"] = len(c["value"])
    done.write_text(json.dumps(counts))
    return counts


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _frame(spark: Any, mode: str, work: Path) -> Any:
    """The DataFrame a mode drains."""
    from bench.run import _config
    from streaming.bus import bus_records
    from streaming.events import counted, parse_limits, parsed_events
    from streaming.metric_parsing import parse_metrics
    from streaming.parsing import parse_logs

    logs = spark.read.parquet(str(work / "logs"))
    metrics = spark.read.parquet(str(work / "metrics"))
    cfg = _config("127.0.0.1:9", "bench", work / "state", 1.0)
    lim = parse_limits(cfg)
    if mode == "baseline":
        return logs.unionByName(metrics)
    if mode == "logs":
        return parse_logs(logs, lim)
    if mode == "metrics":
        return parse_metrics(metrics, lim, names=cfg.parsing.metric_names)
    events = parsed_events(logs, metrics, cfg)
    if mode == "parse":
        return events
    return bus_records(counted(events), cfg, dead_letters=True, partitions=4)


def main(argv: list[str] | None = None) -> None:
    """Write the backlog (once), drain it in each mode, print (and write) the numbers."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--jobs", type=int, default=100)
    p.add_argument("--tms", type=int, default=4)
    p.add_argument("--hours", type=float, default=0.5, help="hours of the fleet's records")
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {MODES}")
    p.add_argument(
        "--conf", action="append", default=[], type=key_value, help="a Spark setting, key=value"
    )
    p.add_argument("--out", type=Path, help="also write the results here as JSON")
    args = p.parse_args(argv)

    work = WORK / f"{args.jobs}x{args.tms}-{args.hours:g}h"
    t0 = time.monotonic()
    counts = write_backlog(args.jobs, args.tms, args.hours, work)
    print(f"backlog {counts} in {work} ({time.monotonic() - t0:.0f} s)", flush=True)

    from streaming.session import get_session

    extra = dict(args.conf)
    # Parquet row groups are small: let each be a task, so both cores work.
    extra.setdefault("spark.sql.files.maxPartitionBytes", str(4 << 20))
    spark = get_session(master="local[2]", require_kafka=False, extra=extra)
    pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())  # type: ignore[union-attr]
    records = {"baseline": counts["logs"] + counts["metrics"], "parse": 0, "bus": 0}
    records["logs"], records["metrics"] = counts["logs"], counts["metrics"]
    records["parse"] = records["bus"] = records["baseline"]
    modes = [m for m in args.modes.split(",") if m]
    # One unmeasured drain first: the JVM's JIT and Spark's codegen warm up on it.
    _frame(spark, "bus" if "bus" in modes else modes[0], work).write.format("noop").mode(
        "overwrite"
    ).save()
    runs: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
    for i in range(args.repeat):
        for mode in modes:
            df = _frame(spark, mode, work)
            c0, w0 = _cpu_s(pid), time.monotonic()
            df.write.format("noop").mode("overwrite").save()
            wall, cpu = time.monotonic() - w0, _cpu_s(pid) - c0
            runs[mode].append({"wall_s": wall, "cpu_s": cpu})
            print(
                f"run {i + 1} {mode:9s} wall {wall:6.1f} s  JVM CPU {cpu:6.1f} s  "
                f"{records[mode] / wall:9,.0f} records/s  "
                f"{cpu / records[mode] * 1e6:6.1f} µs CPU/record",
                flush=True,
            )
    summary = {}
    print(f"\nmedian of {args.repeat} (min-max); records: {records}")
    for mode, rs in runs.items():
        wall = statistics.median(r["wall_s"] for r in rs)
        cpu = statistics.median(r["cpu_s"] for r in rs)
        walls = [r["wall_s"] for r in rs]
        cpus = [r["cpu_s"] for r in rs]
        summary[mode] = {
            "records": records[mode],
            "wall_s": round(wall, 2),
            "wall_s_range": [round(min(walls), 2), round(max(walls), 2)],
            "cpu_s": round(cpu, 2),
            "cpu_s_range": [round(min(cpus), 2), round(max(cpus), 2)],
            "records_per_s": round(records[mode] / wall),
            "cpu_us_per_record": round(cpu / records[mode] * 1e6, 1),
        }
        print(
            f"{mode:9s} wall {wall:6.1f} s ({min(walls):.1f}-{max(walls):.1f})  "
            f"JVM CPU {cpu:6.1f} s ({min(cpus):.1f}-{max(cpus):.1f})  "
            f"{records[mode] / wall:9,.0f} records/s  {cpu / records[mode] * 1e6:6.1f} µs/record"
        )
    if args.out:
        args.out.write_text(json.dumps({"conf": extra, "runs": summary}, indent=1) + "\n")
    spark.stop()


if __name__ == "__main__":
    main()
