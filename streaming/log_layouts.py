"""A log line's layout: its time, level, logger and message, and the record's verdict, in Spark SQL.

Text layouts (Flink's pattern layouts, logback's, Hadoop's, with a ``kubectl`` or rsyslog
prefix) are read by one regex, :data:`_LAYOUT`; JSON layouts (Flink's, log4j2's
JsonLayout, ECS) by their keys, out of the object the unwrapping (``streaming.log_envelopes``)
found them in. Here a record also becomes a dead letter, or not (:func:`_dead_letter`).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType

from streaming.jvm_columns import widened
from streaming.log_shapes import _CONTINUATION, _not_a_log
from streaming.parse_columns import _SEP, ParseLimits, epoch_ms_from_text, time_error

# The job the logging framework's MDC names (`flink-job-id`, Flink 1.19+, FLINK-34417): a
# top-level key in the ECS layout (log4j2 JsonTemplateLayout flattens the MDC), under
# `contextMap` in log4j2's JsonLayout, under `mdc` in a JsonTemplateLayout that nests it.
_MDC_JOB_KEY = "flink-job-id"


# The host of rsyslog's header (see _LAYOUT). Anchored: a line in Flink's own layout fails it
# at its 11th character.
_SYSLOG_HOST = (
    r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2}) (\S+) \S+: \d{4}-"
)


# Log4j layouts. Group 1 = timestamp, 2 = level, 3 = logger, 4 = message.
#  - Flink default, log4j1 (<=1.10) and log4j2 (>=1.11, `[]` for the empty NDC)
#  - the logback layout and `[thread]` variants seen in the field
#  - Hadoop NodeManager (`logger: message`), for YARN container kills
#  - an optional `kubectl logs --timestamps` RFC 3339 prefix, or rsyslog's header (its
#    default template: `<RFC 3339 time> <host> <tag>: `, the tag ending in a colon)
_LAYOUT = (
    r"(?s)^(?:\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})\s+"
    r"(?:\S+\s+\S+:\s+)?)?"
    r"(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[,.]\d{1,9})?)\s+"
    r"(?:\[[^\]]*\]\s+)?"
    r"(TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL)\s+"
    r"(?:\[[^\]]*\]\s+)?"
    r"([\w.$]+?)(?::\s+|\s+(?:\[[^\]]*\]\s+)?(?:\S+\s+)??-\s)"
    r"(.*)$"
)

_LAYOUT_PARTS = "".join(f"\u0001${i}" for i in (1, 2, 3, 4))


def _otlp_structured() -> Column:
    """An OTLP log record that says its level or logger itself: its body is the message.

    A logging bridge (the OpenTelemetry Java agent's log4j appender) sends the bare
    message; the filelog receiver sends the file's line, which must be in a layout.
    """
    return F.col("_is_otlp") & (F.col("_o_level").isNotNull() | F.col("_o_logger").isNotNull())


def _layout_time(s: Column) -> Column:
    """A JSON layout's time as written (log4j2 JsonLayout's ``instant``: its seconds)."""
    return F.coalesce(s["timestamp"], s["@timestamp"], s["timeMillis"], s["instant"]["epochSecond"])


def _layout_ms(s: Column) -> Column:
    """Epoch ms of a JSON layout's time (null when absent or unreadable)."""
    text = F.coalesce(s["timestamp"], s["@timestamp"])
    instant = s["instant"]
    instant_ms = instant["epochSecond"].try_cast(LongType()) * 1000 + F.coalesce(
        instant["nanoOfSecond"].try_cast(LongType()), F.lit(0)
    ) / F.lit(1_000_000)
    return (
        F.when(text.isNotNull(), epoch_ms_from_text(text))
        .when(instant["epochSecond"].isNotNull(), instant_ms.cast(LongType()))
        .when(s["timeMillis"].isNotNull(), epoch_ms_from_text(s["timeMillis"]))
    )


