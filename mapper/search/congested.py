"""J under caps on every level's busiest uplink: the never-worse rule as a target.

The solver minimises J (volume × distance).  The never-worse rule
(:mod:`mapper.objectives.congestion`) then refuses its result when some level's busiest uplink (the
largest group load at a network level: node links, leaf uplinks, …) carries more than
under the scheduler's default placement.  This module aims the search at that test
instead of using it as a veto: starting from any mapping it looks for

    min J(π)  subject to  max_g cut_g(π)·w_g ≤ cap_l  for every congestion level l,

with w_g the relative cost of group g's link (1 / relative capacity, the
:data:`~mapper.objectives.congestion.LinkWeights`; 1 without weights, so that the load is the
cut) and cap_l the default's busiest load of level l (:func:`caps_of`).  Each group
thus has its own cap on its cut, cap_g = cap_l / w_g (∞ for w_g = 0, a group without
a link).  It is a lexicographic local search on (V, J), where the violation

    V(π) = Σ_l Σ_{groups g of level l} (cut_g(π) − cap_g)⁺ / cap_g

(= Σ (cut_g·w_g − cap_l)⁺ / cap_l for cap_l > 0: the load's excess relative to the
level's cap; a cap of 0 counts as 1 on the cuts) is zero exactly when every cap holds.
V sums the excess of *every* group, not only the largest: lowering one of two equally
loaded groups lowers V, where the maximum would not move (a plateau a local search
cannot cross).  A swap is taken when it lowers V, or when it lowers J and raises no
group above max(its cut, cap_g); so V never rises, and once it is 0 every later swap
keeps all caps (J is then minimised under the constraint).  Run from the solver's
result it is a *congestion repair*: it moves the solver's mapping back inside the caps
at the least cost in J it finds; run from the default placement (V = 0 there) it is a
*constrained polish*.

Incremental cuts: swapping ranks u and v changes, at each level, only the cuts of
u's group g_u and v's group g_v (an edge {u, y} with y in a third group is cut before
and after and counts for y's group both times), so the two new cuts and the change of
V come from u's and v's edges in O((deg u + deg v) · L) for L levels (the group caps
are a table looked up per group, so link weights cost nothing per swap); the change of
J is the swap gain of :mod:`mapper.search.swap`, O(deg u + deg v).

Neighbourhood: u's partners are the ranks on the groups (at ``part_level``, the
innermost congestion level: nodes) that hold u's communication partners, outside u's
own group: moving u next to a partner, or away from an overloaded group, is what
changes a cut.  A sweep visits the ranks in random order and takes u's first
improving swap.  Cost per sweep O(Σ_u deg u · c · (d̄ + deg u) · L), c PEs per group;
sweeps stop at ``max_sweeps``, the time limit, or the first sweep without a move.

Why caps and not J alone: on an oversubscribed tree a bulk-synchronous step lasts as
long as its busiest link (Hoefler & Snir's *congestion*), and volume × distance, the
hop-bytes of Agarwal et al., can fall while the busiest link gets busier (measured
here: NPB-CG's pattern on a 4:1 tree, J 3–20 % lower than block, simulated time
1.57–2.06× block's; docs/does-it-pay.md).

References
----------
* T. Hoefler, M. Snir, "Generic topology mapping strategies for large-scale parallel
  architectures", ICS 2011, doi:10.1145/1995896.1995909 (maximum congestion along
  routed paths, a link's load over its capacity, as the mapping metric beside
  dilation).
* T. Agarwal, A. Sharma, L. V. Kalé, "Topology-aware task mapping for reducing
  communication contention on large parallel machines", IPDPS 2006,
  doi:10.1109/IPDPS.2006.1639379 (hop-bytes versus link contention).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..model.graph import CommGraph
from ..model.machine import Hierarchy, MachineError
from ..objectives.congestion import LinkWeights, check_link_weights, uplink_loads
from ..objectives.qap import objective
from . import _congested
from .phase_caps import PhaseCaps, pace_loads, pace_violation
from .swap import _REL_EPS

#: Sweeps at most (each visits every rank once); the searches measured here stop
#: earlier, at their first sweep without a move.
MAX_SWEEPS = 200

#: Relative allowance on a weighted group cap cap_l / w_g for the rounding of the
#: division (:func:`cap_table`).
_ROUNDING = 1e-12


@dataclass(frozen=True)
class ConstrainedStats:
    """What a constrained search did: V before and after (0 = every cap holds), the
    change of J, swaps taken, sweeps, candidate swaps evaluated."""

    violation_before: float
    violation: float
    j_change: float
    moves: int
    sweeps: int
    hit_time_limit: bool
    evaluations: int

    @property
    def feasible(self) -> bool:
        """Every level's busiest uplink is within its cap."""
        return self.violation <= 0.0


