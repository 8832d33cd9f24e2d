#!/usr/bin/env python3
"""Do the NPB generators' phases choose faster placements?  Simulated runs per case.

The generators ``npb-lu``, ``npb-bt`` and ``npb-sp`` carry phases
(slurm_plugin/profiles/generators.py: LU's wavefront, then ``exchange_3`` by
dimension; BT/SP's face copy, then the x, y and z line solves), some of them
latency-bound (:attr:`mapper.model.phased_graph.Phase.pace`).  This script simulates, per case,
the placements planned (1) with the generator's total graph as a matrix file (the
same J, no phases), (2) with the phased profile where the plan knows no
oversubscription (the platform's uplink bandwidths given with ``--uplink-bw``: a site
without ``[solver] uplink_oversubscription``), and (3) with it where the plan knows
the platform's 4:1: same program, same platform, three plans, ratios to block.

The programs: with ``--npb-bin DIR``, the NAS Parallel Benchmarks themselves (NPB 3.3
MPI, class A, built with SimGrid's ``smpiff`` into DIR as ``lu.A.256`` etc.; nothing
of their code is in this repository: ``sh bench/benefit/build_npb.sh NPB3.3-MPI-DIR
DIR A 256 lu bt sp mg`` builds them from a source tree you provide), each run with
``--iterations`` time steps (its input file written into the case directory); the
simulated time is SMPI's for the whole run (communication only: computation is not
simulated).  Without it, a SimGrid time-independent trace that does what the phases
say -- per iteration and phase, every rank posts a receive from each partner of the
phase, sends to each partner (the pair's volume, each way, blocking), and waits for
its receives -- replayed with ``rankmap simulate --replay``: a model of the code, not
the code.

Usage::

    python3 bench/benefit/npb_phases.py --npb-bin /tmp/npb-bin --ranks 256 \
        --machines tree2 tree3 interleaved --specs npb-lu npb-bt npb-sp npb-mg \
        --iterations 10

(``rankmap`` and ``smpirun`` on PATH; 8-core nodes, 4 nodes per leaf, 4 leaves per
middle switch, 4:1, as ``run_benefit.py``.)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))
sys.path.insert(0, str(HERE))

from run_benefit import simulate_distinct, topology_conf  # noqa: E402

from mapper.io.mtx_file import write_mtx  # noqa: E402
from slurm_plugin.profiles.generators import GeneratorError, generate  # noqa: E402


def write_trace(phased, directory: Path, iterations: int) -> Path:
    """A time-independent trace (index file and one file per rank) of ``phased``'s
    phases, ``iterations`` times: irecv from every partner, send to every partner,
    wait for the receives.  Volumes in bytes, sent as doubles (SimGrid type 0)."""
    n = phased.n
    lines: list[list[str]] = [[f"{r} init"] for r in range(n)]
    partners = []
    for phase in phased.phases:
        u, v, w = phase.graph.edges()
        by_rank: list[list[tuple[int, int]]] = [[] for _ in range(n)]
        for a, b, x in zip(u.tolist(), v.tolist(), w.tolist(), strict=True):
            count = max(1, round(x * phase.repeat / 8))
            by_rank[a].append((b, count))
            by_rank[b].append((a, count))
        partners.append(by_rank)
    for _ in range(iterations):
        for tag, by_rank in enumerate(partners):
            for r in range(n):
                out = lines[r]
                for p, c in by_rank[r]:
                    out.append(f"{r} irecv {p} {tag} {c} 0")
                for p, c in by_rank[r]:
                    out.append(f"{r} send {p} {tag} {c} 0")
                for p, _c in by_rank[r]:
                    out.append(f"{r} wait {p} {r} {tag}")
    files = directory / "trace_files"
    files.mkdir(parents=True, exist_ok=True)
    paths = []
    for r in range(n):
        path = files / f"rank-{r}.txt"
        path.write_text("\n".join([*lines[r], f"{r} finalize"]) + "\n")
        paths.append(str(path.resolve()))
    index = directory / "trace.ti"
    index.write_text("\n".join(paths) + "\n")
    return index


#: input files of NPB 3.3 MPI that set the number of time steps (the rest: class A's)
NPB_INPUTS = {
    "lu": ("inputlu.data", "c\nc\n 1 250\nc\nc\n {it}\nc\nc\n 2.0e+00\nc\nc\n 1.2\nc\nc\n"
                           " 1.0e-08 1.0e-08 1.0e-08 1.0e-08 1.0e-08\nc\nc\n {n} {n} {n}\n"),
    "bt": ("inputbt.data", "{it}\n0.0008d0\n{n} {n} {n}\n5 0\n0 1000000\n"),
    "sp": ("inputsp.data", "{it}\n0.0015d0\n{n} {n} {n}\n"),
    "mg": ("mg.input", " 8 = top level\n {n} {n} {n} = nx ny nz\n {it} = nit\n"
                       " 0 0 0 0 0 0 0 0 = debug_vec\n"),
}
#: class A grid sizes
NPB_CLASS_A = {"lu": 64, "bt": 64, "sp": 64, "mg": 256}


def new_case(work: Path, machine: str, name: str, ranks: int, algorithm: str
             ) -> tuple[Path, list[str]]:
    """The case directory WORK/MACHINE-NAME-RANKS with its topology.conf (8-core nodes,
    4 nodes per leaf, 4 leaves per middle switch) and the ``rankmap simulate`` command
    on it (4:1; the plan knows the ratio)."""
    case = work / f"{machine}-{name}-{ranks}"
    case.mkdir(parents=True, exist_ok=True)
    nodes = ranks // 8
    conf = case / "topology.conf"
    conf.write_text(topology_conf(machine, nodes, 4, 4))
    return case, ["rankmap", "simulate", "--nodes", f"n[0-{nodes - 1}]",
                  "--node-info", "Sockets=2 CoresPerSocket=4", "--topology-conf", str(conf),
                  "--algorithm", algorithm, "--oversubscription", "4:1"]


def unstated_ratio(machine: str) -> list[str]:
    """The platform's own uplinks given explicitly: the plan then knows no
    oversubscription (a site without ``[solver] uplink_oversubscription``)."""
    return ["--uplink-bw", "12.5GBps:50GBps" if machine == "tree3" else "12.5GBps"]


def write_input(case: Path, code: str, iterations: int) -> None:
    """NPB ``code``'s class A input file, ``iterations`` time steps, into ``case``."""
    name, text = NPB_INPUTS[code]
    (case / name).write_text(text.format(it=iterations, n=NPB_CLASS_A[code]))


