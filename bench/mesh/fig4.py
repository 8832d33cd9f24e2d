"""Seed 000 Fig. 4 (model creation RB vs RMS) and the SharedMap comparison (run by hand).

    .venv/bin/python bench/mesh/fig4.py [--sizes 15,16] [--generators rgg,delaunay]
        [--no-shared] [--kprimes 1,2,3,4,5,7,8,11,13,16] [--backend metis]
        [--sharedmap eco,fast] [--seed 0] [--out FILE.md]

Schulz, Träff & von Kirchbach, Better Process Mapping and Sparse Quadratic Assignment,
arXiv:1702.04164 §4-§5.2, Fig. 4.  Instances: generated random geometric graphs and
Delaunay triangulations of 2^s points (``meshes.py``, seed ``--seed``) for every s in
``--sizes``, plus shared/bench-graphs/rgg_n_2_15_s0.graph and delaunay_n15.graph when
present.  Machine S = 4:16:k', D = 1:10:100 for every k' in ``--kprimes``.

For every instance and k' the mesh is partitioned into k = 64·k' blocks by RB
(:func:`mapper.mesh.rb.rb_partition`, equal targets, ε = 3 %) and by RMS
(:func:`mapper.mesh.rms.rms_partition`), the quotient graph is built
(:func:`mapper.mesh.metrics.quotient_graph`: edge {i, j} weighs the c-volume the two
blocks exchange) and mapped with Müller-Merbach (``greedy``), Identity, TopDown and
TopDown+N10 (:func:`mapper.solve.api.map_processes`, seed 0).  J is that quotient graph's
objective, each edge once.

Prints (markdown):

1. per instance: J of Müller-Merbach on RB and the improvement in % over it of Identity
   RB, Identity RMS, TopDown RB, TopDown RMS, TopDown RMS+N10 per k' (plus TopDown
   RB+N10 and "best(Id,TD+N10) RMS" = map_processes with the identity as baseline,
   the better of the two, which is what :func:`mapper.mesh.decompose.decompose` does by
   default (``keep_identity``));
2. the same averaged over instances per k' and over everything (the paper's Fig. 4);
3. checks of the paper's trends (Identity RB collapses at odd k', Identity RMS does
   not, TopDown RMS+N10 best, TopDown RMS vs Identity RMS with the worst cases);
4. SharedMap (PyPI chszlablib, ``Decomposition.process_map`` on the mesh itself,
   hierarchy [4, 16, k'], distances [1, 10, 100], imbalance 0.03, threads 1, seed 0) vs
   the RMS decomposition: J_cut = Σ over cut mesh edges of w · D(PE(u), PE(v)) computed
   by :func:`j_cut` for both (SharedMap's ``comm_cost`` is 2·J_cut; checked), the
   ratio RMS / SharedMap per instance and on average, the largest block's imbalance,
   and seconds (ours: RMS partition + quotient + mapping; SharedMap: the call).

Time: the defaults (6 instances of 2^15-2^16 vertices × 10 machines, SharedMap eco and
fast each) took 543 s wall, 190 s CPU, on the shared 2-core machine; SharedMap eco is
about two thirds of it.  ``--sizes 15,16,17`` adds two 2^17 instances (about +8 min wall,
estimated from the 2^16 ones: 140 s rgg, 84 s Delaunay).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import meshes  # noqa: E402

from mapper.mesh import Mesh, part_weights, quotient_graph  # noqa: E402
from mapper.mesh.rb import rb_partition  # noqa: E402
from mapper.mesh.rms import rms_partition  # noqa: E402
from mapper.model.machine import Hierarchy  # noqa: E402
from mapper.objectives.qap import objective  # noqa: E402
from mapper.solve.api import map_processes  # noqa: E402

KPRIMES = (1, 2, 3, 4, 5, 7, 8, 11, 13, 16)
DISTANCES = (1, 10, 100)
EPSILON = 0.03
MM = "greedy"      # Müller-Merbach's construction in mapper.solve.algorithm_names
#: improvement columns (over Müller-Merbach on RB), the paper's five first
COLUMNS = ("Identity RB", "Identity RMS", "TopDown RB", "TopDown RMS", "TopDown RMS+N10",
           "TopDown RB+N10", "best(Id,TD+N10) RMS")


def j_cut(mesh: Mesh, pe: np.ndarray, machine: Hierarchy) -> float:
    """J of a vertex → PE assignment on the mesh itself: Σ over edges {u, v} (once) of
    w(u, v) · D(pe[u], pe[v]).  The one J both our decomposition and SharedMap get.
    O(m)."""
    u, v, w = mesh.graph.edges()
    return float((w * machine.distance(pe[u], pe[v])).sum())


def max_imbalance(mesh: Mesh, pe: np.ndarray, k: int) -> float:
    """Largest block weight over the equal target, minus 1."""
    return float(part_weights(mesh, pe, k).max() / (mesh.total_weight / k) - 1.0)


def instances(sizes, generators, shared: bool, seed: int) -> list[Mesh]:
    out = []
    for s in sizes:
        for g in generators:
            out.append(getattr(meshes, g)(2 ** s, seed=seed))
    if shared:
        for name in ("rgg_n_2_15_s0.graph", "delaunay_n15.graph"):
            m = meshes.shared_mesh(name)
            if m is not None:
                out.append(m)
    return out


def run_one(mesh: Mesh, kprime: int, backend: str, seed: int, sharedmap_modes) -> dict:
    """Every J and time of one instance on S = 4:16:k'."""
    h = Hierarchy.homogeneous([4, 16, kprime], DISTANCES)
    k = h.n
    ident = np.arange(k)
    r: dict = {"k": k}
    t0 = time.perf_counter()
    rb = rb_partition(mesh, np.ones(k), epsilon=EPSILON, seed=seed, backend=backend)
    t1 = time.perf_counter()
    rms = rms_partition(mesh, h, epsilon=EPSILON, seed=seed, backend=backend)
    t2 = time.perf_counter()
    q_rms = quotient_graph(mesh, rms.part, k)
    t3 = time.perf_counter()
    q_rb = quotient_graph(mesh, rb.part, k)
    r["sec_rb"], r["sec_rms"] = t1 - t0, t2 - t1
    r["MM RB"] = map_processes(q_rb, h, MM, seed=seed).objective
    r["Identity RB"] = objective(q_rb, h, ident)
    r["Identity RMS"] = objective(q_rms, h, ident)
    r["TopDown RB"] = map_processes(q_rb, h, "topdown", seed=seed).objective
    r["TopDown RB+N10"] = map_processes(q_rb, h, "topdown+n10", seed=seed).objective
    r["TopDown RMS"] = map_processes(q_rms, h, "topdown", seed=seed).objective
    t4 = time.perf_counter()
    td = map_processes(q_rms, h, "topdown+n10", seed=seed)
    t5 = time.perf_counter()
    best = map_processes(q_rms, h, "topdown+n10", seed=seed, baseline=ident)
    r["TopDown RMS+N10"] = td.objective
    r["best(Id,TD+N10) RMS"] = best.objective
    # SharedMap comparison: J on the mesh, one function for every assignment
    r["sec_ours"] = (t3 - t1) + (t5 - t4)
    r["jc Identity RMS"] = j_cut(mesh, rms.part, h)
    r["jc TopDown RMS+N10"] = j_cut(mesh, td.mapping[rms.part], h)
    r["jc best RMS"] = j_cut(mesh, best.mapping[rms.part], h)
    r["imb RMS"] = max_imbalance(mesh, rms.part, k)
    if sharedmap_modes:
        import chszlablib as cz
        g = cz.Graph.from_scipy_sparse(mesh.graph.to_csr())
        for mode in sharedmap_modes:
            t = time.perf_counter()
            sm = cz.Decomposition.process_map(g, [4, 16, kprime], list(DISTANCES), mode=mode,
                                              imbalance=EPSILON, seed=seed, threads=1)
            r[f"sec_sm_{mode}"] = time.perf_counter() - t
            pe = np.asarray(sm.assignment, dtype=np.int64)
            r[f"jc SharedMap {mode}"] = j_cut(mesh, pe, h)
            r[f"imb SharedMap {mode}"] = max_imbalance(mesh, pe, k)
            if abs(2 * r[f"jc SharedMap {mode}"] - float(sm.comm_cost)) > 1e-6 * sm.comm_cost:
                r[f"note SharedMap {mode}"] = (f"comm_cost {sm.comm_cost} != 2·J_cut "
                                               f"{2 * r[f'jc SharedMap {mode}']:g}")
    return r


