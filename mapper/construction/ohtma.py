"""OHTMA: greedy with blended scores, then one pass of locked best-pair exchanges with
backtracking to the best prefix (Li et al. 2020, Algorithm 1).

Greedy (lines 1-21).  With P_sel / N_sel the processes and PEs chosen so far, every
step scores

    comm_p = Σ_{i ∈ P_sel} A_pi + Σ_{j ∈ P_unsel} A_pj / (1 + |P_sel|)
    hops_n = Σ_{i ∈ N_sel} B_ni + Σ_{j ∈ N_unsel} B_nj / (1 + |N_sel|)

and maps the unselected process of largest comm_p onto the unselected PE of smallest
hops_n (ties: lowest index).  The sums over the selected sets are kept incrementally
(a process adds its CSR row, a PE its distance row) and the sums over the unselected
sets are totals minus those, so a step costs O(n) distance look-ups: O(n²) time, O(n)
memory.

Exchange (lines 20-39).  ``loop`` times: among all pairs of unlocked processes take the
pair (i, j) whose exchange lowers J most — even when it raises J — record that change,
exchange, lock both.  Then keep the prefix of exchanges with the largest total gain
(the empty prefix included, so the result is never worse than the greedy start) and
undo the rest.  Default ``loop`` = ⌊n/2⌋, one full pass in which every process is
exchanged at most once.

Two slips of the printed pseudocode are fixed here:

* line 26, Cost_ij evaluates the "after" sums with the old positions f(r); for r = j
  (resp. i) that is B_{f(j)f(j)} = 0, so the i–j edge is counted as removed although an
  exchange keeps its length.  The gain used here is

      gain(i, j) = S_i(f_i) − S_i(f_j) + S_j(f_j) − S_j(f_i) − 2 A_ij B(f_i, f_j),
      S_x(q) = Σ_l A_xl B(q, f(l)),

  i.e. exactly J before minus J after (J counts each undirected edge once);
* line 32 writes ``Status[|P|] ← 1, k ← 1``; meant are Status[m] ← 1, Status[n] ← 1
  (lock the two exchanged processes) and k ← k + 1.

Both parts run compiled (``mapper._greedy.ohtma_greedy`` / ``ohtma_exchange``) on the
machine's own distance oracle — a hierarchy, an explicit matrix, or a node hop machine
read as its N × N between-node table plus per-node levels — so nothing n × n is built
for a hop machine and memory stays O(n + m) besides the machine.

Fast exchange.  With S_x(q) = Σ_l A_xl B(q, f(l)), the gain of a pair is the formula
above; S_x(f_x) is kept per rank.  Every free process keeps its best partner and that
gain, exact or — marked dirty — an upper bound.  An exchange of m and n changes
gain(i, j) only where i or j is in K = N(m) ∪ N(n) ∪ {m, n}.  The gain is symmetric,
so recomputing the |K| rows of K (each O((d + 1) n + m) distance look-ups: S_c at
every PE as d distance rows, S_i(f_c) for all i as one pass over the edges) also gives
every other row its new values in the columns K; a row whose best partner was in K
and got no better keeps its old best as an upper bound, and is recomputed only if it
reaches the top of the selection.  A step costs O(|K| (d n + m)) plus those
recomputations, the start n rows: O(n² d) for the pass at bounded degree d.  The
exact best-of-all-pairs choice is the paper's; no n × n table of S is kept (the
earlier version held 8 n² bytes, 128 MiB at 4096 ranks).

Time limit.  Both parts check the clock (the greedy every 64 steps): past the limit the
greedy gives the ranks not yet placed the free PEs in order and the exchange pass is
not started; the exchange pass keeps the best prefix of what it did.

Reference: Li, Chen, Liu, Yang, Gong, Gan, Li & Xu, OHTMA: an optimized heuristic
topology-aware mapping algorithm on the Tianhe-3 exascale supercomputer prototype.
Front. Inform. Technol. Electron. Eng. 21(6):939-949 (2020), doi:10.1631/FITEE.1900075.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..model.graph import CommGraph
from ..model.oracle import KernelOracle, total_distances
from . import _greedy


@dataclass(frozen=True)
class ExchangeTrace:
    """What the exchange pass did.

    ``pairs[s]`` is the s-th exchange, ``gains[s]`` the decrease of J it caused (negative
    when it raised J); ``kept`` is the length of the best prefix that was kept.
    """

    pairs: np.ndarray
    gains: np.ndarray
    kept: int
    hit_time_limit: bool


def ohtma_greedy(graph: CommGraph, machine,
                 time_limit: float | None = None) -> tuple[np.ndarray, bool]:
    """Lines 1-21 of Algorithm 1 (see the module docstring); (rank → PE, hit the time
    limit).  Past ``time_limit`` seconds the ranks not yet placed take the free PEs in
    order (its n steps are O(n) each: 27 s at 65536 ranks here).

    O(n² + m) distance look-ups (O(n² k) for a hierarchy of k levels), O(n) memory.
    """
    pe, timed_out = _greedy.ohtma_greedy(
        graph.indptr, graph.indices, graph.weights,
        np.ascontiguousarray(graph.weighted_degrees(), dtype=np.float64),
        np.ascontiguousarray(total_distances(machine), dtype=np.float64),
        *KernelOracle.of(machine).args(), float(time_limit or 0.0))
    return pe, bool(timed_out)


def ohtma_exchange(graph: CommGraph, machine, pe: np.ndarray, loop: int | None = None,
                   time_limit: float | None = None) -> tuple[np.ndarray, ExchangeTrace]:
    """Lines 20-39 of Algorithm 1 on the mapping ``pe`` (not modified).

    Returns the mapping after the best prefix of exchanges and the trace.  On the time
    limit the pass stops early and the best prefix of what was done is kept.
    O(n² d) time at bounded degree d, O(n + m) memory (module docstring).
    """
    n = graph.n
    loop = n // 2 if loop is None else min(int(loop), n // 2)
    pe = np.ascontiguousarray(pe, dtype=np.int64)
    pairs, gains, timed_out = _greedy.ohtma_exchange(
        graph.indptr, graph.indices, graph.weights, pe, *KernelOracle.of(machine).args(),
        max(loop, 0), float(time_limit or 0.0))
    prefix = np.concatenate([[0.0], np.cumsum(gains)])
    kept = int(np.argmax(prefix))          # first maximum: fewest exchanges
    out = pe.copy()
    for i, j in pairs[:kept].tolist():
        out[i], out[j] = out[j], out[i]
    return out, ExchangeTrace(pairs.reshape(-1, 2), gains, kept, bool(timed_out))


def ohtma(graph: CommGraph, machine, loop: int | None = None,
          time_limit: float | None = None) -> tuple[np.ndarray, bool]:
    """OHTMA (greedy, then one exchange pass); returns (rank → PE, hit time limit)."""
    start = time.perf_counter()
    pe, timed_out = ohtma_greedy(graph, machine, time_limit)
    if timed_out:
        return pe, True
    left = None if time_limit is None else max(time_limit - (time.perf_counter() - start),
                                                1e-6)
    out, trace = ohtma_exchange(graph, machine, pe, loop, left)
    return out, trace.hit_time_limit
