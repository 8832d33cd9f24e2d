"""Communication cost of a column-based SUMMA arrangement on a grouped network.

Malik, Rychkov, Lastovetsky & Quintin's cost model for the FPM-BR heterogeneous
SUMMA, whose pivot data flows in a ring along the rows (matrix A) and down the
columns (matrix B):

* ``cost_A = Σ_overlaps h · v``: the row overlaps are the horizontal bands between
  consecutive rectangle boundaries of all columns together (inside a band every
  column has one rectangle); v is the band's height and h the number of inter-group
  transfers of the band's ring, i.e. the number of neighbouring columns (j, j+1)
  whose rectangles in that band belong to different groups.
* ``cost_B = Σ_columns h · v``: v is the column's width and h the number of
  inter-group transfers down the column, i.e. the number of vertically adjacent
  rectangles in different groups.
* the arrangement's cost is the Euclidean norm ``sqrt(cost_A² + cost_B²)``.

How h is counted: along the ring's path, without the wrap-around edge (last → first).
That is the reading under which the slides' numbers come out: their worked example has
h = 1 and h = 3 in columns of a three-cluster layout and h = 1 in three-column rows,
which a count with the wrap-around cannot give (a cycle changes group 0 times or at
least twice, and a 3-cycle 0, 2 or 3 times).  The pipelined ring broadcast SUMMA uses
sends the block from the root along the path, so the closing edge carries nothing.

Groups and the generalisation to a hierarchy: a :class:`Grouping` gives every rank
its group id at each level of a tree (innermost first, the last level is the root
that holds everybody) and a weight per level; a transfer between two ranks whose
lowest common level is l costs ``weights[l]``.  The slides' two-level model is the
grouping with one level of groups (switches, or nodes, or sockets — the caller picks)
and weights (0, 1): same group 0, different groups 1, so the sums count inter-group
transfers exactly.  With a full hierarchy's distances (e.g. socket:node:switch:root =
1:10:100:1000) h becomes the sum of the distances of the ring's hops.

Complexity: O(p log p) per evaluation for p ranks (the bands come from one sort of
the rectangles' boundaries, then one vectorised look-up per column); the pairwise form
(:func:`pair_cost_a`) used by the searches is O(r_j · r_{j+1}) per pair of columns.

References
----------
* T. Malik, V. Rychkov, A. Lastovetsky, J.-N. Quintin: Topology-aware optimization of
  communications for parallel matrix multiplication on hierarchical heterogeneous HPC
  platforms.  IPDPS Workshops (HCW) 2014, doi:10.1109/IPDPSW.2014.10 (the slides of
  the talk are the project's seed 004); journal version with a second heuristic:
  Concurrency Computat.: Pract. Exper. 28(3):802-821 (2016).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import RankmapError
from ..model.machine import Hierarchy
from .tiling import ColumnLayout


class GroupingError(RankmapError, ValueError):
    """A grouping that does not fit the layout or is malformed."""


@dataclass(frozen=True, eq=False)
class Grouping:
    """Per-rank group ids by level and the cost of a transfer per lowest common level.

    ``group_ids``: (n, k) integers, level 0 innermost, the last column the root (all
    equal).  ``weights``: (k,) non-decreasing; a transfer between ranks first sharing
    level l costs ``weights[l]``.  ``cluster_level``: the level whose groups the
    heuristic keeps together (the slides' "clusters").
    """

    group_ids: np.ndarray
    weights: np.ndarray
    cluster_level: int = 0

    def __post_init__(self) -> None:
        g = np.asarray(self.group_ids, dtype=np.int64)
        w = np.asarray(self.weights, dtype=np.float64)
        if g.ndim != 2 or g.shape[1] != len(w) or len(w) < 2:
            raise GroupingError("group_ids must be (n, k) with k = len(weights) >= 2")
        if len(g) and np.any(g[:, -1] != g[0, -1]):
            raise GroupingError("the last level must be the root (one group)")
        if not np.all(np.isfinite(w)) or w.min() < 0 or np.any(np.diff(w) < 0):
            raise GroupingError(f"weights must be finite, >= 0 and non-decreasing, got {list(w)}")
        if not 0 <= self.cluster_level < len(w) - 1:
            raise GroupingError(f"cluster level {self.cluster_level} is not a level of groups "
                                f"(0..{len(w) - 2})")
        object.__setattr__(self, "group_ids", g)
        object.__setattr__(self, "weights", w)

    @property
    def n(self) -> int:
        return len(self.group_ids)

    @property
    def clusters(self) -> np.ndarray:
        """Per-rank group id at the cluster level."""
        return self.group_ids[:, self.cluster_level]

    @classmethod
    def two_level(cls, groups: Sequence[int]) -> Grouping:
        """The slides' model: transfers inside a group cost 0, across groups 1."""
        g = np.asarray(groups, dtype=np.int64)
        return cls(np.stack([g, np.zeros_like(g)], axis=1), np.array([0.0, 1.0]), 0)

    @classmethod
    def from_hierarchy(cls, hierarchy: Hierarchy, n: int, level: int,
                       weighted: bool = False) -> Grouping:
        """Ranks 0..n-1 on the hierarchy's first n PEs (Slurm's block order).

        ``level`` (0-based, below the root) is the cluster level.  Unweighted: the
        two-level model at that level (0 inside a level-``level`` group, 1 across);
        weighted: the hierarchy's own distances per level.
        """
        if n > hierarchy.n:
            raise GroupingError(f"{n} ranks but the hierarchy has only {hierarchy.n} PEs")
        if not 0 <= level < hierarchy.levels - 1:
            raise GroupingError(f"level {level + 1} is not a level of groups below the root "
                                f"(1..{hierarchy.levels - 1})")
        ids = hierarchy.group_ids[:n].astype(np.int64)
        if weighted:
            return cls(ids, hierarchy.distances, level)
        w = (np.arange(hierarchy.levels) > level).astype(np.float64)
        return cls(ids, w, level)

    def pair(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Cost of transfers a[i] → b[i] (vectorised, any shapes that broadcast)."""
        same = self.group_ids[a] == self.group_ids[b]  # (..., k); root column all True
        return self.weights[np.argmax(same, axis=-1)]


@dataclass(frozen=True)
class Cost:
    """cost_A (rows), cost_B (columns) and their Euclidean norm."""

    cost_a: float
    cost_b: float

    @property
    def norm(self) -> float:
        return float(np.hypot(self.cost_a, self.cost_b))

    def as_dict(self) -> dict[str, float]:
        return {"cost_A": self.cost_a, "cost_B": self.cost_b, "norm": self.norm}


@dataclass(frozen=True, eq=False)
class RowOverlaps:
    """The horizontal bands: ``start``/``height`` per band, ``ranks[j, b]`` the rank of
    column j in band b, ``h[b]`` the band's (weighted) inter-group transfers."""

    start: np.ndarray
    height: np.ndarray
    ranks: np.ndarray
    h: np.ndarray


def _check(layout: ColumnLayout, grouping: Grouping) -> None:
    if grouping.n != layout.n:
        raise GroupingError(f"the grouping has {grouping.n} ranks, the layout {layout.n}")


def row_overlaps(layout: ColumnLayout, grouping: Grouping) -> RowOverlaps:
    """The row overlaps of ``layout`` and their h.  O(p log p)."""
    _check(layout, grouping)
    starts = np.unique(layout.row_offset)  # every rectangle top; 0 is always among them
    heights = np.diff(np.append(starts, layout.size))
    ranks = np.empty((layout.ncolumns, len(starts)), dtype=np.int64)
    for j, col in enumerate(layout.columns()):
        tops = layout.row_offset[col]
        ranks[j] = col[np.searchsorted(tops, starts, side="right") - 1]
    h = grouping.pair(ranks[:-1], ranks[1:]).sum(axis=0) if layout.ncolumns > 1 \
        else np.zeros(len(starts))
    return RowOverlaps(starts, heights, ranks, h)


def column_transfers(layout: ColumnLayout, grouping: Grouping) -> np.ndarray:
    """h per column: (weighted) inter-group transfers down each column.  O(p)."""
    _check(layout, grouping)
    order = np.lexsort((layout.position, layout.column))
    col = layout.column[order]
    same_col = col[1:] == col[:-1]
    hop = grouping.pair(order[:-1], order[1:]) * same_col
    return np.bincount(col[1:], weights=hop, minlength=layout.ncolumns)


def cost(layout: ColumnLayout, grouping: Grouping) -> Cost:
    """(cost_A, cost_B) of ``layout`` as the slides define them.  O(p log p)."""
    bands = row_overlaps(layout, grouping)
    cost_a = float(np.dot(bands.h, bands.height))
    cost_b = float(np.dot(column_transfers(layout, grouping), layout.column_widths))
    return Cost(cost_a, cost_b)


def pair_cost_a(tops_a: np.ndarray, heights_a: np.ndarray, ranks_a: np.ndarray,
                tops_b: np.ndarray, heights_b: np.ndarray, ranks_b: np.ndarray,
                grouping: Grouping) -> np.ndarray:
    """cost_A contribution of two neighbouring columns, for batches of orders.

    Σ over rectangle pairs of (overlap of their row intervals) × transfer cost, which
    equals Σ over the bands of the two columns of v · [their rectangles' cost]; arrays
    may carry leading batch axes (broadcast), the last axis runs over a column's
    rectangles.  O(r_a · r_b) per order pair.
    """
    lo = np.maximum(tops_a[..., :, None], tops_b[..., None, :])
    hi = np.minimum((tops_a + heights_a)[..., :, None], (tops_b + heights_b)[..., None, :])
    w = grouping.pair(ranks_a[..., :, None], ranks_b[..., None, :])
    return (np.maximum(hi - lo, 0) * w).sum(axis=(-2, -1))


def pair_cost_b(ranks: np.ndarray, width: float, grouping: Grouping) -> np.ndarray:
    """cost_B of one column for a batch of orders (last axis: top to bottom)."""
    return grouping.pair(ranks[..., :-1], ranks[..., 1:]).sum(axis=-1) * width


def two_level_lower_bound(layout: ColumnLayout, grouping: Grouping) -> Cost:
    """A lower bound on (cost_A, cost_B) over all in-column arrangements, for the
    two-level model (weights 0 inside a cluster, 1 across; the cluster level).

    cost_B >= Σ_j w_j (g_j - 1), g_j the clusters in column j (each needs one change
    at least once it is entered).  cost_A >= Σ_j (N - Σ_g min(H_j(g), H_{j+1}(g))),
    H_j(g) the total height of cluster g in column j: rows where neighbouring columns
    are in the same cluster cannot exceed the shorter of the two clusters' heights.
    Both bounds hold separately, so the norm of any arrangement is at least their
    norm.  O(p + c · k) for c columns and k clusters.
    """
    _check(layout, grouping)
    clusters = np.unique(grouping.clusters, return_inverse=True)[1]
    k = int(clusters.max()) + 1
    H = np.zeros((layout.ncolumns, k))
    np.add.at(H, (layout.column, clusters), layout.height)
    present = (H > 0).sum(axis=1)
    cost_b = float(np.dot(layout.column_widths, present - 1))
    same = np.minimum(H[:-1], H[1:]).sum(axis=1)
    cost_a = float((layout.size - same).sum())
    return Cost(cost_a, cost_b)
