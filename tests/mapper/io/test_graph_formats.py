"""The compiled/vectorised graph readers (mapper.io: mtx_file, csv_file, metis_file):
Matrix Market through scipy.io.mmread and CSV through chunked np.loadtxt, each refusing
what the line-by-line readers refused, with the file and line of the first bad entry."""

import tracemalloc

import numpy as np
import pytest

from mapper.io.csv_file import read_csv_text
from mapper.io.graph_file import read_graph
from mapper.io.graph_format import GraphFormatError, SizeLimit
from mapper.io.metis_file import parse_metis_text
from mapper.io.mtx_file import read_mtx_text, write_mtx
from mapper.model.graph import CommGraph

GENERAL = "%%MatrixMarket matrix coordinate real general\n"


def entries_text(n_entries: int, n: int = 500, seed: int = 0) -> tuple[list[str], np.ndarray]:
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, n_entries)
    dst = (src + rng.integers(1, n, n_entries)) % n
    w = rng.integers(1, 1000, n_entries)
    return [f"{a + 1} {b + 1} {x}" for a, b, x in zip(src, dst, w, strict=True)], \
        np.stack([src, dst, w])


@pytest.mark.parametrize("body,msg", [
    ("2 2 1\n1 2 0x10\n", "m.mtx:3: non-numeric entry"),  # mmread alone reads 0
    ("2 2 1\n1 2 5 6\n", "m.mtx:3: expected 3 columns"),  # mmread alone ignores the 4th
    ("2 2 1\n1 2\n", "m.mtx:3: expected 3 columns"),
    ("2 2 1\n1 x 5\n", "m.mtx:3: non-numeric entry"),
    ("2 2 1\n1 2 nan\n", "m.mtx:3: non-numeric entry"),
    ("2 2 1\n1 3 5\n", "m.mtx:3: index out of range 1..2"),
    ("2 2 1\n0 1 5\n", "m.mtx:3: index out of range 1..2"),
    ("2 2 1\n1 99999999999999999999 5\n", "m.mtx:3: index out of range 1..2"),
    ("2 2 1\n1 2 -5\n", "m.mtx:3: volume must be finite and >= 0"),
    ("2 2 1\n1 2 1e999\n", "m.mtx:3: volume must be finite and >= 0"),
    ("2 2 2\n1 2 5\n% late\n2 1 3\n", "m.mtx:4: comment after the size line"),
    ("2 2 1\n1 2 5\n2 1 4\n", "m.mtx:2: size line says 1 entries but the file has 2"),
    ("3 3 3\n1 2 5\n", "m.mtx:2: size line says 3 entries but the file has 1"),
    ("2 2 1\n2 2 5\n", "m.mtx:3: self loop on rank 1"),
    ("2 3 1\n1 2 5\n", "m.mtx:2: matrix must be square"),
    ("2 2\n", "m.mtx:2: size line must be"),
    ("", "missing size line"),
])
def test_matrix_market_errors_name_the_line(body, msg):
    with pytest.raises(GraphFormatError, match=msg):
        read_mtx_text(GENERAL + body, "m.mtx")


def test_matrix_market_field_specific_checks():
    with pytest.raises(GraphFormatError, match="m.mtx:3: non-integer entry"):
        read_mtx_text("%%MatrixMarket matrix coordinate integer general\n2 2 1\n1 2 7.5\n",
                      "m.mtx")
    with pytest.raises(GraphFormatError, match="m.mtx:3: expected 2 columns"):
        read_mtx_text("%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 2 7\n",
                      "m.mtx")
    g = read_mtx_text("%%MatrixMarket matrix coordinate pattern symmetric\n% é\n3 3 2\n"
                      "2 1\n\n3 2\n", "p.mtx")
    assert g.to_csr().toarray().tolist() == [[0, 1, 0], [1, 0, 1], [0, 1, 0]]
    with pytest.raises(GraphFormatError, match="size line declares 5 ranks, but too many"):
        read_mtx_text(GENERAL + "5 5 1\n1 2 5\n", "m.mtx", limit=SizeLimit(4, "too many"))


def test_matrix_market_error_deep_in_a_large_file_names_its_line():
    """mmread parses in parallel chunks; the entry order (and so the line) must hold."""
    lines, _ = entries_text(200_000)
    lines[150_000] = "7 7 1"
    text = GENERAL + "% two comment lines\n%\n500 500 200000\n" + "\n".join(lines) + "\n"
    with pytest.raises(GraphFormatError, match=f"m.mtx:{4 + 150_000 + 1}: self loop on rank 6"):
        read_mtx_text(text, "m.mtx")
    lines[150_000] = "7 8 -1"
    with pytest.raises(GraphFormatError, match=f"m.mtx:{4 + 150_000 + 1}: volume must be"):
        read_mtx_text(GENERAL + "% two comment lines\n%\n500 500 200000\n"
                      + "\n".join(lines) + "\n", "m.mtx")


