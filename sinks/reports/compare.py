"""What a config change would have done: the pages of two replays of the same files, paired.

``flinkwatch replay --config new.yaml --baseline old.yaml`` replays the same files with
both configs; this module reads the two alert files and says which pages the new config
gains, loses, or moves earlier or later, per detector and job. It is pure: alert records
in, a :class:`Comparison` out (its text and JSON forms beside it), no Spark, no clock.

An *incident* here is one ``alert_id`` of an alert file: its firing, the escalations that
followed it and its resolve. Its *page* is its first firing (or, in a file that starts
mid-incident, its first escalation); an incident with a resolve alone never paged in that
run and is left out.

How incidents are paired (per detector and entity: a page of another detector, or about
another job, is never the same page):

1. Incidents whose spans overlap (from the page to the resolve, open to the end of the
   run when unresolved) are paired, closest first pages first, each incident at most once:
   a threshold change that pages a few minutes sooner still pages for the same trouble.
2. Of those left, incidents whose first pages are at most ``window_ms`` apart (an hour by
   default) are paired the same way, closest first: a page moved past the other run's
   resolve is still that page moved.
3. What is left of the baseline is *lost*, what is left of the new run *gained*.

A pair is *unchanged* when both paged at the same event time (a replay is deterministic:
the same config gives the same times to the millisecond), otherwise *earlier* or *later*
by the difference of the first pages.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from detectors.model import Alert, AlertStatus, Severity
from detectors.tm_ids import spelling_rank
from sinks.files import alert_from_record, iso_utc

#: Unpaired incidents whose first pages are at most this far apart are paired (step 2).
WINDOW_MS = 3_600_000


class Change(StrEnum):
    """What the new config did to one page of the baseline (or to none)."""

    GAINED = "gained"
    LOST = "lost"
    EARLIER = "earlier"
    LATER = "later"
    UNCHANGED = "unchanged"


@dataclass(frozen=True)
class Page:
    """One incident of one replay, as much of it as a comparison reads.

    Attributes:
        alert_id: The incident's alert id.
        detector: The detector that paged.
        entity: Its entity key (``job:<id>``, ``tm:<id>``, ``cluster``).
        subject: Whom it is about, for people: ``job <name or id>``, ``TaskManager <id>``.
        paged_ms: Event time of its first firing (or escalation).
        resolved_ms: Event time of its resolve (``None``: open at the end of the run).
        severity: The highest severity it reached.
    """

    alert_id: str
    detector: str
    entity: str
    subject: str
    paged_ms: int
    resolved_ms: int | None
    severity: Severity

    def overlaps(self, other: Page) -> bool:
        """Whether the two spans, page to resolve, share an instant."""
        end, other_end = self.resolved_ms, other.resolved_ms
        return (other_end is None or self.paged_ms <= other_end) and (
            end is None or other.paged_ms <= end
        )


@dataclass(frozen=True)
class Difference:
    """One page of either run and what became of it.

    Attributes:
        change: Gained, lost, earlier, later or unchanged.
        baseline: The baseline's page (``None``: gained).
        new: The new config's page (``None``: lost).
    """

    change: Change
    baseline: Page | None
    new: Page | None

    @property
    def page(self) -> Page:
        """The page that names it: the new run's when there is one."""
        page = self.new or self.baseline
        if page is None:  # pragma: no cover - compare() never builds one
            msg = "a difference without a page"
            raise ValueError(msg)
        return page

    @property
    def delta_ms(self) -> int | None:
        """How far the first page moved (negative: earlier); ``None`` unless paired."""
        if self.baseline is None or self.new is None:
            return None
        return self.new.paged_ms - self.baseline.paged_ms

    def to_json(self) -> dict[str, Any]:
        """The JSON form: both pages (or ``null``) and the move in milliseconds."""
        page = self.page
        return {
            "change": self.change.value,
            "detector": page.detector,
            "entity": page.entity,
            "subject": page.subject,
            "baseline": _page_json(self.baseline),
            "new": _page_json(self.new),
            "delta_ms": self.delta_ms,
        }


