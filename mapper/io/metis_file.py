"""METIS ``.graph`` files: reading (with the vertex weights and sizes) and writing.

Header ``n m [fmt [ncon]]``, 1-based neighbour lists, ``%`` comments; fmt digits: 1 =
edge weights, 10 = ``ncon`` vertex weights, 100 = vertex sizes.  The adjacency (and
weights) must be symmetric.  :func:`parse_metis_text` keeps the vertex weights and
sizes (the mesh reader, :mod:`mapper.io.mesh_file`, uses them); :func:`read_metis_text`
returns the graph only.  Lines are split a piece at a time and the first line beyond
the header's ``n`` (itself checked against the limit) is refused at once, as is a line
with more numbers than listing each of the other ``n - 1`` vertices once takes.
Errors are :class:`~mapper.io.graph_format.GraphFormatError` naming ``file:line``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..model.graph import CommGraph
from .graph_format import (
    BLANK_BYTES,
    IS_BLANK,
    NO_LIMIT,
    GraphFormatError,
    SizeLimit,
    byte_table,
    first_byte_not_in,
)
from .text_lines import text_pieces

_METIS_INT_BYTES = byte_table(b"0123456789" + BLANK_BYTES)


@dataclass(frozen=True, eq=False)
class MetisGraph:
    """A METIS file as parsed: the graph, and the values before each neighbour list.

    ``vertex_weights`` is ``(n, ncon)`` (fmt ``x1x``) and ``vertex_sizes`` ``(n,)``
    (fmt ``1xx``), both float64 as written, None when the fmt has none; their values
    are not checked here (a profile ignores them), :mod:`mapper.io.mesh_file` does.
    ``header_line`` and ``vertex_lines`` (the line of every vertex) are for messages.
    """

    graph: CommGraph
    vertex_weights: np.ndarray | None
    vertex_sizes: np.ndarray | None
    ncon: int
    header_line: int
    vertex_lines: np.ndarray


def read_metis_text(text: str, source: str, *, limit: SizeLimit = NO_LIMIT) -> CommGraph:
    """The graph of a METIS file (vertex weights and sizes dropped)."""
    return parse_metis_text(text, source, limit=limit).graph


def parse_metis_text(text: str, source: str, *, limit: SizeLimit = NO_LIMIT) -> MetisGraph:
    """Parse a METIS ``.graph`` text: header ``n m [fmt [ncon]]``, then one line per
    vertex ``[size] [w_1 .. w_ncon] (neighbour [edge weight])*``.

    Errors name ``source:line``.  O(n + m) numpy work plus one ``split`` per line.
    The lines are split a piece of the text at a time, and a line beyond the header's
    ``n`` vertices is refused as soon as it is read: a file of millions of short lines
    costs the lines its header allows, not a string per line of the whole file.
    """
    chunks = _metis_body_chunks(text)
    body: list[tuple[int, str]] = []
    pos = 0  # offset in text after the lines in body
    while not body and (nxt := next(chunks, None)) is not None:
        chunk, pos = nxt
        body += chunk
    if not body or (not body[0][1].strip() and not _any_content(body, text, pos)):
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
    limit.check(n, f"{source}:{hline}", "header declares")
    if m > (len(text) + 1) // 4:  # each edge is listed twice, each listing >= 2 bytes
        raise GraphFormatError(f"{source}:{hline}: header says {m} edges, more than a file "
                               f"of {len(text)} bytes can hold")
    fmt = f"{nums[2]:03d}" if len(nums) > 2 else "000"
    if any(c not in "01" for c in fmt) or len(fmt) > 3:
        raise GraphFormatError(f"{source}:{hline}: unknown fmt {parts[2]!r}")
    has_size, has_vw, has_ew = fmt[-3] == "1", fmt[-2] == "1", fmt[-1] == "1"
    ncon = nums[3] if len(nums) > 3 else (1 if has_vw else 0)
    if ncon > (len(text) + 1) // 2:  # each weight is at least "1 "
        raise GraphFormatError(f"{source}:{hline}: header says {ncon} vertex weights per "
                               f"vertex, more than a file of {len(text)} bytes can hold")
    # the header and n vertex lines, and one line more if there is one
    while len(body) <= n + 1 and (nxt := next(chunks, None)) is not None:
        chunk, pos = nxt
        body += chunk
    if len(body) > n + 1:
        extra = body[n + 1:]
        del body[n + 1:]
        if _any_content(extra, text, pos):  # blank lines at the end are no vertices
            raise GraphFormatError(f"{source}:{extra[0][0]}: header says {n} vertices but "
                                   f"the file has more than {n} vertex lines")
    while len(body) > 1 and not body[-1][1].strip():
        body.pop()
    vertex_lines = body[1:]
    if len(vertex_lines) != n:
        where = vertex_lines[-1][0] + 1 if vertex_lines else hline + 1
        raise GraphFormatError(f"{source}:{where}: header says {n} vertices but the file has "
                               f"{len(vertex_lines)} vertex lines")
    nvw = ncon if has_vw else 0
    skip = int(has_size) + nvw
    step = 2 if has_ew else 1
    what = " and ".join(x for x, on in (("a vertex size", has_size),
                                        (f"{nvw} vertex weight(s)", nvw)) if on)

    def numbers(lines: list[tuple[int, str]]):
        """The numbers of ``lines`` and where each stands, after the per-line checks
        (the first bad line wins, and on one line the checks go in this order)."""
        vals, counts, non_numeric = _metis_numbers(lines)
        nread = len(counts)  # the lines before the first non-numeric one
        row = np.repeat(np.arange(nread, dtype=np.int64), counts)
        k = np.arange(len(vals), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts,
                                                             counts)
        k -= skip  # index in the line after the size and vertex weights
        nb_at = (k >= 0) & (k % step == 0)
        src, nb = row[nb_at], vals[nb_at]
        w_at = (k >= 0) & (k % step == 1) if has_ew else None
        w_row, w = (row[w_at], vals[w_at]) if has_ew else (src, np.ones(len(nb)))
        problems = [
            (np.flatnonzero(counts < skip),
             lambda r: f"fmt {fmt} needs {what} before the neighbours, the line has "
                       f"{counts[r]} numbers"),
            (np.flatnonzero((counts >= skip) & ((counts - skip) % step != 0)),
             lambda r: "neighbour without an edge weight"),
            (src[(nb != np.floor(nb)) | (nb < 1) | (nb > n)],
             lambda r: f"neighbour ids must be 1..{n}"),
            (src[nb == src + 1], lambda r: f"self loop on vertex {r + 1}"),
            (w_row[~np.isfinite(w) | (w < 0)],
             lambda r: "edge weights must be finite and >= 0"),
        ]
        first = [(int(rows.min()), i) for i, (rows, _) in enumerate(problems) if len(rows)]
        if first:
            r, i = min(first)
            raise GraphFormatError(f"{source}:{lines[r][0]}: {problems[i][1](r)}")
        if non_numeric is not None:
            raise GraphFormatError(f"{source}:{non_numeric}: non-numeric entry")
        return vals, k, src, nb, w

    # a vertex line that lists every other vertex once has `most` numbers; more can only
    # repeat a neighbour, and would cost the arrays of numbers() ~30 bytes per number
    # (one line of 33 million '2' for 4 ranks: 2 GB), so such a line is refused before
    # they are built; a bad line before it is still the one named
    most = skip + step * max(n - 1, 0)
    for i, (no, ln) in enumerate(vertex_lines):
        if len(ln) > 2 * most and _more_words_than(ln, most):
            numbers(vertex_lines[:i])
            raise GraphFormatError(f"{source}:{no}: more than {most} numbers on a vertex "
                                   f"line: of {n} vertices, one has at most {n - 1} "
                                   f"neighbours, each listed once")
    vals, k, src, nb, w = numbers(vertex_lines)
    dst = nb.astype(np.int64) - 1
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
    lead = vals[(k < 0)].reshape(n, skip)
    return MetisGraph(
        graph=CommGraph.from_matrix(a, directed=False, source=source),
        vertex_weights=lead[:, int(has_size):] if has_vw else None,
        vertex_sizes=lead[:, 0].copy() if has_size else None,
        ncon=nvw,
        header_line=hline,
        vertex_lines=np.fromiter((no for no, _ in vertex_lines), dtype=np.int64, count=n))


def _metis_body_chunks(text: str) -> Iterator[tuple[list[tuple[int, str]], int]]:
    """``(line number, line)`` of the lines of a METIS text that are not ``%`` comments,
    a piece of the text (:func:`mapper.io.text_lines.text_pieces`) at a time, split at
    ``\n`` as ``str.split`` would; with each piece, the offset in ``text`` after it."""
    no, pos = 1, 0
    for piece in text_pieces(text):
        pos += len(piece)
        lines = piece.split("\n")
        if piece.endswith("\n"):
            lines.pop()  # not a line: the next piece starts the next one
        if "%" in piece:
            yield [(no + i, ln) for i, ln in enumerate(lines)
                   if not ln.lstrip().startswith("%")], pos
        else:
            yield list(zip(range(no, no + len(lines)), lines, strict=True)), pos
        no += len(lines)


_CONTENT_LINE = re.compile(r"^[^\S\n]*[^\s%]", re.MULTILINE)
_BLANK_SCAN = 1 << 20


def _any_content(lines: list[tuple[int, str]], text: str, pos: int) -> bool:
    """Whether any of ``lines``, or any line of ``text`` from offset ``pos`` (the start
    of a line), is neither blank nor a ``%`` comment.

    The rest of the text is not split into lines: a megabyte at a time is tested for
    blanks (0.1 s for 64 MB of newlines, where splitting them took 11 s), and only a
    rest with ``%`` in it is searched line by line with a regular expression.
    """
    if any(ln.strip() for _, ln in lines):
        return True
    if all(text[i:i + _BLANK_SCAN].isspace() for i in range(pos, len(text), _BLANK_SCAN)):
        return False
    return text.find("%", pos) < 0 or _CONTENT_LINE.search(text, pos) is not None


def _more_words_than(line: str, limit: int, piece: int = 1 << 20) -> bool:
    """Whether ``line`` has more than ``limit`` words separated by ASCII blanks, counted
    a megabyte at a time without a string per word (stops once it has).  Other Unicode
    blanks do not separate here, so the count is never above ``str.split``'s."""
    count, after_blank = 0, True
    for i in range(0, len(line), piece):
        blank = IS_BLANK[np.frombuffer(line[i:i + piece].encode("utf-8", "replace"),
                                        dtype=np.uint8)]
        count += int(after_blank and not blank[0])
        count += int(np.count_nonzero(blank[:-1] & ~blank[1:]))
        if count > limit:
            return True
        after_blank = bool(blank[-1])
    return False


