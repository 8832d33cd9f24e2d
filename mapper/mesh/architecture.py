"""The architecture graph: processor speeds and link costs (Moulitsas & Karypis §2.2).

Moulitsas & Karypis model the machine as a weighted undirected graph A = (P, L): the
vertices are the processors (PEs), ``w*(p)`` is "the processing cost per unit of
computation" of PE p, and each link l(p, q) has a weight ``e*(p, q)``, "the communication
cost per unit of communication between processors p and q".  "If two processors are not
'directly' connected, and the communication cost incurred between them is needed, we sum
the squares of the weights of the shortest path between them.  This is called a
quadratic path length (QPL)."  ``e*`` is symmetric and ``e*(p, p) = 0``.

:class:`Architecture` holds ``speeds`` (``w* = 1 / speed``) and one of three private
link models, all answering the vectorized :meth:`Architecture.pair_cost`:

* **Tree link model** (:func:`architecture_from_hierarchy`, for a
  :class:`mapper.model.machine.Hierarchy`, level 0 innermost).  PEs inside one node are
  directly linked: ``e*(p, q) = link_costs[L]`` where L is the level of their smallest
  common group and ``L <= node_level``.  Nodes are not directly linked: the path between
  PEs of two nodes is node → leaf switch → … → the smallest common switch → … → node,
  one link up per level; the link by which a level-i group enters its parent (the
  level-(i+1) group) costs ``link_costs[i + 1]`` unless ``uplink_costs[i][g]`` gives that
  group's own cost (a switch's LinkSpeed, 0 for the padding levels of an uneven tree),
  and ``e*(p, q) = QPL = sum of the squares of the link costs along that path``.  A tree
  has one simple path per pair, so it is the shortest one.  Closed form: each PE keeps
  its prefix sums of squared uplink costs per level (O(P k) memory, k levels), a pair
  costs O(k) (its common level) — no P x P matrix unless :meth:`dense_costs` is called.
* **Link graph** (:func:`architecture_from_links`): explicit links with costs.  Directly
  linked pairs cost their link; any other pair costs the QPL, the smallest sum of squared
  link costs over all paths: Dijkstra on the graph with squared weights
  (:func:`scipy.sparse.csgraph.dijkstra`), one row per source PE, cached on first use
  (O(L + P log P) time and O(P) memory per source; O(P²) when every source is asked).
* **Complete graph** (:func:`architecture_from_matrix`): every pair directly linked,
  ``e*`` given as a symmetric matrix (the "complete weighted architecture graph" the
  paper says earlier heterogeneous partitioners assume); O(P²) memory by construction.

Generators for the four 32-PE machines of the paper's Fig. 2 (Arch32_1 … Arch32_4):
:func:`fig2_1d_array`, :func:`fig2_2d_array`, :func:`fig2_cluster`,
:func:`fig2_metacomputer` (:data:`FIG2_MACHINES` by name).  The paper draws them but
gives no link costs; the values chosen here are stated in each docstring.

References
----------
* Moulitsas, I. & Karypis, G.: Architecture Aware Partitioning Algorithms.  ICA3PP 2008,
  LNCS 5022, pp. 42–53, Springer.  doi:10.1007/978-3-540-69501-1_6.  §2.2 (architecture
  graph, QPL), §5 and Fig. 2 (the 32-PE machines).
* Walshaw, C. & Cross, M.: Multilevel Mesh Partitioning for Heterogeneous Communication
  Networks.  Future Gener. Comput. Syst. 17(5), 601–623 (2001) — the paper's [22],
  where QPL is shown to beat the linear path length.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components, dijkstra

from ..model.machine import Hierarchy, MachineError


def _as_pe_array(x) -> np.ndarray:
    return np.asarray(x, dtype=np.int64)


def _check_pes(p: np.ndarray, n: int, what: str) -> None:
    if p.size and (p.min() < 0 or p.max() >= n):
        raise MachineError(f"{what}: PE ids must lie in 0..{n - 1}")


# -- link models (private) ----------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class _TreeLinks:
    """Tree link model over a Hierarchy; see the module docstring."""

    hierarchy: Hierarchy
    link_costs: np.ndarray          # per level
    node_level: int                 # levels <= node_level are directly linked
    up_sq: np.ndarray               # (P, levels): sum of squared uplinks below level L

    @property
    def n(self) -> int:
        return self.hierarchy.n

    def pair_cost(self, p: np.ndarray, q: np.ndarray) -> np.ndarray:
        lev = self.hierarchy.level_of(p, q)
        safe = np.maximum(lev, 0)
        direct = self.link_costs[safe]
        path = self.up_sq[p, safe] + self.up_sq[q, safe]
        return np.where(lev < 0, 0.0, np.where(lev <= self.node_level, direct, path))

    def dense_costs(self) -> np.ndarray:
        n = self.n
        out = np.empty((n, n), dtype=np.float64)
        q = np.arange(n, dtype=np.int64)[None, :]
        # blocks of rows: about 2^20 pairs of O(k) temporaries at a time, not P² k
        step = max(1, (1 << 20) // n)
        for lo in range(0, n, step):
            p = np.arange(lo, min(n, lo + step), dtype=np.int64)[:, None]
            out[lo:lo + step] = self.pair_cost(p, q)
        return out

    def describe(self) -> str:
        return (f"tree {self.hierarchy.describe()}, link costs "
                + ":".join(f"{c:g}" for c in self.link_costs)
                + f", directly linked up to level {self.node_level}")


@dataclass(frozen=True, eq=False)
class _GraphLinks:
    """Explicit link graph; QPL by Dijkstra on squared costs, rows cached per source."""

    n: int
    keys: np.ndarray                # sorted u * n + v over both directions
    key_costs: np.ndarray           # direct cost of each key
    squared: sp.csr_matrix          # squared costs, symmetric
    rows: dict[int, np.ndarray] = field(default_factory=dict, repr=False)

    def _direct(self, p: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        key = p * self.n + q
        if not self.keys.size:
            return np.zeros(key.shape, dtype=bool), np.zeros(key.shape)
        pos = np.minimum(np.searchsorted(self.keys, key), len(self.keys) - 1)
        hit = self.keys[pos] == key
        return hit, self.key_costs[pos]

    def qpl_rows(self, sources: np.ndarray) -> np.ndarray:
        """QPL from each of ``sources`` to every PE, (len(sources), P); cached per source."""
        missing = np.array([s for s in np.unique(sources).tolist() if s not in self.rows],
                           dtype=np.int64)
        if missing.size:
            dist = dijkstra(self.squared, directed=False, indices=missing)
            for s, row in zip(missing.tolist(), np.atleast_2d(dist), strict=True):
                self.rows[s] = row
        return np.stack([self.rows[s] for s in sources.tolist()]) if sources.size \
            else np.empty((0, self.n))

    def pair_cost(self, p: np.ndarray, q: np.ndarray) -> np.ndarray:
        p, q = np.broadcast_arrays(p, q)
        shape = p.shape
        p, q = p.ravel(), q.ravel()
        out = np.zeros(p.shape, dtype=np.float64)
        hit, cost = self._direct(p, q)
        out[hit] = cost[hit]
        far = ~hit & (p != q)
        if far.any():
            src, inv = np.unique(p[far], return_inverse=True)
            out[far] = self.qpl_rows(src)[inv, q[far]]
        return out.reshape(shape)

    def dense_costs(self) -> np.ndarray:
        out = dijkstra(self.squared, directed=False)
        u, v = np.divmod(self.keys, self.n)
        out[u, v] = self.key_costs
        return out

    def describe(self) -> str:
        return f"link graph of {self.n} PEs and {len(self.keys) // 2} links"


@dataclass(frozen=True, eq=False)
class _MatrixLinks:
    """Complete graph: every pair directly linked at ``matrix[p, q]``."""

    matrix: np.ndarray

    @property
    def n(self) -> int:
        return int(self.matrix.shape[0])

    def pair_cost(self, p: np.ndarray, q: np.ndarray) -> np.ndarray:
        return self.matrix[p, q]

    def dense_costs(self) -> np.ndarray:
        return self.matrix.copy()

    def describe(self) -> str:
        return f"complete graph of {self.n} PEs (explicit e* matrix)"


_Links = _TreeLinks | _GraphLinks | _MatrixLinks


# -- the architecture ---------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class Architecture:
    """Moulitsas & Karypis' architecture graph A = (P, L): PE speeds and link costs.

    ``speeds[p]`` is PE p's relative speed (> 0); the paper's processing cost per unit of
    computation is ``w*(p) = 1 / speeds[p]`` (:attr:`cost_per_work`).  The link model is
    private; :meth:`pair_cost` answers e* for any PE pairs.  Build with
    :func:`architecture_from_hierarchy`, :func:`architecture_from_links`,
    :func:`architecture_from_matrix` or a Fig. 2 generator.
    """

    speeds: np.ndarray
    _links: _Links = field(repr=False)
    name: str = "architecture"

    def __post_init__(self) -> None:
        s = np.array(self.speeds, dtype=np.float64)  # a copy: callers keep theirs
        n = self._links.n
        if s.ndim != 1 or len(s) != n:
            raise MachineError(f"speeds: expected {n} values (one per PE), got shape {s.shape}")
        if not np.all(np.isfinite(s)) or (len(s) and s.min() <= 0):
            raise MachineError("speeds: every PE speed must be a positive finite number")
        s.setflags(write=False)
        object.__setattr__(self, "speeds", s)

    @property
    def P(self) -> int:  # noqa: N802 - the paper's name
        """Number of PEs."""
        return int(len(self.speeds))

    @property
    def cost_per_work(self) -> np.ndarray:
        """w*(p) = 1 / speed(p): the processing cost per unit of computation."""
        return 1.0 / self.speeds

    def pair_cost(self, p, q) -> np.ndarray:
        """e*(p, q) for arrays of PE pairs (broadcast), float64.

        0 where p == q; the link cost for directly linked pairs; the QPL (sum of the
        squared link costs along the cheapest path) otherwise.  Tree: O(k) per pair;
        link graph: O(1) per pair plus one Dijkstra per source PE not asked before;
        matrix: O(1) per pair.
        """
        p, q = _as_pe_array(p), _as_pe_array(q)
        _check_pes(p, self.P, "pair_cost")
        _check_pes(q, self.P, "pair_cost")
        return np.asarray(self._links.pair_cost(p, q), dtype=np.float64)

    def dense_costs(self) -> np.ndarray:
        """The P x P matrix of e*, for the dense (non-sparse) variants only.

        O(P²) memory always; time O(P² k) for a tree, O(P (L + P log P)) for a link graph
        (Dijkstra from every PE).
        """
        return self._links.dense_costs()

    def describe(self) -> str:
        """One line: the name, the link model and the speed range."""
        s = self.speeds
        return (f"{self.name}: {self.P} PEs, {self._links.describe()}, speeds "
                f"{s.min():g}..{s.max():g}")


def _speeds(speeds, n: int) -> np.ndarray:
    return np.ones(n) if speeds is None else np.asarray(speeds, dtype=np.float64)


def _costs(values, what: str, *, positive: bool) -> np.ndarray:
    c = np.asarray(values, dtype=np.float64)
    bad = ~np.isfinite(c) | ((c <= 0) if positive else (c < 0))
    if bad.any():
        kind = "positive" if positive else "non-negative"
        raise MachineError(f"{what}: costs must be {kind} finite numbers, got "
                           f"{c[bad][0]!r}")
    return c


def architecture_from_hierarchy(hierarchy: Hierarchy, link_costs: Sequence[float],
                                speeds=None, uplink_costs=None, *,
                                node_level: int | None = None,
                                name: str = "tree") -> Architecture:
    """Tree link model over ``hierarchy`` (module docstring; Moulitsas & Karypis §2.2).

    ``link_costs[i]`` (one per level, innermost first): for ``i <= node_level`` the
    direct e* of two PEs whose smallest common group is at level i; for
    ``i > node_level`` the cost of a link entering a level-i group (switch).
    ``node_level`` defaults to the level named ``"node"`` (what
    :func:`slurm_plugin.machine.layout.build_layout` makes); a hierarchy without one has every
    pair directly linked (``node_level`` = the root), where e* equals the Hierarchy's
    own distances when ``link_costs`` are those distances.

    ``uplink_costs`` (optional): a sequence of one entry per level; entry i, for
    ``node_level <= i < levels - 1``, is None (the level's cost ``link_costs[i + 1]``
    for every group) or one cost per level-i group: the cost of the link by which that
    group reaches its parent.  Per-switch costs from LinkSpeed come in this form
    (:func:`slurm_plugin.machine.speeds.layout_uplink_costs`); a group that only pads an uneven
    tree has cost 0.  Entries for other levels must be None.

    Complexity: O(P k) time and memory to build (k levels); :meth:`Architecture.pair_cost`
    O(k) per pair.
    """
    k = hierarchy.levels
    costs = _costs(link_costs, "link_costs", positive=False)
    if costs.shape != (k,):
        raise MachineError(f"link_costs: the hierarchy has {k} levels, got {costs.size} costs")
    if node_level is None:
        names = hierarchy.level_names
        node_level = names.index("node") if "node" in names else k - 1
    if not 0 <= node_level < k:
        raise MachineError(f"node_level: must be in 0..{k - 1}, got {node_level}")
    if uplink_costs is not None and len(uplink_costs) != k:
        raise MachineError(f"uplink_costs: expected {k} entries (one per level), got "
                           f"{len(uplink_costs)}")
    gid = hierarchy.group_ids
    up_sq = np.zeros((hierarchy.n, k), dtype=np.float64)
    running = np.zeros(hierarchy.n, dtype=np.float64)
    for i in range(k - 1):
        given = None if uplink_costs is None else uplink_costs[i]
        if i < node_level:
            if given is not None:
                raise MachineError(f"uplink_costs[{i}]: level {i} is inside a node "
                                   f"(directly linked); give None")
            continue
        if given is None:
            per_pe = np.full(hierarchy.n, costs[i + 1])
        else:
            g = _costs(given, f"uplink_costs[{i}]", positive=False)
            groups = len(hierarchy.bounds[i]) - 1
            if g.shape != (groups,):
                raise MachineError(f"uplink_costs[{i}]: level {i} has {groups} groups, got "
                                   f"{g.size} costs")
            per_pe = g[gid[:, i]]
        running = running + per_pe * per_pe
        up_sq[:, i + 1] = running
    if uplink_costs is not None and uplink_costs[k - 1] is not None:
        raise MachineError(f"uplink_costs[{k - 1}]: the root has no uplink; give None")
    links = _TreeLinks(hierarchy, costs, node_level, up_sq)
    return Architecture(_speeds(speeds, hierarchy.n), links, name)


def architecture_from_links(n: int, u, v, cost, speeds=None, *,
                            name: str = "links") -> Architecture:
    """Explicit architecture graph on PEs 0..n-1: link i joins ``u[i]`` and ``v[i]`` at
    ``cost[i]`` (> 0; each pair at most once, no self links; the graph must be connected).

    Directly linked pairs cost their link; others the QPL, computed on demand by
    :func:`scipy.sparse.csgraph.dijkstra` on the squared costs and cached per source.
    Complexity: O(L log L) to build for L links; first query from a source
    O(L + P log P), then O(log L) per pair (the direct-link lookup).
    """
    n = int(n)
    if n < 1:
        raise MachineError(f"architecture graph needs at least one PE, got {n}")
    u, v = _as_pe_array(u).ravel(), _as_pe_array(v).ravel()
    c = _costs(np.ravel(cost), "links", positive=True)
    if not len(u) == len(v) == len(c):
        raise MachineError(f"links: {len(u)} sources, {len(v)} targets, {len(c)} costs")
    _check_pes(u, n, "links")
    _check_pes(v, n, "links")
    if np.any(u == v):
        i = int(np.flatnonzero(u == v)[0])
        raise MachineError(f"links: link {i} joins PE {int(u[i])} to itself")
    lo, hi = np.minimum(u, v), np.maximum(u, v)
    pair_keys = lo * n + hi
    uniq, counts = np.unique(pair_keys, return_counts=True)
    if np.any(counts > 1):
        a, b = divmod(int(uniq[counts > 1][0]), n)
        raise MachineError(f"links: PEs {a} and {b} are linked more than once")
    keys = np.concatenate([u * n + v, v * n + u])
    order = np.argsort(keys)
    keys, key_costs = keys[order], np.concatenate([c, c])[order]
    squared = sp.csr_matrix((np.concatenate([c, c]) ** 2,
                             (np.concatenate([u, v]), np.concatenate([v, u]))), shape=(n, n))
    if n > 1:
        ncomp, _ = connected_components(squared, directed=False)
        if ncomp > 1:
            raise MachineError(f"links: the architecture graph has {ncomp} disconnected "
                               f"parts; QPL needs a path between every two PEs")
    links = _GraphLinks(n, keys, key_costs, squared)
    return Architecture(_speeds(speeds, n), links, name)


def architecture_from_matrix(matrix, speeds=None, *, name: str = "matrix") -> Architecture:
    """Complete architecture graph: ``e*(p, q) = matrix[p, q]`` (symmetric, finite,
    non-negative, zero diagonal), e.g. a :class:`mapper.model.machine.DistanceMatrix`'s
    matrix.  O(P²) memory."""
    m = np.array(matrix, dtype=np.float64)
    if m.ndim != 2 or m.shape[0] != m.shape[1] or m.shape[0] < 1:
        raise MachineError(f"e* matrix must be square and non-empty, got shape {m.shape}")
    _costs(m, "e* matrix", positive=False)
    if not np.array_equal(m, m.T):
        raise MachineError("e* matrix must be symmetric")
    if np.any(np.diag(m) != 0):
        raise MachineError("e* matrix must have a zero diagonal")
    m.setflags(write=False)
    return Architecture(_speeds(speeds, m.shape[0]), _MatrixLinks(m), name)


# -- the paper's Fig. 2 machines (32 PEs) ---------------------------------------------------

def _grid_links(rows: int, cols: int, offset: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Links of a rows x cols 2D array, PE = offset + r * cols + c (row-major)."""
    pe = offset + np.arange(rows * cols).reshape(rows, cols)
    u = np.concatenate([pe[:, :-1].ravel(), pe[:-1, :].ravel()])
    v = np.concatenate([pe[:, 1:].ravel(), pe[1:, :].ravel()])
    return u, v


