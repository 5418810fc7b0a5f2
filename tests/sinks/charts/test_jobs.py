"""Charts of the job and JobManager detectors (``sinks/charts/jobs.py``), from their evidence."""

from __future__ import annotations

from detectors.jm_k8s_watch_crash import JmK8sWatchCrashEvidence
from detectors.job_lost import JobLostEvidence
from detectors.restart_storm import RestartStormEvidence
from sinks.charts.jobs import jm_crash, job_lost, restarts
from tests.sinks.charts.alerts import jm_crash_alert, job_lost_alert, restart_alert


def labels(fig: object) -> list[str]:
    return [line.get_label() for ax in fig.axes for line in ax.get_lines()]  # type: ignore[attr-defined]


def test_restarts_are_counted_up_and_coloured_by_cause() -> None:
    alert = restart_alert()
    ev = RestartStormEvidence.model_validate(alert.evidence)
    fig = restarts(alert, ev)
    assert fig is not None
    causes = {m.cause.replace("_", " ") for m in ev.timeline}
    assert {f"restart: {c}" for c in causes} <= set(labels(fig))
    assert fig.axes[0].get_ylabel() == "restarts and failovers (count)"
    assert (
        fig.axes[0]
        .get_title(loc="left")
        .endswith(f"{ev.restarts} in the window, status {ev.status}")
    )
    assert restarts(alert, ev.model_copy(update={"timeline": []})) is None


def test_a_lost_job_shows_its_last_record_the_report_and_the_silence_deadline() -> None:
    alert = job_lost_alert()
    ev = JobLostEvidence.model_validate(alert.evidence)
    fig = job_lost(alert, ev)
    assert fig is not None
    drawn = labels(fig)
    assert drawn[0].startswith("last record: ")
    assert "TaskManager reported JobManager lost" in drawn
    assert f"silence deadline ({ev.silence_s:g} s)" in drawn and drawn[-1] == "this transition"
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["job", "TaskManagers"]
    assert fig.axes[0].get_title(loc="left").endswith(f"why: {ev.why}")


def test_a_jobmanager_crash_shows_the_crash_the_restart_and_the_jobs_back() -> None:
    alert = jm_crash_alert()
    ev = JmK8sWatchCrashEvidence.model_validate(alert.evidence)
    fig = jm_crash(alert, ev)
    assert fig is not None
    assert labels(fig) == [
        f"crash ({len(ev.crash_times_ms)} in the loop window)",
        f"JobManager started again (+{ev.jm_restart_s:.0f} s)",
        f"jobs back (+{ev.recovery_s:.0f} s)",
        "this transition",
    ]
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["crash", "JobManager", "jobs"]
    assert jm_crash(alert, ev.model_copy(update={"crash_times_ms": []})) is None