def improvement(r: dict, col: str) -> float:
    return 100.0 * (r["MM RB"] - r[col]) / r["MM RB"]


def fmt_row(cells) -> str:
    return "| " + " | ".join(cells) + " |"


def tables(results: dict[str, dict[int, dict]], kprimes, modes) -> list[str]:
    out: list[str] = []
    head = fmt_row(["k'", "k", "J MM RB"] + list(COLUMNS))
    sep = fmt_row(["---"] * (3 + len(COLUMNS)))
    for name, per_k in results.items():
        out += ["", f"### {name}: improvement in % over Müller-Merbach on RB", "", head, sep]
        for kp in kprimes:
            r = per_k[kp]
            out.append(fmt_row([str(kp), str(r["k"]), f"{r['MM RB']:.0f}"]
                               + [f"{improvement(r, c):.1f}" for c in COLUMNS]))
        out.append(fmt_row(["avg", "", ""] + [
            f"{np.mean([improvement(per_k[kp], c) for kp in kprimes]):.1f}" for c in COLUMNS]))
    # Fig. 4: average over instances per k'
    out += ["", "### Average over all instances (Fig. 4): improvement in % over "
            "Müller-Merbach on RB", "", fmt_row(["k'"] + list(COLUMNS)),
            fmt_row(["---"] * (1 + len(COLUMNS)))]
    for kp in kprimes:
        out.append(fmt_row([str(kp)] + [
            f"{np.mean([improvement(results[n][kp], c) for n in results]):.1f}"
            for c in COLUMNS]))
    allr = [results[n][kp] for n in results for kp in kprimes]
    out.append(fmt_row(["avg"] + [f"{np.mean([improvement(r, c) for r in allr]):.1f}"
                                  for c in COLUMNS]))
    out += ["", "Paper (Fig. 4, KaHIP, k' = 1..128): Identity RB 18.2, Identity RMS 51.6, "
            "TopDown RB 52.6, TopDown RMS 54.1, TopDown RMS+N10 56.1, Identity RMS+N10 55.4."]
    out += trend_checks(results, kprimes)
    if modes:
        out += sharedmap_table(results, kprimes, modes)
    return out


