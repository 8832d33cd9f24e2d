"""Parsers of Slurm's output and environments, on output recorded from Slurm 22.05."""

from pathlib import Path

import numpy as np
import pytest

from slurm_plugin.allocation import (
    Allocation,
    AllocationError,
    allocation_from_env,
    parse_scontrol_job,
    parse_squeue_json,
)
from slurm_plugin.hostlist import HostlistError, expand_counts, expand_hostlist
from slurm_plugin.layout import build_layout
from slurm_plugin.topology import (
    NodeShape,
    SwitchTree,
    TopologyError,
    parse_node_shape,
    parse_scontrol_nodes,
    parse_scontrol_topology,
    parse_topology_conf,
)

DATA = Path(__file__).parent / "data" / "slurm"


def env_file(name: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in (DATA / name).read_text().splitlines()
                if "=" in line)


def test_hostlists_keep_slurm_order_and_expand_nested_ranges():
    assert expand_hostlist("n[01-04,07],gpu[1-2]") == [
        "n01", "n02", "n03", "n04", "n07", "gpu1", "gpu2"]
    assert expand_hostlist("rack[1-2]-n[1-2]") == [
        "rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]
    assert expand_hostlist("z9,a1") == ["z9", "a1"]
    with pytest.raises(HostlistError, match="unbalanced"):
        expand_hostlist("n[1-2")


def test_compressed_counts():
    assert expand_counts("36(x2),24") == [36, 36, 24]
    assert expand_counts("4(x3),2") == [4, 4, 4, 2]
    with pytest.raises(HostlistError, match="N\\(xR\\)"):
        expand_counts("4(3)")


def test_scontrol_job_with_per_node_cpu_ids():
    a = parse_scontrol_job((DATA / "scontrol_job_4x4.txt").read_text())
    assert a.nodes == ("n1", "n2", "n3", "n4") and a.tasks_per_node == (4, 4, 4, 4)
    assert a.cpu_ids["n3"] == (0, 1, 4, 5) and a.cpus_per_task == 1
    assert a.partition == "debug" and a.account is None and a.uid == 0


def test_scontrol_job_cpus_per_task_and_partial_nodes():
    a = parse_scontrol_job((DATA / "scontrol_job_cpt2.txt").read_text())
    assert a.cpus_per_task == 2 and a.tasks_per_node == (2, 2)
    b = parse_scontrol_job((DATA / "scontrol_job_n6.txt").read_text())
    assert b.nodes == ("n3", "n4") and b.tasks_per_node == (4, 2) and b.ntasks == 6
    assert b.cpu_ids == {"n3": (2, 3, 6, 7), "n4": (2, 6)}


def test_squeue_json_agrees_with_scontrol():
    a = parse_squeue_json((DATA / "squeue.json").read_text(), "3")
    b = parse_scontrol_job((DATA / "scontrol_job_n6.txt").read_text())
    assert (a.nodes, a.tasks_per_node, a.partition) == (b.nodes, b.tasks_per_node,
                                                          b.partition)
    with pytest.raises(AllocationError, match="no job 99"):
        parse_squeue_json((DATA / "squeue.json").read_text(), "99")


def test_prolog_environment():
    env = env_file("env.prolog_slurmd.txt")
    assert "PATH" not in env  # the reason rankmap sets PATH itself
    a = allocation_from_env(env)
    assert a.nodes == ("n1", "n2", "n3", "n4") and a.tasks_per_node == (4, 4, 4, 4)
    assert a.uid == 0 and a.partition == "debug"
    spank = env_file("env.prolog_slurmd.spank.txt")
    assert spank["SPANK_RANKMAP_COMM_PROFILE"] == "stencil3d"


def test_environment_with_compressed_counts_and_errors():
    a = allocation_from_env({"SLURM_JOB_NODELIST": "c[1-3]", "SLURM_JOB_CPUS_PER_NODE":
                             "36(x2),24", "SLURM_TASKS_PER_NODE": "36(x2),24"})
    assert a.tasks_per_node == (36, 36, 24) and a.cpus_per_node == (36, 36, 24)
    with pytest.raises(AllocationError, match="no task count"):
        allocation_from_env({"SLURM_NODELIST": "c1", "SLURM_JOB_CPUS_PER_NODE": "4"})
    with pytest.raises(AllocationError, match="3 nodes but 2 task counts"):
        allocation_from_env({"SLURM_NODELIST": "c[1-3]", "SLURM_TASKS_PER_NODE": "2(x2)"})


MULTI = """\
# three levels: leaves under two pods under a core switch
SwitchName=l1 Nodes=n[1-3]
SwitchName=l2 Nodes=n4
SwitchName=l3 Nodes=m[1-2] \\
    LinkSpeed=100
SwitchName=pod1 Switches=l[1-2]
SwitchName=pod2 Switches=l3
SwitchName=core Switches=pod[1-2]
"""


def test_multi_level_topology_conf():
    tree = parse_topology_conf(MULTI)
    assert tree.path("n4") == ["l2", "pod1", "core"]
    assert tree.path("m2") == ["l3", "pod2", "core"]
    assert tree.nodes["l3"] == ("m1", "m2")


@pytest.mark.parametrize("text,msg", [
    ("SwitchName=a Nodes=n1\nNodes=n2\n", "topology.conf:2: expected SwitchName"),
    ("SwitchName=a Nodes=n1 Colour=red\n", "topology.conf:1: unknown key"),
    ("SwitchName=a Switches=b\n", "unknown switch b"),
    ("SwitchName=a Nodes=n[1-\n", "topology.conf:1:"),
])
def test_topology_conf_errors_name_the_line(text, msg):
    with pytest.raises(TopologyError, match=msg):
        parse_topology_conf(text)


def test_recorded_scontrol_topology_and_nodes():
    tree = parse_scontrol_topology((DATA / "scontrol_topology.txt").read_text())
    assert tree.path("n3") == ["s2", "spine"]
    shapes = parse_scontrol_nodes((DATA / "scontrol_nodes.txt").read_text())
    assert shapes["n1"] == NodeShape(2, 4, 1) and len(shapes) == 4
    assert parse_node_shape("Boards=2 SocketsPerBoard=2 CoresPerSocket=8 ThreadsPerCore=2") \
        == NodeShape(4, 8, 2)


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


HWLOC = Path(__file__).parent / "data" / "hwloc" / "2pkg-2l3-2core-2pu.xml"


def test_hwloc_xml_cache_groups():
    from slurm_plugin.hwloc import HwlocError, parse_hwloc_xml

    groups = parse_hwloc_xml(HWLOC.read_text())  # lstopo -i "package:2 l3:2 core:2 pu:2"
    assert groups.socket == (0, 0, 0, 0, 1, 1, 1, 1)
    assert groups.group == (0, 0, 1, 1, 0, 0, 1, 1)
    with pytest.raises(HwlocError, match="x.xml: not valid XML"):
        parse_hwloc_xml("<topology", "x.xml")


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


def test_worker_reads_hwloc_files_for_the_jobs_nodes(tmp_path):
    from slurm_plugin.job_worker import read_core_groups

    groups = read_core_groups({"n[1-2]": str(HWLOC), "m[1-9]": str(tmp_path / "unused.xml")},
                              ("n2", "x1"))
    assert set(groups) == {"n2"} and groups["n2"].group[2] == 1