@dataclass(frozen=True)
class Comparison:
    """Every page of two replays of the same files, paired (see the module's docstring).

    Attributes:
        differences: One per pair or unpaired page, by detector, subject and first page.
        baseline_pages: Pages of the baseline run.
        new_pages: Pages of the new config's run.
    """

    differences: tuple[Difference, ...]
    baseline_pages: int
    new_pages: int

    def totals(self) -> dict[Change, int]:
        """How many pages had each change (every change named, zeros included)."""
        n = Counter(d.change for d in self.differences)
        return {c: n[c] for c in Change}

    def groups(self) -> list[tuple[str, str, dict[Change, int]]]:
        """Per detector and job (or TaskManager): its subject and the count of each change.

        Keyed by entity, not by name: two jobs of one name are two rows.
        """
        by: dict[tuple[str, str, str], Counter[Change]] = {}
        for d in self.differences:
            key = (d.page.detector, d.page.subject, d.page.entity)
            by.setdefault(key, Counter())[d.change] += 1
        return [(det, who, {c: n[c] for c in Change}) for (det, who, _), n in sorted(by.items())]

    @property
    def changed(self) -> bool:
        """Whether any page was gained, lost or moved."""
        return any(d.change is not Change.UNCHANGED for d in self.differences)

    def to_json(self, **context: Any) -> dict[str, Any]:
        """The JSON form (``-o json``); ``context`` (how it ran, the files) comes first."""
        return {
            **context,
            "pages": {"baseline": self.baseline_pages, "new": self.new_pages},
            "totals": {c.value: n for c, n in self.totals().items()},
            "groups": [
                {"detector": det, "subject": who, **{c.value: k for c, k in n.items()}}
                for det, who, n in self.groups()
            ],
            "differences": [d.to_json() for d in self.differences],
        }

    def text(self) -> str:
        """Totals first, then one line per page: detector, subject, change, both times, move."""
        t = self.totals()
        lines = [
            f"pages: baseline {self.baseline_pages}, new {self.new_pages}; "
            + ", ".join(f"{c.value} {t[c]}" for c in Change)
        ]
        if not self.differences:
            return "\n".join([*lines, "no pages in either run"])
        rows = [("detector", "job / TaskManager", "change", "baseline", "new", "moved")]
        for d in self.differences:
            rows.append(
                (
                    d.page.detector,
                    d.page.subject,
                    d.change.value,
                    _when(d.baseline),
                    _when(d.new),
                    moved(d.delta_ms),
                )
            )
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
        for r in rows:
            cells = [c.ljust(w) for c, w in zip(r, widths, strict=False)]
            lines.append("  ".join([*cells, r[-1]]).rstrip())
        return "\n".join(lines)


def pages_of(records: Iterable[dict[str, Any]]) -> list[Page]:
    """The incidents of an alert file's records, each reduced to a :class:`Page`.

    Raises:
        ValueError: a record that is not an alert record.
    """
    history: dict[str, list[Alert]] = {}
    for rec in records:
        alert = alert_from_record(rec)
        history.setdefault(alert.alert_id, []).append(alert)
    pages = [p for alerts in history.values() if (p := _page(alerts)) is not None]
    return sorted(pages, key=lambda p: (p.paged_ms, p.detector, p.entity, p.alert_id))


def read_pages(alerts_file: Path) -> list[Page]:
    """:func:`pages_of` an alert file (JSON lines)."""
    lines = alerts_file.read_text(encoding="utf-8").splitlines()
    return pages_of(json.loads(line) for line in lines if line.strip())


def compare(
    baseline: Sequence[Page], new: Sequence[Page], *, window_ms: int = WINDOW_MS
) -> Comparison:
    """Pair the pages of two runs and classify each (the pairing: the module's docstring)."""
    named = _one_subject([*baseline, *new])
    baseline, new = named[: len(baseline)], named[len(baseline) :]
    by_key: dict[tuple[str, str], tuple[list[Page], list[Page]]] = {}
    for side, pages in enumerate((baseline, new)):
        for p in pages:
            by_key.setdefault((p.detector, p.entity), ([], []))[side].append(p)
    out: list[Difference] = []
    for old, now in by_key.values():
        pairs = _pair(old, now, lambda b, n: b.overlaps(n))
        taken_old, taken_new = {b.alert_id for b, _ in pairs}, {n.alert_id for _, n in pairs}
        pairs += _pair(
            [b for b in old if b.alert_id not in taken_old],
            [n for n in now if n.alert_id not in taken_new],
            lambda b, n: abs(n.paged_ms - b.paged_ms) <= window_ms,
        )
        paired_old = {b.alert_id for b, _ in pairs}
        paired_new = {n.alert_id for _, n in pairs}
        out += [Difference(_moved(b, n), b, n) for b, n in pairs]
        out += [Difference(Change.LOST, b, None) for b in old if b.alert_id not in paired_old]
        out += [Difference(Change.GAINED, None, n) for n in now if n.alert_id not in paired_new]
    out.sort(key=lambda d: (d.page.detector, d.page.subject, d.page.entity, _first(d)))
    return Comparison(tuple(out), baseline_pages=len(baseline), new_pages=len(new))


