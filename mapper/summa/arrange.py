"""Communication-optimal arrangement of a column-based SUMMA layout.

The rectangles of a column may be stacked in any order (their heights do not change)
and whole columns may be exchanged (widths differ, so a rectangle cannot move alone
to another column); every arrangement keeps the partition's load balance.  The cost
of an arrangement is the norm of :mod:`mapper.summa.cost`; minimising it is
NP-complete (Malik et al.), so two searches are offered:

* :func:`heuristic` — the slides' group-permutation heuristic.  Each column's
  rectangles are grouped by cluster (the grouping's cluster level; inside a cluster,
  nested by the finer levels; ties keep the current order), column 1 is accepted as
  it is (grouped), and for each next column i all g_i! orders of its g_i cluster
  groups are tried; the one whose extended sub-matrix (columns 1..i) has the smallest
  norm is kept (first in ``itertools.permutations`` order on ties).  Σ_{i≥2} g_i!
  evaluations instead of Π r_i!, each O(r_{i-1} · r_i); no column exchanges.
* :func:`exhaustive` — every in-column order of every column, Π r_i! arrangements
  (times c! column orders with ``exchange_columns``), evaluated at once from
  per-column and per-neighbour tables (cost_A is a sum over neighbouring columns,
  cost_B over columns): O(Σ r_j! r_{j+1}! r_j r_{j+1} + Π r_i!) time and memory
  O(Π r_i!); refused above ``limit`` arrangements.

How much the heuristic misses.  In the two-level model its cost_B is the minimum over
all arrangements (a column whose g groups are contiguous has g - 1 changes, the least
possible), so what it misses comes from cost_A, where the greedy column-by-column choice
and the contiguous groups can both be wrong.  Measured on 6000 random layouts (3-13
ranks in 2-4 columns, 2-4 clusters, random in-column start orders): the heuristic found
the exhaustive optimum's norm on 81-95 % of them (fewer with more clusters) and was never
more than 23 % above it (mean 0.3-1 %); tests/mapper/summa/test_summa_arrange.py bounds the miss at
25 % on its own random sample.  It may even end above the original layout on unlucky
inputs: :func:`arrange` then keeps the original.

References
----------
* T. Malik, V. Rychkov, A. Lastovetsky, J.-N. Quintin: Topology-aware optimization of
  communications for parallel matrix multiplication on hierarchical heterogeneous HPC
  platforms.  IPDPS Workshops (HCW) 2014, doi:10.1109/IPDPSW.2014.10 (the heuristic;
  seed 004 slides).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from ..errors import RankmapError
from .cost import Cost, Grouping, cost, pair_cost_a, pair_cost_b
from .tiling import ColumnLayout

#: default cap of :func:`exhaustive` (arrangements evaluated)
EXHAUSTIVE_LIMIT = 2_000_000
#: default cap of g_i! per column in :func:`heuristic`
HEURISTIC_GROUP_LIMIT = 40_320  # 8!


class ArrangeError(RankmapError, ValueError):
    """A search that would be too large for the layout."""


@dataclass(frozen=True, eq=False)
class Arrangement:
    """The arranged layout, its cost and the original's, and the work done.

    ``evaluations``: orders evaluated (Σ g_i! for the heuristic, Π r_i! [· c!] for
    exhaustive search); ``kept_original``: :func:`arrange` found nothing cheaper.
    """

    layout: ColumnLayout
    before: Cost
    after: Cost
    evaluations: int
    method: str
    kept_original: bool = False

    @property
    def reduction(self) -> float:
        """Relative reduction of the norm (0.2 = 20 % cheaper)."""
        return 0.0 if self.before.norm == 0 else 1.0 - self.after.norm / self.before.norm


def _first_seen(ids: np.ndarray) -> np.ndarray:
    """Per element: the rank of its value in order of first appearance."""
    _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    return np.argsort(np.argsort(first))[inverse]


def cluster_blocks(ranks: np.ndarray, grouping: Grouping) -> list[np.ndarray]:
    """A column's ranks grouped by cluster (first-appearance order), nested by the
    finer levels inside each cluster; one array per cluster group.  O(r log r)."""
    ranks = np.asarray(ranks, dtype=np.int64)
    cl = grouping.cluster_level
    keys = [_first_seen(grouping.group_ids[ranks, lev]) for lev in range(cl + 1)]
    order = ranks[np.lexsort(keys)]  # last key (the cluster) is the primary one
    top = _first_seen(grouping.group_ids[order, cl])
    cuts = np.flatnonzero(np.diff(top)) + 1
    return np.split(order, cuts)


def _tops(ranks: np.ndarray, heights: np.ndarray) -> np.ndarray:
    h = heights[ranks]
    return np.cumsum(h, axis=-1) - h


def heuristic(layout: ColumnLayout, grouping: Grouping,
              group_limit: int = HEURISTIC_GROUP_LIMIT) -> Arrangement:
    """Malik et al.'s group-permutation heuristic (see the module docstring)."""
    before = cost(layout, grouping)
    heights = layout.height
    widths = layout.column_widths
    columns = layout.columns()
    first = np.concatenate(cluster_blocks(columns[0], grouping))
    chosen = [first]
    cost_a = 0.0
    cost_b = float(pair_cost_b(first, widths[0], grouping))
    evaluations = 0
    for j in range(1, len(columns)):
        blocks = cluster_blocks(columns[j], grouping)
        if math.factorial(len(blocks)) > group_limit:
            raise ArrangeError(f"column {j} holds {len(blocks)} groups: {len(blocks)}! orders "
                               f"exceed {group_limit}; group at a coarser level")
        cands = np.array([np.concatenate([blocks[i] for i in perm])
                          for perm in itertools.permutations(range(len(blocks)))])
        prev = chosen[-1]
        ext_a = cost_a + pair_cost_a(_tops(prev, heights), heights[prev], prev,
                                     _tops(cands, heights), heights[cands], cands, grouping)
        ext_b = cost_b + pair_cost_b(cands, widths[j], grouping)
        k = int(np.argmin(np.hypot(ext_a, ext_b)))
        evaluations += len(cands)
        chosen.append(cands[k])
        cost_a, cost_b = float(ext_a[k]), float(ext_b[k])
    arranged = layout.with_columns(chosen)
    return Arrangement(arranged, before, cost(arranged, grouping), evaluations, "heuristic")


