#!/usr/bin/env python3
"""How much do placements that no communication-graph model can tell apart differ in a
simulated run?  The images of one placement under the reflections of the code's grid.

A code on a grid whose communication graph is symmetric under the reflection
``x -> X-1-x`` (a 3D stencil, open or periodic; LULESH's 26 neighbours; NPB MG) has,
under the reflected placement (rank r on the node the placement gives r's image), the
same graph on the same machine: J, every link load, every phase time, every round's
links are the same.  What the graph does not hold -- which message a rank sends first
-- is not reflected: halo3d sends to x-1 before x+1, LULESH posts its planes, lines
and corners in a fixed order.  The spread of the 8 images' simulated times is thus
the part of a run's time that the placement, as any of rankmap's models sees it, does
not set.

Per case: Slurm's block placement and the 8 images of one hostfile (the first
``rankmap`` one by default), each simulated once with the case's platform and
program (``results.json`` of ``run_benefit.py`` / ``rankmap simulate``), printed as a
table of ratios to block.  ``--grid AxBxC --order c`` is halo3d's numbering (numpy C
order: rank = (x·B + y)·C + z); ``--order f`` is LULESH's and NPB MG's (x fastest).

Usage::

    python3 bench/benefit/mirror_images.py CASE --grid 8x8x8 --order f
    python3 bench/benefit/mirror_images.py CASE --grid 16x8x8 --order c

(``smpirun`` on PATH; an NPB program's input file, ``mg.input`` etc., in CASE.)
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import subprocess
import tempfile
from pathlib import Path

import numpy as np

_APP = re.compile(r"rankmap-sim-time\s+([0-9.eE+-]+)")
_SMPI = re.compile(r"Simulated time: ([0-9.eE+-]+)")


def grid_coordinates(n: int, dims: tuple[int, int, int], order: str) -> np.ndarray:
    """(3, n) grid coordinates of ranks 0..n-1: ``order`` "c" (last axis fastest) or
    "f" (first axis fastest)."""
    if int(np.prod(dims)) != n:
        raise SystemExit(f"--grid {'x'.join(map(str, dims))} does not hold {n} ranks")
    shape = dims if order == "c" else dims[::-1]
    coords = np.array(np.unravel_index(np.arange(n), shape))
    return coords if order == "c" else coords[::-1]


def image(hosts: list[str], coords: np.ndarray, dims: tuple[int, int, int],
          flips: tuple[int, int, int], order: str) -> list[str]:
    """The hostfile giving rank r the host ``hosts`` gives r's reflection."""
    c = np.array([d - 1 - x if f else x for x, d, f in zip(coords, dims, flips, strict=True)])
    shape = dims if order == "c" else dims[::-1]
    mirrored = np.ravel_multi_index(tuple(c if order == "c" else c[::-1]), shape)
    return [hosts[m] for m in mirrored]


def simulate(case: Path, platform: Path, hostfile: Path, n: int, program: list[str]) -> float:
    out = subprocess.run(
        ["smpirun", "-platform", str(platform), "-hostfile", str(hostfile), "-np", str(n),
         "--cfg=smpi/simulate-computation:no", "--cfg=smpi/display-timing:yes",
         "--log=xbt_cfg.thresh:warning", "--log=smpi_config.thresh:warning", *program],
        capture_output=True, text=True, cwd=case, check=False)
    text = out.stdout + out.stderr
    found = _APP.findall(text) or _SMPI.findall(text)
    if not found:
        raise SystemExit(f"{case}: no simulated time in smpirun's output:\n{text[-1500:]}")
    return float(found[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cases", nargs="+", type=Path)
    ap.add_argument("--grid", required=True, help="the code's grid, AxBxC")
    ap.add_argument("--order", choices=("c", "f"), default="c",
                    help="rank numbering: c = last axis fastest (halo3d), f = first (LULESH, MG)")
    ap.add_argument("--hostfile", default=None,
                    help="the placement to reflect (default: the case's first rankmap hostfile)")
    args = ap.parse_args()
    dims = tuple(int(x) for x in args.grid.split("x"))
    if len(dims) != 3:
        raise SystemExit("--grid needs AxBxC")
    print("| case | placement | block s | " + " | ".join(
        "".join(map(str, f)) for f in itertools.product((0, 1), repeat=3)) + " | spread |")
    print("|---|---|---|" + "---|" * 8 + "---|")
    for case in (c.resolve() for c in args.cases):
        results = json.loads((case / "results.json").read_text())
        n, program = int(results["ranks"]), list(results["program"])
        platform = case / "plat" / "platform.xml"
        if not platform.exists():
            platform = case / "platform.xml"
        source = (case / args.hostfile if args.hostfile
                  else sorted(case.glob("hostfile.*.rankmap_*"))[0])
        hosts = [line.split()[0] for line in source.read_text().splitlines() if line.strip()]
        coords = grid_coordinates(n, dims, args.order)
        block = simulate(case, platform, case / "hostfile.0.block", n, program)
        ratios = []
        with tempfile.TemporaryDirectory() as tmp:
            for flips in itertools.product((0, 1), repeat=3):
                path = Path(tmp) / "hostfile"
                path.write_text("\n".join(image(hosts, coords, dims, flips, args.order)) + "\n")
                ratios.append(simulate(case, platform, path, n, program) / block)
        print(f"| {case.name} | {source.name} | {block:.6g} | "
              + " | ".join(f"{r:.4f}" for r in ratios)
              + f" | {min(ratios):.4f}–{max(ratios):.4f} |", flush=True)


if __name__ == "__main__":
    main()
