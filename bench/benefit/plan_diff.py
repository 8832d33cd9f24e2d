#!/usr/bin/env python3
"""Which "Does it pay?" placements did a change alter, and how do the altered ones run?

Plans every generator case of docs/does-it-pay.md (the halo and CG on the three
machines of ``run_benefit.py`` at 128, 256 and 1024 ranks on 8-core nodes, the halo at
4096; the halo at 1024, 2048 and 4096 ranks on 16-core nodes) under two source trees of
rankmap, OLD and NEW, with ``rankmap simulate --platform-only`` as ``run_benefit.py``
runs it, and compares rankmap's hostfiles byte for byte.  SimGrid's simulation is
deterministic, so a case whose hostfile (and platform) is the same ran the same time
under both trees; ``--simulate`` runs block and both placements of the cases that differ
(halo3d / cg_like built with smpicc, ``rankmap simulate``'s smpirun command).

``--stored MACHINE:RANKS:STORE:PROFILE[:NODE_INFO]`` adds a stored (traced) profile,
compared plan for plan only (its program is the traced code's: run its own lane to time
it).  A tree older than a profile's keys (the phases came on 2026-11-27) refuses them;
it is then given a copy without those keys -- the total matrix, what its own ``profile
import`` wrote -- and the row says so.

Each tree is a source directory with its compiled extensions built, e.g.::

    git archive REV | tar -x -C /tmp/old && (cd /tmp/old && python3 setup.py build_ext --inplace)
    python3 bench/benefit/plan_diff.py /tmp/old . --simulate \\
        --stored tree3:512:/tmp/lul/lulesh-s6-i10:lulesh-512

The trees are imported from their own directories only (an editable install of another
checkout is taken off the import path), through the ``rankmap`` entry point each
tree's pyproject.toml names.
"""

from __future__ import annotations

import argparse
import filecmp
import fnmatch
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent))

from run_benefit import app_args, build, topology_conf  # noqa: E402

from slurm_plugin.commands.simulate_cli import parse_times, smpirun_command  # noqa: E402

# runs one tree's ``rankmap`` entry point: only that tree on the import path
_RUNNER = r"""
import importlib, os, re, sys
sys.meta_path = [f for f in sys.meta_path if 'Editable' not in getattr(f, '__name__', '')]
sys.path = [p for p in sys.path if '__editable__' not in p]
root = os.environ['PLAN_DIFF_TREE']
spec = re.search(r'^rankmap\s*=\s*"([\w.]+):(\w+)"',
                 open(os.path.join(root, 'pyproject.toml')).read(), re.M)
sys.argv = ['rankmap', *sys.argv[1:]]
sys.exit(getattr(importlib.import_module(spec.group(1)), spec.group(2))())
"""

EIGHT = "Sockets=2 CoresPerSocket=4"
SIXTEEN = "Sockets=2 CoresPerSocket=8"
_UNKNOWN_KEY = re.compile(r"unknown key '(\w+)'")


@dataclass(frozen=True)
class Case:
    """One row of "Does it pay?": a machine, a rank count, a node shape and a profile."""

    machine: str
    ranks: int
    node_info: str
    app: str | None = None          # halo / cg: a generator profile and our program
    store: Path | None = None       # or a stored profile
    profile: str | None = None

    @property
    def cores(self) -> int:
        sockets, per = (int(part.split("=")[1]) for part in self.node_info.split())
        return sockets * per

    @property
    def name(self) -> str:
        if self.app is not None:
            return f"{self.machine}-{self.app}-{self.ranks}-c{self.cores}"
        return f"{self.machine}-{self.profile}-c{self.cores}"


def does_it_pay_cases() -> list[Case]:
    """The generator cases of docs/does-it-pay.md."""
    cases = [Case(m, n, EIGHT, app=app) for m in ("tree2", "tree3", "interleaved")
             for app in ("halo", "cg") for n in (128, 256, 1024)]
    cases.append(Case("tree3", 4096, EIGHT, app="halo"))
    cases += [Case(m, n, SIXTEEN, app="halo") for m in ("tree3", "tree2", "interleaved")
              for n in (1024, 2048)]
    cases.append(Case("tree3", 4096, SIXTEEN, app="halo"))
    return cases


