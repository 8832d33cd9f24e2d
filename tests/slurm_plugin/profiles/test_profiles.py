import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from mapper import CommGraph, GraphError
from mapper.io.graph_file import read_graph
from mapper.io.graph_format import GraphFormatError
from mapper.io.metis_file import write_metis
from mapper.io.mtx_file import write_mtx
from slurm_plugin.profiles.generators import GeneratorError, generate, near_factors
from slurm_plugin.profiles.ompi_monitoring import MonitoringError, import_monitoring
from slurm_plugin.profiles.store import ProfileError, ProfileStore, resolve_profile
from tests.helpers.paths import TEST_DATA

DATA = TEST_DATA


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# -- graph files ---------------------------------------------------------------------

def test_metis_with_and_without_weights(tmp_path):
    g = read_graph(write(tmp_path, "a.graph", "% comment\n3 2\n2\n1 3\n2\n"))
    assert g.n == 3 and g.m == 2 and g.total_volume == 2
    w = read_graph(write(tmp_path, "b.graph", "3 2 1\n2 5\n1 5 3 7\n2 7\n"))
    assert w.to_csr()[1, 2] == 7
    vw = read_graph(write(tmp_path, "c.graph", "2 1 11\n4 2 9\n4 1 9\n"))
    assert vw.to_csr()[0, 1] == 9


@pytest.mark.parametrize("text,msg", [
    ("3 2\n2\n1 3\n", "a.graph:4: header says 3 vertices but the file has 2"),
    ("3 3\n2\n1 3\n2\n", "a.graph:1: header says 3 edges but the body has 2"),
    ("3 2\n2\n3\n2\n", "a.graph:2: adjacency is not symmetric: vertex 1 lists 2"),
    ("2 1\n1\n1\n", "a.graph:2: self loop"),
    ("2 1 1\n2 -4\n1 -4\n", "a.graph:2: edge weights must be finite"),
    ("2 1 1\n2 nan\n1 nan\n", "a.graph:2: edge weights must be finite"),
    ("2 1\n3\n1\n", "a.graph:2: neighbour ids must be 1..2"),
    ("x y\n", "a.graph:1: header must be integers"),
])
def test_malformed_metis_files(tmp_path, text, msg):
    with pytest.raises(GraphFormatError, match=msg):
        read_graph(write(tmp_path, "a.graph", text))


def test_matrix_market_general_is_symmetrized_and_symmetric_is_kept(tmp_path):
    gen = read_graph(write(tmp_path, "g.mtx", "%%MatrixMarket matrix coordinate real general\n"
                                             "3 3 2\n1 2 5\n2 1 3\n"))
    assert gen.to_csr()[0, 1] == 8
    sym = read_graph(write(tmp_path, "s.mtx", "%%MatrixMarket matrix coordinate real "
                                             "symmetric\n3 3 1\n2 1 5\n"))
    assert sym.to_csr()[0, 1] == 5 and sym.to_csr()[1, 0] == 5
    with pytest.raises(GraphFormatError, match="s.mtx:3: self loop"):
        read_graph(write(tmp_path, "s.mtx", "%%MatrixMarket matrix coordinate real general\n"
                                           "2 2 1\n2 2 5\n"))
    with pytest.raises(GraphFormatError, match="says 2 entries but the file has 1"):
        read_graph(write(tmp_path, "s.mtx", "%%MatrixMarket matrix coordinate real general\n"
                                           "2 2 2\n1 2 5\n"))


def test_csv_and_npz_and_round_trips(tmp_path):
    g = read_graph(write(tmp_path, "t.csv", "src,dst,bytes\n0,1,100\n1,0,50\n2,1,7\n"))
    assert g.to_csr()[0, 1] == 150 and g.n == 3
    with pytest.raises(GraphFormatError, match="t.csv:3: expected integers"):
        read_graph(write(tmp_path, "t.csv", "0,1,5\n1,2,3\nx,1,2\n"))
    sp.save_npz(tmp_path / "m.npz", sp.csr_matrix(np.array([[0, 2.0], [1.0, 0]])))
    assert read_graph(tmp_path / "m.npz").to_csr()[0, 1] == 3
    for writer, ext in ((write_metis, "graph"), (write_mtx, "mtx")):
        writer(g, tmp_path / f"rt.{ext}")
        back = read_graph(tmp_path / f"rt.{ext}")
        assert abs(back.to_csr() - g.to_csr()).max() == 0
    with pytest.raises(GraphError, match="over the limit"):
        read_graph(tmp_path / "rt.mtx", max_bytes=10)


