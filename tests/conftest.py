"""Shared fixtures: one Spark session and (for integration tests) one Kafka broker per run."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence

import pytest
from pyspark.sql import DataFrame, SparkSession

from streaming.session import get_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    # Eight task slots: the real-time parse query keeps one task per raw partition running.
    session = get_session(master="local[8]", app_name="flinkwatch-tests")
    yield session
    session.stop()


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
import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def free_port_pair() -> int:
    """A port p such that p and p+1 (the KRaft controller) are free on 127.0.0.1."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with socket.socket() as s2:
            try:
                s2.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port pair")


class KafkaBroker:
    """The real single-node KRaft broker, started by scripts/stack.sh."""

    def __init__(self, data_dir: Path) -> None:
        self.port = free_port_pair()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "FLINKWATCH_KAFKA_PORT": str(self.port),
            "FLINKWATCH_KAFKA_DIR": str(data_dir),
            "FLINKWATCH_TOPICS": "flink.logs flink.metrics",
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


def wait_until(cond: Callable[[], bool], timeout: float = 120, what: str = "condition") -> None:
    """Poll until ``cond()`` holds; fail with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


# --- Spark standalone cluster ------------------------------------------------------------

import signal  # noqa: E402


def free_port_run(n: int) -> int:
    """A port p such that p, p+1, ..., p+n-1 are all free on 127.0.0.1."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port + n > 65535:
            continue
        socks = []
        try:
            for p in range(port + 1, port + n):
                s2 = socket.socket()
                socks.append(s2)
                s2.bind(("127.0.0.1", p))
        except OSError:
            continue
        finally:
            for s2 in socks:
                s2.close()
        return port
    raise RuntimeError(f"no run of {n} free ports")


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting to be reaped counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def children() -> dict[int, list[int]]:
    """Every process's children, by parent pid (from /proc)."""
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        kids.setdefault(ppid, []).append(int(d))
    return kids


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it."""
    kids, out, todo = children(), [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def cmdline(pid: int) -> str:
    """The command line of ``pid`` ('' once it is gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class SparkCluster:
    """A local Spark standalone master and workers, started by scripts/spark-cluster.sh.

    Each daemon runs in a process group of its own, which its executor JVM and Python
    workers share: :meth:`kill_worker` takes all of them down at once, as a lost host would.
    """

    def __init__(
        self, work_dir: Path, *, workers: int = 2, cores: int = 1, memory: str = "1g"
    ) -> None:
        self.workers = workers
        self.dir = work_dir
        self.port = free_port_run(1)
        self.ui_port = free_port_run(workers + 1)  # master UI, then one per worker
        self.url = f"spark://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "FLINKWATCH_SPARK_DIR": str(work_dir),
            "FLINKWATCH_SPARK_PORT": str(self.port),
            "FLINKWATCH_SPARK_UI_PORT": str(self.ui_port),
            "FLINKWATCH_SPARK_WORKERS": str(workers),
            "FLINKWATCH_WORKER_CORES": str(cores),
            "FLINKWATCH_WORKER_MEMORY": memory,
            "PYTHON": sys.executable,
        }

    def _script(self, *args: str) -> str:
        out = subprocess.run(
            [str(REPO / "scripts" / "spark-cluster.sh"), *args],
            env=self.env,
            check=True,
            stdout=subprocess.PIPE,
            text=True,
        )
        return out.stdout.strip()

    def up(self) -> SparkCluster:
        """Start the master and the workers; returns once every worker is registered."""
        url = self._script("up").splitlines()[-1]
        if url != self.url:
            raise RuntimeError(f"spark-cluster.sh printed {url!r}, expected {self.url!r}")
        return self

    def down(self) -> None:
        """Stop every daemon with its executors (logs and work dirs are kept)."""
        self._script("down")

    def worker_pid(self, i: int) -> int:
        """Pid (and process group) of worker ``i`` (1-based)."""
        return int((self.dir / f"worker-{i}.pid").read_text())

    def worker_ui_port(self, i: int) -> int:
        """Web UI port of worker ``i``; executor log URLs name it."""
        return self.ui_port + i

    def kill_worker(self, i: int) -> None:
        """SIGKILL worker ``i``'s process group (worker, executor, Python workers)."""
        pid = self.worker_pid(i)
        os.killpg(pid, signal.SIGKILL)
        wait_until(lambda: not alive(pid), timeout=30, what=f"worker {i} to die")

    def group(self, i: int) -> list[int]:
        """Live processes of worker ``i``'s process group (worker, executor, Python workers)."""
        pgid, out = self.worker_pid(i), []
        for d in os.listdir("/proc"):
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[2] == str(pgid) and fields[0] != "Z":
                out.append(int(d))
        return out

    def executors(self, i: int) -> dict[str, int]:
        """Executor JVMs that worker ``i`` runs now: executor id → pid."""
        out: dict[str, int] = {}
        for pid in children().get(self.worker_pid(i), []):
            args = cmdline(pid).split()
            if "--executor-id" in args and alive(pid):
                out[args[args.index("--executor-id") + 1]] = pid
        return out
