"""The solver's machine is the machine the rendered files describe, and the placement a
job gets is never worse than Slurm's default.

Allocations are generated: random switch trees (uneven depth, several trees), node names
dealt to switches in random order, nodes outside the tree, uneven node shapes, partial
nodes, several cores per task.  For each, the J that the independent evaluator
(tests/helpers/independent_eval.py) computes from the rendered rankfile and topology.conf text
must equal the report's J, and Slurm's block:cyclic placement recomputed by hand must
equal the report's default.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mapper import CommGraph
from slurm_plugin.machine.distribution import Distribution, parse_distribution, slurm_placement
from slurm_plugin.machine.layout import SHARED_CORE_SHARE, build_layout
from slurm_plugin.modes.graph_job import make_plan
from slurm_plugin.profiles.generators import generate
from slurm_plugin.slurm.allocation import Allocation
from slurm_plugin.slurm.topology import NodeShape, parse_topology_conf
from tests.helpers import independent_eval as ie

DISTANCES = [1.0, 10.0, 100.0, 1000.0, 1e4, 1e5, 1e6, 1e7]


def compress(names: list[str]) -> str:
    """Slurm host list of ``p<i>`` names, with ranges where indices are consecutive."""
    idx = sorted(int(n[1:]) for n in names)
    parts, start = [], idx[0]
    for a, b in zip(idx, idx[1:] + [None], strict=True):
        if b != a + 1:
            parts.append(f"{start}" if start == a else f"{start}-{a}")
            start = b
    return f"p[{','.join(parts)}]"


@st.composite
def clusters(draw):
    """(topology.conf text, node list, shapes, cpu_ids, tasks per node, cpus per task)."""
    n_nodes = draw(st.integers(2, 9))
    names = [f"p{i}" for i in range(n_nodes)]
    dealt = draw(st.permutations(names))
    outside = draw(st.integers(0, min(2, n_nodes - 1)))
    in_tree, rest = list(dealt[outside:]), list(dealt[:outside])
    lines: list[str] = []
    counter = [0]

    def switch(level: int, nodes: list[str]) -> str:
        name = f"sw{counter[0]}"
        counter[0] += 1
        if level == 0 or len(nodes) == 1 or draw(st.booleans()):
            lines.append(f"SwitchName={name} Nodes={compress(nodes)}")
            return name
        k = draw(st.integers(1, min(3, len(nodes))))
        cuts = sorted(draw(st.lists(st.integers(1, len(nodes) - 1), min_size=k - 1,
                                    max_size=k - 1, unique=True))) if k > 1 else []
        groups = [nodes[a:b] for a, b in zip([0] + cuts, cuts + [len(nodes)], strict=True)]
        kids = [switch(level - 1, g) for g in groups]
        lines.append(f"SwitchName={name} Switches={','.join(kids)}")
        return name

    trees = draw(st.integers(1, 2)) if len(in_tree) > 1 else 1
    cut = draw(st.integers(1, len(in_tree) - 1)) if trees == 2 else len(in_tree)
    for part in (in_tree[:cut], in_tree[cut:]):
        if part:
            switch(draw(st.integers(0, 3)), part)
    cpt = draw(st.integers(1, 2))
    shapes, cpu_ids, tasks = {}, {}, []
    job_nodes = sorted(names, key=lambda n: int(n[1:]))  # Slurm's node-table order
    for node in job_nodes:
        shape = NodeShape(draw(st.integers(1, 2)), draw(st.integers(cpt, 4)),
                          draw(st.integers(1, 2)))
        shapes[node] = shape
        chosen: list[int] = []
        for s in range(shape.sockets):
            cores = list(range(s * shape.cores_per_socket, (s + 1) * shape.cores_per_socket))
            # the last socket takes at least one task when the others took none
            least = 1 if s == shape.sockets - 1 and not chosen else 0
            chunks = len(cores) // cpt - draw(st.integers(0, len(cores) // cpt - least))
            chosen += sorted(draw(st.permutations(cores))[:chunks * cpt])
        cpu_ids[node] = tuple(c * shape.threads_per_core + t for c in sorted(chosen)
                              for t in range(shape.threads_per_core))
        tasks.append(len(chosen) // cpt)
    return "\n".join(lines) + "\n", job_nodes, shapes, cpu_ids, tasks, cpt, rest


def random_graph(n: int, seed: int) -> CommGraph:
    rng = np.random.default_rng(seed)
    m = max(1, 2 * n)
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    keep = src != dst
    if not keep.any():
        return generate("ring", n)
    return CommGraph.from_edges(src[keep], dst[keep], rng.integers(1, 100, keep.sum()) * 1.0,
                                n=n)


def edges_of(graph: CommGraph) -> list[tuple[int, int, float]]:
    u, v, w = graph.edges()
    return list(zip(u.tolist(), v.tolist(), w.tolist(), strict=True))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.large_base_example])
@given(clusters(), st.integers(0, 10**6), st.sampled_from(["topdown+n10", "greedyallc+n2",
                                                           "random", "bottomup+n10"]))
def test_rendered_files_evaluate_to_the_reported_j(cluster, seed, algorithm):
    conf, nodes, shapes, cpu_ids, tasks, cpt, _ = cluster
    # cpt whole cores per task on every node, SMT or not: one thread of each counted
    alloc = Allocation("1", tuple(nodes), tuple(tasks), cpt, threads_per_core=1,
                       cpu_ids=cpu_ids)
    layout = build_layout(alloc, shapes, parse_topology_conf(conf), DISTANCES)
    graph = random_graph(layout.n, seed) if layout.n > 1 else generate("ring", 1)
    plan = make_plan(layout, graph, algorithm=algorithm, time_limit=30, seed=seed)
    assert plan.fallback_reason is None
    record = json.loads(plan.report_json)
    by_name = {p["name"]: p for p in record["placements"]}
    edges = edges_of(graph)

    # Slurm's default, recomputed by hand from the allocation
    per_socket = {n: {} for n in nodes}
    for n in nodes:
        shape = shapes[n]
        for core in sorted({c // shape.threads_per_core for c in cpu_ids[n]}):
            s = core // shape.cores_per_socket
            per_socket[n][s] = per_socket[n].get(s, 0) + 1
        per_socket[n] = {s: c // cpt for s, c in per_socket[n].items() if c // cpt}
    default = ie.slurm_block_cyclic(nodes, per_socket)
    assert ie.objective(edges, default, conf, DISTANCES) == pytest.approx(
        by_name["block"]["objective"])

    if plan.kept_default:
        assert plan.files == {} and by_name["block"]["applied"]
        return
    ranks = ie.parse_rankfile(plan.files["rankfile"])
    assert sorted(ranks) == list(range(layout.n))
    used = set()
    for rank, (host, socket, cores) in ranks.items():
        shape = shapes[host]
        for c in cores:  # a core Slurm gave the job there, used by one rank only
            core = socket * shape.cores_per_socket + c
            assert core * shape.threads_per_core in cpu_ids[host], (rank, host, socket, c)
            assert (host, core) not in used
            used.add((host, core))
        assert len(cores) == cpt
    machine_hosts = plan.files["machinefile"].split()
    assert machine_hosts == [ranks[r][0] for r in range(layout.n)]
    where = {r: (h, s) for r, (h, s, _) in ranks.items()}
    ours = ie.objective(edges, where, conf, DISTANCES)
    assert ours == pytest.approx(by_name["rankmap"]["objective"])
    assert ours == pytest.approx(plan.result.objective)
    assert ours <= by_name["block"]["objective"] * (1 + 1e-9)  # never worse than default
    # and no node link or switch uplink busier than under the default (2 % tolerance)
    for mine, theirs in zip(ie.busiest_links(edges, where, conf),
                            ie.busiest_links(edges, default, conf), strict=True):
        assert mine <= theirs * 1.02 + 1e-9
    assert not by_name["rankmap"]["saved_vs_default"].startswith("-")


INTERLEAVED = """\
SwitchName=leaf0 Nodes=rmnode[0,4]
SwitchName=leaf1 Nodes=rmnode[1,5]
SwitchName=leaf2 Nodes=rmnode[2,6]
SwitchName=leaf3 Nodes=rmnode[3,7]
SwitchName=spine Switches=leaf[0-3]
"""


def test_interleaved_names_pe_order_follows_the_switches():
    alloc = Allocation("1", tuple(f"rmnode{i}" for i in range(8)), (4,) * 8)
    layout = build_layout(alloc, NodeShape(1, 4), parse_topology_conf(INTERLEAVED),
                          [1, 10, 100, 1000])
    assert layout.hosts() == ["rmnode0", "rmnode4", "rmnode1", "rmnode5", "rmnode2",
                              "rmnode6", "rmnode3", "rmnode7"]
    assert layout.nodes == tuple(f"rmnode{i}" for i in range(8))
    h = layout.hierarchy
    assert h.distance(0, 4) == 100  # rmnode0 and rmnode4 share leaf0
    assert h.distance(0, 8) == 1000
    # Slurm's block follows the node list: ranks 0-3 on rmnode0, 4-7 on rmnode1
    block = slurm_placement(layout)
    assert [layout.slot_of(p).host for p in block[:8]] == ["rmnode0"] * 4 + ["rmnode1"] * 4


def test_interleaved_lammps_like_profile_beats_block():
    """The issue's case: 32 ranks of a 3D halo code on interleaved switches."""
    alloc = Allocation("1", tuple(f"rmnode{i}" for i in range(8)), (4,) * 8)
    layout = build_layout(alloc, NodeShape(1, 4), parse_topology_conf(INTERLEAVED),
                          [1, 10, 100, 1000])
    graph = generate("stencil3d:4x4x2", 32)
    plan = make_plan(layout, graph, algorithm="topdown+n10", time_limit=10)
    assert plan.applied
    ranks = ie.parse_rankfile(plan.files["rankfile"])
    edges = edges_of(graph)
    ours = ie.objective(edges, {r: (h, s) for r, (h, s, _) in ranks.items()}, INTERLEAVED,
                        [1, 10, 100, 1000])
    block = ie.objective(edges, {r: (f"rmnode{r // 4}", 0) for r in range(32)}, INTERLEAVED,
                         [1, 10, 100, 1000])
    assert ours == pytest.approx(plan.result.objective)
    assert ours < 0.8 * block


