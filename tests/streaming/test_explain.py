"""``flinkwatch explain``'s model: which saved entities a question matches, and each line.

Saved values are built as the runner builds them (:func:`streaming.entity.saved_text` over
states the detectors made from events), never written by hand.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from conf import AppConfig
from detectors import REGISTRY, Event, Severity
from detectors.checkpoint_failures import CheckpointFailures
from detectors.idle_heap_growth import HEAP_USED, IdleHeapGrowth
from detectors.jm_k8s_watch_crash import JmCrash, JmK8sWatchCrash, JmK8sWatchCrashState
from detectors.testing import DetectorTester
from streaming.entity import Header, saved_text
from streaming.explain import Asked, Explanation, Standing, explain, render

JOB = "7f" * 16
OTHER = "a1" * 16
NAME = "orders-enrichment"


def expired(job_id: str, cp: int, t: int, name: str | None = None) -> Event:
    return Event("checkpoint_expired", t, job_id=job_id, job_name=name, checkpoint_id=cp)


def job_value(job_id: str, *, expiries: int, name: str | None = NAME) -> str:
    """A job's saved value with ``checkpoint_failures`` fed ``expiries`` expired checkpoints."""
    det = CheckpointFailures(CheckpointFailures.params_model())
    tester = DetectorTester(det)
    tester.feed(*(expired(job_id, i, 60_000 * i, name) for i in range(1, expiries + 1)))
    assert tester.state is not None
    header = Header(name=name, newest_ms=60_000 * expiries, due={"checkpoint_failures": 99_000})
    return saved_text(header, {"checkpoint_failures": det.dump_json(tester.state)})


def tm_value(tm: str) -> str:
    det = IdleHeapGrowth(IdleHeapGrowth.params_model())
    tester = DetectorTester(det)
    tester.feed(Event("metric", 1_000, tm_id=tm, metric=HEAP_USED, value=1e8))
    assert tester.state is not None
    return saved_text(Header(newest_ms=1_000), {"idle_heap_growth": det.dump_json(tester.state)})


def scope_names(scope: str) -> list[str]:
    return sorted(n for n, cls in REGISTRY.items() if cls.scope == scope)


def lines(expl: Explanation, entity: str) -> dict[str, Standing]:
    (ent,) = [e for e in expl.entities if e.entity == entity]
    return {s.detector: s for s in ent.detectors}


# --- which entity --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("asked", "entity", "text", "matches"),
    [
        (Asked(job=JOB), f"job:{JOB}", None, True),
        (Asked(job=JOB), f"job:{OTHER}", None, False),
        (Asked(job=NAME), f"job:{OTHER}", '{"v":2,"t":1,"name":"orders-enrichment"}', True),
        (Asked(job=NAME), f"job:{OTHER}", '{"v":2,"t":1,"name":"orders"}', False),
        # The name in a state line, when the header has none (a job whose state line is old).
        (
            Asked(job='a "quoted" job'),
            f"job:{OTHER}",
            '{"v":2,"t":1}\nrestart_storm\t{"job_name":"a \\"quoted\\" job","v":1}',
            True,
        ),
        (Asked(job=NAME), "tm:x", '{"v":2,"t":1,"name":"orders-enrichment"}', False),
        (Asked(job=NAME), f"job:{OTHER}", "not a saved value", False),
        (Asked(tm="tm-1"), "tm:tm_1", None, True),
        (Asked(tm="tm_1"), "tm:tm_1", None, True),
        (Asked(tm="tm-1"), "tm:tm_10", None, False),
        (Asked(cluster=True), "cluster", None, True),
        (Asked(cluster=True), f"job:{JOB}", None, False),
    ],
    ids=[
        "job_id",
        "other_job_id",
        "job_name_in_header",
        "other_name",
        "job_name_in_state_line",
        "a_tm_is_no_job",
        "unreadable_value",
        "tm_id",
        "tm_id_as_its_metrics_spell_it",
        "tm_id_prefix_is_not_it",
        "cluster",
        "a_job_is_not_the_cluster",
    ],
)
def test_a_question_matches_its_entity_by_id_or_name(
    asked: Asked, entity: str, text: str | None, matches: bool
) -> None:
    assert asked.matches(entity, text) is matches


