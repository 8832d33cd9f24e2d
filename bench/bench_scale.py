"""Scale (issue 12 item 6): ``rankmap plan`` on 2^10..2^22 ranks, and the prolog path.

Run by hand (not a test)::

    .venv/bin/python bench/bench_scale.py                      # 2^10, 2^17, 2^20 ranks
    .venv/bin/python bench/bench_scale.py --ranks 4194304      # the Fugaku-class job
    .venv/bin/python bench/bench_scale.py --prolog-only
    .venv/bin/python bench/bench_scale.py --mesh 100           # a 10^6-vertex mesh job
    .venv/bin/python bench/bench_scale.py --mesh 100 --mesh-speeds   # ... unequal speeds

Each size runs ``rankmap plan --json`` (slurm_plugin.commands.plan_cli) in a fresh process
under ``/usr/bin/time``: a generated ``stencil3d`` profile on nodes of ``Sockets=2
CoresPerSocket=64`` under a generated 3-level switch tree (leaf switches of 32 nodes,
16 leaves per aggregation switch, one top switch), preset ``fast``, a time limit
large enough that the solver is not cut short.  The table gives the phase times the
plan reports (wall seconds inside the process), the process's wall and CPU (user+sys)
time from Python start to exit, and its peak RSS.  ``--before`` runs the same
command without ``--json`` (for a checkout that does not have it): totals only.

The prolog path (issue 12: "Python start to rankfile written" for 1024 ranks) runs
``rankmap-prolog`` itself (slurm_plugin.lifecycle.prolog) on 8 nodes x 128 cores with a stand-in
``scontrol`` in ``[slurm] bin_dir``: it reads the configuration, starts the worker
process (slurm_plugin.lifecycle.job_worker), which reads the allocation and node shapes through
``scontrol``, maps, renders and writes the rankfile.  The time is from the prolog's
start to its exit (the rankfile is written before the report, and the report before
the worker exits).

Targets (issue 12 item 6, one core of this machine): 2^20 ranks solver < 8 s and plan
< 15 s; 2^22 ranks plan < 120 s and < 8 GB; prolog path for 1024 ranks < 1.5 s.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOCKETS, CORES = 2, 64
LEAF_NODES, LEAVES_PER_AGG = 32, 16
TARGETS = {1 << 20: (8.0, 15.0, None), 1 << 22: (None, 120.0, 8 << 30)}
PHASES = ("profile", "layout", "default_placements", "construction", "search",
          "baseline", "evaluation", "report", "render", "write")


def topology_conf(nodes: int) -> str:
    """Three switch levels over n[1-nodes]: leaves of LEAF_NODES nodes, aggregation
    switches of LEAVES_PER_AGG leaves, one top switch."""
    lines = []
    leaves = -(-nodes // LEAF_NODES)
    for i in range(leaves):
        lines.append(f"SwitchName=l{i} Nodes=n[{i * LEAF_NODES + 1}-"
                     f"{min(nodes, (i + 1) * LEAF_NODES)}]")
    aggs = -(-leaves // LEAVES_PER_AGG)
    for j in range(aggs):
        lines.append(f"SwitchName=a{j} Switches=l[{j * LEAVES_PER_AGG}-"
                     f"{min(leaves, (j + 1) * LEAVES_PER_AGG) - 1}]")
    lines.append(f"SwitchName=top Switches=a[0-{aggs - 1}]")
    return "\n".join(lines) + "\n"


def timed(cmd: list[str], env: dict[str, str] | None = None, limit_gb: float = 16.0
          ) -> tuple[subprocess.CompletedProcess, dict[str, float]]:
    """Run ``cmd`` under /usr/bin/time; wall, user, sys seconds and peak RSS bytes.
    An address-space limit of ``limit_gb`` stops a run that would grow beyond it."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as tf:
        full = ["/usr/bin/time", "-f", "%e %U %S %M", "-o", tf.name,
                "prlimit", f"--as={int(limit_gb * (1 << 30))}", *cmd]
        proc = subprocess.run(full, capture_output=True, text=True, env=env, cwd=ROOT,
                              check=False)
        wall, user, sys_, rss_kb = tf.read().split()[-4:]
    return proc, {"wall": float(wall), "cpu": float(user) + float(sys_),
                  "rss": int(rss_kb) * 1024}


