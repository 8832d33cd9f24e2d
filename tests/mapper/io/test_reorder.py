"""Rank reordering (mapper.io.reorder): permutation, composition, files; the group graph
(the seed's output for MPI_Dist_graph_create) against matching_tree and brute force."""

from __future__ import annotations

import itertools
import tracemalloc

import numpy as np
import pytest

from mapper.construction.matching import matching, matching_tree
from mapper.io.reorder import (
    MAX_WEIGHT,
    ReorderError,
    comm_graph_dist_graph_text,
    dist_graph_text,
    format_reorder,
    group_graph_text,
    group_tree,
    parse_group_graph,
    parse_reorder,
    rank_reorder,
)
from mapper.model.graph import CommGraph
from mapper.model.machine import Hierarchy
from slurm_plugin.machine.distribution import Distribution, slurm_placement
from slurm_plugin.machine.layout import build_layout
from slurm_plugin.slurm.allocation import Allocation
from slurm_plugin.slurm.topology import NodeShape, SwitchTree


def test_hand_example():
    # mapping: rank k -> PE; launcher (block): rank r starts on PE r
    mapping = np.array([2, 0, 3, 1])
    reorder = rank_reorder(mapping, np.arange(4))
    # PE 0 holds launcher rank 0, which must become rank 1 (mapping[1] == 0), ...
    assert reorder.tolist() == [1, 3, 0, 2]
    # a cyclic launcher over two nodes of two PEs: ranks 0..3 on PEs 0, 2, 1, 3
    assert rank_reorder(mapping, np.array([0, 2, 1, 3])).tolist() == [1, 0, 3, 2]


def test_permutation_and_composition_on_random_cases():
    rng = np.random.default_rng(5)
    for _ in range(50):
        n = int(rng.integers(1, 200))
        pes = rng.choice(3 * n, n, replace=False)  # a job using some of a node's PEs
        mapping, launcher = rng.permutation(pes), rng.permutation(pes)
        reorder = rank_reorder(mapping, launcher)
        assert sorted(reorder.tolist()) == list(range(n))
        # the process started as r becomes rank reorder[r] and stays on launcher[r]
        pe_of_new = np.empty(n, dtype=np.int64)
        pe_of_new[reorder] = launcher
        assert np.array_equal(pe_of_new, mapping)


@pytest.mark.parametrize("nodes", ["block", "cyclic"])
def test_composition_with_slurm_placements(nodes):
    layout = build_layout(Allocation("1", ("a", "b", "c"), (4, 4, 2), 1), NodeShape(2, 2),
                          SwitchTree(), [1, 10, 100])
    launcher = slurm_placement(layout, Distribution(nodes, "cyclic"))
    mapping = np.random.default_rng(1).permutation(layout.n)
    reorder = rank_reorder(mapping, launcher)
    assert np.array_equal(mapping[reorder], launcher)


def test_mismatched_placements_are_refused():
    with pytest.raises(ReorderError, match="3 ranks, the launcher's placement 2"):
        rank_reorder(np.arange(3), np.arange(2))
    with pytest.raises(ReorderError, match="mapping puts two ranks on one PE"):
        rank_reorder(np.array([0, 0, 1]), np.arange(3))
    with pytest.raises(ReorderError, match="rank 2 on PE 7, which the mapping does not"):
        rank_reorder(np.arange(3), np.array([1, 0, 7]))


def test_reorder_file_round_trip_and_errors():
    reorder = np.array([1, 3, 0, 2])
    text = format_reorder(reorder)
    assert text == "1\n3\n0\n2\n"
    assert parse_reorder(text, 4).tolist() == [1, 3, 0, 2]
    assert parse_reorder("# header\n1\n\n0\n", 2, "r").tolist() == [1, 0]
    for bad, n, msg in [("1\nx\n", None, "r:2: expected a rank, got 'x'"),
                        ("1\n0\n", 3, "r: 2 ranks, the job has 3"),
                        ("1\n0\n\n# c\n2\n", 2, "r:5: more than 2 ranks, the job has 2"),
                        ("0\n2\n", None, "r:2: rank 2 out of range 0..1"),
                        ("1\n# c\n0\n1\n", None, "r:4: rank 1 again (first on line 1)")]:
        with pytest.raises(ReorderError) as exc:
            parse_reorder(bad, n, "r")
        assert str(exc.value) == msg


