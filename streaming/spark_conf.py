"""Spark's own configuration and flinkwatch's: the user's wins.

A Spark user tunes a job with ``spark-submit --conf``, ``spark-defaults.conf`` and
``PYSPARK_SUBMIT_ARGS``, and expects those values to hold. flinkwatch passes its own
settings to Spark after those are read (as ``--conf`` to the gateway it starts, and again
through the session builder), so without care its defaults would silently replace them.
:func:`merge` gives flinkwatch's settings only where the user set nothing, except for the
few that detection needs to be correct (:data:`REQUIRED`), which are kept and named in a
warning. Pure: nothing here starts or asks a JVM.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

#: Settings flinkwatch keeps whatever Spark's configuration says, and why.
REQUIRED: dict[str, str] = {
    "spark.sql.streaming.stateStore.providerClass": (
        "the detectors' transformWithState needs the RocksDB state store"
    ),
    "spark.sql.ansi.enabled": "a malformed record must become a dead letter, not fail the query",
    "spark.sql.session.timeZone": (
        "log times are read in parsing.log_timezone; set that in flinkwatch's config instead"
    ),
}

#: Settings whose values are lists joined with commas: the user's and flinkwatch's are
#: both needed (the user's jars, and the Kafka connector's).
LISTS = frozenset({"spark.jars"})
#: The same for class paths, joined with colons (flinkwatch's local file system's jar).
PATHS = frozenset({"spark.driver.extraClassPath"})


@dataclass(frozen=True)
class Merged:
    """Settings for Spark, and what the user's configuration changed in flinkwatch's.

    Attributes:
        settings: What to give Spark.
        replaced: Per key the user set, ``(flinkwatch's value, the user's)``.
        kept: Per :data:`REQUIRED` key the user set otherwise, ``(the user's value, why
            flinkwatch's was kept)``.
    """

    settings: dict[str, str]
    replaced: dict[str, tuple[str, str]] = field(default_factory=dict)
    kept: dict[str, tuple[str, str]] = field(default_factory=dict)


def merge(ours: Mapping[str, str], users: Mapping[str, str]) -> Merged:
    """The settings to give Spark: flinkwatch's where the user's configuration has none.

    Args:
        ours: flinkwatch's settings (its defaults and its config's ``spark`` section).
        users: What the user set in Spark's own configuration (:func:`users_conf`).
    """
    settings = {**ours, **users}
    replaced: dict[str, tuple[str, str]] = {}
    kept: dict[str, tuple[str, str]] = {}
    for key, value in users.items():
        if key not in ours or ours[key] == value:
            continue
        if key in REQUIRED:
            settings[key] = ours[key]
            kept[key] = (value, REQUIRED[key])
        elif key in LISTS:
            settings[key] = ",".join(_union(value.split(","), ours[key].split(",")))
        elif key in PATHS:
            settings[key] = ":".join(_union(value.split(":"), ours[key].split(":")))
        else:
            replaced[key] = (ours[key], value)
    return Merged(settings, replaced, kept)


def users_conf(
    env: Mapping[str, str], submitted: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The ``spark.*`` settings the user gave Spark itself.

    Args:
        env: The environment (``SPARK_CONF_DIR``, ``SPARK_HOME``, ``PYSPARK_SUBMIT_ARGS``).
        submitted: Under ``spark-submit``, the JVM's ``spark.*`` system properties: there
            spark-submit has already merged ``--conf``, ``--master``, ``--jars`` and
            ``spark-defaults.conf`` into them, and they are the whole answer.

    Without ``spark-submit`` flinkwatch starts the JVM itself and its own ``--conf``
    would come before the user's files in Spark's order, so they are read here:
    ``spark-defaults.conf`` in ``SPARK_CONF_DIR`` (else ``SPARK_HOME/conf``), then the
    ``--conf`` pairs of ``PYSPARK_SUBMIT_ARGS``, which win over the file as they do in
    spark-submit.
    """
    if submitted is not None:
        return {k: v for k, v in submitted.items() if k.startswith("spark.")}
    out: dict[str, str] = {}
    conf_dir = env.get("SPARK_CONF_DIR") or (
        str(Path(env["SPARK_HOME"]) / "conf") if env.get("SPARK_HOME") else None
    )
    if conf_dir:
        out.update(defaults_file(Path(conf_dir) / "spark-defaults.conf"))
    out.update(submit_args_conf(env.get("PYSPARK_SUBMIT_ARGS", "")))
    return out


def defaults_file(path: Path) -> dict[str, str]:
    """The ``spark.*`` settings of a ``spark-defaults.conf`` (none if it cannot be read).

    Spark reads it as Java properties: ``key value``, ``key=value`` or ``key: value``
    per line, ``#`` and ``!`` comments (line continuations are not followed).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = _PROPERTY.match(line)
        if m and m["key"].startswith("spark."):
            out[m["key"]] = m["value"].strip()
    return out


_PROPERTY = re.compile(r"^\s*(?P<key>[^\s=:#!][^\s=:]*)\s*[=:\s]\s*(?P<value>.*)$")


def submit_args_conf(args: str) -> dict[str, str]:
    """The ``--conf key=value`` pairs of a spark-submit argument string."""
    try:
        words = shlex.split(args)
    except ValueError:
        return {}
    out: dict[str, str] = {}
    for i, word in enumerate(words):
        pair = words[i + 1] if word in ("--conf", "-c") and i + 1 < len(words) else None
        if word.startswith("--conf="):
            pair = word.removeprefix("--conf=")
        if pair and "=" in pair:
            key, value = pair.split("=", 1)
            if key.startswith("spark."):
                out[key] = value
    return out


def _union(first: Iterable[str], second: Iterable[str]) -> list[str]:
    """Both lists in order, each entry once, blanks dropped."""
    seen: dict[str, None] = {}
    for item in (*first, *second):
        if item.strip():
            seen.setdefault(item.strip(), None)
    return list(seen)
