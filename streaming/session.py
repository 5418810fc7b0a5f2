"""The one place a SparkSession is configured."""

from __future__ import annotations

import logging
import os
import re
import sys
import time
from pathlib import Path

from pyspark.sql import SparkSession

from conf import SparkConfig

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parent.parent
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def connector_jars(jar_dir: str | None = None) -> list[str]:
    """The Spark Kafka connector jars fetched by ``scripts/stack.sh fetch``.

    Raises:
        FileNotFoundError: when the jars were never fetched; the message says how.
    """
    stack = os.environ.get("FLINKWATCH_STACK_DIR", str(REPO / ".stack"))
    d = Path(jar_dir or os.environ.get("FLINKWATCH_SPARK_JARS", f"{stack}/jars/spark-kafka"))
    jars = sorted(str(p) for p in d.glob("*.jar"))
    if not jars:
        msg = (
            f"no Spark Kafka connector jars in {d}: run `scripts/stack.sh fetch` (or `make setup`)"
        )
        raise FileNotFoundError(msg)
    return jars


def cluster_settings(cfg: SparkConfig) -> dict[str, str]:
    """Spark settings from the ``spark`` config section beyond master and partitions.

    Executor sizes matter only on a cluster (in ``local[N]`` the executor is the driver);
    ``spark.options`` comes last so that it can set, or override, anything.
    """
    out: dict[str, str] = {}
    if cfg.executor_memory:
        out["spark.executor.memory"] = cfg.executor_memory
    if cfg.executor_cores:
        out["spark.executor.cores"] = str(cfg.executor_cores)
    return {**out, **cfg.options}


def task_slots(master: str) -> int | None:
    """Task slots of a ``local[N]`` master (``None`` for a cluster or ``local[*]``)."""
    m = re.fullmatch(r"local(?:\[(\d+|\*)(?:,\s*\d+)?\])?", master.strip())
    if m is None:
        return None
    if m.group(1) is None:
        return 1
    return None if m.group(1) == "*" else int(m.group(1))


def sized_master(master: str, needed: int) -> str:
    """``master`` with at least ``needed`` task slots when it is a local master.

    Real-time mode pins one long-running task per source partition for the whole batch;
    with fewer slots the remaining partitions silently make no progress and the detector
    queries get none. Local task slots are threads, so more of them than cores is fine:
    the pinned tasks mostly wait on Kafka.
    """
    if not master.strip().startswith("local"):
        return master
    have = task_slots(master) or os.cpu_count() or 1
    if have >= needed:
        return master
    log.info(
        "spark.master %s has %d task slots; the queries need %d: using local[%d]",
        master,
        have,
        needed,
        needed,
    )
    return f"local[{needed}]"


def cluster_slots(spark: SparkSession, wait_s: float = 30.0) -> int:
    """Task slots of the cluster behind ``spark``, once its first executors registered."""
    sc = spark.sparkContext
    deadline = time.monotonic() + wait_s
    # The driver counts itself among the block managers; executors add one each.
    while sc._jsc.sc().getExecutorMemoryStatus().size() < 2 and time.monotonic() < deadline:  # noqa: SLF001
        time.sleep(0.5)
    return int(sc.defaultParallelism)


