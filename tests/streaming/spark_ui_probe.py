"""What the Spark UI of a flinkwatch session shows, read from its REST API and pages.

Run as ``python -m tests.streaming.spark_ui_probe OUT`` (a process of its own: the UI is
made with the session's SparkContext, and the tests' shared session has none). The Kafka
secrets come from the environment, as in a run: ``FLINKWATCH_KAFKA_PASSWORD`` and
``PROBE_KEYSTORE_KEY`` (an inline client key, ``kafka.options.ssl.keystore.key``). It
starts a writer to Kafka (the parse query's sink) and a reader (the detect query's
source) against a port where no broker listens, so each runs, waits and fails as a real
query would against a broker it cannot reach, and writes to OUT, as JSON, every text
the UI serves about them, with the reader's plan and its failure.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from conf import KafkaConfig
from conf.kafka_client import kafka_settings
from lab.procs import free_port
from streaming.session import get_session

#: REST API paths under /api/v1/applications/<id>/, and UI pages.
REST = (
    "environment",
    "sql?details=true&planDescription=true",
    "jobs",
    "stages?details=true",
    "streaming/statistics",
)
PAGES = ("environment/", "SQL/", "StreamingQuery/", "jobs/")


def _get(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:  # noqa: S310 - a local URL
            return str(resp.read().decode("utf-8", "replace"))
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}"


def main(out: Path) -> None:
    """Run the queries, read the UI, write what it shows to ``out``."""
    ui = free_port()
    spark = get_session(master="local[2]", ui_port=ui, app_name="flinkwatch-ui-probe")
    nowhere = f"127.0.0.1:{free_port()}"
    cfg = KafkaConfig(
        bootstrap_servers=nowhere,
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="flinkwatch",
        options={
            "ssl.keystore.type": "PEM",
            "ssl.keystore.key": "${PROBE_KEYSTORE_KEY}",
            "request.timeout.ms": "2000",
            "default.api.timeout.ms": "4000",
            "max.block.ms": "120000",
        },
    )
    settings = kafka_settings(cfg)
    texts: dict[str, str] = {}
    writer = (
        spark.readStream.format("rate")
        .load()
        .selectExpr("CAST(value AS STRING) AS value")
        .writeStream.queryName("probe-write")
        .format("kafka")
        .options(**settings.spark(reader=False))
        .option("topic", "probe.events")
        .option("checkpointLocation", str(out.parent / "cp-write"))
        .start()
    )
    source = (
        spark.readStream.format("kafka")
        .options(**settings.spark(reader=True))
        .option("subscribe", "probe.logs")
        .load()
    )
    texts["read plan"] = source._jdf.queryExecution().toString()  # noqa: SLF001
    reader = (
        source.writeStream.queryName("probe-read")
        .format("noop")
        .option("checkpointLocation", str(out.parent / "cp-read"))
        .start()
    )
    deadline = time.monotonic() + 120
    # Until the writer's micro-batch is under way (its producer waits for a broker) and
    # the reader failed (no broker to list offsets from).
    while time.monotonic() < deadline and (reader.isActive or writer.lastProgress is None):
        if writer.lastProgress is None and spark.sparkContext.statusTracker().getActiveJobsIds():
            break
        time.sleep(0.5)
    while time.monotonic() < deadline and reader.isActive:
        time.sleep(0.5)
    texts["read failure"] = str(reader.exception())
    base = f"http://127.0.0.1:{ui}"
    (app,) = json.loads(_get(f"{base}/api/v1/applications"))
    for path in REST:
        texts[f"/api/v1/applications/<id>/{path}"] = _get(
            f"{base}/api/v1/applications/{app['id']}/{path}"
        )
    for page in PAGES:
        texts[f"/{page}"] = _get(f"{base}/{page}")
    writer.stop()
    spark.stop()
    out.write_text(json.dumps(texts))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
