from __future__ import annotations

import re
import time

import pytest

from detectors.rules.regex import MAX_PATTERN_CHARS, SEARCH_CHARS, UnsafePattern, check_pattern

EVIL = [
    "(a+)+$",
    "(a|aa)*b",
    "(.*a){20}",
    r"(\w+\s?)*$",
    r"(ab|\w)*c",
    "(a?a)*$",
    r"(a)\1",
    "(?P<x>a)(?P=x)",
    "(a)?(?(1)b|c)",
    "a{5000}",
    ".*a.*b.*c.*d.*e",
    "(?:a{1,2}){1,1000}b",
    "((a{1,2}){3}){4}",
    "(a|b|ab)*c",
    "^(\\d+)*$",
    ".*a.*b",
    r"\w+_\w+$",
    "x.*y.*z.*w",
    ".*Exception.*x$",
    # what a random search over small patterns found passing an earlier check (each
    # seconds on a few hundred characters): an optional part between two stars, a star
    # inside an optional group, a separator both sides can match
    "a+ ?a*$",
    r"[ab]*(\w+)?b?c",
    r"\w*[^a]\w*c",
    r".(\w+[^a]+)? +",
    r"a*\w*\w+\w$",
    r"[ab]+a(a?[ab]*b[ab]*)\wc",
    "x+(.?a?x[^a]?){1,3}c",
    ".*(a{1,3}){1,3}c",
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
]


@pytest.mark.parametrize("pattern", EVIL)
def test_patterns_that_could_backtrack_are_refused(pattern: str) -> None:
    with pytest.raises(UnsafePattern):
        check_pattern(pattern)


@pytest.mark.parametrize("pattern", HARMLESS)
def test_harmless_patterns_pass_and_search_a_long_hostile_text_in_milliseconds(
    pattern: str,
) -> None:
    assert check_pattern(pattern) == pattern
    texts = ["a" * (SEARCH_CHARS - 1) + "!", "ab" * (SEARCH_CHARS // 2), "1 " * (SEARCH_CHARS // 2)]
    started = time.perf_counter()
    for text in texts:
        re.search(pattern, text)
    # The worst of these takes about 15 ms on the development machine (a failing \w+$
    # search, quadratic); 1 s leaves room for a busy one.
    assert time.perf_counter() - started < 1.0


def test_the_classic_evil_pattern_really_is_slow() -> None:
    # What the check protects from: 24 characters take 1.5 s on the development machine,
    # and each more doubles it; 40 would take a day.
    started = time.perf_counter()
    re.search("(a+)+$", "a" * 24 + "!")
    assert time.perf_counter() - started > 0.05


def test_two_wildcards_that_can_split_a_text_alike_are_slow_too() -> None:
    # .*a.*b is cubic: on the 2,000 characters a rule searches it takes about 2 s.
    started = time.perf_counter()
    re.search(".*a.*b", "a" * 1000)
    assert time.perf_counter() - started > 0.05


def test_length_and_validity() -> None:
    with pytest.raises(UnsafePattern, match="at most 512"):
        check_pattern("a" * (MAX_PATTERN_CHARS + 1))
    with pytest.raises(UnsafePattern, match="not a valid regular expression"):
        check_pattern("(unclosed")


def test_case_folding_makes_alternatives_overlap() -> None:
    check_pattern("(a|Ab)*")
    with pytest.raises(UnsafePattern):
        check_pattern("(?i)(a|Ab)*")


def test_a_backreference_is_refused_for_what_it_is() -> None:
    with pytest.raises(UnsafePattern, match="backreferences"):
        check_pattern(r"(a)\1")
