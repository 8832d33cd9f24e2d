"""Hop-bytes: volume times network hops, the metric OHTMA minimises (Li et al. 2020).

hop-bytes = Σ over undirected edges {u, v} of C_uv · hops(π(u), π(v)) — J with the
hop matrix as distance, each edge counted once.  Also reported: the largest hop count
any communicating pair crosses and the mean hops per byte (hop-bytes / total volume).
Defined for machines that carry hop counts: an explicit distance matrix (read as hops)
and :class:`~mapper.model.networks.NodeHopMachine` (node hops, 0 inside a node).  O(m).

Reference: Li, Chen, Liu, Yang, Gong, Gan, Li & Xu, OHTMA: an optimized heuristic
topology-aware mapping algorithm on the Tianhe-3 exascale supercomputer prototype.
Front. Inform. Technol. Electron. Eng. 21(6):939-949 (2020), doi:10.1631/FITEE.1900075.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model.graph import CommGraph
from ..model.machine import DistanceMatrix
from ..model.networks import NodeHopMachine


@dataclass(frozen=True)
class HopBytes:
    """Hop-bytes of a mapping and the hops its traffic crosses."""

    total: float
    max_hops: float
    mean_hops_per_byte: float

    def as_dict(self) -> dict:
        return {"hop_bytes": self.total, "max_hops": self.max_hops,
                "mean_hops_per_byte": self.mean_hops_per_byte}


def has_hops(machine) -> bool:
    """True when the machine's distances are (or contain) network hop counts."""
    return isinstance(machine, (DistanceMatrix, NodeHopMachine))


def hop_bytes(graph: CommGraph, machine, mapping: np.ndarray) -> HopBytes:
    """Hop-bytes of ``mapping`` (rank → PE); TypeError for a machine without hops."""
    u, v, w = graph.edges()
    pi = np.asarray(mapping, dtype=np.int64)
    if isinstance(machine, NodeHopMachine):
        hops = machine.hop_count(pi[u], pi[v])
    elif isinstance(machine, DistanceMatrix):
        hops = machine.distance(pi[u], pi[v])
    else:
        raise TypeError(f"{type(machine).__name__} has no hop counts")
    total = float(np.dot(w, hops))
    volume = float(w.sum())
    busy = hops[w > 0]
    return HopBytes(total, float(busy.max()) if len(busy) else 0.0,
                    total / volume if volume > 0 else 0.0)
