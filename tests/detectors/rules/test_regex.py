from __future__ import annotations

import pickle
import random
import re
import time

import pytest
from pyspark import cloudpickle

from detectors.rules.regex import (
    MAX_PATTERN_CHARS,
    MAX_PROGRAM_SIZE,
    UnsafePattern,
    check_pattern,
    compiled,
    fullmatch,
    search,
)

# Patterns that make Python's backtracking re take exponential or polynomial time, and the
# ones a random search over small patterns found passing the static check rules had before
# RE2 (each seconds on a few hundred characters with re). RE2 takes them all, linear.
BACKTRACKING = [
    "(a+)+$",
    "(a|aa)*b",
    "(.*a){20}",
    r"(\w+\s?)*$",
    r"(ab|\w)*c",
    "(a?a)*$",
    ".*a.*b.*c.*d.*e",
    "((a{1,2}){3}){4}",
    "(a|b|ab)*c",
    "^(\\d+)*$",
    ".*a.*b",
    r"\w+_\w+$",
    "x.*y.*z.*w",
    ".*Exception.*x$",
    "a+ ?a*$",
    r"[ab]*(\w+)?b?c",
    r"\w*[^a]\w*c",
    r".(\w+[^a]+)? +",
    r"a*\w*\w+\w$",
    r"[ab]+a(a?[ab]*b[ab]*)\wc",
    "x+(.?a?x[^a]?){1,3}c",
    ".*(a{1,3}){1,3}c",
    # large but within the program cap: the costliest per character that pass
    ".{250}x",
    "(a{1,10}){1,25}c",
]
HARMLESS = [
    ".*Exception.*",
    "(?i)timeout",
    "^Sink: .*",
    r"(\d{1,3}\.){3}\d{1,3}",
    "(foo|bar)*",
    "[^ ]+ expired",
    "(a{2}){50}",
    r"(\w|_)+$",
    "a[^b]*b.*c",
    r"\d+ .*expired",
    r"\w+ \w+$",
    ".*(?:Timeout|timed out).*",
    "(a?b?){3}",
    r"(\d{1,3}\.){3}\d{1,3}.*",
    "Checkpoint \\d+ of job [0-9a-f]{32} expired",
    "(?i)commit(ting)? offsets? .*failed",
    r"(?P<tm>[\w.-]+):\d+",
    r"\p{L}+ lost",
]
# What Python's re has and RE2 has not, as users meet it.
PYTHON_ONLY = [
    r"(a)\1",
    "(?P<x>a)(?P=x)",
    "(a)?(?(1)b|c)",
    "Task(?=Manager)",
    "(?<!Task)Manager",
    "(?<=job )[0-9a-f]+",
    "(?!INFO)\\w+",
    "(?>a+)b",
    "a++b",
    "(?x) Task Manager",
    "Task(?#the JVM)Manager",
    "failed\\Z",
]


