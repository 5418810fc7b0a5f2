r"""Capture real log shippers carrying a real standalone Flink cluster's logs into Kafka.

A run of ``capture_cluster.py``'s standalone session cluster (JobManager and TaskManager in
JVMs of their own) from a copy of PyFlink's Flink distribution with more jars in ``lib/``
(kafka-clients; jackson for log4j2's ``JsonLayout``), a single-node KRaft broker started
with ``scripts/stack.sh`` in the same network namespace, and the shippers:

- log4j2's ``KafkaAppender`` in both JVMs (``log4j-console.properties``, the file
  ``start-foreground`` reads), next to Flink's own console and file appenders: a bare
  appender, no pod or host in the record, the record key the process's log file
  (``${sys:log.file}``) so each process's lines stay in order in one partition;
- rsyslog (``rsyslogd -n`` with a config of its own): ``imfile`` tails both processes' log
  files, ``startmsg.regex`` keeps a stack trace with its line, ``omkafka`` sends each
  message twice, with omkafka's default template and with a JSON template.

Scenarios:

- ``tm_oom``: a ``GROUP BY`` over ever new keys on heap (hashmap) state, a TaskManager
  with a small task heap and ``taskmanager.jvm-exit-on-oom``: it dies of
  ``OutOfMemoryError``; the JobManager runs on and logs the TaskManager's heartbeat loss.
  Shipped with the appender's default PatternLayout (Flink's log pattern) and by rsyslog.
- ``layouts``: the checkpoint expiry job of ``capture_flink.py`` (500 ms checkpoint
  timeout): two appenders in each JVM, log4j2's stock ``JsonLayout`` (``compact``,
  ``eventEol``) to one topic and ``JsonTemplateLayout`` with ``classpath:EcsLayout.json``
  to another.

Each run writes into ``--out DIR`` (named ``NAME``): the config files used, the log files as
Flink wrote them (``NAME.jobmanager.log``, ``NAME.taskmanager.log``), the Prometheus scrapes
as canonical metric records (``NAME.jsonl``), and per shipped topic the records as consumed
from the broker after the run (``NAME.<stream>.records.jsonl``: topic, partition, offset,
timestamp, key, value) and their values as a replayable log (``NAME.<stream>.log``). Run it
in a network namespace with only loopback, as root (rsyslog), with PyFlink's venv::

    unshare -n sh -c 'ip link set lo up && .flink/bin/python scripts/capture_shippers.py \
        run tm_oom --out tests/data/shippers/tm_oom_2_3'

The records are read with kafka-python from the project's venv (``consume``, run by
``run`` itself): PyFlink's venv does not have it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from capture_cluster import (  # noqa: E402
    TM_PORT,
    Process,
    _conf_dir,
    _get,
    _scrape,
    _submit,
    _wait,
)
from capture_flink import _SINK, _SOURCE, SCENARIOS, _pyflink_home  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
KAFKA_CLIENTS = REPO / ".stack" / "jars" / "kafka-broker" / "kafka-clients-3.9.2.jar"
#: log4j 2.25's build names jackson-bom 2.19.1 (the ``log4j`` parent POM).
JACKSON = [
    Path.home() / ".m2/repository/com/fasterxml/jackson/core" / a / "2.19.1" / f"{a}-2.19.1.jar"
    for a in ("jackson-core", "jackson-databind", "jackson-annotations")
]
FLINK_PATTERN = "%d{yyyy-MM-dd HH:mm:ss,SSS} %-5p %-60c %x - %m%n"

#: scenario -> (help, topic per stream, cluster config, job settings, statements)
RUNS: dict[str, tuple[str, dict[str, str], dict[str, str | None], dict[str, str], list[str]]] = {
    "tm_oom": (
        "a GROUP BY over ever new keys on a small heap: the TaskManager dies of OOM",
        {
            "kafka_pattern": "flink.logs",
            "rsyslog_default": "flink.logs.rsyslog",
            "rsyslog_json": "flink.logs.rsyslog-json",
        },
        {
            # Sized by its parts instead of process.size: a small task heap, the rest default.
            "taskmanager.memory.process.size": None,
            "taskmanager.memory.task.heap.size": "96m",
            "taskmanager.memory.managed.size": "16m",
            # Without it an OOM in a task thread only fails the task and the job restarts.
            "taskmanager.jvm-exit-on-oom": "true",
        },
        {},
        [
            _SOURCE.format(rate=20000, keys=1_000_000_000),
            _SINK,
            # Every record a new key that stays in the state. (Seed 000's HOP window, 2 s
            # slide, slowed the job to a crawl under GC on this heap before it filled it.)
            "INSERT INTO sink SELECT k, COUNT(*) FROM src GROUP BY k",
        ],
    ),
    "layouts": (
        "the checkpoint expiry job, shipped with JsonLayout and EcsLayout.json",
        {"kafka_jsonlayout": "flink.logs.jsonlayout", "kafka_ecs": "flink.logs.ecs"},
        # The job's state never shrinks: on capture_cluster's 1280m the TaskManager thrashed
        # in GC within a minute and lost its heartbeat. Room for the run's two minutes, so
        # checkpoints expire for their 500 ms timeout alone.
        {"taskmanager.memory.process.size": "3072m"},
        {k: v for k, v in SCENARIOS["expiry"][1].items() if "interval" not in k},
        SCENARIOS["expiry"][2],
    ),
}

_RSYSLOG = """\
# rsyslogd -n -f THIS_FILE: tail both Flink processes' log files into Kafka.
global(workDirectory="{work}" maxMessageSize="64k")
module(load="imfile" mode="inotify")
module(load="omkafka")

