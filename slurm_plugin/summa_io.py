"""Files of ``rankmap summa``: per-rank speeds and groups in, the arrangement out.

Speeds file: one relative speed (a positive number) per rank, line r for rank r;
groups file: one group id (any word without blanks) per rank.  In both, ``#`` starts
a comment and blank lines are skipped.

Arrangement file (a fixed contract: bench/summa's C program reads it)::

    # rankmap summa arrangement: <free text>
    <nranks> <N>
    <rank> <column> <position> <row_offset> <col_offset> <height> <width>

one line per rank in rank order, all integers, 0-based; lines starting with ``#`` are
comments anywhere.  The rectangles tile the N x N matrix exactly (checked on read).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mapper.errors import RankmapError
from mapper.summa.partition import ColumnLayout, PartitionError, build_layout
from mapper.text_lines import content_lines, iter_content_lines

FIELDS = ("rank", "column", "position", "row_offset", "col_offset", "height", "width")


class SummaFileError(RankmapError, ValueError):
    """A speeds, groups or arrangement file that cannot be used (names file:line)."""


def _read(path: str | Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SummaFileError(f"{path}: no such file", source=str(path)) from None
    except UnicodeDecodeError:
        raise SummaFileError(f"{path}: not a UTF-8 text file", source=str(path)) from None


def _data_lines(path: str | Path) -> list[tuple[int, str]]:
    return content_lines(_read(path))


def _fail(path, no: int, msg: str) -> SummaFileError:
    return SummaFileError(f"{path}:{no}: {msg}", source=str(path), line=no)


def parse_speeds(text: str, source: str, expected: int | None = None) -> np.ndarray:
    """Relative speed per rank (float64, all finite and > 0) from the speeds format:
    line r the speed of rank r, ``#`` comments and blank lines skipped.  Errors name
    ``source:line``.

    ``expected`` (the job's task count): a speed beyond it is refused at its line as
    soon as it is read, before the rest of the file is split into lines (a 66 MB file
    of ``1`` lines took the prolog's worker to 3.7 GB when it was counted at the end);
    fewer speeds are the caller's to refuse.
    """
    values: list[float] = []
    for no, body in iter_content_lines(text):
        if expected is not None and len(values) == expected:
            raise _fail(source, no, f"more than {expected} speeds: the job has {expected} "
                                    f"tasks (one line per rank)")
        try:
            (token,) = body.split()
            v = float(token)
        except ValueError:
            raise _fail(source, no, f"expected one number (the speed of rank "
                                    f"{len(values)}), got {body!r}") from None
        if not np.isfinite(v) or v <= 0:
            raise _fail(source, no, f"speed of rank {len(values)} must be positive, got {body}")
        values.append(v)
    if not values:
        raise SummaFileError(f"{source}: no speeds (one number per line, rank 0 first)",
                             source=str(source))
    return np.array(values)


def read_speeds(path: str | Path, expected: int | None = None) -> np.ndarray:
    """:func:`parse_speeds` of a file."""
    return parse_speeds(_read(path), str(path), expected)


def read_groups(path: str | Path, nranks: int | None = None) -> np.ndarray:
    """Group id per rank, renumbered 0.. in order of first appearance; with ``nranks``,
    exactly that many (a line beyond them is refused as soon as it is read)."""
    names: dict[str, int] = {}
    ids: list[int] = []
    for no, body in iter_content_lines(_read(path)):
        if nranks is not None and len(ids) == nranks:
            raise _fail(path, no, f"more than {nranks} groups for {nranks} ranks (one line "
                                  f"per rank, as in the speeds file)")
        words = body.split()
        if len(words) != 1:
            raise _fail(path, no, f"expected one group id (of rank {len(ids)}), got {body!r}")
        ids.append(names.setdefault(words[0], len(names)))
    if nranks is not None and len(ids) != nranks:
        raise SummaFileError(f"{path}: {len(ids)} groups for {nranks} ranks (one line per "
                             f"rank, as in the speeds file)", source=str(path))
    return np.array(ids, dtype=np.int64)


def format_arrangement(layout: ColumnLayout, comment: str = "") -> str:
    """The arrangement file's text."""
    text = " ".join(comment.split())  # one line whatever the caller passed
    head = f"# rankmap summa arrangement: {text}".rstrip()
    table = np.stack([np.arange(layout.n), layout.column, layout.position,
                      layout.row_offset, layout.col_offset, layout.height, layout.width],
                     axis=1)
    rows = "\n".join(" ".join(map(str, row)) for row in table.tolist())
    # one comment line only, as in the contract's example: readers skip '#' lines
    # anywhere, but a simple reader should not need to
    return f"{head}\n{layout.n} {layout.size}\n{rows}\n"


def write_arrangement(path: str | Path, layout: ColumnLayout, comment: str = "") -> None:
    """Write ``layout`` as an arrangement file."""
    Path(path).write_text(format_arrangement(layout, comment), encoding="utf-8")


def read_arrangement(path: str | Path) -> ColumnLayout:
    """Read and check an arrangement file (rank order, exact tiling)."""
    lines = _data_lines(path)
    if not lines:
        raise SummaFileError(f"{path}: empty arrangement file", source=str(path))
    no, body = lines[0]
    try:
        nranks, size = (int(x) for x in body.split())
    except ValueError:
        raise _fail(path, no, f"expected '<nranks> <N>', got {body!r}") from None
    if nranks < 1 or size < 1:
        raise _fail(path, no, "nranks and N must be positive")
    rows = lines[1:]
    if len(rows) != nranks:
        where = rows[nranks][0] if len(rows) > nranks else (rows[-1][0] if rows else no)
        raise _fail(path, where, f"{len(rows)} rank lines, the header says {nranks}")
    table = np.empty((nranks, len(FIELDS)), dtype=np.int64)
    for r, (no, body) in enumerate(rows):
        try:
            values = [int(x) for x in body.split()]
        except ValueError:
            values = []
        if len(values) != len(FIELDS):
            raise _fail(path, no, f"expected {len(FIELDS)} integers ({' '.join(FIELDS)}), "
                                  f"got {body!r}")
        if values[0] != r:
            raise _fail(path, no, f"expected rank {r} (lines in rank order), got {values[0]}")
        if min(values) < 0:
            raise _fail(path, no, "negative value")
        table[r] = values
    rank_line = {r: no for r, (no, _) in enumerate(rows)}
    column, position = table[:, 1], table[:, 2]
    ncol = int(column.max()) + 1
    widths = np.zeros(ncol, dtype=np.int64)
    columns = []
    for j in range(ncol):
        ranks = np.flatnonzero(column == j)
        if len(ranks) == 0:
            raise SummaFileError(f"{path}: column {j} has no rank (columns must be 0..{ncol - 1})",
                                 source=str(path))
        ranks = ranks[np.argsort(position[ranks], kind="stable")]
        if not np.array_equal(position[ranks], np.arange(len(ranks))):
            raise _fail(path, rank_line[int(ranks[0])],
                        f"positions in column {j} must be 0..{len(ranks) - 1}")
        w = table[ranks, 6]
        if np.any(w != w[0]):
            bad = int(ranks[np.flatnonzero(w != w[0])[0]])
            raise _fail(path, rank_line[bad], f"rank {bad}: width {int(table[bad, 6])} differs "
                                              f"from column {j}'s width {int(w[0])}")
        widths[j] = w[0]
        columns.append(ranks)
    try:
        layout = build_layout(columns, table[:, 5], widths, size)
    except PartitionError as exc:
        raise SummaFileError(f"{path}: the rectangles do not tile the {size} x {size} "
                             f"matrix: {exc}", source=str(path)) from None
    for k, name in ((3, "row_offset"), (4, "col_offset")):
        got = getattr(layout, name)
        if np.any(got != table[:, k]):
            bad = int(np.flatnonzero(got != table[:, k])[0])
            raise _fail(path, rank_line[bad], f"rank {bad}: {name} {int(table[bad, k])}, "
                                              f"expected {int(got[bad])} (rectangles must tile "
                                              f"the matrix)")
    return layout
