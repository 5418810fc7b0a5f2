"""Spark settings derived from the ``spark`` config section (no Spark started)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conf import SparkConfig
from streaming.session import cluster_settings
from tests.conftest import REPO, SHORT_JVM_ENV


def test_defaults_add_no_setting() -> None:
    # Local mode and an unsized cluster keep Spark's own defaults.
    assert cluster_settings(SparkConfig()) == {}


def test_executor_sizes_map_to_spark_keys() -> None:
    cfg = SparkConfig(executor_memory="2g", executor_cores=3)
    assert cluster_settings(cfg) == {"spark.executor.memory": "2g", "spark.executor.cores": "3"}


def test_options_pass_through_and_win_over_the_sized_keys() -> None:
    cfg = SparkConfig(
        executor_memory="2g",
        options={"spark.executor.memory": "4g", "spark.driver.host": "10.0.0.5"},
    )
    assert cluster_settings(cfg) == {
        "spark.executor.memory": "4g",
        "spark.driver.host": "10.0.0.5",
    }


@pytest.mark.parametrize("bad", ["2 GB", "-1g", "lots"])
def test_executor_memory_must_be_a_spark_size(bad: str) -> None:
    with pytest.raises(ValueError, match="executor_memory"):
        SparkConfig(executor_memory=bad)


def test_a_local_master_is_raised_to_the_slots_the_queries_need() -> None:
    from streaming.session import sized_master, task_slots

    assert [task_slots(m) for m in ("local", "local[3]", "local[*]", "spark://h:7077")] == [
        1,
        3,
        None,
        None,
    ]
    assert sized_master("local[2]", 7) == "local[7]"
    assert sized_master("local[16]", 7) == "local[16]"
    assert sized_master("spark://h:7077", 7) == "spark://h:7077"


def test_detector_state_memory_is_bounded_by_default(spark) -> None:
    # The tests' session is built like the job's: with the default budget.
    assert SparkConfig().state_memory_mb == 256
    conf = spark.conf
    assert conf.get("spark.sql.streaming.stateStore.rocksdb.boundedMemoryUsage") == "true"
    assert conf.get("spark.sql.streaming.stateStore.rocksdb.maxMemoryUsageMB") == "256"


def test_state_size_counts_rocksdb_files_when_memory_reads_zero() -> None:
    from types import SimpleNamespace

    from streaming.listener import state_size

    op = SimpleNamespace(memoryUsedBytes=0, customMetrics={"rocksdbSstFileSize": 7117})
    assert state_size(op) == 7117
    op = SimpleNamespace(memoryUsedBytes=268_756, customMetrics={"rocksdbSstFileSize": 7117})
    assert state_size(op) == 275_873


def test_the_jvm_stderr_relay_drops_the_worker_chatter_and_keeps_the_rest() -> None:
    import os
    import threading

    from streaming.session import _relay

    src_r, src_w = os.pipe()
    out_r, out_w = os.pipe()
    relay = threading.Thread(target=_relay, args=(src_r, out_w))
    relay.start()
    # What pyspark's transformWithState driver worker prints, as Spark copies it, among
    # a Spark log line and a Python worker's real complaint.
    os.write(
        src_w,
        b"WARNING: Using incubator modules: jdk.incubator.vector\n"
        b"Starting Streaming TransformWithStateInPandas Python worker.\n\n"
        b"26/11/23 10:58:27 WARN NativeCodeLoader: Unable to load native-hadoop library\n"
        b"Streaming TransformWithStateInPandas Python worker Completed execution of UDF.\n\n"
        b"\n"
        b"Traceback (most recent call last):\n",
    )
    os.close(src_w)
    relay.join(timeout=10)
    os.close(out_w)
    with os.fdopen(out_r, "rb") as f:
        assert f.read() == (
            b"26/11/23 10:58:27 WARN NativeCodeLoader: Unable to load native-hadoop library\n"
            b"\n"
            b"Traceback (most recent call last):\n"
        )


def test_the_driver_jvm_logs_through_flinkwatchs_own_log4j2_file(spark) -> None:
    """Not Spark's default profile, whose notices open every command's output."""
    from streaming.session import LOG4J2

    jvm = spark.sparkContext._jvm
    assert jvm.java.lang.System.getProperty("log4j2.configurationFile") == LOG4J2.as_uri()
    ctx = jvm.org.apache.logging.log4j.LogManager.getContext(False)
    assert ctx.getConfiguration().getConfigurationSource().getLocation() == str(LOG4J2)
    # Hadoop's native-library warning is below the level its logger logs at.
    native = jvm.org.apache.logging.log4j.LogManager.getLogger(
        "org.apache.hadoop.util.NativeCodeLoader"
    )
    assert not native.isWarnEnabled()


def test_the_driver_jvm_runs_the_serial_collector(spark) -> None:
    """G1 committed the whole 1 GiB heap for a ~200 MB live one (issue #34: streaming.session)."""
    jvm = spark.sparkContext._jvm
    beans = jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    # The serial collector's young and old generations, by the names the JVM gives them.
    assert sorted(b.getName() for b in beans) == ["Copy", "MarkSweepCompact"]


def test_columns_are_built_without_recording_their_python_call_sites(spark) -> None:
    # Every session flinkwatch starts (the live job's, a replay's, these tests'): building a
    # plan's columns is a third of the Py4J round trips it was (streaming.session).
    from pyspark.errors.utils import current_origin, is_debugging_enabled
    from pyspark.sql import functions as F

    assert spark.conf.get("spark.python.sql.dataFrameDebugging.enabled") == "false"
    assert not is_debugging_enabled()
    F.col("a").isNull()
    assert current_origin().call_site is None


def test_columns_and_plans_built_again_look_nothing_up_in_the_jvm(spark) -> None:
    # PySpark asks the JVM what `functions`, `PythonUtils`... and each of their methods
    # are at every column and select; once per session is enough (streaming.session).
    from py4j import protocol
    from pyspark.sql import functions as F

    def built() -> list[tuple[str, str, int]]:
        df = spark.range(3).select(
            F.concat(F.lit("x"), F.col("id").cast("string")).alias("a"),
            F.upper(F.lit("warn")).alias("b"),
        )
        rows = df.select("*", F.length("a").alias("n")).collect()
        return [(r.a, r.b, r.n) for r in rows]

    assert built() == [("x0", "WARN", 2), ("x1", "WARN", 2), ("x2", "WARN", 2)]
    client = spark.sparkContext._gateway._gateway_client
    asked: list[str] = []
    send = client.send_command

    def counted(command: str, *args: object, **kwargs: object) -> str:
        if command.startswith(protocol.REFLECTION_COMMAND_NAME):
            asked.append(command.replace("\n", " "))
        return send(command, *args, **kwargs)

    client.send_command = counted
    try:
        again = built()
    finally:
        del client.send_command
    assert again == [("x0", "WARN", 2), ("x1", "WARN", 2), ("x2", "WARN", 2)]
    assert asked == []


def test_levels_are_upper_cased_by_the_jvms_case_mapping(spark) -> None:
    # ICU's case mapping loads a table of every code point's title case first, 1.5 s of
    # CPU in each JVM's first parse (streaming.session.JVM_CASE_MAPPINGS).
    from streaming.parsing import parse_logs
    from tests.conftest import records_df

    assert spark.conf.get("spark.sql.icu.caseMappings.enabled") == "false"
    stamp = "2024-03-11T19:02:46.003Z"
    values = [
        json.dumps({"level": level, "message": "m", "timestamp": stamp})
        for level in ("info", "Warning", "error")
    ]
    rows = parse_logs(records_df(spark, values)).orderBy("offset").collect()
    assert [r.level for r in rows] == ["INFO", "WARN", "ERROR"]


def test_the_jvm_runs_in_a_session_of_its_own(spark) -> None:
    """Ctrl-C and `timeout` signal the driver's whole process group: not the JVM."""
    import os

    jvm_pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    assert os.getsid(jvm_pid) != os.getsid(0)
    assert os.getpgid(jvm_pid) != os.getpgid(0)


def test_a_sigterm_to_the_jvm_reaches_the_driver_and_spark_runs_on(spark) -> None:
    """Under spark-submit (a Kubernetes pod) SIGTERM goes to the JVM alone."""
    import os
    import signal

    from streaming.session import on_jvm_signals
    from tests.conftest import wait_until

    heard: list[str] = []
    # PySpark starts its JVM ignoring SIGINT, and so it stays.
    assert on_jvm_signals(spark, {"SIGTERM": heard.append, "SIGINT": heard.append}) == ["SIGTERM"]
    os.kill(int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()), signal.SIGTERM)
    wait_until(lambda: heard == ["SIGTERM"], timeout=30, what="the JVM's SIGTERM in the driver")
    assert spark.range(3).count() == 3


