"""The live pipeline on the real broker, for the integration tests: config, loop, alerts.

Flink log lines in the default layout, a config whose topics are a test's own, the
pipeline with its event bus and dead letters on Kafka, its run loop in a thread.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from pathlib import Path

from conf import AppConfig, KafkaConfig, OutputConfig, SparkConfig
from conf.running import RunningConfig
from sinks import AlertLedger, JsonLinesAlertSink
from streaming.app import Pipeline
from streaming.delivery import Outputs
from streaming.supervise import run_forever
from streaming.topics import ensure_bus_topics
from tests.conftest import KafkaBroker

CC = "org.apache.flink.runtime.checkpoint.CheckpointCoordinator"
TM_RUNNER = "org.apache.flink.runtime.taskexecutor.TaskManagerRunner"
TASK = "org.apache.flink.runtime.taskmanager.Task"
TM = "localhost:40001-aaaaaa"


def flink_line(ts: str, level: str, logger: str, msg: str) -> str:
    # Flink >= 1.11 default layout: %d %-5p %-60c %x - %m (log4j2 renders the empty NDC as []).
    return f"{ts} {level:<5} {logger:<60} [] - {msg}"


def expired_cycle(job: str, first: int, n: int, minute: int) -> list[str]:
    """n checkpoints of `job` expiring (Flink 1.15+ wording) from `minute` on."""
    out = []
    for i in range(n):
        cp = first + i
        ts = f"2024-06-03 10:{minute + i:02d}:00,002"
        out.append(
            flink_line(ts, "INFO", CC, f"Checkpoint {cp} of job {job} expired before completing.")
        )
        out.append(
            flink_line(
                ts.replace(",002", ",511"),
                "WARN",
                CC,
                f"Received late message for now expired checkpoint attempt {cp} from task "
                f"a1b2c3d4e5f60718293a4b5c6d7e8f90_cbc357ccb763df2852fee8c4fc7d55f2_3_0 of job {job} "
                "at container_e05_1699999999999_0042_01_000003 @ worker-7.example.com (dataPort=39245).",
            )
        )
    return out


def config(kafka: KafkaBroker, prefix: str, state: Path) -> AppConfig:
    return AppConfig(
        kafka=KafkaConfig(
            bootstrap_servers=kafka.bootstrap,
            logs_topic=f"{prefix}.logs",
            metrics_topic=f"{prefix}.metrics",
            events_topic=f"{prefix}.events",
            deadletters_topic=f"{prefix}.deadletters",
        ),
        spark=SparkConfig(trigger_interval_s=0.5, restart_backoff_s=2, watermark_delay_s=60),
        output=OutputConfig(state_dir=state),
    )


def pipeline(spark, cfg: AppConfig, trigger: dict) -> Pipeline:  # type: ignore[no-untyped-def]
    """The live layout (event bus and dead letters on Kafka), parse as micro-batches."""
    ensure_bus_topics(cfg.kafka)
    return Pipeline(
        spark=spark,
        config=RunningConfig(cfg),
        outputs=Outputs(
            ledger=AlertLedger(cfg.output.ledger_path),
            sinks=[JsonLinesAlertSink(cfg.output.alerts_path)],
        ),
        checkpoint_dir=cfg.output.checkpoint_dir,
        deadletter_dir=cfg.output.deadletter_path,
        trigger=trigger,
        bus="kafka",
    )


def read_alerts(path: Path, detector: str | None = None) -> list[dict]:
    """Alert lines, optionally of one detector (the expiry lines here also make late acks)."""
    if not path.exists():
        return []
    alerts = [json.loads(line) for line in path.read_text().splitlines() if line]
    return [a for a in alerts if detector is None or a["detector"] == detector]


JOB_A = "3f4c2a9b7d1e4f60a8b5c2d1e0f9a7b3"
JOB_B = "4443c93037d620ac81c8c28fbce3f8ae"


@contextlib.contextmanager
def running(p: Pipeline) -> Iterator[dict[str, int]]:
    """The pipeline's run loop in a thread for the block; after it, ``rc``: its exit code."""
    stop = threading.Event()
    result: dict[str, int] = {}
    runner = threading.Thread(
        target=lambda: result.update(rc=run_forever(p, should_stop=stop.is_set))
    )
    runner.start()
    try:
        yield result
    finally:
        stop.set()
        runner.join(timeout=120)
        p.close()  # the ticker's producer, as `flinkwatch run` closes it
