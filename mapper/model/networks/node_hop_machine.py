"""A machine whose nodes sit on a non-tree network: node hop matrix + per-node hierarchy.

PEs are numbered node by node (node i owns a contiguous range).  The distance between
two distinct PEs p and q is

* inside one node: the node's own hierarchy distance (socket, core, … levels of a
  :class:`~mapper.model.machine.Hierarchy` describing one node; its outermost level is the
  node itself, so its last distance is "same node, different socket");
* between nodes a ≠ b: ``base + per_hop × hops[a, b]`` — a fixed cost of leaving the
  node plus a cost per network hop (``base = 0, per_hop = 1`` makes the distance the
  hop count, the hop-bytes metric of Li et al.).

Memory is O(N² + n k) for N nodes, n PEs and k levels inside a node — never n × n.  A
vectorized query costs O(k) per pair.  The compiled kernels read the same arrays
(:class:`mapper.model.oracle.KernelOracle`: the group ids, whose last column is the node, the
level distances and :attr:`NodeHopMachine.between`) and answer a query in O(1) between
nodes, O(k) inside one.  :meth:`NodeHopMachine.dense` builds the explicit n × n matrix
(O(n²)) for tests and small cases only; no algorithm uses it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..machine import DistanceMatrix, Hierarchy, MachineError


@dataclass(frozen=True, eq=False)
class NodeHopMachine:
    """Nodes on a hop matrix, each with its own socket/core hierarchy.

    Attributes
    ----------
    hops:
        N × N hop counts between the job's nodes (symmetric, zero diagonal).
    nodes:
        One :class:`Hierarchy` for every node alike, or one per node (same number of
        levels and the same distances; PE counts may differ).
    per_hop, base:
        Distance between PEs of nodes a ≠ b is ``base + per_hop * hops[a, b]``.
    """

    hops: np.ndarray
    nodes: Hierarchy | Sequence[Hierarchy]
    per_hop: float = 1.0
    base: float = 0.0
    pe_node: np.ndarray = field(init=False, repr=False)
    group_ids: np.ndarray = field(init=False, repr=False)
    distances: np.ndarray = field(init=False, repr=False)
    node_sizes: np.ndarray = field(init=False, repr=False)
    _between: np.ndarray = field(init=False, repr=False)
    _starts: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        h = np.asarray(self.hops, dtype=np.float64)
        if h.ndim != 2 or h.shape[0] != h.shape[1] or h.shape[0] == 0:
            raise MachineError(f"hop matrix must be square and non-empty, got shape {h.shape}")
        if not np.all(np.isfinite(h)) or h.min() < 0:
            raise MachineError("hop matrix entries must be finite and non-negative")
        if not np.array_equal(h, h.T):
            a, b = np.argwhere(h != h.T)[0]
            raise MachineError(f"hop matrix is not symmetric: [{a}, {b}] = {h[a, b]:g} but "
                               f"[{b}, {a}] = {h[b, a]:g}")
        if np.any(np.diag(h) != 0):
            raise MachineError("hop matrix must have a zero diagonal")
        if not (np.isfinite(self.per_hop) and self.per_hop >= 0
                and np.isfinite(self.base) and self.base >= 0):
            raise MachineError(f"per_hop and base must be finite and non-negative, got "
                               f"{self.per_hop}, {self.base}")
        count = h.shape[0]
        trees = ([self.nodes] * count if isinstance(self.nodes, Hierarchy)
                 else list(self.nodes))
        if len(trees) != count:
            raise MachineError(f"hop matrix has {count} nodes but {len(trees)} node "
                               f"hierarchies were given")
        k = trees[0].levels
        for i, t in enumerate(trees):
            if t.levels != k or not np.array_equal(t.distances, trees[0].distances):
                raise MachineError(f"node {i}: every node needs the same levels and "
                                   f"distances as node 0 ({trees[0].describe()})")
        sizes = np.array([t.n for t in trees], dtype=np.int64)
        # group ids made unique across nodes: offset each level by the groups before it
        gid = np.concatenate([t.group_ids for t in trees]).astype(np.int64)
        counts = np.array([[len(t.bounds[lv]) - 1 for lv in range(k)] for t in trees])
        offsets = np.vstack([np.zeros((1, k), dtype=np.int64), np.cumsum(counts, axis=0)[:-1]])
        gid += np.repeat(offsets, sizes, axis=0)
        object.__setattr__(self, "hops", h)
        object.__setattr__(self, "pe_node", np.repeat(np.arange(count), sizes))
        object.__setattr__(self, "group_ids", gid)
        object.__setattr__(self, "distances", np.asarray(trees[0].distances, dtype=np.float64))
        object.__setattr__(self, "node_sizes", sizes)
        object.__setattr__(self, "_between", self.base + self.per_hop * h)
        object.__setattr__(self, "_starts", np.concatenate([[0], np.cumsum(sizes)[:-1]]))

    @property
    def n(self) -> int:
        """Number of PEs."""
        return len(self.pe_node)

    @property
    def node_count(self) -> int:
        return self.hops.shape[0]

    @property
    def between(self) -> np.ndarray:
        """N × N cost between PEs of two distinct nodes, ``base + per_hop × hops`` (its
        diagonal is not a distance: PEs of one node use the node's levels)."""
        return self._between

    def hop_count(self, p, q) -> np.ndarray:
        """Network hops between the nodes of PE pairs (0 inside a node)."""
        return self.hops[self.pe_node[np.asarray(p, dtype=np.int64)],
                         self.pe_node[np.asarray(q, dtype=np.int64)]]

    def distance(self, p, q) -> np.ndarray:
        """Distance between PE pairs (vectorized, broadcasting; 0 for p == q)."""
        p = np.asarray(p, dtype=np.int64)
        q = np.asarray(q, dtype=np.int64)
        a, b = self.pe_node[p], self.pe_node[q]
        k = len(self.distances)
        inner = np.full(np.broadcast(p, q).shape, self.distances[k - 1])
        for i in range(k - 2, -1, -1):
            inner = np.where(self.group_ids[p, i] == self.group_ids[q, i],
                             self.distances[i], inner)
        out = np.where(a == b, inner, self.base + self.per_hop * self.hops[a, b])
        return np.where(p == q, 0.0, out)

    def rows(self, pes) -> np.ndarray:
        """Dense rows ``D[pes, :]`` (len(pes) × n): the between-node cost gathered from
        the N × N table, then each row's own node overwritten with the inner levels."""
        pes = np.asarray(pes, dtype=np.int64).reshape(-1)
        nodes = self.pe_node[pes]
        out = self._between[nodes][:, self.pe_node]
        sizes = self.node_sizes[nodes]
        r = np.repeat(np.arange(len(pes)), sizes)
        # the PEs of each row's own node, lo .. hi-1, as one flat index array
        q = np.arange(sizes.sum()) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        q += np.repeat(self._starts[nodes], sizes)
        out[r, q] = self.distance(pes[r], q)
        return out

    def total_distances(self) -> np.ndarray:
        """Sum of distances from every PE to all others: O(N² + n k)."""
        k = len(self.distances)
        total = np.zeros(self.n)
        inner = np.ones(self.n)
        for i in range(k):
            size = np.bincount(self.group_ids[:, i])[self.group_ids[:, i]].astype(np.float64)
            total += self.distances[i] * (size - inner)
            inner = size
        off = (self.base + self.per_hop * self.hops) @ self.node_sizes
        off -= self.base * self.node_sizes  # a node's own PEs are not "between nodes"
        return total + off[self.pe_node]

    def dense(self) -> DistanceMatrix:
        """The explicit n × n matrix (O(n²) memory): a reference for tests and small
        cases; the algorithms read the machine itself."""
        return DistanceMatrix(self.rows(np.arange(self.n)))

    def describe(self) -> str:
        return (f"{self.node_count} nodes on a hop matrix (max {self.hops.max():g} hops, "
                f"{self.base:g} + {self.per_hop:g}/hop), {self.n} PEs, node levels "
                + ":".join(f"{d:g}" for d in self.distances))
