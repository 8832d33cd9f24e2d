"""Reading and writing communication graphs: METIS, Matrix Market, CSV triples, npz.

Every reader returns a :class:`~mapper.graph.CommGraph` or raises
:class:`GraphFormatError` whose message starts with ``file:line:``.  Files may be
hostile (the Slurm worker reads users' profiles): :func:`read_graph` reads only regular
files, at most ``max_bytes`` of them, and checks every declared size (headers, indices,
``.npy`` shapes) against ``expected_n`` or the byte limit before allocating.

* METIS ``.graph`` — header ``n m [fmt [ncon]]``, 1-based neighbour lists, ``%``
  comments; fmt digits: 1 = edge weights, 10 = ``ncon`` vertex weights, 100 = vertex
  sizes.  The adjacency (and weights) must be symmetric.  :func:`parse_metis_text`
  keeps the vertex weights and sizes (the mesh reader, :mod:`mapper.mesh.mesh_io`,
  uses them); :func:`read_graph` returns the graph only.  Lines are split a piece at a
  time and the first line beyond the header's ``n`` (itself checked against the limit)
  is refused at once, as is a line with more numbers than listing each of the other
  ``n - 1`` vertices once takes.
* Matrix Market ``.mtx`` — coordinate real/integer/pattern; ``general`` is directed
  traffic (symmetrized C + Cᵀ), ``symmetric`` an undirected matrix.  Read by
  ``scipy.io.mmread`` (compiled, ~10x faster than a Python loop on 400k entries) after
  the header and the entry text are checked here.
* CSV ``.csv`` — ``src,dst,bytes`` per line (directed traffic), optional header.  Read
  in chunks by ``np.loadtxt``, a chunk it refuses line by line (7x less CPU and half
  the memory of a per-line loop on a 64 MiB file).
* ``.npz`` — a scipy sparse matrix saved with ``scipy.sparse.save_npz`` (directed
  traffic), or arrays ``src``, ``dst``, ``weight`` (and optional ``n``).
"""

from __future__ import annotations

import io
import math
import os
import re
import struct
import warnings
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import numpy as np
import scipy.io
import scipy.sparse as sp

from .graph import CommGraph, GraphError
from .regular_file import FileTooLarge, NotARegularFile, read_regular_file
from .text_lines import text_pieces


class GraphFormatError(GraphError):
    """A graph file that does not parse; the message names the file and line."""


@dataclass(frozen=True)
class SizeLimit:
    """The largest rank count a file may declare, and why (for the error message).

    Checked against the sizes a file declares (header, largest index) before anything
    of that size is allocated.  ``max_n=None``: no limit.
    """

    max_n: int | None = None
    reason: str = ""
    unit: str = "ranks"

    def check(self, n: int, where: str, what: str) -> None:
        if self.max_n is not None and n > self.max_n:
            raise GraphFormatError(f"{where}: {what} {n} {self.unit}, but {self.reason}")


NO_LIMIT = SizeLimit()
_NPZ_MAX_MEMBERS = 64
_NPZ_MAX_DIRECTORY = 64 << 10     # bytes of zip central directory (a graph has <= 5 arrays)
_NPY_MAX_HEADER = 1 << 16


def read_graph(path: str | os.PathLike, fmt: str | None = None,
               max_bytes: int | None = None, expected_n: int | None = None, *,
               limit: SizeLimit | None = None) -> CommGraph:
    """Read a graph file; ``fmt`` (metis, mtx, csv, npz) overrides the extension.

    The file is opened once and must be a regular file (not a device, FIFO or
    directory); at most ``max_bytes`` are read from it (and, for ``.npz``, the arrays
    may be at most ``max_bytes`` uncompressed).  Sizes the file declares (header rank
    and entry counts, the largest rank index, ``.npy`` array shapes) are checked before
    anything is allocated: against ``expected_n`` (the job's rank count) when given,
    else against ``max_bytes // 8`` ranks (an index array no larger than the file
    limit); ``limit`` replaces both.  A graph with fewer than ``expected_n`` ranks is
    returned; the caller compares the rank count.
    """
    p = Path(path)
    kind = graph_kind(p, fmt)
    if limit is None:
        limit = size_limit(max_bytes, expected_n)
    data = _read_file(p, max_bytes)
    if kind == "npz":
        return _read_npz(p, data, max_bytes, limit)
    text = _decode(p, data)
    del data
    return {"metis": read_metis_text, "mtx": read_mtx_text, "csv": read_csv_text}[kind](
        text, str(p), limit=limit)


