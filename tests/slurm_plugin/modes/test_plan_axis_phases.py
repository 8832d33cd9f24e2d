"""A stencil exchanged dimension by dimension (generator option ``exchange=axes``)
carries one phase per dimension, and the never-worse rule then refuses a placement
whose per-dimension bottlenecks add up to more than the default's, although its busiest
links equal those of the one it applies instead (issue 33 item 3).

The case is the one simulated in docs/does-it-pay.md ("Exchanged dimension by
dimension"): a periodic 8x8x4 halo on 32 nodes of 8 cores under a 3-level tree.  The
phase times are recomputed here by plain loops over the grid, sharing nothing with
:mod:`mapper.phases`."""

from __future__ import annotations

import json

import numpy as np

from mapper.congestion import uplink_loads
from slurm_plugin.machine.distribution import default_placements
from slurm_plugin.modes.graph_job import make_plan
from slurm_plugin.profiles.generators import generate
from slurm_plugin.slurm.topology import parse_topology_conf
from tests.slurm_plugin.modes.test_plan_network import _layout

TREE3 = parse_topology_conf(
    "".join(f"SwitchName=l{i} Nodes=n[{4 * i}-{4 * i + 3}]\n" for i in range(8))
    + "SwitchName=m0 Switches=l[0-3]\nSwitchName=m1 Switches=l[4-7]\n"
    + "SwitchName=top Switches=m[0-1]\n")
NODES = tuple(f"n{i}" for i in range(32))
DIMS = (8, 8, 4)
SPEC = "stencil3d:8x8x4,periodic,bytes=262144"


def _axis_bottlenecks(group_of_rank: np.ndarray) -> int:
    """Σ over the dimensions of the busiest group's cut in that dimension's exchange
    (faces), by a loop over every rank's six neighbours."""
    n = int(np.prod(DIMS))
    total = 0
    for axis, size in enumerate(DIMS):
        cut: dict[int, int] = {}
        for r in range(n):
            c = list(np.unravel_index(r, DIMS))
            for step in (-1, 1):
                q = list(c)
                q[axis] = (c[axis] + step) % size
                peer = int(np.ravel_multi_index(q, DIMS))
                if group_of_rank[r] != group_of_rank[peer]:
                    cut[int(group_of_rank[r])] = cut.get(int(group_of_rank[r]), 0) + 1
        total += max(cut.values(), default=0)
    return total


def _groups(layout, mapping, level: int) -> np.ndarray:
    return layout.hierarchy.group_ids[mapping, level]


def test_axis_phases_refuse_what_the_links_alone_accept():
    layout = _layout(NODES, (8,) * 32, tree=TREE3)
    block = default_placements(layout)["block"]
    levels = list(layout.network_levels)
    phased = make_plan(layout, generate(SPEC + ",exchange=axes", 256),
                       algorithm="topdown+n10", time_limit=30, files=())
    plain = make_plan(layout, generate(SPEC, 256), algorithm="topdown+n10",
                      time_limit=30, files=())
    # what the phases change: the plain profile applies a placement whose dimension
    # exchanges add up to more than block's at some level ...
    raised = [lv for lv in levels
              if _axis_bottlenecks(_groups(layout, plain.result.mapping, lv))
              > _axis_bottlenecks(_groups(layout, block, lv))]
    assert raised, "the plain profile's placement keeps block's phase times: no case"
    # ... with the same busiest links as the placement the phased profile applies
    g = generate(SPEC, 256)
    for a, b in zip(uplink_loads(g, layout.hierarchy, plain.result.mapping, levels),
                    uplink_loads(g, layout.hierarchy, phased.result.mapping, levels),
                    strict=True):
        assert a.volume == b.volume
    # the phased profile's placement keeps every level's phase time and still beats block
    for lv in levels:
        assert (_axis_bottlenecks(_groups(layout, phased.result.mapping, lv))
                <= _axis_bottlenecks(_groups(layout, block, lv)))
    assert phased.result.origin != "baseline"
    assert any("phase time" in why for why in phased.result.rejected.values())
    report = json.loads(phased.report_json)
    assert any("profile by phase: 3 phases" in note for note in report["notes"])
