"""Column-based heterogeneous partition of an N x N matrix from relative speeds: a
tiling of the matrix into one rectangle per processor.

Beaumont, Boudet, Rastello & Robert's column-based algorithm: the unit square is cut
into columns, each column into one rectangle per processor, every rectangle's area
proportional to its processor's speed, so that the sum of the rectangles' half
perimeters (the communication volume of a SUMMA-like outer-product multiplication)
is minimal among column-based partitions.

With normalised speeds s (Σ s = 1), a column holding the processor set S has width
W = Σ_{i∈S} s_i and its rectangles have heights s_i / W (they fill the height 1), so
the column contributes |S|·W (widths) + 1 (heights) to the half-perimeter sum; a
partition into c columns costs c + Σ_j |S_j| W_j.  For fixed column sizes |S_j|, the
rearrangement inequality puts the slowest processors into the columns with most
rectangles, hence (their lemma) some optimal partition takes the processors sorted by
non-decreasing speed and cuts that sequence into runs of consecutive processors.  The
dynamic programme over sorted prefixes is

    F(0) = 0,   F(q) = min_{0 <= k < q}  F(k) + 1 + (q - k) · (S_q - S_k),

S_q being the sum of the q smallest speeds; F(p) is the optimal half-perimeter sum and
the arg-mins give the number of columns and their membership.  The paper states the
recurrence with the number of columns as an explicit index (O(p^3)); the constant 1 per
column folds it into the value, which gives the same optimum in O(p^2) time and O(p)
memory (each F(q) is one vectorised minimum over k).

Rounding to integers: the columns' widths W_j·N and, inside each column, the heights
(s_i / W_j)·N are apportioned by the largest-remainder (Hamilton) method, so they are
integers summing exactly to N and each is within 1 of its exact value; a share that
rounds to 0 is raised to 1, taking one unit from the largest share of the same column
(or the widest column) — only when N is close to the number of rectangles in a column
or to the number of columns, which must not exceed N.

Original order: the partitioner's own, i.e. the sorted-speed order of the dynamic
programme: columns left to right slowest first, and inside each column the rectangles
top to bottom by non-decreasing speed (ties in rank order).  This is the layout "as the
partitioner gives it", oblivious of the network, before any topology-aware arrangement
(:mod:`mapper.summa.arrange`).

References
----------
* O. Beaumont, V. Boudet, F. Rastello, Y. Robert: Matrix multiplication on heterogeneous
  platforms.  IEEE Trans. Parallel Distrib. Syst. 12(10):1033-1051 (2001),
  doi:10.1109/71.963416 (the column-based heuristic and its dynamic programme).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import RankmapError


class TilingError(RankmapError, ValueError):
    """Speeds, a matrix size or columns that make no tiling of the matrix."""


@dataclass(frozen=True, eq=False)
class ColumnLayout:
    """A column-based tiling of an N x N matrix, one rectangle per rank.

    Per-rank arrays (index = rank): ``column``, ``position`` (0 = top of its column),
    ``row_offset``, ``col_offset``, ``height``, ``width``.  ``column_widths[j]`` is the
    width of column j (left to right), ``size`` is N.  Rectangles tile the matrix
    exactly: in every column the heights sum to N, the widths to N across columns.
    """

    column: np.ndarray
    position: np.ndarray
    row_offset: np.ndarray
    col_offset: np.ndarray
    height: np.ndarray
    width: np.ndarray
    column_widths: np.ndarray
    size: int

    @property
    def n(self) -> int:
        """Number of ranks (rectangles)."""
        return len(self.column)

    @property
    def ncolumns(self) -> int:
        """Number of columns."""
        return len(self.column_widths)

    def columns(self) -> list[np.ndarray]:
        """Ranks of each column, top to bottom."""
        order = np.lexsort((self.position, self.column))
        bounds = np.searchsorted(self.column[order], np.arange(self.ncolumns + 1))
        return [order[bounds[j]:bounds[j + 1]] for j in range(self.ncolumns)]

    def with_columns(self, columns: Sequence[Sequence[int]],
                     column_order: Sequence[int] | None = None) -> ColumnLayout:
        """The same rectangles re-stacked: ``columns[j]`` lists column j's ranks top to
        bottom (a permutation of the ranks currently in column j); ``column_order``
        (old column indices, left to right) exchanges whole columns."""
        old = self.columns()
        if len(columns) != len(old):
            raise TilingError(f"{len(columns)} columns given, the layout has {len(old)}")
        for j, (new, cur) in enumerate(zip(columns, old, strict=True)):
            if sorted(int(r) for r in new) != sorted(int(r) for r in cur):
                raise TilingError(f"column {j}: not a permutation of its ranks")
        order = list(range(len(old))) if column_order is None else [int(j) for j in column_order]
        if sorted(order) != list(range(len(old))):
            raise TilingError(f"column order {order} is not a permutation of the columns")
        return build_column_layout([np.asarray(columns[j], dtype=np.int64) for j in order],
                            self.height, self.column_widths[order], self.size)


def build_column_layout(columns: Sequence[np.ndarray], heights: np.ndarray,
                 column_widths: np.ndarray, size: int) -> ColumnLayout:
    """Layout from each column's ranks (top to bottom), per-rank heights and the column
    widths (left to right); checks that the rectangles tile the size x size matrix.

    O(p) for p ranks.
    """
    heights = np.asarray(heights, dtype=np.int64)
    widths = np.asarray(column_widths, dtype=np.int64)
    n = len(heights)
    ranks = np.concatenate([np.asarray(c, dtype=np.int64) for c in columns]) if columns \
        else np.zeros(0, dtype=np.int64)
    if len(columns) != len(widths):
        raise TilingError(f"{len(columns)} columns but {len(widths)} widths")
    if len(ranks) != n or not np.array_equal(np.sort(ranks), np.arange(n)):
        raise TilingError("every rank must appear in exactly one column")
    if n and (heights.min() < 1 or widths.min() < 1):
        raise TilingError("heights and widths must be positive")
    if int(widths.sum()) != size:
        raise TilingError(f"column widths sum to {int(widths.sum())}, not {size}")
    lengths = np.array([len(c) for c in columns], dtype=np.int64)
    col_of = np.repeat(np.arange(len(columns)), lengths)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    pos = np.arange(n) - np.repeat(starts, lengths)
    h = heights[ranks]
    csum = np.cumsum(h)
    col_end = csum[np.cumsum(lengths) - 1]
    col_base = np.concatenate([[0], col_end[:-1]])
    if np.any(col_end - col_base != size):
        bad = int(np.flatnonzero(col_end - col_base != size)[0])
        raise TilingError(f"column {bad}: heights sum to {int(col_end[bad] - col_base[bad])}"
                             f", not {size}")
    row_off = csum - h - np.repeat(col_base, lengths)
    x0 = np.concatenate([[0], np.cumsum(widths)[:-1]])

    def per_rank(values: np.ndarray) -> np.ndarray:
        out = np.empty(n, dtype=np.int64)
        out[ranks] = values
        return out

    return ColumnLayout(column=per_rank(col_of), position=per_rank(pos),
                        row_offset=per_rank(row_off), col_offset=per_rank(x0[col_of]),
                        height=heights.copy(), width=per_rank(widths[col_of]),
                        column_widths=widths.copy(), size=int(size))


@dataclass(frozen=True, eq=False)
class ColumnPartition:
    """The real-valued optimum of the column-based problem (unit square).

    ``members[j]``: ranks of column j (sorted-speed order); ``widths[j]``: its width;
    ``half_perimeter``: Σ over rectangles of height + width (= c + Σ_j |S_j| W_j).
    """

    members: tuple[np.ndarray, ...]
    widths: np.ndarray
    half_perimeter: float


def _check_speeds(speeds: Sequence[float]) -> np.ndarray:
    s = np.asarray(speeds, dtype=np.float64)
    if s.ndim != 1 or len(s) == 0:
        raise TilingError("need at least one speed")
    if not np.all(np.isfinite(s)) or s.min() <= 0:
        raise TilingError("speeds must be finite and positive")
    return s / s.sum()


def optimal_columns(speeds: Sequence[float]) -> ColumnPartition:
    """Optimal column-based partition of the unit square (Beaumont et al. 2001).

    O(p log p + p^2) time, O(p) memory: sort, then one vectorised minimum per prefix.
    Ties in speed keep rank order (stable sort).
    """
    s = _check_speeds(speeds)
    p = len(s)
    order = np.argsort(s, kind="stable")
    S = np.concatenate([[0.0], np.cumsum(s[order])])
    F = np.zeros(p + 1)
    arg = np.zeros(p + 1, dtype=np.int64)
    for q in range(1, p + 1):
        k = np.arange(q)
        vals = F[:q] + 1.0 + (q - k) * (S[q] - S[:q])
        arg[q] = int(np.argmin(vals))
        F[q] = vals[arg[q]]
    cuts = [p]
    while cuts[-1] > 0:
        cuts.append(int(arg[cuts[-1]]))
    cuts.reverse()
    members = tuple(order[a:b] for a, b in itertools.pairwise(cuts))
    widths = np.array([S[b] - S[a] for a, b in itertools.pairwise(cuts)])
    return ColumnPartition(members, widths, float(F[p]))


def half_perimeter(speeds: Sequence[float], members: Sequence[Sequence[int]]) -> float:
    """Σ of half perimeters of the column partition ``members`` of the unit square
    (any column assignment, sorted or not): c + Σ_j |S_j| · Σ_{i∈S_j} s_i.  O(p)."""
    s = _check_speeds(speeds)
    return float(len(members) + sum(len(m) * s[np.asarray(m, dtype=np.int64)].sum()
                                    for m in members))


def apportion(weights: np.ndarray, total: int) -> np.ndarray:
    """Integers ∝ ``weights`` summing to ``total``, each ≥ 1 (largest remainder, then
    zeros raised to 1 from the largest share).  O(m log m) for m weights."""
    w = np.asarray(weights, dtype=np.float64)
    m = len(w)
    if total < m:
        raise TilingError(f"cannot give {m} parts at least 1 of {total}")
    exact = w / w.sum() * total
    out = np.floor(exact).astype(np.int64)
    rest = total - int(out.sum())
    # largest remainders first; ties to the lower index (stable) for determinism
    out[np.argsort(-(exact - out), kind="stable")[:rest]] += 1
    for i in np.flatnonzero(out == 0):
        out[int(np.argmax(out))] -= 1
        out[i] = 1
    return out


def partition(speeds: Sequence[float], size: int) -> ColumnLayout:
    """The integer ``size`` x ``size`` column-based layout for per-rank ``speeds``.

    Real optimum from :func:`optimal_columns`, rounded by :func:`apportion` (widths over
    columns, heights inside each column); original order as the module docstring says.
    O(p^2) time.
    """
    size = int(size)
    part = optimal_columns(speeds)
    s = np.asarray(speeds, dtype=np.float64)
    if size < len(part.members) or size < max(len(m) for m in part.members):
        raise TilingError(f"matrix size {size} is smaller than the number of columns "
                             f"({len(part.members)}) or of rectangles in a column "
                             f"({max(len(m) for m in part.members)})")
    widths = apportion(part.widths, size)
    heights = np.zeros(len(s), dtype=np.int64)
    columns = []
    for ranks in part.members:  # already in sorted-speed order
        heights[ranks] = apportion(s[ranks], size)
        columns.append(ranks)
    return build_column_layout(columns, heights, widths, size)