def test_periodic_stencil_never_worse_than_block():
    """The issue's second case: 32 nodes x 2 x 4 under 4 leaves, stencil3d:8x8x4,periodic."""
    conf = "".join(f"SwitchName=l{i} Nodes=c[{8 * i}-{8 * i + 7}]\n" for i in range(4)) + \
        "SwitchName=spine Switches=l[0-3]\n"
    alloc = Allocation("1", tuple(f"c{i}" for i in range(32)), (8,) * 32)
    layout = build_layout(alloc, NodeShape(2, 4), parse_topology_conf(conf),
                          [1, 10, 100, 1000])
    graph = generate("stencil3d:8x8x4,periodic", 256)
    for algorithm in ("topdown+n10", "random", "greedy"):
        plan = make_plan(layout, graph, algorithm=algorithm, time_limit=20)
        record = json.loads(plan.report_json)
        by_name = {p["name"]: p for p in record["placements"]}
        applied = [p for p in record["placements"] if p["applied"]]
        assert len(applied) == 1
        assert applied[0]["objective"] <= by_name["block"]["objective"]
        assert not applied[0]["saved_vs_default"].startswith("-")


@pytest.mark.parametrize("text, expect", [
    (None, Distribution("block", "cyclic")),
    ("cyclic", Distribution("cyclic", "cyclic")),
    ("block:block", Distribution("block", "block")),
    ("plane=4", Distribution("plane", "cyclic", 4)),
    ("*:fcyclic,Pack", Distribution("block", "fcyclic")),
    ("arbitrary", Distribution("arbitrary", "cyclic")),
])
def test_distribution_syntax(text, expect):
    assert parse_distribution(text) == expect


