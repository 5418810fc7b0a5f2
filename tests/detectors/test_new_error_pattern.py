"""new_error_pattern as a plain state machine: WARN/ERROR lines in, alerts out, time injected."""

from __future__ import annotations

import json
import random
import string

import pytest

from detectors import REGISTRY, Alert, AlertStatus, Event, Severity
from detectors.correlation import Correlator
from detectors.new_error_pattern import (
    NewErrorPattern,
    NewErrorPatternParams,
    exception_class,
)
from detectors.testing import DetectorTester, drive, drive_timer
from detectors.words import at

JOB = "3631d292e50708eb38e1304df762587a"
S = 1000
MIN = 60 * S
T0 = 1_763_800_000_000
LEARNED = T0 + 31 * MIN  # past the default 30-minute learning

COMMIT = "Failed to commit consumer offsets for checkpoint {n}"  # a WARN every healthy job logs
LOOKUP = "Lookup of sku {n} in the price service failed after 3 retries"
PARSE = "Dropping record at offset {n} of partition orders-3: field amount is not a number"
IOEXC = "java.io.IOException: Connection reset by peer"


def line(
    t: int,
    text: str,
    n: int = 1,
    *,
    kind: str = "log_error",
    reason: str | None = None,
    job: str = JOB,
) -> Event:
    msg = text.format(n=n)
    if reason:
        msg += f"\n{reason}\n\tat org.example.Client.call(Client.java:{n})"
    return Event(kind=kind, time_ms=t, job_id=job, job_name="orders", reason=reason, message=msg)


def start(t: int = T0, job: str = JOB) -> Event:
    """The job going RUNNING: its learning starts here."""
    return Event(
        "job_state", t, job_id=job, job_name="orders", from_state="CREATED", to_state="RUNNING"
    )


def det(**kw: object) -> NewErrorPattern:
    return NewErrorPattern(NewErrorPatternParams(**kw))  # type: ignore[arg-type]


def burst(t: int, text: str, count: int = 3, gap: int = MIN, **kw: object) -> list[Event]:
    return [line(t + i * gap, text, 100 + i, **kw) for i in range(count)]  # type: ignore[arg-type]


def test_registered_per_job_reading_only_the_lines_no_other_detector_owns() -> None:
    assert REGISTRY["new_error_pattern"] is NewErrorPattern
    assert NewErrorPattern.scope == "job"
    assert NewErrorPattern.kinds == {"log_warn", "log_error", "job_state"}
    for name, cls in REGISTRY.items():
        if name != "new_error_pattern":
            assert not cls.kinds & {"log_warn", "log_error"}, name
    # Below the known causes in the causal order, above the restarts they cause.
    ranks = {n: c.profile.causal_rank for n, c in REGISTRY.items()}
    assert max(ranks[n] for n in ("idle_heap_growth", "jvm_fatal", "tm_lost", "job_lost")) < 4
    assert ranks["new_error_pattern"] == 4 < ranks["restart_storm"]


def test_exception_class_of_a_reason() -> None:
    assert exception_class(IOEXC) == "java.io.IOException"
    assert exception_class("Caused by: org.x.Y$InnerError: boom") == "org.x.Y$InnerError"
    assert exception_class(None) is None and exception_class("not an exception") is None


# --- learning ----------------------------------------------------------------------------------


def test_a_new_error_after_learning_fires_once_at_its_third_line_naming_template_and_sample() -> (
    None
):
    events = [start(), line(T0 + MIN, COMMIT, kind="log_warn"), *burst(LEARNED, LOOKUP)]
    state, alerts = drive(det(), events)
    assert [(a.status, a.event_time_ms) for a in alerts] == [
        (AlertStatus.FIRING, LEARNED + 2 * MIN)
    ]
    a = alerts[0]
    assert a.severity is Severity.WARNING and a.job_id == JOB and a.entity == f"job:{JOB}"
    ev = a.evidence
    assert ev["template"] == (
        "ERROR Lookup of sku <*> in the price service failed after <*> retries"
    )
    assert ev["sample"] == LOOKUP.format(n=102) and ev["count"] == 3
    assert (ev["first_ms"], ev["last_ms"]) == (LEARNED, LEARNED + 2 * MIN)
    assert ev["templates"] == 2 and ev["dropped"] == 0
    assert "logs a new error, 3 times in 10 min: ERROR Lookup of sku" in a.summary
    assert state.firing


