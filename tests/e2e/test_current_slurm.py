"""End-to-end on current Slurm releases built from source (issue 15): the CI lanes.

Part of the README's test command, one lane per release whose source archive is found:

* 25.11.7 with the **pyslurm** backend (PyPI pyslurm 25.11.2 built against it),
* 26.05.3 with the CLI backend (PyPI has no pyslurm for it).

Archive: ``$RANKMAP_SLURM_2511_ARCHIVE`` / ``$RANKMAP_SLURM_2605_ARCHIVE`` (a file, or a
directory holding ``slurm-X.Y.Z.tar.gz``; set to the empty string to turn the lane
off), else ``../shared/vendor/slurm-X.Y.Z.tar.gz`` next to the project.  Without it the
lane skips and says why.  Needs root (skips otherwise).

In the session: deploy/testcluster/build_slurm.sh builds the release once (cached in
/opt/rankmap-slurm/X.Y.Z, about 3 minutes cold; apt build dependencies installed when
missing), build_pyslurm.sh builds the pyslurm wheel once (cached in PREFIX/wheels).
pyslurm is not installed into the project's .venv: each lane has its own small venv in
its state directory (``/tmp/rankmap-e2e-X.Y.Z/venv``) that sees .venv's packages and
the project through a .pth file, plus pyslurm — the Python the lane's prolog, worker
and comparison scripts run with.  The cluster (deploy/testcluster/cluster.py, four
nodes, topology.yaml: tree as cluster default, partition ``blocked`` on a block
topology, ``flatp`` flat) runs on its own ports, so it runs beside the Debian 22.05
cluster of tests/e2e/conftest.py.

Checked per lane: the topology rankmap reads for a real job in the tree, block and flat
partitions; a real MPI job placed by the prolog through the lane's backend (SPANK
option built against the release's headers, TaskProlog, rankfile, Open MPI's mpirun:
every rank runs where the rankfile says); on 25.11, the same job's Layout through
pyslurm and through the CLI, pyslurm answering every item it has.  Slurm's commands
are found through ``[slurm] bin_dir`` only: Debian's 22.05 commands stay first on PATH.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.conftest import skip_emulated_topology_on_open_mpi_5

ROOT = Path(__file__).resolve().parents[2]
VENDOR = ROOT.parent / "shared" / "vendor"
TESTCLUSTER = ROOT / "deploy" / "testcluster"
#: PATH of everything the lanes run: no release prefix on it (bin_dir must find them)
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class Lane:
    version: str
    env_var: str
    ctld_port: int
    slurmd_port: int
    backend: str


LANES = {"25.11": Lane("25.11.7", "RANKMAP_SLURM_2511_ARCHIVE", 18817, 18900, "pyslurm"),
         "26.05": Lane("26.05.3", "RANKMAP_SLURM_2605_ARCHIVE", 19817, 19900, "scontrol")}

pytestmark = [pytest.mark.slurm,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root (builds and runs "
                                 "slurmctld/slurmd)")]


def lane_archive(lane: Lane, environ=os.environ) -> tuple[Path | None, str]:
    """The lane's source archive, or None and the reason it is skipped."""
    name = f"slurm-{lane.version}.tar.gz"
    if lane.env_var in environ:
        value = environ[lane.env_var]
        if not value:
            return None, f"{lane.env_var} is empty: lane {lane.version} turned off"
        path = Path(value)
        path = path / name if path.is_dir() else path
        where = f"{lane.env_var}={value}"
    else:
        path = VENDOR / name
        where = f"{lane.env_var} unset"
    if not path.is_file():
        return None, f"no Slurm {lane.version} archive ({where}; looked for {path})"
    return path, ""


