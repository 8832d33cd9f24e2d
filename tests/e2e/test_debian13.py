"""End-to-end on Debian 13 (issue 31 item 3): the Debian 13 lane.

Debian 13's own Slurm 24.11.5 and Open MPI 5.0.7, on a Debian 12 machine: the jobs of
tests/e2e/test_jobs.py run in a Debian 13 root (deploy/testcluster/build_trixie_root.sh:
debootstrap once into /var/tmp/trixie or /var/tmp/rankmap-trixie, the project's Debian
packages installed in it with apt; ``RANKMAP_TRIXIE_ROOT`` names another, set to the
empty string it turns the lane off).  Skipped, with the reason, when the machine is
Debian 13 itself (the main e2e suite then runs there), when not root, or when
debootstrap or apt cannot work (no debootstrap, no network).

The lane, module-scoped: a private mount namespace holds the root's /proc, /sys and
/dev (nothing is mounted on the host; a process chrooted into the root keeps it
alive, and every command of the lane joins it with ``nsenter``); the checkout this file
lives in is copied into the root (``/opt/rankmap-debian13/src``, without .git, .venv,
build); deploy/install.sh installs rankmap there with the root's python3 (3.13) into
``/opt/rankmap-debian13/prefix`` (kept between runs: the venv and pip's cache are
reused), building the SPANK plugin against the root's Slurm 24.11 headers and
librankmap_bind.so; rankinfo is built with the root's mpicc; and
deploy/testcluster/cluster.py brings up munge, slurmctld and four ``slurmd -N`` inside
the root on ports of their own (20817, 20900-20903) with the state in
``/tmp/rankmap-e2e-debian13`` inside the root, so the lane runs beside the default
cluster and the current-Slurm lanes.  The daemons are stopped and the namespace's
holder killed at the end, also on failure.

The jobs: a plain ``mpirun ./rankinfo`` (Open MPI 5.0.7: the placement goes through
rankmap-prterun and librankmap_bind) with every rank on its planned host and core, as
root and as an unprivileged user; a profile that cannot be loaded falls back without
draining a node; a plain ``srun --mpi=pmix``, and one with the machinefile as
SLURM_HOSTFILE; an unprivileged user's job recording its profile with Open MPI 5's
monitoring components (the TaskEpilog stores it); and, outside Slurm, librankmap_record
under Open MPI 5.0.7 (exact counts under threads, no large-count functions 5.0 lacks,
programs that fork or abort ending as without it).
``-m block:block`` with 2 tasks per node makes Slurm allocate socket 0's cores 0 and 1
on every node: the only real cores of this 2-core machine, so every planned core can
be checked with sched_getcpu.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from tests.e2e.conftest import BASE_CONFIG, USERS, Cluster

pytestmark = [pytest.mark.slurm,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root (debootstrap, "
                                 "chroot, slurmctld/slurmd)")]

ROOT = Path(__file__).resolve().parents[2]
BUILD_ROOT = ROOT / "deploy/testcluster/build_trixie_root.sh"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: paths inside the Debian 13 root
LANE = Path("/opt/rankmap-debian13")
STATE = Path("/tmp/rankmap-e2e-debian13")
CTLD_PORT, SLURMD_PORT = 20817, 20900
#: what the copy of the checkout leaves out
EXCLUDES = ("./.git", "./.venv", "./build", "*.egg-info", "__pycache__", ".pytest_cache",
            ".hypothesis", "./bench/results", "./mapper/*/*.so", "./mapper/*/_*.c")


def host_debian_version() -> str:
    try:
        return Path("/etc/debian_version").read_text().strip()
    except OSError:
        return ""


def _run(args, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("env", {"PATH": PATH, "HOME": os.environ.get("HOME", "/root"),
                          "LC_ALL": "C"})
    return subprocess.run([str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout, **kw)


class RootCluster(Cluster):
    """conftest's Cluster, its commands run inside the root (nsenter into the holder's
    mount namespace and root).  ``state`` is the state directory as the host sees it
    (files are written and read there); arguments under the root are passed with the
    root's own paths."""

    def __init__(self, root: Path, holder: int) -> None:
        super().__init__(root / STATE.relative_to("/"))
        self.root = root
        self.holder = holder
        self.env = {"PATH": PATH, "SLURM_CONF": str(STATE / "slurm.conf"), "LC_ALL": "C",
                    "HOME": str(STATE)}

    def inner(self, arg) -> str:
        """A host path under the root as the root sees it; anything else unchanged."""
        text = str(arg)
        prefix = str(self.root) + "/"
        return "/" + text[len(prefix):] if text.startswith(prefix) else text

    def inside(self, args, env: dict | None = None, cwd="/", timeout: float = 120,
               check: bool = False) -> subprocess.CompletedProcess:
        env = {"PATH": PATH, "HOME": "/root", "LC_ALL": "C", **(env or {})}
        cmd = ["nsenter", "-t", str(self.holder), "--mount", "--root", "--wd", "--",
               "/usr/bin/env", "-i", *[f"{k}={v}" for k, v in env.items()],
               "/bin/sh", "-c", 'cd "$1" && shift && exec "$@"', "sh", self.inner(cwd),
               *[self.inner(a) for a in args]]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              check=check)

    def run(self, args, env: dict | None = None, check: bool = True
            ) -> subprocess.CompletedProcess:
        return self.inside(args, {**self.env, **(env or {})}, cwd=STATE / "jobs",
                           check=check)

    def write_config(self, output_dir: str | None = None, export_slurm_hostfile: bool = False,
                     extra: str = "") -> None:
        text = BASE_CONFIG.format(state=STATE,
                                  export_slurm_hostfile=str(export_slurm_hostfile).lower())
        if output_dir is not None:
            text = text.replace(f'output_dir = "{STATE}/out"', f'output_dir = "{output_dir}"')
        (self.state / "rankmap.toml").write_text(text + extra)

    def restart(self, **scripts: str) -> None:
        raise NotImplementedError("the Debian 13 lane's cluster is brought up once")


