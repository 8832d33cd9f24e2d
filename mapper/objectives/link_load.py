"""Load of every network link under a placement: trees, tori, meshes, dragonflies, Tianhe-3.

J (volume × distance) sums traffic; a bulk-synchronous step waits for its busiest link.
Hoefler & Snir's congestion makes that measurable: the *load* of a link is the sum of
the volumes of the messages whose route crosses it, the *congestion* of a placement is
the largest load divided by the link's bandwidth.  :mod:`mapper.objectives.congestion` computes
it on a tree, where a group's uplink load is its cut; this module computes it on any
network whose routing is fixed, from explicit routes.

The network (:class:`RoutedNetwork`)
------------------------------------
Links are integer ids ``0 .. links-1`` with a capacity each (bandwidth, any unit: only
ratios matter; congestion is ``load / capacity``).  Links are grouped in *levels*
(node links, a tree's per-level uplinks, a torus's network links, a dragonfly's local
and global links) whose ids are contiguous: ``level_bounds[i]:level_bounds[i+1]``.
Routes are kept between the job's nodes (N of them, in the order of the machine's
PEs, which run node by node as in :class:`~mapper.model.networks.NodeHopMachine`), as a CSR
over the N² ordered pairs: the route from node a to node b crosses
``route_links[route_ptr[a*N + b] : route_ptr[a*N + b + 1]]``, in path order.  Memory:
8·N² bytes of pointers plus 4 bytes per link of every route, 4·N²·(h̄ + 2) for mean
hop count h̄ plus the two node links: 10 MB for a 512-node 8×8×8 torus, ~200 MB at
2048 nodes, so up to a few thousand nodes (a job's nodes, not the machine's: link ids
are the whole machine's but routes are stored for the job's node slots only).
``link_ends`` names the two vertices each link joins (vertices: the machine's node
slots first, then its routers or switches) for reports and tests.

Routing rules (builders)
------------------------
* :func:`tree_network` — a :class:`~mapper.model.machine.Hierarchy` from its node level up:
  one uplink per group of each level below the root, with one capacity per level (an
  oversubscribed level is a smaller capacity: 4:1 is ``1/4`` of the level below).
  The route from a to b climbs to their lowest common group and descends; it crosses
  a's and b's uplinks at every level below it.  Routes are unique, so the load of a
  group's uplink is its cut, exactly :func:`mapper.objectives.congestion.uplink_loads`.
* :func:`torus_network`, :func:`mesh_network` — one node per router at coordinate
  ``np.unravel_index(slot, dims)`` (:mod:`mapper.model.networks.grids`).  Dimension-order
  routing, dimension 0 first.  Along a torus ring of length L the route takes the
  shorter way; on a tie (L even, the target L/2 away) it goes **up** (increasing
  coordinate, wrapping from L-1 to 0), from both ends — so the routes a → b and
  b → a of such a pair use the two different halves of the ring.  A ring of length 2
  has a single link (no separate wrap-around link), one of length 1 none.  The route
  crosses exactly ``torus_hops`` (``mesh_hops``) network links, plus the node links.
* :func:`dragonfly_network` — :mod:`mapper.model.networks.dragonfly`'s model and minimal
  routing: node link, a local link to the router holding the global link to the
  target group (if that is not the source router), the global link, a local link
  from its far end to the target router (if needed), node link; inside a group one
  local link between two routers.  The number of links equals ``dragonfly_hops``.
* :func:`tianhe3_network` — the machine :mod:`mapper.model.networks.tianhe3`'s default hop
  counts (1, 2, 3) describe: nodes on a chip router, the chips in a grid whose rows
  and columns are fully connected (a 2D HyperX).  Dimension-order routing, along the
  row first: node link, the row link to the target's column (if the columns differ),
  the column link to the target's row (if the rows differ), node link.  The OHTMA
  paper gives three distance classes, not the prototype's wiring, so these are the hop
  model's links, not measured ones; a site's ``chip_hops`` changes J only, never the
  links.  The route crosses ``tianhe3_hops(..., hops=(0, 1, 2))`` chip links plus the
  node links.

Which direction counts
----------------------
A link's load is the volume of both directions together, as the tree model counts a
group's cut: physical links are full duplex, and both directions of a message cross
the same links on trees and dragonflies.  The communication graph holds only the total
volume w of both directions of an edge, so on a network whose routes a → b and b → a
differ (dimension-order routing on tori, meshes and Tianhe-3: a → b and b → a correct
their dimensions in the same order, so they turn at different corners) w/2 is put on each of
the two routes; where they cross the same links (the node links, a shared ring segment) that
adds up to w again.  ``RoutedNetwork.symmetric`` says whether routes are symmetric
(then w goes on one route, same result, half the work).

Cost
----
:func:`link_loads`: O(n + m·h) for m edges and h links per route (compiled).
:func:`swap_delta`: O((deg u + deg v)·h), loads updated in place.
:class:`LinkLoadTracker` keeps the loads and a max-tree over ``load / capacity``
(leaves are links; a level's links are contiguous, so a level's maximum is a range
query): a swap costs O((deg u + deg v)·h + t·log L) for t distinct links touched, the
global maximum O(1), a level's maximum O(log L).  A cached global maximum refreshed
from the touched links would be O(t) but wrong whenever a swap lowers the busiest
link — exactly the swaps a congestion-aware search looks for — and would then need an
O(L) rescan; the tree never does.

How the never-worse rule uses it for ``[network]`` jobs
--------------------------------------------------------
As on a tree (:func:`mapper.objectives.congestion.raised_uplink`): per level, the candidate's
busiest ``load / capacity`` against the baseline's (Slurm's default), and a candidate
that raises any level beyond the tolerance is refused whatever its J.  Levels are
never compared with each other.  The levels compared: ``node`` (the node links: every
network); on a torus, mesh or Tianhe-3 ``network`` (all router-to-router links
together: one capacity, and dimension-order routing can move traffic between
dimensions; Tianhe-3's row and column links play the same role in its hop model); on a
dragonfly ``local`` and ``global`` apart (different cables and bandwidths); on a tree
(and on a tree approximation, :mod:`mapper.partitioners.tree_approx`) each level from the
node level up to the one below the root, as :func:`mapper.objectives.congestion.uplink_loads`
does.  Intra-node traffic crosses no link.  :func:`level_congestion` gives those
per-level maxima.
``map_processes(..., links=LinkModel(routed=network))`` applies that rule to every candidate
(tolerance :data:`mapper.search.routed.ROUTED_TOLERANCE`) and, under objective ``congestion``,
repairs a refused result under the baseline's per-level maxima
(:mod:`mapper.search.routed`).

References
----------
* T. Hoefler, M. Snir, Generic topology mapping strategies for large-scale parallel
  architectures, ICS 2011, doi:10.1145/1995896.1995909 (link load and congestion
  along routed paths).
* W. J. Dally, B. Towles, Principles and Practices of Interconnection Networks,
  Morgan Kaufmann 2004, ch. 14 (dimension-order routing).
* J. Kim, W. J. Dally, S. Scott, D. Abts, Technology-Driven, Highly-Scalable
  Dragonfly Topology, ISCA 2008, doi:10.1109/ISCA.2008.19 (minimal routing).
* Li, Chen, Liu, Yang, Gong, Gan, Li & Xu, OHTMA: an optimized heuristic
  topology-aware mapping algorithm on the Tianhe-3 exascale supercomputer prototype,
  Front. Inform. Technol. Electron. Eng. 21(6):939-949, 2020, doi:10.1631/FITEE.1900075
  (the Tianhe-3 layout's distance classes).
* J. H. Ahn, N. Binkert, A. Davis, M. McLaren, R. S. Schreiber, HyperX: Topology,
  Routing, and Packaging of Efficient Large-Scale Networks, SC 2009,
  doi:10.1145/1654059.1654101 (fully connected rows and columns).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..model.graph import CommGraph
from ..model.machine import Hierarchy, MachineError
from . import _link_load
from .qap import check_mapping

_Segment = tuple[np.ndarray, Callable[[np.ndarray, np.ndarray], np.ndarray]]


@dataclass(frozen=True, eq=False)
class RoutedNetwork:
    """Links with capacities and the route between every ordered pair of job nodes.

    Attributes
    ----------
    capacity:
        ``float64`` (links,), positive.
    level_names, level_bounds:
        Link ids of level i are ``level_bounds[i]:level_bounds[i+1]``.
    link_ends:
        ``int64`` (links, 2): the two vertices a link joins (the builder's numbering:
        node slots first, then routers or switches).
    route_ptr, route_links:
        CSR of the routes: ``route_ptr`` (N² + 1,) ``int64``, ``route_links``
        ``int32`` link ids in path order; pair index ``a * N + b``.
    pe_node:
        ``int64`` (PEs,): the job node (0..N-1) of each PE.
    node_slots:
        ``int64`` (N,): the machine slot of each job node.
    symmetric:
        The route b → a crosses the links of a → b (loads put w on one route).
    routing:
        One line naming the routing, for reports.
    """

    capacity: np.ndarray
    level_names: tuple[str, ...]
    level_bounds: np.ndarray
    link_ends: np.ndarray
    route_ptr: np.ndarray
    route_links: np.ndarray
    pe_node: np.ndarray
    node_slots: np.ndarray
    symmetric: bool
    routing: str

    def __post_init__(self) -> None:
        cap = np.ascontiguousarray(self.capacity, dtype=np.float64)
        links = len(cap)
        if not np.all(np.isfinite(cap)) or (links and cap.min() <= 0):
            raise MachineError("link capacities must be finite and positive")
        bounds = np.asarray(self.level_bounds, dtype=np.int64)
        if (len(bounds) != len(self.level_names) + 1 or bounds[0] != 0
                or bounds[-1] != links or np.any(np.diff(bounds) < 0)):
            raise MachineError(f"level bounds {bounds.tolist()} do not split {links} links "
                               f"into {len(self.level_names)} levels")
        nodes = len(self.node_slots)
        ptr = np.ascontiguousarray(self.route_ptr, dtype=np.int64)
        rl = np.ascontiguousarray(self.route_links, dtype=np.int32)
        if len(ptr) != nodes * nodes + 1 or ptr[0] != 0 or ptr[-1] != len(rl):
            raise MachineError(f"route pointers must be {nodes}² + 1 offsets into the links")
        if len(rl) and (rl.min() < 0 or rl.max() >= links):
            raise MachineError("a route names a link outside 0..links-1")
        pe_node = np.ascontiguousarray(self.pe_node, dtype=np.int64)
        if len(pe_node) and (pe_node.min() < 0 or pe_node.max() >= nodes):
            raise MachineError(f"PE nodes must be in 0..{nodes - 1}")
        for name, value in (("capacity", cap), ("level_bounds", bounds), ("route_ptr", ptr),
                            ("route_links", rl), ("pe_node", pe_node),
                            ("node_slots", np.asarray(self.node_slots, dtype=np.int64)),
                            ("link_ends", np.asarray(self.link_ends, dtype=np.int64))):
            object.__setattr__(self, name, value)

    @property
    def nodes(self) -> int:
        """Number of job nodes N."""
        return len(self.node_slots)

    @property
    def n(self) -> int:
        """Number of PEs."""
        return len(self.pe_node)

    @property
    def links(self) -> int:
        return len(self.capacity)

    @property
    def link_level(self) -> np.ndarray:
        """The level index of every link."""
        return np.repeat(np.arange(len(self.level_names)), np.diff(self.level_bounds))

    def route(self, a: int, b: int) -> np.ndarray:
        """Link ids from job node a to job node b, in path order (empty for a == b)."""
        k = int(a) * self.nodes + int(b)
        return self.route_links[self.route_ptr[k]:self.route_ptr[k + 1]]

    def route_lengths(self) -> np.ndarray:
        """N × N number of links of every route."""
        return np.diff(self.route_ptr).reshape(self.nodes, self.nodes)


# -- building routes ------------------------------------------------------------------

def _assemble(count: int, segments: Sequence[_Segment]) -> tuple[np.ndarray, np.ndarray]:
    """Route CSR of ``count`` pairs from segments in path order: each segment gives the
    number of links it adds to every pair and a function (pair, step) -> link ids.
    O(total route length) time and memory."""
    lengths = np.zeros(count, dtype=np.int64)
    for c, _ in segments:
        lengths += c
    ptr = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(lengths, out=ptr[1:])
    out = np.empty(int(ptr[-1]), dtype=np.int32)
    offset = ptr[:-1].copy()
    for c, ids in segments:
        c = c.astype(np.int64)
        pair = np.repeat(np.arange(count, dtype=np.int64), c)
        step = np.arange(len(pair), dtype=np.int64) - np.repeat(np.cumsum(c) - c, c)
        if len(pair):
            out[offset[pair] + step] = ids(pair, step)
        offset += c
    return ptr, out


def _job(slots: Sequence[int] | np.ndarray | None, total: int,
         node_sizes: Sequence[int] | np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The job's node slots (all slots by default) and the node of each PE."""
    s = np.arange(total, dtype=np.int64) if slots is None else np.asarray(slots, np.int64)
    if s.ndim != 1 or (len(s) and (s.min() < 0 or s.max() >= total)):
        raise MachineError(f"node slots must be integers in 0..{total - 1}")
    if len(np.unique(s)) != len(s):
        raise MachineError("a node slot is given twice")
    sizes = (np.ones(len(s), dtype=np.int64) if node_sizes is None
             else np.asarray(node_sizes, dtype=np.int64))
    if sizes.shape != s.shape or (len(sizes) and sizes.min() < 1):
        raise MachineError(f"node sizes must be {len(s)} positive integers")
    return s, np.repeat(np.arange(len(s), dtype=np.int64), sizes)


