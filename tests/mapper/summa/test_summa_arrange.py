"""Arrangement searches: exhaustive search against a plain enumeration, the heuristic's
evaluation count and its miss against exhaustive search on many small layouts."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from mapper.summa.arrange import (
    ArrangeError,
    arrange,
    cluster_blocks,
    exhaustive,
    heuristic,
    search_space,
)
from mapper.summa.cost import Grouping, cost
from mapper.summa.tiling import partition
from tests.mapper.summa.test_summa_cost import EXAMPLE_GROUPS, example_layout


def random_case(seed, p_range=(3, 10), clusters=(2, 4)):
    rng = np.random.default_rng(seed)
    p = int(rng.integers(*p_range))
    layout = partition(rng.uniform(0.3, 3.0, p), int(rng.integers(p, 80)))
    layout = layout.with_columns([rng.permutation(c) for c in layout.columns()])
    groups = rng.integers(0, int(rng.integers(*clusters)), p)
    return layout, Grouping.two_level(groups)


def enumerate_all(layout, grouping, exchange=False):
    """Every arrangement through the public layout/cost API, one at a time."""
    cols = layout.columns()
    orders = itertools.permutations(range(len(cols))) if exchange else [None]
    norms = []
    for order in orders:
        for combo in itertools.product(*(itertools.permutations(c) for c in cols)):
            norms.append(cost(layout.with_columns(combo, column_order=order), grouping).norm)
    return min(norms), max(norms), len(norms)


@pytest.mark.parametrize("seed", range(12))
def test_exhaustive_equals_plain_enumeration(seed):
    layout, g = random_case(seed, p_range=(3, 8))
    lo, hi, count = enumerate_all(layout, g)
    best = exhaustive(layout, g)
    assert best.evaluations == count == search_space(layout)
    assert best.after.norm == pytest.approx(lo)
    assert exhaustive(layout, g, worst=True).after.norm == pytest.approx(hi)
    assert best.before == cost(layout, g)


@pytest.mark.parametrize("seed", range(4))
def test_exhaustive_with_column_exchanges(seed):
    layout, g = random_case(50 + seed, p_range=(4, 7))
    lo, _, count = enumerate_all(layout, g, exchange=True)
    best = exhaustive(layout, g, exchange_columns=True)
    assert best.evaluations == count
    assert best.after.norm == pytest.approx(lo)
    assert best.after.norm <= exhaustive(layout, g).after.norm + 1e-9


def test_heuristic_groups_columns_and_counts_evaluations():
    layout, g = random_case(3, p_range=(9, 10))
    result = heuristic(layout, g)
    cols = result.layout.columns()
    blocks = [len(cluster_blocks(c, g)) for c in layout.columns()]
    assert result.evaluations == sum(math.factorial(b) for b in blocks[1:])
    for c in cols:  # every cluster contiguous in its column
        labels = g.clusters[c]
        assert len(np.unique(labels)) == 1 + int(np.count_nonzero(np.diff(labels)))
    # the two-level cost_B is then the least possible: w_j x (groups in column j - 1)
    least = sum(w * (len(np.unique(g.clusters[c])) - 1)
                for w, c in zip(layout.column_widths, layout.columns(), strict=True))
    assert result.after.cost_b == least
    assert np.array_equal(np.sort(result.layout.height), np.sort(layout.height))


def test_heuristic_miss_is_bounded():
    """The docstring's claim: on small random layouts the heuristic's norm is at most 25 %
    above the exhaustive optimum and equal to it on most layouts."""
    ratios = []
    for seed in range(400):
        layout, g = random_case(1000 + seed, p_range=(3, 12), clusters=(2, 5))
        if search_space(layout) > 100_000:
            continue
        h, e = heuristic(layout, g).after.norm, exhaustive(layout, g).after.norm
        assert e <= h + 1e-9
        ratios.append(1.0 if h == e else h / e)
    ratios = np.array(ratios)
    assert len(ratios) > 300
    assert ratios.max() <= 1.25
    assert np.mean(ratios == 1.0) >= 0.75


def test_worked_example_heuristic_and_optimum():
    layout, g = example_layout(), Grouping.two_level(EXAMPLE_GROUPS)
    best = exhaustive(layout, g)
    # cheaper than the slides' "optimal" 73.59 on this reconstruction (the slides'
    # exact layout is not in the text); the heuristic finds a near-optimal one
    assert (best.after.cost_a, best.after.cost_b) == (33, 54)
    h = heuristic(layout, g)
    assert (h.after.cost_a, h.after.cost_b) == (35, 54)
    assert h.evaluations == math.factorial(3) + math.factorial(3)
    assert h.reduction == pytest.approx(1 - math.hypot(35, 54) / math.hypot(64, 63))


def test_arrange_keeps_original_when_heuristic_is_worse():
    # search for a layout where the greedy heuristic ends above the start
    for seed in range(3000):
        layout, g = random_case(seed, p_range=(4, 12))
        if heuristic(layout, g).after.norm > cost(layout, g).norm:
            result = arrange(layout, g)
            assert result.kept_original and result.after == result.before
            assert result.layout is layout
            return
    pytest.skip("no layout where the heuristic loses in this sample")


def test_limits():
    layout, g = random_case(5, p_range=(12, 13))
    with pytest.raises(ArrangeError, match="limit"):
        exhaustive(layout, g, limit=10)
    with pytest.raises(ArrangeError, match="coarser"):
        heuristic(layout, Grouping.two_level(np.arange(layout.n)), group_limit=1)
    with pytest.raises(ArrangeError):
        arrange(layout, g, "simulated-annealing")


def test_two_level_lower_bound_below_every_arrangement():
    from mapper.summa.cost import two_level_lower_bound
    tight = 0
    for seed in range(60):
        layout, g = random_case(3000 + seed, p_range=(3, 8))
        lb = two_level_lower_bound(layout, g)
        costs = [cost(layout.with_columns(combo), g) for combo in
                 itertools.product(*(itertools.permutations(c) for c in layout.columns()))]
        assert lb.cost_a <= min(c.cost_a for c in costs)
        assert lb.cost_b == min(c.cost_b for c in costs)  # reached by grouping
        tight += lb.norm == min(c.norm for c in costs)
    assert tight > 0  # and the norm bound is reached on some layouts