def _ok(proc: subprocess.CompletedProcess, what: str) -> str:
    assert proc.returncode == 0, f"{what} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def _holder_file(root: Path) -> Path:
    return root / LANE.relative_to("/") / "holder.pid"


def _stop_stale_holder(root: Path) -> None:
    """The holder of a session that was killed (SIGKILL: no teardown ran), if it is
    still there: a ``sleep infinity`` whose root is this root."""
    try:
        pid = int(_holder_file(root).read_text())
        if (os.readlink(f"/proc/{pid}/root") == str(root) and
                Path(f"/proc/{pid}/cmdline").read_bytes() == b"/bin/sleep\0infinity\0"):
            os.kill(pid, signal.SIGKILL)
    except (OSError, ValueError):
        pass


def _start_holder(root: Path) -> subprocess.Popen:
    """A process chrooted into the root, in a private mount namespace where the root's
    /proc, /sys and /dev are the host's: the lane's commands join it."""
    _stop_stale_holder(root)
    holder = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c",
         'mount --rbind /proc "$1/proc" && mount --rbind /sys "$1/sys" && '
         'mount --rbind /dev "$1/dev" && exec chroot "$1" /bin/sleep infinity',
         "sh", str(root)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env={"PATH": PATH}, start_new_session=True)
    for _ in range(100):
        if holder.poll() is not None:
            pytest.fail(f"cannot enter {root}: {holder.stderr.read().decode()}")
        try:
            if os.readlink(f"/proc/{holder.pid}/root") == str(root):
                _holder_file(root).parent.mkdir(parents=True, exist_ok=True)
                _holder_file(root).write_text(f"{holder.pid}\n")
                return holder
        except OSError:
            pass
        time.sleep(0.05)
    holder.kill()
    pytest.fail(f"the holder of {root}'s namespace did not chroot in 5 s")