def test_local_files_get_their_modes_from_our_file_system_without_chmod(spark, tmp_path) -> None:
    """Hadoop's own started a `chmod` process per file created (checkpoints: several a batch)."""
    import os

    from streaming.session import LOCAL_FS

    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    fs = jvm.org.apache.hadoop.fs.Path(f"file://{tmp_path}").getFileSystem(conf)
    assert fs.getClass().getName() == LOCAL_FS
    path = jvm.org.apache.hadoop.fs.Path(f"file://{tmp_path}/d/f")
    out = fs.create(path, True)
    out.write(b"x")
    out.close()
    umask = jvm.org.apache.hadoop.fs.permission.FsPermission.getUMask(conf).toShort()
    assert os.stat(tmp_path / "d" / "f").st_mode & 0o777 == 0o666 & ~umask
    assert (tmp_path / "d" / ".f.crc").exists()  # still the checksummed local file system
    fs.setPermission(path, jvm.org.apache.hadoop.fs.permission.FsPermission(0o640))
    assert os.stat(tmp_path / "d" / "f").st_mode & 0o777 == 0o640
    assert fs.getFileStatus(path).getPermission().toShort() == 0o640


def test_the_connectors_jars_are_on_the_drivers_class_path_not_copied_to_the_executor(
    spark,
) -> None:
    """From spark.jars a local executor copied each of the 41 jars at its first task and
    started a `chmod` process for each."""
    from pyspark import SparkFiles

    from streaming.session import archive_class_path, connector_jars, s3a_jars

    sc = spark.sparkContext
    assert sc._jsc.sc().listJars().isEmpty()  # nothing for an executor to fetch
    class_path = sc.getConf().get("spark.driver.extraClassPath")
    assert class_path == archive_class_path()  # the one the class-data archive is made on
    assert set(connector_jars() + s3a_jars()) <= set(class_path.split(os.pathsep))
    assert spark.range(3).count() == 3  # a task ran: an executor's fetch would be done
    assert not list(Path(SparkFiles.getRootDirectory()).glob("*.jar"))
    # The Kafka source and S3A's file system load from the JVM's own class loader.
    loader = sc._jvm.java.lang.ClassLoader.getSystemClassLoader()
    for name in (
        "org.apache.spark.sql.kafka010.KafkaSourceProvider",
        "org.apache.hadoop.fs.s3a.S3AFileSystem",
    ):
        assert loader.loadClass(name).getName() == name


