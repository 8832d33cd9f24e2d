"""Reference placements of grid stencils, built without the solver.

Used by tests/mapper/construction/test_periodic_stencils.py and bench/bench_periodic.py to show that
Slurm's block placement is not optimal on a grid (a hand-built placement beats it),
and J computed from scratch: this module imports nothing from ``mapper``.

* :func:`grid_edges` — the nearest-neighbour stencil of a (periodic) grid, rank =
  row-major index (the last axis fastest), the numbering of the project's generators.
* :func:`box_tiling` — the best *nested box tiling* of a grid on a homogeneous tree:
  every group of a level holds one axis-aligned box of the same shape, each box split
  into equal sub-boxes for the groups below.  On such a tiling the volume a level cuts
  depends only on its box shape (per axis: cut planes × cross-section), so the best
  chain of shapes is found exactly by enumerating the divisor chains, and J of the
  result is then recomputed from the edges.
* :func:`objective` — J = Σ_edges w · d[first shared level], from per-level group ids.
"""

from __future__ import annotations

from functools import cache

import numpy as np


def grid_edges(dims: tuple[int, ...], periodic: bool) -> tuple[np.ndarray, np.ndarray]:
    """Edges (u, v) of the 2d-point stencil on ``dims``; wrap-around edges on axes of
    more than 2 points when ``periodic`` (a 2-point axis would double its one edge)."""
    idx = np.arange(int(np.prod(dims))).reshape(dims)
    src, dst = [], []
    for ax, size in enumerate(dims):
        if size < 2:
            continue
        src.append(np.take(idx, range(size - 1), axis=ax).ravel())
        dst.append(np.take(idx, range(1, size), axis=ax).ravel())
        if periodic and size > 2:
            src.append(np.take(idx, [size - 1], axis=ax).ravel())
            dst.append(np.take(idx, [0], axis=ax).ravel())
    return np.concatenate(src), np.concatenate(dst)


def group_ids(fanouts: list[int], pe: np.ndarray) -> np.ndarray:
    """Per-level group of every rank on a homogeneous tree (``fanouts`` innermost
    first): column l is the PE index divided by the PEs per level-l group."""
    per = np.cumprod(fanouts)
    return np.stack([pe // p for p in per], axis=1)


def objective(u: np.ndarray, v: np.ndarray, w: np.ndarray, gid: np.ndarray,
              distances: list[float]) -> float:
    """J: every edge costs its weight times the distance of the lowest level whose
    group both ends share (``gid[r, l]``: rank r's level-l group, innermost first;
    the last column is the root, shared by all)."""
    same = gid[u] == gid[v]
    first = np.argmax(same, axis=1)  # the root column is all True
    return float((w * np.asarray(distances, dtype=float)[first]).sum())


def _factorings(f: int, shape: tuple[int, ...]):
    """Per-axis factors of ``f`` that divide ``shape``'s extents."""
    if len(shape) == 1:
        if shape[0] % f == 0:
            yield (f,)
        return
    for a in range(1, f + 1):
        if f % a == 0 and shape[0] % a == 0:
            for rest in _factorings(f // a, shape[1:]):
                yield (a,) + rest


def box_tiling(dims: tuple[int, ...], periodic: bool, fanouts: list[int],
               distances: list[float]) -> np.ndarray | None:
    """Rank → PE of the best nested box tiling (module docstring), or None when the
    fanouts do not divide the grid into boxes."""
    n = int(np.prod(dims))
    if int(np.prod(fanouts)) != n:
        raise ValueError("the tree's PEs must equal the grid's points")
    levels = len(fanouts)

    def cut(shape: tuple[int, ...]) -> float:
        total = 0.0
        for d, s in zip(dims, shape, strict=True):
            pieces = d // s
            planes = pieces if (periodic and d > 2 and pieces > 1) else pieces - 1
            total += planes * n / d
        return total

    # level l's groups (l = 0 innermost) hold boxes of prod(fanouts[:l+1]) points;
    # J = E·d0 + Σ_l (d_{l+1} - d_l) · cut(shape_l) for l < top
    @cache
    def best(level: int, shape: tuple[int, ...]) -> tuple[float, tuple]:
        if level == 0:
            return 0.0, ()
        out: tuple[float, tuple] = (np.inf, ())
        for fac in _factorings(fanouts[level], shape):
            sub = tuple(s // a for s, a in zip(shape, fac, strict=True))
            cost, chain = best(level - 1, sub)
            cost += (distances[level] - distances[level - 1]) * cut(sub)
            if cost < out[0]:
                out = (cost, ((fac, sub),) + chain)
        return out

    cost, chain = best(levels - 1, tuple(dims))
    if not np.isfinite(cost):
        return None
    coords = np.stack(np.unravel_index(np.arange(n), dims), axis=1)
    pe = np.zeros(n, dtype=np.int64)
    shape = tuple(dims)
    below = n
    for fac, sub in chain:
        below //= int(np.prod(fac))
        local = (coords % np.array(shape)) // np.array(sub)
        pe += np.ravel_multi_index(tuple(local.T), fac) * below
        shape = sub
    # innermost groups: their points in any order
    inner = coords % np.array(shape)
    pe += np.ravel_multi_index(tuple(inner.T), shape)
    assert len(np.unique(pe)) == n
    return pe