def caps_of(graph: CommGraph, machine: Hierarchy, baseline: np.ndarray,
            levels: Sequence[int], slack: float = 0.0,
            link_weights: LinkWeights | None = None) -> np.ndarray:
    """The busiest uplink's load (cut × link weight,
    :func:`mapper.objectives.congestion.uplink_loads`) of each of ``levels`` under ``baseline``,
    times 1 + slack: the caps the never-worse rule checks against (slack 0: exactly the
    default's).  O(n + m·L)."""
    loads = uplink_loads(graph, machine, baseline, levels, link_weights)
    return np.array([u.load for u in loads], dtype=np.float64) * (1.0 + slack)


def cap_table(machine: Hierarchy, levels: Sequence[int], caps: np.ndarray,
              link_weights: LinkWeights | None = None) -> np.ndarray:
    """Each group's cap on its cut (rows: ``levels``; zero-padded columns as in
    :func:`group_cut_table` get the level's cap): cap_l / w_g, ∞ where w_g = 0 (no
    link); cap_l itself without weights and where w_g = 1.  A quotient is raised by a
    relative 1e-12 (:data:`_ROUNDING`) so that its rounding cannot put the group that
    set the cap (cut_g × w_g = cap_l) above it: the baseline itself keeps every cap.
    O(groups)."""
    caps = np.asarray(caps, dtype=np.float64)
    width = max(len(machine.bounds[lv]) - 1 for lv in levels)
    table = np.repeat(caps[:, None], width, axis=1)
    weights = check_link_weights(machine, link_weights)
    if weights is None:
        return np.ascontiguousarray(table)
    for i, lv in enumerate(levels):
        w = weights[lv]
        if w is None:
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            quotient = caps[i] / np.where(w > 0, w, 1.0) * (1.0 + _ROUNDING)
            table[i, :len(w)] = np.where(w == 1, caps[i], np.where(w > 0, quotient, np.inf))
    return np.ascontiguousarray(table)


def group_cut_table(graph: CommGraph, machine: Hierarchy, pe: np.ndarray,
                    levels: Sequence[int]) -> np.ndarray:
    """Cuts of every group of each of ``levels`` (rows; zero-padded to the largest
    level's group count).  O(n + m·L)."""
    from ..objectives import _volumes
    width = max(len(machine.bounds[lv]) - 1 for lv in levels)
    table = np.zeros((len(levels), width), dtype=np.float64)
    for i, lv in enumerate(levels):
        groups = len(machine.bounds[lv]) - 1
        table[i, :groups] = _volumes.group_cuts(graph.indptr, graph.indices, graph.weights,
                                                pe, machine.group_ids, lv, groups)
    return table


def violation(graph: CommGraph, machine: Hierarchy, pe: np.ndarray,
              levels: Sequence[int], caps: np.ndarray,
              link_weights: LinkWeights | None = None,
              phase_caps: PhaseCaps | None = None) -> float:
    """V of ``pe``: Σ over levels and groups of (cut − cap_g)⁺ / cap_g (cap 0 counts as
    1; cap_g from :func:`cap_table`), with ``phase_caps`` the same over each of its
    phase graphs plus its pace channels' (:func:`mapper.search.phase_caps.pace_violation`)."""
    total = _graph_violation(graph, machine, pe, levels, caps, link_weights)
    if phase_caps is not None:
        for g, c in zip(phase_caps.graphs, phase_caps.caps, strict=True):
            total += _graph_violation(g, machine, pe, levels, c, link_weights)
        total += pace_violation(phase_caps, machine, pe, levels)
    return total


