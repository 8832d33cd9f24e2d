"""Ties toward what every launcher can launch (issue 49 item 6), run by hand: how often
the solver's winner interleaves hosts, how often the host-contiguity tie-break
(:func:`mapper.solve.never_worse.host_contiguous_tie`) turns it into a placement with
every host's ranks in one block, and what that costs in J (nothing: only exact ties
move, so the ratio must be exactly 1.0).

Each case is solved twice with the same seed and no time limit (deterministic): with
the tie-break disabled (no host level known, which switches off the preference and the
whole-host candidates) and as shipped.  Graphs from
:func:`slurm_plugin.profiles.generators.generate` plus a random graph; machines of 2-5
nodes with odd sizes; baselines Slurm's block:cyclic (its default), block:block and
cyclic:cyclic (interleaved), with the nodes' host links and the switches' uplinks as
congestion levels (without a baseline there are no links to compare and no tie-break).
Prints one row per graph family and per baseline and a total; exits 1 if any J, or any
placement other than by the tie-break, changed.

    .venv/bin/python bench/bench_contiguous_ties.py      # about 20 s
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass
from unittest import mock

import numpy as np
import scipy.sparse as sp

from mapper import CommGraph, Hierarchy, map_processes
from mapper.model.machine import host_contiguous
from mapper.solve import never_worse
from mapper.solve.candidates import HOSTS_BLOCK, HOSTS_ROTATED
from mapper.solve.link_model import LinkModel
from slurm_plugin.profiles.generators import generate

#: (cores per socket, sockets per node, nodes[, nodes per leaf switch]) innermost first
SHAPES = ((4, 3), (5, 3), (7, 3), (3, 4), (5, 4), (6, 5), (3, 2, 3), (2, 3, 3), (4, 2, 3),
          (3, 3, 4), (2, 2, 5), (3, 1, 5), (6, 2, 5), (2, 2, 4), (4, 2, 4), (8, 2, 2),
          (2, 3, 2, 2), (3, 2, 2, 2), (4, 2, 2, 2))
SPECS = ("ring", "stencil2d", "stencil2d:periodic", "stencil3d", "stencil3d:periodic",
         "recursive-doubling", "npb-cg", "random")
NAMES = {2: ("node", "root"), 3: ("socket", "node", "root"),
         4: ("socket", "node", "leaf switch", "root")}


def machine(fan: tuple[int, ...]) -> Hierarchy:
    return Hierarchy.homogeneous(fan, [1, 10, 100, 1000][:len(fan)], NAMES[len(fan)])


def placement(h: Hierarchy, nodes: str, sockets: str = "cyclic") -> np.ndarray:
    """Slurm's ``nodes:sockets``: ranks dealt to nodes in blocks or round-robin, then in
    blocks or round-robin over a node's sockets (2-level machines: no sockets)."""
    node_lv = h.level_names.index("node")
    per_node = [np.arange(a, b) for a, b in zip(h.bounds[node_lv][:-1], h.bounds[node_lv][1:],
                                                strict=True)]
    if node_lv and sockets == "cyclic":
        per_node = [pes[np.lexsort((h.group_ids[pes, node_lv - 1],
                                    _position_in_group(h.group_ids[pes, node_lv - 1])))]
                    for pes in per_node]
    if nodes == "block":
        return np.concatenate(per_node)
    order = np.concatenate([np.arange(len(p)) for p in per_node])
    node = np.concatenate([np.full(len(p), k) for k, p in enumerate(per_node)])
    rank_of_slot = np.lexsort((node, order))  # round-robin over the nodes
    return np.concatenate(per_node)[rank_of_slot]


def _position_in_group(group: np.ndarray) -> np.ndarray:
    out = np.zeros(len(group), dtype=np.int64)
    for g in np.unique(group):
        sel = np.flatnonzero(group == g)
        out[sel] = np.arange(len(sel))
    return out


