"""Where the parse query resumes, and how far behind it is: read from a checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

from streaming.catchup import backlog, committed_offsets


def _batch(ckpt: Path, n: int, *lines: dict, commit: bool = True) -> None:
    (ckpt / "offsets").mkdir(parents=True, exist_ok=True)
    (ckpt / "commits").mkdir(parents=True, exist_ok=True)
    body = ["v1", json.dumps({"batchWatermarkMs": 0}), *[json.dumps(x) for x in lines]]
    (ckpt / "offsets" / str(n)).write_text("\n".join(body))
    if commit:
        (ckpt / "commits" / str(n)).write_text("v1\n{}")


def test_resume_from_the_last_committed_batch_of_every_source(tmp_path: Path) -> None:
    ckpt = tmp_path / "parse-realtime"
    assert committed_offsets(ckpt) is None
    _batch(ckpt, 0, {"l": {"0": 1, "1": 2}}, {"m": {"0": 5}})
    _batch(ckpt, 1, {"l": {"0": 7, "1": 9}}, {"m": {"0": 50}})
    # Batch 2 started but did not commit: its records may be half parsed; redo them.
    _batch(ckpt, 2, {"l": {"0": 8, "1": 9}}, {"m": {"0": 90}}, commit=False)
    assert committed_offsets(ckpt) == {"l": {"0": 7, "1": 9}, "m": {"0": 50}}


def test_backlog_counts_from_the_resume_point_or_the_configured_start() -> None:
    first = {"l": {"0": 0, "1": 0}, "m": {"0": 10}}
    end = {"l": {"0": 10, "1": 20}, "m": {"0": 1000}}
    assert backlog({"l": {"0": 7, "1": 9}, "m": {"0": 50}}, first, end, True) == {
        "l": 14,
        "m": 950,
    }
    # A fresh start reads from the beginning (earliest) or from the end (latest).
    assert backlog(None, first, end, True) == {"l": 30, "m": 990}
    assert backlog(None, first, end, False) == {"l": 0, "m": 0}
    # A partition the checkpoint does not know yet (added later) counts from its start.
    assert backlog({"l": {"0": 10}}, first, end, True)["l"] == 20