def _stop_holder(holder: subprocess.Popen, root: Path) -> None:
    _holder_file(root).unlink(missing_ok=True)
    if holder.poll() is None:
        os.kill(holder.pid, signal.SIGTERM)
        try:
            holder.wait(10)
        except subprocess.TimeoutExpired:
            holder.kill()
            holder.wait()


def _copy_checkout(root: Path) -> None:
    """The checkout's files as git sees them (tracked and untracked, not ignored: no
    .git, .venv, build, compiled extensions or caches); a tree without git: all but
    EXCLUDES."""
    src = root / LANE.relative_to("/") / "src"
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir(parents=True)
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-co", "--exclude-standard",
                             "-z"], capture_output=True, env={"PATH": PATH})
    if listed.returncode == 0:
        for name in listed.stdout.decode().split("\0"):
            path = ROOT / name
            if name and path.is_file():  # a tracked file deleted in the tree is skipped
                (src / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, src / name)
        return
    excludes = " ".join(f"--exclude='{e}'" for e in EXCLUDES)
    tar = subprocess.run(f"tar -C {ROOT} {excludes} -cf - . | tar -C {src} -xf -",
                         shell=True, capture_output=True, text=True)
    assert tar.returncode == 0, tar.stderr


def _wrapper(path: Path, command: Path) -> str:
    path.write_text(f"#!/bin/sh\nRANKMAP_CONFIG={STATE}/rankmap.toml exec {command}\n")
    path.chmod(0o755)
    return str(STATE / path.parent.name / path.name)


@pytest.fixture(scope="module")
def debian13():
    version = host_debian_version()
    if version.startswith("13") or version.startswith("trixie"):
        pytest.skip(f"this machine is Debian {version}: the main e2e suite already runs "
                    "Debian 13's Slurm and Open MPI")
    wanted = os.environ.get("RANKMAP_TRIXIE_ROOT")
    if wanted == "":
        pytest.skip("RANKMAP_TRIXIE_ROOT is empty: the Debian 13 lane is turned off")
    for tool in ("unshare", "nsenter", "chroot", "tar"):
        if not shutil.which(tool, path=PATH):
            pytest.skip(f"{tool} not installed")
    start = time.monotonic()
    built = _run(["bash", BUILD_ROOT, *([wanted] if wanted else [])], timeout=1800)
    if built.returncode == 75:
        pytest.skip(f"no Debian 13 root: {built.stderr.strip().splitlines()[-1]}")
    root = Path(_ok(built, "build_trixie_root.sh").strip().splitlines()[-1])
    print(f"\nDebian 13 root {root} ready in {time.monotonic() - start:.0f} s")
    holder = _start_holder(root)
    cluster = RootCluster(root, holder.pid)
    cluster_py = LANE / "src/deploy/testcluster/cluster.py"
    try:
        # a previous run's daemons (its started.json), then a clean state directory
        if (cluster.state / "started.json").exists():
            cluster.inside(["python3", cluster_py, "down", "--state-dir", STATE])
        shutil.rmtree(cluster.state, ignore_errors=True)
        for sub in ("jobs", "out", "profiles", "bin", "fallback", "home"):
            (cluster.state / sub).mkdir(parents=True)
        os.chmod(cluster.state, 0o755)
        os.chmod(cluster.state / "jobs", 0o1777)
        os.chmod(cluster.state / "home", 0o1777)  # the users' stores and recordings
        _copy_checkout(root)
        for user in USERS:
            if cluster.inside(["id", "-u", user]).returncode:
                _ok(cluster.inside(["useradd", "--system", "--no-create-home", "--home-dir",
                                    "/nonexistent", "--shell", "/bin/bash", user]), "useradd")
        # deploy/install.sh with the root's python3, as a site would (PIP_* for pip)
        t0 = time.monotonic()
        pip_env = {k: v for k, v in os.environ.items() if k.startswith("PIP_")}
        prefix = LANE / "prefix"
        installed = cluster.inside(
            ["bash", LANE / "src/deploy/install.sh", "--prefix", prefix,
             "--python", "/usr/bin/python3", "--etc-dir", STATE / "etc",
             "--log-dir", STATE / "log", "--run-dir", STATE / "run",
             "--tmpfiles-dir", STATE / "tmpfiles.d"], env=pip_env, timeout=1800)
        out = _ok(installed, "deploy/install.sh in the Debian 13 root")
        print(f"install.sh in the root: {time.monotonic() - t0:.0f} s")
        assert "SPANK plugin" in out and "rank binder" in out, out
        cluster.write_config()
        bindir = cluster.state / "bin"
        scripts = {"prolog": _wrapper(bindir / "prolog.sh", prefix / "bin/rankmap-prolog"),
                   "epilog": _wrapper(bindir / "epilog.sh", prefix / "bin/rankmap-epilog"),
                   "task-prolog": _wrapper(bindir / "task_prolog.sh",
                                           prefix / "bin/rankmap-task-prolog"),
                   "task-epilog": _wrapper(bindir / "task_epilog.sh",
                                           prefix / "bin/rankmap-task-epilog")}
        (cluster.state / "plugstack.conf").write_text(
            f"optional {prefix}/lib/rankmap_spank.so max_time=60\n")
        for program in ("rankinfo", "halo"):
            _ok(cluster.inside(["mpicc", "-O2", "-o", STATE / f"bin/{program}",
                                LANE / f"src/tests/data/mpi/{program}.c"]), "mpicc")
        args = ["python3", cluster_py, "up", "--state-dir", STATE, "--ctld-port", CTLD_PORT,
                "--slurmd-port", SLURMD_PORT, "--plugstack", STATE / "plugstack.conf"]
        for key, path in scripts.items():
            args += [f"--{key}", path]
        _ok(cluster.inside(args, timeout=180), "cluster.py up in the Debian 13 root")
        cluster.scripts = scripts
        print(f"Debian 13 lane up in {time.monotonic() - start:.0f} s")
        yield cluster
    finally:
        try:
            cluster.inside(["python3", cluster_py, "down", "--state-dir", STATE])
        finally:
            _stop_holder(holder, root)


