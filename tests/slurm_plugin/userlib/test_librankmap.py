"""slurm_plugin/userlib/librankmap: rankmap_comm() under a real mpirun (4 ranks, oversubscribed);
slurm_plugin.userlib.rankmap_mpi, its mpi4py twin, on a stand-in communicator.

Builds the library with its Makefile, links a small program against it and checks the
new rank of every process against the reorder file, and the no-op cases: variable
unset, file unreadable, not a permutation, wrong size, different files per process.

rankmap_dist_graph() likewise: a second program prints every process's neighbours and
weights in the distributed-graph communicator (MPI_Dist_graph_neighbors), checked
against the group graph file the job gets (slurm_plugin.outputs.reorder_files) and a hand-written
one, whatever renumbering the MPI chose; damaged files (a rank out of range, truncated
files, another size, one-sided edges) give RANKMAP_ERR_FILE and MPI_COMM_NULL on every
process with one warning, and an unset variable RANKMAP_ERR_UNSET, silently.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.helpers.paths import REPO

ROOT = REPO

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


DG_PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <mpi.h>
#include "rankmap.h"
int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int old;
    MPI_Comm graph = MPI_COMM_WORLD;  /* must become MPI_COMM_NULL on an error */
    MPI_Comm_rank(MPI_COMM_WORLD, &old);
    int rc = rankmap_dist_graph(MPI_COMM_WORLD, &graph);
    if (rc != MPI_SUCCESS) {
        printf("dg old %d error unset %d file %d null %d\n", old, rc == RANKMAP_ERR_UNSET,
               rc == RANKMAP_ERR_FILE, graph == MPI_COMM_NULL);
        MPI_Finalize();
        return 0;
    }
    int new_rank, topo, in, out, weighted;
    MPI_Comm_rank(graph, &new_rank);
    MPI_Topo_test(graph, &topo);
    MPI_Dist_graph_neighbors_count(graph, &in, &out, &weighted);
    size_t ni = (size_t)in + 1, no = (size_t)out + 1;
    int *src = malloc(ni * sizeof(int)), *sw = malloc(ni * sizeof(int));
    int *dst = malloc(no * sizeof(int)), *dw = malloc(no * sizeof(int));
    MPI_Dist_graph_neighbors(graph, in, src, sw, out, dst, dw);
    printf("dg old %d new %d dist_graph %d weighted %d in", old, new_rank,
           topo == MPI_DIST_GRAPH, weighted);
    for (int i = 0; i < in; i++)
        printf(" %d:%d", src[i], sw[i]);
    printf(" out");
    for (int i = 0; i < out; i++)
        printf(" %d:%d", dst[i], dw[i]);
    printf("\n");
    free(src);
    free(sw);
    free(dst);
    free(dw);
    MPI_Comm_free(&graph);
    MPI_Finalize();
    return 0;
}
"""


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory):
    build = tmp_path_factory.mktemp("librankmap")
    subprocess.run(["make", "-s", "-C", str(ROOT / "slurm_plugin/userlib/librankmap"),
                    f"OUT={build}",
                    f"INCDIR={build}/include"], check=True, capture_output=True)
    assert (build / "librankmap.so").is_file() and (build / "include/rankmap.h").is_file()
    return build


def _compile(build: Path, name: str, code: str) -> Path:
    src = build / f"{name}.c"
    src.write_text(code)
    exe = build / name
    subprocess.run(["mpicc", "-o", str(exe), str(src), f"-I{build}/include",
                    str(build / "librankmap.a")], check=True, capture_output=True)
    return exe


@pytest.fixture(scope="module")
def program(build_dir):
    return _compile(build_dir, "demo", PROGRAM)


@pytest.fixture(scope="module")
def dg_program(build_dir):
    return _compile(build_dir, "dg_demo", DG_PROGRAM)


