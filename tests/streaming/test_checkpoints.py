"""Checkpoint directories read through Hadoop's API as through pathlib, and where they go.

The Hadoop side runs on the shared session against the local file system (``file://``),
which takes the same JVM calls an ``hdfs://`` or ``s3a://`` directory does
(tests/integration/test_dfs_checkpoints.py runs those for real).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from streaming import checkpoints
from streaming.catchup import _last_commit_mtime, committed_offsets
from streaming.checkpoints import HadoopDir
from streaming.shard_keys import checkpoint_name
from tests.streaming.test_catchup import _batch


def test_object_stores_are_written_without_renames_the_rest_with_them() -> None:
    assert checkpoints.file_manager("s3a://b/ck") == checkpoints.ABORTABLE
    for where in ("hdfs://nn:8020/ck", "/var/lib/flinkwatch/checkpoints", "file:///ck"):
        assert checkpoints.file_manager(where) == checkpoints.RENAMING


@pytest.mark.spark
def test_the_file_manager_follows_the_location_and_leaves_a_users_own_class(
    spark: SparkSession, tmp_path: Path
) -> None:
    key = checkpoints.FILE_MANAGER_KEY
    s3 = "s3a://bucket/ck"
    try:
        checkpoints.use_file_manager(spark, s3)
        assert spark.conf.get(key) == checkpoints.ABORTABLE
        checkpoints.use_file_manager(spark, str(tmp_path))
        assert spark.conf.get(key) == checkpoints.RENAMING
        spark.conf.set(key, "com.example.TheirCheckpointFileManager")
        checkpoints.use_file_manager(spark, s3)
        assert spark.conf.get(key) == "com.example.TheirCheckpointFileManager"
    finally:
        spark.conf.set(key, checkpoints.RENAMING)


@pytest.mark.spark
def test_a_hadoop_directory_reads_a_checkpoint_as_pathlib_does(
    spark: SparkSession, tmp_path: Path
) -> None:
    local = tmp_path / "parse-realtime"
    remote = HadoopDir.of(spark, local.as_uri())
    assert committed_offsets(remote) is None and not remote.exists()
    _batch(local, 0, {"l": {"0": 1, "1": 2}}, {"m": {"0": 5}})
    _batch(local, 1, {"l": {"0": 7, "1": 9}}, {"m": {"0": 50}})
    _batch(local, 2, {"l": {"0": 8, "1": 9}}, {"m": {"0": 90}}, commit=False)
    assert (
        committed_offsets(remote)
        == committed_offsets(local)
        == {
            "l": {"0": 7, "1": 9},
            "m": {"0": 50},
        }
    )
    assert _last_commit_mtime(remote) == pytest.approx(_last_commit_mtime(local), abs=1.0)
    assert remote.is_dir() and (remote / "offsets" / "0").exists()
    assert not (remote / "offsets" / "0").is_dir()
    assert (remote / "commits" / "1").read_text() == "v1\n{}"
    with pytest.raises(FileNotFoundError):
        (remote / "metadata").read_text()
    with pytest.raises(FileNotFoundError):
        list((remote / "nothing").iterdir())
    (remote / "sub").mkdir(parents=True, exist_ok=True)
    assert (local / "sub").is_dir()
    (remote / "sub").rename("sub.stale-1")
    assert (local / "sub.stale-1").is_dir() and not (local / "sub").exists()
    checkpoints.remove(remote)
    assert not local.exists()
    checkpoints.remove(remote)  # gone already: nothing to do


def _run(root: Path, shards: int, at_s: float) -> str | None:
    """A start of the detect query on ``shards`` shards whose batches commit at ``at_s``."""
    return _start(root, f"detect-kafka-shards{shards}-packed2", at_s)


def _start(root: Path, name: str, at_s: float) -> str | None:
    """A start of the detect query on checkpoint ``name`` whose batches commit at ``at_s``."""
    warning = checkpoints.set_aside_stale(root, name, "detect-kafka", stamp="20261124T150000Z")
    commit = root / name / "commits" / str(int(at_s))
    commit.parent.mkdir(parents=True, exist_ok=True)
    commit.write_text("v1\n{}")
    os.utime(commit, (at_s, at_s))
    return warning


def test_going_back_to_a_shard_count_used_before_sets_its_old_checkpoint_aside(
    tmp_path: Path,
) -> None:
    day = 86_400.0
    assert _run(tmp_path, 32, 1 * day) is None
    assert _run(tmp_path, 32, 2 * day) is None  # a restart on the same layout: nothing
    assert _run(tmp_path, 64, 3 * day) is None  # a new layout: a new checkpoint, as ever
    # 32 again: its directory is the one of day 2, whose offsets may be past the retention.
    warning = _run(tmp_path, 32, 4 * day)
    assert warning is not None
    old, aside = (
        "detect-kafka-shards32-packed2",
        "detect-kafka-shards32-packed2.stale-20261124T150000Z",
    )
    assert f"{tmp_path / old}" in warning and "detect-kafka-shards64-packed2" in warning
    assert aside in warning and "rebuilds" in warning
    assert (tmp_path / aside / "commits" / str(int(2 * day))).exists()
    # The query started afresh in the layout's directory; the next start finds it the latest.
    assert sorted(p.name for p in (tmp_path / old / "commits").iterdir()) == [str(int(4 * day))]
    assert _run(tmp_path, 32, 5 * day) is None
    # Another query's directories and a layout never used are left alone.
    assert checkpoints.set_aside_stale(tmp_path, "detect-shards8-packed2", "detect") is None
    assert checkpoints.set_aside_stale(tmp_path / "none", "detect-kafka-x", "detect-kafka") is None


def test_a_checkpoint_named_before_the_partitions_were_in_its_name_is_a_sibling(
    tmp_path: Path,
) -> None:
    """An upgrade starts anew (the shards' keys follow the partitions); a rollback after it
    finds the old release's directory stale, as after any change of layout."""
    day = 86_400.0
    before = "detect-kafka-shards32-packed2"
    after = checkpoint_name("detect-kafka", 32, 2, "packed2")
    assert after != before
    assert _start(tmp_path, before, 1 * day) is None
    assert _start(tmp_path, after, 2 * day) is None
    warning = _start(tmp_path, before, 3 * day)
    assert warning is not None and after in warning and "spark.shuffle_partitions" in warning
    assert (tmp_path / f"{before}.stale-20261124T150000Z").is_dir()
    # And forward again: the upgraded directory is the stale one now.
    assert _start(tmp_path, after, 4 * day) is not None
