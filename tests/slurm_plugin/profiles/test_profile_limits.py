"""Hostile profile files (issue 14): refused quickly, by name, without allocating.

Each hostile read runs in a child process with RLIMIT_AS = 1 GiB and RLIMIT_CPU = 30 s,
so a regression fails with MemoryError (or a timeout) instead of eating the machine.
"""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from mapper.io.graph_file import read_graph
from mapper.io.graph_format import GraphFormatError
from slurm_plugin.lifecycle.worker_protocol import WorkerRequest
from slurm_plugin.profiles.store import ProfileError, ProfileStore, resolve_profile
from tests.helpers.paths import REPO

MIB = 1 << 20

CHILD = r"""
import json, resource, sys, time
spec = json.loads(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
resource.setrlimit(resource.RLIMIT_CPU, (30, 30))
from mapper.io.graph_file import read_graph
from slurm_plugin.profiles.store import ProfileStore, resolve_profile
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
# CPU seconds: a stall of the shared machine is not the reader's; a read that blocks
# (a FIFO) is caught by run_child's 30 s timeout
start = time.process_time()
try:
    if spec["call"] == "read_graph":
        read_graph(spec["path"], max_bytes=spec["max_bytes"], expected_n=spec["expected_n"])
    elif spec["call"] == "store":
        ProfileStore([spec["store"]], spec["max_bytes"]).load(spec["name"], spec["ntasks"])
    else:
        resolve_profile(spec["spec"], spec["ntasks"], [], allow_user_files=True,
                        max_bytes=spec["max_bytes"])
    out = {"error": None, "message": ""}
except BaseException as exc:
    out = {"error": type(exc).__name__, "message": str(exc)}
out["seconds"] = time.process_time() - start
out["grew_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
print(json.dumps(out))
"""


def run_child(**spec) -> dict:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "OPENBLAS_NUM_THREADS": "1",
           "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    try:
        proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(spec)], env=env,
                              cwd=REPO, capture_output=True, text=True, timeout=30, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"reading {spec} did not finish within 30 s")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def assert_refused(out: dict, name: str, *fragments: str) -> None:
    assert out["error"] in ("GraphFormatError", "ProfileError"), out
    assert name in out["message"], out
    for fragment in fragments:
        assert fragment in out["message"], out
    assert out["grew_kib"] < 64 * 1024, out  # nothing of the declared size was allocated


def store_with(tmp_path: Path, matrix: str, ranks: int = 4) -> Path:
    store = tmp_path / "store"
    store.mkdir(exist_ok=True)
    (store / f"{Path(matrix).stem}.toml").write_text(f'ranks = {ranks}\nfile = "{matrix}"\n')
    return store


