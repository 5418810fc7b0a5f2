"""The trend statistics against their textbook definitions and against scipy."""

from __future__ import annotations

import math
import random
import warnings
from collections import Counter

import numpy as np
import pytest
from scipy import stats

from detectors.stats import mann_kendall_s, mann_kendall_z, median_interval, theil_sen


def pairwise_s(y: list[float]) -> int:
    """Mann–Kendall S by its definition: every pair, O(n^2)."""
    return sum((y[j] > y[i]) - (y[j] < y[i]) for i in range(len(y)) for j in range(i + 1, len(y)))


def test_mann_kendall_s_counts_every_pair_as_the_definition_does() -> None:
    rng = random.Random(7)
    for n in (0, 1, 2, 3, 10, 60, 200):
        for _ in range(20):
            y = [float(rng.randint(0, 5 if n > 10 else 100)) for _ in range(n)]  # ties too
            assert mann_kendall_s(y) == pairwise_s(y)


def test_mann_kendall_z_is_positive_for_a_rise_negative_for_a_fall_zero_when_flat() -> None:
    rising = [float(i) for i in range(30)]
    assert mann_kendall_z(rising) > 3.5
    assert mann_kendall_z(rising[::-1]) < -3.5
    assert mann_kendall_z([5.0] * 30) == 0.0


# --- against scipy ---------------------------------------------------------------------------
#
# The same statistics from scipy (tests only; the detectors stay pure Python), on seeded
# random data and on data with ties, short series and constant ones. Tolerances: Theil-Sen
# and the medians to 1e-12 relative (the same slopes and the same middle; float rounding
# only), S to within 1e-6 of the integer, z to 1e-9 relative (scipy's z is recovered from
# its p-value).


