"""Silences and maintenance windows: config that keeps matching alerts out of Slack.

A silence has matchers (regular expressions, each matched against the whole value;
a ``tm_id`` that names one TaskManager matches it in any spelling, :func:`plain_id`)
and either a fixed range (``starts_at``/``ends_at``) or a weekly window. It is
judged at the alert's event time, so a replay over history silences what the live
job would have, and a window is exact whatever the processing delay. Silenced
alerts still show in Prometheus (``silenced="true"``) and in the alert file.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from detectors import Alert
from detectors.model import cap_name
from detectors.tm_ids import tm_key

Day = Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
_DAYS: tuple[Day, ...] = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_HHMM = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")
# What makes a pattern match more than one id. ``.`` is not among them: ids contain it
# (``10.0.0.5:40003-6cf67b``), and as a regex it matches itself as well.
_REGEX_META = frozenset("[](){}*+?|^$")


def plain_id(pattern: str) -> str | None:
    r"""The one id ``pattern`` names, or None when it is a regular expression proper.

    Plain: no metacharacter but ``.`` (taken as itself), and ``\`` only before a
    punctuation character (``re.escape``'s output, which ``name=value`` matchers and the
    silence store keep). A ``tm_id`` matcher that is plain matches its TaskManager in
    any spelling, as :func:`detectors.tm_ids.tm_key` folds them: Flink's Prometheus
    metrics say ``localhost:40003_6cf67b`` where its logs say ``localhost:40003-6cf67b``,
    and an id copied from either silences both.

    Example:
        >>> plain_id(r"localhost:40003\-6cf67b"), plain_id("10.0.0.5:40003_6cf67b")
        ('localhost:40003-6cf67b', '10.0.0.5:40003_6cf67b')
        >>> plain_id("localhost:40003-.*") is None, plain_id(r"tm\d+") is None
        (True, True)
    """
    out: list[str] = []
    chars = iter(pattern)
    for c in chars:
        if c == "\\":
            nxt = next(chars, "")
            # ``\d``, ``\w``, ``\1``: a class or a reference, not a character.
            if not nxt or (nxt.isascii() and nxt.isalnum()):
                return None
            out.append(nxt)
        elif c in _REGEX_META:
            return None
        else:
            out.append(c)
    return "".join(out) or None


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Matchers(_Frozen):
    """Which alerts a silence covers: every given matcher must match (regex, whole value).

    ``tm_id`` also matches when it is one plain id (:func:`plain_id`) of the alert's
    TaskManager in another spelling; a regular expression proper matches the spelling
    the alert carries, nothing else.
    """

    detector: str | None = None
    cluster: str | None = None
    job_id: str | None = None
    job_name: str | None = None
    tm_id: str | None = None
    host: str | None = None
    severity: str | None = None

    @model_validator(mode="after")
    def _check(self) -> Matchers:
        given = {k: v for k, v in self.model_dump().items() if v is not None}
        if not given:
            msg = (
                "give at least one matcher "
                "(detector, cluster, job_id, job_name, tm_id, host, severity)"
            )
            raise ValueError(msg)
        for name, pattern in given.items():
            try:
                re.compile(pattern)
            except re.error as exc:
                msg = f"{name}: not a valid regular expression: {exc}"
                raise ValueError(msg) from exc
        return self

    def matches(self, alert: Alert, cluster: str) -> bool:
        """True when every given matcher matches the alert."""
        values = {
            "detector": alert.detector,
            "cluster": cluster,
            "job_id": alert.job_id,
            "job_name": alert.job_name,
            "tm_id": alert.tm_id,
            "host": alert.host,
            "severity": alert.severity.value,
        }
        for name, pattern in self.model_dump().items():
            if pattern is None:
                continue
            # Cut as the parsers cut names: a regex never runs on more (see NAME_CHARS).
            value = cap_name(values[name])
            if value is None:
                return False
            if re.fullmatch(pattern, value):
                continue
            if name != "tm_id" or (plain := plain_id(pattern)) is None:
                return False
            if tm_key(plain) != tm_key(value):
                return False
        return True


class Weekly(_Frozen):
    """A window that recurs every week: ``days`` from ``start`` to ``end`` in ``timezone``.

    ``end`` before ``start`` crosses midnight (sat 23:00-02:00 covers early Sunday).
    """

    days: tuple[Day, ...] = _DAYS
    start: str = Field(description="HH:MM, local time")
    end: str = Field(description="HH:MM, local time; before start = past midnight")
    timezone: str = "UTC"

    @field_validator("start", "end")
    @classmethod
    def _hhmm(cls, v: str) -> str:
        if not _HHMM.match(v):
            msg = f"{v!r} is not HH:MM (00:00-23:59)"
            raise ValueError(msg)
        return v

    @field_validator("timezone")
    @classmethod
    def _zone(cls, v: str) -> str:
        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            msg = f"unknown time zone {v!r}"
            raise ValueError(msg) from exc
        return v

    def covers(self, at_ms: int) -> bool:
        """True when ``at_ms`` falls in the window."""
        local = dt.datetime.fromtimestamp(at_ms / 1000, tz=ZoneInfo(self.timezone))
        minute = local.hour * 60 + local.minute
        start = int(self.start[:2]) * 60 + int(self.start[3:])
        end = int(self.end[:2]) * 60 + int(self.end[3:])
        today = _DAYS[local.weekday()]
        if start < end:
            return today in self.days and start <= minute < end
        # Crosses midnight: the evening belongs to today's window, the morning to yesterday's.
        yesterday = _DAYS[(local.weekday() - 1) % 7]
        return (today in self.days and minute >= start) or (yesterday in self.days and minute < end)


class Silence(_Frozen):
    """Keep matching alerts out of Slack during a time range or a weekly window."""

    name: str = Field(description="Shown in logs, the alert file and the metrics.")
    matchers: Matchers
    starts_at: dt.datetime | None = None
    ends_at: dt.datetime | None = None
    weekly: Weekly | None = None
    comment: str = ""

    @model_validator(mode="after")
    def _check(self) -> Silence:
        ranged = self.starts_at is not None or self.ends_at is not None
        if ranged == (self.weekly is not None):
            msg = "give either starts_at/ends_at or weekly (exactly one)"
            raise ValueError(msg)
        for when in (self.starts_at, self.ends_at):
            if when is not None and when.tzinfo is None:
                msg = "starts_at/ends_at need a time zone (e.g. 2026-11-22T02:00:00Z)"
                raise ValueError(msg)
        if self.starts_at and self.ends_at and self.ends_at <= self.starts_at:
            msg = "ends_at must be after starts_at"
            raise ValueError(msg)
        return self

    def covers(self, at_ms: int) -> bool:
        """True when the silence is in force at ``at_ms``."""
        if self.weekly is not None:
            return self.weekly.covers(at_ms)
        start = self.starts_at.timestamp() * 1000 if self.starts_at else float("-inf")
        end = self.ends_at.timestamp() * 1000 if self.ends_at else float("inf")
        return start <= at_ms < end


def silence_for(
    silences: tuple[Silence, ...], alert: Alert, cluster: str, at_ms: int | None = None
) -> str | None:
    """The name of the first silence covering the alert, or None.

    ``at_ms``: when the silences are judged; by default the alert's event time (so a
    replay silences what the live job would have).
    """
    at = alert.event_time_ms if at_ms is None else at_ms
    for s in silences:
        if s.covers(at) and s.matchers.matches(alert, cluster):
            return s.name
    return None


#: The names a matcher can take (:class:`Matchers`' fields).
MATCHER_NAMES: tuple[str, ...] = tuple(Matchers.model_fields)
_MATCHER = re.compile(r"^(?P<name>[a-z_]+)(?P<op>=~|!=|!~|=)(?P<value>.*)$")
_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def parse_matchers(texts: list[str]) -> Matchers:
    """``amtool``'s matcher syntax → :class:`Matchers`.

    ``name=value`` matches the value exactly, ``name=~regex`` the whole value against a
    regular expression; a value may be in double quotes (``job_name="pay etl"``).

    Raises:
        ValueError: a text is not a matcher, names no known label, uses a negative
            operator (``!=``, ``!~``: a silence here says what it covers), or repeats a name.
    """
    found: dict[str, str] = {}
    for text in texts:
        m = _MATCHER.match(text.strip())
        if m is None:
            msg = f"{text!r} is not a matcher: name=value or name=~regex"
            raise ValueError(msg)
        name, op, value = m["name"], m["op"], m["value"]
        if name not in MATCHER_NAMES:
            msg = f"{text!r}: no label {name!r}; one of {', '.join(MATCHER_NAMES)}"
            raise ValueError(msg)
        if op in ("!=", "!~"):
            msg = f"{text!r}: negative matchers are not supported; say what the silence covers"
            raise ValueError(msg)
        if name in found:
            msg = f"{text!r}: {name} is matched twice"
            raise ValueError(msg)
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        found[name] = value if op == "=~" else re.escape(value)
    return Matchers(**found)


def parse_duration(text: str) -> dt.timedelta:
    """``1h``, ``30m``, ``1h30m``, ``2d``, ``90s`` (as amtool's ``--duration``) → a duration.

    Raises:
        ValueError: not such a duration, or zero.
    """
    m = _DURATION.match(text.strip())
    if not text.strip() or m is None:
        msg = f"{text!r} is not a duration such as 1h, 30m, 1h30m, 2d"
        raise ValueError(msg)
    days, hours, minutes, seconds = (int(g or 0) for g in m.groups())
    span = dt.timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    if span <= dt.timedelta(0):
        msg = f"{text!r}: a silence must last some time"
        raise ValueError(msg)
    return span