@pytest.mark.parametrize(
    "fields",
    [{}, {"job": "x", "tm": "y"}, {"tm": "y", "cluster": True}],
    ids=["none", "two", "tm_and_cluster"],
)
def test_a_question_names_exactly_one_entity(fields: dict[str, Any]) -> None:
    with pytest.raises(ValidationError, match="ask about one entity"):
        Asked(**fields)


# --- what each detector says ---------------------------------------------------------------


def test_every_detector_of_the_scope_has_a_line_with_or_without_state() -> None:
    saved = {f"job:{JOB}": job_value(JOB, expiries=2), "tm:tm-1": tm_value("tm-1")}
    expl = explain(Asked(job=JOB), saved, AppConfig())
    assert [e.entity for e in expl.entities] == [f"job:{JOB}"]  # the TaskManager is not asked
    ent = expl.entities[0]
    assert ent.name == NAME and ent.newest_ms == 120_000
    by = lines(expl, f"job:{JOB}")
    assert sorted(by) == scope_names("job")
    held = by["checkpoint_failures"]
    assert held.holds and not held.firing and held.due_ms == 99_000
    assert any(c.isdigit() for c in held.words)
    for name, s in by.items():
        if name != "checkpoint_failures":
            assert not s.holds and not s.firing and s.due_ms is None
            assert s.words  # why it cannot judge


def test_an_open_incident_is_firing() -> None:
    # Three expiries within the window: the default min_expired pages.
    expl = explain(Asked(job=JOB), {f"job:{JOB}": job_value(JOB, expiries=3)}, AppConfig())
    assert lines(expl, f"job:{JOB}")["checkpoint_failures"].firing


def test_an_incident_keyed_inside_the_state_is_firing() -> None:
    # jm_k8s_watch_crash keys an incident per JobManager; the state's own stays closed.
    state = JmK8sWatchCrashState(
        entity="cluster",
        crashes={"jm-0": JmCrash(firing=True, incident_start_ms=1_000, severity=Severity.WARNING)},
    )
    assert not state.firing
    text = saved_text(Header(newest_ms=2_000), {JmK8sWatchCrash.name: state.model_dump_json()})
    expl = explain(Asked(cluster=True), {"cluster": text}, AppConfig())
    assert lines(expl, "cluster")[JmK8sWatchCrash.name].firing


def test_a_name_shared_by_two_jobs_lists_both_and_says_so() -> None:
    saved = {f"job:{JOB}": job_value(JOB, expiries=1), f"job:{OTHER}": job_value(OTHER, expiries=1)}
    expl = explain(Asked(job=NAME), saved, AppConfig())
    assert [e.entity for e in expl.entities] == [f"job:{JOB}", f"job:{OTHER}"]
    assert expl.note == f"2 jobs are named {NAME}"
    assert "2 jobs are named" in render(expl)


def test_a_name_nothing_carries_is_answered_with_no_entity() -> None:
    expl = explain(Asked(job="nobody"), {f"job:{JOB}": job_value(JOB, expiries=1)}, AppConfig())
    assert expl.entities == ()
    assert expl.note is not None and "no job named nobody" in expl.note


@pytest.mark.parametrize(
    ("asked", "entity"),
    [
        (Asked(job=OTHER), f"job:{OTHER}"),
        (Asked(tm="tm-9"), "tm:tm_9"),
        (Asked(cluster=True), "cluster"),
    ],
    ids=["job_id", "tm_id", "cluster"],
)
def test_an_id_with_nothing_saved_still_gets_every_detector_saying_why(
    asked: Asked, entity: str
) -> None:
    expl = explain(asked, {f"job:{JOB}": job_value(JOB, expiries=1)}, AppConfig())
    assert expl.note is not None and "holds nothing for" in expl.note
    by = lines(expl, entity)
    assert sorted(by) == scope_names(entity.partition(":")[0] if ":" in entity else "cluster")
    assert all(not s.holds and s.words for s in by.values())


def test_a_detector_turned_off_for_the_job_says_so() -> None:
    cfg = AppConfig.model_validate(
        {
            "overrides": [
                {
                    "match": {"job_name": "orders-.*"},
                    "detectors": {"checkpoint_failures": {"enabled": False}},
                }
            ]
        }
    )
    saved = {
        f"job:{JOB}": job_value(JOB, expiries=3),
        f"job:{OTHER}": job_value(OTHER, expiries=3, name="billing"),
    }
    off = lines(explain(Asked(job=JOB), saved, cfg), f"job:{JOB}")["checkpoint_failures"]
    assert not off.enabled and not off.firing
    assert "turned off for this job" in off.words
    # It still holds the state it kept while on; the text says off, not ok.
    assert off.holds
    text = render(explain(Asked(job=JOB), saved, cfg))
    assert any(line.split()[:2] == ["checkpoint_failures", "off"] for line in text.splitlines())
    on = lines(explain(Asked(job=OTHER), saved, cfg), f"job:{OTHER}")["checkpoint_failures"]
    assert on.enabled and on.firing


