"""The job's reorder files (slurm_plugin.outputs.reorder_files): for generated allocations, the
process Slurm starts as rank r — placed by a step-by-step replay of Slurm's block/cyclic
distributions written here, not by slurm_plugin.machine.distribution — runs on the slot the
rendered rankfile gives rank reorder[r]; the group graph file; the TaskProlog's choice of
file; the writes."""

from __future__ import annotations

import os
import stat

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mapper import CommGraph
from mapper.io.reorder import parse_reorder
from slurm_plugin.common import job_conventions
from slurm_plugin.common.job_conventions import DIST_GRAPH_FILE, GROUP_GRAPH_FILE
from slurm_plugin.common.reorder_steps import (
    ALL_FILES,
    DIST_GRAPH_ENV,
    MPIRUN_FILE,
    REORDER_FILES,
    distribution_methods,
    reorder_exports,
    step_reorder_file,
)
from slurm_plugin.machine.distribution import Distribution, DistributionError, parse_distribution
from slurm_plugin.machine.layout import build_layout
from slurm_plugin.outputs.render import render_rankfile
from slurm_plugin.outputs.reorder_files import reorder_files, write_reorder_files
from slurm_plugin.slurm.allocation import Allocation
from slurm_plugin.slurm.topology import NodeShape, parse_topology_conf
from tests.helpers import independent_eval as ie

DISTANCES = [1.0, 10.0, 100.0, 1000.0, 1e4]


