#!/usr/bin/env python3
"""Heterogeneous SUMMA before and after the topology-aware arrangement, in SimGrid.

Issue 13, item 5 (Malik et al., HCW 2014, doi:10.1109/IPDPSW.2014.10; the seed
slides): for every process count and node wiring, on a two-cluster machine with a
slow link between the clusters and heterogeneous node speeds,

1. writes topology.conf (two leaf switches = the two clusters, under a spine), the
   node speeds and, per rank, its relative speed and its cluster under Slurm's block
   placement (one rank per node: rank r on node n<r>);
2. ``rankmap simulate --platform-only --host-speeds`` builds the SimGrid platform and
   the block hostfile (the arrangement changes which rectangle a rank owns, not where
   it runs);
3. ``rankmap summa --speeds --groups --size N --output ARR --original ORIG`` partitions
   (column-based, Beaumont et al.) and arranges (the slides' group-permutation
   heuristic), printing cost_A, cost_B and the norm;
4. runs bench/summa/summa.c under smpirun for the original and the arranged layout
   (``--cfg=smpi/simulate-computation:no``: deterministic; compute is the flops summa.c
   declares) and prints one Markdown table (and --json-out FILE).

Wirings: ``contiguous`` — nodes n0..n(p/2-1) on cluster 0, the rest on cluster 1 (a job
whose node list goes cluster by cluster); ``interleaved`` — node i on cluster i mod 2
(the node list alternates between the clusters, as bench/benefit's interleaved machine).

Node speeds: each node draws a type uniformly (numpy seed --seed) from --speed-types
(relative speeds), times --base-speed flop/s per core; the draw is independent of the
cluster.  By hand, not in CI.  Example:
``python3 bench/summa/run_summa_sim.py --ranks 16 32 90``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

# ``rankmap summa`` until the lead registers it in slurm_plugin/commands/cli.py: the same
# command through its own parser
_SUMMA_FALLBACK = (
    "import argparse, sys\n"
    "from slurm_plugin.commands.summa_cli import add_summa_command\n"
    "p = argparse.ArgumentParser(prog='rankmap')\n"
    "add_summa_command(p.add_subparsers(dest='command', required=True))\n"
    "a = p.parse_args(sys.argv[1:])\n"
    "sys.exit(a.func(a))\n")


def summa_command(rankmap: str) -> list[str]:
    """``rankmap summa`` when the CLI has it, else the fallback above."""
    ok = subprocess.run([rankmap, "summa", "--help"], capture_output=True, check=False)
    return [rankmap, "summa"] if ok.returncode == 0 else [sys.executable, "-c",
                                                           _SUMMA_FALLBACK, "summa"]


def run_checked(cmd: list[str], what: str) -> str:
    """stdout of ``cmd``; exit with its output when it fails."""
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=ROOT)
    if proc.returncode:
        raise SystemExit(f"{what} failed ({proc.returncode}): {' '.join(cmd)}\n"
                         f"{(proc.stdout + proc.stderr)[-3000:]}")
    return proc.stdout


def clusters_of(nodes: int, wiring: str) -> np.ndarray:
    """Cluster (0 or 1) of node i, i.e. of rank i under block placement."""
    i = np.arange(nodes)
    return i % 2 if wiring == "interleaved" else (i >= nodes // 2).astype(int)


def topology_conf(cluster: np.ndarray) -> str:
    lines = [f"SwitchName=cluster{c} Nodes=" + ",".join(f"n{i}" for i in np.flatnonzero(
        cluster == c)) for c in (0, 1)]
    return "\n".join(lines) + "\nSwitchName=spine Switches=cluster[0-1]\n"


def compute_bound(arr: Path, speed: np.ndarray) -> float:
    """max over ranks of 2·h·w·N / speed: the loop's time with an infinitely fast
    network (the partition's load balance)."""
    rows = [line.split() for line in arr.read_text().splitlines()
            if line.strip() and not line.lstrip().startswith("#")]
    n = int(rows[0][1])
    t = np.array([[int(x) for x in r] for r in rows[1:]])
    return float(np.max(2.0 * t[:, 5] * t[:, 6] * n / speed[t[:, 0]]))


def sim_time(platform: Path, hostfile: Path, n: int, exe: Path, arr: Path, panel: int,
             timeout: float) -> float:
    cmd = ["smpirun", "-platform", str(platform), "-hostfile", str(hostfile), "-np", str(n),
           "--cfg=smpi/simulate-computation:no", "--log=root.thresh:critical",
           str(exe), "-a", str(arr), "-b", str(panel)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=timeout)
    times = [line.split()[1] for line in proc.stdout.splitlines()
             if line.startswith("rankmap-sim-time ")]
    if proc.returncode or not times:
        raise SystemExit(f"smpirun failed ({proc.returncode}): {' '.join(cmd)}\n"
                         f"{(proc.stdout + proc.stderr)[-3000:]}")
    return float(times[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[16, 32, 90])
    ap.add_argument("--wirings", nargs="+", default=["contiguous", "interleaved"],
                    choices=["contiguous", "interleaved"])
    ap.add_argument("--size", type=int, default=4096, help="matrix size N")
    ap.add_argument("--panel", type=int, default=128, help="summa -b")
    ap.add_argument("--speed-types", default="1,1.5,2,3",
                    help="relative speeds of the node types (default %(default)s)")
    ap.add_argument("--base-speed", type=float, default=25e9,
                    help="flop/s of relative speed 1 (default %(default)g)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--host-bw", default="12.5GBps")
    ap.add_argument("--uplink-bw", default="1.25GBps",
                    help="each cluster's link to the spine (default %(default)s: 10x "
                         "slower than a host link)")
    ap.add_argument("--uplink-lat", default="10us")
    ap.add_argument("--rankmap", default=str(ROOT / ".venv/bin/rankmap"))
    ap.add_argument("--timeout", type=float, default=600, help="seconds per smpirun")
    ap.add_argument("--work-dir", default="/tmp/rankmap-summa")
    ap.add_argument("--json-out", metavar="FILE")
    args = ap.parse_args()
    if shutil.which("smpicc") is None or shutil.which("smpirun") is None:
        raise SystemExit("smpicc/smpirun not found: apt-get install libsimgrid-dev simgrid")
    work = Path(args.work_dir)
    (work / "build").mkdir(parents=True, exist_ok=True)
    exe = work / "build" / "summa"
    subprocess.run(["smpicc", "-O2", "-o", str(exe), str(HERE / "summa.c")], check=True)
    summa = summa_command(args.rankmap)
    types = np.array([float(x) for x in args.speed_types.split(",")])
    results = []
    print("| wiring | processes | columns | original cost_A / cost_B / norm | arranged "
          "cost_A / cost_B / norm | norm reduction | compute bound s | original s | "
          "arranged s | speedup |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for wiring in args.wirings:
        for n in args.ranks:
            start = time.perf_counter()
            case = work / f"{wiring}-{n}"
            case.mkdir(parents=True, exist_ok=True)
            cluster = clusters_of(n, wiring)
            rel = types[np.random.default_rng(args.seed).integers(0, len(types), n)]
            (case / "topology.conf").write_text(topology_conf(cluster))
            (case / "host_speeds").write_text("".join(
                f"n{i}={rel[i] * args.base_speed:.12g}\n" for i in range(n)))
            (case / "speeds").write_text("".join(f"{s:g}\n" for s in rel))
            (case / "groups").write_text("".join(f"cluster{c}\n" for c in cluster))
            run_checked([args.rankmap, "simulate", "--nodes", f"n[0-{n - 1}]",
                         "--node-info", "Sockets=1 CoresPerSocket=1",
                         "--topology-conf", str(case / "topology.conf"),
                         "--profile", "ring", "--time-limit", "1", "--skip", "cyclic",
                         "--host-bw", args.host_bw, "--uplink-bw", args.uplink_bw,
                         "--uplink-lat", args.uplink_lat,
                         "--host-speeds", str(case / "host_speeds"),
                         "--out", str(case), "--platform-only"], "rankmap simulate")
            costs = json.loads(run_checked(
                [*summa, "--speeds", str(case / "speeds"), "--groups", str(case / "groups"),
                 "--size", str(args.size), "--output", str(case / "arranged.arr"),
                 "--original", str(case / "original.arr"), "--json"], "rankmap summa"))
            secs = {name: sim_time(case / "platform.xml", case / "hostfile.0.block", n, exe,
                                   case / f"{name}.arr", args.panel, args.timeout)
                    for name in ("original", "arranged")}
            bound = compute_bound(case / "arranged.arr", rel * args.base_speed)
            rec = {"wiring": wiring, "processes": n, "size": args.size,
                   "panel": args.panel, "speeds": rel.tolist(), "clusters": cluster.tolist(),
                   "summa": costs, "seconds": secs, "compute_bound": bound,
                   "speedup": secs["original"] / secs["arranged"],
                   "wall_seconds": time.perf_counter() - start}
            results.append(rec)
            o, a = costs["original"], costs["arranged"]
            print(f"| {wiring} | {n} | {costs['columns']} | {o['cost_A']:g} / {o['cost_B']:g}"
                  f" / {o['norm']:.0f} | {a['cost_A']:g} / {a['cost_B']:g} / {a['norm']:.0f}"
                  f" | {100 * costs['reduction']:.1f} % | {bound:.3f} | "
                  f"{secs['original']:.3f} | {secs['arranged']:.3f} | "
                  f"{rec['speedup']:.2f} |", flush=True)
            print(f"<!-- {wiring} {n}: {rec['wall_seconds']:.0f} s wall -->", flush=True)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
