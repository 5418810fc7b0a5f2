"""Wording helpers for the root-cause line each detector tells its part of.

Correlation (:mod:`detectors.correlation`) groups alerts into incidents and builds the
headline from a :class:`~detectors.base.Story`; each detector words its own part
(:meth:`~detectors.base.Detector.headline`, ``death``, ``aftermath``, ``role``) from its
own evidence with these, so correlation names no detector.

A headline reaches people: what is not known is left out of it, never shown as a
placeholder. So :func:`num` and :func:`mb` give ``None`` for what is not a number (the
caller drops the clause), and :func:`job` and :func:`tm` name the process with its
article when its id is unknown (``a job``, ``a TaskManager``).
"""

from __future__ import annotations

from detectors.base import Member, Story


def num(v: object, unit: str = "") -> str | None:
    """A number for a headline (``1,234 MB/h``, ``2.5``); ``None`` if it is not one."""
    if isinstance(v, int | float) and not isinstance(v, bool):
        return f"{v:,.0f}{unit}" if abs(v) >= 10 else f"{v:g}{unit}"
    return None


def mb(nbytes: object) -> str | None:
    """Bytes in MB for a headline; ``None`` if not a number."""
    if isinstance(nbytes, int | float) and not isinstance(nbytes, bool):
        return f"{nbytes / 2**20:,.0f} MB"
    return None


def job(m: Member | None) -> str:
    """``job NAME`` (the id if it has no name), or ``a job`` if the member names none."""
    who = m and (m.job_name or m.job_id)
    return f"job {who}" if who else "a job"


def tm(m: Member | None, role: str = "TaskManager") -> str:
    """``TaskManager ID`` (or its host), or ``a TaskManager`` if the member names neither."""
    who = m and (m.tm_id or m.host)
    return f"{role} {who}" if who else f"a {role}"


def process_headline(story: Story) -> str:
    """``TaskManager X killed for memory``: the line of an incident a dead process started."""
    return f"{tm(story.root, story.role)} {story.death or 'lost'}"