def test_templates_seen_while_learning_stay_quiet_however_often_they_come_later() -> None:
    events = [start(), line(T0 + 5 * MIN, LOOKUP, 1), line(T0 + 20 * MIN, PARSE, 2)]
    events += [line(LEARNED + i * S, (LOOKUP, PARSE)[i % 2], 1000 + i) for i in range(200)]
    _, alerts = drive(det(), events)
    assert alerts == []


def test_a_fresh_job_is_quiet_while_it_learns_even_in_a_burst() -> None:
    # Its first line starts its learning: 50 errors of a brand-new job in its first minutes.
    events = [line(T0 + i * 2 * S, PARSE, i) for i in range(50)]
    events += [line(T0 + 29 * MIN, PARSE, 77)]
    _, alerts = drive(det(), events)
    assert alerts == []
    # The same after its warm-up is a page.
    other = "a0f1e2d3c4b5a69788796a5b4c3d2e1f"
    _, alerts = drive(det(), [start(T0, other), *burst(LEARNED, PARSE, job=other)])
    assert [a.job_id for a in alerts] == [other]


@pytest.mark.parametrize(
    ("count", "gap", "fires"),
    [(3, 4 * MIN, True), (2, MIN, False), (3, 5 * MIN + S, False), (6, 6 * MIN, False)],
    ids=["3-within-10min", "2-is-one-short", "3-spread-over-10min", "6-spread-wide"],
)
def test_it_takes_min_count_lines_within_the_window(count: int, gap: int, fires: bool) -> None:
    events = [start(), *burst(LEARNED, PARSE, count=count, gap=gap)]
    _, alerts = drive(det(), events)
    assert bool(alerts) is fires


def test_a_new_exception_class_makes_the_same_sentence_a_new_template() -> None:
    events = [start(), line(T0 + MIN, LOOKUP, reason="java.net.SocketTimeoutException: timed out")]
    events += burst(LEARNED, LOOKUP, reason=IOEXC)
    _, alerts = drive(det(), events)
    assert len(alerts) == 1
    ev = alerts[0].evidence
    assert ev["exception"] == "java.io.IOException" and ev["template"].endswith(
        "[java.io.IOException]"
    )
    assert ev["sample"] == f"{LOOKUP.format(n=102)}\n{IOEXC}"


# --- the incident ------------------------------------------------------------------------------


def test_it_resolves_after_clear_for_s_without_its_lines_and_pages_once_per_template() -> None:
    d = det()
    events = [start(), *burst(LEARNED, LOOKUP), line(LEARNED + 12 * MIN, LOOKUP, 7)]
    state, timer, alerts = drive_timer(d, events, until=LEARNED + 3 * 3600 * S)
    assert [(a.status, a.event_time_ms - LEARNED) for a in alerts] == [
        (AlertStatus.FIRING, 2 * MIN),
        (AlertStatus.RESOLVED, 12 * MIN + 30 * MIN),
    ]
    assert alerts[0].alert_id == alerts[1].alert_id
    assert "quiet for 30 min" in alerts[1].summary
    assert alerts[1].evidence["count"] == 4
    # Known from now on: the same error in a burst again is not a second page.
    later = burst(LEARNED + 4 * 3600 * S, LOOKUP, count=10)
    _, more = drive(d, later, state=state, timer=timer, until=LEARNED + 6 * 3600 * S)
    assert more == []


def test_new_templates_while_open_join_the_evidence_instead_of_paging() -> None:
    events = [start(), *burst(LEARNED, LOOKUP)]
    for k, text in enumerate(
        [PARSE, "Cache {n} evicted while in use", "Sink {n} rejected a batch", "Shard moved {n}"]
    ):
        events += burst(LEARNED + (3 + k) * MIN, text, gap=10 * S)
    _, alerts = drive(det(max_listed=3), events, until=LEARNED + 4 * 3600 * S)
    assert [a.status for a in alerts] == [AlertStatus.FIRING, AlertStatus.RESOLVED]
    ev = alerts[1].evidence
    assert ev["template"].startswith("ERROR Lookup of sku")
    assert [t.split(" ")[1] for t in ev["also"]] == ["Dropping", "Cache"]
    assert ev["unlisted"] == 2