@pytest.fixture(scope="module")
def scrambled(debian13):
    """zigzag8 (as in test_current_slurm): 8 ranks in a ring that alternates between
    the halves of the rank range, so that Slurm's block placement (2 ranks per node)
    sends every message between nodes and rankmap's placement is applied; and a corrupt
    profile; gpu6 for the GPU job."""
    store = debian13.state / "profiles"
    order = [0, 4, 1, 5, 2, 6, 3, 7]
    edges = [(order[i] + 1, order[(i + 1) % 8] + 1) for i in range(8)]
    (store / "zigzag8.mtx").write_text(
        "%%MatrixMarket matrix coordinate real general\n8 8 8\n"
        + "".join(f"{u} {v} 1000000\n" for u, v in edges))
    (store / "zigzag8.toml").write_text('ranks = 8\nunits = "bytes"\nfile = "zigzag8.mtx"\n')
    (store / "corrupt.toml").write_text('ranks = 8\nfile = "corrupt.mtx"\n')
    # gpu6: 6 ranks, 3 per node, in a ring over the two nodes' halves (block splits it)
    order = [0, 3, 1, 4, 2, 5]
    edges = [(order[i] + 1, order[(i + 1) % 6] + 1) for i in range(6)]
    (store / "gpu6.mtx").write_text(
        "%%MatrixMarket matrix coordinate real general\n6 6 6\n"
        + "".join(f"{u} {v} 1000000\n" for u, v in edges))
    (store / "gpu6.toml").write_text('ranks = 6\nunits = "bytes"\nfile = "gpu6.mtx"\n')
    (store / "corrupt.mtx").write_text("%%MatrixMarket matrix coordinate real general\n"
                                       "8 8 2\n1 2 5\nthis is not a number\n")
    return debian13


