"""3-cycles and ejection chains: moves stronger than the pairwise swap.

A swap local search stops where no exchange of two ranks lowers J.  A 3-cycle moves
three ranks at once: u takes v's PE, v takes w's and w takes u's (or the other way
round).  It escapes swap optima where each rank would like the next one's place but no
two of them gain by trading (u wants v's group, v wants w's, w wants u's).

3-cycle gains (Schulz, Träff & von Kirchbach §3.2, extended from two ranks to three):
only the terms of edges at u, v, w change, so with new positions π'

    Δ = Σ_{x ∈ {u,v,w}} Σ_{y ∈ N(x) \\ {u,v,w}} C_xy (D(π'(x), π(y)) − D(π(x), π(y)))
      + Σ_{edges {x,y} among u, v, w} C_xy (D(π'(x), π'(y)) − D(π(x), π(y)))

in O(d_u + d_v + d_w) oracle queries (the second line is the correction for the up to
three edges inside the triple, which the first line skips).  Candidates: v a neighbour
of u and w any rank within ``depth`` hops of u (``depth=2`` contains every path u–v–w
and every triangle), both rotation directions; triples inside one innermost group are
skipped (no rotation changes J there).  First improvement.

Ejection chains (cyclic exchanges of up to L+1 ranks, Lin–Kernighan style): from u0 on
PE p0, the rank x on p0 (u0 first) is swapped with the rank y within two hops of x,
not yet in the chain and outside p0's innermost group, whose swap changes J least
(often a loss); y lands on p0 and is ejected in turn.  A cycle u0 → π(u1), u1 → π(u2),
…, u_L → p0 is exactly this sequence of swaps, so every step's gain is the O(d_x + d_y)
swap gain on the current state; after L steps the best prefix is kept when it lowers
J and the rest undone.  Per start: L · |ball_2| swap gains.

:func:`cycle_search` runs 3-cycles, then ejection chains, then (when either moved
something) the N_C^10 swap search, whose optimum the new placement may have broken,
for up to ``rounds`` rounds.  Passes: the first visits every rank in random order,
later ones only ranks next to a moved one (as the swap search does), until a pass moves
nothing, ``max_passes`` or ``time_limit``.  Swaps alone are not tried by the two new
moves: call it after a swap search (``topdown+n10``), which ends in a swap optimum.

Complexity per full pass, degree d: 3-cycles Σ_u d_u · |ball_depth(u)| · O(d), about
n d⁴ oracle queries at depth 2; ejection chains n · L · d² · O(d).  Both are bounded by
a work count (W = ``work_per_element`` × (n + m) units, an O(d) gain counted as d) so
that a power-law graph, where a hub's candidates alone are O(d⁴), stops at a
deterministic point: no rank (chain start) is begun once a kernel's share of W is
spent, and the kernel stops inside one, before its next candidate, at
(1 + :data:`STEP_OVERRUN`) times that share.  The kernels of a :func:`cycle_search`
call therefore spend at most W · (1 + STEP_OVERRUN) + 2m + 6 d_max units (one ball and
two rotation gains past the last check), O(W + m) whatever the degrees; what they do
not count (C_vw look-ups, marking neighbours after a move) is at most what they count.
Before the cap (issue 29) the bound was checked only between ranks, so one hub's
candidates, O(d_u² · |ball| + d_u · m) units, could run on past it.  The N_C^10 swap
searches between rounds are not counted (each starts from a near-optimum the moves
perturbed).  Oracle queries are
O(k) on a hierarchy of k levels.  O(n + L) extra memory.  Machines: hierarchies
(uniform or uneven), explicit distance matrices and
:class:`~mapper.model.networks.NodeHopMachine`, through the swap kernel's oracle arrays.  The
loops run compiled in ``mapper.search._cycles``.

References
----------
* Schulz, Träff & von Kirchbach, Better Process Mapping and Sparse Quadratic
  Assignment, arXiv:1702.04164v2, §3.2 (O(d) swap gains) and §3.3 (N_C^d);
  full entry in :mod:`mapper`.
* Ahuja, Orlin & Tiwari, A greedy genetic algorithm for the quadratic assignment
  problem, Computers & Operations Research 27(10):917-934 (2000),
  doi:10.1016/S0305-0548(99)00067-2 — cyclic exchanges of more than two facilities
  as a QAP neighbourhood beyond pairwise swaps.
* Glover, Ejection chains, reference structures and alternating path methods for
  traveling salesman problems, Discrete Applied Mathematics 65:223-253 (1996),
  doi:10.1016/0166-218X(94)00037-E.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..model.graph import CommGraph
from ..model.machine import Machine
from ..model.oracle import KernelOracle
from . import _cycles
from .communication import communication_neighborhood
from .swap import _REL_EPS, _RENUMBER_ABOVE, _VISIT_RUN, _max_distance

#: Default work bound of :func:`cycle_search` per element (rank or edge) of the graph.
#: A work unit of these kernels is about 8 ns here (125 million per second on the
#: 1024-rank rgg quotient of bench_presets), and ``eco`` takes about 45 µs per
#: element, so the default bounds the kernels to about ``eco``'s time (the N_C^10
#: searches between rounds come on top).  Unbounded, ``cycle_search`` took 21 s on
#: bench_presets' 4096-rank power-law graph in the run of 2026-11-23 (and once 325 s
#: on this machine under heavy load): O(n d^4) around its hubs.
WORK_PER_ELEMENT = 4000.0

#: A step that starts before a work bound is spent (a rank's 3-cycle candidates, an
#: ejection chain, a round of :mod:`mapper.search.iterated`) may run past it by this
#: share of the bound, and is cut there.  On sparse graphs a step costs well under this
#: (so the cut never binds and results are as without it); on graphs with hubs one
#: step alone can cost many times the bound.
STEP_OVERRUN = 0.25


@dataclass(frozen=True)
class CycleStats:
    """What a :func:`cycle_search` run did (``gain`` = J before − J after, ≥ 0)."""

    gain: float
    moves: int             # 3-cycles + ejection chains kept (swaps not counted)
    passes: int            # passes of the 3-cycle and chain searches
    hit_time_limit: bool
    evaluations: int = 0   # rotation and chain-step gains computed
    cycles: int = 0        # 3-cycle rotations made
    chains: int = 0        # ejection chains kept
    swaps: int = 0         # swaps made by the interleaved N_C^10 rounds
    swap_gain: float = 0.0  # the part of ``gain`` those swaps made
    work: int = 0          # work units the 3-cycle and chain kernels spent


def cycle_delta(graph: CommGraph, machine: Machine, pe: np.ndarray, u: int, v: int,
                w: int) -> float:
    """Change of J if u takes v's PE, v takes w's and w takes u's (compiled; tests)."""
    return float(_cycles.rotate_delta(graph.indptr, graph.indices, graph.weights,
                                      np.ascontiguousarray(pe, dtype=np.int64),
                                      *KernelOracle.of(machine).args(), int(u), int(v),
                                      int(w)))


