"""Ties toward what every launcher can launch (issue 49 item 6): of placements with the
same J and the same link loads, one that keeps every host's ranks in one block wins
(MPICH's and Intel MPI's mpiexec take only such a placement); a lower J, or other link
loads, is never traded for it."""

import itertools

import numpy as np
import pytest

from mapper import CommGraph, Hierarchy, evaluate, map_processes
from mapper.model.machine import host_contiguous
from mapper.objectives.congestion import group_cuts
from mapper.solve import never_worse
from mapper.solve.candidates import HOSTS_BLOCK, HOSTS_ROTATED
from mapper.solve.link_model import LinkModel
from mapper.solve.result import MappingResult

NAMES = {2: ("node", "root"), 3: ("socket", "node", "root")}


def machine(*fan: int) -> Hierarchy:
    return Hierarchy.homogeneous(fan, [1, 10, 100][:len(fan)], NAMES[len(fan)])


def ring(n: int) -> CommGraph:
    return CommGraph.from_edges(np.arange(n), (np.arange(n) + 1) % n, n=n)


def block_cyclic(cores: int, sockets: int, nodes: int) -> np.ndarray:
    """Slurm's default: node after node, a node's ranks dealt round-robin to its
    sockets (PEs numbered node, socket, core)."""
    j = np.arange(cores * sockets)
    inside = (j % sockets) * cores + j // sockets
    return np.concatenate([k * cores * sockets + inside for k in range(nodes)])


def tree_links(h: Hierarchy) -> LinkModel:
    return LinkModel(congestion_levels=tuple(range(h.level_names.index("node"),
                                                   h.levels - 1)))


def without_the_tie_break(monkeypatch):
    """The solver as it was: no host level known, so no preference, no whole-host
    candidates."""
    monkeypatch.setattr(never_worse, "host_level", lambda machine, levels: None)


def sorted_loads(graph, h, mapping):
    return [np.sort(group_cuts(graph, h, mapping, lv)) for lv in tree_links(h).congestion_levels]


def test_host_contiguity_asks_only_that_each_hosts_ranks_be_one_block():
    h = Hierarchy.from_tree([[3, 2], [2, 1]], [1, 4, 9])  # uneven: 5 + 3 PEs
    assert host_contiguous(h, np.arange(8), 1)
    assert host_contiguous(h, np.array([5, 6, 7, 0, 1, 2, 3, 4]), 1)  # hosts in any order
    assert host_contiguous(h, np.array([7, 5, 6, 4, 3, 0, 2, 1]), 1)  # PEs in any order
    assert not host_contiguous(h, np.array([0, 5, 1, 2, 3, 4, 6, 7]), 1)  # host 0 twice
    assert not host_contiguous(h, np.array([0, 1, 2, 3, 5, 6, 7, 4]), 1)  # wraps around
    # socket level: the same mapping is read per socket
    assert not host_contiguous(h, np.array([0, 3, 1, 2, 4, 5, 6, 7]), 0)


@pytest.mark.parametrize("fan, winner_origin, variant", [
    ((4, 2, 3), "algorithm", HOSTS_ROTATED),  # the winner's ranks rotated by two
    ((2, 2, 3), "baseline+n10", None),  # the polished baseline was a candidate already
])
def test_a_ring_gets_whole_hosts_at_the_same_j_and_link_loads(monkeypatch, fan, winner_origin,
                                                              variant):
    h = machine(*fan)
    graph, base, links = ring(h.n), block_cyclic(*fan), tree_links(h)
    with monkeypatch.context() as m:
        without_the_tie_break(m)
        before = map_processes(graph, h, "topdown+n10", baseline=base, links=links)
    assert not host_contiguous(h, before.mapping, 1)
    # a placement with every host's ranks in one block and exactly the same J: the
    # winner with its ranks rotated onto the start of a host's block (a ring's symmetry)
    node = h.group_ids[before.mapping, 1]
    shift = int(np.flatnonzero(node != np.roll(node, 1))[0])
    rotated = np.roll(before.mapping, -shift)
    assert host_contiguous(h, rotated, 1)
    assert evaluate(graph, h, rotated).objective == before.objective

    after = map_processes(graph, h, "topdown+n10", baseline=base, links=links)
    assert host_contiguous(h, after.mapping, 1)
    assert after.objective == before.objective < evaluate(graph, h, base).objective
    for a, b in zip(sorted_loads(graph, h, after.mapping),
                    sorted_loads(graph, h, before.mapping), strict=True):
        assert np.array_equal(a, b)
    assert after.origin == winner_origin
    assert any("keeps every host's ranks in one block" in n for n in after.notes)
    if variant is not None:
        assert after.candidates[variant] == before.objective
        assert any(n.startswith(variant) for n in after.notes)


@pytest.mark.parametrize("fan, spec, origin", [
    ((2, 3), "stencil2d:periodic", "baseline+n10"),  # 6 ranks: the least J by brute force
    ((4, 3), "stencil3d:periodic", HOSTS_BLOCK),  # rank r on PE r ties the winner
])
def test_a_periodic_stencil_gets_whole_hosts_at_the_same_least_j(monkeypatch, fan, spec,
                                                                 origin):
    from slurm_plugin.profiles.generators import generate

    h = machine(*fan)
    cores, nodes = fan
    graph, links = generate(spec, h.n), tree_links(h)
    cyclic = (np.arange(h.n) % nodes) * cores + np.arange(h.n) // nodes  # Slurm's cyclic
    with monkeypatch.context() as m:
        without_the_tie_break(m)
        before = map_processes(graph, h, "topdown+n10", baseline=cyclic, links=links)
    assert not host_contiguous(h, before.mapping, 0)
    assert evaluate(graph, h, np.arange(h.n)).objective == before.objective
    if h.n <= 8:
        u, v, w = graph.edges()
        perms = np.array(list(itertools.permutations(range(h.n))))
        d = h.distance(np.arange(h.n)[:, None], np.arange(h.n)[None, :])
        assert before.objective == (d[perms[:, u], perms[:, v]] * w).sum(axis=1).min()

    after = map_processes(graph, h, "topdown+n10", baseline=cyclic, links=links)
    assert after.objective == before.objective and host_contiguous(h, after.mapping, 0)
    assert after.origin == origin
    assert [x.tolist() for x in sorted_loads(graph, h, after.mapping)] == \
        [x.tolist() for x in sorted_loads(graph, h, before.mapping)]
    if origin == HOSTS_BLOCK:
        assert list(after.mapping) == list(range(h.n))


