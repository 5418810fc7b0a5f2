"""SASL_SSL with SCRAM-SHA-512 against a real broker: the tools, the job, a wrong password.

The broker is a second KRaft broker of the stack's jars whose only client listener is
SASL_SSL, with a certificate from a CA made here (openssl); the SCRAM users are added when
its storage is formatted. The password reaches flinkwatch through an environment variable
only, and must not show in any output.
"""

from __future__ import annotations

import base64
import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from conf import load_config
from conf.kafka_options import KAFKA_CLIENT_CONFIGS
from lab import fleet as sim
from tests.conftest import REPO, RUN_SPARK_OPTIONS, TEST_SERVER_JAVA, free_port_pair
from tests.integration.kafka_path import pipeline, read_alerts

pytestmark = pytest.mark.kafka

PASSWORD_ENV = "FLINKWATCH_TEST_KAFKA_PASSWORD"
STACK = Path(os.environ.get("FLINKWATCH_STACK_DIR", str(REPO / ".stack")))


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_ca(d: Path, name: str) -> tuple[Path, Path]:
    """A self-signed CA: (certificate PEM, key PEM)."""
    d.mkdir(parents=True, exist_ok=True)
    cert, key = d / f"{name}.pem", d / f"{name}.key"
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        "-keyout", str(key), "-out", str(cert), "-subj", f"/CN={name}",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip
    return cert, key


def make_broker_keystore(d: Path, ca: Path, ca_key: Path, password: str) -> Path:
    """A PKCS12 keystore with a broker certificate for 127.0.0.1 and localhost."""
    key, csr, cert, ext = (d / f"broker.{x}" for x in ("key", "csr", "pem", "ext"))
    ext.write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
        "basicConstraints=CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\n"
        "subjectKeyIdentifier=hash\n"
        "authorityKeyIdentifier=keyid\n"
    )
    _openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr),
        "-subj", "/CN=localhost",
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key),
        "-CAcreateserial", "-days", "2", "-out", str(cert), "-extfile", str(ext),
    )  # fmt: skip
    store = d / "broker.p12"
    _openssl(
        "pkcs12", "-export", "-in", str(cert), "-inkey", str(key), "-certfile", str(ca),
        "-name", "broker", "-out", str(store), "-passout", f"pass:{password}",
    )  # fmt: skip
    return store


def cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, base64url without padding, not starting with ``-``.

    StorageTool's argument parser takes ``-t -6lx…`` for an option (a fresh clone's run
    failed so, 1 id in 64); Kafka's own ``random-uuid`` never makes such an id either.
    """
    while True:
        cid = base64.urlsafe_b64encode(secrets.token_bytes(16)).rstrip(b"=").decode()
        if not cid.startswith("-"):
            return cid


class SaslSslBroker:
    """A single-node KRaft broker whose client listener is SASL_SSL with SCRAM-SHA-512."""

    user = "flinkwatch"

    def __init__(self, d: Path) -> None:
        self.dir = d
        self.port = free_port_pair()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.password = "fw-" + secrets.token_urlsafe(18)
        self.proc: subprocess.Popen[bytes] | None = None
        self.ca = d / "tls" / "ca.pem"

    def _properties(self, keystore: Path, keystore_password: str, broker_password: str) -> str:
        controller = self.port + 1
        scram = "org.apache.kafka.common.security.scram.ScramLoginModule"
        return f"""\
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{controller}
listeners=SASL_SSL://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{controller}
advertised.listeners=SASL_SSL://127.0.0.1:{self.port}
listener.security.protocol.map=SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=SASL_SSL
sasl.enabled.mechanisms=SCRAM-SHA-512
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config={scram} required \
username="broker" password="{broker_password}";
ssl.keystore.type=PKCS12
ssl.keystore.location={keystore}
ssl.keystore.password={keystore_password}
ssl.truststore.type=PEM
ssl.truststore.location={self.ca}
log.dirs={self.dir}/data
num.partitions=2
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
log.message.timestamp.type=LogAppendTime
"""

    def start(self) -> None:
        subprocess.run(
            [str(REPO / "scripts" / "stack.sh"), "fetch"],
            env={**os.environ, "PYTHON": sys.executable},
            check=True,
        )
        ca, ca_key = make_ca(self.dir / "tls", "ca")
        assert ca == self.ca
        keystore_password, broker_password = secrets.token_hex(8), secrets.token_hex(8)
        keystore = make_broker_keystore(self.dir / "tls", ca, ca_key, keystore_password)
        props = self.dir / "server.properties"
        props.write_text(self._properties(keystore, keystore_password, broker_password))
        log4j = self.dir / "log4j.properties"
        log4j.write_text(
            "log4j.rootLogger=INFO, file\n"
            "log4j.appender.file=org.apache.log4j.FileAppender\n"
            f"log4j.appender.file.File={self.dir}/server.log\n"
            "log4j.appender.file.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
        )
        java = [
            "java",
            f"-Dlog4j.configuration=file:{log4j}",
            "-cp",
            f"{STACK}/jars/kafka-broker/*",
        ]
        # KRaft keeps SCRAM credentials in its metadata log: they are added when the
        # storage is formatted (the broker's own, for its inter-broker listener, too).
        subprocess.run(
            [
                *java, "kafka.tools.StorageTool", "format", "-t", cluster_id(),
                "-c", str(props),
                "--add-scram", f"SCRAM-SHA-512=[name=broker,password={broker_password}]",
                "--add-scram", f"SCRAM-SHA-512=[name={self.user},password={self.password}]",
            ],
            check=True,
            capture_output=True,
        )  # fmt: skip
        with open(self.dir / "stdout.log", "wb") as out:
            self.proc = subprocess.Popen(
                [
                    *java[:1],
                    "-Xms256m",
                    "-Xmx512m",
                    TEST_SERVER_JAVA,
                    *java[1:],
                    "kafka.Kafka",
                    str(props),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited; see {self.dir}/server.log")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.25)
        raise RuntimeError(f"broker did not listen on {self.port} within 60 s")

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)

    def write_config(self, d: Path, prefix: str, *, ca: Path | None = None) -> Path:
        """A flinkwatch config for this broker; the password is only named."""
        doc = {
            "kafka": {
                "bootstrap_servers": self.bootstrap,
                "security_protocol": "SASL_SSL",
                "sasl_mechanism": "SCRAM-SHA-512",
                "sasl_username": self.user,
                "sasl_password_env": PASSWORD_ENV,
                "ssl_ca_file": str(ca or self.ca),
                "logs_topic": f"{prefix}.logs",
                "metrics_topic": f"{prefix}.metrics",
                "events_topic": f"{prefix}.events",
                "deadletters_topic": f"{prefix}.deadletters",
            },
            "spark": {
                "trigger_interval_s": 0.5,
                "restart_backoff_s": 2,
                "watermark_delay_s": 60,
                "options": RUN_SPARK_OPTIONS,
            },
            "output": {"state_dir": str(d / "state")},
            "metrics": {"enabled": False},
        }
        path = d / f"{prefix}.yaml"
        path.write_text(yaml.safe_dump(doc))
        assert self.password not in path.read_text()
        return path


@pytest.fixture(scope="module")
def secure_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslSslBroker]:
    broker = SaslSslBroker(tmp_path_factory.mktemp("kafka-sasl-ssl"))
    try:
        broker.start()
        yield broker
    finally:
        broker.stop()


def cli(*args: str, password: str) -> subprocess.CompletedProcess[str]:
    """``flinkwatch ARGS`` in a process of its own, the password in its environment only."""
    return subprocess.run(
        [sys.executable, "-m", "lab" if args[0] == "simulate" else "streaming.cli", *args],
        env={**os.environ, PASSWORD_ENV: password},
        capture_output=True,
        text=True,
        timeout=120,
    )


SIMULATED = {"jobs": 2, "checkpoint_interval_s": 5.0, "checkpoint_timeout_s": 10.0}


@pytest.mark.spark
def test_tools_and_job_reach_a_sasl_ssl_broker_with_the_password_only_in_the_env(
    spark, secure_kafka, tmp_path, monkeypatch, capfd
) -> None:
    b = secure_kafka
    path = b.write_config(tmp_path, "sec1")
    made = cli("kafka", "create-topics", "--config", str(path), "sec1.logs", "sec1.metrics",
               password=b.password)  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert "topic sec1.logs: created" in made.stderr
    sent = cli(
        "simulate", "--config", str(path), "--jobs", str(SIMULATED["jobs"]),
        "--duration", "120", "--incident-at", "20", "--start-ms", "1717400000000",
        "--checkpoint-interval", "5", "--checkpoint-timeout", "10",
        password=b.password,
    )  # fmt: skip
    assert sent.returncode == 0, sent.stderr
    assert "simulate: done" in sent.stderr

    monkeypatch.setenv(PASSWORD_ENV, b.password)
    cfg = load_config(path)
    p = pipeline(spark, cfg, {"availableNow": True})  # creates the bus topics through SASL_SSL
    p.run_once()

    firing = [
        a["job_id"]
        for a in read_alerts(cfg.output.alerts_path, "checkpoint_failures")
        if a["status"] == "firing"
    ]
    assert firing == [sim.job_id(sim.FleetSpec(**SIMULATED), 0)]  # type: ignore[arg-type]
    assert p.stats.dead_letters == {}
    # What Spark would print of a query's plan names no secret.
    from streaming.sources import kafka_stream

    plan = kafka_stream(spark, cfg.kafka, cfg.kafka.logs_topic, stream=False)
    assert b.password not in plan._jdf.queryExecution().toString()  # noqa: SLF001
    for text in (made.stdout, made.stderr, sent.stdout, sent.stderr, *capfd.readouterr()):
        assert b.password not in text


def test_a_wrong_password_is_refused_at_once_and_named_as_such(secure_kafka, tmp_path) -> None:
    b = secure_kafka
    path = b.write_config(tmp_path, "sec2")
    wrong = "not-" + b.password
    made = cli("kafka", "create-topics", "--config", str(path), "sec2.logs", password=wrong)
    assert made.returncode == 1
    # The refusal named, not the minute a starting broker is given run out ("not reachable
    # within 60 s"); that the first refusal ends the tries is tests/streaming/test_topics.py's
    # (a wall-time bound here failed on a busy machine, where one attempt can time out
    # before the broker answers).
    assert f"kafka at {b.bootstrap}: authentication failed: " in made.stderr
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in made.stderr
    run = cli("run", "--config", str(path), "--duration", "30", password=wrong)
    assert run.returncode == 1
    assert "authentication failed" in run.stderr
    for text in (made.stdout, made.stderr, run.stdout, run.stderr):
        assert wrong not in text


def test_a_broker_certificate_from_another_ca_is_refused_at_once(secure_kafka, tmp_path) -> None:
    b = secure_kafka
    other, _ = make_ca(tmp_path / "other", "other-ca")
    path = b.write_config(tmp_path, "sec3", ca=other)
    made = cli("kafka", "create-topics", "--config", str(path), "sec3.logs", password=b.password)
    assert made.returncode == 1
    assert f"kafka at {b.bootstrap}: TLS handshake failed: " in made.stderr
    assert "CERTIFICATE_VERIFY_FAILED" in made.stderr


@pytest.mark.spark
def test_known_option_names_are_those_of_the_kafka_clients_spark_loads(spark) -> None:
    jvm = spark.sparkContext._jvm  # noqa: SLF001
    clients = jvm.org.apache.kafka.clients
    names: set[str] = set()
    for config in (
        clients.consumer.ConsumerConfig,
        clients.producer.ProducerConfig,
        clients.admin.AdminClientConfig,
    ):
        names |= {str(n) for n in config.configNames() if not str(n).startswith("internal.")}
    assert set(KAFKA_CLIENT_CONFIGS) == names
