"""Flink log records → the events the parse query makes of them, in plain Python.

The parse query is Spark SQL (:mod:`streaming.parsing`): no Python runs per record there.
Tooling that wants a detector's input without a Spark session (the cost benchmark of
``new_error_pattern`` in ``bench/pattern_cost.py``, the tests that feed a simulated
fleet through a detector) reads records here instead, with the parser's own rules: its
layout regex, its kind rules on the first line and then on the whole message (guards
included), the task-cause rules, the level rule of the WARN and ERROR lines, and the job
id rules (the MDC of a JSON layout, the job named in the words). What it fills: ``kind``,
``time_ms``, ``job_id``, ``job_name``, ``from_state``/``to_state`` of job transitions,
``reason`` of the WARN and ERROR lines (their first exception) and ``message``; the other
fields stay empty, and dead letters are ``None`` without a reason. ``tests/lab/test_loglines.py``
holds it to the kind and job id every log case of ``tests/data/parsing/log_cases.yaml``
states (the cases the Spark parser is held to in ``tests/streaming/test_parsing.py``).

Layouts read: Flink's default pattern layout (log4j 1 and 2), Flink's JSON layout, log4j2's
JsonLayout, ECS, a shipper envelope whose ``log`` or ``message`` holds a line in any of these,
and an OTLP/JSON request (its first log record).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from detectors.model import Event
from lab.fleet import SimRecord
from streaming import log_fields, log_kinds, log_layouts, parsing
from streaming.sources import _RECORD_START

_LAYOUT = re.compile(log_layouts._LAYOUT)
_MAX_MESSAGE = parsing.ParseLimits().max_message_chars
_J = log_kinds.J


def _guards(pattern: str, guards: tuple[str, ...]) -> tuple[tuple[str, ...], bool]:
    lits = log_kinds._guard(pattern, guards)
    return lits, not guards  # a derived guard is a prefix


_RULES = [(kind, re.compile(p), *_guards(p, g)) for kind, p, g in log_kinds._KIND_RULES]
_CAUSES = [(kind, re.compile(p), g) for kind, p, g in log_kinds._TASK_CAUSE_RULES]
_JOB_LINE = re.compile(log_fields._JOB_LINE)
_JM_RESPONSIBLE = re.compile(rf"JobManager responsible for {_J}")
_NAMED = re.compile(r"(?:for job|of job|job id|job) " + _J)
_BARE = re.compile(r"\b" + _J + r"\b")
_NAMED_JOB = re.compile(log_fields._NAMED_JOB)
_FIRST_EXC = re.compile(
    r"(?m)^(?:Caused by: )?((?:[\w$]+\.)+[\w$]*(?:Exception|Error|Throwable)\b[^\n]*)"
)
_JOB_ID = re.compile(rf"^{_J}$")


def _rules(text: str) -> str | None:
    for kind, rx, lits, prefix in _RULES:
        if lits and not (text.startswith(lits[0]) if prefix else any(x in text for x in lits)):
            continue
        if rx.search(text):
            return kind
    return None


def classify(message: str, level: str | None) -> str:
    """The kind the parse query gives a log message of ``level`` (``unparsed`` if none)."""
    first = message.partition("\n")[0]
    kind = _rules(first) or ("\n" in message and _rules(message)) or "unparsed"
    if kind == "task_state":
        for k, rx, lits in _CAUSES:
            if any(x in message for x in lits) and rx.search(message):
                kind = k
    if kind == "unparsed" and level in log_kinds.FREE_KINDS:
        kind = log_kinds.FREE_KINDS[level]
    return kind


def _epoch_ms(text: str | None) -> int | None:
    if not text:
        return None
    try:
        t = datetime.fromisoformat(text.strip().replace(",", ".").replace("Z", "+00:00"))
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)  # parsing.log_timezone's default
    return round(t.timestamp() * 1000)


def _job_id(kind: str, message: str, mdc: str | None) -> str | None:
    if kind in ("log_warn", "log_error"):
        if mdc and _JOB_ID.match(mdc):
            return mdc
        m = _NAMED_JOB.search(message)
        return m[1] if m else None
    if kind == "unparsed":
        return None
    if kind == "job_state" and (m := _JOB_LINE.search(message)):
        return m[2]
    if kind == "jm_heartbeat_timeout" and (m := _JM_RESPONSIBLE.search(message)):
        return m[1]
    if m := _NAMED.search(message):
        return m[1]
    if kind not in log_fields._BARE_HEX_NOT_JOB and (m := _BARE.search(message)):
        return m[1]
    return None


def _mdc(d: dict[str, Any]) -> str | None:
    key = log_layouts._MDC_JOB_KEY
    for holder in (d, d.get("contextMap"), d.get("mdc")):
        if isinstance(holder, dict) and isinstance(holder.get(key), str):
            return str(holder[key])
    return None


def _thrown(d: dict[str, Any]) -> str | None:
    """log4j2 JsonLayout's exception as the parser joins it to the message."""
    t = d.get("thrown")
    if not isinstance(t, dict) or not t.get("name"):
        return None
    trace = t.get("extendedStackTrace") or t.get("stackTrace")
    if isinstance(trace, str) and not trace.lstrip().startswith("["):
        return trace
    text = ": ".join(
        str(x) for x in (t["name"], t.get("message") or t.get("localizedMessage")) if x
    )
    cause = t.get("cause")
    if isinstance(cause, dict) and cause.get("name"):
        head = ": ".join(str(x) for x in (cause["name"], cause.get("message")) if x)
        text += f"\nCaused by: {head}"
    return text


