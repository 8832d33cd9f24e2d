"""Periodic and open grid stencils against Slurm's block placement (issue 12 item 3).

For every stencil × machine: J / J(block) of the solver alone (no baseline guard) with
``topdown+n10`` and ``bottomup+n10``, before and after the partitioning fix, next to
the best nested box tiling (tests/helpers/grid_tilings.py, homogeneous machines only) and
block polished by N_C^10.  "before" runs today's Top-Down and Bottom-Up with the
partitioner they had before the fix (one METIS recursive bisection + size repair + swap
refinement, :func:`legacy_partition`, kept here for this comparison).  J is
recomputed from the edges by tests/helpers/grid_tilings.py.  Machines: hierarchy = cores per
socket : sockets : nodes per leaf : leaves, distances 1:10:100:1000 (rankmap's
defaults); two machines have unequal nodes.

    python3 bench/bench_periodic.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from mapper import CommGraph, Hierarchy  # noqa: E402
from mapper.construction import bottom_up, top_down  # noqa: E402
from mapper.partitioners.exact_sizes import cut_weight, refine_cut, repair_sizes  # noqa: E402
from mapper.partitioners.metis import _metis  # noqa: E402
from mapper.search import communication_neighborhood  # noqa: E402
from tests.helpers import grid_tilings as gt  # noqa: E402

DISTANCES = [1.0, 10.0, 100.0, 1000.0]

#: name -> (tree, fanouts innermost first or None when unequal)
MACHINES = {
    "16n x 2x8, 4 leaves": ([[[8, 8]] * 4] * 4, [8, 2, 4, 4]),
    "32n x 2x4, 4 leaves": ([[[4, 4]] * 8] * 4, [4, 2, 8, 4]),
    "24n x 2x12, 4 leaves": ([[[12, 12]] * 6] * 4, [12, 2, 6, 4]),
    "15n x 2x6, 3 leaves": ([[[6, 6]] * 5] * 3, [6, 2, 5, 3]),
    "4n x 2x16 + 8n x 2x8": ([[[16, 16]] * 4, [[8, 8]] * 8], None),
    "3n x 2x10 + 5n x 2x6": ([[[10, 10]] * 3, [[6, 6]] * 5], None),
}
GRIDS = {
    256: [(16, 16), (8, 8, 4), (4, 4, 4, 4)],
    576: [(24, 24), (12, 8, 6), (6, 4, 4, 6)],
    180: [(15, 12), (6, 6, 5), (5, 3, 3, 4)],
    120: [(12, 10), (6, 5, 4), (5, 3, 2, 4)],
}


def legacy_partition(adj, sizes, seed=0, time_limit=None):
    """The partitioner before the fix: one METIS recursive bisection, size repair,
    swap refinement (graphs of 16 vertices or fewer: best of 4 tries)."""
    n, k = adj.shape[0], len(sizes)
    sizes = np.asarray(sizes, dtype=np.int64)
    if k == 1:
        return np.zeros(n, dtype=np.int64)
    if adj.nnz == 0 or n <= k:
        return np.repeat(np.arange(k), sizes)
    tries = 4 if n <= 16 else 1
    best, best_cut = None, np.inf
    for attempt in range(tries):
        raw = _metis(adj, sizes, seed + 7919 * (attempt // 2), recursive=attempt % 2 == 0)
        part = refine_cut(adj, repair_sizes(adj, raw, sizes), sizes, seed)
        cut = cut_weight(adj, part)
        if cut < best_cut:
            best, best_cut = part, cut
    return best


def _tree_gid(machine: Hierarchy, pe: np.ndarray) -> np.ndarray:
    return machine.group_ids[pe].astype(np.int64)


def run(quick: bool) -> list[dict]:
    rows = []
    for mname, (tree, fanouts) in MACHINES.items():
        machine = Hierarchy.from_tree(tree, DISTANCES)
        grids = GRIDS[machine.n][:2] if quick else GRIDS[machine.n]
        for dims in grids:
            for periodic in (True, False):
                u, v = gt.grid_edges(dims, periodic)
                w = np.ones(len(u))
                graph = CommGraph.from_edges(u, v, w, n=machine.n)

                def j_of(pe, u=u, v=v, w=w, machine=machine):
                    return gt.objective(u, v, w, _tree_gid(machine, pe), DISTANCES)

                block = j_of(np.arange(machine.n))
                row = {"grid": "x".join(map(str, dims)) + (" periodic" if periodic else ""),
                       "machine": mname}
                for label, build in (("topdown", top_down), ("bottomup", bottom_up)):
                    for when, part in (("before", legacy_partition), ("after", None)):
                        t = time.perf_counter()
                        kw = {} if part is None else {"partitioner": part}
                        pe = build(graph, machine, 0, **kw)
                        communication_neighborhood(graph, machine, pe, 10, 0)
                        row[f"{label} {when}"] = j_of(pe) / block
                        row[f"{label} {when} s"] = time.perf_counter() - t
                pe = np.arange(machine.n)
                communication_neighborhood(graph, machine, pe, 10, 0)
                row["block+n10"] = j_of(pe) / block
                tiled = (gt.box_tiling(dims, periodic, fanouts, DISTANCES)
                         if fanouts is not None else None)
                row["box tiling"] = np.nan if tiled is None else j_of(tiled) / block
                rows.append(row)
    return rows


COLUMNS = ["grid", "machine", "topdown before", "topdown after", "topdown after s",
           "bottomup before", "bottomup after", "bottomup after s", "block+n10",
           "box tiling"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="two grids per machine")
    args = ap.parse_args()
    rows = run(args.quick)
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for r in rows:
        cells = [r[c] if isinstance(r[c], str) else f"{r[c]:.3f}" for c in COLUMNS]
        print("| " + " | ".join(cells) + " |")
    for key in ("topdown before", "topdown after", "bottomup before", "bottomup after"):
        for periodic in (True, False):
            vals = [r[key] for r in rows if r["grid"].endswith("periodic") == periodic]
            print(f"- {key}, {'periodic' if periodic else 'open'}: geomean "
                  f"{np.exp(np.mean(np.log(vals))):.3f}, worst {max(vals):.3f}, "
                  f"above block {sum(v > 1 + 1e-12 for v in vals)}/{len(vals)}")


if __name__ == "__main__":
    main()