def plan_run(ranks: int, work: Path, json_out: bool, time_limit: float, preset: str
             ) -> dict:
    nodes = ranks // (SOCKETS * CORES)
    conf = work / f"topology-{nodes}.conf"
    conf.write_text(topology_conf(nodes))
    out = work / f"out-{ranks}"
    cmd = [sys.executable, "-m", "slurm_plugin.commands.cli", "plan", "--nodes", f"n[1-{nodes}]",
           "--node-info", f"Sockets={SOCKETS} CoresPerSocket={CORES}",
           "--topology-conf", str(conf), "--profile", "stencil3d", "--preset", preset,
           "--time-limit", str(time_limit), "--out", str(out)]
    if json_out:
        cmd.append("--json")
    proc, res = timed(cmd)
    if proc.returncode != 0:
        raise SystemExit(f"{ranks} ranks failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    res["ranks"] = ranks
    res["rankfile"] = (out / "rankfile").is_file()
    if json_out:
        summary = json.loads(proc.stdout.strip().splitlines()[-1])
        res["phases"] = summary["timings"]
        res["applied"] = summary["applied"]
        res["solver"] = summary["solver_seconds"]
    return res


FAKE_SCONTROL = """#!/bin/sh
case "$*" in
  'show job'*) echo 'JobId=7 UserId=root(0) GroupId=root(0) NodeList=n[1-{nodes}] \
BatchHost=n1 NumNodes={nodes} NumCPUs={ranks} NumTasks={ranks} CPUs/Task=1 \
Nodes=n[1-{nodes}] CPU_IDs=0-{last} Mem=0';;
  'show node'*) for i in $(seq 1 {nodes}); do echo "NodeName=n$i Sockets={sockets} \
CoresPerSocket={cores} ThreadsPerCore=1 CPUTot={cpus}"; done;;
  *) exit 1;;
esac
"""


def write_grid_mesh(path: Path, side: int) -> None:
    """A side^3 7-point grid as a METIS .graph file (vertex v = x + side*(y + side*z))."""
    import numpy as np

    n = side ** 3
    idx = np.arange(n).reshape(side, side, side)
    cols = []
    for axis in range(3):
        for shift in (-1, 1):
            nb = np.roll(idx, shift, axis=axis)
            edge = np.ones_like(idx, dtype=bool)
            sl = [slice(None)] * 3
            sl[axis] = 0 if shift == 1 else side - 1
            edge[tuple(sl)] = False
            cols.append(np.where(edge, nb, -1).ravel())
    adj = np.stack(cols, axis=1) + 1                       # 1-based, 0 = no neighbour
    m = int((adj > 0).sum()) // 2
    with open(path, "w") as f:
        f.write(f"{n} {m}\n")
        for row in adj:
            f.write(" ".join(str(c) for c in row if c > 0) + "\n")


def prolog_run(work: Path, nodes: int = 8, repeats: int = 3,
               profile: str = "stencil3d", store: Path | None = None,
               extra_config: str = "") -> dict:
    """``rankmap-prolog`` for one job of ``nodes`` x 128 ranks; the best of ``repeats``
    (wall) and the CPU time of that run, the worker included.  ``profile`` is the
    job's --comm-profile (``store`` its profile store), e.g. ``mesh:NAME``."""
    ranks = nodes * SOCKETS * CORES
    bin_dir = work / "bin"
    bin_dir.mkdir(exist_ok=True)
    scontrol = bin_dir / "scontrol"
    scontrol.write_text(FAKE_SCONTROL.format(nodes=nodes, ranks=ranks, last=SOCKETS * CORES - 1,
                                             sockets=SOCKETS, cores=CORES,
                                             cpus=SOCKETS * CORES))
    scontrol.chmod(0o755)
    conf = work / "prolog-topology.conf"
    conf.write_text(topology_conf(nodes))
    config = work / "rankmap.toml"
    config.write_text(f'[general]\noutput_dir = "{work}/run"\nlog_file = "{work}/prolog.log"\n'
                      f'[slurm]\nbackend = "scontrol"\nbin_dir = "{bin_dir}"\n'
                      f'topology = "{conf}"\n'
                      + (f'[profiles]\nstores = ["{store}"]\n' if store else "")
                      + extra_config)
    best: dict | None = None
    for i in range(repeats):
        env = {"PATH": "/usr/bin:/bin", "RANKMAP_CONFIG": str(config),
               "SLURM_JOB_ID": str(100 + i), "SLURM_JOB_NODELIST": f"n[1-{nodes}]",
               "SLURMD_NODENAME": "n1", "SPANK_RANKMAP_COMM_PROFILE": profile}
        proc, res = timed([str(Path(sys.executable).with_name("rankmap-prolog"))], env)
        rankfile = work / "run" / f"job.{100 + i}" / "rankfile"
        if not rankfile.is_file():
            report = work / "run" / f"job.{100 + i}" / "report.txt"
            raise SystemExit(f"prolog wrote no rankfile: {proc.stderr[-1000:]}\n"
                             f"{report.read_text() if report.is_file() else ''}")
        res["report"] = (work / "run" / f"job.{100 + i}" / "report.txt").read_text()
        if best is None or res["wall"] < best["wall"]:
            best = res
    assert best is not None
    best["ranks"] = ranks
    return best


def _fmt_phases(phases: dict[str, float] | None) -> list[str]:
    if phases is None:
        return ["n/a"] * (len(PHASES) + 1)
    return [f"{phases.get(p, 0.0):.2f}" for p in PHASES] + [f"{phases['total']:.2f}"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, nargs="*", default=[1 << 10, 1 << 17, 1 << 20])
    ap.add_argument("--preset", default="fast")
    ap.add_argument("--time-limit", type=float, default=600.0)
    ap.add_argument("--before", action="store_true",
                    help="no --json (a checkout without phase times): totals only")
    ap.add_argument("--prolog-only", action="store_true")
    ap.add_argument("--no-prolog", action="store_true")
    ap.add_argument("--mesh", type=int, metavar="SIDE", default=0,
                    help="instead: a mesh job (issue 10 item 7): the prolog decomposes a "
                         "SIDE^3 grid (100: 10^6 vertices) onto 32 nodes x 128 cores")
    ap.add_argument("--mesh-speeds", action="store_true",
                    help="with --mesh: nodes n[1-16] twice as fast ([speeds]), so the "
                         "job's default method is ElTS")
    args = ap.parse_args()
    if args.mesh:
        return mesh_main(args.mesh, args.mesh_speeds)
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        work = Path(tmp)
        rows = []
        if not args.prolog_only:
            head = ["ranks", *PHASES, "total", "wall s", "CPU s", "peak RSS", "targets"]
            print("| " + " | ".join(head) + " |")
            print("|" + "---|" * len(head))
            for ranks in args.ranks:
                r = plan_run(ranks, work, not args.before, args.time_limit, args.preset)
                rows.append(r)
                solver = r.get("solver")  # map_processes' own wall seconds
                target = TARGETS.get(ranks)
                verdict = ""
                if target:
                    t_solver, t_plan, t_mem = target
                    parts = []
                    if t_solver is not None and solver is not None:
                        parts.append(f"solver {solver:.1f} (wall) < {t_solver:g}: "
                                     f"{'met' if solver < t_solver else 'NOT met'}")
                    parts.append(f"plan {r['wall']:.1f} (CPU {r['cpu']:.1f}) < {t_plan:g}: "
                                 f"{'met' if max(r['wall'], r['cpu']) < t_plan else 'NOT met'}")
                    if t_mem is not None:
                        parts.append(f"RSS < {t_mem >> 30} GB: "
                                     f"{'met' if r['rss'] < t_mem else 'NOT met'}")
                    verdict = "; ".join(parts)
                print(f"| {ranks} | " + " | ".join(_fmt_phases(r.get("phases")))
                      + f" | {r['wall']:.1f} | {r['cpu']:.1f} | {r['rss'] / 2**20:.0f} MB"
                      f" | {verdict} |", flush=True)
        if not args.no_prolog:
            p = prolog_run(work)
            print(f"\nprolog path, {p['ranks']} ranks (rankmap-prolog start to exit, "
                  f"rankfile written; best of 3): wall {p['wall']:.2f} s, CPU "
                  f"{p['cpu']:.2f} s, peak RSS {p['rss'] / 2**20:.0f} MB; target < 1.5 s: "
                  f"{'met' if p['wall'] < 1.5 else 'NOT met'}")
    print(f"\n(load average {os.getloadavg()[0]:.2f}; {time.strftime('%Y-%m-%d %H:%M')})")
    return 0


def mesh_main(side: int, speeds: bool = False) -> int:
    """The mesh job's prolog path: store entry ``kind = "mesh"`` holding a side^3 grid,
    ``--comm-profile=mesh:grid``, 32 nodes x 128 cores (4096 ranks), the default 5 s
    solver budget; prints the prolog's wall/CPU and the report's outcome and phases."""
    with tempfile.TemporaryDirectory(prefix="bench-scale-mesh-") as tmp:
        work = Path(tmp)
        store = work / "store"
        store.mkdir()
        t0 = time.perf_counter()
        write_grid_mesh(store / "grid.graph", side)
        (store / "grid.toml").write_text('kind = "mesh"\nfile = "grid.graph"\n')
        print(f"{side}^3 grid written in {time.perf_counter() - t0:.1f} s")
        extra = '[speeds]\nnodes = { "n[1-16]" = 2.0 }\n' if speeds else ""
        p = prolog_run(work, nodes=32, repeats=1, profile="mesh:grid", store=store,
                       extra_config=extra)
        print(f"mesh prolog path, {side ** 3} vertices onto {p['ranks']} ranks "
              f"(rankmap-prolog start to exit): wall {p['wall']:.2f} s, CPU {p['cpu']:.2f} s, "
              f"peak RSS {p['rss'] / 2**20:.0f} MB\n")
        print(p["report"])
    print(f"(load average {os.getloadavg()[0]:.2f}; {time.strftime('%Y-%m-%d %H:%M')})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
