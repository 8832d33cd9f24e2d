"""mapper.objectives.phase_time: the phased graph's invariant and the per-phase bottleneck model,
checked against a pure-Python recomputation on small random cases."""

from __future__ import annotations

import numpy as np
import pytest

from mapper import CommGraph, Hierarchy
from mapper.model.graph import GraphError
from mapper.model.phased_graph import (
    Phase,
    PhasedGraph,
    make_phase,
    phased_from_graphs,
    same_sync,
    sync_labels,
    with_phases,
)
from mapper.objectives.phase_time import (
    latency_pace,
    phase_bottlenecks,
    phase_time,
    raised_latency_pace,
)
from mapper.objectives.qap import evaluate


def _random_graph(rng: np.random.Generator, n: int, m: int) -> CommGraph:
    u = rng.integers(0, n, m)
    v = rng.integers(0, n, m)
    keep = u != v
    return CommGraph.from_edges(u[keep], v[keep], rng.integers(1, 9, keep.sum()).astype(float),
                                n=n)


def _random_partition(rng: np.random.Generator, n: int) -> list[list[int]]:
    k = int(rng.integers(1, 4))
    label = rng.integers(0, k, n)
    groups = [np.flatnonzero(label == g).tolist() for g in range(k)]
    return [g for g in groups if g]


def _brute(phase, machine: Hierarchy, pi: np.ndarray, levels, caps) -> np.ndarray:
    """Per group: max over the group's ranks and the levels their edges cross of their
    own group's uplink load in the phase / that uplink's capacity (``caps[i]``: one
    number, or one per group of the level), from the definitions (dicts and loops)."""
    n = phase.graph.n
    label = phase.labels()
    a = phase.graph.to_csr().toarray()
    edges = [(u, v, a[u, v]) for u in range(n) for v in range(u + 1, n) if a[u, v] > 0]
    times = np.zeros(phase.groups)
    for i, level in enumerate(levels):
        grp = [int(machine.group_ids[pi[r], level]) for r in range(n)]
        cut: dict[int, float] = {}
        for u, v, w in edges:
            if grp[u] != grp[v]:
                cut[grp[u]] = cut.get(grp[u], 0.0) + w
                cut[grp[v]] = cut.get(grp[v], 0.0) + w
        level_cap = caps[i]
        for u, v, _ in edges:
            if grp[u] == grp[v]:
                continue
            for r in (u, v):  # each end charges its own group's uplink
                s = int(label[r])
                c = (float(level_cap) if np.ndim(level_cap) == 0
                     else float(level_cap[grp[r]]))
                times[s] = max(times[s], cut[grp[r]] / c)
    return times


def _same_partition(a, b) -> bool:
    def sets(p):
        lab = p.labels()
        return {frozenset(np.flatnonzero(lab == g).tolist()) for g in range(p.groups)}
    return sets(a) == sets(b)


def _machine() -> Hierarchy:
    # 2 cores per node, 2 nodes per leaf, 2 leaves per spine, 2 spines: 16 PEs
    return Hierarchy.homogeneous([2, 2, 2, 2], [1, 10, 100, 1000])