def trend_checks(results, kprimes) -> list[str]:
    allr = [(n, kp, results[n][kp]) for n in results for kp in kprimes]
    odd = [kp for kp in kprimes if kp & (kp - 1)]        # not a power of two
    pow2 = [kp for kp in kprimes if not kp & (kp - 1)]

    def avg(col, ks):
        return np.mean([improvement(results[n][kp], col) for n in results for kp in ks])

    out = ["", "### Trend checks", ""]
    out.append(f"- Identity RB: {avg('Identity RB', pow2):.1f} % on k' a power of two "
               f"{pow2}, {avg('Identity RB', odd):.1f} % on the others {odd}.")
    out.append(f"- Identity RMS: {avg('Identity RMS', pow2):.1f} % on powers of two, "
               f"{avg('Identity RMS', odd):.1f} % on the others.")
    best_counts = {c: 0 for c in COLUMNS[:5]}
    for _, _, r in allr:
        best_counts[min(COLUMNS[:5], key=lambda c: r[c])] += 1
    out.append("- Best of the paper's five columns, runs won (a tie to the first column): "
               + ", ".join(f"{c} {v}" for c, v in best_counts.items())
               + f" (of {len(allr)}).")
    lowest = sum(r["TopDown RMS+N10"] <= min(r[c] for c in COLUMNS[:5]) for _, _, r in allr)
    means = {c: avg(c, kprimes) for c in COLUMNS[:5]}
    out.append(f"- TopDown RMS+N10 at or below every other of the five columns in {lowest} "
               f"of {len(allr)} runs; best on average: "
               f"{max(means, key=lambda c: (means[c], c == 'TopDown RMS+N10'))} ("
               + ", ".join(f"{c} {v:.1f}" for c, v in means.items()) + ").")
    for col in ("TopDown RMS", "TopDown RMS+N10"):
        loss = [(100.0 * (r[col] - r["Identity RMS"]) / r["Identity RMS"], n, kp)
                for n, kp, r in allr]
        lost = sorted((t for t in loss if t[0] > 0), reverse=True)
        worst = ", ".join(f"{n} k'={kp} +{x:.1f} %" for x, n, kp in lost[:5])
        out.append(f"- {col} vs Identity RMS: worse in {len(lost)} of {len(allr)} runs, "
                   f"mean {np.mean([x for x, _, _ in loss]):+.1f} % (J relative to Identity "
                   f"RMS; + = worse)" + (f"; worst: {worst}" if lost else "") + ".")
    return out


