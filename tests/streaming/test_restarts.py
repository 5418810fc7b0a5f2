"""When the queries restart: the back-off after a failure and the entity cap, as tables."""

from __future__ import annotations

import pytest

from streaming.restarts import (
    FULL_BACKOFF_MAX_S,
    Admission,
    Restart,
    Streak,
    admission,
    after_failure,
)

MAX, BACKOFF = 3, 10.0

#: (streak before, a full volume, ran for (None: did not start)) → the decision.
FAILURES = [
    # Counted failures wait the back-off; more than max_restarts in a row: give up.
    (Streak(), False, None, Restart(Streak(1, 0), False, BACKOFF)),
    (Streak(2, 0), False, 5.0, Restart(Streak(3, 0), False, BACKOFF)),
    (Streak(3, 0), False, 5.0, Restart(Streak(4, 0), True, BACKOFF)),
    (Streak(3, 0), False, None, Restart(Streak(4, 0), True, BACKOFF)),
    # A full volume is waited out, doubling up to the cap, never counted.
    (Streak(), True, None, Restart(Streak(0, 1), False, BACKOFF)),
    (Streak(2, 1), True, 5.0, Restart(Streak(2, 2), False, 2 * BACKOFF)),
    (Streak(3, 2), True, None, Restart(Streak(3, 3), False, 4 * BACKOFF)),
    (Streak(0, 9), True, 5.0, Restart(Streak(0, 10), False, FULL_BACKOFF_MAX_S)),
    # Another failure of running queries ends a streak of full volumes; of a start, not.
    (Streak(1, 4), False, 5.0, Restart(Streak(2, 0), False, BACKOFF)),
    (Streak(1, 4), False, None, Restart(Streak(2, 4), False, BACKOFF)),
    # Queries that ran a while start a new streak, of either kind.
    (Streak(3, 0), False, 301.0, Restart(Streak(1, 0), False, BACKOFF)),
    (Streak(1, 5), True, 301.0, Restart(Streak(0, 1), False, BACKOFF)),
    (Streak(3, 0), False, 300.0, Restart(Streak(4, 0), True, BACKOFF)),
]


@pytest.mark.parametrize(("streak", "full", "ran_s", "expected"), FAILURES)
def test_the_back_off_after_a_failure(
    streak: Streak, full: bool, ran_s: float | None, expected: Restart
) -> None:
    got = after_failure(streak, full=full, ran_s=ran_s, max_restarts=MAX, backoff_s=BACKOFF)
    assert got == expected


CAP, DWELL = 1000, 300.0
OPEN, CLOSED = Admission(), Admission(admit_new=False, switched_at=0.0)

#: (admission before, entities held, now) → the admission switched to (None: kept).
SWITCHES = [
    (OPEN, None, 1.0, None),  # no shard has said yet
    (OPEN, 1000, 1.0, None),  # at the cap, not past it
    (OPEN, 1001, 1.0, Admission(False, 1.0)),  # the first switch: at once
    (CLOSED, 950, 400.0, None),  # evictions under way: still closed above 90 %
    (CLOSED, 900, 400.0, None),  # 90 % exactly: still closed
    (CLOSED, 899, 400.0, Admission(True, 400.0)),
    (CLOSED, 100, 299.0, None),  # below, but within the dwell of the last switch
    (CLOSED, 100, 300.0, Admission(True, 300.0)),
    (Admission(True, 300.0), 1500, 599.0, None),  # a flood again, within the dwell
    (Admission(True, 300.0), 1500, 600.0, Admission(False, 600.0)),
    (CLOSED, 5000, 400.0, None),  # closed already: nothing to switch
    (OPEN, 10, 400.0, None),  # open already
]


@pytest.mark.parametrize(("before", "held", "now", "expected"), SWITCHES)
def test_the_entity_cap_switches_with_hysteresis_and_a_dwell(
    before: Admission, held: int | None, now: float, expected: Admission | None
) -> None:
    assert admission(before, held, CAP, DWELL, now) == expected
