"""A log record out of its envelope: the line to parse and what the envelope says, in Spark SQL.

A record on the log topic is a line in a text layout, a JSON layout, or a shipper's
envelope around either (Fluent Bit, Docker's json-file, Vector, Filebeat, a bare
``{"message": …}``; an OTLP/JSON request is cut into its log records before, by
``streaming.otlp_logs``). :func:`_unwrapped` finds the line and the JSON layout, and keeps
what later steps need of the envelope: its time, host, pod and file path.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from streaming.jvm_columns import made_once, widened
from streaming.log_layouts import _LAYOUT, _LAYOUT_PARTS, _MDC_JOB_KEY, _SYSLOG_HOST, _layout_time
from streaming.log_shapes import _envelope_shape, _json_metric
from streaming.parse_columns import _SEP, ParseLimits, _group, _groups, _rx, longer_than
from streaming.schemas import JSON_OPTS

#: Columns a file source adds that the parser reads when present (streaming.sources): the
#: time of the record before, and what the log said of itself (its TaskManager, its one job);
#: and a Kafka record's key (``source_key``), which the event keeps (streaming.forwards).
_FILE_COLUMNS = ("fallback_time", "source_tm", "source_job", "source_key")


def _strings(*names: str) -> StructType:
    return StructType([StructField(n, StringType()) for n in names])


_LOG_JSON_SCHEMA = StructType(
    [
        StructField("level", StringType()),
        StructField("timestamp", StringType()),
        StructField("thread", StringType()),
        StructField("file", StringType()),
        StructField("logger", StringType()),
        StructField("line", StringType()),
        StructField("message", StringType()),
        StructField("log", StringType()),
        StructField("@timestamp", StringType()),
        StructField("time", StringType()),
        StructField("date", StringType()),
        StructField("host", StringType()),
        StructField("hostname", StringType()),
        StructField(
            "kubernetes",
            StructType(
                [
                    StructField("pod_name", StringType()),
                    StructField("host", StringType()),
                    # Vector's kubernetes_logs source.
                    StructField("pod_node_name", StringType()),
                    StructField("pod", StructType([StructField("name", StringType())])),
                    StructField("node", StructType([StructField("name", StringType())])),
                ]
            ),
        ),
        StructField("stream", StringType()),
        StructField("source_type", StringType()),
        # Elastic's ECS layout (log4j2 `EcsLayout.json`): flat dotted keys, the trace apart.
        StructField("log.level", StringType()),
        StructField("log.logger", StringType()),
        StructField("error.stack_trace", StringType()),
        # log4j2's stock JsonLayout: the time as `instant` (2.11+) or `timeMillis`, the
        # exception as an object (its trace an array of frames, or a string with
        # `stacktraceAsString`; a string field keeps an array's JSON text).
        StructField("loggerName", StringType()),
        StructField("instant", _strings("epochSecond", "nanoOfSecond")),
        StructField("timeMillis", StringType()),
        StructField(
            "thrown",
            StructType(
                [
                    *_strings("name", "message", "localizedMessage").fields,
                    *_strings("extendedStackTrace", "stackTrace").fields,
                    StructField("cause", _strings("name", "message")),
                ]
            ),
        ),
        StructField(_MDC_JOB_KEY, StringType()),
        StructField("contextMap", StructType([StructField(_MDC_JOB_KEY, StringType())])),
        StructField("mdc", StructType([StructField(_MDC_JOB_KEY, StringType())])),
        # A metric record on the log topic (canonical, Telegraf, Vector's metric event).
        *_strings("name", "value", "fields", "gauge", "counter").fields,
        StructField("_corrupt", StringType()),
    ]
)


def _unwrapped(records: DataFrame, lim: ParseLimits, *, shapes: bool) -> DataFrame:
    """Records with the log line to parse (``_line``) out of whatever envelope it came in.

    ``_e`` is the record's JSON object (a layout or a shipper's envelope), ``_j`` the JSON
    layout the fields come from: ``_e`` itself, or the line inside the envelope when that
    line is a JSON layout (``_nested``: JSON on stdout under a Fluent Bit or Vector DaemonSet).
    What later steps need of the envelope is taken here, and only that goes on: every
    projection after this one copies each column it carries.
    """
    df = _json_read(records, lim)
    df = _line_chosen(df)
    return _envelope_read(df, shapes=shapes)


def _json_read(records: DataFrame, lim: ParseLimits) -> DataFrame:
    """The text to read (``_text``) and, when it is a JSON object, the object (``_e``).

    Lines after the object (``_tail``) are continuation lines of its message.
    """
    files = [c for c in _FILE_COLUMNS if c in records.columns]
    otlp = ["_is_otlp", "_otlp_bad", "_otlp_n"]
    key = ("log_envelopes._json_read", lim.max_record_bytes)
    read, parsed = made_once(key, lambda: _json_columns(lim.max_record_bytes))
    df = records.select("topic", "partition", "offset", "kafka_ts", *files, *otlp, *read)
    return df.select("*", *parsed)


def _json_columns(max_record_bytes: int) -> tuple[list[Column | str], list[Column]]:
    """:func:`_json_read`'s columns after the record's own, then the JSON object's."""
    # The text to read: the record, or the body of one OTLP log record.
    text = F.when(F.col("_is_otlp"), F.col("_o.line")).otherwise(F.col("value"))
    trimmed = F.ltrim(text)
    is_json = trimmed.startswith("{")
    # The JSON object is the first line; continuation lines glued after it (files read
    # whole, shippers that join multi-line records) belong to its message.
    json_split = _groups(trimmed, r"^(\{[^\n]*\})[ \t\r]*(?:\n([\s\S]*))?$", 2)
    read: list[Column | str] = [
        F.coalesce(F.col("_seq"), F.lit(0)).alias("seq"),
        "_o",
        F.col("value").alias("raw"),
        text.alias("_text"),
        longer_than(F.col("value"), max_record_bytes).alias("_too_large"),
        is_json.alias("_is_json"),
        F.when(is_json, json_split).alias("_jsplit"),
    ]
    json_text = _group(F.col("_jsplit"), 1)
    e = F.from_json(
        F.when(F.col("_is_json"), F.coalesce(json_text, F.ltrim(F.col("_text")))),
        _LOG_JSON_SCHEMA,
        JSON_OPTS,
    )
    return read, [e.alias("_e"), F.coalesce(_group(F.col("_jsplit"), 2), F.lit("")).alias("_tail")]


