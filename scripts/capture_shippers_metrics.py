"""Capture real metric and log shippers carrying a real Flink run into a real Kafka broker.

One run of ``capture_flink.py`` (PyFlink's mini-cluster with the Prometheus reporter),
while a local KRaft broker (``scripts/stack.sh``), Telegraf and, when it is built, the
OpenTelemetry Collector (``scripts/build_shippers.sh``) run next to it, each with its
config from ``scripts/shippers/``:

- Telegraf scrapes the reporter every 10 s with the Prometheus input, ``metric_version``
  2 and 1, into four topics: ``telegraf.json``, ``telegraf.influx`` (version 2),
  ``telegraf.json.v1``, ``telegraf.influx.v1``;
- the Collector scrapes the same reporter with its ``prometheus`` receiver into
  ``otel.metrics`` and tails Flink's log file with the ``filelog`` receiver into
  ``otel.logs``, both with the ``kafka`` exporter's ``otlp_json`` encoding.

Both keep only the metric families flinkwatch reads (``capture_flink.KEEP``), with their
own filters. After the run every topic is read from the beginning and each shipper gets a
fixture folder ``<out-dir>/<shipper>_<name>/`` with its config, the run's Flink log
(``<name>.log``) and canonical scrapes (``<name>.jsonl``, from ``capture_flink.py``'s own
scraper), every Kafka record as consumed (``<name>.records.jsonl``: topic, partition,
offset, timestamp_ms, key, value) and one replayable values file per topic, records in
Kafka timestamp order, one a line (an influx record of several lines stays several).

Run it with the project's venv (it has the Kafka client) in a network namespace with only
loopback (Flink's reporter binds the wildcard address; the broker starts inside too)::

    scripts/build_shippers.sh
    unshare -n sh -c 'ip link set lo up && .venv/bin/python \
        scripts/capture_shippers_metrics.py growth --seconds 240 --name growth_2_3'
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHIPPERS = REPO / "scripts" / "shippers"

#: topic -> (shipper, values file suffix)
TOPICS = {
    "telegraf.json": ("telegraf", "telegraf-json.jsonl"),
    "telegraf.influx": ("telegraf", "telegraf-influx.lp"),
    "telegraf.json.v1": ("telegraf", "telegraf-json-v1.jsonl"),
    "telegraf.influx.v1": ("telegraf", "telegraf-influx-v1.lp"),
    "otel.metrics": ("otelcol", "otlp-metrics.jsonl"),
    "otel.logs": ("otelcol", "otlp-logs.jsonl"),
}
#: shipper -> config files copied into its fixture folder
CONFIGS = {
    "telegraf": ["telegraf.conf"],
    "otelcol": ["otelcol.yaml", "otelcol-builder.yaml"],
}


def _start(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    # The child keeps its own descriptor of the file; ours can close at once.
    with log.open("wb") as out:
        return subprocess.Popen(
            cmd, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT
        )


def _stop(proc: subprocess.Popen[bytes]) -> int:
    # SIGTERM: both shippers flush what they hold before they exit.
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def consume(bootstrap: str, topics: list[str]) -> list[dict]:
    """Every record of ``topics`` from the beginning, by topic, partition and offset."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    parts = [
        TopicPartition(t, p) for t in topics for p in sorted(consumer.partitions_for_topic(t) or ())
    ]
    consumer.assign(parts)
    consumer.seek_to_beginning(*parts)
    end = consumer.end_offsets(parts)
    out: list[dict] = []
    deadline = time.monotonic() + 120
    while any(consumer.position(tp) < end[tp] for tp in parts):
        if time.monotonic() > deadline:
            msg = f"topics not read to their end in 120 s: {end}"
            raise RuntimeError(msg)
        for batch in consumer.poll(timeout_ms=1000).values():
            for r in batch:
                out.append(
                    {
                        "topic": r.topic,
                        "partition": r.partition,
                        "offset": r.offset,
                        "timestamp_ms": r.timestamp,
                        "key": None if r.key is None else r.key.decode(),
                        "value": None if r.value is None else r.value.decode(),
                    }
                )
    consumer.close()
    out.sort(key=lambda r: (r["topic"], r["partition"], r["offset"]))
    return out


