"""Do no harm (issue 50 item 3): a program run with rankmap's preloads
(librankmap_record recording, librankmap_bind binding, both) ends exactly as it does
without them: the same exit status and the same lines of its own, whatever it does.

The programs (tests/data/mpi/harm.c, ring.f90, hello_static.c, an mpi4py script) never
initialise MPI, initialise it twice, abort, are killed mid-run, fork and exec, are
Fortran or Python, are statically linked or set-user-ID.  They run under Debian's Open
MPI (``mpirun``) and MPICH's wheel (``mpiexec``, the test lane), 2 ranks.
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

from slurm_plugin.outputs.render import render_bindfile
from slurm_plugin.profiles.recording import IncompleteRecording, read_recording
from tests.helpers.paths import REPO, TEST_DATA
from tests.slurm_plugin.bind.test_rankmap_bind import layout_on
from tests.slurm_plugin.profiles.test_recording import LANES, build_c, lane_ready, launch

pytestmark = pytest.mark.skipif(not {0, 1} <= os.sched_getaffinity(0),
                                reason="the binder's plan needs cpus 0 and 1")
VARIANTS = ["recorder", "binder", "both"]


@pytest.fixture(scope="module")
def libs(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("preloads")
    for d in ("record", "bind"):
        subprocess.run(["make", "-s", "-C", str(REPO / "slurm_plugin" / d), f"OUT={out}"],
                       check=True)
    host = socket.gethostname()
    (out / "bindings").write_text(
        render_bindfile(layout_on(host, [(0, 0), (0, 1)]), np.array([1, 0])))
    (out / "rankfile").write_text(f"rank 0={host} slot=0:0\nrank 1={host} slot=0:1\n")
    return {"recorder": out / "librankmap_record.so", "binder": out / "librankmap_bind.so",
            "dir": out}


def preload_env(variant: str, libs: dict[str, Path], rec: Path) -> dict[str, str]:
    env: dict[str, str] = {}
    if variant in ("recorder", "both"):
        env["RANKMAP_RECORD_DIR"] = str(rec)
    if variant in ("binder", "both"):
        env["RANKMAP_BIND_FILE"] = str(libs["dir"] / "bindings")
        env["OMPI_MCA_rmaps_rank_file_path"] = str(libs["dir"] / "rankfile")
    names = {"recorder": ["recorder"], "binder": ["binder"], "both": ["binder", "recorder"],
             "none": []}[variant]
    if names:
        env["LD_PRELOAD"] = ":".join(str(libs[n]) for n in names)
    return env


def own_lines(text: str, prefix: str) -> list[str]:
    """The program's lines, sorted: the launcher forwards the ranks' output in chunks,
    so one rank's line may run into another's ("py: rank 0 ...py: rank 1 ...")."""
    return sorted(m.strip() for m in re.findall(
        rf"{re.escape(prefix)}.*?(?={re.escape(prefix)}|\n|$)", text))


def same_end(lane: str, argv: list[str], libs, tmp_path: Path, prefix: str,
             variant: str, killed: bool = False
             ) -> tuple[subprocess.CompletedProcess, Path]:
    """The program run without and with the preloads ``variant``: the same status and
    lines; a launch that kills its ranks (``killed``) may lose their last output in
    either run, so there the lines with the preloads are among those without."""
    plain = launch(lane, argv, {}, tmp_path)
    rec = tmp_path / f"rec-{variant}"
    rec.mkdir()
    with_us = launch(lane, argv, preload_env(variant, libs, rec), tmp_path)
    assert with_us.returncode == plain.returncode, (plain.stdout + plain.stderr,
                                                    with_us.stdout + with_us.stderr)
    ours, theirs = own_lines(with_us.stdout, prefix), own_lines(plain.stdout, prefix)
    if killed:
        assert set(ours) <= set(theirs) | {"harm: rank 1 ends now"}, (ours, theirs)
    else:
        assert ours == theirs
        assert theirs, plain.stdout + plain.stderr
    return with_us, rec


@pytest.fixture(scope="module")
def harm(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("harm")
    return {lane: build_c(lane, TEST_DATA / "mpi/harm.c", out / f"harm-{lane}")
            for lane in ("openmpi", "mpich") if lane_ready(lane)}


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("mode", ["never", "twice", "abort", "killed", "fork"])
@pytest.mark.parametrize("lane", ["openmpi", "mpich"])
def test_unusual_programs_end_as_without_rankmap(lane, mode, variant, libs, harm,
                                                 tmp_path):
    if lane not in harm:
        pytest.skip(f"no {lane} here")
    proc, rec = same_end(lane, [str(harm[lane]), mode], libs, tmp_path, "harm:", variant,
                         killed=mode in ("abort", "killed"))
    if variant == "binder":
        return
    runs = sorted(rec.iterdir())
    if mode == "fork":  # recorded: the ring, whole
        assert read_recording(runs[0]).p2p.toarray().tolist() == [[0, 4], [4, 0]]
    elif mode in ("abort", "killed") and runs:  # no rank reached MPI_Finalize
        with pytest.raises(IncompleteRecording):
            read_recording(runs[0])
    elif mode == "never":
        assert runs == []


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_fortran_program_is_recorded_and_ends_as_without_rankmap(variant, libs,
                                                                   tmp_path):
    """Open MPI's Fortran bindings call the C PMPI_ functions, which the recorder
    wraps: the ring is counted once (it is not a C MPI_ call of the program)."""
    if not lane_ready("openmpi") or shutil.which("gfortran") is None:
        pytest.skip("no gfortran for Debian's mpif90 here")
    program = build_c("openmpi", TEST_DATA / "mpi/ring.f90", tmp_path / "ring",
                      compiler="mpif90")
    _, rec = same_end("openmpi", [str(program)], libs, tmp_path, "ring.f90:", variant)
    if variant != "binder":
        got = read_recording(next(rec.iterdir()))
        assert got.p2p.toarray().tolist() == [[0, 40], [40, 0]]


MPI4PY_PROGRAM = """
from mpi4py import MPI
w = MPI.COMM_WORLD
r, n = w.Get_rank(), w.Get_size()
got = w.sendrecv(bytearray(50), dest=(r + 1) % n, source=(r - 1) % n)
total = w.allreduce(r)
print(f"py: rank {r} got {len(got)} total {total}")
"""


@pytest.mark.parametrize("variant", VARIANTS)
def test_an_mpi4py_program_ends_as_without_rankmap(variant, libs, tmp_path):
    python = LANES["mpich"][0] / "python"
    if not lane_ready("mpich") or subprocess.run(
            [str(python), "-c", "import mpi4py"], capture_output=True).returncode:
        pytest.skip("no mpi4py in MPICH's lane")
    (tmp_path / "prog.py").write_text(MPI4PY_PROGRAM)
    _, rec = same_end("mpich", [str(python), str(tmp_path / "prog.py")], libs, tmp_path,
                      "py:", variant)
    if variant != "binder":
        got = read_recording(next(rec.iterdir()))
        assert (got.p2p.toarray() > 0).tolist() == [[False, True], [True, False]]


@pytest.mark.parametrize("variant", VARIANTS)
def test_static_and_setuid_programs_are_left_alone(variant, libs, tmp_path):
    """A static program has no dynamic loader to preload into; a set-user-ID one,
    run by another user, gets its preloads dropped by the loader (secure mode): both
    exit as without rankmap (status 5, their line)."""
    static = tmp_path / "static"
    made = subprocess.run(["cc", "-static", "-o", str(static),
                           str(TEST_DATA / "mpi/hello_static.c")], capture_output=True)
    if made.returncode:
        pytest.skip("no static C library here")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RANKMAP_")}
    rec = tmp_path / "rec"
    rec.mkdir()
    ours = {**env, **preload_env(variant, libs, rec)}
    for argv in ([str(static)],):
        plain = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
        with_us = subprocess.run(argv, env=ours, capture_output=True, text=True, timeout=30)
        assert (plain.returncode, plain.stdout) == (with_us.returncode, with_us.stdout) == (
            5, "static: ok\n")
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return
    setuid = tmp_path / "setuid"
    subprocess.run(["cc", "-o", str(setuid), str(TEST_DATA / "mpi/hello_static.c")],
                   check=True)
    os.chmod(tmp_path, 0o755)
    os.chown(setuid, 0, 0)
    os.chmod(setuid, 0o4755)
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", str(setuid)]
    plain = subprocess.run(as_nobody, env=env, capture_output=True, text=True, timeout=30)
    with_us = subprocess.run(as_nobody, env=ours, capture_output=True, text=True,
                             timeout=30)
    assert (plain.returncode, plain.stdout) == (with_us.returncode, with_us.stdout) == (
        5, "static: ok\n"), with_us.stderr
    assert list(rec.iterdir()) == []
