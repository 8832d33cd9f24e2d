"""The binder's launch guard (``launch_not_rankmaps`` in slurm_plugin/bind/rankmap_bind.c)
decides, inside Open MPI 4.1's and Hydra's launchers, whether a launch is rankmap's;
rankmap-prterun (slurm_plugin/lifecycle/prterun_wrapper.py) decides it for Open MPI 5.
One table of cases, run against both for Open MPI, so the rule is the same whichever
Open MPI the job uses; and Hydra's own spellings."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from slurm_plugin.common.job_conventions import OPENMP_EXPORTS, OPENMP_SET_VAR
from slurm_plugin.lifecycle.prterun_wrapper import placement_args
from tests.helpers.paths import REPO

HARNESS = r"""
#include "rankmap_bind.c"
int main(int argc, char **argv)
{
    char why[512];
    const char *r = launch_not_rankmaps(argv[1], argc - 3, argv + 3, atol(argv[2]), why,
                                        sizeof why);
    printf("%s\n", r ? r : "rankmap's");
    return 0;
}
"""

#: (launch arguments, rankmap's?) for a plan of 4 ranks
OPENMPI_CASES = [
    (["./app"], True),
    (["-np", "4", "./app"], True),
    (["-n", "4", "./app"], True),
    (["--np=4", "./app"], True),
    (["-np", "2", "./app"], False),
    (["--np=2", "./app"], False),
    (["-c", "3", "./app"], False),
    (["--map-by", "core", "./app"], False),
    (["--map-by=ppr:1:node", "./app"], False),
    (["--hostfile", "h", "./app"], False),
    (["-H", "n1,n2", "./app"], False),
    (["--rankfile", "mine", "./app"], False),
    (["-np", "2", "./a", ":", "-np", "2", "./b"], False),
    (["--bind-to", "none", "./app"], True),
    (["-x", "FOO", "--mca", "btl", "self,tcp", "./app"], True),
]
HYDRA_CASES = [
    (["./app"], True),
    (["-n", "4", "./app"], True),
    (["-np", "4", "./app"], True),
    (["--n", "4", "./app"], True),
    (["-n", "2", "./app"], False),
    (["-f", "hosts", "./app"], False),
    (["-hostfile", "hosts", "./app"], False),
    (["-hosts", "n1,n2", "./app"], False),
    (["-ppn", "2", "./app"], False),
    (["-perhost", "2", "./app"], False),
    (["-n", "2", "./a", ":", "-n", "2", "./b"], False),
    (["-genv", "FOO", "1", "./app"], True),
    (["-rankmap", "0,1,1,0", "./app"], False),
]


@pytest.fixture(scope="module")
def guard(tmp_path_factory):
    if not shutil.which("cc"):
        pytest.skip("needs a C compiler")
    out = tmp_path_factory.mktemp("guard")
    (out / "h.c").write_text(HARNESS)
    subprocess.run(["cc", "-w", "-I", str(REPO / "slurm_plugin/bind"), "-o", str(out / "h"),
                    str(out / "h.c"), "-ldl"], check=True)

    def decide(family: str, args: list[str], planned: int = 4, **env: str) -> str:
        return subprocess.run([str(out / "h"), family, str(planned), *args], env=env,
                              capture_output=True, text=True, check=True).stdout.strip()
    return decide


@pytest.mark.parametrize("args, rankmaps", OPENMPI_CASES)
def test_open_mpi_launches_are_judged_alike_by_the_guard_and_rankmap_prterun(guard, args,
                                                                              rankmaps):
    wrapper = placement_args(args, {"RANKMAP_RANKFILE": "/job/rankfile"}, 4)
    assert (wrapper[1] is None) == rankmaps, wrapper
    assert (guard("openmpi", args) == "rankmap's") == rankmaps


@pytest.mark.parametrize("args, rankmaps", HYDRA_CASES)
def test_hydra_launches(guard, args, rankmaps):
    assert (guard("hydra", args) == "rankmap's") == rankmaps


def test_the_users_switch_turns_every_family_off(guard):
    for family in ("openmpi", "hydra"):
        said = guard(family, ["./app"], RANKMAP_BIND="off")
        assert said.startswith("RANKMAP_BIND=off: "), said
    assert placement_args(["./app"], {"RANKMAP_RANKFILE": "/r", "RANKMAP_BIND": "off"},
                          4)[1].startswith("RANKMAP_BIND=off")


SHOW_ENV = r"""
#include <stdio.h>
#include <stdlib.h>
#ifdef NEW_HYDRA
/* what MPICH 5.0.2's mpiexec.hydra holds: the option it hands proxies their ranks by */
const char *volatile proxy_option = "--exec-rank";
#endif
int main(void)
{
    const char *names[] = {"OMP_PLACES", "OMP_PROC_BIND", "HYDRA_HOST_FILE",
                           "HYDRA_CONFIG_FILE", "RANKMAP_BIND", NULL};
    for (int i = 0; names[i]; i++)
        printf("%s=%s\n", names[i], getenv(names[i]) ? getenv(names[i]) : "(unset)");
    return 0;
}
"""


@pytest.fixture(scope="module")
def launchers(tmp_path_factory):
    """The binder, and a program that prints its OpenMP variables installed as Hydra's
    launcher (mpiexec.hydra) and as an ordinary program: the guard judges a process by
    its executable's name."""
    if not shutil.which("cc"):
        pytest.skip("needs a C compiler")
    out = tmp_path_factory.mktemp("omp-guard")
    subprocess.run(["make", "-s", "-C", str(REPO / "slurm_plugin/bind"), f"OUT={out}"],
                   check=True)
    (out / "show.c").write_text(SHOW_ENV)
    subprocess.run(["cc", "-o", str(out / "mpiexec.hydra"), str(out / "show.c")], check=True)
    shutil.copy(out / "mpiexec.hydra", out / "app")
    (out / "new").mkdir()
    subprocess.run(["cc", "-DNEW_HYDRA", "-o", str(out / "new" / "mpiexec.hydra"),
                    str(out / "show.c")], check=True)
    (out / "bindings").write_text("rankmap-bind 1 1 32".ljust(31) + "\n")

    def run(program: str, **env: str) -> dict[str, str]:
        base = {"LD_PRELOAD": str(out / "librankmap_bind.so"),
                "RANKMAP_BIND_FILE": str(out / "bindings"), "PATH": "/usr/bin:/bin"}
        proc = subprocess.run([str(out / program)], env={**base, **env},
                              capture_output=True, text=True, check=True)
        return {**dict(line.split("=", 1) for line in proc.stdout.split()),
                "stderr": proc.stderr}
    run.dir = out
    return run