def test_a_grown_heap_is_collected_in_full_and_given_back(spark) -> None:
    from pyspark.sql import functions as F

    from streaming.session import GIVE_BACK_COLLECTIONS, give_back_heap

    jvm = spark.sparkContext._jvm
    runtime = jvm.java.lang.Runtime.getRuntime()
    (full,) = [
        c
        for c in jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
        if c.getName() == "MarkSweepCompact"  # the serial collector's full collections
    ]
    # A backlog's batch in little: rows held together on the heap, then garbage.
    texts = F.sha2(F.col("id").cast("string"), 256)
    sizes = (
        spark.range(0, 2_000_000)
        .groupBy((F.col("id") % 100).alias("k"))
        .agg(F.collect_list(texts).alias("l"))
        .select(F.size("l"))
        .collect()
    )
    assert sum(r[0] for r in sizes) == 2_000_000
    grown, collections = runtime.totalMemory(), full.getCollectionCount()
    freed = give_back_heap(spark)
    assert full.getCollectionCount() - collections >= GIVE_BACK_COLLECTIONS
    # How much goes back depends on what the session holds (its initial size at least
    # stays): a fresh one's went from 624 MB to 365 (issue #34); it never grows here.
    assert freed >= 0 and runtime.totalMemory() <= grown


def test_the_archives_class_path_is_our_jar_then_the_connectors(monkeypatch, tmp_path) -> None:
    from streaming.session import archive_class_path

    stack = tmp_path / "stack"
    monkeypatch.setenv("FLINKWATCH_STACK_DIR", str(stack))
    monkeypatch.delenv("FLINKWATCH_SPARK_JARS", raising=False)
    monkeypatch.setenv("FLINKWATCH_HADOOP_JAR", str(tmp_path / "fs.jar"))
    assert archive_class_path() == ""  # our jar not built: Spark's own class path
    (tmp_path / "fs.jar").write_bytes(b"PK")
    assert archive_class_path() == str(tmp_path / "fs.jar")  # no connector fetched
    for d, jar in (("spark-kafka", "kafka-clients.jar"), ("hadoop-aws", "hadoop-aws.jar")):
        (stack / "jars" / d).mkdir(parents=True)
        (stack / "jars" / d / jar).write_bytes(b"PK")
    assert archive_class_path().split(os.pathsep) == [
        str(tmp_path / "fs.jar"),
        str(stack / "jars" / "spark-kafka" / "kafka-clients.jar"),
        str(stack / "jars" / "hadoop-aws" / "hadoop-aws.jar"),
    ]


