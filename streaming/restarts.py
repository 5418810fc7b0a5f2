"""When the queries are restarted: after a failure, and when the entity cap switches.

Two pure policies the supervision (:mod:`streaming.supervise`) and the pipeline
(:meth:`streaming.app.Pipeline.admission`) apply: what happened and the time in, a decision
out. No clock is read here and nothing is logged, so each is tested as a table of cases.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Longest wait between two starts while a volume is full.
FULL_BACKOFF_MAX_S = 60.0
#: Queries that ran this long before failing start a new streak of failures.
STREAK_RESET_S = 300.0
#: Below this share of ``spark.max_entities`` new entities are admitted again.
READMIT_SHARE = 0.9


@dataclass(frozen=True)
class Streak:
    """Failures in a row: counted ones, and ones because a volume is full (not counted)."""

    failures: int = 0
    full: int = 0


@dataclass(frozen=True)
class Restart:
    """What to do after a failure.

    Attributes:
        streak: The failures in a row, this one included.
        give_up: More than ``spark.max_restarts`` failures in a row: stop for good.
        wait_s: The back-off before the next start.
    """

    streak: Streak
    give_up: bool
    wait_s: float


def after_failure(
    streak: Streak,
    *,
    full: bool,
    ran_s: float | None,
    max_restarts: int,
    backoff_s: float,
) -> Restart:
    """The back-off after the queries failed to start (``ran_s`` None) or failed running.

    A full volume is waited out: not counted against ``max_restarts``, the wait doubling
    from ``backoff_s`` up to :data:`FULL_BACKOFF_MAX_S`, until there is space. Any other
    failure waits ``backoff_s`` and counts; after ``max_restarts`` in a row, give up.
    Queries that ran :data:`STREAK_RESET_S` before failing start a new streak; a failure
    of another kind while running ends a streak of full volumes.
    """
    if ran_s is not None and ran_s > STREAK_RESET_S:
        streak = Streak()
    if full:
        n = streak.full + 1
        wait = min(backoff_s * 2 ** (n - 1), FULL_BACKOFF_MAX_S)
        return Restart(Streak(streak.failures, n), give_up=False, wait_s=wait)
    failures = streak.failures + 1
    after = Streak(failures, streak.full if ran_s is None else 0)
    return Restart(after, give_up=failures > max_restarts, wait_s=backoff_s)


@dataclass(frozen=True)
class Admission:
    """Whether new entities are admitted, and when that last switched.

    Attributes:
        admit_new: False while the detect query holds ``spark.max_entities``: an entity
            without saved state gets none.
        switched_at: When ``admit_new`` last switched (monotonic seconds; ``None``: never).
    """

    admit_new: bool = True
    switched_at: float | None = None


def admission(
    current: Admission, held: int | None, cap: int, dwell_s: float, now: float
) -> Admission | None:
    """The admission to switch to, or ``None`` to keep ``current``.

    ``held`` entities (``None``: not counted yet). Past ``cap`` new entities are refused;
    below :data:`READMIT_SHARE` of it they are admitted again. A switch restarts the
    queries, so after one the next waits ``dwell_s``: a count hovering at the cap cannot
    restart them at every check.
    """
    if held is None:
        return None
    refuse = current.admit_new and held > cap
    admit = not current.admit_new and held < READMIT_SHARE * cap
    if not (refuse or admit):
        return None
    if current.switched_at is not None and now - current.switched_at < dwell_s:
        return None
    return Admission(admit_new=admit, switched_at=now)
