"""Log lines → templates, as they stream: a small Drain kept in a detector's state.

Drain (He et al., "Drain: An Online Log Parsing Approach with Fixed Depth Tree", ICWS
2017) is the miner behind Drain3 and Loki's pattern ingester. A line is split into
tokens; tokens that vary by nature are masked as ``<*>`` first; the line then walks a
tree of fixed depth, by its token count and its first tokens, to a leaf holding a few
templates; it joins the most similar one (the share of positions where the two agree)
if that share reaches a threshold, and the positions that differ become ``<*>``;
otherwise it starts a template of its own.

Here the tree is flat: a leaf is one key, ``<group>|<token count>|<first tokens>``, in
a dict of the state, so the tree survives the JSON round trip between micro-batches as
plain data, and a line costs one masking pass, one split, one dict lookup and a
comparison with the few templates of its leaf. The caller's ``group`` (the level and
exception class, for ``new_error_pattern``) is part of the key, so lines of different
groups never share a template.

Masking (one search of each token): a token with a digit, a slash or a backslash
is a variable: numbers, hex and attempt ids, UUIDs, IPs and ports, durations (``10``
of ``10 ms``; ``PT10S``), timestamps, paths and URLs, subtask indexes (``(2/4)#0``),
container and pod names with numbers. Only the first line counts (a stack trace is
not the line's wording), at most :data:`MAX_TOKENS` tokens of it, each cut to
:data:`MAX_TOKEN_CHARS`.

The vocabulary is bounded, in two kinds of room. What the caller *learned* (a ``known``
template) holds at most ``known_cap`` templates; past it the least recently seen learned
one goes (counted in ``forgotten``). A template not known yet (a *new* one) lives in its
*pool* (a prefix of its group: ``new_error_pattern`` keeps ERROR and WARN apart) and each
pool holds at most ``new_cap``; past it the least recently seen new template *of that
pool* goes (counted in ``dropped``). So a flood of unique lines churns through its own
pool's new templates and never touches what was learned, nor another pool's new
templates. What the caller keeps (an open incident's templates) never goes.

Deterministic (no clock, no randomness, no hashing that varies between runs) and pure
Python: every call is a function of the state and the line.

Example:
    >>> v = Templates()
    >>> t, new = v.mine("E|", tokens("Lost connection to 10.0.0.7:9092 after 3 tries"), 1000,
    ...                 similarity=0.6, new_cap=10, known_cap=10)
    >>> t.text, new
    ('Lost connection to <*> after <*> tries', True)
    >>> t2, new = v.mine("E|", tokens("Lost connection to 10.0.0.9:9092 after 5 tries"), 2000,
    ...                  similarity=0.6, new_cap=10, known_cap=10)
    >>> t2.id == t.id, new, t2.count
    (True, False, 2)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection

from detectors.base import Record

#: What a variable token becomes.
MASK = "<*>"
#: Tokens of a line's first line that count; the rest is cut (a message's tail is often a
#: free-text reason that would make every line a template of its own length).
MAX_TOKENS = 40
#: A longer token is cut to this many characters (and marked with ``…``).
MAX_TOKEN_CHARS = 64
#: Depth of the prefix tree below the token count: lines whose first tokens differ never
#: share a template (Drain3's default depth 4 is 2 such tokens).
PREFIX_TOKENS = 2

_variable = re.compile(r"[\d/\\]").search


def tokens(text: str) -> list[str]:
    """The masked tokens of the first line of ``text`` (at most :data:`MAX_TOKENS`).

    Example:
        >>> tokens("Checkpoint 12 of job orders took 1500 ms at /tmp/chk-12")
        ['Checkpoint', '<*>', 'of', 'job', 'orders', 'took', '<*>', 'ms', 'at', '<*>']
    """
    first = text.partition("\n")[0]
    # A line of thousands of characters is cut first (MAX_TOKENS tokens of MAX_TOKEN_CHARS
    # fit in it); one C-level search per token is 5x cheaper than a substitution over the line.
    toks = first[: MAX_TOKENS * (MAX_TOKEN_CHARS + 1)].split(None, MAX_TOKENS)[:MAX_TOKENS]
    return [
        MASK if _variable(t) else t if len(t) <= MAX_TOKEN_CHARS else t[: MAX_TOKEN_CHARS - 1] + "…"
        for t in toks
    ]


def leaf_key(group: str, toks: list[str]) -> str:
    """The leaf a line walks to: its group, token count and first tokens."""
    return f"{group}|{len(toks)}|{' '.join(toks[:PREFIX_TOKENS])}"


def similarity(template: list[str], toks: list[str]) -> float:
    """Drain's ``simSeq``: the share of positions where the two hold the same token."""
    same = sum(1 for a, b in zip(template, toks, strict=True) if a == b)
    return same / len(toks) if toks else 1.0