def parse_stored(text: str) -> Case:
    """``MACHINE:RANKS:STORE:PROFILE[:NODE_INFO]`` as a :class:`Case`."""
    parts = text.split(":")
    if len(parts) not in (4, 5) or not parts[1].isdigit():
        raise argparse.ArgumentTypeError(
            f"--stored {text!r}: expected MACHINE:RANKS:STORE:PROFILE[:NODE_INFO]")
    return Case(parts[0], int(parts[1]), parts[4] if len(parts) == 5 else EIGHT,
                store=Path(parts[2]), profile=parts[3])


@dataclass(frozen=True)
class Planned:
    """rankmap's placement of one case under one tree."""

    note: str
    hostfile: Path | None
    digest: str | None
    platform: Path | None
    dropped: tuple[str, ...] = ()     # profile keys the tree did not know


def store_without(case: Case, keys: set[str], work: Path) -> Path:
    """A copy of the case's profile without ``keys`` (keys a tree older than them
    refuses: ``phases``, ``paces``, ``repeats``, ``generator``, ``[[runs]]``)."""
    store = work / "older-store"
    store.mkdir(parents=True, exist_ok=True)
    lines = (case.store / f"{case.profile}.toml").read_text().splitlines()
    if "runs" in keys and "[[runs]]" in lines:  # tables follow every top-level key
        lines = lines[:lines.index("[[runs]]")]
    kept = [line for line in lines if line.split("=")[0].strip() not in keys]
    (store / f"{case.profile}.toml").write_text("\n".join(kept) + "\n")
    for line in kept:
        if line.split("=")[0].strip() == "file":
            matrix = line.split("=", 1)[1].strip().strip('"')
            shutil.copyfile(case.store / matrix, store / matrix)
    return store


def plan(tree: Path, case: Case, work: Path, args: argparse.Namespace) -> Planned:
    """rankmap's placement of ``case`` planned by ``tree``."""
    out = work / f"plan-{tree.name or 'tree'}-{hashlib.md5(str(tree).encode()).hexdigest()[:6]}"

    def run(profile_args: list[str]) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-c", _RUNNER, "simulate",
               "--nodes", f"n[0-{case.ranks // case.cores - 1}]", "--node-info", case.node_info,
               "--topology-conf", str(work / "topology.conf"), *profile_args,
               "--algorithm", args.algorithm, "--time-limit", str(args.time_limit),
               "--oversubscription", args.oversubscription, "--out", str(out),
               "--platform-only", "--", "/bin/true"]
        env = dict(os.environ, PYTHONPATH=str(tree), PLAN_DIFF_TREE=str(tree))
        return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=work,
                              check=False)

    dropped: set[str] = set()
    if case.app is not None:
        spec = app_args(case.app, case.ranks, Path("/bin/true"), args.bytes, 10)
        assert spec is not None
        proc = run(["--profile", spec[0]])
    else:
        proc = run(["--store", str(case.store), "--profile", str(case.profile)])
        while proc.returncode and (key := _UNKNOWN_KEY.search(proc.stderr)) \
                and key.group(1) not in dropped and len(dropped) < 8:
            dropped.add(key.group(1))
            proc = run(["--store", str(store_without(case, dropped, work)),
                        "--profile", str(case.profile)])
    if proc.returncode:
        last = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
        return Planned(f"failed: {last}", None, None, None, tuple(sorted(dropped)))
    results = json.loads((out / "results.json").read_text())
    mine = next(p for p in results["placements"] if p["name"].startswith("rankmap"))
    hostfile = Path(mine["hostfile"])
    return Planned(mine["note"], hostfile, hashlib.md5(hostfile.read_bytes()).hexdigest(),
                   out / "platform.xml", tuple(sorted(dropped)))


_SMPIRUN = SimpleNamespace(smpirun="smpirun", measured_compute=False, replay=None)


