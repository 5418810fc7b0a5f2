"""Correlation: related alerts become one incident with a root-cause line (plain Python)."""

from __future__ import annotations

from typing import Any

from detectors import Alert, AlertStatus, Severity
from detectors.correlation import CorrelationParams, Correlator, links

JOB = "3f4c2a9b7d1e4f60a8b5c2d1e0f9a7b3"
OTHER_JOB = "a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5"
TM = "container_e05_1699999999999_0042_01_000003"
MIN = 60_000
T0 = 1_717_400_000_000


def alert(
    alert_id: str,
    detector: str,
    t: int,
    *,
    status: AlertStatus = AlertStatus.FIRING,
    severity: Severity = Severity.WARNING,
    job_id: str | None = None,
    tm_id: str | None = None,
    evidence: dict[str, Any] | None = None,
    summary: str = "something",
) -> Alert:
    entity = f"tm:{tm_id}" if tm_id and not job_id else f"job:{job_id}"
    return Alert(
        alert_id=alert_id,
        detector=detector,
        entity=entity,
        status=status,
        severity=severity,
        event_time_ms=t,
        summary=summary,
        job_id=job_id,
        job_name="orders-enrich" if job_id == JOB else None,
        tm_id=tm_id,
        evidence=evidence or {},
    )


def seed_001_chain() -> list[Alert]:
    """Seed 001: the heap leak, the YARN kill, the restarts that follow."""
    return [
        alert(
            "heap",
            "idle_heap_growth",
            T0,
            tm_id=TM,
            evidence={
                "growth_mb_per_h": 420.0,
                "jobs": {JOB: "orders-enrich"},
                "job_ids": [JOB],
            },
        ),
        alert(
            "lost",
            "tm_lost",
            T0 + 50 * MIN,
            severity=Severity.CRITICAL,
            tm_id=TM,
            evidence={"cause": "memory_kill", "exit_code": 143},
        ),
        alert(
            "storm",
            "restart_storm",
            T0 + 52 * MIN,
            job_id=JOB,
            evidence={"restarts": 3, "tm_ids": [TM]},
        ),
    ]


def test_links_come_from_the_alert_and_its_evidence() -> None:
    a = alert("x", "restart_storm", T0, job_id=JOB, evidence={"tm_ids": [TM], "job_ids": ["j2"]})
    assert links(a) == {f"job:{JOB}", f"tm:{TM}", "job:j2"}
    heap = seed_001_chain()[0]
    assert links(heap) == {f"tm:{TM}", f"job:{JOB}"}


def test_the_seed_001_chain_is_one_incident_rooted_in_the_heap_leak() -> None:
    c = Correlator()
    views = [c.observe(a) for a in seed_001_chain()]
    assert {v.incident_id for v in views} == {"heap"}
    assert [v.opened for v in views] == [True, False, False]
    assert [v.joined for v in views] == [False, True, True]
    last = views[-1]
    assert last.root_alert_id == "heap"
    assert [m.detector for m in last.members] == ["idle_heap_growth", "tm_lost", "restart_storm"]
    assert last.headline == (
        f"TaskManager {TM} killed for memory after its heap grew 420 MB/h with zero input: "
        "likely the Kafka source offsetsToCommit leak (FLINK-33231); job orders-enrich "
        "restarting (3 restarts)"
    )
    # tm_lost was critical: the incident's severity rose with it, and only with it.
    assert [v.severity_rose for v in views] == [False, True, False]
    assert last.severity is Severity.CRITICAL


def test_the_root_is_the_cause_even_when_the_effect_pages_first() -> None:
    # The JobManager's heartbeat timeout can be logged before the heap detector's
    # bucket closes: the leak is still the root.
    heap, lost, _ = seed_001_chain()
    lost = lost.model_copy(update={"event_time_ms": T0 - MIN})
    c = Correlator()
    c.observe(lost)
    view = c.observe(heap)
    assert view.incident_id == "lost"  # opened by the first alert
    assert view.root_alert_id == "heap"
    assert view.headline.startswith(f"TaskManager {TM} killed for memory")