def test_a_strictly_lower_j_keeps_its_interleaved_hosts():
    """Ranks i and i + 3 exchange ten times what ring neighbours do: the least J puts
    each such pair on one node, which no placement with whole hosts can."""
    h = machine(2, 3)
    graph = CommGraph.from_edges([0, 1, 2, 0, 1, 2, 3, 4, 5], [3, 4, 5, 1, 2, 3, 4, 5, 0],
                                 [10.0] * 3 + [1.0] * 6, n=6)
    u, v, w = graph.edges()
    perms = np.array(list(itertools.permutations(range(6))))
    d = h.distance(np.arange(6)[:, None], np.arange(6)[None, :])
    j = (d[perms[:, u], perms[:, v]] * w).sum(axis=1)
    whole = np.array([host_contiguous(h, p, 0) for p in perms])
    assert j.min() < j[whole].min()  # strictly: no whole-host placement ties

    r = map_processes(graph, h, "topdown+n10", baseline=np.arange(6), links=tree_links(h))
    assert r.objective == j.min() and not host_contiguous(h, r.mapping, 0)


def test_the_same_j_with_other_link_loads_is_no_tie():
    """Two placements of J 125 whose busiest node link carries 9 in both, but whose other
    node links carry 7 and 8 against 6 and 9: the rule tells them apart, so the first
    offered wins as before, whether or not it interleaves hosts."""
    h = machine(2, 3)
    src, dst, vol = zip(*[(0, 1, 1), (0, 2, 1), (0, 4, 2), (1, 3, 2), (1, 4, 2), (1, 5, 2),
                          (2, 3, 2), (2, 4, 1), (2, 5, 2), (4, 5, 2)], strict=True)
    graph = CommGraph.from_edges(list(src), list(dst), list(map(float, vol)), n=6)
    baseline = np.array([0, 2, 4, 1, 3, 5])
    interleaved, whole = np.array([0, 2, 1, 3, 4, 5]), np.arange(6)

    def result(mapping):
        ev = evaluate(graph, h, mapping)
        return MappingResult(mapping, ev.objective, ev.traffic, 0.0, "x", 0)

    a, b = result(interleaved), result(whole)
    assert a.objective == b.objective == 125 < evaluate(graph, h, baseline).objective
    assert not host_contiguous(h, a.mapping, 0) and host_contiguous(h, b.mapping, 0)
    assert (sorted_loads(graph, h, a.mapping)[0].tolist(),
            sorted_loads(graph, h, b.mapping)[0].tolist()) == ([7, 8, 9], [6, 9, 9])
    rule = never_worse.Admission(graph, h, baseline, tree_links(h))
    assert rule.refusal(a) is None and rule.refusal(b) is None
    base = (rule.baseline_result(0), "baseline")
    assert rule.rank([base, (a, "interleaved"), (b, "whole")])[1] == "interleaved"
    assert rule.rank([base, (b, "whole"), (a, "interleaved")])[1] == "whole"


def test_a_hair_lower_j_keeps_its_interleaved_hosts_at_equal_link_loads():
    """A ring of 24 on 3 nodes of 2 sockets: rotated by two ranks (node 2 holds ranks 0, 1
    and 18-23) it has the block placement's J; the block placement with two ranks swapped
    across sockets keeps every host whole and every node link's load, and costs 2 more
    (0.6 %, within the far-traffic band NEAR_J): the lower J wins."""
    h = Hierarchy.homogeneous([4, 2, 3], [1, 2, 100], NAMES[3])
    graph, baseline = ring(24), block_cyclic(4, 2, 3)
    interleaved = np.roll(np.arange(24), 2)
    whole = np.arange(24)
    whole[[3, 4]] = whole[[4, 3]]

    def result(mapping):
        ev = evaluate(graph, h, mapping)
        return MappingResult(mapping, ev.objective, ev.traffic, 0.0, "x", 0)

    a, b = result(interleaved), result(whole)
    assert not host_contiguous(h, a.mapping, 1) and host_contiguous(h, b.mapping, 1)
    assert a.objective == 324 and b.objective == 326
    assert b.objective - a.objective < never_worse.NEAR_J * a.objective
    assert [x.tolist() for x in sorted_loads(graph, h, a.mapping)] == \
        [x.tolist() for x in sorted_loads(graph, h, b.mapping)] == [[2, 2, 2]]
    rule = never_worse.Admission(graph, h, baseline, tree_links(h))
    assert rule.refusal(a) is None and rule.refusal(b) is None
    base = (rule.baseline_result(0), "baseline")
    assert rule.rank([base, (b, "whole"), (a, "interleaved")])[1] == "interleaved"
    assert rule.rank([base, (a, "interleaved"), (b, "whole")], [(b, "whole")])[1] == \
        "interleaved"
