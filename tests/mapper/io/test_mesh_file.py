"""Mesh input (mapper.io.mesh_file): METIS vertex weights and sizes, Matrix Market plus
a weights file, file:line errors, round trips through write_mesh_metis."""

import tracemalloc

import numpy as np
import pytest

from mapper.io.graph_file import read_graph
from mapper.io.graph_format import GraphFormatError
from mapper.io.mesh_file import read_mesh, read_weights_text, write_mesh_metis
from mapper.io.mtx_file import write_mtx
from mapper.mesh import MeshError, mesh_from_graph
from mapper.model.graph import CommGraph


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


# -- METIS ----------------------------------------------------------------------------------

@pytest.mark.parametrize("text, w, c, ew", [
    ("3 2 10\n5 2\n1 1 3\n2 2\n", [5, 1, 2], [1, 1, 1], 1),
    ("3 2 11\n5 2 7\n1 1 7 3 7\n2 2 7\n", [5, 1, 2], [1, 1, 1], 7),
    ("3 2 100\n4 2\n0 1 3\n2 2\n", [1, 1, 1], [4, 0, 2], 1),
    ("3 2 110\n4 5 2\n0 1 1 3\n2 2 2\n", [5, 1, 2], [4, 0, 2], 1),
    ("% sizes, weights, edge weights; ncon given\n3 2 111 1\n4 5 2 9\n0 1 1 9 3 9\n"
     "2 2 2 9\n", [5, 1, 2], [4, 0, 2], 9),
    ("3 2\n2\n1 3\n2\n", [1, 1, 1], [1, 1, 1], 1),
])
def test_metis_vertex_weights_and_sizes_are_kept(tmp_path, text, w, c, ew):
    mesh = read_mesh(write(tmp_path, "m.graph", text))
    assert mesh.vertex_weights.tolist() == w and mesh.comm_sizes.tolist() == c
    assert mesh.graph.to_csr()[0, 1] == ew and mesh.graph.m == 2
    assert mesh.total_weight == sum(w)
    # the profile reader still reads the same file, dropping the vertex values
    assert abs(read_graph(tmp_path / "m.graph").to_csr() - mesh.graph.to_csr()).max() == 0


@pytest.mark.parametrize("text, msg", [
    ("2 1 10 2\n1 1 2\n1 1 1\n", "m.graph:1: ncon = 2 vertex weights per vertex; rankmap "
                                 "balances one"),
    ("% c\n2 1 10\n3 2\n0 1\n", "m.graph:4: vertex weight 0 of vertex 2; must be finite "
                                "and > 0"),
    ("2 1 10\n-1 2\n1 1\n", "m.graph:2: vertex weight -1 of vertex 1"),
    ("2 1 10\nnan 2\n1 1\n", "m.graph:2: vertex weight nan of vertex 1"),
    ("2 1 100\n1 2\n-2 1\n", "m.graph:3: vertex size -2 of vertex 2; must be finite and >= 0"),
    ("2 1 110\n1 1 2\ninf 1 1\n", "m.graph:3: vertex size inf of vertex 2"),
    ("2 1 10\n\n1\n", "m.graph:2: fmt 010 needs 1 vertex weight.s. before the neighbours, "
                      "the line has 0 numbers"),
    ("2 1 110\n1\n1 1 1\n", "m.graph:2: fmt 110 needs a vertex size and 1 vertex"),
    ("2 1 10\n1 2\nx 1\n", "m.graph:3: non-numeric entry"),
])
def test_metis_vertex_errors_name_file_and_line(tmp_path, text, msg):
    with pytest.raises(GraphFormatError, match=msg):
        read_mesh(write(tmp_path, "m.graph", text))