def omp(said: dict[str, str]) -> tuple[str, str]:
    return said["OMP_PLACES"], said["OMP_PROC_BIND"]


def test_hydra_does_not_pass_rankmaps_openmp_places_to_its_ranks(launchers):
    """Hydra's ranks start on their proxy's mask and are bound at MPI_Init, after an
    OpenMP runtime built its places: in mpiexec the TaskProlog's OMP_PLACES/OMP_PROC_BIND
    are unset; the user's own (not listed in RANKMAP_OMP_SET, or changed since) are
    kept, and other programs keep rankmap's."""
    ours = {"OMP_PLACES": "cores", "OMP_PROC_BIND": "close",
            OPENMP_SET_VAR: "OMP_PLACES,OMP_PROC_BIND"}
    assert ours.items() >= OPENMP_EXPORTS.items()
    assert omp(launchers("mpiexec.hydra", **ours)) == ("(unset)", "(unset)")
    assert omp(launchers("app", **ours)) == ("cores", "close")
    # the user chose OMP_PROC_BIND (not listed) and changed OMP_PLACES after the prolog
    users = {"OMP_PLACES": "threads", "OMP_PROC_BIND": "close", OPENMP_SET_VAR: "OMP_PLACES"}
    assert omp(launchers("mpiexec.hydra", **users)) == ("threads", "close")


