"""What the log and metric parsers share: the dead-letter bounds and reasons, and column helpers.

The helpers read text as cheaply as Spark lets them (a length judged by its bytes before its
characters are counted, a regex of many groups evaluated once: :func:`_groups`), and keep the
parse projection small: it must stay under the JVM's 64 KB method limit for generated code.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType, DoubleType, LongType

from detectors.model import CUT_MARK, NAME_CHARS
from streaming.otlp_logs import MAX_OTLP_LOG_RECORDS

#: Why a record is a dead letter (the ``error`` column).
DEAD_LETTER_REASONS: tuple[str, ...] = (
    "empty",
    "too_large",
    "invalid_json",
    "missing_field",
    "unknown_layout",
    "bad_timestamp",
    "bad_type",
    "non_finite_value",
    "invalid_id",
    # Metric records in a shape or on a route flinkwatch does not read, each named so the
    # fix is plain (docs/input-formats.md#dead-letters says the shipper setting to change).
    "log_on_metric_topic",
    "otlp_protobuf",
    "prometheus_text",
    "bad_line_protocol",
    "unsupported_metric_type",
    "too_many_points",
    # Log records of a shape flinkwatch recognises but cannot read (docs/input-formats.md says
    # what to change in the shipper for each; otlp_protobuf, above, is refused on both topics).
    "metric_on_log_topic",
    "envelope_without_line",
    "otlp_record_cap",
)


@dataclass(frozen=True)
class ParseLimits:
    """Bounds that turn a record into a dead letter.

    Attributes:
        max_record_bytes: Longer records are dead letters (``too_large``).
        min_event_ms: Event times before this are absurd (``bad_timestamp``).
        max_future_ms: Event times further than this ahead of the Kafka timestamp
            (or of ``max_event_ms`` when there is none) are absurd.
        max_event_ms: Upper bound when a record has no Kafka timestamp (files).
        max_message_chars: Messages are cut to this length in the output.
        max_points_per_record: Samples read from one metric record holding many; those
            past it are dropped, counted as one dead letter (``too_many_points``).
        max_otlp_log_records: Log records read from one OTLP request; those past it are
            dropped, counted as one dead letter (``otlp_record_cap``).
    """

    max_record_bytes: int = 1_048_576
    min_event_ms: int = 946_684_800_000  # 2000-01-01
    max_future_ms: int = 300_000
    max_event_ms: int = 4_102_444_800_000  # 2100-01-01
    max_message_chars: int = 2000
    max_points_per_record: int = 10_000
    max_otlp_log_records: int = MAX_OTLP_LOG_RECORDS


def _rx(col: Column | str, pattern: str, idx: int = 1) -> Column:
    """``regexp_extract`` that yields null instead of an empty string."""
    c = F.col(col) if isinstance(col, str) else col
    # nullif evaluates the extraction once (a `when` would generate it twice, and the
    # parse projection must stay under the JVM's 64 KB method limit for codegen).
    return F.nullif(F.regexp_extract(c, pattern, idx), F.lit(""))


def longer_than(text: Column, n: int) -> Column:
    """True when ``text`` has more than ``n`` characters.

    Spark counts characters by reading the whole string; a string of at most ``n`` bytes
    has at most ``n`` characters, and its byte length is known without reading it.
    """
    return (F.octet_length(text) > n) & (F.length(text) > n)


def prefix(text: Column, n: int) -> Column:
    """The first ``n`` characters of ``text``.

    ``substring`` counts every character of the string first: only a string of more than
    ``n`` bytes can have more than ``n`` characters.
    """
    return F.when(F.octet_length(text) <= n, text).otherwise(F.substring(text, 1, n))


def capped_name(name: Column) -> Column:
    """A name cut as :func:`detectors.model.cap_name` cuts it (``NAME_CHARS``, marked).

    Names (job names, TaskManager ids, hosts) come from the records unbounded (``Job (.*)
    (<id>) switched …``, a label value); cut here, nothing downstream (the config's
    regular expressions in the ledger's transaction above all) sees more.
    """
    cut = F.concat(F.substring(name, 1, NAME_CHARS - 1), F.lit(CUT_MARK))
    return F.when(F.octet_length(name) <= NAME_CHARS, name).otherwise(
        F.when(F.char_length(name) <= NAME_CHARS, name).otherwise(cut)
    )


def epoch_ms_from_text(ts: Column) -> Column:
    """Epoch ms from epoch s/ms/us/ns numbers or ISO-8601 / log4j date strings."""
    num = ts.cast(DoubleType())
    by_magnitude = (
        F.when(num < 1e11, num * 1000)
        .when(num < 1e14, num)
        .when(num < 1e17, num / 1000)
        .cast(LongType())
    )
    # A double holds 15-16 digits: nanoseconds (OTLP's times) are divided exactly.
    by_magnitude = F.coalesce(
        by_magnitude, (ts.cast(DecimalType(38, 0)) / 1_000_000).cast(LongType())
    )
    text = F.regexp_replace(F.regexp_replace(ts, ",", "."), "^(\\S+)T", "$1 ")
    as_ts = F.unix_millis(F.to_timestamp(text))
    return F.when(ts.rlike(r"^\s*-?\d+(\.\d+)?\s*$"), by_magnitude).otherwise(as_ts)


def time_error(event_ms: Column, kafka_ts: Column, limits: ParseLimits) -> Column:
    """``bad_timestamp`` for an event time that is missing or outside the limits, else null."""
    ceiling = F.coalesce(
        F.unix_millis(kafka_ts) + F.lit(limits.max_future_ms), F.lit(limits.max_event_ms)
    )
    return F.when(event_ms.isNull(), F.lit("bad_timestamp")).when(
        (event_ms < F.lit(limits.min_event_ms)) | (event_ms > ceiling), F.lit("bad_timestamp")
    )


# Control characters that carry the groups of one regex evaluation (see _groups). A record
# that contains them can only garble its own fields, which its text could claim anyway.
_SEP = "\u0001"
_MARK = "\u0002"


def _groups(text: Column, pattern: str, n: int) -> Column:
    """Groups 1..n of the first match of ``pattern`` in ``text``, from ONE regex evaluation.

    ``regexp_extract`` runs its pattern once per group asked for. Here the text is replaced
    by a mark and the groups, joined by a separator, and split: ``[mark, g1, .., gn]`` when
    the pattern matches (a group that took no part is empty), ``[text]`` when it does not.
    Select it as a column before reading it with :func:`_group` (a second reference to the
    expression would run the regex again).
    """
    whole = rf"\A[\s\S]*?(?:{pattern})[\s\S]*"
    groups = "".join(f"{_SEP}${i}" for i in range(1, n + 1))
    return F.split(F.regexp_replace(text, whole, _MARK + groups), _SEP)


def _matched(groups: Column) -> Column:
    """True when the :func:`_groups` column holds a match."""
    return F.size(groups) > 1


def _group(groups: Column, i: int) -> Column:
    """Group ``i`` (1-based) of a :func:`_groups` column; null when empty or no match."""
    return F.when(_matched(groups), F.nullif(F.element_at(groups, i + 1), F.lit("")))