def search_space(layout: ColumnLayout, exchange_columns: bool = False) -> int:
    """Number of arrangements exhaustive search evaluates: Π r_i! (· c!)."""
    total = math.prod(math.factorial(len(c)) for c in layout.columns())
    return total * (math.factorial(layout.ncolumns) if exchange_columns else 1)


def _pair_table(pa: np.ndarray, pb: np.ndarray, heights: np.ndarray,
                grouping: Grouping, chunk: int = 256) -> np.ndarray:
    """cost_A between every order of one column (rows) and of its right neighbour."""
    ta, tb = _tops(pa, heights), _tops(pb, heights)
    out = np.empty((len(pa), len(pb)))
    for s in range(0, len(pa), chunk):  # chunks bound the (chunk, |pb|, r_a, r_b) temporaries
        e = s + chunk
        out[s:e] = pair_cost_a(ta[s:e, None], heights[pa[s:e, None]], pa[s:e, None],
                               tb[None], heights[pb[None]], pb[None], grouping)
    return out


def exhaustive(layout: ColumnLayout, grouping: Grouping, *, exchange_columns: bool = False,
               worst: bool = False, limit: int = EXHAUSTIVE_LIMIT) -> Arrangement:
    """The arrangement of least norm (``worst``: of largest norm) over all in-column
    orders (and, with ``exchange_columns``, all column orders).  Ties: the first in
    lexicographic order of the columns' permutations."""
    total = search_space(layout, exchange_columns)
    if total > limit:
        raise ArrangeError(f"exhaustive search needs {total} arrangements, more than the "
                           f"limit {limit}; use the heuristic")
    before = cost(layout, grouping)
    heights = layout.height
    columns = layout.columns()
    c = len(columns)
    perms = [np.array(list(itertools.permutations(col)), dtype=np.int64).reshape(-1, len(col))
             for col in columns]
    shape = tuple(len(p) for p in perms)
    cost_b = np.zeros(shape)
    for j, p in enumerate(perms):
        cost_b += pair_cost_b(p, layout.column_widths[j], grouping).reshape(
            [-1 if i == j else 1 for i in range(c)])
    tables: dict[tuple[int, int], np.ndarray] = {}
    orders = itertools.permutations(range(c)) if exchange_columns else [tuple(range(c))]
    best = None
    for order in orders:
        cost_a = np.zeros(shape)
        for a, b in itertools.pairwise(order):
            key = (min(a, b), max(a, b))
            if key not in tables:
                tables[key] = _pair_table(perms[key[0]], perms[key[1]], heights, grouping)
            t = tables[key]
            view = [1] * c
            view[key[0]], view[key[1]] = t.shape
            cost_a = cost_a + t.reshape(view)
        norm = np.hypot(cost_a, cost_b)
        flat = int(np.argmax(norm) if worst else np.argmin(norm))
        value = float(norm.flat[flat])
        if best is None or (value > best[0] if worst else value < best[0]):
            best = (value, order, np.unravel_index(flat, shape))
    _, order, idx = best
    chosen = [perms[j][idx[j]] for j in range(c)]
    arranged = layout.with_columns(chosen, column_order=list(order))
    return Arrangement(arranged, before, cost(arranged, grouping), total,
                       "exhaustive-worst" if worst else "exhaustive")


def arrange(layout: ColumnLayout, grouping: Grouping, method: str = "heuristic",
            **options) -> Arrangement:
    """``heuristic`` or ``exhaustive``, keeping the original layout when the search's
    result is not cheaper (possible for the heuristic only)."""
    if method == "heuristic":
        result = heuristic(layout, grouping, **options)
    elif method == "exhaustive":
        result = exhaustive(layout, grouping, **options)
    else:
        raise ArrangeError(f"unknown arrangement method {method!r} (heuristic, exhaustive)")
    if result.after.norm > result.before.norm:
        return Arrangement(layout, result.before, result.before, result.evaluations,
                           result.method, kept_original=True)
    return result