def pe_ordered(graph: CommGraph, pe: np.ndarray
               ) -> tuple[CommGraph, np.ndarray, np.ndarray | None]:
    """(graph, mapping, rank_at) for a compiled search: above ``_RENUMBER_ABOVE`` ranks
    the graph renumbered in PE order (new id i = the rank on PE i, mapping the
    identity; copy back with ``pe[rank_at] = mapping``), so that balls and look-ups
    stay cache friendly (as ``swap.run``); otherwise the inputs and ``None``.
    O(m log m) when renumbering."""
    if graph.n <= _RENUMBER_ABOVE:
        return graph, pe, None
    rank_at = np.empty_like(pe)
    rank_at[pe] = np.arange(len(pe))
    a = graph.to_csr()[rank_at][:, rank_at].tocsr()
    a.sort_indices()
    return (CommGraph(a.indptr.astype(np.int64), a.indices.astype(np.int32),
                      a.data.astype(np.float64), graph.source),
            np.arange(len(pe), dtype=np.int64), rank_at)


def cycle_search(graph: CommGraph, machine: Machine, pe: np.ndarray, *, seed: int = 0,
                 time_limit: float | None = None, max_passes: int | None = None,
                 depth: int = 2, chain_length: int = 8, rounds: int = 3,
                 work_per_element: float | None = WORK_PER_ELEMENT) -> CycleStats:
    """Improve ``pe`` (rank → PE, C-contiguous int64, modified in place).

    Each round: 3-cycles (w within ``depth`` hops of u), ejection chains of up to
    ``chain_length`` swaps (0: none), then the N_C^10 swap search if anything moved;
    at most ``rounds`` rounds, fewer when a round moves nothing.  ``time_limit``
    (seconds) bounds the whole call; ``max_passes`` the passes of each 3-cycle and chain
    search; ``work_per_element`` × (n + m) the work units of the 3-cycle and chain
    kernels together (adjacency entries scanned, an O(d) gain counted as d; None: no
    bound), which stops them at the same point on every machine and load, so the
    result stays deterministic for a seed (each 3-cycle search may use half of what is
    left, so the chains always get their turn).  A kernel stops inside a rank's
    candidates at (1 + STEP_OVERRUN) times its share, so ``stats.work`` ≤
    W (1 + STEP_OVERRUN) + 2m + 6 d_max with W = ``work_per_element`` × (n + m),
    whatever the degrees (module docstring).  J never increases; ``gain`` is its
    total decrease.
    """
    if not (isinstance(pe, np.ndarray) and pe.dtype == np.int64 and pe.flags.c_contiguous):
        raise TypeError("pe must be a C-contiguous int64 array (it is modified in place)")
    if depth < 1 or chain_length < 0 or rounds < 1:
        raise ValueError(f"need depth >= 1, chain_length >= 0 and rounds >= 1, got "
                         f"{depth}, {chain_length}, {rounds}")
    start = time.perf_counter()
    scale = max(graph.total_volume, 1.0) * max(_max_distance(machine), 1.0)
    eps = _REL_EPS * scale
    oracle = KernelOracle.of(machine).args()
    work_graph, work, rank_at = pe_ordered(graph, pe)
    csr = (work_graph.indptr, work_graph.indices, work_graph.weights, work)
    # renumbered: passes visit runs of neighbouring ids, as N_C^d does (mapper.search.swap)
    chunk = _VISIT_RUN if rank_at is not None else 1

    def budget() -> float | None:
        return None if time_limit is None else time_limit - (time.perf_counter() - start)

    def spent() -> bool:
        left = budget()
        return left is not None and left <= 0

    def kernel_limit() -> float:
        left = budget()
        return 0.0 if left is None else max(left, 1e-9)  # the kernels read 0 as "none"

    gain = swap_gain = 0.0
    cycles = chains = passes = evals = swaps = used = 0
    total = (0 if work_per_element is None
             else max(1, int(work_per_element * (graph.n + graph.m))))

    def work_left(share: float) -> tuple[int, int]:
        """(bound, cap) of the next kernel call; the kernels read 0 as "none"."""
        if not total:
            return 0, 0
        bound = max(1, int(share * (total - used)))
        return bound, bound + int(STEP_OVERRUN * bound)
    timed_out = False
    for r in range(rounds):
        moved = 0
        round_seed = int(seed + r) & 0xFFFFFFFFFFFFFFFF
        if spent():
            timed_out = True
            break
        if total and used >= total:
            break
        g, m, p, timed_out, e, w = _cycles.cycle_search(
            *csr, *oracle, int(depth), round_seed, kernel_limit(), int(max_passes or 0), eps,
            *work_left(0.5 if chain_length else 1.0), chunk)
        gain, cycles, passes, evals, moved = gain + g, cycles + m, passes + p, evals + e, m
        used += w
        if timed_out:
            break
        if chain_length:
            if spent():
                timed_out = True
                break
            g, m, p, timed_out, e, w = _cycles.chain_search(
                *csr, *oracle, int(chain_length), round_seed, kernel_limit(),
                int(max_passes or 0), eps, *work_left(1.0), chunk)
            gain, chains, passes, evals, moved = gain + g, chains + m, passes + p, evals + e, \
                moved + m
            used += w
            if timed_out:
                break
        if moved == 0 or r == rounds - 1:
            break
        if spent():
            timed_out = True
            break
        s = communication_neighborhood(work_graph, machine, work, depth=10, seed=round_seed,
                                       time_limit=budget())
        gain, swap_gain, swaps = gain + s.gain, swap_gain + s.gain, swaps + s.swaps
        if s.hit_time_limit:
            timed_out = True
            break
    if rank_at is not None:
        pe[rank_at] = work
    return CycleStats(float(gain), int(cycles + chains), int(passes), bool(timed_out),
                      int(evals), int(cycles), int(chains), int(swaps), float(swap_gain),
                      int(used))
