"""J under the baseline's busiest routed links (mapper.search.routed, objective
"congestion" with map_processes(..., links=LinkModel(routed=...))) on tori, meshes, dragonflies and
Tianhe-3 chip grids.

Loads are recomputed by the independent route walks of tests/mapper/objectives/test_link_load.py
(step-by-step dimension-order walks, explicit dragonfly link lists, row-then-column
walks of Tianhe-3's chips), J by a plain loop
over the edges with the machine's pairwise distance: nothing here shares code with
mapper.objectives.link_load's route tables or the compiled search."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mapper import CommGraph, LinkModel, map_processes
from mapper.model.machine import Hierarchy
from mapper.model.networks import (
    NodeHopMachine,
    dragonfly_hops,
    mesh_hops,
    tianhe3_hops,
    torus_hops,
)
from mapper.objectives.link_load import (
    dragonfly_network,
    link_loads,
    mesh_network,
    tianhe3_network,
    torus_network,
)
from mapper.objectives.qap import evaluate
from mapper.search import routed
from mapper.search.routed import ROUTED_TOLERANCE
from mapper.solve.aimed import aim_at_routed_congestion
from mapper.solve.result import MappingResult
from tests.helpers.mapper_cases import random_graph
from tests.mapper.objectives.test_link_load import (
    _brute_loads,
    _dragonfly_links,
    _dragonfly_route,
    _grid_route,
    _tianhe3_links,
    _tianhe3_route,
)

KINDS = ("torus", "mesh", "dragonfly", "tianhe3")


class Case:
    """A random job on a torus, mesh, dragonfly or Tianhe-3 grid: its routed network,
    its hop machine (J), and a brute-force walk of its loads."""

    def __init__(self, seed: int, kind: str | None = None):
        rng = np.random.default_rng(seed)
        self.rng = rng
        kind = kind or str(rng.choice(KINDS))
        if kind == "dragonfly":
            shape = tuple(int(x) for x in rng.integers(2, 4, 3))
            total = int(np.prod(shape))
            hops = dragonfly_hops(*shape)
        elif kind == "tianhe3":
            shape = tuple(int(x) for x in rng.integers(1, 4, 3))
            if np.prod(shape) < 2:  # a job needs two nodes here
                shape = (1, 1, 2)
            total = int(np.prod(shape))
            hops = tianhe3_hops(*shape, hops=tuple(int(x) for x in
                                                   rng.choice([(1, 2, 3), (1, 3, 4)])))
        else:
            dims = tuple(int(x) for x in rng.integers(2, 5, int(rng.integers(1, 3))))
            total = int(np.prod(dims))
            hops = (torus_hops if kind == "torus" else mesh_hops)(dims)
        count = int(rng.integers(2, total + 1))
        slots = rng.permutation(total)[:count]
        sizes = rng.integers(1, 4, count)
        if kind == "dragonfly":
            self.net = dragonfly_network(*shape, slots=slots, node_sizes=sizes,
                                         global_capacity=float(rng.choice([0.5, 1.0])))
            links = _dragonfly_links(*shape)
            self.link_id = {}
            for k, (_, (x, y)) in enumerate(links):
                self.link_id[(x, y)] = self.link_id[(y, x)] = k
            self.route = lambda a, b: _dragonfly_route(*shape, links, int(slots[a]),
                                                       int(slots[b]))
        elif kind == "tianhe3":
            self.net = tianhe3_network(*shape, slots=slots, node_sizes=sizes,
                                       link_capacity=float(rng.choice([0.5, 1.0])))
            self.link_id = {}
            for k, (_, (x, y)) in enumerate(_tianhe3_links(*shape)):
                self.link_id[(x, y)] = self.link_id[(y, x)] = k
            self.route = lambda a, b: _tianhe3_route(*shape, int(slots[a]), int(slots[b]))
        else:
            build = torus_network if kind == "torus" else mesh_network
            self.net = build(dims, slots=slots, node_sizes=sizes,
                             node_capacity=float(rng.choice([1.0, 4.0])),
                             link_capacity=float(rng.choice([1.0, 2.0])))
            self.link_id = {}
            for k, (x, y) in enumerate(self.net.link_ends.tolist()):
                self.link_id[(x, y)] = self.link_id[(y, x)] = k
            wrap = kind == "torus"
            self.route = lambda a, b: _grid_route(dims, wrap, int(slots[a]), int(slots[b]))
        trees = [Hierarchy.homogeneous([int(s)], [1.0]) for s in sizes]
        self.machine = NodeHopMachine(hops[np.ix_(slots, slots)], trees,
                                      per_hop=float(rng.choice([1.0, 3.0])),
                                      base=float(rng.choice([0.0, 10.0])))
        self.kind = kind

    def loads(self, graph: CommGraph, mapping) -> np.ndarray:
        return _brute_loads(graph, mapping, self.net.pe_node, self.route, self.link_id,
                            self.net.links)

    def level_max(self, graph: CommGraph, mapping) -> np.ndarray:
        c = self.loads(graph, mapping) / self.net.capacity
        b = self.net.level_bounds
        return np.array([c[b[i]:b[i + 1]].max(initial=0.0) for i in range(len(b) - 1)])

    def violation(self, graph: CommGraph, mapping, caps) -> float:
        """Σ over links of (c − cap)⁺ / cap, a cap of 0 counting as 1."""
        c = self.loads(graph, mapping) / self.net.capacity
        level = np.repeat(np.arange(len(caps)), np.diff(self.net.level_bounds))
        total = 0.0
        for link in range(self.net.links):
            cap = caps[level[link]]
            if c[link] > cap * (1 + 1e-12):
                total += (c[link] - cap) / (cap if cap > 0 else 1.0)
        return total

    def j(self, graph: CommGraph, mapping) -> float:
        u, v, w = graph.edges()
        return float(sum(wt * float(self.machine.distance(mapping[a], mapping[b]))
                         for a, b, wt in zip(u.tolist(), v.tolist(), w.tolist(),
                                             strict=True)))


def _graph(case: Case, seed: int) -> CommGraph:
    return random_graph(case.machine.n, float(case.rng.choice([0.2, 0.4, 0.7])), seed)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_incremental_loads_v_and_j_equal_recomputation_and_v_never_rises(seed):
    """Stopped after 1, 2, … sweeps (the same seed replays the same swaps): the loads
    the kernel kept, its V and its summed J gains equal the walk's, and V never rises
    from one stop to the next."""
    case = Case(seed)
    graph = _graph(case, seed)
    n = case.machine.n
    start = case.rng.permutation(n).astype(np.int64)
    # caps from a third placement: the start may be far above them
    caps = case.level_max(graph, case.rng.permutation(n)) * float(case.rng.choice([0.8, 1.0]))
    j0, v_prev = case.j(graph, start), case.violation(graph, start, caps)
    for sweeps in (1, 2, 3, 50):
        pe = start.copy()
        loads = np.ascontiguousarray(link_loads(graph, pe, case.net))
        v, dj, moves, done, _, _ = routed.descend(graph, case.machine, case.net, pe, loads,
                                                  caps, seed, None, sweeps)
        assert sorted(pe.tolist()) == list(range(n))
        assert loads == pytest.approx(case.loads(graph, pe), rel=1e-9, abs=1e-9)
        assert v == pytest.approx(case.violation(graph, pe, caps), rel=1e-9, abs=1e-9)
        assert j0 + dj == pytest.approx(case.j(graph, pe), rel=1e-9, abs=1e-9)
        assert v <= v_prev + 1e-9, (sweeps, v, v_prev)
        v_prev = v
        if done < sweeps:  # converged: later stops replay the same run
            break


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), slack=st.sampled_from([0.0, 0.3]))
def test_started_within_the_caps_it_ends_within_them_with_no_higher_J(seed, slack):
    """Stopped after 1, 2 and up to 200 sweeps (the same swaps replayed): every stop is
    within the caps, walked independently, at a J no higher than the start's."""
    case = Case(seed)
    graph = _graph(case, seed)
    start = case.rng.permutation(case.machine.n).astype(np.int64)
    caps = routed.caps_of(graph, case.net, start, slack)
    for sweeps in (1, 2, 200):
        pe = start.copy()
        stats = routed.constrained_search(graph, case.machine, case.net, pe, caps, seed,
                                          max_sweeps=sweeps)
        assert stats.violation_before == 0.0 and stats.violation == 0.0 and stats.feasible
        assert np.all(case.level_max(graph, pe) <= caps * (1 + 1e-9) + 1e-12), sweeps
        assert case.j(graph, pe) <= case.j(graph, start) + 1e-9
        assert case.j(graph, pe) - case.j(graph, start) == pytest.approx(stats.j_change,
                                                                         abs=1e-9)
        if stats.sweeps < sweeps:
            break


