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
    "Checkpoint \\d+ of job [0-9a-f]{32} expired",
]


@pytest.mark.parametrize("pattern", EVIL)
def test_patterns_that_could_backtrack_are_refused(pattern: str) -> None:
    with pytest.raises(UnsafePattern):
        check_pattern(pattern)


@pytest.mark.parametrize("pattern", HARMLESS)
def test_harmless_patterns_pass_and_run_fast_on_a_long_hostile_text(pattern: str) -> None:
    assert check_pattern(pattern) == pattern
    text = ("a" * (SEARCH_CHARS - 1)) + "!"
    started = time.perf_counter()
    re.search(pattern, text)
    assert time.perf_counter() - started < 0.5


def test_the_classic_evil_pattern_really_is_slow() -> None:
    # What the check protects from: 24 characters already take a measurable time.
    started = time.perf_counter()
    re.search("(a+)+$", "a" * 22 + "!")
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