def get_session(
    *,
    master: str = "local[2]",
    shuffle_partitions: int = 2,
    timezone: str = "UTC",
    app_name: str = "flinkwatch",
    require_kafka: bool = True,
    extra: dict[str, str] | None = None,
    state_memory_mb: int | None = 256,
) -> SparkSession:
    """Build (or return) the process's SparkSession with flinkwatch's settings.

    The Kafka connector comes from local jars (``spark.jars``), never downloaded at
    run time; state lives in RocksDB, which ``transformWithState`` requires.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if master.startswith("local"):
        # Everything runs in this process: bind it to loopback (and spare the log Spark's
        # warning that the host name resolves to a loopback address).
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.session.timeZone", timezone)
        .config("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
        # Each batch commits a changelog of what changed instead of a RocksDB checkpoint
        # of every store (snapshots are taken in the background).
        .config("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")
        # Checkpoint files through Hadoop's FileSystem API, not FileContext: on a local
        # disk without Hadoop's native library, FileContext's rename runs `readlink` in a
        # forked process for every file (offsets, commits, changelogs, snapshots), about
        # 90 ms of CPU per micro-batch of a small stateful query (measured). A local or
        # HDFS rename is atomic either way.
        .config(
            "spark.sql.streaming.checkpointFileManagerClass",
            "org.apache.spark.sql.execution.streaming.checkpointing."
            "FileSystemBasedCheckpointFileManager",
        )
        # Malformed input must never fail the query: without ANSI, a bad cast is null.
        .config("spark.sql.ansi.enabled", "false")
        .config("spark.sql.streaming.metricsEnabled", "true")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.ui.enabled", os.environ.get("FLINKWATCH_SPARK_UI", "false"))
        .config("spark.driver.memory", os.environ.get("FLINKWATCH_DRIVER_MEMORY", "2g"))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        # The parse projection (dozens of regexes, one expression per field) is too large
        # for one whole-stage method: Janino gives up on the 64 KB limit, logs the whole
        # generated class and Spark falls back, on every micro-batch (there is no cache of
        # failed compiles). Without whole-stage fusion each expression is compiled into its
        # own method once and cached; the queries here are projections, where fusion gains
        # little (measured: bench/README.md).
        .config("spark.sql.codegen.wholeStage", "false")
        # Java's regex engine recurses per repetition of a group; a long multi-line record
        # (a deep stack trace) can overflow the default 1 MiB thread stack.
        .config("spark.driver.extraJavaOptions", "-Xss16m")
        .config("spark.executor.extraJavaOptions", "-Xss16m")
    )
    try:
        builder = builder.config("spark.jars", ",".join(connector_jars()))
    except FileNotFoundError:
        # Replay and parse read files only; the job itself cannot start without the jars.
        if require_kafka:
            raise
    if state_memory_mb is not None:
        # Every batch rewrites each active entity's state and RocksDB's memtables keep the
        # old versions until they flush: without a budget the soak saw ~5 MB a minute at a
        # constant key count, up to RocksDB's per-instance memtable cap times the number of
        # stores. One shared budget caps memtables and block cache for every instance.
        builder = builder.config(
            "spark.sql.streaming.stateStore.rocksdb.boundedMemoryUsage", "true"
        ).config("spark.sql.streaming.stateStore.rocksdb.maxMemoryUsageMB", str(state_memory_mb))
    for k, v in (extra or {}).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    # getOrCreate hands back an existing session as it is: apply what may differ per run.
    spark.conf.set("spark.sql.session.timeZone", timezone)
    spark.conf.set("spark.sql.shuffle.partitions", str(shuffle_partitions))
    spark.sparkContext.setLogLevel(os.environ.get("FLINKWATCH_SPARK_LOG_LEVEL", "WARN"))
    _quiet(spark)
    return spark


# Spark loggers that repeat themselves at WARN on every micro-batch in normal operation;
# flinkwatch's own progress log says the same once per interval.
_NOISY = (
    # "Current batch is falling behind": a detect batch longer than a short trigger.
    "org.apache.spark.sql.execution.streaming.runtime.ProcessingTimeExecutor",
    "org.apache.spark.sql.execution.streaming.runtime.ResolveWriteToStream",
    "org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution",
    "org.apache.spark.scheduler.DAGScheduler",
    "org.apache.spark.sql.execution.python.streaming.TransformWithStateInPySparkStateServer",
    # Warns for hop files it already removed (they are gone: checked in the demo runs).
    "org.apache.spark.sql.execution.streaming.runtime.FileStreamSource$SourceFileRemover",
    # Prints the whole plan when it truncates a plan's string form.
    "org.apache.spark.util.SparkStringUtils",
)


def _quiet(spark: SparkSession) -> None:
    jvm = spark.sparkContext._jvm  # noqa: SLF001 - log4j levels are only reachable here
    if jvm is None:
        return
    level = jvm.org.apache.logging.log4j.Level.ERROR
    for name in _NOISY:
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, level)
