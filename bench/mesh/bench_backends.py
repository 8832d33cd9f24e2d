"""METIS (pymetis) versus KaHIP (kaffpa) as the backend of the mesh partitioners.

    .venv/bin/python bench/mesh/bench_backends.py [--kahip-mode fast|eco|strong]
        [--graphs 3elt,delaunay_n15,rgg_n_2_15_s0,grid3d] [--seed 0] [--repeat 1]

Meshes: the graphs of shared/bench-graphs (skipped when absent) and a generated
32×32×32 7-point grid (bench/mesh/meshes.py).  Three ways of making k blocks, each with
both backends, ε = 0.03, one core:

* ``kway k``: the backend's own k-way partition, equal targets, no repair (METIS k-way
  with ``ufactor`` 30; kaffpa with imbalance 0.03) — what the backend gives alone;
* ``rb k``: :func:`mapper.mesh.rb.rb_partition` (bisection steps + balance repair);
* ``rms S``: :func:`mapper.mesh.rms.rms_partition` on S = 4:16:k'.

Prints one markdown table: edge cut, max imbalance (max block weight / target - 1) and
seconds for each backend, and the ratios KaHIP/METIS (cut < 1: KaHIP cuts less;
seconds > 1: KaHIP is slower).  Last line: the geometric means of the ratios.  Seconds
are the minimum over ``--repeat`` runs (cuts are deterministic per seed): on a shared
machine single runs have outliers.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from meshes import grid3d, shared_mesh

from mapper.mesh.balance import mesh_arrays
from mapper.mesh.metrics import edge_cut, imbalance
from mapper.mesh.rb import rb_partition
from mapper.mesh.rms import rms_partition
from mapper.model.machine import Hierarchy
from mapper.partitioners.kahip import kahip_split
from mapper.partitioners.metis import metis_split

KWAY = (32, 256, 1024)
RB = (32, 256, 1024)
RMS_KPRIME = (1, 3, 8, 13)
GRAPHS = ("3elt", "delaunay_n15", "rgg_n_2_15_s0", "grid3d")


def load(name: str):
    if name == "grid3d":
        return grid3d(32, 32, 32)
    return shared_mesh(f"{name}.graph")


def kway(mesh, k: int, backend: str, seed: int, mode: str) -> np.ndarray:
    adj, w = mesh_arrays(mesh)
    vw = np.ones(len(w), dtype=np.int64)
    fr = np.full(k, 1.0 / k)
    if backend == "metis":
        return metis_split(adj, vw, fr, imbalance=0.03, seed=seed, recursive=False)
    return kahip_split(adj, vw, fr, imbalance=0.03, seed=seed, mode=mode)


def run(mesh, how: str, arg, backend: str, seed: int, mode: str,
        repeat: int) -> tuple[float, float, float]:
    best = []
    for _ in range(repeat):
        best.append(_run(mesh, how, arg, backend, seed, mode))
    return best[0][0], best[0][1], min(b[2] for b in best)


def _run(mesh, how: str, arg, backend: str, seed: int, mode: str) -> tuple[float, float, float]:
    t0 = time.perf_counter()
    if how == "kway":
        part, k = kway(mesh, arg, backend, seed, mode), arg
    elif how == "rb":
        part, k = rb_partition(mesh, np.ones(arg), seed=seed, backend=backend,
                               kahip_mode=mode).part, arg
    else:
        h = Hierarchy.parse(arg, "1:10:100")
        part, k = rms_partition(mesh, h, seed=seed, backend=backend,
                                kahip_mode=mode).part, h.n
    sec = time.perf_counter() - t0
    targets = np.full(k, mesh.total_weight / k)
    return edge_cut(mesh, part), imbalance(mesh, part, targets), sec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kahip-mode", default="fast", choices=("fast", "eco", "strong"))
    ap.add_argument("--graphs", default=",".join(GRAPHS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    cases = ([("kway", k) for k in KWAY] + [("rb", k) for k in RB]
             + [("rms", f"4:16:{kp}") for kp in RMS_KPRIME])
    print(f"KaHIP mode {args.kahip_mode}, seed {args.seed}, epsilon 0.03\n")
    print("| mesh | method | cut METIS | cut KaHIP | cut K/M | imb METIS | imb KaHIP "
          "| s METIS | s KaHIP | s K/M |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    ratios: dict[str, list[tuple[float, float]]] = {}
    for name in args.graphs.split(","):
        mesh = load(name)
        if mesh is None:
            print(f"| {name} | (absent: shared/bench-graphs not found) |||||||||")
            continue
        for how, arg in cases:
            (cm, im, sm), (ck, ik, sk) = (run(mesh, how, arg, b, args.seed, args.kahip_mode,
                                              args.repeat)
                                          for b in ("metis", "kahip"))
            ratios.setdefault(how, []).append((ck / cm, sk / sm))
            print(f"| {name} ({mesh.n}) | {how} {arg} | {cm:.0f} | {ck:.0f} | {ck / cm:.3f} "
                  f"| {im:.3f} | {ik:.3f} | {sm:.2f} | {sk:.2f} | {sk / sm:.2f} |", flush=True)
    print()
    for how, r in ratios.items():
        a = np.array(r)
        print(f"{how}: geometric mean KaHIP/METIS cut {np.exp(np.log(a[:, 0]).mean()):.3f}, "
              f"seconds {np.exp(np.log(a[:, 1]).mean()):.2f} ({len(a)} cases)")


if __name__ == "__main__":
    main()
