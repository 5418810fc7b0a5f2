"""The page policy as a table: what the ledger holds in, where a delivery starts out."""

from __future__ import annotations

import pytest

from detectors import AlertStatus
from sinks.ledger.policy import (
    Earlier,
    admitted,
    behind,
    caught_up,
    closing_resolve,
    first_state,
    held_page,
    silence_of,
    too_old,
)
from tests.sinks.ledger.helpers import alert

F, E, R = AlertStatus.FIRING, AlertStatus.ESCALATED, AlertStatus.RESOLVED


def seen(*states: str, wanted: bool = True, routed_before: bool = False) -> Earlier:
    return Earlier(wanted, routed_before, frozenset(states))


# (why, status, notifies, silenced, old, what the sink got before, where it starts)
FIRST_STATE = [
    ("a new firing pages", F, True, False, False, seen(), "pending"),
    ("a silenced firing is held back", F, True, True, False, seen(), "silenced"),
    ("an old firing is stale", F, True, False, True, seen(), "stale"),
    (
        "a firing's own age decides, whatever came before",
        F,
        True,
        False,
        True,
        seen("delivered"),
        "stale",
    ),
    ("a sink that pages nobody gets what is silenced", F, False, True, False, seen(), "pending"),
    ("a sink that pages nobody gets what is old", F, False, False, True, seen(), "pending"),
    ("a route that does not take it", F, True, False, False, seen(wanted=False), "unrouted"),
    (
        "a route that took the incident before takes the rest",
        E,
        True,
        False,
        False,
        seen("delivered", wanted=False, routed_before=True),
        "pending",
    ),
    ("unrouted comes before silenced", F, True, True, False, seen(wanted=False), "unrouted"),
    ("a resolve follows a page", R, True, False, False, seen("delivered"), "pending"),
    (
        "a resolve follows a page still on its way",
        R,
        True,
        False,
        False,
        seen("sending"),
        "pending",
    ),
    ("a resolve follows a refused page", R, True, False, False, seen("failed"), "pending"),
    (
        "a resolve follows a page, silenced since or not",
        R,
        True,
        True,
        False,
        seen("delivered", "silenced"),
        "pending",
    ),
    ("a resolve follows a page however old", R, True, False, True, seen("pending"), "pending"),
    ("no lone resolve after a silence", R, True, False, False, seen("silenced"), "silenced"),
    (
        "no lone resolve of an incident withheld as old",
        R,
        True,
        False,
        False,
        seen("stale"),
        "stale",
    ),
    (
        "a resolve of an incident never sent, recent",
        R,
        True,
        False,
        False,
        seen("unrouted"),
        "pending",
    ),
    ("a resolve recorded silenced", R, True, True, False, seen(), "silenced"),
    (
        "an escalation follows a page however old",
        E,
        True,
        False,
        True,
        seen("delivered"),
        "pending",
    ),
    (
        "an escalation of an incident withheld as old, recent: news",
        E,
        True,
        False,
        False,
        seen("stale"),
        "pending",
    ),
    (
        "an escalation of an incident withheld as old, old itself",
        E,
        True,
        False,
        True,
        seen("stale"),
        "stale",
    ),
    ("an escalation under a silence", E, True, True, False, seen("silenced"), "silenced"),
    (
        "an escalation once the firing's silence is over",
        E,
        True,
        False,
        False,
        seen("silenced"),
        "pending",
    ),
]


@pytest.mark.parametrize(
    ("status", "notifies", "silenced", "old", "before", "expected"),
    [pytest.param(*case[1:], id=case[0]) for case in FIRST_STATE],
)
def test_where_a_delivery_starts(
    status: AlertStatus, notifies: bool, silenced: bool, old: bool, before: Earlier, expected: str
) -> None:
    got = first_state(status, notifies=notifies, silenced=silenced, old=old, seen=before)
    assert got == expected


# (why, the incident's status and state per transition so far, the one paged now)
HELD = [
    ("an open incident withheld whole pages its latest", [(F, "stale"), (E, "stale")], 1),
    ("one withheld firing pages it", [(F, "stale")], 0),
    ("a resolved incident does not page", [(F, "stale"), (R, "stale")], None),
    ("an incident paged already does not page again", [(F, "stale"), (E, "pending")], None),
    ("an incident silenced once does not page", [(F, "silenced"), (E, "stale")], None),
    ("nothing held, nothing paged", [], None),
]


@pytest.mark.parametrize(("transitions", "expected"), [pytest.param(*c[1:], id=c[0]) for c in HELD])
def test_what_an_incident_withheld_while_behind_pages_once_caught_up(
    transitions: list[tuple[AlertStatus, str]], expected: int | None
) -> None:
    assert held_page(transitions) == expected


def test_a_resolve_follows_its_incidents_silences_not_those_of_now() -> None:
    now = lambda a: "maintenance"  # noqa: E731
    assert silence_of(alert("a1", F), [], now) == "maintenance"
    assert silence_of(alert("a1", F), [], None) is None
    assert silence_of(alert("a1", R), ["night", "night"], None) == "night"  # everything was
    assert silence_of(alert("a1", R), ["night", None], now) is None  # something went out
    assert silence_of(alert("a1", R), [], now) == "maintenance"  # nothing before it


def test_a_resolve_is_final_and_the_limits_of_age() -> None:
    assert admitted(F, None) and admitted(E, F) and admitted(R, R)
    assert not admitted(F, R) and not admitted(E, R)
    assert too_old(10_000, 1_000, 5_000) and not too_old(10_000, 5_000, 5_000)
    assert not too_old(10_000, 0, None)
    assert behind(10_000, 1_000, 5_000) and not behind(10_000, None, 5_000)
    assert not behind(10_000, 1_000, None)
    assert caught_up(10_000, 5_000, 5_000) and not caught_up(10_000, 4_999, 5_000)
    assert not caught_up(10_000, None, 5_000) and not caught_up(10_000, 9_000, None)


def test_an_incident_no_detector_holds_is_closed_saying_why() -> None:
    closed = closing_resolve(alert("a1", E), 1_700_000_060_000, 7)
    assert closed.status is R
    assert closed.event_time_ms == 1_700_000_060_000
    assert closed.evidence == {"reason": "not raised again after a restart", "batch": 7}
    assert closed.summary.startswith("checkpoint_failures no longer holds this incident")