def test_distribution_errors():
    with pytest.raises(ValueError, match="plane needs a size"):
        parse_distribution("plane")
    with pytest.raises(ValueError, match="expected NODES"):
        parse_distribution("diagonal")


def test_slurm_cyclic_and_plane_over_uneven_nodes():
    alloc = Allocation("1", ("a", "b", "c"), (3, 1, 2))
    layout = build_layout(alloc, NodeShape(1, 4), None, [1, 10, 100])
    hosts = lambda m: "".join(layout.slot_of(p).host for p in m)  # noqa: E731
    assert hosts(slurm_placement(layout, Distribution("block"))) == "aaabcc"
    assert hosts(slurm_placement(layout, Distribution("cyclic"))) == "abcaca"
    assert hosts(slurm_placement(layout, Distribution("plane", "cyclic", 2))) == "aabcca"


def test_block_within_a_node_alternates_sockets():
    alloc = Allocation("1", ("a",), (6,), cpu_ids={"a": (0, 1, 2, 4, 5, 6)})
    layout = build_layout(alloc, NodeShape(2, 4), None, [1, 10, 100])
    cyc = slurm_placement(layout)
    blk = slurm_placement(layout, Distribution("block", "block"))
    assert [layout.slot_of(p).socket for p in cyc] == [0, 1, 0, 1, 0, 1]
    assert [layout.slot_of(p).cpu_ids[0] for p in cyc] == [0, 4, 1, 5, 2, 6]
    assert [layout.slot_of(p).socket for p in blk] == [0, 0, 0, 1, 1, 1]


