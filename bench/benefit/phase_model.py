#!/usr/bin/env python3
"""The phase time model of :mod:`mapper.objectives.phase_time` against the simulated CG placements.

For each ``run_benefit.py`` case directory given (``--apps cg``; topology.conf,
results.json, hostfiles), builds the tree of the case (8-core nodes by default, leaf
switches, middle switches on tree3), the phased profile ``npb-cg`` at the case's
rank count (:func:`slurm_plugin.profiles.generators.generate_phases`: log2(cols) row
steps synchronising per process row, then the transpose synchronising all), and prints
per placement the simulated ratio to block beside two models' ratios to block:

* ``runs``: :func:`mapper.objectives.phase_time.phase_time` (default model): the row steps form one
  run in which every row goes at its own pace, max over rows of the row's summed step
  times, plus the transpose;
* ``per phase``: ``phase_time(..., model="phases")``, Σ_phases max over synchronising
  groups of the busiest link the group's edges cross (loaded by the whole phase);
* ``global``: the same with every phase synchronising all ranks (cg_phases.py's model:
  Σ_phases of the machine-wide busiest link).

Link capacities per level as in cg_phases.py (node link 12.5 GB/s, leaf uplink
12.5 GB/s, middle uplink 50 GB/s).  Usage::

    python3 bench/benefit/phase_model.py /tmp/rankmap-benefit/tree{2,3}-cg-{128,256}
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))
sys.path.insert(0, str(HERE))

from cg_phases import switch_tree  # noqa: E402

from mapper.model.machine import Hierarchy  # noqa: E402
from mapper.model.phased_graph import make_phase, with_phases  # noqa: E402
from mapper.objectives.phase_time import phase_time  # noqa: E402
from slurm_plugin.profiles.generators import generate_phases  # noqa: E402


def case_machine(conf: Path, nodes: int, cores: int) -> tuple[Hierarchy, list[int], bool]:
    """The case's tree (node, leaf[, mid], root), its uplink levels, whether 3-level."""
    leaf_of, mid_of = switch_tree(conf)
    leaves = max(leaf_of.values()) + 1
    per_leaf = np.bincount([leaf_of[x] for x in range(nodes)], minlength=leaves)
    bounds = [np.arange(nodes + 1) * cores,
              np.concatenate([[0], np.cumsum(per_leaf)]) * cores]
    names = ["node", "leaf"]
    if mid_of:
        mids = max(mid_of.values()) + 1
        per_mid = np.bincount([mid_of[x] for x in range(leaves)], weights=per_leaf,
                              minlength=mids).astype(int)
        bounds.append(np.concatenate([[0], np.cumsum(per_mid)]) * cores)
        names.append("mid")
    bounds.append(np.array([0, nodes * cores]))
    names.append("root")
    dist = np.arange(1, len(bounds) + 1, dtype=float)
    return Hierarchy(tuple(bounds), dist, tuple(names)), list(range(len(bounds) - 1)), \
        bool(mid_of)


def hostfile_mapping(path: Path, cores: int) -> np.ndarray:
    """rank → PE (node index × cores + the rank's slot on its node)."""
    hosts = [int(h.strip().lstrip("h")) for h in path.read_text().split()]
    used: dict[int, int] = {}
    out = []
    for h in hosts:
        out.append(h * cores + used.get(h, 0))
        used[h] = used.get(h, 0) + 1
    return np.array(out, dtype=np.int64)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cases", type=Path, nargs="+")
    ap.add_argument("--cores", type=int, default=8)
    ap.add_argument("--node-bw", type=float, default=12.5e9)
    ap.add_argument("--leaf-bw", type=float, default=12.5e9)
    ap.add_argument("--mid-bw", type=float, default=50e9)
    args = ap.parse_args()
    print("| case | placement | simulated | model: runs | model: per phase | "
          "model: global |")
    print("|---|---|---|---|---|---|")
    for case in args.cases:
        rec = json.loads((case / "results.json").read_text())
        n = int(rec["ranks"])
        machine, levels, three = case_machine(case / "topology.conf", n // args.cores,
                                              args.cores)
        caps = [args.node_bw, args.leaf_bw] + ([args.mid_bw] if three else [])
        phased = generate_phases("npb-cg:bytes=262144", n)
        flat = with_phases(phased, [make_phase(p.graph, p.repeat, None, p.name)
                                    for p in phased.phases])
        base: tuple[float, ...] | None = None
        for p in rec["placements"]:
            pi = hostfile_mapping(Path(p["hostfile"]), args.cores)
            t = (phase_time(phased, machine, pi, levels, caps),
                 phase_time(phased, machine, pi, levels, caps, model="phases"),
                 phase_time(flat, machine, pi, levels, caps, model="phases"))
            base = base or t
            ratio = p.get("ratio_to_default")
            print(f"| {case.name} | {p['name']} | "
                  f"{'-' if ratio is None else f'{ratio:.3f}'} | "
                  + " | ".join(f"{a / b:.3f}" for a, b in zip(t, base, strict=True)) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
