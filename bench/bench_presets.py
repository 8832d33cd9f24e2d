#!/usr/bin/env python3
"""rankmap's presets fast / eco / strong against SharedMap fast / eco / strong and
Scotch, same run, same instances (issue 12's benchmark).  By hand, not a test.

Instances: the sparse-QAP paper's rgg and Delaunay quotient graphs (bench_mapping.py),
3D stencils with and without wrap-around, and irregular ones: power-law graphs
(Barabási–Albert; the 512-rank one with 100 edges per new rank, mean degree 161 and
hubs of 350, is issue 29's high-degree case, where ``strong``'s iterated local search
ran past its work bound: 2.3 x SharedMap eco's time here before the fix), NPB-CG-like
process grids on machines whose shape does not match the grid, and the quotient of a
3D FE-like mesh (Delaunay tetrahedralisation).
Machine: S = 4:16:k' (or the given shape), D = 1:10:100.  J counts each undirected
edge once for every tool (recomputed from each tool's mapping by mapper.objectives.qap).

Targets printed at the end (issue 12): strong geomean J ≤ 0.98 × the per-instance
best peer at geomean time ≤ SharedMap eco's; eco ≤ 1.00 × best peer at ≤ 0.5 × SharedMap
eco's time; fast as today's topdown+n10.

    python3 bench/bench_presets.py                # ~13 min here with both peers
    python3 bench/bench_presets.py --quick        # fewer instances
    python3 bench/bench_presets.py --only power-law   # instances whose name has this
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from scipy.spatial import Delaunay

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_mapping import (  # noqa: E402
    delaunay,
    geomean,
    quotient,
    rgg,
    run_scotch,
    run_sharedmap,
    scotch_available,
    sharedmap_available,
)

from mapper import CommGraph, Hierarchy  # noqa: E402
from mapper.solve.algorithm_names import PRESETS  # noqa: E402
from mapper.solve.api import map_processes  # noqa: E402
from slurm_plugin.profiles.generators import generate  # noqa: E402


def stencil(dims: tuple[int, ...], periodic: bool) -> CommGraph:
    idx = np.arange(int(np.prod(dims))).reshape(dims)
    src, dst = [], []
    for ax, size in enumerate(dims):
        if periodic and size > 2:
            src.append(idx.ravel())
            dst.append(np.roll(idx, -1, axis=ax).ravel())
        else:
            src.append(np.take(idx, range(size - 1), axis=ax).ravel())
            dst.append(np.take(idx, range(1, size), axis=ax).ravel())
    return CommGraph.from_edges(np.concatenate(src), np.concatenate(dst), n=idx.size)


def power_law(n: int, m: int = 3, seed: int = 0) -> CommGraph:
    """Barabási–Albert preferential attachment, weights 1..100 (a power-law degree
    distribution: a few hubs talk to many ranks)."""
    rng = np.random.default_rng(seed)
    src, dst = [], []
    repeated: list[int] = []
    for v in range(m, n):
        chosen = set()
        while len(chosen) < m:
            pick = (rng.choice(repeated) if repeated and rng.random() < 0.9
                    else rng.integers(v))
            chosen.add(int(pick))
        for t in chosen:
            src.append(v)
            dst.append(t)
        repeated.extend(chosen)
        repeated.extend([v] * m)
    w = rng.integers(1, 101, len(src)).astype(float)
    return CommGraph.from_edges(np.array(src), np.array(dst), w, n=n)


def fe3d(n: int, seed: int = 0) -> sp.csr_matrix:
    """The edge graph of a Delaunay tetrahedralisation of n random points (a 3D FE-like
    unstructured mesh)."""
    pts = np.random.default_rng(seed).random((n, 3))
    tets = Delaunay(pts).simplices
    pairs = np.concatenate([tets[:, [a, b]] for a in range(4) for b in range(a + 1, 4)])
    pairs = np.sort(pairs, axis=1)
    a = sp.coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
    a = ((a + a.T) > 0).astype(np.float64).tocsr()
    a.setdiag(0)
    a.eliminate_zeros()
    return a


def instances(quick: bool):
    ks = [5, 13] if quick else [2, 5, 8, 13, 16]
    for name, maker in (("rgg15", rgg), ("delaunay15", delaunay)):
        base = maker(1 << 15)
        for kp in ks:
            yield f"{name} k={64 * kp}", quotient(base, 64 * kp), f"4:16:{kp}"
    # 3 levels everywhere (the peers' adapters take D = 1:10:100)
    for dims, periodic, hier in (((8, 8, 8), False, "4:16:8"), ((8, 8, 8), True, "4:16:8"),
                                 ((16, 8, 8), True, "16:8:8"), ((12, 8, 6), True, "24:4:6"),
                                 ((8, 8, 4, 4), True, "4:16:16")):
        if quick and len(dims) == 4:
            continue
        label = "torus" if periodic else "stencil"
        yield f"{label} {'x'.join(map(str, dims))}", stencil(dims, periodic), hier
    yield "power-law n=1024", power_law(1024), "4:16:16"
    # high degree (issue 29): two hops from any rank reach almost every other one
    yield "power-law n=512 m=100", power_law(512, 100), "4:16:8"
    if not quick:
        yield "power-law n=4096", power_law(4096, seed=1), "4:16:64"
    # NPB CG's process grid (rows x cols, powers of two) on machines whose groups do
    # not divide it: 12-core sockets, 21 nodes under a switch
    for n, hier in ((1024, "12:4:22"), (2048, "24:2:43")):
        h = Hierarchy.parse(hier, "1:10:100")
        g = generate("npb-cg", n)
        # the slots left over hold idle ranks (no edges), as in a job with spare cores
        rows_ = np.repeat(np.arange(g.n), np.diff(g.indptr))
        keep = rows_ < g.indices
        g = CommGraph.from_edges(rows_[keep], g.indices[keep], g.weights[keep], n=h.n)
        yield f"npb-cg {n} on {hier}", g, hier
    base = fe3d(1 << 14 if quick else 1 << 15)
    for kp in ((8,) if quick else (8, 13)):
        yield f"fe3d k={64 * kp}", quotient(base, 64 * kp), f"4:16:{kp}"


def hier_list(hier: str) -> list[int]:
    return [int(x) for x in hier.split(":")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default=None,
                    help="run only the instances whose name contains this text")
    ap.add_argument("--time-limit", type=float, default=None,
                    help="budget per rankmap run (default: none; the presets' counts bound "
                         "their work)")
    args = ap.parse_args()
    sm_missing, sc_missing = sharedmap_available(), scotch_available()
    for why in (sm_missing, sc_missing):
        if why:
            print(f"note: {why}", file=sys.stderr)
    sm_modes = [] if sm_missing else ["fast", "eco", "strong"]
    head = (["instance", "n"] + [f"{p} J" for p in PRESETS] + [f"{p} s" for p in PRESETS]
            + [f"SM {m} J" for m in sm_modes] + [f"SM {m} s" for m in sm_modes]
            + ([] if sc_missing else ["Scotch J", "Scotch s"])
            + [f"{p}/best peer" for p in PRESETS])
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    ratios = {p: [] for p in PRESETS}
    times = {p: [] for p in PRESETS}
    sm_eco_times = []
    overruns = []
    for name, g, hier in instances(args.quick):
        if args.only is not None and args.only not in name:
            continue
        h = Hierarchy.parse(hier, "1:10:100")
        ours = {}
        for p in PRESETS:
            t = time.perf_counter()
            r = map_processes(g, h, p, args.seed, args.time_limit)
            secs = time.perf_counter() - t
            ours[p] = (r.objective, secs)
            if args.time_limit is not None and secs > args.time_limit * 1.1 + 0.2:
                overruns.append(f"{name} {p} {secs:.2f} s")
        peers = {}
        for m in sm_modes:
            peers[f"SM {m}"] = run_sharedmap(g, h, hier_list(hier), m, args.seed)
        if not sc_missing:
            peers["Scotch"] = run_scotch(g, h, hier_list(hier))
        finite = [v[0] for v in peers.values() if math.isfinite(v[0])]
        best = min(finite) if finite else float("nan")
        row = [name, str(g.n)] + [f"{ours[p][0]:.6g}" for p in PRESETS] \
            + [f"{ours[p][1]:.2f}" for p in PRESETS] \
            + [f"{peers[f'SM {m}'][0]:.6g}" for m in sm_modes] \
            + [f"{peers[f'SM {m}'][1]:.2f}" for m in sm_modes] \
            + ([] if sc_missing else [f"{peers['Scotch'][0]:.6g}",
                                      f"{peers['Scotch'][1]:.2f}"]) \
            + [f"{ours[p][0] / best:.3f}" for p in PRESETS]
        print("| " + " | ".join(row) + " |", flush=True)
        for p in PRESETS:
            ratios[p].append(ours[p][0] / best)
            times[p].append(ours[p][1])
        if "SM eco" in peers:
            sm_eco_times.append(peers["SM eco"][1])
    print()
    sm_eco = geomean(sm_eco_times)
    for p in PRESETS:
        print(f"- {p}: geomean J / best peer {geomean(ratios[p]):.4f}, geomean time "
              f"{geomean(times[p]):.3f} s ({geomean(times[p]) / sm_eco:.2f} x SharedMap eco's "
              f"{sm_eco:.3f} s)")
    print("- targets: strong <= 0.98 x best peer at <= 1.0 x SM eco time; eco <= 1.00 x at "
          "<= 0.5 x SM eco time")
    print(f"- runs over their budget: {', '.join(overruns) if overruns else 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