template(name="flink_json" type="list" option.jsonf="on") {{
  property(outname="@timestamp" name="timereported" dateFormat="rfc3339" format="jsonf")
  property(outname="host" name="hostname" format="jsonf")
  property(outname="message" name="msg" format="jsonf")
  property(outname="file" name="$!metadata!filename" format="jsonf")
}}

# Only the Flink files go to Kafka, not rsyslog's own messages.
ruleset(name="flink") {{
  action(type="omkafka" broker=["127.0.0.1:{port}"] topic="{default_topic}")
  action(type="omkafka" broker=["127.0.0.1:{port}"] topic="{json_topic}" template="flink_json")
}}

{inputs}"""

_IMFILE = (
    'input(type="imfile" file="{file}" tag="{tag}" ruleset="flink" addMetadata="on"\n'
    '      startmsg.regex="^[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}} " readTimeout="2")\n'
)


def _log4j(port: int, streams: dict[str, str]) -> str:
    """Flink's stock ``log4j-console.properties`` with one KafkaAppender per Kafka stream."""
    text = (_pyflink_home() / "conf" / "log4j-console.properties").read_text()
    layouts = {
        "kafka_pattern": [("type", "PatternLayout"), ("pattern", FLINK_PATTERN)],
        "kafka_jsonlayout": [("type", "JsonLayout"), ("compact", "true"), ("eventEol", "true")],
        "kafka_ecs": [
            ("type", "JsonTemplateLayout"),
            ("eventTemplateUri", "classpath:EcsLayout.json"),
        ],
    }
    # kafka-clients logs through log4j too: its loggers must not reach a Kafka appender
    # (log4j refuses the recursion with a warning), so they keep only Flink's own two.
    out = [
        text.rstrip("\n"),
        "",
        "# --- flinkwatch capture: Flink's logs into Kafka ---",
        "logger.kafka.additivity = false",
        "logger.kafka.appenderRef.console.ref = ConsoleAppender",
        "logger.kafka.appenderRef.rolling.ref = RollingFileAppender",
    ]
    for stream, topic in streams.items():
        if stream not in layouts:
            continue
        name = stream.replace("_", "")
        out += [
            f"rootLogger.appenderRef.{name}.ref = {name}",
            f"appender.{name}.name = {name}",
            f"appender.{name}.type = Kafka",
            f"appender.{name}.topic = {topic}",
            # One key per process: its lines stay in order in one partition.
            f"appender.{name}.key = ${{sys:log.file}}",
            *(f"appender.{name}.layout.{k} = {v}" for k, v in layouts[stream]),
            f"appender.{name}.bootstrap.type = Property",
            f"appender.{name}.bootstrap.name = bootstrap.servers",
            f"appender.{name}.bootstrap.value = 127.0.0.1:{port}",
        ]
    return "\n".join(out) + "\n"


