#!/usr/bin/env python3
"""Per-phase busiest links of NPB-CG's pattern (cg_like.c) under the placements of a
``run_benefit.py`` case, and the lower bound that shows block optimal on a tree.

cg_like runs, per iteration, log2(cols) synchronous recursive-doubling steps along
each process row (step k: rank (r, c) exchanges with (r, c xor 2^k)), then the
transpose exchange, then an 8-byte allreduce.  A step lasts about as long as its
busiest directed link (bytes / bandwidth; links are full duplex, SimGrid SPLITDUPLEX),
so the communication time is modelled as

    T = Σ_phases max_links load(link, phase) / bw(link)

(Hoefler & Snir's congestion, per phase).  J and the never-worse rule see the sum of
the phases; the simulation sees this sum of maxima.

Lower bound (node links): Σ_p max_x ≥ max_x Σ_p, and for the row steps alone the
messages leaving a node that holds s ranks of one row of cols = 2^d ranks number at
least s·(d − log2 s) (Harper's edge-isoperimetric inequality on the hypercube Q_d,
equality exactly for subcubes); ranks of several rows only add boundary.  Block puts
2^j consecutive columns of one row on a node — a subcube — on every node, and its
boundary falls in one step for all nodes at once, so block attains the bound of the
row steps on the node links, and, when a leaf (or middle switch) holds whole rows,
loads no uplink in them at all.  What remains is the transpose, a single permutation
step, where block sends each node's ranks to distinct rows.

Usage: ``python3 bench/benefit/cg_phases.py /tmp/rankmap-benefit/tree3-cg-256
[--bytes 262144]`` (a case directory: topology.conf, results.json, hostfiles).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np


def cg_phases(n: int) -> list[tuple[str, np.ndarray]]:
    """(name, dst) per phase: rank r sends one message to dst[r] (or none: dst = r)."""
    log = n.bit_length() - 1
    rows = 1 << (log // 2)
    cols = n // rows
    r, c = np.divmod(np.arange(n), cols)
    out = [(f"row step {k}", r * cols + (c ^ (1 << k))) for k in range(cols.bit_length() - 1)]
    out.append(("transpose", (c % rows) * cols + r * (cols // rows) + c // rows))
    return out


def switch_tree(conf: Path) -> tuple[dict[int, int], dict[int, int]]:
    """node index → leaf, leaf → middle switch (empty for two levels)."""
    leaf_of, mid_of = {}, {}
    for line in conf.read_text().splitlines():
        m = re.match(r"SwitchName=leaf(\d+) Nodes=(.*)", line)
        if m:
            leaf = int(m.group(1))
            spec = m.group(2)
            rng = re.match(r"n\[(\d+)-(\d+)\]", spec)
            nodes = (range(int(rng.group(1)), int(rng.group(2)) + 1) if rng
                     else [int(x[1:]) for x in spec.split(",")])
            for x in nodes:
                leaf_of[x] = leaf
        m = re.match(r"SwitchName=mid(\d+) Switches=leaf\[(\d+)-(\d+)\]", line)
        if m:
            for x in range(int(m.group(2)), int(m.group(3)) + 1):
                mid_of[x] = int(m.group(1))
    return leaf_of, mid_of


def phase_times(node: np.ndarray, leaf_of: dict, mid_of: dict, nbytes: int,
                bw: dict[str, float]) -> list[tuple[str, float, float, float]]:
    """Per phase: (name, busiest node link, busiest leaf uplink, busiest mid uplink), each
    in seconds (bytes of the busiest directed link / its bandwidth)."""
    n = len(node)
    leaf = np.array([leaf_of[x] for x in node])
    mid = np.array([mid_of.get(x, 0) for x in leaf])
    out = []
    for name, dst in cg_phases(n):
        src = np.arange(n)
        busy = []
        for level, g in (("node", node), ("leaf", leaf), ("mid", mid)):
            if level == "mid" and not mid_of:
                busy.append(0.0)
                continue
            cross = g[src] != g[dst]
            if not cross.any():
                busy.append(0.0)
                continue
            up = np.bincount(g[src][cross]).max()   # leaving a group
            down = np.bincount(g[dst][cross]).max()  # entering one
            busy.append(max(up, down) * nbytes / bw[level])
        out.append((name, *busy))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("case", type=Path)
    ap.add_argument("--bytes", type=int, default=262144)
    ap.add_argument("--node-bw", type=float, default=12.5e9)
    ap.add_argument("--leaf-bw", type=float, default=12.5e9,
                    help="leaf uplink (4 nodes x 12.5 GB/s / 4:1)")
    ap.add_argument("--mid-bw", type=float, default=50e9,
                    help="middle switch uplink (16 nodes x 12.5 GB/s / 4:1)")
    args = ap.parse_args()
    rec = json.loads((args.case / "results.json").read_text())
    leaf_of, mid_of = switch_tree(args.case / "topology.conf")
    bw = {"node": args.node_bw, "leaf": args.leaf_bw, "mid": args.mid_bw}
    print("| placement | simulated ratio | model ratio | per phase: busiest link, us "
          "(row steps …, transpose) |")
    print("|---|---|---|---|")
    base = None
    for p in rec["placements"]:
        hosts = [h.strip() for h in Path(p["hostfile"]).read_text().split()]
        node = np.array([int(h.lstrip("h")) for h in hosts])
        per = phase_times(node, leaf_of, mid_of, args.bytes, bw)
        t = sum(max(x[1:]) for x in per)
        base = base or t
        steps = ", ".join(f"{1e6 * max(x[1:]):.0f}" for x in per)
        ratio = p.get("ratio_to_default")
        print(f"| {p['name']} | {'-' if ratio is None else f'{ratio:.3f}'} | "
              f"{t / base:.3f} | {steps} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