def npy_bytes(shape: tuple[int, ...], dtype: str = "<i8", payload: bytes = b"") -> bytes:
    """An .npy member whose header declares ``shape`` (the data need not be there)."""
    header = repr({"descr": dtype, "fortran_order": False, "shape": shape}).encode()
    header += b" " * (63 - (10 + len(header)) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + payload


def zip_bytes(members: dict[str, bytes], compression: int = zipfile.ZIP_STORED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


# --- the hostile inputs of the security review ----------------------------------------

def test_symlink_to_dev_zero(tmp_path):
    store = store_with(tmp_path, "zero.mtx")
    (store / "zero.mtx").symlink_to("/dev/zero")
    for max_bytes in (64 * MIB, None):
        out = run_child(call="read_graph", path=str(store / "zero.mtx"), max_bytes=max_bytes,
                        expected_n=None)
        assert_refused(out, "zero.mtx", "character device", "not a regular file")
    out = run_child(call="resolve", spec=f"file:{store / 'zero.mtx'}", ntasks=4,
                    max_bytes=64 * MIB)
    assert_refused(out, "zero.mtx", "not a regular file")
    # through the store the containment check already refuses it (/dev is outside)
    out = run_child(call="store", store=str(store), name="zero", ntasks=4, max_bytes=64 * MIB)
    assert_refused(out, "zero.mtx")


def test_limit_is_on_bytes_read_not_on_stat_size(tmp_path):
    status = Path("/proc/self/status")  # a regular file whose stat size is 0
    assert status.stat().st_size == 0 and len(status.read_bytes()) > 200
    (tmp_path / "status.csv").symlink_to(status)
    out = run_child(call="read_graph", path=str(tmp_path / "status.csv"), max_bytes=100,
                    expected_n=None)
    assert_refused(out, "status.csv", "over the limit of 100 bytes")


def test_mtx_header_with_a_billion_ranks(tmp_path):
    text = ("%%MatrixMarket matrix coordinate real general\n"
            "1000000000 1000000000 1\n1 2 1\n")
    assert len(text) == 76
    store = store_with(tmp_path, "huge.mtx")
    (store / "huge.mtx").write_text(text)
    out = run_child(call="store", store=str(store), name="huge", ntasks=4, max_bytes=64 * MIB)
    assert_refused(out, "huge.mtx:2:", "1000000000 ranks", "the job has 4 ranks")
    out = run_child(call="read_graph", path=str(store / "huge.mtx"), max_bytes=64 * MIB,
                    expected_n=None)
    assert_refused(out, "huge.mtx:2:", "1000000000 ranks", "may declare at most")


def test_metis_header_with_a_billion_ranks(tmp_path):
    store = store_with(tmp_path, "huge.graph")
    (store / "huge.graph").write_text("% comment\n1000000000 1\n2\n1\n")
    out = run_child(call="store", store=str(store), name="huge", ntasks=4, max_bytes=64 * MIB)
    assert_refused(out, "huge.graph:2:", "1000000000 ranks", "the job has 4 ranks")
    (store / "huge.graph").write_text("2 1000000000\n2\n1\n")
    out = run_child(call="read_graph", path=str(store / "huge.graph"), max_bytes=64 * MIB,
                    expected_n=2)
    assert_refused(out, "huge.graph:1:", "1000000000 edges", "can hold")


def test_csv_with_a_huge_rank_index(tmp_path):
    store = store_with(tmp_path, "idx.csv")
    (store / "idx.csv").write_text("0,999999999,1\n")
    assert (store / "idx.csv").stat().st_size == 14
    out = run_child(call="store", store=str(store), name="idx", ntasks=4, max_bytes=64 * MIB)
    assert_refused(out, "idx.csv:1:", "rank 999999999", "the job has 4 ranks")
    out = run_child(call="resolve", spec=f"file:{store / 'idx.csv'}", ntasks=4,
                    max_bytes=64 * MIB)
    assert_refused(out, "idx.csv:1:", "rank 999999999", "the job has 4 ranks")
    out = run_child(call="read_graph", path=str(store / "idx.csv"), max_bytes=64 * MIB,
                    expected_n=None)
    assert_refused(out, "idx.csv:1:", "rank 999999999", "may declare at most")


def test_metis_file_of_millions_of_lines_for_a_few_ranks(tmp_path):
    """Issue 28: a file under the byte limit whose lines the job cannot use (8 million
    vertex lines for 4 ranks) is refused at the first line too many, not after every
    line was split (which took gigabytes)."""
    store = store_with(tmp_path, "lines.graph")
    (store / "lines.graph").write_text("4 2\n2\n1\n4\n3\n" + "2\n" * 8_000_000)
    out = run_child(call="store", store=str(store), name="lines", ntasks=4,
                    max_bytes=64 * MIB)
    assert_refused(out, "lines.graph:6:", "header says 4 vertices", "more than 4")
    out = run_child(call="resolve", spec=f"file:{store / 'lines.graph'}", ntasks=4,
                    max_bytes=64 * MIB)
    assert_refused(out, "lines.graph:6:", "more than 4 vertex lines")


def test_npz_member_header_declaring_10_to_the_12_entries(tmp_path):
    store = store_with(tmp_path, "big.npz")
    member = npy_bytes((10 ** 12,), payload=bytes(16))
    (store / "big.npz").write_bytes(zip_bytes({"src.npy": member, "dst.npy": member}))
    assert (store / "big.npz").stat().st_size < 1000
    out = run_child(call="store", store=str(store), name="big", ntasks=4, max_bytes=64 * MIB)
    assert_refused(out, "big.npz", "1000000000000 entries")
    # refused by the header alone, with no limit given at all
    out = run_child(call="read_graph", path=str(store / "big.npz"), max_bytes=None,
                    expected_n=None)
    assert_refused(out, "big.npz", "1000000000000 entries")


def test_npz_sparse_shape_over_the_job(tmp_path):
    store = store_with(tmp_path, "wide.npz")
    buf = io.BytesIO()
    np.savez(buf, indptr=np.zeros(5, np.int32), indices=np.zeros(0, np.int32),
             data=np.zeros(0), shape=np.array([10 ** 9, 10 ** 9]), format=np.array("csc"))
    (store / "wide.npz").write_bytes(buf.getvalue())
    out = run_child(call="store", store=str(store), name="wide", ntasks=4, max_bytes=64 * MIB)
    assert_refused(out, "wide.npz", "1000000000 ranks", "the job has 4 ranks")


def test_compressible_npz_over_the_uncompressed_limit(tmp_path):
    store = store_with(tmp_path, "bomb.npz")
    src = np.tile(np.arange(4, dtype=np.int64), 1 << 18)  # 8 MiB per array uncompressed
    np.savez_compressed(store / "bomb.npz", src=src, dst=(src + 1) % 4, weight=np.ones(len(src)))
    assert (store / "bomb.npz").stat().st_size < 200_000
    out = run_child(call="store", store=str(store), name="bomb", ntasks=4, max_bytes=MIB)
    assert_refused(out, "bomb.npz", "uncompressed", f"over the limit of {MIB} bytes")


def test_npz_member_lying_about_its_uncompressed_size(tmp_path):
    store = store_with(tmp_path, "liar.npz")
    data = bytearray(zip_bytes({"src.npy": npy_bytes((1 << 20,), payload=bytes(8 << 20)),
                                "dst.npy": npy_bytes((1,), payload=bytes(8))},
                               zipfile.ZIP_DEFLATED))
    entry = data.find(b"PK\x01\x02")  # central directory record of src.npy
    struct.pack_into("<L", data, entry + 24, 1000)  # its uncompressed size
    (store / "liar.npz").write_bytes(bytes(data))
    for max_bytes in (64 * MIB, None):
        out = run_child(call="read_graph", path=str(store / "liar.npz"), max_bytes=max_bytes,
                        expected_n=4)
        assert_refused(out, "liar.npz", "src.npy")


def test_fifo_in_place_of_the_matrix(tmp_path):
    store = store_with(tmp_path, "pipe.mtx")
    os.mkfifo(store / "pipe.mtx")
    out = run_child(call="store", store=str(store), name="pipe", ntasks=4, max_bytes=64 * MIB)
    assert_refused(out, "pipe.mtx", "FIFO", "not a regular file")


def test_directory_in_place_of_the_matrix(tmp_path):
    store = store_with(tmp_path, "dir.mtx")
    (store / "dir.mtx").mkdir()
    out = run_child(call="store", store=str(store), name="dir", ntasks=4, max_bytes=64 * MIB)
    assert_refused(out, "dir.mtx", "directory", "not a regular file")


# --- ordinary files still load --------------------------------------------------------

def test_ordinary_profiles_still_load_with_expected_n(tmp_path):
    ring = "%%MatrixMarket matrix coordinate real general\r\n4 4 4\r\n1 2 1\r\n2 3 1\r\n" \
           "3 4 1\r\n4 1 1\r\n"
    (tmp_path / "r.mtx").write_bytes(ring.encode())
    assert read_graph(tmp_path / "r.mtx", max_bytes=MIB, expected_n=4).m == 4
    (tmp_path / "r.csv").write_text("src,dst,bytes\n0,1,5\n1,2,5\n2,3,5\n")
    assert read_graph(tmp_path / "r.csv", max_bytes=MIB, expected_n=4).n == 4
    (tmp_path / "r.graph").write_text("4 3\n2\n1 3\n2 4\n3\n")
    assert read_graph(tmp_path / "r.graph", max_bytes=MIB, expected_n=4).m == 3
    a = sp.csr_matrix(np.array([[0, 2.0, 0], [1.0, 0, 0], [0, 0, 0]]))
    sp.save_npz(tmp_path / "m.npz", a)
    assert read_graph(tmp_path / "m.npz", max_bytes=MIB, expected_n=3).to_csr()[0, 1] == 3
    np.savez(tmp_path / "e.npz", src=np.array([0, 1]), dst=np.array([1, 2]), n=np.array(4))
    assert read_graph(tmp_path / "e.npz", max_bytes=MIB, expected_n=4).n == 4
    with pytest.raises(GraphFormatError, match="e.npz: n declares 4 ranks, but the job has 3"):
        read_graph(tmp_path / "e.npz", max_bytes=MIB, expected_n=3)


def test_fewer_ranks_than_the_job_keeps_the_store_message(tmp_path):
    store = store_with(tmp_path, "small.csv")
    (store / "small.csv").write_text("0,1,5\n")
    with pytest.raises(ProfileError, match="matrix small.csv has 2 ranks, the job has 4 tasks"):
        ProfileStore([store]).load("small", 4)
    with pytest.raises(ProfileError, match="small.csv: 2 ranks but the job has 4 tasks"):
        resolve_profile(f"file:{store / 'small.csv'}", 4, [], allow_user_files=True)


# --- the worker's own limits ----------------------------------------------------------

LIMITS_CHILD = r"""
import json, resource, sys
from slurm_plugin.lifecycle.limits import apply_worker_limits
from slurm_plugin.lifecycle.worker_protocol import read_request
request = read_request(sys.stdin.buffer)   # as job_worker.run starts
applied = apply_worker_limits(request.memory_bytes, request.cpu_seconds)
out = {"applied": applied, "as": resource.getrlimit(resource.RLIMIT_AS),
       "cpu": resource.getrlimit(resource.RLIMIT_CPU)}
try:
    block = bytearray(1 << 30)
    out["allocated"] = len(block)
except MemoryError:
    out["allocated"] = "MemoryError"
print(json.dumps(out))
"""


def worker_request(**limits) -> dict:
    """A worker request (as JSON fields) with ``limits`` in place of its defaults."""
    request = WorkerRequest(job_id="1", profile="ring", mode="graph", algorithm="topdown",
                            time_limit=5.0)
    return {**json.loads(request.to_bytes()), **limits}


def run_limits_child(limits: dict) -> subprocess.CompletedProcess:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", LIMITS_CHILD], env=env, cwd=REPO,
                          input=json.dumps(worker_request(**limits)), capture_output=True,
                          text=True, timeout=30, check=False)


def test_worker_limits_really_limit():
    proc = run_limits_child({"memory_bytes": 512 * MIB, "cpu_seconds": 77})
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["as"] == [512 * MIB, 512 * MIB] and out["cpu"] == [77, 77]
    assert out["applied"] == {"memory": 512 * MIB, "cpu_seconds": 77}
    assert out["allocated"] == "MemoryError"


def test_worker_limit_defaults_and_bad_values():
    out = json.loads(run_limits_child({}).stdout)
    assert out["as"] == [4 << 30, 4 << 30]
    assert out["applied"]["cpu_seconds"] is None or out["cpu"][0] == out["applied"]["cpu_seconds"]
    out = json.loads(run_limits_child({"memory_bytes": 0}).stdout)   # no limit
    assert out["applied"]["memory"] is None and out["allocated"] == 1 << 30
    proc = run_limits_child({"memory_bytes": "4G"})
    assert proc.returncode != 0 and "'memory_bytes' must be a whole number" in proc.stderr
    assert "'4G'" in proc.stderr


def test_worker_main_applies_limits_first_and_reports_memory_error(monkeypatch):
    from slurm_plugin.lifecycle import job_worker

    calls = []
    monkeypatch.setattr(job_worker, "apply_worker_limits",
                        lambda *limits: calls.append(("limits", *limits)))

    def compute(request, env):
        calls.append("compute")
        raise MemoryError

    monkeypatch.setattr(job_worker, "compute", compute)
    stream = io.BytesIO()
    request = worker_request(memory_bytes=512 * MIB, cpu_seconds=77)
    job_worker.run(io.BytesIO(json.dumps(request).encode()), stream, {})
    assert calls == [("limits", 512 * MIB, 77), "compute"]
    # the stream's last record is the status (slurm_plugin.lifecycle.worker_protocol)
    status = json.loads(stream.getvalue().rsplit(b"\nstatus ", 1)[1].split(b"\n", 1)[1])
    assert status["applied"] is False and "MemoryError" in status["reason"]