def _metis_numbers(vertex_lines: list[tuple[int, str]]
                   ) -> tuple[np.ndarray, np.ndarray, int | None]:
    """The numbers on the vertex lines (float64, in order), how many each line holds,
    and the line number of the first line that is not all numbers (None if none; the
    numbers and counts then cover only the lines before it).

    A body of unsigned integers of at most 15 digits (the usual METIS file) is read
    from its bytes with numpy (Horner's rule over the digit positions): about 0.5 s
    for 10^6 vertex lines where ``float()`` per word takes 3 s and a Python object
    per word; anything else is read word by word with exactly ``str.split`` and
    numpy's float conversion.  O(bytes).
    """
    joined = "\n".join(ln for _, ln in vertex_lines)
    data = joined.encode("utf-8")
    if first_byte_not_in(data, _METIS_INT_BYTES) is None:
        b = np.frombuffer(data, dtype=np.uint8)
        blank = IS_BLANK[b]
        starts = np.flatnonzero(~blank & np.concatenate(([True], blank[:-1])))
        ends = np.flatnonzero(~blank & np.concatenate((blank[1:], [True]))) + 1
        lens = ends - starts
        if lens.max(initial=0) <= 15:  # exact in float64
            vals = np.zeros(len(starts))
            digit, last = b - np.uint8(48), len(b) - 1
            for i in range(int(lens.max(initial=0))):  # digit positions, not words
                d = digit[np.minimum(starts + i, last)]
                vals = np.where(i < lens, vals * 10.0 + d, vals)
            row = np.searchsorted(np.flatnonzero(b == 10), starts)  # newlines before it
            return vals, np.bincount(row, minlength=len(vertex_lines)), None
    words = [ln.split() for _, ln in vertex_lines]
    counts = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
    try:
        return (np.array([x for line in words for x in line], dtype=np.float64), counts,
                None)
    except ValueError:
        pass
    for i, line in enumerate(words):  # the rare path: which line is it
        try:
            np.array(line, dtype=np.float64)
        except ValueError:
            kept = words[:i]
            return (np.array([x for ws in kept for x in ws], dtype=np.float64), counts[:i],
                    vertex_lines[i][0])
    raise AssertionError("unreachable: the words failed together but not one by one")


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
