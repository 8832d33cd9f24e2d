"""``rankmap simulate``: simulated run time of an MPI program per placement (SimGrid SMPI).

Same inputs as ``rankmap plan`` (node list, node shape, topology.conf, profile,
algorithms) plus link parameters.  Writes ``platform.xml`` (see
:mod:`slurm_plugin.simulate.platform`) and one hostfile per placement into ``--out``,
runs ``smpirun -platform platform.xml -hostfile H -np N PROGRAM ARGS`` for each (one
after the other), and prints a table: placement, simulated time, ratio to Slurm's
block placement, J.

Deterministic by default: ``--cfg=smpi/simulate-computation:no`` (the program's own CPU
time is not simulated; compute is whatever it declares with ``smpi_execute_flops``), so
the same inputs give bit-identical times.  ``--measured-compute`` simulates the
measured CPU bursts instead (then times vary from run to run).  The time is the
program's ``rankmap-sim-time SECONDS`` line when it prints one (the apps in
bench/benefit do: their iteration loop), else SMPI's ``Simulated time`` line
(``--cfg=smpi/display-timing:yes``: the whole run).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mapper import CommGraph
from mapper.errors import RankmapError

from ..machine.distribution import parse_distribution
from ..machine.layout import Layout
from ..simulate.placements import Placement, hosts_per_rank, placements
from ..simulate.platform import (
    HOST_BW,
    HOST_LAT,
    HOST_SPEED,
    LOOPBACK_BW,
    LOOPBACK_LAT,
    UPLINK_LAT,
    NetworkParams,
    build_platform,
    parse_bandwidth,
    parse_host_speeds,
    parse_latency,
)
from ..site.config import load_config
from ..slurm.allocation import Allocation
from ..slurm.topology import NodeShape, SwitchTree, TopologyError
from .args import CliError
from .plan_cli import add_job_arguments, job_inputs

DEFAULT_ALGORITHM = "topdown+n10"


class SimulationError(RankmapError, ValueError):
    """smpirun failed or printed no time; the message carries its last output lines
    (a ValueError, so that the CLI reports it in one line like other bad input)."""


def add_simulate_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "simulate", help="simulated run time per placement (SimGrid SMPI)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run an SMPI program (compiled with smpicc) under smpirun once per "
                    "placement — Slurm block, Slurm cyclic, scrambled, and rankmap for "
                    "every --algorithm — on a SimGrid platform built from the switch "
                    "tree, and print the simulated times beside J.",
        epilog="example:\n  rankmap simulate --nodes n[1-4] --node-info 'Sockets=2 "
               "CoresPerSocket=4' \\\n    --profile stencil3d:2x4x4,periodic --out /tmp/sim "
               "-- bench/benefit/build/halo3d -d 2x4x4 -p")
    add_job_arguments(p, profile_help="store name, generator spec or matrix file: what "
                                      "rankmap maps and J is computed on (match it to the "
                                      "program)")
    p.add_argument("--algorithm", action="append", metavar="ALG",
                   help=f"rankmap algorithm, repeatable: one row each (default: the site "
                        f"config's, else {DEFAULT_ALGORITHM})")
    p.add_argument("--seed", type=int, default=0, help="solver and scrambled-placement seed")
    p.add_argument("--skip", action="append", default=[], metavar="PLACEMENT",
                   choices=["block", "cyclic", "scrambled"],
                   help="do not simulate this placement (its J and links are still shown; "
                        "repeatable): saves time at thousands of ranks; skipping block, "
                        "the reference, leaves the ratios empty")
    p.add_argument("--unguarded", action="store_true",
                   help="also run each algorithm's own result, without the never-worse "
                        "comparison with Slurm's default (to measure that rule)")
    p.add_argument("--objective", action="append", choices=["congestion", "J"],
                   metavar="OBJ",
                   help="solver objective, repeatable: one row per algorithm each, the "
                        "first as 'rankmap ALG', the others 'rankmap ALG [OBJ]' (default: "
                        "the site config's [solver] objective)")
    net = p.add_argument_group(
        "network", "SimGrid units (12.5GBps, 100Gbps, 1us); an uplink's bandwidth is the "
                   "sum of the host links below it / the oversubscription unless given")
    net.add_argument("--host-bw", default=f"{HOST_BW / 1e9:g}GBps",
                     help="node <-> leaf switch link (default %(default)s = 100 Gb/s)")
    net.add_argument("--host-lat", default=f"{HOST_LAT * 1e6:g}us",
                     help="node <-> leaf switch latency (default %(default)s)")
    net.add_argument("--uplink-bw", default="", metavar="BW[:BW...]",
                     help="uplink bandwidth per level, leaf uplinks first, last repeats "
                          "(default: derived)")
    net.add_argument("--uplink-lat", default=f"{UPLINK_LAT * 1e6:g}us", metavar="LAT[:LAT...]",
                     help="uplink latency per level, leaf uplinks first, last repeats "
                          "(default %(default)s)")
    net.add_argument("--oversubscription", default="4:1",
                     help="uplink oversubscription, e.g. 4:1, 2, 1:1 (default %(default)s)")
    net.add_argument("--loopback-bw", default=f"{LOOPBACK_BW / 1e9:g}GBps",
                     help="ranks on the same node (default %(default)s)")
    net.add_argument("--loopback-lat", default=f"{LOOPBACK_LAT * 1e6:g}us",
                     help="ranks on the same node (default %(default)s)")
    net.add_argument("--host-speed", default=f"{HOST_SPEED / 1e9:g}Gf",
                     help="flop rate of a core, for smpi_execute_flops (default %(default)s)")
    net.add_argument("--host-speeds", metavar="FILE|HOSTLIST=SPEED,...",
                     help="per-node core speeds overriding --host-speed, e.g. "
                          "'n[0-3]=2Gf,n[4-7]=1Gf', or a file of such entries (one per "
                          "line, '#' comments); nodes outside the job are ignored")
    p.add_argument("--measured-compute", action="store_true",
                   help="simulate the program's measured CPU bursts (not deterministic)")
    p.add_argument("--ok-exit", type=int, action="append", default=[0], metavar="CODE",
                   help="exit codes of smpirun that mean success besides 0 (NPB DT's main "
                        "returns 1 after a verified run; repeatable)")
    p.add_argument("--smpirun", default="smpirun", help="smpirun command (default smpirun)")
    p.add_argument("--timeout", type=float, default=3600, help="seconds per smpirun run")
    p.add_argument("--out", metavar="DIR",
                   help="where platform.xml, the hostfiles and results.json go "
                        "(default: a temporary directory, removed)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--platform-only", action="store_true",
                   help="write platform.xml and the hostfiles, run nothing")
    p.add_argument("--replay", metavar="TRACE",
                   help="instead of a program, replay a time-independent trace (the index "
                        "file of smpirun -trace-ti, one line per rank) on each placement "
                        "(smpirun -replay: SimGrid's offline simulation, the recorded "
                        "messages without the program's own computation, so a "
                        "compute-heavy code of thousands of ranks replays in seconds)")
    p.add_argument("program", nargs=argparse.REMAINDER,
                   help="-- PROGRAM ARGS: the SMPI binary and its arguments")
    p.set_defaults(func=_simulate)


@dataclass(frozen=True)
class Run:
    """One placement's simulation."""

    placement: Placement
    seconds: float | None
    simulated_total: float | None
    hostfile: str