@pytest.mark.parametrize("seed", range(25))
def test_bottlenecks_match_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    machine = _machine()
    n = machine.n
    graphs = [_random_graph(rng, n, int(rng.integers(0, 30))) for _ in range(4)]
    phases, groups = [], None
    for i, g in enumerate(graphs):
        draw = rng.random()
        if draw < 0.4 and groups is not None:  # the previous partition, maybe relabelled
            groups = groups[::-1] if draw < 0.2 else groups
        else:
            groups = _random_partition(rng, n) if draw < 0.8 else None
        phases.append(make_phase(g, repeat=float(rng.integers(1, 4)), groups=groups,
                                 name=f"p{i}"))
    if rng.random() < 0.3:  # each rank its own synchronising group: edges leave them
        phases = [make_phase(p.graph, p.repeat, [[r] for r in range(n)], p.name)
                  for p in phases]
    total = CommGraph.from_matrix(sum(p.repeat * p.graph.to_csr() for p in phases),
                                  directed=False)
    phased = with_phases(total, phases)
    pi = rng.permutation(n)
    levels = sorted(rng.choice([0, 1, 2], size=int(rng.integers(1, 4)), replace=False).tolist())
    # one capacity per level, or one per group (a switch's uplink: its hosts over the
    # oversubscription)
    caps = [rng.uniform(0.5, 4.0) if rng.random() < 0.5
            else rng.uniform(0.5, 4.0, len(machine.bounds[lv]) - 1) for lv in levels]
    got = phase_bottlenecks(phased, machine, pi, levels, caps)
    want_phases = 0.0
    for phase, load in zip(phases, got, strict=True):
        want = _brute(phase, machine, pi, levels, caps)
        np.testing.assert_allclose(load.times, want, rtol=1e-12)
        want_phases += phase.repeat * want.max(initial=0.0)
    assert phase_time(phased, machine, pi, levels, caps, model="phases") == \
        pytest.approx(want_phases, rel=1e-12)
    # runs: consecutive phases with the same partition summed per group (per rank of
    # it: labels may differ) first
    want_runs, acc, prev = 0.0, None, None
    for phase in phases:
        t = phase.repeat * _brute(phase, machine, pi, levels, caps)[phase.labels()]
        if prev is not None and _same_partition(prev, phase):
            acc = acc + t
        else:
            want_runs += 0.0 if acc is None else acc.max(initial=0.0)
            acc, prev = t, phase
    want_runs += acc.max(initial=0.0)
    runs = phase_time(phased, machine, pi, levels, caps)
    assert runs == pytest.approx(want_runs, rel=1e-12)
    assert runs <= want_phases * (1 + 1e-12)


def test_loads_are_the_phase_cuts_not_the_group_s_own() -> None:
    # two groups {0,1} and {2,3}, ranks on 4 nodes of one core; edge 1-2 joins them.
    # Rank 1's node link carries 1 + 5 = 6 (edges 0-1 and 1-2), rank 2's 5: group 0
    # sees its member's 6, group 1 its member's 5 -- each end charges its own uplink
    machine = Hierarchy.homogeneous([1, 4], [1, 10])
    g = CommGraph.from_edges([0, 1], [1, 2], [1.0, 5.0], n=4)
    phase = make_phase(g, groups=[[0, 1], [2, 3]])
    phased = with_phases(g, [phase])
    (load,) = phase_bottlenecks(phased, machine, np.arange(4), [0])
    np.testing.assert_array_equal(load.times, [6.0, 5.0])
    g2 = CommGraph.from_edges([0, 2], [1, 3], [1.0, 5.0], n=4)
    (load2,) = phase_bottlenecks(with_phases(g2, [make_phase(g2, groups=[[0, 1], [2, 3]])]),
                                 machine, np.arange(4), [0])
    np.testing.assert_array_equal(load2.times, [1.0, 5.0])


def test_runs_model_lets_groups_drift() -> None:
    # two groups; group 0 is slow in phase 1, group 1 in phase 2: per phase 2 + 2,
    # per run max(2 + 0, 0 + 2) = 2
    machine = Hierarchy.homogeneous([1, 4], [1, 10])
    a = CommGraph.from_edges([0], [1], [2.0], n=4)
    b = CommGraph.from_edges([2], [3], [2.0], n=4)
    rows = [[0, 1], [2, 3]]
    phased = phased_from_graphs([a, b])
    phased = with_phases(phased, [make_phase(a, groups=rows), make_phase(b, groups=rows)])
    assert phase_time(phased, machine, np.arange(4), [0], model="phases") == 4.0
    assert phase_time(phased, machine, np.arange(4), [0]) == 2.0
    # the same partition under other labels is the same run
    relabelled = with_phases(phased, [make_phase(a, groups=rows),
                                      make_phase(b, groups=rows[::-1])])
    assert phase_time(relabelled, machine, np.arange(4), [0]) == 2.0
    # another partition ends the run
    split = with_phases(phased, [make_phase(a, groups=rows),
                                 make_phase(b, groups=[[0, 2], [1, 3]])])
    assert phase_time(split, machine, np.arange(4), [0]) == 4.0


def test_phased_graph_is_its_total() -> None:
    rng = np.random.default_rng(1)
    graphs = [_random_graph(rng, 8, 12) for _ in range(3)]
    phased = phased_from_graphs(graphs, ["a", "b", "c"])
    assert isinstance(phased, PhasedGraph) and isinstance(phased, CommGraph)
    total = sum(g.to_csr() for g in graphs)
    np.testing.assert_allclose(phased.to_csr().toarray(), total.toarray())
    machine = Hierarchy.homogeneous([2, 4], [1, 10])
    pi = rng.permutation(8)
    plain = CommGraph(phased.indptr, phased.indices, phased.weights)
    assert evaluate(phased, machine, pi).objective == evaluate(plain, machine, pi).objective
    assert [p.name for p in phased.phases] == ["a", "b", "c"]


