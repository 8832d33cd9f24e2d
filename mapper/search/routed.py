"""J under caps on every level's busiest routed link: the congestion aim on tori,
meshes, dragonflies and Tianhe-3 layouts.

:mod:`mapper.search.congested` aims the search at the never-worse rule's link test on
switch trees, where a link's load is a group's cut.  On a network with fixed routes
(a :class:`~mapper.objectives.link_load.RoutedNetwork`: dimension-order routing on a torus, a
mesh or a Tianhe-3 layout, minimal routing on a dragonfly) a link's load is the volume
of the messages whose route crosses it, and its congestion that load over its capacity
(:func:`mapper.objectives.link_load.link_loads`).  This module looks for

    min J(π)  subject to  max_{links l of level λ} c_l(π) ≤ cap_λ  for every level λ,

c_l = load_l / capacity_l, with cap_λ the default's busiest congestion of level λ
(:func:`caps_of`: node links; the router links of a torus or mesh; a dragonfly's local
and global links apart — the levels of :func:`mapper.objectives.link_load.level_congestion`).  It
is congested.py's lexicographic local search on (V, J), with the violation

    V(π) = Σ_λ Σ_{links l of λ} (c_l(π) − cap_λ)⁺ / cap_λ

(a cap of 0 counts as 1), zero exactly when every cap holds.  A swap is taken when it
lowers V, or when it lowers J and raises no link above max(its congestion, its level's
cap): V never rises, and once it is 0 every later swap keeps all caps.  From an
overloaded mapping it is a *congestion repair*, from the default (V = 0) a
*constrained polish*.

Incremental: the change of the loads under a swap of u and v is the compiled
``_swap_loads`` of :mod:`mapper.objectives._link_load` (the machinery of
:func:`mapper.objectives.link_load.swap_delta`) written into a scratch array that is zero outside
the t links it touches, so V's change and the cap test cost O(t); J's change is the
swap gain of :mod:`mapper.search.swap` on the machine's own distance oracle
(:class:`mapper.model.oracle.KernelOracle`: a :class:`~mapper.model.networks.NodeHopMachine`'s hop
table between nodes), O(deg u + deg v).  One evaluation costs O((deg u + deg v)·h) for
h links per route (two routes per edge where a → b and b → a differ).  The max-tree of
:class:`mapper.objectives.link_load.LinkLoadTracker` is not needed: V and the cap test read only
the touched links.  A swap lowers V only by taking load off a link above its cap, and
takes load only off the routes of u's and v's edges; when V is 0, or neither rank's
routes cross such a link (O(deg · h), first hit stops), the O(deg u + deg v) J test runs
first and the loads only for a swap that lowers J (the same swaps, 3.6x faster on the
case measured below).

Neighbourhood: u's partners are the ranks on the job nodes that hold u's communication
partners, outside u's own node (as congested.py's node level).  A sweep visits the
ranks in random order and takes u's first improving swap.  Cost per sweep
O(Σ_u (distinct partner nodes of u) · c · (deg u + d̄) · h) for c PEs per node; sweeps
stop at ``max_sweeps``, the time limit, or the first sweep without a move.  Start:
O(n + m·h + links) for the loads and V.  ``kicks`` (:func:`constrained_search`) restart
a stalled repair from a few random swaps of ranks on overloaded routes.

Measured (this machine, 2 busy cores): a 3D stencil of 4096 ranks on an 8×8×8 torus,
8 cores per node, block as the default: OHTMA+N_C^10's J is 1.7 % below block's but
its busiest router link carries 53 vs block's 36 (node links 36 vs 33).  The repair's
descent takes 3.3 s (18 sweeps, 1.9 M evaluations) to V = 0.09 (one node link 36 over
33), two kicks reach V = 0; ``map_processes(..., objective="congestion")`` without a
time limit: 9.6 s in all, 8.0 s of it the aim, J 4.5 % below block's under block's
busiest node and router links (objective J keeps block).  A constrained polish of
block: one sweep, 0.05 s, no move.

References
----------
* T. Hoefler, M. Snir, "Generic topology mapping strategies for large-scale parallel
  architectures", ICS 2011, doi:10.1145/1995896.1995909 (link load along routed paths
  over capacity, the maximum congestion, as the mapping metric beside dilation).
* W. J. Dally, B. Towles, Principles and Practices of Interconnection Networks, Morgan
  Kaufmann 2004, ch. 14 (dimension-order routing); J. Kim, W. J. Dally, S. Scott,
  D. Abts, ISCA 2008, doi:10.1109/ISCA.2008.19 (dragonfly minimal routing): the routes
  of :mod:`mapper.objectives.link_load`.
"""

from __future__ import annotations