def _run(args, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("env", {"PATH": PATH, "HOME": os.environ.get("HOME", "/root"),
                          "LC_ALL": "C"})
    return subprocess.run([str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout, **kw)


def _ok(proc: subprocess.CompletedProcess, what: str) -> str:
    """stdout of a command that must succeed."""
    assert proc.returncode == 0, f"{what} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def _last_line(proc: subprocess.CompletedProcess, what: str) -> str:
    lines = _ok(proc, what).strip().splitlines()
    assert lines, f"{what} printed nothing"
    return lines[-1]


@pytest.fixture(scope="session")
def slurm_builds():
    """``build(lane, archive)`` → (prefix, pyslurm wheel or None), each built once."""
    done: dict[str, tuple[str, str | None]] = {}

    def build(lane: Lane, archive: Path) -> tuple[str, str | None]:
        if lane.version not in done:
            start = time.monotonic()
            prefix = _last_line(_run(["bash", TESTCLUSTER / "build_slurm.sh", archive],
                                     timeout=1800), f"build_slurm.sh {archive}")
            wheel = None
            if lane.backend == "pyslurm":
                wheel = _last_line(_run(["bash", TESTCLUSTER / "build_pyslurm.sh", prefix,
                                         sys.executable], timeout=1800),
                                   f"build_pyslurm.sh {prefix}")
            done[lane.version] = (prefix, wheel)
            print(f"\nSlurm {lane.version} ready in {time.monotonic() - start:.0f} s: {prefix}")
        return done[lane.version]

    return build


def _lane_python(state: Path, wheel: str | None) -> str:
    """A venv of the lane's own: .venv's packages and the project (a .pth file) plus
    pyslurm (the wheel), so pyslurm never lands in .venv."""
    venv = state / "venv"
    _ok(_run([sys.executable, "-m", "venv", "--without-pip", venv]), "venv")
    python = str(venv / "bin" / "python")
    purelib = _last_line(_run([python, "-c", "import sysconfig; "
                               "print(sysconfig.get_paths()['purelib'])"]), "sysconfig")
    import sysconfig

    ours = sysconfig.get_paths()["purelib"]
    Path(purelib, "rankmap_dev.pth").write_text(
        f"import site; site.addsitedir({ours!r})\n{ROOT}\n")
    if wheel:
        _ok(_run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                  purelib, wheel], timeout=300), f"pip install {wheel}")
    return python


def _zigzag_profile(store: Path) -> None:
    """8 ranks in a ring that alternates between the halves of the rank range: Slurm's
    block placement on 2 nodes x 4 puts every message between nodes; rankmap can keep
    most of them inside nodes, so its placement is applied."""
    order = [0, 4, 1, 5, 2, 6, 3, 7]
    edges = [(order[i] + 1, order[(i + 1) % 8] + 1) for i in range(8)]
    store.mkdir(parents=True, exist_ok=True)
    (store / "zigzag8.mtx").write_text(
        "%%MatrixMarket matrix coordinate real general\n8 8 8\n"
        + "".join(f"{u} {v} 1000000\n" for u, v in edges))
    (store / "zigzag8.toml").write_text('ranks = 8\nunits = "bytes"\nfile = "zigzag8.mtx"\n')


def _wrapper(path: Path, python: str, code: str, config: Path) -> str:
    path.write_text(f"#!/bin/sh\nRANKMAP_CONFIG={config} exec {python} -c '{code}'\n")
    path.chmod(0o755)
    return str(path)


@pytest.fixture(scope="module", params=sorted(LANES))
def current(request, slurm_builds):
    lane = LANES[request.param]
    archive, why = lane_archive(lane)
    if archive is None:
        pytest.skip(why)
    prefix, wheel = slurm_builds(lane, archive)
    state = Path(f"/tmp/rankmap-e2e-{lane.version}")
    cluster = [sys.executable, TESTCLUSTER / "cluster.py"]
    _run(cluster + ["down", "--state-dir", state])
    for sub in ("out", "fallback", "profiles", "lib", "bin", "jobs", "venv"):
        shutil.rmtree(state / sub, ignore_errors=True)
        (state / sub).mkdir(parents=True)
    (state / "rankmap.log").unlink(missing_ok=True)
    python = _lane_python(state, wheel)
    _zigzag_profile(state / "profiles")
    config = state / "rankmap.toml"
    config.write_text(f"""
[general]
output_dir = "{state}/out"
log_file = "{state}/rankmap.log"
log_level = "debug"
[slurm]
backend = "{lane.backend}"
bin_dir = "{prefix}/bin"
[profiles]
stores = ["{state}/profiles"]
[prolog]
fallback_dir = "{state}/fallback"
grace_seconds = 30.0
""")
    scripts = {
        "prolog": _wrapper(state / "bin/prolog.sh", python,
                           "from slurm_plugin.lifecycle.prolog import main; "
                           "raise SystemExit(main())",
                           config),
        "epilog": _wrapper(state / "bin/epilog.sh", python,
                           "from slurm_plugin.lifecycle.prolog import epilog_main; "
                           "raise SystemExit(epilog_main())", config),
        "task-prolog": _wrapper(state / "bin/task_prolog.sh", python,
                                "from slurm_plugin.lifecycle.task_prolog import main; "
                                "raise SystemExit(main())", config)}
    # the SPANK plugin against this release's headers (they change between majors)
    spank = _run(["make", "-s", "-C", ROOT / "slurm_plugin/spank", f"OUT={state}/lib",
                  f"SLURM_INCLUDE={prefix}/include"])
    assert spank.returncode == 0, f"SPANK plugin build failed:\n{spank.stderr}"
    (state / "plugstack.conf").write_text(f"optional {state}/lib/rankmap_spank.so max_time=60\n")
    args = cluster + ["up", "--slurm-prefix", prefix, "--topology-file", "yaml",
                      "--state-dir", state, "--ctld-port", lane.ctld_port,
                      "--slurmd-port", lane.slurmd_port, "--plugstack", state / "plugstack.conf"]
    for key, path in scripts.items():
        args += [f"--{key}", path]
    up = _run(args)
    assert up.returncode == 0, f"cluster.py up failed:\n{up.stdout}\n{up.stderr}"
    env = {"PATH": f"{prefix}/bin:{PATH}", "SLURM_CONF": str(state / "slurm.conf"),
           "LC_ALL": "C", "HOME": str(state)}
    try:
        yield {"lane": lane, "prefix": prefix, "env": env, "python": python, "state": state,
               "outputs": {}}
    finally:
        _run(cluster + ["down", "--state-dir", state])