def test_metis_parser_keeps_the_old_errors_in_line_order(tmp_path):
    # two bad lines: the first one is reported, whatever its kind
    with pytest.raises(GraphFormatError, match="a.graph:3: neighbour ids must be 1..3"):
        read_graph(write(tmp_path, "a.graph", "3 2\n2\n9\n2 2\n"))
    with pytest.raises(GraphFormatError, match="a.graph:3: self loop on vertex 2"):
        read_graph(write(tmp_path, "a.graph", "3 2 1\n2 1\n2 1 3 -1\n2 1\n"))
    # floats and signs go the word-by-word way, with the same result
    g = read_graph(write(tmp_path, "f.graph", "2 1 1\n2 +2.5e0\n1 2.5\n"))
    assert g.to_csr()[0, 1] == 2.5


def test_metis_and_weights_file_together_are_refused(tmp_path):
    weights = write(tmp_path, "w.txt", "1\n1\n")
    with pytest.raises(GraphFormatError, match="w.txt: .*m.graph already gives vertex "
                                               "weights or sizes .fmt on line 1."):
        read_mesh(write(tmp_path, "m.graph", "2 1 10\n1 2\n1 1\n"), weights)
    mesh = read_mesh(write(tmp_path, "p.graph", "2 1\n2\n1\n"), weights)
    assert mesh.vertex_weights.tolist() == [1, 1]


# -- Matrix Market + weights file ---------------------------------------------------------------

MTX = "%%MatrixMarket matrix coordinate real symmetric\n3 3 2\n2 1 4\n3 2 6\n"


def test_mtx_with_a_weights_file(tmp_path):
    w = write(tmp_path, "w.txt", "% w [c] per vertex\n2.5 0\n\n# vertex 1\n3   # heavy\n1 7\n")
    mesh = read_mesh(write(tmp_path, "m.mtx", MTX), w)
    assert mesh.vertex_weights.tolist() == [2.5, 3, 1] and mesh.comm_sizes.tolist() == [0, 1, 7]
    assert mesh.graph.to_csr()[1, 2] == 6
    plain = read_mesh(tmp_path / "m.mtx")
    assert plain.vertex_weights.tolist() == [1, 1, 1] and plain.comm_sizes.tolist() == [1, 1, 1]


@pytest.mark.parametrize("text, msg", [
    ("1\n2\n", "w.txt:3: the mesh has 3 vertices but the weights file has 2 vertex lines"),
    ("", "w.txt:1: the mesh has 3 vertices but the weights file has 0"),
    ("1\n2\n# x\n3\n4\n", "w.txt:5: the mesh has 3 vertices but the weights file has "
                          "more than 3 vertex lines"),
    ("1\nabc\n3\n", "w.txt:2: non-numeric entry"),
    ("1\n2 x\n3\n", "w.txt:2: non-numeric entry"),
    ("1\n2\ninf\n", "w.txt:3: vertex weight inf of vertex 3; must be finite and > 0"),
    ("1\nnan 1\n3\n", "w.txt:2: vertex weight nan of vertex 2"),
    ("1\n0\n3\n", "w.txt:2: vertex weight 0 of vertex 2; must be finite and > 0"),
    ("-1\n1\n3\n", "w.txt:1: vertex weight -1 of vertex 1"),
    ("1\n1 -0.5\n3\n", "w.txt:2: communication size -0.5 of vertex 2; must be finite and >= 0"),
    ("1\n1 nan\n3\n", "w.txt:2: communication size nan of vertex 2"),
    ("1\n1 2 3\n3\n", "w.txt:2: expected 'w' or 'w c', got 3 numbers"),
])
def test_malformed_weights_files_name_the_line(tmp_path, text, msg):
    write(tmp_path, "m.mtx", MTX)
    with pytest.raises(GraphFormatError, match=msg):
        read_mesh(tmp_path / "m.mtx", write(tmp_path, "w.txt", text))


def test_a_huge_weights_file_stops_at_the_first_line_too_many():
    """Issue 28: the lines were all split and counted before the comparison with the
    mesh (33 million lines: 5.7 GB); 5 million here must stop at line 5 (after a
    comment line) having allocated almost nothing."""
    text = "% w per vertex\n" + "1\n" * 5_000_000
    tracemalloc.start()
    try:
        with pytest.raises(GraphFormatError, match=r"^w\.txt:6: the mesh has 4 vertices but "
                                                   r"the weights file has more than 4"):
            read_weights_text(text, "w.txt", 4)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 << 20, f"{peak} bytes at the peak"