#: a plain mpirun, as in test_jobs.MPI_JOB, plus what Open MPI 5.0.7 gets (OMPI_PRTERUN,
#: the bind file) and nothing to fake the hardware: the ranks run on real cores
MPI_JOB = """
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,sm
echo "OMPI_PRTERUN=$OMPI_PRTERUN"
[ -n "$RANKMAP_RANKFILE" ] && sed 's/^/RF: /' "$RANKMAP_RANKFILE"
[ -n "$RANKMAP_BIND_FILE" ] && sed 1d "$RANKMAP_BIND_FILE" | sed 's/^/BIND: /'
[ -n "$RANKMAP_REPORT" ] && sed 's/^/REPORT: /' "$RANKMAP_REPORT"
{before}
# a launch that hangs is ended (the harness then submits a new job: run_launch_job)
timeout -k 10 90 {launch} 2>&1
echo "MPIRUN_RC=$?"
"""

JOB_ARGS = ("-N4", "--ntasks-per-node=2", "-m", "block:block")


def mpi_job(launch: str = "mpirun {state}/bin/rankinfo", before: str = "") -> str:
    return MPI_JOB.format(launch=launch.format(state=STATE), before=before)


def planned(output: str) -> dict[int, tuple[str, int, int]]:
    """rank -> (host, socket, core) from the bind file's records the job printed."""
    return {int(r): (h, int(s), int(c)) for r, h, s, c in
            re.findall(r"^BIND: (\d+) (\S+) (\d+):(\d+)\s*$", output, re.M)}


def assert_ranks_ran_where_planned(job, nranks: int = 8) -> dict:
    """Every rank on the host and the core the bind file plans (socket 0's cores are
    CPUs 0 and 1 here), and the rankfile saying the same."""
    assert job.state == "COMPLETED", job.output
    assert "MPIRUN_RC=0" in job.output, job.output
    plan = planned(job.output)
    assert sorted(plan) == list(range(nranks)), job.output
    rankfile = {int(r): (h, int(s), int(c)) for r, h, s, c in
                re.findall(r"^RF: rank (\d+)=(\S+) slot=(\d+):(\d+)$", job.output, re.M)}
    assert rankfile == plan, job.output
    ran = {int(r): (h, int(cpu)) for r, h, cpu in
           re.findall(r"^rank (\d+) host (\S+) cpu (\d+)", job.output, re.M)}
    assert sorted(ran) == list(range(nranks)), job.output
    assert {s for _, s, _ in plan.values()} == {0}, plan  # block:block: socket 0
    wrong = {r: (ran[r], plan[r]) for r in plan if ran[r] != (plan[r][0], plan[r][2])}
    assert not wrong, f"ranks off their plan (ran, planned): {wrong}\n{job.output}"
    assert "REPORT:   rankmap's placement applied" in job.output, job.output
    return plan


def test_the_lane_runs_debian13s_slurm_and_open_mpi(debian13):
    c = debian13
    assert c.inside(["cat", "/etc/debian_version"]).stdout.startswith("13")
    assert " 24.11." in c.run(["sinfo", "--version"]).stdout
    ompi = c.inside(["mpirun", "--version"]).stdout
    assert "5.0.7" in ompi, ompi
    assert c.run(["sbatch", "--help"]).stdout.count("--comm-profile=NAME") == 1


def test_mpirun_ranks_run_where_planned(scrambled):
    """Open MPI 5.0.7's plain mpirun: rankmap-prterun hands it the rankfile (hosts),
    librankmap_bind puts each rank on its core."""
    c = scrambled
    job = c.run_launch_job(mpi_job(), *JOB_ARGS, "--comm-profile=zigzag8")
    assert "OMPI_PRTERUN=/opt/rankmap-debian13/prefix/bin/rankmap-prterun" in job.output
    plan = assert_ranks_ran_where_planned(job)
    assert len({h for h, _, _ in plan.values()}) == 4


