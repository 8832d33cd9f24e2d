"""Presets ``fast``, ``eco`` and ``strong``: named recipes that trade time for quality.

A preset is a pipeline over the library's own algorithms, run inside the caller's time
limit and keeping the best bijection found:

* ``fast`` — one Top-Down construction + N_C^10 (``topdown+n10``; on a hop-matrix
  machine ``ohtma+n10``), Top-Down's splits not swap-refined: the N_C^10 search after
  it makes those swaps, with the machine's distances (J geomean 0.9997x on the 21
  instances below, max 1.0022x; at 2^20 ranks J 0.1 % lower and 1.9 s less
  construction).  The default.
* ``eco`` — the same pipeline, but every Top-Down split keeps the lowest cut of
  ``ECO_PARTITION_TRIES`` METIS runs with different seeds (the top levels are where
  Top-Down loses; ``bench/bench_partitions.py``: KaHIP's KaFFPa inside Top-Down was
  worse than this at every setting).
* ``strong`` — ``eco``'s starts, then a short pass of the moves beyond 2-swaps of
  :mod:`mapper.search.cycles` (3-cycles along the communication graph and ejection
  chains, O(d) gains; bounded by ``STRONG_CYCLE_WORK`` × (n + m) work units), then
  iterated local search
  (Lourenço, Martin & Stützle, "Iterated Local Search", Handbook of Metaheuristics,
  2003, doi:10.1007/0-306-48056-5_11; :mod:`mapper.search.iterated`): perturb the best
  mapping by exchanging the ranks of a random connected patch of the communication
  graph among their PEs, repair with N_C^10 from the patch and its neighbours only
  (localized: a round costs what the patch touches, not a pass over every rank), and
  keep the result when J fell; up to ``STRONG_ROUNDS`` rounds, stopping early after
  ``STRONG_PATIENCE`` rounds in a row without improvement or when its work bound
  (:data:`mapper.search.iterated.WORK_PER_ELEMENT` × (n + m) units, about ``eco``'s
  own time) is spent.  The bounds count work, not seconds, so the result is the same
  for a seed on any machine and load; ``ILS_TIME_SHARE`` of the time used before it
  is only a safety cap.

Measured (``python3 bench/bench_presets.py``, 21 instances, 2026-11-25, every tool in
the same run on a loaded 2-core machine): ``strong``'s geomean J is 0.974 × the
per-instance best of SharedMap fast/eco/strong and Scotch, in 0.74 × SharedMap eco's
geomean time (issue 12's target: ≤ 0.98 at ≤ 1.0); ``eco`` 0.978 at 0.35, ``fast``
0.986 at 0.10.  The previous ``strong`` (2 more starts × 5 METIS runs per split,
unbounded 3-cycles and ejection chains, then 60 rounds each running a full N_C^10
search, for at most half the time used before it) reached 0.972 in 2.32 × SharedMap
eco's time (README of 2026-11-23).  What each addition after ``eco``'s starts bought
(J relative to ``eco``'s, time in units of ``eco``'s): one more start (seed 1, 3 METIS
runs per split) −0.11 % for +0.9; 3-cycles and chains bounded to 1500 work units per
element −0.12 % for +0.4; the localized iterated local search −0.46 % for +0.9 to
+1.1.  ``strong`` runs the last two (the cycles short, at 1000 units): 0.9738 × best
peer at 0.74 × SharedMap eco's time, against 0.9737 at 0.65 without the cycles — the
moves beyond 2-swaps cost little and are where a local optimum of the swaps is left.

Every stage checks the clock: with a time limit the preset returns its best so far
when the limit is near (the caller keeps a reserve for the final evaluation of J).
Complexity: the starts' (``partition_tries`` × Top-Down's partitions + N_C^10 each,
see :mod:`mapper.construction.topdown` and :mod:`mapper.search.communication`), plus,
for ``strong``, at most W_c (1 + STEP_OVERRUN) + 2m + 6 d_max work units of 3-cycles
and chains (W_c = ``STRONG_CYCLE_WORK`` × (n + m); the N_C^10 searches between their
rounds are not counted) and at most W (1 + STEP_OVERRUN) + n + 2m + d_max (1 + k d_max)
for the iterated local search (W = WORK_PER_ELEMENT × (n + m), k levels): O(W + m +
k d_max²) whatever the degrees, because a round, or a hub's 3-cycle candidates, that
would run past the bound is cut at (1 + STEP_OVERRUN) times it
(:mod:`mapper.search.iterated`, :mod:`mapper.search.cycles`): without that cut one
round on a graph with hubs was a whole N_C^10 search, checked against the bound only
when it ended (bench_presets' Barabási–Albert graph: ``bench/README.md``).

References
----------
* Schulz, Träff & von Kirchbach, Better Process Mapping and Sparse Quadratic
  Assignment, arXiv:1702.04164v2 (Top-Down, N_C^d); full entry in :mod:`mapper`.
* Lourenço, Martin & Stützle (2003), above, for the perturbation + local search loop.
"""

