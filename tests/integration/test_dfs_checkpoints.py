"""Checkpoints on a real HDFS and a real S3 API server, across a restart.

The live layout (raw topics, event bus and dead letters on the test broker) with
``output.checkpoint_location`` on ``hdfs://`` (Hadoop's own MiniDFSCluster, its name node
and data node in one JVM) or on ``s3a://`` (s3proxy over an in-memory blob store), both
resolved from Maven Central by ``scripts/stack.sh fetch-servers`` and started here on free ports
of 127.0.0.1. Two expiries of a job are read, the queries stop, a new run starts on the
same checkpoints and reads the third: one alert, with all three, says that the detector
state and the offsets came back from the file system, and the checkpoint files are listed
there through Hadoop's API, not on the driver's disk.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import signal
import socket
import subprocess
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from email.utils import formatdate
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from conf import AppConfig
from lab.procs import free_port
from streaming import checkpoints
from streaming.checkpoints import HadoopDir
from streaming.runtime import Runtime
from streaming.topics import ensure_bus_topics
from tests.conftest import REPO, TEST_SERVER_JAVA, KafkaBroker, wait_until
from tests.integration.kafka_path import JOB_A, config, expired_cycle, read_alerts

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

JARS = Path(os.environ.get("FLINKWATCH_STACK_DIR", str(REPO / ".stack"))) / "jars"
KEY, SECRET = "flinkwatch", "flinkwatch-secret"


def jars(name: str) -> Path:
    d = JARS / name
    assert any(d.glob("*.jar")), f"no jars in {d}: run `scripts/stack.sh fetch-servers`"
    return d


def port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


class Server:
    """A JVM of its own, in its own process group, with its output in a file."""

    def __init__(self, args: list[str], log: Path) -> None:
        self.log = log
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def ready(self, check: object, what: str, timeout: float = 120) -> None:
        def up() -> bool:
            if self.proc.poll() is not None:
                tail = self.log.read_text(errors="replace")[-3000:]
                msg = f"{what} exited ({self.proc.returncode}):\n{tail}"
                raise AssertionError(msg)
            return bool(check())  # type: ignore[operator]

        wait_until(up, timeout=timeout, what=what)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)


def _written(conf: Path) -> bool:
    # The manager writes its configuration once the cluster is up; a half-written file
    # does not parse yet.
    try:
        return conf.exists() and ET.parse(conf).getroot().tag == "configuration"  # noqa: S314
    except ET.ParseError:
        return False


@pytest.fixture(scope="module")
def hdfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A one-data-node HDFS; yields its URI."""
    d = tmp_path_factory.mktemp("hdfs")
    port = free_port()
    server = Server(
        [
            "java",
            "-Xmx384m",
            TEST_SERVER_JAVA,
            "-cp",
            str(jars("hdfs-minicluster") / "*"),
            "org.apache.hadoop.test.MiniDFSClusterManager",
            "-nnport",
            str(port),
            "-datanodes",
            "1",
            "-format",
            "-writeConfig",
            str(d / "conf.xml"),
            "-D",
            f"hdfs.minidfs.basedir={d / 'data'}",
        ],
        d / "minidfs.log",
    )
    try:
        server.ready(lambda: _written(d / "conf.xml") and port_open(port), "the HDFS mini-cluster")
        yield f"hdfs://127.0.0.1:{port}"
    finally:
        server.stop()


