import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mapper import (
    CommGraph,
    DistanceMatrix,
    GraphError,
    Hierarchy,
    MachineError,
    evaluate,
    map_processes,
    objective,
)
from mapper.search import communication_neighborhood
from mapper.search.swap import swap_delta
from mapper.solve.runner import AlgorithmError, AlgorithmSpec
from tests.helpers.mapper_cases import SMALL_MACHINES, brute_force_optimum, grid_graph, random_graph

ALL = ["identity", "random", "greedy", "greedyallc", "topdown", "bottomup",
       "topdown+n10", "bottomup+np", "greedy+n2", "random+nc2", "greedyallc+n1"]

UNEVEN = Hierarchy.from_tree([[[6, 6]] * 3, [[4, 4]] * 2, [[3]]],  # 3 under one switch...
                             [1, 10, 100, 1000], ["socket", "node", "switch", "root"])


def clique_union(sizes, seed=0, volume=5.0) -> tuple[CommGraph, np.ndarray]:
    """Disjoint cliques of the given sizes on shuffled rank numbers; returns labels too."""
    rng = np.random.default_rng(seed)
    label = np.repeat(np.arange(len(sizes)), sizes)
    perm = rng.permutation(len(label))
    label = label[perm]
    src, dst = [], []
    for c in range(len(sizes)):
        members = np.flatnonzero(label == c)
        a, b = np.triu_indices(len(members), 1)
        src.append(members[a])
        dst.append(members[b])
    g = CommGraph.from_edges(np.concatenate(src), np.concatenate(dst),
                             np.full(sum(len(s) for s in src), volume), n=len(label))
    return g, label


@pytest.mark.parametrize("machine", [Hierarchy.parse("4:4:4", "1:10:100"), UNEVEN],
                         ids=["homogeneous", "uneven"])
@pytest.mark.parametrize("algorithm", ALL)
def test_every_algorithm_returns_a_bijection_with_its_objective(machine, algorithm):
    graph = random_graph(machine.n, 0.1, seed=7)
    r = map_processes(graph, machine, algorithm, seed=3)
    assert sorted(r.mapping.tolist()) == list(range(machine.n))
    assert r.objective == pytest.approx(objective(graph, machine, r.mapping))
    assert sum(t.volume for t in r.traffic) == pytest.approx(graph.total_volume)


@pytest.mark.parametrize("case", range(12))
def test_restarted_local_search_matches_the_exhaustive_optimum(case):
    machine = SMALL_MACHINES[case % len(SMALL_MACHINES)]
    graph = random_graph(8, 0.4, seed=100 + case)
    best = brute_force_optimum(graph, machine)
    r = map_processes(graph, machine, "random+n2", seed=0, attempts=30)
    assert r.objective == pytest.approx(best)


@pytest.mark.parametrize("algorithm", ["topdown", "bottomup", "topdown+n10", "greedy+n2"])
def test_constructions_solve_clustered_small_cases_exactly(algorithm):
    # two heavy 4-cliques with light links between them: optimum keeps cliques on nodes
    graph, label = clique_union([4, 4], seed=1, volume=10)
    a, b = np.flatnonzero(label == 0), np.flatnonzero(label == 1)
    extra = CommGraph.from_edges(a[:2], b[:2], [1.0, 1.0], n=8)
    both = CommGraph.from_matrix(graph.to_csr() + extra.to_csr(), directed=False)
    machine = Hierarchy.parse("2:2:2", "1:10:100")
    assert map_processes(both, machine, algorithm).objective == pytest.approx(
        brute_force_optimum(both, machine))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), swaps=st.lists(st.tuples(st.integers(0, 63),
                                                             st.integers(0, 63)), max_size=40))
