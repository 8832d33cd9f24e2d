"""make_plan with a [network]: the job's nodes on a hop matrix, OHTMA by default, a valid
placement, hop-bytes in the report (checked against a count from the node names), and
a fallback for a node the network does not name."""

import json
import re

import numpy as np
import pytest

from mapper import CommGraph
from slurm_plugin.machine.distribution import default_placements
from slurm_plugin.machine.layout import build_layout
from slurm_plugin.machine.network_source import hop_machine, load_network
from slurm_plugin.modes.graph_job import hop_algorithm, make_plan
from slurm_plugin.profiles.generators import generate
from slurm_plugin.site.config import parse_config
from slurm_plugin.slurm.allocation import Allocation
from slurm_plugin.slurm.topology import NodeShape, parse_topology_conf

NETWORKS = {
    "torus": 'kind = "torus"\ndims = [4, 4]\nnodes = "n[0-15]"\n',
    "tianhe3": 'kind = "tianhe3"\nrows = 2\ncols = 2\nnodes_per_chip = 4\nnodes = "n[0-15]"\n',
    "dragonfly": 'kind = "dragonfly"\ngroups = 4\nrouters = 2\nnodes_per_router = 2\n'
                 'nodes = "n[0-15]"\n',
}
#: a scattered allocation: Slurm's node order is not the network's slot order
JOB_NODES = ("n0", "n5", "n10", "n15", "n3", "n6", "n9", "n12")


def _config(body: str, extra: str = ""):
    return parse_config("[network]\n" + body + extra, "site.toml")


SHAPE = NodeShape(2, 4)


def _layout(nodes, tasks, shape=SHAPE, tree=None):
    alloc = Allocation("7", tuple(nodes), tuple(tasks), 1)
    return build_layout(alloc, shape, tree, [1, 10, 100, 1000])


def _scrambled(spec: str, n: int) -> CommGraph:
    u, v, w = generate(spec, n).edges()
    perm = np.random.default_rng(n).permutation(n)
    return CommGraph.from_edges(perm[u], perm[v], w, n=n)


def _hop_bytes_by_name(graph, layout, mapping, net):
    """Σ w · hops between the hosts of the two ranks, from the whole network's matrix
    looked up by node name (independent of the job machine)."""
    slot = {name: i for i, name in enumerate(net.names)}
    u, v, w = graph.edges()
    host = np.array([slot[layout.slots[pe].host] for pe in mapping])
    hops = net.hops[host[u], host[v]]
    return float(np.dot(w, hops)), float(hops[w > 0].max()), float(np.dot(w, hops) / w.sum())


@pytest.mark.parametrize("kind", sorted(NETWORKS))
def test_plan_on_a_generated_network_is_a_bijection_with_hop_bytes(kind):
    cfg = _config(NETWORKS[kind])
    net = load_network(cfg.network)
    layout = _layout(JOB_NODES, (8,) * 8)
    graph = _scrambled("stencil3d", 64)
    plan = make_plan(layout, graph, algorithm=cfg.solver.algorithm, time_limit=10,
                     network=net, job_id="7")
    assert plan.applied, plan.report_text
    mapping = plan.result.mapping
    assert sorted(mapping.tolist()) == list(range(64))
    assert plan.result.algorithm == "ohtma+n10"
    # the rankfile names each of the 64 slots once
    lines = re.findall(r"^rank (\d+)=(\S+) slot=(\d+):(\d+)$", plan.files["rankfile"], re.M)
    assert sorted(int(r) for r, *_ in lines) == list(range(64))
    assert len({(h, s, c) for _, h, s, c in lines}) == 64
    record = json.loads(plan.report_json)
    assert record["hop_metrics"] is True
    assert f"network: {net.description}" in " ".join(record["notes"])
    by_name = {p["name"]: p for p in record["placements"]}
    block = default_placements(layout)["block"]
    for name, m in (("rankmap", mapping), ("block", block)):
        total, most, mean = _hop_bytes_by_name(graph, layout, m, net)
        assert by_name[name]["hops"] == pytest.approx(
            {"hop_bytes": total, "max_hops": most, "mean_hops_per_byte": mean})
    assert by_name["rankmap"]["objective"] < by_name["block"]["objective"]
    assert "network hops (bytes x hops between nodes" in plan.report_text
    table = plan.report_text.split("network hops", 1)[1]
    row = re.search(r"^  rankmap \*\s+(\S+ ?\S*?)\s+(\S+)\s+(\S+)$", table, re.M)
    assert float(row.group(2)) == by_name["rankmap"]["hops"]["max_hops"]
    assert float(row.group(3)) == pytest.approx(by_name["rankmap"]["hops"]
                                                ["mean_hops_per_byte"], abs=1e-3)