def test_the_aim_lowers_an_overloaded_torus_placement_and_ends_under_the_caps():
    """Block on a 4x4 torus, one core per node, 2D stencil: a random placement loads
    the router links far above block's.  The search from it lowers V (single swaps
    need not reach 0 here); aim_at_routed_congestion always ends under the caps (the
    repair, else block polished under them), walked independently."""
    net = torus_network((4, 4))
    machine = NodeHopMachine(torus_hops((4, 4)), Hierarchy.homogeneous([1], [1.0]))
    u, v = np.nonzero(torus_hops((4, 4)) == 1)
    keep = u < v
    graph = CommGraph.from_edges(u[keep], v[keep], np.ones(int(keep.sum())), n=16)
    block = np.arange(16)
    caps = routed.caps_of(graph, net, block)
    walk = Case.__new__(Case)
    walk.net, walk.machine = net, machine
    walk.link_id = {}
    for k, (x, y) in enumerate(net.link_ends.tolist()):
        walk.link_id[(x, y)] = walk.link_id[(y, x)] = k
    walk.route = lambda a, b: _grid_route((4, 4), True, a, b)
    for seed in range(10):
        start = np.random.default_rng(seed).permutation(16).astype(np.int64)
        pe = start.copy()
        stats = routed.constrained_search(graph, machine, net, pe, caps, seed)
        assert 0 <= stats.violation < stats.violation_before
        ev = evaluate(graph, machine, start)
        out = aim_at_routed_congestion(graph, machine, net,
                                       MappingResult(start, ev.objective, ev.traffic, 0.0,
                                                     "test", seed), block, seed, None)
        assert sorted(out.mapping.tolist()) == list(range(16))
        assert np.all(walk.level_max(graph, out.mapping) <= caps * (1 + 1e-12)), seed
        assert out.notes[-1].startswith("aimed at the baseline's busiest links")