def _thrown(s: Column) -> Column:
    """log4j2 JsonLayout's exception as the lines a pattern layout prints (null: none).

    ``name: message`` and its cause's, or the trace itself when it is a string
    (``stacktraceAsString``); a trace as an array of frames adds no line detectors read.
    """
    t = s["thrown"]
    head = F.concat_ws(": ", t["name"], F.coalesce(t["message"], t["localizedMessage"]))
    cause = t["cause"]
    caused = F.when(
        cause["name"].isNotNull(),
        F.concat(F.lit("Caused by: "), F.concat_ws(": ", cause["name"], cause["message"])),
    )
    as_text = F.coalesce(t["extendedStackTrace"], t["stackTrace"])
    return F.when(
        t["name"].isNotNull(),
        F.when(as_text.isNotNull() & ~F.ltrim(as_text).startswith("["), as_text).otherwise(
            F.concat_ws("\n", head, caused)
        ),
    )


# What Java's `\s` matches, and the line terminators before which its `$` matches too: a
# regex made of `\s` and anchors can only match a text that starts (or ends) with one.
_SPACE_OR_BREAK = (" ", "\t", "\n", "\x0b", "\f", "\r", "\u0085", "\u2028", "\u2029")


def _blank(text: Column) -> Column:
    """Whether ``text`` is only white space: the regex only for a text starting with it."""
    starts = text == ""
    for c in _SPACE_OR_BREAK:
        starts = starts | text.startswith(c)
    return starts & text.rlike(r"^\s*$")


def _rstripped(text: Column) -> Column:
    """``text`` without trailing white space (the regex only where the text ends in one)."""
    ends = F.lit(False)
    for c in _SPACE_OR_BREAK:
        ends = ends | text.endswith(c)
    return F.when(ends, F.regexp_replace(text, r"\s+$", "")).otherwise(text)


def _headed(df: DataFrame, lim: ParseLimits, *, fallback_time: bool) -> DataFrame:
    """The layout's header (time, level, logger), the message, the event time and the error.

    ``fallback_time``: the records have the file source's ``fallback_time`` column.
    """
    key = ("log_layouts._headed", lim, fallback_time)
    return widened(df, key, lambda: _header_columns(lim, fallback_time))


def _header_columns(lim: ParseLimits, fallback_time: bool) -> list[list[Column]]:
    """:func:`_headed`'s projections, each reading the ones before."""
    jc = F.col("_j")
    # `_layN` as four regexp_extract calls would give them: empty when the layout does not
    # match, null for no line.
    line, parts = F.col("_line"), F.col("_lparts")
    hit = (F.size(parts) == 5) & (parts[0] == "") & ~line.startswith(_SEP)
    none = F.when(line.isNotNull(), F.lit(""))
    layout = [F.when(hit, parts[i]).otherwise(none).alias(f"_lay{i}") for i in (1, 2, 3, 4)]
    tail = F.when(F.col("_tail") != "", F.col("_tail"))
    jmsg = F.concat_ws("\n", jc["message"], jc["error.stack_trace"], _thrown(jc), tail)
    matched = F.coalesce(F.col("_lay1") != "", F.lit(False))
    # A column of its own (`_message_text`): the strip of its trailing blanks reads it eleven
    # times, and an inlined text would be repeated at each (bench.plan_cost).
    text = (
        F.when(F.col("_flink_json"), jmsg).when(matched, F.col("_lay4")).otherwise(F.col("_line"))
    )
    ts_text = F.when(F.col("_flink_json"), _layout_time(jc)).when(matched, F.col("_lay1"))
    ts_ms = F.when(F.col("_flink_json"), _layout_ms(jc)).when(
        matched, epoch_ms_from_text(F.col("_lay1"))
    )
    header = [
        ts_text.alias("_ts_text"),
        ts_ms.alias("_ts_ms"),
        _not_a_log(matched).alias("_not_log"),
        text.alias("_message_text"),
    ]
    # A record without a time of its own takes the Kafka record's or, in a file, the
    # time of the record before it (``fallback_time``, see streaming.sources).
    fallback = F.unix_millis(F.col("kafka_ts"))
    if fallback_time:
        fallback = F.coalesce(fallback, epoch_ms_from_text(F.col("fallback_time")))
    event_ms = F.coalesce(
        F.col("_ts_ms"),
        epoch_ms_from_text(F.col("_env_ts")),
        F.when(~matched & ~F.col("_flink_json"), fallback),
    )
    verdict = [
        _dead_letter(matched, event_ms, lim).alias("error"),
        # Trailing line breaks go too (Docker's json-file driver keeps the `\n` in `log`).
        _rstripped(F.col("_message_text")).alias("_raw_message"),
        event_ms.alias("_event_ms"),
    ]
    return [layout, header, verdict, [_line_breaks(F.col("_raw_message")).alias("_message")]]


