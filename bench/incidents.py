"""The steady runs' incidents: every kind the simulator has, when to inject them, who paged.

:func:`plan` spreads incidents of every :data:`lab.fleet.spec.INCIDENT_KINDS` kind (plus
extra checkpoint expiries, for a distribution) over a fleet and a run, within the
simulator's rules: one failover kind per job (here: one incident per job), the
Kubernetes watch crashes on a Kubernetes job running Flink 1.10/1.11, ``late_acks_skew``
only with two TaskManagers or more. Slow kinds start right after the warm-up, the others
are spread over the rest of the run so that each can page before it ends.

:func:`account` reads what flinkwatch did about them: per incident its first page (the
Slack message that arrived first for any alert of the incident's job or its TaskManagers
with an event time at or after the onset, whichever detector sent it; a correlated alert
that arrived as a thread reply of an earlier message counts as that message), the alert
latency of that page (arrival minus the alert's event time), misses by kind and false
pages (alerts on jobs without an incident, or before an incident's onset).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from detectors.tm_ids import tm_entity, tm_key
from lab.fleet import FleetSpec, Incident, job_id, tm_id
from lab.fleet.spec import INCIDENT_KINDS

#: Flink versions of the steady fleets, job ``i`` runs ``VERSIONS[i % 8]``: a quarter of
#: each of 1.11, 1.14, 1.18 and 2.0 (as the simulator's default), laid out so that the
#: Kubernetes jobs ``i % 8`` in 2 (default layout) and 3 (Fluent Bit envelope) run 1.11,
#: which the watch crashes need (1.10.2-1.12.1 die of a ``too old resource version``).
VERSIONS: tuple[str, ...] = ("1.14", "1.18", "1.11", "1.11", "1.18", "2.0", "2.0", "1.14")

#: Fleet settings that make the slow incidents develop within a run of minutes (the
#: simulator's defaults are for hours): a creep of 12 % per checkpoint (the timeout in
#: about 8 minutes), an idle leak of 1,200 MB/h (as bench/peer.py), a state that fills
#: the heap 5 minutes after its onset (the TaskManager then thrashes and dies).
FLEET: dict[str, float] = {
    "creep_per_checkpoint": 0.12,
    "heap_leak_mb_per_h": 1200.0,
    "state_growth_fill_s": 300.0,
}

#: Detector parameters of the steady runs: windows a run of minutes can fill, as
#: bench/peer.py's (the production defaults need hours of history: idle_heap_growth a 1 h
#: window of 5-minute buckets, checkpoint_creep 20 checkpoints and a 30 s floor against a
#: 600 s timeout, checkpoint_state_growth a 2 h window). The other detectors keep their
#: defaults.
DETECTORS: dict[str, dict[str, Any]] = {
    "checkpoint_creep": {
        "window": 24,
        "min_samples": 12,
        "checkpoint_timeout_s": 60,
        "min_duration_ms": 6000,
    },
    "idle_heap_growth": {"bucket_s": 60, "window_s": 360, "min_buckets": 5},
    "checkpoint_state_growth": {"window_s": 300},
    # A 45 s warm-up: the jobs start with the run, and the background's first decoder error
    # (lab/fleet/background.py) comes within 40 s of a job's start, so it is learned.
    "new_error_pattern": {"learn_s": 45},
}

#: About how long after its onset each kind pages (seconds of event time, from the peer
#: runs and the simulator's timings): a kind is given an onset at least this long before
#: the end of the input. Whichever detector pages first counts.
PAGE_WITHIN_S: dict[str, float] = {
    # A checkpoint pending past half its 60 s timeout (checkpoint_creep), seen with the
    # job's next record.
    "checkpoint_expiry": 60,
    "checkpoint_declines": 60,
    "late_acks_skew": 60,
    # The trend over 12+ checkpoints of +12 % each.
    "checkpoint_creep": 300,
    # 5 one-minute buckets of a rising post-GC floor with zero throughput.
    "idle_heap_leak": 420,
    # The size trend over checkpoint_state_growth's 300 s window, or the kill at 300 s.
    "state_growth": 360,
    "tm_memory_kill": 30,
    "tm_heap_oom": 90,
    "tm_direct_oom": 90,
    "tm_metaspace_oom": 60,
    "k8s_watch_crash": 30,
    "k8s_watch_crash_no_ha": 30,
    "restart_storm": 150,
    # The third lookup failure (every 5-40 s) within the window.
    "new_error": 90,
}

#: Kinds injected once each, slowest first; more ``checkpoint_expiry`` fill up the count.
KINDS: tuple[str, ...] = tuple(sorted(INCIDENT_KINDS, key=lambda k: (-PAGE_WITHIN_S.get(k, 60), k)))
#: Replacement TaskManagers are numbered from ``tms_per_job`` on (a few per incident).
_SPARE_TMS = 16


def spec(jobs: int, tms: int, incidents: Iterable[Incident], seed: int) -> FleetSpec:
    """The steady runs' fleet: :data:`VERSIONS`, :data:`FLEET`, the incidents."""
    return FleetSpec(
        jobs=jobs,
        tms_per_job=tms,
        seed=seed,
        flink_versions=VERSIONS,
        incidents=tuple(incidents),
        **FLEET,  # type: ignore[arg-type]
    )


