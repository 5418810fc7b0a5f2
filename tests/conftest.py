"""Shared fixtures: one Spark session and (for integration tests) one Kafka broker per run."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping, Sequence

import pytest
from pyspark.sql import DataFrame, SparkSession

from streaming.session import STACK, driver_java, get_session, stop_session

#: ``--cpu-report FILE``: each test's CPU seconds (docs/development.md).
pytest_plugins = ("tests.cpu_report",)

#: The files of several minutes each (real processes: JVM starts, kills, a Spark cluster).
LONGEST = (
    "test_delivery_crash.py",
    "test_spark_cluster.py",
    "test_kafka_e2e.py",
    "test_kafka_silence.py",
)


def _jvm(item: pytest.Item) -> bool:
    """Whether ``item`` runs Spark or Kafka: seconds to minutes, where the rest takes ms."""
    return "spark" in getattr(item, "fixturenames", ()) or any(
        item.get_closest_marker(name) is not None for name in ("spark", "kafka")
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest files first, the other integration files, Spark's, then the rest.

    ``make test`` hands whole files to two workers in this order (``--no-loadscope-reorder``:
    xdist would otherwise put the files with the most tests first): started first, the long
    files overlap each other and the quick ones fill in behind them, where one started
    last would run on alone at the end. The files of Spark tests (tens of seconds each)
    come before the unit tests' (well under a second each) for the same reason: in
    collection order they came last, and the two workers ended on them.
    """

    def file_of(item: pytest.Item) -> str:
        return item.nodeid.split("::", 1)[0]

    # Ranked by file, so that a file's tests stay together and in their order.
    jvm_files = {file_of(item) for item in items if _jvm(item)}

    def rank(item: pytest.Item) -> int:
        path = file_of(item)
        if path.rsplit("/", 1)[-1] in LONGEST:
            return 0
        if path.startswith("tests/integration/"):
            return 1
        return 2 if path in jvm_files else 3

    items.sort(key=rank)


#: The driver JVMs of the tests' ``flinkwatch run`` processes: the JIT's first tier only
#: (:data:`RUN_SPARK_OPTIONS`), from the class archive as every local session
#: (streaming.session.driver_java).
_C1_ONLY = driver_java("local", "-XX:TieredStopAtLevel=1")


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    # Eight task slots: the real-time parse query keeps one task per raw partition running.
    # Tests stop brokers (a restart, a module's own broker): Spark keeps an idle producer
    # 10 minutes by default, retrying the stopped broker once a second into later tests'
    # output. Idle producers are closed within seconds here instead.
    session = get_session(
        master="local[8]",
        app_name="flinkwatch-tests",
        extra={
            "spark.kafka.producer.cache.timeout": "5s",
            "spark.kafka.producer.cache.evictorThreadRunInterval": "2s",
            # Both JIT tiers, as every local session (streaming.session.driver_java): a
            # worker's session lives the whole suite, and most of its CPU is Spark analysing
            # the plans the tests build, which C2's code does in half the time once it has
            # compiled (a chain of 60 projections: 0.20 s against 0.40 with C1 alone, and
            # less CPU over 40 chains, compiles included: 14.4 s against 18.3). Measured on
            # tests/streaming and tests/detectors (-n 2), interleaved: 347 and 332 s, 667 and
            # 644 CPU s, against 382 and 368 s, 723 and 704 CPU s with C1 alone, which one
            # file alone (tests/streaming/test_scenarios.py) had favoured.
            "spark.driver.extraJavaOptions": driver_java("local"),
        },
    )
    yield session
    stop_session(session)


