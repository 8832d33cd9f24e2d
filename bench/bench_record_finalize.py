#!/usr/bin/env python3
"""Benchmark: what recording adds to MPI_Finalize (issue 50 item 1).

Run by hand (minutes; one MPI job at a time):

    python3 bench/bench_record_finalize.py [--ranks 64 256] [--runs 0 20000]
        [--dir DIR] [--baseline OLD.so] [--repeats 3]

tests/data/mpi/threads.c (one thread, one pass over MPI_COMM_WORLD) under MPICH's
mpiexec (the test lane /var/tmp/rankmap-lanes/mpich: its processes are the lightest
here; at 512 and 1024 ranks the launch, without any preload, did not finish MPI_Init
within minutes on this 2-core machine), rank 0's MPI_Finalize timed by the clock,
without the recorder (`off`), with it (`on`), and with ``--baseline`` (another build,
e.g. the one of git history that tried run.0, run.1, ... one mkdir each), into a
recording directory that already holds RUNS launches (run.0 .. run.RUNS-1: a job's
directory after many launches, or a site's shared one).  ``--dir`` puts the recording
directory elsewhere (a shared file system: NFS, Lustre, where each mkdir is a round trip
to the server); by default it is under /var/tmp.  Best of the repeats.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LANE = Path(os.environ.get("RANKMAP_LANES_DIR", "/var/tmp/rankmap-lanes")) / "mpich/bin"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--runs", type=int, nargs="+", default=[0, 20000])
    ap.add_argument("--dir", type=Path, default=Path("/var/tmp"))
    ap.add_argument("--baseline", metavar="OLD.so")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    if not (LANE / "mpicc").exists():
        print(f"no MPICH lane at {LANE} (python -m tests.helpers.mpi_lanes mpich)")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        subprocess.run(["make", "-s", "-C", str(REPO / "slurm_plugin/record"),
                        f"OUT={tmp_path}"], check=True)
        program = tmp_path / "threads"
        subprocess.run([str(LANE / "mpicc"), "-O2", "-pthread", "-o", str(program),
                        str(REPO / "tests/data/mpi/threads.c")], check=True)
        variants = {"off": "", "on": str(tmp_path / "librankmap_record.so")}
        if args.baseline:
            variants["baseline"] = str(Path(args.baseline).resolve())
        head = "| ranks | runs there | off s | on s | on − off s |"
        if args.baseline:
            head += " baseline s | baseline − off s |"
        print(head)
        print("|" + "---|" * (head.count("|") - 1), flush=True)
        for runs in args.runs:
            for n in args.ranks:
                best = {k: float("inf") for k in variants}
                for _ in range(args.repeats):
                    for k, preload in variants.items():
                        rec = Path(tempfile.mkdtemp(prefix="rankmap-fin.", dir=args.dir))
                        for i in range(runs):
                            (rec / f"run.{i}").mkdir()
                        env = {**{k2: v for k2, v in os.environ.items()
                                  if not k2.startswith("RANKMAP_")},
                               "PATH": f"{LANE}:{os.environ['PATH']}", "HYDRA_IFACE": "lo"}
                        if preload:
                            env.update(LD_PRELOAD=preload, RANKMAP_RECORD_DIR=str(rec))
                        proc = subprocess.run(
                            [str(LANE / "mpiexec"), "-np", str(n), str(program), "-1", "1",
                             "1"], env=env, capture_output=True, text=True, timeout=1800)
                        m = re.search(r"threads: finalize ([0-9.]+)", proc.stdout)
                        shutil.rmtree(rec, ignore_errors=True)
                        if proc.returncode or not m:
                            print(f"{k} at {n} ranks failed: {proc.stdout[-500:]}"
                                  f"{proc.stderr[-500:]}")
                            return 1
                        best[k] = min(best[k], float(m.group(1)))
                row = (f"| {n} | {runs} | {best['off']:.3f} | {best['on']:.3f} | "
                       f"{best['on'] - best['off']:.3f} |")
                if args.baseline:
                    row += f" {best['baseline']:.3f} | {best['baseline'] - best['off']:.3f} |"
                print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