def test_the_incident_resolves_with_its_last_member() -> None:
    c = Correlator()
    for a in seed_001_chain():
        c.observe(a)
    resolved = [
        alert("heap", "idle_heap_growth", T0 + 60 * MIN, status=AlertStatus.RESOLVED, tm_id=TM),
        alert("lost", "tm_lost", T0 + 61 * MIN, status=AlertStatus.RESOLVED, tm_id=TM),
    ]
    views = [c.observe(a) for a in resolved]
    assert [v.status for v in views] == [AlertStatus.FIRING, AlertStatus.FIRING]
    final = c.observe(
        alert("storm", "restart_storm", T0 + 70 * MIN, status=AlertStatus.RESOLVED, job_id=JOB)
    )
    assert final.status is AlertStatus.RESOLVED
    assert final.incident_id == "heap"
    assert c.open_incidents() == 0


def test_unrelated_alerts_stay_apart() -> None:
    c = Correlator()
    a = c.observe(alert("a", "checkpoint_failures", T0, job_id=JOB))
    b = c.observe(alert("b", "checkpoint_failures", T0 + MIN, job_id=OTHER_JOB))
    assert (a.incident_id, b.incident_id) == ("a", "b")
    assert len(b.members) == 1


def test_a_related_alert_after_the_window_opens_a_new_incident() -> None:
    c = Correlator(CorrelationParams(window_s=600))
    c.observe(alert("a", "checkpoint_failures", T0, job_id=JOB))
    c.observe(alert("a", "checkpoint_failures", T0 + MIN, job_id=JOB, status=AlertStatus.RESOLVED))
    inside = c.observe(alert("b", "restart_storm", T0 + 10 * MIN, job_id=JOB))
    assert inside.incident_id == "a"
    c.observe(alert("b", "restart_storm", T0 + 11 * MIN, job_id=JOB, status=AlertStatus.RESOLVED))
    later = c.observe(alert("c", "checkpoint_failures", T0 + 22 * MIN, job_id=JOB))
    assert later.incident_id == "c"
    assert later.opened


def test_an_open_incident_takes_related_alerts_however_long_it_fires() -> None:
    c = Correlator(CorrelationParams(window_s=60))
    c.observe(alert("a", "checkpoint_failures", T0, job_id=JOB))
    v = c.observe(alert("b", "restart_storm", T0 + 300 * MIN, job_id=JOB))
    assert v.incident_id == "a"


def test_disabled_correlation_keeps_every_alert_on_its_own() -> None:
    c = Correlator(CorrelationParams(enabled=False))
    views = [c.observe(a) for a in seed_001_chain()]
    assert [v.incident_id for v in views] == ["heap", "lost", "storm"]
    assert all(len(v.members) == 1 for v in views)


def test_max_members_caps_an_incident() -> None:
    c = Correlator(CorrelationParams(max_members=2))
    views = [c.observe(a) for a in seed_001_chain()]
    assert [v.incident_id for v in views] == ["heap", "heap", "storm"]


def test_a_restored_correlator_continues_the_same_incidents() -> None:
    chain = seed_001_chain()
    live = Correlator()
    history = [(a, live.observe(a).incident_id) for a in chain[:2]]
    restarted = Correlator()
    restarted.restore(history)
    assert restarted.observe(chain[2]).incident_id == live.observe(chain[2]).incident_id == "heap"


def test_headlines_of_the_other_roots() -> None:
    c = Correlator()
    crash = c.observe(
        alert(
            "jm",
            "jm_k8s_watch_crash",
            T0,
            severity=Severity.CRITICAL,
            evidence={"restored": "none", "job_ids": [JOB]},
        )
    )
    assert "Kubernetes watch error" in crash.headline and "WITHOUT state" in crash.headline
    storm = c.observe(alert("s", "restart_storm", T0 + MIN, job_id=JOB, evidence={"restarts": 2}))
    assert storm.incident_id == "jm"
    assert storm.headline.endswith("job orders-enrich restarting (2 restarts)")

    c2 = Correlator()
    c2.observe(
        alert(
            "g",
            "checkpoint_state_growth",
            T0,
            job_id=JOB,
            evidence={"size_bytes": 900 * 2**20},
        )
    )
    fatal = c2.observe(
        alert(
            "f",
            "jvm_fatal",
            T0 + MIN,
            tm_id=TM,
            job_id=JOB,
            evidence={"cause": "gc_overhead", "role": "taskmanager"},
        )
    )
    assert fatal.root_alert_id == "g"
    assert "900 MB" in fatal.headline and "died (gc overhead)" in fatal.headline
    assert "state backend" in fatal.headline


