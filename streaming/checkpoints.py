"""Where the queries' checkpoints live: a local directory, or a Hadoop file system.

Spark writes the checkpoints (offsets, commits, the detect query's RocksDB state) through
Hadoop's file system API, so ``output.checkpoint_location`` may be an ``hdfs://`` or
``s3a://`` URI. The driver reads a few things in them itself: the parse query's last
committed offsets (the catch-up and the bus placement), whether a checkpoint has commits,
the detect query's id in its ``metadata``; and it deletes the parse checkpoint of the mode
it switches away from. Those reads take a :class:`CheckpointDir`, the part of
:class:`pathlib.Path` they use: a local directory is a ``Path``, as before; on a Hadoop
file system it is a :class:`HadoopDir`, which asks the session's JVM (the path's
``FileSystem`` with the session's Hadoop configuration, so the ``spark.hadoop.*`` settings
that reach Spark's own writes reach these reads too).

Everything else flinkwatch keeps (the ledger, the silences, the bus placement record, the
alert file, dead letters) stays in ``output.state_dir`` on the driver's disk.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from conf import checkpoint_scheme

log = logging.getLogger(__name__)

#: The session setting that names the class writing checkpoint files.
FILE_MANAGER_KEY = "spark.sql.streaming.checkpointFileManagerClass"
#: Write to a temporary file, then rename: atomic on a local disk and on HDFS (the default
#: of :func:`streaming.session.get_session`).
RENAMING = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
)
#: Write the file in place through an abortable stream (spark-hadoop-cloud): an object
#: store makes an upload visible whole, at its close, or not at all (an abort), so no
#: rename is needed. S3A's rename is a copy and a delete, neither atomic nor cheap.
ABORTABLE = "org.apache.spark.internal.io.cloud.AbortableStreamBasedCheckpointFileManager"
#: Object stores whose S3A-like connectors have abortable output streams.
OBJECT_STORES = frozenset({"s3a"})


class Stat(Protocol):
    """What the driver reads of a checkpoint file's status."""

    @property
    def st_mtime(self) -> float:
        """Last modification, in seconds since the epoch."""
        ...


class CheckpointDir(Protocol):
    """A checkpoint directory or file: the part of :class:`pathlib.Path` the driver uses."""

    @property
    def name(self) -> str:
        """The last component."""
        ...

    def __truediv__(self, key: str) -> CheckpointDir: ...

    def exists(self) -> bool:
        """Whether it exists."""
        ...

    def is_dir(self) -> bool:
        """Whether it is a directory."""
        ...

    def iterdir(self) -> Iterator[CheckpointDir]:
        """What the directory holds."""
        ...

    def stat(self) -> Stat:
        """Its status."""
        ...

    def read_text(self, encoding: str | None = None) -> str:
        """The file's content."""
        ...

    def mkdir(self, mode: int = 0o777, parents: bool = False, exist_ok: bool = False) -> None:
        """Create the directory."""
        ...


class _HadoopStat:
    def __init__(self, status: Any) -> None:
        self.st_mtime = int(status.getModificationTime()) / 1000.0


def _io_error(exc: Py4JJavaError, path: object) -> OSError:
    """The Java exception as the ``OSError`` a local file system would raise."""
    java = exc.java_exception
    kind = java.getClass().getName()
    text = f"{path}: {kind}: {java.getMessage()}"
    return FileNotFoundError(text) if kind == "java.io.FileNotFoundException" else OSError(text)


