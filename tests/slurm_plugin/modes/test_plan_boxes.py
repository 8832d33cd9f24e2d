"""A job whose profile is a grid in rank order gets the grid cut into its switch tree's
groups when that is best, and its report says so."""

import json

from mapper.solve.candidates import BOXES
from slurm_plugin.machine.layout import build_layout
from slurm_plugin.modes.graph_job import make_plan
from slurm_plugin.profiles.generators import generate
from slurm_plugin.slurm.allocation import Allocation
from slurm_plugin.slurm.topology import NodeShape, parse_topology_conf


def _tree3(nodes: int) -> str:
    """Leaves of 4 nodes, middle switches of 4 leaves, one top switch."""
    leaves = [f"SwitchName=l{i} Nodes=n[{4 * i}-{4 * i + 3}]" for i in range(nodes // 4)]
    mids = [f"SwitchName=m{i} Switches=l[{4 * i}-{4 * i + 3}]" for i in range(nodes // 16)]
    top = f"SwitchName=top Switches=m[0-{nodes // 16 - 1}]"
    return "\n".join(leaves + mids + [top]) + "\n"


def test_a_grid_profile_gets_least_surface_boxes_and_the_report_says_so():
    nodes = 128
    alloc = Allocation("7", tuple(f"n{i}" for i in range(nodes)), (8,) * nodes, 1)
    layout = build_layout(alloc, NodeShape(2, 4), parse_topology_conf(_tree3(nodes)),
                          [1, 10, 100, 1000, 10000])
    plan = make_plan(layout, generate("stencil2d:32x32,periodic", 1024),
                     algorithm="topdown+n10", time_limit=30, files=("machinefile",))
    assert not plan.kept_default
    assert plan.result.origin == BOXES
    assert "coordinate bisection" in plan.summary
    record = json.loads(plan.report_json)
    assert record["candidates"][BOXES] < record["candidates"]["topdown+n10"]
    assert any("32x32 periodic grid" in note for note in record["notes"])