def test_the_binder_knows_the_openmp_variables_the_task_prolog_sets():
    source = (REPO / "slurm_plugin/bind/rankmap_bind.c").read_text()
    for name, value in OPENMP_EXPORTS.items():
        assert f'{{"{name}", "{value}"}}' in source, name
    assert f'getenv("{OPENMP_SET_VAR}")' in source


def test_an_mpiexec_that_cannot_take_the_rank_map_keeps_its_own_placement(launchers):
    """A placement that interleaves hosts reaches MPICH as a host file of each host once
    plus a rank map (HYDRA_CONFIG_FILE, the job's hydra_rankmap): a Hydra that hands its
    proxies their ranks (MPICH 5.0.2 and later) keeps both; one that does not (earlier
    MPICH, Intel MPI) would put the ranks in blocks, so neither is passed on, its ranks
    are not bound, and it says why."""
    job = {"HYDRA_HOST_FILE": str(launchers.dir / "hydra_hostfile"),
           "HYDRA_CONFIG_FILE": str(launchers.dir / "hydra_rankmap")}
    new = launchers("new/mpiexec.hydra", **job)
    assert (new["HYDRA_HOST_FILE"], new["HYDRA_CONFIG_FILE"], new["RANKMAP_BIND"]) == (
        job["HYDRA_HOST_FILE"], job["HYDRA_CONFIG_FILE"], "(unset)"), new
    old = launchers("mpiexec.hydra", **job)
    assert (old["HYDRA_HOST_FILE"], old["HYDRA_CONFIG_FILE"], old["RANKMAP_BIND"]) == (
        "(unset)", "(unset)", "off"), old
    assert "cannot take the job's placement, whose hosts interleave" in old["stderr"]
    # a configuration file of the user's is not the job's rank map: left to Hydra
    mine = launchers("mpiexec.hydra", **{**job, "HYDRA_CONFIG_FILE": "/home/u/hydra.conf"})
    assert mine["HYDRA_CONFIG_FILE"] == "/home/u/hydra.conf" and mine["RANKMAP_BIND"] == "(unset)"


def test_a_launch_that_is_not_rankmaps_keeps_the_users_own_hydra_config(launchers, tmp_path):
    """``mpiexec -n 2`` in a job of another size: the job's host file is not passed on,
    and neither is the job's rank map; a HYDRA_CONFIG_FILE of the user's own stays."""
    program = launchers.dir / "new" / "mpiexec.hydra"
    job = {"HYDRA_HOST_FILE": str(launchers.dir / "hydra_hostfile")}

    def launch(**env: str) -> dict[str, str]:
        # the guard reads the launch from the process's command line
        proc = subprocess.run([str(program), "-n", "2", "./app"], capture_output=True,
                              text=True, check=True,
                              env={"LD_PRELOAD": str(launchers.dir / "librankmap_bind.so"),
                                   "RANKMAP_BIND_FILE": str(launchers.dir / "bindings"),
                                   "PATH": "/usr/bin:/bin", **env})
        return dict(line.split("=", 1) for line in proc.stdout.split())
    mine = launch(**job, HYDRA_CONFIG_FILE="/home/u/hydra.conf")
    assert (mine["HYDRA_HOST_FILE"], mine["HYDRA_CONFIG_FILE"], mine["RANKMAP_BIND"]) == (
        "(unset)", "/home/u/hydra.conf", "off"), mine
    ours = launch(**job, HYDRA_CONFIG_FILE=str(launchers.dir / "hydra_rankmap"))
    assert (ours["HYDRA_HOST_FILE"], ours["HYDRA_CONFIG_FILE"]) == ("(unset)", "(unset)"), ours