def test_hop_bytes_of_a_hand_counted_job():
    """Mesh n0 - n1 - n2, one core per node; the job runs on n0 and n2 (2 hops); one
    edge of 5 bytes between its two ranks: hop-bytes 10, max 2, mean 2 hops per byte;
    J = 5 x (0 + 100 x 2)."""
    net = load_network(_config('kind = "mesh"\ndims = [3]\nnodes = "n[0-2]"\n').network)
    layout = _layout(("n0", "n2"), (1, 1), NodeShape(1, 1))
    graph = CommGraph.from_edges(np.array([0]), np.array([1]), np.array([5.0]), n=2)
    plan = make_plan(layout, graph, algorithm="ohtma+n10", time_limit=5, network=net)
    record = json.loads(plan.report_json)
    block = next(p for p in record["placements"] if p["name"] == "block")
    assert block["hops"] == {"hop_bytes": 10.0, "max_hops": 2.0, "mean_hops_per_byte": 2.0}
    assert block["objective"] == 1000.0
    assert plan.kept_default  # nothing beats it: two ranks, two nodes


def test_unknown_node_falls_back_with_a_message():
    net = load_network(_config('kind = "torus"\ndims = [2, 2]\nnodes = "n[0-3]"\n').network)
    layout = _layout(("n0", "n7", "n2"), (8, 8, 8))
    plan = make_plan(layout, generate("stencil3d", 24), algorithm="ohtma+n10", time_limit=5,
                     network=net)
    assert not plan.applied and plan.files == {} and plan.result is None
    assert plan.fallback_reason.startswith("node(s) n7 of the job are not in the [network] "
                                           "topology (torus [2, 2]; [network] nodes in "
                                           "site.toml names n[0-3])")
    assert "rankmap was NOT applied: node(s) n7" in plan.report_text
    assert "The job runs with Slurm's default placement." in plan.report_text
    assert json.loads(plan.report_json)["fallback_reason"] == plan.fallback_reason


def test_tree_algorithm_is_replaced_by_ohtma_with_its_neighbourhood():
    assert hop_algorithm("topdown+n10") == ("ohtma+n10", "topdown+n10 needs a switch tree: "
                                            "ohtma+n10 used on the [network] hop matrix")
    assert hop_algorithm("bottomup")[0] == "ohtma"
    assert hop_algorithm("greedy+np") == ("greedy+np", None)
    net = load_network(_config(NETWORKS["torus"]).network)
    plan = make_plan(_layout(JOB_NODES[:4], (8,) * 4), _scrambled("stencil2d", 32),
                     algorithm="topdown+n10", time_limit=5, network=net)
    assert plan.result.algorithm == "ohtma+n10"
    assert "topdown+n10 needs a switch tree" in plan.report_text


def test_machine_follows_the_layouts_pe_order_inside_and_between_nodes():
    """Interleaved switches and unequal task counts: PE order is not node-list order.
    Every PE pair's distance is the layout's own level distance inside a node and
    base + per_hop x hops (looked up by host name) between nodes."""
    conf = parse_topology_conf("SwitchName=a Nodes=n0,n5\nSwitchName=b Nodes=n3,n10\n"
                               "SwitchName=top Switches=a,b\n")
    layout = _layout(("n0", "n3", "n5", "n10"), (3, 8, 5, 2), tree=conf)
    assert layout.hosts() != ["n0", "n3", "n5", "n10"]
    net = load_network(_config(NETWORKS["torus"], "per_hop = 7\nbase = 20\n").network)
    machine = hop_machine(layout, net)
    n = layout.n
    p, q = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    slot = {name: i for i, name in enumerate(net.names)}
    host = np.array([slot[s.host] for s in layout.slots])
    same = host[p] == host[q]
    want = np.where(same, layout.hierarchy.distance(p, q), 20 + 7 * net.hops[host[p], host[q]])
    assert np.array_equal(machine.distance(p, q), want)
    assert same.sum() > n and (~same).any()


def test_without_a_network_the_report_has_no_hops():
    layout = _layout(JOB_NODES[:2], (8, 8))
    plan = make_plan(layout, _scrambled("stencil2d", 16), algorithm="topdown+n10",
                     time_limit=5)
    record = json.loads(plan.report_json)
    assert record["hop_metrics"] is False
    assert all(p["hops"] == {} for p in record["placements"])
    assert "network hops" not in plan.report_text
    assert "leaf switch" not in record["level_distances"] and "node" in record["level_distances"]


def test_rankmap_plan_reads_the_network_from_the_site_config(tmp_path):
    """`rankmap plan --config` with a [network] table maps on the hop matrix: the
    record carries hop-bytes, and a ring of 4 nodes named out of order is followed."""
    from slurm_plugin.commands.cli import main

    conf = tmp_path / "rankmap.toml"
    conf.write_text('[network]\nkind = "torus"\ndims = [4]\nnodes = "n1,n3,n2,n4"\n')
    out = tmp_path / "out"
    assert main(["plan", "--config", str(conf), "--nodes", "n[1-4]",
                 "--profile", "stencil3d:4x4x2", "--out", str(out)]) == 0
    record = json.loads((out / "report.json").read_text())
    assert record["hop_metrics"] is True
    hops = {p["name"]: p["hops"] for p in record["placements"]}
    # block puts slabs on n1..n4 in name order, which on this ring are 2 hops apart
    # for n1-n2 and n3-n4: rankmap must do better
    assert hops["block"]["max_hops"] == 2
    assert hops["rankmap"]["hop_bytes"] < hops["block"]["hop_bytes"]
