"""Which generator a recorded matrix is, so a profile serves other task counts too.

A profile recorded at R ranks maps only jobs of R tasks.  When its matrix is one of the
generated patterns (:mod:`slurm_plugin.profiles.generators`) — a 2D or 3D stencil with
or without wrap-around, a ring, all-to-all, recursive doubling, an NPB process grid —
the store entry also keeps that generator's size-free spec (``generator =
"stencil3d:periodic"``) and a job of another size gets the generator's graph at its
own size (:meth:`slurm_plugin.profiles.store.ProfileStore.load`).

**The decision rule** (:func:`match_generator`).  Each candidate generator G is built at
the recorded size R (every grid factorisation, below).  Its edges fall into *classes*:
a stencil's axes, an NPB MG (axis, level), a recursive-doubling round, CG's rounds and
its transpose, BT/SP's x, y and diagonal, FT's rows and columns, one class for a ring
or all-to-all.  The recorded volumes ``a`` (undirected, normalised to total 1) are
compared with G *fitted class by class*: the model gives every G edge of class c the
mean recorded volume over the class's edges (zero where the recording has no such
edge) and nothing to edges outside G, renormalised to total 1.  Two mismatches:

* volume mismatch ``D_v`` = the total-variation distance ½·Σ|a − g| over the union
  of the edges: the recorded volume off G's edges plus the spread within classes;
* support mismatch ``D_s`` = the share of G's edges the recording leaves (nearly)
  unused: recorded volume below ``COVERED`` (5 %) of what G's own relative volumes,
  scaled to the recorded volume on G, predict for the edge.

The distance is ``max(D_v, D_s)``; the candidate with the smallest distance is taken
when it is at most the tolerance (:data:`DEFAULT_TOLERANCE`, 0.1), ties going to the
earlier candidate in :data:`FAMILIES`' order (the simpler family, then non-periodic,
then the dimensions in lexicographic order).

*Why a scale per class and a separate support test.*  Volumes matter only relatively,
and a real halo exchange is not uniform: a non-cubic subdomain exchanges faces of
different areas along each axis (a 2x3x5 split of a cube sends faces in the ratio of
2:3:5), while the generators give every edge the same volume.  One scale per class
absorbs that and still refuses volume spread inside an axis.  The freedom has a price:
a class could be fitted with scale 0, so a 2D periodic stencil would "match" BT's grid
with an empty diagonal class — the support test refuses generator edges the
recording does not use (tiny collective traffic on them does not count as use).
Total variation is bounded (0..1), reads as "the share of the volume that is
elsewhere", and tolerates a few extra tiny edges (their volume share) and noisy
volumes (±20 % per edge costs about 0.05).

*Candidates* (:data:`FAMILIES`): ring; all-to-all (scored in closed form, O(m), without
building its R(R−1)/2 edges); stencil2d and stencil3d over every ordered factorisation
of R into factors ≥ 2 (a factor 1 is a lower-dimensional family), non-periodic and
periodic; recursive-doubling; npb-cg (R a power of two); npb-bt (R a square; npb-sp is
the same graph); npb-mg over the 3D factorisations; npb-ft over the 2D ones.  Left
out because their graphs equal a listed one: npb-lu, sweep3d and snap (the non-periodic
2D stencil) and summa (npb-ft).  Ranks are numbered row-major (the last dimension
fastest), as the generators and MPI_Cart_create with reorder=0 number them; a
recording of a grid numbered otherwise is a permuted grid and matches nothing.
Graphs of fewer than :data:`MIN_RANKS` ranks match nothing (every small graph is a
ring or all-to-all).

*Cost.*  The factorisations of R number at most d(R)^k (d: the divisor count) and
each is first checked in O(k log R) against the recorded volume per rank difference
|u − v|: a grid whose possible differences carry less than 1 − tolerance of the
volume cannot match (``D_v`` is at least the volume off G's edges), so it is not
built.  The others cost O(m log m) each (build, sort, search), all numpy: O(C·m log m)
for C candidates built, and O(d(R)^k) integer work for the bound.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from mapper import CommGraph
from mapper.model.cartesian import factorisations

from .generators import GeneratorError, generate

#: the largest accepted distance (see the module docstring)
DEFAULT_TOLERANCE = 0.1
#: a generator edge counts as used when it carries at least this share of its
#: predicted volume
COVERED = 0.05
#: smaller graphs match nothing
MIN_RANKS = 4
#: the families tried, in tie-break order
FAMILIES = ("ring", "alltoall", "stencil2d", "stencil3d", "recursive-doubling", "npb-cg",
            "npb-bt", "npb-mg", "npb-ft")


@dataclass(frozen=True)
class GeneratorMatch:
    """A recorded matrix recognised as a generator.

    ``spec`` is size-free (``stencil3d:periodic``: usable at any task count the family
    accepts), ``spec_at_recorded_size`` names the dimensions found
    (``stencil3d:8x8x8,periodic``), ``distance`` is the mismatch (module docstring),
    ``ranks`` the recorded size.
    """

    spec: str
    spec_at_recorded_size: str
    distance: float
    ranks: int

    def describe(self) -> str:
        return (f"matches {self.spec_at_recorded_size} (distance {self.distance:.3f}): "
                f"usable at other task counts as {self.spec}")


@dataclass(frozen=True)
class _Candidate:
    spec: str              # size-free
    sized: str             # at the recorded size
    classes: Callable[[np.ndarray, np.ndarray], np.ndarray]  # (u, v) -> class per edge


class _Recorded:
    """The recorded graph as sorted edge keys u·n+v (u < v) and volumes summing to 1,
    with the volume per rank difference |u − v| for the grids' bound."""

    def __init__(self, graph: CommGraph) -> None:
        u, v, w = graph.edges()
        self.n = graph.n
        self.keys = u * self.n + v          # sorted: edges() walks the CSR rows in order
        self.a = w / w.sum()
        self.diffs, inverse = np.unique(v - u, return_inverse=True)
        self.diff_volume = np.bincount(inverse, weights=self.a)

    def volume_at(self, differences: set[int]) -> float:
        d = np.fromiter(differences, dtype=np.int64)
        i = np.searchsorted(self.diffs, d)
        i = np.minimum(i, len(self.diffs) - 1)
        hit = self.diffs[i] == d
        return float(self.diff_volume[i[hit]].sum())


