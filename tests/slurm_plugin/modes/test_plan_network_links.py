"""The never-worse rule on `[network]` jobs (issue 33 item 1): the plan checks the
busiest link of each level under the network's routing (dimension-order on a torus and
on Tianhe-3's chip grid, minimal on a dragonfly), refuses a placement that raises one,
names the routing in the report, and says "J only" where rankmap has no link model (a
hop file).  The loads are checked against a pure-Python walk of the routes from the
test of the link model (tests/mapper/objectives/test_link_load.py), found from the node names."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mapper import CommGraph, MappingResult
from mapper.model.networks import torus_hops
from mapper.objectives.qap import evaluate
from mapper.search.routed import ROUTED_TOLERANCE, caps_of
from mapper.solve.never_worse import routed_refusal
from slurm_plugin.machine.distribution import default_placements
from slurm_plugin.machine.network_source import hop_machine, load_network, routed_network
from slurm_plugin.modes.graph_job import make_plan
from slurm_plugin.profiles.generators import generate
from tests.mapper.objectives.test_link_load import (
    _brute_loads,
    _grid_links,
    _grid_route,
    _tianhe3_links,
    _tianhe3_route,
)
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


#: 3 x 3 chips of 2 nodes: JOB_NODES sit on 8 different chips, and a row or column of
#: three chips has three links, so routes have a choice of links to load
TIANHE3_3X3 = ('kind = "tianhe3"\nrows = 3\ncols = 3\nnodes_per_chip = 2\n'
               'nodes = "n[0-17]"\n')


#: 4 x 4 chips of 1 node, where SUMMA's J-optimal placement loads a chip link more
#: than block does
TIANHE3_4X4 = ('kind = "tianhe3"\nrows = 4\ncols = 4\nnodes_per_chip = 1\n'
               'nodes = "n[0-15]"\n')


def tianhe3_level_max(graph, layout, mapping, net, shape=(3, 3, 2)) -> tuple[float, float]:
    """(busiest node link, busiest chip-to-chip link) of a Tianhe-3 grid, walked here."""
    slot = {name: i for i, name in enumerate(net.names)}
    pe_node = np.array([slot[s.host] for s in layout.slots])
    links = _tianhe3_links(*shape)
    link_id = {}
    for i, (_, (a, b)) in enumerate(links):
        link_id[(a, b)] = link_id[(b, a)] = i
    loads = _brute_loads(graph, mapping, pe_node,
                         lambda a, b: _tianhe3_route(*shape, a, b), link_id, len(links))
    node = np.array([kind == "node" for kind, _ in links])
    return float(loads[node].max()), float(loads[~node].max())


def _random_refusals(net, layout, block, *, seed: int, count: int):
    """``count`` random graphs of 16 ranks with a random candidate placement each, and
    what the never-worse rule's routed check says of the candidate against ``block``:
    (graph, candidate, reason or None)."""
    machine = hop_machine(layout, net)
    routed = routed_network(layout, net, machine)
    rng = np.random.default_rng(seed)
    for _ in range(count):
        n = 16
        u, v = rng.integers(0, n, 40), rng.integers(0, n, 40)
        keep = u != v
        graph = CommGraph.from_edges(u[keep], v[keep], rng.random(keep.sum()) + 0.1, n=n)
        cand = rng.permutation(n)
        ev = evaluate(graph, machine, cand)
        result = MappingResult(cand, ev.objective, ev.traffic, 0.0, "test", 0, False,
                               "algorithm", {}, {}, (), {})
        yield graph, cand, routed_refusal(graph, routed, result,
                                           caps_of(graph, routed, block),
                                           evaluate(graph, machine, block).objective)


def _hop_file_network(tmp_path):
    """The 4x4 torus's hop matrix as a hop file: the same distances, no links named."""
    hops = torus_hops((4, 4))
    (tmp_path / "hops.txt").write_text("n[0-15]\n" + "\n".join(
        " ".join(map(str, row)) for row in hops.tolist()) + "\n")
    return load_network(_config(f'kind = "file"\nhop_file = "{tmp_path}/hops.txt"\n').network)


@pytest.mark.parametrize("kind, routing", [
    ("torus", "dimension order"),
    ("dragonfly", "minimal"),
    ("tianhe3", "tianhe3 2x2 chips of 4 nodes: dimension order (along the row, then the "
                "column; rows and columns fully connected)"),
    ("file", None)])
