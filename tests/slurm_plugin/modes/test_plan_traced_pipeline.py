"""A traced wavefront, imported, keeps the plan from slowing its pipeline: the trace's
blocking chain of small messages becomes a sweep phase (slurm_plugin.profiles.smpi_ti),
and the plan then applies no placement whose wavefront crosses more links at its
slowest rank than Slurm's block placement does.  Imported without its phases (the
total alone, what the product stored before), the same trace got the J-optimal
placement, which raises that pace -- as NPB LU's real trace did (1.34x block's
simulated time applied at 64 ranks on a 4:1 tree).

The case is test_plan_npb_pace's: 32 nodes of 8 cores, leaves of 4 nodes; the pace is
recomputed there by loops over node names and switch members."""

from __future__ import annotations

import numpy as np
import pytest

from mapper import CommGraph
from mapper.model.phased_graph import merge_global_phases
from slurm_plugin.machine.distribution import default_placements
from slurm_plugin.modes.graph_job import make_plan
from slurm_plugin.profiles.smpi_ti import import_ti_phases
from slurm_plugin.slurm.topology import parse_topology_conf
from tests.slurm_plugin.modes.test_plan_network import _layout
from tests.slurm_plugin.modes.test_plan_npb_pace import NODES, _lu_sweep, _topology
from tests.slurm_plugin.profiles.test_ti_pipelines import _wavefront, _write


def planned_nodes(layout, graph, tree):
    """The node number of every rank under the plan's result (Slurm's block when it is
    kept), and the plan."""
    plan = make_plan(layout, graph, algorithm="topdown+n10", time_limit=60, files=(),
                     tree=tree)
    return np.array([int(layout.slots[pe].host[1:]) for pe in plan.result.mapping]), plan


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    index = _write(tmp_path_factory.mktemp("lu"), _wavefront(16, 1, planes=2))
    return merge_global_phases(import_ti_phases([index]))


@pytest.mark.parametrize("machine", ["tree2", "tree3"])
def test_traced_wavefront_keeps_blocks_pace(traced, machine):
    assert any(p.pace == "sweep" for p in traced.phases)
    tree = parse_topology_conf(_topology(machine))
    layout = _layout(tuple(f"n{i}" for i in range(NODES)), (8,) * NODES, tree=tree)
    block = np.array([int(layout.slots[pe].host[1:])
                      for pe in default_placements(layout)["block"]])

    def pace(graph):
        node, plan = planned_nodes(layout, graph, tree)
        return _lu_sweep(node, machine), plan
    total = CommGraph(traced.indptr, traced.indices, traced.weights, traced.source)
    raised, _ = pace(total)
    assert raised > _lu_sweep(block, machine)  # what the total alone let through
    kept, plan = pace(traced)
    assert kept <= _lu_sweep(block, machine)
    assert "paced" in " ".join(plan.notes) or "pipelined" in " ".join(plan.notes)