#: the format of a graph file by its extension (lower case)
GRAPH_SUFFIXES = {".graph": "metis", ".metis": "metis", ".mtx": "mtx", ".csv": "csv",
                  ".npz": "npz"}


def graph_kind(path: Path, fmt: str | None) -> str:
    """The format of a graph file: ``fmt`` if given, else from the extension."""
    kind = fmt or GRAPH_SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise GraphFormatError(f"{path}: unknown graph format (use .graph, .mtx, .csv or .npz)")
    return kind


def size_limit(max_bytes: int | None, expected_n: int | None,
               unit: str = "ranks") -> SizeLimit:
    """The limit :func:`read_graph` applies: ``expected_n`` when given, else what a file
    of ``max_bytes`` can hold (``max_bytes // 8``), else none."""
    if expected_n is not None:
        return SizeLimit(expected_n, f"the job has {expected_n} ranks", unit)
    if max_bytes is not None:
        return SizeLimit(max_bytes // 8, f"a file of at most {max_bytes} bytes may declare "
                                         f"at most {max_bytes // 8} {unit}", unit)
    return NO_LIMIT


def read_text_file(path: str | os.PathLike, max_bytes: int | None = None,
                   what: str = "a communication profile") -> str:
    """A text input file as :func:`read_graph` reads one (regular, at most ``max_bytes``,
    UTF-8, newlines normalised); ``what`` names it in the not-a-regular-file error."""
    p = Path(path)
    return _decode(p, _read_file(p, max_bytes, what))


def _decode(p: Path, data: bytes) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise GraphFormatError(f"{p}: not a text file") from None
    if "\r" in text:  # universal newlines, as text-mode reading did
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def _read_file(p: Path, max_bytes: int | None, what: str = "a communication profile") -> bytes:
    """The profile's bytes (:func:`mapper.regular_file.read_regular_file`), with the
    reasons it cannot be used as GraphFormatError."""
    try:
        return read_regular_file(p, max_bytes)
    except NotARegularFile as exc:
        raise GraphFormatError(f"{p}: is {exc.kind}, not a regular file; {what} "
                               f"must be a plain file") from None
    except FileTooLarge as exc:
        if exc.counted:
            raise GraphFormatError(f"{p}: more than {max_bytes} bytes to read (stat said "
                                   f"{exc.stat_size}), over the limit of {max_bytes} "
                                   f"bytes") from None
        raise GraphFormatError(f"{p}: {exc.stat_size} bytes is over the limit of "
                               f"{max_bytes} bytes") from None
    except OSError as exc:
        raise GraphFormatError(f"{p}: cannot read: {exc.strerror}") from None


