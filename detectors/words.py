"""How a detector says where an entity stands (:meth:`~detectors.base.Detector.standing`).

``flinkwatch explain`` prints one line per detector for an entity; each detector words
its own from its state, with these helpers, so every line tells times and durations
the same way: event time as UTC to the second (a detector never reads a clock: the
state's own latest time is its "now"), durations humanised as the alert summaries do.
A line leaves out what is not known rather than print a placeholder.

Example:
    >>> at(1_700_000_000_000), span(42), span(1500), span(9000), span(400_000)
    ('2023-11-14T22:13:20Z', '42 s', '25 min', '2.5 h', '4.6 d')
    >>> firing_since(1_700_000_000_000, 1_700_000_720_000)
    'FIRING since 2023-11-14T22:13:20Z (12 min)'
    >>> size(300_000), size(3 * 2**30)
    ('293 KB', '3,072 MB')
    >>> clause("3 of 5 restarts", None, "", "job RUNNING")
    '3 of 5 restarts; job RUNNING'
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection


def at(ms: int) -> str:
    """An event time, ``2026-11-22T03:58:56Z`` (UTC, to the second)."""
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def span(seconds: float) -> str:
    """A duration: ``42 s``, ``25 min``, ``2.5 h`` or ``4.6 d`` (never negative)."""
    s = max(0.0, seconds)
    if s < 100:
        return f"{s:.0f} s"
    if s < 2 * 3600:
        return f"{s / 60:.0f} min"
    if s < 48 * 3600:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} d"


def span_ms(ms: float) -> str:
    """:func:`span` of milliseconds."""
    return span(ms / 1000)


def size(nbytes: float) -> str:
    """A state or heap size: ``512 KB``, ``1,234 MB`` (in MiB, as the alert summaries)."""
    mib = nbytes / 2**20
    return f"{nbytes / 2**10:,.0f} KB" if mib < 1 else f"{mib:,.0f} MB"


def cut(name: str, chars: int) -> str:
    """A name (host, TaskManager, task) cut to ``chars`` characters, the last one ``…``."""
    return name if len(name) <= chars else name[: chars - 1] + "…"


def firing_since(start_ms: int | None, now_ms: int) -> str:
    """``FIRING since <time> (<how long>)``: an open incident, from its start.

    A deadline may have fired it after the state's latest event, its "now": how long
    it has been firing is not known then, and left out.
    """
    if start_ms is None:
        return "FIRING"
    if now_ms < start_ms:
        return f"FIRING since {at(start_ms)}"
    return f"FIRING since {at(start_ms)} ({span_ms(now_ms - start_ms)})"


def clause(*parts: str | None) -> str:
    """The parts given, joined by ``; `` (``None`` and empty ones left out)."""
    return "; ".join(p for p in parts if p)


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 checkpoint``, ``3 checkpoints`` (``many``: an irregular plural)."""
    return f"{n} {word}" if n == 1 else f"{n} {many or word + 's'}"


def reads(kinds: Collection[str], metrics: Collection[str] = ()) -> str:
    """The events a detector reads: ``checkpoint expired, failed lines; 2 metrics``.

    Example:
        >>> reads({"checkpoint_failed", "checkpoint_expired", "metric"}, {"a", "b"})
        'checkpoint expired, failed lines; 2 metrics'
    """
    lines = sorted(k for k in kinds if k != "metric")
    heads = {k.split("_", 1)[0] for k in lines}
    if len(heads) == 1 and len(lines) > 1:
        said = f"{heads.pop()} " + ", ".join(k.split("_", 1)[1].replace("_", " ") for k in lines)
    else:
        said = ", ".join(k.replace("_", " ") for k in lines)
    out = [f"{said} lines"] if lines else []
    if "metric" in kinds:
        out.append(plural(len(metrics), "metric"))
    return "; ".join(out)