def test_new_warnings_do_not_page_but_are_listed_as_context() -> None:
    warn = "Slow response from the schema registry: {n} ms"
    events = [start(), *burst(LEARNED, warn, count=10, kind="log_warn")]
    _, alerts = drive(det(), events)
    assert alerts == []
    events.append(line(LEARNED + 11 * MIN, LOOKUP, 1))
    events += burst(LEARNED + 12 * MIN, LOOKUP)
    _, alerts = drive(det(), events)
    assert len(alerts) == 1
    assert alerts[0].evidence["new_warnings"] == [
        "WARN Slow response from the schema registry: <*> ms"
    ]
    # Warnings page too when asked.
    _, alerts = drive(det(page_warnings=True), [start(), *burst(LEARNED, warn, kind="log_warn")])
    assert alerts[0].evidence["template"].startswith("WARN Slow response")


def test_an_idle_job_closes_its_open_incident_and_forgets_what_it_learned() -> None:
    d = det(idle_ttl_s=3 * 3600, clear_for_s=6 * 3600)
    events = [start(), *burst(LEARNED, LOOKUP)]
    state, alerts = drive(d, events, until=LEARNED + 4 * 3600 * S)
    assert [a.status for a in alerts] == [AlertStatus.FIRING, AlertStatus.RESOLVED]
    assert state is None
    assert alerts[1].summary.endswith("no log lines any more")


def test_job_state_lines_start_the_clock_and_mine_nothing() -> None:
    state, alerts = drive(det(), [start(), start(T0 + MIN)])
    assert alerts == [] and state.vocab.size == 0
    assert state.learn_until_ms == T0 + 30 * MIN


def test_a_sample_is_bounded_and_kept_as_logged() -> None:
    hostile = "<!channel> *bold* `code` <https://x|click> & " + "é" * 400 + " {n}"
    _, alerts = drive(det(), [start(), *burst(LEARNED, hostile)])
    sample = alerts[0].evidence["sample"]
    assert sample == hostile.format(n=102)[:300]
    assert len(alerts[0].evidence["template"]) < 300


# --- clocks ------------------------------------------------------------------------------------


def test_out_of_order_lines_count_at_the_job_clock_and_cannot_stretch_learning() -> None:
    # After learning, three lines whose own times run backwards (a host clock jumping back):
    # each counts as now, so they make three within the window, paged at the clock's time.
    events = [start(), line(LEARNED, COMMIT, kind="log_warn")]
    events += [line(LEARNED - k * 20 * MIN, PARSE, k) for k in range(3)]
    _, alerts = drive(det(), events)
    assert [a.event_time_ms for a in alerts] == [LEARNED]
    # A line stamped before the job's first event does not restart its learning.
    events = [start(), line(T0 - 3600 * S, COMMIT, kind="log_warn"), *burst(LEARNED, PARSE)]
    _, alerts = drive(det(), events)
    assert len(alerts) == 1


# --- bounds ------------------------------------------------------------------------------------


def test_a_flood_of_unique_lines_keeps_the_state_bounded_and_what_was_learned() -> None:
    d = det()
    rng = random.Random(7)
    pool = ["".join(rng.choices(string.ascii_letters, k=rng.randint(1, 12))) for _ in range(3000)]
    learning = [start(), line(T0 + MIN, LOOKUP, 1), line(T0 + 2 * MIN, COMMIT, kind="log_warn")]
    state, _ = drive(d, learning)
    typical = len(d.dump_json(state))
    assert typical < 1500

    def flood(state: object, timer: int | None, t0: int, n: int) -> tuple[object, int | None]:
        for i in range(n):
            text = (
                " ".join(rng.choices(pool, k=rng.randint(1, 40))) + " " + "x" * rng.randint(0, 200)
            )
            kind = ("log_error", "log_warn")[i % 2]
            step = d.advance(state, timer, line(t0 + i * 10, text.replace("{", "("), kind=kind))
            assert not step.alerts
            state, timer = step.state, step.timer_ms
        return state, timer

    # The worst case: unique lines through the whole warm-up (every one learned), the job's
    # usual error among the last of them, then unique lines of both levels for good.
    state, timer = flood(state, None, T0 + 3 * MIN, 10_000)
    usual = [line(LEARNED - 2 * MIN, LOOKUP, 2)]
    state, timer, _ = drive_timer(d, usual, state=state, timer=timer)
    state, timer = flood(state, timer, LEARNED, 100_000)
    p, vocab = d.params, state.vocab
    assert vocab.size == p.max_templates + 2 * p.max_new
    assert vocab.forgotten > 9_000 and vocab.dropped > 99_000
    size = len(d.dump_json(state))
    assert size < 26_000, size
    # The learned templates are still there: the normal error does not page.
    _, alerts = drive(d, burst(LEARNED + 2_000 * S, LOOKUP), state=state, timer=timer)
    assert alerts == []


