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
The same format is ``rankmap summa --layout``'s input (a layout a code already uses, or
the slides' worked example in slurm_plugin/data/summa-example): reading stops at the
first bad line or at the first rank line beyond the header's count, and an overlap or a
gap is named at the line of the rectangle (or column) where it starts.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import RankmapError
from ..summa.tiling import ColumnLayout, TilingError, build_column_layout
from .text_lines import iter_content_lines

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


def parse_arrangement(text: str, source: str, expected: int | None = None,
                      like: ColumnLayout | None = None) -> ColumnLayout:
    """The layout of an arrangement file's text (the module docstring's format), checked
    line by line; errors name ``source:line`` (:class:`SummaFileError`).

    The header's rank count bounds the reading: a rank line beyond it is refused as soon
    as it is met, before the rest of the text is split into lines, and the first bad
    line is the one reported.  ``expected``: the header must say that many ranks (a
    job's task count).  ``like``: the file must hold the same rectangles as this layout,
    only restacked inside their columns or with whole columns exchanged (what an
    arrangement may do); it implies ``expected``.

    Tiling (every element of the N x N matrix in exactly one rectangle) is checked
    column by column, so that an overlap or a gap names the line of the rectangle where
    it starts; :func:`mapper.summa.tiling.build_column_layout` then builds the layout with
    its own check.  O(p log p) for p ranks.
    """
    if like is not None:
        expected = like.n
    lines = iter_content_lines(text)
    first = next(lines, None)
    if first is None:
        raise SummaFileError(f"{source}: empty arrangement file (a '<nranks> <N>' line, then "
                             f"one line per rank)", source=str(source))
    head, body = first
    try:
        nranks, size = (int(x) for x in body.split())
    except ValueError:
        raise _fail(source, head, f"expected '<nranks> <N>', got {body!r}") from None
    if nranks < 1 or size < 1:
        raise _fail(source, head, "nranks and N must be positive")
    if expected is not None and nranks != expected:
        raise _fail(source, head, f"the header says {nranks} ranks, expected {expected}")
    if like is not None and size != like.size:
        raise _fail(source, head, f"N = {size}, the layout's is {like.size}")
    rows: list[list[int]] = []
    rank_line: list[int] = []
    for no, body in lines:
        r = len(rows)
        if r == nranks:
            raise _fail(source, no, f"more than {nranks} rank lines, the header says {nranks}")
        try:
            values = [int(x) for x in body.split()]
        except ValueError:
            values = []
        if len(values) != len(FIELDS):
            raise _fail(source, no, f"expected {len(FIELDS)} integers ({' '.join(FIELDS)}), "
                                    f"got {body!r}")
        _check_rank_line(values, r, nranks, size, like, lambda msg, no=no: _fail(source, no, msg))
        rows.append(values)
        rank_line.append(no)
    if len(rows) < nranks:
        raise _fail(source, rank_line[-1] if rank_line else head,
                    f"{len(rows)} rank lines, the header says {nranks}")
    table = np.array(rows, dtype=np.int64)
    layout = _tiling(table, size, rank_line, source)
    if like is not None:
        _same_rectangles(layout, like, rank_line, source)
    return layout


def _check_rank_line(values: list[int], r: int, nranks: int, size: int,
                     like: ColumnLayout | None, fail) -> None:
    """The checks one rank line allows on its own."""
    rank, column, _, row_offset, col_offset, height, width = values
    if rank != r:
        raise fail(f"expected rank {r} (lines in rank order), got {rank}")
    if min(values) < 0:
        raise fail("negative value")
    if height < 1 or width < 1:
        raise fail(f"rank {r}: height and width must be at least 1")
    if column >= nranks:
        raise fail(f"rank {r}: column {column}, but {nranks} ranks have at most columns "
                   f"0..{nranks - 1}")
    if row_offset + height > size:
        raise fail(f"rank {r}: rows {row_offset}..{row_offset + height - 1} end below the "
                   f"{size} x {size} matrix")
    if col_offset + width > size:
        raise fail(f"rank {r}: columns {col_offset}..{col_offset + width - 1} end right of "
                   f"the {size} x {size} matrix")
    if like is not None:
        for name, got, want in (("height", height, like.height[r]),
                                ("width", width, like.width[r])):
            if got != want:
                raise fail(f"rank {r}: {name} {got}, the layout's is {int(want)} (an "
                           f"arrangement keeps every rectangle)")


