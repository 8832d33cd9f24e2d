"""Matrix Market ``.mtx`` files: reading a communication matrix, writing a graph.

Coordinate real/integer/pattern; ``general`` is directed traffic (symmetrized C + Cᵀ),
``symmetric`` an undirected matrix.  Read by ``scipy.io.mmread`` (compiled, ~10x faster
than a Python loop on 400k entries) after the header and the entry text are checked
here.  Errors are :class:`~mapper.io.graph_format.GraphFormatError` naming
``file:line``.
"""

from __future__ import annotations

import io
import os
import re
from typing import NoReturn

import numpy as np
import scipy.io
import scipy.sparse as sp

from ..model.graph import CommGraph
from .graph_format import (
    BLANK_BYTES,
    NO_LIMIT,
    GraphFormatError,
    SizeLimit,
    byte_table,
    count_tokens,
    first_byte_not_in,
)

_MTX_INT_BYTES = byte_table(b"0123456789+-" + BLANK_BYTES)
_MTX_REAL_BYTES = byte_table(b"0123456789+-.eE" + BLANK_BYTES)


def read_mtx_text(text: str, source: str, *, limit: SizeLimit = NO_LIMIT) -> CommGraph:
    """A Matrix Market coordinate matrix, read by ``scipy.io.mmread``.

    The banner and the size line are checked here first (format, square, the declared
    rank count against ``limit`` and the entry count against the file's length), because
    mmread allocates what the size line declares.  The entries are then checked without
    a Python loop: only digits, signs, ``.``, ``e`` and blanks (mmread reads ``0x10`` as
    0), exactly the field's column count, no diagonal entry, finite volumes >= 0.  An
    error names the entry's line; finding that line is the only per-line work, and it
    happens only for a file that is refused.  Unlike the banner area, the entry lines
    may not hold comments (mmread refuses them, as the format says).
    """
    nl = text.find("\n")
    first = (text if nl < 0 else text[:nl]).lower()
    if not first.startswith("%%matrixmarket"):
        raise GraphFormatError(f"{source}:1: missing '%%MatrixMarket' banner")
    banner = first.split()
    if len(banner) < 5 or banner[1] != "matrix" or banner[2] != "coordinate":
        raise GraphFormatError(f"{source}:1: only 'matrix coordinate' files are supported")
    field, symmetry = banner[3], banner[4]
    if field not in ("real", "integer", "pattern") or symmetry not in ("general", "symmetric"):
        raise GraphFormatError(f"{source}:1: unsupported field/symmetry {field} {symmetry}")
    size_at, size_line, pos = _mtx_size_line(text, source)
    try:
        rows, cols, nnz = (int(x) for x in size_line.split())
    except ValueError:
        raise GraphFormatError(f"{source}:{size_at}: size line must be 'rows cols entries'"
                               ) from None
    if min(rows, cols, nnz) < 0:
        raise GraphFormatError(f"{source}:{size_at}: size line has a negative number")
    if rows != cols:
        raise GraphFormatError(f"{source}:{size_at}: matrix must be square, got {rows}x{cols}")
    limit.check(rows, f"{source}:{size_at}", "size line declares")
    if nnz > (len(text) + 1) // 4:  # an entry line is at least "1 2\n"
        raise GraphFormatError(f"{source}:{size_at}: size line says {nnz} entries, more "
                               f"than a file of {len(text)} bytes can hold")
    ncol = 2 if field == "pattern" else 3
    body = text[pos:].encode("ascii", "replace")  # non-ASCII: refused below as '?'
    entries = _MtxEntries(text, pos, size_at, source)
    bad = first_byte_not_in(body, _MTX_INT_BYTES if field != "real" else _MTX_REAL_BYTES)
    if bad is not None:
        lineno = size_at + 1 + body.count(b"\n", 0, bad)
        what = "integer" if field == "integer" else "numeric"
        raise GraphFormatError(f"{source}:{lineno}: {entries.why_not(lineno, ncol, what)}")
    tokens = count_tokens(body)
    if tokens != nnz * ncol:
        entries.raise_count_or_columns(nnz, ncol)
    try:
        coo = _mmread_one_thread(text.encode("utf-8")).tocoo()
    except (ValueError, OverflowError) as exc:
        entries.raise_mmread(str(exc), nnz, ncol, rows)
    r, c = coo.row[:nnz], coo.col[:nnz]  # mmread keeps file order; mirrored ones follow
    w = coo.data[:nnz].astype(np.float64)
    loops = np.flatnonzero(r == c)
    if len(loops):
        k = int(loops[0])
        raise GraphFormatError(f"{source}:{entries.line_of(k)}: self loop on rank {r[k]} "
                               f"(diagonal entry)")
    bad_w = np.flatnonzero(~np.isfinite(w) | (w < 0))
    if len(bad_w):
        raise GraphFormatError(f"{source}:{entries.line_of(int(bad_w[0]))}: volume must be "
                               f"finite and >= 0")
    a = sp.csr_matrix((coo.data.astype(np.float64), (coo.row, coo.col)), shape=(rows, cols))
    return CommGraph.from_matrix(a, directed=symmetry == "general", source=source)


