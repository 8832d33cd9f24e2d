"""Which srun steps the SPANK plugin gives the job's host file (``plain_step`` in
slurm_plugin/spank/rankmap_spank.c, compiled with stand-ins for Slurm's calls): a step of
the job's task count with no option that picks nodes, tasks or their layout; never a
launcher's daemon launch, another size, or a line it cannot read.  The real jobs are in
tests/e2e/test_plain_srun.py."""

from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest

from slurm_plugin.common.job_conventions import SRUN_HOSTFILE_VAR, SRUN_PLACED_VAR
from tests.helpers.spank_harness import SPANK_C, needs_cc, spank_checker, srun_environment

#: the job has 6 tasks (its host file's lines); SLURM_NTASKS in the batch step says 6
PLACED = [
    "srun ./app",
    "srun --mpi=pmix ./app",
    "srun --mpi pmix ./app -n 2 -N 3",  # the program's own arguments are not srun's
    "srun -n 6 ./app",
    "srun -n6 ./app",
    "srun --ntasks=6 ./app",
    "srun --ntasks 6 ./app",
    "srun --kill-on-bad ./app",  # getopt_long takes an unambiguous prefix
    "srun -l -K --cpu-bind=none -o out.%t ./app",
    "srun -lK ./app",
    "srun --label --kill-on-bad-exit --overlap ./app",
    "srun -J name -t 5 ./app",
    "srun --export=ALL,FOO=1 ./app",
    "srun -- ./app",
]
LEFT_ALONE = [
    "srun -n 2 ./app",
    "srun -n2 ./app",
    "srun --ntasks=3 ./app",
    "srun -ln2 ./app",
    "srun -N 2 ./app",
    "srun -N2 -n6 ./app",
    "srun --nodes=3 ./app",
    "srun -w n1,n2 ./app",
    "srun --nodelist=n1 ./app",
    "srun -x n3 ./app",
    "srun -m cyclic ./app",
    "srun --distribution=block:block ./app",
    "srun -r 1 ./app",
    "srun -c 2 ./app",
    "srun --ntasks-per-node=2 ./app",
    "srun --multi-prog conf",
    "srun -n 3 ./a : -n 3 ./b",
    "srun --no-such-option ./app",
    "srun --n ./app",  # ambiguous prefix: --nodes, --ntasks, ...
    "srun -n x ./app",
    # the daemon launches: Open MPI 4.1's orted (plm/slurm), PRRTE's prted (Open MPI 5),
    # Hydra's proxies (MPICH, Intel MPI)
    "srun --ntasks-per-node=1 --kill-on-bad-exit --cpu-bind=none --nodes=3 "
    "--nodelist=n1,n2,n3 --ntasks=3 orted -mca ess slurm",
    "srun --ntasks-per-node=1 --kill-on-bad-exit --mpi=none --cpu-bind=none "
    "--external-launcher --nodes=3 --nodelist=n1,n2,n3 --ntasks=3 prted --prtemca ess slurm",
    "srun -N 3 -n 3 --nodelist n1,n2,n3 --input none /usr/bin/hydra_pmi_proxy --control-port "
    "n1:3",
]


@needs_cc
def test_a_plain_step_of_the_jobs_size_gets_the_host_file_and_no_other(tmp_path):
    check = spank_checker(tmp_path)
    assert check("step", ["6", "6", *PLACED]) == [True] * len(PLACED)
    assert check("step", ["6", "6", *LEFT_ALONE]) == [False] * len(LEFT_ALONE)


@needs_cc
def test_without_ntasks_the_jobs_own_count_decides(tmp_path):
    """srun without -n runs SLURM_NTASKS tasks (the job's, when given at submission): it
    is placed when that is the host file's length; with no count at all, srun runs one
    task per node, which the host file does not describe."""
    check = spank_checker(tmp_path)
    assert check("step", ["6", "6", "srun ./app"]) == [True]
    assert check("step", ["6", "4", "srun ./app"]) == [False]
    assert check("step", ["6", "-1", "srun ./app", "srun -n 6 ./app"]) == [False, True]