def _line_chosen(df: DataFrame) -> DataFrame:
    """The JSON layout (``_j``) or the text line (``_line``) the layout step reads.

    A JSON object is a layout itself (``_flink_json``), an envelope whose line is a JSON
    layout (``_nested``, parsed again), or an envelope around a text line.
    """
    return widened(df, ("log_envelopes._line_chosen",), _line_columns)


def _line_columns() -> list[list[Column]]:
    """:func:`_line_chosen`'s projections, each reading the ones before."""
    ec = F.col("_e")
    # Filebeat's `log` is an object (`log.offset`, `log.file.path`); its line is `message`.
    filebeat_log = F.col("_is_json") & F.col("_text").rlike(r'(?<!\\)"log"\s*:\s*\{')
    log_line = F.when(~filebeat_log, ec["log"])
    # Flink's JSON layout, log4j2's JsonLayout or ECS, also as Filebeat ships them decoded
    # (`json.keys_under_root`: the layout's keys next to Filebeat's `log` object).
    top_layout = (
        ec["message"].isNotNull()
        & F.coalesce(ec["level"], ec["log.level"]).isNotNull()
        & (ec["log"].isNull() | (filebeat_log & _layout_time(ec).isNotNull()))
    )
    envelope = [
        filebeat_log.alias("_filebeat"),
        top_layout.alias("_top_layout"),
        F.when(F.col("_is_json") & ~top_layout, F.coalesce(log_line, ec["message"])).alias(
            "_eline"
        ),
    ]
    # The envelope's line is a JSON layout itself: parsed again, only then.
    inner = F.from_json(
        F.when(F.ltrim(F.col("_eline")).startswith("{"), F.col("_eline")),
        _LOG_JSON_SCHEMA,
        JSON_OPTS,
    )
    ic = F.col("_inner")
    nested = F.coalesce(
        ic["_corrupt"].isNull()
        & ic["message"].isNotNull()
        & F.coalesce(ic["level"], ic["log.level"]).isNotNull(),
        F.lit(False),
    )
    flink_json = F.col("_top_layout") | nested
    tail = F.when(F.col("_tail") != "", F.col("_tail"))
    # Text to run the layout regex on: the record, or the line inside an envelope.
    line = F.when(
        F.col("_is_json"),
        F.when(~flink_json & F.col("_eline").isNotNull(), F.concat_ws("\n", F.col("_eline"), tail)),
    ).otherwise(F.col("_text"))
    chosen = [
        F.when(nested, ic).otherwise(ec).alias("_j"),
        line.alias("_line"),
        flink_json.alias("_flink_json"),
        nested.alias("_nested"),
    ]
    return [envelope, [inner.alias("_inner")], chosen]