# -- generators ----------------------------------------------------------------------

def symmetric(g: CommGraph) -> bool:
    a = g.to_csr()
    return abs(a - a.T).max() == 0 if a.nnz else True


@pytest.mark.parametrize("spec,n,degrees,m", [
    ("stencil3d:4x4x4", 64, {3, 4, 5, 6}, 3 * 3 * 16),
    ("stencil3d", 27, {3, 4, 5, 6}, 3 * 2 * 9),
    ("stencil2d:4x3", 12, {2, 3, 4}, 3 * 3 + 4 * 2),
    ("stencil3d:4x4x4,periodic", 64, {6}, 192),
    ("ring", 10, {2}, 10),
    ("alltoall", 6, {5}, 15),
    ("recursive-doubling", 16, {4}, 32),
    ("summa", 16, {6}, 48),
    ("npb-ft", 16, {6}, 48),
    ("npb-bt", 16, {6}, 48),
    ("npb-sp", 9, {6}, 27),
    ("npb-lu", 16, {2, 3, 4}, 24),
])
def test_generators_degree_and_symmetry(spec, n, degrees, m):
    g = generate(spec, n)
    assert g.n == n and g.m == m and symmetric(g)
    assert set(g.degrees().tolist()) == degrees


def test_recursive_doubling_folds_in_extra_ranks():
    g = generate("recursive-doubling", 6)  # 4 doubling ranks + 2 folded in
    deg = g.degrees()
    assert list(deg[4:]) == [1, 1] and set(deg[:2].tolist()) == {3}


def test_npb_patterns_and_volumes():
    cg = generate("npb-cg", 32)
    assert symmetric(cg) and cg.m > 0
    mg = generate("npb-mg", 64)
    assert sorted(set(mg.weights.tolist())) == [0.25, 1.0]
    big = generate("stencil2d:2x2,bytes=1e6", 4)
    assert set(big.weights.tolist()) == {1e6}
    assert near_factors(24, 3) == (3, 2, 4) or sorted(near_factors(24, 3)) == [2, 3, 4]


@pytest.mark.parametrize("spec,n,msg", [
    ("npb-bt", 12, "square task count"),
    ("npb-cg", 12, "power-of-two"),
    ("stencil3d:4x4x4", 60, "make 64 ranks but the job has 60"),
    # a product that wraps around in int64 to the task count is still refused
    ("stencil2d:4x4611686018427387905", 4, "make 18446744073709551620 ranks but the job "
                                           "has 4"),
    ("stencil3d:4x4", 16, "expected 3 dimensions"),
    ("stencil9d", 8, "unknown generator"),
    ("ring:abc", 8, "neither dimensions"),
])
def test_generator_errors(spec, n, msg):
    with pytest.raises(GeneratorError, match=msg):
        generate(spec, n)


# -- the store -----------------------------------------------------------------------

@pytest.fixture
def store(tmp_path):
    d = tmp_path / "store"
    d.mkdir()
    write_mtx(generate("ring", 8), d / "ring8.mtx")
    (d / "ring8.toml").write_text('ranks = 8\nfile = "ring8.mtx"\ndescription = "a ring"\n')
    return d


def test_store_load_list_and_rank_count(store):
    s = ProfileStore([store])
    assert [p.name for p in s.list()] == ["ring8"]
    assert s.load("ring8", 8).m == 8
    with pytest.raises(ProfileError, match="is for 8 ranks but the job has 16"):
        s.load("ring8", 16)


@pytest.mark.parametrize("name", ["../ring8", "/etc/passwd", ".hidden", "a/b", "x\x00y"])
def test_store_rejects_names_that_leave_it(store, name):
    with pytest.raises(ProfileError, match="not allowed"):
        ProfileStore([store]).find(name)