@dataclass(frozen=True, eq=False)
class MetisGraph:
    """A METIS file as parsed: the graph, and the values before each neighbour list.

    ``vertex_weights`` is ``(n, ncon)`` (fmt ``x1x``) and ``vertex_sizes`` ``(n,)``
    (fmt ``1xx``), both float64 as written, None when the fmt has none; their values
    are not checked here (a profile ignores them), :mod:`mapper.mesh.mesh_io` does.
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
    a piece of the text (:func:`mapper.text_lines.text_pieces`) at a time, split at
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
        blank = _IS_BLANK[np.frombuffer(line[i:i + piece].encode("utf-8", "replace"),
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
    if _first_byte_not_in(data, _METIS_INT_BYTES) is None:
        b = np.frombuffer(data, dtype=np.uint8)
        blank = _IS_BLANK[b]
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
    bad = _first_byte_not_in(body, _MTX_INT_BYTES if field != "real" else _MTX_REAL_BYTES)
    if bad is not None:
        lineno = size_at + 1 + body.count(b"\n", 0, bad)
        what = "integer" if field == "integer" else "numeric"
        raise GraphFormatError(f"{source}:{lineno}: {entries.why_not(lineno, ncol, what)}")
    tokens = _count_tokens(body)
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


def _byte_table(chars: bytes) -> np.ndarray:
    table = np.zeros(256, dtype=bool)
    table[np.frombuffer(chars, dtype=np.uint8)] = True
    return table


_BLANK_BYTES = b" \t\n\v\f"
_MTX_INT_BYTES = _byte_table(b"0123456789+-" + _BLANK_BYTES)
_MTX_REAL_BYTES = _byte_table(b"0123456789+-.eE" + _BLANK_BYTES)
_IS_BLANK = _byte_table(_BLANK_BYTES)
_METIS_INT_BYTES = _byte_table(b"0123456789" + _BLANK_BYTES)


def _first_byte_not_in(data: bytes, allowed: np.ndarray) -> int | None:
    bad = np.flatnonzero(~allowed[np.frombuffer(data, dtype=np.uint8)])
    return int(bad[0]) if len(bad) else None


def _count_tokens(data: bytes) -> int:
    """Number of blank-separated words in ``data`` (a word starts after a blank)."""
    if not data:
        return 0
    blank = _IS_BLANK[np.frombuffer(data, dtype=np.uint8)]
    return int(not blank[0]) + int(np.count_nonzero(blank[:-1] & ~blank[1:]))


_CSV_DTYPE = np.dtype([("src", np.int64), ("dst", np.int64), ("bytes", np.float64)])
_CSV_CHUNK = 1 << 18
# a '#' that does not start its line: the line-by-line reader refuses such a line,
# np.loadtxt would take the '#' as the start of a comment
_INNER_HASH = re.compile(rb"(?m)^[ \t]*[^ \t\n#][^\n]*#")


def read_csv_text(text: str, source: str, *, limit: SizeLimit = NO_LIMIT) -> CommGraph:
    """``src,dst,bytes`` records, one per line; ``#`` lines and blank lines are skipped,
    and line 1 (or 2, after a blank or comment line 1) may be a header.

    Read in chunks of about 256 KiB with ``np.loadtxt`` (compiled), then checked as
    arrays.  A chunk that loadtxt refuses, or whose values fail a check, is read again
    line by line (:func:`_csv_records`), which names the first bad line or, where
    loadtxt was only stricter (``1_000``), accepts it: the line-by-line reader defines
    the format; the chunked one only makes well-formed files fast.
    """
    # lines 1-2 may hold the header: always read them line by line
    pos = 0
    for _ in range(2):
        nl = text.find("\n", pos)
        pos = len(text) if nl < 0 else nl + 1
    records = [_csv_records(text[:pos], 1, source, limit, header_ok=True)]
    lineno = 3
    while pos < len(text):
        end = text.find("\n", min(pos + _CSV_CHUNK, len(text)))
        end = len(text) if end < 0 else end + 1
        chunk = text[pos:end]
        rec = _csv_chunk_fast(chunk, limit)
        if rec is None:
            rec = _csv_records(chunk, lineno, source, limit, header_ok=False)
        records.append(rec)
        lineno += chunk.count("\n")
        pos = end
    src, dst, w = (np.concatenate(column) for column in zip(*records, strict=True))
    if not len(src):
        raise GraphFormatError(f"{source}:1: no traffic records")
    return CommGraph.from_edges(src, dst, w, source=source)


def _csv_chunk_fast(chunk: str, limit: SizeLimit
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The chunk's records as arrays, or None when any line needs a closer look."""
    data = chunk.encode("utf-8")
    if b"#" in data and _INNER_HASH.search(data):
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "input contained no data"
            rec = np.loadtxt(io.BytesIO(data), delimiter=",", comments="#",
                             dtype=_CSV_DTYPE, ndmin=1, encoding="utf-8")
    except (ValueError, OverflowError):
        return None
    s, d, w = rec["src"], rec["dst"], rec["bytes"]
    if len(s) and ((s < 0).any() or (d < 0).any() or (s == d).any()
                   or not np.isfinite(w).all() or (w < 0).any()
                   or (limit.max_n is not None and max(s.max(), d.max()) >= limit.max_n)):
        return None
    return s, d, w


