"""One multisection step with a balance guarantee: backend split, then repair.

Both recursive partitioners (:mod:`mapper.mesh.rb`, :mod:`mapper.mesh.rms`) cut a vertex
set into m sides with target weights T_i and upper bounds L_i.  The backend (METIS or
KaHIP: :func:`backend_split`, :mod:`mapper.partitioners`) is asked for the split;
partitioners overshoot their tolerance now and then (METIS's ``ufactor`` is a goal,
KaHIP's bound refers to the average block), so the result is repaired: while a side is
above its bound, vertices of overloaded sides move to a side that can take them, largest
cut gain first (gain = edge weight into the new side minus edge weight into the old one,
as in Fiduccia & Mattheyses' vertex moves); a side accepts a vertex while it stays
within its bound, or while it is still below its target and the move lowers the largest
overload.  Then sides below their lower bound (the same slack below the target,
:func:`step_floor`) are filled: vertices next to such a side move into it from
neighbouring sides that stay at or above their own lower bound, largest cut gain first
(with a small target next to a large one, the backends' upper tolerance of the large
side alone can swallow the small side: METIS and KaHIP left a 1 % target empty, and the
large side was still "within its bound").  Finally every side gets at least as many
vertices as it has blocks to make (so no block ends empty).

Complexity per repair round: O(Σ deg) over the vertices of overloaded sides plus a
sort of them, per fill round the same over the short sides' members and their
neighbours; rounds are few because the backends are close to balanced (an empty side
grows by one layer of its region per round).

References
----------
* Fiduccia & Mattheyses, A Linear-Time Heuristic for Improving Network Partitions,
  DAC 1982, doi:10.1109/DAC.1982.1585498 (gain-ordered single-vertex moves).
"""

from __future__ import annotations

import math
import time

import numpy as np
import scipy.sparse as sp

from ..partitioners.errors import PartitionError
from ..partitioners.kahip import kahip_split
from ..partitioners.metis import metis_split
from .method_names import KAHIP, METIS

_MAX_ROUNDS = 100_000   # each round moves at least one vertex


def repair(adj: sp.csr_matrix, w: np.ndarray, part: np.ndarray, targets: np.ndarray,
           bounds: np.ndarray, min_counts: np.ndarray,
           lower: np.ndarray | None = None) -> np.ndarray:
    """Move vertices until every side i weighs at most ``bounds[i]`` and, given
    ``lower``, at least ``lower[i]`` (see module doc).

    Stops early only when no vertex can move (vertices heavier than every side's room);
    then the overload (or shortfall) left is below one vertex weight.  Rounds move whole
    layers of boundary vertices, so a backend that is near its targets needs one or two.
    """
    part = part.copy()
    m = len(targets)
    load = np.bincount(part, weights=w, minlength=m)
    tol = 1e-9 * float(bounds.max())
    for _ in range(_MAX_ROUNDS):
        over = load > bounds + tol
        if not over.any():
            break
        if not _repair_round(adj, w, part, load, targets, bounds, over, tol):
            break
    if lower is not None:
        for _ in range(_MAX_ROUNDS):
            short = load < lower - tol
            if not short.any() or not _fill_round(adj, w, part, load, lower, bounds,
                                                  short, tol):
                break
    _ensure_counts(adj, part, min_counts)
    return part


def _fill_round(adj, w, part, load, lower, bounds, short, tol) -> bool:
    """One round of moves into sides below their lower bound; True when a vertex moved.

    Candidates are the vertices of other sides with an edge into a short side, each
    proposing the short neighbour side it is most connected to, gain = that connection
    minus its connection to its own side; a move keeps the source at or above its lower
    bound and the destination within its upper bound.  When no neighbour can give (an
    empty side has none), the side with the most to spare gives one vertex, the one
    least connected to itself, which the next rounds grow from.
    """
    m = len(lower)
    members = np.flatnonzero(short[part])
    sub = adj[members].tocoo()
    near = np.unique(sub.col[~short[part[sub.col]]])
    spare = load - lower
    if len(near):
        nb = adj[near].tocoo()
        key = nb.row.astype(np.int64) * m + part[nb.col]
        uniq, inv = np.unique(key, return_inverse=True)
        conn = np.bincount(inv, weights=nb.data.astype(np.float64))
        row, blk = uniq // m, uniq % m
        own = np.zeros(len(near))
        mine = blk == part[near[row]]
        own[row[mine]] = conn[mine]
        into = short[blk]
        rr, bb, cc = row[into], blk[into], conn[into]
        order = np.lexsort((cc, rr))          # per row ascending: the last is the best
        last = np.r_[np.flatnonzero(np.diff(rr[order])), len(order) - 1]
        cand, dst = near[rr[order][last]], bb[order][last]
        gain = cc[order][last] - own[rr[order][last]]
        if _fills(adj, w, part, load, lower, bounds, tol, cand, dst, gain):
            return True
    # no neighbour can give: the side with the most to spare, least own edges first
    src = int(np.argmax(np.where(short, -np.inf, spare)))
    cand = np.flatnonzero(part == src)
    inside = adj[cand].tocoo()
    keep = part[inside.col] == src
    own = np.bincount(inside.row[keep], weights=inside.data[keep].astype(np.float64),
                      minlength=len(cand))
    dst = int(np.argmax(np.where(short, lower - load, -np.inf)))
    # one seed only: the next rounds grow it through its own neighbours, layer by
    # layer, into one region instead of scattered vertices
    fits = ((load[src] - w[cand] >= lower[src] - tol)
            & (load[dst] + w[cand] <= bounds[dst] + tol))
    if not fits.any():
        return False
    _move(adj, w, part, load, cand[fits][int(np.argmin(own[fits]))], dst)
    return True


