"""The compiled kernels' node-hop oracle (NodeHopMachine read as its N x N between-node
table + per-node levels) against the same machine expanded to an explicit n x n matrix,
and the memory it saves: nothing n x n for 4096 PEs."""

import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mapper.construction import greedy_allc, muller_merbach
from mapper.construction.ohtma import ohtma_exchange, ohtma_greedy
from mapper.model.machine import Hierarchy
from mapper.model.networks import NodeHopMachine, torus_hops
from mapper.model.oracle import KernelOracle, total_distances
from mapper.objectives.qap import objective
from mapper.search import _swap, communication_neighborhood, quadratic_neighborhood
from mapper.search.swap import swap_delta
from mapper.solve.api import map_processes
from slurm_plugin.profiles.generators import generate
from tests.helpers.mapper_cases import random_graph


def _random_machine(seed: int) -> NodeHopMachine:
    """2-4 nodes of 1-6 PEs (uneven, one or two levels inside), random hops, costs."""
    rng = np.random.default_rng(seed)
    count = int(rng.integers(2, 5))
    h = np.triu(rng.integers(1, 6, (count, count)), 1)
    levels = int(rng.integers(1, 3))
    inner = np.sort(rng.integers(0, 4, levels)).astype(float)
    trees = []
    for _ in range(count):
        if levels == 1:
            trees.append(Hierarchy.homogeneous([int(rng.integers(1, 4))], inner))
        else:
            sockets = [int(x) for x in rng.integers(1, 4, int(rng.integers(1, 3)))]
            trees.append(Hierarchy.from_tree(sockets, inner))
    return NodeHopMachine(h + h.T, trees, per_hop=float(rng.choice([1.0, 2.5, 10.0])),
                          base=float(rng.choice([0.0, 3.0])))


def _graph(n: int, seed: int):
    return random_graph(n, 0.4, seed)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000),
       swaps=st.lists(st.tuples(st.integers(0, 99), st.integers(0, 99)), max_size=20))
def test_swap_gains_equal_the_dense_matrix_and_the_objective(seed, swaps):
    machine = _random_machine(seed)
    dense = machine.dense()
    n = machine.n
    graph = _graph(n, seed)
    pe = np.random.default_rng(seed).permutation(n).astype(np.int64)
    j = objective(graph, machine, pe)
    for u, v in swaps:
        u, v = u % n, v % n
        delta = swap_delta(graph, machine, pe, u, v)
        assert delta == pytest.approx(swap_delta(graph, dense, pe, u, v), rel=1e-12,
                                      abs=1e-12)
        pe[u], pe[v] = pe[v], pe[u]
        j += delta
        assert j == pytest.approx(objective(graph, machine, pe), rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("seed", range(8))
def test_constructions_and_quadratic_search_match_the_dense_matrix(seed):
    """Same distances in the same order: the same choices, bit for bit."""
    machine = _random_machine(seed)
    dense = machine.dense()
    graph = _graph(machine.n, seed)
    assert np.array_equal(total_distances(machine), total_distances(dense))
    for build in (muller_merbach, greedy_allc, ohtma_greedy):
        pe, _ = build(graph, machine)
        ref, _ = build(graph, dense)
        assert np.array_equal(pe, ref)
    start, _ = ohtma_greedy(graph, machine)
    out, trace = ohtma_exchange(graph, machine, start)
    ref_out, ref_trace = ohtma_exchange(graph, dense, start)
    assert np.array_equal(trace.pairs, ref_trace.pairs)
    assert np.allclose(trace.gains, ref_trace.gains, rtol=1e-12, atol=1e-12)
    assert np.array_equal(out, ref_out)
    # N^2: pairs of one innermost group (skipped on the hop oracle) have gain 0 exactly
    pe = np.random.default_rng(seed).permutation(machine.n).astype(np.int64)
    ref = pe.copy()
    stats = quadratic_neighborhood(graph, machine, pe, seed)
    ref_stats = quadratic_neighborhood(graph, dense, ref, seed)
    assert np.array_equal(pe, ref) and stats.swaps == ref_stats.swaps
    assert stats.evaluations <= ref_stats.evaluations


@pytest.mark.parametrize("seed", range(8))
def test_communication_search_gain_is_the_objective_change(seed):
    machine = _random_machine(seed)
    graph = _graph(machine.n, seed)
    pe = np.random.default_rng(seed + 1).permutation(machine.n).astype(np.int64)
    before = objective(graph, machine, pe)
    stats = communication_neighborhood(graph, machine, pe, depth=3, seed=seed)
    assert sorted(pe.tolist()) == list(range(machine.n))
    assert stats.gain >= 0
    assert before - stats.gain == pytest.approx(objective(graph, machine, pe), abs=1e-9)


def test_the_kernels_reject_arrays_that_do_not_fit():
    machine = _random_machine(0)
    gid, dist, mat = KernelOracle.of(machine).args()
    graph = _graph(machine.n, 0)
    pe = np.arange(machine.n, dtype=np.int64)
    with pytest.raises(ValueError, match="between-node table"):
        _swap.swap_delta(graph.indptr, graph.indices, graph.weights, pe, gid, dist,
                            mat[:1, :1].copy(), 0, 1)
    with pytest.raises(ValueError, match="do not fit"):
        _swap.swap_delta(graph.indptr, graph.indices, graph.weights, pe, gid[:-1].copy(),
                            dist, mat, 0, 1)


@pytest.mark.parametrize("algorithm", ["greedy+n10", "greedyallc", "ohtma+n10"])
def test_nothing_n_by_n_is_allocated_for_4096_pes(algorithm):
    # 64 nodes of 2 sockets x 32 cores on a 4x4x4 torus: an n x n matrix would be 128 MiB
    machine = NodeHopMachine(torus_hops([4, 4, 4]), Hierarchy.homogeneous([32, 2], [1, 2]),
                             per_hop=10, base=5)
    n = machine.n
    assert n == 4096
    arrays = [a for a in KernelOracle.of(machine).args() if a is not None]
    assert max(a.size for a in arrays) <= max(64 * 64, 2 * n)
    graph = generate("stencil3d", n)
    tracemalloc.start()
    try:
        r = map_processes(graph, machine, algorithm)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert r.objective == pytest.approx(objective(graph, machine, r.mapping))
    # O(n + m + N²) bookkeeping: well under a single n x n float64 table
    assert peak < 8 * n * n / 16, f"peak {peak / 2**20:.1f} MiB"
