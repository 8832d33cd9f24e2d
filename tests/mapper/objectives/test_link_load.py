"""Link loads under routed networks (mapper.objectives.link_load) against brute force.

Routes are rebuilt here independently — explicit router graphs walked step by step
(breadth-first distances along each torus ring, the same tie rule), explicit dragonfly
link lists, Tianhe-3 chip grids walked along the row then the column, explicit parent
walks on trees — and the loads recomputed by walking every
edge's routes in pure Python.  Swap updates are checked against full recomputation, and
the tree loads against mapper.objectives.congestion.uplink_loads.
"""

from __future__ import annotations

import itertools
from collections import deque

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mapper.model.machine import Hierarchy
from mapper.model.networks import dragonfly_hops, mesh_hops, tianhe3_hops, torus_hops
from mapper.objectives.congestion import uplink_loads
from mapper.objectives.link_load import (
    LinkLoadTracker,
    dragonfly_network,
    level_congestion,
    link_loads,
    mesh_network,
    swap_delta,
    tianhe3_network,
    torus_network,
    tree_network,
)
from tests.helpers.mapper_cases import grid_graph, random_graph

# -- independent route constructions --------------------------------------------------


def _ring_distance(length: int, wrap: bool, x: int) -> list[int]:
    """Breadth-first hop counts from coordinate x along one ring (or line)."""
    dist = [-1] * length
    dist[x] = 0
    todo = deque([x])
    while todo:
        y = todo.popleft()
        steps = [y - 1, y + 1]
        nbs = [s % length for s in steps] if wrap else [s for s in steps if 0 <= s < length]
        for z in nbs:
            if dist[z] < 0:
                dist[z] = dist[y] + 1
                todo.append(z)
    return dist


def _grid_route(dims, wrap, a, b):
    """Dimension-order route from slot a to slot b as vertex pairs: node a -> its router,
    each dimension in order stepping to a neighbour one hop nearer the target coordinate
    (breadth-first distances on that ring; the upward neighbour when both are), router
    -> node b.  Vertices: slots, then routers at total + slot."""
    if a == b:
        return []
    total = int(np.prod(dims))
    cur = list(np.unravel_index(a, dims))
    goal = list(np.unravel_index(b, dims))
    hops = [(a, total + a)]
    for k, length in enumerate(dims):
        dist = _ring_distance(length, wrap, goal[k])
        while cur[k] != goal[k]:
            here = total + int(np.ravel_multi_index(cur, dims))
            up, down = cur[k] + 1, cur[k] - 1
            if wrap:
                up, down = up % length, down % length
            up_ok = 0 <= up < length and dist[up] == dist[cur[k]] - 1
            cur[k] = up if up_ok else down
            hops.append((here, total + int(np.ravel_multi_index(cur, dims))))
    hops.append((total + b, b))
    return hops


def _grid_links(dims, wrap):
    """The undirected vertex pairs of a grid: node links and router links."""
    total = int(np.prod(dims))
    out = {frozenset((s, total + s)) for s in range(total)}
    for s in range(total):
        c = np.unravel_index(s, dims)
        for k, length in enumerate(dims):
            for step in (-1, 1):
                y = list(c)
                y[k] += step
                if wrap:
                    y[k] %= length
                elif not 0 <= y[k] < length:
                    continue
                t = int(np.ravel_multi_index(y, dims))
                if t != s:
                    out.add(frozenset((total + s, total + t)))
    return out