def write_fixture(folder: Path, name: str, shipper: str, records: list[dict], run: Path) -> None:
    """One shipper's fixture folder: configs, the run's log and scrapes, its records."""
    folder.mkdir(parents=True, exist_ok=True)
    for cfg in CONFIGS[shipper]:
        shutil.copy(SHIPPERS / cfg, folder / cfg)
    for suffix in (".log", ".jsonl"):
        shutil.copy(run.with_suffix(suffix), folder / f"{name}{suffix}")
    mine = [r for r in records if TOPICS[r["topic"]][0] == shipper]
    with (folder / f"{name}.records.jsonl").open("w") as f:
        for r in mine:
            f.write(json.dumps(r) + "\n")
    for topic, (owner, suffix) in TOPICS.items():
        if owner != shipper:
            continue
        ordered = sorted(
            (r for r in mine if r["topic"] == topic),
            key=lambda r: (r["timestamp_ms"], r["partition"], r["offset"]),
        )
        with (folder / f"{name}.{suffix}").open("w") as f:
            for r in ordered:
                value = r["value"] or ""
                f.write(value if value.endswith("\n") else value + "\n")
        print(f"{folder.name}/{name}.{suffix}: {len(ordered)} records")


def main() -> None:
    """Run the broker, the shippers and one Flink scenario; write the fixtures."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenario", help="a capture_flink.py scenario, e.g. growth")
    ap.add_argument("--name", required=True, help="the run's name, e.g. growth_2_3")
    ap.add_argument("--seconds", type=float, default=240, help="how long the job runs")
    ap.add_argument("--out-dir", type=Path, default=REPO / "tests" / "data" / "shippers")
    ap.add_argument("--kafka-port", type=int, default=9392)
    ap.add_argument("--reporter-port", type=int, default=9249)
    ap.add_argument("--bin", type=Path, default=REPO / ".stack" / "shippers", help="shippers")
    ap.add_argument("--flink-python", type=Path, default=REPO / ".flink" / "bin" / "python")
    ap.add_argument("--drain-s", type=float, default=20, help="shippers' time to send the tail")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="shippers-capture-"))
    bootstrap = f"127.0.0.1:{args.kafka_port}"
    stack_env = {
        **os.environ,
        "FLINKWATCH_TOPICS": " ".join(TOPICS),
        "FLINKWATCH_KAFKA_PORT": str(args.kafka_port),
        "FLINKWATCH_KAFKA_DIR": str(work / "kafka"),
    }
    shippers = ["telegraf"]
    if (args.bin / "otelcol-flinkwatch").exists():
        shippers.append("otelcol")
    print(f"work dir {work}; shippers: {', '.join(shippers)}", flush=True)
    # capture_flink.py makes its work directory (and the log) under TMPDIR: the
    # Collector's filelog receiver finds the file by this glob once Flink creates it.
    flink_tmp = work / "flink-tmp"
    flink_tmp.mkdir()
    metrics_target = f"127.0.0.1:{args.reporter_port}"
    subprocess.run([str(REPO / "scripts" / "stack.sh"), "up"], env=stack_env, check=True)
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        procs["telegraf"] = _start(
            [str(args.bin / "telegraf"), "--config", str(SHIPPERS / "telegraf.conf")],
            {"FLINK_METRICS_URL": f"http://{metrics_target}/metrics", "KAFKA_BROKER": bootstrap},
            work / "telegraf.out",
        )
        if "otelcol" in shippers:
            procs["otelcol"] = _start(
                [str(args.bin / "otelcol-flinkwatch"), "--config", str(SHIPPERS / "otelcol.yaml")],
                {
                    "FLINK_METRICS_TARGET": metrics_target,
                    "FLINK_LOG_GLOB": str(flink_tmp / "flink-capture-*" / "log" / "*.log"),
                    "KAFKA_BROKER": bootstrap,
                },
                work / "otelcol.out",
            )
        run = work / "run" / args.name
        subprocess.run(
            [
                str(args.flink_python),
                str(REPO / "scripts" / "capture_flink.py"),
                args.scenario,
                "--seconds",
                str(args.seconds),
                "--scrape-s",
                "10",
                "--port",
                str(args.reporter_port),
                "--out",
                str(run),
            ],
            env={**os.environ, "TMPDIR": str(flink_tmp)},
            check=True,
        )
        time.sleep(args.drain_s)
        for shipper, proc in procs.items():
            print(f"{shipper} exited with {_stop(proc)} (output: {work / (shipper + '.out')})")
        records = consume(bootstrap, list(TOPICS))
        for shipper in shippers:
            write_fixture(args.out_dir / f"{shipper}_{args.name}", args.name, shipper, records, run)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
        subprocess.run([str(REPO / "scripts" / "stack.sh"), "down", "--purge"], env=stack_env)


if __name__ == "__main__":
    main()
