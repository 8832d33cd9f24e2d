"""Recognise a communication graph that is a Cartesian grid in rank order.

Most halo-exchange codes number their ranks the way ``MPI_Cart_create`` does: rank
``r`` sits at the row-major coordinates of ``r`` in a d-dimensional grid (last
dimension fastest), and every message goes to a neighbour one step away in each
dimension at most (5/9-point stencils in 2D, 7/19/27-point in 3D; LULESH's 26
neighbours; the 4D lattices of lattice QCD), possibly across a periodic boundary.
Such a graph has coordinates for free, and a geometric mapping
(:func:`mapper.construction.boxes.coordinate_bisection`) can cut it into the boxes of
least surface that graph partitioners only approach.

:func:`cartesian_grid` tries every ordered factorisation of ``n`` into two to four
factors ≥ 2 and keeps the one under which the edges are short (Chebyshev distance ≤ 1,
a wrap-around step counting 1) — all of them but a small share of the volume, so that
a recorded profile's collectives (long, light edges) do not hide the halo.

Complexity: O(F · m) for F ordered factorisations (55 for 2^12 ranks in 3D, 220 in 4D),
each checked on an evenly spaced sample of at most :data:`SAMPLE` edges first and in
full (O(m)) only when the sample fits and does not step diagonally clearly more than
the best so far.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .graph import CommGraph

#: Share of the total volume that edges longer than one step may carry in a grid.
LONG_SHARE = 0.05

#: Edges tried first for every factorisation (evenly spaced over the edge list).
SAMPLE = 2048

#: A factorisation whose sample's diagonal share exceeds the best's by this much is not
#: checked in full (the sample's share is within about 0.02 of the full one's).
SAMPLE_MARGIN = 0.1


@dataclass(frozen=True)
class CartesianGrid:
    """A graph's ranks as a Cartesian grid in row-major order.

    Attributes
    ----------
    dims:
        Grid extents, slowest first (rank = row-major index, as ``MPI_Cart_create``).
    periodic:
        Per dimension, whether some edge wraps around it.
    face_weight:
        Per dimension, the volume crossing one cell's face across that dimension on
        average (short edges only): the cost of a cut plane, per cell of its area.
    long_share:
        Share of the total volume on edges longer than one step (ignored by the grid).
    """

    dims: tuple[int, ...]
    periodic: tuple[bool, ...]
    face_weight: np.ndarray
    long_share: float

    @property
    def n(self) -> int:
        """Number of cells (ranks)."""
        return int(np.prod(self.dims))

    def coordinates(self) -> np.ndarray:
        """``(n, d)`` int64 coordinates of every rank."""
        return np.stack(np.unravel_index(np.arange(self.n), self.dims), axis=1
                        ).astype(np.int64)

    def describe(self) -> str:
        """E.g. ``16x16x16 periodic`` or ``32x64 (periodic in 2)``."""
        shape = "x".join(str(d) for d in self.dims)
        if all(self.periodic):
            return f"{shape} periodic"
        if any(self.periodic):
            which = ",".join(str(i + 1) for i, p in enumerate(self.periodic) if p)
            return f"{shape} (periodic in {which})"
        return shape


def factorisations(n: int, parts: int) -> list[tuple[int, ...]]:
    """Ordered tuples of ``parts`` factors ≥ 2 whose product is ``n``."""
    if parts == 1:
        return [(n,)] if n >= 2 else []
    small = [f for f in range(2, int(n ** 0.5) + 1) if n % f == 0]
    divisors = sorted(set(small) | {n // f for f in small})
    return [(f, *rest) for f in divisors for rest in factorisations(n // f, parts - 1)]


@dataclass(frozen=True)
class _Steps:
    """The edges' steps under one factorisation: per dimension the step (0, 1 or more,
    a wrap-around counting 1) and whether it wraps; per edge the largest step and the
    number of dimensions stepped in."""

    along: list[np.ndarray]
    wraps: list[np.ndarray]
    longest: np.ndarray
    moved: np.ndarray


def _steps(dims: tuple[int, ...], u: np.ndarray, v: np.ndarray) -> _Steps:
    index = np.int32 if int(np.prod(dims)) < 2**31 else np.int64  # half the traffic
    u = u.astype(index, copy=False)
    v = v.astype(index, copy=False)
    along, wraps = [], []
    longest = np.zeros(len(u), dtype=index)
    moved = np.zeros(len(u), dtype=np.int8)
    stride = int(np.prod(dims))
    for size in dims:
        stride //= size
        delta = np.abs((u // stride) % size - (v // stride) % size)
        wrap = (delta == size - 1) if size > 2 else np.zeros(len(u), dtype=bool)
        delta[wrap] = 1
        along.append(delta)
        wraps.append(wrap)
        np.maximum(longest, delta, out=longest)
        moved += delta > 0
    return _Steps(along, wraps, longest, moved)


def _every_axis_used(dims: tuple[int, ...], steps: _Steps) -> bool:
    """Whether, in every dimension, at least half the neighbour pairs one step apart
    along it exchange data: a stencil's do, while a ring read as rows of a 2D grid
    crosses from row to row only by diagonal steps (and is no grid)."""
    axial = steps.moved == 1
    n = int(np.prod(dims))
    for size, delta, wrap in zip(dims, steps.along, steps.wraps, strict=True):
        pairs = n if wrap.any() else n - n // size
        if np.count_nonzero(axial & (delta == 1)) < pairs / 2:
            return False
    return True


def cartesian_grid(graph: CommGraph, max_dims: int = 4) -> CartesianGrid | None:
    """The Cartesian grid (2 to ``max_dims`` dimensions) the graph's edges are short
    in, or None.

    Among the factorisations whose long edges carry at most :data:`LONG_SHARE` of the
    volume, the one with the least volume off single axis-aligned steps (long edges
    and diagonal ones, stepping in more than one dimension) wins, then more dimensions;
    every dimension must carry axis-aligned edges between at least half of its
    neighbour pairs, and a cube of 2s (where every pair is one step) is none.  Once a
    dimension count gives a grid with every edge one axis-aligned step, more dimensions
    are not tried.  O(F · m), see the module docstring.
    """
    u, v, w = graph.edges()
    total = float(w.sum())
    if graph.n < 4 or total <= 0:
        return None
    sample = (np.linspace(0, len(u) - 1, SAMPLE).astype(np.int64) if len(u) > SAMPLE
              else np.arange(len(u)))
    su, sv, sw = u[sample], v[sample], w[sample]
    sample_total = float(sw.sum())
    best = None  # (key, dims, steps)
    for parts in range(2, max_dims + 1):
        if best is not None and best[0][0] == 0.0:
            break  # every edge one axis-aligned step: splitting a dimension adds diagonals
        for dims in factorisations(graph.n, parts):
            if max(dims) == 2:
                continue  # in a 2×2×… cube every pair is one step: no grid to speak of
            # the sample first: most factorisations fail on it at once, and one whose
            # sample steps diagonally clearly more than the best's full edges cannot
            # beat it (a 3D stencil read in 4D: its fastest dimension split in two)
            sampled = _steps(dims, su, sv)
            if float(sw[sampled.longest > 1].sum()) > 2 * LONG_SHARE * sample_total:
                continue
            off_axis = (sampled.longest > 1) | (sampled.moved > 1)
            if best is not None and float(sw[off_axis].sum()) > (
                    best[0][0] + SAMPLE_MARGIN) * sample_total:
                continue
            steps = _steps(dims, u, v)
            long_ = steps.longest > 1
            share = float(w[long_].sum()) / total
            if share > LONG_SHARE or not _every_axis_used(dims, steps):
                continue
            diagonal = float(w[~long_ & (steps.moved > 1)].sum()) / total
            key = (share + diagonal, -parts, share)
            if best is None or key < best[0]:
                best = (key, dims, steps)
    if best is None:
        return None
    (_, _, share), dims, steps = best
    short = steps.longest <= 1
    periodic = tuple(bool(np.any(wrap[short])) for wrap in steps.wraps)
    faces = np.array([graph.n if p else graph.n - graph.n // size
                      for size, p in zip(dims, periodic, strict=True)], dtype=np.float64)
    crossing = np.array([float(w[short & (delta == 1)].sum()) for delta in steps.along])
    return CartesianGrid(dims, periodic, crossing / faces, share)
