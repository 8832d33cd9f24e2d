"""A halo exchanged one dimension after the other (generator option ``exchange=axes``:
one phase per dimension, each rank waiting only for its own messages) and the site's
uplink oversubscription ([solver] uplink_oversubscription): the plan applies the
candidate of least phase time over every link level (issue 33 item 3).

The cases are those simulated in bench/README.md ("A halo exchanged by dimension"): a
periodic halo on nodes of 8 cores under a 3-level tree of 4-node leaves, 4 leaves per
middle switch, 4:1 uplinks.  The model is recomputed here by plain loops over ranks and
their six neighbours, sharing nothing with mapper.objectives.phase_time: per rank, the sum over the
dimensions of the busiest uplink on its own path (node link, leaf uplink, middle
uplink, each over its capacity: 1, 4 nodes / 4, 16 nodes / 4) that the dimension's
messages cross."""

from __future__ import annotations

import json

import numpy as np

from mapper import map_processes
from mapper.objectives.congestion import uplink_loads
from mapper.solve.candidates import BOXES_SHARED
from slurm_plugin.machine.distribution import default_placements
from slurm_plugin.modes.graph_job import make_plan
from slurm_plugin.profiles.generators import generate
from slurm_plugin.slurm.topology import parse_topology_conf
from tests.slurm_plugin.modes.test_plan_network import _layout


def _tree(nodes: int):
    leaves = nodes // 4
    return parse_topology_conf(
        "".join(f"SwitchName=l{i} Nodes=n[{4 * i}-{4 * i + 3}]\n" for i in range(leaves))
        + "".join(f"SwitchName=m{j} Switches=l[{4 * j}-{4 * j + 3}]\n"
                  for j in range(leaves // 4))
        + f"SwitchName=top Switches=m[0-{leaves // 4 - 1}]\n")


def own_path_time(phases, node_of_rank: np.ndarray, ratio: float = 4.0) -> float:
    """Σ over ``phases`` ((volume, partners of each rank) pairs) of the busiest own
    uplink crossed (node link 1, leaf uplink 4 nodes / ratio, middle uplink 16 nodes /
    ratio; each loaded by the whole phase), max over ranks (loops)."""
    n = len(node_of_rank)
    groups = [node_of_rank, node_of_rank // 4, node_of_rank // 16]  # node, leaf, middle
    capacity = [1.0, 4 / ratio, 16 / ratio]
    per_rank = np.zeros(n)
    for vol, partners in phases:
        cuts = []
        for grp in groups:
            cut: dict[int, float] = {}
            for r in range(n):
                for p in partners[r]:
                    if grp[p] != grp[r]:
                        cut[int(grp[r])] = cut.get(int(grp[r]), 0.0) + vol
            cuts.append(cut)
        for r in range(n):
            t = 0.0
            for lv, grp in enumerate(groups):
                if any(grp[p] != grp[r] for p in partners[r]):
                    t = max(t, cuts[lv][int(grp[r])] / capacity[lv])
            per_rank[r] += t
    return float(per_rank.max())


def _model(dims, node_of_rank: np.ndarray) -> float:
    """Σ over dimensions of the busiest own uplink crossed, max over ranks (loops)."""
    n = int(np.prod(dims))
    phases = []
    for axis, size in enumerate(dims):
        partners = []
        for r in range(n):
            c = list(np.unravel_index(r, dims))
            mine = set()
            for step in (-1, 1):
                q = list(c)
                q[axis] = (c[axis] + step) % size
                peer = int(np.ravel_multi_index(q, dims))
                if peer != r:
                    mine.add(peer)
            partners.append(mine)
        phases.append((1.0, partners))
    return own_path_time(phases, node_of_rank)


def _plans(ranks: int, dims: str, **kw):
    nodes = ranks // 8
    layout = _layout(tuple(f"n{i}" for i in range(nodes)), (8,) * nodes, tree=_tree(nodes))
    spec = f"stencil3d:{dims},periodic,bytes=262144"
    phased = make_plan(layout, generate(spec + ",exchange=axes", ranks),
                       algorithm="topdown+n10", time_limit=60, files=(), tree=_tree(nodes),
                       **kw)
    plain = make_plan(layout, generate(spec, ranks), algorithm="topdown+n10",
                      time_limit=60, files=(), tree=_tree(nodes))
    return layout, phased, plain


def _nodes(layout, mapping) -> np.ndarray:
    return np.array([int(layout.slots[pe].host[1:]) for pe in mapping])


def test_phases_timed_across_levels_pick_the_faster_of_equal_placements():
    layout, phased, plain = _plans(256, "8x8x4", uplink_oversubscription=[4.0])
    dims = (8, 8, 4)
    block = default_placements(layout)["block"]
    got, other = (_model(dims, _nodes(layout, p.result.mapping)) for p in (phased, plain))
    own = map_processes(generate("stencil3d:8x8x4,periodic", 256), layout.hierarchy,
                        "topdown+n10", 0, time_limit=60).mapping
    # simulated: 0.674 against Top-Down's 0.752 of block (bench/README.md).  Without the
    # phases the far traffic per node also picks it (J and links cannot tell them apart)
    assert got < _model(dims, _nodes(layout, own)) * 0.95
    assert got <= other
    # the model ties the boxes with Slurm's nodes regrouped, which ran 0.703; the far
    # traffic per node (10 % less for the regrouping) must not decide where the phase
    # time over every level weighs these per-rank phases (bench/README.md)
    assert phased.result.origin == "grid boxes"
    assert got <= _model(dims, _nodes(layout, block))
    g = generate("stencil3d:8x8x4,periodic", 256)
    levels = list(layout.network_levels)
    for a, b in zip(uplink_loads(g, layout.hierarchy, phased.result.mapping, levels),
                    uplink_loads(g, layout.hierarchy, plain.result.mapping, levels),
                    strict=True):
        assert a.volume == b.volume  # the busiest links cannot tell them apart
    notes = " ".join(json.loads(phased.report_json)["notes"])
    assert "timed over every link level (uplinks oversubscribed 4:1" in notes


def test_without_the_oversubscription_the_phases_change_nothing_here():
    layout, phased, plain = _plans(256, "8x8x4")
    np.testing.assert_array_equal(phased.result.mapping, plain.result.mapping)
    assert "timed over every link level" not in " ".join(
        json.loads(phased.report_json)["notes"])
    # J and the links tie Top-Down's result, the boxes, the boxes sharing their outer
    # faces and Slurm's nodes regrouped; the far traffic per node sets Top-Down's aside
    # (96 against 80) and J picks the shared faces' 2x2x2 nodes over the regrouping
    # (80 on every node both): 0.652 of block's time for the halo by dimension, where
    # Top-Down's result ran 0.752, the regrouping 0.703 and the boxes 0.674 (bench/
    # README.md, "Boxes sharing their outer faces")
    assert phased.result.origin == BOXES_SHARED
    assert any("far traffic" in note for note in phased.result.notes)


def test_at_1024_ranks_the_phases_keep_the_faster_placement():
    # the per-level model of the rule would refuse Top-Down's result here (leaf 96 vs
    # block's 80) for the boxes, simulated 0.895 against its 0.769
    layout, phased, plain = _plans(1024, "16x8x8", uplink_oversubscription=[4.0])
    dims = (16, 8, 8)
    got, other = (_model(dims, _nodes(layout, p.result.mapping)) for p in (phased, plain))
    assert got <= other
    assert not any("phase time" in why for why in phased.result.rejected.values())