def _k8s_ok(index: int) -> bool:
    """Job ``index`` can take a watch crash: on Kubernetes, Flink 1.10/1.11."""
    return index % 4 in (2, 3) and VERSIONS[index % len(VERSIONS)] in ("1.10", "1.11")


#: Which jobs a kind goes to, best first. The watch crashes: the simulator's rule, the HA
#: crash on an envelope job (its JobManager's lines name their host, which keeps two
#: crashes apart in the one cluster-scoped detector), the other on a default-layout one.
#: A metaspace OOM shows only in the TaskManager's own fatal lines, which name no process:
#: the shipper must say whose they are (a Fluent Bit envelope names the pod), so it goes to
#: an envelope job (``i % 4 == 3``; measured: on the JSON layout, whose simulated records
#: carry no file path, nothing pages for it).
JOBS_FOR: dict[str, tuple[Callable[[int], bool], ...]] = {
    # A job's own code names its job only in the MDC of a JSON layout on 1.19+ (``i % 8 == 5``).
    "new_error": (lambda i: i % 4 == 1 and VERSIONS[i % len(VERSIONS)] == "2.0",),
    "k8s_watch_crash": (lambda i: _k8s_ok(i) and i % 4 == 3, _k8s_ok),
    "k8s_watch_crash_no_ha": (lambda i: _k8s_ok(i) and i % 4 == 2, _k8s_ok),
    "tm_metaspace_oom": (lambda i: i % 4 == 3,),
}


