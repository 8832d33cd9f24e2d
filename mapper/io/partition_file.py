"""Partition files (METIS's ``part`` format): line v holds the rank owning mesh vertex v.

``rankmap partition`` writes one (and its placement, one PE per line, the same way:
:func:`write_lines`); ``rankmap evaluate-partition`` reads one
(:func:`read_partition_file`), where ``#`` starts a comment and blank lines are skipped.
A job of ``--comm-profile=mesh:NAME`` gets the same format as ``partition`` in its job
directory (slurm_plugin.modes.mesh_job).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..errors import RankmapError
from .graph_file import read_input_text
from .text_lines import content_lines


class PartitionFileError(RankmapError, ValueError):
    """A partition file that cannot be used; the message names the file and line."""


def read_partition_file(path: str, n: int, nranks: int) -> np.ndarray:
    """The rank of each of ``n`` mesh vertices from a partition file; ranks in
    0..nranks-1.  Errors name ``path:line``.  O(file size): one ``split`` per line,
    the numbers converted and checked by numpy."""
    lines = content_lines(read_input_text(path, None, "a partition file"))
    if len(lines) != n:
        where = lines[n][0] if len(lines) > n else (lines[-1][0] + 1 if lines else 1)
        raise PartitionFileError(f"{path}:{where}: the mesh has {n} vertices but the "
                                 f"partition file has {len(lines)} lines",
                                 source=path, line=where)
    lineno = np.fromiter((no for no, _ in lines), dtype=np.int64, count=n)
    bodies = [body for _, body in lines]
    try:
        part = np.array(bodies, dtype=np.int64)
    except (ValueError, OverflowError):
        part = None
    if part is None or part.shape != (n,):
        for no, body in lines:  # the rare path: which line is it
            if not _is_int(body):
                raise PartitionFileError(f"{path}:{no}: expected one rank (a whole number), "
                                         f"got {body!r}", source=path, line=no) from None
        raise PartitionFileError(f"{path}: cannot read the ranks", source=path)
    bad = np.flatnonzero((part < 0) | (part >= nranks))
    if len(bad):
        i = int(bad[0])
        raise PartitionFileError(f"{path}:{lineno[i]}: rank {part[i]} of vertex {i} is "
                                 f"outside 0..{nranks - 1} (the machine has {nranks} PEs)",
                                 source=path, line=int(lineno[i]))
    return part


def _is_int(text: str) -> bool:
    try:
        value = int(text)
    except ValueError:
        return False
    return -(2 ** 63) <= value < 2 ** 63


def write_lines(path: str | os.PathLike, values: np.ndarray) -> None:
    """One integer per line (the partition file, the placement)."""
    Path(path).write_text("\n".join(map(str, values.tolist())) + "\n" if len(values) else "")
