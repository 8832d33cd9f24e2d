"""``rankmap plan`` computes what the prolog computes (issue 29 item 3).

Both go through :func:`slurm_plugin.lifecycle.job_worker.compute_job`: every job form (a
store profile, a generator, ``file:``, ``mesh:NAME``, ``summa-fpm[,size=N]``,
``summa-fpm:FILE``) is run once through the worker in-process against the pyslurm
stand-in (as tests/slurm_plugin/modes/test_summa_job.py's ``job`` fixture does) and once
through ``rankmap plan`` with the equivalent options, and the files they write are
compared.  A profile file is read under the prolog's bounds: hostile files end in one
named error line, quickly and with little memory (a child under RLIMIT_AS = 2 GiB).  A
path is said as a path: a file in the current directory named like a store entry does
not shadow it.
"""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
import types
import zlib
from pathlib import Path

import numpy as np
import pytest

from mapper import CommGraph
from mapper.io.mesh_file import write_mesh_metis
from mapper.io.mtx_file import write_mtx
from slurm_plugin.commands.cli import main
from slurm_plugin.commands.plan_cli import job_profile, profile_path
from slurm_plugin.profiles.generators import generate
from tests.helpers.fake_pyslurm import fake_pyslurm
from tests.helpers.paths import REPO
from tests.helpers.worker_harness import compute_into, job_request
from tests.slurm_plugin.modes.test_mesh_job import grid_mesh

TWO_SWITCHES = ("SwitchName=s1 Nodes=n[1-2]\nSwitchName=s2 Nodes=n[3-4]\n"
                "SwitchName=top Switches=s[1-2]\n")
TWO_SWITCHES_YAML = """\
- topology: fabric
  cluster_default: true
  tree:
    switches:
      - switch: top
        children: s[1-2]
      - switch: s1
        nodes: n[1-2]
      - switch: s2
        nodes: n[3-4]
- topology: other
  flat: true
"""
#: the pyslurm stand-in's job: 4 nodes, 4 tasks each, 2 sockets x 2 cores
PLAN_MACHINE = ["--nodes", "n[1-4]", "--tasks-per-node", "4",
                "--node-info", "Sockets=2 CoresPerSocket=2"]


def scrambled_stencil(n: int = 16, seed: int = 3) -> CommGraph:
    """A 4x2x2 stencil with its ranks shuffled: Slurm's block placement is poor for it,
    so rankmap's placement is applied and the srun reorder files are written too."""
    g = generate("stencil3d:4x2x2", n)
    perm = np.random.default_rng(seed).permutation(n)
    csr = g.to_csr().tocoo()
    return CommGraph.from_edges(perm[csr.row], perm[csr.col], csr.data, n=n)


@pytest.fixture
def job(tmp_path, monkeypatch):
    """The worker's 16-task job (pyslurm stand-in, two switches), a store with a
    communication profile, a mesh and a speeds file, user files beside it, and the
    config both read."""
    monkeypatch.setitem(sys.modules, "pyslurm", fake_pyslurm())
    (tmp_path / "topology.conf").write_text(TWO_SWITCHES)
    store = tmp_path / "store"
    store.mkdir()
    write_mtx(scrambled_stencil(), store / "scrambled.mtx")
    (store / "scrambled.toml").write_text('ranks = 16\nunits = "messages"\n'
                                          'file = "scrambled.mtx"\n')
    write_mesh_metis(grid_mesh(12, 12, weights=True), store / "plate.graph")
    (store / "plate.toml").write_text('kind = "mesh"\nfile = "plate.graph"\n')
    (store / "two-kinds.speeds").write_text("".join(f"{1 + (r % 4 == 0)}\n" for r in range(16)))
    user = tmp_path / "user"
    user.mkdir()
    write_mtx(scrambled_stencil(seed=5), user / "mine.mtx")
    (user / "speeds.txt").write_text("# two kinds of node\n" + "".join(
        f"{1 + 2 * (r % 3 == 0)}\n" for r in range(16)))
    out = tmp_path / "out"
    (out / "job.42").mkdir(parents=True)
    config = tmp_path / "rankmap.toml"
    config.write_text(f'[general]\noutput_dir = "{out}"\nlog_file = ""\n'
                      f'[slurm]\nbackend = "pyslurm"\ntopology = "{tmp_path}/topology.conf"\n'
                      f'[profiles]\nstores = ["{store}"]\nallow_user_files = true\n')
    env = {"RANKMAP_CONFIG": str(config), "RANKMAP_JOB_DIR": str(out / "job.42"),
           "SLURM_JOB_ID": "42", "PATH": "/nonexistent"}
    monkeypatch.delenv("RANKMAP_CONFIG", raising=False)
    return types.SimpleNamespace(tmp=tmp_path, dir=out / "job.42", env=env, config=config,
                                 store=store, user=user)


