#!/usr/bin/env python3
"""Benchmark: cost of the heterogeneous SUMMA arrangement, original vs heuristic.

Run by hand (not a test; a few seconds):

    .venv/bin/python bench/summa/bench_cost.py [--size N] [--seed S]

For each platform below, per-rank speeds are partitioned with Beaumont et al.'s
column-based algorithm (mapper.summa.tiling); "original" is that layout as the
partitioner gives it (columns and rectangles in sorted-speed order, slowest first) with
ranks grouped as Slurm's block distribution places them (consecutive ranks on the same
cluster/node); the heuristic is Malik et al.'s group permutation; exhaustive search
runs where Π r_i! is small enough; "bound" is a lower bound on the norm of any in-column
arrangement (mapper.summa.cost.two_level_lower_bound), so "red. max" is the largest
reduction any arrangement could reach.  Costs are the slides' two-level model (cost_A,
cost_B, norm; one unit per inter-group transfer and matrix row/column).

Speed sets (synthetic, in the spirit of the slides' Grid'5000 experiments): each
cluster mixes node generations, and every node's measured speed carries ±4 % noise,
as functional-performance-model measurements do; node generations overlap between
clusters, so the speed-sorted columns of the partition mix the clusters, which is what
the slides' figures show and what the arrangement repairs.

* inter16: 2 clusters x 8 nodes; cluster 0 has generations of relative speed 1.0 and
  1.8 (4 nodes each), cluster 1 1.3 and 2.4.
* inter32: 2 clusters x 16 nodes; cluster 0: 1.0, 1.6, 2.2 (6/5/5 nodes), cluster 1:
  1.2, 1.9, 2.6 (6/5/5).
* inter90: 3 clusters (40 + 30 + 20 nodes); cluster 0: 1.0, 1.5, 2.0; cluster 1: 1.2,
  1.8; cluster 2: 2.4, 3.0 (generations split evenly inside each cluster).
* inter90mix (added after inter90 came out at 17.6-17.8 %, as a sensitivity row): 3
  clusters x 30 nodes bought in the same three waves (1.0, 1.6, 2.3; 10 nodes each per
  cluster), so every speed class spans all clusters.
* homog4x8: the slides' homogeneous inter-node case: 4 multicore nodes x 8 processes,
  all of speed 1.0 ± 4 % (the measured per-process speeds of identical cores differ a
  little), grouped by node.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mapper.summa.arrange import exhaustive, heuristic, search_space  # noqa: E402
from mapper.summa.cost import Grouping, two_level_lower_bound  # noqa: E402
from mapper.summa.tiling import partition  # noqa: E402

#: (name, [(cluster nodes, [(generation speed, nodes), ...]), ...])
PLATFORMS = [
    ("inter16", [[(1.0, 4), (1.8, 4)], [(1.3, 4), (2.4, 4)]]),
    ("inter32", [[(1.0, 6), (1.6, 5), (2.2, 5)], [(1.2, 6), (1.9, 5), (2.6, 5)]]),
    ("inter90", [[(1.0, 14), (1.5, 13), (2.0, 13)], [(1.2, 15), (1.8, 15)],
                 [(2.4, 10), (3.0, 10)]]),
    ("inter90mix", [[(1.0, 10), (1.6, 10), (2.3, 10)]] * 3),
    ("homog4x8", [[(1.0, 8)], [(1.0, 8)], [(1.0, 8)], [(1.0, 8)]]),
]
NOISE = 0.04
EXHAUSTIVE_LIMIT = 2_000_000


def platform(spec, rng):
    """(speeds, group per rank): ranks in block order, cluster by cluster."""
    speeds, groups = [], []
    for g, cluster in enumerate(spec):
        for speed, count in cluster:
            speeds.extend(speed * (1 + rng.uniform(-NOISE, NOISE, count)))
            groups.extend([g] * count)
    return np.array(speeds), np.array(groups)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1024, help="matrix size N (default 1024)")
    ap.add_argument("--seed", type=int, default=0, help="noise seed (default 0)")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    head = (f"{'platform':10s} {'p':>3s} {'cols':>4s} {'original':>20s} {'heuristic':>20s} "
            f"{'red.':>6s} {'evals':>6s} {'exhaustive':>20s} {'red.':>6s} {'bound':>6s} "
            f"{'red.max':>7s}")
    print(f"N = {args.size}, noise ±{100 * NOISE:g} %, seed {args.seed}; "
          "cost = cost_A/cost_B -> norm")
    print(head)
    print("-" * len(head))
    for name, spec in PLATFORMS:
        speeds, groups = platform(spec, rng)
        layout = partition(speeds, args.size)
        g = Grouping.two_level(groups)
        t0 = time.perf_counter()
        h = heuristic(layout, g)
        t_h = time.perf_counter() - t0

        def fmt(c):
            return f"{c.cost_a:g}/{c.cost_b:g} -> {c.norm:.0f}"

        ex, ex_red = "-", "-"
        space = search_space(layout)
        if space <= EXHAUSTIVE_LIMIT:
            e = exhaustive(layout, g)
            ex, ex_red = fmt(e.after), f"{100 * e.reduction:.1f}%"
        else:
            ex = f"({float(space):.1e} orders)"
        bound = two_level_lower_bound(layout, g).norm
        print(f"{name:10s} {layout.n:3d} {layout.ncolumns:4d} {fmt(h.before):>20s} "
              f"{fmt(h.after):>20s} {100 * h.reduction:5.1f}% {h.evaluations:6d} {ex:>20s} "
              f"{ex_red:>6s} {bound:6.0f} {100 * (1 - bound / h.before.norm):6.1f}%")
        widths = " ".join(map(str, layout.column_widths.tolist()))
        per_col = " ".join(str(len(c)) for c in layout.columns())
        print(f"{'':10s} columns: widths {widths}; rectangles {per_col}; heuristic "
              f"{1000 * t_h:.0f} ms; Π r_i! = {float(space):.2g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
