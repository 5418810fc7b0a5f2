"""The bench's memory samples: the tree's RSS, and which process holds it."""

from __future__ import annotations

import subprocess
import sys

from bench.run import RssSampler, rss_part


def test_each_process_of_the_tree_is_named_by_its_part() -> None:
    assert rss_part(True, "/work/.venv/bin/python -m bench.run") == "driver_python"
    assert rss_part(False, "/usr/bin/python3 -m pyspark.daemon") == "python_workers"
    assert rss_part(False, "/usr/lib/jvm/java-17-openjdk-amd64/bin/java -cp a.jar") == "driver_jvm"
    assert rss_part(False, "sleep 30") == "other"


def test_the_parts_add_up_to_the_trees_rss() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        rss, _pss, parts = RssSampler()._tree(pss=False)
        # This process and the child (and a Spark session's JVM and workers, if this test
        # process started one before).
        assert {"driver_python", "other"} <= set(parts)
        assert parts["other"] > 0
        assert sum(parts.values()) == rss
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=30)
