"""Silences from the command line: stored beside the ledger, judged like the config's."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from conf.silences import parse_matchers
from sinks.silence_store import SilenceNotFoundError, SilenceStore

NOW = 1_795_000_000_000
HOUR = 3_600_000


def _add(store: SilenceStore, *texts: str, start: int = NOW, end: int = NOW + HOUR) -> str:
    return store.add(parse_matchers(list(texts)), texts, start, end, "deploy", "ana", NOW).id


def test_a_silence_survives_a_restart_and_expires_early_by_hand(tmp_path: Path) -> None:
    path = tmp_path / "silences.sqlite"
    first = SilenceStore(path)
    sid = _add(first, "job_name=pay-etl")
    first.close()
    again = SilenceStore(path)  # the job restarted, or another process
    (s,) = again.listing(NOW)
    assert (s.id, s.given, s.created_by, s.state(NOW)) == (
        sid,
        ("job_name=pay-etl",),
        "ana",
        "active",
    )
    (judged,) = again.in_force(NOW)
    assert judged.name == sid and judged.covers(NOW + HOUR - 1) and not judged.covers(NOW + HOUR)
    expired = again.expire(sid, NOW + 60_000)
    assert expired.state(NOW + 60_000) == "expired" and expired.expired_ms == NOW + 60_000
    assert again.listing(NOW + 60_000) == []
    assert [x.id for x in again.listing(NOW + 60_000, expired=True)] == [sid]
    assert again.in_force(NOW + 60_000) == ()  # no longer judged by the job


def test_a_stored_taskmanager_silence_covers_it_in_either_spelling_after_a_restart(
    tmp_path: Path,
) -> None:
    # `flinkwatch silence add tm_id=<id copied from a metrics panel>` at 3 a.m.; the
    # alerts carry the id as the TaskManager's logs spell it.
    from conf.silences import silence_for
    from detectors import Alert
    from tests.sinks.spellings import LOGGED, SCRAPED, tm_alert

    path = tmp_path / "silences.sqlite"
    first = SilenceStore(path)
    sid = _add(first, f"tm_id={SCRAPED}")
    first.close()
    again = SilenceStore(path)

    def about(tm_id: str) -> Alert:
        return tm_alert("a", "idle_heap_growth", tm_id, at=NOW)

    judged = again.in_force(NOW)
    assert silence_for(judged, about(LOGGED), "prod") == sid
    assert silence_for(judged, about(SCRAPED), "prod") == sid
    assert silence_for(judged, about("localhost:40004-6cf67b"), "prod") is None
    assert again.listing(NOW)[0].given == (f"tm_id={SCRAPED}",)  # as typed


def test_a_silence_that_starts_later_is_pending_until_then(tmp_path: Path) -> None:
    store = SilenceStore(tmp_path / "s.sqlite")
    _add(store, "detector=checkpoint_creep", start=NOW + HOUR, end=NOW + 2 * HOUR)
    (s,) = store.listing(NOW)
    assert s.state(NOW) == "pending" and s.state(NOW + HOUR) == "active"


def test_a_silence_needs_a_reason_and_an_end_after_its_start(tmp_path: Path) -> None:
    store = SilenceStore(tmp_path / "s.sqlite")
    m = parse_matchers(["job_id=abc"])
    with pytest.raises(ValueError, match="comment"):
        store.add(m, ("job_id=abc",), NOW, NOW + HOUR, "  ", "ana", NOW)
    with pytest.raises(ValueError, match="end after"):
        store.add(m, ("job_id=abc",), NOW, NOW, "why", "ana", NOW)


def test_expiring_an_unknown_id_names_it(tmp_path: Path) -> None:
    store = SilenceStore(tmp_path / "s.sqlite")
    with pytest.raises(SilenceNotFoundError, match="s-nothere"):
        store.expire("s-nothere", NOW)


def test_the_job_reads_the_store_from_another_thread_than_the_one_that_opened_it(
    tmp_path: Path,
) -> None:
    # The run builds its outputs on the main thread; Spark calls foreachBatch on another.
    store = SilenceStore(tmp_path / "s.sqlite")
    sid = _add(store, "job_name=pay-etl")
    seen: list[object] = []

    def batch() -> None:
        try:
            seen.append([s.name for s in store.in_force(NOW)])
        except Exception as exc:  # what the batch thread would log
            seen.append(exc)

    worker = threading.Thread(target=batch)
    worker.start()
    worker.join()
    assert seen == [[sid]]


def test_adding_again_under_a_given_id_adds_nothing(tmp_path: Path) -> None:
    # A Slack press records the id in the ledger first, then adds the silence under it.
    store = SilenceStore(tmp_path / "s.sqlite")
    matchers = parse_matchers(["job_id=7f"])
    first = store.add(
        matchers, ("job_id=7f",), NOW, NOW + HOUR, "press", "slack:U1", NOW, "s-0a0b0c0d"
    )
    again = store.add(
        matchers, ("job_id=7f",), NOW, NOW + 4 * HOUR, "press", "slack:U1", NOW + 1, "s-0a0b0c0d"
    )
    assert again == first and first.id == "s-0a0b0c0d"
    assert [s.id for s in store.listing(NOW)] == ["s-0a0b0c0d"]
    store.close()
