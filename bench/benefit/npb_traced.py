#!/usr/bin/env python3
"""Traced NAS codes, imported: does the product keep them from running slower?

Per case (code, ranks, machine as ``run_benefit.py`` builds them: 8-core nodes, 4 nodes
per leaf, 4 leaves per middle switch, 4:1), the real NPB 3.3 MPI binary
(``build_npb.sh``; nothing of NPB is in this repository) runs once under block with
``smpirun -trace-ti``; ``rankmap profile import`` imports the trace (phases split at
collectives, latency-bound pipelines and exchange rounds found:
:func:`slurm_plugin.profiles.smpi_ti.import_ti_phases`), and the binary is simulated
under block and two plans, each with the solver's own placement before the never-worse
rule (``--unguarded``), the site stating no uplink ratio (``--uplink-bw``): the imported
profile's total alone (no phases: what an import gave before pipelines were found) and
the imported profile itself. Ratios to block's simulated time.

Usage::

    python3 bench/benefit/npb_traced.py --npb-bin /tmp/npb-bin --ranks 64 256 \\
        --machines tree2 tree3 interleaved --codes lu bt sp
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))
sys.path.insert(0, str(HERE))

from npb_phases import applied, new_case, simulate, unstated_ratio, write_input  # noqa: E402

from slurm_plugin.profiles.store import ProfileStore  # noqa: E402


def trace(case: Path, exe: Path, ranks: int, platform: Path, hostfile: Path) -> Path:
    """Run ``exe`` once under ``hostfile`` with SMPI's time-independent tracing."""
    out = case / "trace" / "app.ti"
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = ["smpirun", "-platform", str(platform), "-hostfile", str(hostfile), "-np",
           str(ranks), "--cfg=smpi/simulate-computation:no", "-trace-ti",
           f"--cfg=tracing/filename:{out}", str(exe)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=case)
    if proc.returncode:
        raise SystemExit(f"FAILED: {' '.join(cmd)}\n{proc.stderr[-2000:]}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--npb-bin", metavar="DIR", required=True)
    ap.add_argument("--ranks", type=int, nargs="+", default=[64])
    ap.add_argument("--machines", nargs="+", default=["tree2", "tree3", "interleaved"])
    ap.add_argument("--codes", nargs="+", default=["lu", "bt", "sp"])
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--algorithm", default="topdown+n10")
    ap.add_argument("--work-dir", default="/tmp/rankmap-npb-traced")
    args = ap.parse_args()
    work = Path(args.work_dir)
    print("| machine | code | ranks | block s | total only: applied | total only: solver's "
          "own | imported: applied | imported: solver's own | latency-bound | applied "
          "(imported) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for code in args.codes:
        for ranks in args.ranks:
            exe = Path(args.npb_bin) / f"{code}.A.{ranks}"
            if not exe.exists():
                print(f"skipped {exe}: not built", file=sys.stderr)
                continue
            for machine in args.machines:
                case, base = new_case(work, machine, code, ranks, args.algorithm)
                write_input(case, code, args.iterations)
                base += [*unstated_ratio(machine), "--unguarded"]
                platform_dir = case / "platform"
                subprocess.run([*base, "--profile", f"npb-{code}",
                                "--platform-only", "--out", str(platform_dir), "--",
                                str(exe)], check=True, capture_output=True, cwd=case)
                ti = trace(case, exe, ranks, platform_dir / "platform.xml",
                           platform_dir / "hostfile.0.block")
                store = case / "store"
                subprocess.run(["rankmap", "profile", "import", "--format", "smpi-ti",
                                str(ti), "--name", f"{code}{ranks}", "--store", str(store)],
                               check=True, capture_output=True)
                profile = ProfileStore([store]).load(f"{code}{ranks}", ranks)
                phases = getattr(profile, "phases", ())
                sweeps = sum(1 for p in phases if p.pace == "sweep")
                rounds = sum(p.repeat for p in phases if p.pace == "rounds")
                paced = (f"{sweeps} sweeps" if sweeps else "") + \
                    (f"{rounds:g} rounds" if rounds else "") or "0"
                total = simulate(base, str(store / f"{code}{ranks}.mtx"), ["--", str(exe)],
                                 case / "total")
                phased = simulate([*base, "--store", str(store)], f"{code}{ranks}",
                                  ["--", str(exe)], case / "imported",
                                  ("block", "cyclic", "scrambled"))
                block = total["placements"][0]["seconds"]
                t_app, p_app = applied(total), applied(phased)
                t_own, p_own = total["placements"][-1], phased["placements"][-1]
                print(f"| {machine} | {code.upper()} | {ranks} | {block:.6g} "
                      f"| {t_app['seconds'] / block:.3f} | {t_own['seconds'] / block:.3f} "
                      f"| {p_app['seconds'] / block:.3f} | {p_own['seconds'] / block:.3f} "
                      f"| {paced} | {p_app['note'][:90]} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