_APP_TIME = re.compile(r"^rankmap-sim-time\s+([0-9.eE+-]+)\s*$", re.M)
_SMPI_TIME = re.compile(r"Simulated time:\s*([0-9.eE+-]+)\s*seconds")
_REPLAY_TIME = re.compile(r"\[smpi_replay/INFO\] Simulation time ([0-9.eE+-]+)")


def parse_times(output: str) -> tuple[float | None, float | None]:
    """(program's ``rankmap-sim-time`` or the replay's ``Simulation time``, SMPI's
    ``Simulated time``) from smpirun output."""
    app = _APP_TIME.findall(output) or _REPLAY_TIME.findall(output)
    total = _SMPI_TIME.findall(output)
    return (float(app[-1]) if app else None, float(total[-1]) if total else None)


def network_params(args: argparse.Namespace) -> NetworkParams:
    """The network options as :class:`NetworkParams`; bad values name the option."""
    over = args.oversubscription.split(":")
    try:
        factor = float(over[0]) / (float(over[1]) if len(over) == 2 else 1.0)
    except (ValueError, ZeroDivisionError, IndexError):
        factor = float("nan")
    if len(over) > 2 or not factor > 0:
        raise TopologyError(f"--oversubscription {args.oversubscription!r}: expected N:M or N")
    speed = args.host_speed.removesuffix("f").removesuffix("F")
    return NetworkParams(
        host_bw=parse_bandwidth(args.host_bw, "--host-bw"),
        host_lat=parse_latency(args.host_lat, "--host-lat"),
        uplink_bw=tuple(parse_bandwidth(x, "--uplink-bw") for x in args.uplink_bw.split(":")
                        if x),
        uplink_lat=tuple(parse_latency(x, "--uplink-lat") for x in args.uplink_lat.split(":")
                         if x),
        oversubscription=factor,
        loopback_bw=parse_bandwidth(args.loopback_bw, "--loopback-bw"),
        loopback_lat=parse_latency(args.loopback_lat, "--loopback-lat"),
        host_speed=parse_bandwidth(speed + "Bps", "--host-speed"))


