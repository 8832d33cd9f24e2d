"""Link weights (load over capacity) in mapper.objectives.congestion, the never-worse rule and the
constrained search: brute-force loads on small random trees, raw volume and load
disagreeing both ways, the caps kept, and all-ones weights equal to none exactly."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mapper import Hierarchy, LinkModel, evaluate, map_processes
from mapper.model.graph import CommGraph
from mapper.model.machine import MachineError
from mapper.objectives.congestion import raised_uplink, uplink_loads
from mapper.search import congested
from mapper.solve.never_worse import LINK_TOLERANCE
from tests.helpers.mapper_cases import random_graph


def _random_tree(rng, depth):
    """Nested lists of PE counts, 1–3 children per switch, 1–3 PEs per node."""
    if depth == 0:
        return int(rng.integers(1, 4))
    return [_random_tree(rng, depth - 1) for _ in range(int(rng.integers(1, 4)))]


def _random_machine(seed):
    rng = np.random.default_rng(seed)
    depth = int(rng.integers(2, 4))
    tree = [_random_tree(rng, depth - 1) for _ in range(int(rng.integers(2, 4)))]
    names = [f"l{i}" for i in range(depth)] + ["root"]
    return Hierarchy.from_tree(tree, [10.0 ** i for i in range(depth + 1)], names)


def _random_weights(machine, rng, zeros=True):
    """Per level below the root, one weight per group (some 0: no link); None at the
    root, and at a level now and then (alike links)."""
    out = []
    for lv in range(machine.levels):
        groups = len(machine.bounds[lv]) - 1
        if lv == machine.levels - 1 or rng.random() < 0.2:
            out.append(None)
            continue
        w = rng.choice([0.5, 1.0, 2.0, 4.0, 1.25], size=groups)
        if zeros:
            w[rng.random(groups) < 0.15] = 0.0
        out.append(w)
    return out


def _brute_loads(graph, machine, mapping, level, weights):
    """Per group of ``level``: cut x weight by a double loop over the edges, written
    without the code under test (weight 1 where none is given)."""
    groups = len(machine.bounds[level]) - 1
    pe_group = [None] * machine.n
    for g in range(groups):
        for p in range(machine.bounds[level][g], machine.bounds[level][g + 1]):
            pe_group[p] = g
    cut = [0.0] * groups
    u, v, w = graph.edges()
    for a, b, x in zip(u.tolist(), v.tolist(), w.tolist(), strict=True):
        ga, gb = pe_group[mapping[a]], pe_group[mapping[b]]
        if ga != gb:
            cut[ga] += x
            cut[gb] += x
    wl = weights[level] if weights is not None and weights[level] is not None else None
    load = [c * (1.0 if wl is None else float(wl[g])) for g, c in enumerate(cut)]
    return cut, load


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 100_000), density=st.sampled_from([0.1, 0.3, 0.6]))
def test_weighted_busiest_link_equals_a_brute_force_count(seed, density):
    machine = _random_machine(seed)
    rng = np.random.default_rng(seed)
    weights = _random_weights(machine, rng)
    graph = random_graph(machine.n, density, seed)
    mapping = rng.permutation(machine.n)
    levels = list(range(machine.levels - 1))
    for load in uplink_loads(graph, machine, mapping, levels, weights):
        cut, loads = _brute_loads(graph, machine, mapping, load.level, weights)
        assert load.load == pytest.approx(max(loads), abs=1e-9)
        assert loads[load.group] == pytest.approx(max(loads), abs=1e-9)
        assert load.volume == pytest.approx(cut[load.group], abs=1e-9)
        wl = weights[load.level]
        if wl is not None and max(loads) > 0:
            assert wl[load.group] > 0  # a group without a link is never the busiest


def test_a_group_of_weight_zero_is_never_loaded():
    # a padding level: the group's parent is the same switch, no link of its own
    machine = Hierarchy.parse("2:2:2", "1:10:100")
    graph = random_graph(8, 0.8, 1)
    weights = [np.zeros(4), None, None]
    (load,) = uplink_loads(graph, machine, np.arange(8), [0], weights)
    assert load.load == 0.0
    other = uplink_loads(graph, machine, np.random.default_rng(0).permutation(8), [0],
                         weights)
    assert raised_uplink(other, (load,)) is None


# three leaf switches of 2 PEs under a root; leaf 0 half as fast as the others
_LEAVES = Hierarchy.homogeneous([2, 3], [1, 10], ["leaf", "root"])
_SLOW_LEAF0 = [np.array([2.0, 1.0, 1.0]), None]


def _graph(n, edges):
    u, v, w = (np.array(x) for x in zip(*edges, strict=True))
    return CommGraph.from_edges(u, v, w, n=n)


def test_raw_volume_not_raised_but_the_slow_switch_gets_the_load():
    graph = _graph(6, [(0, 1, 10.0)])
    base = np.array([2, 4, 1, 3, 5, 0])   # rank 0 on leaf 1, rank 1 on leaf 2
    cand = np.array([0, 4, 1, 3, 5, 2])   # rank 0 on the slow leaf 0
    raw = raised_uplink(uplink_loads(graph, _LEAVES, cand, [0]),
                        uplink_loads(graph, _LEAVES, base, [0]))
    assert raw is None  # 10 on the busiest leaf uplink either way
    hit = raised_uplink(uplink_loads(graph, _LEAVES, cand, [0], _SLOW_LEAF0),
                        uplink_loads(graph, _LEAVES, base, [0], _SLOW_LEAF0))
    assert hit is not None and hit.group == 0
    assert (hit.volume, hit.load) == (10.0, 20.0)


def test_raw_volume_raised_but_the_fast_switches_take_it():
    graph = _graph(6, [(0, 1, 10.0), (2, 3, 5.0)])
    base = np.array([0, 2, 4, 5, 1, 3])   # 0-1 across the slow leaf 0; 2-3 inside leaf 2
    cand = np.array([2, 4, 3, 5, 0, 1])   # both pairs across leaves 1 and 2
    raw = raised_uplink(uplink_loads(graph, _LEAVES, cand, [0]),
                        uplink_loads(graph, _LEAVES, base, [0]))
    assert raw is not None and raw.volume == 15.0  # above the baseline's 10
    base_w = uplink_loads(graph, _LEAVES, base, [0], _SLOW_LEAF0)
    assert base_w[0].load == 20.0 and base_w[0].group == 0
    assert raised_uplink(uplink_loads(graph, _LEAVES, cand, [0], _SLOW_LEAF0),
                         base_w) is None  # 15 < 20: the slow switch is relieved


def test_the_rule_refuses_a_candidate_for_a_slow_switch_and_says_load_capacity():
    # 4 leaves of 2 PEs; a ring of 8 whose J is best in rank order but the baseline
    # keeps the traffic off leaf 0, which is 4x slower
    machine = Hierarchy.homogeneous([2, 4], [1, 10], ["leaf", "root"])
    graph = _graph(8, [(i, (i + 1) % 8, 1.0) for i in range(8)] + [(0, 4, 8.0)])
    rng = np.random.default_rng(3)
    weights = [np.array([4.0, 1.0, 1.0, 1.0]), None]
    found = False
    for _ in range(200):
        base = rng.permutation(8)
        free = map_processes(graph, machine, "topdown+n10", 0, baseline=base,
                             links=LinkModel(congestion_levels=[0]))
        weighted = map_processes(graph, machine, "topdown+n10", 0, baseline=base,
                                 links=LinkModel(congestion_levels=[0], link_weights=weights))
        mine = uplink_loads(graph, machine, weighted.mapping, [0], weights)
        theirs = uplink_loads(graph, machine, base, [0], weights)
        assert raised_uplink(mine, theirs, LINK_TOLERANCE) is None
        if free.origin != "baseline" and raised_uplink(
                uplink_loads(graph, machine, free.mapping, [0], weights), theirs,
                LINK_TOLERANCE) is not None:
            found = True
            assert weighted.mapping.tolist() != free.mapping.tolist()
            reasons = " ".join(weighted.rejected.values())
            assert "load/capacity" in reasons
    assert found  # some baseline whose unweighted winner overloads the slow leaf


@pytest.mark.parametrize("seed", range(6))
def test_all_ones_weights_equal_no_weights_exactly(seed):
    machine = Hierarchy.parse("2:2:2:2", "1:10:100:1000")
    graph = random_graph(16, 0.3, seed)
    rng = np.random.default_rng(seed)
    base = rng.permutation(16)
    ones = [np.ones(len(machine.bounds[lv]) - 1) for lv in range(machine.levels)]
    levels = [0, 1, 2]
    for objective in ("J", "congestion"):
        a = map_processes(graph, machine, "topdown+n10", seed, baseline=base, objective=objective,
                          links=LinkModel(congestion_levels=levels))
        b = map_processes(graph, machine, "topdown+n10", seed, baseline=base, objective=objective,
                          links=LinkModel(congestion_levels=levels, link_weights=ones))
        assert a.mapping.tolist() == b.mapping.tolist() and a.objective == b.objective
        assert a.origin == b.origin and a.candidates == b.candidates
    plain = uplink_loads(graph, machine, base, levels)
    assert plain == uplink_loads(graph, machine, base, levels, ones)
    assert all(u.load == u.volume for u in plain)
    caps = congested.caps_of(graph, machine, base, levels)
    assert caps.tolist() == congested.caps_of(graph, machine, base, levels,
                                              link_weights=ones).tolist()
    pe1 = rng.permutation(16).astype(np.int64)
    pe2 = pe1.copy()
    s1 = congested.constrained_search(graph, machine, pe1, levels, caps, seed, kicks=3)
    s2 = congested.constrained_search(graph, machine, pe2, levels, caps, seed, kicks=3,
                                      link_weights=ones)
    assert pe1.tolist() == pe2.tolist() and s1 == s2


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 100_000), slack=st.sampled_from([-0.2, 0.0, 0.3]),
       kicks=st.sampled_from([0, 8]))
def test_the_constrained_search_never_ends_above_the_weighted_caps(seed, slack, kicks):
    machine = _random_machine(seed)
    n = machine.n
    if n < 2:
        return
    rng = np.random.default_rng(seed)
    weights = _random_weights(machine, rng)
    graph = random_graph(n, 0.3, seed)
    baseline = rng.permutation(n).astype(np.int64)
    levels = list(range(machine.levels - 1))
    caps = congested.caps_of(graph, machine, baseline, levels, slack, weights)
    # the caps are the baseline's busiest load, counted independently
    for i, lv in enumerate(levels):
        assert caps[i] == pytest.approx(
            max(_brute_loads(graph, machine, baseline, lv, weights)[1]) * (1 + slack))
    pe = rng.permutation(n).astype(np.int64)
    before = congested.violation(graph, machine, pe, levels, caps, weights)
    expect = 0.0  # V on loads: Σ (cut·w − cap)⁺ / cap; a cap of 0 counts the cuts
    for i, lv in enumerate(levels):
        cut, loads = _brute_loads(graph, machine, pe, lv, weights)
        if caps[i] > 0:
            expect += sum(max(x - caps[i], 0.0) / caps[i] for x in loads)
        else:
            expect += sum(c for c, x in zip(cut, loads, strict=True) if x > 0)
    assert before == pytest.approx(expect, rel=1e-9, abs=1e-9)
    stats = congested.constrained_search(graph, machine, pe, levels, caps, seed,
                                         kicks=kicks, link_weights=weights)
    assert sorted(pe.tolist()) == list(range(n))
    assert stats.violation <= stats.violation_before + 1e-12
    assert stats.violation == pytest.approx(
        congested.violation(graph, machine, pe, levels, caps, weights), abs=1e-9)
    if stats.feasible:
        for i, lv in enumerate(levels):
            loads = _brute_loads(graph, machine, pe, lv, weights)[1]
            assert max(loads) <= caps[i] * (1 + 1e-9) + 1e-12
    if slack == 0:  # from the baseline itself: feasible, and every swap keeps the caps
        start = baseline.copy()
        s = congested.constrained_search(graph, machine, start, levels, caps, seed,
                                         link_weights=weights)
        assert s.violation_before == 0 and s.feasible
        for i, lv in enumerate(levels):
            assert max(_brute_loads(graph, machine, start, lv, weights)[1]) <= \
                caps[i] * (1 + 1e-9) + 1e-12


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 100_000), objective=st.sampled_from(["J", "congestion"]))
def test_the_result_never_raises_a_weighted_load(seed, objective):
    machine = _random_machine(seed)
    rng = np.random.default_rng(seed)
    weights = _random_weights(machine, rng)
    graph = random_graph(machine.n, 0.3, seed)
    base = rng.permutation(machine.n)
    levels = list(range(machine.levels - 1))
    r = map_processes(graph, machine, "topdown+n10", seed, baseline=base, objective=objective,
                      links=LinkModel(congestion_levels=levels, link_weights=weights))
    assert r.objective <= evaluate(graph, machine, base).objective + 1e-9
    for lv in levels:
        mine = max(_brute_loads(graph, machine, r.mapping, lv, weights)[1])
        theirs = max(_brute_loads(graph, machine, base, lv, weights)[1])
        assert mine <= theirs * (1 + LINK_TOLERANCE) + 1e-9


def test_bad_link_weights_are_refused():
    machine = Hierarchy.parse("2:2:2", "1:10:100")
    graph = random_graph(8, 0.5, 0)
    with pytest.raises(MachineError, match="2 levels, the machine has 3"):
        map_processes(graph, machine, "identity+n10", baseline=np.arange(8),
                      links=LinkModel(congestion_levels=[0], link_weights=[None, None]))
    with pytest.raises(MachineError, match="3 values for 4 groups"):
        map_processes(graph, machine, "identity+n10", baseline=np.arange(8),
                      links=LinkModel(congestion_levels=[0],
                                      link_weights=[[1, 1, 1], None, None]))
    with pytest.raises(ValueError, match=">= 0"):
        uplink_loads(graph, machine, np.arange(8), [0], [[1, -1, 1, 1], None, None])