def _distribution(work: Path, jars: list[Path]) -> Path:
    """A copy of PyFlink's Flink distribution (bin, lib, plugins) with ``jars`` in lib/."""
    home = work / "flink"
    for part in ("bin", "lib", "plugins"):
        shutil.copytree(_pyflink_home() / part, home / part)
    for jar in jars:
        shutil.copy(jar, home / "lib" / jar.name)
    return home


def _stack(action: str, port: int, kafka_dir: Path, topics: list[str]) -> None:
    env = {
        **os.environ,
        "FLINKWATCH_TOPICS": " ".join(topics),
        "FLINKWATCH_KAFKA_PORT": str(port),
        "FLINKWATCH_KAFKA_DIR": str(kafka_dir),
        # One partition per topic: the topic's order is the order of the replay file.
        "FLINKWATCH_PARTITIONS": "1",
        "PYTHON": str(REPO / ".venv" / "bin" / "python"),
    }
    args = ["up"] if action == "up" else ["down", "--purge"]
    subprocess.run(["bash", str(REPO / "scripts" / "stack.sh"), *args], env=env, check=True)


def run(args: argparse.Namespace) -> None:
    """Start broker and cluster, ship the logs, make the scenario happen, write the fixture."""
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="flink-shippers-"))
    _, streams, *_ = RUNS[args.scenario]
    started: list[subprocess.Popen[bytes]] = []
    stop = threading.Event()
    try:
        _stack("up", args.kafka_port, work / "kafka", list(streams.values()))
        _capture(args, work, started, stop)
    finally:
        # Also when the scenario failed: nothing of the run outlives it.
        stop.set()
        for proc in reversed(started):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
        _stack("down", args.kafka_port, work / "kafka", [])
    print(f"{args.scenario}: {out} (work dir {work})")


def _capture(
    args: argparse.Namespace,
    work: Path,
    started: list[subprocess.Popen[bytes]],
    stop: threading.Event,
) -> None:
    _, streams, cluster, job_settings, statements = RUNS[args.scenario]
    out: Path = args.out
    name = out.name
    stamp = lambda what: print(f"{time.strftime('%H:%M:%S')} {what}", flush=True)  # noqa: E731
    jars = [KAFKA_CLIENTS, *(JACKSON if "kafka_jsonlayout" in streams else [])]
    home = _distribution(work, jars)
    stamp("broker up")
    conf = _conf_dir(work, args.checkpoint_s, cluster)
    (conf / "log4j-console.properties").write_text(_log4j(args.kafka_port, streams))
    for f in ("config.yaml", "log4j-console.properties"):
        shutil.copy(conf / f, out / f)
    os.environ.update(FLINK_CONF_DIR=str(conf), FLINK_LOG_DIR=str(work / "log" / "client"))
    (work / "log" / "client").mkdir(parents=True)
    jm = Process("jobmanager.sh", conf, work / "log" / "jobmanager", home=home)
    started.append(jm.proc)
    _wait("the REST endpoint", lambda: _get("/overview"))
    tm = Process(
        "taskmanager.sh",
        conf,
        work / "log" / "taskmanager",
        "-D",
        f"metrics.reporter.prom.port={TM_PORT}",
        home=home,
    )
    started.append(tm.proc)
    _wait("the TaskManager", lambda: _get("/overview")["taskmanagers"] >= 1)
    stamp("cluster up")
    rsyslog = None
    if "rsyslog_default" in streams:
        rsyslog = _start_rsyslog(work, out, args.kafka_port, streams, [jm, tm])
        started.append(rsyslog)
        stamp("rsyslogd up")
    seen = set[str]()
    scraper = threading.Thread(
        target=_scrape, args=(out / f"{name}.jsonl", args.scrape_s, stop, seen)
    )
    scraper.start()
    job = _submit(conf, args.checkpoint_s, statements, job_settings)
    _wait("the job RUNNING", lambda: _get(f"/jobs/{job}")["state"] == "RUNNING")
    stamp(f"job {job} RUNNING")
    if args.scenario == "tm_oom":
        _wait("the TaskManager JVM's exit", lambda: tm.proc.poll() is not None, args.run_s)
        stamp(f"TaskManager JVM exited ({tm.proc.returncode})")
    else:
        time.sleep(args.run_s)
    time.sleep(args.after_s)
    stop.set()
    scraper.join()
    shutil.copy(jm.log(), out / f"{name}.jobmanager.log")
    shutil.copy(tm.log(), out / f"{name}.taskmanager.log")
    stamp("capture ends")
    if rsyslog is not None:
        time.sleep(5)  # imfile's readTimeout sends the last message of each file
    consume = [str(REPO / ".venv" / "bin" / "python"), __file__, "consume"]
    for stream, topic in streams.items():
        subprocess.run(
            [*consume, "--port", str(args.kafka_port), topic, str(out / f"{name}.{stream}")],
            check=True,
        )


