"""Reading and writing meshes: a graph file plus per-vertex work w(v) and size c(v).

* METIS ``.graph`` (fmt 10, 11, 100, 110, 111; ``ncon`` = 1): the vertex weights are
  w(v) and the vertex sizes (fmt 1xx) are c(v), read by the one METIS parser,
  :func:`mapper.io.metis_file.parse_metis_text`.  A file with ``ncon`` > 1 is refused: rankmap
  balances one constraint.
* Any other format :func:`mapper.io.graph_file.read_graph` knows (Matrix Market, CSV, npz),
  optionally with a **weights file**: one line per vertex, ``w`` or ``w c``; ``#`` starts
  a comment anywhere on a line, a line starting with ``%`` is a comment, blank lines
  are skipped.  w must be finite and > 0, c finite and >= 0.

Missing values are 1.  Errors are :class:`mapper.io.graph_format.GraphFormatError` naming
``file:line``.  The size limit is :func:`read_graph`'s: ``max_bytes`` per file and,
unless ``limit`` says otherwise, at most ``max_bytes // 8`` vertices.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..mesh.mesh import Mesh, mesh_from_graph
from .graph_file import graph_kind, read_graph, read_input_text, size_limit
from .graph_format import GraphFormatError, SizeLimit
from .metis_file import parse_metis_text
from .text_lines import iter_content_lines


def read_mesh(path: str | os.PathLike, weights: str | os.PathLike | None = None,
              fmt: str | None = None, *, max_bytes: int | None = None,
              limit: SizeLimit | None = None) -> Mesh:
    """Read a mesh: the graph file ``path`` (``fmt`` overrides its extension) and, for a
    file without vertex weights, an optional ``weights`` file.

    A METIS file with vertex weights or sizes and a weights file together are refused
    (two sources for the same numbers).  O(file size).
    """
    p = Path(path)
    kind = graph_kind(p, fmt)
    if limit is None:
        limit = size_limit(max_bytes, None, unit="vertices")
    w = c = None
    if kind == "metis":
        mg = parse_metis_text(read_input_text(p, max_bytes, "a mesh"), str(p), limit=limit)
        graph = mg.graph
        if mg.vertex_weights is not None:
            if mg.ncon != 1:
                raise GraphFormatError(f"{p}:{mg.header_line}: ncon = {mg.ncon} vertex "
                                       f"weights per vertex; rankmap balances one (ncon 1)")
            w = mg.vertex_weights[:, 0]
            _check_values(w, mg.vertex_lines, str(p), "vertex weight", positive=True)
        if mg.vertex_sizes is not None:
            c = mg.vertex_sizes
            _check_values(c, mg.vertex_lines, str(p), "vertex size", positive=False)
        if weights is not None and (w is not None or c is not None):
            raise GraphFormatError(f"{weights}: {p} already gives vertex weights or sizes "
                                   f"(fmt on line {mg.header_line}); use one of the two")
    else:
        graph = read_graph(p, kind, max_bytes, limit=limit)
    if weights is not None:
        w, c = read_weights_text(read_input_text(weights, max_bytes, "a weights file"),
                                 str(weights), graph.n)
    return mesh_from_graph(graph, w, c, source=str(p))


def read_weights_text(text: str, source: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``w [c]`` lines of a weights file for a mesh of ``n`` vertices.

    Returns ``(w, c)`` (c is 1 on lines that give only w).  One ``split`` per line, the
    values converted and checked with numpy; O(text).  A line beyond the ``n`` vertices
    is refused as soon as it is read: the lines are split lazily, so a long file costs
    no more than the mesh can use.
    """
    lines: list[tuple[int, str]] = []
    for no, body in iter_content_lines(text):
        if body.startswith("%"):
            continue
        if len(lines) == n:
            raise GraphFormatError(f"{source}:{no}: the mesh has {n} vertices but the "
                                   f"weights file has more than {n} vertex lines")
        lines.append((no, body))
    if len(lines) != n:
        where = lines[-1][0] + 1 if lines else 1
        raise GraphFormatError(f"{source}:{where}: the mesh has {n} vertices but the "
                               f"weights file has {len(lines)} vertex lines")
    words = [body.split() for _, body in lines]
    counts = np.fromiter(map(len, words), dtype=np.int64, count=n)
    lineno = np.fromiter((no for no, _ in lines), dtype=np.int64, count=n)
    bad = np.flatnonzero(counts > 2)
    if len(bad):
        raise GraphFormatError(f"{source}:{lineno[bad[0]]}: expected 'w' or 'w c', got "
                               f"{counts[bad[0]]} numbers")
    try:
        values = np.array([x for ws in words for x in ws], dtype=np.float64)
    except ValueError:
        for i, ws in enumerate(words):  # the rare path: which line is it
            try:
                np.array(ws, dtype=np.float64)
            except ValueError:
                raise GraphFormatError(f"{source}:{lineno[i]}: non-numeric entry") from None
        raise
    first = np.cumsum(counts) - counts
    w = values[first]
    c = np.where(counts == 2, values[np.minimum(first + 1, len(values) - 1)], 1.0)
    _check_values(w, lineno, source, "vertex weight", positive=True)
    _check_values(c, lineno, source, "communication size", positive=False)
    return w, c


def _check_values(x: np.ndarray, lineno: np.ndarray, source: str, what: str, *,
                  positive: bool) -> None:
    """Refuse, at its line, the first value that is not finite, or <= 0 (``positive``)
    or < 0."""
    bad = np.flatnonzero(~np.isfinite(x) | ((x <= 0) if positive else (x < 0)))
    if len(bad):
        i = bad[0]
        need = "finite and > 0" if positive else "finite and >= 0"
        raise GraphFormatError(f"{source}:{lineno[i]}: {what} {x[i]:g} of vertex {i + 1}; "
                               f"must be {need}")


def write_mesh_metis(mesh: Mesh, path: str | os.PathLike, *, vertex_weights: bool = True,
                     sizes: bool | None = None, edge_weights: bool = True) -> None:
    """Write ``mesh`` as a METIS file: fmt digits 100 = sizes c(v) (``sizes=None``: when
    some c(v) != 1), 10 = vertex weights w(v), 1 = edge weights.

    METIS wants integers: w and the edge weights are written rounded to at least 1, c
    rounded.  O(n + m), one line of text per vertex.
    """
    g = mesh.graph
    if sizes is None:
        sizes = bool(np.any(mesh.comm_sizes != 1))
    fmt = int(sizes) * 100 + int(vertex_weights) * 10 + int(edge_weights)
    vw = np.maximum(1, np.rint(mesh.vertex_weights)).astype(np.int64)
    vs = np.rint(mesh.comm_sizes).astype(np.int64)
    ew = np.maximum(1, np.rint(g.weights)).astype(np.int64)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(f"{g.n} {g.m} {fmt}\n" if fmt else f"{g.n} {g.m}\n")
        for u in range(g.n):
            lo, hi = g.indptr[u], g.indptr[u + 1]
            lead = [vs[u]] * sizes + [vw[u]] * vertex_weights
            if edge_weights:
                nb = np.empty(2 * (hi - lo), dtype=np.int64)
                nb[0::2] = g.indices[lo:hi] + 1
                nb[1::2] = ew[lo:hi]
            else:
                nb = g.indices[lo:hi].astype(np.int64) + 1
            fh.write(" ".join(map(str, [*lead, *nb.tolist()])) + "\n")
