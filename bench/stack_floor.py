"""What Spark itself costs for the live job's two shapes with almost nothing to read (#34).

``python -m bench.stack_floor [--rate R] [--shape S ...] [--runs N]`` starts a broker of its
own, trickles ``--rate`` small records a second into a topic of four partitions (the raw
topics' four, as the real-time parse reads them), and runs each shape alone in a process of
its own, in flinkwatch's Spark session (``streaming.session.get_session``: RocksDB state,
the same codegen and memory settings), with no flinkwatch code in the query:

* ``batch``: the Kafka source to a ``foreachBatch`` that reads the rows into Spark's
  ``noop`` sink, a 1-s trigger (Spark's micro-batch with rows in every batch);
* ``stateful``: the same rows grouped by key through ``transformWithStateInPandas`` (one
  value per key, counted; the detect query's operator, two shuffle partitions) to the
  same ``foreachBatch``;
* ``realtime``: the records copied to another topic in real-time mode, offsets committed
  every 5 s (the parse query's shape with a projection of two columns).

Each run: ``--warmup-s`` after the query's first batch, then the process tree's CPU
(driver Python, the JVM, Python workers) over ``--window-s``, and the batches committed in
it. Against ``python -m bench.jit --rate 10`` (flinkwatch's whole job at the same trickle),
the difference is what flinkwatch's own plans and code add to Spark's floor. JSON in
``bench/results/<stamp>-stack-floor.json``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
WORK = REPO / "bench" / ".work" / "stack_floor"
SHAPES = ("batch", "stateful", "realtime")
TOPIC, OUT_TOPIC, PARTITIONS = "floor.in", "floor.out", 4


def _query(shape: str, bootstrap: str, checkpoint: Path) -> Any:
    """Start ``shape``'s query in this process's session; returns the running query."""
    import pandas as pd
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    from streaming.session import get_session

    # Real-time mode needs a task slot per source partition, as flinkwatch sizes it.
    spark = get_session(master="local[4]" if shape == "realtime" else "local[2]")
    rows = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", TOPIC)
        .option("startingOffsets", "latest")
        .load()
        .select(
            F.col("key").cast(StringType()).alias("key"),
            F.col("value").cast(StringType()).alias("value"),
        )
    )
    if shape == "realtime":
        return (
            rows.writeStream.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", OUT_TOPIC)
            .option("checkpointLocation", str(checkpoint))
            .outputMode("update")
            .trigger(realTime="5 seconds")
            .start()
        )
    counted = StructType([StructField("key", StringType()), StructField("n", LongType())])

    class Count(StatefulProcessor):
        def init(self, handle: Any) -> None:
            self._n = handle.getValueState("n", StructType([StructField("n", LongType())]))

        def handleInputRows(
            self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any
        ) -> Iterator[pd.DataFrame]:
            n = (self._n.get() or (0,))[0] + sum(len(r) for r in rows)
            self._n.update((n,))
            yield pd.DataFrame({"key": [key[0]], "n": [n]})

        def close(self) -> None:
            pass

    if shape == "stateful":
        rows = rows.groupBy("key").transformWithStateInPandas(
            statefulProcessor=Count(),
            outputStructType=counted,
            outputMode="Update",
            timeMode="None",
        )
    return (
        # Each batch's rows read to the end (a stateful query must commit every store).
        rows.writeStream.foreachBatch(
            lambda df, _: df.write.format("noop").mode("overwrite").save()
        )
        .option("checkpointLocation", str(checkpoint))
        .outputMode("update")
        .trigger(processingTime="1 second")
        .start()
    )


def child(shape: str, bootstrap: str, checkpoint: Path) -> None:
    """Run ``shape`` until killed; prints ``started`` once its first batch is committed."""
    query = _query(shape, bootstrap, checkpoint)
    while query.lastProgress is None:
        time.sleep(0.2)
    print("started", flush=True)
    query.awaitTermination()


def trickle(bootstrap: str, rate: float, stop: threading.Event) -> None:
    """Send ``rate`` records a second (~400 bytes, 100 keys) until ``stop`` is set."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
    try:
        body = b"x" * 400
        i = 0
        start = time.monotonic()
        while not stop.is_set():
            producer.send(TOPIC, key=b"k%d" % (i % 100), value=body)
            i += 1
            stop.wait(max(0.0, start + i / rate - time.monotonic()))
    finally:
        producer.close()


def one_run(shape: str, bootstrap: str, warmup_s: float, window_s: float, n: int) -> dict[str, Any]:
    """One shape in a fresh process: its cores and batches over the window after a warm-up."""
    from bench.idle import _commits, stop
    from bench.measure import tree_cpu_s

    state = WORK / f"run-{n}"
    checkpoint = state / "checkpoints" / shape
    shutil.rmtree(checkpoint, ignore_errors=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.stack_floor", "--child", shape, bootstrap, str(checkpoint)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "started":
            msg = f"{shape}: the query did not start (exit {proc.wait()})"
            raise RuntimeError(msg)
        time.sleep(warmup_s)
        cpu0, batches0, t0 = tree_cpu_s(proc.pid), _commits(state)[shape], time.monotonic()
        time.sleep(window_s)
        cpu1, batches1, t1 = tree_cpu_s(proc.pid), _commits(state)[shape], time.monotonic()
    finally:
        stop(proc)
    return {
        "shape": shape,
        "cores": round((cpu1 - cpu0) / (t1 - t0), 4),
        "batches_per_min": round((batches1 - batches0) * 60 / (t1 - t0), 1),
    }


def main(argv: list[str] | None = None) -> int:
    """Run the shapes in turn (``--runs`` rounds), print and save each run and the medians."""
    p = argparse.ArgumentParser(prog="python -m bench.stack_floor", description=__doc__)
    p.add_argument("--rate", type=float, default=10.0, help="records a second (default 10)")
    p.add_argument("--shape", nargs="+", choices=SHAPES, default=list(SHAPES))
    p.add_argument("--runs", type=int, default=2, help="rounds of every shape (default 2)")
    p.add_argument("--warmup-s", type=float, default=120.0)
    p.add_argument("--window-s", type=float, default=120.0)
    p.add_argument("--child", nargs=3, metavar=("SHAPE", "BOOTSTRAP", "CHECKPOINT"))
    args = p.parse_args(argv)
    if args.child:
        child(args.child[0], args.child[1], Path(args.child[2]))
        return 0
    from bench.run import Broker

    WORK.mkdir(parents=True, exist_ok=True)
    broker = Broker([TOPIC, OUT_TOPIC], PARTITIONS)
    broker.env["FLINKWATCH_KAFKA_DIR"] = str(WORK / "kafka")
    broker.start()
    stop = threading.Event()
    sender = threading.Thread(target=trickle, args=(broker.bootstrap, args.rate, stop))
    sender.start()
    runs: list[dict[str, Any]] = []
    try:
        for n in range(args.runs):
            for shape in args.shape:
                runs.append(one_run(shape, broker.bootstrap, args.warmup_s, args.window_s, n))
                print(json.dumps(runs[-1]), flush=True)
    finally:
        stop.set()
        sender.join()
        broker.stop()
    medians = {
        s: statistics.median(r["cores"] for r in runs if r["shape"] == s) for s in args.shape
    }
    print("median cores:", json.dumps(medians))
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    out = REPO / "bench" / "results" / f"{stamp}-stack-floor.json"
    result = {"args": vars(args), "runs": runs, "median_cores": medians}
    out.write_text(json.dumps(result, indent=1))
    print(f"written {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
