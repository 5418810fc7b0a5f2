"""File sinks: the alert log (JSON lines) and dead letters."""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from detectors import Alert
from sinks.base import AlertSink

log = logging.getLogger(__name__)


def iso_utc(ms: int) -> str:
    """Epoch ms → ISO-8601 UTC with milliseconds and a ``Z``."""
    t = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def alert_record(alert: Alert) -> dict[str, Any]:
    """The JSON-lines form of an alert (README "Alert output")."""
    rec: dict[str, Any] = {
        "alert_id": alert.alert_id,
        "detector": alert.detector,
        "status": alert.status.value,
        "severity": alert.severity.value,
        "entity": alert.entity,
        "event_time": iso_utc(alert.event_time_ms),
        "summary": alert.summary,
    }
    for k in ("job_id", "job_name", "tm_id", "host"):
        v = getattr(alert, k)
        if v is not None:
            rec[k] = v
    rec["evidence"] = alert.evidence
    return rec


class _BatchLedger:
    """Remembers the last micro-batch a file sink wrote, so a replayed batch is skipped.

    The ledger is written after the data is on disk; a crash between the two can
    repeat one batch's lines, never lose them.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def last(self) -> int:
        try:
            return int(self.path.read_text().strip() or -1)
        except FileNotFoundError:
            return -1

    def commit(self, batch_id: int) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(str(batch_id))
        os.replace(tmp, self.path)


def _append_lines(path: Path, lines: Iterable[str]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("a", encoding="utf-8") as f:
        for line in lines:
            f.write(line + "\n")
            n += 1
        f.flush()
        os.fsync(f.fileno())
    return n


class JsonLinesAlertSink(AlertSink):
    """Appends alert transitions to a JSON-lines file, once per micro-batch."""

    name = "file"

    def __init__(self, path: Path, ledger: bool = True, ledger_path: Path | None = None) -> None:
        """Create the sink.

        Args:
            path: The JSON-lines file.
            ledger: Skip micro-batches already written (off for one-shot replays).
            ledger_path: Where the last written batch id is kept. Batch ids restart when
                the query's checkpoint is reset, so the job keeps it inside its checkpoint
                directory; the default, next to the file, suits tests.
        """
        self.path = Path(path)
        where = ledger_path or self.path.with_name(self.path.name + ".batch")
        if ledger:
            where.parent.mkdir(parents=True, exist_ok=True)
        self._ledger = _BatchLedger(where) if ledger else None

    def deliver(self, batch_id: int, alerts: Sequence[Alert]) -> None:  # noqa: D102
        if self._ledger and batch_id <= self._ledger.last():
            log.info("sink=file batch=%d already written; skipped", batch_id)
            return
        if alerts:
            _append_lines(self.path, (json.dumps(alert_record(a), sort_keys=False) for a in alerts))
        if self._ledger:
            self._ledger.commit(batch_id)


class LogAlertSink(AlertSink):
    """Logs each transition: the console view of the alert stream."""

    name = "console"

    def __init__(self) -> None:
        self._last_batch = -1

    def deliver(self, batch_id: int, alerts: Sequence[Alert]) -> None:  # noqa: D102
        # A batch replayed after a query restart (config reload) is not logged again.
        if batch_id <= self._last_batch:
            return
        self._last_batch = batch_id
        for a in alerts:
            where = a.job_name or a.job_id or a.tm_id or a.entity
            log.warning(
                "ALERT %s %s [%s] %s at %s: %s (alert_id=%s)",
                a.status.value.upper(),
                a.detector,
                a.severity.value,
                where,
                iso_utc(a.event_time_ms),
                a.summary,
                a.alert_id,
            )


class DeadLetterFileSink:
    """Writes dead letters (with their Kafka coordinates) as JSON lines, one file per batch.

    One file per micro-batch, named by batch id and overwritten on replay, makes a
    repeated batch harmless.
    """

    def __init__(self, directory: Path) -> None:
        self.dir = Path(directory)

    def write(self, batch_id: int, records: Sequence[dict[str, Any]]) -> Path | None:
        """Write the batch's dead letters; returns the file, or None when there were none."""
        if not records:
            return None
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.dir / f"batch-{batch_id:08d}.jsonl"
        tmp = path.with_suffix(".tmp")
        with tmp.open("w", encoding="utf-8") as f:
            for r in records:
                f.write(json.dumps(r, default=str) + "\n")
        os.replace(tmp, path)
        return path