def _fills(adj, w, part, load, lower, bounds, tol, cand, dst, gain) -> bool:
    """Move candidates best gain first while their destination is short, it takes them
    and their source can give them; neighbours of a moved vertex wait for the next
    round."""
    moved = False
    dirty = np.zeros(len(part), dtype=bool)
    for i in np.argsort(-gain, kind="stable"):
        v, d = cand[i], dst[i]
        s = part[v]
        if (dirty[v] or s == d or load[d] >= lower[d] - tol
                or load[d] + w[v] > bounds[d] + tol or load[s] - w[v] < lower[s] - tol):
            continue
        _move(adj, w, part, load, v, d, dirty)
        moved = True
    return moved


def _move(adj, w, part, load, v, dst, dirty=None) -> None:
    """Vertex ``v`` to side ``dst``, the loads updated; its neighbours marked ``dirty``
    (their gains are stale until the next round)."""
    load[part[v]] -= w[v]
    load[dst] += w[v]
    part[v] = dst
    if dirty is not None:
        dirty[adj.indices[adj.indptr[v]:adj.indptr[v + 1]]] = True


def _accepts(load_dst, wv, bound_dst, target_dst, excess_src, tol):
    """Whether a side takes a vertex: it stays within its bound, or it is below its
    target and the move lowers the worst overload (vectorized)."""
    return (load_dst + wv <= bound_dst + tol) | (
        (load_dst < target_dst) & (load_dst + wv - bound_dst < excess_src))


def _repair_round(adj, w, part, load, targets, bounds, over, tol) -> bool:
    """One round of moves out of overloaded sides; True when a vertex moved.

    Gains are computed once per round, so a vertex next to one that moved is skipped
    until the next round (its gain changed).  Vertices with an edge into a side that
    takes them go first; only when none of them can move does a vertex move to a side
    it has no edge to (the one with most room).
    """
    m = len(targets)
    cand = np.flatnonzero(over[part])
    src = part[cand]
    excess = load - bounds
    sub = adj[cand].tocoo()
    r, c, val = sub.row, part[sub.col], sub.data.astype(np.float64)
    key = r.astype(np.int64) * m + c
    uniq, inv = np.unique(key, return_inverse=True)
    conn = np.bincount(inv, weights=val)
    row, blk = uniq // m, uniq % m
    mine = blk == src[row]
    own = np.zeros(len(cand))
    own[row[mine]] = conn[mine]
    # best neighbour side that takes the vertex
    ok = ~mine & ~over[blk] & _accepts(load[blk], w[cand[row]], bounds[blk], targets[blk],
                                        excess[src[row]], tol)
    rr, bb, cc = row[ok], blk[ok], conn[ok]
    target = np.zeros(len(cand), dtype=np.int64)
    best = np.zeros(len(cand))
    boundary = np.zeros(len(cand), dtype=bool)
    if len(rr):
        order = np.lexsort((cc, rr))          # per row ascending: the last is the best
        last = np.r_[np.flatnonzero(np.diff(rr[order])), len(order) - 1]
        target[rr[order][last]] = bb[order][last]
        best[rr[order][last]] = cc[order][last]
        boundary[rr[order][last]] = True
    gain = best - own
    if boundary.any() and _moves(adj, w, part, load, targets, bounds, tol, cand[boundary],
                                 target[boundary], gain[boundary]):
        return True
    # no edge into a side that takes them: the side with most room, least own edges first
    room = np.where(over, -np.inf, bounds - load)
    return _moves(adj, w, part, load, targets, bounds, tol, cand,
                  np.full(len(cand), int(np.argmax(room))), -own)


def _moves(adj, w, part, load, targets, bounds, tol, cand, target, gain) -> bool:
    """Move candidates best gain first while their side is over and the target takes
    them; neighbours of a moved vertex wait for the next round."""
    moved = False
    n_over = int(np.count_nonzero(load > bounds + tol))
    dirty = np.zeros(len(part), dtype=bool)
    for i in np.argsort(-gain, kind="stable"):
        v = cand[i]
        if dirty[v]:
            continue
        src, dst = part[v], target[i]
        excess = load[src] - bounds[src]
        if excess <= tol or dst == src or not _accepts(load[dst], w[v], bounds[dst],
                                                       targets[dst], excess, tol):
            continue
        _move(adj, w, part, load, v, dst, dirty)
        moved = True
        if load[src] <= bounds[src] + tol:
            n_over -= 1
            if n_over == 0:
                break
    return moved


