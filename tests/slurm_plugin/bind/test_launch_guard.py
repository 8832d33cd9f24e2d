"""The binder's launch guard (``launch_not_rankmaps`` in slurm_plugin/bind/rankmap_bind.c)
decides, inside Open MPI 4.1's and Hydra's launchers, whether a launch is rankmap's;
rankmap-prterun (slurm_plugin/lifecycle/prterun_wrapper.py) decides it for Open MPI 5.
One table of cases, run against both for Open MPI, so the rule is the same whichever
Open MPI the job uses; and Hydra's own spellings."""

from __future__ import annotations

import shutil
import subprocess

import pytest

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