def graph_for(spec: str, n: int) -> CommGraph:
    if spec != "random":
        return generate(spec, n)
    a = sp.random(n, n, density=0.2, random_state=n, format="csr") * 10
    a = a + a.T
    a.setdiag(0)
    a.eliminate_zeros()
    return CommGraph.from_matrix(a)


@contextmanager
def no_tie_break():
    """The solver as before the tie-break: no host level, so no preference and no
    whole-host candidates."""
    with mock.patch.object(never_worse, "host_level", lambda machine, levels: None):
        yield


def solve(graph: CommGraph, h: Hierarchy, baseline: np.ndarray):
    node_lv = h.level_names.index("node")
    links = LinkModel(congestion_levels=tuple(range(node_lv, h.levels - 1)))
    return map_processes(graph, h, "topdown+n10", seed=0, baseline=baseline, links=links)


@dataclass
class Tally:
    cases: int = 0
    interleaved: int = 0  # the winner without the tie-break interleaves hosts
    made_whole: int = 0  # ... and with it keeps every host's ranks in one block
    other_changes: int = 0  # a placement changed otherwise (must stay 0)
    j_changed: int = 0  # J differs at all (must stay 0)
    max_ratio: float = 1.0  # J after / before over the tie-broken cases

    def add(self, other: Tally) -> None:
        for name in ("cases", "interleaved", "made_whole", "other_changes", "j_changed"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.max_ratio = max(self.max_ratio, other.max_ratio)

    def row(self, label: str) -> str:
        return (f"| {label} | {self.cases} | {self.interleaved} | {self.made_whole} | "
                f"{self.other_changes} | {self.max_ratio:.15g} | {self.j_changed} |")


def main() -> int:
    by_graph: dict[str, Tally] = defaultdict(Tally)
    by_base: dict[str, Tally] = defaultdict(Tally)
    won_by: dict[str, int] = defaultdict(int)
    started = time.perf_counter()
    for fan in SHAPES:
        h = machine(fan)
        lv = h.level_names.index("node")
        bases = {"block:cyclic": placement(h, "block"),
                 "block:block": placement(h, "block", "block"),
                 "cyclic:cyclic": placement(h, "cyclic")}
        for spec in SPECS:
            try:
                graph = graph_for(spec, h.n)
            except ValueError:  # a generator that does not fit this size (npb-cg: 2^k)
                continue
            for base_name, base in bases.items():
                with no_tie_break():
                    before = solve(graph, h, base)
                after = solve(graph, h, base)
                t = Tally(cases=1, j_changed=int(after.objective != before.objective))
                t.interleaved = int(not host_contiguous(h, before.mapping, lv))
                t.made_whole = int(bool(t.interleaved) and host_contiguous(h, after.mapping, lv))
                t.other_changes = int(not t.made_whole
                                      and not np.array_equal(before.mapping, after.mapping))
                if t.made_whole:
                    t.max_ratio = after.objective / before.objective
                    won_by[next((name for name in (HOSTS_ROTATED, HOSTS_BLOCK)
                                 if any(n.startswith(name) for n in after.notes)),
                                f"an existing candidate ({after.origin})")] += 1
                by_graph[spec].add(t)
                by_base[base_name].add(t)
    print("| graph / baseline | cases | winner interleaved | made contiguous by the tie | "
          "other changes | max J after/before (tie-broken) | J changed |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    total = Tally()
    for spec, t in by_graph.items():
        print(t.row(f"`{spec}`"))
        total.add(t)
    for name, t in by_base.items():
        print(t.row(f"baseline {name}"))
    print(total.row("**total**"))
    print("\ntie-broken to: " + ", ".join(f"{k} {v}" for k, v in sorted(won_by.items())))
    print(f"{len(SHAPES)} machines x {len(SPECS)} graphs x 3 baselines, "
          f"{time.perf_counter() - started:.1f} s")
    return 1 if total.j_changed or total.other_changes else 0


if __name__ == "__main__":
    sys.exit(main())