class HadoopDir:
    """A path on a Hadoop file system (``hdfs://``, ``s3a://``...), read through the JVM.

    Java failures come out as ``OSError`` (``FileNotFoundError`` for a missing path), as
    ``pathlib`` raises them, so callers handle both kinds of directory alike.

    Example:
        >>> detect = HadoopDir.of(spark, "hdfs://nn:8020/fw/checkpoints") / "detect"
        >>> sorted(p.name for p in (detect / "commits").iterdir())
        ['0', '1']
    """

    def __init__(self, fs: Any, path: Any, jvm: Any, status: Any = None) -> None:
        self._fs = fs
        self._path = path
        self._jvm = jvm
        # From the listing that found it: a listing gives every entry's status at once.
        self._listed = status

    @classmethod
    def of(cls, spark: SparkSession, uri: str) -> HadoopDir:
        """``uri`` on its file system, configured as the session's Spark writes are."""
        sc = spark.sparkContext
        jvm = sc._jvm  # noqa: SLF001 - Hadoop's API is reachable only through the JVM
        conf = sc._jsc.hadoopConfiguration()  # type: ignore[union-attr]  # noqa: SLF001
        path = jvm.org.apache.hadoop.fs.Path(uri)  # type: ignore[union-attr]
        try:
            fs = path.getFileSystem(conf)
        except Py4JJavaError as exc:
            raise _io_error(exc, uri) from exc
        return cls(fs, path, jvm)

    @property
    def name(self) -> str:
        """The last component."""
        return str(self._path.getName())

    def __truediv__(self, key: str) -> HadoopDir:
        return HadoopDir(self._fs, self._jvm.org.apache.hadoop.fs.Path(self._path, key), self._jvm)

    def __str__(self) -> str:
        return str(self._path.toString())

    def __repr__(self) -> str:
        return f"HadoopDir({str(self)!r})"

    def _status(self) -> Any:
        """The file status; None when the path does not exist."""
        if self._listed is not None:
            return self._listed
        try:
            return self._fs.getFileStatus(self._path)
        except Py4JJavaError as exc:
            err = _io_error(exc, self)
            if isinstance(err, FileNotFoundError):
                return None
            raise err from exc

    def exists(self) -> bool:
        """Whether it exists."""
        return self._status() is not None

    def is_dir(self) -> bool:
        """Whether it is a directory."""
        status = self._status()
        return status is not None and bool(status.isDirectory())

    def iterdir(self) -> Iterator[HadoopDir]:
        """What the directory holds (one listing call)."""
        try:
            listing = self._fs.listStatus(self._path)
        except Py4JJavaError as exc:
            raise _io_error(exc, self) from exc
        for status in listing:
            yield HadoopDir(self._fs, status.getPath(), self._jvm, status)

    def stat(self) -> Stat:
        """Its status (its modification time)."""
        status = self._status()
        if status is None:
            msg = f"{self}: no such file"
            raise FileNotFoundError(msg)
        return _HadoopStat(status)

    def read_text(self, encoding: str | None = None) -> str:
        """The file's content."""
        try:
            stream = self._fs.open(self._path)
            try:
                data = self._jvm.org.apache.hadoop.io.IOUtils.readFullyToByteArray(stream)
            finally:
                stream.close()
        except Py4JJavaError as exc:
            raise _io_error(exc, self) from exc
        return bytes(data).decode(encoding or "utf-8")

    def mkdir(self, mode: int = 0o777, parents: bool = False, exist_ok: bool = False) -> None:
        """Create the directory (with its parents: Hadoop's ``mkdirs`` always does)."""
        del mode, parents  # a Hadoop file system applies its own permissions
        if not exist_ok and self.exists():
            msg = f"{self}: exists"
            raise FileExistsError(msg)
        try:
            self._fs.mkdirs(self._path)
        except Py4JJavaError as exc:
            raise _io_error(exc, self) from exc

    def rename(self, name: str) -> None:
        """Give it another name in the same directory."""
        target = self._jvm.org.apache.hadoop.fs.Path(self._path.getParent(), name)
        try:
            done = self._fs.rename(self._path, target)
        except Py4JJavaError as exc:
            raise _io_error(exc, self) from exc
        if not done:
            msg = f"{self}: could not be renamed to {name}"
            raise OSError(msg)

    def delete(self) -> None:
        """Delete it and all it holds; nothing when it does not exist."""
        try:
            self._fs.delete(self._path, True)
        except Py4JJavaError as exc:
            raise _io_error(exc, self) from exc


def is_local(location: str) -> bool:
    """Whether ``location`` is a path (or ``file:`` URI) on the driver's file system."""
    return checkpoint_scheme(location) in (None, "file")


def open_dir(spark: SparkSession, location: str) -> CheckpointDir:
    """The checkpoint directory at ``location``: a ``Path``, or a :class:`HadoopDir`."""
    if is_local(location):
        return Path(urlsplit(location).path if checkpoint_scheme(location) else location)
    return HadoopDir.of(spark, location)


