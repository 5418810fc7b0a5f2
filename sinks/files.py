"""File sinks: the alert log (JSON lines), the console, and dead letters."""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from detectors import Alert, AlertStatus
from sinks.base import AlertObserver, DeliverySink, RetryableDeliveryError, Transition

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


def _append_lines(path: Path, lines: Iterable[str]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("a+", encoding="utf-8") as f:
        if f.tell() > 0:
            f.seek(f.tell() - 1)
            if f.read(1) != "\n":
                # A line cut short by a crash: end it, or the next record would be glued
                # to it and both lost to a JSON reader.
                f.write("\n")
        for line in lines:
            f.write(line + "\n")
            n += 1
        f.flush()
        os.fsync(f.fileno())
    return n


def _same_transition(rec: dict[str, Any], alert: Alert) -> bool:
    if rec.get("alert_id") != alert.alert_id or rec.get("status") != alert.status.value:
        return False
    return alert.status is not AlertStatus.ESCALATED or rec.get("severity") == alert.severity.value


class JsonLinesAlertSink(DeliverySink):
    """Appends each alert transition to a JSON-lines file, once (the ledger keeps count)."""

    name = "file"

    def __init__(self, path: Path) -> None:
        """Create the sink writing to ``path``."""
        self.path = Path(path)

    def send(self, t: Transition) -> None:  # noqa: D102
        rec = alert_record(t.alert)
        if t.silenced_by:
            rec["silenced_by"] = t.silenced_by
        if t.incident is not None and len(t.incident.members) > 1:
            rec["incident_id"] = t.incident.incident_id
            rec["root_cause"] = t.incident.headline
        try:
            _append_lines(self.path, [json.dumps(rec)])
        except OSError as exc:
            msg = f"{self.path}: {exc}"
            raise RetryableDeliveryError(msg) from exc

    def confirm(self, t: Transition) -> bool | None:
        """Whether the interrupted append reached the file (read from its end)."""
        try:
            with self.path.open("rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(f.tell() - 4_000_000, 0))
                tail = f.read().decode("utf-8", errors="replace").splitlines()
        except FileNotFoundError:
            return False
        for line in reversed(tail):
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # a line cut by the crash: that append did not happen
            if isinstance(rec, dict) and _same_transition(rec, t.alert):
                return True
        return False


class LogAlertSink(AlertObserver):
    """Logs each new transition: the console view of the alert stream."""

    name = "console"

    def observe(self, transitions: Sequence[Transition]) -> None:  # noqa: D102
        for t in transitions:
            a = t.alert
            where = a.job_name or a.job_id or a.tm_id or a.entity
            log.warning(
                "ALERT %s %s [%s] %s at %s: %s (alert_id=%s%s)",
                a.status.value.upper(),
                a.detector,
                a.severity.value,
                where,
                iso_utc(a.event_time_ms),
                a.summary,
                a.alert_id,
                f", silenced by {t.silenced_by}" if t.silenced_by else "",
            )
            inc = t.incident
            if inc is not None and inc.joined:
                log.warning(
                    "INCIDENT %s (%d alerts): %s", inc.incident_id, len(inc.members), inc.headline
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
