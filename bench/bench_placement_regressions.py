"""Placement-correctness regressions (issue 7), run by hand: the rendered files' J
against Slurm's default placement.

Case A: 8 nodes ``rmnode[0-7]`` of 4 cores whose names do not follow the switches
(leaf0 = rmnode[0,4], leaf1 = rmnode[1,5], ...), 32 ranks of the bundled LAMMPS-style
profile.  Case B: 32 nodes x 2 sockets x 4 cores under 4 leaf switches,
``stencil3d:8x8x4,periodic``.  Distances 1:10:100:1000 (socket, node, leaf, spine).

Every J here is recomputed from the rendered rankfile and the topology.conf text by
tests/helpers/independent_eval.py, which shares no code with the solver; Slurm's block:cyclic
placement is recomputed by hand the same way.  ``--src DIR`` runs another checkout of
rankmap (e.g. ``git worktree add /tmp/before <commit>`` + ``python3 setup.py build_ext
--inplace`` there) to reproduce the "before" numbers in bench/README.md.

    python3 bench/bench_placement_regressions.py [--src DIR] [--algorithm topdown+n10]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CASE_A = "".join(f"SwitchName=leaf{i} Nodes=rmnode[{i},{i + 4}]\n" for i in range(4)) + \
    "SwitchName=spine Switches=leaf[0-3]\n"
CASE_B = "".join(f"SwitchName=l{i} Nodes=c[{8 * i}-{8 * i + 7}]\n" for i in range(4)) + \
    "SwitchName=spine Switches=l[0-3]\n"
DISTANCES = [1.0, 10.0, 100.0, 1000.0]


def run_case(name: str, conf: str, nodes: list[str], sockets: int, cores: int,
             profile: str, algorithm: str) -> dict:
    from slurm_plugin.machine.layout import build_layout
    from slurm_plugin.modes.graph_job import make_plan
    from slurm_plugin.profiles.generators import is_generator_spec
    from slurm_plugin.slurm.allocation import Allocation
    from slurm_plugin.slurm.topology import NodeShape, parse_topology_conf
    from tests.helpers import independent_eval as ie

    ntasks = sockets * cores
    alloc = Allocation("1", tuple(nodes), (ntasks,) * len(nodes))
    layout = build_layout(alloc, NodeShape(sockets, cores), parse_topology_conf(conf),
                          DISTANCES)
    graph = _profile(profile, layout.n, is_generator_spec(profile))
    start = time.perf_counter()
    import slurm_plugin

    templates = Path(slurm_plugin.__file__).resolve().parent.parent / "templates"
    plan = make_plan(layout, graph, algorithm=algorithm, time_limit=30,
                     templates_dir=str(templates))
    seconds = time.perf_counter() - start
    u, v, w = graph.edges()
    edges = list(zip(u.tolist(), v.tolist(), w.tolist(), strict=True))
    per_socket = {n: dict.fromkeys(range(sockets), cores) for n in nodes}
    block = ie.objective(edges, ie.slurm_block_cyclic(nodes, per_socket), conf, DISTANCES)
    if "rankfile" in plan.files:
        ranks = ie.parse_rankfile(plan.files["rankfile"])
        applied = ie.objective(edges, {r: (h, s) for r, (h, s, _) in ranks.items()}, conf,
                               DISTANCES)
        what = "rankmap files"
    else:
        applied, what = block, "Slurm default kept"
    claimed = plan.result.objective if plan.result is not None else float("nan")
    return {"case": name, "ranks": layout.n, "block J": block, "applied J": applied,
            "applied/block": applied / block, "solver claims": claimed,
            "claim/real": claimed / applied, "what runs": what, "seconds": seconds}


def _profile(spec: str, n: int, generator: bool):
    from slurm_plugin.profiles.generators import generate

    if generator:
        return generate(spec, n)
    from slurm_plugin.profiles.store import resolve_profile

    try:
        from slurm_plugin.commands.profile_cli import bundled_store
    except ImportError:
        bundled_store = None
    stores = [str(bundled_store())] if bundled_store else []
    return resolve_profile(spec, n, stores)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--src", help="another rankmap checkout to measure (before numbers)")
    p.add_argument("--algorithm", default="topdown+n10")
    args = p.parse_args(argv)
    sys.path.insert(0, str(HERE.parent))  # tests.helpers.independent_eval
    from tests.helpers import independent_eval  # noqa: F401  (this checkout's, before --src)
    if args.src:
        sys.path.insert(0, str(Path(args.src).resolve()))
    import slurm_plugin

    print(f"rankmap from {Path(slurm_plugin.__file__).resolve().parent.parent}, "
          f"algorithm {args.algorithm}")
    rows = [
        run_case("A interleaved 8x4, lammps-3d", CASE_A, [f"rmnode{i}" for i in range(8)],
                 1, 4, "lammps-3d", args.algorithm),
        run_case("B 32x2x4 / 4 leaves, stencil3d periodic", CASE_B,
                 [f"c{i}" for i in range(32)], 2, 4, "stencil3d:8x8x4,periodic",
                 args.algorithm),
    ]
    cols = list(rows[0])
    widths = [max(len(c), *(len(_fmt(r[c])) for r in rows)) for c in cols]
    print("  ".join(c.ljust(wd) for c, wd in zip(cols, widths, strict=True)))
    for r in rows:
        print("  ".join(_fmt(r[c]).ljust(wd) for c, wd in zip(cols, widths, strict=True)))
    print("\napplied/block < 1: the job runs faster-placed than Slurm's default; "
          "claim/real != 1: the report's J is not the J of the files it rendered")
    return 0


def _fmt(x) -> str:
    if isinstance(x, float):
        return f"{x:.3f}" if x < 100 else f"{x:,.0f}"
    return str(x)


if __name__ == "__main__":
    sys.exit(main())