def test_without_our_jar_the_session_keeps_hadoops_file_system(monkeypatch, tmp_path) -> None:
    from streaming.session import local_fs_jar

    monkeypatch.setenv("FLINKWATCH_HADOOP_JAR", str(tmp_path / "missing.jar"))
    assert local_fs_jar() is None
    (tmp_path / "built.jar").write_bytes(b"PK")
    monkeypatch.setenv("FLINKWATCH_HADOOP_JAR", str(tmp_path / "built.jar"))
    assert local_fs_jar() == str(tmp_path / "built.jar")


def test_a_replay_starts_from_the_class_archive_only_once_setup_made_it(
    monkeypatch, tmp_path
) -> None:
    from streaming.replay_session import session_settings
    from streaming.session import archive_options, class_archive, java_options

    monkeypatch.setenv("FLINKWATCH_CLASS_ARCHIVE", str(tmp_path / "replay.jsa"))
    assert class_archive() is None
    (tmp_path / "replay.jsa").write_bytes(b"\0")
    assert class_archive() == tmp_path / "replay.jsa"
    java = session_settings(200_000, class_archive())["spark.driver.extraJavaOptions"]
    assert f"-XX:SharedArchiveFile={tmp_path / 'replay.jsa'}" in java.split()
    # A long replay keeps the optimising compiler, and the archive.
    java = session_settings(700 * 2**20, class_archive())["spark.driver.extraJavaOptions"]
    assert java == java_options(*archive_options(tmp_path / "replay.jsa"))


