"""The communication graph: who talks to whom, and how much.

A :class:`CommGraph` is an undirected, weighted graph without self loops, held as a
symmetric scipy CSR matrix (both arc directions stored, as METIS and the sparse-QAP
paper do).  The weight of edge {u, v} is the total volume exchanged between ranks u and
v in both directions, so the objective counts every undirected edge once:

    J = sum over edges {u, v} of C_uv * D(pi(u), pi(v))

(The paper's reference code and SharedMap sum over both arcs and so print 2J.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..errors import RankmapError


class GraphError(RankmapError, ValueError):
    """A communication graph that cannot be used; the message names the source."""


@dataclass(frozen=True, eq=False)
class CommGraph:
    """Symmetric sparse communication graph over ``n`` ranks.

    Attributes
    ----------
    indptr, indices, weights:
        CSR arrays (``int64``, ``int32``, ``float64``); row ``u`` lists the neighbours of
        rank ``u`` and the volume of each edge.  Both directions are stored.
    source:
        Where the graph came from (file name or a description), used in messages.
    """

    indptr: np.ndarray
    indices: np.ndarray
    weights: np.ndarray
    source: str = "<graph>"

    @property
    def n(self) -> int:
        """Number of ranks (vertices)."""
        return len(self.indptr) - 1

    @property
    def m(self) -> int:
        """Number of undirected edges."""
        return len(self.indices) // 2

    @property
    def total_volume(self) -> float:
        """Sum of the weights of all undirected edges."""
        return float(self.weights.sum()) / 2.0

    def degrees(self) -> np.ndarray:
        """Number of neighbours of every rank."""
        return np.diff(self.indptr)

    def weighted_degrees(self) -> np.ndarray:
        """Total volume every rank exchanges with all others."""
        rows = np.repeat(np.arange(self.n), np.diff(self.indptr))
        return np.bincount(rows, weights=self.weights, minlength=self.n)

    def to_csr(self) -> sp.csr_matrix:
        """The graph as a symmetric scipy CSR matrix (a copy of the arrays is not made)."""
        return sp.csr_matrix((self.weights, self.indices, self.indptr), shape=(self.n, self.n))

    def edges(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Undirected edges once each as arrays ``(u, v, w)`` with ``u < v``."""
        rows = np.repeat(np.arange(self.n, dtype=np.int64), np.diff(self.indptr))
        keep = rows < self.indices
        return rows[keep], self.indices[keep].astype(np.int64), self.weights[keep]

    def subgraph(self, vertices: np.ndarray) -> CommGraph:
        """Induced subgraph on ``vertices`` (renumbered 0..len-1 in the given order)."""
        a = self.to_csr()[vertices][:, vertices].tocsr()
        return _from_canonical_csr(a, f"{self.source}[sub]")

    # -- constructors ----------------------------------------------------------------

    @classmethod
    def from_matrix(cls, matrix, *, directed: bool = True, source: str = "<matrix>") -> CommGraph:
        """Build from a dense array or scipy sparse matrix of volumes.

        ``directed=True`` reads ``matrix[u, v]`` as the volume rank u sends to rank v and
        symmetrizes (C + Cᵀ).  ``directed=False`` requires a symmetric matrix whose
        entry ``[u, v]`` already is the volume of the undirected edge.
        """
        a = sp.csr_matrix(matrix, dtype=np.float64) if not sp.issparse(matrix) \
            else matrix.tocsr().astype(np.float64)
        if a.shape[0] != a.shape[1]:
            raise GraphError(f"{source}: communication matrix must be square, got {a.shape}")
        _check_values(a.data, source)
        if a.diagonal().any():
            u = int(np.flatnonzero(a.diagonal())[0])
            raise GraphError(f"{source}: self loop on rank {u} (a rank cannot talk to itself)")
        if directed:
            a = (a + a.T).tocsr()
        else:
            diff = abs(a - a.T)
            if diff.nnz and diff.max() > 1e-9 * max(1.0, abs(a).max()):
                r, c = diff.nonzero()
                raise GraphError(
                    f"{source}: matrix is not symmetric (entry [{r[0]}, {c[0]}] differs from "
                    f"[{c[0]}, {r[0]}]); pass it as directed traffic to symmetrize it")
        return _from_canonical_csr(a, source)

    @classmethod
    def from_edges(cls, src, dst, weight=None, *, n: int | None = None,
                   source: str = "<edges>") -> CommGraph:
        """Build from edge lists (traffic records); repeated pairs add up.

        The volumes of (u, v) and (v, u) add up into one undirected edge, so a list of
        directed traffic records and a list of undirected edges written once each give
        the same graph.
        """
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        w = np.ones(len(src)) if weight is None else np.asarray(weight, dtype=np.float64)
        if not (len(src) == len(dst) == len(w)):
            raise GraphError(f"{source}: edge arrays have different lengths")
        if len(src) and min(src.min(), dst.min()) < 0:
            raise GraphError(f"{source}: negative rank number in edge list")
        size = int(max(src.max(initial=-1), dst.max(initial=-1)) + 1) if n is None else n
        if len(src) and max(src.max(), dst.max()) >= size:
            raise GraphError(f"{source}: edge names rank {max(src.max(), dst.max())} "
                             f"but there are only {size} ranks")
        loops = np.flatnonzero(src == dst)
        if len(loops):
            raise GraphError(f"{source}: self loop on rank {src[loops[0]]} (edge {loops[0]})")
        _check_values(w, source)
        a = sp.coo_matrix((w, (src, dst)), shape=(size, size)).tocsr()
        return _from_canonical_csr((a + a.T).tocsr(), source)


def _check_values(values: np.ndarray, source: str) -> None:
    if len(values) == 0:
        return
    if not np.all(np.isfinite(values)):
        raise GraphError(f"{source}: volume is NaN or infinite")
    if values.min() < 0:
        raise GraphError(f"{source}: negative communication volume {values.min()}")


def _from_canonical_csr(a: sp.csr_matrix, source: str) -> CommGraph:
    a = a.tocsr()
    a.eliminate_zeros()
    a.sum_duplicates()
    a.sort_indices()
    return CommGraph(a.indptr.astype(np.int64), a.indices.astype(np.int32),
                     a.data.astype(np.float64), source)
