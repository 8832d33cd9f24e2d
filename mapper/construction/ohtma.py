"""OHTMA: greedy with blended scores, then one pass of locked best-pair exchanges with
backtracking to the best prefix (Li et al. 2020, Algorithm 1).

Greedy (lines 1-21).  With P_sel / N_sel the processes and PEs chosen so far, every
step scores

    comm_p = Σ_{i ∈ P_sel} A_pi + Σ_{j ∈ P_unsel} A_pj / (1 + |P_sel|)
    hops_n = Σ_{i ∈ N_sel} B_ni + Σ_{j ∈ N_unsel} B_nj / (1 + |N_sel|)

and maps the unselected process of largest comm_p onto the unselected PE of smallest
hops_n (ties: lowest index).  The sums over the selected sets are kept incrementally
(a process adds its CSR row, a PE its distance row) and the sums over the unselected
sets are totals minus those, so a step costs O(n) numpy work: O(n²) time, O(n) memory.

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

Fast exchange: S is kept as a dense n × n table (rank × PE).  An exchange of m and n
changes S only in the rows of their neighbours (S_x += (A_xm − A_xn)(B(f_n, ·) −
B(f_m, ·))), so gain(i, j) changes only where i or j is in K = N(m) ∪ N(n) ∪ {m, n}.
The best partner of every row is cached; a step recomputes the rows in K and the rows
whose cached partner is in K (O(n) each) and compares the other rows against the |K|
changed columns.  A step costs O(|K'| n) with |K'| ≈ 2 degrees, the pass O(n² d);
memory is O(n²) (8 n² bytes: 128 MiB at 4096 ranks) — the price of taking the best of
all pairs as the paper does.  S starts as A·P_f·B in column blocks, O(m n).

Reference: Li, Chen, Liu, Yang, Gong, Gan, Li & Xu, OHTMA: an optimized heuristic
topology-aware mapping algorithm on the Tianhe-3 exascale supercomputer prototype.
Front. Inform. Technol. Electron. Eng. 21(6):939-949 (2020), doi:10.1631/FITEE.1900075.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..graph import CommGraph
from ..machine import DistanceMatrix
from ..oracle import total_distances

# Column block used to build S (bounds the temporary distance block to 256 x n).
_BLOCK = 256


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


def _distance_rows(machine, pes: np.ndarray) -> np.ndarray:
    """Dense rows D[pes, :] of any machine (explicit matrix: a slice)."""
    if isinstance(machine, DistanceMatrix):
        return machine.matrix[pes]
    rows = getattr(machine, "rows", None)
    if callable(rows):
        return rows(pes)
    return np.asarray(machine.distance(pes[:, None], np.arange(machine.n)[None, :]),
                      dtype=np.float64)


def _totals(machine) -> np.ndarray:
    own = getattr(machine, "total_distances", None)
    return own() if callable(own) else total_distances(machine)


def ohtma_greedy(graph: CommGraph, machine) -> np.ndarray:
    """Lines 1-21 of Algorithm 1 (see the module docstring); rank → PE, O(n²)."""
    n = graph.n
    volume = graph.weighted_degrees()
    dist_total = _totals(machine)
    comm_sel = np.zeros(n)          # Σ_{i ∈ P_sel} A_pi
    hops_sel = np.zeros(n)          # Σ_{i ∈ N_sel} B_ni
    p_free = np.ones(n, dtype=bool)
    n_free = np.ones(n, dtype=bool)
    pe = np.empty(n, dtype=np.int64)
    indptr, indices, weights = graph.indptr, graph.indices, graph.weights
    for k in range(n):
        comm = np.where(p_free, comm_sel + (volume - comm_sel) / (1 + k), -np.inf)
        hops = np.where(n_free, hops_sel + (dist_total - hops_sel) / (1 + k), np.inf)
        p, q = int(np.argmax(comm)), int(np.argmin(hops))
        pe[p] = q
        p_free[p] = False
        n_free[q] = False
        lo, hi = indptr[p], indptr[p + 1]
        comm_sel[indices[lo:hi]] += weights[lo:hi]
        hops_sel += _distance_rows(machine, np.array([q]))[0]
    return pe


class _Exchange:
    """State of one exchange pass (see the module docstring)."""

    def __init__(self, graph: CommGraph, machine, pe: np.ndarray) -> None:
        self.machine = machine
        self.n = n = graph.n
        self.indptr, self.indices, self.weights = graph.indptr, graph.indices, graph.weights
        self.f = pe.copy()
        self.a = graph.to_csr()
        # S[i, q] = Σ_l A_il B(q, f(l)) = (A P_f B)[i, q], built in column blocks
        self.a_f = sp.csr_matrix((graph.weights, self.f[graph.indices], graph.indptr),
                                 shape=(n, n))
        self.s = np.empty((n, n))
        for lo in range(0, n, _BLOCK):
            self.s[:, lo:lo + _BLOCK] = self._columns(np.arange(lo, min(lo + _BLOCK, n)))
        self.sd = self.s[np.arange(n), self.f]   # S_x(f_x)
        self.locked = np.zeros(n, dtype=bool)
        self.best = np.full(n, -np.inf)
        self.arg = np.full(n, -1, dtype=np.int64)
        self.dirty = np.zeros(n, dtype=bool)
        for lo in range(0, n, _BLOCK):
            self._refresh_rows(np.arange(lo, min(lo + _BLOCK, n)))

    def _columns(self, pes: np.ndarray) -> np.ndarray:
        """S[:, pes] recomputed as A P_f B[:, pes]: O(m·len(pes)) and contiguous, where
        gathering columns of the row-major S would touch a cache line per entry."""
        return np.asarray(self.a_f @ _distance_rows(self.machine, pes).T)

    def _edge_term(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(row position, neighbour, 2 A_xj B(f_x, f_j)) for the CSR rows ``rows``."""
        starts, ends = self.indptr[rows], self.indptr[rows + 1]
        counts = ends - starts
        pos = np.repeat(np.arange(len(rows)), counts)
        idx = np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
        nb = self.indices[idx].astype(np.int64)
        d = self.machine.distance(self.f[rows[pos]], self.f[nb])
        return pos, nb, 2.0 * self.weights[idx] * d

    def gains_rows(self, rows: np.ndarray) -> np.ndarray:
        """gain(i, j) for i in ``rows`` and every j (locked j and j = i: -inf)."""
        f = self.f
        g = (self.sd[rows][:, None] - self.s[np.ix_(rows, f)] + self.sd[None, :]
             - self._columns(f[rows]).T)
        pos, nb, term = self._edge_term(rows)
        g[pos, nb] -= term
        g[:, self.locked] = -np.inf
        g[np.arange(len(rows)), rows] = -np.inf
        return g

    def gains_cols(self, cols: np.ndarray) -> np.ndarray:
        """gain(i, j) for every i and j in ``cols`` (n × len(cols), unmasked rows)."""
        f = self.f
        g = (self.sd[:, None] - self._columns(f[cols]) + self.sd[cols][None, :]
             - self.s[np.ix_(cols, f)].T)
        pos, nb, term = self._edge_term(cols)   # A symmetric: column j of A = row j
        g[nb, pos] -= term
        g[:, self.locked[cols]] = -np.inf
        g[cols, np.arange(len(cols))] = -np.inf
        return g

    def _refresh_rows(self, rows: np.ndarray) -> None:
        rows = rows[~self.locked[rows]]
        if len(rows) == 0:
            return
        g = self.gains_rows(rows)
        self.arg[rows] = np.argmax(g, axis=1)
        self.best[rows] = g[np.arange(len(rows)), self.arg[rows]]
        self.dirty[rows] = False

    def select(self) -> tuple[int, int, float] | None:
        """The best pair of free processes and its gain; None when none is left.

        ``best`` holds an upper bound of every row's largest gain, exact where the row
        is clean; dirty rows at the top are recomputed until a clean row leads.
        """
        while True:
            i = int(np.argmax(self.best))
            if not np.isfinite(self.best[i]):
                return None
            if not self.dirty[i]:
                return i, int(self.arg[i]), float(self.best[i])
            # recompute, in one batch, the dirty rows that could beat the best clean row
            clean = np.where(self.dirty, -np.inf, self.best).max()
            top = np.flatnonzero(self.dirty & (self.best >= clean))
            if len(top) > _BLOCK:
                top = top[np.argpartition(-self.best[top], _BLOCK)[:_BLOCK]]
            self._refresh_rows(top)

    def exchange(self, m: int, n_: int) -> None:
        """Exchange the PEs of m and n_, lock both, bring the bounds up to date."""
        fm, fn = int(self.f[m]), int(self.f[n_])
        lo_m, hi_m = self.indptr[m], self.indptr[m + 1]
        lo_n, hi_n = self.indptr[n_], self.indptr[n_ + 1]
        nb = np.concatenate([self.indices[lo_m:hi_m], self.indices[lo_n:hi_n]]).astype(np.int64)
        coef = np.concatenate([self.weights[lo_m:hi_m], -self.weights[lo_n:hi_n]])
        touched, inv = np.unique(nb, return_inverse=True)
        coef = np.bincount(inv, weights=coef, minlength=len(touched))
        delta = _distance_rows(self.machine, np.array([fn, fm]))
        self.s[touched] += coef[:, None] * (delta[0] - delta[1])[None, :]
        self.f[m], self.f[n_] = fn, fm
        self.a_f.indices[:] = self.f[self.indices]
        self.locked[[m, n_]] = True
        self.best[[m, n_]] = -np.inf
        self.dirty[[m, n_]] = False
        k = np.union1d(touched, [m, n_])
        self.sd[k] = self.s[k, self.f[k]]
        # rows in K changed everywhere: exact again
        self._refresh_rows(k)
        # every other free row changed only in the columns K: exact values there; a
        # row whose best partner was in K keeps its old value as an upper bound, dirty
        rest = np.ones(self.n, dtype=bool)
        rest[k] = False
        rest &= ~self.locked
        if not rest.any():
            return
        rows = np.flatnonzero(rest)
        g = self.gains_cols(k)[rows]
        col = np.argmax(g, axis=1)
        val = g[np.arange(len(col)), col]
        lost = np.isin(self.arg[rows], k) & ~self.dirty[rows]
        self.dirty[rows[lost]] = True
        up = val > self.best[rows]
        self.best[rows[up]] = val[up]
        self.arg[rows[up]] = k[col[up]]
        # a value above the bound is the exact maximum: the other columns stay below
        self.dirty[rows[up]] = False


