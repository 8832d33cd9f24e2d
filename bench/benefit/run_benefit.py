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
``halo`` = halo3d on the near-cubic grid of generator ``stencil3d`` (periodic);
``halo-axes`` = the same exchanged one dimension after the other (halo3d ``-s``),
profile ``stencil3d:…,exchange=axes`` (one phase per dimension; ``axes_phases.py CASE``
compares phase models with the simulation);
``cg`` =
cg_like with generator ``npb-cg`` (power-of-two rank counts); ``lulesh`` = LULESH 2.0
(LLNL's proxy app, built by ``sh bench/benefit/fetch_lulesh.sh``; cube rank counts),
``-s --lulesh-size -i --iterations``, mapped with its own SMPI trace: the first time a
rank count is met, LULESH runs once under ``smpirun -trace-ti`` and ``rankmap profile
import --format smpi-ti`` stores profile ``lulesh-N`` in WORK/lulesh-sS-iI (kept for
later runs).  ``--lulesh-generator`` adds a row for rankmap mapping it with generator
``stencil3d:AxAxA`` instead (faces only, non-periodic; LULESH's rank numbering is the
generator's: rank = (plane * A + row) * A + col).  LULESH prints no iteration-loop
time: its time is SMPI's simulated time of the whole run.  ``hpcg`` = HPCG 3.1 (built by
``sh bench/benefit/fetch_hpcg.sh``; any rank count its process grid accepts),
``--nx=--ny=--nz=--hpcg-size --rt=0`` (its quick path: one CG set), traced, imported
(profile ``hpcg-N`` in WORK/hpcg-nS) and simulated the same way; HPCG picks its own
3D process grid (npx ≥ npy ≥ npz, rank = (z·npy + y)·npx + x) and runs in the case
directory, where it writes its reports.  ``--keep-trace`` keeps a traced app's trace
(CASE/trace/APP.ti; ``hpcg_phases.py`` splits HPCG's by multigrid level).

``--distinct`` simulates each distinct placement once: ``rankmap simulate
--platform-only`` writes all hostfiles, placements equal to an earlier one take its
time (said in the note), the others run with rankmap simulate's smpirun command.

``--unguarded`` adds the solver's own result (no never-worse rule); ``--objectives
congestion J`` simulates both solver objectives in the same run (rows ``rankmap ALG``
and ``rankmap ALG [J]``; bench/README.md, "Aiming at the busiest links").

Example: ``python3 bench/benefit/run_benefit.py --ranks 128 256 1024 --machines tree3
--apps halo``.  Simulations run one after the other (one core each).
"""

from __future__ import annotations

import argparse
import filecmp
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from slurm_plugin.commands.simulate_cli import parse_times, smpirun_command  # noqa: E402
from slurm_plugin.profiles.generators import near_factors  # noqa: E402
from slurm_plugin.slurm.topology import parse_node_shape  # noqa: E402


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


def build(build_dir: Path, apps: list[str]) -> dict[str, Path]:
    """Compile our apps among ``apps`` with smpicc into ``build_dir``."""
    build_dir.mkdir(parents=True, exist_ok=True)
    out = {}
    for src, users in (("halo3d.c", ("halo", "halo-axes")), ("cg_like.c", ("cg",))):
        wanted = [app for app in users if app in apps]
        if not wanted:
            continue
        exe = build_dir / src.removesuffix(".c")
        subprocess.run(["smpicc", "-O2", "-o", str(exe), str(HERE / src)], check=True)
        out.update(dict.fromkeys(wanted, exe))
    return out


def cube_side(ranks: int) -> int | None:
    """A with A**3 == ranks, else None (LULESH runs on cube rank counts only)."""
    side = round(ranks ** (1 / 3))
    return side if side ** 3 == ranks else None


# traced apps: (binary option, archive, fetch script, name of the built binary)
TRACED = {"lulesh": ("--lulesh", "lulesh-2.0.tar.gz", "fetch_lulesh.sh", "lulesh2.0"),
          "hpcg": ("--hpcg", "hpcg-3.1.tar.gz", "fetch_hpcg.sh", "xhpcg")}


def traced_binary(app: str, path: str) -> Path:
    """The SMPI binary of traced ``app``, or exit saying how to build it."""
    exe = Path(path).resolve()
    if not exe.is_file():
        option, archive, script, _ = TRACED[app]
        raise SystemExit(
            f"{app} binary not found: {exe}\nbuild it (needs the unmodified {archive}; "
            f"see the script): sh {HERE / script} {exe.parent} [TARBALL]\n"
            f"or pass {option} PATH")
    return exe


def traced_case(app: str, ranks: int, args: argparse.Namespace,
                ) -> tuple[str, list[str], str, str] | None:
    """(stencil3d dims for the tracing platform, command, profile store's name,
    description) of traced ``app`` at ``ranks``, or None when it does not run there."""
    if app == "lulesh":
        side = cube_side(ranks)
        if side is None:
            return None
        return (f"{side}x{side}x{side}",
                [str(traced_binary(app, args.lulesh)), "-s", str(args.lulesh_size),
                 "-i", str(args.iterations)],
                f"lulesh-s{args.lulesh_size}-i{args.iterations}", "LULESH 2.0")
    # HPCG picks its own process grid from the rank count (ComputeOptimalShapeXYZ);
    # the tracing platform's profile only shapes placements that are not used.  --rt=0
    # is HPCG's quick path: one CG set.  With --rt=T the number of sets is T over the
    # simulated time of a first CG solve, so it would differ from placement to placement
    n = args.hpcg_size
    return ("x".join(map(str, near_factors(ranks, 3))),
            [str(traced_binary(app, args.hpcg)), f"--nx={n}", f"--ny={n}", f"--nz={n}",
             "--rt=0"],
            f"hpcg-n{n}", "HPCG 3.1")


def run_checked(cmd: list[str], what: str, cwd: Path | None = None) -> str:
    """stdout of ``cmd`` (run in ``cwd``); exit with its output when it fails."""
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=cwd)
    if proc.returncode:
        raise SystemExit(f"{what} failed ({proc.returncode}): {' '.join(cmd)}\n"
                         f"{(proc.stdout + proc.stderr)[-3000:]}")
    return proc.stdout


def traced_profile(base_cmd: list[str], case: Path, store: Path, app: str, ranks: int,
                   dims: str, command: list[str], description: str, keep: bool = False,
                   ) -> str:
    """Name of ``app``'s profile at ``ranks`` in ``store``, traced and imported if absent.

    The trace is time-independent (volumes, not times), so any placement will do: the
    platform and block hostfile of ``rankmap simulate --platform-only`` on this case (its
    profile, generator ``stencil3d:DIMS``, only shapes the other placements).  The
    program runs in ``case`` (HPCG writes its reports into its working directory).  The
    trace is deleted after the import unless ``keep`` (then CASE/trace/APP.ti)."""
    name = f"{app}-{ranks}"
    if (store / f"{name}.toml").exists():
        return name
    tdir = case / "trace"
    run_checked([*base_cmd, "--profile", f"stencil3d:{dims}",
                 "--out", str(tdir), "--platform-only", "--", *command],
                "rankmap simulate --platform-only")
    trace = tdir / f"{app}.ti"
    run_checked(["smpirun", "-platform", str(tdir / "platform.xml"),
                 "-hostfile", str(tdir / "hostfile.0.block"), "-np", str(ranks),
                 "--cfg=smpi/simulate-computation:no", "-trace-ti",
                 f"--cfg=tracing/filename:{trace}", *command], f"traced {app} run", cwd=case)
    store.mkdir(parents=True, exist_ok=True)
    run_checked(["rankmap", "profile", "import", "--format", "smpi-ti", str(trace),
                 "--name", name, "--store", str(store), "--description",
                 f"{description} {' '.join(command[1:])}, {ranks} ranks, SMPI -trace-ti"],
                "rankmap profile import")
    if not keep:
        # the per-rank trace files are large (hundreds of MB at 4096 ranks); the profile
        # holds what rankmap needs
        shutil.rmtree(tdir / f"{app}.ti_files", ignore_errors=True)
        trace.unlink(missing_ok=True)
    return name


def app_args(app: str, ranks: int, exe: Path, nbytes: int, iters: int,
             ) -> tuple[str, list[str]] | None:
    """(profile spec, command) of ``app`` at ``ranks``, or None when it does not fit."""
    if app in ("halo", "halo-axes"):
        dims = "x".join(map(str, near_factors(ranks, 3)))
        if app == "halo-axes":  # its phases: one per dimension, each rank on its own
            return (f"stencil3d:{dims},periodic,bytes={nbytes},exchange=axes",
                    [str(exe), "-d", dims, "-p", "-s", "-b", str(nbytes), "-i", str(iters)])
        return (f"stencil3d:{dims},periodic,bytes={nbytes}",
                [str(exe), "-d", dims, "-p", "-b", str(nbytes), "-i", str(iters)])
    if ranks & (ranks - 1):
        return None
    return f"npb-cg:bytes={nbytes}", [str(exe), "-b", str(nbytes), "-i", str(iters)]


def generator_row(base_cmd: list[str], case: Path, side: int, command: list[str],
                  rec: dict) -> dict:
    """Row of rankmap's placement for LULESH mapped with ``stencil3d:AxAxA`` (faces
    only) instead of its trace; simulated unless it equals a placement already run
    (``--platform-only`` gives the placement first; the run skips Slurm's, which
    ``rec`` already has)."""
    spec = f"stencil3d:{side}x{side}x{side}"
    gdir = case / "stencil3d"
    gen = [*base_cmd, "--profile", spec, "--out", str(gdir), "--json"]
    planned = json.loads(run_checked([*gen, "--platform-only", "--", *command],
                                     "rankmap simulate --platform-only"))
    mine = planned["placements"][3]  # block, cyclic, scrambled, then rankmap's
    seconds, note = None, f"mapped with {spec}: {mine['note']}"
    for p in rec["placements"]:
        if p["seconds"] is not None and filecmp.cmp(p["hostfile"], mine["hostfile"],
                                                    shallow=False):
            seconds, note = p["seconds"], f"{note}; same placement as {p['name']}"
            break
    if seconds is None:
        skip = [x for name in ("block", "cyclic", "scrambled") for x in ("--skip", name)]
        ran = json.loads(run_checked([*gen, *skip, "--", *command], "rankmap simulate"))
        seconds = ran["placements"][3]["seconds"]
    block = rec["placements"][0]["seconds"]
    # J and link volumes of this row are in the generator's units: not comparable with
    # the trace profile's rows, so left out
    return {"name": f"{mine['name']} [{spec}]", "seconds": seconds,
            "simulated_total": seconds, "J": None,
            "note": note, "hostfile": mine["hostfile"], "busiest_links": {},
            "ratio_to_default": seconds / block if seconds and block else None}


def hpcg_times(report: Path) -> dict[str, float]:
    """HPCG's "Benchmark Time Summary" (simulated seconds of its timed CG set: DDOT =
    the dot products' allreduces, SpMV and MG = their halo exchanges, Total) from its
    HPCG-Benchmark_*.txt report."""
    out = {}
    for line in report.read_text().splitlines():
        key, _, value = line.partition("=")
        if key.startswith("Benchmark Time Summary::"):
            out[key.split("::")[1]] = float(value)
    return out


def simulate_distinct(cmd: list[str], case: Path, skip: list[str]) -> dict:
    """``rankmap simulate``'s record for ``cmd`` (… ``--json -- PROGRAM``), each distinct
    placement simulated once: ``--platform-only`` writes every placement's hostfile, a
    placement whose hostfile equals an earlier one's takes that one's time (said in its
    note), the others run with the smpirun command rankmap simulate uses, in ``case``."""
    split = cmd.index("--")
    rec = json.loads(run_checked([*cmd[:split], "--platform-only", *cmd[split:]],
                                 "rankmap simulate --platform-only"))
    opts = argparse.Namespace(smpirun="smpirun", measured_compute=False, replay=None)
    done: list[dict] = []
    for p in rec["placements"]:
        if p["name"] in skip:
            continue
        same = next((q for q in done if filecmp.cmp(q["hostfile"], p["hostfile"],
                                                    shallow=False)), None)
        if same is not None:
            p["seconds"], p["simulated_total"] = same["seconds"], same["simulated_total"]
            if "hpcg_times" in same:
                p["hpcg_times"] = same["hpcg_times"]
            p["note"] = f"{p['note']}; same placement as {same['name']}"
        else:
            run = smpirun_command(opts, Path(rec["platform"]), Path(p["hostfile"]),
                                  rec["ranks"], cmd[split + 1:])
            start = time.perf_counter()
            before = set(case.glob("HPCG-Benchmark_*.txt"))
            proc = subprocess.run(run, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, check=False, cwd=case)
            for report in sorted(set(case.glob("HPCG-Benchmark_*.txt")) - before):
                p["hpcg_times"] = hpcg_times(report)
                report.rename(Path(p["hostfile"]).with_name(
                    "HPCG-Benchmark." + Path(p["hostfile"]).name.removeprefix("hostfile.")))
            app, total = parse_times(proc.stdout)
            if proc.returncode or total is None:
                raise SystemExit(f"smpirun failed ({proc.returncode}): {' '.join(run)}\n"
                                 f"{proc.stdout[-3000:]}")
            p["seconds"] = app if app is not None else total
            p["simulated_total"] = total
            print(f"<!-- {p['name']}: {time.perf_counter() - start:.0f} s wall -->",
                  file=sys.stderr, flush=True)
        done.append(p)
    block = rec["placements"][0]["seconds"]
    for p in rec["placements"]:
        p["ratio_to_default"] = (p["seconds"] / block if p["seconds"] and block else None)
    (case / "results.json").write_text(json.dumps(rec, indent=2) + "\n")
    return rec


def print_rows(machine: str, app: str, ranks: int, rec: dict) -> None:
    """The Markdown rows of one case."""
    for p in rec["placements"]:
        links = " / ".join(f"{v:.3g}" for v in p["busiest_links"].values()) or "-"
        secs = "not run" if p["seconds"] is None else f"{p['seconds']:.6g}"
        ratio = "-" if p["ratio_to_default"] is None else f"{p['ratio_to_default']:.3f}"
        j = "-" if p["J"] is None else f"{p['J']:.4g}"
        note = p["note"]
        if "hpcg_times" in p:  # HPCG's own timer, simulated: its timed CG set
            t = p["hpcg_times"]
            note += (f"; HPCG timed set {t['Total']:.4g} s (DDOT {t['DDOT']:.3g}, SpMV "
                     f"{t['SpMV']:.3g}, MG {t['MG']:.3g})")
        print(f"| {machine} | {app} | {ranks} | {p['name']} | {secs} | {ratio} | {j} | "
              f"{links} | {note} |", flush=True)
    print(f"<!-- {machine} {app} {ranks}: {rec['wall_seconds']:.0f} s wall -->", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[128, 256, 1024])
    ap.add_argument("--machines", nargs="+", default=["tree3"],
                    choices=["tree2", "tree3", "interleaved"])
    ap.add_argument("--apps", nargs="+", default=["halo"],
                    choices=["halo", "halo-axes", "cg", "lulesh", "hpcg"])
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
    ap.add_argument("--objectives", nargs="+", default=["congestion"],
                    choices=["congestion", "J"],
                    help="solver objectives, the first as 'rankmap ALG', the others as "
                    "'rankmap ALG [OBJ]' (rankmap simulate --objective)")
    ap.add_argument("--timeout", type=float, default=3600.0,
                    help="seconds per simulation (rankmap simulate --timeout); 4096 ranks "
                    "need more than an hour on a busy 2-core machine")
    ap.add_argument("--skip", nargs="*", default=[], metavar="PLACEMENT",
                    help="placements not to simulate (passed to rankmap simulate --skip)")
    ap.add_argument("--distinct", action="store_true",
                    help="simulate each distinct placement once (rankmap simulate "
                    "--platform-only, then smpirun per distinct hostfile); a placement equal "
                    "to an earlier one takes its time")
    ap.add_argument("--keep-trace", action="store_true",
                    help="traced apps: keep the trace (CASE/trace/APP.ti and its per-rank "
                    "files; bench/benefit/hpcg_phases.py reads HPCG's)")
    ap.add_argument("--lulesh", default="/tmp/rankmap-lulesh/lulesh2.0",
                    help="LULESH binary (sh bench/benefit/fetch_lulesh.sh DIR builds "
                    "DIR/lulesh2.0)")
    ap.add_argument("--lulesh-size", type=int, default=6,
                    help="LULESH -s: elements per rank along each edge")
    ap.add_argument("--lulesh-generator", action="store_true",
                    help="also simulate rankmap's placement for LULESH mapped with "
                    "generator stencil3d:AxAxA instead of its trace")
    ap.add_argument("--hpcg", default="/tmp/rankmap-hpcg/xhpcg",
                    help="HPCG binary (sh bench/benefit/fetch_hpcg.sh DIR builds DIR/xhpcg)")
    ap.add_argument("--hpcg-size", type=int, default=16,
                    help="HPCG --nx=--ny=--nz=: local grid points per rank along each edge "
                    "(HPCG raises values below 16 to 16)")
    ap.add_argument("--work-dir", default="/tmp/rankmap-benefit")
    ap.add_argument("--json-out", metavar="FILE")
    args = ap.parse_args()
    if shutil.which("smpicc") is None or shutil.which("smpirun") is None:
        raise SystemExit("smpicc/smpirun not found: apt-get install libsimgrid-dev simgrid")
    for app in TRACED:
        if app in args.apps:
            traced_binary(app, getattr(args, app))  # before any long run
    work = Path(args.work_dir).resolve()
    exes = build(work / "build", args.apps)
    cores = parse_node_shape(args.node_info).cores
    results = []
    print("| machine | app | ranks | placement | simulated s | ratio to block | J "
          "| busiest link per level (node, leaf, …) | note |")
    print("|---|---|---|---|---|---|---|---|---|")
    for machine in args.machines:
        for app in args.apps:
            for ranks in args.ranks:
                if ranks % cores:
                    continue
                if app in TRACED:
                    traced = traced_case(app, ranks, args)
                    if traced is None:
                        continue
                    dims, command, store_name, description = traced
                    profile = None
                else:
                    spec = app_args(app, ranks, exes[app], args.bytes, args.iterations)
                    if spec is None:
                        continue
                    profile, command = spec
                nodes = ranks // cores
                case = work / f"{machine}-{app}-{ranks}"
                case.mkdir(parents=True, exist_ok=True)
                conf = case / "topology.conf"
                conf.write_text(topology_conf(machine, nodes, args.leaf_nodes, args.fanout))
                base = ["rankmap", "simulate", "--nodes", f"n[0-{nodes - 1}]",
                        "--node-info", args.node_info, "--topology-conf", str(conf),
                        "--algorithm", args.algorithm, "--time-limit", str(args.time_limit),
                        "--oversubscription", args.oversubscription]
                start = time.perf_counter()
                if profile is None:
                    store = work / store_name
                    profile_args = ["--store", str(store), "--profile",
                                    traced_profile(base, case, store, app, ranks, dims,
                                                   command, description, args.keep_trace)]
                else:
                    profile_args = ["--profile", profile]
                cmd = [*base, *profile_args, "--out", str(case), "--json",
                       *(["--unguarded"] if args.unguarded else []),
                       *(x for obj in args.objectives for x in ("--objective", obj)),
                       "--timeout", str(args.timeout),
                       *(x for name in args.skip for x in ("--skip", name)),
                       "--", *command]
                if args.distinct:
                    rec = simulate_distinct(cmd, case, args.skip)
                else:
                    proc = subprocess.run(cmd, capture_output=True, text=True,
                                          check=False, cwd=case)
                    if proc.returncode:
                        print(f"FAILED: {' '.join(cmd)}\n{proc.stderr}", file=sys.stderr)
                        continue
                    rec = json.loads(proc.stdout)
                if app == "lulesh" and args.lulesh_generator:
                    rec["placements"].append(generator_row(base, case, cube_side(ranks),
                                                           command, rec))
                rec.update(machine=machine, app=app, command=cmd,
                           wall_seconds=time.perf_counter() - start)
                results.append(rec)
                print_rows(machine, app, ranks, rec)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