def test_matrix_market_values_equal_a_reference_sum(tmp_path):
    lines, (src, dst, w) = entries_text(20_000, n=300, seed=4)
    g = read_mtx_text(GENERAL + f"300 300 {len(lines)}\n" + "\n".join(lines) + "\n", "g.mtx")
    ref = np.zeros((300, 300))
    np.add.at(ref, (src, dst), w)
    assert np.array_equal(g.to_csr().toarray(), ref + ref.T)
    write_mtx(g, tmp_path / "rt.mtx")
    assert np.array_equal(read_graph(tmp_path / "rt.mtx").to_csr().toarray(), ref + ref.T)


@pytest.mark.parametrize("text,msg", [
    # a line past the header's vertices is refused at that line, blank ones in between
    # being vertices without neighbours; blank lines at the end are no vertices
    ("3 2\n2\n1 3\n2\n1\n", "g.graph:5: header says 3 vertices but the file has more "
                               "than 3 vertex lines"),
    ("3 2\n2\n1 3\n2\n\n% c\n\n1\n", "g.graph:5: header says 3 vertices but the file "
                                       "has more than 3"),
    ("3 2\n2\n1 3\n\n\n\n", "g.graph:4: header says 3 vertices but the file has 2 "
                              "vertex lines"),
    ("\n\n% c\n\n", "g.graph:1: empty file"),
    ("\n3 2\n2\n1 3\n2\n", "g.graph:1: header must be 'n m"),
])
def test_metis_vertex_line_count_errors_name_the_line(text, msg):
    with pytest.raises(GraphFormatError, match=msg):
        parse_metis_text(text, "g.graph")
    # trailing blank and comment lines, and a blank-line vertex, are still fine
    g = parse_metis_text("% one edge\n3 1\n3\n\n1\n\n\n% end\n\n", "g.graph")
    assert g.graph.n == 3 and g.graph.m == 1 and g.vertex_lines.tolist() == [3, 4, 5]


@pytest.mark.parametrize("tail,lines", [("2\n", 5_000_000), ("\n", 5_000_000),
                                        (" \n", 5_000_000), ("% comment\n", 1_000_000)])
def test_a_huge_metis_file_stops_at_the_first_line_too_many(tail, lines):
    """Issue 28: every line was split before the header's vertex count was compared (a
    64 MB file: 4-6 GB); millions of lines here must cost almost nothing: a vertex line
    too many is refused at once, and blank or comment lines at the end are scanned, not
    kept (comment lines are looked at one by one: fewer of them, to keep the test
    short)."""
    text = "% two vertices\n2 1\n2\n1\n" + tail * lines
    tracemalloc.start()
    try:
        if tail == "2\n":
            with pytest.raises(GraphFormatError, match=r"^g\.graph:5: header says 2 vertices "
                                                       r"but the file has more than 2"):
                parse_metis_text(text, "g.graph", limit=SizeLimit(4, "the job has 4 ranks"))
        else:
            assert parse_metis_text(text, "g.graph").graph.m == 1
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 << 20, f"{peak} bytes at the peak"


