"""Arrays the compiled kernels read to answer distance queries."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .machine import DistanceMatrix, Hierarchy, Machine


@dataclass(frozen=True)
class KernelOracle:
    """Either per-PE group ids with level distances, or an explicit matrix."""

    gid: np.ndarray | None
    dist: np.ndarray | None
    mat: np.ndarray | None

    @classmethod
    def of(cls, machine: Machine) -> KernelOracle:
        if isinstance(machine, Hierarchy):
            return cls(np.ascontiguousarray(machine.group_ids, dtype=np.int32),
                       np.ascontiguousarray(machine.distances, dtype=np.float64), None)
        if isinstance(machine, DistanceMatrix):
            return cls(None, None, np.ascontiguousarray(machine.matrix, dtype=np.float64))
        raise TypeError(f"unknown machine type {type(machine).__name__}")

    def args(self) -> tuple:
        return self.gid, self.dist, self.mat


def total_distances(machine: Machine) -> np.ndarray:
    """Sum of distances from every PE to all other PEs, O(n k) for hierarchies.

    For a hierarchy, PE p has (size of its level-i group - size of its level-(i-1)
    group) PEs at distance d_i.
    """
    if isinstance(machine, DistanceMatrix):
        return machine.matrix.sum(axis=1)
    total = np.zeros(machine.n)
    inner = np.ones(machine.n)
    for i in range(machine.levels):
        size = np.diff(machine.bounds[i])[machine.group_ids[:, i]].astype(np.float64)
        total += machine.distances[i] * (size - inner)
        inner = size
    return total