def test_a_huge_reorder_file_stops_at_the_first_rank_too_many():
    """Issue 28: every line was split before the count was compared with the job's."""
    text = "1\n0\n" * 2_500_000
    tracemalloc.start()
    try:
        with pytest.raises(ReorderError, match=r"^big:5: more than 4 ranks, the job has 4"):
            parse_reorder(text, 4, "big")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 << 20, f"{peak} bytes at the peak"


# the seed's Dist_graph file for its example (§IV.C), the garbled lines read as the
# neighbours the text explains: pairs 0-6, 1-7, 2-5, 3-4 and the edges 0-7, 2-4, 1-5
SEED_DIST_GRAPH = "8\n2 6 7\n2 5 7\n2 4 5\n1 4\n2 2 3\n2 1 2\n1 0\n2 0 1\n"


def test_seed_dist_graph_file():
    from tests.mapper.construction.test_matching import TABLE_I

    graph = CommGraph.from_matrix(TABLE_I, directed=False)
    u, v = matching_tree(graph, Hierarchy.homogeneous([2, 2, 2], [1, 2, 3]))
    assert dist_graph_text(8, u, v) == SEED_DIST_GRAPH


def test_dist_graph_of_a_comm_graph():
    # a path 0-1-2 and an isolated rank 3; repeated and self edges collapse
    assert dist_graph_text(4, np.array([0, 1, 1, 2]), np.array([1, 2, 0, 2])) == \
        "4\n1 1\n2 0 2\n1 1\n0\n"
    g = CommGraph.from_edges([0, 1, 2], [1, 2, 0], [5.0, 1.0, 2.0], n=4)
    assert comm_graph_dist_graph_text(g) == "4\n2 1 2\n2 0 2\n2 0 1\n0\n"
    with pytest.raises(ReorderError, match="outside 0..1"):
        dist_graph_text(2, np.array([0]), np.array([2]))


# -- the group graph (the seed's output for MPI_Dist_graph_create, §IV.C, Fig. 7) -------

# the seed's file with the weights of Table I: pairs 0-6 (2511), 1-7 (1412), 2-5 (1584),
# 3-4 (1995), between pairs 0-7 (223, the first of the tie with C61), 2-4 (251), between
# the halves 1-5 (28)
SEED_GROUP_GRAPH = ("8\n2 6 2511 7 223\n2 5 28 7 1412\n2 4 251 5 1584\n1 4 1995\n"
                    "2 2 251 3 1995\n2 1 28 2 1584\n1 0 2511\n2 0 223 1 1412\n")


def _content(text):
    return "".join(line + "\n" for line in text.splitlines() if not line.startswith("#"))


def _edge_set(u, v):
    return set(zip(np.asarray(u).tolist(), np.asarray(v).tolist(), strict=True))


def test_seed_group_graph_file():
    from tests.mapper.construction.test_matching import TABLE_I

    graph = CommGraph.from_matrix(TABLE_I, directed=False)
    machine = Hierarchy.homogeneous([2, 2, 2], [1, 2, 3])
    u, v, w = group_tree(graph, machine, matching(graph, machine))
    text = group_graph_text(8, u, v, w)
    assert _content(text) == SEED_GROUP_GRAPH
    assert text.startswith("# ")  # says what it is
    assert _edge_set(u, v) == _edge_set(*matching_tree(graph, machine))
    degrees, nbrs, weights = parse_group_graph(text, 8)
    assert degrees.tolist() == [2, 2, 2, 1, 2, 2, 1, 2]
    assert nbrs[:2].tolist() == [6, 7] and weights[:2].tolist() == [2511, 223]


