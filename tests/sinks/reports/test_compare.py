"""Two replays' pages paired: gained, lost, earlier, later, unchanged, per detector and job."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sinks.files import iso_utc as iso
from sinks.reports.compare import Change, compare, duration, moved, pages_of, read_pages

T0 = 1_763_832_000_000  # 2025-11-22T17:20:00Z
S, MIN = 1000, 60_000
JOB = "job:3631d292e50708eb38e1304df762587a"


def rec(
    alert_id: str,
    at_ms: int,
    status: str = "firing",
    *,
    detector: str = "checkpoint_failures",
    entity: str = JOB,
    severity: str = "warning",
    **extra: Any,
) -> dict[str, Any]:
    """An alert file's record, as sinks.files.alert_record writes it."""
    r: dict[str, Any] = {
        "alert_id": alert_id,
        "detector": detector,
        "status": status,
        "severity": severity,
        "entity": entity,
        "event_time": iso(at_ms),
        "summary": "s",
        "job_name": "orders",
        "evidence": {},
    }
    return {**r, **extra}


def changes(base: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[tuple[str, int | None]]:
    c = compare(pages_of(base), pages_of(new))
    return [(d.change.value, d.delta_ms) for d in c.differences]


CASES = [
    pytest.param([rec("a", T0)], [rec("a", T0)], [("unchanged", 0)], id="same page"),
    pytest.param([], [rec("n", T0)], [("gained", None)], id="gained"),
    pytest.param([rec("b", T0)], [], [("lost", None)], id="lost"),
    pytest.param(
        [rec("b", T0 + 74 * S)], [rec("n", T0)], [("earlier", -74 * S)], id="earlier, open"
    ),
    pytest.param(
        [rec("b", T0), rec("b", T0 + 5 * MIN, "resolved")],
        [rec("n", T0 + 4 * MIN), rec("n", T0 + 6 * MIN, "resolved")],
        [("later", 4 * MIN)],
        id="later, overlapping spans",
    ),
    pytest.param(
        [rec("b", T0), rec("b", T0 + 2 * MIN, "resolved")],
        [rec("n", T0 + 30 * MIN)],
        [("later", 30 * MIN)],
        id="moved past the resolve, within the hour",
    ),
    pytest.param(
        [rec("b", T0), rec("b", T0 + 2 * MIN, "resolved")],
        [rec("n", T0 + 2 * 3_600_000)],
        [("lost", None), ("gained", None)],
        id="two hours apart, not overlapping: another page",
    ),
    pytest.param(
        # Two incidents of one job in each run: each pairs with its own, not the nearer
        # start of the other run's second one.
        [
            rec("b1", T0),
            rec("b1", T0 + 10 * MIN, "resolved"),
            rec("b2", T0 + 40 * MIN),
            rec("b2", T0 + 50 * MIN, "resolved"),
        ],
        [
            rec("n1", T0 + 1 * MIN),
            rec("n1", T0 + 9 * MIN, "resolved"),
            rec("n2", T0 + 39 * MIN),
        ],
        [("later", 1 * MIN), ("earlier", -1 * MIN)],
        id="two incidents of one job each",
    ),
    pytest.param(
        [rec("b1", T0), rec("b1", T0 + 5 * MIN, "resolved"), rec("b2", T0 + 20 * MIN)],
        [rec("n1", T0 + 21 * MIN)],
        [("lost", None), ("later", 1 * MIN)],
        id="the new run pages once of two: the overlapping one is paired",
    ),
    pytest.param(
        [rec("b", T0 + 5 * MIN, "resolved")],
        [],
        [],
        id="a resolve alone never paged",
    ),
    pytest.param(
        [rec("b", T0, "escalated", severity="critical")],
        [rec("n", T0)],
        [("unchanged", 0)],
        id="a file starting at an escalation pages at it",
    ),
    pytest.param(
        [rec("b", T0)],
        [rec("n", T0, detector="late_barrier_acks")],
        [("lost", None), ("gained", None)],
        id="another detector is another page",
    ),
    pytest.param(
        [rec("b", T0)],
        [rec("n", T0, entity="job:" + "0" * 32)],
        [("gained", None), ("lost", None)],
        id="another job of the same name is another page",
    ),
]


@pytest.mark.parametrize(("base", "new", "want"), CASES)
def test_pages_are_paired_and_classified(base, new, want) -> None:
    assert changes(base, new) == want


def test_the_window_bounds_what_pairs_apart_from_overlap() -> None:
    base = [rec("b", T0), rec("b", T0 + MIN, "resolved")]
    new = [rec("n", T0 + 10 * MIN)]
    near = compare(pages_of(base), pages_of(new), window_ms=10 * MIN)
    far = compare(pages_of(base), pages_of(new), window_ms=10 * MIN - 1)
    assert [d.change for d in near.differences] == [Change.LATER]
    assert [d.change for d in far.differences] == [Change.LOST, Change.GAINED]


def test_an_incident_is_its_firing_escalation_and_resolve() -> None:
    (page,) = pages_of(
        [
            rec("a", T0),
            rec("a", T0 + MIN, "escalated", severity="critical"),
            rec("a", T0 + 9 * MIN, "resolved", severity="critical"),
        ]
    )
    assert (page.paged_ms, page.resolved_ms, page.severity.value) == (T0, T0 + 9 * MIN, "critical")
    assert page.subject == "job orders"


def test_totals_and_groups_count_per_detector_and_job() -> None:
    other = "job:" + "1" * 32
    base = [rec("b1", T0 + 74 * S), rec("b2", T0, detector="late_barrier_acks")]
    new = [
        rec("n1", T0),
        rec("n2", T0, detector="checkpoint_failures", entity=other, job_name="payments"),
    ]
    c = compare(pages_of(base), pages_of(new))
    assert (c.baseline_pages, c.new_pages, c.changed) == (2, 2, True)
    assert {k.value: n for k, n in c.totals().items()} == {
        "gained": 1,
        "lost": 1,
        "earlier": 1,
        "later": 0,
        "unchanged": 0,
    }
    assert [(det, who, {k.value: n for k, n in n.items() if n}) for det, who, n in c.groups()] == [
        ("checkpoint_failures", "job orders", {"earlier": 1}),
        ("checkpoint_failures", "job payments", {"gained": 1}),
        ("late_barrier_acks", "job orders", {"lost": 1}),
    ]


def test_the_text_gives_totals_first_then_a_line_per_page_with_times_and_the_move() -> None:
    base = [rec("b1", T0 + 74 * S), rec("b2", T0, detector="late_barrier_acks")]
    new = [rec("n1", T0)]
    lines = compare(pages_of(base), pages_of(new)).text().splitlines()
    assert lines[0] == (
        "pages: baseline 2, new 1; gained 0, lost 1, earlier 1, later 0, unchanged 0"
    )
    assert lines[1].split() == [
        "detector",
        "job",
        "/",
        "TaskManager",
        "change",
        "baseline",
        "new",
        "moved",
    ]
    assert lines[2].split() == [
        "checkpoint_failures",
        "job",
        "orders",
        "earlier",
        iso(T0 + 74 * S),
        iso(T0),
        "1",
        "min",
        "14",
        "s",
        "earlier",
    ]
    assert lines[3].split() == ["late_barrier_acks", "job", "orders", "lost", iso(T0), "-"]


def test_the_text_of_two_quiet_runs_says_so() -> None:
    assert compare([], []).text().endswith("no pages in either run")


def test_the_json_carries_both_pages_and_the_move_in_ms() -> None:
    base = [rec("b", T0 + 74 * S), rec("b", T0 + 9 * MIN, "resolved")]
    new = [rec("n", T0, severity="critical")]
    out = json.loads(json.dumps(compare(pages_of(base), pages_of(new)).to_json(one_parse=True)))
    assert out["one_parse"] is True
    assert out["pages"] == {"baseline": 1, "new": 1}
    assert out["totals"]["earlier"] == 1
    (d,) = out["differences"]
    assert d == {
        "change": "earlier",
        "detector": "checkpoint_failures",
        "entity": JOB,
        "subject": "job orders",
        "baseline": {
            "alert_id": "b",
            "paged": iso(T0 + 74 * S),
            "resolved": iso(T0 + 9 * MIN),
            "severity": "warning",
        },
        "new": {"alert_id": "n", "paged": iso(T0), "resolved": None, "severity": "critical"},
        "delta_ms": -74 * S,
    }


def test_a_taskmanagers_page_names_the_taskmanager() -> None:
    (page,) = pages_of([rec("t", T0, entity="tm:tm-1", tm_id="tm-1", detector="idle_heap_growth")])
    assert page.subject == "TaskManager tm-1"


def test_a_taskmanager_is_one_subject_whichever_spelling_each_run_paged_on() -> None:
    # The baseline paged before the TaskManager's logs spelled its id (the metrics'
    # spelling), the new config after (the logs'): one TaskManager, one group, one name.
    tm = "tm:localhost_40003_6cf67b"
    kw: dict[str, Any] = {"entity": tm, "detector": "idle_heap_growth", "job_name": None}
    base = [rec("b", T0 + 9 * MIN, tm_id="localhost:40003_6cf67b", **kw)]
    new = [
        rec("n", T0, tm_id="localhost:40003-6cf67b", **kw),
        rec("m", T0 + 2 * 60 * MIN, tm_id="localhost:40003_6cf67b", **kw),
    ]
    c = compare(pages_of(base), pages_of(new))
    assert {d.page.subject for d in c.differences} == {"TaskManager localhost:40003-6cf67b"}
    assert [(det, who, {k.value: n for k, n in n.items() if n}) for det, who, n in c.groups()] == [
        ("idle_heap_growth", "TaskManager localhost:40003-6cf67b", {"earlier": 1, "gained": 1})
    ]
    # Either order of the runs gives the same name.
    c = compare(pages_of(new), pages_of(base))
    assert {d.page.subject for d in c.differences} == {"TaskManager localhost:40003-6cf67b"}


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (850, "850 ms"),
        (4014, "4.0 s"),
        (74_000, "1 min 14 s"),
        (120_000, "2 min"),
        (3_900_000, "1 h 5 min"),
        (3 * 86_400_000 + 3_600_000, "3 d 1 h"),
    ],
)
def test_durations_read_in_human_units(ms: int, text: str) -> None:
    assert duration(ms) == text


def test_a_move_says_its_direction() -> None:
    assert (moved(-74_000), moved(4014), moved(0), moved(None)) == (
        "1 min 14 s earlier",
        "4.0 s later",
        "same time",
        "",
    )


def test_an_alert_file_is_read_skipping_blank_lines(tmp_path) -> None:
    path = tmp_path / "alerts.jsonl"
    path.write_text(json.dumps(rec("a", T0)) + "\n\n" + json.dumps(rec("a", T0 + MIN, "resolved")))
    (page,) = read_pages(path)
    assert (page.alert_id, page.resolved_ms) == ("a", T0 + MIN)


def test_a_line_that_is_not_an_alert_is_refused() -> None:
    with pytest.raises(ValueError, match="not an alert record"):
        pages_of([{"detector": "x"}])