def test_a_new_detector_takes_its_place_in_the_story_from_its_class_alone(monkeypatch) -> None:
    # Adding a detector is one module and one registry line: correlation reads its causal
    # rank and its headline from the class's profile, with no edit of its own.
    from detectors import REGISTRY
    from detectors.base import Profile, Story
    from detectors.checkpoint_failures import CheckpointFailures

    def headline(story: Story) -> str:
        return f"the sink of job {story.root.job_id} stalled"

    class SinkStall(CheckpointFailures):
        name = "sink_stall"
        profile = Profile(causal_rank=0, headline=headline)  # before everything else

    monkeypatch.setitem(REGISTRY, "sink_stall", SinkStall)
    c = Correlator()
    c.observe(alert("restarts", "restart_storm", T0, job_id=JOB, evidence={"restarts": 4}))
    view = c.observe(alert("stall", "sink_stall", T0 + 60_000, job_id=JOB))
    assert view.root_alert_id == "stall"
    assert (
        view.headline == f"the sink of job {JOB} stalled; job orders-enrich restarting (4 restarts)"
    )


def test_a_rules_alert_joins_the_incident_of_its_job_as_any_detectors() -> None:
    # A rule has the default Profile: the middle of the causal order, no story words of
    # its own. It joins the chain's incident by its job and is told after the story.
    heap, lost, storm = seed_001_chain()
    rule = storm.model_copy(
        update={"alert_id": "rule", "detector": "expiry_burst", "event_time_ms": T0 + 3 * MIN}
    )
    c = Correlator()
    views = [c.observe(a) for a in (heap, lost, storm, rule)]
    assert views[-1].incident_id == "heap" and views[-1].joined
    assert views[-1].root_alert_id == "heap"
    assert views[-1].headline.endswith("; also expiry_burst")
    # Alone, it is its own root, told in its own summary.
    alone = Correlator().observe(rule)
    assert alone.root_alert_id == "rule" and alone.opened


def test_a_taskmanager_spelled_by_its_metrics_and_by_its_logs_is_one_incident() -> None:
    # The real tm_oom_2_3 run: the heap metrics label `localhost:38251_0bfbad`, the
    # JobManager's heartbeat line and the restart's cause `localhost:38251-0bfbad`.
    label, logged = "localhost:38251_0bfbad", "localhost:38251-0bfbad"
    c = Correlator()
    heap = c.observe(alert("heap", "idle_heap_growth", T0, tm_id=label))
    lost = c.observe(alert("lost", "tm_lost", T0 + MIN, tm_id=logged))
    storm = c.observe(
        alert("storm", "restart_storm", T0 + 2 * MIN, job_id=JOB, evidence={"tm_ids": [logged]})
    )
    assert {v.incident_id for v in (heap, lost, storm)} == {"heap"}
    assert links(heap.members[0]) == links(lost.members[1]) == {"tm:localhost_38251_0bfbad"}
    # The heap alert resolves in the logs' spelling (the runner learned it): its member
    # keeps the spelling it fired with, the label set the sinks identify it by.
    done = c.observe(
        alert("heap", "idle_heap_growth", T0 + 3 * MIN, tm_id=logged, status=AlertStatus.RESOLVED)
    )
    assert [m.tm_id for m in done.members] == [label, logged, None]
    # The root-cause line names the TaskManager once, as its logs spell it.
    assert label not in done.headline and logged in done.headline