def _envelope_read(df: DataFrame, *, shapes: bool) -> DataFrame:
    """What the envelope says (time, host, pod, file path, or that it holds no line).

    The layout regex runs here too, once, its groups kept for the layout step (see
    :func:`streaming.log_layouts._headed`).
    """
    files = tuple(c for c in _FILE_COLUMNS if c in df.columns)
    key = ("log_envelopes._envelope_read", shapes, files)
    return df.select(*made_once(key, lambda: _envelope_columns(files, shapes=shapes)))


def _envelope_columns(files: tuple[str, ...], *, shapes: bool) -> list[Column | str]:
    """:func:`_envelope_read`'s columns (``files``: the file source's that the records have)."""
    ec = F.col("_e")
    flink_json, nested = F.col("_flink_json"), F.col("_nested")
    o = F.col("_o")
    envelope_ts = F.coalesce(
        o["ts"],
        F.when(
            F.col("_is_json") & (~flink_json | nested),
            F.coalesce(ec["@timestamp"], ec["time"], ec["date"], ec["timestamp"]),
        ),
    )
    # A shipper's envelope we know by its own keys (a JSON object with none of them and no
    # line is only `missing_field`).
    envelope = (
        ec["kubernetes"].isNotNull()
        | ec["stream"].isNotNull()
        | ec["source_type"].isNotNull()
        | ec["date"].isNotNull()
        | F.col("_filebeat")
        | (ec["@timestamp"].isNotNull() & ec["host"].isNotNull())
    )
    json_unread = F.col("_is_json") & F.col("_line").isNull() & ~flink_json
    return [
        "topic",
        "partition",
        "offset",
        "kafka_ts",
        *files,
        "seq",
        "raw",
        "_too_large",
        "_is_otlp",
        "_otlp_bad",
        "_otlp_n",
        (F.col("_is_otlp") & (o["line"].isNull() | o["line"].rlike(r"^\s*$"))).alias("_otlp_blank"),
        # The layout's groups from one evaluation of its regex (see _headed): the match is
        # the whole line, replaced by its groups behind separators, which only the message
        # can hold; a line that does not match is left as it is.
        F.split(F.regexp_replace(F.col("_line"), _LAYOUT, _LAYOUT_PARTS), _SEP, 5).alias("_lparts"),
        o["level"].alias("_o_level"),
        o["logger"].alias("_o_logger"),
        o["path"].alias("_o_path"),
        "_is_json",
        "_tail",
        "_j",
        "_line",
        "_flink_json",
        "_nested",
        ec["_corrupt"].alias("_e_corrupt"),
        envelope_ts.alias("_env_ts"),
        F.when(json_unread, envelope).alias("_envelope"),
        _json_metric(json_unread).alias("_json_metric"),
        F.coalesce(o["pod"], ec["kubernetes"]["pod_name"], ec["kubernetes"]["pod"]["name"]).alias(
            "_pod"
        ),
        F.coalesce(
            o["host"],
            ec["kubernetes"]["host"],
            ec["kubernetes"]["node"]["name"],
            ec["kubernetes"]["pod_node_name"],
            F.get_json_object(ec["host"], "$.name"),
            ec["host"],
            ec["hostname"],
            # rsyslog's default template: `<RFC 3339 time> <host> <tag>: <line>`.
            F.when(~F.col("_is_json"), _rx(F.col("_line"), _SYSLOG_HOST)),
        ).alias("_env_host"),
        *([_envelope_shape().alias("_shape_env")] if shapes else []),
    ]