def test_cache_groups_that_interleave_cores_are_contiguous_pes():
    from slurm_plugin.machine.hwloc import CoreGroups

    # two L3 groups per socket holding cores {0, 2} and {1, 3}
    groups = CoreGroups(socket=(0, 0, 0, 0, 1, 1, 1, 1), group=(0, 1, 0, 1, 0, 1, 0, 1))
    alloc = Allocation("1", ("b", "a"), (8, 8))
    layout = build_layout(alloc, NodeShape(2, 4), None, [1, 10, 100], {"a": groups, "b": groups},
                          0.5)
    h = layout.hierarchy
    assert [layout.slot_of(p).cpu_ids[0] for p in range(4)] == [0, 2, 1, 3]
    for p in range(layout.n):
        for q in range(layout.n):
            a, b = layout.slot_of(p), layout.slot_of(q)
            same_cache = a.host == b.host and a.socket == b.socket and \
                groups.group[a.cpu_ids[0]] == groups.group[b.cpu_ids[0]]
            want = 0 if p == q else 0.5 if same_cache else 1 if (a.host, a.socket) == \
                (b.host, b.socket) else 10 if a.host == b.host else 100
            assert h.distance(p, q) == want, (p, q)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.large_base_example])
@given(clusters(), st.integers(0, 10**6), st.integers(1, 3), st.integers(0, 5))
def test_oversubscribed_rankfile_evaluates_to_the_reported_j(cluster, seed, factor, extra):
    """Jobs with more tasks than cores (--overcommit, site allows it): every rank gets a
    core Slurm allocated, no core more ranks than an even spread gives, and the rankfile
    evaluated from scratch (ranks on the same cores SHARED_CORE apart) has the J the
    report gives."""
    conf, nodes, shapes, cpu_ids, tasks, cpt, _ = cluster
    crowded = [t * factor + (extra if i == 0 else 0) for i, t in enumerate(tasks)]
    alloc = Allocation("1", tuple(nodes), tuple(crowded), cpt, threads_per_core=1,
                       cpu_ids=cpu_ids)
    layout = build_layout(alloc, shapes, parse_topology_conf(conf), DISTANCES,
                          oversubscribe=True)
    assert layout.n == sum(crowded)
    if crowded != tasks:
        assert layout.hierarchy.level_names[0] == "core"
        assert any("oversubscribed" in note for note in layout.notes)
    graph = random_graph(layout.n, seed) if layout.n > 1 else generate("ring", 1)
    plan = make_plan(layout, graph, algorithm="topdown+n10", time_limit=30, seed=seed)
    assert plan.fallback_reason is None
    if plan.kept_default:
        return
    ranks = ie.parse_rankfile(plan.files["rankfile"])
    assert sorted(ranks) == list(range(layout.n))
    load: dict[tuple[str, int, tuple[int, ...]], int] = {}
    for host, socket, cores in ranks.values():
        shape = shapes[host]
        for c in cores:
            core = socket * shape.cores_per_socket + c
            assert core * shape.threads_per_core in cpu_ids[host]
        load[(host, socket, cores)] = load.get((host, socket, cores), 0) + 1
    for node, ntasks, ordinary in zip(nodes, crowded, tasks, strict=True):
        per_slot = [k for (h, _, _), k in load.items() if h == node]
        assert sum(per_slot) == ntasks and len(per_slot) == ordinary
        assert max(per_slot) - min(per_slot) <= 1  # an even spread
    core_distance = DISTANCES[0] * SHARED_CORE_SHARE if crowded != tasks else 0.0
    ours = ie.objective_shared_cores(edges_of(graph), ranks, conf, DISTANCES, core_distance)
    assert ours == pytest.approx(plan.result.objective)