def fig2_1d_array(speeds=None, cost: float = 1.0) -> Architecture:
    """Arch32_1 of Moulitsas & Karypis Fig. 2(a): a 1D array of 32 PEs.

    PE i is linked to PE i+1 at ``cost`` (1); so e*(i, j) = |i - j| · cost² for
    |i - j| > 1 (QPL).  doi:10.1007/978-3-540-69501-1_6.
    """
    u = np.arange(31)
    return architecture_from_links(32, u, u + 1, np.full(31, cost), speeds, name="Arch32_1")


def fig2_2d_array(speeds=None, cost: float = 1.0) -> Architecture:
    """Arch32_2 of Moulitsas & Karypis Fig. 2(b): a 4 x 8 2D array (mesh, no wrap-around).

    PE = row · 8 + column; each PE is linked to its row and column neighbours at ``cost``
    (1), 52 links; e* of unlinked PEs = Manhattan distance · cost².
    doi:10.1007/978-3-540-69501-1_6.
    """
    u, v = _grid_links(4, 8)
    return architecture_from_links(32, u, v, np.full(len(u), cost), speeds,
                                   name="Arch32_2")


def fig2_cluster(speeds=None, intra: float = 1.0, inter: float = 10.0) -> Architecture:
    """Arch32_3 of Moulitsas & Karypis Fig. 2(c): 8 compute nodes of 4 PEs.

    Node j holds PEs 4j..4j+3.  Every two PEs of one node are directly linked at
    ``intra`` (1: "a fast interconnection network among its 4 processors"); the nodes are
    all directly linked to each other, so every two PEs of different nodes cost
    ``inter`` (10: "communication between different nodes is slower").  A two-level
    tree (4:8) with both levels direct.  doi:10.1007/978-3-540-69501-1_6.
    """
    h = Hierarchy.homogeneous([4, 8], [intra, inter], ("node", "cluster"))
    return architecture_from_hierarchy(h, [intra, inter], speeds, node_level=1,
                                       name="Arch32_3")


