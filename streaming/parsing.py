"""Flink log lines → parsed events, in Spark SQL: :func:`parse_logs`.

Everything here builds Column expressions; no Python runs per record. The
input of :func:`parse_logs` (and of ``streaming.metric_parsing.parse_metrics``, which
shares the limits, the time checks and the output columns: ``streaming.parse_columns``) is
a DataFrame with the record text and its coordinates (``value``, ``topic``, ``partition``,
``offset``, ``kafka_ts``); the output has :data:`~streaming.schemas.EVENT_COLUMNS`, one row
per event, with ``error`` set (and ``kind`` null) for records that go to the dead letters.

The parse is a chain of stages, a module each: ``streaming.otlp_logs`` (an OTLP request
cut into its log records), ``streaming.log_envelopes`` (the line out of its envelope),
``streaming.log_layouts`` (the layout's time, level and message; the dead-letter verdict),
``streaming.log_kinds`` (the kind), then here the event's columns: the fields of its kind
(``streaming.log_fields``) and the job and TaskManager it is about. ``streaming.log_shapes``
names what a record is, for the dead letters and ``flinkwatch doctor``.

Log timestamps without a zone are read in the session time zone, which
``streaming.session`` sets from ``parsing.log_timezone``.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from streaming.forwards import SELF_REPORTED
from streaming.jvm_columns import made_once
from streaming.log_envelopes import _unwrapped
from streaming.log_fields import _log_fields, _match_slots
from streaming.log_kinds import J, _kinded
from streaming.log_layouts import _MDC_JOB_KEY, _headed, _level
from streaming.log_shapes import LOG_ENVELOPES, LOG_LAYOUTS, NOT_LOG_SHAPES, _shape
from streaming.otlp_logs import otlp_exploded
from streaming.parse_columns import DEAD_LETTER_REASONS, ParseLimits, _rx, capped_name, prefix
from streaming.schemas import null_column

__all__ = [
    "DEAD_LETTER_REASONS",
    "LOG_ENVELOPES",
    "LOG_LAYOUTS",
    "NOT_LOG_SHAPES",
    "ParseLimits",
    "parse_logs",
]


# Kinds a process logs about itself (no process id in the text): their tm_id comes from the
# shipper's envelope, see parse_logs. A TaskManager's word on its JobManager is its own too.
# In a file, the log's own `Starting TaskManager with ResourceID` line names the process
# (``source_tm`` from streaming.sources) where the envelope does not.
_SELF_REPORTED = SELF_REPORTED  # the kinds streaming.forwards forwards
# A YARN container's log directory in a shipper's file path (JSON may escape the slashes).
_YARN_LOG_DIR = r"[/\\]+(container_(?:e\d+_)?\d+_\d+_\d+_\d+)[/\\]+[\w.-]+\.(?:log|out|err)\b"


def parse_logs(
    records: DataFrame, limits: ParseLimits | None = None, *, shapes: bool = False
) -> DataFrame:
    """Parse log records (raw log4j lines, JSON layouts, shipper envelopes, OTLP/JSON).

    Args:
        records: Columns ``value`` (string), ``topic``, ``partition``, ``offset``,
            ``kafka_ts`` (timestamp, may be null).
        limits: Dead-letter bounds.
        shapes: Add two last columns for ``flinkwatch doctor``: ``own_tm``, the
            TaskManager (or host) the record's own source names (its pod, a YARN container
            in its path, its file's start line, its host), and ``shape``, the record shape
            recognised (one of :data:`LOG_LAYOUTS`, :data:`LOG_ENVELOPES`,
            ``<envelope>+<layout>`` or :data:`NOT_LOG_SHAPES`).

    Returns:
        One row per log event with :data:`~streaming.schemas.EVENT_COLUMNS` (an OTLP
        request makes one row per log record, numbered by ``seq``), plus ``shape``.
    """
    lim = limits or ParseLimits()
    df = otlp_exploded(records, lim.max_record_bytes, lim.max_otlp_log_records)
    df = _unwrapped(df, lim, shapes=shapes)
    df = _headed(df, lim, fallback_time="fallback_time" in records.columns)
    df = _kinded(df)
    return _event_columns(df, lim, shapes=shapes)


#: Columns a file source adds (``log_envelopes._FILE_COLUMNS``), or a capture's key.
_SOURCE_COLUMNS = ("source_job", "source_tm", "source_key")


def _file_column(present: frozenset[str], name: str) -> Column:
    """A column a file source adds (``log_envelopes._FILE_COLUMNS``), null for Kafka records."""
    return F.col(name) if name in present else F.lit(None).cast(StringType())


def _event_columns(df: DataFrame, lim: ParseLimits, *, shapes: bool) -> DataFrame:
    """The parsed event's fields from the message, in :data:`EVENT_COLUMNS` order.

    Three projections: the match slots (``_slot<i>``), the event's values as the record
    gives them (``_v_<name>``), then the event's columns, the texts cut to their lengths.
    A cut reads its text three times (``prefix``) or five (``capped_name``), and Spark keeps
    a projection apart from the one that reads it only when the read is of a column: an
    inlined text would be repeated at each read (the names' texts made the last projection of the
    small real run's plan 41 KB of its 93; ``python -m bench.plan_cost``), and Spark
    optimizes the plan again at every commit of the real-time parse.
    """
    present = frozenset(c for c in _SOURCE_COLUMNS if c in df.columns)
    slots, values, columns = made_once(
        ("parsing._event_columns", lim, shapes, present),
        lambda: (
            *_event_values(lim, present, shapes=shapes),
            _event_output(lim, shapes=shapes, keyed="source_key" in present),
        ),
    )
    return df.select("*", *slots).select("*", *values).select(*columns)


def _event_values(
    lim: ParseLimits, present: frozenset[str], *, shapes: bool
) -> tuple[list[Column], list[Column]]:
    """:func:`_event_columns`' match slots, then the event's values (``_v_<name>``)."""
    jc = F.col("_j")
    matched = F.coalesce(F.col("_lay1") != "", F.lit(False))
    kind, msg = F.col("kind"), F.col("_message")
    slots = _match_slots(kind, msg)
    named_slots = [slot.alias(f"_slot{i}") for i, slot in enumerate(slots)]
    mdc = F.coalesce(jc[_MDC_JOB_KEY], jc["contextMap"][_MDC_JOB_KEY], jc["mdc"][_MDC_JOB_KEY])
    mdc_job = _rx(F.when(F.col("_is_json"), mdc), f"^{J}$")
    slot_cols = [F.col(f"_slot{i}") for i in range(len(slots))]
    fields = _log_fields(kind, msg, slot_cols, mdc_job, _file_column(present, "source_job"))
    logger = F.coalesce(
        F.when(
            F.col("_flink_json"),
            F.coalesce(
                jc["logger"],
                jc["log.logger"],
                jc["loggerName"],
                F.regexp_replace(jc["file"], r"\.java$", ""),
            ),
        ),
        F.when(matched, F.col("_lay3")),
        F.col("_o_logger"),
    )
    # Where a shipper says the file came from: a YARN container directory names the process.
    path = F.coalesce(F.col("_o_path"), F.when(F.col("_is_json"), F.col("raw")))
    # The process a record's own source names (see _SELF_REPORTED); the pod comes first.
    named = F.coalesce(_rx(path, _YARN_LOG_DIR), _file_column(present, "source_tm"))
    # A keyed record's host waits for its source (streaming.forwards): the key's own start
    # line names the TaskManager where the host names only the machine (rsyslog's `vm`);
    # the source falls back to the host when it has not said who it is.
    own_tm_now = F.coalesce(
        named, F.when(_file_column(present, "source_key").isNull(), F.col("_env_host"))
    )
    detail = F.when(
        F.col("error") == "otlp_record_cap",
        F.format_string(
            "%d log records beyond the first %d",
            F.col("_otlp_n") - lim.max_otlp_log_records,
            F.lit(lim.max_otlp_log_records),
        ),
    ).otherwise(prefix(F.col("_e_corrupt"), 200))
    # The fields' tm_id and host are widened here; nothing else of theirs is replaced.
    assert not {"level", "logger", "detail", "own_tm"} & fields.keys()
    values = {
        **fields,
        "tm_id": F.coalesce(
            fields["tm_id"],
            F.when(kind.isNotNull(), F.col("_pod")),
            # A process's own fatal lines name no process: the shipper's YARN container
            # directory (`…/container_…/taskmanager.log`), the log's own start line (files),
            # or, failing both, its host does (a keyed record's: through its source).
            F.when(kind.isin(*_SELF_REPORTED), own_tm_now),
        ),
        "host": F.coalesce(fields["host"], F.col("_env_host")),
        "level": _level(),
        "logger": logger,
        "detail": detail,
    }
    if shapes:
        # For doctor: whom a line of the record would be attributed to, had it no id itself.
        values["own_tm"] = F.coalesce(F.col("_pod"), named, F.col("_env_host"))
    return named_slots, [c.alias(f"_v_{name}") for name, c in values.items()]


def _event_output(lim: ParseLimits, *, shapes: bool, keyed: bool) -> list[Column | str]:
    """The event's columns, read from :func:`_event_values`' ``_v_`` columns.

    ``keyed``: with ``source_key``; ``shapes``: with ``own_tm`` and ``shape``.
    """

    def v(name: str) -> Column:
        return F.col(f"_v_{name}")

    ok, failed = F.col("error").isNull(), F.col("error").isNotNull()
    level = v("level")
    return [
        "topic",
        "partition",
        "offset",
        "seq",
        "kafka_ts",
        F.col("kind"),
        F.when(ok, F.timestamp_millis(F.col("_event_ms"))).alias("event_time"),
        v("job_id").alias("job_id"),
        capped_name(v("job_name")).alias("job_name"),
        capped_name(v("tm_id")).alias("tm_id"),
        capped_name(v("host")).alias("host"),
        *(
            v(name).alias(name)
            for name in (
                "task",
                "checkpoint_id",
                "duration_ms",
                "size_bytes",
                "from_state",
                "to_state",
            )
        ),
        prefix(v("reason"), 500).alias("reason"),
        null_column("metric"),
        null_column("value"),
        prefix(F.col("_message"), lim.max_message_chars).alias("message"),
        F.when(level == "WARNING", F.lit("WARN")).otherwise(level).alias("level"),
        v("logger").alias("logger"),
        F.col("error"),
        F.when(failed, v("detail")).alias("detail"),
        F.when(failed, prefix(F.col("raw"), 65536)).alias("raw"),
        *(["source_key"] if keyed else []),
        *([v("own_tm").alias("own_tm")] if shapes else []),
        *([_shape().alias("shape")] if shapes else []),
    ]
