"""Mesh and torus hop matrices of any dimension (2D and 3D are the usual cases).

Node slot ``a`` sits at coordinate ``np.unravel_index(a, dims)`` (C order: the last
dimension varies fastest).  With dimension-order (or any minimal) routing the hop count
is the Manhattan distance on a mesh and the per-dimension wrap-around minimum
``min(|x - y|, L - |x - y|)`` summed over dimensions on a torus.  O(N² · dims) time and
O(N²) memory for N = prod(dims) nodes (numpy broadcasting, one dimension at a time).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..machine import MachineError


def _dims(dims: Sequence[int], what: str) -> tuple[int, ...]:
    out = tuple(int(d) for d in dims)
    if not out or min(out) < 1:
        raise MachineError(f"{what} dimensions must be positive integers, got {list(dims)}")
    return out


def _grid_hops(dims: tuple[int, ...], wrap: bool) -> np.ndarray:
    n = int(np.prod(dims))
    coords = np.unravel_index(np.arange(n), dims)
    hops = np.zeros((n, n), dtype=np.int64)
    for length, x in zip(dims, coords, strict=True):
        d = np.abs(x[:, None] - x[None, :])
        hops += np.minimum(d, length - d) if wrap else d
    return hops


def mesh_hops(dims: Sequence[int]) -> np.ndarray:
    """Hop matrix of a mesh with ``dims`` routers per dimension (one node per router)."""
    return _grid_hops(_dims(dims, "mesh"), wrap=False)


def torus_hops(dims: Sequence[int]) -> np.ndarray:
    """Hop matrix of a torus (wrap-around links in every dimension)."""
    return _grid_hops(_dims(dims, "torus"), wrap=True)