def plan_args(job, *extra: str) -> list[str]:
    return ["plan", "--config", str(job.config), *PLAN_MACHINE,
            "--topology-conf", str(job.tmp / "topology.conf"), "--time-limit", "5", *extra]


#: report.json keys that are wall times (or hold them), and the job's id (plan has none)
VOLATILE = re.compile(r"^(seconds|\w+_seconds|phases|job_id)$")


def stable(value):
    """A report.json without its timing fields and the job id, for comparison."""
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if not VOLATILE.search(k)}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


def stable_text(text: str) -> str:
    """report.txt without its title (which names the job) and time lines."""
    lines = [ln for ln in text.splitlines()[1:]
             if not re.search(r"\d s\b|\d s\)|seconds", ln)]
    return "\n".join(lines)


def without_job_id(text: str) -> str:
    """A launcher or mode file of job 42 as plan writes it (plan's job is '-')."""
    return re.sub(r"\bjob 42\b", "job -", text)


def listing(d: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(d.iterdir())}


def form_id(form: str) -> str:
    return form.split("{")[0] or form


FORMS = [
    # (the job's --comm-profile, the job's algorithm, the files beyond the report)
    ("scrambled", "topdown+n10", {"rankfile", "reorder.block"}),
    ("npb-cg", "topdown+n10", {"report.txt"}),
    ("file:{user}/mine.mtx", "topdown+n10", {"rankfile", "reorder.block"}),
    ("mesh:plate", "topdown+n10", {"partition", "rankfile"}),
    ("mesh:plate,method=rb", "topdown+n10", {"partition", "rankfile"}),
    ("summa-fpm", "summa", {"arrangement", "rankfile"}),
    ("summa-fpm,size=256", "summa", {"arrangement", "rankfile"}),
    ("summa-fpm:{user}/speeds.txt", "summa", {"arrangement", "rankfile"}),
    ("summa-fpm:two-kinds,size=512", "summa", {"arrangement", "rankfile"}),
]


@pytest.mark.parametrize("form, algorithm, expected", FORMS,
                         ids=[f[0].replace("{user}/", "") for f in FORMS])
def test_plan_writes_what_the_worker_writes(job, form, algorithm, expected, capsys):
    profile = form.format(user=job.user)
    status = compute_into(job.env, job_request(profile, algorithm))
    assert status["reason"] is None, status
    worker = listing(job.dir)
    assert expected <= set(worker), sorted(worker)

    out = job.tmp / "plan"
    # summa is chosen for a summa-fpm profile as --rankmap=auto chooses it
    chosen = [] if algorithm == "summa" else ["--algorithm", algorithm]
    assert main(plan_args(job, "--profile", profile, *chosen, "--out", str(out))) == 0, \
        capsys.readouterr().err
    planned = listing(out)

    assert sorted(planned) == sorted(worker)
    for name in sorted(worker):
        if name == "report.json":
            assert stable(json.loads(planned[name])) == stable(json.loads(worker[name]))
        elif name == "report.txt":
            assert stable_text(planned[name]) == stable_text(worker[name])
        else:  # the launcher files' comment names the job, which plan does not have
            assert planned[name] == without_job_id(worker[name]), name
    record = json.loads(planned["report.json"])
    assert record["profile"] == profile


def test_a_path_names_the_same_file_as_file_colon(job, capsys, monkeypatch):
    """``./mine.mtx``, ``mine.mtx`` and ``file:mine.mtx`` are the user's file, read as
    the job reads ``file:/ABSOLUTE``: the same files."""
    monkeypatch.chdir(job.user)
    outs = []
    for i, spelling in enumerate(("./mine.mtx", "mine.mtx", "file:mine.mtx",
                                  f"file:{job.user}/mine.mtx", "../user/mine.mtx")):
        out = job.tmp / f"p{i}"
        assert main(plan_args(job, "--profile", spelling, "--out", str(out))) == 0
        outs.append(listing(out))
        record = json.loads(outs[-1]["report.json"])
        assert record["profile"] == f"file:{job.user}/mine.mtx"
    assert all(o["rankfile"] == outs[0]["rankfile"] for o in outs)


