#!/usr/bin/env python3
"""Benchmark: which balanced partitioner inside Top-Down (issue 12, "better partitions").

Run by hand (not a test), about 5-8 minutes on the shared 2-core machine:

    nice -n 5 .venv/bin/python bench/bench_partitions.py            # 2^15 quotients
    nice -n 5 .venv/bin/python bench/bench_partitions.py --perfect  # + KaFFPa ε = 0, top level
    nice -n 5 .venv/bin/python bench/bench_partitions.py --mesh     # RMS quotient vs identity

Partitioners compared inside the same Top-Down loop (Schulz, Träff & von Kirchbach
§3.1; :mod:`mapper.construction.topdown`), each followed by N_C^10 exactly as
``map_processes(..., "topdown+n10")`` does:

* ``metis``      — today: pymetis recursive bisection + size repair + swap refinement
  (:func:`mapper.partitioners.metis.balanced_partition`);
* ``metis-best3`` / ``metis-best5`` — the same with seeds s, s+1, … (3 or 5 of them) at
  every split, the lowest cut kept;
* ``kaffpa-fast`` / ``-eco`` / ``-strong`` — KaHIP's KaFFPa with a small ε, then the same
  repair and refinement (:func:`mapper.partitioners.kahip.kahip_partition`).  Top-Down with
  KaFFPa at every level is SharedMap's hierarchical multisection run serially (SharedMap
  itself, PyPI chszlablib, ``process_map``, is the reference column ``SM eco``).

Per preset-like budget: "fast" is one start (seed 0), "eco" the best J over
``--starts`` seeds (the ``eco`` preset's multi-start; ``strong`` adds iterated local
search on top of the same starts, whatever the partitioner).  A last table gives the
cut of the top-level split alone (``--perfect`` adds KaFFPa eco with ε = 0 there, on
instances of at most 1024 vertices: seconds per call).

Instances are bench_mapping.py's ``--quick`` set: rgg and Delaunay 2^15 quotients with
k = 64 k', k' ∈ {2, 5, 8, 13, 16} onto 4:16:k', D = 1:10:100, plus 3D 7-point stencils
with and without wrap-around (the ``stencil3d`` generator of ``rankmap map``).
J counts each edge once.  Times are wall seconds of construction + search.
"""

from __future__ import annotations

import argparse
import inspect
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bench_mapping as bm  # noqa: E402

from mapper import CommGraph, Hierarchy, objective  # noqa: E402
from mapper.construction import topdown as td  # noqa: E402
from mapper.partitioners.exact_sizes import cut_weight  # noqa: E402
from mapper.partitioners.kahip import kahip_available, kahip_partition  # noqa: E402
from mapper.partitioners.metis import balanced_partition  # noqa: E402
from mapper.search import communication_neighborhood  # noqa: E402
from slurm_plugin.profiles.generators import generate  # noqa: E402

Partitioner = Callable[..., np.ndarray]


# -- partitioners -----------------------------------------------------------------------

def metis_best(tries: int) -> Partitioner:
    """balanced_partition with ``tries`` seeds, the lowest cut kept."""
    def part(adj, sizes, seed=0, time_limit=None):
        best, best_cut = None, math.inf
        for i in range(tries):
            p = balanced_partition(adj, sizes, seed + i, time_limit)
            c = cut_weight(adj, p)
            if c < best_cut:
                best, best_cut = p, c
        return best
    return part


def kaffpa(mode: str) -> Partitioner:
    def part(adj, sizes, seed=0, time_limit=None):
        return kahip_partition(adj, sizes, seed, time_limit, mode=mode)
    return part


def kaffpa_perfect(adj, sizes, seed=0, time_limit=None):
    """KaFFPa eco with ε = 0 (KaHIP's perfectly balanced refinement), equal sizes only,
    then the same repair (a no-op when KaFFPa is exact) and refinement."""
    import kahip

    from mapper.partitioners.exact_sizes import refine_cut, repair_sizes
    from mapper.partitioners.weights import metis_weights

    assert np.all(sizes == sizes[0])
    _, parts = kahip.kaffpa(np.ones(adj.shape[0], np.int32), adj.indptr.astype(np.int32),
                            metis_weights(adj.data).astype(np.int32),
                            adj.indices.astype(np.int32), len(sizes), 0.0, True, seed,
                            kahip.ECO)
    raw = np.asarray(parts, dtype=np.int64)
    return refine_cut(adj, repair_sizes(adj, raw, sizes), sizes, seed)


def partitioners() -> dict[str, Partitioner]:
    out: dict[str, Partitioner] = {"metis": balanced_partition, "metis-best3": metis_best(3),
                                   "metis-best5": metis_best(5)}
    if kahip_available():
        for mode in ("fast", "eco", "strong"):
            out[f"kaffpa-{mode}"] = kaffpa(mode)
    return out