def host_speeds(args: argparse.Namespace) -> dict[str, float]:
    """``--host-speeds``: a file's entries when it names an existing file, else the
    option's own text; {} when not given."""
    spec = getattr(args, "host_speeds", None)
    if not spec:
        return {}
    path = Path(spec)
    try:
        is_file = path.is_file()
    except OSError:  # e.g. an inline list longer than a file name may be
        is_file = False
    if is_file:
        try:
            return parse_host_speeds(path.read_text(), str(path))
        except (OSError, UnicodeDecodeError) as exc:
            raise TopologyError(f"--host-speeds {spec}: cannot read: {exc}") from None
    if "=" not in spec:
        raise TopologyError(f"--host-speeds {spec!r}: no such file, and not HOSTLIST=SPEED")
    return parse_host_speeds(spec)


def build_inputs(args: argparse.Namespace, cfg) -> tuple[Allocation, NodeShape, SwitchTree,
                                                         Layout, CommGraph]:
    """Allocation, node shape, switch tree, layout and graph, as ``rankmap plan`` builds them."""
    inputs = job_inputs(args, cfg)
    if inputs.graph.n != inputs.layout.n:
        raise CliError(f"profile {args.profile!r} has {inputs.graph.n} ranks but the job has "
                       f"{inputs.layout.n} tasks")
    return inputs.alloc, inputs.shape, inputs.tree, inputs.layout, inputs.graph


def check_trace_index(path: str, ranks: int) -> None:
    """A replay needs the trace's index file with one existing file per rank of the job."""
    try:
        lines = [ln.strip() for ln in Path(path).read_text().splitlines() if ln.strip()]
    except OSError as exc:
        raise CliError(f"--replay {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise CliError(f"--replay {path}: not a text file (give the index file that "
                       f"smpirun -trace-ti writes)") from None
    if len(lines) != ranks:
        raise CliError(f"--replay {path}: the trace has {len(lines)} ranks (one file per "
                       f"line) but the job has {ranks} tasks")
    base = Path(path).parent
    for number, line in enumerate(lines, 1):
        if not (Path(line) if Path(line).is_absolute() else base / line).is_file():
            raise CliError(f"{path}:{number}: rank file {line} not found")


def smpirun_command(args: argparse.Namespace, platform: Path, hostfile: Path, n: int,
                    program: list[str]) -> list[str]:
    compute = "yes" if args.measured_compute else "no"
    replay = ["-replay", args.replay] if getattr(args, "replay", None) else []
    return [args.smpirun, "-platform", str(platform), "-hostfile", str(hostfile),
            "-np", str(n), *replay, f"--cfg=smpi/simulate-computation:{compute}",
            "--cfg=smpi/display-timing:yes", "--log=xbt_cfg.thresh:warning",
            "--log=smpi_config.thresh:warning", *program]


def _run(cmd: list[str], timeout: float, ok_exit: Sequence[int] = (0,),
         ) -> tuple[float | None, float | None]:
    # smpirun is a script that starts smpimain: in its own session, so that a timeout
    # kills the simulation too (a killed smpirun left a 4096-rank smpimain running, 13 GB)
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          start_new_session=True) as proc:
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)
            proc.communicate()
            raise SimulationError(f"smpirun took longer than {timeout:g} s: "
                                  f"{' '.join(cmd)}") from None
        except BaseException:  # e.g. Ctrl-C: take the simulation down with us
            _kill_group(proc.pid)
            raise
    app, total = parse_times(out)
    if proc.returncode not in ok_exit or (app is None and total is None):
        tail = "\n".join(out.splitlines()[-15:])
        raise SimulationError(f"smpirun exited with {proc.returncode} and "
                              f"{'no' if total is None else 'a'} time:\n"
                              f"{' '.join(cmd)}\n{tail}")
    return app, total


