"""The job's layout (slurm_plugin.machine.layout.build_layout): slots, hierarchy levels and
distances from an allocation, node shapes, a switch tree and hwloc cache groups."""


import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_plugin.machine.layout import build_layout
from slurm_plugin.outputs.render import render_rankfile
from slurm_plugin.slurm.allocation import Allocation
from slurm_plugin.slurm.topology import NodeShape, SwitchTree, TopologyError, parse_topology_conf
from tests.helpers import independent_eval as ie
from tests.helpers.paths import TEST_DATA
from tests.slurm_plugin.slurm.test_slurm_parsers import MULTI

HWLOC = TEST_DATA / "hwloc" / "2pkg-2l3-2core-2pu.xml"


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
    from slurm_plugin.machine.hwloc import parse_hwloc_xml

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


def test_cpus_per_task_count_hardware_threads_as_slurm_does():
    """On a node of 2 threads per core, -c 2 is one core per task (Slurm's CPUs are
    threads): 8 tasks fill the 8 cores; with --hint=nomultithread a task uses one
    thread of each of its two cores, and only 4 such tasks fit."""
    shape = NodeShape(2, 4, 2)
    layout = build_layout(Allocation("1", ("a",), (8,), 2), shape, None, [1, 10, 100])
    assert [s.cpu_ids for s in layout.slots] == [(2 * c, 2 * c + 1) for c in range(8)]
    assert all(len(s.cores) + sum(len(c) for _, c in s.more_sockets) == 1
               for s in layout.slots)
    one = build_layout(Allocation("1", ("a",), (4,), 2, threads_per_core=1), shape, None,
                       [1, 10, 100])
    assert [s.cpu_ids for s in one.slots] == [(0, 2), (4, 6), (8, 10), (12, 14)]
    with pytest.raises(TopologyError, match="do not fit"):
        build_layout(Allocation("1", ("a",), (8,), 2, threads_per_core=1), shape, None,
                     [1, 10, 100])


def test_oversubscribed_job_is_refused_with_the_site_key_unless_allowed():
    from slurm_plugin.machine.layout import OversubscribedError

    alloc = Allocation("1", ("a", "b"), (12, 8), 1)
    with pytest.raises(OversubscribedError, match=r'oversubscribe = "never"'):
        build_layout(alloc, NodeShape(2, 4), None, [1, 10, 100])
    layout = build_layout(alloc, NodeShape(2, 4), None, [1, 10, 100], oversubscribe=True)
    h = layout.hierarchy
    assert h.level_names == ("core", "socket", "node", "root")
    assert list(h.distances) == [0.5, 1, 10, 100]
    # node a: 12 ranks on 8 cores, consecutive ranks share, 1 or 2 per core; b: 1 each
    assert list(h.group_sizes(0)) == [2, 1, 2, 1, 2, 1, 2, 1] + [1] * 8
    a = [s.cpu_ids for s in layout.slots if s.host == "a"]
    assert a == [(0,), (0,), (1,), (2,), (2,), (3,), (4,), (4,), (5,), (6,), (6,), (7,)]
    assert "12 ranks share 8 task slots on 1 node(s), up to 2 ranks per slot" in \
        layout.notes[-1]


def test_overcommit_allocation_of_one_cpu_puts_every_rank_on_it():
    # what Slurm gives sbatch -O -N1 -n 12: one CPU (CPU_IDs=0) for 12 tasks
    alloc = Allocation("1", ("a",), (12,), 1, cpu_ids={"a": (0,)})
    layout = build_layout(alloc, NodeShape(2, 4), None, [1, 10], oversubscribe=True)
    assert {s.cpu_ids for s in layout.slots} == {(0,)}
    assert list(layout.hierarchy.group_sizes(0)) == [12]


def test_oversubscribe_changes_nothing_for_a_job_that_fits():
    alloc = Allocation("1", ("a", "b"), (8, 3), 1)
    plain = build_layout(alloc, NodeShape(2, 4), None, [1, 10, 100])
    allowed = build_layout(alloc, NodeShape(2, 4), None, [1, 10, 100], oversubscribe=True)
    assert plain.slots == allowed.slots and plain.notes == allowed.notes
    assert plain.hierarchy.level_names == allowed.hierarchy.level_names


