"""Integer weights for the 32-bit partitioners, and blocks by weight when one refuses.

METIS and KaHIP take integer vertex and edge weights whose sums must fit in 32 bits:
:func:`metis_weights` (edges) and :func:`integer_vertex_weights` (vertices) scale
float volumes and work into that range keeping their proportions.
:func:`blocks_by_weight` cuts the vertices in their own order into blocks of the target
fractions of the total weight: the start the mesh partitioners' balance repair works
from when a partitioner refuses an input.
"""

from __future__ import annotations

import numpy as np

# METIS takes 32-bit integer edge weights; scale volumes into this range.
_METIS_WEIGHT_SCALE = 1 << 20
_METIS_TOTAL_LIMIT = 1 << 30
_VERTEX_WEIGHT_MAX = 1 << 20
_VERTEX_TOTAL_LIMIT = 1 << 30


def metis_weights(weights: np.ndarray) -> np.ndarray:
    """Integer edge weights ≥ 1 that keep the volumes' proportions for METIS."""
    if len(weights) == 0:
        return np.zeros(0, dtype=np.int64)
    from . import _refine

    wmax = float(weights.max())
    scale = min(_METIS_WEIGHT_SCALE / wmax, _METIS_TOTAL_LIMIT / max(float(weights.sum()), 1.0))
    return _refine.scaled_weights(np.ascontiguousarray(weights, dtype=np.float64), scale)


def integer_vertex_weights(weights: np.ndarray) -> np.ndarray:
    """Integer vertex weights ≥ 1 that keep the proportions of ``weights`` (> 0).

    Equal weights become 1; otherwise the largest weight maps to at most 2^20 and the
    total to at most 2^30, so the 32-bit partitioners cannot overflow.
    """
    w = np.asarray(weights, dtype=np.float64)
    if len(w) == 0 or w.min() == w.max():
        return np.ones(len(w), dtype=np.int64)
    scale = min(_VERTEX_WEIGHT_MAX / float(w.max()), _VERTEX_TOTAL_LIMIT / float(w.sum()))
    return np.maximum(1, np.rint(w * scale)).astype(np.int64)


def blocks_by_weight(vweights: np.ndarray, fractions: np.ndarray) -> np.ndarray:
    """Blocks by cumulative weight in vertex order: used when a partitioner refuses."""
    cum = np.cumsum(vweights) - 0.5 * vweights
    edges = np.cumsum(fractions)[:-1] * float(vweights.sum())
    return np.searchsorted(edges, cum, side="right").astype(np.int64)