def test_unprivileged_users_mpirun_ranks_run_where_planned(scrambled):
    c = scrambled
    job = c.run_launch_job(mpi_job(before="id -un"), *JOB_ARGS, "--comm-profile=zigzag8",
                           user=USERS[0])
    assert f"\n{USERS[0]}\n" in job.output and "TaskProlog failed" not in job.output
    assert_ranks_ran_where_planned(job)


@pytest.mark.parametrize("profile, reason", [
    ("nosuch", "not found in the profile stores"),
    ("corrupt", "corrupt.mtx"),
])
def test_a_profile_that_cannot_be_loaded_falls_back(scrambled, profile, reason):
    """The report says why, the job runs on Slurm's placement (its mpirun too: no
    rankfile, no wrapper, no binder), no node is drained."""
    c = scrambled
    job = c.run_launch_job(mpi_job(), *JOB_ARGS, f"--comm-profile={profile}")
    assert job.state == "COMPLETED", job.output
    assert "rankmap was NOT applied" in job.output and reason in job.output, job.output
    assert "OMPI_PRTERUN=\n" in job.output and "BIND: " not in job.output, job.output
    assert "MPIRUN_RC=0" in job.output, job.output
    assert len(re.findall(r"^rank \d+ host", job.output, re.M)) == 8, job.output
    assert re.search(rf"job {job.job_id}: .*{re.escape(reason)}", c.log_text()), \
        c.log_text()[-3000:]
    states = c.node_states()
    assert all(s in ("idle", "mixed", "allocated") for s in states.values()), states


def test_a_plain_srun_follows_the_plan(scrambled):
    """A plain ``srun --mpi=pmix`` (nothing typed) on Slurm 24.11: the SPANK plugin gives
    srun the batch step's RANKMAP_SRUN_HOSTFILE; every rank on its planned host and
    core, from its first instruction (the plugin binds each task before it execs)."""
    c = scrambled
    plugins = c.run(["srun", "--mpi=list"], check=False)
    if "pmix" not in plugins.stdout + plugins.stderr:
        pytest.skip(f"Debian 13's Slurm has no pmix plugin here: {plugins.stdout.strip()} "
                    f"{plugins.stderr.strip()}")
    job = c.run_launch_job(mpi_job("srun --mpi=pmix {state}/bin/rankinfo --affinity --start"),
                           *JOB_ARGS, "--comm-profile=zigzag8")
    plan = assert_ranks_ran_where_planned(job)
    started = {int(r): (h, s) for r, h, s in re.findall(
        r"^rank (\d+) host (\S+) cpu \d+ allowed \S+ start (\S+)$", job.output, re.M)}
    assert started == {r: (h, str(core)) for r, (h, _, core) in plan.items()}, job.output


def test_srun_pmix_follows_the_machinefile(scrambled):
    """``srun --mpi=pmix`` with the machinefile as SLURM_HOSTFILE: every rank on its
    planned host (Slurm's arbitrary distribution) and core (the binder)."""
    c = scrambled
    plugins = c.run(["srun", "--mpi=list"], check=False)
    if "pmix" not in plugins.stdout + plugins.stderr:
        pytest.skip(f"Debian 13's Slurm has no pmix plugin here: {plugins.stdout.strip()} "
                    f"{plugins.stderr.strip()}")
    job = c.run_launch_job(
        mpi_job("srun --mpi=pmix --distribution=arbitrary -n 8 {state}/bin/rankinfo",
                before='export SLURM_HOSTFILE="$RANKMAP_MACHINEFILE"'),
        *JOB_ARGS, "--comm-profile=zigzag8")
    assert_ranks_ran_where_planned(job)