def test_every_driver_on_the_archives_class_path_starts_from_it(monkeypatch, tmp_path) -> None:
    from streaming.session import archive_options, driver_java, java_options

    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    monkeypatch.setenv("FLINKWATCH_HADOOP_JAR", str(tmp_path / "flinkwatch-hadoop.jar"))
    (tmp_path / "flinkwatch-hadoop.jar").write_bytes(b"PK")
    monkeypatch.setenv("FLINKWATCH_CLASS_ARCHIVE", str(tmp_path / "replay.jsa"))
    assert driver_java("local[2]") == java_options()  # not made (yet)
    (tmp_path / "replay.jsa").write_bytes(b"\0")
    archive = archive_options(tmp_path / "replay.jsa")
    assert driver_java("local[2]") == java_options(*archive)
    assert driver_java("local[8]", "-XX:TieredStopAtLevel=1") == java_options(
        "-XX:TieredStopAtLevel=1", *archive
    )
    # Another class path (a cluster's driver; without our jar, Spark's alone): no archive.
    assert driver_java("spark://master:7077") == java_options()
    (tmp_path / "flinkwatch-hadoop.jar").unlink()
    assert driver_java("local[2]") == java_options()
    # One the JVM cannot use is not said in the log at every start.
    assert "-Xlog:cds=off,cds+dynamic=off" in archive


def test_only_a_jvm_this_process_starts_on_a_local_master_has_the_archives_class_path(
    monkeypatch,
) -> None:
    from streaming.session import own_class_path

    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    jar = "/stack/jars/flinkwatch/flinkwatch-hadoop.jar"
    assert own_class_path("local[2]", jar) and own_class_path("local[*]", jar)
    assert not own_class_path("local[2]", None)  # our jar not built: Spark's class path
    assert not own_class_path("spark://master:7077", jar)
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "41234")  # under spark-submit
    assert not own_class_path("local[2]", jar)


# --- the Spark UI (issue #35, item 12) -------------------------------------------------


