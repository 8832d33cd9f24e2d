"""A recorded matrix recognised as a generator (slurm_plugin.profiles.pattern_match),
the store's ``generator`` key serving other task counts with it, and the match on
recordings of tests/data/mpi/halo.c under Open MPI's mpirun."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from mapper import CommGraph, Hierarchy
from mapper.io.mtx_file import write_mtx
from slurm_plugin.commands.profile_cli import _common_generator
from slurm_plugin.machine.layout import Layout, Slot
from slurm_plugin.modes.graph_job import make_plan
from slurm_plugin.profiles.generators import generate
from slurm_plugin.profiles.pattern_match import (
    DEFAULT_TOLERANCE,
    candidate_distances,
    generator_line,
    match_generator,
)
from slurm_plugin.profiles.recording import read_recording
from slurm_plugin.profiles.store import (
    GeneratedProfile,
    ProfileError,
    ProfileStore,
    resolve_profile,
)
from tests.helpers.paths import REPO, TEST_DATA

#: (spec at the recorded size, ranks, the size-free spec expected)
SELF = [
    ("ring", 5, "ring"), ("ring", 8, "ring"), ("ring", 33, "ring"),
    ("alltoall", 6, "alltoall"), ("alltoall", 9, "alltoall"),
    ("stencil2d:3x5", 15, "stencil2d"), ("stencil2d:3x5,periodic", 15, "stencil2d:periodic"),
    ("stencil2d:8x8", 64, "stencil2d"), ("stencil2d:4x16,periodic", 64, "stencil2d:periodic"),
    ("stencil3d:2x3x5", 30, "stencil3d"), ("stencil3d:2x3x5,periodic", 30, "stencil3d:periodic"),
    ("stencil3d:3x3x3,periodic", 27, "stencil3d:periodic"),
    ("stencil3d:4x4x4", 64, "stencil3d"), ("stencil3d:8x8x8,periodic", 512, "stencil3d:periodic"),
    ("recursive-doubling", 13, "recursive-doubling"),
    ("recursive-doubling", 16, "recursive-doubling"),
    ("recursive-doubling", 24, "recursive-doubling"),
    ("npb-cg", 16, "npb-cg"), ("npb-cg", 32, "npb-cg"),
    ("npb-bt", 16, "npb-bt"), ("npb-bt", 25, "npb-bt"),
    ("npb-mg:4x4x4", 64, "npb-mg"), ("npb-mg:2x4x8", 64, "npb-mg"),
    ("npb-ft:3x5", 15, "npb-ft"), ("npb-ft:4x4", 16, "npb-ft"),
]


def edges_of(g: CommGraph):
    u, v, w = g.edges()
    return u, v, w


@pytest.mark.parametrize("spec,n,free", SELF)
def test_every_family_matches_itself(spec, n, free):
    found = match_generator(generate(spec, n))
    assert found is not None
    assert (found.spec_at_recorded_size, found.spec, found.ranks) == (spec, free, n)
    assert found.distance == pytest.approx(0, abs=1e-9)
    # the size-free spec is usable at another size
    assert generate(found.spec, 4 * n).n == 4 * n


def distances(g: CommGraph) -> dict[str, float]:
    return {sized: d for _, sized, d in candidate_distances(g)}


@pytest.mark.parametrize("spec,n,neighbour", [
    ("stencil3d:4x4x4,periodic", 64, "stencil3d:4x4x4"),
    ("stencil3d:4x4x4", 64, "stencil3d:4x4x4,periodic"),
    ("stencil3d:3x2x2,periodic", 12, "stencil3d:3x2x2"),
    ("stencil2d:8x8,periodic", 64, "stencil2d:8x8"),
    ("stencil2d:4x4,periodic", 16, "npb-bt"),       # BT is this grid plus a diagonal
    ("npb-bt", 16, "stencil2d:4x4,periodic"),
    ("stencil3d:4x4x4,periodic", 64, "npb-mg:4x4x4"),
    ("npb-mg:4x4x4", 64, "stencil3d:4x4x4,periodic"),
    ("npb-cg", 64, "recursive-doubling"),
    ("ring", 12, "stencil2d:3x4,periodic"),
])
def test_a_neighbouring_family_is_not_matched(spec, n, neighbour):
    g = generate(spec, n)
    assert match_generator(g).spec_at_recorded_size == spec
    # a grid the volume bound rules out is not even built
    assert distances(g).get(neighbour, 1.0) > DEFAULT_TOLERANCE


def test_stencil2d_is_not_stencil3d_and_a_grid_of_one_row_is_a_ring():
    g = generate("stencil2d:4x4", 16)
    assert match_generator(g).spec == "stencil2d"
    assert min(d for s, d in distances(g).items() if s.startswith("stencil3d")) \
        > DEFAULT_TOLERANCE
    # a 1xN periodic grid is the ring's graph: dimensions of 1 are no candidates, the
    # ring (the simpler family) is what it matches
    assert match_generator(generate("stencil2d:1x9,periodic", 9)).spec == "ring"
    # and a path (1xN, no wrap-around) is a ring missing an edge: nothing
    assert match_generator(generate("stencil2d:1x9", 9)) is None


def test_noisy_volumes_and_tiny_extra_edges_still_match():
    rng = np.random.default_rng(7)
    for spec, n in [("stencil3d:4x4x4,periodic", 64), ("npb-cg", 32), ("stencil2d:3x5", 15),
                    ("ring", 11)]:
        u, v, w = edges_of(generate(spec, n))
        w = w * rng.uniform(0.8, 1.2, len(w))
        extra_u = rng.integers(0, n, 4)
        extra_v = (extra_u + rng.integers(1, n - 1, 4)) % n
        g = CommGraph.from_edges(np.r_[u, extra_u], np.r_[v, extra_v],
                                 np.r_[w, np.full(4, 1e-3 * w.mean())], n=n)
        found = match_generator(g)
        assert found is not None and found.spec_at_recorded_size == spec
        assert 0 < found.distance <= DEFAULT_TOLERANCE


def test_per_axis_volumes_of_a_non_cubic_split_match_its_dims():
    dims = (2, 3, 5)
    u, v, _ = edges_of(generate("stencil3d:2x3x5,periodic", 30))
    axis = np.argmax(np.stack(np.unravel_index(u, dims)) != np.stack(np.unravel_index(v, dims)),
                     axis=0)
    g = CommGraph.from_edges(u, v, np.array([2.0, 3.0, 5.0])[axis] * 4096, n=30)
    found = match_generator(g)
    assert found.spec_at_recorded_size == "stencil3d:2x3x5,periodic"
    assert found.distance == pytest.approx(0, abs=1e-9)


def test_volume_spread_inside_an_axis_is_no_match():
    u, v, w = edges_of(generate("stencil3d:4x4x4,periodic", 64))
    w = np.where(u % 2 == 0, 20.0, 1.0)  # half the edges 20 times the others
    assert match_generator(CommGraph.from_edges(u, v, w, n=64)) is None


def test_unused_generator_edges_count_even_with_tiny_traffic_on_them():
    """A 2D periodic grid with 1e-4 of an edge's volume on BT's diagonal: BT's
    diagonal class would be fitted with a tiny scale and the volumes agree, but the
    diagonal is unused, so it is the grid."""
    gu, gv, _ = edges_of(generate("stencil2d:4x4,periodic", 16))
    u, v, _ = edges_of(generate("npb-bt", 16))
    on_grid = np.isin(u * 16 + v, gu * 16 + gv)
    assert not on_grid.all()
    g = CommGraph.from_edges(u, v, np.where(on_grid, 1.0, 1e-4), n=16)
    assert match_generator(g).spec_at_recorded_size == "stencil2d:4x4,periodic"
    assert distances(g)["npb-bt"] > DEFAULT_TOLERANCE


def test_a_random_graph_and_a_permuted_stencil_match_nothing():
    rng = np.random.default_rng(3)
    a = rng.random((64, 64)) * (rng.random((64, 64)) < 0.1)
    np.fill_diagonal(a, 0)
    assert match_generator(CommGraph.from_matrix(a)) is None
    u, v, w = edges_of(generate("stencil3d:4x4x4,periodic", 64))
    perm = rng.permutation(64)
    assert match_generator(CommGraph.from_edges(perm[u], perm[v], w, n=64)) is None
    assert match_generator(generate("ring", 3)) is None  # too small to tell


def test_generator_line():
    line, found = generator_line(generate("stencil3d:2x3x5,periodic", 30))
    assert line == 'generator = "stencil3d:periodic"\n' and found.ranks == 30
    assert "stencil3d:2x3x5,periodic" in found.describe()
    assert generator_line(generate("stencil2d:1x9", 9)) == ("", None)


# ---- the store --------------------------------------------------------------------------

def write_profile(store: Path, name: str, graph: CommGraph, extra: str = "") -> Path:
    store.mkdir(parents=True, exist_ok=True)
    write_mtx(graph, store / f"{name}.mtx")
    toml = store / f"{name}.toml"
    toml.write_text(f'ranks = {graph.n}\nfile = "{name}.mtx"\n{extra}')
    return toml


def small_layout() -> Layout:
    """2 hosts x 2 sockets x 2 cores: 8 slots."""
    slots = [Slot(host, sock, (k,), (sock * 4 + k,))
             for host in ("a", "b") for sock in (0, 1) for k in range(2)]
    h = Hierarchy.from_tree([[2, 2], [2, 2]], [1, 10, 100], ["socket", "node", "root"])
    return Layout(h, tuple(slots))


def test_a_profile_with_a_generator_serves_another_size_and_the_report_says_so(tmp_path):
    recorded = generate("stencil2d:4x4,periodic", 16)
    write_profile(tmp_path, "halo16", recorded, 'generator = "stencil2d:periodic"\n')
    store = ProfileStore([tmp_path])
    assert store.find("halo16").generator == "stencil2d:periodic"
    same = store.load("halo16", 16)
    assert not isinstance(same, GeneratedProfile)
    assert np.array_equal(same.to_csr().toarray(), recorded.to_csr().toarray())
    other = resolve_profile("halo16", 8, [tmp_path])
    assert isinstance(other, GeneratedProfile)
    assert np.array_equal(other.to_csr().toarray(),
                          generate("stencil2d:periodic", 8).to_csr().toarray())
    sentence = "profile halo16 recorded at 16 ranks, used as stencil2d:periodic at 8"
    assert other.note == sentence
    plan = make_plan(small_layout(), other, algorithm="topdown+n2", time_limit=5,
                     profile="halo16")
    assert sentence in plan.report_text
    assert sentence in json.loads(plan.report_json)["notes"]


def test_without_a_generator_or_where_it_does_not_fit_the_size_is_an_error(tmp_path):
    write_profile(tmp_path, "plain", generate("ring", 16))
    with pytest.raises(ProfileError, match="is for 16 ranks but the job has 8 tasks"):
        ProfileStore([tmp_path]).load("plain", 8)
    write_profile(tmp_path, "cg", generate("npb-cg", 16), 'generator = "npb-cg"\n')
    with pytest.raises(ProfileError, match=r"recorded at 16 ranks and its generator "
                                           r"'npb-cg' \(.*cg.toml\) does not fit the "
                                           r"job's 12 tasks: .*power-of-two"):
        ProfileStore([tmp_path]).load("cg", 12)


@pytest.mark.parametrize("value,why", [
    ('"nosuch"', "unknown generator"),
    ('"stencil3d:2x2x4"', "without dimensions"),
    ('"ring:bytes=-1"', "bytes must be positive"),
    ("3", "generator: must be str"),
])
def test_a_bad_generator_is_an_error_naming_the_file_and_key(tmp_path, value, why):
    toml = write_profile(tmp_path, "bad", generate("ring", 16), f"generator = {value}\n")
    with pytest.raises(ProfileError) as err:
        ProfileStore([tmp_path]).find("bad")
    assert str(toml) in str(err.value) and "generator" in str(err.value)
    assert why in str(err.value)


def test_samples_keep_a_generator_only_when_all_of_them_match_it(tmp_path):
    write_mtx(generate("stencil2d:4x4,periodic", 16), tmp_path / "a.mtx")
    write_mtx(generate("ring", 16), tmp_path / "b.mtx")
    same = generate("stencil2d:4x4,periodic", 16)
    assert _common_generator([tmp_path / "a.mtx"], same) == "stencil2d:periodic"
    assert _common_generator([tmp_path / "a.mtx", tmp_path / "b.mtx"], same) == ""
    assert _common_generator([tmp_path / "a.mtx"], generate("ring", 16)) == ""


# ---- recordings of tests/data/mpi/halo.c -------------------------------------------------

ROOT_OK = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


@pytest.fixture(scope="module")
def halo(tmp_path_factory) -> tuple[Path, Path]:
    if not (shutil.which("mpicc") and shutil.which("mpirun") and shutil.which("cc")):
        pytest.skip("no mpicc/mpirun here: the recordings need Open MPI")
    out = tmp_path_factory.mktemp("halo")
    subprocess.run(["make", "-s", "-C", str(REPO / "slurm_plugin/record"), f"OUT={out}"],
                   check=True)
    subprocess.run(["mpicc", "-O2", "-o", str(out / "halo"), str(TEST_DATA / "mpi/halo.c")],
                   check=True)
    return out / "librankmap_record.so", out / "halo"


def recorded(halo, tmp_path: Path, n: int, *args: str) -> CommGraph:
    library, program = halo
    rec = tmp_path / "rec"
    rec.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RANKMAP_")}
    proc = subprocess.run(["mpirun", "--oversubscribe", "-np", str(n), str(program), *args],
                          env={**env, **ROOT_OK, "LD_PRELOAD": str(library),
                               "RANKMAP_RECORD_DIR": str(rec)},
                          capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return read_recording(rec / "run.0").graph  # the launch's own directory


@pytest.mark.parametrize("n", [6, 8])
def test_recorded_alltoall_is_alltoall(halo, tmp_path, n):
    found = match_generator(recorded(halo, tmp_path, n, "--pattern", "alltoall"))
    assert found.spec == "alltoall" and found.distance <= 1e-9


@pytest.mark.parametrize("n", [6, 8])
def test_recorded_halo_ring_is_a_ring_only_when_its_ring_dominates(halo, tmp_path, n):
    """halo's default pattern is a ring (1000 + 56 bytes to r±1 per iteration) plus a
    50-byte send to r+2 and one round of collectives (bcast 800 bytes, allreduce,
    alltoall): at the default size 13-16 % of the volume is off the ring, so it is no
    generator; with 100 kB ring messages the rest is noise and it is a ring."""
    g = recorded(halo, tmp_path, n)
    assert match_generator(g) is None
    assert DEFAULT_TOLERANCE < distances(g)["ring"] < 0.2
    big = tmp_path / "big"
    big.mkdir()
    found = match_generator(recorded(halo, big, n, "--bytes", "100000"))
    assert found.spec == "ring" and found.distance < 0.01


@pytest.mark.parametrize("n,dims", [(12, "3x2x2"), (18, "3x3x2")])
def test_recorded_3d_halo_is_a_periodic_stencil3d(halo, tmp_path, n, dims):
    """--pattern stencil3d: MPI_Dims_create's grid, faces proportional to the grid's
    dimension along each axis (so the volumes differ per axis)."""
    found = match_generator(recorded(halo, tmp_path, n, "--pattern", "stencil3d"))
    assert found.spec_at_recorded_size == f"stencil3d:{dims},periodic"
    assert found.spec == "stencil3d:periodic" and found.distance <= 1e-9
