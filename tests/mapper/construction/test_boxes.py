"""Boxes (mapper.construction.boxes): a grid cut into the tree's groups by coordinate
bisection; cuts counted here by a plain walk over the edges."""

import itertools
import time

import numpy as np
import pytest

from mapper import Hierarchy, LinkModel
from mapper.construction.boxes import coordinate_bisection
from mapper.model.cartesian import cartesian_grid
from tests.mapper.model.test_cartesian import _stencil


def _busiest_cut(graph, machine, mapping, level):
    """Largest volume leaving one level-``level`` group, edge by edge."""
    bounds = machine.bounds[level]
    group = {}
    for rank, pe in enumerate(mapping):
        group[rank] = int(np.searchsorted(bounds, pe, side="right")) - 1
    cut = [0.0] * (len(bounds) - 1)
    u, v, w = graph.edges()
    for a, b, x in zip(u, v, w, strict=False):
        if group[a] != group[b]:
            cut[group[a]] += x
            cut[group[b]] += x
    return max(cut)


def _least_box_surface(dims, size):
    """Fewest faces of an a×b×… box of ``size`` cells tiling a periodic grid."""
    best = None
    for box in itertools.product(*(range(1, d + 1) for d in dims)):
        if np.prod(box) != size or any(d % b for d, b in zip(dims, box, strict=False)):
            continue
        faces = sum(2 * size // b for b, d in zip(box, dims, strict=False) if b < d)
        best = faces if best is None else min(best, faces)
    return best


def _uneven_hierarchy(rng, n):
    """A random tree over n PEs: uneven nodes, switches of uneven fan-out."""
    cuts = np.sort(rng.choice(np.arange(1, n), size=n // 6, replace=False))
    inner = np.unique(np.concatenate([[0], cuts, [n]]))
    mid = inner[::3] if inner[::3][-1] == n else np.append(inner[::3], n)
    top = np.array([0, n])
    return Hierarchy((inner, mid, top), np.array([1.0, 10.0, 100.0]),
                     ("node", "leaf", "top"))


@pytest.mark.parametrize("seed", range(8))
def test_every_pe_gets_one_rank_on_uneven_trees(seed):
    rng = np.random.default_rng(seed)
    dims = tuple(int(x) for x in rng.integers(3, 9, size=3))
    graph = _stencil(dims, (True, False, True))
    machine = _uneven_hierarchy(rng, graph.n)
    pe = coordinate_bisection(cartesian_grid(graph), machine)
    assert sorted(pe.tolist()) == list(range(graph.n))
    # inside a node its PEs take their ranks in rank order
    node = np.searchsorted(machine.bounds[0], pe, side="right")
    for g in np.unique(node):
        assert np.all(np.diff(pe[node == g]) > 0)


@pytest.mark.parametrize("dims,fanouts", [
    ((16, 16, 16), [4, 2, 4, 4, 32]),   # 8-core nodes, 4 a leaf, 4 leaves a middle
    ((8, 8, 8), [8, 4, 16]),
    ((32, 32), [4, 4, 4, 16]),
    ((8, 16, 8), [2, 4, 8, 16]),
])
def test_every_level_gets_boxes_of_least_surface(dims, fanouts):
    graph = _stencil(dims, (True,) * len(dims))
    machine = Hierarchy.homogeneous(fanouts, list(range(1, len(fanouts) + 1)))
    pe = coordinate_bisection(cartesian_grid(graph), machine)
    for level in range(machine.levels - 1):
        size = int(machine.group_sizes(level)[0])
        # 2: both directions of a pair are listed
        assert (_busiest_cut(graph, machine, pe, level)
                == 2 * _least_box_surface(dims, size))


@pytest.mark.parametrize("dims,periodic", [((4, 4), (True, True)),
                                           ((4, 4), (False, False)),
                                           ((2, 8), (False, True))])
def test_a_two_way_split_is_a_minimum_bisection(dims, periodic):
    graph = _stencil(dims, periodic)
    machine = Hierarchy.homogeneous([8, 2], [1, 10])
    pe = coordinate_bisection(cartesian_grid(graph), machine)
    u, v, w = graph.edges()
    best = min(float(w[np.isin(u, s) != np.isin(v, s)].sum())
               for s in itertools.combinations(range(16), 8))
    assert _busiest_cut(graph, machine, pe, 0) == best


def test_a_heavy_dimension_is_cut_last():
    # volume 8 across dimension 0's faces: a node of 8 keeps it inside
    graph = _stencil((8, 8, 8), (True,) * 3, weights=[8.0, 1.0, 1.0])
    machine = Hierarchy.homogeneous([8, 64], [1, 10])
    pe = coordinate_bisection(cartesian_grid(graph), machine)
    coords = np.array(np.unravel_index(np.arange(512), (8, 8, 8))).T
    for node in range(64):
        cells = coords[np.flatnonzero(pe // 8 == node)]
        assert len(np.unique(cells[:, 0])) == 8  # a whole line along dimension 0


def test_a_passed_deadline_gives_nothing():
    graph = _stencil((8, 8), (True, True))
    machine = Hierarchy.homogeneous([4, 16], [1, 10])
    assert coordinate_bisection(cartesian_grid(graph), machine,
                                time.perf_counter() - 1) is None


def test_sizes_must_agree():
    graph = _stencil((4, 4), (True, True))
    with pytest.raises(ValueError, match="16 cells but the machine 32"):
        coordinate_bisection(cartesian_grid(graph), Hierarchy.homogeneous([4, 8], [1, 2]))


@pytest.mark.parametrize("sizes,left", [([4, 3, 3, 3, 3], 7), ([3, 3, 3, 3, 4], 9),
                                        ([1, 1, 6], 2), ([5, 1], 5), ([2, 2, 2, 2], 4)])
def test_children_split_nearest_half_their_pes(sizes, left):
    from mapper.construction.boxes import _halves

    bounds = np.concatenate([[0], np.cumsum(sizes)])
    machine = Hierarchy((bounds, np.array([0, bounds[-1]])), np.array([1.0, 2.0]),
                        ("node", "top"))
    half, got = _halves(machine, np.array([0]), np.array([0]), np.array([len(sizes)]))
    assert got.tolist() == [left]
    assert bounds[half[0]] == left


def test_the_comparison_applies_the_boxes_when_they_are_best():
    from mapper import evaluate, map_processes
    from mapper.solve.candidates import BOXES

    # 32×32 periodic 5-point halo, 8-core nodes of 2 sockets, 4 a leaf, 4 leaves a
    # middle switch, 8 middles: topdown's J is 4 % above the boxes'
    graph = _stencil((32, 32), (True, True))
    machine = Hierarchy.homogeneous([4, 2, 4, 4, 8], [1, 2, 10, 20, 40])
    block = np.arange(graph.n)
    r = map_processes(graph, machine, "topdown+n10", baseline=block, objective="congestion",
                      links=LinkModel(congestion_levels=[1, 2, 3]))
    assert r.origin == BOXES
    assert r.candidates[BOXES] < r.candidates["topdown+n10"]
    assert r.objective == pytest.approx(evaluate(graph, machine, r.mapping).objective)
    assert any("32x32 periodic grid" in note for note in r.notes)
    for level, size in ((1, 8), (2, 32), (3, 128)):  # least box surfaces, both ways
        assert (_busiest_cut(graph, machine, r.mapping, level)
                == 2 * _least_box_surface((32, 32), size))
    # the same pattern with its ranks renumbered is no grid in rank order
    perm = np.random.default_rng(0).permutation(graph.n)
    u, v, w = graph.edges()
    from mapper import CommGraph

    scrambled = CommGraph.from_edges(perm[u], perm[v], w, n=graph.n)
    r = map_processes(scrambled, machine, "topdown+n10", baseline=block, objective="congestion",
                      links=LinkModel(congestion_levels=[1, 2, 3]))
    assert BOXES not in r.candidates


def test_without_a_baseline_the_lower_j_of_the_algorithm_and_the_boxes_is_returned():
    from mapper import evaluate, map_processes
    from mapper.solve.candidates import BOXES

    graph = _stencil((32, 32), (True, True))
    machine = Hierarchy.homogeneous([4, 2, 4, 4, 8], [1, 2, 10, 20, 40])
    r = map_processes(graph, machine, "topdown+n10")
    assert r.origin == BOXES
    assert r.objective == pytest.approx(r.candidates[BOXES])
    assert r.candidates[BOXES] < r.candidates["topdown+n10"]
    assert r.objective == pytest.approx(evaluate(graph, machine, r.mapping).objective)
    # where the boxes are no better the algorithm's result stays (a tie on a 4×4 torus)
    small = _stencil((4, 4), (True, True))
    r = map_processes(small, Hierarchy.homogeneous([4, 4], [1, 10]), "topdown+n10")
    assert r.origin == "algorithm"
    assert r.objective <= r.candidates[BOXES]


def _reference_bisection(grid, machine, share_faces=False):
    """The bisection one run at a time with numpy sorts (the compiled kernel's
    reference): rank → PE, innermost groups in rank order; with ``share_faces`` equal
    planes go first to a dimension the run spans whole."""
    from mapper.construction.boxes import _halves

    n = machine.n
    coords = grid.coordinates()
    dims = np.asarray(grid.dims)
    mapping = np.empty(n, dtype=np.int64)
    stack = [(machine.levels - 1, 0, 1, np.arange(n))]
    while stack:
        level, first, end, cells = stack.pop()
        while end - first == 1 and level > 0:
            lo, hi = machine.bounds[level][first], machine.bounds[level][first + 1]
            first, end = np.searchsorted(machine.bounds[level - 1], [lo, hi])
            level -= 1
        if end - first == 1:
            mapping[np.sort(cells)] = machine.bounds[0][first] + np.arange(len(cells))
            continue
        half, left = _halves(machine, np.array([level]), np.array([first]),
                             np.array([end]))
        half, left = int(half[0]), int(left[0])
        c = coords[cells]
        extent = c.max(axis=0) - c.min(axis=0) + 1
        wrapped = np.asarray(grid.periodic) & (extent == dims)
        cost = np.where(extent > 1, grid.face_weight * np.where(wrapped, 2, 1) / extent,
                        np.inf)
        k = int(np.argmin(cost))
        if share_faces:
            tied = np.flatnonzero(cost == cost[k])
            spanned = tied[extent[tied] == dims[tied]]
            k = int(spanned[0]) if len(spanned) else k
        order = np.lexsort((cells, c[:, k]))
        stack.append((level, half, end, cells[order[left:]]))
        stack.append((level, first, half, cells[order[:left]]))
    return mapping


@pytest.mark.parametrize("share_faces", [False, True])
@pytest.mark.parametrize("seed", range(10))
def test_the_compiled_depths_equal_the_one_run_at_a_time_reference(seed, share_faces):
    rng = np.random.default_rng(100 + seed)
    d = int(rng.integers(2, 4))
    dims = tuple(int(x) for x in rng.integers(2, 9 if d == 3 else 20, size=d))
    periodic = tuple(bool(x) for x in rng.integers(0, 2, size=d))
    graph = _stencil(dims, periodic, weights=list(rng.integers(1, 4, size=d).astype(float)))
    grid = cartesian_grid(graph)
    if grid is None:  # a dimension of 2 with no pair both ways: not every draw is a grid
        pytest.skip("not a grid")
    machine = (_uneven_hierarchy(rng, graph.n) if seed % 2
               else Hierarchy.homogeneous([2, 2, graph.n // 4], [1, 2, 3])
               if graph.n % 4 == 0 else _uneven_hierarchy(rng, graph.n))
    assert np.array_equal(coordinate_bisection(grid, machine, share_faces=share_faces),
                          _reference_bisection(grid, machine, share_faces))


def test_shared_faces_give_every_node_both_sides_of_its_slab():
    # a periodic 8×4×4 halo, nodes of 8, leaves of 4 nodes, 2 leaves a middle switch:
    # the leaves get 2×4×4 slabs; between the equal planes inside a slab (across x:
    # one plane of 16 faces; across y or z, spanned whole and periodic: two of 8) the
    # plain cut takes x (1×2×4 nodes on one face of the slab each: half of them talk
    # across the middle switch, half to the other leaf of theirs), share_faces y or z
    # (2×2×2 nodes: every node half and half)
    graph = _stencil((8, 4, 4), (True,) * 3)
    machine = Hierarchy.homogeneous([8, 4, 2, 2], [1, 10, 100, 1000])
    grid = cartesian_grid(graph)
    coords = np.array(np.unravel_index(np.arange(128), (8, 4, 4))).T
    u, v, _ = graph.edges()
    for share, x_extent in ((False, 1), (True, 2)):
        pe = coordinate_bisection(grid, machine, share_faces=share)
        node = pe // 8
        for g in range(16):
            assert np.ptp(coords[node == g, 0]) + 1 == x_extent
        # per node, the links its messages cross (two per level: node, leaf, middle)
        links = sum(2 * ((pe[u] // size) != (pe[v] // size)) for size in (8, 32, 64))
        far = np.bincount(node[u], links, 16) + np.bincount(node[v], links, 16)
        assert (far.min() == far.max()) == share
        # the same surface at every level either way
        for level in range(machine.levels - 1):
            size = int(machine.group_sizes(level)[0])
            assert _busiest_cut(graph, machine, pe, level) == 2 * _least_box_surface(
                (8, 4, 4), size)
