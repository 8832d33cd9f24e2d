"""Machine models: where the processing elements (PEs) are and how far apart.

Two models answer the same question, "how expensive is one unit of volume between PE p
and PE q":

* :class:`Hierarchy` — a tree of uniform depth whose groups may have unequal sizes at
  any level (3 nodes x 48 cores under one switch and 5 nodes x 32 cores under another,
  or 20 of a node's 64 cores).  PEs are numbered depth first, so every group is a
  contiguous range of PE indices.  Two PEs are at level i when the smallest group they
  share is a level-i group; their distance is ``distances[i]``.  The oracle keeps one
  group id per PE and level (O(n k) memory, never n x n) and answers a vectorized
  query in O(k) per pair, k being the (small, constant) number of levels — the
  division-free variant of the oracle in Schulz, Träff & von Kirchbach, §3.4.
* :class:`DistanceMatrix` — an explicit symmetric n x n matrix for machines that are not
  trees (tori, measured hop matrices), meant for moderate n.

References
----------
* Schulz, Träff & von Kirchbach, Better Process Mapping and Sparse Quadratic
  Assignment, arXiv:1702.04164v2 (§ numbers follow it); full entry in :mod:`mapper`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import RankmapError


class MachineError(RankmapError, ValueError):
    """A machine description that cannot be used; the message names the field."""


@dataclass(frozen=True, eq=False)
class Hierarchy:
    """Tree-shaped machine with per-level distances.

    Attributes
    ----------
    bounds:
        ``bounds[i]`` holds the start offsets of the level-i groups plus the end
        (``len = groups_i + 1``).  Level 0 is the innermost group (e.g. a socket), the
        last level is the single root group holding every PE.
    distances:
        ``distances[i]`` is the cost between two distinct PEs whose smallest shared
        group is at level i; non-decreasing.
    level_names:
        Human names of the groups at each level, used in traffic reports.
    """

    bounds: tuple[np.ndarray, ...]
    distances: np.ndarray
    level_names: tuple[str, ...]
    group_ids: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        k = len(self.bounds)
        if k == 0:
            raise MachineError("hierarchy needs at least one level")
        if len(self.distances) != k:
            raise MachineError(f"hierarchy has {k} levels but {len(self.distances)} distances")
        if len(self.level_names) != k:
            raise MachineError(f"hierarchy has {k} levels but {len(self.level_names)} names")
        n = int(self.bounds[0][-1])
        if len(self.bounds[-1]) != 2:
            raise MachineError("the outermost level must be a single group holding every PE")
        for i, b in enumerate(self.bounds):
            if b[0] != 0 or b[-1] != n or np.any(np.diff(b) <= 0):
                raise MachineError(f"level {i}: group bounds must increase from 0 to {n}")
            if i and not np.all(np.isin(b, self.bounds[i - 1])):
                raise MachineError(f"level {i}: a group splits a level-{i - 1} group")
        d = np.asarray(self.distances, dtype=np.float64)
        if not np.all(np.isfinite(d)) or d.min() < 0:
            raise MachineError("distances must be finite and non-negative")
        if np.any(np.diff(d) < 0):
            raise MachineError(f"distances must not decrease outwards, got {list(d)}")
        object.__setattr__(self, "distances", d)
        gid = np.empty((n, k), dtype=np.int32)
        for i, b in enumerate(self.bounds):
            gid[:, i] = np.repeat(np.arange(len(b) - 1, dtype=np.int32), np.diff(b))
        object.__setattr__(self, "group_ids", gid)

    # -- size and shape ---------------------------------------------------------------

    @property
    def n(self) -> int:
        """Number of PEs."""
        return int(self.bounds[0][-1])

    @property
    def levels(self) -> int:
        """Number of levels, the root included."""
        return len(self.bounds)

    def group_sizes(self, level: int) -> np.ndarray:
        """Sizes of the level-``level`` groups, in PE order."""
        return np.diff(self.bounds[level])

    def children(self, level: int, group: int) -> np.ndarray:
        """Sizes of the level-(level-1) groups inside one level-``level`` group."""
        lo, hi = self.bounds[level][group], self.bounds[level][group + 1]
        inner = self.bounds[level - 1]
        sel = inner[(inner >= lo) & (inner <= hi)]
        return np.diff(sel)

    @property
    def is_homogeneous(self) -> bool:
        """True when every group of a level has the same number of children."""
        return all(len(np.unique(np.diff(b))) == 1 for b in self.bounds)

    # -- the oracle -------------------------------------------------------------------

    def level_of(self, p, q) -> np.ndarray:
        """Smallest shared level of PE pairs (arrays); -1 where p == q."""
        p = np.asarray(p, dtype=np.int64)
        q = np.asarray(q, dtype=np.int64)
        lev = np.full(np.broadcast(p, q).shape, self.levels - 1, dtype=np.int64)
        for i in range(self.levels - 2, -1, -1):
            same = self.group_ids[p, i] == self.group_ids[q, i]
            lev = np.where(same, i, lev)
        return np.where(p == q, -1, lev)

    def distance(self, p, q) -> np.ndarray:
        """Distance between PE pairs (vectorized; 0 for p == q)."""
        lev = self.level_of(p, q)
        return np.where(lev < 0, 0.0, self.distances[np.maximum(lev, 0)])

    def describe(self) -> str:
        """One-line summary, e.g. ``4:16:8 / 1:10:100`` or the uneven level sizes."""
        if self.is_homogeneous:
            fan = [int(np.diff(self.bounds[0])[0])] + [
                (len(self.bounds[i - 1]) - 1) // (len(self.bounds[i]) - 1)
                for i in range(1, self.levels)]
            s = ":".join(map(str, fan))
        else:
            s = "uneven " + ":".join(str(len(b) - 1) for b in self.bounds) + " groups"
        return f"{s} / " + ":".join(f"{d:g}" for d in self.distances)

    # -- constructors -----------------------------------------------------------------

    @classmethod
    def homogeneous(cls, fanouts: Sequence[int], distances: Sequence[float],
                    level_names: Sequence[str] | None = None) -> Hierarchy:
        """The paper's S = a1:a2:…:ak, D = d1:…:dk (a1 innermost).

        PEs p and q are at level i when they first share a group of a1·…·ai PEs.
        """
        fan = [int(a) for a in fanouts]
        if not fan or min(fan) < 1:
            raise MachineError(f"hierarchy sizes must be positive integers, got {fanouts}")
        if len(distances) != len(fan):
            raise MachineError(f"hierarchy has {len(fan)} levels but {len(distances)} distances")
        n = int(np.prod(fan))
        bounds = []
        size = 1
        for a in fan:
            size *= a
            bounds.append(np.arange(0, n + 1, size, dtype=np.int64))
        names = (tuple(level_names) if level_names
                 else tuple(f"level{i + 1}" for i in range(len(fan))))
        return cls(tuple(bounds), np.asarray(distances, dtype=np.float64), names)

    @classmethod
    def parse(cls, hierarchy: str, distances: str, *,
              names: tuple[str, str] = ("hierarchy", "distances")) -> Hierarchy:
        """Parse ``"4:16:8"`` and ``"1:10:100"`` as the paper and its code do.

        ``names`` are what the errors call the two strings: a command line passes its
        options (``--hierarchy``, ``--distances``), a configuration reader its keys.
        """
        what_fan, what_dist = names
        try:
            fan = [int(x) for x in hierarchy.split(":")]
        except ValueError:
            raise MachineError(f"{what_fan} {hierarchy!r}: expected integers separated by ':'",
                               source=what_fan) from None
        try:
            dist = [float(x) for x in distances.split(":")]
        except ValueError:
            raise MachineError(f"{what_dist} {distances!r}: expected numbers separated by ':'",
                               source=what_dist) from None
        if len(fan) != len(dist):
            raise MachineError(f"{what_fan} {hierarchy!r} has {len(fan)} levels but "
                               f"{what_dist} {distances!r} has {len(dist)}", source=what_dist)
        return cls.homogeneous(fan, dist)

    @classmethod
    def from_tree(cls, tree, distances: Sequence[float],
                  level_names: Sequence[str] | None = None) -> Hierarchy:
        """Build from nested lists whose leaves count the PEs of an innermost group.

        ``[[[24, 24]] * 3, [[16, 16]] * 5]`` is a root with two switches: three nodes of
        two 24-core sockets under the first, five nodes of two 16-core sockets under the
        second.  All leaves must be at the same depth; the depth plus one (the root) is
        the number of levels, and ``distances``/``level_names`` run innermost first.
        """
        depth = _tree_depth(tree)
        levels: list[list[int]] = [[] for _ in range(depth + 1)]

        def walk(node, d: int) -> int:
            if d == depth:
                if isinstance(node, (list, tuple)) or int(node) < 1:
                    raise MachineError(
                        f"leaf at depth {d} must be a positive PE count, got {node!r}")
                levels[0].append(int(node))
                return int(node)
            if not isinstance(node, (list, tuple)) or not node:
                raise MachineError(f"tree node at depth {d} must be a non-empty list "
                                   f"(all leaves must be at depth {depth})")
            total = sum(walk(child, d + 1) for child in node)
            levels[depth - d].append(total)
            return total

        walk(tree, 0)
        bounds = tuple(np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
                       for sizes in levels)
        names = (tuple(level_names) if level_names
                 else tuple(f"level{i + 1}" for i in range(depth + 1)))
        return cls(bounds, np.asarray(distances, dtype=np.float64), names)


def _tree_depth(node) -> int:
    d = 0
    while isinstance(node, (list, tuple)):
        if not node:
            raise MachineError("empty group in machine tree")
        node = node[0]
        d += 1
    return d


@dataclass(frozen=True, eq=False)
class DistanceMatrix:
    """Explicit symmetric distance matrix for non-tree machines (moderate n).

    ``level_names`` and per-level traffic do not apply; traffic is reported per
    distinct distance value instead.
    """

    matrix: np.ndarray

    def __post_init__(self) -> None:
        d = np.ascontiguousarray(self.matrix, dtype=np.float64)
        if d.ndim != 2 or d.shape[0] != d.shape[1]:
            raise MachineError(f"distance matrix must be square, got shape {d.shape}")
        if not np.all(np.isfinite(d)) or d.min() < 0:
            raise MachineError("distance matrix entries must be finite and non-negative")
        if not np.allclose(d, d.T):
            raise MachineError("distance matrix must be symmetric")
        if np.any(np.diag(d) != 0):
            raise MachineError("distance matrix must have a zero diagonal")
        object.__setattr__(self, "matrix", d)

    @property
    def n(self) -> int:
        return int(self.matrix.shape[0])

    def distance(self, p, q) -> np.ndarray:
        return self.matrix[np.asarray(p, dtype=np.int64), np.asarray(q, dtype=np.int64)]

    def describe(self) -> str:
        return f"explicit {self.n}x{self.n} distance matrix"


Machine = Hierarchy | DistanceMatrix


def host_contiguous(machine: Hierarchy, mapping: np.ndarray, level: int) -> bool:
    """Whether every level-``level`` group (a node: one host) holds one interval of rank
    ids under ``mapping`` (rank → PE): what MPICH's and Intel MPI's mpiexec (Hydra) can
    launch, whose host file gives each host one ``host:count`` line in rank order and
    deals the ranks to the lines in turn (a host on two lines gets two proxies, which
    they do not run as one host).  The order of the hosts does not matter.  O(n + g)
    for n ranks and g groups, in numpy."""
    node = machine.group_ids[np.asarray(mapping, dtype=np.int64), level]
    if len(node) < 2:
        return True
    # a group's ranks are one interval exactly when it starts one run of the sequence
    runs = 1 + int(np.count_nonzero(node[1:] != node[:-1]))
    return runs == int(np.count_nonzero(np.bincount(node)))