def test_size_limits_and_file_kinds(tmp_path):
    big = write(tmp_path, "big.graph", "1000000000 1\n2\n1\n")
    with pytest.raises(GraphFormatError, match="big.graph:1: header declares 1000000000 "
                                               "vertices, but a file of at most 4096 bytes"):
        read_mesh(big, max_bytes=4096)
    with pytest.raises(GraphFormatError, match="over the limit of 10 bytes"):
        read_mesh(write(tmp_path, "m.mtx", MTX), max_bytes=10)
    with pytest.raises(GraphFormatError, match="is a directory, not a regular file; a weights "
                                               "file must be a plain file"):
        read_mesh(tmp_path / "m.mtx", tmp_path)
    assert len(MTX) <= 70
    with pytest.raises(GraphFormatError, match="w.txt: 80 bytes is over the limit of 70 bytes"):
        read_mesh(tmp_path / "m.mtx", write(tmp_path, "w.txt", "1\n" * 40), max_bytes=70)


def test_mesh_from_graph_validates():
    g = CommGraph.from_edges([0], [1], n=2)
    with pytest.raises(MeshError, match="vertex weights have shape .3,., the mesh has 2"):
        mesh_from_graph(g, [1, 2, 3])
    with pytest.raises(MeshError, match="vertex 1 has weight 0"):
        mesh_from_graph(g, [1, 0])
    with pytest.raises(MeshError, match="vertex 0 has communication size -1"):
        mesh_from_graph(g, None, [-1, 0])
    with pytest.raises(MeshError, match="must be finite"):
        mesh_from_graph(g, [1, np.inf])


# -- round trips ----------------------------------------------------------------------------

@pytest.mark.parametrize("vertex_weights, sizes, edge_weights, fmt", [
    (True, False, False, "10"), (True, False, True, "11"), (False, True, False, "100"),
    (True, True, False, "110"), (True, True, True, "111"),
])
def test_round_trips(tmp_path, vertex_weights, sizes, edge_weights, fmt):
    rng = np.random.default_rng(int(fmt))
    n = 40
    u = rng.integers(0, n, 120)
    v = (u + rng.integers(1, n, 120)) % n
    g = CommGraph.from_edges(u, v, rng.integers(1, 5, 120), n=n, source="r")
    mesh = mesh_from_graph(g, rng.integers(1, 50, n), rng.integers(0, 6, n))
    path = tmp_path / "r.graph"
    write_mesh_metis(mesh, path, vertex_weights=vertex_weights, sizes=sizes,
                     edge_weights=edge_weights)
    assert path.read_text().split("\n", 1)[0] == f"{n} {g.m} {fmt}"
    back = read_mesh(path)
    csr = back.graph.to_csr()
    assert (csr != 0).toarray().tolist() == (g.to_csr() != 0).toarray().tolist()
    if edge_weights:
        assert abs(csr - g.to_csr()).max() == 0
    assert back.vertex_weights.tolist() == (mesh.vertex_weights if vertex_weights
                                            else np.ones(n)).tolist()
    assert back.comm_sizes.tolist() == (mesh.comm_sizes if sizes else np.ones(n)).tolist()


def test_mtx_round_trip_with_weights_file(tmp_path):
    g = CommGraph.from_edges([0, 1, 2], [1, 2, 3], [1.5, 2, 3], n=4)
    write_mtx(g, tmp_path / "g.mtx")
    write(tmp_path, "w.txt", "1.5 2\n2\n3 0\n4\n")
    mesh = read_mesh(tmp_path / "g.mtx", tmp_path / "w.txt")
    assert abs(mesh.graph.to_csr() - g.to_csr()).max() == 0
    assert mesh.vertex_weights.tolist() == [1.5, 2, 3, 4]
    assert mesh.comm_sizes.tolist() == [2, 1, 0, 1]
