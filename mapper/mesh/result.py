"""The result every mesh partitioner returns (bad requests raise
:class:`mapper.partitioners.errors.PartitionError`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Partition:
    """A k-way partition of a mesh.

    Attributes
    ----------
    part:
        Block of every vertex, ``int64``, values in ``0..k-1``.
    k:
        Number of blocks (for ``rms`` the number of PEs; block id = PE id).
    method:
        Name of the method that produced it (:mod:`mapper.mesh.method_names`), e.g. ``"rb"``.
    seconds:
        Wall time per phase, e.g. ``{"partition": 3.1, "repair": 0.2, "total": 3.4}``.
    """

    part: np.ndarray
    k: int
    method: str
    seconds: dict[str, float] = field(default_factory=dict)

    def block_weights(self, vertex_weights: np.ndarray) -> np.ndarray:
        """Total vertex weight of every block (length k)."""
        return np.bincount(self.part, weights=vertex_weights, minlength=self.k)