def sharedmap_table(results, kprimes, modes) -> list[str]:
    cols = ["instance", "k'", "J Id RMS", "J TD+N10 RMS", "J best RMS"]
    for m in modes:
        cols += [f"J SM {m}"]
    cols += [f"TD+N10 RMS / SM {m}" for m in modes] + [f"best RMS / SM {m}" for m in modes]
    cols += ["imb RMS"] + [f"imb SM {m}" for m in modes]
    cols += ["s ours"] + [f"s SM {m}" for m in modes]
    out = ["", "### RMS decomposition vs SharedMap (J_cut on the mesh, each edge once)", "",
           fmt_row(cols), fmt_row(["---"] * len(cols))]
    ratios: dict[str, list[float]] = {}
    secs: dict[str, list[float]] = {}
    notes = []
    for n, per_k in results.items():
        for kp in kprimes:
            r = per_k[kp]
            cells = [n, str(kp), f"{r['jc Identity RMS']:.0f}", f"{r['jc TopDown RMS+N10']:.0f}",
                     f"{r['jc best RMS']:.0f}"]
            cells += [f"{r[f'jc SharedMap {m}']:.0f}" for m in modes]
            for key in ("TopDown RMS+N10", "best RMS"):
                for m in modes:
                    x = r[f"jc {key}"] / r[f"jc SharedMap {m}"]
                    ratios.setdefault(f"{key} / SM {m}", []).append(x)
                    cells.append(f"{x:.3f}")
            cells += [f"{r['imb RMS']:.3f}"] + [f"{r[f'imb SharedMap {m}']:.3f}" for m in modes]
            cells += [f"{r['sec_ours']:.2f}"] + [f"{r[f'sec_sm_{m}']:.2f}" for m in modes]
            secs.setdefault("ours", []).append(r["sec_ours"])
            for m in modes:
                secs.setdefault(m, []).append(r[f"sec_sm_{m}"])
                if f"note SharedMap {m}" in r:
                    notes.append(f"{n} k'={kp}: {r[f'note SharedMap {m}']}")
            out.append(fmt_row(cells))
    out.append("")
    for key, xs in ratios.items():
        xs = np.asarray(xs)
        out.append(f"- {key}: mean {xs.mean():.3f}, geometric mean "
                   f"{np.exp(np.log(xs).mean()):.3f}, min {xs.min():.3f}, max {xs.max():.3f}; "
                   f"within 5 % (≤ 1.05) in {(xs <= 1.05).sum()} of {len(xs)}.")
    out.append("- seconds, mean per run: " + ", ".join(
        f"{k} {np.mean(v):.2f}" for k, v in secs.items()))
    out += [f"- note: {x}" for x in notes] or ["- SharedMap's comm_cost = 2·J_cut in every run."]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="15,16", help="log2 of the generated meshes' sizes")
    ap.add_argument("--generators", default="rgg,delaunay")
    ap.add_argument("--no-shared", action="store_true",
                    help="skip shared/bench-graphs rgg_n_2_15_s0 and delaunay_n15")
    ap.add_argument("--kprimes", default=",".join(map(str, KPRIMES)))
    ap.add_argument("--backend", default="metis", choices=("metis", "kahip"))
    ap.add_argument("--sharedmap", default="eco,fast",
                    help="SharedMap modes to compare against, or 'none'")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", help="also write the tables to this markdown file")
    a = ap.parse_args(argv)
    kprimes = [int(x) for x in a.kprimes.split(",")]
    modes = [] if a.sharedmap == "none" else a.sharedmap.split(",")
    start = time.perf_counter()
    results: dict[str, dict[int, dict]] = {}
    for mesh in instances([int(s) for s in a.sizes.split(",")], a.generators.split(","),
                          not a.no_shared, a.seed):
        name = f"{mesh.source} (n={mesh.n}, m={mesh.graph.m})"
        results[name] = {}
        for kp in kprimes:
            results[name][kp] = run_one(mesh, kp, a.backend, a.seed, modes)
            print(f"# {name} k'={kp} done at {time.perf_counter() - start:.0f} s",
                  file=sys.stderr, flush=True)
    lines = [f"## Fig. 4 (backend {a.backend}, seed {a.seed}, S = 4:16:k', D = 1:10:100)"]
    lines += tables(results, kprimes, modes)
    lines += ["", f"Total run time {time.perf_counter() - start:.0f} s."]
    text = "\n".join(lines)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