_LAYOUT_TIME_KEYS = ("timestamp", "@timestamp", "instant", "timeMillis")


def _layout_ms(d: dict[str, Any]) -> int | None:
    stamp = d.get("timestamp") or d.get("@timestamp")
    if stamp:
        return _epoch_ms(str(stamp))
    instant = d.get("instant")
    if isinstance(instant, dict):
        try:
            sec, nanos = int(instant["epochSecond"]), int(instant.get("nanoOfSecond") or 0)
        except (KeyError, TypeError, ValueError):
            return None
        return sec * 1000 + nanos // 1_000_000
    try:
        return int(d["timeMillis"])
    except (KeyError, TypeError, ValueError):
        return None


def _json_layout(d: dict[str, Any], tail: str) -> tuple[str, str, int | None] | None:
    """(message, level, time) of a JSON layout record (Flink's, log4j2's, ECS); None if not one."""
    lv = d.get("level") or d.get("log.level")
    if not (isinstance(d.get("message"), str) and lv) or isinstance(d.get("log"), str):
        return None
    parts = [d["message"], d.get("error.stack_trace"), _thrown(d), tail or None]
    return "\n".join(p for p in parts if p), str(lv).upper(), _layout_ms(d)


def _otlp_first(d: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The first OTLP log record of a request (the parser makes one event of each)."""
    for res in d.get("resourceLogs") or ():
        for scope in res.get("scopeLogs") or ():
            for rec in scope.get("logRecords") or ():
                return rec, scope.get("scope") or {}
    return None


def event_of(record: str, fallback_ms: int | None = None) -> Event | None:
    """The event the parse query makes of one log record; ``None`` for a dead letter.

    ``fallback_ms`` is the time of a record without one of its own (the Kafka timestamp,
    or in a file the time of the record before it). Of an OTLP request, the first log
    record's.
    """
    text = record.lstrip()
    mdc: str | None = None
    level: str | None = None
    time_ms: int | None = None
    envelope_ms: int | None = None
    if text.startswith('{"resourceLogs"'):
        first = _otlp_first(json.loads(text))
        if first is None or not isinstance(first[0].get("body", {}).get("stringValue"), str):
            return None
        rec, scope = first
        stamp = rec.get("timeUnixNano")
        stamp = stamp if stamp and int(stamp) > 0 else rec.get("observedTimeUnixNano")
        envelope_ms = int(stamp) // 1_000_000 if stamp else None
        text, structured = rec["body"]["stringValue"].lstrip(), rec.get("severityText")
        number = rec.get("severityNumber")
        if not structured and isinstance(number, int) and 1 <= number <= 24:
            structured = ("TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL")[(number - 1) // 4]
        if structured and not text.startswith("{") and not _LAYOUT.match(text):
            level = str(structured).upper()
            return _event(text, level, envelope_ms or fallback_ms, None)
    if text.startswith("{"):
        head, _, tail = text.partition("\n")
        try:
            d = json.loads(head)
        except ValueError:
            return None
        if not isinstance(d, dict):
            return None
        layout = _json_layout(d, tail)
        line = d.get("log") if isinstance(d.get("log"), str) else d.get("message")
        if layout is None and isinstance(line, str) and line.lstrip().startswith("{"):
            # A shipper's line that is a JSON layout itself (Fluent Bit, Docker, Vector).
            try:
                inner = json.loads(line)
            except ValueError:
                inner = None
            if isinstance(inner, dict) and (layout := _json_layout(inner, tail)) is not None:
                d = inner
        stamp = d.get("@timestamp") or d.get("time") or d.get("timestamp")
        envelope_ms = envelope_ms or (_epoch_ms(str(stamp)) if stamp else None)
        mdc = _mdc(d)
        if layout is not None:
            message, level, time_ms = layout
            if time_ms is None and any(d.get(k) for k in _LAYOUT_TIME_KEYS):
                return None  # the parser's bad_timestamp
        else:
            if not isinstance(line, str):
                return None
            message, level, stamp = _text_line(line + (f"\n{tail}" if tail else ""))
            time_ms = _epoch_ms(stamp)
    else:
        message, level, stamp = _text_line(text)
        time_ms = _epoch_ms(stamp)
    return _event(message, level, time_ms or envelope_ms or fallback_ms, mdc)


def _event(message: str, level: str | None, time_ms: int | None, mdc: str | None) -> Event | None:
    message = re.sub(r"\s+$", "", message)
    if time_ms is None:
        return None
    kind = classify(message, level)
    job_id = _job_id(kind, message, mdc)
    fields: dict[str, Any] = {}
    if kind == "job_state" and (m := _JOB_LINE.search(message)):
        fields = {"job_name": m[1], "from_state": m[3], "to_state": m[4]}
    reason = None
    if kind in ("log_warn", "log_error") and (m := _FIRST_EXC.search(message)):
        reason = m[1][:500]
    return Event(
        kind,
        time_ms,
        job_id=job_id,
        reason=reason,
        message=message[:_MAX_MESSAGE],
        **fields,
    )


def _text_line(line: str) -> tuple[str, str | None, str | None]:
    """(message, level, time text) of a pattern-layout line; the line itself if none fits."""
    m = _LAYOUT.match(line)
    if m is None:
        return line, None, None
    return m[4], m[2], m[1]


def file_events(path: Path) -> list[Event]:
    """The events of a log file, split into records as ``flinkwatch replay`` does."""
    out: list[Event] = []
    last: int | None = None
    for rec in re.split(_RECORD_START, path.read_text(encoding="utf-8")):
        if not rec.strip():
            continue
        ev = event_of(rec, last)
        if ev is not None:
            out.append(ev)
            last = ev.time_ms
    return out


def sim_events(records: Iterable[SimRecord]) -> Iterator[Event]:
    """The events of simulated log records (their Kafka timestamp is the fallback time)."""
    for r in records:
        if r.stream == "log":
            ev = event_of(r.value.decode(), r.time_ms)
            if ev is not None:
                yield ev
