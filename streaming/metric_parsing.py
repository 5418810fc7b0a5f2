"""Metric records → ``metric`` events, in Spark SQL.

The log parser's sibling (:mod:`streaming.parsing`): same output columns, same limits and
dead-letter reasons, no Python per record. A record is first recognised by a cheap test of
its first characters (its *shape*: our canonical JSON, Telegraf JSON, Vector JSON, OTLP
JSON, InfluxDB line protocol), and only that shape's expression reads it, so records of
the usual shapes do not pay for the others. Every shape becomes a list of samples (name,
value, time, labels), one event each, numbered by ``seq``; then the sample's name is
mapped onto the canonical name the detectors read (Flink's Prometheus reporter's: see
``streaming.metric_names`` and ``parsing.metric_names``).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    DoubleType,
    IntegerType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from conf.pipeline import MetricNameRule
from streaming.jvm_columns import made_once
from streaming.metric_names import LABELS, NameRule, name_rules, named_by, rule_index
from streaming.parse_columns import (
    ParseLimits,
    capped_name,
    epoch_ms_from_text,
    longer_than,
    prefix,
    time_error,
)
from streaming.schemas import JSON_OPTS, null_column, struct_of

#: Event columns a metric sample never fills.
_NOT_IN_METRICS = ("checkpoint_id", "duration_ms", "size_bytes", "from_state", "to_state", "reason")

#: What a metric label naming an entity may look like. Each distinct id becomes detector
#: state and Prometheus series, so a record whose ids are garbage (random bytes, a whole
#: log line, 10 KB of text) is a dead letter, not a new entity. Flink job ids are 32 hex
#: digits; TaskManager ids and hosts are YARN containers, pod names, ``host:port-xxxxxx``
#: resource ids and host names or addresses.
JOB_ID_PATTERN = r"^[0-9a-fA-F]{32}$"
ENTITY_ID_PATTERN = r"^[A-Za-z0-9\[][A-Za-z0-9._:@/\[\]-]{0,127}$"


#: What ``shapes=True`` reports per record (the ``shape`` column).
SHAPES = ("canonical", "telegraf_json", "influx_line", "vector_json", "otlp_json", "unknown")

_LABEL_STRUCT = StructType([StructField(k, StringType()) for k in LABELS])
_POINT = StructType(
    [
        StructField("n", StringType()),
        StructField("v", StringType()),
        StructField("ts", StringType()),
        StructField("lab", _LABEL_STRUCT),
        # A refusal of this sample alone (a line that is not line protocol, the cap).
        StructField("err", StringType()),
    ]
)

# Vector's metric kinds that carry no single value we read.
_VECTOR_OTHER = ("distribution", "aggregated_histogram", "aggregated_summary", "set", "sketch")

_METRIC_JSON_SCHEMA = StructType(
    [
        StructField("name", StringType()),
        StructField("value", StringType()),
        StructField("timestamp", StringType()),
        StructField("labels", MapType(StringType(), StringType())),
        StructField("fields", MapType(StringType(), StringType())),
        StructField("tags", MapType(StringType(), StringType())),
        StructField("_corrupt", StringType()),
    ]
)
# Read only from records that mention these keys: every field of a schema costs each record
# parsed with it, and the canonical records are most of the topic.
_OTHER_JSON_KEYS = ('"kind"', '"log"', '"message"')
_OTHER_JSON_SCHEMA = StructType(
    [
        # Vector's metric event.
        StructField("namespace", StringType()),
        StructField("kind", StringType()),
        StructField("gauge", StructType([StructField("value", StringType())])),
        StructField("counter", StructType([StructField("value", StringType())])),
        *[StructField(k, StringType()) for k in _VECTOR_OTHER],
        # A log record on the wrong topic (a shipper envelope or a JSON layout).
        StructField("log", StringType()),
        StructField("message", StringType()),
    ]
)

# OTLP JSON (protobuf's JSON mapping): 64-bit integers are strings, so every number is
# read as text. Histograms and summaries are kept as text only to name them.
_S = StringType()
_OTLP_KV = ArrayType(struct_of(key=_S, value=struct_of(stringValue=_S, intValue=_S)))
_OTLP_POINTS = struct_of(
    dataPoints=ArrayType(
        struct_of(attributes=_OTLP_KV, timeUnixNano=_S, asDouble=_S, asInt=_S, flags=_S)
    )
)
_OTLP_METRIC = struct_of(
    name=_S,
    gauge=_OTLP_POINTS,
    sum=_OTLP_POINTS,
    histogram=_S,
    summary=_S,
    exponentialHistogram=_S,
)
_OTLP_SCHEMA = struct_of(
    resourceMetrics=ArrayType(
        struct_of(
            resource=struct_of(attributes=_OTLP_KV),
            scopeMetrics=ArrayType(struct_of(metrics=ArrayType(_OTLP_METRIC))),
        )
    ),
    _corrupt=_S,
)

# InfluxDB line protocol: `measurement[,tag=v...] field=v[,field=v...] [timestamp]`, with
# `\,` `\ ` `\=` escapes and double-quoted string fields. Each alternation below is between
# disjoint first characters, so the matcher never backtracks over a long line.
_LP_NAME = r"(?:[^\\, ]|\\.)+"
_LP_KEY = r"(?:[^\\,= ]|\\.)+"
_LP_TAGVAL = r"(?:[^\\, ]|\\.)+"
_LP_FIELDS = r'(?:[^\\ "]|\\.|"(?:[^\\"]|\\.)*")+'
_LP_LINE = rf"^({_LP_NAME})((?:,{_LP_KEY}={_LP_TAGVAL})*) ({_LP_FIELDS})(?: (-?\d+))?[ \t\r]*$"
_LP_TAG = rf",({_LP_KEY})=({_LP_TAGVAL})"
_LP_FIELD = rf'(?:^|,)({_LP_KEY})=("(?:[^\\"]|\\.)*"|[^,]*)'

# A log line (Flink's layouts start with the date) on the metrics topic.
_LOG_LINE = r"^\s*\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}"
# Prometheus text exposition forwarded as is: `# HELP`/`# TYPE`, or `name{labels} value`.
_PROM_TEXT = (
    r"^(?:# (?:HELP|TYPE) "
    r"|[a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^}\n]*\})? +[^ =\n]+(?: +-?\d+)? *(?:\n|$))"
)
# Protobuf (OTLP's default `otlp_proto` encoding) read as text: field 1 (`\n`), then bytes
# that are no text.
_BINARY = "[\\x00-\\x08\\x0e-\\x1f\\x{FFFD}]"

# A field holding the value of the measurement itself (Telegraf's prometheus input with
# metric_version=1: `gauge`/`counter`/`value`; Flink's InfluxDB reporter: `value`).
_VALUE_FIELDS = ("value", "gauge", "counter")


def _bad_ids(lab: Column) -> Column:
    """True where the job id, TaskManager id or host label is not an id (see the patterns)."""
    job, tm, host = lab["job_id"], lab["tm_id"], lab["host"]

    def bad(label: Column, pattern: str) -> Column:
        # An empty label is no id at all (Flink's reporter sends `host=""` in local mode).
        return label.isNotNull() & (label != "") & ~label.rlike(pattern)

    return bad(job, JOB_ID_PATTERN) | bad(tm, ENTITY_ID_PATTERN) | bad(host, ENTITY_ID_PATTERN)


def _contains_any(text: Column, literals: tuple[str, ...]) -> Column:
    out = text.contains(literals[0])
    for lit in literals[1:]:
        out = out | text.contains(lit)
    return out


def _labels_from_map(m: Column) -> Column:
    return F.struct(*[m[k].alias(k) for k in LABELS])


def _labels_from_pairs(pairs: Column, fallback: Column | None = None) -> Column:
    """Labels from an array of ``{k, v}`` (the first of a repeated key wins)."""

    def one(k: str) -> Column:
        hit = F.filter(pairs, lambda e: e["k"] == k)[0]["v"]
        return (F.coalesce(hit, fallback[k]) if fallback is not None else hit).alias(k)

    return F.struct(*[one(k) for k in LABELS])


def _point(n: Column, v: Column, ts: Column, lab: Column, err: Column | None = None) -> Column:
    return F.struct(
        n.alias("n"),
        v.alias("v"),
        ts.alias("ts"),
        lab.alias("lab"),
        (err if err is not None else F.lit(None).cast(StringType())).alias("err"),
    )


def _field_points(
    measurement: Column, keys: Column, values: Column, ts: Column, lab: Column
) -> Column:
    """The samples of one Telegraf metric or line-protocol line (``fields`` as two arrays).

    A field named ``value``/``gauge``/``counter`` is the value of the measurement; a meter
    (``count`` and ``rate``, the InfluxDB reporter) is its rate, a lone ``count`` (a
    counter) its count. Otherwise each field is a sample: of the metric named by the
    field under Telegraf's ``metric_version = 2`` (measurement ``prometheus``), else of
    ``<measurement>_<field>`` (a summary's ``count``/``sum``/quantiles under version 1).
    """
    v2 = measurement == "prometheus"
    has = lambda k: F.array_contains(keys, k)  # noqa: E731
    single = F.coalesce(
        *[F.when(has(k), F.lit(k)) for k in _VALUE_FIELDS],
        F.when(~v2 & (F.size(keys) == 2) & has("rate") & has("count"), F.lit("rate")),
        F.when(~v2 & (F.size(keys) == 1) & has("count"), F.lit("count")),
    )
    one = F.array(_point(measurement, values[F.array_position(keys, single) - 1], ts, lab))
    each = F.transform(
        F.arrays_zip(keys.alias("k"), values.alias("v")),
        lambda e: _point(
            F.when(v2, e["k"]).otherwise(F.concat(measurement, F.lit("_"), e["k"])),
            e["v"],
            ts,
            lab,
        ),
    )
    return F.when(single.isNotNull(), one).otherwise(each)


def _unescape(c: Column) -> Column:
    return F.regexp_replace(c, r"\\(.)", "$1")


def _influx_points(raw: Column) -> Column:
    """Every line of a line-protocol record, every field of it, as samples."""
    lines = F.filter(
        F.split(raw, r"\r?\n"), lambda s: (F.trim(s) != "") & ~F.ltrim(s).startswith("#")
    )

    def line_points(s: Column) -> Column:
        ok = s.rlike(_LP_LINE)
        tags = F.regexp_extract(s, _LP_LINE, 2)
        fields = F.regexp_extract(s, _LP_LINE, 3)
        tag_pairs = F.arrays_zip(
            F.transform(F.regexp_extract_all(tags, F.lit(_LP_TAG), 1), _unescape).alias("k"),
            F.transform(F.regexp_extract_all(tags, F.lit(_LP_TAG), 2), _unescape).alias("v"),
        )
        raw_values = F.regexp_extract_all(fields, F.lit(_LP_FIELD), 2)
        values = F.transform(
            raw_values,
            lambda v: (
                F.when(v.rlike("^(?:t|T|true|True|TRUE)$"), F.lit("1"))
                .when(v.rlike("^(?:f|F|false|False|FALSE)$"), F.lit("0"))
                .otherwise(F.regexp_replace(v, r"^(-?\d+)[iu]$", "$1"))
            ),
        )
        keys = F.transform(F.regexp_extract_all(fields, F.lit(_LP_FIELD), 1), _unescape)
        ts = F.nullif(F.regexp_extract(s, _LP_LINE, 4), F.lit(""))
        measurement = _unescape(F.regexp_extract(s, _LP_LINE, 1))
        lab = _labels_from_pairs(tag_pairs)
        bad = F.array(
            _point(
                F.lit(None).cast(StringType()),
                s,
                F.lit(None).cast(StringType()),
                F.lit(None).cast(_LABEL_STRUCT),
                F.lit("bad_line_protocol"),
            )
        )
        return F.when(ok, _field_points(measurement, keys, values, ts, lab)).otherwise(bad)

    return F.flatten(F.transform(lines, line_points))


def _otlp_points(o: Column) -> Column:
    """Every gauge and sum data point of an OTLP JSON record (histograms, summaries skipped)."""

    def kv(attrs: Column) -> Column:
        return F.transform(
            attrs,
            lambda a: F.struct(
                a["key"].alias("k"),
                F.coalesce(a["value"]["stringValue"], a["value"]["intValue"]).alias("v"),
            ),
        )

    def resource(rm: Column) -> Column:
        res_lab = _labels_from_pairs(kv(rm["resource"]["attributes"]))

        def metric(m: Column) -> Column:
            dps = F.concat(
                F.coalesce(m["gauge"]["dataPoints"], F.array()),
                F.coalesce(m["sum"]["dataPoints"], F.array()),
            )
            # Flag 1, no recorded value: the receiver's staleness marker for a series that
            # went away (a cancelled job's), no sample.
            dps = F.filter(
                dps, lambda dp: F.coalesce(dp["flags"].cast(IntegerType()), F.lit(0)) % 2 == 0
            )
            return F.transform(
                dps,
                lambda dp: _point(
                    m["name"],
                    F.coalesce(dp["asDouble"], dp["asInt"]),
                    dp["timeUnixNano"],
                    _labels_from_pairs(kv(dp["attributes"]), res_lab),
                ),
            )

        return F.flatten(
            F.transform(
                rm["scopeMetrics"], lambda sm: F.flatten(F.transform(sm["metrics"], metric))
            )
        )

    return F.flatten(F.transform(o["resourceMetrics"], resource))


def _otlp_metrics(o: Column) -> Column:
    """Every metric of an OTLP JSON record, across resources and scopes."""
    return F.flatten(
        F.transform(
            o["resourceMetrics"],
            lambda rm: F.flatten(F.transform(rm["scopeMetrics"], lambda sm: sm["metrics"])),
        )
    )


def _otlp_has_values(o: Column) -> Column:
    """Whether an OTLP record holds a gauge or a sum (cheaper than counting its points)."""
    return F.exists(_otlp_metrics(o), lambda m: m["gauge"].isNotNull() | m["sum"].isNotNull())


def _otlp_skipped_types(o: Column) -> Column:
    """Which metric types an OTLP record held instead of gauges and sums (for the detail)."""
    types = F.transform(
        _otlp_metrics(o),
        lambda m: F.coalesce(
            F.when(m["histogram"].isNotNull(), F.lit("histogram")),
            F.when(m["summary"].isNotNull(), F.lit("summary")),
            F.when(m["exponentialHistogram"].isNotNull(), F.lit("exponentialHistogram")),
            F.lit("no data points"),
        ),
    )
    return F.concat_ws(",", F.array_distinct(types))


def parse_metrics(
    records: DataFrame,
    limits: ParseLimits | None = None,
    *,
    names: Sequence[MetricNameRule] = (),
    shapes: bool = False,
) -> DataFrame:
    """Parse metric records into ``metric`` events (or dead letters).

    Args:
        records: Raw records (``value``, ``topic``, ``partition``, ``offset``, ``kafka_ts``).
        limits: Dead-letter bounds; ``max_points_per_record`` caps a batch record.
        names: ``parsing.metric_names``: naming rules tried before the built-in ones.
        shapes: Add two last columns, ``naming`` (the scheme whose rule named the sample:
            ``prometheus``, ``influxdb``, ``datadog``, ``jmx``, ``jmx_exporter``,
            ``graphite``, ``config[i]``, or ``none``) and ``shape`` (one of
            :data:`SHAPES`), for ``flinkwatch doctor``.

    A record holding several samples (Telegraf fields, line-protocol lines, OTLP points)
    becomes several rows, numbered by ``seq``.
    """
    lim = limits or ParseLimits()
    df = _recognised(records)
    df = _sampled(df, lim.max_points_per_record)
    df = _valued(df)
    df = _named(df, name_rules(names))
    return _metric_events(df, lim, shapes=shapes)


def _recognised(records: DataFrame) -> DataFrame:
    """Records with their shape (``_shape``, ``_text``) and the JSON shapes' samples (``_jpts``).

    Each record is parsed as its shape only: the tests on its first characters keep the
    other shapes' expressions from running on it.
    """
    read, other, shaped = made_once(("metric_parsing._recognised",), _recognised_columns)
    df = records.select("topic", "partition", "offset", "kafka_ts", *read)
    return df.select("*", other).select("*", *shaped)


def _recognised_columns() -> tuple[list[Column], Column, list[Column]]:
    """:func:`_recognised`'s three projections: the reads, the other shapes' read, the shape."""
    raw = F.col("value")
    is_otlp = raw.startswith('{"resourceMetrics"')
    is_json = ~is_otlp & (raw.startswith("{") | raw.rlike(r"^\s+\{"))
    # Not JSON: a log line, protobuf, Prometheus text, else InfluxDB line protocol. A JSON
    # record pays two prefix tests here.
    text_kind = (
        F.when(raw.startswith("{") & ~raw.startswith('{"resourceLogs"'), F.lit(None))
        .when(raw.isNull() | raw.rlike(r"^\s*$"), F.lit("empty"))
        .when(raw.startswith('{"resourceLogs"'), F.lit("log"))
        .when(is_json, F.lit(None))
        .when(raw.rlike(_LOG_LINE), F.lit("log"))
        .when(raw.startswith("\n") & raw.rlike(_BINARY), F.lit("protobuf"))
        .when(raw.rlike(_PROM_TEXT), F.lit("prometheus_text"))
        .otherwise(F.lit("influx"))
    )
    read = [
        raw.alias("raw"),
        # Each is null unless the record is of its kind (from_json never returns null).
        F.when(is_json, F.from_json(raw, _METRIC_JSON_SCHEMA, JSON_OPTS)).alias("_j"),
        F.when(is_otlp, F.from_json(raw, _OTLP_SCHEMA, JSON_OPTS)).alias("_o"),
        text_kind.alias("_text"),
    ]
    jc, xc, oc, text = F.col("_j"), F.col("_x"), F.col("_o"), F.col("_text")
    # The other shapes are read only where the canonical read leaves one of them possible
    # (Vector's and a log's have no `value`, and no `fields` or no `name`): a Telegraf or
    # canonical record, most of the topic, is not scanned for their keys (measured: the
    # scans were ~12 % of the metric parse's CPU).
    other = F.when(
        jc.isNotNull()
        & jc["value"].isNull()
        & (jc["fields"].isNull() | jc["name"].isNull())
        & _contains_any(F.col("raw"), _OTHER_JSON_KEYS),
        F.from_json(F.col("raw"), _OTHER_JSON_SCHEMA, JSON_OPTS),
    ).alias("_x")
    json_broken = jc["_corrupt"].isNotNull()
    vector = xc["kind"].isNotNull() & jc["fields"].isNull() & jc["value"].isNull()
    telegraf = jc["fields"].isNotNull() & jc["value"].isNull()
    otlp_ok = oc["_corrupt"].isNull()
    log_json = (
        jc["name"].isNull()
        & jc["value"].isNull()
        & (xc["log"].isNotNull() | xc["message"].isNotNull())
    )
    # The shape and the JSON shapes' samples are decided by the same tests.
    shape = (
        F.when(text == "influx", F.lit("influx_line"))
        .when(text.isNotNull(), F.lit("unknown"))
        .when(oc.isNotNull(), F.when(otlp_ok, F.lit("otlp_json")))
        .when(jc.isNull() | json_broken, F.lit(None))
        .when(log_json, F.lit("log_json"))
        .when(vector, F.lit("vector_json"))
        .when(telegraf, F.lit("telegraf_json"))
        .otherwise(F.lit("canonical"))
    )
    json_points = _json_points(
        jc, xc, skip=jc.isNull() | json_broken | log_json, vector=vector, telegraf=telegraf
    )
    vector_other = F.coalesce(
        *[F.when(xc[k].isNotNull(), F.lit(k)) for k in _VECTOR_OTHER],
        F.when(xc["kind"] == "incremental", F.lit("incremental")),
    )
    # What the refusals of a whole record say is taken here, so that the parsed JSON is not
    # carried past the explode.
    return (
        read,
        other,
        [
            shape.alias("_shape"),
            json_points.alias("_jpts"),
            F.when(vector, vector_other).alias("_vec_other"),
            F.coalesce(jc["_corrupt"], oc["_corrupt"]).alias("_corrupt"),
        ],
    )


def _json_points(
    jc: Column, xc: Column, *, skip: Column, vector: Column, telegraf: Column
) -> Column:
    """The samples of a record in a JSON shape (canonical, Vector's, Telegraf's), null to ``skip``.

    ``jc`` and ``xc`` are the record read with the canonical and the other shapes' schemas.
    """
    json_lab = _labels_from_map(F.coalesce(jc["labels"], jc["tags"]))
    vector_name = F.when(
        F.coalesce(xc["namespace"], F.lit("")) != "",
        F.concat(xc["namespace"], F.lit("_"), jc["name"]),
    ).otherwise(jc["name"])
    return (
        F.when(skip, F.lit(None))
        .when(
            vector,
            F.array(
                _point(
                    vector_name,
                    F.coalesce(xc["gauge"]["value"], xc["counter"]["value"]),
                    # Vector writes nanoseconds; Spark's timestamps hold microseconds.
                    F.regexp_replace(jc["timestamp"], r"(\.\d{6})\d+", "$1"),
                    json_lab,
                )
            ),
        )
        .when(
            telegraf,
            _field_points(
                jc["name"],
                F.map_keys(jc["fields"]),
                F.map_values(jc["fields"]),
                jc["timestamp"],
                json_lab,
            ),
        )
        .otherwise(F.array(_point(jc["name"], jc["value"], jc["timestamp"], json_lab)))
    )


def _sampled(df: DataFrame, cap: int) -> DataFrame:
    """One row per sample (``_seq``, ``_p``), at most ``cap`` and one standing for the rest."""
    samples, kept = made_once(("metric_parsing._sampled", cap), lambda: _sample_columns(cap))
    return df.select("*", samples).where(kept)


def _sample_columns(cap: int) -> tuple[Column, Column]:
    """:func:`_sampled`'s explode and the condition on its rows."""
    oc, rc, text, sh = F.col("_o"), F.col("raw"), F.col("_text"), F.col("_shape")
    # Line protocol's and OTLP's samples are made in the explode itself, their branch
    # taken only for their records (in a projection they cost every record more; what
    # their lambdas still cost is mostly planning, once per query plan). An OTLP record
    # without a gauge or sum becomes one sample refused with the types it held.
    otlp = _otlp_points(oc)
    refused = F.array(
        _point(
            F.lit(None).cast(StringType()),
            _otlp_skipped_types(oc),
            F.lit(None).cast(StringType()),
            F.lit(None).cast(_LABEL_STRUCT),
            F.lit("unsupported_metric_type"),
        )
    )
    samples = (
        F.when(text == "influx", _influx_points(rc))
        .when(sh == "otlp_json", F.when(_otlp_has_values(oc), otlp).otherwise(refused))
        .otherwise(F.col("_jpts"))
    )
    # The sample at the cap stands for all past it: one dead letter, the rest dropped.
    return (
        F.posexplode_outer(samples).alias("_seq", "_p"),
        F.col("_seq").isNull() | (F.col("_seq") <= cap),
    )


def _valued(df: DataFrame) -> DataFrame:
    """Each sample's value as a number (``_num``) and its time in epoch ms (``_ems``).

    Columns of their own: the refusals and the event both read them, and an expression
    read twice is evaluated twice.
    """
    return df.select("*", *made_once(("metric_parsing._valued",), _value_columns))


def _value_columns() -> list[Column]:
    """:func:`_valued`'s two columns."""
    v = F.col("_p.v")
    # Spark's JSON reader hands a bare NaN/Infinity token to a string field as `"NaN"`.
    unquoted = F.when(v.startswith('"'), F.regexp_replace(v, r'^"(.*)"$', "$1")).otherwise(v)
    # Line protocol may leave the time out: then it is the time the record was written.
    event_ms = F.coalesce(
        epoch_ms_from_text(F.col("_p.ts")),
        F.when(F.col("_shape") == "influx_line", F.unix_millis(F.col("kafka_ts"))),
    )
    return [unquoted.cast(DoubleType()).alias("_num"), event_ms.alias("_ems")]


def _named(df: DataFrame, rules: tuple[NameRule, ...]) -> DataFrame:
    """Each sample's canonical name, labels and naming scheme (``_name``, ``_lab``, ``_naming``)."""
    key = ("metric_parsing._named", *(r.key for r in rules))
    index, named = made_once(key, lambda: _name_columns(rules))
    # The rule's index is a column of its own: every name and label expression reads it.
    return df.select("*", index).select("*", *named)


def _name_columns(rules: tuple[NameRule, ...]) -> tuple[Column, list[Column]]:
    """:func:`_named`'s rule index, then its name, labels and scheme."""
    index = rule_index(F.col("_p.n"), rules).alias("_rule")
    name, lab, scheme = named_by(F.col("_p.n"), F.col("_p.lab"), F.col("_rule"), rules)
    return index, [name.alias("_name"), lab.alias("_lab"), scheme.alias("_naming")]


def _metric_events(df: DataFrame, lim: ParseLimits, *, shapes: bool) -> DataFrame:
    """The samples as ``metric`` events or dead letters, in EVENT_COLUMNS order."""
    error, columns = made_once(("metric_parsing._metric_events", lim), lambda: _outcome(lim))
    out = df.select("*", error).select(*columns)
    if shapes:
        return out.select(
            *[c for c in out.columns if c not in ("naming", "shape")],
            F.when(F.col("kind").isNotNull(), F.col("naming")).alias("naming"),
            F.when(F.col("shape") == "log_json", F.lit("unknown"))
            .otherwise(F.col("shape"))
            .alias("shape"),
        )
    return out.drop("naming", "shape")


def _outcome(lim: ParseLimits) -> tuple[Column, list[Column | str]]:
    """:func:`_metric_events`' verdict (``_err``), then its columns (and ``naming``, ``shape``)."""
    rc, text, sh = F.col("raw"), F.col("_text"), F.col("_shape")
    cap = lim.max_points_per_record

    num, event_ms = F.col("_num"), F.col("_ems")
    error = (
        F.when(text == "empty", F.lit("empty"))
        .when(longer_than(rc, lim.max_record_bytes), F.lit("too_large"))
        .when((text == "log") | (sh == "log_json"), F.lit("log_on_metric_topic"))
        .when(text == "protobuf", F.lit("otlp_protobuf"))
        .when(text == "prometheus_text", F.lit("prometheus_text"))
        .when(sh.isNull(), F.lit("invalid_json"))
        .when(F.col("_vec_other").isNotNull(), F.lit("unsupported_metric_type"))
        .when(F.col("_seq") == cap, F.lit("too_many_points"))
        .when(F.col("_p.err").isNotNull(), F.col("_p.err"))
        .when(
            F.col("_p").isNull() | F.col("_p.n").isNull() | F.col("_p.v").isNull(),
            F.lit("missing_field"),
        )
        .when(F.col("_p.ts").isNull() & (sh != "influx_line"), F.lit("missing_field"))
        .when(num.isNull(), F.lit("bad_type"))
        .when(F.isnan(num) | (F.abs(num) == float("inf")), F.lit("non_finite_value"))
        .when(_bad_ids(F.col("_lab")), F.lit("invalid_id"))
        .otherwise(time_error(event_ms, F.col("kafka_ts"), lim))
    )
    detail = (
        F.when(F.col("_vec_other").isNotNull(), F.col("_vec_other"))
        .when(F.col("_seq") == cap, F.lit(f"samples past the first {cap} of the record"))
        .otherwise(F.coalesce(F.col("_corrupt"), F.col("_p.v")))
    )
    lab_c = F.col("_lab")
    ok = F.col("_err").isNull()
    return error.alias("_err"), [
        "topic",
        "partition",
        "offset",
        F.coalesce(F.col("_seq"), F.lit(0)).alias("seq"),
        "kafka_ts",
        F.when(ok, F.lit("metric")).alias("kind"),
        F.when(ok, F.timestamp_millis(event_ms)).alias("event_time"),
        lab_c["job_id"].alias("job_id"),
        capped_name(lab_c["job_name"]).alias("job_name"),
        capped_name(lab_c["tm_id"]).alias("tm_id"),
        capped_name(lab_c["host"]).alias("host"),
        F.coalesce(
            F.when(
                lab_c["task_name"].isNotNull(),
                F.concat_ws("/", lab_c["task_name"], lab_c["subtask_index"]),
            ),
            lab_c["operator_name"],
        ).alias("task"),
        *[null_column(c) for c in _NOT_IN_METRICS],
        F.when(ok, F.col("_name")).alias("metric"),
        F.when(ok, num).alias("value"),
        null_column("message"),
        F.lit(None).cast(StringType()).alias("level"),
        F.lit(None).cast(StringType()).alias("logger"),
        F.col("_err").alias("error"),
        F.when(~ok, prefix(detail, 200)).alias("detail"),
        F.when(~ok, prefix(rc, 65536)).alias("raw"),
        F.col("_naming").alias("naming"),
        F.coalesce(sh, F.lit("unknown")).alias("shape"),
    ]