def test_incremental_gains_equal_full_recomputation(seed, swaps):
    machine = [Hierarchy.parse("4:4:4", "1:10:100"), UNEVEN.__class__.from_tree(
        [[[6, 6]] * 3, [[4, 4]] * 2, [[4]]], [1, 3, 7, 20])][seed % 2]
    graph = random_graph(machine.n, 0.08, seed)
    pe = np.random.default_rng(seed).permutation(machine.n).astype(np.int64)
    j = objective(graph, machine, pe)
    for u, v in swaps:
        u, v = u % machine.n, v % machine.n
        delta = swap_delta(graph, machine, pe, u, v)
        pe[u], pe[v] = pe[v], pe[u]
        j += delta
        assert j == pytest.approx(objective(graph, machine, pe), rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("depth", [1, 3, 10])
def test_local_search_gain_is_the_objective_change(depth):
    machine = Hierarchy.parse("4:8:4", "1:10:100")
    graph = random_graph(machine.n, 0.05, seed=depth)
    pe = np.random.default_rng(0).permutation(machine.n).astype(np.int64)
    before = objective(graph, machine, pe)
    stats = communication_neighborhood(graph, machine, pe, depth=depth, seed=1)
    after = objective(graph, machine, pe)
    assert stats.swaps > 0 and after < before
    assert before - after == pytest.approx(stats.gain)
    assert sorted(pe.tolist()) == list(range(machine.n))


@pytest.mark.parametrize("algorithm", ["topdown", "bottomup", "topdown+n10"])
def test_topdown_puts_four_16_cliques_on_four_nodes(algorithm):
    graph, label = clique_union([16] * 4, seed=5)
    machine = Hierarchy.homogeneous([8, 2, 4], [1, 10, 100], ["socket", "node", "root"])
    r = map_processes(graph, machine, algorithm)
    node = r.mapping // 16
    assert all(len(set(node[label == c])) == 1 for c in range(4))
    traffic = {t.name: t.volume for t in r.traffic}
    assert traffic["root"] == 0


@pytest.mark.parametrize("algorithm", ["topdown", "topdown+n10"])
def test_uneven_groups_are_respected(algorithm):
    # cliques exactly the sizes of UNEVEN's nodes (12, 12, 12 | 8, 8 | 3), with light
    # links between the cliques that share a switch
    cliques, label = clique_union([12, 12, 12, 8, 8, 3], seed=2, volume=10)
    first = [int(np.flatnonzero(label == c)[0]) for c in range(6)]
    links = CommGraph.from_edges(first[:2] + first[3:4] + [first[0]],
                                 first[1:3] + first[4:5] + [first[2]], n=UNEVEN.n)
    graph = CommGraph.from_matrix(cliques.to_csr() + links.to_csr(), directed=False)
    r = map_processes(graph, UNEVEN, algorithm)
    node = UNEVEN.group_ids[r.mapping, 1]
    for c in range(6):
        assert len(set(node[label == c])) == 1, f"clique {c} split over nodes"
    sizes = UNEVEN.group_sizes(1)
    assert np.array_equal(np.bincount(node, minlength=len(sizes)), sizes)


def test_3d_stencil_matching_the_machine_reaches_the_known_optimum():
    # 4x4x4 stencil on 8 nodes of 2 sockets of 2 cores: 2x2x2 cubes per node and a
    # perfect matching per socket maximize the volume at every level at once, so
    # J* = 32*1 + (96-32)*10 + 48*100 = 5472 (144 edges, 12 inside each 2x2x2 cube).
    graph = grid_graph((4, 4, 4))
    machine = Hierarchy.parse("2:4:8", "1:10:100")
    best = min(map_processes(graph, machine, "topdown+n10", seed=s).objective
               for s in range(3))
    assert best == 5472


def test_time_limit_returns_best_so_far():
    graph = random_graph(2048, 0.004, seed=1)
    machine = Hierarchy.parse("4:16:32", "1:10:100")
    r = map_processes(graph, machine, "random+n2", time_limit=0.05)
    assert r.hit_time_limit
    assert sorted(r.mapping.tolist()) == list(range(machine.n))
    assert r.objective < map_processes(graph, machine, "random").objective


def test_explicit_distance_matrix_machine():
    # 4x4 torus hop distances
    xy = np.array([(i, j) for i in range(4) for j in range(4)])
    dx = np.abs(xy[:, None, 0] - xy[None, :, 0])
    dy = np.abs(xy[:, None, 1] - xy[None, :, 1])
    hops = np.minimum(dx, 4 - dx) + np.minimum(dy, 4 - dy)
    machine = DistanceMatrix(hops)
    graph = grid_graph((4, 4), periodic=True)
    r = map_processes(graph, machine, "greedyallc+n2", attempts=5)
    assert r.objective == graph.m  # every stencil edge on a 1-hop link
    ev = evaluate(graph, machine, r.mapping)
    assert ev.traffic[0].distance == 1 and ev.traffic[0].volume == graph.m
    with pytest.raises(MachineError, match="hierarchical"):
        map_processes(graph, machine, "topdown")


@pytest.mark.parametrize("name,msg", [("topdwn", "unknown algorithm"),
                                      ("topdown+x", "unknown neighbourhood"),
                                      ("topdown+n0", "at least 1"),
                                      ("topdown+n10+np", "unknown algorithm")])
def test_bad_algorithm_names(name, msg):
    with pytest.raises(AlgorithmError, match=msg):
        AlgorithmSpec.parse(name)


def test_algorithm_name_grammar():
    assert AlgorithmSpec.parse("topdown+n10") == AlgorithmSpec("topdown", "nc", 10)
    assert AlgorithmSpec.parse("greedy+n2") == AlgorithmSpec("greedy", "n2", 0)
    assert AlgorithmSpec.parse("greedy+nc2") == AlgorithmSpec("greedy", "nc", 2)
    assert AlgorithmSpec.parse("greedy+np32") == AlgorithmSpec("greedy", "np", 32)


def test_rank_count_must_equal_pe_count():
    with pytest.raises(GraphError, match="must be equal"):
        map_processes(random_graph(10, 0.3, 0), Hierarchy.parse("4:2", "1:10"))


def test_progress_reports_each_phase():
    phases = []
    map_processes(random_graph(64, 0.1, 1), Hierarchy.parse("4:4:4", "1:10:100"),
                  "topdown+n10", attempts=2, progress=phases.append)
    assert phases == ["construction topdown (seed 0)", "local search n10",
                      "construction topdown (seed 1)", "local search n10"]


def test_search_mode_names_match_the_kernel():
    from mapper.search import _swap
    from mapper.search.swap import SearchMode

    assert {m.name: int(m) for m in SearchMode} == _swap.search_modes()
    g = random_graph(16, 0.3, 2)
    pe = np.arange(16, dtype=np.int64)
    with pytest.raises(ValueError, match="unknown local search mode 7"):
        _swap.local_search(g.indptr, g.indices, g.weights, pe, None, None,
                           np.ones((16, 16)), 7, 1, 0, 0.0, 0.0)


@pytest.mark.parametrize("asked, on_network", [
    ("topdown+n10", "ohtma+n10"), ("bottomup", "ohtma"), ("Matching+NP8", "ohtma+np8"),
    ("greedyallc+n10", "greedyallc+n10"), ("ohtma+n2", "ohtma+n2"), ("strong", "strong")])
def test_a_tree_only_construction_becomes_the_network_one(asked, on_network):
    """One rule for machines without a switch tree (the presets, the site's default and
    the graph mode's substitution all read it): the construction changes, the
    neighbourhood stays."""
    from mapper.solve.algorithm_names import NETWORK_DEFAULT, for_network
    from mapper.solve.presets import preset
    from slurm_plugin.site.config import NETWORK_ALGORITHM

    assert for_network(asked) == on_network
    assert NETWORK_ALGORITHM == NETWORK_DEFAULT == preset("fast").algorithm_for(False)
