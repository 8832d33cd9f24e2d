"""What every graph file reader shares: the error, the size limit, byte scans.

Every reader (:mod:`.metis_file`, :mod:`.mtx_file`, :mod:`.csv_file`, :mod:`.npz_file`)
returns a :class:`~mapper.model.graph.CommGraph` or raises :class:`GraphFormatError` whose
message starts with ``file:line:``.  Files may be hostile (the Slurm worker reads
users' profiles): every size a file declares (headers, indices, ``.npy`` shapes) is
checked against a :class:`SizeLimit` before anything of that size is allocated.  The
byte tables let a reader check a whole text for allowed characters, or count its
words, without a Python object per word.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model.graph import GraphError


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


def byte_table(chars: bytes) -> np.ndarray:
    """A 256-entry table, True for the bytes in ``chars``."""
    table = np.zeros(256, dtype=bool)
    table[np.frombuffer(chars, dtype=np.uint8)] = True
    return table


#: the ASCII blanks that separate words
BLANK_BYTES = b" \t\n\v\f"
IS_BLANK = byte_table(BLANK_BYTES)


def first_byte_not_in(data: bytes, allowed: np.ndarray) -> int | None:
    """Offset of the first byte of ``data`` that ``allowed`` (a :func:`byte_table`)
    does not hold, None if there is none."""
    bad = np.flatnonzero(~allowed[np.frombuffer(data, dtype=np.uint8)])
    return int(bad[0]) if len(bad) else None


def count_tokens(data: bytes) -> int:
    """Number of blank-separated words in ``data`` (a word starts after a blank)."""
    if not data:
        return 0
    blank = IS_BLANK[np.frombuffer(data, dtype=np.uint8)]
    return int(not blank[0]) + int(np.count_nonzero(blank[:-1] & ~blank[1:]))
