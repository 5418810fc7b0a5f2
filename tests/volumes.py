"""Volumes that really run out of space, for the disk-full tests.

* :func:`tiny_volume`: a tmpfs of a few hundred KB mounted for the test. Filled with
  :func:`fill` until the kernel refuses a byte more (``ENOSPC``); :meth:`Filler.free`
  gives the space back. Mounting needs ``CAP_SYS_ADMIN`` (root in the CI container);
  where it is not permitted the test is skipped, saying so.
* :data:`DEV_FULL`: Linux's ``/dev/full``, which answers every write with ``ENOSPC`` and
  needs nothing: a file linked to it is a file on a volume that is full.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

DEV_FULL = Path("/dev/full")


@contextmanager
def tiny_volume(where: Path, size_kb: int = 512) -> Iterator[Path]:
    """A tmpfs of ``size_kb`` mounted at ``where`` (created) for the block's duration."""
    where.mkdir(parents=True, exist_ok=True)
    opts = f"size={size_kb}k,mode=0755"
    out = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", opts, "flinkwatch-test", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {(out.stderr or out.stdout).strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False)


@dataclass
class Filler:
    """The file that takes a volume's last free byte."""

    path: Path

    def free(self) -> None:
        """Give the space back."""
        self.path.unlink()


def fill(volume: Path) -> Filler:
    """Write to ``volume`` until the kernel says ``ENOSPC``."""
    path = volume / ".filler"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    chunk = b"\0" * 65536
    try:
        while True:
            os.write(fd, chunk)
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
    finally:
        os.close(fd)
    assert os.statvfs(volume).f_bavail == 0
    return Filler(path)