MACHINES = [Hierarchy.homogeneous(f, [1.0] * len(f))
            for f in ([2, 3], [2, 4], [3, 2], [4, 2], [2, 2, 2], [3, 3], [5], [1, 4],
                      [2, 1, 3], [4, 4])]
MACHINES += [Hierarchy.from_tree([3, 2, 3], [1, 2]), Hierarchy.from_tree([2, 4, 2], [1, 2]),
             Hierarchy.from_tree([[2, 2], [3, 1, 1]], [1, 4, 10]),
             Hierarchy.from_tree([[[2, 2], [2]], [[1, 3]]], [1, 2, 3, 4])]


def _sparse_graph(rng, n, density):
    a = rng.integers(1, 5, (n, n)) * (rng.random((n, n)) < density)  # many ties
    a = np.triu(a, 1)
    return CommGraph.from_matrix(a + a.T, directed=False)


@pytest.mark.parametrize("machine", MACHINES, ids=lambda m: "-".join(
    str(len(b) - 1) for b in m.bounds))
def test_group_tree_of_the_matching_is_matching_tree(machine):
    """For the matching's own placement the file holds matching_tree's edges, ends in
    the same order, on sparse graphs with many ties and groups that do not talk."""
    rng = np.random.default_rng(machine.n)
    for density in (0.0, 0.1, 0.3, 0.7, 1.0):
        for _ in range(10):
            graph = _sparse_graph(rng, machine.n, density)
            u, v, w = group_tree(graph, machine, matching(graph, machine))
            assert _edge_set(u, v) == _edge_set(*matching_tree(graph, machine))
            dense = graph.to_csr().toarray()
            assert np.array_equal(w, dense[u, v])


def _brute_group_graph(weights, bounds_by_level, pe_of_rank):
    """The seed's group graph, from scratch: for every group of every level, its children
    (level-0 groups: their PEs) as rank sets; between every two children the heaviest
    weight over all rank pairs; the children joined by a maximum spanning tree over those
    weights, found by trying every spanning tree (k^(k-2) of them).  Returns per group
    the best total and the child pairs' heaviest weights."""
    rank_on = {int(p): r for r, p in enumerate(pe_of_rank)}
    groups = []
    for level, bounds in enumerate(bounds_by_level):
        child_bounds = bounds_by_level[level - 1] if level else np.arange(bounds[-1] + 1)
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            kids = [[rank_on[p] for p in range(a, b) if p in rank_on]
                    for a, b in zip(child_bounds[:-1], child_bounds[1:], strict=True)
                    if lo <= a and b <= hi]
            kids = [k for k in kids if k]
            heaviest = {(i, j): max(weights[x][y] for x in kids[i] for y in kids[j])
                        for i in range(len(kids)) for j in range(len(kids)) if i < j}
            best = max((sum(heaviest[e] for e in tree)
                        for tree in _spanning_trees(len(kids))), default=0)
            groups.append((kids, heaviest, best))
    return groups


def _spanning_trees(k):
    pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
    for tree in itertools.combinations(pairs, k - 1):
        parent = list(range(k))

        def find(x, parent=parent):
            while parent[x] != x:
                x = parent[x]
            return x
        ok = True
        for i, j in tree:
            ri, rj = find(i), find(j)
            if ri == rj:
                ok = False
                break
            parent[ri] = rj
        if ok:
            yield tree