def test_store_refuses_symlinks_out_of_the_store(store, tmp_path):
    outside = tmp_path / "secret.mtx"
    shutil.copy(store / "ring8.mtx", outside)
    (store / "evil.mtx").symlink_to(outside)
    (store / "evil.toml").write_text('ranks = 8\nfile = "evil.mtx"\n')
    with pytest.raises(ProfileError, match="outside the store"):
        ProfileStore([store]).load("evil", 8)
    (store / "link.toml").symlink_to(tmp_path / "x.toml")
    (tmp_path / "x.toml").write_text('ranks = 8\nfile = "ring8.mtx"\n')
    with pytest.raises(ProfileError, match="outside the store"):
        ProfileStore([store]).find("link")


def test_store_toml_errors(store):
    (store / "bad.toml").write_text('ranks = "eight"\nfile = "ring8.mtx"\n')
    with pytest.raises(ProfileError, match="bad.toml: ranks: must be int"):
        ProfileStore([store]).find("bad")
    (store / "bad.toml").write_text('ranks = 8\nfile = "ring8.mtx"\ncolor = 1\n')
    with pytest.raises(ProfileError, match="unknown key 'color'"):
        ProfileStore([store]).find("bad")


def test_store_toml_is_under_the_byte_limit_of_profiles(store):
    """Issue 28: an entry's .toml was read whole whatever its size; it is now read as
    its matrix is, at most [profiles] max_file_bytes."""
    (store / "big.toml").write_text('ranks = 8\nfile = "ring8.mtx"\nsamples = ["ring8.mtx"]\n'
                                    + "# padding\n" * 20_000)
    assert ProfileStore([store]).find("big").samples == (store / "ring8.mtx",)
    with pytest.raises(ProfileError, match=r"big\.toml: larger than the limit of 100000 "
                                           r"bytes \(\[profiles\] max_file_bytes\)"):
        ProfileStore([store], 100_000).find("big")
    # the line a samples error names is still found (in the text read once)
    (store / "big.toml").write_text('ranks = 8\r\nfile = "ring8.mtx"\r\n\r\nsamples = []\r\n')
    with pytest.raises(ProfileError, match=r"big\.toml:4: samples: empty list"):
        ProfileStore([store], 100_000).find("big")


def test_resolution_order(store, tmp_path):
    assert resolve_profile("ring8", 8, [store]).m == 8
    assert resolve_profile("stencil2d", 16, [store]).m == 24
    with pytest.raises(ProfileError, match="not found in the profile stores"):
        resolve_profile("nosuch", 8, [store])
    with pytest.raises(ProfileError, match="not enabled"):
        resolve_profile(f"file:{store}/ring8.mtx", 8, [store])
    assert resolve_profile(f"file:{store}/ring8.mtx", 8, [store], allow_user_files=True).m == 8


# -- Open MPI monitoring --------------------------------------------------------------

def test_import_recorded_monitoring_output():
    g = import_monitoring(DATA / "ompi_monitoring" / "prof")
    a = g.to_csr().toarray()
    ring = np.roll(np.eye(4), 1, axis=1) * 1000
    assert np.array_equal(a, ring + ring.T)  # each rank sent 1000 bytes to the next


def test_import_errors(tmp_path):
    with pytest.raises(MonitoringError, match="no monitoring files"):
        import_monitoring(tmp_path / "none")
    (tmp_path / "p.0.prof").write_text("E\t0\t1\tmany bytes\n")
    (tmp_path / "p.1.prof").write_text("")
    with pytest.raises(MonitoringError, match="p.0.prof:1: not a monitoring line"):
        import_monitoring(tmp_path / "p")


@pytest.mark.skipif(not (shutil.which("mpicc") and shutil.which("mpirun")),
                    reason="Open MPI not installed")
def test_import_live_monitoring_output(tmp_path):
    exe = tmp_path / "rankinfo"
    subprocess.run(["mpicc", "-o", str(exe), str(DATA / "mpi" / "rankinfo.c")], check=True)
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    subprocess.run(["mpirun", "--oversubscribe", "-np", "3", "--mca",
                    "pml_monitoring_enable", "2", "--mca", "pml_monitoring_enable_output", "3",
                    "--mca", "pml_monitoring_filename", str(tmp_path / "live"), str(exe),
                    "--ring", "4096"], check=True, env=env, capture_output=True, timeout=120)
    g = import_monitoring(tmp_path / "live", kinds=["E"])
    assert g.n == 3 and g.m == 3 and set(g.weights.tolist()) == {4096.0}  # one way each
