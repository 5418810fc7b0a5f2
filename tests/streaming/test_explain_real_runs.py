"""``explain`` on real Flink runs: every detector has a line, in words that carry numbers.

Two real runs of the same hour replayed together (``crashloop_2_3``: a job restarting in
a loop on four TaskManagers one after the other; ``expiry_2_3``: a job whose checkpoints
expire): their jobs share Flink's default name, so asking by name finds both. The job's,
a TaskManager's and the cluster's lines together name all eleven detectors.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from conf import AppConfig
from detectors import REGISTRY
from streaming.cli.explain import end_states
from streaming.explain import Asked, Explanation, Standing, explain, render
from streaming.sources import stage_files

pytestmark = pytest.mark.spark

REAL = Path(__file__).resolve().parents[1] / "data" / "real"
RUNS = ("crashloop_2_3", "expiry_2_3")
NAME = "insert-into_default_catalog.default_database.sink"
TM = "615c9d0b_07b3_4ec5_b801_27ab5a4c6d94"  # one of crashloop_2_3's TaskManagers
QUESTIONS = (Asked(job=NAME), Asked(tm=TM), Asked(cluster=True))


@pytest.fixture(scope="module")
def explained(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> dict[Asked, Explanation]:
    work = tmp_path_factory.mktemp("explain-real")
    runs = [REAL / r for r in RUNS]
    logs = stage_files([p for r in runs for p in sorted(r.glob("*.log"))], work / "logs")
    metrics = stage_files([p for r in runs for p in sorted(r.glob("*.jsonl"))], work / "metrics")
    cfg = AppConfig()
    saved = end_states(spark, logs, metrics, cfg, work, QUESTIONS)
    return {q: explain(q, saved, cfg) for q in QUESTIONS}


def standings(expl: Explanation) -> list[Standing]:
    return [s for ent in expl.entities for s in ent.detectors]


def test_every_detector_has_a_line_for_the_entities_of_the_runs(
    explained: dict[Asked, Explanation],
) -> None:
    named = {s.detector for e in explained.values() for s in standings(e)}
    assert named == set(REGISTRY)
    for expl in explained.values():
        for s in standings(expl):
            assert s.words and "\n" not in s.words.strip()
            assert not re.search(r"\bNone\b|\bnan\b", s.words), s


def test_a_name_shared_by_the_two_jobs_finds_both(explained: dict[Asked, Explanation]) -> None:
    expl = explained[Asked(job=NAME)]
    assert len(expl.entities) == 2
    assert expl.note == f"2 jobs are named {NAME}"
    assert {e.name for e in expl.entities} == {NAME}
    # expiry_2_3's checkpoints expired: its incident is open at the end of the replay.
    assert "checkpoint_failures" in {s.detector for s in standings(expl) if s.firing}


def test_what_a_detector_holds_is_told_with_numbers(explained: dict[Asked, Explanation]) -> None:
    held = [s for e in explained.values() for s in standings(e) if s.holds]
    # Each job holds restart_storm, checkpoint_creep, ...; the TaskManager idle_heap_growth;
    # the cluster jm_k8s_watch_crash.
    assert {s.detector for s in held} >= {
        "checkpoint_creep",
        "checkpoint_failures",
        "restart_storm",
        "idle_heap_growth",
        "jm_k8s_watch_crash",
    }
    for s in held:
        assert re.search(r"\d", s.words), s


def test_a_detector_that_holds_nothing_says_why(explained: dict[Asked, Explanation]) -> None:
    # Neither run's TaskManager was lost or died of a fatal error: those two hold nothing.
    tm = {s.detector: s for s in standings(explained[Asked(tm=TM)])}
    for name in ("tm_lost", "jvm_fatal"):
        assert not tm[name].holds and not tm[name].firing
        assert len(tm[name].words) > 20, tm[name]
    assert tm["idle_heap_growth"].holds


def test_the_text_names_each_entity_once_with_its_lines(
    explained: dict[Asked, Explanation],
) -> None:
    text = render(explained[Asked(job=NAME)]).splitlines()
    assert text[0] == f"2 jobs are named {NAME}."
    heads = [line for line in text if line.startswith("job:")]
    assert len(heads) == 2 and all(f"({NAME})" in h for h in heads)
    jobs = sorted(n for n, cls in REGISTRY.items() if cls.scope == "job")
    assert len(text) == 1 + 2 * (1 + len(jobs))


OOM = Path(__file__).resolve().parents[1] / "data" / "shippers" / "tm_oom_2_3"
OOM_TM = "localhost:38251-0bfbad"  # its logs' ResourceID; its metrics say localhost:38251_0bfbad


def test_a_taskmanager_s_heap_metrics_and_its_loss_and_oom_lines_stand_on_one_entity(
    spark: SparkSession, tmp_path: Path
) -> None:
    # The real OOM run: before TaskManager ids were keyed as one, the heap metrics made an
    # entity of their own and asking by the logs' id showed no heap metrics at all.
    logs = stage_files(
        [OOM / "tm_oom_2_3.jobmanager.log", OOM / "tm_oom_2_3.taskmanager.log"], tmp_path / "l"
    )
    metrics = stage_files([OOM / "tm_oom_2_3.jsonl"], tmp_path / "m")
    cfg = AppConfig()
    asked = (Asked(tm=OOM_TM), Asked(tm="localhost:38251_0bfbad"))
    saved = end_states(spark, logs, metrics, cfg, tmp_path / "work", asked)
    by_logs, by_metrics = (explain(q, saved, cfg) for q in asked)
    assert by_logs == by_metrics.model_copy(update={"asked": by_logs.asked})
    (ent,) = by_logs.entities
    assert (ent.entity, ent.name) == ("tm:localhost_38251_0bfbad", OOM_TM)
    lines = {s.detector: s for s in ent.detectors}
    assert lines["idle_heap_growth"].holds and "bucket" in lines["idle_heap_growth"].words
    assert lines["tm_lost"].firing and lines["jvm_fatal"].firing
    assert render(by_logs).splitlines()[0].startswith(f"tm:localhost_38251_0bfbad ({OOM_TM})")
