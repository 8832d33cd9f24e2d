"""The report people read: one decision sentence, folded node lists, one number style."""

import json

import pytest

from slurm_plugin.machine.layout import build_layout
from slurm_plugin.modes.graph_job import make_plan
from slurm_plugin.outputs.report import human
from slurm_plugin.profiles.generators import generate
from slurm_plugin.slurm.allocation import Allocation
from slurm_plugin.slurm.topology import NodeShape, parse_topology_conf


def test_report_of_a_2048_node_plan_stays_short():
    conf = "".join(f"SwitchName=l{i} Nodes=c[{32 * i + 1}-{32 * i + 32}]\n" for i in range(64))
    conf += "SwitchName=spine Switches=l[0-63]\n"
    nodes = tuple(f"c{i}" for i in range(1, 2049))
    alloc = Allocation("7", nodes, (4,) * 2048)
    layout = build_layout(alloc, NodeShape(2, 2), parse_topology_conf(conf),
                          [1, 10, 100, 1000])
    plan = make_plan(layout, generate("stencil3d", layout.n), algorithm="topdown+n10",
                     time_limit=60, units="bytes")
    lines = plan.report_text.splitlines()
    assert len(lines) < 40, plan.report_text
    assert "8192 on 2048 node(s): c[1-2048]" in plan.report_text
    assert lines[2].strip() == plan.summary  # the decision comes first, in words
    record = json.loads(plan.report_json)
    assert record["nodes"] == "c[1-2048]" and record["node_count"] == 2048
    assert "e+" not in plan.report_text  # no exponent notation anywhere


@pytest.mark.parametrize("value, unit, text", [
    (1.28e9, "bytes", "1.28 GB"), (907434, "", "907 k"), (12, "bytes", "12 B"),
    (4100, "messages", "4.1 k messages"), (0, "bytes", "0 B"), (12, "messages", "12 messages"),
    (1.5e13, "", "15 T"),
])
def test_human_units(value, unit, text):
    assert human(value, unit) == text