def simulate(base: list[str], profile: str, program: list[str], out: Path,
             skip: tuple[str, ...] = ("cyclic", "scrambled")) -> dict:
    cmd = [*base, "--profile", profile, "--out", str(out), "--json",
           *(x for name in skip for x in ("--skip", name)), *program]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=out.parent)
    if proc.returncode:
        raise SystemExit(f"FAILED: {' '.join(cmd)}\n{proc.stderr}")
    return json.loads(proc.stdout)


def applied(record: dict) -> dict:
    """The placement rankmap applies (``rankmap ALG``) among a run's placements."""
    return next(p for p in record["placements"] if p["name"].startswith("rankmap "))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[256])
    ap.add_argument("--machines", nargs="+", default=["tree2", "tree3", "interleaved"])
    ap.add_argument("--specs", nargs="+", default=["npb-lu", "npb-bt", "npb-sp"])
    ap.add_argument("--bytes", type=int, default=262144)
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--algorithm", default="topdown+n10")
    ap.add_argument("--work-dir", default="/tmp/rankmap-npb-phases")
    ap.add_argument("--unguarded", action="store_true",
                    help="add the solver's own placement of the phased profile (ratio "
                         "unknown), before the never-worse rule")
    ap.add_argument("--distinct", action="store_true",
                    help="only the phased profile with the 4:1 known: block, the applied "
                         "placement and the solver's own, each distinct placement "
                         "simulated once (run_benefit.py's --distinct)")
    ap.add_argument("--npb-bin", metavar="DIR",
                    help="run NPB 3.3 MPI's class A binaries from DIR instead of a trace")
    args = ap.parse_args()
    if args.distinct and not args.npb_bin:
        ap.error("--distinct runs NPB's binaries: give --npb-bin")
    work = Path(args.work_dir)
    own = "| solver's own, phases, ratio unknown " if args.unguarded else ""
    if args.distinct:
        print("| machine | profile | ranks | block s | applied (4:1 known) | solver's own "
              "(4:1 known) | applied |")
        print("|---|---|---|---|---|---|---|")
    else:
        print("| machine | profile | ranks | block s | rankmap, no phases | phases, ratio "
              f"unknown {own}| phases, 4:1 known | applied (4:1 known) |")
        print("|---|---|---|---|---|---|---|---|" + ("---|" if own else ""))
    for spec_name in args.specs:
        for ranks in args.ranks:
            # a spec with its own options (npb-mg:class=A) keeps them: no bytes=
            spec = spec_name if ":" in spec_name else f"{spec_name}:bytes={args.bytes}"
            try:
                phased = generate(spec, ranks)
            except GeneratorError as exc:
                print(f"skipped {spec_name} at {ranks} ranks: {exc}", file=sys.stderr)
                continue
            for machine in args.machines:
                case, base = new_case(work, machine, spec_name.replace(":", "-").replace(
                    "=", ""), ranks, args.algorithm)
                if args.npb_bin:
                    code = spec_name.split(":")[0].split("-")[1]
                    exe = Path(args.npb_bin) / f"{code}.A.{ranks}"
                    if not exe.exists():
                        print(f"skipped {exe}: not built", file=sys.stderr)
                        continue
                    write_input(case, code, args.iterations)
                    program = ["--", str(exe)]
                else:
                    program = ["--replay", str(write_trace(phased, case, args.iterations))]
                if args.distinct:
                    rec = simulate_distinct(
                        [*base, "--profile", spec, "--out", str(case / "distinct"), "--json",
                         "--unguarded", *program], case, ["cyclic", "scrambled"])
                    block, mine, solo = (rec["placements"][i] for i in (0, 3, 4))
                    print(f"| {machine} | {spec_name} | {ranks} | {block['seconds']:.6g} "
                          f"| {mine['ratio_to_default']:.3f} | {solo['ratio_to_default']:.3f} "
                          f"| {mine['note']} |", flush=True)
                    continue
                total = case / "total.mtx"
                write_mtx(phased, total, f"{spec} total, no phases")
                plain = simulate(base, str(total), program, case / "plain")
                unknown = simulate([*base, *unstated_ratio(machine),
                                    *(["--unguarded"] if args.unguarded else [])],
                                   spec, program, case / "unknown",
                                   ("block", "cyclic", "scrambled"))
                known = simulate(base, spec, program, case / "phases",
                                 ("block", "cyclic", "scrambled"))
                block = plain["placements"][0]["seconds"]
                a, b, c = (applied(r) for r in (plain, unknown, known))
                mine = ""
                if args.unguarded:
                    solo = unknown["placements"][-1]
                    mine = f"| {solo['seconds'] / block:.3f} "
                print(f"| {machine} | {spec_name} | {ranks} | {block:.6g} "
                      f"| {a['seconds'] / block:.3f} | {b['seconds'] / block:.3f} {mine}"
                      f"| {c['seconds'] / block:.3f} | {c['note']} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
