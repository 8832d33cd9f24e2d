#!/usr/bin/env python3
"""Benchmark: the recorder's cost under threads (issue 50 item 2).

Run by hand (a minute or two here; one MPI job at a time):

    python3 bench/bench_record_threads.py [--threads 1 2 8] [--iters 2000] [--repeats 5]
        [--baseline OLD.so]

Builds slurm_plugin/record and tests/data/mpi/threads.c, then runs threads.c under
each MPI found (Debian's Open MPI at 1 rank, whose messages go to itself: at 2 ranks
and 8 threads a rank its MPI_THREAD_MULTIPLE progress degrades by itself, 0.005 s for
200 passes and 82 s for 2000, with or without a preload; MPICH from the test lane
/var/tmp/rankmap-lanes/mpich at 1 and 2 ranks), with THREADS threads sending at once under
MPI_THREAD_MULTIPLE, on MPI_COMM_WORLD (the recorder's lock-free path) and on 64
split communicators (the communicator cache, read under its reader lock), without
(`off`) and with (`on`) the recorder, the two alternating in each repeat; the best of
the repeats (the machine is shared: the least disturbed run).  ``--baseline`` adds a
column for another build of the recorder (e.g. the spin-locked one of git history,
built with its own Makefile), run in the same repeats.

Columns: the sending phase's time (rank 0's MPI_Wtime around the threads), on/off
ratio, and the difference per message of a rank (µs).  2 cores here: with 8 threads
the cores are oversubscribed, which is where a spin lock hurts most.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LANES = Path(os.environ.get("RANKMAP_LANES_DIR", "/var/tmp/rankmap-lanes"))
ROOT_OK = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def mpis() -> dict[str, tuple[Path, list[str], tuple[int, ...]]]:
    """MPI name -> (bin directory, launcher, rank counts)."""
    found = {}
    if Path("/usr/bin/mpicc").exists():
        found["Open MPI (Debian)"] = (Path("/usr/bin"), ["mpirun", "--oversubscribe"], (1,))
    if (LANES / "mpich/bin/mpicc").exists():
        found["MPICH (lane)"] = (LANES / "mpich/bin", ["mpiexec"], (1, 2))
    return found


def build(out: Path) -> tuple[Path, dict[str, Path]]:
    subprocess.run(["make", "-s", "-C", str(REPO / "slurm_plugin/record"), f"OUT={out}"],
                   check=True)
    programs = {}
    for name, (bin_dir, _, _) in mpis().items():
        exe = out / f"threads-{len(programs)}"
        subprocess.run([str(bin_dir / "mpicc"), "-O2", "-pthread", "-o", str(exe),
                        str(REPO / "tests/data/mpi/threads.c")], check=True,
                       env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
        programs[name] = exe
    return out / "librankmap_record.so", programs


def once(mpi: str, program: Path, preload: str, ranks: int, ncomm: int, iters: int,
         threads: int, rec: Path) -> float:
    bin_dir, launcher, _ = mpis()[mpi]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RANKMAP_")}
    env.update(ROOT_OK, PATH=f"{bin_dir}:{env['PATH']}", HYDRA_IFACE="lo")
    if preload:
        env.update(LD_PRELOAD=preload, RANKMAP_RECORD_DIR=str(rec))
    proc = subprocess.run([str(bin_dir / launcher[0]), *launcher[1:], "-np", str(ranks),
                           str(program), str(ncomm), str(iters), str(threads)],
                          env=env, capture_output=True, text=True, timeout=600)
    m = re.search(r"threads: done ([0-9.]+)", proc.stdout)
    if proc.returncode or not m:
        raise SystemExit(f"{mpi} failed: {proc.stdout}{proc.stderr}")
    return float(m.group(1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2, 8])
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--baseline", metavar="OLD.so")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        library, programs = build(tmp_path)
        variants = {"off": "", "on": str(library)}
        if args.baseline:
            variants["baseline"] = str(Path(args.baseline).resolve())
        head = "| MPI | ranks | comms | threads | off s | on s | on/off | µs/msg on |"
        if args.baseline:
            head += " baseline s | baseline/off |"
        print(head)
        print("|" + "---|" * (head.count("|") - 1))
        for mpi, program in programs.items():
            for ranks, (ncomm, label), threads in (
                    (r, c, t) for r in mpis()[mpi][2]
                    for c in ((-64, "world"), (64, "64 split")) for t in args.threads):
                best = {k: float("inf") for k in variants}
                for _ in range(args.repeats):
                    for k, preload in variants.items():
                        rec = Path(tempfile.mkdtemp(dir=tmp_path))
                        best[k] = min(best[k], once(mpi, program, preload, ranks, ncomm,
                                                    args.iters, threads, rec))
                msgs = args.iters * 64  # a rank's: ITERS passes over the 64 slots
                row = (f"| {mpi} | {ranks} | {label} | {threads} | {best['off']:.3f} | "
                       f"{best['on']:.3f} | {best['on'] / best['off']:.2f} | "
                       f"{(best['on'] - best['off']) / msgs * 1e6:.3f} |")
                if args.baseline:
                    row += (f" {best['baseline']:.3f} | "
                            f"{best['baseline'] / best['off']:.2f} |")
                print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
