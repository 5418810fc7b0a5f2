"""Who is who in the fleet: the ids, names and deployment of every job and TaskManager.

Everything here is derived from the :class:`~lab.fleet.spec.FleetSpec`'s seed and a job's
index, so the same fleet has the same ids in every run and in every process that
simulates part of it.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from lab.fleet.spec import FleetSpec

# (job name, main topic, side topic, output topic); job i uses entry i % len.
_JOB_TEMPLATES: tuple[tuple[str, str, str, str], ...] = (
    ("orders-enrichment", "orders", "customers", "orders-enriched"),
    ("payments-fraud-scoring", "payments", "fraud-rules", "payment-scores"),
    ("clickstream-sessionizer", "clicks", "page-catalog", "sessions"),
    ("inventory-sync", "inventory-cdc", "warehouses", "inventory-snapshots"),
    ("ad-impressions-rollup", "ad-impressions", "campaigns", "impression-rollups"),
    ("shipment-tracking", "shipment-events", "carriers", "shipment-status"),
)

Layout = Literal["default", "json", "envelope"]
_LAYOUT_BY_SLOT: tuple[Layout, ...] = ("default", "json", "default", "envelope")
_K8S_SLOTS = frozenset({2, 3})  # the envelope job must run on Kubernetes (Fluent Bit)
_TELEGRAF_SLOT = 2
# Kubernetes generates pod-name suffixes from this alphabet (no vowels, no 0/1/3).
_K8S_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def digest(seed: int, *parts: object) -> bytes:
    """16 bytes derived from the seed and ``parts``: the root of every id and placement."""
    raw = "|".join(["flinkwatch-sim", str(seed), *map(str, parts)]).encode()
    return hashlib.blake2b(raw, digest_size=16).digest()


def hex32(seed: int, *parts: object) -> str:
    """32 lowercase hex digits derived from the seed and ``parts`` (Flink's ids look so)."""
    return digest(seed, *parts).hex()


def k8s_suffix(seed: int, n: int, *parts: object) -> str:
    """``n`` characters of a Kubernetes-generated name suffix, derived from ``parts``."""
    return "".join(_K8S_ALPHABET[b % len(_K8S_ALPHABET)] for b in digest(seed, *parts)[:n])


def job_id(spec: FleetSpec, index: int, run: int = 0) -> str:
    """Return the job id (32 lowercase hex) of job ``index``; it depends on ``spec.seed`` only.

    ``run`` counts submissions: a JobManager without high availability that restarts
    (``k8s_watch_crash_no_ha``) submits the job again under a new id, ``run=1``.
    """
    if run == 0:
        return hex32(spec.seed, "job", index)
    return hex32(spec.seed, "job", index, "run", run)


def job_name(spec: FleetSpec, index: int) -> str:
    """Return the name of job ``index``, e.g. ``"orders-enrichment-0"``."""
    return f"{_JOB_TEMPLATES[index % len(_JOB_TEMPLATES)][0]}-{index}"


def on_k8s(index: int) -> bool:
    """Whether job ``index`` runs on Kubernetes (else on YARN)."""
    return index % 4 in _K8S_SLOTS


def layout_of(index: int) -> Layout:
    """The log layout of job ``index``: Flink's default pattern, JSON, or a Fluent Bit envelope."""
    return _LAYOUT_BY_SLOT[index % 4]


def sends_telegraf(index: int) -> bool:
    """Whether job ``index``'s metrics come through Telegraf (else as canonical JSON)."""
    return index % 4 == _TELEGRAF_SLOT


def topics_of(index: int) -> tuple[str, str, str]:
    """The Kafka topics job ``index`` reads and writes: (main source, side source, sink)."""
    _, main, side, out = _JOB_TEMPLATES[index % len(_JOB_TEMPLATES)]
    return main, side, out


def tm_id(spec: FleetSpec, job_index: int, tm_index: int) -> str:
    """Return the resource id of TaskManager ``tm_index`` of job ``job_index``.

    A YARN container id (``container_e05_1699999999999_0042_01_000003``) for jobs on
    YARN, a pod name (``orders-enrichment-2-taskmanager-1-2``) for jobs on Kubernetes.
    Indexes from ``spec.tms_per_job`` on name the TaskManagers started to replace lost
    ones, in the order they were started (the next container or pod of the same
    ResourceManager).
    """
    if tm_index < 0:
        msg = f"tm_index must be >= 0, got {tm_index}"
        raise ValueError(msg)
    if on_k8s(job_index):
        return f"{job_name(spec, job_index)}-taskmanager-1-{tm_index + 1}"
    # One YARN cluster for the fleet; each job is an application on it. Container 1 is the
    # ApplicationMaster (the JobManager), TaskManagers come after.
    # The ResourceManager started some time in 2020-2022, before any simulated event.
    cluster_ts = 1_600_000_000_000 + int.from_bytes(digest(spec.seed, "rm")[:6]) % 63_072_000_000
    return f"container_e05_{cluster_ts}_{40 + job_index:04d}_01_{tm_index + 2:06d}"