def test_overcommitted_tasks_are_spread_as_slurm_does():
    """sbatch -O: Slurm fills every slot, then one task per node in node order, round
    after round (slurm_step_layout.c, _task_layout_block); -N2 -n24 on one CPU per node
    gives SLURM_TASKS_PER_NODE=12(x2), as the local cluster prints."""
    from slurm_plugin.slurm.allocation import distribute_tasks, parse_scontrol_job

    assert distribute_tasks(24, [1, 1]) == [12, 12]
    assert distribute_tasks(25, [1, 1]) == [13, 12]
    assert distribute_tasks(11, [4, 2]) == [7, 4]
    assert distribute_tasks(24, [1, 1], ntasks_per_node=12) == [12, 12]
    line = ("JobId=7 JobName=x UserId=rmuser(1001) GroupId=rmuser(1001) Partition=debug "
            "NodeList=n[1-2] NumNodes=2 NumCPUs=2 NumTasks=24 CPUs/Task=1 "
            "Nodes=n[1-2] CPU_IDs=0 Mem=0 GRES=")
    alloc = parse_scontrol_job(line)
    assert alloc.tasks_per_node == (12, 12) and alloc.cpu_ids == {"n1": (0,), "n2": (0,)}


@st.composite
def wide_tasks(draw):
    """One node whose tasks may be wider than a socket: (shape, cpus per task, task count,
    allocated CPU ids) with the allocated cores a random subset."""
    shape = NodeShape(draw(st.integers(1, 3)), draw(st.integers(1, 4)), draw(st.integers(1, 2)))
    per_task = draw(st.integers(1, shape.cores))  # cores per task
    ntasks = draw(st.integers(1, shape.cores // per_task))
    cores = sorted(draw(st.permutations(range(shape.cores)))[:ntasks * per_task])
    cpu_ids = tuple(c * shape.threads_per_core + t for c in cores
                    for t in range(shape.threads_per_core))
    # Slurm counts a task's CPUs in hardware threads: -c is cores times the threads used
    # of each, all of a core's or one with --hint=nomultithread (threads_per_core=1)
    one_thread = draw(st.booleans())
    cpt = per_task * (1 if one_thread else shape.threads_per_core)
    return shape, cpt, ntasks, cpu_ids, per_task, 1 if one_thread else None


@settings(max_examples=200, deadline=None)
@given(wide_tasks(), st.integers(0, 2**32 - 1))
def test_tasks_wider_than_a_socket_get_all_their_cores_in_the_rankfile(task, seed):
    """--cpus-per-task above a socket's free cores: each rank's rankfile line names
    exactly cpus-per-task allocated cores, on every socket they lie on, no core twice
    (the old slot wrote the second socket's cores as the first's: ``slot=0:0,1,2,0,1,2``
    for cores 0-2 and 4-6 of a 2 x 4 node)."""
    shape, cpt, ntasks, cpu_ids, per_task, threads = task
    alloc = Allocation("1", ("a",), (ntasks,), cpt, threads_per_core=threads,
                       cpu_ids={"a": cpu_ids})
    layout = build_layout(alloc, shape, None, [1, 10, 100])
    mapping = np.random.default_rng(seed).permutation(layout.n)
    lines = ie.parse_rankfile_cores(render_rankfile(layout, mapping))
    assert sorted(lines) == list(range(ntasks))
    used = []
    for rank, (host, cores) in lines.items():
        node_cores = [s * shape.cores_per_socket + c for s, c in cores]
        assert host == "a" and len(set(node_cores)) == per_task, (rank, cores)
        slot = layout.slots[mapping[rank]]
        assert sorted(node_cores) == sorted({i // shape.threads_per_core
                                             for i in slot.cpu_ids})
        # the rank's CPUs: cpt hardware threads, the first ones of each core
        assert len(slot.cpu_ids) == cpt
        assert all(i % shape.threads_per_core < (threads or shape.threads_per_core)
                   for i in slot.cpu_ids)
        assert all(c * shape.threads_per_core in cpu_ids for c in node_cores)
        assert cores[0][0] == slot.socket  # the socket the distances use
        used += node_cores
    assert len(used) == len(set(used))


def test_a_task_spanning_sockets_is_written_as_open_mpi_writes_it():
    """Open MPI's rankfile syntax for several sockets: ``slot=0:1;1:0-2`` (its own
    example; Open MPI 4.1 binds ``slot=0:2-3;1:0-1`` to PUs 2-5 of a 2 x 4 node)."""
    alloc = Allocation("1", ("a",), (1,), 6, cpu_ids={"a": (0, 1, 2, 4, 5, 6)})
    layout = build_layout(alloc, NodeShape(2, 4), None, [1, 10, 100])
    assert render_rankfile(layout, np.array([0])).splitlines()[1] == "rank 0=a slot=0:0-2;1:0-2"