def test_a_plain_srun_gives_each_gpu_rank_its_planned_gpu(scrambled):
    """Slurm 24.11 with the local cluster's fake GPUs (--gpus-per-task=1, three tasks on
    each of two nodes): every rank of a plain ``srun`` starts with the four device
    variables naming exactly its bind record's GPU, three GPUs per node, and the mark
    of the SPANK plugin's narrowing (RANKMAP_GPUS): Slurm 24.11's own binding (local task
    i: the node's i-th GPU) may give the same GPUs.  Cores are not checked: Slurm
    spreads GPU tasks over both sockets, past this machine's two cores."""
    c = scrambled
    plugins = c.run(["srun", "--mpi=list"], check=False)
    if "pmix" not in plugins.stdout + plugins.stderr:
        pytest.skip("Debian 13's Slurm has no pmix plugin here")
    job = c.run_launch_job(mpi_job("srun --mpi=pmix {state}/bin/rankinfo --gpus --mark"),
                           "-N2", "-w", "n2,n3", "--ntasks-per-node=3", "--gpus-per-task=1",
                           "--comm-profile=gpu6", user=USERS[0])
    assert job.state == "COMPLETED" and "MPIRUN_RC=0" in job.output, job.output
    assert "REPORT:   rankmap's placement applied" in job.output, job.output
    plan = {int(r): (h, g) for r, h, g in re.findall(
        r"^BIND: (\d+) (\S+) \d+:\S+ gpu=(\d+)\s*$", job.output, re.M)}
    assert sorted(plan) == list(range(6)), job.output
    ran = {int(r): (h, d, m) for r, h, d, m in re.findall(
        r"^rank (\d+) host (\S+) cpu -?\d+ gpus (\S+) mark (\S+)$", job.output, re.M)}
    assert ran == {r: (h, ";".join([g] * 4), g) for r, (h, g) in plan.items()}, job.output
    for node in ("n2", "n3"):
        assert len({g for h, g in plan.values() if h == node}) == 3, plan


def test_open_mpi_5_monitoring_records_a_users_job(debian13):
    """``--rankmap-record=NAME`` with Open MPI 5.0.7's plain mpirun, as an unprivileged
    user: the TaskProlog switches on Open MPI's monitoring components, the TaskEpilog
    stores the profile in the user's own store; the stored matrix is what the
    monitoring files say (parsed here), and the application's part is halo's traffic
    (tests/data/mpi/halo.c; a persistent send is counted or not, as the MPI does)."""
    import numpy as np
    import tomllib

    from tests.e2e.test_recording_jobs import monitoring_matrix, read_store_matrix, wait_for
    from tests.slurm_plugin.profiles.test_recording import halo_p2p, undirected

    c = debian13
    user = USERS[0]
    copy = c.state / "jobs" / f"monitoring-{time.monotonic_ns()}"
    after = f'cp -r "$(dirname "$OMPI_MCA_pml_monitoring_filename")" {STATE}/jobs/{copy.name}'
    # halo talks between the emulated nodes (rankinfo does not): tcp over lo too
    before = "export OMPI_MCA_btl=self,sm,tcp OMPI_MCA_btl_tcp_if_include=lo"
    job = c.run_launch_job(mpi_job("mpirun {state}/bin/halo", before=before) + after + "\n",
                           *JOB_ARGS, "--rankmap-record=halo8-ompi5", user=user)
    assert job.state == "COMPLETED" and "MPIRUN_RC=0" in job.output, job.output
    assert "recording this job's communication as profile halo8-ompi5" in job.output
    toml = c.state / "home" / user / "profiles" / "halo8-ompi5.toml"
    assert wait_for(toml.exists), (job.output, sorted((c.state / "home").rglob("*")))
    entry = tomllib.loads(toml.read_text())
    assert entry["ranks"] == 8 and entry["runs"][0]["recorder"] == "Open MPI monitoring"
    assert np.array_equal(read_store_matrix(toml.with_suffix(".mtx")),
                          monitoring_matrix(copy, "EI"))
    p2p = halo_p2p(8)
    without_persistent = p2p.copy()
    for r in range(8):
        without_persistent[r, (r + 2) % 8] -= 50 * 3
    seen = monitoring_matrix(copy, "E")
    assert (np.array_equal(seen, undirected(p2p))
            or np.array_equal(seen, undirected(without_persistent))), seen



