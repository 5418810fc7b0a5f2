"""Wording helpers for the root-cause line each detector tells its part of.

Correlation (:mod:`detectors.correlation`) groups alerts into incidents and builds the
headline from a :class:`~detectors.base.Story`; each detector words its own part
(:meth:`~detectors.base.Detector.headline`, ``death``, ``aftermath``, ``role``) from its
own evidence with these, so correlation names no detector.
"""

from __future__ import annotations

from detectors.base import Member, Story


def num(v: object, unit: str = "") -> str:
    """A number for a headline (``1,234 MB/h``, ``2.5``), ``?`` if it is not one."""
    if isinstance(v, int | float) and not isinstance(v, bool):
        return f"{v:,.0f}{unit}" if abs(v) >= 10 else f"{v:g}{unit}"
    return "?"


def mb(nbytes: object) -> str:
    """Bytes in MB for a headline, ``?`` if not a number."""
    if isinstance(nbytes, int | float) and not isinstance(nbytes, bool):
        return f"{nbytes / 2**20:,.0f} MB"
    return "?"


def job(m: Member | None) -> str:
    """The job a member is about, by name if known."""
    if m is None:
        return "?"
    return m.job_name or m.job_id or "?"


def tm(m: Member | None) -> str:
    """The TaskManager (or host) a member is about."""
    if m is None:
        return "?"
    return m.tm_id or m.host or "?"


def process_headline(story: Story) -> str:
    """``TaskManager X killed for memory``: the line of an incident a dead process started."""
    return f"{story.role} {tm(story.root)} {story.death or 'lost'}"