def slurm_replay(nodes: list[str], shapes: dict[str, NodeShape],
                 cpu_ids: dict[str, tuple[int, ...]], cpt: int, node_method: str,
                 socket_method: str) -> list[tuple[str, int, tuple[int, ...]]]:
    """Launcher rank → (host, socket, cores in the socket), Slurm's way: on each node the
    task slots are chunks of ``cpt`` allocated cores of one socket; a node hands them to
    its tasks socket after socket (``block``) or one socket after the other, skipping
    sockets with none left (``cyclic``); ranks fill node after node in node-list order
    (``block``) or are dealt round-robin over nodes with slots left (``cyclic``)."""
    per_node = {}
    for node in nodes:
        shape = shapes[node]
        cores = sorted({c // shape.threads_per_core for c in cpu_ids[node]})
        by_socket: dict[int, list[int]] = {}
        for core in cores:
            by_socket.setdefault(core // shape.cores_per_socket, []).append(
                core % shape.cores_per_socket)
        chunks = {s: [tuple(cs[i:i + cpt]) for i in range(0, len(cs), cpt)]
                  for s, cs in sorted(by_socket.items())}
        order = []
        if socket_method == "block":
            for s, chs in chunks.items():
                order += [(node, s, ch) for ch in chs]
        else:
            while any(chunks.values()):
                for s, chs in chunks.items():
                    if chs:
                        order.append((node, s, chs.pop(0)))
        per_node[node] = order
    ranks = []
    if node_method == "block":
        for node in nodes:
            ranks += per_node[node]
    else:
        while any(per_node.values()):
            for node in nodes:
                if per_node[node]:
                    ranks.append(per_node[node].pop(0))
    return ranks


@st.composite
def jobs(draw):
    """(allocation, shapes, topology.conf text): nodes ``p0…`` in node-table order,
    dealt to two leaf switches at random (so the PE order is not the node order),
    uneven shapes, partial nodes, 1 or 2 cores per task."""
    n_nodes = draw(st.integers(1, 5))
    names_ = [f"p{i}" for i in range(n_nodes)]
    dealt = draw(st.permutations(names_))
    cut = draw(st.integers(0, n_nodes))
    groups = [g for g in (dealt[:cut], dealt[cut:]) if g]
    conf = "".join(f"SwitchName=s{i} Nodes={','.join(g)}\n" for i, g in enumerate(groups))
    if len(groups) == 2:
        conf += "SwitchName=top Switches=s0,s1\n"
    cpt = draw(st.integers(1, 2))
    shapes, cpu_ids, tasks = {}, {}, []
    for node in names_:
        shape = NodeShape(draw(st.integers(1, 3)), draw(st.integers(cpt, 5)),
                          draw(st.integers(1, 2)))
        chosen: list[int] = []
        for s in range(shape.sockets):
            cores = range(s * shape.cores_per_socket, (s + 1) * shape.cores_per_socket)
            least = 1 if s == shape.sockets - 1 and not chosen else 0
            chunks = len(cores) // cpt - draw(st.integers(0, len(cores) // cpt - least))
            chosen += sorted(draw(st.permutations(list(cores)))[:chunks * cpt])
        shapes[node] = shape
        cpu_ids[node] = tuple(c * shape.threads_per_core + t for c in sorted(chosen)
                              for t in range(shape.threads_per_core))
        tasks.append(len(chosen) // cpt)
    # cpt whole cores per task on every node, SMT or not: one thread of each counted
    alloc = Allocation("7", tuple(names_), tuple(tasks), cpt, threads_per_core=1,
                       cpu_ids=cpu_ids)
    return alloc, shapes, conf


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.large_base_example])
@given(jobs(), st.integers(0, 2**32 - 1))
def test_every_new_rank_runs_where_the_rankfile_puts_it(job, seed):
    alloc, shapes, conf = job
    layout = build_layout(alloc, shapes, parse_topology_conf(conf), DISTANCES)
    mapping = np.random.default_rng(seed).permutation(layout.n)
    rankfile = ie.parse_rankfile(render_rankfile(layout, mapping))
    files = reorder_files(layout, mapping, None)
    assert set(files) == set(REORDER_FILES.values())
    for (node_method, socket_method), name in REORDER_FILES.items():
        slurm = slurm_replay(list(alloc.nodes), shapes, dict(alloc.cpu_ids), alloc.cpus_per_task,
                             node_method, socket_method)
        reorder = parse_reorder(files[name], layout.n, name)
        assert len(slurm) == layout.n
        for r, where in enumerate(slurm):
            assert rankfile[int(reorder[r])] == where, (name, r)


def test_hand_example_cyclic_over_two_nodes():
    # two nodes of one socket with two cores; the mapping puts rank k on PE k (block)
    layout = build_layout(Allocation("1", ("a", "b"), (2, 2), 1), NodeShape(1, 2),
                          parse_topology_conf(""), DISTANCES)
    files = reorder_files(layout, np.arange(4), None)
    assert files["reorder.block"] == "0\n1\n2\n3\n"
    # cyclic starts ranks 0..3 on a0, b0, a1, b1 = PEs 0, 2, 1, 3
    assert files["reorder.cyclic"] == "0\n2\n1\n3\n"


def test_dist_graph_is_numbered_by_new_rank():
    layout = build_layout(Allocation("1", ("a",), (3,), 1), NodeShape(1, 3),
                          parse_topology_conf(""), DISTANCES)
    # new rank 0 talks to 1 and 2, nothing else
    graph = CommGraph.from_edges(np.array([0, 0]), np.array([1, 2]), np.array([5.0, 1.0]), n=3)
    files = reorder_files(layout, np.array([2, 0, 1]), graph)
    assert files[DIST_GRAPH_FILE] == "3\n2 1 2\n1 0\n1 0\n"
    assert files["reorder.block"] == "1\n2\n0\n"  # PE 0 holds new rank 1, …


def test_the_group_graph_is_the_seeds_for_the_placement_applied():
    """dist_graph.groups, beside dist_graph: the topology graph the seed hands to
    MPI_Dist_graph_create — for a job placed by the matching, matching_tree's edges with
    the profile's weights; numbered by new rank like dist_graph."""
    from mapper.construction.matching import matching, matching_tree
    from mapper.io.reorder import parse_group_graph
    from tests.mapper.construction.test_matching import TABLE_I

    # two nodes of two sockets of two cores: the seed's 3-level binary tree
    layout = build_layout(Allocation("1", ("a", "b"), (4, 4), 1), NodeShape(2, 2),
                          parse_topology_conf(""), DISTANCES)
    graph = CommGraph.from_matrix(TABLE_I, directed=False)
    mapping = matching(graph, layout.hierarchy)
    files = reorder_files(layout, mapping, graph)
    assert GROUP_GRAPH_FILE == "dist_graph.groups" and DIST_GRAPH_FILE in files
    degrees, nbrs, weights = parse_group_graph(files[GROUP_GRAPH_FILE], 8)
    own = np.repeat(np.arange(8), degrees)
    u, v = matching_tree(graph, layout.hierarchy)
    expected = {frozenset(e) for e in zip(u.tolist(), v.tolist(), strict=True)}
    assert {frozenset(e) for e in zip(own.tolist(), nbrs.tolist(), strict=True)} == expected
    assert expected == {frozenset(e) for e in
                        [(0, 6), (1, 7), (2, 5), (3, 4), (0, 7), (2, 4), (1, 5)]}
    assert weights.tolist() == TABLE_I[own, nbrs].tolist()
    # another placement: the groups are where that mapping puts the ranks
    other = reorder_files(layout, np.arange(8), graph)[GROUP_GRAPH_FILE]
    degrees, nbrs, _ = parse_group_graph(other, 8)
    pairs = {frozenset(e) for e in zip(np.repeat(np.arange(8), degrees).tolist(),
                                       nbrs.tolist(), strict=True)}
    assert {frozenset((0, 1)), frozenset((2, 3)), frozenset((4, 5)),
            frozenset((6, 7))} <= pairs
    assert GROUP_GRAPH_FILE not in reorder_files(layout, mapping, None)


def test_plane_and_arbitrary_have_no_file():
    layout = build_layout(Allocation("1", ("a",), (2,), 1), NodeShape(1, 2),
                          parse_topology_conf(""), DISTANCES)
    with pytest.raises(ValueError, match="plane=2"):
        reorder_files(layout, np.arange(2), None, [Distribution("plane", "cyclic", 2)])


VALID = ["block", "cyclic", "block:block", "cyclic:block", "block:cyclic", "cyclic:cyclic",
         "block:fcyclic", "*:block", "*", "cyclic:*", "BLOCK:Cyclic", "block:cyclic:cyclic",
         "cyclic:block,Pack", "block,nopack", "plane=4", "plane=2:block", "arbitrary", ""]


@pytest.mark.parametrize("text", VALID)
def test_task_side_parse_agrees_with_parse_distribution(text):
    dist = parse_distribution(text)
    expected = None if dist.nodes in ("plane", "arbitrary") else \
        (dist.nodes, "cyclic" if dist.sockets == "fcyclic" else dist.sockets)
    assert distribution_methods(text) == expected


@pytest.mark.parametrize("text", ["blocky", "round:robin", "block:diagonal"])
def test_task_side_parse_refuses_what_slurm_would(text):
    with pytest.raises(DistributionError):
        parse_distribution(text)
    assert distribution_methods(text) is None


STEP = {"SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "16"}


@pytest.mark.parametrize("env,expected", [
    (STEP, "reorder.block"),  # srun without --distribution: Slurm's block:cyclic
    ({**STEP, "SLURM_DISTRIBUTION": "cyclic"}, "reorder.cyclic"),
    ({**STEP, "SLURM_DISTRIBUTION": "block:block"}, "reorder.block-block"),
    ({**STEP, "SLURM_DISTRIBUTION": "cyclic:block,pack"}, "reorder.cyclic-block"),
    ({**STEP, "SLURM_DISTRIBUTION": "arbitrary"}, None),
    ({**STEP, "SLURM_DISTRIBUTION": "plane"}, None),
    # the batch script (mpirun's own placement, whatever sbatch --distribution says)
    ({"SLURM_NTASKS": "16", "SLURM_DISTRIBUTION": "cyclic"}, MPIRUN_FILE),
    # Open MPI's orted step: one task per node
    ({"SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "4", "SLURM_DISTRIBUTION": "cyclic"},
     MPIRUN_FILE),
])
def test_the_task_gets_the_file_of_its_step(env, expected):
    assert step_reorder_file(env, 16) == expected


def test_exports_name_an_existing_file_only(tmp_path):
    env = {**STEP, "SLURM_DISTRIBUTION": "cyclic"}
    unset = ["unset RANKMAP_REORDER"]  # not the batch script's value, inherited
    assert reorder_exports(tmp_path, env, 16) == unset
    (tmp_path / "reorder.cyclic").write_text("0\n")
    assert reorder_exports(tmp_path, env, 16) == [
        f"export RANKMAP_REORDER={tmp_path / 'reorder.cyclic'}"]
    assert reorder_exports(tmp_path, {**STEP, "SLURM_DISTRIBUTION": "arbitrary"}, 16) == unset
    # a record without a task count: the step cannot be matched, mpirun's file
    assert reorder_exports(tmp_path, env, None) == unset
    (tmp_path / MPIRUN_FILE).write_text("0\n")
    assert reorder_exports(tmp_path, env, "16") == [
        f"export RANKMAP_REORDER={tmp_path / MPIRUN_FILE}"]
    # the group graph, numbered by new rank, goes to every task, whatever the step
    (tmp_path / GROUP_GRAPH_FILE).write_text("1\n0\n")
    dist_graph = f"export {DIST_GRAPH_ENV}={tmp_path / GROUP_GRAPH_FILE}"
    assert DIST_GRAPH_ENV == "RANKMAP_DIST_GRAPH"
    assert reorder_exports(tmp_path, env, 16) == [
        f"export RANKMAP_REORDER={tmp_path / 'reorder.cyclic'}", dist_graph]
    assert reorder_exports(tmp_path, {**STEP, "SLURM_DISTRIBUTION": "arbitrary"}, 16) == [
        *unset, dist_graph]


def test_writes_every_file_0600_replacing_a_planted_symlink(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    job_dir = tmp_path / "job.7"
    job_dir.mkdir()
    (job_dir / "reorder.cyclic").symlink_to(victim)
    layout = build_layout(Allocation("7", ("a", "b"), (2, 2), 1), NodeShape(1, 2),
                          parse_topology_conf(""), DISTANCES)
    graph = CommGraph.from_edges(np.array([0, 1, 2]), np.array([1, 2, 3]), np.ones(3), n=4)
    write_reorder_files(job_dir, layout, np.array([3, 1, 2, 0]), graph)
    assert sorted(os.listdir(job_dir)) == sorted(ALL_FILES)
    assert victim.read_text() == "keep\n"
    for name in ALL_FILES:
        st_ = os.lstat(job_dir / name)
        assert stat.S_ISREG(st_.st_mode) and stat.S_IMODE(st_.st_mode) == 0o600
    assert (job_dir / "reorder.block").read_text() == "3\n1\n2\n0\n"
    assert (job_dir / DIST_GRAPH_FILE).read_text().startswith("4\n1 1\n2 0 2\n")
    assert GROUP_GRAPH_FILE in ALL_FILES and (job_dir / GROUP_GRAPH_FILE).is_file()


def test_the_task_prolog_part_imports_no_numpy():
    # the TaskProlog runs once per task; numpy would cost ~0.2 s each
    import subprocess
    import sys

    code = ("import sys; from slurm_plugin.common.reorder_steps import reorder_exports; "
            "assert 'numpy' not in sys.modules, 'numpy imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_names_list_the_reorder_files():
    """The job directory knows every reorder file (so a failed computation removes
    them with the launcher files)."""

    assert set(job_conventions.REORDER_FILES) == set(ALL_FILES)
    assert set(ALL_FILES) <= set(job_conventions.FILE_NAMES)
    assert set(ALL_FILES) <= set(job_conventions.COMPUTED_FILES)


def test_task_prolog_exports_the_rankfile_to_the_batch_step_only(tmp_path):
    """mpirun runs in the batch step; its daemons' step (srun, started by mpirun)
    inherits mpirun's environment.  Exporting the rankfile again there would start the
    daemons with a rankfile when the script unset it to let mpirun place the ranks."""
    import json as _json

    from slurm_plugin.common.job_conventions import OMPI_RANKFILE_VARS
    from slurm_plugin.lifecycle.task_prolog import exports

    out = tmp_path / "out"
    job_dir = out / "job.42"
    job_dir.mkdir(parents=True)
    for name in ("rankfile", "report.txt", MPIRUN_FILE, GROUP_GRAPH_FILE):
        (job_dir / name).write_text("x\n")
    (job_dir / "report.json").write_text(_json.dumps({"job_id": "42", "applied": True, "n": 16}))
    config = tmp_path / "rankmap.toml"
    config.write_text(f'[general]\noutput_dir = "{out}"\n')
    batch = exports({"SLURM_JOB_ID": "42", "RANKMAP_CONFIG": str(config)})
    for var in OMPI_RANKFILE_VARS:
        assert f"export {var}={job_dir / 'rankfile'}" in batch
    assert f"export RANKMAP_REORDER={job_dir / MPIRUN_FILE}" in batch
    daemons = exports({"SLURM_JOB_ID": "42", "RANKMAP_CONFIG": str(config),
                       "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "4"})
    assert not any(var in line for var in OMPI_RANKFILE_VARS for line in daemons), daemons
    assert f"export RANKMAP_REORDER={job_dir / MPIRUN_FILE}" in daemons
    for lines in (batch, daemons):
        assert f"export RANKMAP_DIST_GRAPH={job_dir / GROUP_GRAPH_FILE}" in lines


@pytest.mark.parametrize("step_id", [None, "-5", "4294967291", "-6"])
def test_the_script_step_is_recognised_in_every_release(step_id):
    """Slurm 26.05 sets SLURM_STEP_ID=-5 in the batch step (and -6 in salloc's
    interactive step); older releases do not set it there."""
    from slurm_plugin.common.reorder_steps import is_script_step

    env = {} if step_id is None else {"SLURM_STEP_ID": step_id}
    assert is_script_step(env)
    assert not is_script_step({"SLURM_STEP_ID": "0"})
    assert step_reorder_file({**env, "SLURM_NTASKS": "16"}, 16) == MPIRUN_FILE
