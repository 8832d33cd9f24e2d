"""The job's task slots in machine order: what the mapper's PEs stand for.

``build_layout`` (in :mod:`slurm_plugin.topology`) turns an :class:`Allocation` plus the
cluster topology into a :class:`Layout`: the mapper's :class:`mapper.Hierarchy`
(spine → leaf switch → node → socket → slot) and one :class:`Slot` per PE, in PE order.
Rendering reads slots; the mapper reads the hierarchy; PE index ``i`` is ``slots[i]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mapper import Hierarchy


@dataclass(frozen=True)
class Slot:
    """One task slot: the cores one rank is bound to.

    ``socket`` and ``cores`` use Open MPI rankfile numbering (``slot=socket:core``,
    logical core index inside the socket); ``cpu_ids`` are the node-wide Slurm
    abstract CPU ids of the same cores (as in ``scontrol show job -d`` CPU_IDs).
    """

    host: str
    socket: int
    cores: tuple[int, ...]
    cpu_ids: tuple[int, ...]


@dataclass(frozen=True)
class Layout:
    """Hierarchy over the job's slots, plus the slots in PE order."""

    hierarchy: Hierarchy
    slots: tuple[Slot, ...]
    notes: tuple[str, ...] = ()  # e.g. "no topology plugin: node/socket/core levels only"

    @property
    def n(self) -> int:
        return len(self.slots)

    def hosts(self) -> list[str]:
        """Distinct hosts in PE order."""
        seen: dict[str, None] = {}
        for s in self.slots:
            seen.setdefault(s.host, None)
        return list(seen)


def default_placements(layout: Layout) -> dict[str, np.ndarray]:
    """Slurm's own placements as rank → PE arrays, for comparison in reports.

    ``block``: ranks fill node after node (Slurm's default ``--distribution=block``);
    within a node, consecutive slots.  ``cyclic``: rank r goes to the next node in
    round-robin order that still has a free slot (``--distribution=cyclic``).
    """
    hosts = [s.host for s in layout.slots]
    host_rank = {h: i for i, h in enumerate(layout.hosts())}
    node_of = np.array([host_rank[h] for h in hosts], dtype=np.int64)
    # position of each slot among its node's slots, in PE order
    first = np.searchsorted(np.sort(node_of), node_of)
    pos = np.empty(layout.n, dtype=np.int64)
    pos[np.argsort(node_of, kind="stable")] = np.arange(layout.n)
    within = pos - first
    # round robin: all nodes' 1st slot, then all nodes' 2nd slot, ...; full nodes drop out
    cyclic = np.lexsort((node_of, within)).astype(np.int64)
    return {"block": np.arange(layout.n, dtype=np.int64), "cyclic": cyclic}