def _mpirun(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """``argv`` with a TMPDIR of its own: Open MPI 5.0.7's PRRTE refused to start
    ("prte_session_dir failed ... Exists") on a session directory another run had
    left in the shared /tmp (Debian 13); the name has no '-', which 5.0.7 mishandles."""
    tmp = tempfile.mkdtemp(prefix="ompi_")
    try:
        return subprocess.run(argv, env={**env, "TMPDIR": tmp}, capture_output=True,
                              text=True, timeout=120, check=False)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _run(exe: Path, reorder: str | None, *, launch: list[str] | None = None
         ) -> tuple[dict[int, int], str]:
    env = {k: v for k, v in os.environ.items() if k != "RANKMAP_REORDER"}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    if reorder is not None:
        env["RANKMAP_REORDER"] = reorder
    argv = ["mpirun", "--oversubscribe"]
    argv += launch if launch else ["-np", "4", str(exe)]
    proc = _mpirun(argv, env)
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


def _run_dg(exe: Path, path: str | None, np_: int, *, python: bool = False
            ) -> tuple[dict, str]:
    """Per MPI_COMM_WORLD rank: ("error", unset, file, null) or (new rank,
    in-neighbours, out-neighbours) as sorted (rank, weight) lists; and the warnings."""
    env = {k: v for k, v in os.environ.items() if k != "RANKMAP_DIST_GRAPH"}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    if path is not None:
        env["RANKMAP_DIST_GRAPH"] = path
    argv = ["mpirun", "--oversubscribe", "-np", str(np_)]
    argv += [sys.executable, str(exe)] if python else [str(exe)]
    proc = _mpirun(argv, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    seen: dict[int, tuple] = {}
    for line in proc.stdout.splitlines():
        m = re.fullmatch(r"dg old (\d+) error unset (\d) file (\d) null (\d)", line)
        if m:
            seen[int(m[1])] = ("error", m[2] == "1", m[3] == "1", m[4] == "1")
            continue
        m = re.fullmatch(r"dg old (\d+) new (\d+) dist_graph 1 weighted 1 in(.*) out(.*)",
                         line)
        assert m, line
        lists = [sorted(tuple(map(int, x.split(":"))) for x in part.split())
                 for part in (m[3], m[4])]
        seen[int(m[1])] = (int(m[2]), *lists)
    assert sorted(seen) == list(range(np_)), proc.stdout + proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if "rankmap" in line]
    return seen, "\n".join(warnings)


def _file_neighbours(text: str) -> list[list[tuple[int, int]]]:
    """Per process, its (neighbour, weight) pairs, read here from the documented format
    (not by mapper.io.reorder.parse_group_graph)."""
    lines = [line.split("#")[0].split() for line in text.splitlines()]
    lines = [words for words in lines if words]
    n = int(lines[0][0])
    out = []
    for words in lines[1:1 + n]:
        nums = list(map(int, words))
        assert len(nums) == 1 + 2 * nums[0]
        out.append(sorted(zip(nums[1::2], nums[2::2], strict=True)))
    assert len(out) == n == len(lines) - 1
    return out


def _check_against_file(seen: dict, text: str) -> None:
    """Process i (rank i of the communicator given) has rank new[i] in the graph
    communicator; its neighbours there are the file's neighbours of i, renamed."""
    expected = _file_neighbours(text)
    new = {old: got[0] for old, got in seen.items()}
    assert sorted(new.values()) == sorted(new)  # a permutation (MPI may reorder)
    for old, (_, ins, outs) in seen.items():
        want = sorted((new[q], w) for q, w in expected[old])
        assert ins == want and outs == want, (old, ins, outs, want)


# a path 0 - 1 - 2 - 3 with weights 5, 7, 9
PATH4 = "# a path\n4\n1 1 5\n2 0 5 2 7\n\n2 1 7 3 9 # comment\n1 2 9\n"


@needs_mpi
def test_dist_graph_neighbours_follow_the_jobs_file(dg_program, tmp_path):
    """The file a job gets (the seed's worked example placed by the matching on two
    nodes of two sockets of two cores), through rankmap_dist_graph, 8 processes."""
    from mapper.construction.matching import matching
    from mapper.model.graph import CommGraph
    from slurm_plugin.common.job_conventions import GROUP_GRAPH_FILE
    from slurm_plugin.machine.layout import build_layout
    from slurm_plugin.outputs.reorder_files import reorder_files
    from slurm_plugin.slurm.allocation import Allocation
    from slurm_plugin.slurm.topology import NodeShape, parse_topology_conf
    from tests.mapper.construction.test_matching import TABLE_I

    layout = build_layout(Allocation("1", ("a", "b"), (4, 4), 1), NodeShape(2, 2),
                          parse_topology_conf(""), [1.0, 10.0, 100.0])
    graph = CommGraph.from_matrix(TABLE_I, directed=False)
    text = reorder_files(layout, matching(graph, layout.hierarchy), graph)[GROUP_GRAPH_FILE]
    path = tmp_path / GROUP_GRAPH_FILE
    path.write_text(text)
    seen, warnings = _run_dg(dg_program, str(path), 8)
    assert warnings == ""
    _check_against_file(seen, text)
    # the seed's edges: every process has the neighbours its text names (Fig. 7)
    assert {old: len(got[1]) for old, got in seen.items()} == \
        {0: 2, 1: 2, 2: 2, 3: 1, 4: 2, 5: 2, 6: 1, 7: 2}


@needs_mpi
def test_dist_graph_of_a_hand_written_file(dg_program, tmp_path):
    path = tmp_path / "groups"
    path.write_text(PATH4)
    seen, warnings = _run_dg(dg_program, str(path), 4)
    assert warnings == ""
    _check_against_file(seen, PATH4)


@needs_mpi
def test_dist_graph_unset_is_an_error_code_without_a_warning(dg_program):
    for value in (None, ""):
        seen, warnings = _run_dg(dg_program, value, 4)
        assert set(seen.values()) == {("error", True, False, True)} and warnings == ""


@needs_mpi
@pytest.mark.parametrize("text,message", [
    (None, "cannot read: No such file or directory"),
    ("4\n1 1 5\n2 0 5 4 7\n2 1 7 3 9\n1 2 9\n", ":3: process 1: neighbour 4 out of range 0..3"),
    ("4\n1 1 5\n2 0 5 2 7\n2 1 7 3", ":4: process 2: degree 2 with 3 numbers after it"),
    ("4\n1 1 5\n2 0 5 2 7\n", ":4: truncated: 2 process lines, the file says 4"),
    ("4\n1 1 5\n2 0 5 2 7\n2 1 7 3 9\n1 2", ":5: process 3: degree 1 with 1 numbers"),
    ("4\n1 1 5\n2 0 5 2 7\n2 1 7 3 9\n1 2 8\n", ":4: process 2 lists 3 (weight 9) but"),
    ("4\n1 1 5\n2 0 5 2 7\n2 1 7 3 9\n1 2 9\n0\n", ":6: more than 4 processes"),
    ("5\n", ":1: 5 processes, the communicator has 4"),
    ("4\n1 1 5\n2 0 5 2 -7\n", ":3: expected a non-negative integer"),
    ("4\n1 1 5\n2 0 5 2 99999999999\n", ":3: number out of range"),
    ("4\n1 0 5\n", ":2: process 0 lists itself"),
    ("4\n\x00\x01\n", ":2: expected a non-negative integer"),
    ("", "empty, expected the number of processes"),
])
def test_dist_graph_damaged_files_are_an_error_code(dg_program, tmp_path, text, message):
    path = tmp_path / "groups"
    if text is not None:
        path.write_text(text)
    seen, warnings = _run_dg(dg_program, str(path), 4)
    assert set(seen.values()) == {("error", False, True, True)}
    assert len(warnings.splitlines()) == 1, warnings
    assert warnings.startswith(f"rankmap: warning: {path}") and message in warnings
    assert warnings.endswith("; no distributed-graph communicator")


class FakeComm:
    """Rank ``rank`` of ``size``; allgather answers as if every process found what this
    one found, except the entries given in ``others``."""

    def __init__(self, rank, size, others=None, root_says=None):
        self.rank, self.size, self.others = rank, size, others or {}
        self.root_says = root_says  # what rank 0 broadcasts, seen from another rank
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

    def bcast(self, value, root=0):
        return value if self.rank == root else self.root_says

    def Create_dist_graph(self, sources, degrees, destinations, weights=None, info=None,
                          reorder=False):
        self.made = ("dist_graph", sources, degrees, destinations, weights, reorder)
        return self


def test_python_twin_splits_with_the_new_rank(tmp_path, capsys):
    from slurm_plugin.userlib.rankmap_mpi import reordered_comm

    path = tmp_path / "reorder"
    path.write_text("2\n0\n3\n1\n")
    for rank, new in enumerate([2, 0, 3, 1]):
        comm = reordered_comm(FakeComm(rank, 4), {"RANKMAP_REORDER": str(path)})
        assert comm.made == ("split", 0, new)
    assert reordered_comm(FakeComm(0, 4), {}).made == ("dup",)
    assert capsys.readouterr().err == ""


def test_python_twin_falls_back_with_one_warning(tmp_path, capsys):
    from slurm_plugin.userlib.rankmap_mpi import reordered_comm

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
    script.write_text("from slurm_plugin.userlib.rankmap_mpi import reordered_comm\n"
                      "from mpi4py import MPI\n"
                      "c = reordered_comm()\n"
                      "print('old', MPI.COMM_WORLD.Get_rank(), 'new', c.Get_rank(), 'size', "
                      "c.Get_size(), 'sum', c.allreduce(c.Get_rank()))\n")
    path = tmp_path / "reorder"
    path.write_text("2\n0\n3\n1\n")
    ranks, warnings = _run(Path(sys.executable), str(path), launch=["-np", "4", sys.executable,
                                                                    str(script)])
    assert ranks == {0: 2, 1: 0, 2: 3, 3: 1} and warnings == ""


def test_python_dist_graph_rank_0_gives_the_whole_graph(tmp_path, capsys):
    from slurm_plugin.userlib.rankmap_mpi import _weights_empty, dist_graph_comm

    path = tmp_path / "groups"
    path.write_text(PATH4)
    env = {"RANKMAP_DIST_GRAPH": str(path)}
    assert dist_graph_comm(FakeComm(0, 4), env).made == (
        "dist_graph", [0, 1, 2, 3], [1, 2, 2, 1], [1, 0, 2, 1, 3, 2], [5, 5, 7, 7, 9, 9],
        True)
    # the others give no edges, whatever their environment says
    for other_env in (env, {}):
        assert dist_graph_comm(FakeComm(2, 4, root_says="ok"), other_env).made == (
            "dist_graph", [], [], [], _weights_empty(), True)
    assert capsys.readouterr().err == ""


def test_python_dist_graph_unset_or_damaged_is_none(tmp_path, capsys):
    from slurm_plugin.userlib.rankmap_mpi import dist_graph_comm

    assert dist_graph_comm(FakeComm(0, 4), {}) is None
    assert dist_graph_comm(FakeComm(1, 4, root_says="unset"), {}) is None
    assert capsys.readouterr().err == ""
    path = tmp_path / "groups"
    for text, message in [("4\n1 1 5\n2 0 5 4 7\n2 1 7 3 9\n1 2 9\n",
                           ":3: process 1: neighbour 4 out of range 0..3"),
                          ("4\n1 1 5\n2 0 5 2 7\n2 1 7 3",
                           ":4: process 2: degree 2 with 3 numbers after it"),
                          ("4\n1 1 5\n2 0 5 2 7\n", ": 2 process lines, the file says 4"),
                          ("4\n\udcff\n", ": not UTF-8 text")]:
        path.write_text(text, errors="surrogateescape")
        env = {"RANKMAP_DIST_GRAPH": str(path)}
        assert dist_graph_comm(FakeComm(0, 4), env) is None
        assert capsys.readouterr().err == (f"rankmap: warning: {path}{message}; no "
                                           f"distributed-graph communicator\n")
        assert dist_graph_comm(FakeComm(3, 4, root_says="bad"), env) is None
        assert capsys.readouterr().err == ""  # only rank 0 reports
    missing = {"RANKMAP_DIST_GRAPH": str(tmp_path / "none")}
    assert dist_graph_comm(FakeComm(0, 4), missing) is None
    assert "none: cannot read" in capsys.readouterr().err


@needs_mpi
def test_python_dist_graph_under_mpirun(tmp_path):
    pytest.importorskip("mpi4py")

    script = tmp_path / "dg_demo.py"
    # one write per line: print's pieces can reach mpirun apart and interleave
    script.write_text(
        "import os\n"
        "from mpi4py import MPI\n"
        "from slurm_plugin.userlib.rankmap_mpi import dist_graph_comm\n"
        "old = MPI.COMM_WORLD.Get_rank()\n"
        "g = dist_graph_comm()\n"
        "if g is None:\n"
        "    line = f'dg old {old} error unset 0 file 1 null 1'\n"
        "else:\n"
        "    src, dst, (sw, dw) = g.Get_dist_neighbors()\n"
        "    ins = ''.join(f' {a}:{b}' for a, b in zip(src, sw))\n"
        "    outs = ''.join(f' {a}:{b}' for a, b in zip(dst, dw))\n"
        "    line = (f'dg old {old} new {g.Get_rank()} dist_graph 1 weighted 1 in{ins} '\n"
        "            f'out{outs}')\n"
        "os.write(1, (line + '\\n').encode())\n")
    path = tmp_path / "groups"
    path.write_text(PATH4)
    seen, warnings = _run_dg(script, str(path), 4, python=True)
    assert warnings == ""
    _check_against_file(seen, PATH4)