# -- Top-Down with a given partitioner --------------------------------------------------

def top_down_with(graph: CommGraph, machine: Hierarchy, seed: int,
                  partitioner: Partitioner) -> np.ndarray:
    """Top-Down with ``partitioner`` at every split: the project's ``top_down`` when it
    takes ``partitioner=``, else the same loop here (no time limit)."""
    if "partitioner" in inspect.signature(td.top_down).parameters:
        return td.top_down(graph, machine, seed, None, partitioner=partitioner)
    adj = td.partition_view(graph)
    pe = np.empty(graph.n, dtype=np.int64)
    stack = [(np.arange(graph.n, dtype=np.int64), machine.levels - 1, 0)]
    while stack:
        ranks, level, group = stack.pop()
        lo, hi = machine.bounds[level][group], machine.bounds[level][group + 1]
        if level == 0 or len(ranks) == 1:
            pe[ranks] = np.arange(lo, hi)
            continue
        inner = machine.bounds[level - 1]
        first, last = int(np.searchsorted(inner, lo)), int(np.searchsorted(inner, hi))
        sizes = np.diff(inner[first:last + 1])
        if len(sizes) == 1:
            stack.append((ranks, level - 1, first))
            continue
        part = partitioner(adj[ranks][:, ranks].tocsr(), sizes, seed, None)
        order = np.argsort(part, kind="stable")
        for c, members in enumerate(np.split(ranks[order], np.cumsum(sizes)[:-1])):
            stack.append((members, level - 1, first + c))
    return pe


def run(graph: CommGraph, machine: Hierarchy, seed: int, partitioner: Partitioner):
    """(J of Top-Down, J after N_C^10, seconds of both)."""
    t = time.perf_counter()
    pe = top_down_with(graph, machine, seed, partitioner)
    j_td = objective(graph, machine, pe)
    communication_neighborhood(graph, machine, pe, 10, seed, None)
    secs = time.perf_counter() - t
    return j_td, objective(graph, machine, pe), secs


def top_cut(graph: CommGraph, machine: Hierarchy, partitioner: Partitioner):
    """Cut of the root split alone and its seconds."""
    adj = td.partition_view(graph)
    top = machine.levels - 1
    sizes = np.diff(machine.bounds[top - 1])
    t = time.perf_counter()
    part = partitioner(adj, sizes, 0, None)
    return cut_weight(adj, part), time.perf_counter() - t


# -- instances --------------------------------------------------------------------------

def instances(quick: bool):
    for name, g, hs in bm.instances(quick=True, big=False):
        if not name.startswith("stencil"):
            yield name, g, hs
    for dims, kp in (((8, 8, 8), 8), ((8, 8, 13), 13), ((16, 16, 16), 64)):
        spec = "x".join(map(str, dims))
        n = int(np.prod(dims))
        yield f"stencil {spec}", generate(f"stencil3d:{spec}", n), f"4:16:{kp}"
        yield f"stencil {spec} periodic", generate(f"stencil3d:{spec},periodic", n), \
            f"4:16:{kp}"


# -- tables -----------------------------------------------------------------------------

