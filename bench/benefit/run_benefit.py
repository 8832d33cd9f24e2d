#!/usr/bin/env python3
"""Does rankmap make jobs faster?  Simulated run time per placement (SimGrid SMPI).

Builds bench/benefit/{halo3d,cg_like}.c with smpicc, writes the topology.conf of each
machine, and runs ``rankmap simulate`` (Slurm block, cyclic, scrambled, rankmap) for
every (machine, app, ranks); prints one Markdown table (and --json-out FILE).

Machines (nodes of --node-info, --leaf-nodes nodes per leaf switch, uplinks
oversubscribed --oversubscription at every level):

* ``tree2``: leaf switches under one spine;
* ``tree3``: leaf switches, --fanout leaves per middle switch (fewer when that would
  leave one middle switch), middle switches under a top switch;
* ``interleaved``: as tree2, but node i hangs off leaf i mod L (L leaves), so Slurm's
  node-list order alternates between leaves (with 2 nodes per leaf: leaf_i = nodes i
  and i + N/2).

Apps and the profiles rankmap maps them with (same rank numbering, see the C sources):
``halo`` = halo3d on the near-cubic grid of generator ``stencil3d`` (periodic), ``cg`` =
cg_like with generator ``npb-cg`` (power-of-two rank counts).

Example: ``python3 bench/benefit/run_benefit.py --ranks 128 256 1024 --machines tree3
--apps halo``.  Simulations run one after the other (one core each).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from slurm_plugin.profiles.generators import near_factors  # noqa: E402
from slurm_plugin.topology import parse_node_shape  # noqa: E402


def topology_conf(machine: str, nodes: int, leaf_nodes: int, fanout: int) -> str:
    """topology.conf text of ``machine`` over nodes n0 … n{nodes-1}."""
    if nodes % leaf_nodes:
        raise SystemExit(f"{nodes} nodes do not fill leaves of {leaf_nodes}")
    leaves = nodes // leaf_nodes
    lines = []
    for leaf in range(leaves):
        if machine == "interleaved":
            members = ",".join(f"n{i}" for i in range(leaf, nodes, leaves))
        else:
            members = f"n[{leaf * leaf_nodes}-{(leaf + 1) * leaf_nodes - 1}]"
        lines.append(f"SwitchName=leaf{leaf} Nodes={members}")
    if machine == "tree3":
        fanout = min(fanout, leaves // 2)  # at least two middle switches
        if fanout < 1 or leaves % fanout:
            raise SystemExit(f"tree3 needs a multiple of {fanout} leaves, at least 2 middle "
                             f"switches; got {leaves} leaves")
        mids = leaves // fanout
        for m in range(mids):
            lines.append(f"SwitchName=mid{m} Switches=leaf[{m * fanout}-{(m + 1) * fanout - 1}]")
        lines.append(f"SwitchName=top Switches=mid[0-{mids - 1}]")
    else:
        lines.append(f"SwitchName=spine Switches=leaf[0-{leaves - 1}]")
    return "\n".join(lines) + "\n"


def build(build_dir: Path) -> dict[str, Path]:
    """Compile the apps with smpicc into ``build_dir``."""
    build_dir.mkdir(parents=True, exist_ok=True)
    out = {}
    for app, src in (("halo", "halo3d.c"), ("cg", "cg_like.c")):
        exe = build_dir / src.removesuffix(".c")
        subprocess.run(["smpicc", "-O2", "-o", str(exe), str(HERE / src)], check=True)
        out[app] = exe
    return out


def app_args(app: str, ranks: int, exe: Path, nbytes: int, iters: int,
             ) -> tuple[str, list[str]] | None:
    """(profile spec, command) of ``app`` at ``ranks``, or None when it does not fit."""
    if app == "halo":
        dims = "x".join(map(str, near_factors(ranks, 3)))
        return (f"stencil3d:{dims},periodic,bytes={nbytes}",
                [str(exe), "-d", dims, "-p", "-b", str(nbytes), "-i", str(iters)])
    if ranks & (ranks - 1):
        return None
    return f"npb-cg:bytes={nbytes}", [str(exe), "-b", str(nbytes), "-i", str(iters)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[128, 256, 1024])
    ap.add_argument("--machines", nargs="+", default=["tree3"],
                    choices=["tree2", "tree3", "interleaved"])
    ap.add_argument("--apps", nargs="+", default=["halo"], choices=["halo", "cg"])
    ap.add_argument("--node-info", default="Sockets=2 CoresPerSocket=4")
    ap.add_argument("--leaf-nodes", type=int, default=4)
    ap.add_argument("--fanout", type=int, default=4)
    ap.add_argument("--oversubscription", default="4:1")
    ap.add_argument("--bytes", type=int, default=262144, help="bytes per message")
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--algorithm", default="topdown+n10")
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--unguarded", action="store_true",
                    help="also simulate the solver's result without the never-worse rule")
    ap.add_argument("--skip", nargs="*", default=[], metavar="PLACEMENT",
                    help="placements not to simulate (passed to rankmap simulate --skip)")
    ap.add_argument("--work-dir", default="/tmp/rankmap-benefit")
    ap.add_argument("--json-out", metavar="FILE")
    args = ap.parse_args()
    if shutil.which("smpicc") is None or shutil.which("smpirun") is None:
        raise SystemExit("smpicc/smpirun not found: apt-get install libsimgrid-dev simgrid")
    work = Path(args.work_dir)
    exes = build(work / "build")
    cores = parse_node_shape(args.node_info).cores
    results = []
    print("| machine | app | ranks | placement | simulated s | ratio to block | J "
          "| busiest link per level (node, leaf, …) | note |")
    print("|---|---|---|---|---|---|---|---|---|")
    for machine in args.machines:
        for app in args.apps:
            for ranks in args.ranks:
                spec = app_args(app, ranks, exes[app], args.bytes, args.iterations)
                if spec is None or ranks % cores:
                    continue
                nodes = ranks // cores
                case = work / f"{machine}-{app}-{ranks}"
                case.mkdir(parents=True, exist_ok=True)
                conf = case / "topology.conf"
                conf.write_text(topology_conf(machine, nodes, args.leaf_nodes, args.fanout))
                profile, command = spec
                cmd = ["rankmap", "simulate", "--nodes", f"n[0-{nodes - 1}]",
                       "--node-info", args.node_info, "--topology-conf", str(conf),
                       "--profile", profile, "--algorithm", args.algorithm,
                       "--time-limit", str(args.time_limit),
                       "--oversubscription", args.oversubscription,
                       "--out", str(case), "--json",
                       *(["--unguarded"] if args.unguarded else []),
                       *(x for name in args.skip for x in ("--skip", name)),
                       "--", *command]
                start = time.perf_counter()
                proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
                if proc.returncode:
                    print(f"FAILED: {' '.join(cmd)}\n{proc.stderr}", file=sys.stderr)
                    continue
                rec = json.loads(proc.stdout)
                rec.update(machine=machine, app=app, command=cmd,
                           wall_seconds=time.perf_counter() - start)
                results.append(rec)
                for p in rec["placements"]:
                    links = " / ".join(f"{v:.3g}" for v in p["busiest_links"].values())
                    secs = "not run" if p["seconds"] is None else f"{p['seconds']:.6g}"
                    ratio = ("-" if p["ratio_to_default"] is None
                             else f"{p['ratio_to_default']:.3f}")
                    print(f"| {machine} | {app} | {ranks} | {p['name']} | {secs} | {ratio} | "
                          f"{p['J']:.4g} | {links} | {p['note']} |", flush=True)
                print(f"<!-- {machine} {app} {ranks}: {rec['wall_seconds']:.0f} s wall -->",
                      flush=True)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
