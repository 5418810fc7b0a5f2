"""One key per TaskManager across the spellings logs and reporters give its id."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from detectors.tm_ids import one_per_tm, same_tm, spelling_rank, tm_entity, tm_key

DATA = Path(__file__).resolve().parents[1] / "data"


def _prometheus(tm_id: str) -> str:
    # Flink's PrometheusReporter on a label value.
    return re.sub("[^a-zA-Z0-9:_]", "_", tm_id)


def _statsd(tm_id: str) -> str:
    # Flink's StatsDReporter.filterCharacters (JMXReporter does the same to a colon).
    return tm_id.replace(":", "-")


def _graphite(tm_id: str) -> str:
    # Flink's Dropwizard reporters (Graphite): a dot would split the name.
    return tm_id.replace(".", "-")


def _real_pairs() -> list[tuple[str, str]]:
    """(ResourceID as the TaskManager's log prints it, the id its metrics carry), per run."""
    pairs = []
    for run in sorted([*(DATA / "real").iterdir(), *(DATA / "shippers").iterdir()]):
        logged = {
            m
            for p in run.glob("*.log")
            for m in re.findall(r"ResourceID: ([\w.:-]+)", p.read_text())
        }
        labels = {
            m for p in run.glob("*.jsonl") for m in re.findall(r'"tm_id": "([^"]+)"', p.read_text())
        }
        pairs += [(log, label) for log in logged for label in labels if same_tm(log, label)]
        # Every ResourceID a run's logs print has its metrics under the same key.
        assert not labels or {tm_key(x) for x in logged} <= {tm_key(x) for x in labels}, run
    return pairs


def test_every_real_taskmanager_s_log_and_metric_spellings_share_one_key() -> None:
    pairs = _real_pairs()
    # The uuids of the standalone runs and the host:port ids of the mini-clusters both.
    assert len(pairs) >= 12
    assert ("localhost:40003-6cf67b", "localhost:40003_6cf67b") in pairs
    assert ("615c9d0b-07b3-4ec5-b801-27ab5a4c6d94", "615c9d0b_07b3_4ec5_b801_27ab5a4c6d94") in pairs
    for logged, label in pairs:
        assert logged != label
        assert tm_entity(logged) == tm_entity(label) == f"tm:{tm_key(label)}"


@pytest.mark.parametrize(
    "tm_id",
    [
        "localhost:40003-6cf67b",
        "615c9d0b-07b3-4ec5-b801-27ab5a4c6d94",
        "orders-enrichment-2-taskmanager-1-2",
        "flink-tm.prod.svc-0",
        "container_e05_1699999999999_0042_01_000003",
        "10.0.3.17:6122-a1b2c3",
    ],
)
def test_every_reporter_s_rewrite_of_an_id_keys_as_the_id(tm_id: str) -> None:
    spellings = {tm_id, _prometheus(tm_id), _statsd(tm_id), _graphite(tm_id)}
    assert {tm_entity(s) for s in spellings} == {tm_entity(tm_id)}
    assert re.fullmatch(r"tm:[A-Za-z0-9_]+", tm_entity(tm_id))


def test_different_taskmanagers_keep_different_keys() -> None:
    assert not same_tm("localhost:40003-6cf67b", "localhost:40004-6cf67b")
    assert not same_tm("tm-1", "tm-10")
    assert not same_tm("tm-1", None) and not same_tm(None, None)


def test_the_key_keeps_the_length_and_case_of_the_id() -> None:
    # One character for one: a key is never longer than the id the parser capped.
    assert tm_key("Pod-Ä😀.x") == "Pod____x"
    assert tm_key("") == ""


def test_a_logged_spelling_ranks_above_every_metric_label_of_the_same_id() -> None:
    logged = "localhost:40003-6cf67b"
    for label in (_prometheus(logged), _statsd(logged), _graphite(logged)):
        assert spelling_rank(logged, logged=True) > spelling_rank(label, logged=False)
    # Between labels, the one with more punctuation left (StatsD's over Prometheus's).
    assert spelling_rank(_statsd(logged), logged=False) > spelling_rank(
        _prometheus(logged), logged=False
    )


def test_an_incident_s_taskmanagers_are_listed_once_each_in_their_best_spelling() -> None:
    ids = ["a_b_c", "x_1", "a-b:c", "a_b:c", "x-1"]
    assert one_per_tm(ids) == ["a-b:c", "x-1"]
    assert one_per_tm([]) == []


def test_spellings_give_each_taskmanager_key_its_best_spelling() -> None:
    from detectors.tm_ids import spellings

    ids = ["localhost:40003_6cf67b", "localhost:40003-6cf67b", "localhost_40003_6cf67b", "x_1"]
    assert spellings(ids) == {
        "localhost_40003_6cf67b": "localhost:40003-6cf67b",
        "x_1": "x_1",
    }
    assert spellings([]) == {}