def match_generator(graph: CommGraph, tolerance: float = DEFAULT_TOLERANCE
                    ) -> GeneratorMatch | None:
    """The generator ``graph`` is within ``tolerance`` of (module docstring), or None.
    O(C·m log m) for the C candidates that pass the grids' volume bound."""
    best: GeneratorMatch | None = None
    for spec, sized, dist in candidate_distances(graph, tolerance):
        if dist <= tolerance and (best is None or dist < best.distance - 1e-12):
            best = GeneratorMatch(spec, sized, dist, graph.n)
    return best


def candidate_distances(graph: CommGraph, tolerance: float = DEFAULT_TOLERANCE
                        ) -> list[tuple[str, str, float]]:
    """``(spec, spec at the recorded size, distance)`` of every candidate tried, in
    tie-break order (the grids the volume bound rules out are not listed)."""
    if graph.n < MIN_RANKS or graph.m == 0 or graph.total_volume <= 0:
        return []
    rec = _Recorded(graph)
    out = []
    for cand in _candidates(rec, tolerance):
        if cand.spec == "alltoall":
            dist = _alltoall_distance(rec)
        else:
            try:
                g = generate(cand.sized, rec.n)
            except GeneratorError:
                continue
            dist = _distance(rec, g, cand.classes)
        out.append((cand.spec, cand.sized, dist))
    return out


def generator_line(graph: CommGraph, tolerance: float = DEFAULT_TOLERANCE
                   ) -> tuple[str, GeneratorMatch | None]:
    """The ``generator = "..."`` line (with its newline) for a profile's .toml and the
    match, or ``("", None)`` when ``graph`` is no generator; for any writer of
    recorded profiles."""
    found = match_generator(graph, tolerance)
    if found is None:
        return "", None
    return f'generator = "{found.spec}"\n', found


# ---- distances --------------------------------------------------------------------------