def random_series(rng: random.Random, n: int, kind: str) -> tuple[list[float], list[float]]:
    """(times, values) of ``n`` points.

    ``smooth``: real values; ``ties``: few distinct values at repeated times; ``trend``: a
    noisy rise with a few spikes, at epoch-millisecond times.
    """
    if kind == "smooth":
        t = sorted(rng.uniform(0, 1e6) for _ in range(n))
        return t, [rng.gauss(0, 1) + 1e-6 * ti for ti in t]
    if kind == "ties":
        t = sorted(float(rng.randint(0, max(1, n // 2))) for _ in range(n))
        return t, [float(rng.randint(0, 4)) for _ in range(n)]
    t = [1_700_000_000_000.0 + 10_000 * i for i in range(n)]
    y = [2e8 + 5e3 * i + rng.gauss(0, 1e6) for i in range(n)]
    for i in rng.sample(range(n), n // 10):
        y[i] *= 3  # a few spikes
    return t, y


KINDS = ("smooth", "ties", "trend")
SIZES = (2, 3, 4, 5, 8, 13, 30, 60, 120, 200)


def scipy_s(y: list[float]) -> float:
    """Mann-Kendall S from scipy's Kendall tau-b against the index.

    With no ties in x, tau-b is S / sqrt(n0 (n0 - n1)), with n0 = n(n-1)/2 pairs and n1
    the pairs tied in y.
    """
    n = len(y)
    tau = float(stats.kendalltau(range(n), y).statistic)
    n0 = n * (n - 1) // 2
    n1 = sum(c * (c - 1) // 2 for c in Counter(y).values())
    return tau * math.sqrt(n0) * math.sqrt(n0 - n1)


def scipy_z(y: list[float]) -> float:
    """The z of scipy's asymptotic Kendall test against the index (n >= 3).

    It divides S by the tie-corrected Mann-Kendall standard deviation; z is recovered as
    the normal quantile of its two-sided p-value, with the sign of tau.
    """
    res = stats.kendalltau(range(len(y)), y, method="asymptotic")
    return math.copysign(float(stats.norm.isf(res.pvalue / 2)), res.statistic)


def scipy_theil_sen(t: list[float], y: list[float]) -> float:
    """scipy's Theil-Sen slope; NaN where it has none (all times equal, or one point)."""
    with warnings.catch_warnings():
        # Newer scipy warns and returns NaN where older releases raised ValueError.
        warnings.simplefilter("ignore")
        try:
            return float(stats.theilslopes(y, t).slope)
        except ValueError:
            return math.nan


def test_theil_sen_slope_matches_scipy_theilslopes() -> None:
    rng = random.Random(25)
    for kind in KINDS:
        for n in SIZES:
            for _ in range(10):
                t, y = random_series(rng, n, kind)
                if len(set(t)) < 2:
                    continue  # see the next test
                expected = scipy_theil_sen(t, y)
                got = theil_sen(list(zip(t, y, strict=True)))
                assert got == pytest.approx(expected, rel=1e-12, abs=1e-12), (kind, t, y)


def test_theil_sen_without_two_distinct_times_is_flat_where_scipy_has_no_slope() -> None:
    # By design: a detector's window of one sample (or of samples at one instant) has no
    # trend to report, so theil_sen says 0.0 (a number the detectors compare); scipy has
    # no slope to give.
    for points in ([(5.0, 1.0)], [(5.0, 1.0), (5.0, 9.0), (5.0, 4.0)]):
        assert theil_sen(points) == 0.0
        assert math.isnan(scipy_theil_sen([t for t, _ in points], [y for _, y in points]))
    assert theil_sen([]) == 0.0


def test_mann_kendall_s_is_scipys_kendall_tau_b_times_its_denominator() -> None:
    rng = random.Random(26)
    for kind in KINDS:
        for n in SIZES:
            for _ in range(10):
                _, y = random_series(rng, n, kind)
                if len(set(y)) < 2:
                    continue  # tau-b is undefined for a constant series
                assert abs(mann_kendall_s(y) - scipy_s(y)) < 1e-6, (kind, y)


def test_mann_kendall_z_is_scipys_tie_corrected_z_with_a_continuity_correction() -> None:
    # By design, mann_kendall_z moves S one step towards 0 before dividing (the usual
    # continuity correction of the Mann-Kendall test: S is an integer of step 2 for
    # untied data, approximated by a continuous normal); scipy's kendalltau does not. The
    # variance is the same: n(n-1)(2n+5) less each tie group's t(t-1)(2t+5), over 18.
    # So z = z_scipy * (|S| - 1) / |S|, for n >= 3 (see below for shorter series).
    rng = random.Random(27)
    checked = 0
    for kind in KINDS:
        for n in SIZES:
            if n < 3:
                continue
            for _ in range(10):
                _, y = random_series(rng, n, kind)
                if len(set(y)) < 2:
                    continue
                s = mann_kendall_s(y)  # equal to scipy's (the test above)
                expected = 0.0 if s == 0 else scipy_z(y) * (abs(s) - 1) / abs(s)
                assert mann_kendall_z(y) == pytest.approx(expected, rel=1e-9, abs=1e-12), y
                checked += 1
    assert checked > 250


def test_mann_kendall_z_is_zero_where_scipy_has_no_z() -> None:
    # By design. A constant series has no variance left once its ties are taken out:
    # scipy's tau and p-value are NaN, mann_kendall_z says 0.0 (no trend). Two points:
    # scipy's asymptotic variance has a term over n - 2 = 0 and gives no z; the continuity
    # correction makes |S| = 1 a z of 0 anyway. One point or none: no pairs.
    for y in ([7.0] * 30, [2.0, 2.0, 2.0], [1.0, 2.0], [2.0, 1.0], [4.0], []):
        assert mann_kendall_z(y) == 0.0
    res = stats.kendalltau(range(30), [7.0] * 30, method="asymptotic")
    assert math.isnan(res.statistic) and math.isnan(res.pvalue)


def test_median_interval_is_the_median_of_the_positive_gaps() -> None:
    # The reference is numpy's median (scipy's own dependency) of the gaps between
    # consecutive times, repeated times (gap 0) left out.
    rng = random.Random(28)
    for n in (0, 1, 2, 3, 4, 7, 30, 101):
        for _ in range(20):
            times = sorted(rng.choice((rng.randint(0, 10**7), 5_000)) for _ in range(n))
            gaps = np.diff(np.array(times, dtype=float))
            gaps = gaps[gaps > 0]
            got = median_interval([(t, "payload") for t in times])
            if len(gaps) == 0:
                assert got is None
            else:
                assert got == pytest.approx(float(np.median(gaps)), rel=1e-12)
