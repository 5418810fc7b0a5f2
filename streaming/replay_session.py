"""The Spark session of a command over files: ``replay``, ``explain``, ``doctor``, ``parse``.

Apart from :mod:`streaming.replay` so that a command can start its session before it
imports the replay's machinery: the JVM's start is mostly a wait for this process (Spark's
launcher, the JVM's classes, the context), and the imports fill it (:func:`replay_session`'s
``meanwhile``).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from pyspark.sql import SparkSession

from conf import AppConfig
from streaming.session import SessionSpec, archive_options, class_archive, java_options

#: Up to this much input the JVM compiles with C1 only: its optimising compiler (C2)
#: took 12.8 of the 38 CPU seconds of a small real run's replay; with C1 alone the run
#: took 20 (measured, issue #34). Past it the records are many and C2's faster code pays
#: for its compiling: an hour of the 100-job fleet (700 MB) took 187 CPU s with C1 alone,
#: 150 with C2 (the same shared machine, indicative). Up to it the shards also run in the
#: driver (``streaming.replay._shards_here``): past it two Python workers share the
#: records' work.
SHORT_INPUT_BYTES = 64 * 2**20

#: A short replay evaluates the parse's expressions as they are, without generating and
#: compiling a Java class for each first (Spark's interpreted projections and
#: predicates, the fallback it uses when a generated class fails to compile): for a few
#: thousand records the compiling costs more than it saves. The small real run
#: (growth_2_3), three runs each, interleaved on a quiet machine: 11.13 s wall (10.86-
#: 11.49), 13.42 CPU s with the classes; 10.17 s (9.96-10.19), 11.87 CPU s without
#: (issue #34). A long input keeps them: there the records are many.
INTERPRETED = {"spark.sql.codegen.factoryMode": "NO_CODEGEN"}


def short_input(input_bytes: int) -> bool:
    """Whether ``input_bytes`` of files make a short replay (:data:`SHORT_INPUT_BYTES`)."""
    return input_bytes <= SHORT_INPUT_BYTES


def session_settings(input_bytes: int, archive: Path | None = None) -> dict[str, str]:
    """Spark settings beyond the live job's for a replay of ``input_bytes`` of files.

    ``archive``: the JVM's class-data archive (:func:`streaming.session.class_archive`):
    the classes a replay loads, already parsed and verified, which the JVM maps instead
    of reading them from Spark's jars (``scripts/class_archive.py`` says what it saves).
    """
    java: list[str] = []
    out: dict[str, str] = {}
    if short_input(input_bytes):
        java.append("-XX:TieredStopAtLevel=1")
        out.update(INTERPRETED)
    if archive is not None:
        java.extend(archive_options(archive))
    if java:
        out["spark.driver.extraJavaOptions"] = java_options(*java)
    return out


def replay_session(
    cfg: AppConfig,
    *dirs: Path,
    partitions: int | None = None,
    meanwhile: Sequence[str] = (),
) -> tuple[SparkSession, bool]:
    """The session for a replay of the files in these directories, and whether it is short.

    A short input (:func:`short_input`) has its shards run in the driver. ``partitions``:
    the shuffle's, where not the detect state's (``spark.shuffle_partitions``): a command
    that only parses and counts (``doctor``, ``parse``). ``meanwhile``: modules to import
    while the session starts (:func:`imported_meanwhile`).
    """
    size = input_bytes(*dirs)
    spec = SessionSpec.replay(cfg, session_settings(size, class_archive()))
    if partitions is not None:
        spec = replace(spec, shuffle_partitions=partitions)
    with imported_meanwhile(meanwhile):
        spark = spec.start()
    return spark, short_input(size)


def input_bytes(*dirs: Path) -> int:
    """The size of the files in ``dirs`` (staged links followed)."""
    return sum(f.stat().st_size for d in dirs for f in d.iterdir() if f.is_file())


@contextmanager
def imported_meanwhile(modules: Sequence[str]) -> Iterator[None]:
    """Import ``modules`` in a thread of their own while the ``with`` block runs.

    For the block that starts the JVM: this process mostly waits on it then (a second
    on Spark's launcher, then the context's and the session's calls), and the imports
    need this process's interpreter, not the JVM. ``flinkwatch replay`` imports its
    modules after its front's (``streaming.cli.replay_run``: the replay, delivery, sinks,
    pandas, which PySpark's own type converters also import when the context starts): from
    the command to a ready session and its modules 6.2 s before, 5.3 s with them imported
    here (a slow hour, median of 3 each). An import that fails stops the thread's list
    there, for the caller's own import to raise; the block ends once the thread has.
    """
    thread = threading.Thread(
        target=_import_all, args=(tuple(modules),), name="flinkwatch-imports", daemon=True
    )
    thread.start()
    try:
        yield
    finally:
        thread.join()


def _import_all(modules: tuple[str, ...]) -> None:
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the caller's own import says what failed
            return