def _words(k: int) -> str:
    """A sentence of its own for each ``k`` (no digits: digits are masked, letters are not)."""
    letters = string.ascii_lowercase
    return f"Stage {letters[k % 26]}{letters[k // 26 % 26]}{letters[k // 676 % 26]} gave up"


def test_a_new_line_past_a_full_learned_vocabulary_does_not_forget_the_jobs_usual_error() -> None:
    # The job learns max_templates templates in its warm-up, its usual error first; after it,
    # one new line (and a few more) must not push the usual error out of what it learned.
    usual = "Quota refresh alpha failed"
    events = [start(), line(T0 + S, usual)]
    events += [line(T0 + 2 * S + k * S, _words(k), k) for k in range(49)]
    events += [line(LEARNED + k * S, _words(100 + k), k) for k in range(5)]  # once each
    events += burst(LEARNED + MIN, usual)
    state, alerts = drive(det(), events)
    assert alerts == []
    assert state.vocab.forgotten == 0


def test_warn_noise_between_the_lines_of_a_new_error_does_not_starve_its_count() -> None:
    # 60 distinct new WARN templates between each two lines of a new ERROR template.
    events = [start()]
    t = LEARNED
    for i in range(3):
        events.append(line(t, LOOKUP, i))
        events += [line(t + k + 1, _words(60 * i + k), kind="log_warn") for k in range(60)]
        t += MIN
    state, alerts = drive(det(), events)
    assert [a.evidence["template"] for a in alerts] == [
        "ERROR Lookup of sku <*> in the price service failed after <*> retries"
    ]
    # The WARN noise overflowed its own room, and that is counted and shown.
    assert alerts[0].evidence["dropped"] > 0 and state.vocab.dropped > 100


def test_new_error_templates_make_room_among_themselves_least_recently_seen_first() -> None:
    d = det(max_new=3)
    learning = [start(), line(T0 + MIN, LOOKUP, 1)]
    new = [line(LEARNED + k * S, f"Sink {w} rejected a batch", k) for k, w in enumerate("abcd")]
    state, alerts = drive(d, [*learning, *new])
    assert alerts == []
    held = {t.text for t in state.vocab.all()}
    assert "Sink a rejected a batch" not in held  # the least recently seen new one went
    assert {f"Sink {w} rejected a batch" for w in "bcd"} <= held
    assert "Lookup of sku <*> in the price service failed after <*> retries" in held
    assert state.vocab.dropped == 1 and state.vocab.forgotten == 0


def test_the_state_survives_json_between_every_call() -> None:
    # drive() round-trips the state through JSON before every call, as the runner saves it.
    events = [start(), *burst(LEARNED, LOOKUP), *burst(LEARNED + 3 * MIN, PARSE, gap=S)]
    state, alerts = drive(det(), events)
    assert len(alerts) == 1 and state.open_ids and len(state.open_ids) == 2
    json.loads(NewErrorPattern.dump_json(state))


# --- correlation -------------------------------------------------------------------------------


def _alert(detector: str, t: int, **kw: object) -> Alert:
    return Alert(
        alert_id=f"{detector}-{t}",
        detector=detector,
        entity=f"job:{JOB}",
        status=AlertStatus.FIRING,
        severity=Severity.WARNING,
        event_time_ms=t,
        job_id=JOB,
        job_name="orders",
        summary=f"{detector} fired",
        **kw,  # type: ignore[arg-type]
    )


def test_it_joins_the_jobs_open_incident_and_is_root_only_over_consequences() -> None:
    _, (mine,) = drive(det(), [start(), *burst(LEARNED, LOOKUP)])
    c = Correlator()
    c.observe(_alert("restart_storm", LEARNED))
    view = c.observe(mine)
    assert view.joined and len(view.members) == 2
    assert view.root.detector == "new_error_pattern"  # the error, then the restarts
    assert view.headline.startswith("job orders logs a new ERROR Lookup of sku")
    c = Correlator()
    c.observe(_alert("job_lost", LEARNED))
    view = c.observe(mine)
    assert view.joined and view.root.detector == "job_lost"
    assert "a new ERROR Lookup of sku" in view.headline


# --- a simulated fleet -------------------------------------------------------------------------