def hostile(n: int) -> list[str]:
    """Texts of ``n`` characters that make backtracking engines try every split."""
    return [
        "a" * (n - 1) + "!",
        "ab" * (n // 2),
        "a " * (n // 2),
        "1" * (n - 1) + "x",
        "é" * n,
    ]


def fastest(pattern: str, texts: list[str], runs: int = 5) -> float:
    """The least time of ``runs`` searches of every text (a busy machine only adds time)."""
    program = compiled(pattern)
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        for text in texts:
            program.search(text)
        best = min(best, time.perf_counter() - started)
    return best


@pytest.mark.parametrize("pattern", BACKTRACKING)
def test_patterns_that_backtrack_in_python_run_in_linear_time_in_re2(pattern: str) -> None:
    assert check_pattern(pattern) == pattern
    short, long = fastest(pattern, hostile(2_000)), fastest(pattern, hostile(20_000))
    # Ten times the text: about ten times the time for a linear search (less while the
    # per-call cost dominates), a hundred for a quadratic one, forever for (a+)+$ in re.
    # The floor absorbs timer resolution on searches of microseconds.
    assert long < 30 * max(short, 1e-4)
    # And in absolute terms: the worst of these takes about 20 ms on the development
    # machine for all five texts of 20,000 characters.
    assert long < 1.0


def test_a_pattern_that_outgrows_re2s_dfa_stays_linear() -> None:
    # A count after a character any position may start (a[ab]{30}c on random a and b)
    # needs more DFA states than RE2 keeps: past some thousands of characters it falls
    # back to running every instruction at once (its NFA), a cost per character bounded by
    # the program's size: 14 ms on 20,000 characters on the development machine, 60 ms
    # on 200,000 (under a millisecond on the 2,000 of a message).
    rng = random.Random(0)
    text = "".join(rng.choice("ab") for _ in range(200_000))
    short, long = fastest("a[ab]{30}c", [text[:20_000]]), fastest("a[ab]{30}c", [text])
    assert long < 30 * max(short, 1e-4)
    assert long < 2.0


@pytest.mark.parametrize("pattern", HARMLESS)
def test_harmless_patterns_pass(pattern: str) -> None:
    assert check_pattern(pattern) == pattern
    assert fastest(pattern, hostile(2_000), runs=1) < 0.5


def test_the_classic_evil_pattern_is_slow_in_python_re_and_not_in_re2() -> None:
    # What RE2 protects from: with re, 24 characters take 1.5 s on the development machine
    # and each more doubles it; RE2 takes microseconds on 20,000.
    text = "a" * 24 + "!"
    started = time.perf_counter()
    re.search("(a+)+$", text)
    backtracking = time.perf_counter() - started
    assert backtracking > 0.05
    assert fastest("(a+)+$", [text]) < backtracking / 10
    assert not search("(a+)+$", "a" * 20_000 + "!")


@pytest.mark.parametrize("pattern", PYTHON_ONLY)
def test_python_re_features_re2_lacks_are_refused_saying_so(pattern: str) -> None:
    re.compile(pattern)  # valid for Python's re: the refusal is RE2's
    with pytest.raises(UnsafePattern) as exc:
        check_pattern(pattern)
    message = str(exc.value)
    assert message.startswith(f"{pattern}: RE2 cannot compile it (")
    assert "RE2 syntax, which has no backreferences" in message
    assert "docs/rules.md" in message


def test_a_large_program_is_refused() -> None:
    with pytest.raises(UnsafePattern, match=f"instructions; at most {MAX_PROGRAM_SIZE}"):
        check_pattern(".{1000}x")  # 8,000 instructions: one per byte of UTF-8 per count
    with pytest.raises(UnsafePattern, match="compiled program is too large"):
        check_pattern(r"(\p{L}{1,10}){1,50}")  # beyond RE2's own memory budget


def test_counts_above_a_thousand_are_refused_by_re2() -> None:
    for pattern in ("a{5000}", "(a{1,100}){1,100}", "(?:a{1,2}){1,1000}b"):
        with pytest.raises(UnsafePattern, match="invalid repetition size"):
            check_pattern(pattern)


def test_length_and_validity() -> None:
    with pytest.raises(UnsafePattern, match="at most 512"):
        check_pattern("a" * (MAX_PATTERN_CHARS + 1))
    with pytest.raises(UnsafePattern, match="missing \\)"):
        check_pattern("(unclosed")


def test_where_re2_and_python_re_differ_without_refusing() -> None:
    # \w, \d and \s are ASCII in RE2 (Unicode in re): \p{L} matches letters beyond it.
    assert not fullmatch(r"\w+", "café")
    assert fullmatch(r"[\w\p{L}]+", "café")
    # $ is the end of the text only (re also matches before a last newline).
    assert not search("failed$", "failed\n")
    assert search("(?i)É", "é")


def test_search_and_fullmatch() -> None:
    assert search("Checkpoint \\d+ expired", "x: Checkpoint 12 expired before completing")
    assert not search("Checkpoint \\d+ expired", "Checkpoint x expired")
    assert fullmatch("orders-.*", "orders-x") and not fullmatch("orders", "orders-x")
    # Nothing is cut: a match far into a long message counts.
    assert search("needle", "x" * 50_000 + "needle")


def test_a_compiled_pattern_is_made_once_per_process_and_travels_as_its_text() -> None:
    assert compiled("(?i)timeout") is compiled("(?i)timeout")
    again = pickle.loads(cloudpickle.dumps(compiled("(?i)timeout")))
    assert again.search("Timeout waiting") is not None
    with pytest.raises(UnsafePattern):
        compiled(r"(a)\1")