from __future__ import annotations

from dataclasses import dataclass

from .algorithm_names import NETWORK_DEFAULT, PRESETS

ECO_STARTS = 1
ECO_PARTITION_TRIES = 3
STRONG_STARTS = ECO_STARTS
STRONG_PARTITION_TRIES = ECO_PARTITION_TRIES
#: localized rounds are cheap (under a millisecond on 1024 ranks); the work bound of
#: mapper.search.iterated normally stops the search first
STRONG_ROUNDS = 5000
#: rounds in a row without improvement before giving up (stencils and tori, whose
#: optimum the starts find, stop after these rounds instead of spending the bound)
STRONG_PATIENCE = 150
#: a safety cap only: the iterated local search may take this share of the time the
#: preset has used so far (its work bound normally stops it near 1x; a cap that binds
#: makes the result depend on the machine's load)
ILS_TIME_SHARE = 2.0
#: work units per element for strong's 3-cycles and ejection chains before its
#: iterated local search: a short pass (about 0.3 x eco's time), so that the preset
#: uses moves beyond the pairwise swap at little cost (issue 12 item 4)
STRONG_CYCLE_WORK = 1000.0
#: ranks exchanged by one perturbation: this share of n, at least PATCH_MIN
PATCH_SHARE = 0.02
PATCH_MIN = 4
PATCH_MAX = 256


@dataclass(frozen=True)
class Preset:
    """One preset: what it runs (``describe`` gives the sentence the report shows)."""

    name: str
    tree_algorithm: str
    network_algorithm: str
    starts: int
    rounds: int
    cycles: bool = False
    #: METIS runs per Top-Down/Bottom-Up split, lowest cut kept
    partition_tries: int = 1
    #: work bound of the 3-cycle and ejection-chain passes, in units per element of
    #: the graph (mapper.search.cycles)
    cycle_work: float = 0.0
    #: swap-refine every split's blocks (mapper.partitioners.exact_sizes.refine_cut); without it the
    #: N_C^10 search after Top-Down does that work (see ``fast`` in the module docstring)
    refine_splits: bool = True

    def runs(self) -> list[tuple[int, int, bool]]:
        """(seed offset, METIS runs per split, refine the splits) of every start: the
        starts of every preset up to this one in the table, so ``strong`` is never worse
        than ``eco`` and ``eco`` never worse than ``fast`` on the same seed (the later
        stages only accept improvements); the cheaper presets' starts cost a fraction of
        its own."""
        out: list[tuple[int, int, bool]] = []
        for recipe in _TABLE.values():
            out += [run for run in recipe.own_runs() if run not in out]
            if recipe.name == self.name:
                return out
        raise KeyError(self.name)

    def own_runs(self) -> list[tuple[int, int, bool]]:
        return [(i, self.partition_tries, self.refine_splits) for i in range(self.starts)]

    def algorithm_for(self, tree: bool) -> str:
        """The base algorithm on a switch tree (``tree``) or a hop-matrix machine."""
        return self.tree_algorithm if tree else self.network_algorithm

    def describe(self, tree: bool) -> str:
        base = self.algorithm_for(tree)
        parts = [base if self.starts == 1 else f"best of {self.starts} starts of {base}"]
        if self.partition_tries > 1:
            parts[0] += f" (best of {self.partition_tries} METIS runs per split)"
        if not self.refine_splits and tree:
            parts[0] += " (splits not swap-refined: N_C^10 follows)"
        if self.cycles:
            parts.append("then 3-cycles and ejection chains")
        if self.rounds:
            parts.append(f"then up to {self.rounds} rounds of perturbation + localized N_C^10 "
                         f"(iterated local search)")
        return f"preset {self.name}: " + ", ".join(parts)


_TABLE = {
    "fast": Preset("fast", "topdown+n10", NETWORK_DEFAULT, 1, 0, refine_splits=False),
    "eco": Preset("eco", "topdown+n10", NETWORK_DEFAULT, ECO_STARTS, 0,
                  partition_tries=ECO_PARTITION_TRIES),
    "strong": Preset("strong", "topdown+n10", NETWORK_DEFAULT, STRONG_STARTS, STRONG_ROUNDS,
                     cycles=True, partition_tries=STRONG_PARTITION_TRIES,
                     cycle_work=STRONG_CYCLE_WORK),
}
assert tuple(_TABLE) == PRESETS


def preset(name: str) -> Preset:
    """The preset called ``name`` (any case); KeyError for other names."""
    return _TABLE[name.strip().lower()]
