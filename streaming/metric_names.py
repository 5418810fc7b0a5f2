"""How a metric sample's name becomes Flink's canonical one: the naming rules.

The user's rules (``parsing.metric_names``) come first, then the built-in schemes
(:data:`BUILTIN_NAMES`: InfluxDB, Datadog, JMX, jmx_exporter, Graphite): a rule's regex
names the sample and takes its labels (:data:`LABELS`) from the name. Used by
``streaming.metric_parsing``'s naming step.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

from pyspark.sql import Column
from pyspark.sql import functions as F

from conf.pipeline import MetricNameRule

#: The labels an event is built from (Flink's scope variables, as the Prometheus reporter
#: names them); every shape's labels are reduced to these, so no other label can collide.
LABELS = ("host", "tm_id", "job_id", "job_name", "task_name", "subtask_index", "operator_name")


@dataclass(frozen=True)
class NameRule:
    """A naming rule as the parser applies it (built in, or from ``parsing.metric_names``).

    Attributes:
        scheme: What the ``naming`` column says when this rule matched.
        match: Java regular expression on the whole incoming name.
        name: The canonical name, ``$n`` for groups; characters outside ``[a-zA-Z0-9:_]``
            become ``_`` (the Prometheus reporter's own filter).
        labels: Label → template, taken from the name (they win over the record's).
        guard: A literal the name must start with, tested before the regex (cheap).
    """

    scheme: str
    match: str
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    guard: str | None = None

    @property
    def key(self) -> tuple[Hashable, ...]:
        """Every field, hashable: what the parse's expressions for this rule are kept by."""
        return tuple(
            (k, tuple(v.items()) if isinstance(v, dict) else v) for k, v in vars(self).items()
        )


# Flink's default scope formats (`metrics.scope.*`), as StatsD/Graphite-style reporters
# and JMX render them: `<host>.taskmanager.<tm_id>`, `<host>.jobmanager.<job_name>`,
# `…<job_name>.<task_name>.<subtask_index>`. These assume the components hold no dot;
# a fleet whose host or job names do writes its own rule (parsing.metric_names).
_JM_METRICS = (
    r"Status\..+|numRegisteredTaskManagers|numRunningJobs|taskSlotsAvailable"
    r"|taskSlotsTotal|numPendingTaskManagers"
)
_SOURCE_READER = r"(?:KafkaSourceReader|KafkaConsumer|source)\..+"

#: The built-in naming schemes, tried in order after the user's rules. A name starting
#: with ``flink_`` is already canonical (the Prometheus reporter) and skips them all.
BUILTIN_NAMES: tuple[NameRule, ...] = (
    # InfluxDB reporter: measurement `<scope>_<metric>`, scope variables as tags.
    NameRule("influxdb", r"((?:taskmanager|jobmanager)_.+)", "flink_$1", guard=None),
    # Datadog reporter: `flink.<scope>.<metric>`, tags `key:value`.
    NameRule("datadog", r"flink\.(.+)", "flink_$1", guard="flink."),
    # JMX reporter's ObjectName domain (Jolokia, or a shipper naming a metric by its MBean),
    # key properties as tags.
    NameRule("jmx", r"org\.apache\.flink\.(.+)", "flink_$1", guard="org.apache.flink."),
    # The Prometheus JMX exporter without rules: `<domain>_<first key property's value>_
    # <attribute>`, the other key properties as labels. Flink's JMXReporter builds the
    # ObjectName from a Hashtable, whose order puts `host` first for TaskManager and
    # JobManager beans, `job_name` for a job on the JobManager, `job_id` for tasks and
    # operators (checked on Java 17). A meter's `Count` is no rate: only its `Rate` maps.
    NameRule(
        "jmx_exporter",
        r"org_apache_flink_taskmanager_(Status(?:_[A-Z0-9][A-Za-z0-9]*)+)_(.+)_(?:Value|Count)",
        "flink_taskmanager_$1",
        {"host": "$2"},
        guard="org_apache_flink_",
    ),
    NameRule(
        "jmx_exporter",
        r"org_apache_flink_jobmanager_(Status(?:_[A-Z0-9][A-Za-z0-9]*)+|numRegisteredTaskManagers"
        r"|numRunningJobs|taskSlotsAvailable|taskSlotsTotal|numPendingTaskManagers)_(.+)_Value",
        "flink_jobmanager_$1",
        {"host": "$2"},
        guard="org_apache_flink_",
    ),
    NameRule(
        "jmx_exporter",
        r"org_apache_flink_jobmanager_job_([A-Za-z0-9]+)_(.+)_(?:Value|Count)",
        "flink_jobmanager_job_$1",
        {"job_name": "$2"},
        guard="org_apache_flink_",
    ),
    NameRule(
        "jmx_exporter",
        r"org_apache_flink_(taskmanager_job_.+)_([0-9a-fA-F]{32})_(?:Value|Rate)",
        "flink_$1",
        {"job_id": "$2"},
        guard="org_apache_flink_",
    ),
    NameRule(
        "jmx_exporter",
        r"org_apache_flink_(taskmanager_job_.+)(?<!PerSecond)_([0-9a-fA-F]{32})_Count",
        "flink_$1",
        {"job_id": "$2"},
        guard="org_apache_flink_",
    ),
    # StatsD / Graphite with Flink's default scope formats.
    NameRule(
        "graphite",
        r"([^.]+)\.taskmanager\.([^.]+)\.(Status\..+)",
        "flink_taskmanager_$3",
        {"host": "$1", "tm_id": "$2"},
    ),
    NameRule(
        "graphite",
        rf"([^.]+)\.taskmanager\.([^.]+)\.([^.]+)\.([^.]+)\.(\d+)\.({_SOURCE_READER})",
        "flink_taskmanager_job_task_operator_$6",
        {"host": "$1", "tm_id": "$2", "job_name": "$3", "operator_name": "$4"},
    ),
    NameRule(
        "graphite",
        r"([^.]+)\.taskmanager\.([^.]+)\.([^.]+)\.([^.]+)\.(\d+)\.(.+)",
        "flink_taskmanager_job_task_$6",
        {
            "host": "$1",
            "tm_id": "$2",
            "job_name": "$3",
            "task_name": "$4",
            "subtask_index": "$5",
        },
    ),
    NameRule(
        "graphite",
        r"([^.]+)\.taskmanager\.([^.]+)\.([^.]+)\.([^.]+)",
        "flink_taskmanager_job_$4",
        {"host": "$1", "tm_id": "$2", "job_name": "$3"},
    ),
    NameRule(
        "graphite", rf"([^.]+)\.jobmanager\.({_JM_METRICS})", "flink_jobmanager_$2", {"host": "$1"}
    ),
    # The per-job detectors key on the job id, which no default scope format names: with
    # `metrics.scope.jm-job: <host>.jobmanager.<job_id>` (or `….<job_name>.<job_id>`
    # through a rule) they see these samples.
    NameRule(
        "graphite",
        r"([^.]+)\.jobmanager\.([0-9a-fA-F]{32})\.([^.]+)",
        "flink_jobmanager_job_$3",
        {"host": "$1", "job_id": "$2"},
    ),
    NameRule(
        "graphite",
        r"([^.]+)\.jobmanager\.([^.]+)\.([^.]+)",
        "flink_jobmanager_job_$3",
        {"host": "$1", "job_name": "$2"},
    ),
)


def name_rules(configured: Sequence[MetricNameRule] = ()) -> tuple[NameRule, ...]:
    """The user's rules (``parsing.metric_names``, in order), then the built-in ones."""
    own = tuple(
        NameRule(f"config[{i}]", r.match, r.name, dict(r.labels)) for i, r in enumerate(configured)
    )
    return own + BUILTIN_NAMES


def rule_index(n: Column, rules: tuple[NameRule, ...]) -> Column:
    """Which rule names a sample called ``n``: its position, -1 (canonical) or null (none).

    User rules come first; a name that is already canonical (``flink_…``) skips the
    built-ins, so the Prometheus reporter's samples pay one prefix test.
    """
    n_user = sum(1 for r in rules if r.scheme.startswith("config["))

    def test(i: int, r: NameRule) -> Column:
        hit = n.rlike(f"^(?:{r.match})$")
        return F.when(n.startswith(r.guard) & hit if r.guard else hit, F.lit(i))

    return F.coalesce(
        *[test(i, r) for i, r in enumerate(rules[:n_user])],
        F.when(n.startswith("flink_"), F.lit(-1)),
        *[test(n_user + i, r) for i, r in enumerate(rules[n_user:])],
    )


def named_by(
    n: Column, lab: Column, idx: Column, rules: tuple[NameRule, ...]
) -> tuple[Column, Column, Column]:
    """(canonical name, labels, naming scheme) of a sample by the rule ``idx`` chose."""

    def replaced(r: NameRule, template: str) -> Column:
        return F.regexp_replace(n, f"^(?:{r.match})$", template)

    # Most samples are canonical or unknown: they skip every rule's comparison.
    kept = idx.isNull() | (idx == -1)

    name = F.when(kept, n).otherwise(
        F.coalesce(
            *[
                F.when(
                    idx == i,
                    F.regexp_replace(replaced(r, r.name), "[^a-zA-Z0-9:_]", "_"),
                )
                for i, r in enumerate(rules)
            ],
            n,
        )
    )
    labels = []
    for k in LABELS:
        from_name = [
            F.when(idx == i, replaced(r, r.labels[k])) for i, r in enumerate(rules) if k in r.labels
        ]
        own = F.when(kept, lab[k]).otherwise(F.coalesce(*from_name, lab[k]))
        labels.append((own if from_name else lab[k]).alias(k))
    scheme = (
        F.when(idx.isNull(), F.lit("none"))
        .when(idx == -1, F.lit("prometheus"))
        .otherwise(F.coalesce(*[F.when(idx == i, F.lit(r.scheme)) for i, r in enumerate(rules)]))
    )
    return name, F.struct(*labels), scheme
