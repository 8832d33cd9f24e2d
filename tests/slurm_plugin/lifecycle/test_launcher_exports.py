"""What the TaskProlog hands each launcher family ([launchers] supported): Open MPI's
rankfile variables and OMPI_PRTERUN, Hydra's host file variables, the binder's
LD_PRELOAD after the user's own preloads; and rankmap-prterun's decisions.

The job directories are made by the prolog's own code (root's, the job's group), so
these tests need root, like tests/slurm_plugin/lifecycle/test_task_prolog_trust.py."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

import slurm_plugin.common.launcher_support  # noqa: F401  (see below)
from mapper import Hierarchy
from slurm_plugin.common.job_conventions import HYDRA_NEEDS_RANK_MAP
from slurm_plugin.common.jobdir import create_job_dir
from slurm_plugin.common.launcher_support import hydra_hosts
from slurm_plugin.lifecycle.prterun_wrapper import placement_args, real_prterun
from slurm_plugin.lifecycle.task_prolog import exports
from slurm_plugin.machine.layout import Layout, Slot
from slurm_plugin.outputs.render import (
    render_bindfile,
    render_hydra_hostfile,
    render_hydra_rankmap,
)
from tests.helpers.users_harness import as_user

# The TaskProlog imports what it needs when it runs; imported here before as_user forks
# (exports of no job: its imports, then nothing), so that a checkout the job's user
# cannot read (under root's home) still tests.
exports({})
USER = 65534
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (runs as another uid)")


def user_sees(path: Path) -> bool:
    """The job's user can see ``path`` (the TaskProlog runs as that user: a checkout
    under root's home hides this installation's scripts from it)."""
    return as_user(USER, lambda: path.is_file()) is True


def layout(hosts: list[str]) -> Layout:
    h = Hierarchy.from_tree([1] * len(hosts), [1, 10], ["socket", "root"])
    return Layout(h, tuple(Slot(host, 0, (0,), (0,)) for host in hosts),
                  nodes=tuple(dict.fromkeys(hosts)))


def test_hydra_host_file_lists_runs_of_consecutive_ranks():
    lay = layout(["n1", "n1", "n2", "n2", "n3", "n3"])
    assert render_hydra_hostfile(lay, np.array([4, 5, 0, 1, 2, 3])) == "n3:2\nn1:2\nn2:2\n"


def test_interleaved_hosts_give_mpich_each_host_once_and_the_rank_map():
    """Ranks 0, 3 on n1 and 1, 2 on n2: the host file lists each host once with all its
    ranks, and the rank map (Hydra's block syntax) puts each run of ranks on its line;
    evaluated independently: expanding the blocks gives every rank's planned host."""
    lay = layout(["n1", "n1", "n2", "n2"])
    mapping = np.array([0, 2, 3, 1])
    assert render_hydra_hostfile(lay, mapping) == HYDRA_NEEDS_RANK_MAP + "n1:2\nn2:2\n"
    text = render_hydra_rankmap(lay, mapping)
    assert text == "-rankmap (0,1,1),(1,1,2),(0,1,1)\n"
    hosts = hydra_hosts(render_hydra_hostfile(lay, mapping))
    ranks = [hosts[int(i)] for i, _, k in re.findall(r"\((\d+),(1),(\d+)\)", text)
             for _ in range(int(k))]
    assert ranks == [lay.slots[pe].host for pe in mapping]
    assert render_hydra_rankmap(lay, np.array([0, 1, 2, 3])) == ""  # contiguous: no map


def test_a_host_file_that_needs_its_rank_map_is_given_only_with_it(tmp_path):
    """A site whose ``[render] files`` lists hydra_hostfile but not hydra_rankmap: the
    host file of an interleaved placement (each host once) would have Hydra run the
    ranks in blocks on the wrong hosts, so neither MPICH nor Intel MPI gets it."""
    from slurm_plugin.common.launcher_support import planned_offer

    hydra_srun = tmp_path / "rankmap-hydra-srun"
    hydra_srun.write_text("")
    hostfile = HYDRA_NEEDS_RANK_MAP + "n1:2\nn2:2\n"

    def offer(files: dict[str, str]):
        return planned_offer(["hydra"], files, "", "", str(hydra_srun), False)
    assert not offer({"hydra_hostfile": hostfile}).hydra_hostfile
    both = offer({"hydra_hostfile": hostfile, "hydra_rankmap": "-rankmap (0,1,1),(1,1,2)\n"})
    assert both.hydra_hostfile and both.hydra_rankmap
    assert offer({"hydra_hostfile": "n1:2\nn2:2\n"}).hydra_hostfile


def test_a_rank_map_too_long_for_hydra_is_not_given():
    """Hydra passes the map on in at most 1024 characters (a longer one crashed mpiexec):
    a placement of 600 ranks alternating between two hosts gets no map, and its host
    file repeats the hosts, which no launcher is given."""
    lay = layout(["n1"] * 300 + ["n2"] * 300)
    alternating = np.ravel(np.column_stack([np.arange(300), np.arange(300, 600)]))
    assert render_hydra_rankmap(lay, alternating) == ""
    assert render_hydra_hostfile(lay, alternating).startswith("n1:1\nn2:1\nn1:1\n")
    short = np.r_[alternating[:40], np.sort(alternating[40:])]  # 42 runs: a short map
    assert render_hydra_rankmap(lay, short).count("(") == 42


@pytest.fixture
def job(tmp_path):
    base = Path(tempfile.mkdtemp(prefix="rankmap_exports_"))
    os.chmod(base, 0o755)
    out = base / "out"
    out.mkdir(mode=0o755)
    lib = base / "librankmap_bind.so"
    lib.write_bytes(b"\x7fELF")
    lib.chmod(0o755)

    def make(supported: str, hydra: str = "n1:2\n", rankmap: str = "") -> dict[str, str]:
        cfg = base / "rankmap.toml"
        cfg.write_text(f'[general]\noutput_dir = "{out}"\nlog_file = ""\n'
                       f'[prolog]\nfallback_dir = "{base / "fallback"}"\n'
                       f'[launchers]\nsupported = {supported}\nbind_library = "{lib}"\n')
        cfg.chmod(0o644)
        shutil.rmtree(out / "job.600", ignore_errors=True)
        with create_job_dir(out, "600", USER, USER) as jd:
            jd.write({"rankfile": "rank 0=n1 slot=0:0\nrank 1=n1 slot=0:1\n",
                      "bindings": "rankmap-bind 1 2 20\n", "hydra_hostfile": hydra,
                      "slurm_hostfile": "n1\nn1\n", "hydra_rankmap": rankmap,
                      "report_json": json.dumps({"job_id": "600", "applied": True, "n": 2})})
        return {"SLURM_JOB_ID": "600", "RANKMAP_CONFIG": str(cfg),
                "LD_PRELOAD": "/usr/lib/libmine.so"}

    yield out / "job.600", lib, make
    shutil.rmtree(base, ignore_errors=True)


@root_only
def test_every_supported_family_gets_its_variables(job):
    job_dir, lib, make = job
    env = make('["openmpi", "hydra", "srun"]')
    lines = as_user(USER, lambda: exports(env))
    assert f"export OMPI_MCA_rmaps_rank_file_path={job_dir / 'rankfile'}" in lines
    launcher = Path(sys.prefix) / "bin" / "rankmap-hydra-srun"
    if user_sees(launcher):
        assert f"export HYDRA_HOST_FILE={job_dir / 'hydra_hostfile'}" in lines
        assert f"export HYDRA_LAUNCHER_EXEC={launcher}" in lines
        assert f"export I_MPI_HYDRA_HOST_FILE={job_dir / 'hydra_hostfile'}" in lines
        assert f"export I_MPI_HYDRA_BOOTSTRAP_EXEC={launcher}" in lines
    assert f"export LD_PRELOAD=/usr/lib/libmine.so:{lib}" in lines
    assert f"export RANKMAP_BIND_FILE={job_dir / 'bindings'}" in lines
    assert "export RANKMAP_BIND_LAUNCHERS=openmpi,hydra,srun" in lines
    wrapper = Path(sys.prefix) / "bin" / "rankmap-prterun"
    assert (f"export OMPI_PRTERUN={wrapper}" in lines) == user_sees(wrapper)


@root_only
def test_a_family_the_site_does_not_support_gets_nothing(job):
    _, _, make = job
    env = make('["srun"]')
    lines = as_user(USER, lambda: exports(env))
    assert not any("OMPI_" in line or "HYDRA" in line for line in lines), lines
    assert "export RANKMAP_BIND_LAUNCHERS=srun" in lines
    env = make("[]")
    lines = as_user(USER, lambda: exports(env))
    assert not any("LD_PRELOAD" in line for line in lines), lines


@root_only
def test_interleaved_hosts_give_hydra_no_host_file(job):
    _, _, make = job
    env = make('["hydra"]', hydra="n1:1\nn2:1\nn1:1\n")
    lines = as_user(USER, lambda: exports(env))
    assert not any("HYDRA" in line for line in lines), lines
    assert any("MPICH mpiexec: nothing (the placement interleaves hosts" in line
               for line in lines), lines


@root_only
def test_interleaved_hosts_with_a_rank_map_give_mpich_both_and_intel_mpi_nothing(job):
    job_dir, _, make = job
    env = make('["hydra"]', hydra="n1:2\nn2:1\n", rankmap="-rankmap (0,1,1),(1,1,1),(0,1,1)\n")
    lines = as_user(USER, lambda: exports(env))
    if not user_sees(Path(sys.prefix) / "bin" / "rankmap-hydra-srun"):
        pytest.skip("rankmap-hydra-srun is not installed beside this Python")
    assert f"export HYDRA_HOST_FILE={job_dir / 'hydra_hostfile'}" in lines
    assert f"export HYDRA_CONFIG_FILE={job_dir / 'hydra_rankmap'}" in lines
    assert not any("I_MPI" in line for line in lines), lines
    assert any("Intel MPI mpirun: nothing (the placement interleaves hosts" in line
               for line in lines), lines
    assert any("MPICH mpiexec: host and core (5.0.2 and later" in line for line in lines)


@root_only
def test_intel_mpi_is_told_the_ranks_per_host_and_nothing_when_hosts_differ(job):
    """Intel MPI's mpirun ignores the host file's ``host:n`` and runs one rank per core of
    each node (2 here, whatever the job's tasks per node): it gets the count per host
    (I_MPI_PERHOST) when every host has the same, unless the job set its own, and
    nothing, said, when they differ; MPICH takes the counts and gets the file either way."""
    job_dir, _, make = job
    if not user_sees(Path(sys.prefix) / "bin" / "rankmap-hydra-srun"):
        pytest.skip("rankmap-hydra-srun is not installed beside this Python")
    env = make('["hydra"]', hydra="n1:3\nn2:3\n")
    lines = as_user(USER, lambda: exports(env))
    assert "export I_MPI_PERHOST=3" in lines and "export RANKMAP_I_MPI_PERHOST=3" in lines
    assert f"export I_MPI_HYDRA_HOST_FILE={job_dir / 'hydra_hostfile'}" in lines
    own = as_user(USER, lambda: exports({**env, "I_MPI_PERHOST": "allcores"}))
    assert not any("PERHOST" in line for line in own), own
    env = make('["hydra"]', hydra="n1:3\nn2:2\n")
    uneven = as_user(USER, lambda: exports(env))
    assert not any("I_MPI" in line for line in uneven), uneven
    assert f"export HYDRA_HOST_FILE={job_dir / 'hydra_hostfile'}" in uneven
    assert any("Intel MPI mpirun: nothing (the placement gives hosts different numbers"
               in line for line in uneven), uneven


def test_the_binder_names_the_intel_count_the_task_prolog_sets():
    from slurm_plugin.common.job_conventions import INTEL_PERHOST_SET_VAR, INTEL_PERHOST_VAR

    source = (Path(__file__).parents[3] / "slurm_plugin/bind/rankmap_bind.c").read_text()
    assert f'getenv("{INTEL_PERHOST_VAR}")' in source
    assert f'getenv("{INTEL_PERHOST_SET_VAR}")' in source


@pytest.mark.parametrize("args, added", [
    (["./app"], True),
    (["-np", "2", "./app"], True),
    (["--np=2", "./app"], True),
    (["-np", "4", "./app"], False),
    (["--map-by", "core", "./app"], False),
    (["--hostfile", "h", "./app"], False),
    (["-H", "n1,n2", "./app"], False),
    (["./a", ":", "./b"], False),
])
def test_rankmap_prterun_adds_the_rankfile_only_to_a_launch_it_fits(args, added):
    extra, why = placement_args(args, {"RANKMAP_RANKFILE": "/run/rankmap/job.1/rankfile"}, 2)
    assert (extra == ["--map-by", "rankfile:file=/run/rankmap/job.1/rankfile"]) == added
    assert (why is None) == added


def test_rankmap_prterun_is_off_with_the_users_switch():
    extra, why = placement_args(["./app"], {"RANKMAP_RANKFILE": "/r", "RANKMAP_BIND": "off"}, 2)
    assert extra == [] and "RANKMAP_BIND=off" in why


def test_rankmap_prterun_finds_the_prterun_of_the_calling_open_mpi(tmp_path):
    for d in ("ompi/bin", "ompi/lib", "other"):
        (tmp_path / d).mkdir(parents=True)
    for p in ("ompi/bin/prterun", "other/prterun", "other/rankmap-prterun"):
        (tmp_path / p).write_text("#!/bin/sh\n")
        (tmp_path / p).chmod(0o755)
    me = str(tmp_path / "other/rankmap-prterun")
    env = {"OMPI_LIBDIR_LOC": str(tmp_path / "ompi/lib"), "PATH": str(tmp_path / "other")}
    assert real_prterun(env, me) == str(tmp_path / "ompi/bin/prterun")
    assert real_prterun({"PATH": str(tmp_path / "other")}, me) == str(tmp_path / "other/prterun")
    os.symlink(me, tmp_path / "prterun")
    assert real_prterun({"PATH": str(tmp_path)}, me) is None  # never itself


@root_only
def test_the_batch_step_says_what_each_launcher_gets(job):
    job_dir, _, make = job
    env = make('["openmpi", "hydra", "srun"]', hydra="n1:1\nn2:1\nn1:1\n")
    lines = as_user(USER, lambda: exports(env))
    said = [line for line in lines if line.startswith("print rankmap: launchers: ")]
    assert len(said) == 1, lines
    assert "Intel MPI mpirun: nothing (the placement interleaves hosts" in said[0]
    assert "srun: host and core for srun of the job's task count" in said[0]
    wrapper = user_sees(Path(sys.prefix) / "bin" / "rankmap-prterun")
    assert ("Open MPI mpirun (4.1 and 5): host and core" in said[0]) == wrapper
    env = make('["srun"]')
    lines = as_user(USER, lambda: exports(env))
    said = [line for line in lines if line.startswith("print rankmap: launchers: ")]
    assert said == ["print rankmap: launchers: srun: host and core for srun of the job's "
                    "task count (with -n of another size, -N, -w or -m it keeps Slurm's "
                    "placement)"], lines
    assert f"export RANKMAP_SRUN_HOSTFILE={job_dir / 'slurm_hostfile'}" in lines


@pytest.mark.parametrize("args, expected", [
    (["./app"], "--map-by rankfile:file={rf} ./app | bind="),
    (["--map-by", "core", "./app"], "--map-by core ./app | bind=off"),
])
def test_rankmap_prterun_runs_the_real_prterun_with_or_without_the_rankfile(tmp_path, args,
                                                                            expected):
    """The wrapper execs the prterun it found; a launch it leaves alone also tells the
    binder (RANKMAP_BIND=off), whose sign for Open MPI, the rankfile variable, Open MPI 5
    ignores.  The stand-in prterun prints what it got."""
    import subprocess

    fake = tmp_path / "prterun"
    fake.write_text('#!/bin/sh\necho "$* | bind=$RANKMAP_BIND"\n')
    fake.chmod(0o755)
    rf = tmp_path / "rankfile"
    rf.write_text("rank 0=n1 slot=0:0\n")
    env = {"PATH": os.environ["PATH"], "RANKMAP_REAL_PRTERUN": str(fake),
           "RANKMAP_RANKFILE": str(rf)}
    proc = subprocess.run([sys.executable, "-m", "slurm_plugin.lifecycle.prterun_wrapper",
                           *args], env=env, capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[3])
    out = proc.stdout.strip()
    if "{rf}" in expected:
        # tmp_path holds a '-' (pytest-of-USER): Open MPI 5.0.7 gets a link without one,
        # removed when prterun ends
        given = out.split("rankfile:file=", 1)[1].split()[0]
        assert not any(c in given for c in "-:") and not os.path.lexists(given), out
        out = out.replace(given, "{rf}")
    assert out == expected, proc.stderr


def test_the_report_says_what_each_supported_launcher_gets(tmp_path):
    """report.txt's Launchers section and report.json's ``launchers`` follow the rule of
    the batch step's line: here the binder library exists, Hydra's file is only a
    comment (interleaved hosts), srun's host file is not exported."""
    from slurm_plugin.lifecycle.job_worker import with_launchers
    from slurm_plugin.modes.base import JobPlan
    from slurm_plugin.site.config import parse_config

    lib = tmp_path / "librankmap_bind.so"
    lib.write_bytes(b"\x7fELF")
    plan = JobPlan(files={"rankfile": "rank 0=n1 slot=0:0\n", "bindings": "x",
                          "hydra_hostfile": "n1:1\nn2:1\nn1:1\n", "slurm_hostfile": "n1\n"},
                   report_text="rankmap * topdown\n", report_record={"applied": True})
    cfg = parse_config(f'[launchers]\nbind_library = "{lib}"\n', "rankmap.toml")
    out = with_launchers(plan, cfg.launchers, cfg.render.export_slurm_hostfile)
    said = json.loads(out.report_json)["launchers"]
    assert said[2] == ("Intel MPI mpirun: nothing (the placement interleaves hosts, which "
                       "Intel MPI cannot launch)")
    assert said[3].startswith("srun: host and core for srun of the job's task count")
    assert said[0].startswith("Open MPI mpirun")
    assert out.report_text.startswith("rankmap * topdown\n\nLaunchers:\n")
    assert all(f"  {line}\n" in out.report_text for line in said)
    none = with_launchers(plan, parse_config("[launchers]\nsupported = []\n",
                                             "r.toml").launchers, False)
    assert none == plan


def test_rankmap_hydra_srun_starts_proxies_in_the_host_files_order():
    """MPICH's and Intel MPI's srun lines (as their slurm bootstraps write them): the node
    list becomes the arbitrary host list, repeats kept, -N goes, and every proxy gets
    SLURM_NODEID = its task id; without a node list nothing changes."""
    from slurm_plugin.lifecycle.hydra_srun import NODE_ID_SHIM, rewrite

    mpich = ["--nodelist", "n3,n1,n3", "-N", "3", "-n", "3", "--input", "none",
             "/opt/mpich/bin/hydra_pmi_proxy", "--control-port", "n1:4242", "--proxy-id", "-1"]
    out, nodes = rewrite(mpich)
    assert nodes == ["n3", "n1", "n3"]
    assert out == ["-n", "3", "--input", "none", "/bin/sh", "-c", NODE_ID_SHIM,
                   "/opt/mpich/bin/hydra_pmi_proxy", "--control-port", "n1:4242",
                   "--proxy-id", "-1"]
    intel = ["-N", "2", "-n", "2", "--ntasks-per-node", "1", "--nodelist=n2,n1", "--input",
             "none", "hydra_bstrap_proxy", "--upstream-host", "n1"]
    out, nodes = rewrite(intel)
    assert nodes == ["n2", "n1"]
    assert out[:6] == ["-n", "2", "--ntasks-per-node", "1", "--input", "none"]
    assert out[6:9] == ["/bin/sh", "-c", NODE_ID_SHIM] and out[9] == "hydra_bstrap_proxy"
    plain = ["-N", "2", "-n", "2", "--input", "none", "hydra_pmi_proxy", "-x"]
    assert rewrite(plain) == (plain, None)


def test_the_node_id_shim_hands_the_task_id_to_the_proxy():
    import subprocess

    from slurm_plugin.lifecycle.hydra_srun import NODE_ID_SHIM

    proc = subprocess.run(["/bin/sh", "-c", NODE_ID_SHIM, "/bin/sh", "-c",
                           'echo "$SLURM_NODEID $0"', "proxy"],
                          env={"SLURM_PROCID": "3", "SLURM_NODEID": "0", "PATH": "/bin"},
                          capture_output=True, text=True, check=True)
    assert proc.stdout == "3 proxy\n"


def test_config_check_warns_about_a_missing_binder_only_for_supported_launchers(tmp_path):
    from slurm_plugin.commands.config_check import launcher_warnings
    from slurm_plugin.site.config import parse_config

    missing = tmp_path / "nowhere" / "librankmap_bind.so"
    cfg = parse_config(f'[launchers]\nbind_library = "{missing}"\n', "rankmap.toml")
    said = launcher_warnings(cfg)
    assert any(str(missing) in w and "the rank binder" in w for w in said), said
    cfg = parse_config('[launchers]\nsupported = []\n', "rankmap.toml")
    assert launcher_warnings(cfg) == []


@pytest.mark.parametrize("hydra_lines, rankmap, export_hostfile", [
    ("n1:1\nn2:1\n", "", False), ("n1:1\nn2:1\nn1:1\n", "", True),
    ("n1:2\nn2:1\n", "-rankmap (0,1,1),(1,1,1),(0,1,1)\n", False)])
def test_the_report_the_exports_and_the_batch_line_come_from_one_offer(
        tmp_path, hydra_lines, rankmap, export_hostfile):
    """What the worker promised in the report (planned_offer on the files it wrote),
    what the TaskProlog exports, and what it tells the batch step are one computation:
    each family is exported exactly when its sentence says it gets the placement."""
    from slurm_plugin.common.launcher_support import (
        hydra_srun_path,
        launcher_sentences,
        planned_offer,
        prterun_wrapper_path,
    )
    from slurm_plugin.lifecycle.task_prolog import job_offer, launcher_exports

    lib = tmp_path / "librankmap_bind.so"
    lib.write_bytes(b"\x7fELF")
    files = {"rankfile": "rank 0=n1 slot=0:0\n", "bindings": "x",
             "hydra_hostfile": hydra_lines, "slurm_hostfile": "n1\n", "hydra_rankmap": rankmap}
    supported = ["openmpi", "hydra", "srun"]
    with create_job_dir(tmp_path, "700") as jd:
        jd.write(files)
        offer = job_offer(jd.path, supported, str(lib), export_hostfile)
        lines = launcher_exports(jd.path, {}, True, offer, str(lib))
    promised = planned_offer(supported, files, str(lib), prterun_wrapper_path(),
                             hydra_srun_path(), export_hostfile)
    assert launcher_sentences(offer) == launcher_sentences(promised)
    exported = {line.split("=", 1)[0].removeprefix("export ") for line in lines}
    assert ("HYDRA_HOST_FILE" in exported) == offer.hydra_hostfile == (hydra_lines.count(
        "n1") == 1 and os.path.isfile(hydra_srun_path()))
    assert ("HYDRA_CONFIG_FILE" in exported) == (offer.hydra_hostfile and bool(rankmap))
    assert ("I_MPI_HYDRA_HOST_FILE" in exported) == (offer.hydra_hostfile and not rankmap)
    assert ("SLURM_HOSTFILE" in exported) == offer.slurm_hostfile_exported == export_hostfile
    assert ("OMPI_MCA_rmaps_rank_file_path" in exported) == offer.rankfile
    assert ("LD_PRELOAD" in exported) == offer.binder


def test_each_family_exports_only_the_files_it_says_it_reads(tmp_path):
    """A Launcher's ``reads`` is the truth the report and the checks rely on: every job
    file a family's export lines point at is one of its own, and no other family's
    lines point at it (the handover of one family does not leak into another's)."""
    from slurm_plugin.common.job_conventions import FILE_NAMES
    from slurm_plugin.common.launcher_support import LAUNCHERS, LauncherOffer

    offer = LauncherOffer(supported=tuple(LAUNCHERS), rankfile=True, prterun_wrapper=True,
                          hydra_hostfile=True, binder=True, slurm_hostfile_exported=True)
    job_dir = str(tmp_path)
    pointed = {}
    for name, launcher in LAUNCHERS.items():
        lines = launcher.exports(offer, job_dir, script_step=True)
        assert lines, name
        files = {key for key, file in FILE_NAMES.items()
                 if any(line.endswith(os.path.join(job_dir, file)) for line in lines)}
        assert files and files <= set(launcher.reads), (name, files, launcher.reads)
        pointed[name] = files
        assert launcher.sentences(offer), name
    for a, b in [(a, b) for a in pointed for b in pointed if a < b]:
        assert not pointed[a] & pointed[b], (a, b)
    # the batch step only, for the mpirun families: a task step gets no host file
    assert LAUNCHERS["openmpi"].exports(offer, job_dir, script_step=False) == []
    assert LAUNCHERS["hydra"].exports(offer, job_dir, script_step=False) == []


@root_only
def test_a_hybrid_job_gets_openmp_places_over_each_ranks_cores_unless_the_user_chose(job):
    """Several CPUs per task: OMP_PLACES=cores and OMP_PROC_BIND=close in the batch step,
    each only when the user has not set it, with the names rankmap set; an srun step's
    tasks inherit them and get nothing more (a script that unset them keeps its choice),
    unless no batch step set them (salloc); one CPU per task gets neither."""
    _, _, make = job
    batch = {**make('["openmpi", "hydra", "srun"]'), "SLURM_STEP_ID": "batch",
             "SLURM_CPUS_PER_TASK": "2"}
    lines = as_user(USER, lambda: exports(batch))
    assert {"export OMP_PLACES=cores", "export OMP_PROC_BIND=close",
            "export RANKMAP_OMP_SET=OMP_PLACES,OMP_PROC_BIND"} <= set(lines), lines
    users = as_user(USER, lambda: exports({**batch, "OMP_PROC_BIND": "spread"}))
    assert "export OMP_PLACES=cores" in users and "export RANKMAP_OMP_SET=OMP_PLACES" in users
    assert not any(line.startswith("export OMP_PROC_BIND=") for line in users), users
    step = {**batch, "SLURM_STEP_ID": "0", "RANKMAP_OMP_SET": "OMP_PLACES,OMP_PROC_BIND"}
    assert not any("OMP_" in line for line in as_user(USER, lambda: exports(step)))
    salloc = {k: v for k, v in step.items() if k != "RANKMAP_OMP_SET"}
    assert "export OMP_PLACES=cores" in as_user(USER, lambda: exports(salloc))
    single = {**batch, "SLURM_CPUS_PER_TASK": "1"}
    assert not any("OMP_" in line for line in as_user(USER, lambda: exports(single)))
    # a site that gives no launcher the placement gives no OpenMP places either
    bare = {**make("[]"), "SLURM_STEP_ID": "batch", "SLURM_CPUS_PER_TASK": "2"}
    assert not any("OMP_" in line for line in as_user(USER, lambda: exports(bare)))


def test_open_mpi_5s_daemons_ask_for_the_nodes_gpus_in_a_gpu_job_rankmap_places(tmp_path):
    """prted starts as one srun task per node: with the job's --gpus-per-task it would
    see one GPU, and no rank could be given its planned one.  The daemon step asks for
    the GPUs per node of the bind file's header instead, seen whole (the mask), and
    keeps the job's other per-task resources; a job without GPUs changes nothing."""
    from slurm_plugin.lifecycle.prterun_wrapper import daemon_gpu_env

    h = Hierarchy.from_tree([2], [1, 10], ["socket", "root"])
    gpu = Layout(h, (Slot("n1", 0, (0,), (0,), gpus=(1,)), Slot("n1", 0, (1,), (1,), gpus=(0,))),
                 gpu_mask=0b11)
    bind = tmp_path / "bindings"
    bind.write_text(render_bindfile(gpu, np.array([0, 1])))
    env = {"RANKMAP_BIND_FILE": str(bind), "SLURM_GPUS_PER_TASK": "1",
           "SLURM_TRES_PER_TASK": "cpu=2,gres/gpu:1"}
    assert daemon_gpu_env(env) == {"SLURM_GPUS_PER_TASK": None, "SLURM_GPUS_PER_NODE": "2",
                                   "SLURM_TRES_PER_TASK": "cpu=2",
                                   "SLURM_GPU_BIND": "mask_gpu:0x3"}
    assert daemon_gpu_env({**env, "SLURM_TRES_PER_TASK": "gres/gpu=1",
                           "SLURM_GPU_BIND": "closest"}) == {
        "SLURM_GPUS_PER_TASK": None, "SLURM_GPUS_PER_NODE": "2", "SLURM_TRES_PER_TASK": None}
    bind.write_text(render_bindfile(Layout(h, tuple(s._replace(gpus=()) for s in gpu.slots)),
                                    np.array([0, 1])))
    assert daemon_gpu_env(env) == {}
    assert daemon_gpu_env({}) == {}
