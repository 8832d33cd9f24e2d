"""librankmap_bind (slurm_plugin/bind/rankmap_bind.c) under this machine's real mpirun.

The library is built with its Makefile and preloaded into a plain MPI program that
prints the CPU each rank runs on after MPI_Init; the bind file is the one
:func:`slurm_plugin.outputs.render.render_bindfile` renders.  Two ranks on the two
cores every machine here has, swapped against the launcher's own order (Open MPI binds
local rank i to core i), so a rank only lands on the listed core when the library bound
it.  Then the cases where it must leave the launcher's binding alone, each with the one
line rank 0 prints: the user's switch, a launch of another size, another host, a core
this machine lacks, a launcher family the site does not support.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
from pathlib import Path

import numpy as np
import pytest

from mapper import Hierarchy
from slurm_plugin.machine.layout import Layout, Slot
from slurm_plugin.outputs.render import render_bindfile
from tests.helpers.paths import REPO, TEST_DATA

pytestmark = pytest.mark.skipif(
    not (shutil.which("mpicc") and shutil.which("mpirun") and shutil.which("cc")),
    reason="no MPI (mpicc, mpirun) or C compiler")


def two_cores() -> bool:
    return {0, 1} <= os.sched_getaffinity(0)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path]:
    out = tmp_path_factory.mktemp("bind")
    subprocess.run(["make", "-s", "-C", str(REPO / "slurm_plugin/bind"), f"OUT={out}"],
                   check=True)
    subprocess.run(["mpicc", "-O2", "-o", str(out / "rankinfo"),
                    str(TEST_DATA / "mpi/rankinfo.c")], check=True)
    return out / "librankmap_bind.so", out / "rankinfo"


def layout_on(host: str, slots: list[tuple[int, int]]) -> Layout:
    h = Hierarchy.from_tree([len(slots)], [1, 10], ["socket", "root"])
    return Layout(h, tuple(Slot(host, s, (c,), (c,)) for s, c in slots))


def launch(built, bindfile_text: str, tmp_path: Path, np_: int = 2,
           rankfile_cores: list[int] | None = None, args: tuple[str, ...] = (),
           program_args: tuple[str, ...] = (), **env: str) -> subprocess.CompletedProcess:
    lib, program = built
    bindfile = tmp_path / "bindings"
    bindfile.write_text(bindfile_text)
    # the sign that Open MPI was given rankmap's hosts; this rankfile binds local rank i
    # to core i, as Open MPI's own default does, so only the binder can swap them
    rankfile = tmp_path / "rankfile"
    cores = rankfile_cores or [r % 2 for r in range(np_)]
    rankfile.write_text("".join(f"rank {r}={socket.gethostname()} slot=0:{c}\n"
                                for r, c in enumerate(cores)))
    base = {k: v for k, v in os.environ.items() if not k.startswith("RANKMAP_")}
    run_env = {**base, "OMPI_ALLOW_RUN_AS_ROOT": "1",
               "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
               "LD_PRELOAD": str(lib), "RANKMAP_BIND_FILE": str(bindfile),
               "OMPI_MCA_rmaps_rank_file_path": str(rankfile), **env}
    # no -x: the variables reach the ranks the way the job's environment does
    return subprocess.run(["mpirun", "--oversubscribe", "-np", str(np_), *args, str(program),
                           "--affinity", *program_args],
                          env=run_env, capture_output=True, text=True, timeout=120)


def cpus(proc: subprocess.CompletedProcess) -> dict[int, int]:
    """rank -> the CPU it ran on after MPI_Init."""
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {int(r): int(c) for r, c in re.findall(r"^rank (\d+) host \S+ cpu (\d+) ",
                                                    proc.stdout, re.M)}


def allowed(proc: subprocess.CompletedProcess) -> dict[int, str]:
    """rank -> the CPUs it may run on after MPI_Init (its binding, which unlike the CPU
    it happens to run on does not change from run to run when a launcher leaves the
    rank unbound, as Open MPI 5.0.7 does here)."""
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {int(r): a for r, a in re.findall(r"^rank (\d+) host \S+ cpu \d+ allowed (\S+)$",
                                              proc.stdout, re.M)}


def test_the_bind_file_has_fixed_width_records_in_rank_order():
    layout = layout_on("nodeA", [(0, 0), (0, 1), (1, 0), (1, 12)])
    text = render_bindfile(layout, np.array([3, 0, 2, 1]))
    lines = text.splitlines(keepends=True)
    width = int(lines[0].split()[3])
    assert lines[0].split()[:3] == ["rankmap-bind", "1", "4"]
    assert {len(line) for line in lines} == {width}
    assert [line.split() for line in lines[1:]] == [
        ["0", "nodeA", "1:12"], ["1", "nodeA", "0:0"], ["2", "nodeA", "1:0"],
        ["3", "nodeA", "0:1"]]
    # rank r's record is where the C reader looks: WIDTH * (r + 1)
    assert text[width * 3:width * 4].split()[0] == "2"


@pytest.mark.skipif(not two_cores(), reason="needs cpus 0 and 1")
def test_each_rank_runs_on_the_core_of_its_record(built, tmp_path):
    text = render_bindfile(layout_on(socket.gethostname(), [(0, 0), (0, 1)]),
                           np.array([1, 0]))
    proc = launch(built, text, tmp_path, RANKMAP_BIND_VERBOSE="1")
    assert cpus(proc) == {0: 1, 1: 0} and allowed(proc) == {0: "1", 1: "0"}
    # and the binder says it put them there (a launcher whose own order happens to be
    # the swapped one cannot pass for it)
    said = set(re.findall(r"^rankmap: rank (\d+): on \S+ bound to cpus (\d+) ", proc.stderr,
                          re.M))
    assert said == {("0", "1"), ("1", "0")}, proc.stderr


@pytest.mark.skipif(not two_cores(), reason="needs cpus 0 and 1")
def test_threads_started_before_mpi_init_are_bound_too(built, tmp_path):
    """A thread the program starts before MPI_Init (an OpenMP pool, an I/O helper) ends
    up inside its rank's cores, as the calling thread does: the binder sets every
    thread's mask, not only its own."""
    text = render_bindfile(layout_on(socket.gethostname(), [(0, 0), (0, 1)]),
                           np.array([1, 0]))
    proc = launch(built, text, tmp_path, program_args=("--early-thread",))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    threads = {int(r): (a, t) for r, a, t in re.findall(
        r"^rank (\d+) host \S+ cpu \d+ allowed (\S+) thread (\S+)$", proc.stdout, re.M)}
    assert threads == {0: ("1", "1"), 1: ("0", "0")}, proc.stdout