def _distance(rec: _Recorded, g: CommGraph,
              classes: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> float:
    """max(D_v, D_s) of the recording against generated ``g``: O(m log m)."""
    gu, gv, gw = g.edges()
    if len(gu) == 0:
        return 1.0
    keys = gu * rec.n + gv
    i = np.minimum(np.searchsorted(rec.keys, keys), len(rec.keys) - 1)
    found = rec.keys[i] == keys
    a_on = np.where(found, rec.a[i], 0.0)
    on = float(a_on.sum())
    if on <= 0:
        return 1.0
    off = max(0.0, 1.0 - on)
    _, cls = np.unique(classes(gu, gv), return_inverse=True)
    mean = np.bincount(cls, weights=a_on) / np.bincount(cls)
    model = mean[cls] / on                      # the class-wise fit, total 1
    d_v = 0.5 * (float(np.abs(a_on - model).sum()) + off)
    predicted = gw / gw.sum() * on
    d_s = float(np.count_nonzero(a_on < COVERED * predicted)) / len(keys)
    return max(d_v, d_s)


def _alltoall_distance(rec: _Recorded) -> float:
    """The distance to all-to-all in closed form, O(m): the model is 1/N on each of the
    N = n(n−1)/2 pairs, and the pairs the recording lacks each differ by 1/N."""
    pairs = rec.n * (rec.n - 1) // 2
    missing = pairs - len(rec.a)
    d_v = 0.5 * (float(np.abs(rec.a - 1.0 / pairs).sum()) + missing / pairs)
    d_s = (missing + int(np.count_nonzero(rec.a < COVERED / pairs))) / pairs
    return max(d_v, d_s)


# ---- candidates -------------------------------------------------------------------------

def _strides(dims: tuple[int, ...]) -> list[int]:
    return [math.prod(dims[i + 1:]) for i in range(len(dims))]


def _grid_differences(dims: tuple[int, ...], levels: bool, all_pairs: bool) -> set[int]:
    """Every |u − v| a row-major grid's edges can have: per axis, steps t (1, or 1, 2,
    4, … for MG's levels, or every 1..d−1 for FT's all-to-all lines) and their
    wrap-arounds d − t, times the axis stride."""
    out: set[int] = set()
    for d, s in zip(dims, _strides(dims), strict=True):
        if all_pairs:
            steps = range(1, d)
        elif levels:
            steps = [1 << j for j in range(max(1, (max(dims) - 1).bit_length()))]
        else:
            steps = [1]
        for t in steps:
            if t < d:
                out.update((t * s, (d - t) * s))
    return out


def _axis_classes(dims: tuple[int, ...], by_step: bool
                  ) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """Class of a grid edge: the axis its ranks differ along (the first, if several),
    times the step min(|Δ|, d − |Δ|) along it for MG's levels."""
    def classify(u: np.ndarray, v: np.ndarray) -> np.ndarray:
        cu = np.stack(np.unravel_index(u, dims))
        cv = np.stack(np.unravel_index(v, dims))
        differ = cu != cv
        axis = np.argmax(differ, axis=0)
        cls = axis.astype(np.int64)
        if by_step:
            cols = np.arange(len(u))
            delta = np.abs(cu[axis, cols] - cv[axis, cols])
            size = np.asarray(dims)[axis]
            cls = cls + len(dims) * np.minimum(delta, size - delta)
        # BT's diagonal: both coordinates differ
        return np.where(differ.sum(axis=0) > 1, -1, cls)
    return classify


def _bit_classes(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Recursive doubling's round: the highest bit of u xor v (fold-in edges: bit p)."""
    return np.frexp((u ^ v).astype(np.float64))[1]


def _one_class(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    return np.zeros(len(u), dtype=np.int64)


def _cg_classes(n: int) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    cols = n // (1 << ((n.bit_length() - 1) // 2))

    def classify(u: np.ndarray, v: np.ndarray) -> np.ndarray:
        same_row = u // cols == v // cols
        return np.where(same_row, _bit_classes(u, v), -1)
    return classify


def _dims_text(dims: tuple[int, ...]) -> str:
    return "x".join(map(str, dims))


def _candidates(rec: _Recorded, tolerance: float) -> Iterator[_Candidate]:
    """The candidates of :data:`FAMILIES` at the recorded size, in tie-break order; the
    grids whose possible rank differences carry less than 1 − tolerance of the
    volume are skipped (they cannot match)."""
    n = rec.n
    yield _Candidate("ring", "ring", _one_class)
    yield _Candidate("alltoall", "alltoall", _one_class)
    for name, k in (("stencil2d", 2), ("stencil3d", 3)):
        for dims in factorisations(n, k):
            for periodic in (False, True):
                if rec.volume_at(_grid_differences(dims, False, False)) < 1 - tolerance:
                    continue
                tail = ",periodic" if periodic else ""
                yield _Candidate(name + (":periodic" if periodic else ""),
                                 f"{name}:{_dims_text(dims)}{tail}",
                                 _axis_classes(dims, False))
    yield _Candidate("recursive-doubling", "recursive-doubling", _bit_classes)
    if n & (n - 1) == 0:
        yield _Candidate("npb-cg", "npb-cg", _cg_classes(n))
    q = math.isqrt(n)
    if q * q == n:
        yield _Candidate("npb-bt", "npb-bt", _axis_classes((q, q), False))
    for dims in factorisations(n, 3):
        if rec.volume_at(_grid_differences(dims, True, False)) >= 1 - tolerance:
            yield _Candidate("npb-mg", f"npb-mg:{_dims_text(dims)}", _axis_classes(dims, True))
    for dims in factorisations(n, 2):
        if rec.volume_at(_grid_differences(dims, False, True)) >= 1 - tolerance:
            yield _Candidate("npb-ft", f"npb-ft:{_dims_text(dims)}", _axis_classes(dims, False))


__all__ = ["COVERED", "DEFAULT_TOLERANCE", "FAMILIES", "GeneratorMatch", "candidate_distances",
           "generator_line", "match_generator"]
