"""Communication phases: a profile as a sequence of matrices.

J and :mod:`mapper.objectives.congestion` see one matrix, the sum of everything a job sends.  A
bulk-synchronous code sends it in *phases* -- NPB-CG's log2(cols) recursive-doubling
steps along each process row, then its transpose; an FFT's row and column all-to-alls --
and a phase lasts about as long as its busiest link, so two placements with the same
summed link loads can differ in run time by the per-phase maxima (measured:
``bench/README.md``, "Aiming at the busiest links"; ``bench/benefit/cg_phases.py``).

A :class:`PhasedGraph` is the profile's total graph (what J, the search and the
never-worse rule use, unchanged) carrying an ordered tuple of :class:`Phase` s.  Each
phase has a graph, a repeat count and *synchronising groups*: a partition of the ranks
into sets that wait for each other in that phase (CG's row steps: the process rows; a
transpose or an all-to-all: every rank, the default).  The invariant
``Σ_p repeat_p · phase_p == total`` is checked on construction (relative 1e-9).

**Design.**  ``PhasedGraph`` subclasses :class:`~mapper.model.graph.CommGraph` (as
``slurm_plugin.profiles.samples.SampledGraph`` does) so that every caller that takes a
graph -- the solver, the prolog's rule, the reports -- sees the total and behaves
exactly as for a profile without phases; only code that asks for ``.phases`` sees them.
A separate container would have needed every such caller to unwrap it.

The phases' times under a mapping (phase time, latency pace, exchange rounds) are
objectives: :mod:`mapper.objectives.phase_time`.

Complexity: construction of a :class:`PhasedGraph` is O(Σ_p m_p log m_p) (the sparse
sum that checks the invariant); :func:`merge_global_phases` is O(Σ_p m_p).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .graph import CommGraph, GraphError

#: relative tolerance of the invariant Σ repeat · phase == total
SUM_RTOL = 1e-9

#: :attr:`Phase.pace` values: bandwidth-bound (""), or latency-bound as a rank-order
#: wavefront ("sweep"), as stages of one rank's messages ("stages") or as one round of
#: an exchange ("rounds")
PACES = ("", "sweep", "stages", "rounds")
#: the paces timed by :func:`~mapper.objectives.phase_time.latency_pace` (pipelines);
#: "rounds" by :func:`~mapper.objectives.phase_time.round_latency`
PIPELINE_PACES = ("sweep", "stages")
#: A message of at most this many bytes has a time that is mostly its latency (about
#: 1-2 us a hop against 12.5 GB/s host links): traced codes whose messages are all this
#: small, and NPB MG's classes whose borders are, exchange in rounds (pace "rounds").
PIPELINE_BYTES = 16384


@dataclass(frozen=True, eq=False)
class Phase:
    """One communication phase: its graph, how often it recurs per unit of the total
    (``repeat``), and which ranks wait for each other in it.

    ``sync`` is None (every rank is one group) or an int array of length n giving each
    rank's synchronising group, numbered 0..G-1 without gaps (see :func:`sync_labels`).

    ``pace`` marks a phase of small messages, whose time their links' latencies set
    rather than their bandwidth (:func:`~mapper.objectives.phase_time.latency_pace`): ``"sweep"``, a
    pipelined wavefront in rank order (NPB LU's SSOR: plane after plane, each rank receives from
    its lower-numbered partners, then sends to its higher-numbered ones; then the same
    backwards); ``"stages"``, a rank's messages of the phase on its critical path one
    after the other (NPB BT's line solves: stage after stage, from the predecessor,
    to the successor, and back); ``"rounds"``, one round of an exchange of small
    messages (NPB MG's borders at 512 ranks: every rank sends to its neighbours, then
    waits for theirs, and the next round's messages follow), which lasts as long as its
    farthest message (:func:`~mapper.objectives.phase_time.round_latency`).  ``""`` (default): the
    phase lasts as long as its busiest link.
    """

    graph: CommGraph
    repeat: float = 1.0
    sync: np.ndarray | None = None
    name: str = ""
    pace: str = ""

    def __post_init__(self) -> None:
        if self.pace not in PACES:
            raise GraphError(f"phase {self.name or self.graph.source}: pace must be one of "
                             f"{', '.join(repr(x) for x in PACES)}, got {self.pace!r}")

    @property
    def groups(self) -> int:
        """Number of synchronising groups."""
        return 1 if self.sync is None else int(self.sync.max(initial=-1)) + 1

    def labels(self) -> np.ndarray:
        """Each rank's synchronising group (zeros when the phase synchronises all)."""
        if self.sync is None:
            return np.zeros(self.graph.n, dtype=np.int64)
        return self.sync


def sync_labels(groups: Sequence[Sequence[int]] | np.ndarray, n: int,
                where: str = "phase") -> np.ndarray:
    """Rank sets (a partition of 0..n-1) as one group label per rank; O(n).

    Raises :class:`~mapper.model.graph.GraphError` naming ``where`` when a rank is missing,
    listed twice, or out of range.
    """
    label = np.full(n, -1, dtype=np.int64)
    for g, ranks in enumerate(groups):
        r = np.asarray(ranks, dtype=np.int64).ravel()
        if len(r) == 0:
            raise GraphError(f"{where}: synchronising group {g} is empty")
        if r.min() < 0 or r.max() >= n:
            raise GraphError(f"{where}: synchronising group {g} names a rank outside "
                             f"0..{n - 1}")
        counts = np.bincount(r)
        if counts.max() > 1:
            raise GraphError(f"{where}: rank {int(np.argmax(counts))} is listed twice in "
                             f"synchronising group {g}")
        taken = label[r] >= 0
        if taken.any():
            raise GraphError(f"{where}: rank {int(r[np.flatnonzero(taken)[0]])} is in two "
                             f"synchronising groups")
        label[r] = g
    if np.any(label < 0):
        raise GraphError(f"{where}: rank {int(np.flatnonzero(label < 0)[0])} is in no "
                         f"synchronising group (the groups must cover every rank)")
    return label


def make_phase(graph: CommGraph, repeat: float = 1.0,
               groups: Sequence[Sequence[int]] | np.ndarray | None = None,
               name: str = "", pace: str = "") -> Phase:
    """A :class:`Phase` from rank sets (None: all ranks synchronise); O(n)."""
    where = f"phase {name or graph.source}"
    if not (np.isfinite(repeat) and repeat > 0):
        raise GraphError(f"{where}: repeat must be positive, got {repeat}")
    sync = None if groups is None else sync_labels(groups, graph.n, where)
    return Phase(graph, float(repeat), sync, name, pace)


@dataclass(frozen=True, eq=False)
class PhasedGraph(CommGraph):
    """A profile's total graph (what the mapper optimises) and its phases, in order.

    Everything that takes a :class:`~mapper.CommGraph` sees the total; build it with
    :func:`with_phases`, which checks ``Σ repeat · phase == total``.
    """

    phases: tuple[Phase, ...] = ()


def phases_sum(phases: Sequence[Phase], n: int) -> sp.csr_matrix:
    """Σ repeat · phase as a symmetric CSR matrix; O(Σ m_p log m_p)."""
    out = sp.csr_matrix((n, n), dtype=np.float64)
    for p in phases:
        out = out + p.repeat * p.graph.to_csr()
    return out.tocsr()


def sum_mismatch(total: CommGraph, phases: Sequence[Phase]) -> float:
    """max |Σ repeat · phase − total| / max(total): 0 when the phases add up exactly."""
    diff = abs(phases_sum(phases, total.n) - total.to_csr())
    scale = float(np.abs(total.weights).max(initial=0.0)) or 1.0
    return float(diff.max()) / scale if diff.nnz else 0.0


def with_phases(total: CommGraph, phases: Sequence[Phase],
                rtol: float = SUM_RTOL) -> PhasedGraph:
    """``total`` carrying ``phases``; raises :class:`~mapper.model.graph.GraphError` when a
    phase has another rank count, there are no phases, or the phases (times their
    repeat counts) do not add up to ``total`` within ``rtol`` of its largest volume.
    O(Σ m_p log m_p)."""
    if not phases:
        raise GraphError(f"{total.source}: no phases (use the graph itself)")
    for i, p in enumerate(phases):
        if p.graph.n != total.n:
            raise GraphError(f"{total.source}: phase {i} ({p.name or p.graph.source}) has "
                             f"{p.graph.n} ranks, the total has {total.n}")
        if p.sync is not None and len(p.sync) != total.n:
            raise GraphError(f"{total.source}: phase {i}: {len(p.sync)} sync labels for "
                             f"{total.n} ranks")
    bad = sum_mismatch(total, phases)
    if bad > rtol:
        raise GraphError(f"{total.source}: the phases do not add up to the total graph "
                         f"(largest difference {bad:.3g} of the largest volume)")
    return PhasedGraph(total.indptr, total.indices, total.weights, total.source,
                       tuple(phases))


def phased_from_graphs(graphs: Sequence[CommGraph], names: Sequence[str] | None = None,
                       source: str = "<phases>") -> PhasedGraph:
    """Phases given as graphs (repeat 1, all ranks synchronising) and their sum as the
    total; O(Σ m_p log m_p)."""
    names = list(names) if names is not None else [g.source for g in graphs]
    phases = [make_phase(g, name=nm) for g, nm in zip(graphs, names, strict=True)]
    if not phases:
        raise GraphError(f"{source}: no phases")
    total = CommGraph.from_matrix(phases_sum(phases, graphs[0].n), directed=False,
                                  source=source)
    return with_phases(total, phases)


def same_sync(a: Phase, b: Phase) -> bool:
    """True when two phases synchronise the same rank sets (labels compared as
    partitions: equal after renumbering in first-appearance order); O(n)."""
    la, lb = a.labels(), b.labels()
    if len(la) != len(lb):
        return False
    _, ia = np.unique(la, return_inverse=True)
    _, ib = np.unique(lb, return_inverse=True)
    # a partition is determined by which pairs share a group: map each label to the
    # first rank carrying it and compare those representatives
    first_a = np.full(ia.max(initial=-1) + 1, len(la))
    np.minimum.at(first_a, ia, np.arange(len(la)))
    first_b = np.full(ib.max(initial=-1) + 1, len(lb))
    np.minimum.at(first_b, ib, np.arange(len(lb)))
    return bool(np.array_equal(first_a[ia], first_b[ib]))


def merge_global_phases(phased: PhasedGraph) -> PhasedGraph:
    """``phased`` with its equal all-rank phases of the same :attr:`Phase.pace` merged
    into one, their repeats added, at the first one's place (named ``"<name> x<k>"``
    for k merged).

    Exact for :func:`~mapper.objectives.phase_time.phase_time` in both models when only phases that
    synchronise every rank are merged: those phases form one run (model "runs") in which each adds
    its own repeat · t_p, as in model "phases", whatever their order; and for
    :func:`~mapper.objectives.phase_time.round_latency`, a sum over its rounds.  Phases with
    synchronising groups or a pipeline's pace ("sweep", "stages": a pace is a maximum over ranks of
    each phase's sums, not additive) are kept as they are.  A trace of I
    iterations (:func:`slurm_plugin.profiles.smpi_ti.import_ti_phases`) then has about
    one phase per distinct step of an iteration instead of I of each.  O(Σ_p m_p) (graphs compared
    by a hash of their arrays, then exactly)."""
    merged: list[Phase] = []
    counts: list[int] = []
    seen: dict[tuple, list[int]] = {}
    for phase in phased.phases:
        if phase.sync is not None or phase.pace in PIPELINE_PACES:
            merged.append(phase)
            counts.append(1)
            continue
        g = phase.graph
        key = (phase.pace, g.m, hash(g.indptr.tobytes()), hash(g.indices.tobytes()),
               hash(g.weights.tobytes()))
        for i in seen.get(key, []):
            h = merged[i].graph
            if (np.array_equal(h.indptr, g.indptr) and np.array_equal(h.indices, g.indices)
                    and np.array_equal(h.weights, g.weights)):
                merged[i] = Phase(h, merged[i].repeat + phase.repeat, None, merged[i].name,
                                  phase.pace)
                counts[i] += 1
                break
        else:
            seen.setdefault(key, []).append(len(merged))
            merged.append(phase)
            counts.append(1)
    named = [p if k == 1 else Phase(p.graph, p.repeat, p.sync, f"{p.name} x{k}", p.pace)
             for p, k in zip(merged, counts, strict=True)]
    return with_phases(phased, named)