def _start_rsyslog(
    work: Path, out: Path, port: int, streams: dict[str, str], procs: list[Process]
) -> subprocess.Popen[bytes]:
    (work / "rsyslog").mkdir()
    inputs = "".join(_IMFILE.format(file=p.log(), tag=f"flink-{p.log_dir.name}:") for p in procs)
    conf = work / "rsyslog" / "rsyslog.conf"
    conf.write_text(
        _RSYSLOG.format(
            work=work / "rsyslog",
            port=port,
            default_topic=streams["rsyslog_default"],
            json_topic=streams["rsyslog_json"],
            inputs=inputs,
        )
    )
    shutil.copy(conf, out / "rsyslog.conf")
    cmd = ["rsyslogd", "-n", "-f", str(conf), "-i", str(work / "rsyslog" / "rsyslogd.pid")]
    log = (work / "rsyslog" / "rsyslogd.out").open("wb")
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)


def consume(args: argparse.Namespace) -> None:
    """Read a topic from its start to its end now: ``PREFIX.records.jsonl`` and ``PREFIX.log``."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{args.port}", enable_auto_commit=False)
    parts = [TopicPartition(args.topic, p) for p in consumer.partitions_for_topic(args.topic)]
    consumer.assign(parts)
    consumer.seek_to_beginning(*parts)
    end = consumer.end_offsets(parts)
    records = []
    while any(consumer.position(tp) < end[tp] for tp in parts):
        for batch in consumer.poll(timeout_ms=2000).values():
            records += [r for r in batch if r.offset < end[TopicPartition(r.topic, r.partition)]]
    consumer.close()
    records.sort(key=lambda r: (r.partition, r.offset))
    prefix = Path(args.prefix)
    with prefix.with_name(prefix.name + ".records.jsonl").open("w") as f:
        for r in records:
            rec = {
                "topic": r.topic,
                "partition": r.partition,
                "offset": r.offset,
                "timestamp_ms": r.timestamp,
                "key": None if r.key is None else r.key.decode(),
                "value": r.value.decode(),
            }
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    with prefix.with_name(prefix.name + ".log").open("w", newline="") as f:
        for r in records:
            value = r.value.decode()
            f.write(value if value.endswith("\n") else value + "\n")
    print(f"{args.topic}: {len(records)} records -> {prefix}.records.jsonl, {prefix}.log")


def main() -> None:
    """``run`` a scenario (PyFlink's venv) or ``consume`` a topic (the project's venv)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run a scenario and write its fixture")
    r.add_argument(
        "scenario",
        choices=sorted(RUNS),
        help="; ".join(f"{k}: {v[0]}" for k, v in sorted(RUNS.items())),
    )
    r.add_argument("--out", type=Path, required=True, help="fixture directory (its name: NAME)")
    r.add_argument("--run-s", type=float, default=120, help="layouts: run this long; tm_oom: wait")
    r.add_argument("--after-s", type=float, default=60, help="capture this long after")
    r.add_argument("--checkpoint-s", type=float, default=5, help="checkpoint interval")
    r.add_argument("--scrape-s", type=float, default=15, help="scrape interval")
    r.add_argument("--kafka-port", type=int, default=9092, help="the broker's port")
    c = sub.add_parser("consume", help="read a topic into PREFIX.records.jsonl and PREFIX.log")
    c.add_argument("--port", type=int, default=9092)
    c.add_argument("topic")
    c.add_argument("prefix")
    args = ap.parse_args()
    (run if args.command == "run" else consume)(args)


if __name__ == "__main__":
    main()