def _dragonfly_links(groups, routers, nodes):
    """Explicit link list: (kind, vertex pair); vertices slots, then routers."""
    total = groups * routers * nodes
    links = [("node", (s, total + s // nodes)) for s in range(total)]
    for g in range(groups):
        for x, y in itertools.combinations(range(routers), 2):
            links.append(("local", (total + g * routers + x, total + g * routers + y)))
    for g, h in itertools.combinations(range(groups), 2):
        # group g's link to h leaves from router ((h - g - 1) mod groups) mod routers
        rg = ((h - g - 1) % groups) % routers
        rh = ((g - h - 1) % groups) % routers
        links.append(("global", (total + g * routers + rg, total + h * routers + rh)))
    return links


def _dragonfly_route(groups, routers, nodes, links, a, b):
    """Minimal route as vertex pairs, the global link found by scanning the list."""
    if a == b:
        return []
    total = groups * routers * nodes
    ra, rb = total + a // nodes, total + b // nodes
    out = [(a, ra)]
    ga, gb = (a // nodes) // routers, (b // nodes) // routers
    if ga == gb:
        if ra != rb:
            out.append((ra, rb))
    else:
        for kind, (x, y) in links:
            if kind == "global" and {(x - total) // routers, (y - total) // routers} == {ga, gb}:
                ex, ey = (x, y) if (x - total) // routers == ga else (y, x)
                break
        if ra != ex:
            out.append((ra, ex))
        out.append((ex, ey))
        if ey != rb:
            out.append((ey, rb))
    out.append((rb, b))
    return out


def _tianhe3_links(rows, cols, per_chip):
    """Explicit link list: (kind, vertex pair); vertices slots, then chip routers
    (total + row * cols + col).  Row links row by row, column links column by column,
    each pair of chips once, nearer chip first."""
    total = rows * cols * per_chip
    links = [("node", (s, total + s // per_chip)) for s in range(total)]
    for r in range(rows):
        for x, y in itertools.combinations(range(cols), 2):
            links.append(("network", (total + r * cols + x, total + r * cols + y)))
    for c in range(cols):
        for x, y in itertools.combinations(range(rows), 2):
            links.append(("network", (total + x * cols + c, total + y * cols + c)))
    return links


def _tianhe3_route(rows, cols, per_chip, a, b):
    """Row-first walk as vertex pairs: node a -> its chip, one step along the row to the
    target's column, one step along that column to the target's row, chip -> node b."""
    if a == b:
        return []
    total = rows * cols * per_chip
    row, col = divmod(a // per_chip, cols)
    goal_row, goal_col = divmod(b // per_chip, cols)
    out = [(a, total + row * cols + col)]
    if col != goal_col:
        out.append((total + row * cols + col, total + row * cols + goal_col))
        col = goal_col
    if row != goal_row:
        out.append((total + row * cols + col, total + goal_row * cols + col))
        row = goal_row
    out.append((total + row * cols + col, b))
    return out


def _tree_parts(machine: Hierarchy, node_level: int):
    """Per level from node_level up: each group's parent (by PE range containment)."""
    parents = {}
    for lv in range(node_level, machine.levels - 1):
        inner, outer = machine.bounds[lv], machine.bounds[lv + 1]
        for g in range(len(inner) - 1):
            lo = inner[g]
            parents[(lv, g)] = (lv + 1, int(np.searchsorted(outer, lo, side="right") - 1))
    return parents


def _tree_route(parents, node_level, a, b):
    """Uplinks (level, group) crossed from node a to node b, climbing both sides."""
    x, y = (node_level, a), (node_level, b)
    up, down = [], []
    while x != y:
        up.append(x)
        down.append(y)
        x, y = parents[x], parents[y]
    return up + down[::-1]


def _brute_loads(graph, mapping, pe_node, route_of, link_id, links):
    """Walk every edge's two directions (w/2 each) in pure Python; ``route_of(a, b)``
    lists the hops, ``link_id`` maps a hop to its link."""
    out = np.zeros(links)
    u, v, w = graph.edges()
    for x, y, vol in zip(u.tolist(), v.tolist(), w.tolist(), strict=True):
        a, b = int(pe_node[mapping[x]]), int(pe_node[mapping[y]])
        for src, dst in ((a, b), (b, a)):
            for hop in route_of(src, dst):
                out[link_id[hop]] += vol / 2
    return out


# -- cases ----------------------------------------------------------------------------

def _job(rng, total):
    """A random subset of slots in random order, 1-3 PEs per node."""
    count = int(rng.integers(1, total + 1))
    slots = rng.permutation(total)[:count]
    sizes = rng.integers(1, 4, count)
    return slots, sizes


def _grid_case(seed):
    rng = np.random.default_rng(seed)
    dims = tuple(int(x) for x in rng.integers(1, 6, int(rng.integers(1, 4))))
    while np.prod(dims) > 60:
        dims = dims[:-1]
    wrap = bool(rng.integers(0, 2))
    slots, sizes = _job(rng, int(np.prod(dims)))
    build = torus_network if wrap else mesh_network
    net = build(dims, slots=slots, node_sizes=sizes,
                node_capacity=float(rng.choice([1.0, 4.0])),
                link_capacity=float(rng.choice([1.0, 2.0])))
    return rng, dims, wrap, slots, net


def _dragonfly_case(seed):
    rng = np.random.default_rng(seed)
    groups, routers, nodes = (int(x) for x in rng.integers(1, 5, 3))
    slots, sizes = _job(rng, groups * routers * nodes)
    net = dragonfly_network(groups, routers, nodes, slots=slots, node_sizes=sizes,
                            global_capacity=float(rng.choice([0.5, 1.0])))
    return rng, (groups, routers, nodes), slots, net


def _tianhe3_case(seed):
    rng = np.random.default_rng(seed)
    shape = tuple(int(x) for x in rng.integers(1, 5, 3))
    slots, sizes = _job(rng, int(np.prod(shape)))
    net = tianhe3_network(*shape, slots=slots, node_sizes=sizes,
                          node_capacity=float(rng.choice([1.0, 4.0])),
                          link_capacity=float(rng.choice([0.5, 1.0])))
    return rng, shape, slots, net


def _tree_case(seed):
    """Uneven trees: 2-4 levels below the root, 1-3 children per group."""
    rng = np.random.default_rng(seed)
    depth = int(rng.integers(2, 5))

    def grow(d):
        if d == 0:
            return int(rng.integers(1, 4))
        return [grow(d - 1) for _ in range(int(rng.integers(1, 4)))]
    tree = [grow(depth - 1) for _ in range(int(rng.integers(2, 4)))]
    machine = Hierarchy.from_tree(tree, list(range(1, depth + 2)))
    node_level = int(rng.integers(0, machine.levels - 1))
    caps = rng.choice([0.25, 0.5, 1.0], machine.levels - 1 - node_level)
    return rng, machine, node_level, caps, tree_network(machine, node_level=node_level,
                                                        capacity=caps)


def _graph_and_mapping(rng, n, seed):
    graph = random_graph(n, float(rng.choice([0.1, 0.3, 0.6])), seed)
    return graph, rng.permutation(n).astype(np.int64)


# -- routes ---------------------------------------------------------------------------

@pytest.mark.parametrize("wrap", [True, False])
@pytest.mark.parametrize("dims", [(4,), (5,), (2, 3), (4, 4), (3, 2, 4), (1, 6), (2, 2, 2)])
def test_grid_routes_are_the_step_by_step_walk(dims, wrap):
    net = (torus_network if wrap else mesh_network)(dims)
    ends = [frozenset(e) for e in net.link_ends.tolist()]
    assert len(set(ends)) == len(ends) == net.links  # a link per vertex pair, no doubles
    assert set(ends) == _grid_links(dims, wrap)
    hops = (torus_hops if wrap else mesh_hops)(dims)
    lengths = net.route_lengths()
    off = ~np.eye(net.nodes, dtype=bool)
    assert np.array_equal(lengths[off] - 2, hops[off]) and not lengths.diagonal().any()
    for a, b in itertools.product(range(net.nodes), repeat=2):
        got = [tuple(net.link_ends[k]) for k in net.route(a, b)]
        want = _grid_route(dims, wrap, a, b)
        assert [frozenset(x) for x in got] == [frozenset(x) for x in want], (a, b)


def test_even_ring_ties_go_up_from_both_ends():
    net = torus_network([4])
    # 0 -> 2 goes 0,1,2 and 2 -> 0 goes 2,3,0: the two halves of the ring
    up = {frozenset(tuple(net.link_ends[k])) for k in net.route(0, 2)[1:-1]}
    back = {frozenset(tuple(net.link_ends[k])) for k in net.route(2, 0)[1:-1]}
    assert up == {frozenset((4, 5)), frozenset((5, 6))}
    assert back == {frozenset((6, 7)), frozenset((7, 4))}


@pytest.mark.parametrize("shape", [(1, 1, 3), (3, 1, 2), (4, 3, 1), (5, 2, 2), (6, 4, 1),
                                   (3, 3, 2)])
def test_dragonfly_routes_are_the_explicit_minimal_routes(shape):
    net = dragonfly_network(*shape)
    links = _dragonfly_links(*shape)
    assert [tuple(e) for e in net.link_ends.tolist()] == [e for _, e in links]
    kinds = [k for k, _ in links]
    assert [net.level_names[i] for i in net.link_level] == kinds
    assert np.array_equal(net.route_lengths(), dragonfly_hops(*shape))
    for a, b in itertools.product(range(net.nodes), repeat=2):
        got = [tuple(net.link_ends[k]) for k in net.route(a, b)]
        want = _dragonfly_route(*shape, links, a, b)
        assert [frozenset(x) for x in got] == [frozenset(x) for x in want], (a, b)


@pytest.mark.parametrize("shape", [(1, 1, 3), (1, 5, 2), (4, 1, 2), (3, 3, 1), (2, 3, 2),
                                   (3, 5, 1), (1, 1, 1), (3, 2, 3)])
def test_tianhe3_routes_are_the_row_then_column_walk(shape):
    net = tianhe3_network(*shape)
    links = _tianhe3_links(*shape)
    assert [tuple(e) for e in net.link_ends.tolist()] == [e for _, e in links]
    assert [net.level_names[i] for i in net.link_level] == [k for k, _ in links]
    assert not net.symmetric
    lengths = net.route_lengths()
    off = ~np.eye(net.nodes, dtype=bool)
    chip_links = tianhe3_hops(*shape, hops=(0, 1, 2))
    assert np.array_equal(lengths[off] - 2, chip_links[off]) and not lengths.diagonal().any()
    for a, b in itertools.product(range(net.nodes), repeat=2):
        got = [tuple(net.link_ends[k]) for k in net.route(a, b)]
        want = _tianhe3_route(*shape, a, b)
        assert [frozenset(x) for x in got] == [frozenset(x) for x in want], (a, b)


def test_tianhe3_routes_turn_at_different_corners():
    net = tianhe3_network(2, 2, 1)  # chips 0 1 / 2 3 at routers 4 5 / 6 7
    there = [frozenset(tuple(net.link_ends[k])) for k in net.route(0, 3)[1:-1]]
    back = [frozenset(tuple(net.link_ends[k])) for k in net.route(3, 0)[1:-1]]
    assert there == [frozenset((4, 5)), frozenset((5, 7))]  # turns at chip 1
    assert back == [frozenset((7, 6)), frozenset((6, 4))]  # turns at chip 2
    assert "along the row, then the column" in net.routing


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_tree_routes_are_the_explicit_parent_walks(seed):
    _, machine, node_level, _, net = _tree_case(seed)
    parents = _tree_parts(machine, node_level)
    ids = {}
    for lv in range(node_level, machine.levels - 1):
        for g in range(len(machine.bounds[lv]) - 1):
            ids[(lv, g)] = len(ids)
    for a, b in itertools.product(range(net.nodes), repeat=2):
        assert net.route(a, b).tolist() == [ids[x] for x in
                                            _tree_route(parents, node_level, a, b)]


# -- loads ----------------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_grid_loads_equal_the_brute_force_walk(seed):
    rng, dims, wrap, slots, net = _grid_case(seed)
    graph, pi = _graph_and_mapping(rng, net.n, seed)
    link_id = {}
    for k, (x, y) in enumerate(net.link_ends.tolist()):
        link_id[(x, y)] = link_id[(y, x)] = k
    want = _brute_loads(graph, pi, net.pe_node,
                        lambda a, b: _grid_route(dims, wrap, int(slots[a]), int(slots[b])),
                        link_id, net.links)
    assert link_loads(graph, pi, net) == pytest.approx(want, rel=1e-12, abs=1e-9)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_dragonfly_loads_equal_the_brute_force_walk(seed):
    rng, shape, slots, net = _dragonfly_case(seed)
    graph, pi = _graph_and_mapping(rng, net.n, seed)
    links = _dragonfly_links(*shape)
    link_id = {}
    for k, (_, (x, y)) in enumerate(links):
        link_id[(x, y)] = link_id[(y, x)] = k
    want = _brute_loads(graph, pi, net.pe_node,
                        lambda a, b: _dragonfly_route(*shape, links, int(slots[a]),
                                                      int(slots[b])),
                        link_id, net.links)
    assert link_loads(graph, pi, net) == pytest.approx(want, rel=1e-12, abs=1e-9)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_tianhe3_loads_equal_the_brute_force_walk(seed):
    rng, shape, slots, net = _tianhe3_case(seed)
    graph, pi = _graph_and_mapping(rng, net.n, seed)
    link_id = {}
    for k, (_, (x, y)) in enumerate(_tianhe3_links(*shape)):
        link_id[(x, y)] = link_id[(y, x)] = k
    want = _brute_loads(graph, pi, net.pe_node,
                        lambda a, b: _tianhe3_route(*shape, int(slots[a]), int(slots[b])),
                        link_id, net.links)
    assert link_loads(graph, pi, net) == pytest.approx(want, rel=1e-12, abs=1e-9)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_tree_loads_are_the_uplink_loads_of_mapper_congestion(seed):
    """Per level, the busiest link is uplink_loads' heaviest cut, and every link's load
    is a brute-force walk of the parent pointers."""
    rng, machine, node_level, caps, net = _tree_case(seed)
    graph, pi = _graph_and_mapping(rng, machine.n, seed)
    loads = link_loads(graph, pi, net)
    parents = _tree_parts(machine, node_level)
    ids = {}
    for lv in range(node_level, machine.levels - 1):
        for g in range(len(machine.bounds[lv]) - 1):
            ids[(lv, g)] = len(ids)
    want = _brute_loads(graph, pi, net.pe_node,
                        lambda a, b: _tree_route(parents, node_level, a, b), ids, net.links)
    assert loads == pytest.approx(want, rel=1e-12, abs=1e-9)
    levels = list(range(node_level, machine.levels - 1))
    ref = uplink_loads(graph, machine, pi, levels)
    for i, r in enumerate(ref):
        lo, hi = net.level_bounds[i], net.level_bounds[i + 1]
        assert loads[lo:hi].max() == pytest.approx(r.volume, rel=1e-12, abs=1e-12)
        assert loads[lo + r.group] == pytest.approx(r.volume, rel=1e-12, abs=1e-12)
    cong = level_congestion(loads, net)
    assert cong == pytest.approx([r.volume / c for r, c in zip(ref, caps, strict=True)],
                                 rel=1e-12, abs=1e-12)


# -- swaps ----------------------------------------------------------------------------

def _check_swaps(graph, pi, net, rng, count=25):
    """swap_delta and the tracker against full recomputation after every swap."""
    loads = link_loads(graph, pi, net)
    tracker = LinkLoadTracker(graph, pi, net)
    n = len(pi)
    for _ in range(count):
        u, v = (int(x) for x in rng.integers(0, n, 2))
        swap_delta(graph, pi, net, loads, u, v)
        got_max = tracker.swap(u, v)
        pi[u], pi[v] = pi[v], pi[u]
        full = link_loads(graph, pi, net)
        scale = max(1.0, float(full.max(initial=0.0)))
        assert loads == pytest.approx(full, rel=1e-9, abs=1e-9 * scale)
        assert tracker.loads == pytest.approx(full, rel=1e-9, abs=1e-9 * scale)
        assert np.array_equal(tracker.mapping, pi)
        cong = level_congestion(full, net)
        assert got_max == pytest.approx(cong.max(initial=0.0), rel=1e-9, abs=1e-9 * scale)
        assert tracker.max_congestion == got_max
        assert tracker.level_max() == pytest.approx(cong, rel=1e-9, abs=1e-9 * scale)


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_grid_swap_updates_equal_full_recomputation(seed):
    rng, _, _, _, net = _grid_case(seed)
    graph, pi = _graph_and_mapping(rng, net.n, seed)
    _check_swaps(graph, pi, net, rng)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_dragonfly_swap_updates_equal_full_recomputation(seed):
    rng, _, _, net = _dragonfly_case(seed)
    graph, pi = _graph_and_mapping(rng, net.n, seed)
    _check_swaps(graph, pi, net, rng)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_tianhe3_swap_updates_equal_full_recomputation(seed):
    rng, _, _, net = _tianhe3_case(seed)
    graph, pi = _graph_and_mapping(rng, net.n, seed)
    _check_swaps(graph, pi, net, rng)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_tree_swap_updates_equal_full_recomputation(seed):
    rng, machine, _, _, net = _tree_case(seed)
    graph, pi = _graph_and_mapping(rng, machine.n, seed)
    _check_swaps(graph, pi, net, rng)


def test_odd_torus_with_uneven_nodes_swaps():
    """A 5x3x4 torus (odd and even rings), 20 of its nodes holding 1-4 PEs, a periodic
    2D halo of 50 ranks, 200 swaps."""
    rng = np.random.default_rng(7)
    slots = rng.permutation(60)[:20]
    net = torus_network([5, 3, 4], slots=slots, node_sizes=[1, 2, 3, 4] * 5)
    graph = grid_graph((5, 10), periodic=True)
    _check_swaps(graph, rng.permutation(net.n).astype(np.int64), net, rng, count=200)


def test_tianhe3_with_uneven_nodes_swaps():
    """3x5 chips of 2 nodes, 20 of the 30 nodes holding 1-4 PEs, a periodic 2D halo of
    50 ranks, 200 swaps."""
    rng = np.random.default_rng(11)
    slots = rng.permutation(30)[:20]
    net = tianhe3_network(3, 5, 2, slots=slots, node_sizes=[1, 2, 3, 4] * 5)
    graph = grid_graph((5, 10), periodic=True)
    _check_swaps(graph, rng.permutation(net.n).astype(np.int64), net, rng, count=200)


def test_a_job_on_one_node_loads_nothing():
    net = torus_network([3, 3], slots=[4], node_sizes=[6])
    graph = random_graph(6, 0.8, 1)
    pi = np.arange(6)
    assert not link_loads(graph, pi, net).any()
    tracker = LinkLoadTracker(graph, pi, net)
    assert tracker.swap(0, 5) == 0.0 and tracker.level_max().tolist() == [0.0, 0.0]


def test_ranks_out_of_range_are_refused():
    net = torus_network([3])
    graph = random_graph(3, 0.9, 2)
    pi = np.arange(3)
    with pytest.raises(IndexError):
        swap_delta(graph, pi, net, link_loads(graph, pi, net), 0, 3)
    with pytest.raises(IndexError):
        LinkLoadTracker(graph, pi, net).swap(-1, 0)
