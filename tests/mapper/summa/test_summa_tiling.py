"""Column-based partition (Beaumont et al. 2001): optimality against brute force over
every assignment of ranks to columns, exact integer tiling, areas ∝ speeds."""

from __future__ import annotations

import numpy as np
import pytest

from mapper.summa.tiling import (
    TilingError,
    apportion,
    build_column_layout,
    half_perimeter,
    optimal_columns,
    partition,
)


def set_partitions(items):
    """Every partition of ``items`` into non-empty blocks (Bell-number many)."""
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for part in set_partitions(rest):
        for i in range(len(part)):
            yield part[:i] + [[first] + part[i]] + part[i + 1:]
        yield [[first]] + part


def brute_force(speeds):
    blocks = set_partitions(list(range(len(speeds))))
    return min(half_perimeter(speeds, b) for b in blocks)


@pytest.mark.parametrize("seed", range(30))
def test_dynamic_programme_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    p = int(rng.integers(1, 8))
    speeds = rng.choice([rng.uniform(0.1, 5.0, p), rng.integers(1, 4, p).astype(float)])
    part = optimal_columns(speeds)
    assert part.half_perimeter == pytest.approx(brute_force(speeds), rel=1e-12)
    assert part.half_perimeter == pytest.approx(half_perimeter(speeds, part.members))
    assert sorted(np.concatenate(part.members).tolist()) == list(range(p))
    assert part.widths.sum() == pytest.approx(1.0)


def test_hand_computed_cases():
    # four equal speeds: 2 columns of 2 (cost 2 + 2*0.5*2 = 4) beat 1 column (1 + 4 = 5)
    # and 4 columns (4 + 4*0.25 = 5)
    part = optimal_columns([1, 1, 1, 1])
    assert part.half_perimeter == pytest.approx(4.0)
    assert [len(m) for m in part.members] == [2, 2]
    # one dominant processor gets a column of its own, the slow ones share one
    part = optimal_columns([1, 1, 8])
    assert [sorted(m.tolist()) for m in part.members] == [[0, 1], [2]]
    assert part.half_perimeter == pytest.approx(2 + 2 * 0.2 + 0.8)


def test_apportion_exact_sum_and_rounding():
    rng = np.random.default_rng(3)
    for _ in range(200):
        w = rng.uniform(0.01, 1, int(rng.integers(1, 12)))
        total = int(rng.integers(len(w), 500))
        out = apportion(w, total)
        assert out.sum() == total and out.min() >= 1
        exact = w / w.sum() * total
        if np.all(exact >= 1):  # no zero fix-up: within 1 of the exact share
            assert np.all(np.abs(out - exact) < 1)
    assert apportion(np.array([1.0, 1.0, 1.0]), 10).tolist() == [4, 3, 3]
    with pytest.raises(TilingError):
        apportion(np.ones(4), 3)


@pytest.mark.parametrize("seed", range(20))
def test_layout_tiles_the_matrix_exactly(seed):
    rng = np.random.default_rng(100 + seed)
    p = int(rng.integers(1, 40))
    speeds = rng.uniform(0.5, 4.0, p)
    n = int(rng.integers(max(p, 10), 2000))
    layout = partition(speeds, n)
    cover = np.zeros((n, n), dtype=np.int64)
    for r in range(p):
        y, x = layout.row_offset[r], layout.col_offset[r]
        cover[y:y + layout.height[r], x:x + layout.width[r]] += 1
    assert np.all(cover == 1)  # every cell covered exactly once
    # areas ∝ speeds up to the rounding of one height and one width
    area = layout.height * layout.width
    exact = speeds / speeds.sum() * n * n
    assert np.all(np.abs(area - exact) <= layout.height + layout.width + 1)
    # the columns are the DP's, left to right and top-down in sorted-speed order
    part = optimal_columns(speeds)
    cols = layout.columns()
    assert [c.tolist() for c in cols] == [m.tolist() for m in part.members]
    assert np.all(np.diff(speeds[np.concatenate(cols)]) >= 0)


def test_heights_proportional_within_column():
    layout = partition([1, 1, 2, 4, 4], 120)
    for col in layout.columns():
        s = np.array([1, 1, 2, 4, 4], dtype=float)[col]
        assert np.all(np.abs(layout.height[col] - s / s.sum() * 120) < 1)


def test_with_columns_restacks_and_checks():
    layout = partition([1, 2, 3, 4, 5, 6], 60)
    cols = layout.columns()
    flipped = layout.with_columns([c[::-1] for c in cols])
    assert np.array_equal(flipped.height, layout.height)
    assert np.array_equal(flipped.width, layout.width)
    for c in flipped.columns():
        assert flipped.row_offset[c[0]] == 0
        assert np.array_equal(np.cumsum(flipped.height[c])[:-1], flipped.row_offset[c[1:]])
    swapped = layout.with_columns(cols, column_order=list(range(layout.ncolumns))[::-1])
    assert swapped.column_widths.tolist() == layout.column_widths.tolist()[::-1]
    with pytest.raises(TilingError):
        layout.with_columns([cols[0][:1]] + cols[1:])


def test_errors():
    with pytest.raises(TilingError):
        partition([1, -1], 10)
    with pytest.raises(TilingError):
        partition([], 10)
    with pytest.raises(TilingError, match="smaller"):
        partition([1] * 9, 2)
    with pytest.raises(TilingError, match="sum"):
        build_column_layout([np.array([0]), np.array([1])], np.array([3, 3]), np.array([2, 2]), 3)
