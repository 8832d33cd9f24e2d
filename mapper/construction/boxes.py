"""Boxes: a Cartesian grid cut along the machine's tree by coordinate bisection.

A halo exchange's time on a switch tree follows the busiest link of each level (the
leaf uplink with the most faces behind it, the node link with the most), and for a
grid those loads are the surfaces of the pieces a node, a leaf, a middle switch hold.
Graph partitioners approach the least surface; on a grid in rank order
(:func:`mapper.model.cartesian.cartesian_grid`) the geometry gives it directly: recursive
coordinate bisection (Berger & Bokhari, IEEE Trans. Computers C-36(5), 1987) splits
the grid in two with the cheapest plane, the sides holding what the two halves of a
group's children hold, down the tree to its innermost groups.  This is the tiling
view of Bhatelé et al.'s Rubik (SC 2012) and of Hoefler & Snir's recursive bisection
mapping (ICS 2011), with the machine's own group sizes (uneven nodes and switches
included) instead of a second grid.

A plane's cost is its area (cells of the smaller cross-section) times the volume one
cell's face carries in that dimension (:attr:`CartesianGrid.face_weight`), twice for a
piece that wraps around a periodic dimension (its wrap-around plane is cut as well, so
slabs through periodic dimensions are kept when they are cheaper): on a 16³
periodic 7-point stencil under leaves of 32 ranks the leaves get 2×4×4 boxes (64
faces each), the least surface 32 cells can have.  Where a side's size does not fill
whole planes the cut is a staircase (row-major order within the plane).

Complexity: O(n log n) for L tree levels and power-of-two groups: about log2(n) + L
depths, each one compiled pass over the cells still in a run (``_boxes.split_runs``:
a run's bounding box, then a stable partition where the side is whole planes; a run
whose side is a staircase is sorted instead, O(length log length)); no Python step per
group.
"""

from __future__ import annotations

import time

import numpy as np

from ..model.cartesian import CartesianGrid
from ..model.machine import Hierarchy


def coordinate_bisection(grid: CartesianGrid, machine: Hierarchy,
                         deadline: float | None = None,
                         share_faces: bool = False) -> np.ndarray | None:
    """Rank → PE: ``grid`` cut into ``machine``'s groups by coordinate bisection.

    Every group of the tree gets a set of cells as large as its number of PEs (the
    ranks and PEs must be as many); a group's children are split into two runs of
    near-equal size and the cells by the cheapest plane into the runs' sizes, until a
    run is one child, down to the innermost groups, whose PEs take their cells in rank
    order.  None when ``deadline`` (``time.perf_counter()`` value) passes first.

    Between planes of equal cost the slowest dimension is cut, or with
    ``share_faces`` first one the run spans whole: the run's faces towards the rest of
    the grid lie across the dimensions it does not span, and a cut across one of those
    gives each half one side's faces, a cut across a spanned one gives each half a
    share of both (a 2×4×4 slab of a periodic 8×4×4 grid in 2×2×2 nodes rather than
    1×2×4: every node sends the same volume out of the slab).
    """
    n = machine.n
    if grid.n != n:
        raise ValueError(f"the grid has {grid.n} cells but the machine {n} PEs")
    from ._boxes import split_runs  # compiled: the numpy depth took 2 s at 2^20 cells

    coords = np.ascontiguousarray(grid.coordinates(), dtype=np.int32)
    dims = np.asarray(grid.dims, dtype=np.int64)
    periodic = np.asarray(grid.periodic, dtype=np.uint8)
    face_weight = np.ascontiguousarray(grid.face_weight, dtype=np.float64)
    innermost = np.empty(n, dtype=np.int64)  # every cell's innermost group
    perm = np.arange(n, dtype=np.int64)  # cells, each run a contiguous segment
    # the runs: segment of perm, tree level, child group range [first, end) there
    start = np.zeros(1, dtype=np.int64)
    length = np.full(1, n, dtype=np.int64)
    level = np.full(1, machine.levels - 1, dtype=np.int64)
    first = np.zeros(1, dtype=np.int64)
    end = np.ones(1, dtype=np.int64)
    while len(start):
        if deadline is not None and time.perf_counter() > deadline:
            return None
        _descend(machine, level, first, end)
        done = end - first == 1  # one innermost group: it holds the run's cells
        if done.any():
            innermost[perm[_positions(start[done], length[done])]] = np.repeat(
                first[done], length[done])
            start, length, level, first, end = (a[~done] for a in
                                                (start, length, level, first, end))
            if not len(start):
                break
        half, left = _halves(machine, level, first, end)
        # a plane across dimension k cuts about cells / extent_k faces of face_weight_k,
        # twice when the run wraps around a periodic k (the wrap's plane is cut too);
        # on ties (a cube) the slowest dimension, so that equal cuts keep rank order
        split_runs(perm, coords, start, length, np.ascontiguousarray(left), face_weight,
                   dims, periodic, share_faces)
        start, length = (np.concatenate([start, start + left]),
                         np.concatenate([left, length - left]))
        level = np.concatenate([level, level])
        first, end = np.concatenate([first, half]), np.concatenate([half, end])
    # groups are PE ranges in PE order: sorted by (group, rank), the cells take the PEs
    # in order, so inside a group its PEs take their cells in rank order
    mapping = np.empty(n, dtype=np.int64)
    mapping[np.lexsort((np.arange(n), innermost))] = np.arange(n)
    return mapping


def _descend(machine: Hierarchy, level: np.ndarray, first: np.ndarray,
             end: np.ndarray) -> None:
    """In place: a run of one group above the innermost level becomes the run of that
    group's children, until every run has several groups or one innermost group."""
    while True:
        single = (end - first == 1) & (level > 0)
        if not single.any():
            return
        for lv in np.unique(level[single]):
            sel = single & (level == lv)
            outer, inner = machine.bounds[lv], machine.bounds[lv - 1]
            lo, hi = outer[first[sel]], outer[first[sel] + 1]
            first[sel] = np.searchsorted(inner, lo)
            end[sel] = np.searchsorted(inner, hi)
            level[sel] = lv - 1


def _halves(machine: Hierarchy, level: np.ndarray, first: np.ndarray, end: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray]:
    """Per run of several groups: the group where its second half starts (the split
    nearest half of its PEs) and the PEs before it."""
    half = np.empty(len(level), dtype=np.int64)
    left = np.empty(len(level), dtype=np.int64)
    for lv in np.unique(level):
        sel = level == lv
        b = machine.bounds[lv]
        lo, hi = b[first[sel]], b[end[sel]]
        target = (lo + hi) / 2
        after = np.clip(np.searchsorted(b, target), first[sel] + 1, end[sel] - 1)
        before = np.clip(after - 1, first[sel] + 1, end[sel] - 1)
        pick = np.where(np.abs(b[before] - target) <= np.abs(b[after] - target),
                        before, after)
        half[sel] = pick
        left[sel] = b[pick] - lo
    return half, left


def _positions(start: np.ndarray, length: np.ndarray) -> np.ndarray:
    """The positions of the segments ``[start, start + length)`` one after the other."""
    before = np.cumsum(length) - length
    return (np.repeat(start - before, length)
            + np.arange(int(length.sum()), dtype=np.int64))