def test_the_spark_ui_shows_no_kafka_secret(tmp_path: Path) -> None:
    # The UI is on by default and has no authentication: whatever it shows, anyone who
    # reaches its port reads. A real session with flinkwatch's settings, a Kafka writer and
    # reader with the SASL password and an inline client key, in a process of its own.
    password = "fw-kafka-pw-7Hq2Zx"
    key = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----"
    out = tmp_path / "ui.json"
    env = {
        **os.environ,
        **SHORT_JVM_ENV,
        "FLINKWATCH_KAFKA_PASSWORD": password,
        "PROBE_KEYSTORE_KEY": key,
    }
    done = subprocess.run(
        [sys.executable, "-m", "tests.streaming.spark_ui_probe", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    texts: dict[str, str] = json.loads(out.read_text())
    # What was read is what matters: the environment, the writer's plan, the reader's.
    env_tab = texts["/api/v1/applications/<id>/environment"]
    assert "spark.app.name" in env_tab
    assert (
        "KafkaStreamingWrite"
        in texts["/api/v1/applications/<id>/sql?details=true&planDescription=true"]
    )
    assert "kafka.sasl.jaas.config=*********(redacted)" in texts["read plan"]
    assert "kafka.ssl.keystore.key=*********(redacted)" in texts["read plan"]
    secrets = (password, "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC")
    for where, text in [*texts.items(), ("stdout", done.stdout), ("stderr", done.stderr)]:
        for secret in secrets:
            assert secret not in text, where


def _asked(monkeypatch: pytest.MonkeyPatch, spec: object) -> dict[str, object]:
    """What ``spec.start()`` asks of get_session (no Spark started)."""
    import streaming.session

    asked: dict[str, object] = {}
    monkeypatch.setattr(streaming.session, "get_session", lambda **kw: asked.update(kw))
    spec.start()  # type: ignore[attr-defined]
    return asked


def test_a_run_asks_for_the_session_its_spark_section_describes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from conf import AppConfig
    from streaming.session import SessionSpec

    cfg = AppConfig.model_validate(
        {
            "spark": {
                "master": "spark://m:7077",
                "shuffle_partitions": 4,
                "executor_memory": "2g",
                "state_memory_mb": 128,
                "ui_port": 4041,
                "options": {"spark.foo": "bar"},
            },
            "parsing": {"log_timezone": "Europe/Berlin"},
        }
    )
    assert _asked(monkeypatch, SessionSpec.of(cfg).sized("local[7]")) == {
        "master": "local[7]",
        "shuffle_partitions": 4,
        "timezone": "Europe/Berlin",
        "require_kafka": True,
        "extra": {"spark.executor.memory": "2g", "spark.foo": "bar"},
        "state_memory_mb": 128,
        "ui_port": 4041,
        "driver_memory": "1g",
    }


def test_a_replay_runs_here_without_kafka_state_budget_or_ui(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from conf import AppConfig
    from streaming.session import SessionSpec

    cfg = AppConfig.model_validate(
        {"spark": {"master": "spark://m:7077", "shuffle_partitions": 3, "ui_port": 4041}}
    )
    assert _asked(monkeypatch, SessionSpec.replay(cfg, {"a": "b"})) == {
        "master": "local[2]",
        "shuffle_partitions": 3,
        "timezone": "UTC",
        "require_kafka": False,
        "extra": {"a": "b"},
        "state_memory_mb": None,
        "ui_port": None,
        "driver_memory": "2g",
    }


def test_settings_around_a_querys_start_are_that_querys_alone(spark, tmp_path: Path) -> None:
    """The detect query's own settings (streaming.app.DETECT_SETTINGS) hold in its batches."""
    from streaming.session import query_settings

    key = "spark.sql.codegen.factoryMode"
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_text("one\n")
    seen: list[str | None] = []
    spark.conf.set(key, "FALLBACK")  # a user's own value
    try:
        writer = (
            spark.readStream.text(str(tmp_path / "in"))
            .writeStream.foreachBatch(lambda df, _id: seen.append(df.sparkSession.conf.get(key)))
            .option("checkpointLocation", str(tmp_path / "cp"))
            .trigger(availableNow=True)
        )
        with query_settings(spark, {key: "NO_CODEGEN"}):
            query = writer.start()
        assert spark.conf.get(key) == "FALLBACK"  # the session's again, while the query runs
        query.awaitTermination()
    finally:
        spark.conf.unset(key)
    assert seen == ["NO_CODEGEN"]
    with query_settings(spark, {key: "NO_CODEGEN"}):
        pass
    assert spark.conf.get(key, None) is None  # unset before, unset after


STOP_SCRIPT = """
import json, sys
from pathlib import Path
from streaming.session import driver_java, get_session, stop_session
work = Path(sys.argv[1])
(work / "in").mkdir()
(work / "in" / "a.json").write_text('{"k": 1}\\n{"k": 2}\\n{"k": 1}\\n')
spark = get_session(
    master="local[1]",
    require_kafka=False,
    extra={"spark.driver.extraJavaOptions": driver_java("local", "-XX:TieredStopAtLevel=1")},
)
counts = spark.readStream.schema("k long").json(str(work / "in")).groupBy("k").count()
query = (
    counts.writeStream.outputMode("update").format("noop")
    .option("checkpointLocation", str(work / "checkpoint"))
    .trigger(availableNow=True).start()
)
query.awaitTermination()
store = spark.sparkContext._jvm.org.apache.spark.sql.execution.streaming.state.StateStore
running = store.isMaintenanceRunning()
stop_session(spark)
print(json.dumps({"with_the_query": running, "after_the_stop": store.isMaintenanceRunning()}))
"""


@pytest.mark.spark
def test_a_stopped_session_leaves_no_state_store_maintenance_to_fail_in_the_log(
    tmp_path: Path,
) -> None:
    """The timer outlives ``spark.stop()`` and logs a stack trace ("SparkEnv not active")."""
    script = tmp_path / "stop.py"
    script.write_text(STOP_SCRIPT, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(script), str(tmp_path)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "PYSPARK_PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (answer,) = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert json.loads(answer) == {"with_the_query": True, "after_the_stop": False}
