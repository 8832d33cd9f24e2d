#!/usr/bin/env python3
"""Benchmark: per-link loads (mapper.objectives.link_load) — full computation against swap updates.

Run by hand (seconds):

    python3 bench/bench_link_load.py

A 4096-rank periodic 3D halo (16×16×16, 7-point, unit volumes) on 512 nodes of 8 PEs:

* a 3D torus 8×8×8 with dimension-order routing;
* a two-level fat tree: 16 nodes per leaf switch, 32 leaves, the leaf uplinks 4:1
  oversubscribed (capacity 16/4 node links).

For each, from Slurm-like block placement (rank i on PE i) and from a random one: the
time to build the routes, :func:`~mapper.objectives.link_load.link_loads` (median of 5), one swap
of two random ranks with :func:`~mapper.objectives.link_load.swap_delta` (loads only) and with
:meth:`~mapper.objectives.link_load.LinkLoadTracker.swap` (loads and the max-tree; it returns the
new maximum congestion) — both averaged over 20 000 swaps, the Python call included —
and full / swap.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mapper import CommGraph, Hierarchy  # noqa: E402
from mapper.objectives.link_load import (  # noqa: E402
    LinkLoadTracker,
    link_loads,
    swap_delta,
    torus_network,
    tree_network,
)

SWAPS = 20_000


def periodic_stencil(dims: tuple[int, int, int]) -> CommGraph:
    idx = np.arange(int(np.prod(dims))).reshape(dims)
    src = [idx.ravel()] * 3
    dst = [np.roll(idx, -1, axis=ax).ravel() for ax in range(3)]
    return CommGraph.from_edges(np.concatenate(src), np.concatenate(dst), n=idx.size)


def networks():
    clock = time.perf_counter()
    torus = torus_network((8, 8, 8), node_sizes=[8] * 512)
    yield "torus 8x8x8", torus, time.perf_counter() - clock
    clock = time.perf_counter()
    fat = Hierarchy.homogeneous([8, 16, 32], [1, 10, 100], ["node", "leaf", "root"])
    tree = tree_network(fat, capacity=[1.0, 16 / 4])
    yield "fat tree 16x32, 4:1", tree, time.perf_counter() - clock


def main() -> int:
    graph = periodic_stencil((16, 16, 16))
    rng = np.random.default_rng(0)
    print("| network | nodes | ranks | edges | links | placement | routes s | full ms "
          "| swap_delta µs | tracker swap µs | full / swap_delta |")
    print("|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    for name, net, build in networks():
        for placement, pi in (("block", np.arange(graph.n, dtype=np.int64)),
                              ("random", rng.permutation(graph.n).astype(np.int64))):
            runs = []
            for _ in range(5):
                clock = time.perf_counter()
                loads = link_loads(graph, pi, net)
                runs.append(time.perf_counter() - clock)
            full = statistics.median(runs)
            pairs = rng.integers(0, graph.n, (SWAPS, 2)).tolist()
            p = pi.copy()
            clock = time.perf_counter()
            for u, v in pairs:
                swap_delta(graph, p, net, loads, u, v)
                p[u], p[v] = p[v], p[u]
            delta = (time.perf_counter() - clock) / SWAPS
            assert np.allclose(loads, link_loads(graph, p, net))
            tracker = LinkLoadTracker(graph, pi, net)
            clock = time.perf_counter()
            for u, v in pairs:
                tracker.swap(u, v)
            tracked = (time.perf_counter() - clock) / SWAPS
            print(f"| {name} | {net.nodes} | {graph.n} | {graph.m} | {net.links} | "
                  f"{placement} | {build:.2f} | {1e3 * full:.2f} | {1e6 * delta:.1f} | "
                  f"{1e6 * tracked:.1f} | {full / delta:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
