"""The trend statistics against their textbook definitions."""

from __future__ import annotations

import random

from detectors.stats import mann_kendall_s, mann_kendall_z


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
