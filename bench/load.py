"""Benchmark load: the simulated fleet, pre-generated to a file, sent by a Java producer.

The simulator (:mod:`lab.fleet`) writes the records of a fleet for a time range
into a binary file; ``bench/java/PacedProducer.java`` (compiled here with the JDK's
``javac`` against the broker's own kafka-clients jar) sends them, either as fast as the
broker takes them (a backlog) or each at the wall-clock instant equal to its event time
(a steady real-time stream). Generating first keeps the generator's CPU out of the
measured window; the Java producer keeps the send side cheap (kafka-python managed about
7k records/s here while sharing the two cores with Spark).
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from lab.fleet import SimRecord

REPO = Path(__file__).resolve().parent.parent
_HEAD = struct.Struct(">qbi")
_LEN = struct.Struct(">i")


@dataclass
class LoadFile:
    """A pre-generated load: where it is and what is in it."""

    path: Path
    records: int
    logs: int
    bytes: int
    first_ms: int
    last_ms: int


def write_load(records: Iterable[SimRecord], path: Path) -> LoadFile:
    """Write records in the producer's format (see PacedProducer.java)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    n = logs = size = 0
    first = last = 0
    with path.open("wb") as f:
        for r in records:
            key = r.key
            f.write(
                _HEAD.pack(
                    r.time_ms, 0 if r.stream == "log" else 1, -1 if key is None else len(key)
                )
            )
            if key is not None:
                f.write(key)
            f.write(_LEN.pack(len(r.value)))
            f.write(r.value)
            if n == 0:
                first = r.time_ms
            last = r.time_ms
            n += 1
            logs += r.stream == "log"
            size += len(r.value)
    return LoadFile(path, n, logs, size, first, last)


def _classpath() -> str:
    stack = Path(os.environ.get("FLINKWATCH_STACK_DIR", str(REPO / ".stack")))
    return f"{stack / 'jars' / 'kafka-broker'}/*"


def compile_producer(work: Path) -> Path:
    """Compile PacedProducer.java into ``work/classes`` (once); returns the class dir."""
    out = work / "classes"
    cls = out / "PacedProducer.class"
    src = REPO / "bench" / "java" / "PacedProducer.java"
    if cls.exists() and cls.stat().st_mtime >= src.stat().st_mtime:
        return out
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["javac", "-d", str(out), "-cp", _classpath(), str(src)], check=True, capture_output=True
    )
    return out


def producer_command(
    classes: Path, bootstrap: str, logs_topic: str, metrics_topic: str, load: Path, paced: bool
) -> list[str]:
    """The java command line that sends ``load``."""
    log4j = REPO / "bench" / "java" / "log4j.properties"
    return [
        "java",
        f"-Dlog4j.configuration=file:{log4j}",
        "-Xmx256m",
        "-cp",
        f"{classes}:{_classpath()}",
        "PacedProducer",
        bootstrap,
        logs_topic,
        metrics_topic,
        str(load),
        "paced" if paced else "fast",
    ]


def send(
    classes: Path, bootstrap: str, logs_topic: str, metrics_topic: str, load: Path, paced: bool
) -> dict[str, float]:
    """Send a load file and wait; returns the producer's own numbers."""
    out = subprocess.run(
        producer_command(classes, bootstrap, logs_topic, metrics_topic, load, paced),
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result
