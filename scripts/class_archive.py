"""Make the JVM's class-data archive that every local driver JVM starts from (a replay's first).

``scripts/stack.sh fetch`` runs this once per JDK and set of jars: a replay of one of our
own real Flink runs (``tests/data/real/expiry_2_3``), in a JVM that writes every class it
loaded, parsed and verified, into ``OUT`` when it exits (Java's dynamic AppCDS,
``-XX:ArchiveClassesAtExit``). A replay's JVM maps that file instead of reading, parsing
and verifying the same ~15,000 classes from Spark's jars again
(:func:`streaming.session.class_archive`).

Why (issue #34, measured on this 2-core machine while four other Spark test runs shared
it, so indicative): a session's start and its first job over a log file took 34-36 s and
16-20 s without the archive, 16-21 s and 2-7 s with it.

Usage: ``python scripts/class_archive.py OUT`` (the repository on ``PYTHONPATH``).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RUN = REPO / "tests" / "data" / "real" / "expiry_2_3"


def make(out: Path) -> None:
    """Replay :data:`RUN` in a JVM that writes its classes into ``out`` at its exit."""
    from conf import AppConfig
    from streaming.cli.explain import end_states
    from streaming.replay_session import input_bytes, session_settings
    from streaming.session import SessionSpec, java_options
    from streaming.sources import stage_files

    work = Path(tempfile.mkdtemp(prefix="flinkwatch-class-archive-"))
    try:
        logs = stage_files(sorted(RUN.glob("*.log")), work / "logs")
        metrics = stage_files(sorted(RUN.glob("*.jsonl")), work / "metrics")
        # No archive to start from: one made on top of an older one would hold only what
        # that one lacked.
        settings = session_settings(input_bytes(logs, metrics), archive=None)
        java = settings.get("spark.driver.extraJavaOptions", java_options())
        # The archive's own warnings (classes it cannot hold: signed jars, old class files)
        # say nothing to act on.
        dump = f"-XX:ArchiveClassesAtExit={out} -Xlog:cds=off,cds+dynamic=off"
        settings["spark.driver.extraJavaOptions"] = f"{java} {dump}"
        cfg = AppConfig()
        spark = SessionSpec.replay(cfg, settings).start()
        end_states(spark, logs, metrics, cfg, work, ())
        sc = spark.sparkContext
        gateway = sc._gateway  # noqa: SLF001 - the JVM's process is Py4J's
        spark.stop()
        # The JVM exits when its stdin closes and writes the archive as it does.
        proc = gateway.proc  # type: ignore[union-attr]
        gateway.shutdown()  # type: ignore[union-attr]
        proc.stdin.close()
        proc.wait()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    """Write the archive to the path given, or say how to call this."""
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    out = Path(sys.argv[1]).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    make(out)
    if not out.is_file():
        print(f"no class-data archive was written to {out}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