def _graph_violation(graph: CommGraph, machine: Hierarchy, pe: np.ndarray,
                     levels: Sequence[int], caps: np.ndarray,
                     link_weights: LinkWeights | None) -> float:
    table = group_cut_table(graph, machine, pe, levels)
    kap = cap_table(machine, levels, caps, link_weights)
    scale = np.where(kap > 0, kap, 1.0)
    over = table > kap  # a group without a link (cap ∞) never counts
    return float(np.where(over, (table - np.where(over, kap, 0.0)) / scale, 0.0).sum())


def constrained_search(graph: CommGraph, machine: Hierarchy, pe: np.ndarray,
                       levels: Sequence[int], caps: np.ndarray, seed: int = 0,
                       time_limit: float | None = None,
                       max_sweeps: int = MAX_SWEEPS, kicks: int = 0,
                       link_weights: LinkWeights | None = None,
                       phase_caps: PhaseCaps | None = None) -> ConstrainedStats:
    """Lower V, then J under the caps, by swaps from ``pe`` (modified in place; see the
    module docstring).  ``levels`` are hierarchy level indices with an uplink (not the
    root), ``caps`` one per level on its busiest load (e.g. :func:`caps_of` of the
    default placement, with the same ``link_weights``: group g of level l then keeps
    cut_g × w_g ≤ cap_l).

    ``kicks`` > 0: while V stays above 0 after a descent, up to ``kicks`` times swap a
    few random ranks of the overloaded groups with random ranks elsewhere and descend
    again, keeping the best (V, J) reached (an iterated local search on the violation:
    a descent of single swaps stalls where every node already sits at its cap, as on
    NPB-CG's pattern).  Each kick costs one descent.

    ``phase_caps`` (:func:`mapper.search.phase_caps.phase_caps`, from the same baseline,
    levels and weights) add the caps of a profile's phases: each phase's group cuts and
    each pace channel's rank loads count in V and are kept like the total graph's
    cuts (per swap O(Σ_p (deg_p u + deg_p v) · L) more)."""
    if not isinstance(machine, Hierarchy):
        raise MachineError("the constrained search needs a hierarchical machine")
    if not (pe.dtype == np.int64 and pe.flags.c_contiguous):
        raise TypeError("pe must be a C-contiguous int64 array (it is modified in place)")
    levels = [int(lv) for lv in levels]
    if not levels:
        raise ValueError("no congestion level given")
    if sorted(levels) != levels or len(set(levels)) != len(levels):
        raise ValueError(f"levels must increase, got {levels}")
    if not 0 <= levels[0] or levels[-1] >= machine.levels - 1:
        raise ValueError(f"levels must lie in 0..{machine.levels - 2} (the root has no "
                         f"uplink), got {levels}")
    caps = np.ascontiguousarray(caps, dtype=np.float64)
    if caps.shape != (len(levels),):
        raise ValueError(f"{len(caps)} caps for {len(levels)} levels")
    kap = cap_table(machine, levels, caps, link_weights)
    bounded = _Bounded.of(graph, machine, levels, kap, link_weights, phase_caps)
    before = violation(graph, machine, pe, levels, caps, link_weights, phase_caps)
    start = time.perf_counter()
    j_before = objective(graph, machine, pe) if kicks else 0.0
    dj, moves, sweeps, timed_out, evals = kicked_descents(
        graph, machine, pe, j_before, _descend(graph, machine, pe, levels, bounded, seed,
                                               time_limit, max_sweeps),
        lambda trial, s, left: _descend(graph, machine, trial, levels, bounded, s, left,
                                        max_sweeps),
        lambda trial, rng: _kick(graph, machine, trial, levels, kap, rng),
        kicks, seed, start, time_limit)
    viol = violation(graph, machine, pe, levels, caps, link_weights, phase_caps)
    return ConstrainedStats(before, float(viol), float(dj), int(moves), int(sweeps),
                            bool(timed_out), int(evals))


