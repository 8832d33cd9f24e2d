"""OHTMA (Li et al. 2020): the greedy's blended scores, the locked best-pair exchange
pass and its backtracking, checked against brute force on small cases."""

import json

import numpy as np
import pytest

from mapper.construction.ohtma import ohtma, ohtma_exchange, ohtma_greedy
from mapper.model.graph import CommGraph
from mapper.model.machine import DistanceMatrix, Hierarchy
from mapper.model.networks import NodeHopMachine, mesh_hops, tianhe3_hops, torus_hops
from mapper.objectives.hop_bytes import hop_bytes
from mapper.objectives.qap import objective
from mapper.solve.api import map_processes
from slurm_plugin.commands.cli import main


def _random_graph(n: int, density: float, seed: int) -> CommGraph:
    rng = np.random.default_rng(seed)
    a = np.triu((rng.random((n, n)) < density) * rng.integers(1, 10, (n, n)), 1)
    return CommGraph.from_matrix(a + a.T, directed=False)


def _machines():
    yield DistanceMatrix(torus_hops([3, 4]).astype(float))
    yield NodeHopMachine(tianhe3_hops(2, 3, 1), Hierarchy.homogeneous([2], [1]), per_hop=3)
    yield Hierarchy.homogeneous([2, 3, 2], [1, 4, 9])


CASES = [(m, s) for s in range(4) for m in _machines()]


def _brute_greedy(graph, machine):
    """Lines 4-21 evaluated literally, O(n³)."""
    a = graph.to_csr().toarray()
    n = graph.n
    b = machine.distance(np.arange(n)[:, None], np.arange(n)[None, :])
    p_sel, n_sel, pe = [], [], np.empty(n, dtype=np.int64)
    for _ in range(n):
        p_un = [p for p in range(n) if p not in p_sel]
        n_un = [q for q in range(n) if q not in n_sel]
        comm = {p: a[p, p_sel].sum() + a[p, p_un].sum() / (1 + len(p_sel)) for p in p_un}
        hops = {q: b[q, n_sel].sum() + b[q, n_un].sum() / (1 + len(n_sel)) for q in n_un}
        best_p = max(p_un, key=lambda p: (comm[p], -p))
        best_q = min(n_un, key=lambda q: (hops[q], q))
        pe[best_p] = best_q
        p_sel.append(best_p)
        n_sel.append(best_q)
    return pe


@pytest.mark.parametrize("machine, seed", CASES)
def test_greedy_follows_the_blended_scores(machine, seed):
    g = _random_graph(12, 0.3, seed)
    assert np.array_equal(ohtma_greedy(g, machine)[0], _brute_greedy(g, machine))


@pytest.mark.parametrize("machine, seed", CASES)
def test_exchange_pass_against_a_brute_force_replay(machine, seed):
    g = _random_graph(12, 0.3, seed)
    start, _ = ohtma_greedy(g, machine)
    out, trace = ohtma_exchange(g, machine, start)
    n = g.n
    f = start.copy()
    locked: set[int] = set()
    js = [objective(g, machine, f)]
    for (i, j), gain in zip(trace.pairs.tolist(), trace.gains, strict=True):
        # each process is exchanged at most once in the pass
        assert i not in locked and j not in locked and i != j
        best = -np.inf
        for a in range(n):
            for b in range(a + 1, n):
                if a in locked or b in locked:
                    continue
                h = f.copy()
                h[a], h[b] = h[b], h[a]
                best = max(best, js[-1] - objective(g, machine, h))
        f[i], f[j] = f[j], f[i]
        js.append(objective(g, machine, f))
        # the recorded change is the true change of J, and no free pair did better
        assert gain == pytest.approx(js[-2] - js[-1], abs=1e-9)
        assert gain == pytest.approx(best, abs=1e-9)
        locked |= {i, j}
    assert len(trace.pairs) == n // 2          # the default loop is a full pass
    # backtracking: the kept prefix is the replayed prefix of smallest J
    assert trace.kept == int(np.argmin(js))
    assert objective(g, machine, out) == pytest.approx(min(js))
    assert objective(g, machine, out) <= objective(g, machine, start) + 1e-9


def test_the_pass_takes_the_best_pair_even_when_it_raises_j():
    # a 4-rank chain on a 4-node line, already optimal: every exchange raises J (by 1
    # at best), OHTMA still makes n/2 of them and backtracks to none
    g = CommGraph.from_edges([0, 1, 2], [1, 2, 3], [1.0] * 3, n=4)
    machine = DistanceMatrix(mesh_hops([4]).astype(float))
    start = np.arange(4)
    out, trace = ohtma_exchange(g, machine, start)
    assert len(trace.pairs) == 2 and trace.gains[0] == -1 and trace.kept == 0
    assert np.array_equal(out, start)


