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
- two unbounded repeats in sequence that can match the same characters, with nothing
  between them the first cannot match (``.*a.*b``, ``\w+_\w+$``): a failing search tries
  every split, polynomial in the text's length (``.*a.*b``: two seconds on 2,000
  characters); a last ``.*`` of the pattern is exempt (it never fails);
- more than :data:`MAX_WILDCARDS` unbounded repeats in one pattern (each multiplies the
  cost of a failing search by the text's length);
- a counted repeat above :data:`MAX_COUNT` (``a{100000}`` compiles into a huge program);
- optional and counted parts that can match one text in more than :data:`MAX_WAYS` ways
  (:data:`MAX_WAYS_WITH_STAR` with an unbounded repeat), each tried when a search fails.

A random search over small patterns (ten atoms, the quantifiers, groups and alternatives,
run on adversarial texts of 400 characters) found no accepted pattern costing more than
0.1 s there, which a text of 2,000 characters can make about 25 times more (most such
patterns have a star before bounded optional parts); the classic exponential and
polynomial families are refused outright. A linear-time engine (RE2) would remove the
rest of the risk; flinkwatch uses Python's ``re``.

What a rule searches is cut to :data:`SEARCH_CHARS` characters as well (the parser cuts
messages to ``parsing.limits.max_message_chars``, 2,000 by default, and names to
``NAME_CHARS``), so what remains (one unbounded repeat's failing search, quadratic) stays
within milliseconds.
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
#: How many ways the bounded optional parts of a pattern may have to match (``x?``: 2,
#: ``(\d{1,3}\.){3}``: 27, ``(a?b?){3}``: 64).
MAX_WAYS = 256
#: The same in a pattern with an unbounded repeat (``.*(a{1,3}){1,3}c``: 39 ways at each of
#: the positions the star can stop at).
MAX_WAYS_WITH_STAR = 16
#: What a rule's pattern searches is cut to this many characters (the parser's default cut
#: of a message): a single unbounded repeat's failing search is quadratic in it
#: (``\w+$``: 15 ms on 2,000 characters).
SEARCH_CHARS = 2000

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
    walker.check_sequences(list(tree), top=True)
    # A star multiplies the ways by the positions it can stop at: fewer are allowed with one.
    last = list(tree)[-1:]
    stars = walker.wildcards - (1 if last and _never_fails(last[0]) and _unbounded(*last[0]) else 0)
    most = MAX_WAYS_WITH_STAR if stars else MAX_WAYS
    if _ways(tree) > most:
        msg = (
            f"{pattern}: its optional and counted parts can match one text in more than "
            f"{most} ways, each tried when a search fails; make fewer parts optional"
        )
        raise UnsafePattern(msg)
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
_SPLIT = (
    "two unbounded repeats that can match the same text, with nothing between them the "
    "first cannot match, backtrack polynomially (.*a.*b: cubic); bound the first "
    "([^a]*a.*b) or drop one"
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

    def check_sequences(self, items: list[Any], *, top: bool = False) -> None:
        r"""Refuse two unbounded repeats in sequence that can split a text in many ways.

        ``.*a.*b`` on a text of ``a``: each ``a`` could end the first ``.*``, and a failing
        search tries them all, for every start: cubic (two seconds on 2,000 characters).
        Two parts that can grow without bound (a star, or a group holding one) are
        ambiguous when their characters overlap and each part between them that must
        match something can match a character the first could have taken; ``[^a]*a.*b``
        is not (the first ``a`` ends it), nor ``\d+ .*expired``. A last ``.*`` of the
        whole pattern is exempt: it never fails, so it is never backtracked into
        (``.*Exception.*``). Groups and repeats are checked inside too.
        """
        flat = _flatten(items)
        open_ = [i for i, (op, av) in enumerate(flat) if _unbounded(op, av)]
        for n, i in enumerate(open_):
            mine = _chars(flat[i : i + 1], self.ignore_case)
            for j in open_[n + 1 :]:
                if top and j == len(flat) - 1 and _never_fails(flat[j]):
                    continue
                theirs = _chars(flat[j : j + 1], self.ignore_case)
                between = [x for x in flat[i + 1 : j] if not _nullable([x])]
                if mine & theirs and all(mine & _chars([x], self.ignore_case) for x in between):
                    self.refuse(_SPLIT)
        for op, av in flat:
            if op == C.BRANCH:
                for branch in av[1]:
                    self.check_sequences(list(branch))
            elif op in _REPEATS:
                self.check_sequences(list(av[2]))

    def _check_branches(self, branches: list[Any]) -> None:
        """Refuse alternatives that can start alike, or be empty (``a(|a)`` is ``a|aa``)."""
        if any(_nullable(b) for b in branches):
            self.refuse(_AMBIGUOUS)
        firsts = [_first(b, self.ignore_case) for b in branches]
        for i, a in enumerate(firsts):
            if any(a & b for b in firsts[i + 1 :]):
                self.refuse(_AMBIGUOUS)


def _flatten(items: Iterable[Any]) -> list[Any]:
    """A sequence with its groups' contents inline (a group does not change what follows)."""
    out: list[Any] = []
    for op, av in items:
        if op == C.SUBPATTERN:
            out += _flatten(av[-1])
        elif op == getattr(C, "ATOMIC_GROUP", None):
            out += _flatten(av)
        else:
            out.append((op, av))
    return out


def _unbounded(op: Any, av: Any) -> bool:
    """Whether an item can match a text of any length (a star, or a group holding one)."""
    if op in _REPEATS:
        return bool(av[1] == C.MAXREPEAT) or _has_unbounded(av[2])
    if op == C.BRANCH:
        return any(_has_unbounded(b) for b in av[1])
    return False


def _never_fails(item: Any) -> bool:
    """A repeat that may match nothing: last in a pattern it succeeds at once, whatever follows."""
    op, av = item
    return op in _REPEATS and av[0] == 0


def _chars(items: Iterable[Any], ignore_case: bool) -> frozenset[int]:
    """Every character a match of ``items`` can hold (over Latin-1, plus "other")."""
    out: set[int] = set()
    for op, av in items:
        if op in (C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN):
            out |= _first_of(op, av, ignore_case)[0]
        elif op == C.SUBPATTERN:
            out |= _chars(av[-1], ignore_case)
        elif op == getattr(C, "ATOMIC_GROUP", None):
            out |= _chars(av, ignore_case)
        elif op == C.BRANCH:
            for branch in av[1]:
                out |= _chars(branch, ignore_case)
        elif op in _REPEATS:
            out |= _chars(av[2], ignore_case)
        elif op not in (C.AT, C.ASSERT, C.ASSERT_NOT):
            out |= _ALL
    return frozenset(out)


def _ways(items: Iterable[Any]) -> int:
    """How many ways the bounded parts of ``items`` can split a text (an upper bound, capped).

    A failing search tries each of them at every position, so they multiply its cost: a
    sequence multiplies its parts' ways, alternatives add theirs, a repeat ``{m,n}`` of a
    part with ``w`` ways has ``w**m + ... + w**n``; a star counts once (the other checks
    bound what stars may do).
    """
    cap = MAX_WAYS + 1
    total = 1
    for op, av in items:
        if op in _REPEATS:
            lo, hi, body = av
            w = _ways(body)
            top = lo if hi == C.MAXREPEAT else hi
            n = (
                sum(min(w**k, cap) for k in range(lo, min(top, cap) + 1))
                if w > 1 or hi != lo
                else 1
            )
            total *= max(1, min(n, cap))
        elif op == C.SUBPATTERN:
            total *= _ways(av[-1])
        elif op == getattr(C, "ATOMIC_GROUP", None):
            total *= _ways(av)
        elif op == C.BRANCH:
            total *= min(sum(_ways(b) for b in av[1]), cap)
        elif op in (C.ASSERT, C.ASSERT_NOT):
            total *= _ways(av[1])
        total = min(total, cap)
    return total


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
