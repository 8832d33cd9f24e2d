"""The heaviest uplink per hierarchy level: what a placement puts on shared links.

J (volume × distance) sums traffic; run time of a bulk-synchronous code is bounded by
its most loaded link.  On a tree whose uplinks are oversubscribed, a mapping with lower
J can still pile more volume onto one switch's uplink than the scheduler's default did
and run slower (measured: NPB-CG's pattern on a 3-level 4:1 tree, J 3 % lower, run
time 1.57× longer).  This module measures that load so that callers can refuse such a
trade.

The volume on a group's uplink is the volume of the edges with exactly one endpoint
inside the group (its cut), both directions together: every such message crosses the
group's link to the level above once.  Its *load* is that volume over the link's
capacity, relative to the level's fastest link: cut_g × w_g with ``link_weights``
(per hierarchy level, one weight per group: w_g = the level's fastest capacity / g's
capacity, e.g. from topology.conf's LinkSpeed; 0 where a group has no link of its own,
a padding level, which is then never loaded).  Without weights every uplink of a level
has the same capacity (w_g = 1, load = volume, exactly as before weights existed).
Loads of one level are compared directly and levels are never compared with each
other.  This is the *congestion* of Hoefler & Snir's topology-mapping model (a link's
load over its capacity, maximised over the links) restricted to a tree, where routes
are unique.

Reference: T. Hoefler, M. Snir, "Generic topology mapping strategies for large-scale
parallel architectures", ICS 2011, doi:10.1145/1995896.1995909 (congestion, load /
capacity of the busiest link, as a mapping metric beside dilation).

Complexity: O(n + m·L) for L levels, m edges (the weights add O(groups) per level).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..model.graph import CommGraph
from ..model.machine import Hierarchy
from . import _volumes
from .qap import check_mapping

#: Per hierarchy level (index = level, innermost first), the relative cost of each
#: group's uplink, 1 / relative capacity (one float per group of that level), or None
#: for a level whose links are alike; see the module docstring.
LinkWeights = Sequence[np.ndarray | Sequence[float] | None]

#: Per hierarchy level (index = level), each group's uplink capacity in one unit for
#: every level (a node's host link 1, a switch's uplink the host links below it over its
#: oversubscription), or None for a level without; unlike :data:`LinkWeights` they
#: compare levels with each other (:func:`mapper.objectives.phase_time.phase_time` over all levels).
LinkCapacities = Sequence[np.ndarray | Sequence[float] | None]


@dataclass(frozen=True)
class UplinkLoad:
    """The busiest uplink of one hierarchy level: the group with the largest load.

    ``volume`` is that group's cut (both directions); ``load`` its cut × its link
    weight (load / relative capacity), the quantity compared; without weights it is
    ``volume`` itself."""

    level: int
    name: str
    volume: float  # cut of the busiest group, both directions
    group: int  # which group (index at that level) carries it
    load: float | None = None  # volume x the group's link weight (None: unweighted)

    def __post_init__(self) -> None:
        if self.load is None:
            object.__setattr__(self, "load", self.volume)

    @property
    def weighted(self) -> bool:
        """The load is the volume scaled by a link weight other than 1."""
        return self.load != self.volume

    def as_dict(self) -> dict:
        out = {"level": self.name, "volume": self.volume, "group": self.group}
        if self.weighted:
            out["load"] = self.load
        return out


def check_link_weights(machine: Hierarchy, weights: LinkWeights | None
                       ) -> tuple[np.ndarray | None, ...] | None:
    """``weights`` as float64 arrays, one per level (None where not given), after
    checking them: one entry per level of ``machine``, one finite weight >= 0 per group.
    None stays None.  O(groups)."""
    if weights is None:
        return None
    if len(weights) != machine.levels:
        raise ValueError(f"link weights: {len(weights)} levels, the machine has "
                         f"{machine.levels}")
    out: list[np.ndarray | None] = []
    for level, w in enumerate(weights):
        if w is None:
            out.append(None)
            continue
        a = np.asarray(w, dtype=np.float64)
        groups = len(machine.bounds[level]) - 1
        if a.shape != (groups,):
            raise ValueError(f"link weights of level {level} ({machine.level_names[level]}):"
                             f" {a.size} values for {groups} groups")
        if not np.all(np.isfinite(a)) or np.any(a < 0):
            raise ValueError(f"link weights of level {level} ({machine.level_names[level]})"
                             f" must be finite and >= 0")
        out.append(a)
    return tuple(out)


def uplink_loads(graph: CommGraph, machine: Hierarchy, mapping: np.ndarray,
                 levels: Sequence[int], link_weights: LinkWeights | None = None
                 ) -> tuple[UplinkLoad, ...]:
    """The busiest uplink at each of ``levels`` (indices into ``machine``'s levels; the
    root level has no uplink and is refused): the group whose cut × link weight is the
    largest (``link_weights``: :data:`LinkWeights`; without them, or at a level without
    them, the largest cut).  A group of weight 0 has no link and is never the busiest
    unless every group of its level has weight 0 (load 0 then).
    O(n + m·len(levels))."""
    pi = check_mapping(mapping, machine.n, graph.n)
    weights = check_link_weights(machine, link_weights)
    out = []
    for level in levels:
        if not 0 <= level < machine.levels - 1:
            raise ValueError(f"level {level} has no uplink (levels 0..{machine.levels - 2})")
        cut = group_cuts(graph, machine, pi, level)
        w = None if weights is None else weights[level]
        if w is None:
            g = int(np.argmax(cut))  # a level has at least one group
            out.append(UplinkLoad(level, machine.level_names[level], float(cut[g]), g))
        else:
            load = cut * w
            g = int(np.argmax(load))
            out.append(UplinkLoad(level, machine.level_names[level], float(cut[g]), g,
                                  float(load[g])))
    return tuple(out)


def group_cuts(graph: CommGraph, machine: Hierarchy, mapping: np.ndarray,
               level: int) -> np.ndarray:
    """Per level-``level`` group, the volume of the edges with one end inside it under
    ``mapping`` (checked by the caller): the volume on each group's uplink, both
    directions.  O(n + m), compiled."""
    groups = len(machine.bounds[level]) - 1
    # compiled (the edges' gathers and bincounts took 0.07 s per level at 2^20)
    return _volumes.group_cuts(graph.indptr, graph.indices, graph.weights,
                               np.ascontiguousarray(mapping, dtype=np.int64),
                               machine.group_ids, level, groups)


def raised_uplink(candidate: Sequence[UplinkLoad], reference: Sequence[UplinkLoad],
                  rtol: float = 1e-9) -> UplinkLoad | None:
    """The first level whose busiest uplink ``candidate`` loads more than ``reference``
    (``load``: volume over relative capacity; beyond the relative tolerance ``rtol``),
    or None when it raises none."""
    for c, r in zip(candidate, reference, strict=True):
        if c.load > r.load * (1.0 + rtol):
            return c
    return None


def node_hop_bytes(graph: CommGraph, machine: Hierarchy, mapping: np.ndarray,
                   levels: Sequence[int]) -> float:
    """The hop-bytes of the busiest node: the largest, over the groups of ``levels[0]``
    (the innermost congestion level: nodes), of

        Σ over the edges (r, q) with r or q in the group of  w_rq · links(r, q),

    links(r, q) = two (up and down) per level of ``levels`` at which r's and q's groups
    differ, 0 for a message inside a node.  It is Hoefler & Snir's dilation (hop-bytes),
    summed per node instead of over the job: where every shared link of a level carries
    the same busiest load, it tells placements that spread the far traffic evenly over
    the nodes from those that give some nodes much of it: a node whose messages cross
    more switches lags in each iteration, and its neighbours wait for it (periodic 3D
    halos whose placements tie in J and every link's load run in the order of this
    measure: bench/README.md, "Far traffic per node").
    ``levels`` sorted innermost first; 0.0 without levels.  O(n + m·L), compiled."""
    pi = check_mapping(mapping, machine.n, graph.n)
    if not levels:
        return 0.0
    # compiled: the numpy gathers took 0.8-1.7 s per candidate at 2^20 ranks
    per_node = _volumes.node_hop_bytes(graph.indptr, graph.indices, graph.weights, pi,
                                       machine.group_ids, np.asarray(levels, dtype=np.int64),
                                       len(machine.bounds[levels[0]]) - 1)
    return float(per_node.max(initial=0.0))