@pytest.mark.parametrize("fanouts", [[2, 2, 2], [2, 2, 2, 2], [3, 2], [2, 3], [4, 2]])
def test_group_tree_against_brute_force(fanouts):
    """Any placement (not only the matching's): every group's children are joined by
    edges of their heaviest rank pair (the weight brute force finds, both ends in the two
    children), as many as a spanning tree needs and as heavy in total as the best one."""
    machine = Hierarchy.homogeneous(fanouts, [1.0] * len(fanouts))
    rng = np.random.default_rng(sum(fanouts))
    n = machine.n
    for density in (0.2, 0.6, 1.0):
        for _ in range(8):
            a = np.triu(rng.integers(1, 1000, (n, n)) * (rng.random((n, n)) < density), 1)
            weights = (a + a.T).tolist()
            graph = CommGraph.from_matrix(np.array(weights), directed=False)
            mapping = rng.permutation(n)
            text = group_graph_text(n, *group_tree(graph, machine, mapping))
            degrees, nbrs, wts = parse_group_graph(text, n)
            own = np.repeat(np.arange(n), degrees)
            edges = {(int(p), int(q)): int(x) for p, q, x in zip(own, nbrs, wts, strict=True)
                     if p < q}
            assert len(edges) == n - 1  # a spanning tree of the ranks
            seen = 0
            for kids, heaviest, best in _brute_group_graph(weights, machine.bounds, mapping):
                side = {r: i for i, kid in enumerate(kids) for r in kid}
                # this group's edges join two of its children (a deeper group's edge
                # joins ranks of one child, another group's ranks outside it)
                mine = [(p, q, x) for (p, q), x in edges.items()
                        if p in side and q in side and side[p] != side[q]]
                assert len(mine) == len(kids) - 1
                total = 0
                for p, q, x in mine:
                    i, j = sorted((side[p], side[q]))
                    assert x == heaviest[i, j] == weights[p][q]
                    total += x
                assert total == best
                seen += len(mine)
            assert seen == n - 1


def test_group_graph_weights_are_mpi_ints():
    # volumes over 2^31 - 1 are scaled down; a volume that rounds to 0 is 1; 0 stays 0
    text = group_graph_text(3, np.array([0, 1]), np.array([1, 2]), np.array([8e12, 0.2]))
    assert _content(text) == f"3\n1 1 {MAX_WEIGHT}\n2 0 {MAX_WEIGHT} 2 1\n1 1 1\n"
    text = group_graph_text(3, np.array([0, 1]), np.array([1, 2]), np.array([7.0, 0.0]))
    assert _content(text) == "3\n1 1 7\n2 0 7 2 0\n1 1 0\n"
    assert group_graph_text(1, np.array([]), np.array([]), np.array([])).endswith("\n1\n0\n")
    with pytest.raises(ReorderError, match="outside 0..1"):
        group_graph_text(2, np.array([0]), np.array([2]), np.array([1.0]))


@pytest.mark.parametrize("text,n,message", [
    ("", 2, "g: empty, expected the number of processes"),
    ("3\n", 2, "g:1: 3 processes, the communicator has 2"),
    ("2 1\n", 2, "g:1: expected the number of processes, got '2 1'"),
    ("2\n1 1 5\n", 2, "g: 1 process lines, the file says 2"),
    ("2\n1 1 5\n1 0\n", 2, "g:3: process 1: degree 1 with 1 numbers after it"),  # truncated
    ("2\n1 1 5\n1 0 5\n0\n", 2, "g:4: more than 2 processes"),
    ("2\n1 2 5\n1 0 5\n", 2, "g:2: process 0: neighbour 2 out of range 0..1"),
    ("2\n1 0 5\n1 0 5\n", 2, "g:2: process 0 lists itself"),
    ("2\n1 1 5\n1 0 6\n", 2, "g:2: process 0 lists 1 (weight 5) but process 1 does not"),
    ("2\n1 1 5\n0\n", 2, "g:2: process 0 lists 1 (weight 5) but process 1 does not"),
    ("3\n2 1 5 1 5\n1 0 5\n0\n", 3, "g:2: process 0 lists 1 twice"),
    ("2\n1 1 x\n1 0 5\n", 2, "g:2: expected integers"),
    (f"2\n1 1 {MAX_WEIGHT + 1}\n1 0 5\n", 2, "g:2: process 0: weight 2147483648 out of"),
])
def test_group_graph_file_errors(text, n, message):
    with pytest.raises(ReorderError) as exc:
        parse_group_graph(text, n, "g")
    assert str(exc.value).startswith(message)