def test_a_state_the_detector_cannot_load_says_so() -> None:
    text = saved_text(Header(newest_ms=5), {"checkpoint_failures": '{"v":99,"entity":"job:x"}'})
    s = lines(explain(Asked(job=JOB), {f"job:{JOB}": text}, AppConfig()), f"job:{JOB}")
    assert s["checkpoint_failures"].holds
    assert "cannot be read" in s["checkpoint_failures"].words
    assert "newer" in s["checkpoint_failures"].words


def test_the_catalog_of_a_config_that_keeps_one_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    only = {"checkpoint_failures": CheckpointFailures}
    monkeypatch.setattr(AppConfig, "catalog", lambda self: only, raising=False)
    by = lines(
        explain(Asked(job=JOB), {f"job:{JOB}": job_value(JOB, expiries=1)}, AppConfig()),
        f"job:{JOB}",
    )
    assert list(by) == ["checkpoint_failures"]


def test_the_line_is_the_detectors_own_words_for_the_state_it_holds() -> None:
    det = CheckpointFailures(CheckpointFailures.params_model())
    text = job_value(JOB, expiries=2)
    state = det.load_json(text.split("\n")[1].partition("\t")[2])
    by = lines(explain(Asked(job=JOB), {f"job:{JOB}": text}, AppConfig()), f"job:{JOB}")
    assert by["checkpoint_failures"].words == det.standing(state)
    by = lines(explain(Asked(job=OTHER), {}, AppConfig()), f"job:{OTHER}")
    assert by["checkpoint_failures"].words == det.standing(None)


# --- output ---------------------------------------------------------------------------------


def test_a_live_entity_says_how_late_its_records_arrive() -> None:
    # Why a deadline pages when it does: the grace plus how far behind the bus's newest
    # time the entity's records arrive. A replay's files carry no bus time: not said.
    header = Header(name=NAME, newest_ms=180_000)
    header.note_lag(180_000, 1_250, 400)
    header.note_lag(181_000, 900, -30)
    live = saved_text(header, {})
    (ent,) = explain(Asked(job=JOB), {f"job:{JOB}": live}, AppConfig()).entities
    assert (ent.behind_ms, ent.to_bus_ms) == (400, 1_250)
    head = render(explain(Asked(job=JOB), {f"job:{JOB}": live}, AppConfig())).splitlines()[0]
    assert head.endswith(
        "newest event 1970-01-01T00:03:00Z; its records arrive 0.4 s behind the bus's newest"
        " (1.2 s after their event time)"
    )
    (files,) = explain(
        Asked(job=JOB), {f"job:{JOB}": job_value(JOB, expiries=3)}, AppConfig()
    ).entities
    assert files.behind_ms is None and files.to_bus_ms is None


def test_the_text_is_one_aligned_line_per_detector_under_its_entity() -> None:
    expl = explain(Asked(job=JOB), {f"job:{JOB}": job_value(JOB, expiries=3)}, AppConfig())
    text = render(expl).splitlines()
    assert text[0] == f"job:{JOB} ({NAME}), newest event 1970-01-01T00:03:00Z"
    rows = text[1:]
    assert len(rows) == len(scope_names("job"))
    width = max(len(n) for n in scope_names("job"))
    firing = next(r for r in rows if "checkpoint_failures" in r)
    assert firing.startswith(f"  {'checkpoint_failures':<{width}}  FIRING  since 1970-")
    assert "FIRING" not in firing.partition("FIRING")[2]  # said once, not by both columns
    # The state column starts at the same place on every line.
    assert {r.index(r.split()[1], 2 + width) for r in rows} == {4 + width}


def test_the_json_round_trips() -> None:
    expl = explain(Asked(job=NAME), {f"job:{JOB}": job_value(JOB, expiries=3)}, AppConfig())
    again = Explanation.model_validate(json.loads(json.dumps(expl.model_dump(mode="json"))))
    assert again == expl
    assert render(again) == render(expl)