def test_the_recorder_counts_exactly_and_never_harms_under_open_mpi_5(debian13):
    """Issue 50 in the lane, Open MPI 5.0.7 of Debian 13, librankmap_record as
    install.sh put it in the root (no Slurm job: mpirun as root): halo.c recorded to
    the byte; 8 threads under MPI_THREAD_MULTIPLE on 700 communicators counted exactly,
    each communicator's group asked once (an interposer after the recorder counts);
    MPI_Send_c and the other large-count functions, which 5.0 lacks, found only as
    without the recorder; a rank that forks and execs, and one that aborts, end as
    without it."""
    from slurm_plugin.profiles.recording import read_recording
    from tests.slurm_plugin.preload.test_do_no_harm import own_lines
    from tests.slurm_plugin.profiles.test_recording import (
        halo_p2p,
        interposer_counts,
        threads_p2p,
    )

    c = debian13
    work = c.state / "jobs" / f"recorder-{time.monotonic_ns()}"
    work.mkdir()
    inner = STATE / "jobs" / work.name
    src = LANE / "src/tests/data/mpi"
    for program, flags in (("threads", ["-pthread"]), ("largecount", []), ("harm", [])):
        _ok(c.inside(["mpicc", "-O2", *flags, "-o", inner / program,
                      src / f"{program}.c"]), f"mpicc {program}.c")
    _ok(c.inside(["cc", "-O2", "-shared", "-fPIC", "-o", inner / "libinterposer.so",
                  src / "interposer.c", "-ldl"]), "cc interposer.c")
    library = LANE / "prefix/lib/librankmap_record.so"

    def mpirun(args: list, preload: str = "", record: str = "", n: int = 4):
        env = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
        if preload:
            env["LD_PRELOAD"] = preload
        if record:
            (work / f"rec-{record}").mkdir()
            env["RANKMAP_RECORD_DIR"] = str(inner / f"rec-{record}")
        return c.inside(["mpirun", "--oversubscribe", "-np", str(n), *args], env=env,
                        cwd=inner, timeout=180)

    _ok(mpirun([STATE / "bin/halo"], str(library), "halo"), "halo under the recorder")
    rec = read_recording(work / "rec-halo/run.0")
    assert "Open MPI v5" in rec.mpi and rec.dropped == (0, 0, 0)
    assert np.array_equal(rec.p2p.toarray(), halo_p2p(4))

    proc = mpirun([inner / "threads", "700", "3"], f"{library}:{inner}/libinterposer.so",
                  "threads")
    _ok(proc, "threads under the recorder and the interposer")
    rec = read_recording(work / "rec-threads/run.0")
    assert np.array_equal(rec.p2p.toarray(), threads_p2p(4, 700, 3))
    counts = interposer_counts(proc.stderr)
    assert sorted(counts) == [0, 1, 2, 3]
    assert all(v == (0, 700 * 3, 701) for v in counts.values()), counts

    plain = mpirun([inner / "largecount"], n=2)
    ours = mpirun([inner / "largecount"], str(library), "largecount", n=2)
    assert _ok(ours, "largecount") == _ok(plain, "largecount") == "large-count: none\n"

    for mode in ("fork", "abort"):
        plain = mpirun([inner / "harm", mode], n=2)
        ours = mpirun([inner / "harm", mode], str(library), f"harm-{mode}", n=2)
        assert ours.returncode == plain.returncode, (plain.stderr, ours.stderr)
        # an aborted launch may lose its ranks' last output, with or without us
        lines = [own_lines(p.stdout, "harm:") for p in (ours, plain)]
        assert (lines[0] == lines[1] if mode == "fork" else
                set(lines[0]) <= set(lines[1]) | {"harm: rank 1 ends now"}), lines
