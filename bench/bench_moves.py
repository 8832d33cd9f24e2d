#!/usr/bin/env python3
"""Benchmark: moves beyond the swap (3-cycles, ejection chains) after topdown+n10.

Run by hand (a few minutes; ``nice -n 5`` on a shared machine):

    python3 bench/bench_moves.py [--quick]

Instances are bench_mapping's kinds: METIS quotients of a random geometric graph and a
Delaunay triangulation (2^15 vertices, shuffled block ids) and 3D 7-point stencils with
and without wrap-around, on S = 4:16:k', D = 1:10:100.  For each: J after topdown+n10,
after topdown+n10 followed by :func:`mapper.search.cycles.cycle_search` (default
settings, 5 s budget), J with only the 3-cycles (no chains, one round), their ratios and
seconds.  Only our own code runs; J counts each undirected edge once.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_mapping import delaunay, quotient, rgg, stencil  # noqa: E402

from mapper import CommGraph, Hierarchy, map_processes, objective  # noqa: E402
from mapper.search.cycles import cycle_search  # noqa: E402


def periodic_stencil(dims: tuple[int, int, int]) -> CommGraph:
    """3D 7-point stencil with wrap-around in every dimension (a 3D torus of ranks)."""
    idx = np.arange(int(np.prod(dims))).reshape(dims)
    src = [idx.ravel()] * 3
    dst = [np.roll(idx, -1, axis=ax).ravel() for ax in range(3)]
    return CommGraph.from_edges(np.concatenate(src), np.concatenate(dst), n=idx.size)


def instances(quick: bool):
    ks = [2, 8, 16] if quick else [2, 5, 8, 13, 16]
    for name, maker in (("rgg15", rgg), ("delaunay15", delaunay)):
        base = maker(1 << 15)
        for kp in ks:
            yield f"{name} k={64 * kp}", quotient(base, 64 * kp), kp
    for dims, kp in (((8, 8, 8), 8), ((8, 8, 13), 13), ((16, 16, 16), 64)):
        label = "x".join(map(str, dims))
        yield f"stencil {label}", stencil(dims), kp
        yield f"torus {label}", periodic_stencil(dims), kp


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer quotient sizes")
    ap.add_argument("--budget", type=float, default=5.0, help="cycle_search time limit (s)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print("| instance | n | topdown+n10 J | s | +3-cycles J | ratio | s "
          "| +cycle_search J | ratio | s | cycles | chains | swaps |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    ratios_c, ratios_all = [], []
    for name, graph, kp in instances(args.quick):
        machine = Hierarchy.parse(f"4:16:{kp}", "1:10:100")
        t = time.perf_counter()
        base = map_processes(graph, machine, "topdown+n10", seed=args.seed)
        t_base = time.perf_counter() - t
        pe_c = base.mapping.astype(np.int64).copy()
        t = time.perf_counter()
        cycle_search(graph, machine, pe_c, seed=args.seed, time_limit=args.budget,
                     chain_length=0, rounds=1)
        t_c = time.perf_counter() - t
        pe = base.mapping.astype(np.int64).copy()
        t = time.perf_counter()
        stats = cycle_search(graph, machine, pe, seed=args.seed, time_limit=args.budget)
        t_all = time.perf_counter() - t
        j0, jc, j = base.objective, objective(graph, machine, pe_c), objective(graph, machine, pe)
        if abs((j0 - j) - stats.gain) > 1e-6 * max(j0, 1.0):
            raise SystemExit(f"{name}: reported gain {stats.gain} != {j0 - j}")
        ratios_c.append(jc / j0)
        ratios_all.append(j / j0)
        print(f"| {name} | {graph.n} | {j0:.0f} | {t_base:.2f} | {jc:.0f} | {jc / j0:.4f} "
              f"| {t_c:.2f} | {j:.0f} | {j / j0:.4f} | {t_all:.2f} | {stats.cycles} "
              f"| {stats.chains} | {stats.swaps} |", flush=True)
    gm = lambda xs: float(np.exp(np.mean(np.log(xs))))  # noqa: E731
    print(f"\ngeometric mean ratio: 3-cycles {gm(ratios_c):.4f}, "
          f"cycle_search {gm(ratios_all):.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
