"""Robust trend statistics shared by the detectors (pure Python, small inputs)."""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right, insort
from collections.abc import Sequence
from statistics import median
from typing import Any


def theil_sen(points: Sequence[tuple[float, float]]) -> float:
    """Median of the pairwise slopes: a line fit that a few outliers cannot drag.

    Example:
        >>> theil_sen([(0, 0), (1, 1), (2, 2), (3, 3), (4, 40)])
        1.0
    """
    slopes = [
        (y2 - y1) / (x2 - x1)
        for i, (x1, y1) in enumerate(points)
        for x2, y2 in points[i + 1 :]
        if x2 != x1
    ]
    return float(median(slopes)) if slopes else 0.0


def mann_kendall_s(y: list[float]) -> int:
    """Mann–Kendall S: pairs ``i < j`` with ``y[j] > y[i]`` less those with ``y[j] < y[i]``.

    Counted with a sorted prefix (``bisect``), O(n log n): the detectors judge it at every
    checkpoint of every job, and the pairwise double loop cost 0.3 ms at n = 60.

    Example:
        >>> mann_kendall_s([1, 2, 2, 3]), mann_kendall_s([3, 1, 2])
        (5, -1)
    """
    before: list[float] = []
    s = 0
    for i, v in enumerate(y):
        s += bisect_left(before, v) - (i - bisect_right(before, v))
        insort(before, v)
    return s


def mann_kendall_z(y: list[float]) -> float:
    """Mann–Kendall trend statistic as a z score (positive = upward), tie-corrected."""
    n = len(y)
    s = mann_kendall_s(y)
    ties: dict[float, int] = {}
    for v in y:
        ties[v] = ties.get(v, 0) + 1
    var = (n * (n - 1) * (2 * n + 5) - sum(t * (t - 1) * (2 * t + 5) for t in ties.values())) / 18
    if var <= 0 or s == 0:
        return 0.0
    return (s - 1 if s > 0 else s + 1) / math.sqrt(var)


def median_interval(samples: Sequence[Sequence[Any]]) -> float | None:
    """Median time between consecutive samples whose first item is their time (ms).

    ``None`` without two distinct times.
    """
    gaps = [b[0] - a[0] for a, b in zip(samples, samples[1:], strict=False) if b[0] > a[0]]
    return float(median(gaps)) if gaps else None


def next_cadence(
    last_trigger: Sequence[int] | None, cadence_ms: int | None, checkpoint_id: int, time_ms: int
) -> int | None:
    """The job's checkpoint interval once a trigger ``(checkpoint_id, time_ms)`` is seen.

    Flink triggers every interval, later only when the previous checkpoint runs long (one
    at a time by default), so the shortest spacing of consecutive triggers is the
    configured interval, and a creep cannot stretch it. Savepoints stay out (the caller
    skips them); a gap in the ids (a failed trigger, a savepoint) is no spacing.

    Example:
        >>> next_cadence((7, 1000), None, 8, 61000), next_cadence((7, 1000), 30000, 9, 2000)
        (60000, 30000)
    """
    if last_trigger is None or checkpoint_id != last_trigger[0] + 1 or time_ms <= last_trigger[1]:
        return cadence_ms
    gap = time_ms - last_trigger[1]
    return gap if cadence_ms is None else min(cadence_ms, gap)


def for_humans(seconds: float) -> str:
    """``42 min`` or ``6.5 h``."""
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
