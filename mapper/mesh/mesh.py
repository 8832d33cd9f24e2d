"""The computational mesh: a graph whose vertices carry computation and communication
weights (Moulitsas & Karypis, ICA3PP 2008, §2.1).

``w(v)`` is the work of vertex v (its cost on a PE is ``w*(p) x w(v)``) and ``c(v)``
the size of the data v sends to every other part that holds one of its neighbours;
both default to 1.  The graph is a :class:`mapper.model.graph.CommGraph` (symmetric CSR,
edge weights 1.0 when the file has none); edge weights only enter the edge cut.

Reference: I. Moulitsas, G. Karypis, Architecture Aware Partitioning Algorithms,
ICA3PP 2008, LNCS 5022, pp. 42-53, doi:10.1007/978-3-540-69501-1_6.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model.graph import CommGraph, GraphError


class MeshError(GraphError):
    """Vertex weights or sizes that do not fit the mesh; the message names the source."""


@dataclass(frozen=True, eq=False)
class Mesh:
    """A mesh graph with per-vertex work ``w`` and communication size ``c``.

    Attributes
    ----------
    graph:
        The adjacency, symmetric, edge weights as read (1.0 when absent).
    vertex_weights:
        ``w(v)``, float64, length n, every entry finite and > 0.
    comm_sizes:
        ``c(v)``, float64, length n, every entry finite and >= 0.
    source:
        Where the mesh came from, for messages.
    """

    graph: CommGraph
    vertex_weights: np.ndarray
    comm_sizes: np.ndarray
    source: str = "<mesh>"

    @property
    def n(self) -> int:
        """Number of vertices."""
        return self.graph.n

    @property
    def total_weight(self) -> float:
        """Sum of the vertex weights (the work to divide among the PEs)."""
        return float(self.vertex_weights.sum())


def mesh_from_graph(graph: CommGraph, vertex_weights: np.ndarray | None = None,
                    comm_sizes: np.ndarray | None = None, *,
                    source: str | None = None) -> Mesh:
    """A :class:`Mesh` over ``graph``; missing weights or sizes are 1.

    Raises :class:`MeshError` when an array has the wrong length, is not finite, or
    holds a weight <= 0 or a size < 0 (naming the first such vertex, 0-based).  O(n).
    """
    src = graph.source if source is None else source
    n = graph.n
    w = _vertex_array(vertex_weights, n, src, "vertex weights")
    c = _vertex_array(comm_sizes, n, src, "communication sizes")
    bad = np.flatnonzero(w <= 0)
    if len(bad):
        raise MeshError(f"{src}: vertex {bad[0]} has weight {w[bad[0]]:g}; vertex weights "
                        f"must be > 0")
    bad = np.flatnonzero(c < 0)
    if len(bad):
        raise MeshError(f"{src}: vertex {bad[0]} has communication size {c[bad[0]]:g}; "
                        f"sizes must be >= 0")
    w.flags.writeable = False
    c.flags.writeable = False
    return Mesh(graph, w, c, src)


def _vertex_array(values, n: int, source: str, what: str) -> np.ndarray:
    if values is None:
        return np.ones(n)
    a = np.array(values, dtype=np.float64)  # a copy: the mesh is immutable
    if a.shape != (n,):
        raise MeshError(f"{source}: {what} have shape {a.shape}, the mesh has {n} vertices")
    bad = np.flatnonzero(~np.isfinite(a))
    if len(bad):
        raise MeshError(f"{source}: vertex {bad[0]} has {what[:-1]} {a[bad[0]]}; "
                        f"{what} must be finite")
    return a
