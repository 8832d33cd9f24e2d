"""Phase time with waits passed on: a rank late in one phase delays its partners in the next.

:func:`mapper.objectives.phase_time.phase_time` charges each synchronising group its own members'
busiest uplinks, phase by phase, and sums them per group: nothing a group waits for
reaches another group.  Where every rank is its own group (a halo or NPB MG's borders
exchanged one dimension after the other) that is the time of the busiest rank alone.
But a rank cannot finish exchanging with a partner before that partner has started
the phase: a rank slowed in the x-exchange starts its y-exchange late, and its
y-partners wait for it.  So two placements whose ranks are each as slow over the
whole sequence differ when one's nodes are slow in different dimensions: their
partners wait for them in turn (the real NPB MG: bench/README.md, "Waits passed on").

**Its use**: the never-worse rule (:func:`mapper.solve.never_worse.phase_refusal`) refuses a
candidate whose waiting time exceeds the baseline's by more than the links'
tolerance, where the uplinks' ratio is known.  It does not rank candidates: as a tie
break of the phase time it picked Slurm's nodes regrouped over Top-Down's result for
the halo exchanged by dimension at 1024 ranks (waiting times 0.80 against 0.95 and
1.00 of block's on the 3- and 2-level trees), which ran 0.781 and 0.790 against 0.769
and 0.783 -- its waits overstate what staggered ranks pass on, as their messages then
no longer share the links at once.  As a guard it refuses neither.

**The model** (:func:`waiting_time`), a max-plus recurrence over the phases in order,
as a discrete-event simulation of message dependencies would run it (LogGOPSim's
dependency graphs without the LogGP terms).  ``x[r]`` is the time rank r reaches the
phase; a message between u and v starts when both are there, and holds u for the
busiest uplink of u's own side it crosses (as :func:`~mapper.objectives.phase_time.phase_time`
charges it: the cut of the phase over capacity, at every level of ``levels``), v
likewise:

    y[u] = max(x[u], max over the phase's edges (u, v) of max(x[u], x[v]) + d_u(u, v))

then every synchronising group waits for its slowest member (``x[r] = max_{S(r)} y``).
The whole sequence is run :data:`SWEEPS` times from 0 (a job repeats it) and the time
is ``max x / SWEEPS``: the cycle mean of the recurrence plus a start-up term that the
sweeps amortise.  Where every rank is its own group it is at least the busiest rank's
sum of :func:`~mapper.objectives.phase_time.phase_time` (every rank's own cycle is in it), and equal
to it when no wait reaches a partner.  A phase repeated k times is taken once with k
times its durations (its waits are passed on once, not k times).  Latency-bound phases
(:attr:`Phase.pace`) are left out, as in :func:`~mapper.objectives.phase_time.phase_time`.

References: T. Hoefler, T. Schneider, A. Lumsdaine, "LogGOPSim - Simulating Large-Scale
Applications in the LogGOPS Model", HPDC 2010, doi:10.1145/1851476.1851564 (message
dependencies of a parallel program, simulated in order); F. Baccelli, G. Cohen,
G. J. Olsder, J.-P. Quadrat, "Synchronization and Linearity", Wiley 1992 (max-plus
recurrences and their cycle means).

Complexity: O(SWEEPS · Σ_p (n + m_p · L)) for n ranks, m_p edges in phase p and L
levels.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..model.graph import CommGraph
from ..model.machine import Hierarchy
from ..model.phased_graph import PhasedGraph
from . import _volumes
from .phase_time import Capacities, group_capacities
from .qap import check_mapping

#: Times the phase sequence is run; the start-up of the recurrence (ranks all at 0)
#: is amortised over them.  For NPB MG at 64 ranks on the 4:1 trees Top-Down's result
#: is 1.16 / 1.08 / 1.04 / 1.02x block's waiting time over 1 / 2 / 4 / 8 sweeps (the
#: simulation, 4 iterations: 1.069).
SWEEPS = 4


def _own_side_times(phase_graph: CommGraph, machine: Hierarchy, pi: np.ndarray,
                    levels: Sequence[int], caps: Sequence[np.ndarray]
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per edge (u, v) of a phase: u, v, the busiest uplink of u's own side that the
    edge crosses (its group's cut over capacity, at every level) and v's; O(n + m·L)."""
    u, v, _ = phase_graph.edges()
    du = np.zeros(len(u))
    dv = np.zeros(len(u))
    for level, cap in zip(levels, caps, strict=True):
        groups = len(machine.bounds[level]) - 1
        load = _volumes.group_cuts(phase_graph.indptr, phase_graph.indices,
                                   phase_graph.weights, pi, machine.group_ids, level,
                                   groups) / cap
        gu = machine.group_ids[pi[u], level]
        gv = machine.group_ids[pi[v], level]
        cross = gu != gv
        np.maximum(du, np.where(cross, load[gu], 0.0), out=du)
        np.maximum(dv, np.where(cross, load[gv], 0.0), out=dv)
    return u, v, du, dv


def waiting_time(phased: PhasedGraph, machine: Hierarchy, mapping: np.ndarray,
                 levels: Sequence[int], capacities: Capacities | None = None,
                 sweeps: int = SWEEPS) -> float:
    """The phase time of a placement with each rank's waits passed on to its partners
    and its synchronising group (module docstring): ``max x / sweeps`` after
    ``sweeps`` runs of the phase sequence.  ``capacities`` as in
    :func:`mapper.objectives.phase_time.phase_time` (per level one value or one per group, default
    1).  O(sweeps · Σ_p (n + m_p·L))."""
    if not isinstance(machine, Hierarchy):
        raise TypeError("the waiting time needs a tree machine (Hierarchy)")
    if sweeps < 1:
        raise ValueError(f"sweeps must be at least 1, got {sweeps}")
    pi = check_mapping(mapping, machine.n, phased.n)
    levels = tuple(int(x) for x in levels)
    caps = group_capacities(machine, levels, capacities)
    steps = []
    for phase in phased.phases:
        if phase.pace:
            continue
        u, v, du, dv = _own_side_times(phase.graph, machine, pi, levels, caps)
        labels = phase.labels()
        steps.append((u, v, phase.repeat * du, phase.repeat * dv, labels,
                      phase.groups < phased.n))
    x = np.zeros(phased.n)
    for _ in range(sweeps):
        for u, v, du, dv, labels, grouped in steps:
            both = np.maximum(x[u], x[v])
            y = x.copy()
            np.maximum.at(y, u, both + du)
            np.maximum.at(y, v, both + dv)
            if grouped:  # a group goes on when its slowest member is done
                slowest = np.full(labels.max(initial=-1) + 1, -np.inf)
                np.maximum.at(slowest, labels, y)
                y = slowest[labels]
            x = y
    return float(x.max(initial=0.0)) / sweeps
