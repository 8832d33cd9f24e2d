"""Distance matrix files: an explicit n x n machine (``rankmap map --distance-matrix``).

Text: one row per line, numbers separated by blanks, ``#`` starts a comment and blank
lines are skipped; or a ``.npy`` array (read without pickles).  The matrix must be a
:class:`~mapper.model.machine.DistanceMatrix` (square, symmetric, zero diagonal, finite
entries >= 0).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import RankmapError
from ..model.machine import DistanceMatrix, MachineError


class DistanceMatrixFileError(RankmapError, ValueError):
    """A distance matrix file that cannot be used; the message names the file (and
    line)."""


def read_distance_matrix(path: str) -> DistanceMatrix:
    """An explicit distance matrix from text (rows of numbers) or ``.npy``."""
    try:
        if path.endswith(".npy"):
            matrix = np.load(path, allow_pickle=False)
        else:
            rows = []
            for no, line in enumerate(Path(path).read_text().splitlines(), 1):
                text = line.split("#", 1)[0].split()
                if not text:
                    continue
                try:
                    rows.append([float(x) for x in text])
                except ValueError:
                    raise DistanceMatrixFileError(f"{path}:{no}: expected numbers") from None
                if len(rows[-1]) != len(rows[0]):
                    raise DistanceMatrixFileError(f"{path}:{no}: {len(rows[-1])} entries, the "
                                                  f"first row has {len(rows[0])}")
            matrix = np.array(rows)
    except OSError as exc:
        raise DistanceMatrixFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        return DistanceMatrix(matrix)
    except MachineError as exc:
        raise DistanceMatrixFileError(f"{path}: {exc}") from None
