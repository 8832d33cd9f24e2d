"""Which slot of a generated (or read) hop matrix each allocated node occupies."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..machine import MachineError


def restrict_hops(hops: np.ndarray, slots: Sequence[int] | np.ndarray) -> np.ndarray:
    """The hop matrix of the allocated nodes: ``hops[slots][:, slots]``.

    ``slots[i]`` is the slot (row of ``hops``) of the job's i-th node, from a node →
    coordinate file or from node-name order (``range(len(nodes))``).  Distinct slots
    only.  O(len(slots)²).
    """
    s = np.asarray(slots, dtype=np.int64)
    n = hops.shape[0]
    if s.ndim != 1 or (len(s) and (s.min() < 0 or s.max() >= n)):
        raise MachineError(f"node slots must be integers in 0..{n - 1}")
    if len(np.unique(s)) != len(s):
        dup = int(np.flatnonzero(np.bincount(s) > 1)[0])
        raise MachineError(f"slot {dup} is given to more than one node")
    return np.ascontiguousarray(hops[np.ix_(s, s)])
