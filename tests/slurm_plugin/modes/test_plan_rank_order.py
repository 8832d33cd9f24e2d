"""Slurm's nodes regrouped in rank order (mapper.construction.regroup, ``rank_order``).

The plain ``npb-mg`` profile at 512 ranks on 64 eight-core nodes under the 3-level
tree, 4:1 uplinks stated: the plain regrouping puts nodes 2 apart in rank order under
different leaves, so the steps of a rank-order allreduce (recursive doubling, recounted
here from node names) cross more links than under block -- SMPI ran the real NPB MG at
1.0026x block's time with it, at 0.979 with the regrouping in rank order
(bench/README.md, "Rank order in the regrouping")."""

from __future__ import annotations

import numpy as np

import mapper.solve.api
from slurm_plugin.machine.distribution import default_placements
from slurm_plugin.modes.graph_job import make_plan
from slurm_plugin.profiles.generators import generate
from slurm_plugin.slurm.topology import parse_topology_conf
from tests.slurm_plugin.modes.test_plan_network import _layout
from tests.slurm_plugin.modes.test_plan_traced_rounds import NODES, _topology, node_links
from tests.slurm_plugin.profiles.test_npb_mg_class import _allreduce_by_loops


def _allreduce_links(node: np.ndarray) -> int:
    """Σ over the recursive-doubling steps of the farthest pair's tree links."""
    return sum(max(node_links(node[a], node[b], "tree3") for a, b in pairs)
               for pairs in _allreduce_by_loops(len(node)))


def _planned():
    tree = parse_topology_conf(_topology("tree3"))
    layout = _layout(tuple(f"n{i}" for i in range(NODES)), (8,) * NODES, tree=tree)
    plan = make_plan(layout, generate("npb-mg", 512), algorithm="topdown+n10",
                     time_limit=60, files=(), tree=tree, uplink_oversubscription=[4.0])
    node = np.array([int(layout.slots[pe].host[1:]) for pe in plan.result.mapping])
    block = np.array([int(layout.slots[pe].host[1:])
                      for pe in default_placements(layout)["block"]])
    return node, block, plan


def test_the_regrouping_keeps_rank_order_collectives_steps():
    node, block, plan = _planned()
    assert _allreduce_links(block) == 24  # 0, 0, 0 on the node, 2, 2, 4, 4, 6, 6
    assert plan.result.origin == mapper.solve.candidates.REGROUPED_IN_ORDER
    assert _allreduce_links(node) <= 24
    # the nodes keep block's rank sets (8 consecutive ranks each), moved whole
    assert all(len(set(node[8 * k: 8 * k + 8].tolist())) == 1 for k in range(NODES))
    assert len(set(node[::8].tolist())) == NODES
    assert "nodes close in rank order kept together" in plan.report_text


def test_without_the_rank_order_term_the_regrouping_raises_them(monkeypatch):
    monkeypatch.setattr(mapper.solve.candidates, "RANK_ORDER_WEIGHT", 0.0)
    node, _, plan = _planned()
    assert plan.result.origin == "baseline regrouped"
    assert _allreduce_links(node) > 24