# -- the whole-array implementations against the loops they replaced ------------------
# (mapper.io.reorder before it was vectorised: one Python line per process in the writers,
# one Prim call per group in group_tree; kept here as the reference)

def _ref_rank_reorder(mapping, launcher):
    mapping = np.asarray(mapping, dtype=np.int64)
    launcher = np.asarray(launcher, dtype=np.int64)
    n = len(mapping)
    if len(launcher) != n:
        raise ReorderError(f"the mapping has {n} ranks, the launcher's placement "
                           f"{len(launcher)}")
    for name, arr in (("mapping", mapping), ("launcher placement", launcher)):
        if len(np.unique(arr)) != n:
            raise ReorderError(f"the {name} puts two ranks on one PE")
    order = np.argsort(mapping)
    pes = mapping[order]
    pos = np.searchsorted(pes, launcher)
    pos = np.minimum(pos, n - 1)
    if n and np.any(pes[pos] != launcher):
        r = int(np.flatnonzero(pes[pos] != launcher)[0])
        raise ReorderError(f"the launcher starts rank {r} on PE {int(launcher[r])}, "
                           f"which the mapping does not use")
    return order[pos].astype(np.int64)


def _ref_dist_graph_text(n, src, dst):
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    keep = src != dst
    a = np.concatenate([src[keep], dst[keep]])
    b = np.concatenate([dst[keep], src[keep]])
    pairs = np.unique(np.column_stack([a, b]), axis=0) if len(a) else np.zeros((0, 2), int)
    starts = np.searchsorted(pairs[:, 0], np.arange(n + 1))
    lines = [str(n)]
    for p in range(n):
        nbrs = pairs[starts[p]:starts[p + 1], 1].tolist()
        lines.append(" ".join(map(str, [len(nbrs), *nbrs])))
    return "\n".join(lines) + "\n"


def _ref_group_graph_text(n, src, dst, weight):
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    weight = np.asarray(weight, dtype=np.float64)
    top = float(weight.max()) if len(weight) else 0.0
    scaled = np.rint(weight * (MAX_WEIGHT / top if top > MAX_WEIGHT else 1.0))
    iw = np.where(weight > 0, np.clip(scaled, 1, MAX_WEIGHT), 0).astype(np.int64)
    a = np.concatenate([src, dst])
    b = np.concatenate([dst, src])
    ww = np.concatenate([iw, iw])
    order = np.lexsort((b, a))
    a, b, ww = a[order], b[order], ww[order]
    starts = np.searchsorted(a, np.arange(n + 1))
    lines = ["# rankmap dist_graph.groups: the groups' topology graph (Sudhakar et al., "
             "ICACC 2015, Fig. 7)",
             "# n; then per process: degree, then 'neighbour weight' pairs", str(n)]
    for p in range(n):
        lo, hi = starts[p], starts[p + 1]
        pairs = np.column_stack([b[lo:hi], ww[lo:hi]]).ravel().tolist()
        lines.append(" ".join(map(str, [hi - lo, *pairs])))
    return "\n".join(lines) + "\n"


