"""Slurm's own task placement — what a job gets without rankmap — as rank → PE arrays.

Slurm places tasks in two steps, ``--distribution=NODES[:SOCKETS[:CORES]]``:

1. over the job's nodes, in the order of its node list (Slurm's node-table order,
   not the switch tree): ``block`` fills node after node, ``cyclic`` deals ranks
   round-robin (a node whose slots are used up drops out), ``plane=N`` deals blocks
   of N consecutive ranks round-robin;
2. within a node, over its sockets: ``cyclic`` (the default) gives task k the next
   socket round-robin, all cores of one task from one socket; ``block`` fills socket
   after socket.  ``fcyclic`` spreads one task's CPUs over sockets, which a rankmap
   slot never does; for the socket each task starts on it equals ``cyclic``.

Slurm's default is ``block:cyclic``.  Open MPI's mpirun, given a Slurm allocation,
fills nodes in node-list order and maps more than two ranks by socket, round-robin
over a node's sockets: the same node and socket for every rank.  A prolog is not told
the job's ``--distribution`` (Slurm 22.05 passes no ``SLURM_DISTRIBUTION`` to it), so
the default is assumed unless the environment says otherwise.

All placements are computed with sorts over the P slots: O(P log P), no Python loop
over ranks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from mapper.errors import RankmapError

from .layout import Layout

NODE_METHODS = ("block", "cyclic", "plane", "arbitrary")
SOCKET_METHODS = ("block", "cyclic", "fcyclic")


class DistributionError(RankmapError, ValueError):
    """A ``--distribution`` value that is not Slurm's syntax."""


@dataclass(frozen=True)
class Distribution:
    """Parsed ``--distribution``: node method, socket method, plane size."""

    nodes: str = "block"
    sockets: str = "cyclic"
    plane: int = 0

    @property
    def name(self) -> str:
        first = f"plane={self.plane}" if self.nodes == "plane" else self.nodes
        return f"{first}:{self.sockets}"


DEFAULT = Distribution()

_SPEC = re.compile(r"^(?P<nodes>\*|block|cyclic|arbitrary|plane(?:=(?P<size>\d+))?)"
                   r"(?::(?P<sockets>\*|block|cyclic|fcyclic))?"
                   r"(?::(?:\*|block|cyclic|fcyclic))?(?:,(?:pack|nopack))?$", re.I)


def parse_distribution(text: str | None, plane_size: str | None = None) -> Distribution:
    """``block``, ``cyclic:block``, ``plane=4``, ``*:fcyclic,Pack`` … (None: the default).

    ``plane_size`` is ``SLURM_DIST_PLANESIZE``, which jobs see beside
    ``SLURM_DISTRIBUTION=plane``.
    """
    if not text or not text.strip():
        return DEFAULT
    m = _SPEC.match(text.strip())
    if not m:
        raise DistributionError(f"distribution {text!r}: expected NODES[:SOCKETS[:CORES]] "
                                f"with NODES one of block, cyclic, plane=N, arbitrary and "
                                f"SOCKETS one of block, cyclic, fcyclic")
    nodes = m.group("nodes").lower()
    sockets = (m.group("sockets") or "*").lower()
    sockets = "cyclic" if sockets == "*" else sockets
    if nodes == "*":
        return Distribution("block", sockets)
    if nodes.startswith("plane"):
        size = m.group("size") or plane_size
        if not size or not size.isdigit() or int(size) < 1:
            raise DistributionError(f"distribution {text!r}: plane needs a size (plane=N)")
        return Distribution("plane", sockets, int(size))
    return Distribution(nodes, sockets)


def slurm_placement(layout: Layout, dist: Distribution = DEFAULT) -> np.ndarray:
    """Rank → PE (the layout's numbering) of the placement Slurm makes with ``dist``.

    ``arbitrary`` takes its order from a host file that does not exist before the job
    runs; it is treated as ``block``.
    """
    n = layout.n
    # per-PE arrays the layout computes once for all the placements asked of it
    node, socket, cpu = layout.pe_node, layout.pe_socket, layout.pe_first_cpu
    # position of each slot among the slots of its node on its socket, by core
    by_socket = np.lexsort((cpu, socket, node))
    k_in_socket = _position_in_run(node[by_socket] * (socket.max() + 1) + socket[by_socket])
    k_socket = np.empty(n, dtype=np.int64)
    k_socket[by_socket] = k_in_socket
    if dist.sockets == "block":
        within_order = by_socket
    else:  # cyclic, fcyclic: round-robin over the node's sockets
        within_order = np.lexsort((socket, k_socket, node))
    m = np.empty(n, dtype=np.int64)
    m[within_order] = _position_in_run(node[within_order])
    # the m-th task a node receives runs on the m-th slot of the node's order
    if dist.nodes == "cyclic":
        rank_order = np.lexsort((node, m))
    elif dist.nodes == "plane":
        rank_order = np.lexsort((m, node, m // dist.plane))
    else:
        rank_order = np.lexsort((m, node))
    return rank_order.astype(np.int64)


def default_placements(layout: Layout, dist: Distribution = DEFAULT
                       ) -> dict[str, np.ndarray]:
    """The job's default placement (first) and Slurm's other common ones, by name.

    Names: ``block`` and ``cyclic`` (with the socket method of ``dist``), and the
    job's own distribution when it is neither (e.g. ``plane=4``).
    """
    out = {dist_label(dist): slurm_placement(layout, dist)}
    for nodes in ("block", "cyclic"):
        other = Distribution(nodes, dist.sockets)
        if dist_label(other) not in out:  # each placement once: O(n log n) apiece
            out[dist_label(other)] = slurm_placement(layout, other)
    return out


def dist_label(dist: Distribution) -> str:
    """Short report name: ``block``, ``cyclic``, ``plane=4``; the socket method only
    when it is not Slurm's default."""
    first = "block" if dist.nodes == "arbitrary" else \
        (f"plane={dist.plane}" if dist.nodes == "plane" else dist.nodes)
    return first if dist.sockets in ("cyclic", "fcyclic") else f"{first}:{dist.sockets}"


def _position_in_run(keys: np.ndarray) -> np.ndarray:
    """For a sorted key array, each element's index within its run of equal keys."""
    n = len(keys)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    lengths = np.diff(np.r_[starts, n])
    return np.arange(n) - np.repeat(starts, lengths)
