"""The hardware information file of Sudhakar, Adhikari & Ramesh (§IV.A.2).

Line 1 holds the number of levels L, line 2 the L arities (children per node), root
first::

    3
    2 4 2

is a root with 2 children, each with 4 children, each with 2 PEs (16 PEs).  ``#``
starts a comment; blank lines are skipped.  The file says nothing about distances:
:func:`hierarchy_from_arities` uses tree hops (two PEs whose smallest shared group is
i levels above them are 2i links apart) unless the caller gives distances.

Text in, text out: reading and writing files is the caller's job.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..errors import RankmapError
from ..model.machine import Hierarchy, MachineError
from .text_lines import iter_content_lines


class ArityFileError(RankmapError, ValueError):
    """A hardware information file that does not parse; the message names file:line."""


def parse_arity_file(text: str, source: str = "<arity file>",
                     max_pes: int | None = None) -> list[int]:
    """Arities, root first, from the file's text.

    The file has two lines that say something: reading stops at a third (refused at
    its line) without splitting the rest.  ``max_pes`` (the ranks there are to place):
    arities that make more PEs are refused here, before a machine of that size is
    built (1000 1000 1000 asked for an 11 GiB array).
    """
    lines: list[tuple[int, list[str]]] = []
    for no, body in iter_content_lines(text):
        if len(lines) == 2:
            raise ArityFileError(f"{source}:{no}: unexpected text after the arities",
                                 source=source, line=no)
        lines.append((no, body.split()))
    if not lines:
        raise ArityFileError(f"{source}: empty; expected the number of levels on line 1",
                             source=source)
    no, words = lines[0]
    levels = _whole(words[0]) if len(words) == 1 else None
    if levels is None or levels < 1:
        raise ArityFileError(f"{source}:{no}: expected the number of levels (a whole "
                             f"number >= 1), got {' '.join(words)!r}", source=source, line=no)
    if len(lines) < 2:
        raise ArityFileError(f"{source}: expected a second line with {levels} arities, "
                             f"root first", source=source, line=no)
    no, words = lines[1]
    if len(words) != levels:
        raise ArityFileError(f"{source}:{no}: {len(words)} arities, but line {lines[0][0]} "
                             f"says {levels} levels", source=source, line=no)
    arities = []
    for word in words:
        arity = _whole(word)
        if arity is None or arity < 1:
            raise ArityFileError(f"{source}:{no}: arity {word!r} is not a whole number >= 1",
                                 source=source, line=no)
        arities.append(arity)
    total = math.prod(arities)
    if max_pes is not None and total > max_pes:
        raise ArityFileError(f"{source}:{no}: the arities make {total} PEs, more than the "
                             f"{max_pes} to place", source=source, line=no)
    return arities


def _whole(word: str) -> int | None:
    """``word`` as a whole number, None if it is not one (``²`` is a digit to
    ``str.isdigit`` but not to ``int``, and ``int`` refuses more than 4300 digits)."""
    if not word.isdigit():
        return None
    try:
        return int(word)
    except ValueError:
        return None


def format_arity_file(arities: Sequence[int]) -> str:
    """The file's text for ``arities`` (root first)."""
    if not arities or min(arities) < 1:
        raise ArityFileError(f"arities must be whole numbers >= 1, got {list(arities)}")
    return f"{len(arities)}\n{' '.join(str(int(a)) for a in arities)}\n"


def hierarchy_from_arities(arities: Sequence[int],
                           distances: Sequence[float] | None = None) -> Hierarchy:
    """The machine of an arity list (root first); ``distances`` innermost first, tree
    hops 2, 4, … by default."""
    fan = [int(a) for a in reversed(arities)]  # Hierarchy counts innermost first
    if distances is None:
        distances = [2.0 * (i + 1) for i in range(len(fan))]
    return Hierarchy.homogeneous(fan, distances)


def arities_of(machine: Hierarchy) -> list[int]:
    """Arities, root first, of a homogeneous hierarchy (the file cannot say more)."""
    if not machine.is_homogeneous:
        raise MachineError(f"the hardware information file needs equal groups per level; "
                           f"this machine is {machine.describe()}")
    fan = [int(np.diff(machine.bounds[0])[0])] + [
        (len(machine.bounds[i - 1]) - 1) // (len(machine.bounds[i]) - 1)
        for i in range(1, machine.levels)]
    return fan[::-1]