def _ref_group_tree(graph, machine, mapping):
    mapping = np.asarray(mapping, dtype=np.int64)
    eu, ev, ew = graph.edges()
    heavy = ew > 0
    a = np.concatenate([eu[heavy], ev[heavy]])
    b = np.concatenate([ev[heavy], eu[heavy]])
    w = np.concatenate([ew[heavy], ew[heavy]])
    by_pe = np.argsort(mapping, kind="stable")
    src, dst, weight = [], [], []
    for level in range(machine.levels):
        parent = machine.group_ids[mapping, level].astype(np.int64)
        child = (machine.group_ids[mapping, level - 1].astype(np.int64) if level
                 else mapping)
        kids, first_at = np.unique(child[by_pe], return_index=True)
        first = by_pe[first_at]
        kid_parent = parent[first]
        cross = (parent[a] == parent[b]) & (child[a] != child[b])
        ca, cb, ra, rb, wc = child[a[cross]], child[b[cross]], a[cross], b[cross], w[cross]
        order = np.lexsort((mapping[rb], mapping[ra], -wc, cb, ca))
        ca, cb, ra, rb, wc = ca[order], cb[order], ra[order], rb[order], wc[order]
        lead = np.ones(len(ca), dtype=bool)
        lead[1:] = (ca[1:] != ca[:-1]) | (cb[1:] != cb[:-1])
        pair = (np.searchsorted(kids, ca[lead]), np.searchsorted(kids, cb[lead]),
                wc[lead], ra[lead], rb[lead])
        ptr = np.searchsorted(pair[0], np.arange(len(kids) + 1))
        starts = np.flatnonzero(np.r_[True, kid_parent[1:] != kid_parent[:-1]])
        for lo, hi in zip(starts.tolist(), [*starts[1:].tolist(), len(kids)], strict=True):
            if hi - lo > 1:
                _ref_prim(lo, hi, first, pair, ptr, src, dst, weight)
    return (np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64),
            np.array(weight, dtype=np.float64))


def _ref_prim(lo, hi, first, pair, ptr, src, dst, weight):
    k = hi - lo
    _, to, wts, ends_u, ends_v = pair
    in_tree = np.zeros(k, dtype=bool)
    value = np.zeros(k)
    since = np.zeros(k, dtype=np.int64)
    end_u = np.full(k, int(first[lo]), dtype=np.int64)
    end_v = first[lo:hi].astype(np.int64)

    def relax(t, added):
        sl = slice(ptr[lo + t], ptr[lo + t + 1])
        c = to[sl] - lo
        better = ~in_tree[c] & (wts[sl] > value[c])
        c = c[better]
        value[c], since[c] = wts[sl][better], added
        end_u[c], end_v[c] = ends_u[sl][better], ends_v[sl][better]

    in_tree[0] = True
    relax(0, 0)
    for added in range(1, k):
        free = np.where(in_tree, -1.0, value)
        tied = np.flatnonzero(free == free.max())
        c = int(tied[np.argmin(since[tied])])
        src.append(int(end_u[c]))
        dst.append(int(end_v[c]))
        weight.append(float(value[c]))
        in_tree[c] = True
        relax(c, added)


def _random_tree(rng, depth, wide):
    """Nested lists for Hierarchy.from_tree: fan-outs 1..5, now and then one of
    ``wide`` (a group of many children beside small ones), leaves of 1..9 PEs."""
    if depth == 0:
        return int(rng.integers(1, 10))
    fan = int(rng.integers(1, 6)) if rng.random() > 0.15 else wide
    return [_random_tree(rng, depth - 1, wide) for _ in range(fan)]


def _random_case(rng):
    while True:  # at most 400 PEs
        depth = int(rng.integers(0, 4))
        machine = Hierarchy.from_tree(_random_tree(rng, depth, int(rng.integers(6, 40))),
                                      list(range(1, depth + 2)))
        if machine.n <= 400:
            break
    # a job on some of the PEs: children that hold no rank, groups of one child
    n = int(rng.integers(1, machine.n + 1)) if rng.random() < 0.5 else machine.n
    mapping = rng.choice(machine.n, n, replace=False)
    kind = rng.integers(4)
    m = int(rng.integers(0, 4 * n + 1))
    u, v = rng.integers(0, n, m), rng.integers(0, n, m)
    if kind == 0:  # few distinct weights: ties everywhere
        w = rng.integers(1, 4, m).astype(float)
    elif kind == 1:  # all equal
        w = np.ones(m)
    elif kind == 2:  # volumes over MPI's ints, and fractions
        w = rng.choice([0.25, 3.0, 5e9, 7e12], m)
    else:
        w = rng.random(m) * 100
    keep = u != v
    graph = CommGraph.from_edges(u[keep], v[keep], w[keep], n=n)
    return machine, mapping, graph


