"""A traced exchange of small messages, imported, keeps the plan from lengthening its
rounds: every message of NPB MG's trace at 512 ranks is at most 9 KiB, and a
placement with less volume on every link than block's (2x2x2 cubes per node instead of
block's rows) ran 1.04x block's simulated time, because block keeps one dimension's
rounds inside the nodes.  Imported with its rounds (slurm_plugin.profiles.ti_rounds),
the plan applies nothing whose rounds' farthest messages cross more links than
block's; imported as the total alone it applied the cubes.

MG's own grid, 8x8x8 periodic (512 ranks), exchanged one dimension per round, on 64
nodes of 8 cores under leaves of 4 nodes (no node can close a ring of 8 other than
block's row, so the J-optimal cubes cut every dimension); the rounds' links are
recomputed here from node names and the leaves' members."""

from __future__ import annotations

import numpy as np
import pytest

from mapper import CommGraph
from mapper.model.phased_graph import merge_global_phases
from slurm_plugin.machine.distribution import default_placements
from slurm_plugin.profiles.smpi_ti import import_ti_phases
from slurm_plugin.slurm.topology import parse_topology_conf
from tests.slurm_plugin.modes.test_plan_network import _layout
from tests.slurm_plugin.modes.test_plan_traced_pipeline import planned_nodes
from tests.slurm_plugin.profiles.test_ti_pipelines import _write
from tests.slurm_plugin.profiles.test_ti_rounds import _mg, _neighbour

DIMS = (8, 8, 8)
NODES = 64


def _topology(machine: str) -> str:
    leaves = "".join(f"SwitchName=l{k} Nodes=n[{4 * k}-{4 * k + 3}]\n" for k in range(16))
    if machine == "tree2":
        return leaves + "SwitchName=spine Switches=l[0-15]\n"
    # tree3: four leaves per middle switch
    return (leaves + "".join(f"SwitchName=m{j} Switches=l[{4 * j}-{4 * j + 3}]\n"
                             for j in range(4)) + "SwitchName=top Switches=m[0-3]\n")


def node_links(a: int, b: int, machine: str) -> int:
    """Tree links between nodes a and b of :func:`_topology`: 0 on one node, 2 under
    one leaf, 4 across leaves (6 through tree3's top)."""
    if a == b:
        return 0
    if a // 4 == b // 4:
        return 2
    return 6 if machine == "tree3" and a // 16 != b // 16 else 4


def _rounds_links(node: np.ndarray, machine: str) -> int:
    """Σ over the three dimensions' rounds of the farthest message's links."""
    n = DIMS[0] * DIMS[1] * DIMS[2]
    return sum(max(node_links(node[r], node[_neighbour(r, DIMS, axis, s)], machine)
                   for r in range(n) for s in (-1, 1)) for axis in range(3))


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    index = _write(tmp_path_factory.mktemp("mg"), _mg(DIMS, 2, levels=2))
    return merge_global_phases(import_ti_phases([index]))


@pytest.mark.parametrize("machine", ["tree2", "tree3"])
def test_traced_rounds_keep_blocks_round_latency(traced, machine):
    assert any(p.pace == "rounds" for p in traced.phases)
    tree = parse_topology_conf(_topology(machine))
    layout = _layout(tuple(f"n{i}" for i in range(NODES)), (8,) * NODES, tree=tree)
    block = np.array([int(layout.slots[pe].host[1:])
                      for pe in default_placements(layout)["block"]])

    def rounds(graph):
        node, plan = planned_nodes(layout, graph, tree)
        return _rounds_links(node, machine), plan
    total = CommGraph(traced.indptr, traced.indices, traced.weights, traced.source)
    raised, _ = rounds(total)
    assert raised > _rounds_links(block, machine)  # what the total alone let through
    kept, plan = rounds(traced)
    assert kept <= _rounds_links(block, machine)
    assert "exchange rounds" in " ".join(plan.notes)
