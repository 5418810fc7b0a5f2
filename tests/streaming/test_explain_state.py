"""The running job's explanation: its detect query's state read while the query runs.

One live test runs the parse and detect queries over a real Flink run on the files bus,
with a processing-time trigger (they keep running), and asks through the metrics
endpoint with the credentials a scrape uses; the rest is the question's parsing and
the endpoint's answers, without Spark.
"""

from __future__ import annotations

import base64
import json
import shutil
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from pyspark.sql import SparkSession

from conf import AppConfig
from conf.running import RunningConfig
from sinks import AlertLedger
from sinks.inbound.metrics_server import BasicAuth, MetricsEndpoint
from streaming import explain_state
from streaming.app import Pipeline
from streaming.delivery import Outputs
from streaming.explain import Asked
from streaming.explain_state import LiveExplainer, StateUnreadable, parse_query, read_states
from streaming.sources import file_records
from tests.conftest import wait_until

REAL = Path(__file__).resolve().parents[1] / "data" / "real" / "expiry_2_3"
JOB = "3631d292e50708eb38e1304df762587a"
NAME = "insert-into_default_catalog.default_database.sink"
USER, PASSWORD = "prometheus", "s3cret"


@pytest.mark.parametrize(
    ("query", "asked"),
    [
        (f"job={JOB}", Asked(job=JOB)),
        ("job=orders%20enrichment", Asked(job="orders enrichment")),
        ("tm=localhost%3A40003_6cf67b", Asked(tm="localhost:40003_6cf67b")),
        ("cluster=1", Asked(cluster=True)),
        ("cluster", Asked(cluster=True)),
    ],
    ids=["job_id", "job_name_quoted", "tm", "cluster", "cluster_bare"],
)
def test_the_query_string_names_the_entity(query: str, asked: Asked) -> None:
    assert parse_query(query) == asked


@pytest.mark.parametrize(
    ("query", "error"),
    [
        ("", "ask about one entity"),
        ("job=a&tm=b", "ask about one entity"),
        ("cluster=0", "ask about one entity"),
        ("host=x", "unknown parameter 'host'"),
    ],
    ids=["nothing", "two", "cluster_off", "unknown_key"],
)
def test_a_question_that_names_no_single_entity_is_400(query: str, error: str) -> None:
    explainer = LiveExplainer(None, lambda: Path("/nonexistent"), AppConfig)  # type: ignore[arg-type]
    status, body = explainer(query)
    assert status == 400
    assert error in body["error"]


def test_one_explanation_is_read_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # A second question while the state is being read is told to come back: /metrics
    # keeps the endpoint's other render worker.
    reading, release = threading.Event(), threading.Event()

    def slow(_spark: Any, _checkpoint: str, _asked: Asked) -> dict[str, str]:
        reading.set()
        release.wait(10)
        return {}

    monkeypatch.setattr(explain_state, "read_states", slow)
    explainer = LiveExplainer(None, lambda: Path("/cp"), AppConfig)  # type: ignore[arg-type]
    first: list[tuple[int, Any]] = []
    worker = threading.Thread(target=lambda: first.append(explainer("cluster=1")))
    worker.start()
    assert reading.wait(10)
    status, body = explainer(f"job={JOB}")
    assert status == 503 and "another explanation" in body["error"]
    release.set()
    worker.join(10)
    assert first[0][0] == 200
    assert explainer(f"job={JOB}")[0] == 200  # free again


def test_a_state_that_cannot_be_read_is_503_saying_why(monkeypatch: pytest.MonkeyPatch) -> None:
    def unreadable(_spark: Any, checkpoint: str, _asked: Asked) -> dict[str, str]:
        msg = f"the detect query's state cannot be read from {checkpoint}: no committed batch"
        raise StateUnreadable(msg)

    monkeypatch.setattr(explain_state, "read_states", unreadable)
    explainer = LiveExplainer(None, lambda: Path("/cp"), AppConfig)  # type: ignore[arg-type]
    assert explainer("cluster=1") == (
        503,
        {"error": "the detect query's state cannot be read from /cp: no committed batch"},
    )


def ask(url: str, auth: tuple[str, str] | None) -> tuple[int, Any]:
    req = urllib.request.Request(url)
    if auth is not None:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        req.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        body = e.read()
        return e.code, json.loads(body) if body.startswith(b"{") else body


@pytest.mark.spark
def test_the_running_detect_query_is_explained_without_stopping_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    logs, metrics = tmp_path / "logs", tmp_path / "metrics"
    logs.mkdir()
    metrics.mkdir()
    shutil.copy(REAL / "expiry_2_3.log", logs)
    shutil.copy(REAL / "expiry_2_3.jsonl", metrics)
    cfg = AppConfig.model_validate({"spark": {"state_shards": 4}})
    ledger = AlertLedger(tmp_path / "ledger.sqlite")
    pipeline = Pipeline(
        spark=spark,
        config=RunningConfig(cfg),
        logs=lambda: file_records(spark, logs, kind="log"),
        metrics=lambda: file_records(spark, metrics, kind="metric"),
        outputs=Outputs(ledger=ledger),
        checkpoint_dir=tmp_path / "checkpoints",
        deadletter_dir=tmp_path / "dead",
        trigger={"processingTime": "1 second"},  # runs until stopped, as the live job
    )
    explainer = LiveExplainer(spark, lambda: pipeline.detect_checkpoint, lambda: cfg)
    # Before the detect query committed anything there is no state to read.
    with pytest.raises(StateUnreadable, match="cannot be read from"):
        read_states(spark, str(pipeline.detect_checkpoint), Asked(job=JOB))
    queries = pipeline.start()
    endpoint = MetricsEndpoint("127.0.0.1", 0, auth=BasicAuth(USER, PASSWORD))
    try:
        with endpoint.serve(CollectorRegistry(), explainer=explainer) as server:
            url = server.url.removesuffix("/metrics") + "/explain?job=" + NAME.replace(".", "%2E")
            assert ask(url, None)[0] == 401
            assert ask(url, (USER, "wrong"))[0] == 401
            answers: list[Any] = []

            def paged() -> bool:
                status, body = ask(url, (USER, PASSWORD))
                answers.append(body)
                if status != 200 or not body["entities"]:
                    return False
                lines = {s["detector"]: s for s in body["entities"][0]["detectors"]}
                return bool(lines["checkpoint_failures"]["firing"])

            wait_until(paged, timeout=300, what=f"the job's expiries in its state ({answers[-1:]})")
            (job,) = answers[-1]["entities"]
            assert (job["entity"], job["name"]) == (f"job:{JOB}", NAME)
            assert {s["detector"] for s in job["detectors"]} >= {
                "checkpoint_creep",
                "checkpoint_failures",
                "restart_storm",
            }
            # The queries ran on: nothing was stopped to read their state.
            assert all(q.isActive and q.exception() is None for q in queries)
            detect = next(q for q in queries if q.name == "flinkwatch-detect")
            before = detect.lastProgress["batchId"] if detect.lastProgress else -1
            status, tm = ask(
                server.url.removesuffix("/metrics") + "/explain?cluster=1", (USER, PASSWORD)
            )
            assert status == 200 and tm["entities"][0]["entity"] == "cluster"
            assert all(q.isActive for q in queries)
            assert (detect.lastProgress or {}).get("batchId", -1) >= before
    finally:
        for q in queries:
            q.stop()
        ledger.close()