def test_vectorised_outputs_equal_the_loops():
    """group_tree's edges (same ends first, same order, same dtypes), both files'
    texts: byte for byte the loop implementations', on random uneven machines, partial
    placements and graphs with ties."""
    rng = np.random.default_rng(29)
    shapes = set()
    for _ in range(400):
        machine, mapping, graph = _random_case(rng)
        shapes.add(machine.levels)
        got = group_tree(graph, machine, mapping)
        want = _ref_group_tree(graph, machine, mapping)
        for g, r in zip(got, want, strict=True):
            assert g.dtype == r.dtype and np.array_equal(g, r)
        n = graph.n
        assert group_graph_text(n, *got) == _ref_group_graph_text(n, *want)
        assert comm_graph_dist_graph_text(graph) == _ref_dist_graph_text(n, *graph.edges()[:2])
        # repeated edges, self edges, either direction
        m = int(rng.integers(0, 3 * n + 1))
        src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
        assert dist_graph_text(n, src, dst) == _ref_dist_graph_text(n, src, dst)
    assert shapes == {1, 2, 3, 4}
    for _ in range(50):  # the reorder file (its words in any range)
        words = rng.integers(-10 ** int(rng.integers(1, 19)), 10 ** int(rng.integers(1, 19)),
                             int(rng.integers(0, 100)))
        words = np.r_[words, 0, 9, 10, -1, -10, np.iinfo(np.int64).max]
        assert format_reorder(words) == "".join(f"{k}\n" for k in words.tolist())
    for n in (0, 1):
        empty = np.zeros(0, dtype=np.int64)
        assert rank_reorder(empty, empty).tolist() == []
        graph = CommGraph.from_edges(empty, empty, np.zeros(0), n=n)
        machine = Hierarchy.homogeneous([2, 2], [1.0, 2.0])
        for g, r in zip(group_tree(graph, machine, np.arange(n)),
                        _ref_group_tree(graph, machine, np.arange(n)), strict=True):
            assert g.dtype == r.dtype and np.array_equal(g, r)
        assert dist_graph_text(n, empty, empty) == _ref_dist_graph_text(n, empty, empty)
        assert group_graph_text(n, empty, empty, np.zeros(0)) == \
            _ref_group_graph_text(n, empty, empty, np.zeros(0))


@pytest.mark.parametrize("spread", [1, 3, 10 ** 6])
def test_rank_reorder_equals_the_sort(spread):
    """PEs numbered densely (a table of new ranks) or sparsely (a sort): the reorder of
    the sort it replaced, and the same error on the same rank."""
    rng = np.random.default_rng(spread)
    for _ in range(100):
        n = int(rng.integers(1, 300))
        pes = rng.choice(3 * n, n, replace=False) * spread
        mapping, launcher = rng.permutation(pes), rng.permutation(pes)
        if rng.random() < 0.3:  # a PE the mapping does not use, or one twice
            launcher[rng.integers(n)] = (3 * n + int(rng.integers(5))) * spread
        if rng.random() < 0.1:
            mapping[rng.integers(n)] = mapping[0]
        try:
            want = _ref_rank_reorder(mapping, launcher)
        except ReorderError as exc:
            with pytest.raises(ReorderError) as got:
                rank_reorder(mapping, launcher)
            assert str(got.value) == str(exc)
        else:
            got = rank_reorder(mapping, launcher)
            assert got.dtype == np.int64 and np.array_equal(got, want)
