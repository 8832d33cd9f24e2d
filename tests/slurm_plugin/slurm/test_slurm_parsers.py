"""Parsers of Slurm's output and environments, on output recorded from Slurm 22.05 (the
layout built from them is tested in test_layout.py)."""


import pytest

from slurm_plugin.common.hostlist import HostlistError, expand_counts, expand_hostlist
from slurm_plugin.slurm.allocation import (
    AllocationError,
    allocation_from_env,
    parse_scontrol_job,
    parse_squeue_json,
)
from slurm_plugin.slurm.topology import (
    NodeShape,
    TopologyError,
    parse_node_shape,
    parse_scontrol_nodes,
    parse_scontrol_topology,
    parse_topology_conf,
)
from tests.helpers.paths import TEST_DATA

DATA = TEST_DATA / "slurm"


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


def test_the_jobs_threads_per_core_comes_from_each_source():
    """--threads-per-core / --hint=nomultithread: scontrol's ReqB:S:C:T (its last
    field, "*" when not asked), squeue's threads_per_core, the job's environment."""
    text = (DATA / "scontrol_job_4x4.txt").read_text()
    assert "ReqB:S:C:T=0:0:*:*" in text
    assert parse_scontrol_job(text).threads_per_core is None
    one = parse_scontrol_job(text.replace("ReqB:S:C:T=0:0:*:*", "ReqB:S:C:T=0:0:*:1"))
    assert one.threads_per_core == 1
    env = {"SLURM_JOB_NODELIST": "n[1-2]", "SLURM_TASKS_PER_NODE": "2(x2)"}
    assert allocation_from_env(env).threads_per_core is None
    assert allocation_from_env({**env, "SLURM_THREADS_PER_CORE": "1"}).threads_per_core == 1
    assert allocation_from_env({**env, "SLURM_HINT": "nomultithread"}).threads_per_core == 1


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


HWLOC = TEST_DATA / "hwloc" / "2pkg-2l3-2core-2pu.xml"


def test_hwloc_xml_cache_groups():
    from slurm_plugin.machine.hwloc import HwlocError, parse_hwloc_xml

    groups = parse_hwloc_xml(HWLOC.read_text())  # lstopo -i "package:2 l3:2 core:2 pu:2"
    assert groups.socket == (0, 0, 0, 0, 1, 1, 1, 1)
    assert groups.group == (0, 0, 1, 1, 0, 0, 1, 1)
    with pytest.raises(HwlocError, match="x.xml: not valid XML"):
        parse_hwloc_xml("<topology", "x.xml")
