r"""Rules' regular expressions, compiled and matched with RE2, refused at load when unfit.

A rule's pattern runs on every log line (or metric label) its rule reads, inside the
detect query: one pattern that backtracks stalls a whole shard. Python's ``re``
backtracks, and no static check of its patterns closes that (a random search kept finding
contrived ones costing seconds), so rules use RE2 (``google-re2``): it matches without
backtracking, in time linear in the text. What it cannot do, it refuses to compile:
backreferences, lookarounds, conditionals, atomic groups and possessive repeats have no
linear algorithm, so RE2's syntax has none of them (docs/rules.md).

Linear, the cost per character is still the size of the compiled program in the worst
case (RE2 falls back from its DFA to a simulation of every instruction at once when the
DFA would grow too big: ``a[ab]{30}c`` on random ``a`` and ``b``), so that size is capped
(:data:`MAX_PROGRAM_SIZE`), as is the pattern's length (:data:`MAX_PATTERN_CHARS`); RE2
itself refuses a count above 1000 (``a{5000}``, ``(a{1,100}){1,100}``).

What a rule searches is not cut: at a bounded cost per character, the parser's cut of a
message (``parsing.limits.max_message_chars``) and of names already bound the cost, and a
second cut would hide from the rule text the operator sees in the event.

Compiled patterns are not part of a rule's parameters (only the text is, and travels to
Spark's workers as it): each process compiles a pattern once, on first use
(:func:`compiled`).
"""

from __future__ import annotations

import functools
from typing import Any

import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

#: The longest pattern a rule may give (characters).
MAX_PATTERN_CHARS = 512
#: The largest compiled program (RE2 instructions) a pattern may make: it bounds the cost
#: per character of text. ``Checkpoint \d+ of job [0-9a-f]{32} expired`` is about 100,
#: ``\p{L}`` 1,200 (a range per UTF-8 byte sequence), ``.{250}x`` 2,000; the costliest
#: patterns a random search found within the cap take about 15 ms on 2,000 characters
#: of hostile text, 0.2 s on 20,000.
MAX_PROGRAM_SIZE = 2500

#: What RE2's syntax lacks that Python's ``re`` has, said whenever RE2 refuses a pattern.
_SYNTAX = (
    "rule patterns use RE2 syntax, which has no backreferences (\\1, (?P=name)), "
    "lookarounds ((?=, (?!, (?<=, (?<!), conditionals, atomic groups, possessive repeats, "
    "(?x) or (?#...) (and \\Z is written \\z); see docs/rules.md"
)


class UnsafePattern(ValueError):
    """A pattern refused at load: RE2 cannot compile it, or it is too long or too large."""


def _options() -> Any:
    options = re2.Options()
    # A refused pattern is reported as the config error it is, not logged by RE2 as well.
    options.log_errors = False
    # Rules ask whether a pattern matches, never what its groups matched: without groups
    # RE2 answers from its DFA alone, where spans of groups would take its slower engines.
    options.never_capture = True
    return options


def check_pattern(pattern: str) -> str:
    r"""``pattern`` if RE2 compiles it within the caps; raise :class:`UnsafePattern` if not.

    Example:
        >>> check_pattern("(a+)+$")
        '(a+)+$'
        >>> try:
        ...     check_pattern(r"(a)\1")
        ... except UnsafePattern as exc:
        ...     print(str(exc)[:54])
        (a)\1: RE2 cannot compile it (invalid escape sequence:
    """
    if len(pattern) > MAX_PATTERN_CHARS:
        msg = f"pattern is {len(pattern)} characters long; at most {MAX_PATTERN_CHARS}"
        raise UnsafePattern(msg)
    try:
        program = re2.compile(pattern, _options())
    except re2.error as exc:
        why = _reason(exc)
        if "pattern too large" in why:
            msg = f"{pattern}: its compiled program is too large; repeat less (lower counts)"
        else:
            msg = f"{pattern}: RE2 cannot compile it ({why}); {_SYNTAX}"
        raise UnsafePattern(msg) from exc
    if program.programsize > MAX_PROGRAM_SIZE:
        msg = (
            f"{pattern}: its compiled program has {program.programsize} instructions; at "
            f"most {MAX_PROGRAM_SIZE} (each may run on every character); repeat less "
            "(lower counts, fewer . or \\p{...} under a count)"
        )
        raise UnsafePattern(msg)
    return pattern


def _reason(exc: Exception) -> str:
    # google-re2 raises its error with RE2's message as bytes.
    arg = exc.args[0] if exc.args else exc
    return arg.decode("utf-8", "replace") if isinstance(arg, bytes) else str(arg)


@functools.lru_cache(maxsize=1024)
def compiled(pattern: str) -> Any:
    """``pattern`` compiled by RE2, once per process (a rule's parameters hold the text)."""
    return re2.compile(check_pattern(pattern), _options())


def search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches somewhere in ``text`` (RE2: linear in the text).

    Example:
        >>> search("(?i)commit(ting)? offsets? .*failed", "Committing offsets FAILED: x")
        True
    """
    return compiled(pattern).search(text) is not None


def fullmatch(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches the whole of ``text``.

    Example:
        >>> fullmatch("orders-.*", "orders-enrichment"), fullmatch("orders", "orders-x")
        (True, False)
    """
    return compiled(pattern).fullmatch(text) is not None