import time

import numpy as np

from ..model.graph import CommGraph
from ..model.machine import Machine, MachineError
from ..model.oracle import KernelOracle
from ..objectives.link_load import RoutedNetwork, level_congestion, link_loads
from ..objectives.qap import check_mapping, objective
from . import _routed
from .congested import _ROUNDING, MAX_SWEEPS, ConstrainedStats, kicked_descents
from .swap import _REL_EPS, _max_distance

#: A candidate may load a routed level's busiest link this much more (relative) than
#: the baseline before the never-worse rule refuses it: only rounding (the routed check
#: has had no measurement tolerance since graph mode's first link check).
ROUTED_TOLERANCE = 1e-9


def caps_of(graph: CommGraph, network: RoutedNetwork, baseline: np.ndarray,
            slack: float = 0.0) -> np.ndarray:
    """Per level of ``network``, the busiest ``load / capacity`` under ``baseline``,
    times 1 + slack: the caps the never-worse rule checks against.  O(n + m·h + links)."""
    return level_congestion(link_loads(graph, baseline, network), network) * (1.0 + slack)


def link_caps(network: RoutedNetwork, caps: np.ndarray) -> np.ndarray:
    """Each link's cap on its congestion: its level's, raised by a relative 1e-12
    (:data:`~mapper.search.congested._ROUNDING`) so that loads summed in another order
    cannot put the baseline's busiest link above its own cap.  O(links)."""
    caps = np.asarray(caps, dtype=np.float64)
    if caps.shape != (len(network.level_names),):
        raise ValueError(f"{len(caps)} caps for {len(network.level_names)} levels")
    return np.ascontiguousarray(np.repeat(caps, np.diff(network.level_bounds))
                                * (1.0 + _ROUNDING))


def violation_of_loads(loads: np.ndarray, network: RoutedNetwork, caps: np.ndarray) -> float:
    """V of the link loads ``loads``: Σ over links of (c − cap)⁺ / cap (cap 0 counts
    as 1; caps from :func:`link_caps`).  O(links)."""
    kap = link_caps(network, caps)
    c = np.asarray(loads, dtype=np.float64) / network.capacity
    over = c > kap
    return float(np.where(over, (c - kap) / np.where(kap > 0, kap, 1.0), 0.0).sum())


def violation(graph: CommGraph, network: RoutedNetwork, pe: np.ndarray,
              caps: np.ndarray) -> float:
    """V of ``pe`` from its loads recomputed (:func:`mapper.objectives.link_load.link_loads`)."""
    return violation_of_loads(link_loads(graph, pe, network), network, caps)


def raised_level(graph: CommGraph, network: RoutedNetwork, mapping: np.ndarray,
                 base: np.ndarray, tolerance: float = ROUTED_TOLERANCE
                 ) -> tuple[int, float] | None:
    """The first level whose busiest congestion under ``mapping`` exceeds ``base`` (the
    baseline's, :func:`caps_of`) by more than ``tolerance``, with the ratio (∞ over a
    level the baseline leaves idle); None when none does.  O(n + m·h + links)."""
    ours = level_congestion(link_loads(graph, mapping, network), network)
    for i in range(len(ours)):
        if ours[i] > base[i] * (1.0 + tolerance):
            return i, (float(ours[i] / base[i]) if base[i] > 0 else float("inf"))
    return None


def node_bounds(network: RoutedNetwork) -> np.ndarray:
    """The PE range of every job node, ``bounds[x]:bounds[x + 1]`` (PEs run node by
    node, as in :class:`~mapper.model.networks.NodeHopMachine`)."""
    pe_node = network.pe_node
    if len(pe_node) and np.any(np.diff(pe_node) < 0):
        raise MachineError("the routed network's PEs must run node by node")
    return np.searchsorted(pe_node, np.arange(network.nodes + 1)).astype(np.int64)