def _ensure_counts(adj: sp.csr_matrix, part: np.ndarray, min_counts: np.ndarray) -> None:
    """Give every side at least ``min_counts[i]`` vertices (in place)."""
    m = len(min_counts)
    count = np.bincount(part, minlength=m)
    while np.any(count < min_counts):
        dst = int(np.argmax(min_counts - count))
        src = int(np.argmax(count - min_counts))
        members = np.flatnonzero(part == src)
        # prefer a vertex of src adjacent to dst
        sub = adj[members].tocoo()
        touching = np.unique(sub.row[part[sub.col] == dst])
        v = members[touching[0]] if len(touching) else members[0]
        part[v] = dst
        count[src] -= 1
        count[dst] += 1


def backend_split(backend: str, adj: sp.csr_matrix, vweights: np.ndarray,
                  fractions: np.ndarray, *, imbalance: float, seed: int,
                  recursive: bool = True, kahip_mode: str = "fast") -> np.ndarray:
    """Dispatch to :func:`metis_split` or :func:`kahip_split` by name."""
    if backend == METIS:
        return metis_split(adj, vweights, fractions, imbalance=imbalance, seed=seed,
                           recursive=recursive)
    if backend == KAHIP:
        return kahip_split(adj, vweights, fractions, imbalance=imbalance, seed=seed,
                           mode=kahip_mode)
    raise PartitionError(f"unknown partitioning backend {backend!r}: expected "
                         f"{METIS!r} or {KAHIP!r}")


def split_step(adj: sp.csr_matrix, w: np.ndarray, wi: np.ndarray, targets: np.ndarray,
               bounds: np.ndarray, min_counts: np.ndarray, delta: float, *, backend: str,
               seed: int, recursive: bool, kahip_mode: str,
               seconds: dict[str, float], lower: np.ndarray | None = None) -> np.ndarray:
    """Backend split of ``adj`` into ``len(targets)`` sides, then :func:`repair`.

    ``w`` are the true vertex weights (float), ``wi`` their integer version for the
    backend; ``delta`` is the backend's imbalance; ``lower`` the sides' lower bounds.
    Adds phase times to ``seconds``.
    """
    t0 = time.perf_counter()
    part = backend_split(backend, adj, wi, targets / targets.sum(), imbalance=delta,
                         seed=seed, recursive=recursive, kahip_mode=kahip_mode)
    t1 = time.perf_counter()
    part = repair(adj, w, part, targets, bounds, min_counts, lower)
    t2 = time.perf_counter()
    seconds["partition"] = seconds.get("partition", 0.0) + t1 - t0
    seconds["repair"] = seconds.get("repair", 0.0) + t2 - t1
    return part


def step_delta(epsilon: float, scale: float, depth: int) -> float:
    """Per-step slack so that ``depth`` more steps stay within (1 + epsilon) overall.

    ``scale`` is how far the current vertex set already is above its target
    (weight / target); the remaining allowance ``(1 + epsilon) / scale`` is spread
    evenly (multiplicatively) over the steps still to come.
    """
    return max(((1.0 + epsilon) / scale) ** (1.0 / max(depth, 1)) - 1.0, 0.0)


def step_floor(epsilon: float, scale: float, depth: int) -> float:
    """Per-step slack below the target so that ``depth`` more steps stay at or above
    (1 - epsilon) of the original target: ``1 - ((1 - epsilon) / scale)^(1/depth)``,
    0 when the set is already below that (then each step aims at its full target)."""
    if epsilon >= 1.0:
        return 1.0
    return max(1.0 - ((1.0 - epsilon) / max(scale, 1e-300)) ** (1.0 / max(depth, 1)), 0.0)


def mesh_arrays(mesh) -> tuple[sp.csr_matrix, np.ndarray]:
    """The mesh's adjacency with integer edge weights ≥ 1 (proportions kept, for the
    backends) and its vertex weights as float64."""
    from ..partitioners.weights import metis_weights

    g = mesh.graph
    adj = sp.csr_matrix((metis_weights(np.asarray(g.weights, dtype=np.float64)),
                         np.asarray(g.indices, dtype=np.int64),
                         np.asarray(g.indptr, dtype=np.int64)), shape=(g.n, g.n))
    return adj, np.asarray(mesh.vertex_weights, dtype=np.float64)


def check_common(n: int, k: int, epsilon: float, backend: str) -> None:
    """Arguments every recursive partitioner checks, with the messages users see."""
    from .method_names import BACKENDS

    if backend not in BACKENDS:
        raise PartitionError(f"unknown partitioning backend {backend!r}: expected one of "
                             f"{', '.join(BACKENDS)}")
    if not (math.isfinite(epsilon) and epsilon >= 0):
        raise PartitionError(f"epsilon must be a finite number >= 0, got {epsilon!r}")
    if k > n:
        raise PartitionError(f"cannot make {k} non-empty blocks of a mesh with {n} vertices")
