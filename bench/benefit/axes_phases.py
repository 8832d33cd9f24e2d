#!/usr/bin/env python3
"""Which phase model follows a halo exchanged one dimension after the other?

The measurement behind the phase model's choice (issue 33, "Phases"; bench/README.md
"A halo exchanged by dimension"), recomputed here without :mod:`mapper.objectives.phase_time`' own
cross-level code.  Takes a case directory of ``run_benefit.py --apps halo-axes``
(halo3d ``-s``: each rank posts its x messages, waits for them, then y, then z) on
``tree2`` or ``tree3``, adds the grid's boxes placement
(:func:`mapper.construction.coordinate_bisection`), simulates it with the case's
platform, and prints, per distinct placement, its simulated time beside three models
of its phases (one phase per dimension, the grid's edges along it):

* ``rule``: what the never-worse rule computed before the uplinks' capacities were
  known (:func:`mapper.objectives.phase_time.phase_time`, model "runs", every rank in one
  synchronising group, one level at a time);
* ``own``: per level, each rank's own groups' cuts summed over the phases it crosses
  that level in, the maximum over ranks (local synchronisation, levels apart);
* ``across``: per rank, the sum over phases of the phase's busiest own uplink over all
  levels divided by the link's bandwidth from the platform (node links and leaf
  uplinks 12.5 GB/s, middle uplinks 50 GB/s with 4 leaves of 4 nodes at 4:1), the
  maximum over ranks: the model the product uses where ``[solver]
  uplink_oversubscription`` gives it capacities across levels.

Usage: ``python3 bench/benefit/axes_phases.py CASE [CASE ...]`` (smpirun on PATH).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from mapper.construction import coordinate_bisection  # noqa: E402
from mapper.model.cartesian import cartesian_grid  # noqa: E402
from mapper.model.machine import Hierarchy  # noqa: E402
from mapper.model.phased_graph import phased_from_graphs  # noqa: E402
from mapper.objectives import _volumes  # noqa: E402
from mapper.objectives.phase_time import phase_time  # noqa: E402
from slurm_plugin.profiles.generators import generate  # noqa: E402

CORES = 8  # run_benefit's default node: 2 sockets of 4 cores


def machine_of(case: Path, nodes: int) -> Hierarchy:
    """The case's tree as a hierarchy (socket, node, leaf[, middle], root), from the
    topology.conf run_benefit wrote (every leaf and middle switch the same size)."""
    conf = (case / "topology.conf").read_text()
    leaf = re.search(r"SwitchName=\w+ Nodes=n\[(\d+)-(\d+)\]", conf)
    per_leaf = int(leaf.group(2)) - int(leaf.group(1)) + 1
    mids = re.findall(r"SwitchName=\w+ Switches=\w+\[(\d+)-(\d+)\]", conf)
    fan = [4, 2, per_leaf]
    if len(mids) > 1:  # tree3: middle switches under a top switch
        lo, hi = map(int, mids[0])
        fan += [hi - lo + 1, nodes // per_leaf // (hi - lo + 1)]
    else:
        fan += [nodes // per_leaf]
    return Hierarchy.homogeneous(fan, [1.0] * len(fan))


def pe_of_hostfile(path: Path, n: int, nodes: int) -> np.ndarray:
    """Rank → PE from a hostfile (line r: rank r's host ``hK``), ranks of a node on
    its PEs in rank order."""
    node = np.array([int(line.strip()[1:]) for line in path.read_text().split()])
    order = np.argsort(node, kind="stable")
    pe = np.empty(n, dtype=np.int64)
    pe[order] = np.arange(n)
    if len(node) != n or np.bincount(node, minlength=nodes).max() > CORES:
        raise SystemExit(f"{path}: not {n} ranks on {nodes} nodes of {CORES}")
    return pe


def dimension_phases(spec: str, n: int):
    """The stencil's graph and its dimensions as phases (generator option
    ``exchange=axes``), here every rank in one synchronising run: what the rule's
    per-level model compared before the groups were the ranks themselves."""
    g = generate(spec if "exchange=axes" in spec else spec + ",exchange=axes", n)
    return g, phased_from_graphs([p.graph for p in g.phases], [p.name for p in g.phases])


def own_loads(phases, machine: Hierarchy, pe: np.ndarray, level: int) -> np.ndarray:
    """(phases, ranks): each rank's own group's cut at ``level`` in each phase where
    the rank has an edge crossing it (0 elsewhere)."""
    out = np.zeros((len(phases.phases), phases.n))
    groups = len(machine.bounds[level]) - 1
    for i, ph in enumerate(phases.phases):
        g = ph.graph
        cut = _volumes.group_cuts(g.indptr, g.indices, g.weights, pe, machine.group_ids,
                                  level, groups)
        u, v, _ = g.edges()
        gu, gv = machine.group_ids[pe[u], level], machine.group_ids[pe[v], level]
        x = gu != gv
        np.maximum.at(out[i], u[x], cut[gu[x]])
        np.maximum.at(out[i], v[x], cut[gv[x]])
    return out


def main(cases: list[str]) -> int:
    print("| case | placement | simulated s | ratio | rule (per level) | own (per level) "
          "| across levels | ratio across |")
    print("|---|---|---|---|---|---|---|---|")
    for c in cases:
        case = Path(c)
        rec = json.loads((case / "results.json").read_text())
        n, spec = rec["ranks"], rec["profile"]
        nodes = n // CORES
        machine = machine_of(case, nodes)
        levels = list(range(1, machine.levels - 1))  # node, leaf[, middle]
        bandwidth = [12.5, 12.5, 50.0][:len(levels)]  # GB/s, run_benefit's platform
        total, phases = dimension_phases(spec, n)
        rows = [(p["name"], case / Path(p["hostfile"]).name, p["seconds"])
                for p in rec["placements"] if p["seconds"] is not None]
        boxes = coordinate_bisection(cartesian_grid(total), machine, None)
        hosts = (boxes // CORES).tolist()
        boxes_file = case / "hostfile.boxes"
        boxes_file.write_text("".join(f"h{h}\n" for h in hosts))
        run = subprocess.run(["smpirun", "-platform", str(case / "platform.xml"),
                              "-hostfile", str(boxes_file), "-np", str(n),
                              "--cfg=smpi/simulate-computation:no",
                              "--cfg=smpi/display-timing:yes",
                              "--log=xbt_cfg.thresh:warning",
                              "--log=smpi_config.thresh:warning", *rec["program"]],
                             capture_output=True, text=True, check=True, cwd=case)
        seconds = float(re.search(r"rankmap-sim-time ([0-9.eE+-]+)", run.stdout).group(1))
        rows.append(("grid boxes", boxes_file, seconds))
        block_s, block_across, seen = rows[0][2], None, set()
        for name, hostfile, s in rows:
            pe = pe_of_hostfile(hostfile, n, nodes)
            key = pe.tobytes()
            if key in seen:
                continue
            seen.add(key)
            rule = [phase_time(phases, machine, pe, [lv]) / 262144 for lv in levels]
            own = [own_loads(phases, machine, pe, lv).sum(axis=0).max() / 262144
                   for lv in levels]
            per_level = np.stack([own_loads(phases, machine, pe, lv) / 262144 / bw
                                  for lv, bw in zip(levels, bandwidth, strict=True)])
            across = per_level.max(axis=0).sum(axis=0).max()
            block_across = across if block_across is None else block_across
            print(f"| {case.name} | {name} | {s:.6g} | {s / block_s:.3f} | "
                  f"{' / '.join(f'{x:.0f}' for x in rule)} | "
                  f"{' / '.join(f'{x:.0f}' for x in own)} | {across:.2f} | "
                  f"{across / block_across:.3f} |")
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    sys.exit(main(sys.argv[1:]))