@pytest.mark.skipif(not two_cores(), reason="needs cpus 0 and 1")
def test_a_thread_pinned_inside_the_ranks_cores_keeps_its_pin(built, tmp_path):
    """A rank of two cores whose launcher started it on one: the thread that inherited
    that mask gets both cores, and a thread that pinned itself to the other core (as an
    OpenMP runtime pins its pool to OMP_PLACES) stays pinned: the binder widens what the
    launcher set, never what a runtime chose inside the rank's cores."""
    host = socket.gethostname()
    layout = Layout(Hierarchy.from_tree([1], [1, 10], ["socket", "root"]),
                    (Slot(host, 0, (0, 1), (0, 1)),))
    proc = launch(built, render_bindfile(layout, np.array([0])), tmp_path, np_=1,
                  rankfile_cores=[0],
                  program_args=("--early-thread", "--pinned-thread", "1", "--start"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = re.findall(r"^rank 0 host \S+ cpu \d+ allowed (\S+) thread (\S+) pinned (\S+) "
                       r"start (\S+)$", proc.stdout, re.M)
    assert found == [("0-1", "0-1", "1", "0")], proc.stdout


@pytest.mark.skipif(not two_cores(), reason="needs cpus 0 and 1")
@pytest.mark.parametrize("case", ["switched off", "other size", "other host", "no such core",
                                  "unsupported", "launcher placed"])
def test_it_leaves_the_launchers_binding_alone_and_rank_0_says_why(built, tmp_path, case):
    host = socket.gethostname()
    slots, env, np_ = [(0, 0), (0, 1)], {}, 2
    if case == "switched off":
        env = {"RANKMAP_BIND": "off"}
    elif case == "other size":
        slots = [(0, 0), (0, 1), (0, 0)]
    elif case == "other host":
        host = "not-" + host
    elif case == "no such core":
        slots = [(0, 0), (7, 0)]
    elif case == "unsupported":
        env = {"RANKMAP_BIND_LAUNCHERS": "hydra,srun"}
    else:
        env = {"OMPI_MCA_rmaps_rank_file_path": ""}
    text = render_bindfile(layout_on(host, slots), np.arange(len(slots))[::-1].copy())
    proc = launch(built, text, tmp_path, np_=np_, **env)
    reason = {"switched off": None, "other size": "has 2 ranks and the job's placement 3",
              "other host": "the launcher did not take rankmap's host list",
              "no such core": "does not exist here",
              "unsupported": "does not support openmpi launches",
              "launcher placed": "Open MPI placed the ranks itself"}[case]
    said = re.findall(r"^rankmap: rank (\d+): (.*)$", proc.stderr, re.M)
    if reason is None:
        assert said == [], proc.stderr
    elif case == "other size":  # said by mpirun itself (the launch guard), not the ranks
        assert said == [], proc.stderr
        assert re.search(r"^rankmap: this launch asks for 2 ranks and the job's placement "
                         r"has 3: Open MPI places the ranks$", proc.stderr, re.M), proc.stderr
    elif case == "other host":  # every rank's own reason: one line for the node
        assert len(said) == 1 and reason in said[0][1], proc.stderr
        assert "said once per node" in said[0][1], proc.stderr
    else:
        assert [r for r, _ in said] == ["0"] and reason in said[0][1], proc.stderr
    # the launcher's own binding stayed: what the same launch gives with the binder off
    # (Open MPI 4.1 binds local rank i to core i, 5.0 may not); with no core 7:0 here
    # only rank 0 keeps it, rank 1 is bound to its record's 0:0
    own = allowed(launch(built, text, tmp_path, np_=np_, **{**env, "RANKMAP_BIND": "off"}))
    assert allowed(proc) == ({0: own[0], 1: "0"} if case == "no such core" else own)


@pytest.mark.skipif(not two_cores(), reason="needs cpus 0 and 1")
def test_ranks_it_cannot_bind_say_so_once_per_node(built, tmp_path):
    """Ranks 1-3 of 4 are planned on a core this machine lacks: rank 0 binds, and of the
    three that cannot exactly one says why (once per node, not once per rank, and not
    silence because the rank is not rank 0)."""
    host = socket.gethostname()
    text = render_bindfile(layout_on(host, [(0, 0), (7, 0), (7, 1), (7, 2)]),
                           np.arange(4))
    proc = launch(built, text, tmp_path, np_=4)
    said = re.findall(r"^rankmap: rank (\d+): (.*)$", proc.stderr, re.M)
    assert len(said) == 1 and said[0][0] in ("1", "2", "3"), proc.stderr
    assert "does not exist here" in said[0][1] and "said once per node" in said[0][1], \
        proc.stderr
    assert allowed(proc)[0] == "0"


def gpu_layout(host: str, gpus: list[int], nics: list[str] | None = None) -> Layout:
    h = Hierarchy.from_tree([len(gpus)], [1, 10], ["socket", "root"])
    return Layout(h, tuple(Slot(host, 0, (r % 2,), (r % 2,), gpus=(g,),
                                nic=nics[r] if nics else "")
                           for r, g in enumerate(gpus)), gpu_mask=0b1111111)


def devices(proc: subprocess.CompletedProcess) -> dict[int, list[str]]:
    """rank -> its CUDA, ROCR, ZE and GPU_DEVICE_ORDINAL lists as the program started."""
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {int(r): d.split(";") for r, d in re.findall(r"^rank (\d+) .* gpus (\S+)$",
                                                        proc.stdout, re.M)}


def test_each_rank_sees_only_the_gpus_of_its_record_in_each_device_variable(built, tmp_path):
    """Slurm gave the batch step GPUs 4 and 6 (SLURM_JOB_GPUS) and listed them in each
    runtime's numbering; the ranks mpirun starts beside itself see the one planned for
    them, by position, before main, whatever the variable's numbering."""
    text = render_bindfile(gpu_layout(socket.gethostname(), [6, 4]), np.array([0, 1]))
    env = {"SLURM_JOB_GPUS": "4,6", "CUDA_VISIBLE_DEVICES": "4,6",
           "ROCR_VISIBLE_DEVICES": "0,1", "GPU_DEVICE_ORDINAL": "GPU-a,GPU-b"}
    proc = launch(built, text, tmp_path, program_args=("--gpus",), **env)
    assert devices(proc) == {0: ["6", "1", "-", "GPU-b"], 1: ["4", "0", "-", "GPU-a"]}
    assert "rankmap:" not in proc.stderr, proc.stderr


def test_each_gpu_rank_gets_the_nic_of_its_record_unless_the_job_chose_one(built, tmp_path):
    """UCX_NET_DEVICES names the NIC nearest the rank's GPU (the record's nic=) before
    main, so UCX uses it from MPI_Init on; a value the job set is kept."""
    text = render_bindfile(gpu_layout(socket.gethostname(), [6, 4], ["mlx5_1:1", "mlx5_0:2"]),
                           np.array([0, 1]))
    assert " gpu=6 nic=mlx5_1:1" in text
    env = {"SLURM_JOB_GPUS": "4,6", "CUDA_VISIBLE_DEVICES": "4,6"}
    proc = launch(built, text, tmp_path, program_args=("--gpus", "--nic"), **env)
    nics = dict(re.findall(r"^rank (\d+) .* nic (\S+)$", proc.stdout, re.M))
    assert nics == {"0": "mlx5_1:1", "1": "mlx5_0:2"}, proc.stdout + proc.stderr
    assert {r: d[0] for r, d in devices_with_nic(proc).items()} == {0: "6", 1: "4"}
    kept = launch(built, text, tmp_path, program_args=("--gpus", "--nic"),
                  UCX_NET_DEVICES="mlx5_3:1", **env)
    assert set(re.findall(r" nic (\S+)$", kept.stdout, re.M)) == {"mlx5_3:1"}, kept.stdout


def devices_with_nic(proc: subprocess.CompletedProcess) -> dict[int, list[str]]:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {int(r): d.split(";") for r, d in re.findall(r"^rank (\d+) .* gpus (\S+) nic \S+$",
                                                        proc.stdout, re.M)}


@pytest.mark.parametrize("case", ["not the step's", "not one to one", "no list"])
def test_gpus_slurm_did_not_give_as_planned_are_left_and_one_rank_says_why(built, tmp_path,
                                                                          case):
    text = render_bindfile(gpu_layout(socket.gethostname(), [6, 5]), np.array([0, 1]))
    env = {"SLURM_JOB_GPUS": "4,6", "CUDA_VISIBLE_DEVICES": "4,6"}
    if case == "not one to one":
        text = render_bindfile(gpu_layout(socket.gethostname(), [6, 4]), np.array([0, 1]))
        env["CUDA_VISIBLE_DEVICES"] = "0"
    elif case == "no list":
        del env["SLURM_JOB_GPUS"]
    proc = launch(built, text, tmp_path, program_args=("--gpus",), **env)
    kept = env["CUDA_VISIBLE_DEVICES"]
    assert {r: d[0] for r, d in devices(proc).items()} == (
        {0: "6", 1: kept} if case == "not the step's" else {0: kept, 1: kept})
    said = re.findall(r"^rankmap: rank (\d+): gpus (\S+) on \S+: (.*)$", proc.stderr, re.M)
    reason = {"not the step's": "GPU 5 is not among this step's GPUs",
              "not one to one": "does not list SLURM_JOB_GPUS=4,6 one to one",
              "no list": "no SLURM_JOB_GPUS"}[case]
    # rank 1 in the first case, both ranks in the others: said once per node
    assert len(said) == 1 and reason in said[0][2], proc.stderr


def _is_open_mpi_4() -> bool:
    out = subprocess.run(["mpirun", "--version"], capture_output=True, text=True)
    return bool(re.search(r"Open MPI\)? 4\.", out.stdout + out.stderr))


@pytest.mark.skipif(not (two_cores() and shutil.which("mpirun") and _is_open_mpi_4()),
                    reason="needs Open MPI 4's mpirun and cpus 0 and 1")
@pytest.mark.parametrize("case", ["switched off", "other size", "own placement"])
def test_open_mpi_4_is_not_given_the_rankfile_for_a_launch_that_is_not_rankmaps(
        built, tmp_path, case):
    """Open MPI 4.1's mpirun reads the exported rankfile variable by itself: here a
    rankfile that swaps the two cores against Open MPI's own order.  Under
    RANKMAP_BIND=off, for a launch of another size than the plan and for one with its
    own placement option, the binder's launch guard unsets it before mpirun reads it,
    so Open MPI's own placement applies (local rank i on core i) and mpirun says why."""
    host = socket.gethostname()
    planned = [(0, 0), (0, 1)] if case != "other size" else [(0, 0), (0, 1), (0, 0)]
    text = render_bindfile(layout_on(host, planned), np.arange(len(planned)))
    env = {"RANKMAP_BIND": "off"} if case == "switched off" else {}
    args = ("--map-by", "core") if case == "own placement" else ()
    proc = launch(built, text, tmp_path, np_=2, rankfile_cores=[1, 0], args=args, **env)
    assert allowed(proc) == {0: "0", 1: "1"}, proc.stdout + proc.stderr
    reason = {"switched off": "RANKMAP_BIND=off: Open MPI places the ranks",
              "other size": "asks for 2 ranks and the job's placement has 3",
              "own placement": "the command line places the ranks itself (--map-by)"}[case]
    assert re.search(rf"^rankmap: .*{re.escape(reason)}", proc.stderr, re.M), proc.stderr
    # and a launch that is rankmap's keeps the rankfile (the swapped cores)
    text = render_bindfile(layout_on(host, [(0, 1), (0, 0)]), np.arange(2))
    proc = launch(built, text, tmp_path, np_=2, rankfile_cores=[1, 0])
    assert allowed(proc) == {0: "1", 1: "0"}, proc.stdout + proc.stderr