class Template(Record):
    """One template of a vocabulary.

    Attributes:
        id: Stable within its vocabulary (never reused).
        text: The masked tokens, joined by single spaces.
        count: Lines mined into it.
        first_ms: When its first line came.
        last_ms: When its latest line came.
        known: Part of what is normal (the caller decides: learned, or paged once).
        hits: The caller's recent times of it (``new_error_pattern``: within its window).
        sample: One line of it as logged, cut (the caller's; kept while it matters).
    """

    id: int
    text: str
    count: int = 1
    first_ms: int
    last_ms: int
    known: bool = False
    hits: list[int] = []
    sample: str | None = None


class Templates(Record):
    """A bounded vocabulary of templates, by leaf (see the module docstring).

    Attributes:
        leaves: Templates by leaf key.
        size: Templates held.
        next_id: The id of the next new template.
        dropped: New templates dropped by their pool's cap so far.
        forgotten: Learned templates dropped by the learned cap so far.
    """

    leaves: dict[str, list[Template]] = {}
    size: int = 0
    next_id: int = 0
    dropped: int = 0
    forgotten: int = 0

    def mine(
        self,
        group: str,
        toks: list[str],
        at_ms: int,
        *,
        similarity: float,
        new_cap: int,
        known_cap: int,
        pool: str = "",
        learn: bool = False,
        keep: Collection[int] = (),
    ) -> tuple[Template, bool]:
        """Fold one line (its :func:`tokens`) in at ``at_ms``: its template, and whether it is new.

        Args:
            group: Lines of different groups never share a template.
            toks: The line's masked tokens.
            at_ms: When it came (``last_ms`` of its template).
            similarity: Share of positions a line must share with a template to join it.
            new_cap: New (not known) templates one pool holds at most.
            known_cap: Known templates held at most.
            pool: The pool of the line's new template: a prefix of ``group`` (every group
                shares one pool by default).
            learn: The line's template is known from now on (see :meth:`learn`).
            keep: Ids the caps must not drop.
        """
        key = leaf_key(group, toks)
        leaf = self.leaves.get(key)
        if leaf:
            best = _best(leaf, toks, similarity)
            if best is not None:
                best.count += 1
                best.last_ms = max(best.last_ms, at_ms)
                if learn:
                    self.learn(best, cap=known_cap, keep=keep)
                return best, False
        tpl = Template(id=self.next_id, text=" ".join(toks), first_ms=at_ms, last_ms=at_ms)
        if learn:
            tpl.known = True
            self._make_room(lambda _k, t: t.known, known_cap, keep)
        else:
            self._make_room(lambda k, t: not t.known and k.startswith(pool), new_cap, keep)
        self.next_id += 1
        self.size += 1
        self.leaves.setdefault(key, []).append(tpl)
        return tpl, True

    def learn(self, tpl: Template, *, cap: int, keep: Collection[int] = ()) -> None:
        """Make ``tpl`` known: it leaves its pool for the learned room (``cap`` at most)."""
        if tpl.known:
            return
        tpl.known = True
        self._make_room(lambda _k, t: t.known, cap + 1, [*keep, tpl.id])

    def all(self) -> list[Template]:
        """Every template, oldest id first."""
        return sorted((t for leaf in self.leaves.values() for t in leaf), key=lambda t: t.id)

    def get(self, ident: int) -> Template | None:
        """The template with id ``ident``, if still held."""
        return next((t for leaf in self.leaves.values() for t in leaf if t.id == ident), None)

    def _make_room(
        self, room: Callable[[str, Template], bool], cap: int, keep: Collection[int]
    ) -> None:
        """Drop the least recently seen templates of a room until one more fits in ``cap``.

        Nothing of ``keep`` goes: the room grows past its cap by those.
        """
        held = [(t.last_ms, t.id, k) for k, leaf in self.leaves.items() for t in leaf if room(k, t)]
        spare = sorted(r for r in held if r[1] not in keep)
        for _, ident, key in spare[: max(0, len(held) - cap + 1)]:
            leaf = self.leaves[key]
            gone = next(t for t in leaf if t.id == ident)
            leaf.remove(gone)
            if not leaf:
                del self.leaves[key]
            self.size -= 1
            if gone.known:
                self.forgotten += 1
            else:
                self.dropped += 1


def _best(leaf: list[Template], toks: list[str], threshold: float) -> Template | None:
    """The template of ``leaf`` a line joins (merging it), or ``None``."""
    text = " ".join(toks)
    for t in leaf:
        if t.text == text:
            return t  # the usual case: the line is the template
    best: tuple[float, int, int] | None = None
    chosen: Template | None = None
    for t in leaf:
        parts = t.text.split(" ")
        sim = similarity(parts, toks)
        # Ties: the more general template (more masks), then the older one.
        rank = (sim, parts.count(MASK), -t.id)
        if sim >= threshold and (best is None or rank > best):
            best, chosen = rank, t
    if chosen is not None:
        parts = chosen.text.split(" ")
        chosen.text = " ".join(a if a == b else MASK for a, b in zip(parts, toks, strict=True))
    return chosen
