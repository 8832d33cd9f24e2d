"""Architecture-aware partitioning: VolS, VolNS, ElTS, ElTNS (predictor-corrector).

Moulitsas & Karypis, *Architecture Aware Partitioning Algorithms*, ICA3PP 2008, LNCS 5022,
pp. 42-53, doi:10.1007/978-3-540-69501-1_6 (§ numbers follow it).

**Predictor** (§4, "kvmetis"): a METIS k-way partition (pymetis, called directly here)
whose objective is the total communication volume (``METIS_OBJTYPE_VOL``), with target
part weights proportional to the PE speeds (``tpwgts``) and balance tolerance epsilon
(``ufactor``).  pymetis does not pass METIS' ``vsize``, so the predictor counts every
vertex as one unit of data; the corrector uses the mesh's c(v).

**Placement** (not in the paper; ``place=True``, the default): METIS numbers its parts
without regard to the machine, so part i lands on PE i whatever its neighbours are, and
mesh-adjacent parts sit on PEs up to 31 (1D array) or > 100 (metacomputer) e* apart.
:func:`place_parts` swaps parts between PEs of equal speed (each part keeps the
speed-proportional target it was built for) to lower the e*-weighted volume between
parts — the mapping step of Schulz, Träff & von Kirchbach's model-creation pipeline
(arXiv:1702.04164 §4) applied to the predictor.  The sparse pair set is then the
placed predictor's, so "no pair beyond those of the first phase" (§4) holds for it.

**Multi-start** (not in the paper; measured on seed 002, see bench/mesh/README_TABLES.md).
The corrector is a local search whose end point depends on its start and visit order,
so the result is the best of several runs (multi-start local search, e.g. Marti,
Resende & Ribeiro, EJOR 226(1):1-8, 2013), each a legitimate run of the method:

* starts (:func:`placement_candidates`): kvmetis' own numbering, :func:`place_parts`
  from it, and the lowest-volume result of :func:`place_parts` from PLACE_RANDOM_STARTS
  random assignments within each speed class (the swap search from kvmetis' numbering
  alone stops at local optima up to 25 % above that).  Every start is the predictor's
  partition relabelled, so a sparse run stays inside its own start's pairs (§4: no pair
  beyond those of the first phase); kvmetis' numbering is always a start and the
  corrector never raises its start's maximum, so every variant ends at or below kvmetis
  on its objective.  The best start is kept by the objective's final maximum.
* ``restarts`` visit orders per start (default RESTARTS = 1: on seed 002 a second order
  gained < 1 % for twice the time, while the starts gained 5-10 %);
* ElT only: the Vol variant's result of the same call (same starts, seed, restarts) is
  refined once more with the ElT objective, inside the pair set of the start it came
  from, and kept when better.  ElTS / ElTNS therefore end at or below VolS / VolNS on
  MaxElTime in every run (before: 99 of 100 seed-002 runs, +0.2 % in the other).

Cost: Vol runs the corrector once per start (3 starts for P <= PLACE_MULTI_MAX_PES,
2 up to PLACE_MAX_PES, 1 above); ElT three times that (own, Vol, ElT from Vol).  At
10^6 vertices on 4096 PEs (one start) Vol is unchanged and ElT runs the corrector 3
times; ``time_limit`` bounds it (no corrector run or pass starts after it).
On seed 002 (100 runs per variant): ElTS MaxElTime 37.0 % below kvmetis instead of
31.7 %; seconds per run Vol 0.16 -> 0.14-0.24, ElT 0.2 -> 0.3-0.6 (machine shared).
The sparse / dense ratio did not move (within 2 % in 126 of 200 runs, 122 before):
the dense variants gain as much, and the gap is where the pair costs are uneven
(1D array, metacomputer), where dense variants create cheap (or spread expensive)
pairs that the sparse ones may not.

**Corrector** (§4, "randomized greedy refinement similar to those used in METIS' p-way
partitioning"): passes over the boundary vertices in a random order; a vertex v moves
from its part a to the neighbouring part b that lowers the objective most.  Per part p
the objective value is

* ``vol``: CommCost_p — the volume p sends plus receives, each unit weighted by
  e*(p, q) of the pair it crosses (§3).  §4 says e* "is required in order to properly
  compute ... the maximum communication volume", so the volume minimised is this
  weighted one; with e* = 1 it is the plain send + receive volume.
* ``elt``: ElapseTime_p = CompCost_p + CommCost_p = w*(p) * W_p + CommCost_p (§3).

Acceptance rule.  Let S be the parts whose value the move changes (the PE of v before
and after, the parts v is sent to, the parts of v's neighbours that start or stop
receiving it).  The move is accepted when it is feasible and strictly lowers
``max_{p in S} value_p`` (by more than a relative 1e-12).  No part outside S changes and
every part of S ends below the old maximum of S, so the global maximum (max volume,
MaxElTime) never rises, and the descending-sorted vector of part values drops
lexicographically at every move: the refinement cannot cycle.  Moves that lower the
largest of a few non-maximal parts are kept because they make room for the maximal
part's later moves (a rule on the global maximum alone stalls at once).  Among the
targets of v the one with the largest gain wins, ties go to the smaller sum of changes.

Feasibility:

* balance — ``vol``: every part's weight stays in [(1 - eps) T_p, (1 + eps) T_p], T_p the
  speed-proportional target (a move never takes a part out of that band; a part the
  predictor left outside only moves back towards it).  ``elt``: the objective already
  couples computation and communication (§4), so only a loose memory bound
  W_p <= (1 + max(eps, ELT_LOAD_SLACK)) T_p holds, and no lower bound;
* ``sparse=True`` (VolS, ElTS): b must already be an allowed partner of every other part
  v is adjacent to, the allowed pairs being those with an edge between them in the
  predictor's partition, so no communicating pair of parts appears that the predictor
  did not have (§4).  e* is needed only for those pairs: computed once with
  ``arch.pair_cost``.  ``sparse=False`` (VolNS, ElTNS): any neighbouring part, e* from
  ``arch.dense_costs()`` (P x P memory).

Order: a random permutation of runs of ORDER_CHUNK consecutive boundary vertices (same
randomization at the run level; measured 2x faster per pass than a vertex-level
permutation on a 10^6-vertex 3D grid, for the cache, with the same final maximum).

Bookkeeping: per vertex the distinct parts of its neighbours with counts (capacity
deg(v)); per part its weight and CommCost.  A move's effect is computed in
O(deg(v) * s) with s the number of distinct parts around a neighbour (a small constant
on meshes), plus O(log d_q) per e* lookup in the sparse pair table.  The state is
rebuilt from scratch at every pass (O(m s)), which keeps rounding from drifting.  The
refinement stops after a pass without moves, when the last STALL_PASSES passes together
lowered the maximum by less than STALL_GAIN (relative), or after ``max_passes`` passes.

Complexity: predictor as METIS k-way, O(m) per level in practice; corrector
O(passes * sum_v deg(v) * s * c) with c the number of candidate parts per boundary
vertex; memory O(n + m + pairs) sparse, O(n + m + P^2) dense.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pymetis

from ..partitioners.errors import PartitionError
from ..partitioners.weights import integer_vertex_weights
from . import method_names
from ._archaware import init_state, refine_pass
from .metrics import quotient_graph
from .result import Partition

#: ElTS / ElTNS keep every part below (1 + max(epsilon, this)) x its target (memory bound)
ELT_LOAD_SLACK = 0.5
#: corrector runs (visit orders) per start, the best kept: archaware_partition's default
RESTARTS = 1
#: default pass limit of the corrector
MAX_PASSES = 20
#: the corrector stops when STALL_PASSES passes together lowered the maximum by less than
#: STALL_GAIN (relative): later passes only reorder non-maximal parts (measured on a
#: 10^6-vertex grid, 4096 PEs: the maximum settles after ~10 passes, moves go on for 40)
STALL_PASSES = 3
STALL_GAIN = 1e-3
#: the corrector visits the boundary vertices in a random order of runs of this many
#: consecutive ones: cache-friendly on meshes numbered with locality
ORDER_CHUNK = 64
#: place_parts runs up to this many PEs (O(P^2) memory, O(P^3) time per sweep)
PLACE_MAX_PES = 512
#: placement_candidates: random initial assignments for the swap search (multi-start)
PLACE_RANDOM_STARTS = 8
#: ... and only up to this many PEs (each start costs O(sweeps * P^3))
PLACE_MULTI_MAX_PES = 128
#: place_parts sweep limit (32 PEs: 2-4 sweeps until no swap gains)
PLACE_MAX_SWEEPS = 10
#: seconds per arc of the boundary vertices one corrector pass takes, for deciding
#: whether a first pass fits a time limit (measured: 0.7 s for the 4 M boundary arcs of
#: a 10^6-vertex grid on 4096 PEs, about 1.8e-7; doubled for a loaded machine)
PASS_SECONDS_PER_ARC = 4e-7
#: relative gain below which a move is not an improvement (rounding)
_RTOL = 1e-12
_METIS_OBJTYPE_VOL = 1

_METHODS = {("vol", True): method_names.ARCHAWARE_VOL_SPARSE,
            ("vol", False): method_names.ARCHAWARE_VOL_DENSE,
            ("elt", True): method_names.ARCHAWARE_ELT_SPARSE,
            ("elt", False): method_names.ARCHAWARE_ELT_DENSE}


def speed_targets(total_weight: float, speeds: np.ndarray) -> np.ndarray:
    """Target weight of every part: the total vertex weight split in proportion to speed."""
    speeds = np.asarray(speeds, dtype=np.float64)
    return total_weight * speeds / speeds.sum()


def kvmetis_partition(mesh, arch, *, epsilon: float = 0.03, seed: int = 0) -> Partition:
    """The predictor alone: METIS k-way, volume objective, targets proportional to speed.

    Karypis & Kumar, Multilevel k-way partitioning scheme for irregular graphs, JPDC
    48(1):96-129 (1998), doi:10.1006/jpdc.1997.1404, with METIS' volume objective; it is
    the "kvmetis" baseline of Moulitsas & Karypis §4-5.  Complexity as METIS k-way,
    about O(m) per coarsening level.
    """
    _check(mesh, arch, epsilon)
    start = time.perf_counter()
    part = _kvmetis(mesh, np.asarray(arch.speeds, dtype=np.float64), epsilon, seed)
    return Partition(part, int(arch.P), "kvmetis", {"predictor": time.perf_counter() - start})


def archaware_partition(mesh, arch, *, objective: str = "vol", sparse: bool = True,
                        epsilon: float = 0.03, seed: int = 0, max_passes: int = MAX_PASSES,
                        time_limit: float | None = None, place: bool = True,
                        restarts: int = RESTARTS,
                        predicted: np.ndarray | None = None) -> Partition:
    """Partition ``mesh`` onto the PEs of ``arch``: VolS, VolNS, ElTS or ElTNS.

    ``objective`` is ``"vol"`` (minimise the maximum e*-weighted volume, load within
    ``epsilon`` of speed-proportional targets) or ``"elt"`` (minimise MaxElTime);
    ``sparse`` forbids communicating pairs of parts the predictor did not have.  Block
    id = PE id.  The algorithm, acceptance rule and complexity are in the module
    docstring.  ``place`` (default): the corrector runs from every start of
    :func:`placement_candidates` (kvmetis' numbering and placements of its parts on PEs
    of the same speed) and the best result is kept; ``place=False``: from kvmetis'
    numbering only.  ``restarts``: corrector runs per start with different visit
    orders, the best kept.  ``"elt"`` also refines the result of the same call with
    ``"vol"`` (a second start), so ElTS/ElTNS end at or below VolS/VolNS of the same
    arguments on MaxElTime.  All three are multi-start (module docstring).
    ``seconds`` holds ``predictor``, ``placement`` (when run), ``pair_costs`` and
    ``corrector`` (summed over the runs), ``total``.
    ``time_limit`` (seconds, from the call): no corrector pass starts that would not
    end within it (the predictor always runs whole).  ``predicted``: a partition (block
    = PE) that replaces kvmetis as the predictor, for a caller whose budget METIS k-way
    into P parts would not fit (:func:`mapper.mesh.decompose.decompose` then gives the
    speed-targeted RMS partition; not the paper's predictor, and said in its notes).
    """
    if objective not in ("vol", "elt"):
        raise PartitionError(f"objective must be 'vol' or 'elt', not {objective!r}")
    if restarts < 1:
        raise PartitionError(f"restarts must be >= 1, got {restarts}")
    _check(mesh, arch, epsilon)
    seconds: dict[str, float] = {"pair_costs": 0.0, "corrector": 0.0}
    start = time.perf_counter()
    if predicted is None:
        raw = _kvmetis(mesh, np.asarray(arch.speeds, dtype=np.float64), epsilon, seed)
    else:
        raw = np.asarray(predicted, dtype=np.int64)
        if raw.shape != (mesh.n,) or (mesh.n and (raw.min() < 0 or raw.max() >= arch.P)):
            raise PartitionError(f"the predicted partition must give every one of the "
                                 f"{mesh.n} vertices a part 0..{arch.P - 1}")
    seconds["predictor"] = time.perf_counter() - start
    starts = [raw]
    if place:
        t0 = time.perf_counter()
        starts = [pi[raw] for pi in placement_candidates(mesh, arch, raw, seed=seed)]
        seconds["placement"] = time.perf_counter() - t0

    def remaining() -> float | None:
        return None if time_limit is None else time_limit - (time.perf_counter() - start)

    # a corrector run whose first pass cannot end in time is not started: its set-up
    # alone (pair table, per-vertex state) is O(m)
    one_pass = 0.0 if time_limit is None else first_pass_seconds(mesh, raw)

    def run(part0, obj, allowed) -> Refinement | None:
        if time_limit is not None and remaining() < one_pass:
            return None
        res = multistart_refine(mesh, arch, part0, objective=obj, sparse=sparse,
                                epsilon=epsilon, seed=seed, max_passes=max_passes,
                                time_limit=remaining(), restarts=restarts, allowed=allowed)
        for key in ("pair_costs", "corrector"):
            seconds[key] += res.seconds[key]
        return res

    def best_over_starts(obj) -> tuple[Refinement, np.ndarray] | None:
        # kvmetis' own numbering is the first start and the corrector never raises its
        # start's maximum, so the best is at or below kvmetis on the objective
        runs = [(res, s0) for s0 in starts if (res := run(s0, obj, s0)) is not None]
        return min(runs, key=lambda rs: rs[0].max_values[-1]) if runs else None

    best = best_over_starts(objective)
    if best is None:  # no time for one pass: the predictor's partition as it is
        seconds["total"] = time.perf_counter() - start
        return Partition(raw, int(arch.P), _METHODS[(objective, bool(sparse))], seconds)
    result = best[0]
    if objective == "elt":
        # second start: the Vol variant's result (same predictor, starts, seed, restarts),
        # refined for MaxElTime inside the pair set of the start it came from; the better
        # of the two is kept, so ElT ends at or below Vol on MaxElTime
        vol = best_over_starts("vol")
        from_vol = None if vol is None else run(vol[0].part, "elt", vol[1])
        if from_vol is not None and from_vol.max_values[-1] < result.max_values[-1]:
            result = from_vol
    seconds["total"] = time.perf_counter() - start
    return Partition(result.part, int(arch.P), _METHODS[(objective, bool(sparse))], seconds)


def first_pass_seconds(mesh, part: np.ndarray) -> float:
    """Estimated seconds of a corrector run's set-up and first pass over ``part``'s
    boundary: :func:`_pass_seconds` each.  O(m)."""
    xadj = np.asarray(mesh.graph.indptr)
    rows = np.repeat(np.arange(mesh.n), np.diff(xadj))
    return 2 * _pass_seconds(xadj, _boundary(rows, mesh.graph.indices, part))


def _boundary(rows: np.ndarray, adjncy: np.ndarray, part: np.ndarray) -> np.ndarray:
    """The vertices with a neighbour in another part (``rows``: each arc's source)."""
    return np.unique(rows[part[rows] != part[adjncy]])


def _pass_seconds(xadj: np.ndarray, boundary: np.ndarray) -> float:
    """Estimated seconds of one corrector pass: :data:`PASS_SECONDS_PER_ARC` per arc of
    the boundary vertices."""
    return PASS_SECONDS_PER_ARC * float(np.diff(xadj)[boundary].sum())


def multistart_refine(mesh, arch, part: np.ndarray, *, objective: str, sparse: bool,
                      epsilon: float = 0.03, seed: int = 0, max_passes: int = MAX_PASSES,
                      time_limit: float | None = None, restarts: int = RESTARTS,
                      allowed: np.ndarray | None = None) -> Refinement:
    """Best of ``restarts`` runs of :func:`refine_partition` from ``part``.

    Run r visits the boundary vertices in the order drawn from seed ``seed`` (r = 0, the
    single-start corrector) or ``(seed, r)``; the run with the lowest final maximum is
    kept (ties: the earlier run).  Multi-start local search (e.g. Marti, Resende &
    Ribeiro, *Multi-start methods for combinatorial optimization*, EJOR 226(1):1-8,
    2013): the greedy corrector's final maximum depends on the visit order by several
    per cent on 32 PEs (module docstring), and the best of a few orders is less
    dependent on it.  No run starts after ``time_limit`` seconds (the first always
    runs, with what is left of the limit).  ``seconds`` are summed over the runs.
    Complexity: ``restarts`` times :func:`refine_partition`'s.
    """
    t0 = time.perf_counter()
    best: Refinement | None = None
    spent = {"pair_costs": 0.0, "corrector": 0.0}
    for r in range(restarts):
        left = None if time_limit is None else time_limit - (time.perf_counter() - t0)
        if r and left is not None and left <= 0:
            break
        res = refine_partition(mesh, arch, part, objective=objective, sparse=sparse,
                               epsilon=epsilon, seed=seed if r == 0 else (seed, r),
                               max_passes=max_passes, time_limit=left, allowed=allowed)
        for key in spent:
            spent[key] += res.seconds[key]
        if best is None or res.max_values[-1] < best.max_values[-1]:
            best = res
    assert best is not None
    return Refinement(best.part, best.moves, best.max_values, spent)


def place_parts(mesh, arch, part: np.ndarray, *, max_sweeps: int = PLACE_MAX_SWEEPS,
                init: np.ndarray | None = None) -> np.ndarray:
    """PE of every part of ``part`` lowering the e*-weighted quotient volume (a QAP).

    Minimises C(pi) = sum over part pairs {i, j} of F_ij * e*(pi_i, pi_j), F_ij the
    c-volume parts i and j exchange (:func:`mapper.mesh.metrics.quotient_graph`), by
    pairwise-exchange local search (the 2-exchange neighbourhood of QAP local search,
    e.g. Burkard, Dell'Amico & Martello, *Assignment Problems*, SIAM 2009, §8.2;
    Schulz, Traeff & von Kirchbach's N_C swaps are the same move): parts are visited in
    order; part i swaps PEs with the part j of equal speed (so every part keeps its
    speed-proportional target, which METIS built it for) whose swap lowers C most,
    when it does by more than a relative 1e-12.  The gain of every j for one i comes
    from matrix-vector products: with D = e*(pi, pi) and r_j = sum_k F_jk D_jk,
    C(swap i, j) - C = (D f_i)_j - f_i . D_i - r_j + (F D_i)_j + 2 F_ij D_ij.
    Stops after a sweep without a swap or after ``max_sweeps`` sweeps.

    Returns ``pi`` (part -> PE, a permutation; the identity when P > PLACE_MAX_PES or
    all parts differ in speed).  Not in Moulitsas & Karypis: their §4 predictor numbers
    parts as METIS does; see the module docstring for why this phase is here.
    Complexity: O(P^2) e* values and memory, O(P^2) time per visited part (dense
    products), so O(sweeps * P^3); 32 PEs: milliseconds.
    """
    P = int(arch.P)
    pi = np.arange(P, dtype=np.int64)
    speeds = np.asarray(arch.speeds, dtype=np.float64)
    if P < 3 or P > PLACE_MAX_PES or np.unique(speeds).size == P:
        return pi
    if init is not None:
        pi = np.array(init, dtype=np.int64)
    F = np.asarray(quotient_graph(mesh, np.asarray(part), P).to_csr().todense(),
                   dtype=np.float64)
    E = np.asarray(arch.dense_costs(), dtype=np.float64)
    return _swap_search(F, E, speeds, pi, max_sweeps)


def placement_candidates(mesh, arch, part: np.ndarray, *, seed: int = 0,
                         random_starts: int = PLACE_RANDOM_STARTS) -> list[np.ndarray]:
    """PE assignments (part -> PE) worth starting the corrector from, the identity first.

    The identity (kvmetis' own numbering), :func:`place_parts` from the identity, and
    the lowest-C result of :func:`place_parts` from ``random_starts`` random
    assignments within each speed class (multi-start of the swap local search: from
    the identity alone it stops at a local optimum up to 25 % above the best of 20 random
    starts on seed 002's 2D array).  Duplicates are dropped.  Only the identity when
    P > PLACE_MAX_PES, and no random starts when P > PLACE_MULTI_MAX_PES (O(P^3) per sweep).
    """
    P = int(arch.P)
    ident = np.arange(P, dtype=np.int64)
    speeds = np.asarray(arch.speeds, dtype=np.float64)
    if P < 3 or P > PLACE_MAX_PES or np.unique(speeds).size == P:
        return [ident]
    F = np.asarray(quotient_graph(mesh, np.asarray(part), P).to_csr().todense(),
                   dtype=np.float64)
    E = np.asarray(arch.dense_costs(), dtype=np.float64)
    out = [ident, _swap_search(F, E, speeds, ident.copy(), PLACE_MAX_SWEEPS)]
    if P <= PLACE_MULTI_MAX_PES and random_starts > 0:
        rng = np.random.default_rng((seed, 0x91ACE))
        best, best_c = None, np.inf
        for _ in range(random_starts):
            init = ident.copy()
            for sp in np.unique(speeds):
                members = np.flatnonzero(speeds == sp)
                init[members] = rng.permutation(members)
            pi = _swap_search(F, E, speeds, init, PLACE_MAX_SWEEPS)
            c = float((F * E[np.ix_(pi, pi)]).sum())
            if c < best_c:
                best, best_c = pi, c
        out.append(best)
    unique: list[np.ndarray] = []
    for pi in out:
        if not any((pi == u).all() for u in unique):
            unique.append(pi)
    return unique


def _swap_search(F: np.ndarray, E: np.ndarray, speeds: np.ndarray, pi: np.ndarray,
                 max_sweeps: int) -> np.ndarray:
    """The pairwise-exchange local search of :func:`place_parts` from ``pi`` (modified)."""
    P = len(pi)
    D = E[np.ix_(pi, pi)]  # e*(pi_a, pi_b) by part
    r = (F * D).sum(axis=1)
    total = 0.5 * float(r.sum())
    for _ in range(max_sweeps):
        swapped = False
        for i in range(P):
            same = speeds[pi] == speeds[pi[i]]
            same[i] = False
            if not same.any():
                continue
            fi, di = F[i], D[i]
            delta = D @ fi - fi @ di - r + F @ di + 2.0 * fi * di
            delta[~same] = np.inf
            j = int(np.argmin(delta))
            if not delta[j] < -1e-12 * max(total, 1e-300):
                continue
            pi[i], pi[j] = pi[j], pi[i]
            D = E[np.ix_(pi, pi)]
            r = (F * D).sum(axis=1)
            total = 0.5 * float(r.sum())
            swapped = True
        if not swapped:
            break
    return pi


@dataclass(frozen=True)
class Refinement:
    """Result of the corrector alone.

    Attributes
    ----------
    part: block of every vertex after refinement (int64).
    moves: number of moves made in every pass.
    max_values: the maximum per-part objective value before the first pass and after
        every pass (max CommCost for ``vol``, MaxElTime for ``elt``).
    seconds: ``pair_costs`` and ``corrector`` wall time.
    """

    part: np.ndarray
    moves: list[int]
    max_values: list[float]
    seconds: dict[str, float]


PassHook = Callable[[int, np.ndarray, np.ndarray, np.ndarray], None]


def refine_partition(mesh, arch, part: np.ndarray, *, objective: str, sparse: bool,
                     epsilon: float = 0.03, seed: int | tuple[int, ...] = 0,
                     max_passes: int = MAX_PASSES, time_limit: float | None = None,
                     on_pass: PassHook | None = None,
                     allowed: np.ndarray | None = None) -> Refinement:
    """The corrector: randomized greedy refinement of ``part`` (see module docstring).

    ``on_pass(k, part, comm_cost, weights)`` is called after pass k with the
    incrementally maintained per-part CommCost and weights (copies), before they are
    rebuilt from scratch — a hook for checking the bookkeeping.  With ``time_limit``
    (seconds from the call) a pass starts only if it can end within it: as long as the
    previous pass took, the first :data:`PASS_SECONDS_PER_ARC` per arc at the boundary.
    ``allowed`` (sparse only): the partition whose communicating pairs are allowed
    (the predictor's when ``part`` is already a refinement of it); default ``part``
    itself.  Every pair of ``part`` must be among them.
    """
    if objective not in ("vol", "elt"):
        raise PartitionError(f"objective must be 'vol' or 'elt', not {objective!r}")
    P = int(arch.P)
    n = mesh.n
    part = np.array(part, dtype=np.int64)
    if part.shape != (n,) or (n and (part.min() < 0 or part.max() >= P)):
        raise PartitionError(f"partition must give every one of the {n} vertices a part 0..{P - 1}")
    xadj = np.ascontiguousarray(mesh.graph.indptr, dtype=np.int64)
    adjncy = np.ascontiguousarray(mesh.graph.indices, dtype=np.int32)
    vw = np.ascontiguousarray(mesh.vertex_weights, dtype=np.float64)
    cs = np.ascontiguousarray(mesh.comm_sizes, dtype=np.float64)
    wstar = np.ascontiguousarray(arch.cost_per_work, dtype=np.float64)
    elt = objective == "elt"

    t0 = time.perf_counter()
    if sparse:
        base = part if allowed is None else np.asarray(allowed, dtype=np.int64)
        if base.shape != (n,):
            raise PartitionError(f"allowed must give every one of the {n} vertices a part")
        qptr, qadj, qcost = _pair_table(xadj, adjncy, base, P, arch)
        dmat = np.zeros((1, 1))
    else:
        qptr, qadj, qcost = np.zeros(P + 1, np.int64), np.zeros(0, np.int32), np.zeros(0)
        dmat = np.ascontiguousarray(arch.dense_costs(), dtype=np.float64)
    t1 = time.perf_counter()

    targets = speed_targets(float(vw.sum()), arch.speeds)
    if elt:
        upper = (1.0 + max(epsilon, ELT_LOAD_SLACK)) * targets
        lower = np.full(P, -np.inf)
    else:
        upper = (1.0 + epsilon) * targets
        lower = (1.0 - epsilon) * targets
    rng = np.random.default_rng(seed)
    nslot = np.zeros(n, dtype=np.int32)
    slot_part = np.zeros(len(adjncy), dtype=np.int32)
    slot_cnt = np.zeros(len(adjncy), dtype=np.int32)
    W = np.bincount(part, weights=vw, minlength=P).astype(np.float64)
    Fc = np.zeros(P)
    dense = 0 if sparse else 1
    table = (dense, dmat, qptr, qadj, qcost)
    if init_state(xadj, adjncy, cs, part, *table, nslot, slot_part, slot_cnt, Fc):
        raise PartitionError("the start partition has a communicating pair outside allowed")

    def max_value() -> float:
        return float((Fc + wstar * W if elt else Fc).max()) if P else 0.0

    moves: list[int] = []
    max_values = [max_value()]
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(xadj))
    last_pass = None
    for k in range(max_passes):
        boundary = _boundary(rows, adjncy, part)
        if time_limit is not None:
            # a pass starts only if it can end in time: as long as the previous one,
            # or (the first) the estimate from its boundary
            need = last_pass if last_pass is not None else _pass_seconds(xadj, boundary)
            if time.perf_counter() - t0 + need > time_limit:
                break
        started = time.perf_counter()
        order = _chunked_permutation(boundary, rng)
        count = refine_pass(xadj, adjncy, vw, cs, part, wstar, int(elt), *table,
                            upper, lower, order, nslot, slot_part, slot_cnt, W, Fc, _RTOL)
        moves.append(int(count))
        if on_pass is not None:
            on_pass(k, part.copy(), Fc.copy(), W.copy())
        # from scratch again: rounding of the incremental sums does not accumulate
        W = np.bincount(part, weights=vw, minlength=P).astype(np.float64)
        init_state(xadj, adjncy, cs, part, *table, nslot, slot_part, slot_cnt, Fc)
        last_pass = time.perf_counter() - started
        max_values.append(max_value())
        if count == 0 or _stalled(max_values):
            break
    t2 = time.perf_counter()
    return Refinement(part, moves, max_values, {"pair_costs": t1 - t0, "corrector": t2 - t1})


def _chunked_permutation(items: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``items`` in random order of runs of ORDER_CHUNK consecutive entries."""
    chunks = -(-len(items) // ORDER_CHUNK)
    perm = rng.permutation(chunks)
    starts = perm * ORDER_CHUNK
    idx = (starts[:, None] + np.arange(ORDER_CHUNK)[None, :]).ravel()
    return items[idx[idx < len(items)]]


def _stalled(max_values: list[float]) -> bool:
    """True when the last STALL_PASSES passes lowered the maximum by < STALL_GAIN (relative)."""
    if len(max_values) <= STALL_PASSES:
        return False
    before, now = max_values[-1 - STALL_PASSES], max_values[-1]
    return before - now <= STALL_GAIN * before


def communicating_pairs(graph, part: np.ndarray, nparts: int) -> np.ndarray:
    """Sorted codes ``x * nparts + y`` of the ordered part pairs with an edge between them.

    Both orders of a pair are present (the graph is symmetric).  O(m log m).
    """
    xadj = np.asarray(graph.indptr, dtype=np.int64)
    rows = np.repeat(np.arange(len(xadj) - 1, dtype=np.int64), np.diff(xadj))
    pu = part[rows]
    pv = part[np.asarray(graph.indices)]
    cut = pu != pv
    return np.unique(pu[cut] * nparts + pv[cut])


def _pair_table(xadj, adjncy, part, P, arch):
    """Allowed pairs (the predictor's communicating pairs) as sorted CSR rows with e*."""
    rows = np.repeat(np.arange(len(xadj) - 1, dtype=np.int64), np.diff(xadj))
    pu = part[rows]
    pv = part[adjncy]
    cut = pu != pv
    codes = np.unique(pu[cut] * P + pv[cut])
    x = codes // P
    y = codes % P
    qptr = np.zeros(P + 1, dtype=np.int64)
    np.cumsum(np.bincount(x, minlength=P), out=qptr[1:])
    qcost = np.ascontiguousarray(arch.pair_cost(x, y), dtype=np.float64)
    return qptr, y.astype(np.int32), qcost


def _check(mesh, arch, epsilon: float) -> None:
    if not epsilon >= 0:
        raise PartitionError(f"epsilon must be >= 0, got {epsilon}")
    if int(arch.P) < 1:
        raise PartitionError("the architecture has no PE")
    if np.any(np.asarray(arch.speeds) <= 0):
        raise PartitionError("every PE speed must be > 0")


def _kvmetis(mesh, speeds: np.ndarray, epsilon: float, seed: int) -> np.ndarray:
    """METIS k-way, volume objective, tpwgts proportional to speed; part of every vertex."""
    P = len(speeds)
    n = mesh.n
    if P == 1 or n == 0:
        return np.zeros(n, dtype=np.int64)
    opts = pymetis.Options()
    opts.objtype = _METIS_OBJTYPE_VOL
    opts.ufactor = max(1, int(round(epsilon * 1000)))
    opts.seed = int(seed)
    vw = np.asarray(mesh.vertex_weights, dtype=np.float64)
    vweights = None if vw.min() == vw.max() else integer_vertex_weights(vw)
    adjacency = pymetis.CSRAdjacency(np.asarray(mesh.graph.indptr, dtype=np.int64),
                                     np.asarray(mesh.graph.indices, dtype=np.int64))
    _, membership = pymetis.part_graph(P, adjacency, vweights=vweights,
                                       tpwgts=list(speeds / speeds.sum()), options=opts,
                                       recursive=False)
    return np.asarray(membership, dtype=np.int64)