def _dead_letter(matched: Column, event_ms: Column, lim: ParseLimits) -> Column:
    """The record's dead-letter reason (the ``error`` column), null for a record that parses.

    ``matched``: the text layout's regex matched the line; ``event_ms``: the event time
    the record would have.
    """
    is_continuation = F.col("_line").rlike(_CONTINUATION)
    otlp = F.col("_is_otlp")
    return (
        F.when(F.col("raw").isNull() | _blank(F.col("raw")), F.lit("empty"))
        .when(F.col("_too_large"), F.lit("too_large"))
        .when(F.col("_not_log") == "otlp_protobuf", F.lit("otlp_protobuf"))
        .when(F.col("_not_log").isNotNull(), F.lit("metric_on_log_topic"))
        .when(otlp & F.col("_otlp_bad"), F.lit("invalid_json"))
        .when(otlp & (F.col("seq") >= lim.max_otlp_log_records), F.lit("otlp_record_cap"))
        .when(F.col("_otlp_blank"), F.lit("envelope_without_line"))
        .when(F.col("_is_json") & F.col("_e_corrupt").isNotNull(), F.lit("invalid_json"))
        .when(
            F.col("_envelope").isNotNull(),
            F.when(F.col("_envelope"), F.lit("envelope_without_line")).otherwise(
                F.lit("missing_field")
            ),
        )
        .when(
            ~F.col("_flink_json")
            & ~matched
            & ~is_continuation
            & F.col("_line").isNotNull()
            & ~_otlp_structured(),
            F.lit("unknown_layout"),
        )
        .when(F.col("_ts_text").isNotNull() & F.col("_ts_ms").isNull(), F.lit("bad_timestamp"))
        .otherwise(time_error(event_ms, F.col("kafka_ts"), lim))
    )


# rsyslog's imfile writes a line break inside a message as the two characters `\n` (its
# `escapeLF`, on by default): a stack trace arrives as one line. Such a message has no real
# line break, and a `\n` before a stack frame, a cause or an exception class.
_ESCAPED_BREAK = r"\\n(?:\t|at |Caused by: |[\w$]+(?:\.[\w$]+)+(?:Exception|Error|Throwable)\b)"


def _line_breaks(message: Column) -> Column:
    """``message`` with rsyslog's escaped line breaks made real again (see _ESCAPED_BREAK)."""
    escaped = message.contains("\\n") & ~message.contains("\n") & message.rlike(_ESCAPED_BREAK)
    return F.when(escaped, F.regexp_replace(message, r"\\n", "\n")).otherwise(message)


def _level() -> Column:
    """The record's level as its layout (or else its OTLP severity) prints it, upper case."""
    jc = F.col("_j")
    matched = F.coalesce(F.col("_lay1") != "", F.lit(False))
    return F.upper(
        F.coalesce(
            F.when(F.col("_flink_json"), F.coalesce(jc["level"], jc["log.level"])),
            F.when(matched, F.col("_lay2")),
            F.col("_o_level"),
        )
    )