def _csv_records(text: str, first_lineno: int, source: str, limit: SizeLimit,
                 header_ok: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Line-by-line reading of CSV records; raises at the first bad line."""
    src, dst, w = [], [], []
    for lineno, line in enumerate(text.split("\n"), first_lineno):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        parts = [x.strip() for x in s.split(",")]
        if len(parts) != 3:
            raise GraphFormatError(f"{source}:{lineno}: expected 'src,dst,bytes'")
        try:
            a, b, v = int(parts[0]), int(parts[1]), float(parts[2])
        except ValueError:
            if header_ok and (lineno == 1 or not src and lineno <= 2):
                continue  # header line
            raise GraphFormatError(f"{source}:{lineno}: expected integers src,dst and a "
                                   f"number of bytes") from None
        if a < 0 or b < 0:
            raise GraphFormatError(f"{source}:{lineno}: negative rank")
        if a == b:
            raise GraphFormatError(f"{source}:{lineno}: self loop on rank {a}")
        limit.check(max(a, b) + 1, f"{source}:{lineno}", f"rank {max(a, b)} implies")
        if not np.isfinite(v) or v < 0:
            raise GraphFormatError(f"{source}:{lineno}: bytes must be finite and >= 0")
        src.append(a)
        dst.append(b)
        w.append(v)
    return (np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64),
            np.array(w, dtype=np.float64))


def _read_npz(p: Path, data: bytes, max_bytes: int | None, limit: SizeLimit) -> CommGraph:
    """An .npz file from its bytes; sizes are checked before any array is read.

    The zip directory, the uncompressed member sizes (``ZipInfo.file_size``, which
    zipfile enforces while decompressing) and every ``.npy`` header (shape and dtype,
    read without decompressing the data) are checked first; only then are the arrays
    read, each no larger than its member.
    """
    eocd = data.rfind(b"PK\x05\x06", max(0, len(data) - 22 - 0xFFFF))
    if eocd < 0 or len(data) - eocd < 22:
        raise GraphFormatError(f"{p}: not a readable .npz file (no zip directory)")
    directory = struct.unpack_from("<L", data, eocd + 12)[0]
    if directory > _NPZ_MAX_DIRECTORY:
        raise GraphFormatError(f"{p}: zip directory of {directory} bytes; a graph .npz has "
                               f"a few arrays")
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError,
            NotImplementedError) as exc:
        raise GraphFormatError(f"{p}: not a readable .npz file: {exc}") from None
    with zf:
        infos = zf.infolist()
        if len(infos) > _NPZ_MAX_MEMBERS:
            raise GraphFormatError(f"{p}: {len(infos)} members; a graph .npz has a few arrays")
        total = sum(info.file_size for info in infos)
        if max_bytes is not None and total > max_bytes:
            raise GraphFormatError(f"{p}: the arrays are {total} bytes uncompressed, over the "
                                   f"limit of {max_bytes} bytes")
        headers = {info.filename: _npy_header(p, zf, info) for info in infos}
        # keys as numpy.load names them
        members = {name[:-4] if name.endswith(".npy") else name: name for name in headers}

        def array(key: str) -> np.ndarray:
            name = members[key]
            if headers[name] is None:
                raise GraphFormatError(f"{p}: member {name} is not a numpy array")
            try:
                with zf.open(name) as fh:
                    return np.lib.format.read_array(fh, allow_pickle=False)
            except (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
                raise GraphFormatError(f"{p}: member {name}: {exc}") from None

        def scalar(key: str) -> int | str:
            shape, _dtype = headers.get(members[key]) or ((), None)
            if math.prod(shape) != 1:
                raise GraphFormatError(f"{p}: {key} must be a single value")
            value = array(key).reshape(()).item()
            return value.decode("ascii", "replace") if isinstance(value, bytes) else value

        keys = set(members)
        if {"indptr", "indices", "data", "shape", "format"} <= keys:
            return _npz_sparse(p, array, scalar, limit)
        if {"src", "dst"} <= keys:
            n = None
            if "n" in keys:
                n = scalar("n")
                if not isinstance(n, int) or isinstance(n, bool) or n < 0:
                    raise GraphFormatError(f"{p}: n must be a non-negative integer")
                limit.check(n, str(p), "n declares")
            src, dst = array("src"), array("dst")
            w = array("weight") if "weight" in keys else None
            for name, x in (("src", src), ("dst", dst)):
                if x.dtype.kind not in "iu":
                    raise GraphFormatError(f"{p}: {name} must be an integer array")
                if n is None and x.size:
                    limit.check(int(x.max()) + 1, str(p), f"{name} names rank {int(x.max())}, "
                                                          f"which implies")
            return CommGraph.from_edges(src, dst, w, n=n, source=str(p))
    raise GraphFormatError(f"{p}: expected a scipy sparse matrix or arrays src, dst[, weight]")


def _npz_sparse(p: Path, array, scalar, limit: SizeLimit) -> CommGraph:
    """A matrix saved by ``scipy.sparse.save_npz`` in csr, csc or bsr format."""
    fmt = scalar("format")
    if fmt not in ("csr", "csc", "bsr"):
        raise GraphFormatError(f"{p}: unsupported sparse format {fmt!r} (csr, csc or bsr)")
    shape = array("shape")
    if shape.shape != (2,) or shape.dtype.kind not in "iu":
        raise GraphFormatError(f"{p}: shape must be two integers")
    rows, cols = (int(x) for x in shape)
    if rows != cols or rows < 0:
        raise GraphFormatError(f"{p}: communication matrix must be square, got {rows}x{cols}")
    limit.check(rows, str(p), "shape declares")
    cls = {"csr": sp.csr_matrix, "csc": sp.csc_matrix, "bsr": sp.bsr_matrix}[fmt]
    try:
        a = cls((array("data"), array("indices"), array("indptr")), shape=(rows, cols))
    except (ValueError, TypeError, IndexError) as exc:
        raise GraphFormatError(f"{p}: not a valid {fmt} matrix: {exc}") from None
    return CommGraph.from_matrix(a, directed=True, source=str(p))


def _npy_header(p: Path, zf: zipfile.ZipFile, info: zipfile.ZipInfo
                ) -> tuple[tuple[int, ...], np.dtype] | None:
    """Shape and dtype of an .npy member, read without decompressing its data.

    None for a member that is not an .npy array.  The declared data must fit in the
    member's uncompressed size, so reading the array later allocates no more than that.
    """
    try:
        with zf.open(info) as fh:
            head = fh.read(12)
            if not head.startswith(np.lib.format.MAGIC_PREFIX):
                return None
            version = tuple(head[6:8])
            if version == (1, 0) and len(head) >= 10:
                start, hlen = 10, struct.unpack_from("<H", head, 8)[0]
            elif version == (2, 0) and len(head) >= 12:
                start, hlen = 12, struct.unpack_from("<I", head, 8)[0]
            else:
                raise GraphFormatError(f"{p}: member {info.filename}: unsupported .npy "
                                       f"version {version}")
            if hlen > _NPY_MAX_HEADER:
                raise GraphFormatError(f"{p}: member {info.filename}: .npy header of {hlen} "
                                       f"bytes")
            fh.seek(0)
            np.lib.format.read_magic(fh)
            read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                           else np.lib.format.read_array_header_2_0)
            shape, _fortran, dtype = read_header(fh)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
        raise GraphFormatError(f"{p}: member {info.filename}: {exc}") from None
    if dtype.hasobject:
        raise GraphFormatError(f"{p}: member {info.filename}: object arrays are not allowed")
    if any(d < 0 for d in shape):
        raise GraphFormatError(f"{p}: member {info.filename}: negative dimension in {shape}")
    count = math.prod(shape)
    room = info.file_size - start - hlen
    if count * dtype.itemsize > room:
        raise GraphFormatError(f"{p}: member {info.filename} declares {count} entries of "
                               f"{dtype.itemsize} bytes, but holds only {max(room, 0)} bytes")
    return shape, dtype


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
