"""Arrays the compiled kernels read to answer distance queries."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .machine import DistanceMatrix, Hierarchy, Machine
from .networks.node_hop_machine import NodeHopMachine


@dataclass(frozen=True)
class KernelOracle:
    """The ``(gid, dist, mat)`` triple of compiled kernels (``mapper/model/_oracle.pxd``).

    * hierarchy: per-PE group ids and level distances, ``mat`` None;
    * explicit matrix: ``mat`` (n × n) only;
    * :class:`~mapper.model.networks.NodeHopMachine`: the group ids and distances of the
      levels inside the nodes (last column = node) and ``mat`` = the N × N
      between-node cost ``base + per_hop × hops`` — O(N² + n k), never n × n.
    """

    gid: np.ndarray | None
    dist: np.ndarray | None
    mat: np.ndarray | None

    @classmethod
    def of(cls, machine: Machine | NodeHopMachine) -> KernelOracle:
        if isinstance(machine, Hierarchy):
            return cls(np.ascontiguousarray(machine.group_ids, dtype=np.int32),
                       np.ascontiguousarray(machine.distances, dtype=np.float64), None)
        if isinstance(machine, DistanceMatrix):
            return cls(None, None, np.ascontiguousarray(machine.matrix, dtype=np.float64))
        if isinstance(machine, NodeHopMachine):
            return cls(np.ascontiguousarray(machine.group_ids, dtype=np.int32),
                       np.ascontiguousarray(machine.distances, dtype=np.float64),
                       np.ascontiguousarray(machine.between, dtype=np.float64))
        raise TypeError(f"unknown machine type {type(machine).__name__}")

    def args(self) -> tuple:
        return self.gid, self.dist, self.mat


def total_distances(machine: Machine | NodeHopMachine) -> np.ndarray:
    """Sum of distances from every PE to all other PEs, O(n k) for hierarchies.

    For a hierarchy, PE p has (size of its level-i group - size of its level-(i-1)
    group) PEs at distance d_i.  A node hop machine sums its own way, O(N² + n k).
    """
    if isinstance(machine, DistanceMatrix):
        return machine.matrix.sum(axis=1)
    if isinstance(machine, NodeHopMachine):
        return machine.total_distances()
    total = np.zeros(machine.n)
    inner = np.ones(machine.n)
    for i in range(machine.levels):
        size = np.diff(machine.bounds[i])[machine.group_ids[:, i]].astype(np.float64)
        total += machine.distances[i] * (size - inner)
        inner = size
    return total