def test_metis_line_with_more_numbers_than_neighbours_is_refused_unparsed():
    """Issue 28: of n vertices one has at most n - 1 neighbours; a line with more
    numbers repeats one, and its numbers would cost ~30 bytes each (a line of 33
    million for 4 ranks: 2 GB).  It is refused at its line before they are parsed; a
    bad line before it is still the one named."""
    with pytest.raises(GraphFormatError, match=r"^g\.graph:3: more than 2 numbers on a "
                                               r"vertex line: of 3 vertices, one has at "
                                               r"most 2 neighbours"):
        parse_metis_text("3 2\n2\n1 3 1\n2\n", "g.graph")
    with pytest.raises(GraphFormatError, match=r"^g\.graph:2: more than 5 numbers"):
        parse_metis_text("3 2 11\n1 2 1 2 1 2 1\n1 1 1 3 1\n1 2 1\n", "g.graph")
    with pytest.raises(GraphFormatError, match=r"^g\.graph:2: non-numeric entry"):
        parse_metis_text("3 2\nx\n1 3 1 3 1 3\n2\n", "g.graph")
    # at most n - 1 neighbours (with weights, sizes) is read as before
    g = parse_metis_text("3 2 111\n4 5 2 9\n0 1 1 9 3 9\n2 2 2 9\n", "g.graph")
    assert g.graph.m == 2 and g.vertex_sizes.tolist() == [4, 0, 2]
    text = "4 1\n2" + " 2" * 5_000_000 + "\n1\n\n1\n"
    tracemalloc.start()
    try:
        with pytest.raises(GraphFormatError, match=r"^g\.graph:2: more than 3 numbers"):
            parse_metis_text(text, "g.graph", limit=SizeLimit(4, "the job has 4 ranks"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 << 20, f"{peak} bytes at the peak"


def csv_reference(text: str) -> np.ndarray:
    """Sum of the records of a well-formed CSV text, symmetrised, read naively."""
    ref = {}
    for line in text.split("\n"):
        s = line.strip()
        if not s or s.startswith("#") or not s[0].isdigit():
            continue
        a, b, v = s.split(",")
        key = (int(a), int(b))
        ref[key] = ref.get(key, 0.0) + float(v)
    n = 1 + max(max(k) for k in ref)
    m = np.zeros((n, n))
    for (a, b), v in ref.items():
        m[a, b] += v
    return m + m.T


def test_csv_many_chunks_equal_the_naive_sum():
    rng = np.random.default_rng(2)
    n_rec = 120_000  # about 1.5 MiB: several chunks
    src = rng.integers(0, 64, n_rec)
    dst = (src + rng.integers(1, 64, n_rec)) % 64
    vol = rng.random(n_rec) * 1e6
    rows = [f"{a},{b},{v:.6g}" if i % 7 else f" {a} , {b} , {v:.3e} "
            for i, (a, b, v) in enumerate(zip(src, dst, vol, strict=True))]
    rows[5000] = "# a comment line in the middle"
    rows[70000] = ""
    text = "src,dst,bytes\n" + "\n".join(rows) + "\n"
    g = read_csv_text(text, "t.csv")
    assert np.allclose(g.to_csr().toarray(), csv_reference(text), rtol=1e-12)


@pytest.mark.parametrize("bad,msg", [
    ("x,1,2", "expected integers src,dst and a number of bytes"),
    ("1.0,2,3", "expected integers"),
    ("1,2,3,4", "expected 'src,dst,bytes'"),
    ("1,2", "expected 'src,dst,bytes'"),
    ("1,2,3 # a trailing comment", "expected integers"),
    ("-1,2,3", "negative rank"),
    ("4,4,3", "self loop on rank 4"),
    ("1,2,nan", "bytes must be finite"),
    ("1,2,1e999", "bytes must be finite"),
    ("1,2,-3", "bytes must be finite"),
    ("1,99,3", "rank 99 implies 100 ranks, but the job has 64"),
])
def test_csv_errors_deep_in_a_large_file_name_the_line(bad, msg):
    rows = [f"{i % 63},{i % 63 + 1},{i}" for i in range(100_000)]
    rows[80_000] = bad
    text = "src,dst,bytes\n" + "\n".join(rows) + "\n"
    with pytest.raises(GraphFormatError, match=f"t.csv:{80_000 + 2}: {msg}"):
        read_csv_text(text, "t.csv", limit=SizeLimit(64, "the job has 64"))


def test_csv_accepts_what_the_line_reader_accepts():
    """Header only on line 1 (or 2 after a comment), '1_000' and '+1' as Python reads
    them (loadtxt refuses the first: that chunk is read line by line)."""
    g = read_csv_text("# traffic\nsrc,dst,bytes\n0,1,1_000\n+1,2,5\n", "t.csv")
    assert g.to_csr()[0, 1] == 1000 and g.to_csr()[1, 2] == 5
    with pytest.raises(GraphFormatError, match="t.csv:3: expected integers"):
        read_csv_text("0,1,2\n1,2,3\nsrc,dst,bytes\n", "t.csv")
    with pytest.raises(GraphFormatError, match="t.csv:1: no traffic records"):
        read_csv_text("src,dst,bytes\n\n# nothing\n", "t.csv")


def test_csv_and_mtx_give_the_same_graph(tmp_path):
    lines, (src, dst, w) = entries_text(5000, n=100, seed=9)
    (tmp_path / "a.csv").write_text("".join(f"{a},{b},{x}\n" for a, b, x in
                                            zip(src, dst, w, strict=True)))
    (tmp_path / "a.mtx").write_text(GENERAL + f"100 100 {len(lines)}\n" + "\n".join(lines))
    a, b = read_graph(tmp_path / "a.csv"), read_graph(tmp_path / "a.mtx")
    assert isinstance(a, CommGraph) and abs(a.to_csr() - b.to_csr()).max() == 0


def test_mmread_runs_on_one_thread_and_the_setting_is_restored(monkeypatch):
    import scipy.io

    fmm = scipy.io._fast_matrix_market
    seen, real = [], scipy.io.mmread

    def spy(source, **kw):
        seen.append(fmm.PARALLELISM)
        return real(source, **kw)

    monkeypatch.setattr(scipy.io, "mmread", spy)
    monkeypatch.setattr(fmm, "PARALLELISM", 0)
    read_mtx_text(GENERAL + "2 2 1\n1 2 5\n", "m.mtx")
    assert seen == [1] and fmm.PARALLELISM == 0