#: The link joining the two halves of :func:`fig2_metacomputer`.
METACOMPUTER_LINK = (12, 16)


def fig2_metacomputer(speeds=None, local: float = 1.0, remote: float = 10.0) -> Architecture:
    """Arch32_4 of Moulitsas & Karypis Fig. 2(d): a metacomputer of two 16-PE sites.

    Each site is a 4 x 4 2D array with links of cost ``local`` (1): PEs 0..15 (PE =
    row · 4 + column) and 16..31 (PE = 16 + row · 4 + column).  One slow link of cost
    ``remote`` (10) joins PE 12 (last row, first column of the first site) to PE 16 (first
    row, first column of the second) — :data:`METACOMPUTER_LINK`.  So e*(12, 16) = 10 and,
    for instance, e*(0, 16) = 3 · 1² + 10² = 103.  doi:10.1007/978-3-540-69501-1_6.
    """
    u0, v0 = _grid_links(4, 4)
    u1, v1 = _grid_links(4, 4, 16)
    a, b = METACOMPUTER_LINK
    u = np.concatenate([u0, u1, [a]])
    v = np.concatenate([v0, v1, [b]])
    c = np.concatenate([np.full(len(u0) + len(u1), local), [remote]])
    return architecture_from_links(32, u, v, c, speeds, name="Arch32_4")


#: The Fig. 2 machines by the paper's names.
FIG2_MACHINES: dict[str, Callable[..., Architecture]] = {
    "Arch32_1": fig2_1d_array, "Arch32_2": fig2_2d_array,
    "Arch32_3": fig2_cluster, "Arch32_4": fig2_metacomputer,
}