def _pairs(slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Source and target slots of the N² ordered pairs, pair index a * N + b."""
    n = len(slots)
    return np.repeat(slots, n), np.tile(slots, n)


def tree_network(machine: Hierarchy, *, node_level: int | None = None,
                 capacity: float | Sequence[float] = 1.0) -> RoutedNetwork:
    """The uplinks of ``machine``'s groups from ``node_level`` (default: the level named
    ``node``, else 0) up to the level below the root, routed up to the lowest common
    group and down.  ``capacity``: one value, or one per uplink level (innermost first;
    a level oversubscribed 4:1 has a quarter of the capacity its groups' children
    have).  Job nodes are the groups of ``node_level``; the PEs are the machine's.
    O(N² · levels) time and memory."""
    if node_level is None:
        node_level = (machine.level_names.index("node") if "node" in machine.level_names
                      else 0)
    top = machine.levels - 1
    if not 0 <= node_level < top:
        raise MachineError(f"node level {node_level} has no uplink (levels 0..{top - 1})")
    ups = list(range(node_level, top))
    caps = np.asarray(capacity, dtype=np.float64).reshape(-1)
    if len(caps) == 1:
        caps = np.repeat(caps, len(ups))
    if len(caps) != len(ups):
        raise MachineError(f"{len(ups)} uplink levels but {len(caps)} capacities")
    groups = [len(machine.bounds[lv]) - 1 for lv in range(machine.levels)]
    first = machine.bounds[node_level][:-1]  # first PE of every node
    gid = machine.group_ids[first].astype(np.int64)  # (N, levels): groups of each node
    n = len(first)
    # vertex of group g at level lv: groups of the levels below first
    vbase = np.concatenate([[0], np.cumsum([groups[lv] for lv in range(node_level, top + 1)])])
    lbase = np.concatenate([[0], np.cumsum([groups[lv] for lv in ups])]).astype(np.int64)
    ends = []
    for i, lv in enumerate(ups):
        child = np.arange(groups[lv])
        # the parent of a level-lv group: the level-(lv+1) group of its first PE
        parent = machine.group_ids[machine.bounds[lv][:-1], lv + 1].astype(np.int64)
        ends.append(np.stack([vbase[i] + child, vbase[i + 1] + parent], axis=1))
    a, b = _pairs(np.arange(n, dtype=np.int64))
    differ = [gid[a, lv] != gid[b, lv] for lv in ups]
    segments: list[_Segment] = []
    for i, lv in enumerate(ups):  # up from a
        segments.append((differ[i], lambda p, _k, i=i, lv=lv: lbase[i] + gid[a[p], lv]))
    for i, lv in reversed(list(enumerate(ups))):  # down to b
        segments.append((differ[i], lambda p, _k, i=i, lv=lv: lbase[i] + gid[b[p], lv]))
    ptr, rl = _assemble(n * n, segments)
    return RoutedNetwork(np.repeat(caps, [groups[lv] for lv in ups]),
                         tuple(machine.level_names[lv] for lv in ups), lbase,
                         np.concatenate(ends), ptr, rl,
                         machine.group_ids[:, node_level].astype(np.int64),
                         np.arange(n), True,
                         f"tree: up to the lowest common group and down "
                         f"({machine.level_names[node_level]} level up)")


def _grid_network(dims: Sequence[int], wrap: bool, slots, node_sizes, node_capacity: float,
                  link_capacity: float) -> RoutedNetwork:
    d = tuple(int(x) for x in dims)
    if not d or min(d) < 1:
        raise MachineError(f"grid dimensions must be positive integers, got {list(dims)}")
    total = int(np.prod(d))
    s, pe_node = _job(slots, total, node_sizes)
    coords = np.stack(np.unravel_index(np.arange(total), d), axis=1)  # (total, D)
    ring = [wrap and length >= 3 for length in d]  # rings of 1 or 2 have no wrap link
    # link (dim k, router r) joins r and r + e_k (mod L); id table per dimension
    tid, ends, next_id = [], [], total
    for k, length in enumerate(d):
        ok = np.ones(total, bool) if ring[k] else coords[:, k] < length - 1
        t = np.full(total, -1, dtype=np.int64)
        t[ok] = next_id + np.arange(int(ok.sum()))
        next_id += int(ok.sum())
        nb = coords[ok].copy()
        nb[:, k] = (nb[:, k] + 1) % length
        ends.append(np.stack([total + np.flatnonzero(ok),
                              total + np.ravel_multi_index(nb.T, d)], axis=1))
        tid.append(t)
    node_ends = np.stack([np.arange(total), total + np.arange(total)], axis=1)
    a, b = _pairs(s)
    ca, cb = coords[a], coords[b]
    segments: list[_Segment] = [((a != b).astype(np.int64), lambda p, _k: a[p])]
    for k, length in enumerate(d):
        if ring[k]:
            f = (cb[:, k] - ca[:, k]) % length
            up = 2 * f <= length  # the shorter way; up on a tie
            steps = np.where(up, f, length - f)
        else:
            up = cb[:, k] >= ca[:, k]
            steps = np.abs(cb[:, k] - ca[:, k])

        def ids(p, step, k=k, length=length, up=up):
            x = ca[p, k]
            pos = np.where(up[p], x + step, x - 1 - step) % length
            c = np.concatenate([cb[p, :k], pos[:, None], ca[p, k + 1:]], axis=1)
            return tid[k][np.ravel_multi_index(c.T, d)]
        segments.append((steps, ids))
    segments.append(((a != b).astype(np.int64), lambda p, _k: b[p]))
    ptr, rl = _assemble(len(a), segments)
    capacity = np.concatenate([np.full(total, float(node_capacity)),
                               np.full(next_id - total, float(link_capacity))])
    kind = "torus" if wrap else "mesh"
    return RoutedNetwork(capacity, ("node", "network"), np.array([0, total, next_id]),
                         np.concatenate([node_ends, *ends]), ptr, rl, pe_node, s, False,
                         f"{kind} {'x'.join(map(str, d))}: dimension order (dimension 0 "
                         f"first){', shorter way round, up on ties' if wrap else ''}")


def torus_network(dims: Sequence[int], *, slots: Sequence[int] | np.ndarray | None = None,
                  node_sizes: Sequence[int] | np.ndarray | None = None,
                  node_capacity: float = 1.0, link_capacity: float = 1.0) -> RoutedNetwork:
    """A torus (:func:`mapper.model.networks.torus_hops`'s slots) with dimension-order routing.

    ``slots``: the machine slot of each job node (default all, in order);
    ``node_sizes``: PEs per job node (default 1).  Link ids: the node links (one per
    slot, id = slot), then the router links of dimension 0, 1, … .  O(N² · h) time and
    memory for N job nodes and h hops per route."""
    return _grid_network(dims, True, slots, node_sizes, node_capacity, link_capacity)


def mesh_network(dims: Sequence[int], *, slots: Sequence[int] | np.ndarray | None = None,
                 node_sizes: Sequence[int] | np.ndarray | None = None,
                 node_capacity: float = 1.0, link_capacity: float = 1.0) -> RoutedNetwork:
    """A mesh (:func:`mapper.model.networks.mesh_hops`) with dimension-order routing; as
    :func:`torus_network` without wrap-around links."""
    return _grid_network(dims, False, slots, node_sizes, node_capacity, link_capacity)


def _pair_index(count: int) -> np.ndarray:
    """count × count table of the index of the unordered pair {x, y} (x != y), -1 on
    the diagonal."""
    t = np.full((count, count), -1, dtype=np.int64)
    x, y = np.triu_indices(count, 1)
    t[x, y] = t[y, x] = np.arange(len(x))
    return t


def dragonfly_network(groups: int, routers: int, nodes: int, *,
                      slots: Sequence[int] | np.ndarray | None = None,
                      node_sizes: Sequence[int] | np.ndarray | None = None,
                      node_capacity: float = 1.0, local_capacity: float = 1.0,
                      global_capacity: float = 1.0) -> RoutedNetwork:
    """A dragonfly (:func:`mapper.model.networks.dragonfly_hops`'s model and slot order) with
    minimal routing.  Link ids: node links (id = slot), local links (group by group,
    router pairs in row-major upper-triangle order), global links (group pairs, same
    order).  Vertices: slots, then routers (``group * routers + router``).  O(N² ·
    h) time and memory, h ≤ 5."""
    if min(groups, routers, nodes) < 1:
        raise MachineError(f"dragonfly needs positive groups, routers per group and nodes "
                           f"per router, got {groups}, {routers}, {nodes}")
    total = groups * routers * nodes
    s, pe_node = _job(slots, total, node_sizes)
    lpair, gpair = _pair_index(routers), _pair_index(groups)
    per_group = routers * (routers - 1) // 2
    local0 = total
    global0 = local0 + groups * per_group
    links = global0 + groups * (groups - 1) // 2

    def gate(g, h):  # router of group g holding the global link to group h
        return ((h - g - 1) % groups) % routers

    lx, ly = np.triu_indices(routers, 1)
    gx, gy = np.triu_indices(groups, 1)
    g_of = np.repeat(np.arange(groups), per_group)
    ends = np.concatenate([
        np.stack([np.arange(total), total + np.arange(total) // nodes], axis=1),
        np.stack([total + g_of * routers + np.tile(lx, groups),
                  total + g_of * routers + np.tile(ly, groups)], axis=1),
        np.stack([total + gx * routers + gate(gx, gy),
                  total + gy * routers + gate(gy, gx)], axis=1)]).astype(np.int64)
    a, b = _pairs(s)
    ra, rb = a // nodes, b // nodes
    ga, gb, la, lb = ra // routers, rb // routers, ra % routers, rb % routers
    other = ga != gb
    # the routers where the route enters and leaves the global link (or the target)
    out_a = np.where(other, gate(ga, gb), lb)
    in_b = np.where(other, gate(gb, ga), lb)
    segments: list[_Segment] = [
        ((a != b).astype(np.int64), lambda p, _k: a[p]),
        ((la != out_a).astype(np.int64),
         lambda p, _k: local0 + ga[p] * per_group + lpair[la[p], out_a[p]]),
        (other.astype(np.int64), lambda p, _k: global0 + gpair[ga[p], gb[p]]),
        ((other & (in_b != lb)).astype(np.int64),
         lambda p, _k: local0 + gb[p] * per_group + lpair[in_b[p], lb[p]]),
        ((a != b).astype(np.int64), lambda p, _k: b[p]),
    ]
    ptr, rl = _assemble(len(a), segments)
    capacity = np.concatenate([np.full(total, float(node_capacity)),
                               np.full(global0 - local0, float(local_capacity)),
                               np.full(links - global0, float(global_capacity))])
    return RoutedNetwork(capacity, ("node", "local", "global"),
                         np.array([0, total, global0, links]), ends, ptr, rl, pe_node, s,
                         True, f"dragonfly {groups}x{routers}x{nodes}: minimal "
                               f"(local, global, local)")


def tianhe3_network(rows: int, cols: int, nodes_per_chip: int, *,
                    slots: Sequence[int] | np.ndarray | None = None,
                    node_sizes: Sequence[int] | np.ndarray | None = None,
                    node_capacity: float = 1.0, link_capacity: float = 1.0) -> RoutedNetwork:
    """The Tianhe-3 layout (:func:`mapper.model.networks.tianhe3_hops`'s slot order) as links:
    ``rows × cols`` chip routers with ``nodes_per_chip`` nodes each, every two chips of a
    row joined by a link and every two chips of a column too (a 2D HyperX, the name Ahn
    et al. give a grid with fully connected rows and columns; a flattened butterfly
    has this shape), with dimension-order routing: along the source's row to the
    target's column, then along that column (Dally & Towles, ch. 14).  It is the machine
    the hop model's defaults (1, 2, 3) count — the chip's router, one row or column
    link, one more for the second dimension — not a wiring taken from the prototype:
    Li et al. (OHTMA) give three distance classes, no link list.  A site's
    ``chip_hops`` changes J only; these links do not depend on them.

    Slot order ``((row * cols) + col) * nodes_per_chip + k``.  ``slots``: the machine
    slot of each job node (default all, in order); ``node_sizes``: PEs per job node
    (default 1).  Vertices: the slots, then the chip routers (``total + row * cols +
    col``).  Link ids: node links (id = slot), then row links (row by row, column pairs
    in row-major upper-triangle order), then column links (column by column, row pairs
    in the same order).  A route crosses the node links of both ends (none for a node
    to itself; only those two inside a chip), a row link if the columns differ and a
    column link if the rows differ: ``tianhe3_hops(..., hops=(0, 1, 2))`` chip links.
    a → b turns at chip (row a, column b), b → a at (row b, column a), so routes are not
    symmetric.  Levels ``node`` and ``network``: one capacity for all chip-to-chip
    links, as on a torus, since the model gives row and column links the same role and
    hop count and nothing says their bandwidths differ; comparing them apart would
    refuse a placement that only moves its busiest chip link from a row to a column.
    O(N² · h) time and memory for N job nodes, h ≤ 4 links per route.

    References: Li et al., OHTMA, Front. Inform. Technol. Electron. Eng. 21(6), 2020,
    doi:10.1631/FITEE.1900075; J. H. Ahn, N. Binkert, A. Davis, M. McLaren, R. S.
    Schreiber, HyperX: topology, routing, and packaging of efficient large-scale
    networks, SC 2009, doi:10.1145/1654059.1654101."""
    if min(rows, cols, nodes_per_chip) < 1:
        raise MachineError(f"tianhe3 needs positive rows, cols and nodes per chip, got "
                           f"{rows}, {cols}, {nodes_per_chip}")
    chips = rows * cols
    total = chips * nodes_per_chip
    s, pe_node = _job(slots, total, node_sizes)
    cpair, rpair = _pair_index(cols), _pair_index(rows)
    per_row, per_col = cols * (cols - 1) // 2, rows * (rows - 1) // 2
    row0 = total
    col0 = row0 + rows * per_row
    links = col0 + cols * per_col
    cx, cy = np.triu_indices(cols, 1)
    rx, ry = np.triu_indices(rows, 1)
    r_of = np.repeat(np.arange(rows), per_row)
    c_of = np.repeat(np.arange(cols), per_col)
    ends = np.concatenate([
        np.stack([np.arange(total), total + np.arange(total) // nodes_per_chip], axis=1),
        np.stack([total + r_of * cols + np.tile(cx, rows),
                  total + r_of * cols + np.tile(cy, rows)], axis=1),
        np.stack([total + np.tile(rx, cols) * cols + c_of,
                  total + np.tile(ry, cols) * cols + c_of], axis=1)]).astype(np.int64)
    a, b = _pairs(s)
    chip_a, chip_b = a // nodes_per_chip, b // nodes_per_chip
    ra, ca, rb, cb = chip_a // cols, chip_a % cols, chip_b // cols, chip_b % cols
    segments: list[_Segment] = [
        ((a != b).astype(np.int64), lambda p, _k: a[p]),
        # row first: the row link lies in the source's row, the column link in the
        # target's column
        ((ca != cb).astype(np.int64),
         lambda p, _k: row0 + ra[p] * per_row + cpair[ca[p], cb[p]]),
        ((ra != rb).astype(np.int64),
         lambda p, _k: col0 + cb[p] * per_col + rpair[ra[p], rb[p]]),
        ((a != b).astype(np.int64), lambda p, _k: b[p]),
    ]
    ptr, rl = _assemble(len(a), segments)
    capacity = np.concatenate([np.full(total, float(node_capacity)),
                               np.full(links - total, float(link_capacity))])
    return RoutedNetwork(capacity, ("node", "network"), np.array([0, total, links]), ends,
                         ptr, rl, pe_node, s, False,
                         f"tianhe3 {rows}x{cols} chips of {nodes_per_chip} "
                         f"node{'s' if nodes_per_chip != 1 else ''}: dimension order (along "
                         f"the row, then the column; rows and columns fully connected)")


# -- loads ----------------------------------------------------------------------------

def link_loads(graph: CommGraph, mapping: np.ndarray, network: RoutedNetwork) -> np.ndarray:
    """Load of every link (``float64``, volume of both directions) under ``mapping``
    (rank → PE).  Compiled; O(n + m·h) for m edges and h links per route."""
    pi = check_mapping(mapping, network.n, graph.n)
    return _link_load.link_loads(graph.indptr, graph.indices, graph.weights, pi,
                                 network.pe_node, network.route_ptr, network.route_links,
                                 network.nodes, network.links, network.symmetric)


def swap_delta(graph: CommGraph, mapping: np.ndarray, network: RoutedNetwork,
               loads: np.ndarray, u: int, v: int) -> None:
    """Update ``loads`` (those of ``mapping``, ``float64``, contiguous) in place to the
    loads after swapping the PEs of ranks u and v; ``mapping`` is not changed.
    O((deg u + deg v)·h) — the edge u–v keeps its links (its two directions trade
    routes), ranks on one node change nothing.  The mapping is not checked (a search
    calls this in its inner loop)."""
    pi = np.ascontiguousarray(mapping, dtype=np.int64)
    _check_ranks(u, v, len(pi))
    if loads.dtype != np.float64 or not loads.flags.c_contiguous:
        raise ValueError("loads must be a contiguous float64 array (it is updated in place)")
    _link_load.swap_delta(graph.indptr, graph.indices, graph.weights, pi, network.pe_node,
                          network.route_ptr, network.route_links, network.nodes,
                          network.symmetric, loads, int(u), int(v))


def _check_ranks(u: int, v: int, n: int) -> None:
    if not (0 <= u < n and 0 <= v < n):
        raise IndexError(f"ranks {u}, {v}: expected 0..{n - 1}")


def level_congestion(loads: np.ndarray, network: RoutedNetwork) -> np.ndarray:
    """Per level, the largest ``load / capacity`` of its links (0 for a level without
    links).  O(links)."""
    c = np.asarray(loads, dtype=np.float64) / network.capacity
    b = network.level_bounds
    return np.array([c[b[i]:b[i + 1]].max(initial=0.0) for i in range(len(b) - 1)])


class LinkLoadTracker:
    """The loads of a mapping kept under swaps, with the congestion maxima at hand.

    A max-tree over ``load / capacity`` (see the module docstring for why not a cached
    maximum): :meth:`swap` costs O((deg u + deg v)·h + t log L) for t distinct links
    touched and returns the new maximum congestion; :meth:`level_max` is O(log L) per
    level.  Swapping the same pair again undoes a swap (up to rounding of the loads).
    """

    def __init__(self, graph: CommGraph, mapping: np.ndarray, network: RoutedNetwork):
        pi = check_mapping(mapping, network.n, graph.n)
        self.network = network
        self._n = len(pi)
        self._t = _link_load.LoadTracker(graph.indptr, graph.indices, graph.weights, pi,
                                         network.pe_node, network.route_ptr,
                                         network.route_links, network.nodes,
                                         network.capacity, network.symmetric)

    def swap(self, u: int, v: int) -> float:
        """Swap the PEs of ranks u and v; the maximum congestion after it."""
        _check_ranks(u, v, self._n)
        return float(self._t.swap(int(u), int(v)))

    @property
    def max_congestion(self) -> float:
        """The largest ``load / capacity`` over all links."""
        return float(self._t.max_congestion())

    def level_max(self) -> np.ndarray:
        """Per level, the largest ``load / capacity`` (as :func:`level_congestion`)."""
        b = self.network.level_bounds
        return np.array([self._t.range_max(int(b[i]), int(b[i + 1]))
                         for i in range(len(b) - 1)])

    @property
    def loads(self) -> np.ndarray:
        """The loads per link (a copy)."""
        return self._t.loads

    @property
    def mapping(self) -> np.ndarray:
        """The current mapping rank → PE (a copy)."""
        return self._t.mapping