def simulated(platform: Path, hostfile: Path, ranks: int, program: list[str],
              cwd: Path) -> float | None:
    """SMPI's time of ``program`` on one hostfile (the program's own timer first), with
    ``rankmap simulate``'s smpirun command."""
    proc = subprocess.run(smpirun_command(_SMPIRUN, platform, hostfile, ranks, program),
                          capture_output=True, text=True, cwd=cwd, check=False)
    app, total = parse_times(proc.stdout + proc.stderr)
    return app if app is not None else total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", type=Path, help="source tree before the change (extensions built)")
    ap.add_argument("new", type=Path, help="source tree after the change (extensions built)")
    ap.add_argument("--stored", type=parse_stored, action="append", default=[],
                    metavar="MACHINE:RANKS:STORE:PROFILE[:NODE_INFO]")
    ap.add_argument("--only-stored", action="store_true",
                    help="compare the --stored profiles only")
    ap.add_argument("--cases", nargs="+", default=["*"], metavar="PATTERN",
                    help="only the cases whose names (as printed) match a shell pattern")
    ap.add_argument("--simulate", action="store_true",
                    help="simulate block and both placements where the hostfiles differ")
    ap.add_argument("--simulate-up-to", type=int, default=2048, metavar="RANKS",
                    help="larger cases are compared plan for plan only (a 4096-rank halo "
                         "can take an hour and 13 GB per placement)")
    ap.add_argument("--work-dir", type=Path, default=Path("/tmp/rankmap-plan-diff"))
    ap.add_argument("--algorithm", default="topdown+n10")
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--oversubscription", default="4:1")
    ap.add_argument("--bytes", type=int, default=262144, help="bytes per message")
    args = ap.parse_args()
    for tree in (args.old, args.new):
        if not (tree / "pyproject.toml").is_file():
            raise SystemExit(f"{tree}: not a rankmap source tree (no pyproject.toml)")
    if args.simulate and shutil.which("smpirun") is None:
        raise SystemExit("--simulate needs smpirun: apt-get install libsimgrid-dev simgrid")
    exes = build(args.work_dir / "bin", ["halo", "cg"]) if args.simulate else {}
    cases = [case for case in ([] if args.only_stored else does_it_pay_cases()) + args.stored
             if any(fnmatch.fnmatch(case.name, pattern) for pattern in args.cases)]
    print("| case | old | new | placement | block s | old / block | new / block |")
    print("|---|---|---|---|---|---|---|")
    for case in cases:
        print("| " + " | ".join(compare(case, args, exes)) + " |", flush=True)
    return 0


def compare(case: Case, args: argparse.Namespace, exes: dict[str, Path]) -> list[str]:
    """One table row: the case, both trees' notes, whether the hostfiles are the same,
    and with ``--simulate`` block's time and both placements' ratios where they differ."""
    work = args.work_dir / case.name
    work.mkdir(parents=True, exist_ok=True)
    (work / "topology.conf").write_text(
        topology_conf(case.machine, case.ranks // case.cores, 4, 4))
    old = plan(args.old.resolve(), case, work, args)
    new = plan(args.new.resolve(), case, work, args)
    old_note = old.note + (f" (read without {', '.join(old.dropped)})" if old.dropped else "")
    if old.hostfile is None or new.hostfile is None:
        same = "not compared"
    elif (old.digest == new.digest and old.platform is not None and new.platform is not None
          and filecmp.cmp(old.platform, new.platform, shallow=False)):
        same = "same"
    else:
        same = "differs"
    times = ["", "", ""]
    if same != "differs" or not args.simulate:
        pass
    elif case.ranks > args.simulate_up_to:
        times[0] = "not simulated (--simulate-up-to)"
    elif case.app is None:
        times[0] = "not simulated (stored profile: run its lane)"
    else:
        spec = app_args(case.app, case.ranks, exes[case.app], args.bytes, 10)
        assert spec is not None and new.platform is not None
        # both placements on NEW's platform: the same hosts by name
        block = simulated(new.platform, new.hostfile.parent / "hostfile.0.block",
                          case.ranks, spec[1], work)
        pair = [simulated(new.platform, p.hostfile, case.ranks, spec[1], work)
                for p in (old, new) if p.hostfile is not None]
        if block:
            times = [f"{block:.6g}", *(f"{t / block:.4f}" if t else "failed" for t in pair)]
    return [case.name, old_note, new.note, same, *times]


if __name__ == "__main__":
    sys.exit(main())
