#!/usr/bin/env python3
"""Benchmark: the cost of recording a profile with librankmap_record (issue 32 item 6).

Run by hand (about 5 minutes here; one MPI job at a time):

    python3 bench/bench_recorder.py [--ranks 16 32 64] [--repeats 5]

Builds slurm_plugin/record with its Makefile and tests/data/mpi/halo.c with Debian's
mpicc, then runs two programs under ``mpirun --oversubscribe`` at each rank count, with
and without the recorder (LD_PRELOAD + RANKMAP_RECORD_DIR), the two alternating in
each repeat so that drift of the machine hits both:

  - halo: 200 iterations of halo.c's pattern (ring Isend of 8000 bytes, Sendrecv,
    Sendrecv_replace on a split communicator, a persistent send; ~5 sends a rank an
    iteration) then its Bcast/Allreduce/Alltoall;
  - alltoall: 50 MPI_Alltoall of 1000 bytes per block;
  - and first, the per-call cost without the noise of a loaded or oversubscribed
    machine: one rank making 10^6 MPI_Sendrecv of 8 bytes to itself, timed in CPU
    seconds (user+system), and both programs at 2 ranks (one a core) with 100 times
    the iterations.

Columns: the program's own time (rank 0's MPI_Wtime between a barrier after MPI_Init
and one after the pattern: the per-call cost of the interposition), the launch's wall
time (mpirun to exit: includes MPI_Init and MPI_Finalize, where the recorder sets up
and writes its file), the best of the repeats (the machine is shared: the minimum is
the least disturbed run), with/without ratios; rank 0's peak RSS
with and without (getrusage, KB) and the recorder's own memory per rank (the largest
``memory`` line of the files: its tables and arena pages in use).  The machine is
oversubscribed (64 ranks on few cores), so times are dominated by scheduling; the
ratios are what to read.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from slurm_plugin.profiles.recording import read_recording  # noqa: E402

#: program -> (arguments, iterations, wrapped calls a rank makes per iteration)
PATTERNS = {
    "halo": (["--bytes", "8000"], 200, 5),
    "alltoall": (["--pattern", "alltoall", "--bytes", "1000"], 50, 1),
    "self": (["--pattern", "self", "--bytes", "8"], 10000, 1),
}


#: launches that failed and were retried
FAILED: list[str] = []


def build(out: Path) -> tuple[Path, Path]:
    subprocess.run(["make", "-s", "-C", str(REPO / "slurm_plugin/record"), f"OUT={out}"],
                   check=True)
    subprocess.run(["mpicc", "-O2", "-o", str(out / "halo"),
                    str(REPO / "tests/data/mpi/halo.c")], check=True)
    return out / "librankmap_record.so", out / "halo"


def launch(program: Path, np_: int, args: list[str], lib: Path | None,
           record_dir: Path | None) -> tuple[float, float, int, float]:
    """(program seconds, wall seconds, rank 0's maxrss KB, rank 0's CPU seconds)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RANKMAP_")}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.pop("LD_PRELOAD", None)
    if lib is not None:
        env.update(LD_PRELOAD=str(lib), RANKMAP_RECORD_DIR=str(record_dir))
    for _attempt in range(3):
        t = time.perf_counter()
        try:
            proc = subprocess.run(["mpirun", "--oversubscribe", "-np", str(np_),
                                   str(program), *args, "--time", "--rss"], env=env,
                                  capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            proc = subprocess.CompletedProcess([], -1, "", "timed out after 300 s")
        wall = time.perf_counter() - t
        if proc.returncode == 0:
            break
        # Debian's Open MPI 4.1 now and then loses a launch of many ranks: a segfault in
        # mpirun's PMIx server (pmix_ptl_base_connection_handler), or an mpirun that
        # waits forever with no rank started (seen without the recorder)
        FAILED.append(f"{np_} ranks {args} {'on' if lib else 'off'}: rc {proc.returncode}: "
                      f"{proc.stderr.strip().splitlines()[:1]}")
        if record_dir is not None:
            for f in record_dir.iterdir():
                shutil.rmtree(f)  # a failed launch's run.K
    else:
        sys.exit(f"mpirun failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    elapsed = float(re.search(r"^elapsed (\S+)$", proc.stdout, re.M).group(1))
    rss = int(re.search(r"^maxrss (\d+)$", proc.stdout, re.M).group(1))
    cpu = float(re.search(r"^cpu (\S+)$", proc.stdout, re.M).group(1))
    return elapsed, wall, rss, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[16, 32, 64])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    if not shutil.which("mpicc") or not shutil.which("mpirun"):
        sys.exit("needs mpicc and mpirun (Debian: openmpi-bin libopenmpi-dev)")
    with tempfile.TemporaryDirectory(prefix="bench-recorder-") as tmp:
        lib, program = build(Path(tmp))
        mpi = subprocess.run(["mpirun", "--version"], text=True,
                             capture_output=True).stdout.splitlines()[0]
        print(f"# {time.strftime('%Y-%m-%d %H:%M')} {os.uname().nodename}, "
              f"{os.cpu_count()} cpus, {mpi}, best of {args.repeats}")
        head = (f"{'program':<9} {'ranks':>5} {'time off':>9} {'time on':>9} {'ratio':>6} "
                f"{'us/call':>8} {'wall off':>9} {'wall on':>9} {'ratio':>6} "
                f"{'rss off':>8} {'rss on':>8} {'rec mem':>8}")
        print(f"# load average at start: {os.getloadavg()[0]:.1f}; 'self' times are CPU "
              f"seconds")
        print(head)
        print("-" * len(head))
        rows = [("self", 1, 100), ("halo", 2, 100), ("alltoall", 2, 100)]
        rows += [(name, np_, 1) for name in ("halo", "alltoall") for np_ in args.ranks]
        for name, np_, scale in rows:
            base, iters, per_iter = PATTERNS[name]
            pargs = [*base, "--iters", str(iters * scale)]
            calls = iters * scale * per_iter
            off, on, rec_mem = [], [], 0
            for i in range(args.repeats):
                off.append(launch(program, np_, pargs, None, None))
                rec = Path(tmp) / f"rec-{name}-{np_}-{i}"
                rec.mkdir()
                on.append(launch(program, np_, pargs, lib, rec))
                recording = read_recording(rec / "run.0")
                assert recording.size == np_
                rec_mem = max(rec_mem, recording.memory)
                shutil.rmtree(rec)
            col = 3 if name == "self" else 0
            t0, t1 = (min(x[col] for x in r) for r in (off, on))
            w0, w1 = (min(x[1] for x in r) for r in (off, on))
            m0, m1 = (max(x[2] for x in r) for r in (off, on))
            print(f"{name:<9} {np_:>5} {t0:>9.3f} {t1:>9.3f} {t1 / t0:>6.2f} "
                  f"{(t1 - t0) / calls * 1e6:>8.3f} "
                  f"{w0:>9.2f} {w1:>9.2f} {w1 / w0:>6.2f} {m0:>8} {m1:>8} "
                  f"{rec_mem / 1024:>7.0f}K", flush=True)
        print(f"# load average at end: {os.getloadavg()[0]:.1f}")
        for line in FAILED:
            print(f"# retried: {line}")


if __name__ == "__main__":
    main()
