"""The one place a SparkSession is configured, and the one way a command asks for it.

Every command that runs the detectors asks for its session as a :class:`SessionSpec`
started with :meth:`SessionSpec.start`: ``flinkwatch run`` (and the demo, which runs it)
and the benchmark's runs from the config's ``spark`` section (:meth:`SessionSpec.of`,
the live run sized for its queries by :func:`streaming.live.live_session`), a replay with
its own (:meth:`SessionSpec.replay`). What every session gets is :func:`get_session`'s.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from py4j.java_gateway import JavaClass, JavaMember
from pyspark import SparkConf, SparkContext
from pyspark.find_spark_home import _find_spark_home
from pyspark.java_gateway import ensure_callback_server_started, launch_gateway
from pyspark.sql import SparkSession

from conf import AppConfig, SparkConfig
from streaming import checkpoints, spark_conf

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parent.parent
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
#: Hadoop's local file system with an in-JVM chmod (streaming/jvm), for file:// paths.
LOCAL_FS = "flinkwatch.hadoop.NioLocalFileSystem"


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


def s3a_jars() -> list[str]:
    """Hadoop's S3A connector and Spark's object-store checkpoint manager, if fetched.

    ``scripts/stack.sh fetch`` puts them (~13 MB) in ``jars/hadoop-aws``; on the classpath
    of every session, as they cost nothing until an ``s3a://`` path is used (a session
    started in the same time and JVM CPU with them as without, measured; on the driver's
    own class path where it can: :func:`archive_class_path`). Without them an ``s3a://``
    checkpoint location fails at the first query start, naming the class.
    """
    stack = os.environ.get("FLINKWATCH_STACK_DIR", str(REPO / ".stack"))
    return sorted(str(p) for p in Path(stack, "jars", "hadoop-aws").glob("*.jar"))


def local_fs_jar() -> str | None:
    """The jar of our local file system for Hadoop, if ``scripts/stack.sh fetch`` built it.

    Hadoop's, without its native library, starts a ``chmod`` process for each file it
    creates (streaming/jvm/NioLocalFileSystem.java says why it matters).
    """
    stack = os.environ.get("FLINKWATCH_STACK_DIR", str(REPO / ".stack"))
    jar = Path(
        os.environ.get("FLINKWATCH_HADOOP_JAR", f"{stack}/jars/flinkwatch/flinkwatch-hadoop.jar")
    )
    return str(jar) if jar.is_file() else None


def class_archive() -> Path | None:
    """The JVM's class-data archive, if ``scripts/stack.sh fetch`` made it.

    Made by a replay (``scripts/class_archive.py`` says what it holds and what it saves);
    every driver JVM on the same class path starts from it (:func:`driver_java`). A stale
    one (another JDK, other jars) is refused by the JVM, which starts as without it
    (:func:`archive_options`).
    """
    stack = os.environ.get("FLINKWATCH_STACK_DIR", str(REPO / ".stack"))
    path = Path(os.environ.get("FLINKWATCH_CLASS_ARCHIVE", f"{stack}/cds/replay.jsa"))
    return path if path.is_file() else None


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


#: The driver's heap for ``flinkwatch run``, at most: 1 GiB holds a 2,000-job fleet at
#: 10,000 records/s (the state is in RocksDB, off the heap). Under G1 a larger one was
#: resident memory for nothing (issue #34, at 10,000 records/s: peak RSS 3.68 GiB against
#: 2.67 with 1 GiB); the serial collector (:data:`COLLECTOR`) commits what the live heap
#: needs. ``FLINKWATCH_DRIVER_MEMORY`` overrides it.
LIVE_DRIVER_MEMORY = "1g"
#: A replay's: a long input's parse is batch work over the whole file at once.
REPLAY_DRIVER_MEMORY = "2g"
#: ``spark.sql.maxPlanStringLength`` (see :func:`_display_settings`).
MAX_PLAN_CHARS = 2000
#: PySpark's DataFrame debugging records the Python call site of every column function in
#: the JVM (a look-up of the active session, of the setting and two calls to set and clear
#: it), for error messages that name the line of flinkwatch's code that built a failing
#: expression: two thirds of the Py4J round trips that build the parse's plan (issue #34,
#: the small real run: 30,307 round trips without this setting, 10,647 with it). PySpark
#: reads it once per process, from the first session that builds a column.
NO_CALL_SITES = {"spark.python.sql.dataFrameDebugging.enabled": "false"}
#: The parse's ``upper`` (a record's level) and ``lower`` (a memory kill's reason) through
#: the JVM's case mapping, not ICU's. Spark's ICU path loads a class whose static
#: initialiser title-cases every Unicode code point into a table, once per JVM, before the
#: first record's level is upper-cased: 1.5 s of one thread at every start (issue #34,
#: measured alone in a fresh session: the first ``upper`` 2.1 s with ICU, 0.5 s without),
#: inside a short replay's one pass and every test's first parse. ASCII text, what levels
#: and reasons are, maps alike either way; other text then follows the JVM's default
#: locale (``String.toUpperCase``), as Spark 3 did.
JVM_CASE_MAPPINGS = {"spark.sql.icu.caseMappings.enabled": "false"}


@dataclass(frozen=True)
class SessionSpec:
    """What a command asks of its Spark session (:func:`get_session`'s arguments).

    Example:
        >>> spark = SessionSpec.of(cfg).start()  # doctest: +SKIP
    """

    master: str = "local[2]"
    shuffle_partitions: int = 2
    timezone: str = "UTC"
    require_kafka: bool = True
    extra: Mapping[str, str] = field(default_factory=dict)
    state_memory_mb: int | None = 256
    ui_port: int | None = None
    driver_memory: str = LIVE_DRIVER_MEMORY

    @classmethod
    def of(cls, cfg: AppConfig) -> SessionSpec:
        """The session the config's ``spark`` section describes (a live run, the bench's)."""
        sp = cfg.spark
        return cls(
            master=sp.master,
            shuffle_partitions=sp.shuffle_partitions,
            timezone=cfg.parsing.log_timezone,
            extra=cluster_settings(sp),
            state_memory_mb=sp.state_memory_mb,
            ui_port=sp.ui_port,
        )

    @classmethod
    def replay(cls, cfg: AppConfig, extra: Mapping[str, str]) -> SessionSpec:
        """A replay's: batch work on this machine, whatever ``spark.master`` says.

        No Kafka, no state store (so no memory budget for it) and no UI; ``extra``: the
        replay's own settings (:func:`streaming.replay_session.session_settings`).
        """
        return cls(
            shuffle_partitions=cfg.spark.shuffle_partitions,
            timezone=cfg.parsing.log_timezone,
            require_kafka=False,
            state_memory_mb=None,
            extra=extra,
            driver_memory=REPLAY_DRIVER_MEMORY,
        )

    def sized(self, master: str) -> SessionSpec:
        """The same session on another master (a live run's, raised to fit its queries)."""
        return replace(self, master=master)

    def start(self) -> SparkSession:
        """Build (or return) the process's session as asked (:func:`get_session`)."""
        return get_session(
            master=self.master,
            shuffle_partitions=self.shuffle_partitions,
            timezone=self.timezone,
            require_kafka=self.require_kafka,
            extra=dict(self.extra),
            state_memory_mb=self.state_memory_mb,
            ui_port=self.ui_port,
            driver_memory=self.driver_memory,
        )


def get_session(
    *,
    master: str = "local[2]",
    shuffle_partitions: int = 2,
    timezone: str = "UTC",
    app_name: str = "flinkwatch",
    require_kafka: bool = True,
    extra: dict[str, str] | None = None,
    state_memory_mb: int | None = 256,
    ui_port: int | None = None,
    driver_memory: str = LIVE_DRIVER_MEMORY,
) -> SparkSession:
    """Build (or return) the process's SparkSession with flinkwatch's settings.

    The Kafka connector comes from local jars (on the driver's class path where this
    process starts the JVM on a local master, else ``spark.jars``), never downloaded at
    run time; state lives in RocksDB, which ``transformWithState`` requires. What the
    user set in Spark's own configuration (``spark-submit --conf``,
    ``spark-defaults.conf``, ``PYSPARK_SUBMIT_ARGS``) wins over these settings, except
    the few detection needs (:mod:`streaming.spark_conf`). ``ui_port``: the Spark UI's
    port (``None``: no UI); it is read-only (no kill links). ``driver_memory``: the
    driver JVM's heap unless ``FLINKWATCH_DRIVER_MEMORY`` says otherwise.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if master.startswith("local"):
        # Everything runs in this process: bind it to loopback (and spare the log Spark's
        # warning that the host name resolves to a loopback address).
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    settings = {
        "spark.master": master,
        "spark.app.name": app_name,
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.sql.session.timeZone": timezone,
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
        # Each batch commits a changelog of what changed instead of a RocksDB checkpoint
        # of every store (snapshots are taken in the background).
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        # Checkpoint files through Hadoop's FileSystem API, not FileContext: on a local
        # disk without Hadoop's native library, FileContext's rename runs `readlink` in a
        # forked process for every file (offsets, commits, changelogs, snapshots), about
        # 90 ms of CPU per micro-batch of a small stateful query (measured). A local or
        # HDFS rename is atomic either way.
        # On S3 (no atomic rename) the pipeline picks another (checkpoints.use_file_manager).
        checkpoints.FILE_MANAGER_KEY: checkpoints.RENAMING,
        # Malformed input must never fail the query: without ANSI, a bad cast is null.
        "spark.sql.ansi.enabled": "false",
        "spark.sql.streaming.metricsEnabled": "true",
        **_display_settings(ui_port),
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        **NO_CALL_SITES,
        **JVM_CASE_MAPPINGS,
        # The parse projection (dozens of regexes, one expression per field) is too large
        # for one whole-stage method: Janino gives up on the 64 KB limit, logs the whole
        # generated class and Spark falls back, on every micro-batch (there is no cache of
        # failed compiles). Without whole-stage fusion each expression is compiled into its
        # own method once and cached; the queries here are projections, where fusion gains
        # little. Measured again with `python -m bench.parse_cost --conf
        # spark.sql.codegen.wholeStage=true` (issue #34): the log plans still fail to
        # compile, and the metric plan, which compiles, took more CPU than without fusion.
        "spark.sql.codegen.wholeStage": "false",
        "spark.executor.extraJavaOptions": STACK,
    }
    jars = _jars(require_kafka)
    if own_class_path(master, local_fs_jar()):
        # Our jar and these on the JVM's own class path (archive_class_path says why).
        settings["spark.driver.extraClassPath"] = archive_class_path()
        settings["spark.hadoop.fs.file.impl"] = LOCAL_FS
    elif jars:
        settings["spark.jars"] = ",".join(jars)
    settings["spark.driver.extraJavaOptions"] = driver_java(master)
    settings.update(_memory_settings(driver_memory, state_memory_mb))
    settings.update(extra or {})
    merged = _start_context(settings)
    spark = SparkSession.builder.config(map=merged.settings).getOrCreate()
    # getOrCreate hands back an existing session as it is: apply what may differ per run.
    for key in ("spark.sql.session.timeZone", "spark.sql.shuffle.partitions"):
        spark.conf.set(key, merged.settings[key])
    spark.sparkContext.setLogLevel(os.environ.get("FLINKWATCH_SPARK_LOG_LEVEL", "WARN"))
    _quiet(spark)
    _pin_classes(spark)
    return spark


def stop_session(spark: SparkSession) -> None:
    """Stop ``spark`` and the state stores' maintenance timer it leaves in the JVM.

    The timer belongs to the JVM, not to the session: stopped with the session, it fires
    once more within ``spark.sql.streaming.stateStore.maintenanceInterval`` (60 s) if the
    JVM still lives, and Spark logs a warning with a Java stack trace ("SparkEnv not
    active, cannot do maintenance on StateStores"): in a run's log when its shutdown
    waits on a delivery, in the tests' output whenever a worker's session stops before its
    last file ends. Stopped after the session, when no query can start it again.
    """
    jvm = spark.sparkContext._jvm  # noqa: SLF001 - the JVM outlives the session
    spark.stop()
    if jvm is not None:
        jvm.org.apache.spark.sql.execution.streaming.state.StateStore.stopMaintenanceTask()


def _display_settings(ui_port: int | None) -> dict[str, str]:
    """What the Spark UI, the console and plans show (``ui_port``: ``None`` for no UI)."""
    return {
        "spark.ui.showConsoleProgress": "false",
        "spark.ui.enabled": "false" if ui_port is None else "true",
        **({} if ui_port is None else {"spark.ui.port": str(ui_port)}),
        # Anyone who reaches the UI could otherwise kill the detect query's jobs.
        "spark.ui.killEnabled": "false",
        # Plans print the Kafka options, each shown as "*********(redacted)" when its key or
        # value matches this or spark.redaction.regex (secret|password|token|access.key:
        # the JAAS config carries "password=", the ssl.*.password keys). An inline client
        # key (ssl.keystore.key) matches neither; "url" is Spark's own default here.
        "spark.sql.redaction.options.regex": r"(?i)url|ssl[.]keystore[.]key|sasl[.]jaas",
        # Spark writes every SQL execution's plan out in full when it starts (for the UI's
        # SQL tab, UI or not): the parse plan's is 157,000 characters, 32 ms of the driver's
        # CPU at each parse micro-batch; cut at this length, 5 to 7 ms (measured alone,
        # issue #34; at 494 records/s, with the real-time parse's long batches, the saving
        # is within the process's noise). The SQL tab and plans in error messages show the
        # plan's first lines, all a person reads of it.
        "spark.sql.maxPlanStringLength": str(MAX_PLAN_CHARS),
    }


def _memory_settings(driver_memory: str, state_memory_mb: int | None) -> dict[str, str]:
    """The driver's heap (``FLINKWATCH_DRIVER_MEMORY`` first) and the state store's budget."""
    out = {"spark.driver.memory": os.environ.get("FLINKWATCH_DRIVER_MEMORY", driver_memory)}
    if state_memory_mb is not None:
        # Every batch rewrites each active entity's state and RocksDB's memtables keep the
        # old versions until they flush: without a budget the soak saw ~5 MB a minute at a
        # constant key count, up to RocksDB's per-instance memtable cap times the number of
        # stores. One shared budget caps memtables and block cache for every instance.
        out["spark.sql.streaming.stateStore.rocksdb.boundedMemoryUsage"] = "true"
        out["spark.sql.streaming.stateStore.rocksdb.maxMemoryUsageMB"] = str(state_memory_mb)
    return out


# Java's regex engine recurses per repetition of a group; a long multi-line record (a deep
# stack trace) can overflow the default 1 MiB thread stack.
STACK = "-Xss16m"
#: The driver JVM's log4j2 configuration: Spark's quiet levels, lines in flinkwatch's format,
#: no startup notices (see the file).
LOG4J2 = Path(__file__).with_name("log4j2.properties")


#: The driver JVM's garbage collector: the serial one. The driver's live heap is ~200 MB;
#: G1 (the JVM's default on two cores) grew the 1 GiB heap to its maximum under the steady
#: micro-batches and kept ~80 MB of its own structures beside it: the JVM alone was 1.5
#: GiB. Measured with the serial collector (issue #34, `make bench`, two runs each):
#: the process tree's peak RSS 1.62-1.63 GiB at 494 records/s (G1: 2.18-2.23) and
#: 2.30-2.49 at 10,028 (G1: 2.70-2.82); flinkwatch's own CPU 0.685-0.689 cores at 494
#: (G1: 0.696-0.748), 1.46-1.47 at 10,028 (G1: 1.49-1.52), its collections in one thread
#: where G1's took 2 threads and concurrent work (25 CPU s an 8-minute run at 10,028
#: records/s against G1's 85); pages as fast (40/40 in all four runs); a replay and a
#: backlog no slower (11.7 / 102 s against 12.5 / 112, three runs each; 15,732 records/s
#: against 15,246 in the next minutes). Its pauses stop the driver for tens
#: of milliseconds, a few hundred at a full collection: nothing next to a page's seconds.
COLLECTOR = "-XX:+UseSerialGC"
#: Full collections in a row that give a grown heap back: the serial collector shrinks its
#: old generation at a full collection only, by none, a tenth, 40 % then all of what its
#: free ratio allows at successive ones, down to the heap's initial size.
GIVE_BACK_COLLECTIONS = 4


def give_back_heap(spark: SparkSession) -> int:
    """Collect the driver JVM's heap in full until the serial collector has shrunk it.

    Returns the bytes of heap given back. A backlog's micro-batches grow the heap to what
    they need, and the serial collector keeps it until a full collection, which a steady
    stream seldom brings: the process tree's RSS at 494 records/s peaked at 2.23 GiB after
    the bench's backlog in the same JVM, at 1.58-1.65 without one (issue #34). Measured in
    a fresh local session: a heap grown to 624 MB went back to 365 (its initial size), the
    JVM's RSS 872 to 650 MB, in 0.41 s of collections, the JVM stopped meanwhile. A JVM
    run with ``-XX:+DisableExplicitGC`` gives nothing back.
    """
    jvm = spark.sparkContext._jvm  # noqa: SLF001 - the driver's JVM
    assert jvm is not None
    runtime = jvm.java.lang.Runtime.getRuntime()
    before = int(runtime.totalMemory())
    for _ in range(GIVE_BACK_COLLECTIONS):
        jvm.java.lang.System.gc()
    return before - int(runtime.totalMemory())


def archive_options(archive: Path) -> tuple[str, ...]:
    """The driver JVM's options to start from ``archive``, quietly.

    A JVM that cannot use the archive (a stale one; another class path, such as a user's
    own ``spark.driver.extraClassPath``) starts as without it. Its warning would say
    nothing an operator acts on, in every start's log: it is off.
    """
    return (f"-XX:SharedArchiveFile={archive}", "-Xlog:cds=off,cds+dynamic=off")


def _jars(require_kafka: bool) -> list[str]:
    """The Kafka connector's jars and S3A's (:func:`connector_jars`, :func:`s3a_jars`).

    Raises:
        FileNotFoundError: no connector, and ``require_kafka``.
    """
    try:
        return connector_jars() + s3a_jars()
    except FileNotFoundError:
        # Replay and parse read files only; the job itself cannot start without the jars.
        if require_kafka:
            raise
        return []


def archive_class_path() -> str:
    """The driver JVM's own class path where this process starts it on a local master.

    Our file system's jar (:func:`local_fs_jar`), then the connector's and S3A's: on the
    JVM's own class path, not in ``spark.jars``, as spark-submit reads the jars through
    the file system ours replaces, and from ``spark.jars`` the executor copies each (41)
    into its work directory at its first task and starts a ``chmod`` process for each
    (the small real run's replay 9.51 s (9.40-10.01), 13.0 CPU s, against 10.69
    (10.21-11.41), 14.4 CPU s, four runs each interleaved; issue #34). The class-data
    archive is made on this path, and ``scripts/stack.sh`` makes it again when the path
    changes: a JVM on another refuses it, silently, and a replay starts 3.5-4 s slower.
    Empty without our jar.
    """
    own = local_fs_jar()
    return "" if own is None else os.pathsep.join([own, *_jars(require_kafka=False)])


def own_class_path(master: str, own_jar: str | None) -> bool:
    """Whether the driver JVM gets the archive's class path (:func:`archive_class_path`).

    Only where this process starts the JVM (no ``PYSPARK_GATEWAY_PORT``: not under
    ``spark-submit``), on a local master, where :func:`get_session` puts our jar on it.
    """
    started_here = "PYSPARK_GATEWAY_PORT" not in os.environ
    return own_jar is not None and master.startswith("local") and started_here


def driver_java(master: str, *extra: str) -> str:
    """The driver JVM's options: :func:`java_options` (with ``extra``) and the class archive.

    The archive only where the JVM on ``master`` gets its class path
    (:func:`own_class_path`). Measured
    (issue #34, a local session with the Kafka connector, five runs in two sets): the
    session started in 3.4-3.7 s against 5.0-5.8 and its first query took 1.6-1.8 s
    against 2.3-2.7.
    """
    archive = class_archive() if own_class_path(master, local_fs_jar()) else None
    return java_options(*extra, *([] if archive is None else archive_options(archive)))


def java_options(*extra: str) -> str:
    """The driver JVM's options: :data:`STACK`, :data:`COLLECTOR`, :data:`LOG4J2`, ``extra``."""
    return " ".join((STACK, COLLECTOR, f"-Dlog4j2.configurationFile={LOG4J2.as_uri()}", *extra))


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
    # Warns each time it cuts a plan at spark.sql.maxPlanStringLength (MAX_PLAN_CHARS):
    # at every SQL execution's start, so every micro-batch.
    "org.apache.spark.sql.catalyst.util.StringUtils",
)


@contextmanager
def query_settings(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """Session settings for the queries started inside, and only for them.

    A streaming query runs on a copy of its session's settings taken when it starts
    (Spark clones the session), so what is set around its ``start()`` stays its own; a
    batch query uses the ones in force while it runs. The session's values (the user's,
    if they set any) are put back after.
    """
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


#: The JVM classes PySpark looks up at every column function, sequence, select and cast
#: to a type it builds (``sc._jvm.PythonUtils``, ``getattr(sc._jvm,
#: "org.apache.spark.sql.functions")``, the active session...).
PINNED_CLASSES = (
    "org.apache.spark.sql.functions",
    "functions",
    "PythonUtils",
    "PythonSQLUtils",
    "org.apache.spark.sql.classic.SparkSession",
)


class KnownClass(JavaClass):  # type: ignore[misc]
    """A JVM class whose static methods are looked up once (then kept as attributes).

    Py4J asks the JVM what ``cls.name`` is at every access: a round trip in which the JVM
    copies the class's whole method table (``functions`` has hundreds). A static method
    stays what it is: the first answer serves every later call. Fields are asked anew.
    """

    def __getattr__(self, name: str) -> Any:
        member = super().__getattr__(name)
        if isinstance(member, JavaMember | JavaClass):
            self.__dict__[name] = member
        return member


def _pin_classes(spark: SparkSession) -> None:
    """Resolve :data:`PINNED_CLASSES` once, as attributes of the process's JVM view.

    Py4J resolves a class's name on every access, a round trip to the JVM; a short name is
    tried in each of PySpark's imported packages in turn, and each miss makes the class
    loader search every jar of Spark's class path. Then each function is looked up on the
    class, another round trip (:class:`KnownClass`). Building a replay's parse did the two
    ~5,900 times (issue #34, the small real run: 1.5 s of the driver's time, 0.3-0.9 ms for
    a short name, 0.2 for a full one, 0.3 for a function). An attribute of the view is
    found before Py4J's ``__getattr__`` is asked: once resolved, a name costs nothing. The
    view lives as long as the JVM it names.
    """
    jvm = spark.sparkContext._jvm  # noqa: SLF001 - the view PySpark's own calls go through
    if jvm is None:
        return
    known: dict[str, KnownClass] = {}
    for name in PINNED_CLASSES:
        if name in vars(jvm):
            continue
        found = getattr(jvm, name)
        fqn = found._fqn  # noqa: SLF001 - a short name and a full one: one class, one cache
        if fqn not in known:
            known[fqn] = KnownClass(fqn, found._gateway_client)  # noqa: SLF001
        setattr(jvm, name, known[fqn])


def _quiet(spark: SparkSession) -> None:
    jvm = spark.sparkContext._jvm  # noqa: SLF001 - log4j levels are only reachable here
    if jvm is None:
        return
    level = jvm.org.apache.logging.log4j.Level.ERROR
    for name in _NOISY:
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, level)


# --- the JVM: its signals and its output ---------------------------------------------

#: What PySpark's transformWithState driver worker print()s at every start of a query
#: (pyspark/sql/streaming/transform_with_state_driver_worker.py): five lines, each with an
#: empty one after it, that Spark copies from the worker's stdout to the JVM's stderr.
WORKER_CHATTER = b"Streaming TransformWithStateInPandas Python worker"
#: What the JVM itself prints at every start (Spark 4 runs it with the Vector API's
#: incubator module): nothing a user can act on.
JVM_NOTICE = b"WARNING: Using incubator modules: "


def _start_context(settings: Mapping[str, str]) -> spark_conf.Merged:
    """Create the SparkContext on a JVM started in a session of its own (if none runs yet).

    PySpark starts its JVM in the driver's process group. A signal to the whole group
    (Ctrl-C, ``timeout``, a supervisor's SIGTERM) then reaches the JVM and the Python
    workers it starts too: the JVM shuts down under the driver, whose next Py4J call
    fails ("Answer from Java side is empty"), before the driver could stop its queries.
    In a session of its own the JVM hears only the driver, which stops it when it is
    done; it still exits when the driver dies, as its stdin (a pipe from the driver)
    closes. Its stderr comes through :func:`_relay`, which drops
    :data:`WORKER_CHATTER` and :data:`JVM_NOTICE`. Under ``spark-submit`` the JVM runs
    first and this does nothing (:func:`on_jvm_signals` covers that layout).

    PySpark also points SIGINT at a handler that cancels every job and raises
    ``KeyboardInterrupt`` in the main thread; the caller's handler is put back.

    Returns:
        ``settings`` under the user's Spark configuration (:func:`spark_conf.merge`), read
        once per process: from the files and ``PYSPARK_SUBMIT_ARGS`` before the JVM is
        started, or, under spark-submit, from the JVM's system properties, where
        spark-submit has put ``--conf`` and ``spark-defaults.conf``.
    """
    global _USERS
    if SparkContext._gateway is not None:  # noqa: SLF001 - the JVM runs already
        return spark_conf.merge(settings, _USERS or {})
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ  # spark-submit's JVM runs already
    if not submitted:
        _USERS = spark_conf.users_conf({"SPARK_HOME": _find_spark_home(), **os.environ})
    merged = spark_conf.merge(settings, _USERS or {})
    read, write = os.pipe()
    threading.Thread(target=_relay, args=(read,), name="flinkwatch-jvm-stderr", daemon=True).start()
    try:
        gateway = launch_gateway(
            SparkConf().setAll(list(merged.settings.items())),
            popen_kwargs={"start_new_session": True, "stderr": write},
        )
    finally:
        os.close(write)  # the JVM holds its own copy; the relay ends when the JVM does
    if submitted:
        props = SparkConf(loadDefaults=True, _jvm=gateway.jvm).getAll()
        _USERS = spark_conf.users_conf(os.environ, submitted=dict(props))
        merged = spark_conf.merge(settings, _USERS)
    _say(merged)
    main = threading.current_thread() is threading.main_thread()
    sigint = signal.getsignal(signal.SIGINT) if main else None
    SparkContext(conf=SparkConf().setAll(list(merged.settings.items())), gateway=gateway)
    if sigint is not None:
        signal.signal(signal.SIGINT, sigint)
    return merged


#: The user's own Spark configuration, read when this process started Spark.
_USERS: dict[str, str] | None = None


def _say(merged: spark_conf.Merged) -> None:
    """One line for what the user's Spark configuration changed, one per setting kept."""
    if merged.replaced:
        log.info(
            "Spark settings from spark-submit / spark-defaults.conf replace flinkwatch's: %s",
            ", ".join(
                f"{k}={user} (flinkwatch: {ours})" for k, (ours, user) in merged.replaced.items()
            ),
        )
    for key, (user, why) in merged.kept.items():
        log.warning("Spark setting %s=%s is not applied: %s", key, user, why)


def _relay(fd: int, out: int = 2) -> None:
    """Copy the JVM's stderr from ``fd`` to ``out``, less what says nothing to a user.

    Dropped: :data:`WORKER_CHATTER` and :data:`JVM_NOTICE`.

    Never stops reading before the JVM closes its end: a JVM whose stderr pipe is full
    blocks in every log call.
    """
    after_chatter = False
    with os.fdopen(fd, "rb") as lines:
        for line in lines:
            if WORKER_CHATTER in line:
                after_chatter = True
                continue
            if line.startswith(JVM_NOTICE):
                continue
            if after_chatter and not line.strip():
                after_chatter = False
                continue
            after_chatter = False
            try:
                while line:
                    line = line[os.write(out, line) :]
            except OSError:
                pass  # stderr gone (a closed terminal): keep draining


class _SignalHandler:
    """A ``sun.misc.SignalHandler`` in Python, called through Py4J's callback server."""

    def __init__(self, on_signal: Callable[[str], None]) -> None:
        self._on_signal = on_signal

    def handle(self, sig: Any) -> None:
        self._on_signal("SIG" + str(sig.getName()))

    class Java:  # what Py4J reads to hand this object to Java
        implements = ["sun.misc.SignalHandler"]


def on_jvm_signals(spark: SparkSession, handlers: Mapping[str, Callable[[str], None]]) -> list[str]:
    """Have signals to the JVM call ``handlers`` (by name: ``SIGTERM``...) in the driver.

    Under ``spark-submit`` (Kubernetes, the Spark operator) the JVM is the process that
    is signalled: Kubernetes stops a pod with SIGTERM to its first process, and ``tini``
    passes it to spark-submit's JVM alone, whose default is to run its shutdown hooks and
    stop Spark under the driver. With a handler, the signal is the driver's to act on:
    it stops its queries, then Spark, and spark-submit exits with the driver's code.

    Returns:
        The signals handled; a signal the JVM ignores (``-Xrs``, or SIGINT, which PySpark
        starts its JVM ignoring) keeps doing so.
    """
    gateway = spark.sparkContext._gateway  # noqa: SLF001 - the callback server is Py4J's
    jvm = spark.sparkContext._jvm  # noqa: SLF001
    if gateway is None or jvm is None:
        return []
    ensure_callback_server_started(gateway)
    handled = []
    ignored = jvm.sun.misc.SignalHandler.SIG_IGN
    for name, handler in handlers.items():
        try:
            sig = jvm.sun.misc.Signal(name.removeprefix("SIG"))
            before = jvm.sun.misc.Signal.handle(sig, _SignalHandler(handler))
        except Exception as exc:  # noqa: BLE001 - the JVM refuses (-Xrs): keep its default
            log.debug("JVM signal %s: %s", name, exc)
            continue
        if not before.equals(ignored):  # the JVM leaves an ignored signal ignored
            handled.append(name)
    return handled
