"""The job's layout (slurm_plugin.layout.build_layout): slots, hierarchy levels and
distances from an allocation, node shapes, a switch tree and hwloc cache groups."""

from pathlib import Path

import numpy as np
import pytest
from test_slurm_parsers import MULTI

from slurm_plugin.allocation import Allocation
from slurm_plugin.layout import build_layout
from slurm_plugin.topology import NodeShape, SwitchTree, TopologyError, parse_topology_conf

HWLOC = Path(__file__).parent / "data" / "hwloc" / "2pkg-2l3-2core-2pu.xml"


def test_heterogeneous_allocation_three_nodes_on_one_switch_one_on_another():
    tree = parse_topology_conf(MULTI)
    alloc = Allocation("1", ("n1", "n2", "n3", "m1"), (8, 8, 8, 5), 1,
                       cpu_ids={"m1": (0, 1, 2, 8, 9)})
    shapes = {n: NodeShape(2, 4) for n in ("n1", "n2", "n3")} | {"m1": NodeShape(2, 8)}
    layout = build_layout(alloc, shapes, tree, [1, 10, 100, 1000, 5000])
    h = layout.hierarchy
    assert layout.n == 29
    assert h.level_names == ("socket", "node", "leaf switch", "switch level 1", "root")
    assert list(h.group_sizes(1)) == [8, 8, 8, 5]  # nodes, the last one partial
    assert list(h.group_sizes(2)) == [24, 5]  # leaf switches l1 and l3
    assert list(h.group_sizes(0)) == [4, 4, 4, 4, 4, 4, 3, 2]  # m1: cpus 0-2 | 8-9
    m1 = [s for s in layout.slots if s.host == "m1"]
    assert [(s.socket, s.cores) for s in m1] == [(0, (0,)), (0, (1,)), (0, (2,)),
                                                   (1, (0,)), (1, (1,))]
    n1, m1_pe = 0, 24
    assert h.distance(n1, 8) == 100 and h.distance(n1, m1_pe) == 5000
    assert h.distance(n1, 4) == 10 and h.distance(n1, 1) == 1
    assert not layout.notes


def test_no_switches_gives_node_levels_and_a_note():
    alloc = Allocation("1", ("a", "b"), (3, 2), 2)
    layout = build_layout(alloc, NodeShape(2, 4), SwitchTree(), [1, 10, 100])
    assert layout.hierarchy.level_names == ("socket", "node", "root")
    assert "no switch topology" in layout.notes[0]
    assert [s.cores for s in layout.slots if s.host == "a"] == [(0, 1), (2, 3), (0, 1)]
    assert np.all(np.diff([s.cpu_ids[0] for s in layout.slots[:3]]) > 0)


def test_layout_refuses_tasks_that_do_not_fit():
    with pytest.raises(TopologyError, match="do not fit"):
        build_layout(Allocation("1", ("a",), (5,), 2), NodeShape(2, 4), None, [1, 10])


def test_layout_with_a_cache_level_from_hwloc():
    from slurm_plugin.hwloc import parse_hwloc_xml

    groups = parse_hwloc_xml(HWLOC.read_text())
    alloc = Allocation("1", ("a", "b"), (8, 3), 1)
    layout = build_layout(alloc, NodeShape(2, 4, 2), None, [1, 10, 100], {"a": groups}, 0.5)
    h = layout.hierarchy
    assert h.level_names == ("cache", "socket", "node", "root")
    assert list(h.distances) == [0.5, 1, 10, 100]
    assert list(h.group_sizes(0)) == [2, 2, 2, 2, 3]  # node b has no hwloc data
    assert layout.slots[2].cpu_ids == (4, 5)  # core 2 = hardware threads 4 and 5
    assert h.distance(0, 1) == 0.5 and h.distance(0, 2) == 1 and h.distance(0, 4) == 10
    with pytest.raises(TopologyError, match="hwloc XML has 8 cores, Slurm says 16"):
        build_layout(alloc, NodeShape(2, 8), None, [1, 10, 100], {"a": groups})