#: What one descent returns: (V, ΔJ, moves, sweeps, timed out, evaluations).
Descent = tuple[float, float, int, int, bool, int]


def kicked_descents(graph: CommGraph, machine, pe: np.ndarray, j_before: float,
                    first: Descent,
                    descend: Callable[[np.ndarray, int, float | None], Descent],
                    kick: Callable[[np.ndarray, np.random.Generator], None], kicks: int,
                    seed: int, start: float, time_limit: float | None
                    ) -> tuple[float, int, int, bool, int]:
    """The iterated search on the violation shared by the tree and routed constrained
    searches: after the ``first`` descent from ``pe`` (whose J was ``j_before``; only
    needed with kicks), while V > 0, up to ``kicks``
    times perturb the best mapping (``kick``) and ``descend(trial, seed, time left)``
    again, keeping the best (V, then J); ``pe`` gets the best.  Returns (ΔJ from
    ``pe`` as given — the first descent's own when there are no kicks —, moves,
    sweeps, timed out, evaluations), summed over the descents.  Each kick costs one
    descent and two evaluations of J (O(m))."""
    best_v, dj, moves, sweeps, timed_out, evals = first
    if kicks <= 0:
        return dj, moves, sweeps, timed_out, evals
    best, best_j = pe.copy(), None
    rng = np.random.default_rng(seed)
    for k in range(kicks):
        if best_v <= 0 or timed_out:
            break
        left = None
        if time_limit is not None:
            left = time_limit - (time.perf_counter() - start)
            if left <= 0:
                timed_out = True
                break
        trial = best.copy()
        kick(trial, rng)
        st = descend(trial, seed + k + 1, left)
        moves, sweeps, evals, timed_out = (moves + st[2], sweeps + st[3], evals + st[5],
                                           st[4])
        if best_j is None:
            best_j = objective(graph, machine, best)
        trial_j = objective(graph, machine, trial)
        if st[0] < best_v - 1e-12 or (st[0] <= best_v + 1e-12 and trial_j < best_j):
            best_v, best, best_j = st[0], trial, trial_j
    pe[:] = best
    return objective(graph, machine, pe) - j_before, moves, sweeps, timed_out, evals


def _kick(graph: CommGraph, machine: Hierarchy, pe: np.ndarray, levels: list[int],
          kap: np.ndarray, rng: np.random.Generator, size: int = 4) -> None:
    """Swap ``size`` random ranks of groups above their cap (``kap``: :func:`cap_table`)
    with random ranks."""
    table = group_cut_table(graph, machine, pe, levels)
    over = [(i, g) for i in range(len(levels)) for g in np.flatnonzero(table[i] > kap[i])]
    if not over:
        return
    for _ in range(size):
        i, g = over[rng.integers(len(over))]
        b = machine.bounds[levels[i]]
        p = int(rng.integers(b[g], b[g + 1]))
        q = int(rng.integers(machine.n))
        u, v = np.flatnonzero(pe == p)[0], np.flatnonzero(pe == q)[0]
        pe[u], pe[v] = q, p