def _tiling(table: np.ndarray, size: int, rank_line: list[int], source) -> ColumnLayout:
    """The layout of a table of rank lines whose rectangles must tile the matrix: the
    first overlap or gap is named at the line of the rectangle (or column) where it
    starts."""

    def fail(rank: int, msg: str) -> SummaFileError:
        return _fail(source, rank_line[rank], msg)

    column, position = table[:, 1], table[:, 2]
    row_offset, col_offset, height, width = table[:, 3], table[:, 4], table[:, 5], table[:, 6]
    ncol = int(column.max()) + 1
    order = np.lexsort((position, column))  # column by column, top to bottom
    bounds = np.searchsorted(column[order], np.arange(ncol + 1))
    columns = []
    widths = np.zeros(ncol, dtype=np.int64)
    x = 0  # where column j must start: the right edge of column j - 1
    for j in range(ncol):
        ranks = order[bounds[j]:bounds[j + 1]]
        if len(ranks) == 0:
            r = int(np.flatnonzero(column > j).min())
            raise fail(r, f"rank {r} is in column {int(column[r])}, but column {j} has no "
                          f"rectangle (columns are numbered 0..c-1 left to right)")
        beyond = ranks[position[ranks] >= len(ranks)]
        if len(beyond):
            r = int(beyond.min())
            raise fail(r, f"rank {r}: position {int(position[r])}, but column {j} holds "
                          f"{len(ranks)} rectangles (positions 0..{len(ranks) - 1})")
        dup = np.flatnonzero(position[ranks][1:] == position[ranks][:-1])
        if len(dup):
            a, b = sorted((int(ranks[dup[0]]), int(ranks[dup[0] + 1])))
            raise fail(b, f"rank {b}: position {int(position[b])} in column {j}, as rank {a} "
                          f"(line {rank_line[a]})")
        w = width[ranks[0]]
        if np.any(width[ranks] != w):
            bad = int(ranks[np.flatnonzero(width[ranks] != w)[0]])
            raise fail(bad, f"rank {bad}: width {int(width[bad])} differs from column {j}'s "
                            f"width {int(w)}")
        off = col_offset[ranks]
        if np.any(off != x):
            if np.all(off == off[0]):  # the whole column is elsewhere
                first = int(ranks.min())
                span = f"column {j} (columns {int(off[0])}..{int(off[0] + w - 1)})"
                if off[0] < x:
                    prev = order[bounds[j - 1]]
                    raise fail(first, f"{span} overlaps column {j - 1} (columns "
                                      f"{int(col_offset[prev])}..{x - 1})")
                raise fail(first, f"{span} leaves columns {x}..{int(off[0]) - 1} uncovered")
            bad = int(ranks[np.flatnonzero(off != x)].min())
            raise fail(bad, f"rank {bad}: col_offset {int(col_offset[bad])}, column {j}'s "
                            f"other rectangles start at {x}")
        tops = row_offset[ranks]
        ends = tops + height[ranks]  # one past each rectangle's last row
        want = np.concatenate([[0], ends[:-1]])  # each must start where the one above ends
        off = np.flatnonzero(tops != want)
        if len(off):
            k = int(off[0])
            r, top, y = int(ranks[k]), int(tops[k]), int(want[k])
            span = f"rank {r} (rows {top}..{int(ends[k]) - 1} of column {j})"
            if top < y:
                above = int(ranks[k - 1])
                raise fail(r, f"{span} overlaps rank {above} above it (rows "
                              f"{int(row_offset[above])}..{y - 1})")
            raise fail(r, f"{span} leaves rows {y}..{top - 1} above it uncovered")
        if ends[-1] < size:
            last, y = int(ranks[-1]), int(ends[-1])
            raise fail(last, f"rank {last} ends at row {y - 1}: rows {y}..{size - 1} of column "
                             f"{j} are uncovered")
        widths[j] = w
        columns.append(ranks)
        x += int(w)
    if x < size:
        first = int(columns[-1].min())
        raise fail(first, f"column {ncol - 1} (columns {x - int(widths[-1])}..{x - 1}) ends "
                          f"before the matrix's right edge: columns {x}..{size - 1} are "
                          f"uncovered")
    try:  # the library's own check (the above leaves nothing for it to find)
        layout = build_column_layout(columns, height, widths, size)
    except TilingError as exc:
        raise SummaFileError(f"{source}: the rectangles do not tile the {size} x {size} "
                             f"matrix: {exc}", source=str(source)) from None
    for k, name in ((3, "row_offset"), (4, "col_offset")):
        got = getattr(layout, name)
        if np.any(got != table[:, k]):
            bad = int(np.flatnonzero(got != table[:, k])[0])
            raise fail(bad, f"rank {bad}: {name} {int(table[bad, k])}, expected "
                            f"{int(got[bad])} (rectangles must tile the matrix)")
    return layout


def _same_rectangles(layout: ColumnLayout, like: ColumnLayout, rank_line: list[int],
                     source) -> None:
    """``layout`` (per-rank sizes already equal to ``like``'s) must group the ranks into
    columns as ``like`` does: an arrangement restacks a column or exchanges columns."""
    seen: dict[int, int] = {}   # column of layout -> its first rank
    taken: dict[int, int] = {}  # column of like -> the first rank of layout placed there
    for r in range(layout.n):
        here, there = int(layout.column[r]), int(like.column[r])
        if here not in seen:
            if there in taken:
                s = taken[there]
                raise _fail(source, rank_line[r],
                            f"rank {r} is in column {here} and rank {s} in column "
                            f"{int(layout.column[s])}, but they share column {there} in the "
                            f"layout (an arrangement only restacks the rectangles of a "
                            f"column or exchanges whole columns)")
            seen[here], taken[there] = r, r
        elif int(like.column[seen[here]]) != there:
            s = seen[here]
            raise _fail(source, rank_line[r],
                        f"rank {r} shares column {here} with rank {s}, but the layout has "
                        f"rank {r} in column {there} and rank {s} in column "
                        f"{int(like.column[s])} (an arrangement only restacks the "
                        f"rectangles of a column or exchanges whole columns)")


def read_arrangement(path: str | Path, expected: int | None = None,
                     like: ColumnLayout | None = None) -> ColumnLayout:
    """:func:`parse_arrangement` of a file."""
    return parse_arrangement(_read(path), str(path), expected, like)
