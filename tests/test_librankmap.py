"""deploy/librankmap: rankmap_comm() under a real mpirun (4 ranks, oversubscribed);
slurm_plugin.rankmap_mpi, its mpi4py twin, on a stand-in communicator.

Builds the library with its Makefile, links a small program against it and checks the
new rank of every process against the reorder file, and the no-op cases: variable
unset, file unreadable, not a permutation, wrong size, different files per process.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

needs_mpi = pytest.mark.skipif(not (shutil.which("mpicc") and shutil.which("mpirun")),
                               reason="no MPI (mpicc, mpirun)")

PROGRAM = r"""
#include <stdio.h>
#include <mpi.h>
#include "rankmap.h"
int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int old, new_rank, size;
    MPI_Comm comm;
    MPI_Comm_rank(MPI_COMM_WORLD, &old);
    if (rankmap_comm(MPI_COMM_WORLD, &comm) != MPI_SUCCESS) return 3;
    MPI_Comm_rank(comm, &new_rank);
    MPI_Comm_size(comm, &size);
    int sum = 0;  /* the new communicator works: sum of its ranks */
    MPI_Allreduce(&new_rank, &sum, 1, MPI_INT, MPI_SUM, comm);
    printf("old %d new %d size %d sum %d\n", old, new_rank, size, sum);
    MPI_Comm_free(&comm);
    MPI_Finalize();
    return 0;
}
"""


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    build = tmp_path_factory.mktemp("librankmap")
    subprocess.run(["make", "-s", "-C", str(ROOT / "deploy/librankmap"), f"OUT={build}",
                    f"INCDIR={build}/include"], check=True, capture_output=True)
    assert (build / "librankmap.so").is_file() and (build / "include/rankmap.h").is_file()
    src = build / "demo.c"
    src.write_text(PROGRAM)
    exe = build / "demo"
    subprocess.run(["mpicc", "-o", str(exe), str(src), f"-I{build}/include",
                    str(build / "librankmap.a")], check=True, capture_output=True)
    return exe


def _run(exe: Path, reorder: str | None, *, launch: list[str] | None = None
         ) -> tuple[dict[int, int], str]:
    env = {k: v for k, v in os.environ.items() if k != "RANKMAP_REORDER"}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    if reorder is not None:
        env["RANKMAP_REORDER"] = reorder
    argv = ["mpirun", "--oversubscribe"]
    argv += launch if launch else ["-np", "4", str(exe)]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ranks = {}
    for old, new, size, total in re.findall(r"old (\d+) new (\d+) size (\d+) sum (\d+)",
                                            proc.stdout):
        assert (int(size), int(total)) == (4, 6)
        ranks[int(old)] = int(new)
    assert sorted(ranks) == [0, 1, 2, 3], proc.stdout
    warnings = [line for line in proc.stderr.splitlines() if "rankmap" in line]
    return ranks, "\n".join(warnings)


@needs_mpi
def test_new_ranks_follow_the_reorder_file(program, tmp_path):
    path = tmp_path / "reorder"
    path.write_text("# launcher rank r -> new rank\n2\n0\n3\n1\n")
    ranks, warnings = _run(program, str(path))
    assert ranks == {0: 2, 1: 0, 2: 3, 3: 1}
    assert warnings == ""


@needs_mpi
def test_unset_or_empty_is_a_silent_duplicate(program):
    for value in (None, ""):
        ranks, warnings = _run(program, value)
        assert ranks == {0: 0, 1: 1, 2: 2, 3: 3} and warnings == ""


@needs_mpi
@pytest.mark.parametrize("text,message", [
    (None, "cannot read: No such file or directory"),
    ("0\n0\n1\n2\n", ":2: rank 0 appears twice"),
    ("0\n1\n2\n", ":3: 3 ranks, the communicator has 4"),
    ("0\n1\n2\n3\n4\n", ":5: more than 4 ranks"),
    ("0\n1\n9\n2\n", ":3: rank 9 out of range 0..3"),
    ("0\n1\ntwo\n3\n", ":3: expected a rank"),
])
def test_invalid_files_keep_the_order_with_one_warning(program, tmp_path, text, message):
    path = tmp_path / "reorder"
    if text is not None:
        path.write_text(text)
    ranks, warnings = _run(program, str(path))
    assert ranks == {0: 0, 1: 1, 2: 2, 3: 3}
    assert len(warnings.splitlines()) == 1, warnings
    assert warnings.startswith(f"rankmap: warning: {path}") and message in warnings
    assert warnings.endswith("keeping the launcher's rank order")


@needs_mpi
def test_processes_reading_different_files_keep_the_order(program, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("1\n0\n3\n2\n")
    b.write_text("3\n2\n1\n0\n")
    # ranks 0-1 read a, 2-3 read b: one program behind a shell that picks the file by
    # the rank Open MPI exports (4.1 and 5.0), not a multi-program launch
    # (-np 2 -x RANKMAP_REORDER=a prog : -np 2 -x RANKMAP_REORDER=b prog), which Open MPI
    # 5.0.7 (Debian 13) ends in a segfault of mpirun (open-mpi/ompi#13303)
    pick = ('r=${OMPI_COMM_WORLD_RANK:?not started by Open MPI}; '
            'if [ "$r" -lt 2 ]; then f=$1; else f=$2; fi; '
            'export RANKMAP_REORDER="$f"; exec "$3"')
    ranks, warnings = _run(program, None, launch=[
        "-np", "4", "sh", "-c", pick, "sh", str(a), str(b), str(program)])
    assert ranks == {0: 0, 1: 1, 2: 2, 3: 3}
    assert len(warnings.splitlines()) == 1 and "read different files" in warnings


class FakeComm:
    """Rank ``rank`` of ``size``; allgather answers as if every process found what this
    one found, except the entries given in ``others``."""

    def __init__(self, rank, size, others=None):
        self.rank, self.size, self.others = rank, size, others or {}
        self.made = None

    def Get_rank(self):
        return self.rank

    def Get_size(self):
        return self.size

    def allgather(self, value):
        return [self.others.get(r, value) for r in range(self.size)]

    def Dup(self):
        self.made = ("dup",)
        return self

    def Split(self, color, key):
        self.made = ("split", color, key)
        return self


def test_python_twin_splits_with_the_new_rank(tmp_path, capsys):
    from slurm_plugin.rankmap_mpi import reordered_comm

    path = tmp_path / "reorder"
    path.write_text("2\n0\n3\n1\n")
    for rank, new in enumerate([2, 0, 3, 1]):
        comm = reordered_comm(FakeComm(rank, 4), {"RANKMAP_REORDER": str(path)})
        assert comm.made == ("split", 0, new)
    assert reordered_comm(FakeComm(0, 4), {}).made == ("dup",)
    assert capsys.readouterr().err == ""


def test_python_twin_falls_back_with_one_warning(tmp_path, capsys):
    from slurm_plugin.rankmap_mpi import reordered_comm

    path = tmp_path / "reorder"
    path.write_text("0\n0\n1\n2\n")
    env = {"RANKMAP_REORDER": str(path)}
    assert reordered_comm(FakeComm(0, 4), env).made == ("dup",)
    assert capsys.readouterr().err == (f"rankmap: warning: {path}:2: rank 0 again (first on "
                                       f"line 1); keeping the launcher's rank order\n")
    assert reordered_comm(FakeComm(1, 4), env).made == ("dup",)
    assert capsys.readouterr().err == ""  # only the lowest failing rank reports
    path.write_text("1\n0\n3\n2\n")
    other = {3: (None, "another digest")}
    assert reordered_comm(FakeComm(0, 4, other), env).made == ("dup",)
    assert "the processes read different files" in capsys.readouterr().err
    missing = {"RANKMAP_REORDER": str(tmp_path / "none")}
    assert reordered_comm(FakeComm(0, 4), missing).made == ("dup",)
    assert "none: cannot read" in capsys.readouterr().err


@needs_mpi
def test_python_twin_under_mpirun(tmp_path):
    pytest.importorskip("mpi4py")
    import sys

    script = tmp_path / "demo.py"
    script.write_text("from slurm_plugin.rankmap_mpi import reordered_comm\n"
                      "from mpi4py import MPI\n"
                      "c = reordered_comm()\n"
                      "print('old', MPI.COMM_WORLD.Get_rank(), 'new', c.Get_rank(), 'size', "
                      "c.Get_size(), 'sum', c.allreduce(c.Get_rank()))\n")
    path = tmp_path / "reorder"
    path.write_text("2\n0\n3\n1\n")
    ranks, warnings = _run(Path(sys.executable), str(path), launch=["-np", "4", sys.executable,
                                                                    str(script)])
    assert ranks == {0: 2, 1: 0, 2: 3, 3: 1} and warnings == ""
