"""Silences and the ledger, in Slack: a press never without its record; no page left open.

The press is recorded in the alert ledger (``<state_dir>/ledger.sqlite``) and its silence
added to the command line's silence store (``silences.sqlite``): two SQLite files, two
locks. Here the ledger's volume really fills up (a tmpfs, :mod:`tests.volumes`) and the
store's lock is really held by another connection (as ``flinkwatch silence add`` holds it),
with the rest as in :mod:`tests.sinks.inbound.test_slack_actions`: the local Slack emulator, the
endpoint over HTTP, transitions recorded as the running job records them.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from conf.silences import parse_matchers
from sinks.inbound.slack_actions import SILENCE_1H
from sinks.silence_store import SilenceStore, StoredSilence
from tests.sinks.inbound.test_slack_actions import (
    CHANNEL,
    JOB,
    OTHER_JOB,
    Rig,
    rig_at,
    row,
    text_of,
    wait_until,
)
from tests.volumes import fill, tiny_volume


def stored(path: Path) -> list[StoredSilence]:
    store = SilenceStore(path)
    try:
        return store.listing(int(time.time() * 1000))
    finally:
        store.close()


def recorded(rig: Rig, incident: str) -> list[str]:
    """The ids of the silences the ledger has recorded for presses on the incident."""
    acts = rig.ledger.recall("slack", f"acts:{incident}") or {}
    return [s["id"] for s in acts.get("silences", [])]


def paged(rig: Rig, alert_id: str) -> dict[str, Any]:
    """Record a firing; its message once the ledger knows it (a press can find it)."""
    m = rig.page(alert_id)
    wait_until(lambda: rig.ledger.last_delivered("slack", alert_id) is not None)
    wait_until(lambda: rig.ledger.recall("slack", alert_id) is not None)
    return m


def test_a_press_the_ledger_could_not_record_adds_no_silence_and_pressing_again_adds_one(
    tmp_path: Path,
) -> None:
    with (
        tiny_volume(tmp_path / "state", size_kb=2048) as state,
        rig_at(state, tmp_path / "silences.sqlite") as rig,
    ):
        m = paged(rig, "inc-1")
        filler = fill(state)  # the ledger's volume is full: its next commit fails
        status, _ = rig.emu.click(CHANNEL, m["ts"], SILENCE_1H, user="U123")
        assert status == 500
        assert rig.sample("flinkwatch_slack_actions_total", outcome="error") == 1
        assert recorded(rig, "inc-1") == []
        filler.free()
        # "Press again", as the endpoint answered: one silence, the one recorded.
        assert rig.emu.click(CHANNEL, m["ts"], SILENCE_1H, user="U123") == (200, "")
        (s,) = stored(rig.silences_path)
        assert recorded(rig, "inc-1") == [s.id]
        assert s.given == (f"job_id={JOB}",)
        wait_until(lambda: "silenced by <@U123> until" in text_of(rig.now(m["ts"])))
        assert f"`{s.id}`" in text_of(rig.now(m["ts"]))


def test_a_silence_the_store_could_not_add_takes_its_press_back(tmp_path: Path) -> None:
    with (
        tiny_volume(tmp_path / "silences", size_kb=512) as silences,
        rig_at(tmp_path / "state", silences / "silences.sqlite") as rig,
    ):
        m = paged(rig, "inc-1")
        filler = fill(silences)
        status, _ = rig.emu.click(CHANNEL, m["ts"], SILENCE_1H, user="U123")
        assert status == 500
        # The record does not say "silenced" while nothing is: the press is taken back.
        assert recorded(rig, "inc-1") == []
        filler.free()
        assert stored(rig.silences_path) == []
        assert rig.emu.click(CHANNEL, m["ts"], SILENCE_1H, user="U123") == (200, "")
        (s,) = stored(rig.silences_path)
        assert recorded(rig, "inc-1") == [s.id]
        wait_until(lambda: f"`{s.id}`" in text_of(rig.now(m["ts"])))


def test_a_busy_silence_store_does_not_hold_the_ledger_back(tmp_path: Path) -> None:
    # `flinkwatch silence add` (or any writer) holds the store's lock while a press
    # arrives: the press waits for the store, the running job's batches do not.
    with rig_at(tmp_path / "state", tmp_path / "silences.sqlite") as rig:
        m = paged(rig, "inc-1")
        other = sqlite3.connect(rig.silences_path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        answers: list[tuple[int, str] | OSError] = []

        def click() -> None:
            try:
                answers.append(rig.emu.click(CHANNEL, m["ts"], SILENCE_1H, "U123", timeout_s=120))
            except OSError as exc:  # the endpoint gave up on the request
                answers.append(exc)

        press = threading.Thread(target=click)
        press.start()
        try:
            # The press is recorded and waits for the store ...
            wait_until(lambda: recorded(rig, "inc-1") or not press.is_alive())
            assert recorded(rig, "inc-1"), answers
            # ... while a batch records its transitions.
            rig.record(row("inc-2", job=OTHER_JOB))
            states = {d.key: d.state for d in rig.ledger.deliveries(None)}
            assert states["inc-2:firing"] in ("pending", "sending", "delivered")
        finally:
            other.execute("ROLLBACK")
            other.close()
            press.join()
        assert answers == [(200, "")]
        (s,) = stored(rig.silences_path)
        assert recorded(rig, "inc-1") == [s.id]
        wait_until(lambda: f"`{s.id}`" in text_of(rig.now(m["ts"])))


def test_an_escalation_paged_after_a_silence_ended_is_resolved_in_slack(tmp_path: Path) -> None:
    # The job is silenced (as `flinkwatch silence add` silences it) when its incident
    # fires; the silence ends, the incident escalates and pages; then it resolves: the
    # escalation's message must not stay red forever.
    with rig_at(tmp_path / "state", tmp_path / "silences.sqlite") as rig:
        store = SilenceStore(rig.silences_path)
        now = int(time.time() * 1000)
        s = store.add(
            parse_matchers([f"job_id={JOB}"]),
            (f"job_id={JOB}",),
            now,
            now + 3_600_000,
            "upgrade",
            "ana",
            now,
        )
        rig.record(row("inc-1"))
        store.expire(s.id, int(time.time() * 1000))
        store.close()
        rig.record({**row("inc-1", status="escalated"), "severity": "critical"})
        m = wait_until(lambda: rig.message_of("inc-1"))
        rig.record({**row("inc-1", status="resolved"), "severity": "critical"})

        def settled() -> dict[str, str] | None:
            states = {d.key: d.state for d in rig.ledger.deliveries(None)}
            done = states.get("inc-1:resolved") not in (None, "pending", "sending")
            return states if done else None

        states = wait_until(settled)
        assert states == {
            "inc-1:firing": "silenced",
            "inc-1:escalated:critical": "delivered",
            "inc-1:resolved": "delivered",
        }
        assert rig.now(m["ts"])["updates"] == 1  # the escalation's message, now resolved
        assert len(rig.emu.messages(CHANNEL)) == 1