def _mmread_one_thread(data: bytes):
    """``scipy.io.mmread`` on one thread.

    By default it starts a thread per core; under the worker's RLIMIT_AS every thread
    costs address space (stack, malloc arena), so on a 128-core node the threads alone
    could exhaust the limit.  One thread reads 400k entries in 0.04 s of CPU here, as
    fast as two.  The switch is scipy's module setting (what threadpoolctl sets).
    """
    fmm = getattr(scipy.io, "_fast_matrix_market", None)
    saved = getattr(fmm, "PARALLELISM", None)
    if saved is not None:
        fmm.PARALLELISM = 1
    try:
        return scipy.io.mmread(io.BytesIO(data), spmatrix=False)
    finally:
        if saved is not None:
            fmm.PARALLELISM = saved


def _mtx_size_line(text: str, source: str) -> tuple[int, str, int]:
    """(line number, text, offset after it) of the size line: the first line after the
    banner that is neither a comment nor blank."""
    pos, lineno = text.find("\n") + 1, 2
    if pos == 0:
        raise GraphFormatError(f"{source}:1: missing size line 'rows cols entries'")
    while pos < len(text):
        end = text.find("\n", pos)
        end = len(text) if end < 0 else end
        line = text[pos:end]
        if line.strip() and not line.startswith("%"):
            return lineno, line, end + 1
        pos, lineno = end + 1, lineno + 1
    raise GraphFormatError(f"{source}:{lineno - 1}: missing size line 'rows cols entries'")


class _MtxEntries:
    """The entry lines of a refused .mtx file, for the error message (slow, rare path)."""

    def __init__(self, text: str, pos: int, size_at: int, source: str):
        self.text, self.pos, self.size_at, self.source = text, pos, size_at, source

    def _lines(self):
        for k, ln in enumerate(self.text[self.pos:].split("\n")):
            yield self.size_at + 1 + k, ln

    def _entries(self):
        return ((no, ln) for no, ln in self._lines() if ln.strip())

    def line_of(self, k: int) -> int:
        """The line of the k-th entry (0-based; blank lines are not entries)."""
        for i, (no, _) in enumerate(self._entries()):
            if i == k:
                return no
        return self.size_at

    def why_not(self, lineno: int, ncol: int, what: str) -> str:
        ln = self.text[self.pos:].split("\n")[lineno - self.size_at - 1]
        if ln.startswith("%"):
            return "comment after the size line (only allowed before it)"
        if len(ln.split()) != ncol:
            return f"expected {ncol} columns"
        return f"non-{what} entry"

    def _fail(self, msg: str) -> NoReturn:
        raise GraphFormatError(f"{self.source}:{msg}")

    def raise_count_or_columns(self, nnz: int, ncol: int) -> NoReturn:
        found = 0
        for no, ln in self._entries():
            if ln.startswith("%"):
                self._fail(f"{no}: comment after the size line (only allowed before it)")
            if len(ln.split()) != ncol:
                self._fail(f"{no}: expected {ncol} columns")
            found += 1
        self._fail(f"{self.size_at}: size line says {nnz} entries but the file has {found}")

    def raise_mmread(self, msg: str, nnz: int, ncol: int, rows: int) -> NoReturn:
        m = re.match(r"Line (\d+): (.*)", msg)
        if not m:  # "Truncated file", say: the entry count, or a column count, is off
            self.raise_count_or_columns(nnz, ncol)
        lineno, why = int(m.group(1)), m.group(2)
        if "out of bounds" in why or "out of range" in why:
            self._fail(f"{lineno}: index out of range 1..{rows}")
        if "too many lines" in why.lower():
            self.raise_count_or_columns(nnz, ncol)
        if "invalid" in why.lower():
            self._fail(f"{lineno}: {self.why_not(lineno, ncol, 'numeric')}")
        self._fail(f"{lineno}: {why}")


def mtx_text(graph: CommGraph, comment: str = "") -> str:
    """The undirected graph as a symmetric Matrix Market text (lower triangle)."""
    u, v, w = graph.edges()
    head = ["%%MatrixMarket matrix coordinate real symmetric\n"]
    head += [f"% {line}\n" for line in comment.splitlines()]
    head.append(f"{graph.n} {graph.n} {len(u)}\n")
    body = [f"{a + 1} {b + 1} {x:.17g}\n"
            for a, b, x in zip(v.tolist(), u.tolist(), w.tolist(), strict=True)]
    return "".join(head + body)


def write_mtx(graph: CommGraph, path: str | os.PathLike, comment: str = "") -> None:
    """Write the undirected graph as a symmetric Matrix Market file (lower triangle)."""
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(mtx_text(graph, comment))