def geomean(xs) -> float:
    xs = [x for x in xs if x > 0 and math.isfinite(x)]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def table(title: str, rows: list[tuple[str, dict]], names: list[str], key: str,
          secs_key: str | None, base_label: str) -> list[str]:
    """One markdown table: today's absolute value, then per partitioner the ratio to it
    (and seconds), with a geomean row."""
    head = ["instance", base_label] + [f"{n} ratio" for n in names[1:]]
    if secs_key:
        head += [f"{n} s" for n in names]
    lines = [f"### {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    ratios: dict[str, list[float]] = {n: [] for n in names}
    secs: dict[str, list[float]] = {n: [] for n in names}
    for inst, res in rows:
        if names[0] not in res or key not in res[names[0]]:
            continue
        base = res[names[0]][key]
        cells = [inst, f"{base:.0f}"]
        for n in names[1:]:
            if n in res and key in res[n]:
                r = res[n][key] / base if base else 1.0
                ratios[n].append(r)
                cells.append(f"{r:.3f}")
            else:
                cells.append("n/a")
        if secs_key:
            for n in names:
                v = res.get(n, {}).get(secs_key)
                if v is not None:
                    secs[n].append(v)
                cells.append("n/a" if v is None else f"{v:.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    gm = ["geomean", ""] + [f"{geomean(ratios[n]):.3f}" for n in names[1:]]
    if secs_key:
        gm += [f"{geomean(secs[n]):.2f}" for n in names]
    lines.append("| " + " | ".join(gm) + " |")
    return lines + [""]


def mesh_rows(parts: dict[str, Partitioner], kprimes=(2, 4, 8, 13)) -> list[str]:
    """Issue-10 finding: plain Top-Down + N_C^10 on the RMS quotient graph against the
    identity (bench/mesh/fig4.py's building blocks: the meshes, RMS with ε = 3 %,
    METIS backend, the quotient graph; S = 4:16:k', D = 1:10:100)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent / "mesh"))
    import fig4
    import meshes

    from mapper.mesh import quotient_graph
    from mapper.mesh.rms import rms_partition

    found = [meshes.rgg(1 << 15, seed=0), meshes.delaunay(1 << 15, seed=0),
             meshes.shared_mesh("rgg_n_2_15_s0.graph")]  # the last: README_TABLES' worst
    head = ["mesh", "k'", "Identity RMS J"] + [f"TD+N10 {n} / Id" for n in parts]
    lines = ["### RMS quotient: Top-Down + N_C^10 (seed 0) over Identity RMS (below 1: "
             "Top-Down wins)", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    ratios: dict[str, list[float]] = {n: [] for n in parts}
    for mesh in (m for m in found if m is not None):
        for kp in kprimes:
            h = Hierarchy.homogeneous([4, 16, kp], fig4.DISTANCES)
            rms = rms_partition(mesh, h, epsilon=fig4.EPSILON, seed=0, backend="metis")
            q = quotient_graph(mesh, rms.part, h.n)
            ident = objective(q, h, np.arange(h.n))
            cells = [mesh.source, str(kp), f"{ident:.0f}"]
            for n, p in parts.items():
                _, j, _ = run(q, h, 0, p)
                ratios[n].append(j / ident)
                cells.append(f"{j / ident:.3f}")
            lines.append("| " + " | ".join(cells) + " |")
            print(lines[-1], flush=True)
    lines.append("| geomean | | | " + " | ".join(f"{geomean(r):.3f}" for r in ratios.values())
                 + " |")
    lines.append("| Top-Down wins | | | " + " | ".join(
        f"{sum(x < 1 for x in r)} of {len(r)}" for r in ratios.values()) + " |")
    return lines + [""]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--starts", type=int, default=5, help="seeds of the eco-like column")
    ap.add_argument("--perfect", action="store_true",
                    help="top-level cut of KaFFPa eco with ε = 0 too (n ≤ 1024 only)")
    ap.add_argument("--no-sharedmap", action="store_true")
    ap.add_argument("--only", default=None, help="substring of instance names to run")
    ap.add_argument("--mesh", action="store_true",
                    help="only the RMS-quotient check (Top-Down vs the identity)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "partitions.md"))
    args = ap.parse_args(argv)

    parts = partitioners()
    names = list(parts)
    if not kahip_available():
        print("KaHIP: n/a (pip install kahip); only the METIS columns run")
    sm = not args.no_sharedmap and bm.sharedmap_available() is None
    top_names = names + (["kaffpa-eco-perfect"] if args.perfect and kahip_available() else [])
    if args.mesh:
        text = "\n".join(mesh_rows(parts))
        print("\n" + text)
        return 0
    rows: list[tuple[str, dict]] = []
    for inst, g, hs in instances(True):
        if args.only and args.only not in inst:
            continue
        h = Hierarchy.parse(hs, "1:10:100")
        res: dict[str, dict] = {}
        for n, p in parts.items():
            runs = [run(g, h, s, p) for s in range(args.starts)]
            res[n] = {"td": runs[0][0], "td+n10": runs[0][1], "s": runs[0][2],
                      "eco": min(r[1] for r in runs), "eco s": sum(r[2] for r in runs)}
        for n in top_names:
            if n == "kaffpa-eco-perfect":
                if g.n > 1024:
                    continue
                p = kaffpa_perfect
            else:
                p = parts[n]
            c, s = top_cut(g, h, p)
            res.setdefault(n, {}).update({"top": c, "top s": s})
        if sm:
            j, s = bm.run_sharedmap(g, h, [int(x) for x in hs.split(":")], "eco", 0)
            res["SM eco"] = {"td+n10": j, "s": s}
        rows.append((inst, res))
        print(inst, {n: (round(r.get("td+n10", 0)), round(r.get("s", 0), 2))
                     for n, r in res.items()}, flush=True)

    out = ["Top-Down partitioners (J each edge once; ratio = partitioner / metis, below 1 "
           "is better)", ""]
    out += table("fast-like: Top-Down + N_C^10, one start (seed 0)", rows,
                 names + (["SM eco"] if sm else []), "td+n10", "s", "metis J")
    out += table("construction alone: Top-Down J (seed 0)", rows, names, "td", None, "metis J")
    out += table(f"eco-like: best of {args.starts} starts of Top-Down + N_C^10 (seconds: "
                 f"all starts)", rows, names, "eco", "eco s", "metis J")
    out += table("top-level split alone: cut", rows, top_names, "top", "top s", "metis cut")
    text = "\n".join(out)
    print("\n" + text)
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
