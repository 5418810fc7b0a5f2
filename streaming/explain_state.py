"""The running job's answer to ``flinkwatch explain``: its detect query's state, read live.

Spark's state data source (``spark.read.format("statestore")``) reads a streaming query's
state from its checkpoint as of the last committed micro-batch, in a batch job of the
driver's own session, while the query runs: each partition's store is opened read-only
from the checkpoint's files (a copy, not the running query's store), so the query is
neither stopped nor slowed beyond the CPU the read takes. For ``transformWithState``
queries it reads one state variable (``stateVarName``): the detect query's is the shard's
packed value (:mod:`streaming.packed`), whose entities are then picked by
:class:`~streaming.explain.Asked` and explained on the driver.

It costs nothing until asked: no note per batch, no per-entity work in the query. One
read takes a few seconds (measured 2.4 s for a real run's state on an idle 2-core
machine: a Spark job over the state's partitions); one runs at a time
(:class:`LiveExplainer`), so ``/metrics`` keeps its other render worker.
"""

from __future__ import annotations

import logging
import threading
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from conf import AppConfig, FlinkwatchError
from streaming.checkpoints import CheckpointDir
from streaming.explain import Asked, explain
from streaming.packed import PackedStore, PackError

log = logging.getLogger(__name__)

#: The detect query's one state variable (:class:`streaming.processor.ShardProcessor`).
SHARD_STATE = "shard"


class StateUnreadable(FlinkwatchError):  # noqa: N818 - a condition, not a bug
    """The detect query's state cannot be read now (no batch committed yet, say)."""


def read_states(spark: SparkSession, checkpoint: str, asked: Asked) -> dict[str, str]:
    """The saved values of the entities ``asked`` matches, from the detect checkpoint.

    Raises:
        StateUnreadable: the checkpoint has no committed batch, or its state cannot be
            read; the message says which.
    """
    try:
        shards = (
            spark.read.format("statestore")
            .option("path", checkpoint)
            .option("stateVarName", SHARD_STATE)
            .load()
            .select("value.packed")
            .toLocalIterator()
        )
        found: dict[str, str] = {}
        for (blob,) in shards:
            if blob is None:
                continue
            store = PackedStore(bytes(blob))
            for entity in store.entities():
                try:
                    text = store.get(entity)
                except PackError:
                    continue  # the detect query reports it and drops the entity
                if asked.matches(entity, text):
                    found[entity] = text or ""
    except PySparkException as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        msg = f"the detect query's state cannot be read from {checkpoint}: {first}"
        raise StateUnreadable(msg) from exc
    return found


class LiveExplainer:
    """``/explain`` of the metrics endpoint: a query string in, a status and JSON out.

    Args:
        spark: The driver's session.
        checkpoint: The detect query's checkpoint now (it moves with the shard count).
        config: The config in force now (reloads swap it).
    """

    def __init__(
        self,
        spark: SparkSession,
        checkpoint: Callable[[], CheckpointDir],
        config: Callable[[], AppConfig],
    ) -> None:
        self._spark = spark
        self._checkpoint = checkpoint
        self._config = config
        self._busy = threading.Lock()

    def __call__(self, query: str) -> tuple[int, Any]:
        """The answer to ``/explain?<query>``: ``job=ID|NAME``, ``tm=ID`` or ``cluster=1``.

        400 for a question that names no entity (or several), 503 while another
        explanation is being read or while the state cannot be read.
        """
        try:
            asked = parse_query(query)
        except (ValueError, ValidationError) as exc:
            return 400, {"error": _first_line(exc)}
        if not self._busy.acquire(blocking=False):
            return 503, {"error": "another explanation is being read; ask again in a few seconds"}
        try:
            saved = read_states(self._spark, str(self._checkpoint()), asked)
        except StateUnreadable as exc:
            log.warning("explain: %s", exc)
            return 503, {"error": str(exc)}
        finally:
            self._busy.release()
        return 200, explain(asked, saved, self._config()).model_dump(mode="json")


def parse_query(query: str) -> Asked:
    """The question of a query string (``job=...``, ``tm=...``, ``cluster=1``).

    Raises:
        ValueError: an unknown key, or not exactly one entity asked.
    """
    params: Mapping[str, list[str]] = urllib.parse.parse_qs(query, keep_blank_values=True)
    unknown = sorted(set(params) - {"job", "tm", "cluster"})
    if unknown:
        msg = f"unknown parameter {unknown[0]!r}: ask with job=ID|NAME, tm=ID or cluster=1"
        raise ValueError(msg)
    one = {k: v[-1] for k, v in params.items()}
    return Asked(
        job=one.get("job"),
        tm=one.get("tm"),
        cluster="cluster" in one and one["cluster"] not in ("0", "false"),
    )


def _first_line(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(str(e["msg"]).removeprefix("Value error, ") for e in exc.errors())
    return str(exc)
