"""``npb-mg:class=X``: NPB 3.x MG's own border exchanges for a class.

Checked against a rank-by-rank translation of MG's ``setup`` and ``comm3`` written
here with plain loops (the generator works on arrays), and against facts of class A at
512 ranks counted by hand: 32^3 points per rank, partners 2 and 4 planes apart on the
two coarsest levels, every message at most 9248 bytes, so every phase is an exchange
round, MG's allreduces too; at 256 ranks the z borders are 17952 bytes and nothing is
a round."""

from __future__ import annotations

import numpy as np
import pytest

import mapper.solve.api
from mapper import CommGraph
from mapper.model.phased_graph import phases_sum, with_phases
from slurm_plugin.machine.distribution import default_placements
from slurm_plugin.modes.graph_job import make_plan
from slurm_plugin.profiles.generators import (
    MG_ALLREDUCES,
    NPB_MG_ITERATIONS,
    GeneratorError,
    generate,
)
from slurm_plugin.slurm.topology import parse_topology_conf
from tests.slurm_plugin.modes.test_plan_network import _layout
from tests.slurm_plugin.modes.test_plan_traced_pipeline import planned_nodes
from tests.slurm_plugin.modes.test_plan_traced_rounds import NODES, _topology, node_links


def _mg_by_loops(n: int, size: int) -> dict[tuple[int, int], dict[tuple[int, int], float]]:
    """{(level from the finest, axis): {(sender, receiver): bytes}} by MG's ``setup``
    (per rank: its grid coordinate, then level by level from the finest, ``next`` per
    axis doubled where it or its neighbour at ``next`` holds no point) and ``give3``
    (alive ranks send both borders of each axis)."""
    log_p = round(np.log2(n))
    dx = log_p // 3
    dy = (log_p - dx) // 2
    pi = [2 ** dx, 2 ** dy, n // 2 ** (dx + dy)]
    lt = round(np.log2(size))
    out: dict[tuple[int, int], dict[tuple[int, int], float]] = {}
    for me in range(n):
        idi = [me % pi[0], (me // pi[0]) % pi[1], me // (pi[0] * pi[1])]
        nxt = [1, 1, 1]
        for k in range(lt, 0, -1):
            ng = 2 ** k
            mi = [0, 0, 0]
            for ax in range(3):
                mi[ax] = 2 + ((idi[ax] + 1) * ng) // pi[ax] - (idi[ax] * ng) // pi[ax]
                mip = (2 + ((nxt[ax] + idi[ax] + 1) * ng) // pi[ax]
                       - ((nxt[ax] + idi[ax]) * ng) // pi[ax])
                if mip == 2 or mi[ax] == 2:
                    nxt[ax] *= 2
            if 2 in mi:
                continue  # dead at this level: comm3 only zeroes
            points = [(mi[1] - 2) * (mi[2] - 2), mi[0] * (mi[2] - 2), mi[0] * mi[1]]
            for ax in range(3):
                for sign in (1, -1):
                    c = list(idi)
                    c[ax] = (idi[ax] + sign * nxt[ax]) % pi[ax]
                    to = c[0] + pi[0] * (c[1] + pi[1] * c[2])
                    if to != me:
                        msgs = out.setdefault((lt - k, ax), {})
                        msgs[me, to] = msgs.get((me, to), 0.0) + 8.0 * points[ax]
    return out


def _borders(g) -> dict[tuple[int, int], object]:
    """{(level, axis): phase} of the border exchanges ("level L dimension A exchange")."""
    return {(int(p.name.split()[1]), int(p.name.split()[3])): p for p in g.phases
            if p.name.startswith("level ")}


def _allreduce_by_loops(n: int) -> list[set[tuple[int, int]]]:
    """Per recursive-doubling step, the pairs of ranks that exchange (n a power of 2)."""
    steps = []
    k = 1
    while k < n:
        steps.append({(r, r + k) for r in range(n) if not r & k})
        k *= 2
    return steps


@pytest.mark.parametrize(("n", "cls", "size"), [(2, "S", 32), (8, "S", 32), (32, "S", 32),
                                                (64, "W", 128), (128, "S", 32),
                                                (256, "A", 256), (512, "A", 256)])
def test_class_phases_are_mgs_own_exchanges(n, cls, size):
    g = generate(f"npb-mg:class={cls}", n)
    want = _mg_by_loops(n, size)
    got = _borders(g)
    assert set(got) == {key for key, msgs in want.items() if msgs}
    lt = round(np.log2(size))
    for key, phase in got.items():
        pairs: dict[tuple[int, int], float] = {}
        for (a, b), x in want[key].items():
            pair = (min(a, b), max(a, b))
            pairs[pair] = pairs.get(pair, 0.0) + x
        u, v, w = phase.graph.edges()
        assert dict(zip(zip(u.tolist(), v.tolist(), strict=True), w.tolist(),
                        strict=True)) == pairs
        # comm3 three times a level and iteration (resid, psinv, rprj3), twice on the
        # coarsest
        assert phase.repeat == (2.0 if key[0] == lt - 1 else 3.0)
    # MG's allreduces, where its borders are rounds: one round per recursive-doubling
    # step, MG_ALLREDUCES of them over the nit + 1 iterations of a run
    reduces = [p for p in g.phases if not p.name.startswith("level ")]
    small = all(p.pace == "rounds" for p in got.values())
    assert len(reduces) == (len(_allreduce_by_loops(n)) if small else 0)
    for phase, pairs in zip(reduces, _allreduce_by_loops(n), strict=False):
        u, v, w = phase.graph.edges()
        assert set(zip(u.tolist(), v.tolist(), strict=True)) == pairs
        assert np.all(w == 2 * 16) and phase.pace == "rounds"
        assert phase.repeat == pytest.approx(MG_ALLREDUCES / (NPB_MG_ITERATIONS[cls] + 1))
        assert len(phase.labels()) == n and len(set(phase.labels().tolist())) == n
    total = sum(p.repeat * p.graph.to_csr() for p in g.phases)
    assert abs(total - g.to_csr()).max() <= 1e-9 * g.weights.max()


def test_class_a_at_512_ranks_by_hand():
    g = generate("npb-mg:class=A", 512)
    assert all(p.pace == "rounds" for p in g.phases)  # every message <= 16 KiB
    by = _borders(g)
    assert len(by) == 8 * 3  # levels 256^3 .. 2^3
    # zran3's 2 x 40 and norm2u3's 4 x 2 allreduces over 4 + 1 iterations, 9 steps each
    assert [p.name for p in g.phases[24:]] == [f"allreduce step {k}" for k in range(9)]
    assert all(p.repeat == pytest.approx(88 / 5) for p in g.phases[24:])
    # the finest level: 32^3 points a rank; x borders 32*32, y 34*32, z 34*34 points
    # each way to the ranks +-1, +-8, +-64 (x fastest, periodic over 8)
    for axis, stride, points in ((0, 1, 32 * 32), (1, 8, 34 * 32), (2, 64, 34 * 34)):
        u, v, w = by[0, axis].graph.edges()
        assert len(u) == 512
        assert set(((v - u) % (8 * stride)).tolist()) <= {stride, 7 * stride}
        assert np.all(w == 2 * 8 * points)
    # 4^3 points: the ranks with odd coordinates hold them, partners 2 planes apart
    coords = np.stack([np.arange(512) % 8, np.arange(512) // 8 % 8, np.arange(512) // 64])
    u, v, _ = by[6, 0].graph.edges()
    assert len(u) == 64 and np.all(coords[:, u] % 2 == 1)
    assert set(((coords[0, v] - coords[0, u]) % 8).tolist()) == {2, 6}
    # 2^3: coordinates 3 and 7 only, partners 4 planes apart (both ways the same rank)
    u, v, w = by[7, 2].graph.edges()
    assert len(u) == 4 and set(coords[2, u].tolist()) == {3}
    assert np.all(coords[2, v] == 7) and np.all(w == 4 * 8 * 3 * 3)


def test_class_a_at_256_ranks_is_bandwidth_bound():
    g = generate("npb-mg:class=A", 256)
    assert not any(p.pace for p in g.phases)  # z borders: 66*34 doubles, 17952 bytes
    assert len(g.phases) == len(_borders(g))  # no allreduce rounds where nothing is one
    u, v, w = g.phases[2].graph.edges()  # finest, z
    assert np.all(w == 2 * 8 * 66 * 34)


@pytest.mark.parametrize(("spec", "n", "words"), [
    ("npb-mg:class=Q", 64, "class='Q'"),
    ("npb-mg:class=A,bytes=8", 64, "bytes="),
    ("npb-mg:class=A", 96, "power of two"),
    ("npb-mg:class=S", 65536, "fewer points"),
    ("npb-mg:8x4x2,class=A", 64, "process grid"),
])
def test_class_errors_say_why(spec, n, words):
    with pytest.raises(GeneratorError, match=words.replace("(", r"\(")) as err:
        generate(spec, n)
    assert "\n" not in str(err.value)


def test_npb_processes_grid_is_accepted_when_given():
    assert generate("npb-mg:8x4x4,class=S", 128).n == 128


def test_one_rank_talks_to_nobody():
    g = generate("npb-mg:class=A", 1)  # MG runs on one rank too (comm1p, no messages)
    assert g.n == 1 and g.m == 0


@pytest.mark.parametrize("machine", ["tree2", "tree3"])
def test_plan_keeps_blocks_rounds_with_the_class_profile(machine):
    """MG class A at 512 ranks on 64 nodes of 8 cores (leaves of 4 nodes): the plan
    applies nothing whose rounds' farthest messages cross more links than block's,
    recounted here from node names over every phase's pairs; the class profile's total
    alone (no rounds) lets a placement through that raises them (the 2x2x2 cubes ran
    1.04x block's time, bench/README.md "Traced NAS codes")."""
    g = generate("npb-mg:class=A", 512)
    tree = parse_topology_conf(_topology(machine))
    layout = _layout(tuple(f"n{i}" for i in range(NODES)), (8,) * NODES, tree=tree)
    block = np.array([int(layout.slots[pe].host[1:])
                      for pe in default_placements(layout)["block"]])

    def rounds(node: np.ndarray) -> float:
        out = 0.0
        for phase in g.phases:
            u, v, _ = phase.graph.edges()
            out += phase.repeat * max(node_links(node[a], node[b], machine)
                                      for a, b in zip(u.tolist(), v.tolist(), strict=True))
        return out
    total = CommGraph(g.indptr, g.indices, g.weights, g.source)
    raised, _ = planned_nodes(layout, total, tree)
    assert rounds(raised) > rounds(block)
    kept, plan = planned_nodes(layout, g, tree)
    assert rounds(kept) <= rounds(block) * (1 + 1e-12)
    assert "exchange rounds" in " ".join(plan.notes)


def test_plan_keeps_the_allreduces_rounds_where_the_ratio_is_stated(monkeypatch):
    """MG class A at 512 ranks on the 3-level tree, 4:1 uplinks stated: Slurm's nodes
    regrouped under other leaves, chosen on the borders alone, put the allreduce's
    8- and 16-apart partners under different leaves (SMPI: 1.0026x block's time); with
    MG's allreduces as rounds the plan applies only placements whose allreduce steps,
    recounted here from node names, cross no more links than block's (without the
    regrouping in rank order, mapper.solve.candidates.RANK_ORDER_WEIGHT, which keeps them too)."""
    monkeypatch.setattr(mapper.solve.candidates, "RANK_ORDER_WEIGHT", 0.0)
    g = generate("npb-mg:class=A", 512)
    kept = [p for p in g.phases if p.name.startswith("level ")]
    borders = with_phases(CommGraph.from_matrix(phases_sum(kept, 512), directed=False),
                          kept)
    tree = parse_topology_conf(_topology("tree3"))
    layout = _layout(tuple(f"n{i}" for i in range(NODES)), (8,) * NODES, tree=tree)
    block = np.array([int(layout.slots[pe].host[1:])
                      for pe in default_placements(layout)["block"]])

    def allreduce_links(node: np.ndarray) -> int:
        return sum(max(node_links(node[a], node[b], "tree3") for a, b in pairs)
                   for pairs in _allreduce_by_loops(512))

    def planned(graph) -> np.ndarray:
        plan = make_plan(layout, graph, algorithm="topdown+n10", time_limit=60, files=(),
                         tree=tree, uplink_oversubscription=[4.0])
        return np.array([int(layout.slots[pe].host[1:]) for pe in plan.result.mapping])
    assert allreduce_links(block) == 24  # 0, 0, 0 on the node, 2, 2, 4, 4, 6, 6
    assert allreduce_links(planned(borders)) > 24
    assert allreduce_links(planned(g)) <= 24