def test_sum_invariant_is_checked() -> None:
    rng = np.random.default_rng(2)
    a, b = _random_graph(rng, 6, 8), _random_graph(rng, 6, 8)
    total = CommGraph.from_matrix(a.to_csr() + b.to_csr(), directed=False, source="t")
    with_phases(total, [make_phase(a), make_phase(b)])
    with pytest.raises(GraphError, match="do not add up"):
        with_phases(total, [make_phase(a)])
    with pytest.raises(GraphError, match="do not add up"):
        with_phases(total, [make_phase(a, repeat=2.0), make_phase(b)])
    doubled = CommGraph.from_matrix(2 * a.to_csr(), directed=False)
    with_phases(doubled, [make_phase(a, repeat=2.0)])
    with pytest.raises(GraphError, match="ranks"):
        with_phases(total, [make_phase(_random_graph(rng, 7, 5))])
    with pytest.raises(GraphError, match="no phases"):
        with_phases(total, [])


def test_sync_groups_must_partition_the_ranks() -> None:
    np.testing.assert_array_equal(sync_labels([[2, 0], [1, 3]], 4), [0, 1, 0, 1])
    with pytest.raises(GraphError, match="rank 3 is in no"):
        sync_labels([[0, 1], [2]], 4)
    with pytest.raises(GraphError, match="two synchronising"):
        sync_labels([[0, 1], [1, 2, 3]], 4)
    with pytest.raises(GraphError, match="listed twice"):
        sync_labels([[0, 0, 1, 2, 3]], 4)
    with pytest.raises(GraphError, match="outside"):
        sync_labels([[0, 1, 2, 4]], 4)
    with pytest.raises(GraphError, match="empty"):
        sync_labels([[0, 1, 2, 3], []], 4)
    g = CommGraph.from_edges([0], [1], n=4)
    assert same_sync(make_phase(g, groups=[[0, 1], [2, 3]]), make_phase(g, groups=[[3, 2], [1, 0]]))
    assert same_sync(make_phase(g), make_phase(g, groups=[[0, 1, 2, 3]]))
    assert not same_sync(make_phase(g, groups=[[0, 1], [2, 3]]),
                         make_phase(g, groups=[[0, 2], [1, 3]]))
    assert not same_sync(make_phase(g), make_phase(g, groups=[[0, 1], [2, 3]]))
    with pytest.raises(GraphError, match="repeat"):
        make_phase(g, repeat=0.0)


def test_bad_arguments() -> None:
    machine = _machine()
    g = CommGraph.from_edges([0], [1], n=16)
    phased = phased_from_graphs([g])
    with pytest.raises(ValueError, match="no uplink"):
        phase_bottlenecks(phased, machine, np.arange(16), [4])
    with pytest.raises(ValueError, match="capacities"):
        phase_bottlenecks(phased, machine, np.arange(16), [0, 1], [1.0])
    with pytest.raises(ValueError, match="model"):
        phase_time(phased, machine, np.arange(16), [0], model="max")


# -- latency-bound phases: sweeps (wavefronts in rank order) and stages ----------------------

def _links_brute(machine: Hierarchy, p: int, q: int, levels) -> int:
    """Tree links between PEs p and q: two per level at which their groups differ
    (group of a PE from the level's bounds, by a plain scan)."""
    def group(pe: int, level: int) -> int:
        b = machine.bounds[level]
        return next(g for g in range(len(b) - 1) if b[g] <= pe < b[g + 1])
    return sum(2 for lv in levels if group(p, lv) != group(q, lv))


def _paced(p: Phase, pace: str) -> Phase:
    return Phase(p.graph, p.repeat, p.sync, p.name, pace=pace)


