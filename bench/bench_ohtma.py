"""Hop-bytes of OHTMA and the other placements on non-tree networks (run by hand).

    .venv/bin/python bench/bench_ohtma.py [--sizes 64,256,1024] [--profiles npb-cg,...]

Machines: nodes of 8 cores (2 sockets × 4, no hop inside a node) on (a) the Tianhe-3
layout (2 nodes per chip, square grid of chips, hops 1/2/3, see
:mod:`mapper.model.networks.tianhe3`) and (b) a 3D torus.  Distance = network hops, so J is
hop-bytes.  Prints one markdown table per machine: hop-bytes normalised to block
placement, and the seconds of each algorithm.  Profiles come from the existing
generators (slurm_plugin.profiles.generators).

The ``-tree`` columns run Top-Down (and Top-Down+N_C^10) on a tree approximation of
the network (:func:`mapper.partitioners.tree_approx.tree_approximation`: recursive
bisection of the nodes by hops, level distances = mean hops), translate the placement
back to the real PEs and evaluate it on the real hop matrix like every other column;
their seconds include building the approximation.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from mapper.model.machine import Hierarchy
from mapper.model.networks import NodeHopMachine, tianhe3_hops, torus_hops
from mapper.objectives.hop_bytes import hop_bytes
from mapper.partitioners.tree_approx import machine_pes, tree_approximation
from mapper.solve.api import map_processes
from slurm_plugin.profiles.generators import generate, is_generator_spec

CORES = 8
ALGORITHMS = ("greedy", "ohtma", "ohtma+n10", "greedyallc+n10")
TREE_ALGORITHMS = ("topdown", "topdown+n10")  # run on the tree approximation
TORUS = {8: (2, 2, 2), 32: (4, 4, 2), 128: (8, 4, 4), 512: (8, 8, 8)}
CHIPS = {8: (2, 2), 32: (4, 4), 128: (8, 8), 512: (16, 16)}


def machines(ranks: int) -> dict[str, NodeHopMachine]:
    nodes = ranks // CORES
    node = Hierarchy.homogeneous([4, 2], [0.0, 0.0])
    rows, cols = CHIPS[nodes]
    return {"tianhe3": NodeHopMachine(tianhe3_hops(rows, cols, 2), node),
            "torus3d": NodeHopMachine(torus_hops(TORUS[nodes]), node)}


def baselines(n: int) -> dict[str, np.ndarray]:
    nodes = n // CORES
    r = np.arange(n)
    return {"block": r, "cyclic": (r % nodes) * CORES + r // nodes,
            "random": np.random.default_rng(0).permutation(n)}


def tree_mappings(graph, machine: NodeHopMachine) -> tuple[dict, dict]:
    """Placements (rank → real PE) and seconds of TREE_ALGORITHMS on the machine's
    tree approximation; the seconds include building the approximation."""
    t = time.perf_counter()
    tree, order = tree_approximation(machine.hops, machine.nodes, base=machine.base,
                                     per_hop=machine.per_hop)
    pes = machine_pes(order, machine.node_sizes)
    build = time.perf_counter() - t
    placed, secs = {}, {}
    for algorithm in TREE_ALGORITHMS:
        t = time.perf_counter()
        res = map_processes(graph, tree, algorithm)
        secs[algorithm + "-tree"] = build + time.perf_counter() - t
        placed[algorithm + "-tree"] = pes[res.mapping]
    return placed, secs


def split_profiles(text: str) -> list[str]:
    """``npb-cg,snap:angles=4,groups=4`` → ``["npb-cg", "snap:angles=4,groups=4"]``: a
    piece that names no generator continues the spec before it."""
    specs: list[str] = []
    for piece in text.split(","):
        if specs and not is_generator_spec(piece):
            specs[-1] += "," + piece
        else:
            specs.append(piece)
    return specs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="64,256,1024")
    ap.add_argument("--profiles",
                    default="npb-bt,npb-cg,npb-lu,npb-sp,sweep3d,snap:angles=4,groups=4,stencil3d")
    args = ap.parse_args()
    timed = [*ALGORITHMS, *(a + "-tree" for a in TREE_ALGORITHMS)]
    cols = ["block", "cyclic", "random", *timed]
    rows: dict[str, list[str]] = {"tianhe3": [], "torus3d": []}
    for n in (int(s) for s in args.sizes.split(",")):
        for profile in split_profiles(args.profiles):
            graph = generate(profile, n)
            for name, machine in machines(n).items():
                hb = {k: hop_bytes(graph, machine, pe).total
                      for k, pe in baselines(n).items()}
                secs = {}
                for algorithm in ALGORITHMS:
                    t = time.perf_counter()
                    res = map_processes(graph, machine, algorithm)
                    secs[algorithm] = time.perf_counter() - t
                    hb[algorithm] = hop_bytes(graph, machine, res.mapping).total
                placed, tree_secs = tree_mappings(graph, machine)
                secs.update(tree_secs)
                hb.update({k: hop_bytes(graph, machine, pe).total for k, pe in placed.items()})
                ref = hb["block"] or 1.0
                cells = [f"{hb[c] / ref:.3f}" for c in cols]
                times = " / ".join(f"{secs[a]:.2f}" for a in timed)
                rows[name].append(f"| {profile} | {n} | " + " | ".join(cells)
                                  + f" | {times} |")
                print(name, rows[name][-1], flush=True)
    for name, lines in rows.items():
        print(f"\n{name}: hop-bytes / block (seconds: {' / '.join(timed)})\n")
        print("| profile | ranks | " + " | ".join(cols) + " | seconds |")
        print("|---|---|" + "---|" * (len(cols) + 1))
        print("\n".join(lines))


if __name__ == "__main__":
    main()
