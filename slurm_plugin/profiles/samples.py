"""Profiles measured more than once: apply a placement only if every run agrees.

A profile measured by one run of an application (Open MPI's pml monitoring, an SMPI
trace) predicts the next run only when the application sends the same bytes between
the same ranks every time.  Halo exchanges do (LAMMPS: ~0.5 % per pair between runs);
benchmarks that size their repetitions by time or draw random rank orders do not
(HPCC's b_eff rings: the planned placement ran 1.2x slower than Slurm's block placement
and sent more bytes across the leaves, ``bench/benefit/netns/README.md``).

A store entry may therefore list the matrices of several runs (``samples``, see
:mod:`slurm_plugin.profiles.store`).  The placement rankmap computes from the entry's
``file`` is applied only when it beats the job's default placement under **every**
sample by the same never-worse rule :func:`mapper.map_processes` applies to the one
profile: a lower J and no busiest node link or switch uplink loaded more than the
default's (:mod:`mapper.objectives.congestion`, the same relative tolerance and the same link
weights: load over capacity where the switches' LinkSpeed differ).  One disagreeing
sample keeps the default, and the reason names the sample.  This is a robustness test
over observed scenarios (the placement must win in each, not on their average), as in
scenario-based robust optimization: A. Ben-Tal, L. El Ghaoui, A. Nemirovski, *Robust
Optimization*, Princeton University Press 2009, ch. 1 (worst case over an uncertainty
set; here the set is the measured runs).

Complexity: O(S·(n + m·L)) for S samples of m edges each, L congestion levels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mapper import CommGraph
from mapper.model.machine import Hierarchy
from mapper.objectives.congestion import LinkWeights, raised_uplink, uplink_loads
from mapper.objectives.qap import evaluate
from mapper.solve.never_worse import LINK_TOLERANCE


@dataclass(frozen=True, eq=False)
class SampledGraph(CommGraph):
    """A profile's graph (the one the mapper optimizes) and the runs it was measured in.

    ``samples`` are the graphs of the individual runs, ``sample_names`` their names for
    reports (the file names).  Everything that takes a :class:`~mapper.CommGraph` takes
    this one and sees the profile's graph; :func:`slurm_plugin.modes.graph_job.make_plan` also
    checks the placement under each sample (:func:`check_samples`).
    """

    samples: tuple[CommGraph, ...] = ()
    sample_names: tuple[str, ...] = ()


def with_samples(graph: CommGraph, samples: Sequence[CommGraph],
                 names: Sequence[str]) -> SampledGraph:
    """``graph`` carrying ``samples`` (each of ``graph.n`` ranks, one name each)."""
    if len(samples) != len(names):
        raise ValueError(f"{len(samples)} samples but {len(names)} names")
    for s, name in zip(samples, names, strict=True):
        if s.n != graph.n:
            raise ValueError(f"sample {name}: {s.n} ranks, the profile has {graph.n}")
    return SampledGraph(graph.indptr, graph.indices, graph.weights, graph.source,
                        tuple(samples), tuple(names))


@dataclass(frozen=True)
class SampleVerdict:
    """How a candidate placement compares with the baseline under one sample."""

    name: str
    j_change: float            # J(candidate) / J(baseline) - 1 (negative: better)
    raised: str | None = None  # the level whose busiest link the candidate loads more
    link_ratio: float = 1.0    # that link's load over the baseline's busiest there
    weighted: bool = False     # loads are load/capacity (link weights), not volumes

    @property
    def agrees(self) -> bool:
        """True when the candidate beats the baseline under this sample."""
        return self.j_change < 0 and self.raised is None

    def describe(self, baseline: str = "the baseline") -> str:
        """One clause for a report: ``its J is 3.1% above Slurm's block placement's
        under sample hpcc-8.s1.mtx``."""
        what = (f"has {self.link_ratio:.2f}x the load/capacity of" if self.weighted
                else f"carries {self.link_ratio:.2f}x")
        link = (f"its busiest {self.raised} link {what} {baseline}'s busiest"
                if self.raised is not None else "")
        where = f" under sample {self.name}"
        if self.j_change >= 0:
            text = f"its J is {100 * self.j_change:.1f}% above {baseline}'s"
            return text + (f" and {link}" if link else "") + where
        if link:
            return link + where
        return f"J {-100 * self.j_change:.1f}% lower" + where


def check_samples(samples: Sequence[CommGraph], names: Sequence[str], machine,
                  candidate: np.ndarray, baseline: np.ndarray,
                  congestion_levels: Sequence[int] | None = None,
                  link_tolerance: float = LINK_TOLERANCE,
                  link_weights: LinkWeights | None = None) -> list[SampleVerdict]:
    """The candidate placement against the baseline under every sample.

    A sample agrees when the candidate's J is strictly lower than the baseline's and,
    on a :class:`~mapper.model.machine.Hierarchy` with ``congestion_levels``, no level's
    busiest link carries more than ``1 + link_tolerance`` times the baseline's busiest
    (:func:`mapper.objectives.congestion.raised_uplink`, the rule of :func:`mapper.map_processes`;
    with ``link_weights`` the busiest by load over capacity, cut × weight).
    A sample without traffic has J 0 for both and does not agree (nothing to gain).
    O(S·(n + m·L)).
    """
    levels = sorted(congestion_levels or []) if isinstance(machine, Hierarchy) else []
    out = []
    for graph, name in zip(samples, names, strict=True):
        jc = evaluate(graph, machine, candidate).objective
        jb = evaluate(graph, machine, baseline).objective
        change = jc / jb - 1.0 if jb > 0 else 0.0
        raised, ratio = None, 1.0
        if levels:
            base = uplink_loads(graph, machine, baseline, levels, link_weights)
            hit = raised_uplink(uplink_loads(graph, machine, candidate, levels, link_weights),
                                base, link_tolerance)
            if hit is not None:
                ref = base[levels.index(hit.level)].load
                raised, ratio = hit.name, (hit.load / ref if ref > 0 else float("inf"))
        out.append(SampleVerdict(name, change, raised, ratio, link_weights is not None))
    return out


def common_traffic(graphs: Sequence[CommGraph], source: str = "common traffic") -> CommGraph:
    """The traffic present in every graph: the element-wise minimum of their volumes
    (an edge missing from one graph is absent).  O(S·m log m) (sparse minimum)."""
    if not graphs:
        raise ValueError("no graphs")
    out = graphs[0].to_csr()
    for g in graphs[1:]:
        if g.n != graphs[0].n:
            raise ValueError(f"{g.source}: {g.n} ranks, {graphs[0].source} has {graphs[0].n}")
        out = out.minimum(g.to_csr())
    out.eliminate_zeros()
    return CommGraph.from_matrix(out, directed=False, source=source)
