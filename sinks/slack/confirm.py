"""After a crash, or a send without an answer: whether the transition is in Slack already.

Every message the bot posts carries Slack message metadata with the transition's ledger
key. :func:`arrived` looks for that key in the incident's thread, or in the channel,
paging by cursor: in a busy channel the message can be far from the newest. A try reads
at most ``MAX_PAGES`` pages; the cursor is kept in the sink's memory and the next try
goes on from it, so a long search ends however busy the channel.
"""

from __future__ import annotations

import logging

from detectors import AlertStatus
from sinks.base import PermanentDeliveryError, RetryableDeliveryError, Transition
from sinks.slack import transport
from sinks.slack.channels import CannotTell, Channels

log = logging.getLogger(__name__)


class _NotThroughYet(Exception):
    """A search read its pages for this try without reaching the end; it goes on later."""


def arrived(t: Transition, channels: Channels) -> bool:
    """Whether the bot's message (or thread reply) of ``t`` is in Slack.

    Returns:
        True if found, False if surely not there. Never "cannot tell": bot mode does
        not post what may be there already.

    Raises:
        RetryableDeliveryError: Slack cannot be asked now (down, rate limited), will
            not let us look (a missing scope, no access: logged as an error), or the
            search is not through yet. The ledger keeps the send ``sending`` and it,
            with everything behind it, waits and asks again.
    """
    try:
        return _find(t, channels)
    except _NotThroughYet as exc:
        log.info("slack: %s not found yet (%s); the search goes on at the next try", t.key, exc)
        msg = f"confirming {t.key}: {exc}; going on at the next try"
        raise RetryableDeliveryError(msg) from None
    except CannotTell as exc:
        log.error(
            "slack: cannot check whether %s arrived (%s); it and the transitions after it "
            "wait rather than risk a second post: grant the token channels:history "
            "(groups:history for a private channel) and channels:read, or configure "
            "channels by id",
            t.key,
            exc,
        )
        msg = f"cannot confirm {t.key}: {exc}"
        raise RetryableDeliveryError(msg) from None


def _find(t: Transition, channels: Channels) -> bool:
    a = t.alert
    memory, owner = channels.memory, channels.owner
    parent = memory.recall(owner, t.incident_id)
    first = a.status is AlertStatus.FIRING and (t.incident is None or t.incident.opened)
    if parent is not None and not first:
        found = _search(t, channels, "conversations_replies", parent["channel"], ts=parent["ts"])
        return found is not None
    # A message of its own: in its routed channel, or in the default channel the
    # send fell back to when the route failed.
    c = channels.cfg()
    oldest = f"{t.recorded_ms / 1000 - 600:.6f}"  # 10 min of slack for clock skew
    unknown: list[str] = []
    routed = channels.of(a)
    names = [routed] if routed is not None else []
    if channels.place == 1:
        names.append(c.channel)
    for name in dict.fromkeys(names):
        try:
            channel = channels.id_of(name)
            ts = (
                None
                if channel is None
                else _search(t, channels, "conversations_history", channel, oldest=oldest)
            )
        except CannotTell as exc:
            unknown.append(f"{name}: {exc}")
            continue
        if channel is not None and ts is not None:
            memory.remember(owner, t.incident_id, {"channel": channel, "ts": ts})
            return True
    if unknown:
        raise CannotTell("; ".join(unknown))
    return False


def _search(
    t: Transition, channels: Channels, method: str, channel: str, **where: str
) -> str | None:
    """The ts of the message carrying ``t``'s key, following the cursor; None if absent.

    Reads at most ``MAX_PAGES`` pages per call. The message, if it arrived, was
    stored before the first page was read, so a search that goes on later from its
    cursor still passes it (newer messages come before the first page of the history
    and after the thread's end, never between two pages).

    Raises:
        CannotTell: Slack refused the read.
        _NotThroughYet: ``MAX_PAGES`` pages read; the cursor is kept for the next call.
    """
    memory, owner = channels.memory, channels.owner
    memo = f"search:{t.key}:{method}:{channel}"
    kept = memory.recall(owner, memo)
    cursor: str | None = kept["cursor"] if kept else None
    for _ in range(transport.MAX_PAGES):
        try:
            resp = channels.api.call(
                method,
                channel=channel,
                include_all_metadata=True,
                limit=transport.PAGE,
                cursor=cursor,
                **where,
            )
        except PermanentDeliveryError as exc:
            if cursor is not None and "invalid_cursor" in str(exc):
                cursor = None  # a kept cursor Slack no longer takes: start over
                continue
            if method == "conversations_history" and "channel_not_found" in str(exc):
                memory.forget(owner, memo)
                return None  # no such channel: nothing can have arrived there
            raise CannotTell(str(exc)) from None
        for m in resp.get("messages", []):
            payload = (m.get("metadata") or {}).get("event_payload") or {}
            if payload.get("key") == t.key:
                memory.forget(owner, memo)
                return str(m["ts"])
        cursor = (resp.get("response_metadata") or {}).get("next_cursor") or None
        if cursor is None:
            memory.forget(owner, memo)
            return None
    memory.remember(owner, memo, {"cursor": cursor})
    msg = f"{method}: {transport.MAX_PAGES} pages of {transport.PAGE} read, not through yet"
    raise _NotThroughYet(msg)