def remove(directory: CheckpointDir) -> None:
    """Delete a checkpoint directory, if it exists."""
    if isinstance(directory, HadoopDir):
        directory.delete()
    else:
        shutil.rmtree(str(directory), ignore_errors=True)


#: A detect checkpoint set aside by :func:`set_aside_stale` is renamed ``<name><this><UTC>``.
STALE_SUFFIX = ".stale-"


def last_commit_s(directory: CheckpointDir) -> float | None:
    """When the query of a checkpoint last committed a batch (file time); None if never."""
    commits = directory / "commits"
    if not commits.is_dir():
        return None
    return max((p.stat().st_mtime for p in commits.iterdir()), default=None)


def set_aside_stale(
    root: CheckpointDir, current: str, query: str, *, stamp: str | None = None
) -> str | None:
    """Set the detect checkpoint ``current`` aside if another layout's was used after it.

    The detect query's checkpoint is named after its state layout
    (``<query>-shards<N>-p<partitions>-<layout>``, :func:`streaming.shard_keys.
    checkpoint_name`): another ``spark.state_shards``, ``spark.shuffle_partitions`` or
    layout starts a new one, rebuilt from the bus. Going back (32 -> 64 -> 32 shards, or a
    release back and forth) would find the old directory and resume it: its offsets and
    state as they were when it was left, maybe days ago and past the bus's retention
    (then every start fails on data loss), its incidents as they stood then. So when a
    sibling layout's checkpoint committed later than ``current`` did, ``current`` is
    renamed to ``<current>.stale-<stamp>`` (kept, not deleted: it can be moved back) and
    the query
    starts afresh, as after any change of layout.

    Args:
        root: The checkpoint location.
        current: The name of the checkpoint the detect query is about to start on.
        query: The name's prefix before ``-shards`` (``detect-kafka``, ``detect``).
        stamp: The suffix's time (UTC ``YYYYmmddTHHMMSSZ``; now by default).

    Returns:
        The warning to log, naming both directories and what to do; None when nothing
        was set aside.
    """
    here = root / current
    if not here.is_dir():
        return None
    mine = last_commit_s(here)
    # Named before the shards' keys followed the partitions too: <query>-shards<N>-<layout>.
    sibling = re.compile(rf"{re.escape(query)}-shards\d+(-p\d+)?-\w+")
    later = [
        (t, d)
        for d in root.iterdir()
        if d.name != current
        and sibling.fullmatch(d.name)
        and (t := last_commit_s(d)) is not None
        and (mine is None or t > mine)
    ]
    if not later:
        return None
    newer = max(later, key=lambda td: td[0])[1]
    stamp = stamp or dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    aside = f"{current}{STALE_SUFFIX}{stamp}"
    if isinstance(here, Path):
        here.rename(here.with_name(aside))
    elif isinstance(here, HadoopDir):
        here.rename(aside)
    return (
        f"detect checkpoint {here} was left for {newer} (spark.state_shards, "
        f"spark.shuffle_partitions or the state layout changed since) and is stale: its "
        f"offsets may be past the bus's retention and its state is as it was then. Set it "
        f"aside as {aside}; the detect query rebuilds its state from what the bus holds, "
        f"as after any change of spark.state_shards. To resume it instead (its offsets "
        f"still on the bus): stop "
        f"flinkwatch, move {newer.name} aside and {aside} back to {current}."
    )


def file_manager(location: str) -> str:
    """The checkpoint file manager for ``location``'s file system."""
    return ABORTABLE if checkpoint_scheme(location) in OBJECT_STORES else RENAMING


def use_file_manager(spark: SparkSession, location: str) -> None:
    """Have the session write checkpoints as ``location``'s file system needs.

    The file manager is a session setting that each query (and each of its state stores)
    reads when it starts, so the pipeline sets it before it starts its queries. A class
    the user chose (``spark-submit --conf``) that is neither of flinkwatch's is kept.
    """
    want = file_manager(location)
    have = spark.conf.get(FILE_MANAGER_KEY, None)
    if have != want and have in (None, RENAMING, ABORTABLE):
        spark.conf.set(FILE_MANAGER_KEY, want)
        log.info("checkpoints: %s, written by %s", location, want.rsplit(".", 1)[-1])