def ohtma_exchange(graph: CommGraph, machine, pe: np.ndarray, loop: int | None = None,
                   time_limit: float | None = None) -> tuple[np.ndarray, ExchangeTrace]:
    """Lines 20-39 of Algorithm 1 on the mapping ``pe`` (not modified).

    Returns the mapping after the best prefix of exchanges and the trace.  On the time
    limit the pass stops early and the best prefix of what was done is kept.
    """
    start = time.perf_counter()
    n = graph.n
    loop = n // 2 if loop is None else min(int(loop), n // 2)
    state = _Exchange(graph, machine, np.asarray(pe, dtype=np.int64))
    pairs: list[tuple[int, int]] = []
    gains: list[float] = []
    timed_out = False
    for _ in range(loop):
        if time_limit is not None and time.perf_counter() - start > time_limit:
            timed_out = True
            break
        chosen = state.select()
        if chosen is None:
            break
        i, j, gain = chosen
        pairs.append((i, j))
        gains.append(gain)
        state.exchange(i, j)
    prefix = np.concatenate([[0.0], np.cumsum(gains)])
    kept = int(np.argmax(prefix))          # first maximum: fewest exchanges
    out = np.array(pe, dtype=np.int64)
    for i, j in pairs[:kept]:
        out[i], out[j] = out[j], out[i]
    trace = ExchangeTrace(np.array(pairs, dtype=np.int64).reshape(-1, 2),
                          np.array(gains), kept, timed_out)
    return out, trace


def ohtma(graph: CommGraph, machine, loop: int | None = None,
          time_limit: float | None = None) -> tuple[np.ndarray, bool]:
    """OHTMA (greedy, then one exchange pass); returns (rank → PE, hit time limit)."""
    start = time.perf_counter()
    pe = ohtma_greedy(graph, machine)
    left = None if time_limit is None else max(time_limit - (time.perf_counter() - start),
                                                1e-6)
    out, trace = ohtma_exchange(graph, machine, pe, loop, left)
    return out, trace.hit_time_limit