def moved(delta_ms: int | None) -> str:
    """A move in human units: ``38.6 s earlier``, ``2 min 5 s later``, ``same time``."""
    if delta_ms is None:
        return ""
    if delta_ms == 0:
        return "same time"
    return f"{duration(abs(delta_ms))} {'earlier' if delta_ms < 0 else 'later'}"


def duration(ms: int) -> str:
    """A non-negative span in the two largest units that matter: ``850 ms``, ``1 h 5 min``."""
    if ms < 1000:
        return f"{ms} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    s = ms // 1000
    if s < 3600:
        return f"{s // 60} min {s % 60} s" if s % 60 else f"{s // 60} min"
    h, m = divmod(s // 60, 60)
    if h < 48:
        return f"{h} h {m} min" if m else f"{h} h"
    d, h = divmod(h, 24)
    return f"{d} d {h} h" if h else f"{d} d"


def _page(alerts: list[Alert]) -> Page | None:
    paging = [a for a in alerts if a.status is not AlertStatus.RESOLVED]
    if not paging:
        return None
    first = min(paging, key=lambda a: a.event_time_ms)
    resolves = [a.event_time_ms for a in alerts if a.status is AlertStatus.RESOLVED]
    return Page(
        alert_id=first.alert_id,
        detector=first.detector,
        entity=first.entity,
        subject=subject(first),
        paged_ms=first.event_time_ms,
        resolved_ms=max(resolves) if resolves else None,
        severity=max((a.severity for a in paging), key=lambda s: s.rank),
    )


def subject(alert: Alert) -> str:
    """Whom an alert is about, for people: its job, or its TaskManager."""
    if alert.entity.startswith("tm:"):
        return f"TaskManager {alert.tm_id or alert.host or alert.entity[3:]}"
    if alert.job_name or alert.job_id:
        return f"job {alert.job_name or alert.job_id}"
    return alert.entity


def _one_subject(pages: Sequence[Page]) -> list[Page]:
    """``pages`` with each TaskManager named once: the best spelling any of its pages has.

    A page fired before the TaskManager's logs spelled its id carries the metrics'
    (``localhost:40003_6cf67b``), one after them the logs' (``localhost:40003-6cf67b``):
    the same entity, which a table or a chart lane per subject would show twice.
    """
    best: dict[str, str] = {}
    for p in pages:
        known = best.get(p.entity)
        if p.entity.startswith("tm:") and (known is None or _named(p.subject) > _named(known)):
            best[p.entity] = p.subject
    return [replace(p, subject=best.get(p.entity, p.subject)) for p in pages]


def _named(subject: str) -> tuple[int, str]:
    # The string breaks a tie, so the choice does not depend on the pages' order.
    return spelling_rank(subject, logged=False), subject


def _pair(
    old: list[Page], now: list[Page], may: Callable[[Page, Page], bool]
) -> list[tuple[Page, Page]]:
    """Greedy pairing, closest first pages first, of the pairs ``may`` allows."""
    candidates = sorted(
        ((b, n) for b in old for n in now if may(b, n)),
        key=lambda bn: (abs(bn[1].paged_ms - bn[0].paged_ms), bn[0].paged_ms, bn[1].paged_ms),
    )
    used_old: set[str] = set()
    used_new: set[str] = set()
    out: list[tuple[Page, Page]] = []
    for b, n in candidates:
        if b.alert_id in used_old or n.alert_id in used_new:
            continue
        used_old.add(b.alert_id)
        used_new.add(n.alert_id)
        out.append((b, n))
    return out


def _moved(b: Page, n: Page) -> Change:
    if n.paged_ms == b.paged_ms:
        return Change.UNCHANGED
    return Change.EARLIER if n.paged_ms < b.paged_ms else Change.LATER


def _first(d: Difference) -> int:
    return min(p.paged_ms for p in (d.baseline, d.new) if p is not None)


def _when(page: Page | None) -> str:
    return "-" if page is None else iso_utc(page.paged_ms)


def _page_json(page: Page | None) -> dict[str, Any] | None:
    if page is None:
        return None
    return {
        "alert_id": page.alert_id,
        "paged": iso_utc(page.paged_ms),
        "resolved": None if page.resolved_ms is None else iso_utc(page.resolved_ms),
        "severity": page.severity.value,
    }
