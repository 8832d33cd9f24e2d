"""Presets ``fast``, ``eco`` and ``strong``: named recipes that trade time for quality.

A preset is a pipeline over the library's own algorithms, run inside the caller's time
limit and keeping the best bijection found:

* ``fast`` — one Top-Down construction + N_C^10 (``topdown+n10``; on a hop-matrix
  machine ``ohtma+n10``).  Today's default.
* ``eco`` — the same pipeline, but every Top-Down split keeps the lowest cut of
  ``ECO_PARTITION_TRIES`` METIS runs with different seeds (the top levels are where
  Top-Down loses; ``bench/bench_partitions.py``: KaHIP's KaFFPa inside Top-Down was
  worse than this at every setting).
* ``strong`` — the best of ``STRONG_STARTS`` starts (seeds), each split keeping the best
  of ``STRONG_PARTITION_TRIES`` METIS runs, then the moves beyond 2-swaps of
  :mod:`mapper.search.cycles` (3-cycles along the communication graph and ejection
  chains, O(d) gains), then iterated local search
  (Lourenço, Martin & Stützle, "Iterated Local Search", Handbook of Metaheuristics,
  2003, doi:10.1007/0-306-48056-5_11): perturb the best mapping by exchanging the
  ranks of a random connected patch of the communication graph among their PEs, run
  N_C^10 from there, and keep the result when J fell; up to ``STRONG_ROUNDS`` rounds,
  stopping early after ``STRONG_PATIENCE`` rounds without improvement or after
  ``ILS_TIME_SHARE`` of the time used before it.

On a dense profile (mean degree above :data:`mapper.dense.PARTITION_DEGREE`) the
moves beyond 2-swaps are skipped (their O(n d^4) passes could not stop in time).
Every stage checks the clock: without a time limit the counts above bound the work;
with one, the preset returns its best so far when the limit is near (the caller keeps
a reserve for the final evaluation of J).  Complexity: ``starts`` × (``partition_tries``
× Top-Down's partitions + N_C^10) + the cycle passes + rounds × one N_C^10 pass (see
:mod:`mapper.construction.topdown`, :mod:`mapper.search.cycles` and
:mod:`mapper.search.communication`).

References
----------
* Schulz, Träff & von Kirchbach, Better Process Mapping and Sparse Quadratic
  Assignment, arXiv:1702.04164v2 (Top-Down, N_C^d); full entry in :mod:`mapper`.
* Lourenço, Martin & Stützle (2003), above, for the perturbation + local search loop.
"""

from __future__ import annotations

from dataclasses import dataclass

from .names import PRESETS

ECO_STARTS = 1
ECO_PARTITION_TRIES = 3
STRONG_STARTS = 2
STRONG_PARTITION_TRIES = 5
STRONG_ROUNDS = 60
STRONG_PATIENCE = 20
#: the iterated local search may take this share of the time the preset has used so far
#: (so strong stays within a small multiple of its starts; the time limit caps it too)
ILS_TIME_SHARE = 0.5
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

    def runs(self) -> list[tuple[int, int]]:
        """(seed offset, METIS runs per split) of every start: the starts of every
        preset up to this one in the table, so ``strong`` is never worse than ``eco`` and
        ``eco`` never worse than ``fast`` on the same seed (the later stages only accept
        improvements); the cheaper presets' starts cost a fraction of its own."""
        out: list[tuple[int, int]] = []
        for recipe in _TABLE.values():
            out += [run for run in recipe.own_runs() if run not in out]
            if recipe.name == self.name:
                return out
        raise KeyError(self.name)

    def own_runs(self) -> list[tuple[int, int]]:
        return [(i, self.partition_tries) for i in range(self.starts)]

    def algorithm_for(self, tree: bool) -> str:
        """The base algorithm on a switch tree (``tree``) or a hop-matrix machine."""
        return self.tree_algorithm if tree else self.network_algorithm

    def describe(self, tree: bool) -> str:
        base = self.algorithm_for(tree)
        parts = [base if self.starts == 1 else f"best of {self.starts} starts of {base}"]
        if self.partition_tries > 1:
            parts[0] += f" (best of {self.partition_tries} METIS runs per split)"
        if self.cycles:
            parts.append("then 3-cycles and ejection chains")
        if self.rounds:
            parts.append(f"then up to {self.rounds} rounds of perturbation + N_C^10 "
                         f"(iterated local search)")
        return f"preset {self.name}: " + ", ".join(parts)


_TABLE = {
    "fast": Preset("fast", "topdown+n10", "ohtma+n10", 1, 0),
    "eco": Preset("eco", "topdown+n10", "ohtma+n10", ECO_STARTS, 0,
                  partition_tries=ECO_PARTITION_TRIES),
    "strong": Preset("strong", "topdown+n10", "ohtma+n10", STRONG_STARTS, STRONG_ROUNDS,
                     cycles=True, partition_tries=STRONG_PARTITION_TRIES),
}
assert tuple(_TABLE) == PRESETS


def preset(name: str) -> Preset:
    """The preset called ``name`` (any case); KeyError for other names."""
    return _TABLE[name.strip().lower()]
