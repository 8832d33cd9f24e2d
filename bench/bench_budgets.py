"""Does every algorithm honour its time budget?  Wall time and peak RSS per run (by hand).

    .venv/bin/python bench/bench_budgets.py [--sizes 1024,2048,4096] [--budget 5]
        [--profiles uniform,random,stencil3d] [--algorithms topdown+n10,...]
        [--timeout 600] [--baseline] [--objective congestion]

Profiles: ``uniform`` — all-to-all, every pair the same volume (every bijection has
the same J); ``random`` — all-to-all with volumes uniform in [1, 100) (dense, not
uniform); ``stencil3d`` — the 7-point stencil of slurm_plugin.profiles.generators.
Machine: a 3-level tree, 32 cores per node, 8 nodes per switch, distances 1:10:100
(n / 256 switches).  ``--baseline`` passes block placement (rank r on PE r) as the
scheduler's baseline, as the Slurm plugin does; ``--objective congestion`` (implies
``--baseline``) runs the product's default objective on trees, with the node links and
switch uplinks as congestion levels (J under block's busiest link of each).

Every run is a fresh child process (``--one``), so ``ru_maxrss`` is that run's own
peak; the table shows the RSS after the graph was built (the input's own cost) and the
peak during ``map_processes``, the solver's wall time, the budget, and J.  A run that
exceeds ``--timeout`` is killed and shown as ``> timeout``.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np

SIZES = (1024, 2048, 4096)
PROFILES = ("uniform", "random", "stencil3d")
ALGORITHMS = ("topdown+n10", "bottomup+n10", "greedyallc+n10", "ohtma+n10")


def profile_graph(name: str, n: int):
    """The communication graph of one profile on ``n`` ranks."""
    from mapper import CommGraph

    if name == "stencil3d":
        from slurm_plugin.profiles.generators import generate

        return generate("stencil3d", n)
    a, b = np.triu_indices(n, 1)
    w = (np.ones(len(a)) if name == "uniform"
         else np.random.default_rng(0).uniform(1.0, 100.0, len(a)))
    return CommGraph.from_edges(a, b, w, n=n, source=f"{name} all-to-all")


def machine_for(n: int):
    from mapper import Hierarchy

    return Hierarchy.parse(f"32:8:{n // 256}", "1:10:100")


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def run_one(profile: str, n: int, algorithm: str, budget: float, baseline: bool,
            objective: str = "J") -> dict:
    """One run in this process; the dictionary the parent prints."""
    from mapper import LinkModel
    from mapper.solve.api import map_processes

    graph = profile_graph(profile, n)
    machine = machine_for(n)
    rss_graph = _rss_mb()
    start = time.perf_counter()
    aimed = objective == "congestion"
    result = map_processes(graph, machine, algorithm, 0, budget,
                           baseline=np.arange(n) if baseline or aimed else None,
                           objective=objective,
                           links=LinkModel(congestion_levels=[0, 1] if aimed else ()))
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "rss_graph": rss_graph, "rss_peak": _rss_mb(),
            "objective": result.objective, "origin": result.origin,
            "hit_time_limit": result.hit_time_limit,
            "notes": list(getattr(result, "notes", ()))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--profiles", default=",".join(PROFILES))
    ap.add_argument("--algorithms", default=",".join(ALGORITHMS))
    ap.add_argument("--budget", type=float, default=5.0)
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--baseline", action="store_true")
    ap.add_argument("--objective", choices=("J", "congestion"), default="J")
    ap.add_argument("--one", nargs=3, metavar=("PROFILE", "N", "ALGORITHM"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        profile, n, algorithm = args.one
        print(json.dumps(run_one(profile, int(n), algorithm, args.budget, args.baseline,
                                 args.objective)))
        return
    print(f"budget {args.budget:g} s, baseline {'block' if args.baseline else 'none'}, "
          f"objective {args.objective}, machine 32:8:(n/256), distances 1:10:100")
    print("| profile | n | algorithm | solver s | within budget | RSS graph MB | "
          "RSS peak MB | J | origin | note |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n in map(int, args.sizes.split(",")):
        for profile in args.profiles.split(","):
            for algorithm in args.algorithms.split(","):
                cmd = [sys.executable, __file__, "--one", profile, str(n), algorithm,
                       "--budget", str(args.budget), "--objective", args.objective] + (
                    ["--baseline"] if args.baseline else [])
                try:
                    out = subprocess.run(cmd, capture_output=True, text=True, check=True,
                                         timeout=args.timeout)
                except subprocess.TimeoutExpired:
                    print(f"| {profile} | {n} | {algorithm} | > {args.timeout:g} | no | "
                          f"| | | | killed |", flush=True)
                    continue
                except subprocess.CalledProcessError as exc:
                    # e.g. a dense 65536-rank profile (2^32 edges) is killed for its memory
                    why = f"signal {-exc.returncode}" if exc.returncode < 0 else \
                        f"exit {exc.returncode}"
                    print(f"| {profile} | {n} | {algorithm} | - | - | | | | "
                          f"failed ({why}) |", flush=True)
                    continue
                r = json.loads(out.stdout.strip().splitlines()[-1])
                ok = r["seconds"] <= 1.1 * args.budget + 0.5
                note = "; ".join(r["notes"])[:60]
                print(f"| {profile} | {n} | {algorithm} | {r['seconds']:.2f} | "
                      f"{'yes' if ok else 'NO'} | {r['rss_graph']:.0f} | "
                      f"{r['rss_peak']:.0f} | {r['objective']:.6g} | {r['origin']} | "
                      f"{note} |", flush=True)


if __name__ == "__main__":
    main()
