"""librankmap_bind in a process with no MPI: never ends the program (issue 50)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers.paths import REPO

WEAK_MPI = r"""
#include <stdio.h>
/* a library that uses MPI only when the program has it (a weak reference): the
 * preload's own MPI_Init makes the reference non-null */
extern int MPI_Init(int *, char ***) __attribute__((weak));
extern int MPI_Init_thread(int *, char ***, int, int *) __attribute__((weak));
int main(int argc, char **argv)
{
    int provided = -1;
    if (!MPI_Init) {
        printf("no MPI\n");
        return 0;
    }
    printf("MPI_Init %d\n", MPI_Init(&argc, &argv));
    printf("MPI_Init_thread %d\n", MPI_Init_thread(&argc, &argv, 0, &provided));
    return 3;
}
"""


@pytest.mark.skipif(not shutil.which("cc"), reason="needs a C compiler")
def test_a_program_without_mpi_gets_an_error_code_not_an_abort(tmp_path: Path):
    subprocess.run(["make", "-s", "-C", str(REPO / "slurm_plugin/bind"), f"OUT={tmp_path}"],
                   check=True)
    (tmp_path / "weak.c").write_text(WEAK_MPI)
    subprocess.run(["cc", "-o", str(tmp_path / "weak"), str(tmp_path / "weak.c")], check=True)
    alone = subprocess.run([str(tmp_path / "weak")], capture_output=True, text=True)
    assert (alone.returncode, alone.stdout) == (0, "no MPI\n")
    run = subprocess.run([str(tmp_path / "weak")], capture_output=True, text=True,
                         env={"LD_PRELOAD": str(tmp_path / "librankmap_bind.so"),
                              "PATH": "/usr/bin:/bin"})
    # the program's own error path runs (exit 3), and one line says why
    assert run.returncode == 3, run
    codes = dict(line.split() for line in run.stdout.splitlines())
    assert codes.keys() == {"MPI_Init", "MPI_Init_thread"} and "0" not in codes.values()
    assert run.stderr.count("rankmap: ") == 1 and "no MPI library" in run.stderr, run.stderr
