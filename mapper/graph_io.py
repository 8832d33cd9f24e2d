"""Reading and writing communication graphs: METIS, Matrix Market, CSV triples, npz.

Every reader returns a :class:`~mapper.graph.CommGraph` or raises
:class:`GraphFormatError` whose message starts with ``file:line:``.

* METIS ``.graph`` — header ``n m [fmt [ncon]]``, 1-based neighbour lists, ``%``
  comments; fmt digits: 1 = edge weights, 10 = vertex weights (skipped), 100 = vertex
  sizes (skipped).  The adjacency (and weights) must be symmetric.
* Matrix Market ``.mtx`` — coordinate real/integer/pattern; ``general`` is directed
  traffic (symmetrized C + Cᵀ), ``symmetric`` an undirected matrix.
* CSV ``.csv`` — ``src,dst,bytes`` per line (directed traffic), optional header.
* ``.npz`` — a scipy sparse matrix saved with ``scipy.sparse.save_npz`` (directed
  traffic), or arrays ``src``, ``dst``, ``weight`` (and optional ``n``).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .graph import CommGraph, GraphError


class GraphFormatError(GraphError):
    """A graph file that does not parse; the message names the file and line."""


def read_graph(path: str | os.PathLike, fmt: str | None = None,
               max_bytes: int | None = None) -> CommGraph:
    """Read a graph file; ``fmt`` (metis, mtx, csv, npz) overrides the extension."""
    p = Path(path)
    kind = fmt or {".graph": "metis", ".metis": "metis", ".mtx": "mtx", ".csv": "csv",
                   ".npz": "npz"}.get(p.suffix.lower())
    if kind is None:
        raise GraphFormatError(f"{p}: unknown graph format (use .graph, .mtx, .csv or .npz)")
    try:
        size = p.stat().st_size
    except OSError as exc:
        raise GraphFormatError(f"{p}: cannot read: {exc.strerror}") from None
    if max_bytes is not None and size > max_bytes:
        raise GraphFormatError(f"{p}: {size} bytes is over the limit of {max_bytes}")
    if kind == "npz":
        return _read_npz(p)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise GraphFormatError(f"{p}: not a text file") from None
    except OSError as exc:
        raise GraphFormatError(f"{p}: cannot read: {exc.strerror}") from None
    return {"metis": read_metis_text, "mtx": read_mtx_text, "csv": read_csv_text}[kind](
        text, str(p))


def read_metis_text(text: str, source: str) -> CommGraph:
    lines = text.split("\n")
    body = [(i + 1, ln) for i, ln in enumerate(lines) if not ln.lstrip().startswith("%")]
    while body and not body[-1][1].strip():
        body.pop()
    if not body:
        raise GraphFormatError(f"{source}:1: empty file, expected a header 'n m [fmt]'")
    hline, header = body[0]
    parts = header.split()
    try:
        nums = [int(x) for x in parts]
    except ValueError:
        raise GraphFormatError(f"{source}:{hline}: header must be integers 'n m [fmt [ncon]]'"
                               ) from None
    if len(nums) < 2 or len(nums) > 4 or min(nums) < 0:
        raise GraphFormatError(f"{source}:{hline}: header must be 'n m [fmt [ncon]]'")
    n, m = nums[0], nums[1]
    fmt = f"{nums[2]:03d}" if len(nums) > 2 else "000"
    if any(c not in "01" for c in fmt) or len(fmt) > 3:
        raise GraphFormatError(f"{source}:{hline}: unknown fmt {parts[2]!r}")
    has_size, has_vw, has_ew = fmt[-3] == "1", fmt[-2] == "1", fmt[-1] == "1"
    ncon = nums[3] if len(nums) > 3 else (1 if has_vw else 0)
    vertex_lines = body[1:]
    if len(vertex_lines) != n:
        where = vertex_lines[n][0] if len(vertex_lines) > n else (
            vertex_lines[-1][0] + 1 if vertex_lines else hline + 1)
        raise GraphFormatError(f"{source}:{where}: header says {n} vertices but the file has "
                               f"{len(vertex_lines)} vertex lines")
    src_l, dst_l, w_l = [], [], []
    skip = int(has_size) + (ncon if has_vw else 0)
    step = 2 if has_ew else 1
    for v, (lineno, line) in enumerate(vertex_lines):
        try:
            vals = np.array(line.split(), dtype=np.float64) if line.strip() else np.zeros(0)
        except ValueError:
            raise GraphFormatError(f"{source}:{lineno}: non-numeric entry") from None
        vals = vals[skip:]
        if len(vals) % step:
            raise GraphFormatError(f"{source}:{lineno}: neighbour without an edge weight")
        nb = vals[0::step]
        w = vals[1::step] if has_ew else np.ones(len(nb))
        if len(nb) and (np.any(nb != np.floor(nb)) or nb.min() < 1 or nb.max() > n):
            raise GraphFormatError(f"{source}:{lineno}: neighbour ids must be 1..{n}")
        if np.any(nb == v + 1):
            raise GraphFormatError(f"{source}:{lineno}: self loop on vertex {v + 1}")
        if len(w) and (not np.all(np.isfinite(w)) or w.min() < 0):
            raise GraphFormatError(f"{source}:{lineno}: edge weights must be finite and >= 0")
        src_l.append(np.full(len(nb), v, dtype=np.int64))
        dst_l.append(nb.astype(np.int64) - 1)
        w_l.append(w)
    src = np.concatenate(src_l) if src_l else np.zeros(0, dtype=np.int64)
    dst = np.concatenate(dst_l) if dst_l else np.zeros(0, dtype=np.int64)
    w = np.concatenate(w_l) if w_l else np.zeros(0)
    a = sp.csr_matrix((w, (src, dst)), shape=(n, n))
    a.sum_duplicates()
    asym = abs(a - a.T)
    asym.eliminate_zeros()
    if asym.nnz:
        r, c = asym.nonzero()
        line_of = vertex_lines[int(r[0])][0]
        raise GraphFormatError(
            f"{source}:{line_of}: adjacency is not symmetric: vertex {r[0] + 1} lists "
            f"{c[0] + 1} but not the other way round (or with another weight)")
    if a.nnz != 2 * m:
        raise GraphFormatError(f"{source}:{hline}: header says {m} edges but the body has "
                               f"{a.nnz // 2}")
    return CommGraph.from_matrix(a, directed=False, source=source)


def read_mtx_text(text: str, source: str) -> CommGraph:
    lines = text.split("\n")
    if not lines or not lines[0].lower().startswith("%%matrixmarket"):
        raise GraphFormatError(f"{source}:1: missing '%%MatrixMarket' banner")
    banner = lines[0].lower().split()
    if len(banner) < 5 or banner[1] != "matrix" or banner[2] != "coordinate":
        raise GraphFormatError(f"{source}:1: only 'matrix coordinate' files are supported")
    field, symmetry = banner[3], banner[4]
    if field not in ("real", "integer", "pattern") or symmetry not in ("general", "symmetric"):
        raise GraphFormatError(f"{source}:1: unsupported field/symmetry {field} {symmetry}")
    i = 1
    while i < len(lines) and (lines[i].startswith("%") or not lines[i].strip()):
        i += 1
    if i >= len(lines):
        raise GraphFormatError(f"{source}:{i}: missing size line 'rows cols entries'")
    try:
        rows, cols, nnz = (int(x) for x in lines[i].split())
    except ValueError:
        raise GraphFormatError(f"{source}:{i + 1}: size line must be 'rows cols entries'"
                               ) from None
    if rows != cols:
        raise GraphFormatError(f"{source}:{i + 1}: matrix must be square, got {rows}x{cols}")
    entries = [(k + 1, ln) for k, ln in enumerate(lines[i + 1:], start=i + 1)
               if ln.strip() and not ln.startswith("%")]
    if len(entries) != nnz:
        raise GraphFormatError(f"{source}:{i + 1}: size line says {nnz} entries but the file "
                               f"has {len(entries)}")
    ncol = 2 if field == "pattern" else 3
    r = np.empty(nnz, dtype=np.int64)
    c = np.empty(nnz, dtype=np.int64)
    w = np.ones(nnz)
    for k, (lineno, ln) in enumerate(entries):
        parts = ln.split()
        if len(parts) != ncol:
            raise GraphFormatError(f"{source}:{lineno}: expected {ncol} columns")
        try:
            r[k], c[k] = int(parts[0]), int(parts[1])
            if ncol == 3:
                w[k] = float(parts[2])
        except ValueError:
            raise GraphFormatError(f"{source}:{lineno}: non-numeric entry") from None
        if not (1 <= r[k] <= rows and 1 <= c[k] <= cols):
            raise GraphFormatError(f"{source}:{lineno}: index out of range 1..{rows}")
        if r[k] == c[k]:
            raise GraphFormatError(f"{source}:{lineno}: self loop on rank {r[k] - 1} "
                                   f"(diagonal entry)")
        if not np.isfinite(w[k]) or w[k] < 0:
            raise GraphFormatError(f"{source}:{lineno}: volume must be finite and >= 0")
    a = sp.csr_matrix((w, (r - 1, c - 1)), shape=(rows, cols))
    if symmetry == "symmetric":
        a = a + sp.triu(a.T, k=1) + sp.tril(a.T, k=-1)
        return CommGraph.from_matrix(a, directed=False, source=source)
    return CommGraph.from_matrix(a, directed=True, source=source)


def read_csv_text(text: str, source: str) -> CommGraph:
    src, dst, w = [], [], []
    for lineno, line in enumerate(text.split("\n"), 1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        parts = [x.strip() for x in s.split(",")]
        if len(parts) != 3:
            raise GraphFormatError(f"{source}:{lineno}: expected 'src,dst,bytes'")
        try:
            a, b, v = int(parts[0]), int(parts[1]), float(parts[2])
        except ValueError:
            if lineno == 1 or not src and lineno <= 2:
                continue  # header line
            raise GraphFormatError(f"{source}:{lineno}: expected integers src,dst and a "
                                   f"number of bytes") from None
        if a < 0 or b < 0:
            raise GraphFormatError(f"{source}:{lineno}: negative rank")
        if a == b:
            raise GraphFormatError(f"{source}:{lineno}: self loop on rank {a}")
        if not np.isfinite(v) or v < 0:
            raise GraphFormatError(f"{source}:{lineno}: bytes must be finite and >= 0")
        src.append(a)
        dst.append(b)
        w.append(v)
    if not src:
        raise GraphFormatError(f"{source}:1: no traffic records")
    return CommGraph.from_edges(src, dst, w, source=source)


def _read_npz(p: Path) -> CommGraph:
    try:
        data = np.load(p, allow_pickle=False)
    except Exception as exc:
        raise GraphFormatError(f"{p}: not a readable .npz file: {exc}") from None
    with data:
        keys = set(data.files)
        if {"indptr", "indices", "data", "shape", "format"} <= keys:
            a = sp.load_npz(p)
            return CommGraph.from_matrix(a, directed=True, source=str(p))
        if {"src", "dst"} <= keys:
            w = data["weight"] if "weight" in keys else None
            n = int(data["n"]) if "n" in keys else None
            return CommGraph.from_edges(data["src"], data["dst"], w, n=n, source=str(p))
    raise GraphFormatError(f"{p}: expected a scipy sparse matrix or arrays src, dst[, weight]")


def write_metis(graph: CommGraph, path: str | os.PathLike) -> None:
    """Write METIS format with integer edge weights (fmt 1), rounding volumes."""
    w = np.maximum(1, np.rint(graph.weights)).astype(np.int64)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(f"{graph.n} {graph.m} 1\n")
        for u in range(graph.n):
            lo, hi = graph.indptr[u], graph.indptr[u + 1]
            pairs = np.empty(2 * (hi - lo), dtype=np.int64)
            pairs[0::2] = graph.indices[lo:hi] + 1
            pairs[1::2] = w[lo:hi]
            fh.write(" ".join(map(str, pairs.tolist())) + "\n")


def write_mtx(graph: CommGraph, path: str | os.PathLike, comment: str = "") -> None:
    """Write the undirected graph as a symmetric Matrix Market file (lower triangle)."""
    u, v, w = graph.edges()
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("%%MatrixMarket matrix coordinate real symmetric\n")
        for line in comment.splitlines():
            fh.write(f"% {line}\n")
        fh.write(f"{graph.n} {graph.n} {len(u)}\n")
        for a, b, x in zip(v.tolist(), u.tolist(), w.tolist(), strict=True):
            fh.write(f"{a + 1} {b + 1} {x:.17g}\n")