def _srun_help() -> str | None:
    import shutil

    if not shutil.which("srun"):
        return None
    out = subprocess.run(["srun", "--help"], capture_output=True, text=True, timeout=30)
    return out.stdout + out.stderr


@pytest.mark.skipif(_srun_help() is None, reason="needs srun")
def test_the_plugins_option_tables_know_every_srun_option_with_an_argument():
    """Each long option the running srun documents with a required ``=value`` is in the
    plugin's table (else ``--opt value`` would hide the rest of the line); the table may
    hold newer releases' options too."""
    listed = re.search(r"srun_long_with_arg\[\] = \{(.*?)NULL\}", SPANK_C.read_text(), re.S)
    table = set(re.findall(r'"([a-z0-9_-]+)"', listed.group(1)))
    documented = set(re.findall(r"--([a-z][a-z0-9-]*)=", _srun_help()))
    missing = documented - table - {"comm-profile", "rankmap", "rankmap-time",
                                    "rankmap-record"}
    assert not missing, sorted(missing)


def test_the_plugin_reads_the_variable_the_taskprolog_exports():
    assert f'getenv("{SRUN_HOSTFILE_VAR}")' in SPANK_C.read_text()


@needs_cc
def test_a_step_it_places_is_marked_for_its_tasks_and_no_other(tmp_path):
    """The steps the plugin places carry RANKMAP_SRUN_PLACED=1, by which their tasks are
    bound before they exec; so does the line of earlier releases, which names the job's
    own host file itself.  A step inside a task (it inherits the mark), the user's own
    host file and the user's switch get no mark."""
    hostfile = tmp_path / "slurm_hostfile"
    hostfile.write_text("n1\nn2\nn1\n")
    machinefile = tmp_path / "machinefile"
    machinefile.write_text("n1\nn2\nn1\n")
    place = srun_environment(tmp_path)
    job = {SRUN_HOSTFILE_VAR: str(hostfile), "RANKMAP_MACHINEFILE": str(machinefile),
           "SLURM_NTASKS": "3"}
    assert place(job) == {"SLURM_HOSTFILE": str(hostfile), "SLURM_DISTRIBUTION": "arbitrary",
                          SRUN_PLACED_VAR: "1", "SLURM_GPU_BIND": "(unset)"}
    typed = place({**job, "SLURM_HOSTFILE": str(machinefile)})
    assert typed["SLURM_HOSTFILE"] == str(machinefile) and typed[SRUN_PLACED_VAR] == "1"
    nested = place({**job, "SLURM_STEP_ID": "0", SRUN_PLACED_VAR: "1"})
    assert nested == {"SLURM_HOSTFILE": "(unset)", "SLURM_DISTRIBUTION": "(unset)",
                      SRUN_PLACED_VAR: "(unset)", "SLURM_GPU_BIND": "(unset)"}
    own = place({**job, "SLURM_HOSTFILE": "/home/u/hosts"})
    assert own["SLURM_HOSTFILE"] == "/home/u/hosts" and own[SRUN_PLACED_VAR] == "(unset)"
    for off in ("off", "no", "0"):
        assert place({**job, "RANKMAP_BIND": off})[SRUN_PLACED_VAR] == "(unset)"
    assert place({**job, "SLURM_NTASKS": "2"})[SRUN_PLACED_VAR] == "(unset)"