# -- helpers -----------------------------------------------------------------------------

def _sbatch(c, *args: str, script: str = "sleep 30") -> str:
    skip_emulated_topology_on_open_mpi_5(script)
    path = c["state"] / "jobs" / f"job{time.monotonic_ns()}.sh"
    path.write_text("#!/bin/bash\n" + script)
    out = _run(["sbatch", "--parsable", "-o", f"{path}.out", *args, path], env=c["env"],
               cwd=c["state"] / "jobs")
    assert out.returncode == 0, out.stderr
    job = out.stdout.strip().split(";")[0]
    c["outputs"][job] = Path(f"{path}.out")
    return job


def _job_state(c, job: str) -> str:
    out = _run(["scontrol", "show", "job", "-o", job], env=c["env"]).stdout
    m = re.search(r"JobState=(\S+)", out)
    return m.group(1) if m else "GONE"


def _running_job(c, partition: str) -> str:
    job = _sbatch(c, "-N2", "--ntasks-per-node=4", "-p", partition)
    for _ in range(120):
        state = _job_state(c, job)
        if state == "RUNNING":
            return job
        time.sleep(0.5)
    pytest.fail(f"job {job} did not start: {state}")


def _finished_job(c, job: str, timeout: float = 120) -> tuple[str, str]:
    """The job's final state and its output."""
    deadline = time.time() + timeout
    state = "UNKNOWN"
    while time.time() < deadline:
        state = _job_state(c, job)
        if state not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING"):
            break
        time.sleep(0.5)
    out = c["outputs"][job]
    for _ in range(20):  # the output file can lag the state change by a moment
        if out.exists():
            break
        time.sleep(0.2)
    return state, out.read_text() if out.exists() else ""


COMPARE = r"""
import json, os, sys
from slurm_plugin.slurm.backends import read_allocation, read_node_shapes, read_topology
from slurm_plugin.lifecycle.job_worker import log_notes
from slurm_plugin.machine.layout import build_layout
from slurm_plugin.slurm.slurm_commands import with_bin_dir
job, backend, partition, bin_dir = sys.argv[1:5]
env = with_bin_dir(dict(os.environ, SLURM_JOB_PARTITION=partition), bin_dir)
with log_notes() as notes:
    alloc = read_allocation(job, env, backend)
    shapes = read_node_shapes(alloc.nodes, env, backend)
    tree = read_topology("auto", 10, env, backend)
layout = build_layout(alloc, shapes, tree, [1, 10, 100, 1000])
try:
    import pyslurm
    version = pyslurm.__version__
except ImportError:
    version = None
print(json.dumps({"slots": [[s.host, s.socket, list(s.cores)] for s in layout.slots],
                  "levels": list(layout.hierarchy.level_names),
                  "bounds": [list(map(int, b)) for b in layout.hierarchy.bounds],
                  "tree": {k: list(v) for k, v in tree.nodes.items()} if tree else None,
                  "alloc": [alloc.nodes, alloc.tasks_per_node, alloc.partition],
                  "notes": notes, "pyslurm": version}))
"""


