"""Which sinks a newly recorded transition goes to: the page policy, pure.

Inputs in, a decision out: no SQLite, no sink. The store
(:class:`~sinks.ledger.store.AlertLedger`) reads what the ledger holds of an incident,
asks these functions, and writes what they decide, in the same transaction.

The rules, each a function below:

* A resolve is final: nothing of an incident after it is recorded (:func:`admitted`).
* A resolve follows its incident, not a silence of now (:func:`silence_of`).
* A sink whose routes do not take a transition gets it ``unrouted``, unless it took
  an earlier transition of the incident: a receiver takes an incident to its end.
* A notifying sink is not sent what is silenced, nor what is too old to page
  (``stale``), and a resolve follows what the sink got of its incident
  (:func:`first_state`, :func:`stale`).
* An incident withheld as old while flinkwatch was behind pages once flinkwatch has
  caught up with it still open (:func:`held_page`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from detectors.model import Alert, AlertStatus

#: Delivery states of a transition that was (or is being) sent: later ones follow it.
PAGED_STATES = frozenset({"pending", "sending", "delivered", "failed"})

#: Returns the name of the silence an alert falls under, or None.
Silencer = Callable[[Alert], str | None]


@dataclass(frozen=True, slots=True)
class Earlier:
    """What one sink got of an incident before a new transition of it.

    Attributes:
        wanted: The sink's routes take the new transition (:meth:`~sinks.base.DeliverySink.wants`).
        routed_before: The sink took (was not ``unrouted`` for) an earlier transition of
            the incident.
        states: The states of the sink's deliveries of the alert's earlier transitions.
    """

    wanted: bool
    routed_before: bool = False
    states: frozenset[str] = frozenset()


def admitted(status: AlertStatus, latest: AlertStatus | None) -> bool:
    """Whether a transition is recorded, given its incident's latest recorded status.

    A resolve is final: after it only a resolve (the same one, replayed) is looked at.
    """
    return status is AlertStatus.RESOLVED or latest is not AlertStatus.RESOLVED


def silence_of(
    alert: Alert, earlier: Sequence[str | None], silencer: Silencer | None
) -> str | None:
    """The silence a new transition is recorded under (None: not silenced).

    A resolve follows its incident, not a silence of now: silenced if everything before
    it was (the firing's silence names it), not if anything of it went out unsilenced
    (an escalation paged once the firing's silence was over). Which sinks then get it is
    judged per sink (:func:`first_state`).

    Args:
        alert: The new transition.
        earlier: The silences the alert's earlier transitions were recorded under, in
            order (read for a resolve only; empty otherwise).
        silencer: The silences of now.
    """
    if alert.status is AlertStatus.RESOLVED and earlier:
        return None if any(s is None for s in earlier) else earlier[0]
    return silencer(alert) if silencer else None


def too_old(now_ms: int, event_time_ms: int, max_age_ms: int | None) -> bool:
    """Whether an event time is older than the page limit (``None``: no limit)."""
    return max_age_ms is not None and now_ms - event_time_ms > max_age_ms


def stale(status: AlertStatus, states: frozenset[str], old: bool) -> bool:
    """Whether a transition is withheld from a notifying sink for its age.

    A firing is judged by its own age. A later transition follows its incident, like
    a silence: sent if an earlier one was sent (a message left red forever is worse
    than a late resolve), however late it comes. Of an incident withheld so far, a
    resolve is withheld too (no message about an incident nobody was paged for), and
    an escalation is judged by its own age: a recent one is news about an incident
    going on now, which pages as what it is now.

    Args:
        status: The new transition's.
        states: The sink's delivery states of the alert's earlier transitions.
        old: The transition is older than the page limit (:func:`too_old`).
    """
    if status is AlertStatus.FIRING:
        return old
    if states & PAGED_STATES:
        return False
    if status is AlertStatus.RESOLVED and "stale" in states:
        return True
    return old


def first_state(
    status: AlertStatus, *, notifies: bool, silenced: bool, old: bool, seen: Earlier
) -> str:
    """Where a new transition's delivery to one sink starts.

    ``unrouted`` when the sink does not take it (and took none of its incident before),
    ``silenced`` or ``stale`` for a notifying sink, else ``pending``.

    A resolve goes to a notifying sink that got a page of its incident (its firing or
    an escalation: no page is left open, whatever was silenced since), and is
    withheld from one that got none (no lone "resolved").

    Args:
        status: The new transition's.
        notifies: The sink pages a human (:attr:`~sinks.base.DeliverySink.notifies`).
        silenced: The transition was recorded under a silence (:func:`silence_of`).
        old: It is older than the page limit (:func:`too_old`).
        seen: What the sink got of the incident so far.
    """
    if not seen.wanted and not seen.routed_before:
        return "unrouted"
    if notifies and status is AlertStatus.RESOLVED:
        if seen.states & PAGED_STATES:
            return "pending"
        if "silenced" in seen.states:
            return "silenced"
    if notifies and silenced:
        return "silenced"
    if notifies and stale(status, seen.states, old):
        return "stale"
    return "pending"


def behind(now_ms: int, frontier_ms: int | None, max_age_ms: int | None) -> bool:
    """Whether detection was behind (its newest event time older than the page limit)."""
    return max_age_ms is not None and frontier_ms is not None and now_ms - frontier_ms > max_age_ms


def caught_up(now_ms: int, newest_ms: int | None, max_age_ms: int | None) -> bool:
    """Whether detection's newest event time is within the page limit of now again."""
    return max_age_ms is not None and newest_ms is not None and now_ms - newest_ms <= max_age_ms


def held_page(transitions: Sequence[tuple[AlertStatus, str]]) -> int | None:
    """Of an incident withheld while flinkwatch was behind, the transition to page now.

    Args:
        transitions: The incident's transitions to one notifying sink, in order: each
            its status and its delivery state.

    Returns:
        The index of the latest transition, when the incident is still open and every
        transition of it was withheld as ``stale``: it pages once, as what the incident
        is now. None for one paged or silenced already, or resolved.
    """
    if not transitions or transitions[-1][0] is AlertStatus.RESOLVED:
        return None
    if any(state != "stale" for _, state in transitions):
        return None
    return len(transitions) - 1


def closing_resolve(latest: Alert, at_ms: int, batch_id: int) -> Alert:
    """The resolve that closes an incident no detector holds any more.

    A batch run again after a restart did not raise the incident its first run opened;
    ``latest`` is the incident's latest transition, ``at_ms`` the batch's newest time.
    """
    return latest.model_copy(
        update={
            "status": AlertStatus.RESOLVED,
            "event_time_ms": at_ms,
            "summary": (
                f"{latest.detector} no longer holds this incident: the micro-batch "
                "that raised it was cut short by a restart (a config reload, say) "
                "and did not raise it when run again; closed by flinkwatch"
            ),
            "evidence": {
                "reason": "not raised again after a restart",
                "batch": batch_id,
            },
        }
    )
