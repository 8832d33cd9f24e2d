"""NPB LU and BT profiles (generators npb-lu, npb-bt) carry latency-bound phases: LU's
wavefront (pace "sweep") and BT's line solves (pace "stages").  The plan refuses a
candidate whose pipeline pace exceeds Slurm's block placement's, which is what kept
the real codes from running slower (NPB 3.3 LU and BT, class A, 256 ranks, SMPI:
the J-optimal placements ran 1.07-1.34x block's time; bench/README.md "NPB by phase").

The cases are those simulated: 32 nodes of 8 cores, leaves of 4 nodes, under one
spine (tree2), under middle switches of 4 leaves (tree3), or with each leaf holding
every eighth node (interleaved).  The pace is recomputed here by plain loops over
ranks and their grid neighbours, from node names and the topology's switch names,
sharing nothing with mapper.objectives.phase_time."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mapper import CommGraph
from slurm_plugin.machine.distribution import default_placements
from slurm_plugin.modes.graph_job import make_plan
from slurm_plugin.profiles.generators import generate
from slurm_plugin.slurm.topology import parse_topology_conf
from tests.slurm_plugin.modes.test_plan_network import _layout

NODES = 32


LEAVES = NODES // 4


def _leaf_members(machine: str, leaf: int) -> range:
    """The nodes under leaf switch ``leaf``: 4 consecutive ones, or every eighth."""
    return (range(leaf, NODES, LEAVES) if machine == "interleaved"
            else range(4 * leaf, 4 * leaf + 4))


def _topology(machine: str) -> str:
    lines = [f"SwitchName=l{leaf} Nodes=" + ",".join(f"n{i}" for i in _leaf_members(machine, leaf))
             for leaf in range(LEAVES)]
    if machine == "tree3":
        lines += [f"SwitchName=m{j} Switches=l[{4 * j}-{4 * j + 3}]" for j in range(LEAVES // 4)]
        lines.append(f"SwitchName=top Switches=m[0-{LEAVES // 4 - 1}]")
    else:
        lines.append(f"SwitchName=spine Switches=l[0-{LEAVES - 1}]")
    return "\n".join(lines) + "\n"


def _links(machine: str):
    """links(node a, node b): 0 on one node, 2 under one leaf, 4 across leaves (6 via
    tree3's top switch), from the leaves' members."""
    leaf_of = {i: leaf for leaf in range(LEAVES) for i in _leaf_members(machine, leaf)}

    def links(a: int, b: int) -> int:
        if a == b:
            return 0
        if leaf_of[a] == leaf_of[b]:
            return 2
        if machine == "tree3" and leaf_of[a] // 4 == leaf_of[b] // 4:
            return 4
        return 6 if machine == "tree3" else 4
    return links


def _plan(machine: str, spec: str, phases: bool = True):
    tree = parse_topology_conf(_topology(machine))
    layout = _layout(tuple(f"n{i}" for i in range(NODES)), (8,) * NODES, tree=tree)
    graph = generate(spec, 8 * NODES)
    if not phases:  # the same total graph, as a profile without phases
        graph = CommGraph(graph.indptr, graph.indices, graph.weights, graph.source)
    plan = make_plan(layout, graph, algorithm="topdown+n10", time_limit=60, files=(),
                     tree=tree)
    node = np.array([int(layout.slots[pe].host[1:]) for pe in plan.result.mapping])
    block = np.array([int(layout.slots[pe].host[1:])
                      for pe in default_placements(layout)["block"]])
    return plan, node, block


def _lu_sweep(node: np.ndarray, machine: str) -> int:
    """LU's 16 x 16 grid: per rank, links to its south (+1 row) and east (+1 column)
    neighbours, the maximum over ranks; plus the same towards north and west."""
    links = _links(machine)
    q = 16
    down = up = 0
    for r in range(q * q):
        row, col = divmod(r, q)
        d = sum(links(node[r], node[p]) for p in (r + q if row < q - 1 else None,
                                                   r + 1 if col < q - 1 else None)
                if p is not None)
        u = sum(links(node[r], node[p]) for p in (r - q if row > 0 else None,
                                                   r - 1 if col > 0 else None)
                if p is not None)
        down, up = max(down, d), max(up, u)
    return down + up


def _bt_stages(node: np.ndarray, machine: str) -> int:
    """BT's 16 x 16 multi-partition grid: per solve direction (x: next column, y: next
    row, z: next row and column, all cyclic), the maximum over ranks of the links to
    its successor and its predecessor; summed over the three solves."""
    links = _links(machine)
    q = 16
    total = 0
    for dr, dc in ((0, 1), (1, 0), (1, 1)):
        worst = 0
        for r in range(q * q):
            row, col = divmod(r, q)
            succ = ((row + dr) % q) * q + (col + dc) % q
            pred = ((row - dr) % q) * q + (col - dc) % q
            worst = max(worst, links(node[r], node[succ]) + links(node[r], node[pred]))
        total += worst
    return total


@pytest.mark.parametrize("machine", ["tree2", "tree3"])
def test_lu_keeps_the_wavefront_s_pace(machine: str) -> None:
    plan, node, block = _plan(machine, "npb-lu")
    assert _lu_sweep(node, machine) <= _lu_sweep(block, machine)
    # without the phases the plan applies Top-Down's result, whose pace is slower
    # (simulated: 1.11x and 1.07x block's time)
    _, plain, _ = _plan(machine, "npb-lu", phases=False)
    assert _lu_sweep(plain, machine) > _lu_sweep(block, machine)
    why = plan.result.rejected.get("topdown+n10", "")
    assert "pipelined phases' slowest rank sends across" in why, plan.result.rejected


@pytest.mark.parametrize("machine", ["tree2", "tree3"])
def test_bt_keeps_the_solves_pace(machine: str) -> None:
    plan, node, block = _plan(machine, "npb-bt")
    assert _bt_stages(node, machine) <= _bt_stages(block, machine)
    _, plain, _ = _plan(machine, "npb-bt", phases=False)  # simulated: 1.16x, 1.20x
    assert _bt_stages(plain, machine) > _bt_stages(block, machine)
    why = plan.result.rejected.get("topdown+n10", "")
    assert "pipelined phases' slowest rank sends across" in why, plan.result.rejected


@pytest.mark.parametrize("spec, pace", [("npb-lu", _lu_sweep), ("npb-bt", _bt_stages)])
def test_interleaved_wiring_still_gets_a_better_placement(spec, pace) -> None:
    # block spreads consecutive nodes over the leaves: its pipelines are no faster,
    # and a placement that is not slower by their pace (simulated: LU 0.91x, BT
    # 0.54-0.65x block's time) is applied
    plan, node, block = _plan("interleaved", spec)
    assert not np.array_equal(node, block)
    assert pace(node, "interleaved") <= pace(block, "interleaved")
    notes = " ".join(json.loads(plan.report_json)["notes"])
    assert "pipelined phases (" in notes and "latency-bound" in notes
