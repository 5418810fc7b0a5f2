"""One TaskManager, one entity, however a record spells its id.

A TaskManager's id reaches flinkwatch in several spellings. Its logs (and the
JobManager's lines about it) print the resource id as Flink made it:
``615c9d0b-07b3-4ec5-b801-27ab5a4c6d94``, ``localhost:40003-6cf67b``,
``flink-taskmanager-1-2``. The metric reporters rewrite it: Prometheus turns every
character outside ``[a-zA-Z0-9:_]`` into ``_`` (``localhost:40003_6cf67b``), StatsD and
JMX a ``:`` into ``-``, Graphite a ``.`` into ``-``. Keyed by the spelling, a
TaskManager's heap metrics and its log lines were two entities; correlation could not
join them.

:func:`tm_key` is the one rule they all fold into: every character outside
``[A-Za-z0-9]`` becomes ``_`` (:data:`KEY_UNSAFE`, a regular expression that means the
same to Python and to Java, so the parse query's Spark expression in
:mod:`streaming.bus` and this function cannot disagree). Lossy on purpose: two
TaskManagers whose ids differ only in punctuation would share an entity, which no
resource id Flink makes does. What people read keeps a real spelling:
:func:`spelling_rank` prefers the one a log line carried, with the most punctuation
left (the resource id as Flink printed it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: The characters :func:`tm_key` replaces with ``_``, as a regular expression (Python's
#: ``re`` and Java's ``Pattern`` both match it per code point).
KEY_UNSAFE = "[^A-Za-z0-9]"
#: What each of them becomes.
KEY_FILL = "_"

_UNSAFE = re.compile(KEY_UNSAFE)
# Characters no reporter writes for another: a spelling with more of them is nearer the id
# as Flink printed it.
_PUNCT = re.compile("[^A-Za-z0-9_]")


def tm_key(tm_id: str) -> str:
    """The TaskManager's key: every character outside ``[A-Za-z0-9]`` as ``_``.

    Example:
        >>> tm_key("localhost:40003-6cf67b"), tm_key("localhost:40003_6cf67b")
        ('localhost_40003_6cf67b', 'localhost_40003_6cf67b')
    """
    return _UNSAFE.sub(KEY_FILL, tm_id)


def tm_entity(tm_id: str) -> str:
    """The entity key of a TaskManager (``tm:<key>``), whatever spelling ``tm_id`` is in."""
    return "tm:" + tm_key(tm_id)


def same_tm(a: str | None, b: str | None) -> bool:
    """Whether two spellings name the same TaskManager."""
    return a is not None and b is not None and tm_key(a) == tm_key(b)


def spelling_rank(tm_id: str, *, logged: bool) -> int:
    """How much a spelling is to be preferred for display: higher is better.

    A log line's spelling beats a metric label's (a reporter rewrote that one), then the
    one with more punctuation left: the reporters only ever take punctuation away.

    Example:
        >>> ids = {"a_b:c": False, "a-b:c": True, "a-b-c": False}
        >>> max(ids, key=lambda s: spelling_rank(s, logged=ids[s]))
        'a-b:c'
    """
    return (1_000_000 if logged else 0) + len(_PUNCT.findall(tm_id))


def one_per_tm(tm_ids: Iterable[str]) -> list[str]:
    """One spelling per TaskManager, the one with the most punctuation left, sorted.

    For a list people read (an incident's TaskManagers): a member fired before the
    TaskManager's logs spelled its id is the same TaskManager as one fired after.
    """
    return sorted(spellings(tm_ids).values())


def spellings(tm_ids: Iterable[str]) -> dict[str, str]:
    """Each TaskManager's key with its spelling for people, as :func:`one_per_tm` picks it.

    For naming every alert of an incident alike (its chart's lanes, a report's rows).
    """
    best: dict[str, str] = {}
    for t in tm_ids:
        k = tm_key(t)
        if k not in best or spelling_rank(t, logged=False) > spelling_rank(best[k], logged=False):
            best[k] = t
    return best