def _kill_group(pgid: int) -> None:
    """SIGKILL to the process group (nothing when it is gone already)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def format_table(runs: list[Run]) -> str:
    """Placement, simulated time, ratio to the first (Slurm's default), J and the
    heaviest link of each network level (volume over the busiest node link, leaf
    switch uplink, …), then the note."""
    base = runs[0].seconds if runs else None
    levels = [u.name for u in runs[0].placement.uplinks] if runs else []
    rows = [("placement", "simulated s", "ratio to " + runs[0].placement.name if runs else "",
             "J", *(f"busiest {name} link" for name in levels), "note")]
    for r in runs:
        t = r.seconds
        ratio = f"{t / base:.3f}" if t is not None and base else "-"
        rows.append((r.placement.name, "-" if t is None else f"{t:.6g}", ratio,
                     f"{r.placement.j:.6g}", *(f"{u.volume:.4g}" for u in r.placement.uplinks),
                     r.placement.note))
    cols = len(rows[0]) - 1
    widths = [max(len(row[i]) for row in rows) for i in range(cols)]
    return "".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)) +
                   f"  {row[cols]}".rstrip() + "\n" for row in rows)


def _simulate(args: argparse.Namespace) -> int:
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    if args.replay and program:
        raise CliError("give either --replay TRACE or -- PROGRAM ARGS, not both")
    if not program and not args.platform_only and not args.replay:
        raise CliError("no program: give -- PROGRAM ARGS (an SMPI binary built with smpicc) "
                       "or --replay TRACE")
    if not args.platform_only and shutil.which(args.smpirun) is None:
        raise CliError(f"{args.smpirun} not found: install SimGrid (Debian: simgrid, "
                       f"libsimgrid-dev) or pass --smpirun")
    cfg = load_config(args.config)
    alloc, shape, tree, layout, graph = build_inputs(args, cfg)
    if args.replay:
        check_trace_index(args.replay, layout.n)
    net = network_params(args)
    algorithms = args.algorithm or [cfg.solver.algorithm or DEFAULT_ALGORITHM]
    plat = build_platform(tree, alloc.nodes, shape, net, host_speeds(args))
    # the plan knows the simulated machine's uplinks as a site's config makes them known
    # to the prolog: the config's, else the platform's own (unless --uplink-bw sets them)
    oversubscription = (cfg.solver.uplink_oversubscription
                        or ([] if any(x is not None for x in net.uplink_bw)
                            else [net.oversubscription]))
    places = placements(layout, graph, algorithms,
                        time_limit=args.time_limit or cfg.solver.time_limit,
                        seed=args.seed, distribution=parse_distribution(args.distribution),
                        unguarded=args.unguarded,
                        objectives=args.objective or [cfg.solver.objective],
                        tree=tree, uplink_oversubscription=oversubscription)
    tmp = None
    out = Path(args.out) if args.out else Path(tmp := tempfile.mkdtemp(prefix="rankmap-sim-"))
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "platform.xml").write_text(plat.xml)
        runs = []
        for i, pl in enumerate(places):
            hostfile = out / f"hostfile.{i}.{re.sub(r'[^A-Za-z0-9_.+-]', '_', pl.name)}"
            hostfile.write_text(plat.hostfile(hosts_per_rank(layout, pl.mapping)))
            app = total = None
            if not args.platform_only and pl.name not in args.skip:
                if sys.stderr.isatty():
                    print(f"simulating {pl.name} ({layout.n} ranks)", file=sys.stderr)
                app, total = _run(smpirun_command(args, out / "platform.xml", hostfile,
                                                  layout.n, program), args.timeout,
                                  args.ok_exit)
            runs.append(Run(pl, app if app is not None else total, total, str(hostfile)))
        record = {"ranks": layout.n, "nodes": list(alloc.nodes), "profile": args.profile,
                  "program": program, "replay": args.replay,
                  "platform": str(out / "platform.xml"),
                  "measured_compute": args.measured_compute,
                  "placements": [{"name": r.placement.name, "seconds": r.seconds,
                                  "simulated_total": r.simulated_total, "J": r.placement.j,
                                  "note": r.placement.note, "hostfile": r.hostfile,
                                  "busiest_links": {u.name: u.volume
                                                    for u in r.placement.uplinks},
                                  "ratio_to_default": (r.seconds / runs[0].seconds
                                                       if r.seconds and runs[0].seconds
                                                       else None)} for r in runs]}
        if args.out:
            (out / "results.json").write_text(json.dumps(record, indent=2) + "\n")
        if args.json:
            print(json.dumps(record, indent=2))
        else:
            sys.stdout.write(format_table(runs))
            if args.out:
                print(f"\nwrote {out / 'platform.xml'}, hostfiles and results.json in {out}")
    finally:
        if tmp is not None and os.path.isdir(tmp):
            shutil.rmtree(tmp)
    return 0