def test_the_report_names_the_link_check(kind, routing, tmp_path):
    net = (_hop_file_network(tmp_path) if kind == "file"
           else load_network(_config(NETWORKS[kind]).network))
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
    net = load_network(cfg.network)
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
    busiest link is raised, the solver's rule (mapper.solve.api, given the routed network)
    refuses it and says which level and routing; otherwise the candidate passes."""
    net = load_network(_config(NETWORKS["torus"]).network)
    layout = _layout(JOB_NODES, (2,) * 8)
    block = default_placements(layout)["block"]
    refused = kept = 0
    for graph, cand, why in _random_refusals(net, layout, block, seed=3, count=40):
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
    net = load_network(_config(NETWORKS["torus"]).network)
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


def test_a_tianhe3_placement_that_raises_a_chip_link_is_refused_with_the_routing():
    """As on the torus: random candidates against block on 3x3 chips; whenever the
    row-then-column walk says a level's busiest link is raised, the rule refuses it
    naming the level and the routing; otherwise it passes."""
    net = load_network(_config(TIANHE3_3X3).network)
    layout = _layout(JOB_NODES, (2,) * 8)
    block = default_placements(layout)["block"]
    refused = {"node": 0, "network": 0}
    kept = 0
    for graph, cand, why in _random_refusals(net, layout, block, seed=5, count=60):
        ours = tianhe3_level_max(graph, layout, cand, net)
        base = tianhe3_level_max(graph, layout, block, net)
        raised = [name for name, o, b in zip(("node", "network"), ours, base, strict=True)
                  if o > b * (1 + ROUTED_TOLERANCE) + 1e-9]
        if raised:
            refused[raised[0]] += 1
            assert f"busiest {raised[0]} link carries" in why, why
            assert "along the row, then the column" in why, why
        elif all(o <= b * (1 + ROUTED_TOLERANCE) - 1e-9 for o, b in zip(ours, base,
                                                                       strict=True)):
            kept += 1
            assert why is None, why
    assert refused["network"] and kept, (refused, kept)  # a chip link raised, and a pass


def test_objective_congestion_on_tianhe3_repairs_what_objective_J_refuses():
    """SUMMA on a scattered allocation of 4x4 chips, 2 ranks per node: objective J
    refuses the solver's result for a chip link; under congestion the
    refused result is brought under block's busiest links (walked here) and wins with a
    lower J; the reports name the row-then-column routing."""
    net = load_network(_config(TIANHE3_4X4).network)
    layout = _layout(JOB_NODES, (2,) * 8)
    graph = generate("summa", 16)
    block = default_placements(layout)["block"]
    only_j = make_plan(layout, graph, algorithm="ohtma+n10", time_limit=30, network=net,
                       objective="J", files=())
    aimed = make_plan(layout, graph, algorithm="ohtma+n10", time_limit=30, network=net,
                      files=())
    why = only_j.result.rejected["ohtma+n10"]
    assert "busiest network link carries" in why and "along the row, then the column" in why
    assert "under the caps" not in only_j.result.candidates
    assert aimed.result.origin == "under the caps"
    assert aimed.result.objective < only_j.result.objective
    base = tianhe3_level_max(graph, layout, block, net, (4, 4, 1))
    for plan, slack in ((only_j, ROUTED_TOLERANCE), (aimed, 0.0)):
        ours = tianhe3_level_max(graph, layout, plan.result.mapping, net, (4, 4, 1))
        assert all(o <= b * (1 + slack) + 1e-9 for o, b in zip(ours, base, strict=True)), (
            ours, base)
    notes = " ".join(json.loads(aimed.report_json)["notes"])
    assert ("objective: J under the default's busiest routed link of each level (tianhe3 "
            "4x4 chips of 1 node: dimension order (along the row, then the column" in notes
            ), notes


def test_a_tianhe3_sites_chip_hops_change_J_not_the_links():
    layout = _layout(JOB_NODES, (2,) * 8)
    plain = load_network(_config(TIANHE3_3X3).network)
    hopped = load_network(_config(TIANHE3_3X3 + "chip_hops = [1, 4, 9]\n").network)
    assert not np.array_equal(plain.hops, hopped.hops)
    a = routed_network(layout, plain, hop_machine(layout, plain))
    b = routed_network(layout, hopped, hop_machine(layout, hopped))
    for field in ("capacity", "level_bounds", "link_ends", "route_ptr", "route_links",
                  "pe_node", "node_slots"):
        assert np.array_equal(getattr(a, field), getattr(b, field)), field
    assert a.routing == b.routing


def test_without_a_link_model_objective_congestion_is_J_only(tmp_path):
    net = _hop_file_network(tmp_path)
    layout = _layout(JOB_NODES, (8,) * 8)
    assert routed_network(layout, net, hop_machine(layout, net)) is None
    plan = make_plan(layout, generate("stencil3d", 64), algorithm="ohtma+n10",
                     time_limit=10, network=net, files=())
    notes = " ".join(json.loads(plan.report_json)["notes"])
    assert "objective: J only (no link model for this network" in notes, notes
    assert "under the caps" not in plan.result.candidates