def _fleet_pages(params: NewErrorPatternParams, spec: object, hours: float) -> dict[str, list]:
    """The alerts per job of a simulated fleet's lines, read as the parse query reads them."""
    from lab.fleet import generate
    from lab.loglines import sim_events

    records = generate(spec, T0, hours * 3600)  # type: ignore[arg-type]
    # Only the lines this detector reads can matter (the bus routes no others to it).
    wanted = (b"WARN", b"ERROR", b"FATAL", b"switched from state")
    logs = (r for r in records if r.stream == "log" and any(w in r.value for w in wanted))
    by_job: dict[str, list[Event]] = {}
    for e in sim_events(logs):
        if e.kind in NewErrorPattern.kinds and e.job_id:
            by_job.setdefault(e.job_id, []).append(e)
    d = NewErrorPattern(params)
    end = T0 + int(hours * 3600 * S)
    return {job: drive(d, events, until=end)[1] for job, events in by_job.items()} | {
        "_lines": [e for events in by_job.values() for e in events if e.kind != "job_state"]
    }


def test_a_healthy_simulated_fleet_of_100_jobs_pages_nothing_in_an_hour() -> None:
    from lab.fleet import FleetSpec

    # Job i runs versions[i % 4] in layout i % 4: the JSON-layout jobs (i % 4 == 1) run 2.0,
    # whose lines name their job in the MDC, so their background reaches the detector.
    spec = FleetSpec(jobs=100, flink_versions=("1.11", "2.0", "1.18", "2.0"), metric_interval_s=600)
    pages = _fleet_pages(NewErrorPatternParams(), spec, 1.0)
    lines = pages.pop("_lines")
    assert {j: a for j, a in pages.items() if a} == {}
    # The test means something: background ERROR lines of many jobs reached it ...
    errors = [e for e in lines if e.kind == "log_error"]
    assert len({e.job_id for e in errors}) >= 12 and len(errors) >= 150
    # ... and without the warm-up they would have paged.
    eager = _fleet_pages(NewErrorPatternParams(learn_s=0), spec, 1.0)
    eager.pop("_lines")
    assert sum(1 for a in eager.values() if a) >= 5


def test_the_simulated_new_error_incident_pages_its_job_only() -> None:
    from lab.fleet import FleetSpec, Incident, job_id

    spec = FleetSpec(
        jobs=8,
        flink_versions=("1.11", "2.0", "1.18", "2.0"),
        metric_interval_s=600,
        incidents=(Incident("new_error", 5, 2400.0),),
    )
    pages = _fleet_pages(NewErrorPatternParams(), spec, 1.0)
    pages.pop("_lines")
    fired = {
        j: [a for a in alerts if a.status is AlertStatus.FIRING] for j, alerts in pages.items()
    }
    assert {j for j, a in fired.items() if a} == {job_id(spec, 5)}
    (alert,) = fired[job_id(spec, 5)]
    assert T0 + 2400 * S < alert.event_time_ms < T0 + 2400 * S + 3 * 40 * S + 4 * S
    assert alert.evidence["exception"] == "java.net.SocketTimeoutException"
    assert alert.evidence["template"].startswith("ERROR Lookup of key <*> in the reference service")


# --- standing ----------------------------------------------------------------------------


def test_standing_tells_learning_then_the_new_error_closest_to_paging_then_the_page() -> None:
    tester = DetectorTester(det())
    assert tester.standing() == (
        "no WARN or ERROR line or state change of this job seen: learning not started"
    )
    tester.feed(start(), line(T0 + MIN, COMMIT, kind="log_warn"))
    assert tester.standing() == (
        f"learning: 1 template so far; every line is normal until {at(T0 + 30 * MIN)} (29 min left)"
    )
    events = burst(LEARNED, LOOKUP)
    tester.feed(*events[:2])
    assert tester.standing() == (
        f"alerting since {at(T0 + 30 * MIN)}, 1 template known; 1 new ERROR template, "
        "the closest at 2 of 3 within 10 min"
    )
    tester.feed(events[2])
    assert tester.standing() == (
        f"FIRING since {at(LEARNED + 2 * MIN)} (0 s); new ERROR Lookup of sku <*> in the price "
        f"service failed after <*> retries (3 lines); resolves at {at(LEARNED + 32 * MIN)} if "
        "it stays quiet"
    )
    tester.advance_to(LEARNED + 3600 * S)
    assert [a.status for a in tester.alerts] == [AlertStatus.FIRING, AlertStatus.RESOLVED]
    assert tester.standing() == (
        f"alerting since {at(T0 + 30 * MIN)}, 2 templates known; no new ERROR template"
    )
