"""The time of a profile's communication phases under a mapping, and their per-phase
bottlenecks (the phases themselves: :mod:`mapper.model.phased_graph`).

**The phase time model** (:func:`phase_time`).  On a tree every route is unique, and a
message between ranks u and v crosses, at each level l below the root where their
groups differ, the uplink of u's level-l group and the uplink of v's.  The *load* of an
uplink in phase p is the cut of its group in that phase's graph (both directions, as
in :mod:`mapper.objectives.congestion`), i.e. the volume of **all** of the phase's traffic that
crosses it -- groups that do not synchronise with each other still share links.  A
synchronising group S waits for its members' messages, each bounded by the busiest
link on its sender's or receiver's side; S is charged the uplinks of its *own*
members' groups that their edges cross, so S *sees*

    t_p(S) = max over levels l, over ranks r of S with a phase-p edge crossing level l,
             of cut_p,l(group_l(r)) / capacity(group_l(r))

For groups whose edges stay inside them (CG's rows, FT's rows and columns, every phase
that synchronises all ranks) that is the busiest uplink any of their edges cross, both
ends included.  Where a phase's edges leave its groups (each rank waiting only for its
own messages: ``sync = arange(n)``) the far end's uplink is not charged: a rank whose
neighbour's leaf is busy in one dimension and idle in the others is not slowed by it
the way charging both ends predicts (the evidence, on a halo exchanged one dimension
after the other: bench/README.md, "A halo exchanged by dimension").

The model (:func:`phase_time`) is ``T = Σ_p repeat_p · max_S t_p(S)`` (Hoefler &
Snir's congestion, taken per phase and per synchronising group), or by default its
"runs" variant, in which consecutive phases with the same groups are summed per group
before the maximum (a group that waits for nobody else does not wait at each phase's
end either).  A machine-wide maximum per phase (every phase synchronising all ranks)
is the special case of one group; it, and the per-group maximum per phase, mispredict
a placement under which each process row is slow in a different one of NPB-CG's row
steps: every step's maximum is high, but summed per row it waits as long as under
block -- only "runs" sees that (bench/README.md, "Phases").  The cut counts both
directions, so a one-way pattern (a transpose listing each sender once) weighs twice
its busier direction against pairwise exchanges.  Link capacities (``capacities``: per
level one value or one per group, e.g. a switch's uplink as the host links below it
over the oversubscription) turn volumes into times; loads of different levels are
only compared through them (default 1: volumes, one level at a time).  Latency,
message counts and the overlap of a group's phases with another group's are not
modelled.

**Latency-bound phases** (:attr:`Phase.pace`, :func:`latency_pace`).  A pipeline of
small messages -- NPB LU's SSOR wavefront, NPB BT's line solves -- is not slowed by
its links' loads but by their latencies, on the critical path one message after the
other: it goes at the pace of the rank whose messages cross the most links.  With the
real NPB codes this pace, not the phase time above, tells apart placements with a lower
J and lighter links than block that run slower (bench/README.md, "NPB by phase").

**Exchange rounds** (:attr:`Phase.pace` ``"rounds"``, :func:`round_latency`).  A code
whose messages are all small and that exchanges them in rounds -- every rank sends to
its neighbours, waits for theirs, then sends the next round's (NPB MG's borders, one
dimension after the other) -- waits, round after round, for the round's farthest
message: its time follows Σ over rounds of the round's most links crossed, not its
links' loads (NPB MG's trace: bench/README.md, "Traced NAS codes").

Reference: T. Hoefler, M. Snir, "Generic topology mapping strategies for large-scale
parallel architectures", ICS 2011, doi:10.1145/1995896.1995909 (maximum congestion
along routed paths as the mapping metric; dilation for latencies).

Complexity: :func:`phase_bottlenecks`, :func:`latency_pace` and :func:`round_latency`
are O(Σ_p (n + m_p·L))
for phases of m_p edges and L levels (one compiled group-cut pass and one vectorised
pass over the edges per phase and level).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..model.graph import CommGraph
from ..model.machine import Hierarchy
from ..model.phased_graph import PIPELINE_PACES, PhasedGraph, same_sync
from . import _volumes
from .congestion import node_hop_bytes
from .qap import check_mapping


@dataclass(frozen=True)
class PhaseLoad:
    """What one phase's synchronising groups wait for under a placement.

    ``loads[g, i]`` is the busiest load / capacity at ``levels[i]`` among the uplinks
    of group g's own members' groups that their edges cross, loaded by all of the
    phase's traffic (volume, both directions, over the link's capacity: the volume
    itself with capacity 1; 0 when the group crosses none there).  ``times[g]`` =
    max_i loads[g, i].
    """

    name: str
    repeat: float
    levels: tuple[int, ...]
    loads: np.ndarray   # (groups, len(levels))
    times: np.ndarray   # (groups,)

    @property
    def time(self) -> float:
        """The phase's duration in the model: its slowest group's."""
        return float(self.times.max(initial=0.0))

    @property
    def slowest(self) -> int:
        """The group that waits longest (the first of equals)."""
        return int(np.argmax(self.times)) if len(self.times) else 0


Capacities = Sequence["float | np.ndarray | Sequence[float]"]


def group_capacities(machine: Hierarchy, levels: tuple[int, ...],
                      capacities: Capacities | None) -> list[np.ndarray]:
    """Per level, every group's uplink capacity (positive; ``inf`` for a group without
    a link of its own), from one value per level or one per group."""
    if capacities is None:
        capacities = [1.0] * len(levels)
    if len(capacities) != len(levels):
        raise ValueError(f"need {len(levels)} capacities (one per level), got "
                         f"{len(capacities)}")
    out = []
    for level, cap in zip(levels, capacities, strict=True):
        groups = len(machine.bounds[level]) - 1
        c = np.broadcast_to(np.asarray(cap, dtype=np.float64), (groups,)) \
            if np.ndim(cap) == 0 else np.asarray(cap, dtype=np.float64)
        if c.shape != (groups,) or np.isnan(c).any() or not np.all(c > 0):
            raise ValueError(f"level {level}: capacities must be one positive value or "
                             f"{groups} (one per group)")
        out.append(c)
    return out


def phase_bottlenecks(phased: PhasedGraph, machine: Hierarchy, mapping: np.ndarray,
                      levels: Sequence[int],
                      capacities: Capacities | None = None) -> tuple[PhaseLoad, ...]:
    """Per phase and synchronising group, the busiest uplink its own members' groups
    have and their edges cross, at each of ``levels`` (indices into ``machine``'s levels
    below the root), loaded by the whole phase (see the module's docstring).
    ``capacities`` (per level one value or one per group, default 1) divide the loads
    into times.  O(Σ_p (n + m_p·L))."""
    if not isinstance(machine, Hierarchy):
        raise TypeError("phase bottlenecks need a tree machine (Hierarchy)")
    pi = check_mapping(mapping, machine.n, phased.n)
    levels = tuple(int(x) for x in levels)
    for level in levels:
        if not 0 <= level < machine.levels - 1:
            raise ValueError(f"level {level} has no uplink (levels 0..{machine.levels - 2})")
    caps = group_capacities(machine, levels, capacities)
    out = []
    for phase in phased.phases:
        g = phase.graph
        u, v, _ = g.edges()
        label = phase.labels()
        lu, lv = label[u], label[v]
        loads = np.zeros((phase.groups, len(levels)))
        for i, level in enumerate(levels):
            groups = len(machine.bounds[level]) - 1
            load = _volumes.group_cuts(g.indptr, g.indices, g.weights, pi,
                                       machine.group_ids, level, groups) / caps[i]
            gu = machine.group_ids[pi[u], level]
            gv = machine.group_ids[pi[v], level]
            cross = gu != gv
            if not cross.any():
                continue
            # each end charges its own uplink to its own group (module docstring)
            col = loads[:, i]
            np.maximum.at(col, lu[cross], load[gu[cross]])
            np.maximum.at(col, lv[cross], load[gv[cross]])
            loads[:, i] = col
        times = loads.max(axis=1) if len(levels) else np.zeros(phase.groups)
        out.append(PhaseLoad(phase.name, phase.repeat, levels, loads, times))
    return tuple(out)


#: the phase time models of :func:`phase_time`
MODELS = ("runs", "phases")


def phase_time(phased: PhasedGraph, machine: Hierarchy, mapping: np.ndarray,
               levels: Sequence[int], capacities: Capacities | None = None,
               model: str = "runs") -> float:
    """The phase time model of a placement (module docstring); O(Σ_p (n + m_p·L)).

    ``model="phases"``: T = Σ_p repeat_p · max_S t_p(S) -- every phase ends when its
    slowest group ends.  ``model="runs"`` (default): consecutive phases with the same
    synchronising groups form a *run*, in which a group goes on to its next phase as
    soon as its own members are done (they wait for nobody else), so

        T = Σ_runs max_S Σ_{p in run} repeat_p · t_p(S),

    and a change of groups (e.g. CG's row steps, then the transpose and the global
    allreduce) is taken as a barrier.  "runs" ≤ "phases", equal when every phase
    synchronises all ranks ("runs" is the one that orders NPB-CG's placements as they
    simulate: bench/README.md, "Phases").

    Latency-bound phases (:attr:`Phase.pace`) are left out: their busiest link does
    not set their time (:func:`latency_pace` does; counted here, NPB BT's line solves
    ranked its placements backwards: bench/README.md, "NPB by phase").
    """
    if model not in MODELS:
        raise ValueError(f"model must be one of {', '.join(MODELS)}, got {model!r}")
    loads = phase_bottlenecks(phased, machine, mapping, levels, capacities)
    timed = [(phase, load) for phase, load in zip(phased.phases, loads, strict=True)
             if not phase.pace]
    if model == "phases":
        return float(sum(load.repeat * load.time for _, load in timed))
    # per rank (its group's time): a run's phases may number the same groups apart
    total, first, acc = 0.0, None, None
    for phase, load in timed:
        t = load.repeat * load.times[phase.labels()]
        if first is not None and same_sync(first, phase):
            acc = acc + t
            continue
        if acc is not None:
            total += float(acc.max(initial=0.0))
        first, acc = phase, t
    if acc is not None:
        total += float(acc.max(initial=0.0))
    return total


def raised_ratio(got: float, ref: float, rtol: float) -> float | None:
    """``got / ref`` when ``got`` exceeds ``ref`` by more than ``rtol`` (inf when ``ref``
    is 0), else None: how every ``raised_*`` check here compares a candidate's measure
    with the reference's."""
    if got > ref * (1.0 + rtol) + 1e-300:
        return got / ref if ref > 0 else float("inf")
    return None


@dataclass(frozen=True)
class RaisedPhaseTime:
    """A level (None: all levels together) at which a placement's phase time exceeds
    the reference's."""

    level: int | None
    name: str
    ratio: float  # candidate's phase time at that level over the reference's


def raised_phase_time(phased: PhasedGraph, machine: Hierarchy, candidate: np.ndarray,
                      reference: np.ndarray, levels: Sequence[int],
                      rtol: float = 1e-9, capacities: Capacities | None = None
                      ) -> RaisedPhaseTime | None:
    """The first of ``levels`` at which ``candidate``'s phase time (:func:`phase_time`,
    model "runs", that level's uplinks alone) exceeds ``reference``'s by more than
    ``rtol``; None when it exceeds it at none.

    Each level is compared only with itself, as :func:`mapper.objectives.congestion.raised_uplink`
    compares busiest links, so no capacities between levels are assumed -- unless
    ``capacities`` (one entry per level of ``levels``: a value or one per group, in one
    unit for all levels) are given: then one phase time over all ``levels`` is
    compared (level None, name "every level").  On NPB-CG's pattern the placements that
    simulate slower than block rise at some level and those as fast rise at none
    (bench/README.md, "Phases").  O(L · Σ_p (n + m_p·L))."""
    if capacities is not None:
        ratio = raised_ratio(phase_time(phased, machine, candidate, levels, capacities),
                             phase_time(phased, machine, reference, levels, capacities), rtol)
        return None if ratio is None else RaisedPhaseTime(None, "every level", ratio)
    for level in levels:
        ratio = raised_ratio(phase_time(phased, machine, candidate, [level]),
                             phase_time(phased, machine, reference, [level]), rtol)
        if ratio is not None:
            return RaisedPhaseTime(int(level), machine.level_names[level], ratio)
    return None


def links_crossed(machine: Hierarchy, pi: np.ndarray, u: np.ndarray, v: np.ndarray,
                   levels: Sequence[int]) -> np.ndarray:
    """Per edge (u, v), the links its message crosses on the tree: two (up and down)
    per level of ``levels`` at which the ends' groups differ; O(m·L)."""
    links = np.zeros(len(u), dtype=np.float64)
    for level in levels:
        links += 2.0 * (machine.group_ids[pi[u], level] != machine.group_ids[pi[v], level])
    return links


def latency_pace(phased: PhasedGraph, machine: Hierarchy, mapping: np.ndarray,
                 levels: Sequence[int]) -> float:
    """The pace of ``phased``'s latency-bound phases (:attr:`Phase.pace`) under a
    placement, in tree links (two per level of ``levels`` at which two ranks' groups
    differ; 0 inside a node) weighted by the edges' volumes:

        sweep:   repeat · ( max_r Σ_{q > r} w_rq·links(r, q) + max_r Σ_{q < r} w_rq·links(r, q) )
        stages:  repeat · max_r Σ_q w_rq·links(r, q)

    summed over those phases.  A sweep's forward pass waits, at each rank, for the
    messages it sends to its higher-numbered partners, the backward pass for those to
    its lower-numbered ones, and the rank slowest at either sets the pipeline's pace;
    in stages each rank's messages of the phase follow one another.  With NPB LU, BT and
    SP the placements that run slower than block, lower J and lighter links
    notwithstanding, raise this pace above block's, and those that run faster do not
    (bench/README.md, "NPB by phase").
    Hop counts stand for latencies (Hoefler & Snir's dilation; a link's bandwidth
    plays no part).  0 without such phases.  O(Σ_p m_p·L)."""
    pi = check_mapping(mapping, machine.n, phased.n)
    total = 0.0
    for phase in phased.phases:
        if phase.pace not in PIPELINE_PACES:
            continue
        u, v, w = phase.graph.edges()
        lo, hi = np.minimum(u, v), np.maximum(u, v)
        cost = w * links_crossed(machine, pi, lo, hi, levels)
        down = np.bincount(lo, weights=cost, minlength=phased.n)
        up = np.bincount(hi, weights=cost, minlength=phased.n)
        if phase.pace == "sweep":
            t = float(down.max(initial=0.0)) + float(up.max(initial=0.0))
        else:
            t = float((down + up).max(initial=0.0))
        total += phase.repeat * t
    return total


def phase_node_hop_bytes(graph: CommGraph, machine: Hierarchy, mapping: np.ndarray,
                          levels: Sequence[int], own_groups: bool = True) -> float:
    """The far traffic of the busiest node, phase by phase: for a profile with phases
    (:class:`PhasedGraph`), Σ_p repeat_p · :func:`mapper.objectives.congestion.node_hop_bytes` of
    phase p's graph over the phases that are not latency-bound (:attr:`Phase.pace`
    empty, as in :func:`phase_time`) -- with ``own_groups=False`` only those in which
    some ranks synchronise with others; for any other graph, its own
    :func:`~mapper.objectives.congestion.node_hop_bytes`.  A phase
    ends when its slowest node is done, so the busiest node is taken per phase, not
    over the sum: it tells apart placements of NPB CG and MG with the same J and the
    same busiest links that run at different speeds (bench/README.md, "Far traffic per
    node").
    The choice leaves phases in which every rank is its own group out
    (``own_groups=False``) where :func:`phase_time` over every level weighs them (the
    uplinks' ratio known): a halo exchanged one dimension after the other
    (``exchange=axes``) at 256 ranks on the 3-level tree ran 0.674 of block's time with
    the grid's boxes and 0.703 with Slurm's nodes regrouped, whose busiest node carries
    10 % less far traffic, and the phase time, which ties them, had been measured to
    rank that code's placements as the simulation does.  O(Σ_p (n + m_p·L))."""
    if not (isinstance(graph, PhasedGraph) and graph.phases):
        return node_hop_bytes(graph, machine, mapping, levels)
    return float(sum(phase.repeat * node_hop_bytes(phase.graph, machine, mapping, levels)
                     for phase in graph.phases
                     if not phase.pace and (own_groups or phase.groups < graph.n)))


def raised_latency_pace(phased: PhasedGraph, machine: Hierarchy, candidate: np.ndarray,
                        reference: np.ndarray, levels: Sequence[int],
                        rtol: float = 1e-9) -> float | None:
    """``candidate``'s :func:`latency_pace` over ``reference``'s when it exceeds it by
    more than ``rtol`` (inf when the reference's is 0), else None; O(Σ_p m_p·L)."""
    return raised_ratio(latency_pace(phased, machine, candidate, levels),
                        latency_pace(phased, machine, reference, levels), rtol)


def round_latency(phased: PhasedGraph, machine: Hierarchy, mapping: np.ndarray,
                  levels: Sequence[int]) -> float:
    """The latency of ``phased``'s exchange rounds (:attr:`Phase.pace` ``"rounds"``)
    under a placement, in tree links (two per level of ``levels`` at which two ranks'
    groups differ; 0 inside a node):

        rounds:  Σ_p repeat_p · max over the edges (r, q) of phase p of links(r, q)

    A round of small messages lasts as long as its farthest message, whatever their
    volumes: each rank waits for its neighbours' messages before it sends the next
    round's, so a late message delays its receiver's next round, and through it, round
    after round, everyone's (the maximum is taken over the round, not per rank).
    NPB MG's trace is the case: a placement with less volume on every link is slower
    than block in its messages' latency alone, which this measure sees
    (bench/README.md, "Traced NAS codes").  Volumes play no part (see
    :func:`latency_pace` for pipelines).  0 without such phases.  O(Σ_p m_p·L)."""
    pi = check_mapping(mapping, machine.n, phased.n)
    total = 0.0
    for phase in phased.phases:
        if phase.pace != "rounds":
            continue
        u, v, _ = phase.graph.edges()
        if len(u):
            total += phase.repeat * float(links_crossed(machine, pi, u, v, levels).max())
    return total


def raised_round_latency(phased: PhasedGraph, machine: Hierarchy, candidate: np.ndarray,
                         reference: np.ndarray, levels: Sequence[int],
                         rtol: float = 1e-9) -> float | None:
    """``candidate``'s :func:`round_latency` over ``reference``'s when it exceeds it by
    more than ``rtol`` (inf when the reference's is 0), else None; O(Σ_p m_p·L)."""
    return raised_ratio(round_latency(phased, machine, candidate, levels),
                        round_latency(phased, machine, reference, levels), rtol)
