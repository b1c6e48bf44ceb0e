"""The campaign statistics against hand-computed values (and SciPy's Fisher's exact test)."""

from __future__ import annotations

import importlib
import importlib.util
import itertools
import statistics

import pytest

from collector.matrix.stats import (
    bootstrap_median_difference,
    compare_medians,
    compare_rates,
    fisher_exact,
    spread,
)
from tests.support.skips import require


@pytest.mark.parametrize(
    ("table", "p"),
    [
        # [[2, 1], [0, 3]]: P(a) = C(3,a) C(3,2-a) / C(6,2) = 3/15, 9/15, 3/15 for a = 0, 1, 2;
        # as or less probable than a = 2: a = 0 and a = 2, so p = 6/15.
        ((2, 1, 0, 3), 0.4),
        # All vs none with 3 each: 2 tables of 1/20 each.
        ((3, 0, 0, 3), 0.1),
        ((5, 0, 0, 5), 2 / 252),
        ((1, 0, 0, 1), 1.0),
        ((0, 5, 0, 5), 1.0),
        # [[1, 9], [11, 3]] (the tea-tasting-like textbook table): 0.002759...
        ((1, 9, 11, 3), 0.0027594562),
    ],
)
def test_fisher_exact_on_small_tables(table: tuple[int, int, int, int], p: float) -> None:
    assert fisher_exact(*table) == pytest.approx(p, rel=1e-6)


def test_fisher_exact_agrees_with_scipy_on_every_small_table() -> None:
    require(importlib.util.find_spec("scipy") is not None, "SciPy (the test extra) not installed")
    scipy_stats = importlib.import_module("scipy.stats")
    for a, b, c, d in itertools.product(range(5), repeat=4):
        expected = scipy_stats.fisher_exact([[a, b], [c, d]])[1]
        assert fisher_exact(a, b, c, d) == pytest.approx(expected, abs=1e-12), (a, b, c, d)


def test_spread_is_median_and_range() -> None:
    assert spread([3.0, 1.0, 2.0]) == {"median": 2.0, "min": 1.0, "max": 3.0, "n": 3}
    assert spread([4.0, 1.0, 2.0, 3.0])["median"] == 2.5
    assert spread([]) is None


def test_bootstrap_of_constant_samples_is_the_difference_itself() -> None:
    assert bootstrap_median_difference([5.0] * 4, [2.0] * 3) == (3.0, 3.0)


def test_bootstrap_interval_is_seeded_and_holds_the_observed_difference() -> None:
    values, baseline = [10.0, 11.0, 12.0, 13.0, 14.0], [1.0, 2.0, 3.0, 4.0, 5.0]
    lo, hi = bootstrap_median_difference(values, baseline)
    assert (lo, hi) == bootstrap_median_difference(values, baseline)
    # Every resampled median lies within each sample's range: the difference too.
    assert 10.0 - 5.0 <= lo <= 9.0 <= hi <= 14.0 - 1.0
    assert lo > 0


def test_rates_in_words_say_when_n_is_too_small() -> None:
    found = compare_rates(2, 3, 0, 3)
    assert found["p_value"] == pytest.approx(0.4)
    assert found["difference"] == pytest.approx(2 / 3, abs=1e-4)
    assert found["words"] == (
        "2 of 3 vs 0 of 3: p = 0.4, not distinguishable "
        "(with 3 vs 3 repetitions even 3 of 3 vs 0 of 3 would give p = 0.1)"
    )
    assert compare_rates(5, 5, 0, 5)["words"] == "5 of 5 vs 0 of 5: p = 0.0079, more often"
    assert compare_rates(1, 5, 0, 5)["words"] == "1 of 5 vs 0 of 5: p = 1, not distinguishable"
    assert compare_rates(0, 0, 1, 2)["words"] == "0 of 0 vs 1 of 2: nothing to compare"


def test_medians_in_words() -> None:
    higher = compare_medians([10.0, 11.0, 12.0, 13.0, 14.0], [1.0, 2.0, 3.0, 4.0, 5.0])
    assert higher is not None
    assert (higher["median"], higher["baseline_median"], higher["difference"]) == (12, 3, 9)
    assert higher["words"].startswith("median 12 vs 3 (difference +9), 95 % interval [+")
    assert higher["words"].endswith(": higher")
    same = compare_medians([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    assert same is not None and same["words"].endswith("not distinguishable")
    few = compare_medians([10.0, 11.0], [1.0, 2.0, 3.0])
    assert few is not None and few["ci95"] is None
    assert few["words"] == (
        "median 10.5 vs 2 (difference +8.5); 2 vs 3 repetitions are too few for an interval "
        "(at least 3 each)"
    )
    assert statistics.median([10.0, 11.0]) == few["median"]
    assert compare_medians([], [1.0]) is None
