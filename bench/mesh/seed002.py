"""Seed 002 (Moulitsas & Karypis, architecture-aware partitioning) reproduced (run by hand).

    .venv/bin/python bench/mesh/seed002.py [--seeds 0,1,2,3,4] [--meshes all] [--out FILE.md]

Moulitsas & Karypis, Architecture Aware Partitioning Algorithms, ICA3PP 2008, LNCS 5022,
pp. 42-53, doi:10.1007/978-3-540-69501-1_6, §5 (Fig. 2 machines, Fig. 3 metrics, Fig. 4
sparse vs dense).

Machines (32 PEs, :mod:`mapper.mesh.architecture`): Arch32_1 1D array (links cost 1),
Arch32_2 4×8 2D array (links 1), Arch32_3 8 nodes × 4 PEs (intra-node e* = 1,
inter-node e* = 10), Arch32_4 two 4×4 sites joined by one link of cost 10 (local links
1); e* of unlinked PEs by QPL.  Speeds: PEs 0-15 twice as fast as PEs 16-31 (speed 2
vs 1, w* = 0.5 vs 1): the first four nodes of Arch32_3, the first site of Arch32_4, the
left half of the 1D array, rows 0-1 of the 2D array.

Meshes (unit w, c, edge weights): shared/bench-graphs 3elt, delaunay_n15,
rgg_n_2_15_s0 (each skipped when absent), and generated grid2d 256×256 (5-point) and
grid3d 32×32×32 (7-point) (``meshes.py``).

Methods (ε = 0.03, partitioner seed from ``--seeds``): kvmetis with speed targets
(:func:`mapper.mesh.archaware.kvmetis_partition`), VolNS, VolS, ElTNS, ElTS
(:func:`mapper.mesh.archaware.archaware_partition`, defaults otherwise).  Metrics by
:func:`mapper.mesh.metrics.evaluate_partition`: MaxElTime, SumElTime, edge cut, total volume,
imbalance against the speed targets.

Prints (markdown): per machine the metrics averaged over meshes and seeds, as ratios to
kvmetis of the same mesh and seed (the shape of the paper's Fig. 3), with mean seconds;
the absolute numbers of every mesh × machine × method for the first seed; then the
issue's targets with their numbers: ElTS MaxElTime ≥ 10 % below kvmetis on average;
ElTS ≤ VolS on MaxElTime; sparse within 2 % of dense (MaxElTime) in ≥ 90 % of runs,
with the seed-to-seed spread of a dense variant (against itself with the next seed: the
METIS seed changes the predictor, which sparse and dense of one seed share, so this is
not the noise of their comparison) and the comparison of means over the seeds.

Time: the defaults (5 meshes × 4 machines × 5 seeds × 5 methods) took 85 s wall, 42 s
CPU, on the shared 2-core machine with the single-start corrector; with the multi-start
corrector (3 starts, ElT also from the Vol result) 114 s wall in a window where the
single-start code took 44 s.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import meshes  # noqa: E402

from mapper.mesh import Mesh, evaluate_partition  # noqa: E402
from mapper.mesh.archaware import archaware_partition, kvmetis_partition  # noqa: E402
from mapper.mesh.architecture import FIG2_MACHINES  # noqa: E402

EPSILON = 0.03
SPEEDS = np.r_[np.full(16, 2.0), np.ones(16)]
METHODS = ("kvmetis", "VolNS", "VolS", "ElTNS", "ElTS")
_ARGS = {"VolNS": ("vol", False), "VolS": ("vol", True), "ElTNS": ("elt", False),
         "ElTS": ("elt", True)}
METRICS = ("max_el_time", "sum_el_time", "edge_cut", "total_volume")
LABELS = {"max_el_time": "MaxElTime", "sum_el_time": "SumElTime", "edge_cut": "edge cut",
          "total_volume": "total volume"}


def mesh_list(which: str) -> list[Mesh]:
    makers = {
        "3elt": lambda: meshes.shared_mesh("3elt.graph"),
        "delaunay_n15": lambda: meshes.shared_mesh("delaunay_n15.graph"),
        "rgg_n_2_15_s0": lambda: meshes.shared_mesh("rgg_n_2_15_s0.graph"),
        "grid2d": lambda: meshes.grid2d(256, 256),
        "grid3d": lambda: meshes.grid3d(32, 32, 32),
    }
    names = list(makers) if which == "all" else which.split(",")
    return [m for m in (makers[n]() for n in names) if m is not None]


def run(mesh: Mesh, arch, seed: int) -> dict[str, dict]:
    """Metrics and seconds of every method on one mesh, machine and seed."""
    out = {}
    for method in METHODS:
        t = time.perf_counter()
        if method == "kvmetis":
            p = kvmetis_partition(mesh, arch, epsilon=EPSILON, seed=seed)
        else:
            obj, sparse = _ARGS[method]
            p = archaware_partition(mesh, arch, objective=obj, sparse=sparse,
                                    epsilon=EPSILON, seed=seed)
        sec = time.perf_counter() - t
        ev = evaluate_partition(mesh, p.part, arch)
        out[method] = {m: float(getattr(ev, m)) for m in METRICS}
        out[method].update(imbalance=float(ev.imbalance), max_volume=float(ev.max_volume),
                           seconds=sec)
    return out


def row(cells) -> str:
    return "| " + " | ".join(cells) + " |"


def report(results: dict, archs, mesh_names, seeds) -> list[str]:
    """results[(mesh, arch, seed)][method][metric]."""
    out = []
    for a in archs:
        runs = [results[(m, a, s)] for m in mesh_names for s in seeds]
        out += ["", f"### {a}: mean over {len(mesh_names)} meshes × {len(seeds)} seeds, "
                "ratio to kvmetis (same mesh and seed)", "",
                row(["method"] + [LABELS[x] for x in METRICS] + ["max imbalance", "seconds"]),
                row(["---"] * (len(METRICS) + 3))]
        for meth in METHODS:
            cells = [meth] + [f"{np.mean([r[meth][x] / r['kvmetis'][x] for r in runs]):.3f}"
                              for x in METRICS]
            cells += [f"{max(r[meth]['imbalance'] for r in runs):.3f}",
                      f"{np.mean([r[meth]['seconds'] for r in runs]):.2f}"]
            out.append(row(cells))
    s0 = seeds[0]
    out += ["", f"### Absolute values, seed {s0}", "",
            row(["mesh", "machine", "method"] + [LABELS[x] for x in METRICS]
                + ["imbalance", "seconds"]),
            row(["---"] * (len(METRICS) + 5))]
    for m in mesh_names:
        for a in archs:
            for meth in METHODS:
                r = results[(m, a, s0)][meth]
                out.append(row([m, a, meth] + [f"{r[x]:.0f}" for x in METRICS]
                               + [f"{r['imbalance']:.3f}", f"{r['seconds']:.2f}"]))
    out += targets(results, archs)
    return out


def targets(results: dict, archs) -> list[str]:
    keys = list(results)
    out = ["", "### Targets", ""]
    red = np.array([1 - results[k]["ElTS"]["max_el_time"] / results[k]["kvmetis"]["max_el_time"]
                    for k in keys])
    per_arch = ", ".join(
        f"{a} {100 * np.mean([red[i] for i, k in enumerate(keys) if k[1] == a]):.1f} %"
        for a in archs)
    ok = red.mean() >= 0.10
    out.append(f"- ElTS MaxElTime below kvmetis: mean {100 * red.mean():.1f} % (min "
               f"{100 * red.min():.1f}, max {100 * red.max():.1f}; per machine {per_arch}) "
               f"over {len(keys)} runs — target ≥ 10 %: **{'holds' if ok else 'missed'}**.")
    rv = np.array([results[k]["ElTS"]["max_el_time"] / results[k]["VolS"]["max_el_time"]
                   for k in keys])
    ok = bool(np.all(rv <= 1 + 1e-12))
    out.append(f"- ElTS / VolS on MaxElTime: mean {rv.mean():.3f}, max {rv.max():.3f}; "
               f"ElTS ≤ VolS in {(rv <= 1 + 1e-12).sum()} of {len(rv)} runs — target: "
               f"**{'holds' if ok else 'holds on average only' if rv.mean() <= 1 else 'missed'}"
               f"**.")
    ratios = []
    for k in keys:
        ratios.append(results[k]["VolS"]["max_el_time"] / results[k]["VolNS"]["max_el_time"])
        ratios.append(results[k]["ElTS"]["max_el_time"] / results[k]["ElTNS"]["max_el_time"])
    ratios = np.array(ratios)
    within = int((ratios <= 1.02).sum())
    pair_keys = [(k, obj) for k in keys for obj in ("Vol", "ElT")]
    ok = within >= 0.9 * len(ratios)
    out.append(f"- sparse / dense MaxElTime (VolS/VolNS and ElTS/ElTNS): within 2 % in "
               f"{within} of {len(ratios)} runs ({100 * within / len(ratios):.0f} %), "
               f"sparse better in {(ratios < 1 - 1e-12).sum()}, equal in "
               f"{(np.abs(ratios - 1) <= 1e-12).sum()}, worse in "
               f"{(ratios > 1 + 1e-12).sum()}; ratio min {ratios.min():.3f}, max "
               f"{ratios.max():.3f} — target ≥ 90 %: **{'holds' if ok else 'missed'}**.")
    # seed-to-seed spread: the same dense variant with the next seed (same mesh and
    # machine); the predictor changes with the seed, so it is not the S/NS comparison's noise
    seeds = sorted({k[2] for k in keys})
    if len(seeds) > 1:
        nxt = {s: seeds[(i + 1) % len(seeds)] for i, s in enumerate(seeds)}
        noise = np.array([results[(k[0], k[1], nxt[k[2]])][meth]["max_el_time"]
                          / results[k][meth]["max_el_time"]
                          for k in keys for meth in ("VolNS", "ElTNS")])
        out.append(f"  - seed-to-seed spread (predictor changes): a dense variant against "
                   f"itself with the next seed "
                   f"(VolNS, ElTNS): within 2 % (ratio ≤ 1.02) in "
                   f"{int((noise <= 1.02).sum())} of {len(noise)}, |ratio - 1| ≤ 2 % in "
                   f"{int((np.abs(noise - 1) <= 0.02).sum())}; max {noise.max():.3f}.")
    # per (mesh, machine): mean over the seeds, sparse against dense
    cells = sorted({(k[0], k[1]) for k in keys})
    avg = np.array([np.mean([results[(m, a, s)][f"{o}S"]["max_el_time"] for s in seeds])
                    / np.mean([results[(m, a, s)][f"{o}NS"]["max_el_time"] for s in seeds])
                    for m, a in cells for o in ("Vol", "ElT")])
    out.append(f"  - averaged over the {len(seeds)} seeds per mesh and machine: within 2 % "
               f"in {int((avg <= 1.02).sum())} of {len(avg)}, within 5 % in "
               f"{int((avg <= 1.05).sum())}; max {avg.max():.3f}.")
    for label, pick in (("machine", 1), ("mesh", 0)):
        groups = sorted({k[pick] for k in keys})
        sel = {g: [i for i, (k, _) in enumerate(pair_keys) if k[pick] == g] for g in groups}
        out.append(f"  - within 2 % per {label}: " + ", ".join(
            f"{g} {int((ratios[sel[g]] <= 1.02).sum())}/{len(sel[g])}" for g in groups))
    out.append("  - within 2 % per machine and objective (S/NS): " + ", ".join(
        f"{a} {obj} "
        f"{sum(ratios[i] <= 1.02 for i, (k, o) in enumerate(pair_keys) if k[1] == a and o == obj)}"
        f"/{sum(1 for k, o in pair_keys if k[1] == a and o == obj)}"
        for a in archs for obj in ("Vol", "ElT")))
    for obj in ("Vol", "ElT"):
        xs = [ratios[i] for i, (_, o) in enumerate(pair_keys) if o == obj]
        out.append(f"  - {obj}S/{obj}NS: within 2 % in {sum(x <= 1.02 for x in xs)} of {len(xs)}, "
                   f"mean {np.mean(xs):.3f}")
    worst = sorted(range(len(ratios)), key=lambda i: -ratios[i])[:5]
    out.append("  - worst: " + ", ".join(
        f"{pair_keys[i][1]}S {pair_keys[i][0][0]} {pair_keys[i][0][1]} seed {pair_keys[i][0][2]} "
        f"{ratios[i]:.3f}" for i in worst))
    lost = [k for i, k in enumerate(keys) if rv[i] > 1 + 1e-12]
    if lost:
        out.append("- runs with ElTS > VolS on MaxElTime: " + ", ".join(
            f"{k[0]} {k[1]} seed {k[2]} ({rv[keys.index(k)]:.3f})" for k in lost))
    vv = np.array([results[k]["VolS"]["max_volume"] / results[k]["VolNS"]["max_volume"]
                   for k in keys])
    out.append(f"- (also) VolS / VolNS on max volume: within 2 % in {(vv <= 1.02).sum()} of "
               f"{len(vv)}, max ratio {vv.max():.3f}.")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--meshes", default="all",
                    help="comma list of 3elt,delaunay_n15,rgg_n_2_15_s0,grid2d,grid3d")
    ap.add_argument("--out", help="also write the tables to this markdown file")
    a = ap.parse_args(argv)
    seeds = [int(s) for s in a.seeds.split(",")]
    start = time.perf_counter()
    archs = {name: make(SPEEDS) for name, make in FIG2_MACHINES.items()}
    results = {}
    mesh_names = []
    for mesh in mesh_list(a.meshes):
        mesh_names.append(f"{mesh.source}")
        for aname, arch in archs.items():
            for s in seeds:
                results[(mesh.source, aname, s)] = run(mesh, arch, s)
        print(f"# {mesh.source} done at {time.perf_counter() - start:.0f} s", file=sys.stderr,
              flush=True)
    lines = [f"## Seed 002 (Moulitsas & Karypis §5): 32 PEs, PEs 0-15 speed 2, 16-31 speed 1; "
             f"ε = {EPSILON}, seeds {seeds}",
             "", "Meshes: " + ", ".join(f"{m}" for m in mesh_names) + "."]
    lines += report(results, list(archs), mesh_names, seeds)
    lines += ["", f"Total run time {time.perf_counter() - start:.0f} s."]
    text = "\n".join(lines)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