@pytest.mark.parametrize("spec, path", [
    ("file:x", "x"), ("./rowred", "./rowred"), ("../a/b", "../a/b"), ("/p/q", "/p/q"),
    ("x.mtx", "x.mtx"), ("X.NPZ", "X.NPZ"), ("d/x.graph", "d/x.graph"), ("x.metis", "x.metis"),
    ("x.csv", "x.csv"), ("rowred", None), ("lammps-3d", None), ("stencil3d:4x4x4", None),
    ("stencil3d:8x4x4,periodic,bytes=1.5e6", None), ("mesh:plate.graph", None),
    ("summa-fpm:/x/speeds.csv", None), ("summa-fpm", None), ("v1.2", None),
])
def test_what_is_a_path(spec, path):
    assert profile_path(spec) == path


def test_a_file_in_the_current_directory_does_not_shadow_a_store_name(job, capsys,
                                                                       monkeypatch):
    """In an application's build directory ``./scrambled`` is the program; ``--profile
    scrambled`` is still the store's entry (it was read as the file: 'unknown graph
    format')."""
    build = job.tmp / "build"
    build.mkdir()
    (build / "scrambled").write_bytes(b"\x7fELF\x02\x01\x01" + bytes(64))
    (build / "npb-cg").write_bytes(b"\x7fELF\x02\x01\x01" + bytes(64))
    monkeypatch.chdir(build)
    for name in ("scrambled", "npb-cg"):
        out = job.tmp / f"plan-{name}"
        assert main(plan_args(job, "--profile", name, "--out", str(out))) == 0, \
            capsys.readouterr().err
        assert json.loads((out / "report.json").read_text())["profile"] == name
    # the program said as a path is read as one, and refused by name
    assert main(plan_args(job, "--profile", "./scrambled", "--out", str(job.tmp / "x"))) == 2
    err = capsys.readouterr().err
    assert err.startswith("rankmap: error: ") and "unknown graph format" in err, err
    assert f"{build}/scrambled" in err


def test_topology_yaml_gives_the_same_files_as_topology_conf(job, capsys):
    (job.tmp / "topology.yaml").write_text(TWO_SWITCHES_YAML)
    outs = {}
    for name in ("topology.conf", "topology.yaml"):
        out = job.tmp / name.replace(".", "-")
        args = plan_args(job, "--profile", "scrambled", "--out", str(out))
        args[args.index("--topology-conf") + 1] = str(job.tmp / name)
        assert main(args) == 0, capsys.readouterr().err
        outs[name] = listing(out)
    conf, yaml = outs["topology.conf"], outs["topology.yaml"]
    assert sorted(conf) == sorted(yaml) and "rankfile" in conf
    assert stable(json.loads(conf["report.json"])) == stable(json.loads(yaml["report.json"]))
    assert conf["rankfile"] == yaml["rankfile"]
    assert "leaf switch" in yaml["report.txt"]


def test_topology_yaml_errors_name_file_and_line(job, capsys):
    bad = job.tmp / "x.yaml"
    bad.write_text("- topology: a\n  tree:\n    switches:\n      - switch: s\n        nodez: n1\n")
    args = plan_args(job, "--profile", "scrambled", "--out", str(job.tmp / "o"))
    args[args.index("--topology-conf") + 1] = str(bad)
    assert main(args) == 2
    assert f"{bad}:4: topology a: switch s: unknown field(s) nodez" in capsys.readouterr().err
    args[args.index("--topology-conf") + 1] = str(job.tmp / "missing.conf")
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err == (f"rankmap: error: --topology-conf {job.tmp / 'missing.conf'}: "
                   f"No such file or directory\n")


def test_refused_pairs_and_input_errors_are_one_line(job, capsys):
    for profile, extra, why in (
            ("scrambled", ["--algorithm", "summa"], "needs --comm-profile=summa-fpm"),
            ("summa-fpm", ["--algorithm", "topdown+n10"], "is a SUMMA partition"),
            ("mesh:plate", ["--algorithm", "summa"], "is a mesh to partition"),
            ("mesh:nope", [], "profile 'nope' not found"),
            ("mesh:scrambled", [], "not a mesh"),
            ("plate", [], "is a mesh"),
            ("summa-fpm:nope", [], "no nope.speeds in the profile stores")):
        assert main(plan_args(job, "--profile", profile, *extra,
                              "--out", str(job.tmp / "o"))) == 2, profile
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("rankmap: error: "), err
        assert why in err, (profile, err)


# -- hostile files: bounded like the prolog's reads ------------------------------------------

CHILD = r"""
import json, resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
resource.setrlimit(resource.RLIMIT_CPU, (60, 60))
from slurm_plugin.commands.cli import main
start = time.process_time()
try:
    rc = main(sys.argv[1:])
finally:
    # VmHWM: this program's own peak; ru_maxrss would count the forking parent's (pytest's)
    # resident size, which a long run grows past the bound below
    hwm = next(int(line.split()[1]) for line in open("/proc/self/status")
               if line.startswith("VmHWM:"))
    print(json.dumps({"cpu": time.process_time() - start, "maxrss_kib": hwm}))
sys.exit(rc)
"""