def _random_paced(rng: np.random.Generator, machine: Hierarchy, paces: list[str],
                  most_phases: int, most_edges: int, most_repeat: int):
    """Random phases (each pace drawn from ``paces``), their phased graph, a placement
    and a set of levels."""
    phases = []
    for i in range(int(rng.integers(1, most_phases))):
        g = _random_graph(rng, machine.n, int(rng.integers(0, most_edges)))
        p = make_phase(g, repeat=float(rng.integers(1, most_repeat)), name=f"p{i}")
        phases.append(_paced(p, str(rng.choice(paces))))
    total = CommGraph.from_matrix(sum(p.repeat * p.graph.to_csr() for p in phases),
                                  directed=False)
    pi = rng.permutation(machine.n)  # drawn before the levels, as the tests always did
    levels = sorted(rng.choice([0, 1, 2], size=int(rng.integers(1, 4)), replace=False).tolist())
    return phases, with_phases(total, phases), pi, levels


@pytest.mark.parametrize("seed", range(20))
def test_latency_pace_matches_brute_force(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    machine = _machine()
    n = machine.n
    phases, phased, pi, levels = _random_paced(rng, machine, ["", "sweep", "stages"], 4, 30, 3)
    want = 0.0
    for phase in phases:
        if not phase.pace:
            continue
        down, up = [0.0] * n, [0.0] * n
        u, v, w = phase.graph.edges()
        for a, b, x in zip(u.tolist(), v.tolist(), w.tolist(), strict=True):
            lo, hi = min(a, b), max(a, b)
            cost = x * _links_brute(machine, int(pi[lo]), int(pi[hi]), levels)
            down[lo] += cost
            up[hi] += cost
        t = (max(down) + max(up) if phase.pace == "sweep"
             else max(d + e for d, e in zip(down, up, strict=True)))
        want += phase.repeat * t
    assert latency_pace(phased, machine, pi, levels) == pytest.approx(want, rel=1e-12)


def _lu_grid(q: int, pace: str = "sweep") -> PhasedGraph:
    """A q x q non-periodic grid in row-major rank order, one latency-bound phase."""
    r = np.arange(q * q)
    south = r[r // q < q - 1]
    east = r[r % q < q - 1]
    g = CommGraph.from_edges(np.concatenate([south, east]),
                             np.concatenate([south + q, east + 1]),
                             np.ones(len(south) + len(east)), n=q * q)
    return with_phases(g, [Phase(g, 1.0, None, "wavefront", pace=pace)])


def test_sweep_pace_prefers_strips_to_boxes_as_lu_ran() -> None:
    # 4x4 LU grid on nodes of 4 cores, 2 nodes per leaf, 2 leaves: block puts a row
    # (4 consecutive ranks) on each node, so a rank's two downstream neighbours are
    # one in its node and one below; a 2x2 box's corner has both outside its node.
    machine = Hierarchy.homogeneous([4, 2, 2], [1, 10, 100])
    phased = _lu_grid(4)
    levels = [0, 1]  # node and leaf uplinks
    block = np.arange(16)
    r = np.arange(16)
    row, col = r // 4, r % 4
    box = (row // 2) * 8 + (col // 2) * 4 + (row % 2) * 2 + col % 2  # 2x2 per node
    # block: rank (0, 3) sends east nowhere and south to another node in its leaf (2);
    # rank (1, 2) east inside, south to the other leaf (4): down max 4, up max 4
    assert latency_pace(phased, machine, block, levels) == 8.0
    # boxes: rank (1, 1) sends east to another node of its leaf (2) and south to the
    # other leaf (4): 6 each way
    assert latency_pace(phased, machine, box, levels) == 12.0
    assert raised_latency_pace(phased, machine, box, block, levels) == pytest.approx(1.5)
    assert raised_latency_pace(phased, machine, block, box, levels) is None
    # J prefers the boxes: that is what the pace has to overrule
    assert evaluate(phased, machine, box).objective < evaluate(phased, machine, block).objective
    # as stages (each rank's four messages one after the other) the two tie at 6:
    # block's row-1 ranks have north 2 + south 4, a box's rank (1, 1) east 2 + south 4.
    # Only the sweep's direction tells them apart (as the real LU runs did: the
    # undirected per-rank sums tied there too)
    stages = _lu_grid(4, "stages")
    assert latency_pace(stages, machine, block, levels) == 6.0
    assert latency_pace(stages, machine, box, levels) == 6.0


def test_latency_pace_is_zero_without_paced_phases() -> None:
    g = _lu_grid(3)
    plain = with_phases(g, [make_phase(g)])
    assert latency_pace(plain, Hierarchy.homogeneous([3, 3], [1, 10]), np.arange(9), [0]) == 0.0


def test_pace_must_be_known() -> None:
    g = _lu_grid(2)
    with pytest.raises(GraphError, match="pace must be one of"):
        Phase(g, 1.0, None, "x", pace="wave")


def test_merging_equal_global_phases_keeps_the_paced_ones() -> None:
    from mapper.model.phased_graph import merge_global_phases
    g = _lu_grid(3).phases[0].graph
    plain = make_phase(g, name="halo")
    paced = Phase(g, 1.0, None, "wavefront", pace="sweep")
    phased = with_phases(CommGraph.from_matrix(4 * g.to_csr(), directed=False),
                         [plain, paced, plain, paced])
    merged = merge_global_phases(phased)
    # the two bandwidth phases merge (repeat 2); the wavefronts stay, paced
    assert [(p.name, p.repeat, p.pace) for p in merged.phases] == [
        ("halo x2", 2.0, ""), ("wavefront", 1.0, "sweep"), ("wavefront", 1.0, "sweep")]
    machine = Hierarchy.homogeneous([3, 3], [1, 10])
    pi = np.random.default_rng(0).permutation(9)
    assert latency_pace(merged, machine, pi, [0]) == latency_pace(phased, machine, pi, [0])


def test_phase_time_leaves_the_latency_bound_phases_out() -> None:
    # the same graph twice: as a bandwidth phase and as a paced one; the phase time
    # is the bandwidth phase's alone, in both models, and a paced-only profile has none
    rng = np.random.default_rng(7)
    machine = _machine()
    g = _random_graph(rng, machine.n, 30)
    h = _random_graph(rng, machine.n, 20)
    both = with_phases(CommGraph.from_matrix(g.to_csr() + h.to_csr(), directed=False),
                       [make_phase(g, name="halo"), Phase(h, 1.0, None, "solve", pace="stages")])
    alone = with_phases(g, [make_phase(g, name="halo")])
    paced = with_phases(h, [Phase(h, 1.0, None, "solve", pace="stages")])
    pi = rng.permutation(machine.n)
    for model in ("runs", "phases"):
        assert phase_time(both, machine, pi, [0, 1], model=model) == \
            phase_time(alone, machine, pi, [0, 1], model=model) > 0
        assert phase_time(paced, machine, pi, [0, 1], model=model) == 0.0


# -- exchange rounds: each round lasts as long as its farthest message -------------------

@pytest.mark.parametrize("seed", range(20))
def test_round_latency_matches_brute_force(seed: int) -> None:
    from mapper.objectives.phase_time import round_latency
    rng = np.random.default_rng(300 + seed)
    machine = _machine()
    phases, phased, pi, levels = _random_paced(rng, machine, ["", "sweep", "rounds", "rounds"],
                                               5, 25, 4)
    want = 0.0
    for phase in phases:
        if phase.pace != "rounds":
            continue
        u, v, _ = phase.graph.edges()
        # volumes play no part: the farthest message of the round
        want += phase.repeat * max((_links_brute(machine, int(pi[a]), int(pi[b]), levels)
                                    for a, b in zip(u.tolist(), v.tolist(), strict=True)),
                                   default=0)
    assert round_latency(phased, machine, pi, levels) == pytest.approx(want, rel=1e-12)
    # rounds are neither pipelines nor bandwidth phases
    pipelines = [p for p in phases if p.pace != "rounds"]
    if pipelines:
        rest = with_phases(CommGraph.from_matrix(
            sum(p.repeat * p.graph.to_csr() for p in pipelines), directed=False), pipelines)
        assert latency_pace(phased, machine, pi, levels) == \
            pytest.approx(latency_pace(rest, machine, pi, levels), rel=1e-12)
        assert phase_time(phased, machine, pi, levels) == \
            pytest.approx(phase_time(rest, machine, pi, levels), rel=1e-12)


def test_rounds_prefer_keeping_a_dimension_inside_the_nodes() -> None:
    # NPB MG's case in small: a 4x4x4 periodic grid exchanged one dimension per round
    # (3 iterations), nodes of 8 cores, 2 nodes per leaf, 4 leaves.  Block holds a
    # 4x2x1 slab per node (x-rounds never leave it), 2x2x2 cubes cut every dimension;
    # both send 3 of each rank's 6 messages off the node and off the leaf: J ties
    from mapper.objectives.phase_time import raised_round_latency, round_latency
    machine = Hierarchy.homogeneous([8, 2, 4], [1, 10, 100])
    r = np.arange(64)
    x, y, z = r % 4, (r // 4) % 4, r // 16

    def rank(xx, yy, zz):
        return xx % 4 + 4 * (yy % 4) + 16 * (zz % 4)
    rounds = [Phase(CommGraph.from_edges(r, rank(x + dx, y + dy, z + dz), np.ones(64), n=64),
                    3.0, None, f"{name} round", pace="rounds")
              for name, (dx, dy, dz) in zip("xyz", [(1, 0, 0), (0, 1, 0), (0, 0, 1)],
                                            strict=True)]
    total = CommGraph.from_matrix(sum(3.0 * p.graph.to_csr() for p in rounds),
                                  directed=False)
    phased = with_phases(total, rounds)
    levels = [0, 1]
    block = r.copy()
    # cube (a, b, c) = (x // 2, y // 2, z // 2) on node a of leaf b + 2c
    cube = ((y // 2) + 2 * (z // 2)) * 16 + (x // 2) * 8 + x % 2 + 2 * (y % 2) + 4 * (z % 2)
    assert sorted(cube.tolist()) == list(range(64))
    assert evaluate(phased, machine, cube).objective == \
        evaluate(phased, machine, block).objective
    # block: x rounds 0 links, y rounds 2 (the leaf's other node), z rounds 4 (another
    # leaf); cubes: x 2, y 4, z 4
    assert round_latency(phased, machine, block, levels) == 3 * (0 + 2 + 4)
    assert round_latency(phased, machine, cube, levels) == 3 * (2 + 4 + 4)
    assert raised_round_latency(phased, machine, cube, block, levels) == pytest.approx(10 / 6)
    assert raised_round_latency(phased, machine, block, cube, levels) is None


def test_merging_equal_rounds_adds_their_repeats() -> None:
    from mapper.model.phased_graph import merge_global_phases
    from mapper.objectives.phase_time import round_latency
    g = _lu_grid(3).phases[0].graph
    h = _random_graph(np.random.default_rng(3), 9, 10)
    a = Phase(g, 1.0, None, "round a", pace="rounds")
    b = Phase(h, 1.0, None, "round b", pace="rounds")
    plain = make_phase(g, name="halo")
    phased = with_phases(CommGraph.from_matrix(4 * g.to_csr() + 2 * h.to_csr(),
                                               directed=False), [a, b, plain, a, b, a])
    merged = merge_global_phases(phased)
    # a round merges with its equals only, never with an equal bandwidth phase
    assert [(p.name, p.repeat, p.pace) for p in merged.phases] == [
        ("round a x3", 3.0, "rounds"), ("round b x2", 2.0, "rounds"), ("halo", 1.0, "")]
    machine = Hierarchy.homogeneous([3, 3], [1, 10])
    rng = np.random.default_rng(5)
    for _ in range(5):
        pi = rng.permutation(9)
        assert round_latency(merged, machine, pi, [0]) == \
            round_latency(phased, machine, pi, [0])


def test_a_profile_mostly_in_rounds_is_not_chosen_by_phase_time() -> None:
    # the phase time leaves rounds out; where they carry most of the volume it would
    # choose by the rest (a trace's collectives) alone, so J chooses (mapper.solve.api)
    from mapper.solve.budget import ROUNDS_SHARE
    from mapper.solve.never_worse import phase_timer
    machine = Hierarchy.homogeneous([4, 2, 2], [1, 10, 100])
    g = _lu_grid(4).phases[0].graph
    h = _random_graph(np.random.default_rng(11), 16, 12)
    caps = [[1.0] * 4, [1.0] * 2, [1.0]]

    def profile(round_volume: float) -> PhasedGraph:
        rounds = Phase(CommGraph(g.indptr, g.indices, g.weights * round_volume, g.source),
                       1.0, None, "round", pace="rounds")
        total = CommGraph.from_matrix(rounds.graph.to_csr() + h.to_csr(), directed=False)
        return with_phases(total, [rounds, make_phase(h, name="allreduce")])
    ratio = h.total_volume / g.total_volume
    assert ROUNDS_SHARE == 0.5
    # rounds 2/3 of the volume: no timer; 1/3: the phase time chooses
    assert phase_timer(profile(2.0 * ratio), machine, [0, 1], caps) is None
    timer = phase_timer(profile(0.5 * ratio), machine, [0, 1], caps)
    assert timer is not None and timer(np.arange(16)) > 0
