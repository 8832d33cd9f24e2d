"""Cartesian grids in rank order (mapper.model.cartesian): found with their extents and
wrap-arounds, built here from coordinates (not with the profile generators)."""

import itertools

import numpy as np
import pytest

from mapper.model.cartesian import LONG_SHARE, cartesian_grid, factorisations
from mapper.model.graph import CommGraph


def _stencil(dims, periodic, diagonals=False, weights=None):
    """Edges between cells one step apart (Chebyshev with ``diagonals``), by a plain
    walk over every cell and offset; volume ``weights[k]`` along dimension k."""
    n = int(np.prod(dims))
    weights = weights or [1.0] * len(dims)
    offsets = [o for o in itertools.product((-1, 0, 1), repeat=len(dims))
               if any(o) and (diagonals or sum(map(abs, o)) == 1)]
    src, dst, w = [], [], []
    for r in range(n):
        c = np.unravel_index(r, dims)
        for o in offsets:
            q = []
            for k, (ck, ok) in enumerate(zip(c, o, strict=False)):
                x = ck + ok
                if periodic[k]:
                    x %= dims[k]
                elif not 0 <= x < dims[k]:
                    break
                q.append(x)
            else:
                t = int(np.ravel_multi_index(q, dims))
                if t != r:
                    src.append(r)
                    dst.append(t)
                    w.append(max(weights[k] for k in range(len(dims)) if o[k]))
    return CommGraph.from_edges(src, dst, w, n=n)


def test_factorisations_are_every_ordered_one():
    assert sorted(factorisations(12, 2)) == [(2, 6), (3, 4), (4, 3), (6, 2)]
    brute = sorted(t for t in itertools.product(range(2, 13), repeat=3)
                   if np.prod(t) == 24)
    assert sorted(factorisations(24, 3)) == brute
    assert factorisations(7, 2) == []


@pytest.mark.parametrize("seed", range(12))
def test_a_stencil_is_found_with_its_extents_and_wraps(seed):
    rng = np.random.default_rng(seed)
    d = int(rng.integers(2, 4))
    dims = tuple(int(x) for x in rng.integers(3, 8 if d == 3 else 12, size=d))
    periodic = tuple(bool(x) for x in rng.integers(0, 2, size=d))
    grid = cartesian_grid(_stencil(dims, periodic, diagonals=bool(seed % 3 == 0)))
    assert grid is not None
    assert grid.dims == dims
    assert grid.periodic == periodic
    assert grid.long_share == 0.0


@pytest.mark.parametrize("dims,periodic", [((6, 6, 4, 4), (True,) * 4),
                                           ((4, 3, 5, 4), (False, True, False, True))])
def test_a_four_dimensional_lattice_is_found(dims, periodic):
    grid = cartesian_grid(_stencil(dims, periodic))
    assert grid is not None and grid.dims == dims and grid.periodic == periodic


def test_a_3d_stencil_is_not_read_as_4d_with_its_collectives():
    # 9-cube edges of a recursive-doubling allreduce: some are one step in a 4D reading
    base = _stencil((8, 8, 8), (True,) * 3)
    u, v, w = base.edges()
    pairs = [(r, r ^ (1 << k)) for k in range(9) for r in range(512) if r < r ^ (1 << k)]
    vol = np.concatenate([w, np.full(len(pairs), 0.005 * w.sum() / len(pairs))])
    g = CommGraph.from_edges(np.concatenate([u, [p for p, _ in pairs]]),
                             np.concatenate([v, [q for _, q in pairs]]), vol, n=512)
    assert cartesian_grid(g).dims == (8, 8, 8)


def test_face_weights_follow_each_dimension():
    grid = cartesian_grid(_stencil((6, 8, 10), (True, False, True),
                                   weights=[4.0, 2.0, 1.0]))
    assert grid is not None
    # both directions of a pair are listed: 2 × 4 across a face of dimension 0, …
    assert grid.face_weight == pytest.approx([8.0, 4.0, 2.0])


def test_light_collective_edges_do_not_hide_the_grid():
    base = _stencil((8, 8, 8), (True,) * 3)
    u, v, w = base.edges()
    n = base.n
    # a recursive-doubling allreduce, 1 % of the halo's volume in all
    pairs = [(r, r ^ (1 << k)) for k in range(9) for r in range(n) if r < r ^ (1 << k)]
    extra = 0.01 * w.sum() / len(pairs)
    src = np.concatenate([u, [p for p, _ in pairs]])
    dst = np.concatenate([v, [q for _, q in pairs]])
    vol = np.concatenate([w, np.full(len(pairs), extra)])
    grid = cartesian_grid(CommGraph.from_edges(src, dst, vol, n=n))
    assert grid is not None and grid.dims == (8, 8, 8)
    assert 0 < grid.long_share <= LONG_SHARE
    heavy = CommGraph.from_edges(src, dst, np.concatenate([w, np.full(len(pairs),
                                                                      10 * extra)]), n=n)
    assert cartesian_grid(heavy) is None  # 10 % of the volume off the grid


def test_what_is_no_grid_is_not_taken_for_one():
    rng = np.random.default_rng(0)
    n = 64
    ring = CommGraph.from_edges(np.arange(n), (np.arange(n) + 1) % n, n=n)
    # a ring read as 8 rows of 8 has short edges only, but rows meet diagonally
    assert cartesian_grid(ring) is None
    scrambled = _stencil((4, 4, 4), (True,) * 3)
    perm = rng.permutation(n)
    u, v, w = scrambled.edges()
    assert cartesian_grid(CommGraph.from_edges(perm[u], perm[v], w, n=n)) is None
    full = [(a, b) for a in range(16) for b in range(a + 1, 16)]
    assert cartesian_grid(CommGraph.from_edges([0], [1], n=7)) is None  # 7: prime
    # 16 ranks that all talk: every pair is one step of a 2×2×2×2 cube, which is no grid
    assert cartesian_grid(CommGraph.from_edges(*zip(*full, strict=True), n=16)) is None


def test_describe_names_the_wraps():
    assert cartesian_grid(_stencil((4, 5), (True, True))).describe() == "4x5 periodic"
    assert cartesian_grid(_stencil((4, 5), (False, True))).describe() == \
        "4x5 (periodic in 2)"
    assert cartesian_grid(_stencil((4, 5), (False, False))).describe() == "4x5"