#: ``spark.options`` of the tests' ``flinkwatch run`` processes: their driver JVM with the
#: JIT's first tier only, unlike the tests' own session above. A run here lasts one to three
#: minutes, where C2's compiles cost more CPU than they save: a 70-s run against a local
#: broker took 58.4 CPU s with it, 71.0 without (issue #34). The live job keeps C2 (at
#: 494 records/s, C1 alone cost 1.14 cores against 0.78: bench/README.md, F).
RUN_SPARK_OPTIONS = {"spark.driver.extraJavaOptions": _C1_ONLY}
#: The same for a driver on a standalone cluster's master: its class path is Spark's alone
#: (streaming.session.get_session), and the JVM would refuse the archive with a warning.
#: Its executors too: in the cluster test's two minutes, C2 took 42.5 of their 76.1 CPU s
#: (measured alone, issue #34).
CLUSTER_RUN_SPARK_OPTIONS = {
    "spark.driver.extraJavaOptions": driver_java("spark://cluster", "-XX:TieredStopAtLevel=1"),
    "spark.executor.extraJavaOptions": f"{STACK} -XX:TieredStopAtLevel=1",
}
#: The JVM options of the tests' own servers (the standalone cluster's master and workers,
#: the Kafka brokers, HDFS and the S3 API server): the JIT's first tier only, as the tests'
#: drivers. They serve a few minutes of little traffic, where C2 took about half of their
#: CPU (the cluster test, measured alone: 8.8 of the daemons' 16.0 CPU s, 4.6 of its
#: broker's 10.1).
TEST_SERVER_JAVA = "-XX:TieredStopAtLevel=1"
#: The environment of a test's own process that starts a Spark session and asks it a few
#: things (a user's configuration precedence, what the UI shows): its JVMs with the JIT's
#: first tier only, set beside Spark's configuration, which is what such a test reads.
#: The JVM says "Picked up JAVA_TOOL_OPTIONS" on its stderr. Measured on
#: tests/streaming/test_spark_conventions.py: 17.6 CPU s against 11.7.
SHORT_JVM_ENV = {"JAVA_TOOL_OPTIONS": TEST_SERVER_JAVA}


RECORD_SCHEMA = "value string, topic string, partition int, offset long, kafka_ts timestamp"


def records_df(
    spark: SparkSession,
    values: Sequence[str | None],
    kafka_ts: dt.datetime | None = None,
    topic: str = "flink.logs",
) -> DataFrame:
    """Records as the Kafka source hands them to the parser (offset = position)."""
    rows = [(v, topic, 0, i, kafka_ts) for i, v in enumerate(values)]
    return spark.createDataFrame(rows, RECORD_SCHEMA)


# --- Kafka -------------------------------------------------------------------------

import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def python_m(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m <module> <args>`` from the checkout, as a user runs it; output captured."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


# Re-exported: the tests import them from here.
from lab.procs import (  # noqa: E402
    SparkCluster,
    alive,
    children,
    cmdline,
    descendants,
    free_port_pair,
    free_port_run,
    kill_all,
    wait_until,
    wait_while_progressing,
)

__all__ = [
    "SparkCluster",
    "alive",
    "children",
    "cmdline",
    "descendants",
    "free_port_pair",
    "free_port_run",
    "kill_all",
    "wait_until",
    "wait_while_progressing",
]


class KafkaBroker:
    """The real single-node KRaft broker, started by scripts/stack.sh."""

    def __init__(
        self,
        data_dir: Path,
        properties: Mapping[str, str] | None = None,
        topics: Sequence[str] = ("flink.logs", "flink.metrics"),
    ) -> None:
        """A broker in ``data_dir``; ``properties`` win over stack.sh's server.properties."""
        self.port = free_port_pair()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "FLINKWATCH_KAFKA_PORT": str(self.port),
            "FLINKWATCH_KAFKA_DIR": str(data_dir),
            "FLINKWATCH_TOPICS": " ".join(topics),
            "FLINKWATCH_KAFKA_PROPERTIES": "\n".join(
                f"{k}={v}" for k, v in (properties or {}).items()
            ),
            "FLINKWATCH_KAFKA_JAVA_OPTS": TEST_SERVER_JAVA,
            "PYTHON": sys.executable,
        }

    def _stack(self, *args: str) -> None:
        subprocess.run([str(REPO / "scripts" / "stack.sh"), *args], env=self.env, check=True)

    def start(self) -> None:
        self._stack("up")

    def stop(self) -> None:
        self._stack("down")

    def purge(self) -> None:
        self._stack("down", "--purge")

    def create_topics(self, *topics: str, partitions: int = 2) -> None:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "streaming.cli",
                "kafka",
                "create-topics",
                "--bootstrap",
                self.bootstrap,
                "--partitions",
                str(partitions),
                *topics,
            ],
            check=True,
        )

    def produce(self, topic: str, values: Sequence[bytes | str], key: bytes | None = None) -> None:
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all", linger_ms=5)
        try:
            for v in values:
                producer.send(topic, value=v.encode() if isinstance(v, str) else v, key=key)
            producer.flush(timeout=30)
        finally:
            producer.close()


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    broker = KafkaBroker(tmp_path_factory.mktemp("kafka"))
    broker.start()
    yield broker
    broker.purge()