@dataclass(frozen=True)
class _Bounded:
    """The compiled search's constraint arrays: the constraint graphs (the total first,
    then the phases') stacked in one CSR (rows g·n + r), their group caps stacked
    (rows g·L + i), and the pace channels with their caps per row."""

    graphs: tuple[CommGraph, ...]
    indptr: np.ndarray
    indices: np.ndarray
    weights: np.ndarray
    kap: np.ndarray
    phase_caps: PhaseCaps | None

    @classmethod
    def of(cls, graph: CommGraph, machine: Hierarchy, levels: list[int], kap: np.ndarray,
           link_weights: LinkWeights | None, phase_caps: PhaseCaps | None) -> _Bounded:
        graphs, kaps = [graph], [kap]
        if phase_caps is not None:
            for g, c in zip(phase_caps.graphs, phase_caps.caps, strict=True):
                graphs.append(g)
                kaps.append(cap_table(machine, levels, c, link_weights))
        n = graph.n
        ptr = np.zeros(len(graphs) * n + 1, dtype=np.int64)
        offset = 0
        for i, g in enumerate(graphs):
            ptr[i * n + 1:(i + 1) * n + 1] = g.indptr[1:] + offset
            offset += int(g.indptr[-1])
        return cls(tuple(graphs), ptr,
                   np.ascontiguousarray(np.concatenate([g.indices for g in graphs]),
                                        dtype=np.int32),
                   np.ascontiguousarray(np.concatenate([g.weights for g in graphs]),
                                        dtype=np.float64),
                   np.ascontiguousarray(np.vstack(kaps)), phase_caps)

    def cut_table(self, machine: Hierarchy, pe: np.ndarray, levels: list[int]) -> np.ndarray:
        return np.ascontiguousarray(np.vstack([group_cut_table(g, machine, pe, levels)
                                               for g in self.graphs]))


def _descend(graph: CommGraph, machine: Hierarchy, pe: np.ndarray, levels: list[int],
             bounded: _Bounded, seed: int, time_limit: float | None, max_sweeps: int):
    """One compiled descent from ``pe`` under ``bounded``'s caps: (V, ΔJ, moves,
    sweeps, timed out, evals)."""
    table = bounded.cut_table(machine, pe, levels)
    pc = bounded.phase_caps
    if pc is not None and pc.channels.count:
        ch = pc.channels
        load = np.ascontiguousarray(pace_loads(ch, machine, pe, levels))
        pace_cap = np.ascontiguousarray(pc.pace_caps, dtype=np.float64)
        pace = (ch.out_ptr, ch.out_idx, ch.out_w, ch.in_ptr, ch.in_idx, ch.in_w)
    else:
        load, pace_cap = np.zeros(0), np.zeros(0)
        zero_i, zero_w = np.zeros(0, dtype=np.int32), np.zeros(0)
        pace = (np.zeros(1, dtype=np.int64), zero_i, zero_w, np.zeros(1, dtype=np.int64),
                zero_i, zero_w)
    scale = max(graph.total_volume, 1.0) * float(machine.distances.max(initial=1.0))
    part_level = levels[0]
    viol, dj, moves, sweeps, timed_out, evals = _congested.constrained_search(
        graph.indptr, graph.indices, graph.weights, pe,
        np.ascontiguousarray(machine.group_ids, dtype=np.int32),
        np.ascontiguousarray(machine.distances, dtype=np.float64),
        np.asarray(levels, dtype=np.int64), bounded.indptr, bounded.indices,
        bounded.weights, table, bounded.kap, *pace, load, pace_cap,
        np.ascontiguousarray(machine.bounds[part_level], dtype=np.int64), part_level,
        int(max_sweeps), int(seed) & 0xFFFFFFFFFFFFFFFF, float(time_limit or 0.0),
        _REL_EPS * scale)
    return float(viol), float(dj), int(moves), int(sweeps), bool(timed_out), int(evals)


def cut_deltas(graph: CommGraph, machine: Hierarchy, pe: np.ndarray, levels: Sequence[int],
               u: int, v: int) -> tuple[np.ndarray, np.ndarray]:
    """Per level, the change of the cut of u's group and of v's group if ranks u and v
    exchange PEs (compiled; 0 at levels where they share the group; used by tests)."""
    return _congested.cut_deltas(graph.indptr, graph.indices, graph.weights,
                                 np.ascontiguousarray(pe, dtype=np.int64),
                                 np.ascontiguousarray(machine.group_ids, dtype=np.int32),
                                 np.asarray(levels, dtype=np.int64), int(u), int(v))
