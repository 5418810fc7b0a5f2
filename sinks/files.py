"""File sinks: the alert log (JSON lines), the console, and dead letters."""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
from collections import Counter
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


def record_alert(rec: dict[str, Any]) -> Alert:
    """The alert a JSON-lines record (:func:`alert_record`) was written from.

    Raises:
        ValueError: The record is not one (a field missing or of the wrong shape).
    """
    try:
        t = dt.datetime.fromisoformat(str(rec["event_time"]))
        return Alert.model_validate(
            {
                **{k: v for k, v in rec.items() if k in Alert.model_fields},
                "event_time_ms": (t - _EPOCH) // dt.timedelta(milliseconds=1),
            }
        )
    except (KeyError, TypeError, ValueError) as exc:  # pydantic's ValidationError is one
        msg = f"not an alert record: {exc}"
        raise ValueError(msg) from exc


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


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

    def __init__(self, path: Path, *, max_bytes: int = 64 << 20, keep: int = 5) -> None:
        """Create the sink writing to ``path``, rotated at ``max_bytes`` (``keep`` old files)."""
        self.path = Path(path)
        self.max_bytes = max_bytes
        self.keep = keep

    def _rotate(self) -> None:
        # alerts.jsonl -> alerts.jsonl.1 -> ... -> alerts.jsonl.<keep>, the oldest dropped:
        # the file shares its volume with the ledger, which must not run out of room.
        try:
            if self.path.stat().st_size < self.max_bytes:
                return
        except FileNotFoundError:
            return
        for i in range(self.keep, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{i}")
            if i == self.keep:
                older.unlink(missing_ok=True)
            else:
                newer = self.path.with_name(f"{self.path.name}.{i + 1}")
                if older.exists():
                    os.replace(older, newer)
        if self.keep > 0:
            os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))
        else:
            self.path.unlink()

    def send(self, t: Transition) -> None:  # noqa: D102
        rec = alert_record(t.alert)
        if t.silenced_by:
            rec["silenced_by"] = t.silenced_by
        if t.incident is not None and len(t.incident.members) > 1:
            rec["incident_id"] = t.incident.incident_id
            rec["root_cause"] = t.incident.headline
        try:
            self._rotate()
            _append_lines(self.path, [json.dumps(rec)])
        except OSError as exc:
            msg = f"{self.path}: {exc}"
            raise RetryableDeliveryError(msg) from exc

    def confirm(self, t: Transition) -> bool | None:
        """Whether the interrupted append reached the file (read from its end)."""
        tail: list[str] = []
        # The newest rotated file too: the append may have landed just before a rotation.
        for path in (self.path.with_name(f"{self.path.name}.1"), self.path):
            try:
                with path.open("rb") as f:
                    f.seek(0, os.SEEK_END)
                    f.seek(max(f.tell() - 4_000_000, 0))
                    tail += f.read().decode("utf-8", errors="replace").splitlines()
            except FileNotFoundError:
                continue
        if not tail:
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
    repeated batch harmless. Bounded on both ends: at most ``max_per_batch`` records per
    file (the rest counted, not kept: a flood of garbage must not take the driver down),
    and the directory pruned to ``retain_bytes``, the files written longest ago first (it
    shares the volume with the ledger).
    """

    def __init__(
        self, directory: Path, *, max_per_batch: int = 10_000, retain_bytes: int = 256 << 20
    ) -> None:
        self.dir = Path(directory)
        self.max_per_batch = max_per_batch
        self.retain_bytes = retain_bytes

    def write(
        self, batch_id: int, records: Iterable[dict[str, Any]]
    ) -> tuple[Path | None, Counter[str], int]:
        """Write the batch's dead letters: the file (None if none), reasons kept, dropped.

        ``records`` is consumed lazily: a caller streaming rows from Spark never holds
        the whole batch.
        """
        path = self.dir / f"batch-{batch_id:08d}.jsonl"
        tmp = path.with_suffix(".tmp")
        kept: Counter[str] = Counter()
        dropped = 0
        f = None
        try:
            for r in records:
                if sum(kept.values()) >= self.max_per_batch:
                    dropped += 1
                    continue
                if f is None:
                    self.dir.mkdir(parents=True, exist_ok=True)
                    f = tmp.open("w", encoding="utf-8")
                f.write(json.dumps(r, default=str) + "\n")
                kept[str(r.get("error"))] += 1
        finally:
            if f is not None:
                f.close()
        if f is None:
            return None, kept, dropped
        os.replace(tmp, path)
        self._prune(keep=path)
        return path, kept, dropped

    def _prune(self, keep: Path) -> None:
        # By when each file was written, not by its name: batch ids start again at 0 when
        # the checkpoints are reset, and the new run's files would sort before the old.
        written = []
        for p in self.dir.glob("batch-*.jsonl"):
            try:
                st = p.stat()
            except FileNotFoundError:
                continue
            written.append((st.st_mtime_ns, p.name, p, st.st_size))
        written.sort()
        total = sum(size for *_, size in written)
        for _, _, old, size in written:
            if total <= self.retain_bytes:
                break
            if old == keep:
                continue
            total -= size
            old.unlink(missing_ok=True)
