"""What one OTLP/JSON request costs the parser, by its number of records: CPU seconds of the JVM.

``python -m bench.otlp_cost`` builds one ExportLogsServiceRequest of N log records (Flink
text lines as the Collector's ``filelog`` receiver sends them) and one
ExportMetricsServiceRequest of N gauge data points (as its ``prometheus`` receiver sends a
Flink reporter's scrape), and drains each through its parser (``parse_logs`` /
``parse_metrics``) to Spark's ``noop`` sink, ``--repeat`` times, in one Spark session.
Per N: the median wall and JVM CPU seconds and the CPU per record. A parser whose rows
each pay for the whole request shows it here: CPU per record growing with N. Numbers
depend on the machine; nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from bench.parse_cost import _cpu_s

_JOB = "3631d292e50708eb38e1304df762587a"
_LINE = (
    "2026-11-24 06:00:{s:02d},{ms:03d} INFO  org.apache.flink.runtime.checkpoint."
    "CheckpointCoordinator [] - Completed checkpoint {n} for job {job} (48213 bytes, "
    "checkpointDuration=212 ms, finalizationTime=3 ms)."
)
_START_NS = 1_795_500_040_000_000_000


def _kv(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "value": {"stringValue": value}}


def log_request(n: int) -> str:
    """An ExportLogsServiceRequest of ``n`` log records, compact as the exporter writes it."""
    records = [
        {
            "observedTimeUnixNano": str(_START_NS + i * 1_000_000),
            "body": {"stringValue": _LINE.format(s=i // 1000 % 60, ms=i % 1000, n=i + 1, job=_JOB)},
            "attributes": [_kv("log.file.name", "flink-root-standalonesession-0-vm.log")],
        }
        for i in range(n)
    ]
    resource = {"attributes": [_kv("host.name", "vm-1"), _kv("k8s.pod.name", "flink-jm-0")]}
    body = {"resourceLogs": [{"resource": resource, "scopeLogs": [{"logRecords": records}]}]}
    return json.dumps(body, separators=(",", ":"))


def metric_request(n: int) -> str:
    """An ExportMetricsServiceRequest of ``n`` gauge points (one metric each, a TaskManager's)."""
    metrics = [
        {
            "name": f"flink_taskmanager_job_task_operator_numRecordsIn_{i % 50}",
            "gauge": {
                "dataPoints": [
                    {
                        "attributes": [
                            _kv("job_id", _JOB),
                            _kv("tm_id", f"tm-{i % 4}"),
                            _kv("subtask_index", str(i % 8)),
                        ],
                        "timeUnixNano": str(_START_NS + i * 1_000_000),
                        "asDouble": float(i),
                    }
                ]
            },
        }
        for i in range(n)
    ]
    resource = {"attributes": [_kv("service.name", "flink")]}
    body = {"resourceMetrics": [{"resource": resource, "scopeMetrics": [{"metrics": metrics}]}]}
    return json.dumps(body, separators=(",", ":"))


def main(argv: list[str] | None = None) -> None:
    """Drain one request of each size through its parser, print the medians."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--sizes", default="100,1000,4000,8000", help="records a request, comma-separated"
    )
    p.add_argument("--kinds", default="logs,metrics", help="comma-separated, of logs, metrics")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args(argv)

    from streaming.metric_parsing import parse_metrics
    from streaming.parsing import ParseLimits, parse_logs
    from streaming.session import get_session

    spark = get_session(master="local[2]", require_kafka=False)
    pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())  # type: ignore[union-attr]
    schema = "value string, topic string, partition int, offset long, kafka_ts timestamp"

    def frame(kind: str, n: int) -> Any:
        value = log_request(n) if kind == "logs" else metric_request(n)
        records = spark.createDataFrame([(value, f"otel.{kind}", 0, 0, None)], schema)
        # The request is read whatever its size: the bench is about rows, not the bound.
        lim = ParseLimits(max_record_bytes=len(value) + 1, max_points_per_record=n + 1)
        return (parse_logs if kind == "logs" else parse_metrics)(records, lim)

    for kind in args.kinds.split(","):
        # One unmeasured drain first: the JVM's JIT and Spark's codegen warm up on it.
        frame(kind, 100).write.format("noop").mode("overwrite").save()
        for n in (int(s) for s in args.sizes.split(",")):
            runs = []
            for _ in range(args.repeat):
                df = frame(kind, n)
                c0, w0 = _cpu_s(pid), time.monotonic()
                df.write.format("noop").mode("overwrite").save()
                runs.append((time.monotonic() - w0, _cpu_s(pid) - c0))
            wall = statistics.median(r[0] for r in runs)
            cpu = statistics.median(r[1] for r in runs)
            print(
                f"{kind:7s} {n:6d} records  wall {wall:6.2f} s  JVM CPU {cpu:6.2f} s  "
                f"{cpu / n * 1e6:8.1f} µs CPU/record",
                flush=True,
            )
    spark.stop()


if __name__ == "__main__":
    main()