def plan(
    jobs: int,
    tms: int,
    count: int,
    run_s: float,
    *,
    warmup_s: float = 60.0,
    slow_onset_s: float = 30.0,
    extra: Iterable[tuple[str, float]] = (),
) -> tuple[list[Incident], list[str]]:
    """Incidents for a fleet of ``jobs`` over ``run_s`` seconds of input.

    Every kind once (slowest first), then ``checkpoint_expiry`` up to ``count``, each on a
    job of its own (at most three quarters of the fleet: the rest stays healthy, to catch
    false pages); ``extra`` adds ``(kind, onset_s)`` pairs (the restart phase's). A kind
    that needs longer to page than the run leaves after the warm-up starts at
    ``slow_onset_s`` (its page comes minutes later, well after the warm-up); the others
    are spread from ``warmup_s`` on so that each has :data:`PAGE_WITHIN_S` before the end.

    Returns:
        The incidents and the kinds that did not fit the fleet (too few jobs, or no job
        a kind may run on).
    """
    room = max(0, min(count, (jobs * 3) // 4 or 1))
    kinds = [k for k in KINDS if k != "late_acks_skew" or tms >= 2]
    skipped = [k for k in KINDS if k not in kinds]
    wanted = kinds[:room] + ["checkpoint_expiry"] * max(0, room - len(kinds))
    skipped += kinds[room:]
    wanted += [k for k, _ in extra]
    used: set[int] = set()
    stride = jobs / max(1, len(wanted))

    def free_job(n: int, ok: Callable[[int], bool]) -> int | None:
        """The free job nearest to position ``n`` of the spread that ``ok`` accepts."""
        near = round(n * stride)
        for d in range(jobs):
            for i in (near + d, near - d):
                if 0 <= i < jobs and i not in used and ok(i):
                    used.add(i)
                    return i
        return None

    # The kinds with fewest jobs to go to first.
    order = sorted(range(len(wanted)), key=lambda n: wanted[n] not in JOBS_FOR)
    assigned: dict[int, int] = {}
    for n in order:
        for ok in JOBS_FOR.get(wanted[n], (lambda _i: True,)):
            i = free_job(n, ok)
            if i is not None:
                assigned[n] = i
                break
        else:
            skipped.append(wanted[n])
    out: list[Incident] = []
    extra_onsets = [t for _, t in extra]
    main = sorted(n for n in assigned if n < len(wanted) - len(extra_onsets))
    # Onsets: the slow kinds at the warm-up; the rest spread evenly, each early enough.
    spread = [n for n in main if run_s - PAGE_WITHIN_S[wanted[n]] - 30 > warmup_s + 30]
    early = 0
    for n in main:
        kind = wanted[n]
        latest = run_s - PAGE_WITHIN_S[kind] - 30
        if n in spread:
            pos = spread.index(n)
            onset = warmup_s + (latest - warmup_s) * (pos + 0.5) / len(spread)
        else:
            # Two seconds apart: a JobManager crash is told from another by its time.
            onset = min(warmup_s, slow_onset_s) + 2 * early
            early += 1
        out.append(Incident(kind, assigned[n], round(onset, 1)))  # type: ignore[arg-type]
    for k, n in enumerate(range(len(wanted) - len(extra_onsets), len(wanted))):
        if n in assigned:
            out.append(Incident(wanted[n], assigned[n], extra_onsets[k]))  # type: ignore[arg-type]
    return sorted(out, key=lambda c: (c.onset_s, c.job_index)), skipped


# --- who paged ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Fleet:
    """Maps the ids a flinkwatch alert may name to the fleet's job indexes."""

    jobs: dict[str, int]
    tms: dict[str, int]

    @staticmethod
    def of(fleet: FleetSpec) -> Fleet:
        """Every job id (both submissions) and TaskManager id (spares too) of ``fleet``."""
        jobs: dict[str, int] = {}
        tms: dict[str, int] = {}
        for i in range(fleet.first_job, fleet.first_job + fleet.jobs):
            jobs[job_id(fleet, i)] = jobs[job_id(fleet, i, run=1)] = i
            for k in range(fleet.tms_per_job + _SPARE_TMS):
                # As spelled, and as the alert's entity keys it (detectors.tm_ids).
                tms[tm_id(fleet, i, k)] = tms[tm_key(tm_id(fleet, i, k))] = i
        return Fleet(jobs, tms)

    def job_of(self, alert: dict[str, Any]) -> int | None:
        """The job an alert is about: its job id, TaskManager, entity or link fields."""
        if alert.get("job_id") in self.jobs:
            return self.jobs[alert["job_id"]]
        if alert.get("tm_id") in self.tms:
            return self.tms[alert["tm_id"]]
        entity = str(alert.get("entity", ""))
        _, _, ident = entity.partition(":")
        if ident in self.jobs:
            return self.jobs[ident]
        if ident in self.tms:
            return self.tms[ident]
        ev = alert.get("evidence") or {}
        for j in ev.get("job_ids") or ():
            if j in self.jobs:
                return self.jobs[j]
        for t in ev.get("tm_ids") or ():
            if t in self.tms:
                return self.tms[t]
        return None


def event_s(alert: dict[str, Any]) -> float:
    """An alert record's event time (epoch seconds)."""
    return dt.datetime.fromisoformat(str(alert["event_time"]).replace("Z", "+00:00")).timestamp()


def percentiles(xs: Iterable[float]) -> dict[str, float | int | None]:
    """p50, p95, p99, max and n of ``xs`` (nearest rank)."""
    s = sorted(xs)
    if not s:
        return {"p50": None, "p95": None, "p99": None, "max": None, "n": 0}

    def q(p: float) -> float:
        return round(s[min(len(s) - 1, int(p * len(s)))], 2)

    return {"p50": q(0.5), "p95": q(0.95), "p99": q(0.99), "max": round(s[-1], 2), "n": len(s)}


def account(
    fleet: FleetSpec,
    start_ms: int,
    alerts: list[dict[str, Any]],
    arrivals: dict[str, tuple[float, bool]],
    end_s: float | None = None,
) -> dict[str, Any]:
    """Per incident its first page; latency percentiles, per kind, misses, false pages.

    Args:
        fleet: The run's fleet with its incidents.
        start_ms: Event (and wall) time of the first simulated second.
        alerts: The firing transitions of the alert file, in order.
        arrivals: Per alert id, when its firing message reached the Slack emulator (epoch
            seconds) and whether it was a thread reply.
        end_s: When the simulated fleet stopped (seconds after ``start_ms``): a page of a
            job without an incident whose event time is later (a checkpoint still pending
            when every job fell silent, seen through the ticks) is about the end of the
            input, listed under ``after_input_end``, not as a false page.

    Returns:
        ``per_incident`` (one row each), ``alert_latency_s``, ``by_kind``, ``misses``,
        ``false_pages``, ``after_input_end``, and the ``deciding`` alert of each paged
        incident (for the stages).
    """
    ids = Fleet.of(fleet)
    onset = {c.job_index: start_ms / 1000 + c.onset_s for c in fleet.incidents}
    kind_of = {c.job_index: c.kind for c in fleet.incidents}
    mine: dict[int, list[dict[str, Any]]] = {}
    false_pages: list[dict[str, Any]] = []
    after_end: list[dict[str, Any]] = []
    # A JobManager crash is a cluster-scoped alert: its crash time (the incident's onset,
    # to the millisecond, in the simulator) says whose it is.
    crashes = {
        round(start_ms + c.onset_s * 1000): c.job_index
        for c in fleet.incidents
        if c.kind.startswith("k8s_watch_crash")
    }

    # idle_heap_leak leaks on TaskManager 0 (and whatever replaces it); the job's other
    # TaskManagers are idle too, with a flat heap floor: an alert about them is false.
    flat = {
        tm_entity(tm_id(fleet, c.job_index, k))
        for c in fleet.incidents
        if c.kind == "idle_heap_leak"
        for k in range(1, fleet.tms_per_job)
    }

    def job_of(a: dict[str, Any]) -> int | None:
        if not str(a.get("entity", "")).startswith(("job:", "tm:")):
            for t in (a.get("evidence") or {}).get("crash_times_ms") or ():
                for onset_ms, j in crashes.items():
                    if abs(int(t) - onset_ms) <= 2000:
                        return j
        return ids.job_of(a)

    for a in alerts:
        j = job_of(a)
        t = event_s(a)
        idle_flat = a["detector"] == "idle_heap_growth" and a["entity"] in flat
        if j is not None and j in onset and t >= onset[j] - 0.001 and not idle_flat:
            mine.setdefault(j, []).append(a)
            continue
        arrival = arrivals.get(a["alert_id"])
        why = (
            "a TaskManager of the leaking job whose heap does not leak"
            if idle_flat
            else "before the onset"
            if j in onset
            else "no incident on this job"
        )
        after = end_s is not None and t - start_ms / 1000 >= end_s and not idle_flat
        (after_end if after else false_pages).append(
            {
                "detector": a["detector"],
                "entity": a["entity"],
                "job_index": j,
                "incident": kind_of.get(j) if j is not None else None,
                "why": "after the fleet stopped" if after else why,
                "event_s": round(t - start_ms / 1000, 1),
                "paged": arrival is not None,
                "summary": str(a.get("summary", ""))[:160],
            }
        )
    rows: list[dict[str, Any]] = []
    deciding: list[dict[str, Any]] = []
    for c in fleet.incidents:
        got = mine.get(c.job_index, [])
        t0 = onset[c.job_index]
        paged = [(arrivals[a["alert_id"]], a) for a in got if a["alert_id"] in arrivals]
        row: dict[str, Any] = {
            "kind": c.kind,
            "job_index": c.job_index,
            "job_id": job_id(fleet, c.job_index),
            "onset_s": c.onset_s,
            "alerts": sorted({a["detector"] for a in got}),
            "detected_s": round(min(event_s(a) for a in got) - t0, 1) if got else None,
        }
        if paged:
            (at, reply), a = min(paged, key=lambda p: p[0][0])
            row.update(
                {
                    "paged_by": a["detector"],
                    "entity": a["entity"],
                    "thread_reply": reply,
                    "decided_s": round(event_s(a) - t0, 1),
                    "paged_s": round(at - t0, 1),
                    "latency_s": round(at - event_s(a), 3),
                }
            )
            deciding.append({**a, "_arrival": at, "_kind": c.kind})
        else:
            row["missed"] = "detected, not paged" if got else "no alert"
        rows.append(row)
    lat = [r["latency_s"] for r in rows if "latency_s" in r]
    kinds = sorted({c.kind for c in fleet.incidents})
    by_kind = {
        k: {
            **percentiles(r["latency_s"] for r in rows if r["kind"] == k and "latency_s" in r),
            "incidents": sum(1 for r in rows if r["kind"] == k),
            "paged_s_after_onset": [r.get("paged_s") for r in rows if r["kind"] == k],
            "paged_by": sorted({r["paged_by"] for r in rows if r["kind"] == k and "paged_by" in r}),
        }
        for k in kinds
    }
    misses: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if "missed" in r:
            misses.setdefault(r["kind"], []).append(
                {"job_index": r["job_index"], "onset_s": r["onset_s"], "why": r["missed"]}
            )
    return {
        "per_incident": rows,
        "alert_latency_s": percentiles(lat),
        "by_kind": by_kind,
        "misses": misses,
        "false_pages": false_pages,
        "after_input_end": after_end,
        "deciding": deciding,
    }
