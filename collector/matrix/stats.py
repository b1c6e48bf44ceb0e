"""The statistics a campaign report may claim, and the words for them; pure functions.

- k of N rates, compared with Fisher's exact test (two-sided, as R's ``fisher.test`` and
  SciPy's ``fisher_exact``: the tables at most as probable as the observed one);
- medians with their range, and the difference of two medians with a percentile bootstrap
  95 % interval (seeded, so a report never changes when rebuilt).

With few repetitions most differences cannot be told apart; the words say so instead of
pretending (``2 of 3 vs 0 of 3: p = 0.4, not distinguishable``).
"""

from __future__ import annotations

import random
import statistics
from math import comb
from typing import Any

ALPHA = 0.05
BOOTSTRAP_RESAMPLES = 2000
MIN_FOR_INTERVAL = 3  # repetitions per side before a bootstrap interval means anything
# Relative tolerance when comparing table probabilities (floating-point ties).
_TIE = 1 + 1e-7


def fisher_exact(a: int, b: int, c: int, d: int) -> float:
    """Two-sided p-value of the 2x2 table [[a, b], [c, d]]."""
    if min(a, b, c, d) < 0:
        raise ValueError("counts must not be negative")
    row1, col1, n = a + b, a + c, a + b + c + d
    if n == 0:
        return 1.0
    lo, hi = max(0, col1 - (n - row1)), min(row1, col1)
    total = comb(n, col1)

    def prob(x: int) -> float:
        return comb(row1, x) * comb(n - row1, col1 - x) / total

    observed = prob(a)
    p = sum(q for x in range(lo, hi + 1) if (q := prob(x)) <= observed * _TIE)
    return min(1.0, p)


def spread(values: list[float]) -> dict[str, Any] | None:
    """``{"median", "min", "max", "n"}`` of the values, or None without any."""
    if not values:
        return None
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "n": len(values),
    }


def bootstrap_median_difference(
    values: list[float],
    baseline: list[float],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of median(values) - median(baseline)."""
    if not values or not baseline:
        raise ValueError("both samples need values")
    rng = random.Random(seed)
    diffs = sorted(
        statistics.median(rng.choices(values, k=len(values)))
        - statistics.median(rng.choices(baseline, k=len(baseline)))
        for _ in range(resamples)
    )
    tail = (1 - confidence) / 2
    lo = diffs[int(tail * resamples)]
    hi = diffs[min(resamples - 1, int((1 - tail) * resamples))]
    return lo, hi


def _p(p: float) -> str:
    return f"{p:.2g}"


def compare_rates(k: int, n: int, k0: int, n0: int) -> dict[str, Any]:
    """A k of n rate against the baseline's k0 of n0: difference, p-value and words."""
    p = fisher_exact(k, n - k, k0, n0 - k0)
    head = f"{k} of {n} vs {k0} of {n0}"
    if n == 0 or n0 == 0:
        words = f"{head}: nothing to compare"
    elif p < ALPHA:
        words = f"{head}: p = {_p(p)}, {'more' if k / n > k0 / n0 else 'less'} often"
    else:
        words = f"{head}: p = {_p(p)}, not distinguishable"
        best = fisher_exact(n, 0, 0, n0)
        if best >= ALPHA:
            words += (
                f" (with {n} vs {n0} repetitions even {n} of {n} vs 0 of {n0} "
                f"would give p = {_p(best)})"
            )
    return {
        "k": k,
        "n": n,
        "baseline_k": k0,
        "baseline_n": n0,
        "difference": None if not (n and n0) else round(k / n - k0 / n0, 4),
        "p_value": p,
        "words": words,
    }


def _num(x: float) -> str:
    return f"{x:.3g}"


def compare_medians(values: list[float], baseline: list[float]) -> dict[str, Any] | None:
    """median(values) against median(baseline): difference, bootstrap interval and words."""
    if not values or not baseline:
        return None
    m, m0 = statistics.median(values), statistics.median(baseline)
    diff = m - m0
    head = f"median {_num(m)} vs {_num(m0)} (difference {diff:+.3g})"
    interval = None
    if min(len(values), len(baseline)) < MIN_FOR_INTERVAL:
        words = (
            f"{head}; {len(values)} vs {len(baseline)} repetitions are too few "
            f"for an interval (at least {MIN_FOR_INTERVAL} each)"
        )
    else:
        lo, hi = bootstrap_median_difference(values, baseline)
        interval = [lo, hi]
        where = f"95 % interval [{lo:+.3g}, {hi:+.3g}]"
        if lo > 0:
            words = f"{head}, {where}: higher"
        elif hi < 0:
            words = f"{head}, {where}: lower"
        else:
            words = f"{head}, {where}: not distinguishable"
    return {
        "median": m,
        "baseline_median": m0,
        "difference": diff,
        "ci95": interval,
        "n": len(values),
        "baseline_n": len(baseline),
        "words": words,
    }
