"""The never-worse rule on `[network]` jobs (issue 33 item 1): the plan checks the
busiest link of each level under the network's routing (dimension-order on a torus,
minimal on a dragonfly), refuses a placement that raises one, names the routing in the
report, and says "J only" where rankmap has no link model (Tianhe-3, hop files).  The
loads are checked against a pure-Python walk of the routes from the test of the link
model (tests/mapper/test_link_load.py), found from the node names."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mapper import CommGraph
from mapper.api import _routed_refusal
from mapper.search.routed import caps_of
from slurm_plugin.machine.distribution import default_placements
from slurm_plugin.machine.network_source import hop_machine, load_network, routed_network
from slurm_plugin.modes.graph_job import make_plan
from slurm_plugin.profiles.generators import generate
from tests.mapper.test_link_load import _brute_loads, _grid_links, _grid_route
from tests.slurm_plugin.modes.test_plan_network import (
    JOB_NODES,
    NETWORKS,
    _config,
    _layout,
    _scrambled,
)


def torus_level_max(graph, layout, mapping, net) -> tuple[float, float]:
    """(busiest node link, busiest router link) of a 4x4 torus, walked here."""
    slot = {name: i for i, name in enumerate(net.names)}
    pe_node = np.array([slot[s.host] for s in layout.slots])
    links = sorted(_grid_links((4, 4), True), key=sorted)
    link_id = {}
    for i, pair in enumerate(links):
        a, b = sorted(pair)
        link_id[(a, b)] = link_id[(b, a)] = i
    loads = _brute_loads(graph, mapping, pe_node,
                         lambda a, b: _grid_route((4, 4), True, a, b), link_id, len(links))
    node = np.array([max(pair) - min(pair) == 16 and min(pair) < 16 for pair in
                     (sorted(p) for p in links)])
    return float(loads[node].max()), float(loads[~node].max())


@pytest.mark.parametrize("kind, routing", [("torus", "dimension order"),
                                           ("dragonfly", "minimal"),
                                           ("tianhe3", None)])
def test_the_report_names_the_link_check(kind, routing):
    cfg = _config(NETWORKS[kind])
    net = load_network(cfg)
    layout = _layout(JOB_NODES, (8,) * 8)
    plan = make_plan(layout, _scrambled("stencil3d", 64), algorithm="ohtma+n10",
                     time_limit=10, network=net, job_id="7")
    notes = " ".join(json.loads(plan.report_json)["notes"])
    if routing is None:
        assert "link check: none (no link model for this network): J only" in notes
    else:
        assert "link check: " in notes and routing in notes, notes


def test_an_applied_torus_placement_raises_no_level_walked_independently():
    cfg = _config(NETWORKS["torus"])
    net = load_network(cfg)
    layout = _layout(JOB_NODES, (8,) * 8)
    graph = _scrambled("stencil3d", 64)
    plan = make_plan(layout, graph, algorithm="ohtma+n10", time_limit=10, network=net,
                     job_id="7")
    block = default_placements(layout)["block"]
    ours = torus_level_max(graph, layout, plan.result.mapping, net)
    base = torus_level_max(graph, layout, block, net)
    assert all(o <= b * (1 + 1e-9) for o, b in zip(ours, base, strict=True)), (ours, base)


def test_a_placement_that_raises_a_link_is_refused_with_the_level_and_routing():
    """Random candidates against block on the torus: whenever the walk says a level's
    busiest link is raised, the solver's rule (mapper.api, given the routed network)
    refuses it and says which level and routing; otherwise the candidate passes."""
    cfg = _config(NETWORKS["torus"])
    net = load_network(cfg)
    layout = _layout(JOB_NODES, (2,) * 8)
    machine = hop_machine(layout, net)
    routed = routed_network(layout, net, machine)
    block = default_placements(layout)["block"]
    rng = np.random.default_rng(3)
    refused = kept = 0
    from mapper import MappingResult
    from mapper.objective import evaluate

    for _ in range(40):
        n = 16
        u, v = rng.integers(0, n, 40), rng.integers(0, n, 40)
        keep = u != v
        graph = CommGraph.from_edges(u[keep], v[keep], rng.random(keep.sum()) + 0.1, n=n)
        cand = rng.permutation(n)
        ev = evaluate(graph, machine, cand)
        result = MappingResult(cand, ev.objective, ev.traffic, 0.0, "test", 0, False,
                               "algorithm", {}, {}, (), {})
        why = _routed_refusal(graph, routed, result, caps_of(graph, routed, block),
                              evaluate(graph, machine, block).objective)
        ours = torus_level_max(graph, layout, cand, net)
        base = torus_level_max(graph, layout, block, net)
        raised = [name for name, o, b in zip(("node", "network"), ours, base, strict=True)
                  if o > b * (1 + 1e-9)]
        if raised:
            refused += 1
            assert f"busiest {raised[0]} link carries" in why and "dimension order" in why
        else:
            kept += 1
            assert why is None
    assert refused and kept  # both branches were exercised


def test_a_tree_jobs_report_names_its_link_check():
    from slurm_plugin.slurm.topology import parse_topology_conf

    tree = parse_topology_conf("SwitchName=s1 Nodes=n[0-3]\nSwitchName=s2 Nodes=n[4-7]\n"
                               "SwitchName=top Switches=s[1-2]\n")
    layout = _layout(JOB_NODES[:4] + ("n1", "n2", "n4", "n7"), (8,) * 8, tree=tree)
    plan = make_plan(layout, _scrambled("stencil3d", 64), algorithm="fast", time_limit=10,
                     job_id="7")
    names = [layout.hierarchy.level_names[lv] for lv in layout.network_levels]
    assert names[:2] == ["node", "leaf switch"], names
    assert (f"link check: switch tree, routes up to the lowest common switch and down, "
            f"each level's links alike ({', '.join(names)} links)"
            in json.loads(plan.report_json)["notes"]), plan.report_json


def test_objective_congestion_on_a_torus_repairs_what_objective_J_refuses():
    """Block's 3D stencil on a scattered torus allocation: under objective J the rule
    refuses the solver's result and the polished block for a routed link and keeps
    block; under congestion (the default) the refused result is brought under block's
    busiest routed links and wins with a lower J.  Loads walked independently."""
    net = load_network(_config(NETWORKS["torus"]))
    layout = _layout(JOB_NODES, (8,) * 8)
    graph = generate("stencil3d", 64)
    block = default_placements(layout)["block"]
    only_j = make_plan(layout, graph, algorithm="ohtma+n10", time_limit=30, network=net,
                       objective="J", files=())
    aimed = make_plan(layout, graph, algorithm="ohtma+n10", time_limit=30, network=net,
                      files=())
    assert "ohtma+n10" in only_j.result.rejected
    assert "under the caps" not in only_j.result.candidates
    assert aimed.result.origin == "under the caps"
    assert aimed.result.objective < only_j.result.objective
    base = torus_level_max(graph, layout, block, net)
    for plan in (only_j, aimed):
        ours = torus_level_max(graph, layout, plan.result.mapping, net)
        assert all(o <= b * (1 + 1e-9) for o, b in zip(ours, base, strict=True)), (ours, base)
    notes = " ".join(json.loads(aimed.report_json)["notes"])
    assert ("objective: J under the default's busiest routed link of each level (torus "
            "4x4: dimension order" in notes), notes
    assert ("objective: J, the link check refusing what loads a busiest link more"
            in " ".join(json.loads(only_j.report_json)["notes"]))


def test_without_a_link_model_objective_congestion_is_J_only():
    net = load_network(_config(NETWORKS["tianhe3"]))
    plan = make_plan(_layout(JOB_NODES, (8,) * 8), generate("stencil3d", 64),
                     algorithm="ohtma+n10", time_limit=10, network=net, files=())
    notes = " ".join(json.loads(plan.report_json)["notes"])
    assert "objective: J only (no link model for this network" in notes, notes
    assert "under the caps" not in plan.result.candidates
