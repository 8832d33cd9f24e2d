"""The Tianhe-3 prototype layout (Li et al. 2020, Fig. 1).

Compute nodes sit in chips; chips form a grid of rows and columns.  The figure
distinguishes three cases for two distinct compute nodes: (b) in the same chip, (c) in
chips of the same row or column, (d) in different rows and columns.  The seed's text
names the three cases but the hop counts themselves are only drawn in the figure, which
the text does not carry; the defaults :data:`TIANHE3_DEFAULT_HOPS` = (1, 2, 3) count
one hop through the chip's router, one more for a row/column link and one more for the
second dimension (a router grid whose rows and columns are fully connected).  Sites
with the real numbers pass them as ``hops``.

Slot order: ``((row * cols) + col) * nodes_per_chip + k``.  O(N²) time and memory.
The same machine as links and routes, for the link check:
:func:`mapper.objectives.link_load.tianhe3_network`.

Reference: Li, Chen, Liu, Yang, Gong, Gan, Li & Xu, OHTMA: an optimized heuristic
topology-aware mapping algorithm on the Tianhe-3 exascale supercomputer prototype.
Front. Inform. Technol. Electron. Eng. 21(6):939-949 (2020), doi:10.1631/FITEE.1900075.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..machine import MachineError

#: Hop counts (same chip, same row or column, otherwise); see the module docstring.
TIANHE3_DEFAULT_HOPS = (1, 2, 3)


def tianhe3_hops(rows: int, cols: int, nodes_per_chip: int,
                 hops: Sequence[int] = TIANHE3_DEFAULT_HOPS) -> np.ndarray:
    """Hop matrix of ``rows × cols`` chips holding ``nodes_per_chip`` nodes each."""
    if min(rows, cols, nodes_per_chip) < 1:
        raise MachineError(f"tianhe3 needs positive rows, cols and nodes per chip, got "
                           f"{rows}, {cols}, {nodes_per_chip}")
    same_chip, same_line, other = (int(h) for h in hops)
    if not 0 <= same_chip <= same_line <= other:
        raise MachineError(f"tianhe3 hops must be 0 <= same chip <= same row/column <= "
                           f"other, got {list(hops)}")
    n = rows * cols * nodes_per_chip
    chip = np.arange(n) // nodes_per_chip
    row, col = chip // cols, chip % cols
    h = np.full((n, n), other, dtype=np.int64)
    h[(row[:, None] == row[None, :]) | (col[:, None] == col[None, :])] = same_line
    h[chip[:, None] == chip[None, :]] = same_chip
    np.fill_diagonal(h, 0)
    return h