@needs_cc
def test_a_placed_gpu_step_lets_each_task_see_its_nodes_gpus_unless_the_user_binds(tmp_path):
    """Slurm's --gpus-per-task binding gives local task i the node's i-th GPU; in a step
    the plugin places, every task sees the step's GPUs of its node (the bind file's
    mask) so that the task's own GPU can be chosen at task start.  A --gpu-bind of the
    user's, and a step the plugin leaves alone, keep Slurm's binding."""
    from dataclasses import replace

    from slurm_plugin.machine.gpus import Gpu
    from slurm_plugin.machine.layout import build_layout
    from slurm_plugin.outputs.render import render_bindfile
    from slurm_plugin.slurm.allocation import Allocation
    from slurm_plugin.slurm.topology import NodeShape

    alloc = Allocation("1", ("n1", "n2"), (3, 3), gpus={"n1": (0, 1, 2), "n2": (0, 1, 2)},
                       gpus_per_task=1)
    gpus = {n: tuple(Gpu(i, ()) for i in range(3)) for n in alloc.nodes}
    plain = build_layout(alloc, NodeShape(sockets=1, cores_per_socket=4), None, [1, 10],
                         gpus=gpus)
    bind = tmp_path / "bind"
    bind.write_text(render_bindfile(replace(plain, gpu_mask=0b111), np.arange(6)))
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("n1\nn1\nn1\nn2\nn2\nn2\n")
    place = srun_environment(tmp_path)
    job = {SRUN_HOSTFILE_VAR: str(hostfile), "SLURM_NTASKS": "6",
           "RANKMAP_BIND_FILE": str(bind)}
    assert place(job)["SLURM_GPU_BIND"] == "mask_gpu:0x7"
    assert place({**job, "SLURM_GPU_BIND": "closest"})["SLURM_GPU_BIND"] == "closest"
    assert place({**job, "SLURM_NTASKS": "2"})["SLURM_GPU_BIND"] == "(unset)"
    bind.write_text(render_bindfile(plain, np.arange(6)))
    assert place(job)["SLURM_GPU_BIND"] == "(unset)"


def test_the_plugin_marks_steps_with_the_name_the_project_uses():
    assert f'#define PLACED_VAR "{SRUN_PLACED_VAR}"' in SPANK_C.read_text()


@needs_cc
def test_an_option_that_cannot_reach_the_job_refuses_the_submission_saying_why(tmp_path):
    """spank_job_control_setenv failing would lose the user's --comm-profile silently;
    the plugin says so and fails the submission instead (issue 50)."""
    from tests.helpers.spank_harness import spank_program

    run = spank_program(tmp_path)
    ok = run("post", "lammps-3d")
    assert ok.stdout.splitlines() == ["job env RANKMAP_COMM_PROFILE=lammps-3d", "rc 0"]
    failed = run("post", "lammps-3d", HARNESS_SETENV_FAIL="1")
    assert failed.stdout.splitlines() == ["rc -1"]
    assert "--comm-profile=lammps-3d cannot be passed to the job" in failed.stderr


@needs_cc
def test_a_bad_site_maximum_is_said_and_ignored_not_read_as_a_number(tmp_path):
    from tests.helpers.spank_harness import spank_program

    run = spank_program(tmp_path)
    assert run("init", "max_time=120").stdout.split() == ["max_time", "120"]
    for bad in ("max_time=2m", "max_time=", "max_time=-5"):
        out = run("init", bad)
        assert out.stdout.split() == ["max_time", "0"], bad
        assert f"plugstack argument {bad}: expected a positive number" in out.stderr


@needs_cc
def test_neighbourhood_numbers_of_any_length_are_judged_as_python_judges_them(tmp_path):
    from mapper.solve.algorithm_names import normalize_algorithm

    check = spank_checker(tmp_path)
    names = ["topdown+n10", "topdown+np2", "topdown+np1", "topdown+n0", "topdown+n0001",
             "topdown+np" + "9" * 30, "topdown+nc" + "0" * 12, "topdown+n" + "7" * 12]
    accepted = check("choice", names)

    def python(name: str) -> bool:
        try:
            normalize_algorithm(name)
            return True
        except ValueError:
            return False
    assert accepted == [python(n) for n in names], list(zip(names, accepted, strict=True))
