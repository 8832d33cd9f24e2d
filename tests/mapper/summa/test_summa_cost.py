"""The slides' cost model: the worked example's sums, and cost_A / cost_B against a
cell-by-cell brute force on random layouts and groupings."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from mapper.model.machine import Hierarchy
from mapper.summa.cost import (
    Grouping,
    GroupingError,
    column_transfers,
    cost,
    pair_cost_a,
    row_overlaps,
)
from mapper.summa.tiling import build_column_layout, partition

# The slides' worked example, reconstructed: the text gives the overlap heights and
# their h (worst: 2 x (11+3+3+3+4+2+6); optimum: 1 x (6+8) + 2 x (1+9+2+6)) and the
# column widths with their h (12, 12, 9).  The widths make the matrix 33 x 33, so each
# arrangement also has a band of height 1 inside one cluster (h = 0, not listed).  The
# layout below (three clusters 0/1/2, ten rectangles) was found by a search over the
# columns' boundary sets and group labels; it reproduces both lists exactly.
EXAMPLE_HEIGHTS = [[14, 10, 9], [17, 15, 1], [11, 9, 6, 7]]
EXAMPLE_WIDTHS = [12, 12, 9]
EXAMPLE_GROUPS = [0, 1, 1, 2, 0, 1, 0, 1, 2, 1]
EXAMPLE_OPTIMUM = [[2, 1, 0], [3, 5, 4], [6, 9, 7, 8]]  # the "worst" is the rank order


def example_layout():
    heights = np.array(sum(EXAMPLE_HEIGHTS, []))
    bounds = np.cumsum([0] + [len(c) for c in EXAMPLE_HEIGHTS])
    cols = [np.arange(bounds[j], bounds[j + 1]) for j in range(3)]
    return build_column_layout(cols, heights, np.array(EXAMPLE_WIDTHS), 33)


def test_worked_example_worst_case():
    layout, g = example_layout(), Grouping.two_level(EXAMPLE_GROUPS)
    bands = row_overlaps(layout, g)
    assert bands.height.tolist() == [11, 3, 3, 3, 4, 2, 6, 1]
    assert bands.h.tolist() == [2, 2, 2, 2, 2, 2, 2, 0]
    assert column_transfers(layout, g).tolist() == [1, 2, 3]
    c = cost(layout, g)
    assert (c.cost_a, c.cost_b) == (2 * (11 + 3 + 3 + 3 + 4 + 2 + 6), 1 * 12 + 2 * 12 + 3 * 9)
    assert (c.cost_a, c.cost_b) == (64, 63)
    assert math.floor(c.norm * 100) / 100 == 89.80  # sqrt(8065) = 89.805; slides truncate


def test_worked_example_optimum():
    g = Grouping.two_level(EXAMPLE_GROUPS)
    layout = example_layout().with_columns([np.array(c) for c in EXAMPLE_OPTIMUM])
    bands = row_overlaps(layout, g)
    by_h = {h: sorted(bands.height[bands.h == h].tolist()) for h in (0, 1, 2)}
    assert by_h == {0: [1], 1: [6, 8], 2: [1, 2, 6, 9]}
    assert column_transfers(layout, g).tolist() == [1, 2, 2]
    c = cost(layout, g)
    assert (c.cost_a, c.cost_b) == (1 * (6 + 8) + 2 * (1 + 9 + 2 + 6), 12 + 2 * 12 + 2 * 9)
    assert (c.cost_a, c.cost_b) == (50, 54)
    assert math.floor(c.norm * 100) / 100 == 73.59  # sqrt(5416) = 73.593


def brute_force(layout, group_ids, weights):
    """Cell by cell: the owner of every cell, then each row's ring along the columns
    and each column's ring down its rectangles."""
    n = layout.size
    owner = np.full((n, n), -1)
    for r in range(layout.n):
        owner[layout.row_offset[r]:layout.row_offset[r] + layout.height[r],
              layout.col_offset[r]:layout.col_offset[r] + layout.width[r]] = r

    def d(a, b):
        for lev in range(group_ids.shape[1]):
            if group_ids[a, lev] == group_ids[b, lev]:
                return weights[lev]
        raise AssertionError

    x0 = np.concatenate([[0], np.cumsum(layout.column_widths)[:-1]])
    cost_a = sum(d(owner[y, x0[j]], owner[y, x0[j + 1]])
                 for y in range(n) for j in range(len(x0) - 1))
    cost_b = 0.0
    for j, x in enumerate(x0):
        seq = [owner[y, x] for y in range(n)]
        runs = [seq[0]] + [b for a, b in itertools.pairwise(seq) if a != b]
        cost_b += layout.column_widths[j] * sum(d(a, b) for a, b in itertools.pairwise(runs))
    return cost_a, cost_b


@pytest.mark.parametrize("seed", range(25))
def test_cost_matches_cell_brute_force(seed):
    rng = np.random.default_rng(seed)
    p = int(rng.integers(2, 14))
    layout = partition(rng.uniform(0.5, 3, p), int(rng.integers(p, 60)))
    layout = layout.with_columns([rng.permutation(c) for c in layout.columns()])
    groups = rng.integers(0, int(rng.integers(1, 4)), p)
    g = Grouping.two_level(groups)
    c = cost(layout, g)
    assert (c.cost_a, c.cost_b) == brute_force(layout, g.group_ids, g.weights)
    # hierarchy with weights: nodes inside switches, ranks in block order
    hier = Hierarchy.homogeneous([2, 2, 4], [1, 5, 20])
    gh = Grouping.from_hierarchy(hier, p, level=1, weighted=True)
    ch = cost(layout, gh)
    assert (ch.cost_a, ch.cost_b) == pytest.approx(brute_force(layout, gh.group_ids, gh.weights))


def test_pairwise_form_equals_bands():
    rng = np.random.default_rng(7)
    layout = partition(rng.uniform(1, 2, 11), 50)
    g = Grouping.two_level(rng.integers(0, 3, 11))
    cols = layout.columns()
    total = sum(float(pair_cost_a(layout.row_offset[a], layout.height[a], a,
                                  layout.row_offset[b], layout.height[b], b, g))
                for a, b in itertools.pairwise(cols))
    assert total == cost(layout, g).cost_a


def test_hierarchy_two_level_equals_group_file():
    hier = Hierarchy.parse("4:2:3", "1:1:1")
    layout = partition(np.linspace(1, 3, 24), 96)
    for level in (0, 1):
        gh = Grouping.from_hierarchy(hier, 24, level)
        g2 = Grouping.two_level(hier.group_ids[:24, level])
        assert cost(layout, gh) == cost(layout, g2)
    # two-level weights are 0 up to the level, 1 above
    assert Grouping.from_hierarchy(hier, 24, 1).weights.tolist() == [0, 0, 1]


def test_grouping_errors():
    with pytest.raises(GroupingError):
        Grouping.from_hierarchy(Hierarchy.parse("2:2", "1:2"), 5, 0)
    with pytest.raises(GroupingError):
        Grouping.from_hierarchy(Hierarchy.parse("2:2", "1:2"), 4, 1)  # the root
    with pytest.raises(GroupingError):
        Grouping(np.array([[0, 0], [1, 1]]), np.array([0.0, 1.0]))  # no root
    with pytest.raises(GroupingError):
        cost(partition([1, 2, 3], 9), Grouping.two_level([0, 1]))