def _instance(seed: int):
    case = Case(seed, ["torus", "dragonfly", "mesh", "tianhe3"][seed % 4])
    n = case.machine.n
    if seed % 2:  # a stencil-like chain with random long edges
        extra = case.rng.integers(0, n, (n // 2 + 1, 2))
        extra = extra[extra[:, 0] != extra[:, 1]]
        a = np.r_[np.arange(n - 1), extra[:, 0]]
        b = np.r_[np.arange(1, n), extra[:, 1]]
        w = case.rng.integers(1, 10, len(a)).astype(float)
        graph = CommGraph.from_edges(np.minimum(a, b), np.maximum(a, b), w, n=n)
    else:
        graph = _graph(case, seed)
    return case, graph, case.rng.permutation(n)


def test_congestion_never_loses_to_J_and_keeps_the_defaults_busiest_routed_links():
    refused = aimed_won = 0
    for seed in range(90):
        case, graph, default = _instance(seed)
        if case.machine.n < 2:
            continue
        kw = dict(baseline=default, links=LinkModel(routed=case.net))
        rj = map_processes(graph, case.machine, "ohtma+n10", seed, None, **kw)
        rc = map_processes(graph, case.machine, "ohtma+n10", seed, None, objective="congestion",
                           **kw)
        assert rc.objective <= rj.objective * (1 + 1e-12), seed
        assert rc.objective == pytest.approx(case.j(graph, rc.mapping), rel=1e-9, abs=1e-9)
        base = case.level_max(graph, default)
        for r in (rj, rc):
            slack = 0.0 if r.origin == "under the caps" else ROUTED_TOLERANCE
            assert np.all(case.level_max(graph, r.mapping) <= base * (1 + slack) + 1e-9), (
                seed, r.origin)
        if "ohtma+n10" not in rj.rejected:
            assert np.array_equal(rc.mapping, rj.mapping), seed
            assert "under the caps" not in rc.candidates
            continue
        refused += 1
        assert "link carries" in rj.rejected["ohtma+n10"]
        assert "under the caps" in rc.candidates, seed
        if rc.origin == "under the caps":
            aimed_won += 1
            assert rc.objective < rj.objective, seed
    assert refused and aimed_won, (refused, aimed_won)


def test_the_routed_objective_refuses_tree_levels_beside_it_and_a_wrong_size():
    case, graph, default = _instance(0)
    with pytest.raises(ValueError, match="not both"):
        map_processes(graph, case.machine, "ohtma", baseline=default,
                      links=LinkModel(routed=case.net, congestion_levels=[0]))
    other = torus_network((2,), node_sizes=[1, 1])
    if other.n != case.machine.n:
        with pytest.raises(ValueError, match="PEs"):
            map_processes(graph, case.machine, "ohtma", baseline=default,
                          links=LinkModel(routed=other))
    with pytest.raises(ValueError, match="routed network"):
        map_processes(graph, case.machine, "ohtma", objective="congestion", baseline=default)


def test_kicks_keep_the_best_violation_and_report_the_true_J_change():
    """From the same start and seed the first descent is the one without kicks: kicks
    never end at a higher V, the J change is the walk's, and somewhere they lower V."""
    helped = 0
    for seed in range(60):
        case = Case(seed)
        graph = _graph(case, seed)
        n = case.machine.n
        start = case.rng.permutation(n).astype(np.int64)
        caps = case.level_max(graph, case.rng.permutation(n)) * 0.7
        plain, kicked = start.copy(), start.copy()
        s0 = routed.constrained_search(graph, case.machine, case.net, plain, caps, seed)
        s1 = routed.constrained_search(graph, case.machine, case.net, kicked, caps, seed,
                                       kicks=8)
        assert sorted(kicked.tolist()) == list(range(n))
        assert s1.violation <= s0.violation + 1e-12, seed
        assert s1.violation == pytest.approx(case.violation(graph, kicked, caps), abs=1e-9)
        assert case.j(graph, start) + s1.j_change == pytest.approx(case.j(graph, kicked),
                                                                   rel=1e-9, abs=1e-9)
        helped += s1.violation < s0.violation - 1e-12
    assert helped, "no instance where a kick lowered V"
