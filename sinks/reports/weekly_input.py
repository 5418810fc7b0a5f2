"""What ``flinkwatch report`` reads: the alert ledger, the alert file, the noise presses.

Both sources hold the same transitions (the alert file is one of the ledger's sinks); the
file may reach further back than the ledger, which forgets closed incidents after
``output.ledger_retention_days``, and the ledger alone knows what was done from Slack.
Read together, a transition in both counts once (:func:`merge`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path

from pydantic import ValidationError

from sinks.files import alert_from_record, iso_utc
from sinks.inbound.slack_actions import IncidentActions
from sinks.ledger import AlertLedger
from sinks.reports.weekly import NoisePress, Record

log = logging.getLogger(__name__)

#: The ledger key under which Slack keeps what was done to an incident
#: (:class:`~sinks.inbound.slack_actions.IncidentActions`): ``acts:<incident_id>``.
ACTS_KEY = "acts:{}"


def ledger_records(ledger: AlertLedger) -> list[Record]:
    """Every transition of the ledger with its incident id, in the order recorded."""
    return [Record(alert, incident_id) for alert, incident_id in ledger.history()]


def read_alert_file(path: Path) -> tuple[list[Record], int]:
    """The transitions of an alert file (JSON lines), and how many lines were not one.

    A record carries its incident's id once the incident has more than one alert; before
    that (the firing that opened it) the alert's own id is the incident's.

    Raises:
        OSError: the file cannot be read.
    """
    records: list[Record] = []
    bad = 0
    with path.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                if not isinstance(rec, dict):
                    msg = "not a JSON object"
                    raise ValueError(msg)
                alert = alert_from_record(rec)
                incident = rec.get("incident_id")
                records.append(
                    Record(alert, incident if isinstance(incident, str) else alert.alert_id)
                )
            except ValueError:
                bad += 1  # a line cut by a crash, or not ours
    return records, bad


def merge(*sources: Iterable[Record]) -> tuple[list[Record], int]:
    """The records of all sources, each transition once (the first source's copy wins).

    A transition is its alert id, status and event time (an escalation to each severity
    happens at its own time).

    Returns:
        The records, and how many were dropped as seen before.
    """
    seen: set[tuple[str, str, int]] = set()
    out: list[Record] = []
    dropped = 0
    for source in sources:
        for r in source:
            key = (r.alert.alert_id, r.alert.status.value, r.alert.event_time_ms)
            if key in seen:
                dropped += 1
                continue
            seen.add(key)
            out.append(r)
    return out, dropped


class LedgerNoise:
    """Finds an incident's "Resolve as noise" press where the Slack buttons keep it.

    Each Slack sink (``slack``, ``slack:2`` … one per placement) keeps its own record of
    an incident; the first press in any of them counts.
    """

    def __init__(self, ledger: AlertLedger) -> None:
        self.ledger = ledger
        self._sinks = sorted({sink for sink, _state in ledger.counts()})

    def __call__(self, incident_id: str) -> NoisePress | None:
        """The earliest noise press on the incident, or None."""
        presses = []
        for sink in self._sinks:
            fact = self.ledger.recall(sink, ACTS_KEY.format(incident_id))
            if fact is None:
                continue
            try:
                acts = IncidentActions.model_validate(fact)
            except ValidationError as exc:
                log.warning(
                    "report: %s's record of incident %s unreadable: %s", sink, incident_id, exc
                )
                continue
            if acts.noise is not None:
                presses.append(acts.noise)
        if not presses:
            return None
        first = min(presses, key=lambda p: p.at_ms)
        return NoisePress(by=first.user, at=iso_utc(first.at_ms))