def constrained_search(graph: CommGraph, machine: Machine, network: RoutedNetwork,
                       pe: np.ndarray, caps: np.ndarray, seed: int = 0,
                       time_limit: float | None = None,
                       max_sweeps: int = MAX_SWEEPS, kicks: int = 0) -> ConstrainedStats:
    """Lower V, then J under the caps, by swaps from ``pe`` (modified in place; module
    docstring).  ``machine`` gives J's distances (its PEs are ``network``'s), ``caps``
    one per level of ``network`` on its busiest ``load / capacity`` (e.g.
    :func:`caps_of` of the default placement).  ``violation_before`` and ``violation``
    are recomputed from the loads, ``j_change`` is the sum of the swaps' gains (with
    kicks: the change of J from ``pe`` to the result).

    ``kicks`` > 0: while V stays above 0 after a descent, up to ``kicks`` times swap
    :data:`KICK_SIZE` random ranks whose edges cross a link above its cap with random
    ranks and descend again, keeping the best (V, J) reached (congested.py's iterated
    search on the violation).  Each kick costs O(N²·h + m) to find those ranks and one
    descent.  Measured: a 4096-rank 3D stencil on an 8×8×8 torus (8 cores per node)
    under block's caps, the descent from OHTMA's result stalls at V = 0.09 (one node
    link 36 vs 33); two kicks reach V = 0 at J 3.9 % below block's."""
    if not (pe.dtype == np.int64 and pe.flags.c_contiguous):
        raise TypeError("pe must be a C-contiguous int64 array (it is modified in place)")
    if machine.n != network.n:
        raise MachineError(f"the machine has {machine.n} PEs but the routed network "
                           f"{network.n}")
    check_mapping(pe, network.n, graph.n)
    start = time.perf_counter()
    loads = np.ascontiguousarray(link_loads(graph, pe, network), dtype=np.float64)
    before = violation_of_loads(loads, network, caps)
    j_before = objective(graph, machine, pe) if kicks else 0.0
    first = descend(graph, machine, network, pe, loads, caps, seed, time_limit, max_sweeps)

    def again(trial: np.ndarray, s: int, left: float | None):
        trial_loads = np.ascontiguousarray(link_loads(graph, trial, network),
                                           dtype=np.float64)
        return descend(graph, machine, network, trial, trial_loads, caps, s, left,
                       max_sweeps)

    dj, moves, sweeps, timed_out, evals = kicked_descents(
        graph, machine, pe, j_before, first, again,
        lambda trial, rng: _kick(graph, network, trial, caps, rng),
        kicks, seed, start, time_limit)
    after = violation(graph, network, pe, caps)
    return ConstrainedStats(before, after, float(dj), int(moves), int(sweeps),
                            bool(timed_out), int(evals))


#: Ranks swapped at random by one kick (:func:`constrained_search`).
KICK_SIZE = 4

#: Kicks of the congestion repair in :func:`mapper.solve.aimed.aim_at_routed_congestion` (within
#: its time limit; none once V is 0).
AIM_KICKS = 20


def _kick(graph: CommGraph, network: RoutedNetwork, pe: np.ndarray, caps: np.ndarray,
          rng: np.random.Generator) -> None:
    """Swap :data:`KICK_SIZE` random ranks among those whose edges' routes cross a
    link above its cap with random ranks (in place).  O(N²·h + m)."""
    c = link_loads(graph, pe, network) / network.capacity
    over = c > link_caps(network, caps)
    if not over.any():
        return
    pairs = network.nodes * network.nodes
    pair_of = np.repeat(np.arange(pairs), np.diff(network.route_ptr))
    hit = np.bincount(pair_of[over[network.route_links]], minlength=pairs) > 0
    u, v, _ = graph.edges()
    a, b = network.pe_node[pe[u]], network.pe_node[pe[v]]
    crossing = hit[a * network.nodes + b] | hit[b * network.nodes + a]
    ranks = np.unique(np.concatenate([u[crossing], v[crossing]]))
    if not len(ranks):
        return
    for _ in range(KICK_SIZE):
        x, y = int(rng.choice(ranks)), int(rng.integers(len(pe)))
        pe[x], pe[y] = pe[y], pe[x]


def descend(graph: CommGraph, machine: Machine, network: RoutedNetwork, pe: np.ndarray,
            loads: np.ndarray, caps: np.ndarray, seed: int, time_limit: float | None,
            max_sweeps: int = MAX_SWEEPS) -> tuple[float, float, int, int, bool, int]:
    """The compiled descent itself: ``pe`` and ``loads`` (its link loads, contiguous
    ``float64``) updated in place; returns (V from the loads kept incrementally, the
    sum of the swaps' J gains, moves, sweeps, hit the time limit, evaluations).
    Unchecked (:func:`constrained_search` checks); tests compare the incremental
    values with recomputation."""
    scale = max(graph.total_volume, 1.0) * _max_distance(machine)
    viol, dj, moves, sweeps, timed_out, evals = _routed.constrained_search(
        graph.indptr, graph.indices, graph.weights, pe, *KernelOracle.of(machine).args(),
        network.pe_node, node_bounds(network), network.route_ptr, network.route_links,
        network.nodes, network.symmetric, loads, 1.0 / network.capacity,
        link_caps(network, caps), int(max_sweeps), int(seed) & 0xFFFFFFFFFFFFFFFF,
        float(time_limit or 0.0), _REL_EPS * scale)
    return float(viol), float(dj), int(moves), int(sweeps), bool(timed_out), int(evals)
