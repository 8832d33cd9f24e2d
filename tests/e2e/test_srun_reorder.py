"""End-to-end: jobs whose launcher places the ranks itself (srun) get rankmap's
placement through librankmap's reordered communicator.

The program (tests/data/mpi/reorderinfo.c, linked with the librankmap that
deploy/install.sh built into the test cluster's prefix) prints, per process, its
launcher rank, its rank in ``rankmap_comm``'s communicator, its host, CPU,
``SLURM_LOCALID`` and ``RANKMAP_REORDER``.  Every new rank k must run where the job's
rankfile puts rank k:

* ``srun --mpi=pmix --distribution=block`` and ``=cyclic``: this cluster runs
  TaskPlugin=task/none on 2 real cores, so Slurm binds nothing; the host is checked,
  and the core is the one Slurm gives the node's m-th task (m = SLURM_LOCALID) under the
  step's socket distribution (block:cyclic: task m on socket m % 2, its m // 2-th core)
  — the core task/affinity would bind it to.  srun --mpi=pmix segfaults about one run
  in ten here (shared/docs/slurm-lab.md), and now and then a step hangs after launch;
  a step is ended after 60 s and the test submits a new job, up to SRUN_JOBS jobs
  (:func:`run_srun_job`).  mpirun is ended after 150 s and retried in a new job only
  when it hung, up to MPIRUN_JOBS jobs (``Cluster.run_launch_job``).  The ranks yield
  when idle (32 ranks on 2 real cores); still, this machine's kernel now and then
  starves its own workers for 30-100 s under such a load (dmesg: "workqueue lockup"),
  and a launch that takes 1-5 s then takes 60-78 s or hangs.

Without the prolog's reorder files and the TaskProlog's RANKMAP_REORDER, rankmap_comm
keeps the launcher's order and these tests fail.

* ``mpirun`` with the rankfile variables unset in the batch script: Open MPI fills the
  nodes in order and, by default for more than two ranks, maps a node's ranks
  round-robin over its sockets (Slurm's block:cyclic, whose reorder file the TaskProlog
  exports).  The host of every new rank is checked; the socket cannot be observed here
  (binding to the emulated cores 2-7 of this 2-core machine is reported empty).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slurm

ROOT = Path(__file__).resolve().parents[2]

NODES, PER_NODE, SOCKETS, CORES = 4, 8, 2, 4  # full emulated 2x4 nodes
N = NODES * PER_NODE

HEADER = """
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# the emulated nodes are one machine: Open MPI 5's tcp btl pairs no interface between
# "hosts" n1..n4 unless told to use lo (seen on Debian 13, Open MPI 5.0.7)
export OMPI_MCA_btl_tcp_if_include=lo
# 32 ranks on 2 real cores: Open MPI, shown 8 cores a node, would poll without yielding;
# then a launch took 35-46 s here, and CI's slower machine passed the 90 s limit
export OMPI_MCA_mpi_yield_when_idle=1
echo "RANKMAP_REORDER=$RANKMAP_REORDER"
[ -n "$OMPI_MCA_rmaps_rank_file_path" ] && sed 's/^/RF: /' "$OMPI_MCA_rmaps_rank_file_path"
[ -n "$RANKMAP_REPORT" ] && sed 's/^/REPORT: /' "$RANKMAP_REPORT"
# the launcher places the ranks itself: no rankfile
unset OMPI_MCA_rmaps_rank_file_path OMPI_MCA_rmaps_rankfile_path
"""

SRUN_JOB = HEADER + """
out=/tmp/srun.$SLURM_JOB_ID.out  # the job's user may not write in the submit directory
# a run takes seconds; a step that hangs is ended (the test then submits a new job)
timeout -k 10 60 srun --mpi=pmix --distribution={dist} -n {n} {prog} > "$out" 2>&1
rc=$?
cat "$out"; rm -f "$out"
echo "LAUNCH_RC=$rc"
"""

#: srun --mpi=pmix jobs submitted at most this often (see the module docstring)
SRUN_JOBS = 4


#: mpirun jobs submitted at most this often: a launch of these 32 ranks hung about one
#: time in five here before the ranks yielded, and CI saw three in a row hang
MPIRUN_JOBS = 5

MPIRUN_JOB = HEADER + """
# Open MPI is shown the emulated nodes' 2x4 layout (this machine has 2 real cores)
export OMPI_MCA_hwloc_base_topo_file={state}/topo-2x4.xml
timeout -k 10 150 mpirun {prog} 2>&1
echo "LAUNCH_RC=$?"
"""


@pytest.fixture(scope="module")
def reorder_setup(slurm_cluster):
    """The program, built against the installed librankmap, and a profile numbered at
    random (Slurm's block and cyclic are poor for it: rankmap's placement is applied)."""
    from mapper import CommGraph
    from mapper.io.mtx_file import write_mtx
    from slurm_plugin.profiles.generators import generate

    state = slurm_cluster.state
    opt = state / "opt"
    assert (opt / "lib/librankmap.so").is_file(), "deploy/install.sh did not build librankmap"
    prog = state / "bin/reorderinfo"
    subprocess.run(["mpicc", "-O2", f"-I{opt / 'include'}", "-o", str(prog),
                    str(ROOT / "tests/data/mpi/reorderinfo.c"), f"-L{opt / 'lib'}",
                    "-lrankmap", f"-Wl,-rpath,{opt / 'lib'}"], check=True)
    u, v, w = generate("stencil3d", N).edges()
    perm = np.random.default_rng(N).permutation(N)
    store = state / "profiles"
    write_mtx(CommGraph.from_edges(perm[u], perm[v], w, n=N), store / f"scrambled{N}.mtx")
    (store / f"scrambled{N}.toml").write_text(f'ranks = {N}\nfile = "scrambled{N}.mtx"\n')
    return prog


JOB_ARGS = (f"-N{NODES}", f"--ntasks-per-node={PER_NODE}", f"--comm-profile=scrambled{N}")


def step_failed(job) -> bool:
    return not (job.state == "COMPLETED" and "LAUNCH_RC=0" in job.output)


def run_srun_job(c, script: str, user: str | None = None):
    """The first of up to SRUN_JOBS jobs whose srun step ran to its end (else the
    last one, for check_job to report).  A step that failed or hung leaves this
    lab's PMIx state such that more steps in the same job failed too (a CI run and a
    fresh clone each saw a hang, then a segfault, then a hang), so each try is a new
    job, with its own prolog, reorder files and TaskProlog."""
    return c.run_launch_job(script, *JOB_ARGS, user=user, tries=SRUN_JOBS,
                            retry=step_failed)


def rankfile_of(output: str) -> dict[int, tuple[str, int, int]]:
    """new rank -> (host, socket, core in the socket) from the RF: lines."""
    return {int(r): (h, int(s), int(k)) for r, h, s, k in
            re.findall(r"^RF: rank (\d+)=(\S+) slot=(\d+):(\d+)$", output, re.M)}


def processes_of(output: str) -> dict[int, tuple[int, str, int, int, str]]:
    """launcher rank -> (new rank, host, cpu, SLURM_LOCALID, RANKMAP_REORDER) from the
    program's lines."""
    return {int(o): (int(k), h, int(c), int(loc), f) for o, k, h, c, loc, f in
            re.findall(r"^old (\d+) new (\d+) host (\S+) cpu (-?\d+) local (-?\d+) "
                       r"file (\S+)$", output, re.M)}