def test_loop_bounds_the_number_of_exchanges():
    g = _random_graph(16, 0.3, 7)
    machine = DistanceMatrix(torus_hops([4, 4]).astype(float))
    _, trace = ohtma_exchange(g, machine, np.arange(16), loop=3)
    assert len(trace.pairs) == 3 and 0 <= trace.kept <= 3


@pytest.mark.parametrize("seed", range(3))
def test_hop_bytes_never_above_the_greedy_start(seed):
    g = _random_graph(48, 0.1, seed)
    machine = NodeHopMachine(tianhe3_hops(2, 3, 2), Hierarchy.homogeneous([4], [1]))
    start, _ = ohtma_greedy(g, machine)
    pe, timed_out = ohtma(g, machine)
    assert not timed_out and sorted(pe.tolist()) == list(range(48))
    assert hop_bytes(g, machine, pe).total <= hop_bytes(g, machine, start).total + 1e-9


@pytest.mark.parametrize("algorithm", ["ohtma", "ohtma+n10"])
def test_reachable_through_map_processes(algorithm):
    g = _random_graph(24, 0.2, 3)
    machine = NodeHopMachine(torus_hops([2, 3]), Hierarchy.homogeneous([2, 2], [1, 2]),
                             per_hop=10)
    r = map_processes(g, machine, algorithm)
    assert r.algorithm == algorithm
    assert r.objective == pytest.approx(objective(g, machine, r.mapping))
    plain = map_processes(g, machine, "ohtma")
    assert r.objective <= plain.objective + 1e-9   # N_C^10 only improves


def test_cli_with_a_distance_matrix(tmp_path, capsys):
    from mapper.io.metis_file import write_metis
    from slurm_plugin.profiles.generators import generate

    graph = tmp_path / "s.graph"
    write_metis(generate("stencil2d:4x4", 16), graph)
    np.savetxt(tmp_path / "torus.txt", torus_hops([4, 4]), fmt="%d")
    results = {}
    for algorithm in ("ohtma", "ohtma+n10"):
        out = tmp_path / f"{algorithm}.txt"
        assert main(["map", str(graph), "--distance-matrix", str(tmp_path / "torus.txt"),
                     "--algorithm", algorithm, "--output", str(out), "--json"]) == 0
        summary = json.loads(capsys.readouterr().out)
        assert summary["algorithm"] == algorithm
        # on a hop matrix hop-bytes is J, with the hops per byte beside it
        assert summary["hop_bytes"] == summary["objective"]
        assert summary["mean_hops_per_byte"] >= 1 and summary["max_hops"] <= 4
        results[algorithm] = summary["hop_bytes"]
        assert main(["evaluate", str(graph), "--distance-matrix",
                     str(tmp_path / "torus.txt"), "--mapping", str(out)]) == 0
        assert f"hop-bytes = {summary['hop_bytes']:g}" in capsys.readouterr().out
    assert results["ohtma+n10"] <= results["ohtma"]


def test_4096_ranks_within_the_default_budget():
    # the prolog's default [solver] time_limit is 5 s; the compiled pass needs well under
    # a second here (the n x n Python version took about 9 s)
    machine = NodeHopMachine(tianhe3_hops(16, 16, 2), Hierarchy.homogeneous([4, 2], [0, 0]))
    from slurm_plugin.profiles.generators import generate

    g = generate("stencil3d", machine.n)
    assert machine.n == 4096
    start, _ = ohtma_greedy(g, machine)
    pe, timed_out = ohtma(g, machine, time_limit=5.0)
    assert not timed_out and sorted(pe.tolist()) == list(range(4096))
    assert hop_bytes(g, machine, pe).total < hop_bytes(g, machine, start).total


def test_greedy_stops_at_its_time_limit_and_fills_the_rest_in_order():
    # the greedy's n steps are O(n) each (27 s at 65536 ranks): past the limit the ranks
    # left take the free PEs in order, and OHTMA skips its exchange pass
    machine = Hierarchy.homogeneous([8, 8, 64], [1, 10, 100])
    from slurm_plugin.profiles.generators import generate

    g = generate("stencil3d", machine.n)
    full, hit_full = ohtma_greedy(g, machine)
    limited, hit = ohtma_greedy(g, machine, time_limit=1e-6)
    assert not hit_full and hit
    assert sorted(limited.tolist()) == list(range(machine.n))
    # at most a few clock checks' worth of greedy steps, the rest in rank and PE order
    filled = np.flatnonzero(limited != full)
    assert len(filled) > machine.n // 2
    assert np.all(np.diff(limited[filled]) > 0)
    pe, timed_out = ohtma(g, machine, time_limit=1e-6)
    assert timed_out and sorted(pe.tolist()) == list(range(machine.n))
    result = map_processes(g, machine, "ohtma", 0, 1e-6)
    assert result.hit_time_limit
    assert sorted(result.mapping.tolist()) == list(range(machine.n))
