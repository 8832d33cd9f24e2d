"""Dragonfly hop matrix with minimal routing (Kim, Dally, Scott & Abts 2008).

``groups`` groups of ``routers`` routers, ``nodes`` compute nodes per router.  Routers
of a group are fully connected by local links; every pair of groups is joined by one
global link.  In group g the link to group g' leaves from router
``((g' - g - 1) mod groups) mod routers`` (links dealt round-robin over the routers, so
any group count works).  Minimal routing goes node → router → (local) → global →
(local) → router → node, crossing at most one global link; the hop count is the number
of links traversed, the two terminal links included:

* same router: 2; same group, other router: 3;
* other group: 3 (node, router, global link, router, node), plus one local link for
  each end whose router does not hold the global link.

A route through a third group can be shorter in links (two global links, no local
ones) but is not minimal routing, so it is not counted.

Slot order: ``(group * routers + router) * nodes + k``.  O(N²) time and memory.

Reference: Kim, Dally, Scott & Abts, Technology-Driven, Highly-Scalable Dragonfly
Topology.  ISCA 2008, pp. 77-88, doi:10.1109/ISCA.2008.19.
"""

from __future__ import annotations

import numpy as np

from ..machine import MachineError


def dragonfly_hops(groups: int, routers: int, nodes: int) -> np.ndarray:
    """Hop matrix of a dragonfly (see the module docstring for the counting)."""
    if min(groups, routers, nodes) < 1:
        raise MachineError(f"dragonfly needs positive groups, routers per group and nodes "
                           f"per router, got {groups}, {routers}, {nodes}")
    n = groups * routers * nodes
    router = np.arange(n) // nodes          # global router id
    group, local = router // routers, router % routers
    gx, gy = group[:, None], group[None, :]
    # router of x's group holding the link to y's group, and the reverse
    gate_x = ((gy - gx - 1) % groups) % routers
    gate_y = ((gx - gy - 1) % groups) % routers
    # node-router, the global link, router-node: 3 links, plus a local link at each end
    # whose router is not the one holding the global link
    h = (3 + (local[:, None] != gate_x) + (local[None, :] != gate_y)).astype(np.int64)
    same_group = gx == gy
    h[same_group] = 3
    h[router[:, None] == router[None, :]] = 2
    np.fill_diagonal(h, 0)
    return h