def check_job(job) -> tuple[dict, dict]:
    """The job ran every process, rankmap's placement was applied and exported, the new
    ranks are a permutation that is not the launcher's order; (rankfile, processes)."""
    assert job.state == "COMPLETED", job.output
    assert "LAUNCH_RC=0" in job.output, job.output
    rankfile, procs = rankfile_of(job.output), processes_of(job.output)
    assert all(re.fullmatch(r"/\S+/job\.\d+/reorder\.\S+", p[4]) for p in procs.values()), \
        "the TaskProlog exported no RANKMAP_REORDER:\n" + job.output
    assert sorted(rankfile) == list(range(N)), job.output
    assert sorted(procs) == list(range(N)), job.output
    assert sorted(k for k, *_ in procs.values()) == list(range(N))
    assert any(k != old for old, (k, *_) in procs.items()), "rankmap_comm kept the order"
    assert f"reorder sum {N * (N - 1) // 2}" in job.output, job.output
    return rankfile, procs


def slot_of_local_task(local_id: int, socket_method: str) -> tuple[int, int]:
    """(socket, core in the socket) Slurm gives a full 2x4 node's task ``local_id``."""
    if socket_method == "block":
        return divmod(local_id, CORES)
    return local_id % SOCKETS, local_id // SOCKETS


@pytest.mark.parametrize(("dist", "user"), [("block", None), ("cyclic", "rmuser")])
def test_srun_new_ranks_run_where_the_rankfile_says(slurm_cluster, reorder_setup, dist, user):
    """Root's job with block, an unprivileged user's with cyclic."""
    c = slurm_cluster
    job = run_srun_job(c, SRUN_JOB.format(dist=dist, n=N, prog=reorder_setup), user)
    rankfile, procs = check_job(job)
    # the step's own file, not the batch script's (mpirun's block:cyclic)
    assert {p[4].rsplit("/", 1)[1] for p in procs.values()} == {f"reorder.{dist}"}
    nodes = [f"n{i}" for i in range(1, NODES + 1)]
    for old, (new, host, _, local, _) in procs.items():
        # Slurm's own placement of launcher rank `old`, replayed: the host and local id
        want_node = nodes[old // PER_NODE] if dist == "block" else nodes[old % NODES]
        want_local = old % PER_NODE if dist == "block" else old // NODES
        assert (host, local) == (want_node, want_local), (dist, old, host, local)
        want_host, socket, core = rankfile[new]
        assert host == want_host, \
            f"{dist}: new rank {new} (launcher rank {old}) ran on {host}, rankfile: {want_host}"
        assert slot_of_local_task(local, "cyclic") == (socket, core), \
            f"{dist}: new rank {new} is task {local} of {host}, rankfile: {socket}:{core}"


def test_mpirun_without_the_rankfile_new_ranks_run_on_the_rankfiles_sockets(
        slurm_cluster, reorder_setup):
    """An unprivileged user's job: the script unsets the rankfile variables and runs a
    plain mpirun; rankmap_comm renumbers the ranks with reorder.block."""
    c = slurm_cluster
    job = c.run_launch_job(MPIRUN_JOB.format(state=c.state, prog=reorder_setup), *JOB_ARGS,
                           user="rmuser", tries=MPIRUN_JOBS, timeout=240)
    rankfile, procs = check_job(job)
    assert {p[4].rsplit("/", 1)[1] for p in procs.values()} == {"reorder.block"}
    nodes = [f"n{i}" for i in range(1, NODES + 1)]
    for old, (new, host, *_) in procs.items():
        # Open MPI's own placement: the nodes in order, each filled to its slots
        assert host == nodes[old // PER_NODE], (old, host)
        want_host, _, _ = rankfile[new]
        assert host == want_host, \
            f"new rank {new} (mpirun rank {old}) ran on {host}, rankfile: {want_host}"
