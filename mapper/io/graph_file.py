"""Reading a graph file of any format: the format from its suffix (or by name), the
file read safely, then the reader of that format.

* METIS ``.graph`` / ``.metis`` — :mod:`.metis_file`;
* Matrix Market ``.mtx`` — :mod:`.mtx_file`;
* CSV ``.csv`` (``src,dst,bytes``) — :mod:`.csv_file`;
* ``.npz`` (scipy sparse matrix or ``src``/``dst``/``weight`` arrays) — :mod:`.npz_file`.

Files may be hostile (the Slurm worker reads users' profiles): :func:`read_graph` reads
only regular files, at most ``max_bytes`` of them, and checks every declared size
(headers, indices, ``.npy`` shapes) against ``expected_n`` or the byte limit before
allocating.  Errors are :class:`~mapper.io.graph_format.GraphFormatError` naming
``file:line``.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..model.graph import CommGraph
from .csv_file import read_csv_text
from .graph_format import NO_LIMIT, GraphFormatError, SizeLimit
from .metis_file import read_metis_text
from .mtx_file import read_mtx_text
from .npz_file import read_npz
from .regular_file import FileTooLarge, NotARegularFile, read_regular_file


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
        return read_npz(p, data, max_bytes, limit)
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


def read_input_text(path: str | os.PathLike, max_bytes: int | None = None,
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
    """The profile's bytes (:func:`mapper.io.regular_file.read_regular_file`), with the
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