def _create_bucket(endpoint: str, bucket: str) -> None:
    """PUT a bucket, signed (AWS signature v2): the proxy checks every request."""
    date = formatdate(usegmt=True)
    digest = hmac.new(SECRET.encode(), f"PUT\n\n\n{date}\n/{bucket}".encode(), hashlib.sha1)
    auth = f"AWS {KEY}:{base64.b64encode(digest.digest()).decode()}"
    req = urllib.request.Request(
        f"{endpoint}/{bucket}", method="PUT", headers={"Date": date, "Authorization": auth}
    )
    with urllib.request.urlopen(req, timeout=30) as resp:  # noqa: S310 - our own server
        assert resp.status == 200


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory, spark: SparkSession) -> Iterator[str]:
    """An S3 API server with a bucket, and S3A pointed at it; yields ``s3a://<bucket>``."""
    d = tmp_path_factory.mktemp("s3proxy")
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    # jclouds' in-memory store: its file-system store keeps no S3A directory markers.
    (d / "s3proxy.conf").write_text(
        f"s3proxy.endpoint={endpoint}\n"
        "s3proxy.authorization=aws-v2-or-v4\n"
        f"s3proxy.identity={KEY}\ns3proxy.credential={SECRET}\n"
        "jclouds.provider=transient\n"
        f"jclouds.identity={KEY}\njclouds.credential={SECRET}\n"
    )
    (jar,) = jars("s3proxy").glob("*.jar")
    server = Server(
        [
            "java",
            "-Xmx256m",
            TEST_SERVER_JAVA,
            "-jar",
            str(jar),
            "--properties",
            str(d / "s3proxy.conf"),
        ],
        d / "s3proxy.log",
    )
    bucket = "flinkwatch-checkpoints"
    try:
        server.ready(lambda: port_open(port), "s3proxy")
        _create_bucket(endpoint, bucket)
        # Per bucket, so the session's other users of S3A (none) keep their settings; a
        # deployment sets the same keys as spark.options spark.hadoop.fs.s3a.*.
        hadoop = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
        for k, v in {
            "endpoint": endpoint,
            "endpoint.region": "us-east-1",
            "path.style.access": "true",
            "connection.ssl.enabled": "false",
            "access.key": KEY,
            "secret.key": SECRET,
        }.items():
            hadoop.set(f"fs.s3a.bucket.{bucket}.{k}", v)
        yield f"s3a://{bucket}"
    finally:
        # The queries of the S3 test set the session's file manager for S3 when they
        # started; the session's other tests write local checkpoints.
        spark.conf.set(checkpoints.FILE_MANAGER_KEY, checkpoints.RENAMING)
        server.stop()


def run_once(spark: SparkSession, cfg: AppConfig) -> list[dict]:
    """One run of the live layout over what the topics hold, as ``flinkwatch run`` wires it."""
    with Runtime(cfg, env={}, start=False) as rt:
        p = rt.pipeline(spark, trigger={"availableNow": True})
        p.run_once()
    return read_alerts(cfg.output.alerts_path, "checkpoint_failures")


@pytest.mark.parametrize("store", ["hdfs", "s3"])
def test_detector_state_and_offsets_come_back_from_the_checkpoints_on_a_dfs(
    spark: SparkSession,
    kafka: KafkaBroker,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    store: str,
) -> None:
    root = request.getfixturevalue(store)
    location = f"{root}/flinkwatch/checkpoints-{store}"
    cfg = config(kafka, f"dfs{store}", tmp_path / "state")
    cfg = cfg.model_copy(
        update={"output": cfg.output.model_copy(update={"checkpoint_location": location})}
    )
    kafka.create_topics(cfg.kafka.logs_topic, cfg.kafka.metrics_topic)
    ensure_bus_topics(cfg.kafka)

    kafka.produce(cfg.kafka.logs_topic, expired_cycle(JOB_A, 1, 2, 1), key=JOB_A.encode())
    assert run_once(spark, cfg) == []  # two expiries: below min_expired (3)
    assert spark.conf.get(checkpoints.FILE_MANAGER_KEY) == checkpoints.file_manager(location)

    # The next run reads only the third expiry: the first two are in the detector's state.
    kafka.produce(cfg.kafka.logs_topic, expired_cycle(JOB_A, 3, 1, 3), key=JOB_A.encode())
    (alert,) = run_once(spark, cfg)
    assert alert["job_id"] == JOB_A and alert["status"] == "firing"
    assert alert["evidence"]["expired_checkpoints"] == [1, 2, 3]

    # The checkpoints are on the file system, through its own API; none on the driver's disk.
    top = checkpoints.open_dir(spark, location)
    assert isinstance(top, HadoopDir)
    names = {d.name for d in top.iterdir()}
    (detect,) = [d for d in top.iterdir() if d.name.startswith("detect-kafka")]
    assert {"parse-microbatch", "deadletters"} <= names
    assert {"offsets", "commits", "metadata", "state"} <= {d.name for d in detect.iterdir()}
    # Two runs, each with its batches committed; the RocksDB state of the shards with it.
    assert len([c for c in (detect / "commits").iterdir() if c.name.isdigit()]) >= 2
    assert any((detect / "state").iterdir())
    assert json.loads((detect / "metadata").read_text())["id"]
    assert not (tmp_path / "state" / "checkpoints").exists()
    assert (tmp_path / "state" / "ledger.sqlite").exists()  # the ledger stays local