def _layout(c, job: str, backend: str, partition: str) -> dict:
    # PATH has Debian's 22.05 commands, not this release's: [slurm] bin_dir must be used
    env = {"PATH": PATH, "SLURM_CONF": c["env"]["SLURM_CONF"], "LC_ALL": "C"}
    out = _run([c["python"], "-c", COMPARE, job, backend, partition, f"{c['prefix']}/bin"],
               env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- tests -------------------------------------------------------------------------------

@pytest.mark.parametrize("partition, leaves, levels", [
    ("debug", {"s1": ["n1", "n2"], "s2": ["n3", "n4"]}, 4),
    ("blocked", {"b1": ["n1", "n2"], "b2": ["n3", "n4"]}, 4),
    ("flatp", {}, 3),  # socket, node, root: no switch level
])
def test_topology_of_a_real_job(current, partition, leaves, levels):
    """tree from topology.yaml for the default partition, the block topology for
    ``blocked`` and no switch level for ``flatp`` (their Topology=), read for a running
    job through the CLI backend."""
    job = _running_job(current, partition)
    try:
        got = _layout(current, job, "scontrol", partition)
    finally:
        _run(["scancel", job], env=current["env"])
    assert got["tree"] == leaves
    assert len(got["levels"]) == levels and got["levels"][:2] == ["socket", "node"], \
        got["levels"]
    assert got["alloc"][1] == [4, 4] and got["alloc"][2] == partition
    assert len(got["slots"]) == 8


@pytest.mark.parametrize("partition", ["debug", "blocked"])
def test_pyslurm_and_cli_give_the_same_layout(current, partition):
    if current["lane"].backend != "pyslurm":
        pytest.skip("PyPI has pyslurm only for 25.11")
    job = _running_job(current, partition)
    try:
        by_cli = _layout(current, job, "scontrol", partition)
        by_pyslurm = _layout(current, job, "pyslurm", partition)
    finally:
        _run(["scancel", job], env=current["env"])
    assert by_pyslurm["pyslurm"] == "25.11.2"
    # pyslurm answered the allocation and every node itself: no CLI fallback
    assert not [n for n in by_pyslurm["notes"] if "using scontrol" in n], by_pyslurm["notes"]
    assert any("no topology API" in n for n in by_pyslurm["notes"])
    for key in ("slots", "levels", "bounds", "tree", "alloc"):
        assert by_pyslurm[key] == by_cli[key], key


MPI_JOB = """
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_hwloc_base_topo_file={state}/topo-2x4.xml
[ -n "$OMPI_MCA_rmaps_rankfile_path" ] && sed 's/^/RF: /' "$OMPI_MCA_rmaps_rankfile_path"
[ -n "$RANKMAP_REPORT" ] && sed 's/^/REPORT: /' "$RANKMAP_REPORT"
mpirun {state}/bin/rankinfo 2>&1
echo "MPIRUN_RC=$?"
"""


@pytest.fixture(scope="module")
def mpi(current):
    for tool in ("mpicc", "mpirun", "lstopo"):
        if not shutil.which(tool, path=PATH):
            pytest.skip(f"{tool} not installed (bash deploy/install-debian-packages.sh)")
    state = current["state"]
    _ok(_run(["mpicc", "-O2", "-o", state / "bin/rankinfo",
              ROOT / "tests/data/mpi/rankinfo.c"]), "mpicc")
    xml = _run(["lstopo", "-i", "package:2 core:4 pu:1", "--of", "xml"])
    assert xml.returncode == 0, xml.stderr
    (state / "topo-2x4.xml").write_text(xml.stdout)
    return current


@pytest.mark.parametrize("partition", ["mapped", "blocked"])
def test_mpi_job_placed_by_the_prolog(mpi, partition):
    """sbatch --comm-profile (the SPANK plugin built for this release) → prolog →
    worker through the lane's backend → rankfile → TaskProlog → mpirun: every rank runs
    on the host the rankfile names, and rankmap's placement was applied."""
    c = mpi
    help_text = _run(["sbatch", "--help"], env=c["env"]).stdout
    assert "--comm-profile=NAME" in help_text
    job = _sbatch(c, "-N2", "--ntasks-per-node=4", "-p", partition, "--comm-profile=zigzag8",
                  script=MPI_JOB.format(state=c["state"]))
    state, output = _finished_job(c, job)
    assert state == "COMPLETED", output
    assert "MPIRUN_RC=0" in output, output
    rankfile = {int(r): h for r, h in re.findall(r"^RF: rank (\d+)=(\S+) slot=", output, re.M)}
    ran = {int(r): h for r, h in re.findall(r"^rank (\d+) host (\S+) cpu", output, re.M)}
    assert sorted(rankfile) == list(range(8)) and sorted(ran) == list(range(8)), output
    assert ran == rankfile
    assert "REPORT:   rankmap's placement applied" in output, output
    log = (c["state"] / "rankmap.log").read_text()
    assert f"job {job}: Slurm backend: {c['lane'].backend}" in log, log[-3000:]
    job_lines = [ln for ln in log.splitlines() if f"job {job}:" in ln]
    assert not [ln for ln in job_lines if "using scontrol" in ln], job_lines
