"""The root-cause line of every detector: what is not known is left out, never a placeholder."""

from __future__ import annotations

import re

import pytest

from detectors import REGISTRY, AlertStatus, Severity
from detectors.base import Member, Story
from detectors.story import job, mb, num, tm

#: What a placeholder looks like once it reaches a person: a lone ``?``, ``None``, ``nan``.
PLACEHOLDER = re.compile(r"(?<![\w?])\?(?![\w?])|\bNone\b|\bnan\b")


def member(detector: str, **fields: object) -> Member:
    base: dict[str, object] = {
        "alert_id": f"{detector}-1",
        "detector": detector,
        "entity": "cluster",
        "status": AlertStatus.FIRING,
        "severity": Severity.WARNING,
        "event_time_ms": 1_000,
        "first_ms": 1_000,
        "summary": "something happened",
    }
    return Member.model_validate({**base, **fields})


KNOWN = {"job_id": "ab" * 16, "job_name": "orders", "tm_id": "tm-1", "host": "worker-7"}


@pytest.mark.parametrize("ids", [KNOWN, {}], ids=["ids_known", "nothing_known"])
@pytest.mark.parametrize("detector", sorted(REGISTRY))
def test_no_headline_shows_a_placeholder_whatever_the_evidence_lacks(
    detector: str, ids: dict[str, str]
) -> None:
    # Evidence of an older release, a surge before the window is covered, an alert whose
    # entity has no id: each part of the story is told from what there is.
    cls = REGISTRY[detector]
    for evidence in ({}, {"size_bytes": None, "growth_mb_per_h": "n/a", "restarts": None}):
        root = member(detector, evidence=evidence, **ids)
        dead = member("tm_lost", evidence={}, **ids)
        for story in (
            Story(root=root, first={detector: root}),
            Story(root=root, first={detector: root}, death="killed for memory", dead=dead),
        ):
            told_by = cls.profile
            texts = [told_by.headline(story), told_by.aftermath(root), told_by.death(root)]
            for text in texts:
                told = text[1] if isinstance(text, tuple) else text
                assert told is None or not PLACEHOLDER.search(told), (detector, told)


def test_the_helpers_leave_out_what_is_not_known() -> None:
    assert num(None) is None and num("3") is None and num(True) is None
    assert num(2.5) == "2.5" and num(1234, " MB/h") == "1,234 MB/h"
    assert mb(None) is None and mb(3 * 2**20) == "3 MB"
    assert job(None) == "a job" and job(member("x")) == "a job"
    assert job(member("x", job_id="ab" * 16)) == f"job {'ab' * 16}"
    assert job(member("x", job_id="ab" * 16, job_name="orders")) == "job orders"
    assert tm(member("x")) == "a TaskManager" and tm(None, "JobManager") == "a JobManager"
    assert tm(member("x", host="worker-7")) == "TaskManager worker-7"