def npy_header(shape: tuple[int, ...], dtype: str = "<i8") -> bytes:
    header = repr({"descr": dtype, "fortran_order": False, "shape": shape}).encode()
    header += b" " * (63 - (10 + len(header)) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header


def npz_bomb(path: Path, entries: int = 1 << 27) -> None:
    """A 2 MB .npz whose arrays src and dst are 1 GiB of zeros each when inflated:
    one deflated block of zeros after a full flush, repeated (a valid zip, CRCs
    included), so it is written in about a second."""
    chunk = bytes(1 << 22)
    reps = entries * 8 // len(chunk)
    body, directory = bytearray(), bytearray()
    for name in ("src", "dst"):
        head = npy_header((entries,))
        c = zlib.compressobj(9, zlib.DEFLATED, -15)
        data = c.compress(head) + c.flush(zlib.Z_FULL_FLUSH)
        data += (c.compress(chunk) + c.flush(zlib.Z_FULL_FLUSH)) * reps + c.flush()
        crc = zlib.crc32(head)
        for _ in range(reps):
            crc = zlib.crc32(chunk, crc)
        fname = f"{name}.npy".encode()
        fields = struct.pack("<HHHHHLLLHH", 20, 0, 8, 0, 0x21, crc, len(data),
                             len(head) + reps * len(chunk), len(fname), 0)
        offset = len(body)
        body += b"PK\x03\x04" + fields + fname + data
        directory += (b"PK\x01\x02" + struct.pack("<H", 20) + fields
                      + struct.pack("<HHHLL", 0, 0, 0, 0, offset) + fname)
    eocd = b"PK\x05\x06" + struct.pack("<HHHHLLH", 0, 0, 2, 2, len(directory), len(body), 0)
    path.write_bytes(bytes(body + directory + eocd))


def hostile(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    if name == "bign.mtx":
        path.write_text("%%MatrixMarket matrix coordinate real general\n"
                        "1000000000 1000000000 1\n1 2 1\n")
        assert path.stat().st_size == 76
    elif name == "big.csv":
        path.write_text("0,999999999,1\n")
    else:
        npz_bomb(path)
        assert path.stat().st_size < 4 << 20
    return path


@pytest.mark.parametrize("name, spelling, message", [
    ("bign.mtx", "bign.mtx", "bign.mtx:2: size line declares 1000000000 ranks, but the job "
                             "has 32 ranks"),
    ("big.csv", "big.csv", "big.csv:1: rank 999999999 implies 1000000000 ranks, but the job "
                           "has 32 ranks"),
    ("big.csv", "file:big.csv", "big.csv:1: rank 999999999 implies 1000000000 ranks, but "
                                "the job has 32 ranks"),
    ("bomb.npz", "./bomb.npz", "bomb.npz: the arrays are 2147483904 bytes uncompressed, over "
                               "the limit of 67108864 bytes"),
])
def test_hostile_files_end_in_one_named_line_quickly_and_small(tmp_path, name, spelling,
                                                                message):
    hostile(tmp_path, name)
    config = tmp_path / "rankmap.toml"
    config.write_text(f'[profiles]\nstores = ["{tmp_path}/none"]\n')  # the default bounds
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "OPENBLAS_NUM_THREADS": "1",
           "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    try:
        proc = subprocess.run([sys.executable, "-c", CHILD, "plan", "--config", str(config),
                               "--profile", spelling, "--out", str(tmp_path / "out")],
                              env=env, cwd=tmp_path, capture_output=True, text=True,
                              timeout=120, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"rankmap plan --profile {spelling} did not end within 120 s")
    assert "Traceback" not in proc.stderr and "MemoryError" not in proc.stderr, \
        proc.stderr[-3000:]
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert proc.stderr == f"rankmap: error: {tmp_path}/{message}\n"
    usage = json.loads(proc.stdout.strip().splitlines()[-1])
    assert usage["maxrss_kib"] < 400 << 10, usage   # the process, imports included
    assert not (tmp_path / "out").exists()


def test_job_profile_is_the_workers_form(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert job_profile("x.mtx") == f"file:{tmp_path}/x.mtx"
    assert job_profile("file:../t/x.mtx") == f"file:{tmp_path.parent}/t/x.mtx"
    assert job_profile(" stencil3d ") == "stencil3d"
    assert job_profile("mesh:plate") == "mesh:plate"

