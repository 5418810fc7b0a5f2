r"""Regular expressions from the config, refused at load when they could take super-linear time.

A rule's pattern runs on every log line its rule reads, inside the detect query: one
pattern that backtracks exponentially stalls a whole shard. Python's ``re`` backtracks, so
the check is static, on the pattern's parse tree (``re._parser``, the parser ``re``
itself compiles from), and conservative: it refuses what can blow up, and a little that
would not, with a message saying how to write it instead.

Refused:

- longer than :data:`MAX_PATTERN_CHARS`;
- backreferences (``\1``, ``(?P=name)``) and conditionals (``(?(1)a|b)``): no linear
  algorithm exists for them;
- a repeat inside a repeat when the inner one is unbounded and the outer one repeats
  (star height above one): ``(a+)+``, ``(\w+\s?)*``, ``(.*a){20}``; a part of variable
  length under an unbounded repeat (``(a?a)*``) or repeated more than
  :data:`MAX_VARIABLE_UNDER` times (``(a{1,2}){1,1000}``);
- an unbounded repeat of an alternation whose branches can start with the same
  character: ``(a|aa)*``, ``(ab|\w)*``;
- more than :data:`MAX_WILDCARDS` unbounded repeats in one pattern (each multiplies the
  cost of a failing search by the text's length);
- a counted repeat above :data:`MAX_COUNT` (``a{100000}`` compiles into a huge program).

What a rule searches is cut to :data:`SEARCH_CHARS` characters as well (the parser cuts
messages to ``parsing.limits.max_message_chars``, 2,000 by default, and names to
``NAME_CHARS``), so what remains (``.*A.*B``: quadratic) stays bounded in milliseconds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# ``re._parser`` is the parser ``re.compile`` uses (``sre_parse`` before 3.11, which is
# deprecated): reading its tree is the only way to see a pattern as ``re`` will run it.
from re import _constants as C  # type: ignore[attr-defined]  # noqa: N812
from re import _parser as P  # type: ignore[attr-defined]  # noqa: N812
from typing import Any

#: The longest pattern a rule may give (characters).
MAX_PATTERN_CHARS = 512
#: How many unbounded repeats (``*``, ``+``, ``{n,}``) one pattern may hold.
MAX_WILDCARDS = 4
#: The largest count a counted repeat (``{m,n}``) may give.
MAX_COUNT = 1000
#: How often a counted repeat may repeat a part of variable length (``(\d{1,3}\.){3}``).
MAX_VARIABLE_UNDER = 10
#: What a rule's pattern searches is cut to this many characters.
SEARCH_CHARS = 4096

_REPEATS = (C.MAX_REPEAT, C.MIN_REPEAT, getattr(C, "POSSESSIVE_REPEAT", C.MAX_REPEAT))
_ALPHABET = 256  # first characters are told apart over Latin-1; anything beyond is "other"


class UnsafePattern(ValueError):
    """A pattern refused at load: invalid, too long, or able to take super-linear time."""


def check_pattern(pattern: str) -> str:
    """``pattern`` if it compiles and runs in linear time; raise :class:`UnsafePattern` if not.

    Example:
        >>> check_pattern(".*Exception.*")
        '.*Exception.*'
        >>> try:
        ...     check_pattern("(a+)+$")
        ... except UnsafePattern as exc:
        ...     print(str(exc)[:50])
        (a+)+$: a repeat inside a repeat can backtrack exp
    """
    if len(pattern) > MAX_PATTERN_CHARS:
        msg = f"pattern is {len(pattern)} characters long; at most {MAX_PATTERN_CHARS}"
        raise UnsafePattern(msg)
    try:
        re.compile(pattern)
        tree = P.parse(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        msg = f"{pattern}: not a valid regular expression: {exc}"
        raise UnsafePattern(msg) from exc
    ignore_case = bool(tree.state.flags & re.IGNORECASE)
    walker = _Walker(pattern, ignore_case)
    walker.walk(tree)
    if walker.wildcards > MAX_WILDCARDS:
        msg = (
            f"{pattern}: {walker.wildcards} unbounded repeats; at most {MAX_WILDCARDS} "
            "(each multiplies the cost of a failing search by the text's length)"
        )
        raise UnsafePattern(msg)
    return pattern


_NESTED = (
    "a repeat inside a repeat can backtrack exponentially; make the inner part unambiguous "
    "(e.g. [^ ]+ instead of .+) or drop a repeat"
)
_AMBIGUOUS = (
    "an unbounded repeat of alternatives that can start with the same character (or be "
    "empty) backtracks exponentially; make the alternatives start differently"
)


class _Walker:
    """One pass over a parse tree, counting wildcards and refusing what can blow up.

    ``star``: the items are inside an unbounded repeat; ``counted``: how many times the
    counted repeats around them repeat at most (``{2,5}``: 5). Under a star, any repeat
    of variable length (``a?``, ``a{1,3}``, ``a+``) and any alternation whose branches
    are ambiguous lets one text match in exponentially many ways; under a count, an
    unbounded repeat (``(.*a){20}``: ``n ** 20``), or a variable one repeated more than
    :data:`MAX_VARIABLE_UNDER` times (``(a{1,2}){1,1000}``: Fibonacci many ways).
    """

    def __init__(self, pattern: str, ignore_case: bool) -> None:
        self.pattern = pattern
        self.ignore_case = ignore_case
        self.wildcards = 0

    def refuse(self, why: str) -> None:
        msg = f"{self.pattern}: {why}"
        raise UnsafePattern(msg)

    def walk(self, items: Iterable[Any], *, star: bool = False, counted: int = 1) -> None:
        for op, av in items:
            if op in (C.GROUPREF, C.GROUPREF_EXISTS):
                self.refuse("backreferences and conditionals are not allowed (no linear match)")
            elif op in _REPEATS:
                lo, hi, body = av
                unbounded = hi == C.MAXREPEAT
                if max(lo, 0 if unbounded else hi) > MAX_COUNT:
                    self.refuse(f"a counted repeat above {MAX_COUNT}")
                if unbounded:
                    self.wildcards += 1
                many = star or counted > MAX_VARIABLE_UNDER
                if (unbounded and (star or counted > 1)) or (many and lo != hi):
                    self.refuse(_NESTED)
                times = counted * (1 if unbounded else hi)
                self.walk(body, star=star or unbounded, counted=min(times, MAX_COUNT + 1))
            elif op == C.SUBPATTERN:
                self.walk(av[-1], star=star, counted=counted)
            elif op == C.BRANCH:
                if star:
                    self._check_branches(av[1])
                for branch in av[1]:
                    self.walk(branch, star=star, counted=counted)
            elif op in (C.ASSERT, C.ASSERT_NOT):
                self.walk(av[1], star=star, counted=counted)
            elif op == getattr(C, "ATOMIC_GROUP", None):
                self.walk(av, star=star, counted=counted)

    def _check_branches(self, branches: list[Any]) -> None:
        """Refuse alternatives that can start alike, or be empty (``a(|a)`` is ``a|aa``)."""
        if any(_nullable(b) for b in branches):
            self.refuse(_AMBIGUOUS)
        firsts = [_first(b, self.ignore_case) for b in branches]
        for i, a in enumerate(firsts):
            if any(a & b for b in firsts[i + 1 :]):
                self.refuse(_AMBIGUOUS)


def _has_unbounded(items: Iterable[Any]) -> bool:
    for op, av in items:
        if op in _REPEATS and (av[1] == C.MAXREPEAT or _has_unbounded(av[2])):
            return True
        if op == C.SUBPATTERN and _has_unbounded(av[-1]):
            return True
        if op == C.BRANCH and any(_has_unbounded(b) for b in av[1]):
            return True
        if op == getattr(C, "ATOMIC_GROUP", None) and _has_unbounded(av):
            return True
    return False


_OTHER = -1  # stands for every character beyond Latin-1
_ALL = frozenset(range(_ALPHABET)) | {_OTHER}


def _first(items: Iterable[Any], ignore_case: bool) -> frozenset[int]:
    """The characters a match of ``items`` can start with (over Latin-1, plus "other")."""
    out: set[int] = set()
    for op, av in items:
        chars, nullable = _first_of(op, av, ignore_case)
        out |= chars
        if not nullable:
            return frozenset(out)
    return frozenset(out)


def _first_of(op: Any, av: Any, ignore_case: bool) -> tuple[frozenset[int], bool]:
    if op == C.LITERAL:
        return _fold({av}, ignore_case), False
    if op == C.NOT_LITERAL:
        return _ALL - _fold({av}, ignore_case), False
    if op == C.ANY:
        return _ALL, False
    if op == C.IN:
        return _set_chars(av, ignore_case), False
    if op == C.SUBPATTERN:
        return _first(av[-1], ignore_case), _nullable(av[-1])
    if op == getattr(C, "ATOMIC_GROUP", None):
        return _first(av, ignore_case), _nullable(av)
    if op == C.BRANCH:
        chars = frozenset().union(*(_first(b, ignore_case) for b in av[1]))
        return chars, any(_nullable(b) for b in av[1])
    if op in _REPEATS:
        return _first(av[2], ignore_case), av[0] == 0 or _nullable(av[2])
    if op in (C.AT, C.ASSERT, C.ASSERT_NOT):
        return frozenset(), True
    return _ALL, False  # anything else: assume it can start with anything


def _nullable(items: Iterable[Any]) -> bool:
    return all(_first_of(op, av, False)[1] for op, av in items)


def _fold(chars: set[int], ignore_case: bool) -> frozenset[int]:
    out = set()
    for c in chars:
        if c >= _ALPHABET:
            out.add(_OTHER)
            continue
        out.add(c)
        if ignore_case:
            out |= {ord(x) for x in (chr(c).lower(), chr(c).upper()) if ord(x) < _ALPHABET}
    return frozenset(out)


def _set_chars(items: Iterable[Any], ignore_case: bool) -> frozenset[int]:
    """The characters a ``[...]`` set admits."""
    items = list(items)
    negate = any(op == C.NEGATE for op, _ in items)
    chars: set[int] = set()
    for op, av in items:
        if op == C.LITERAL:
            chars |= _fold({av}, ignore_case)
        elif op == C.RANGE:
            lo, hi = av
            chars |= _fold(set(range(lo, min(hi, _ALPHABET - 1) + 1)), ignore_case)
            if hi >= _ALPHABET:
                chars.add(_OTHER)
        elif op == C.CATEGORY:
            chars |= _category(av)
    return _ALL - chars | {_OTHER} if negate else frozenset(chars)


_CATEGORY_RE = {
    C.CATEGORY_DIGIT: r"\d",
    C.CATEGORY_NOT_DIGIT: r"\D",
    C.CATEGORY_SPACE: r"\s",
    C.CATEGORY_NOT_SPACE: r"\S",
    C.CATEGORY_WORD: r"\w",
    C.CATEGORY_NOT_WORD: r"\W",
}


def _category(cat: Any) -> frozenset[int]:
    expr = _CATEGORY_RE.get(cat)
    if expr is None:
        return _ALL
    rx = re.compile(expr)
    return frozenset(c for c in range(_ALPHABET) if rx.fullmatch(chr(c))) | {_OTHER}
