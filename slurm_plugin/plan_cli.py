"""``rankmap plan``: everything the prolog computes, from explicit inputs, offline."""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from mapper import CommGraph
from mapper.cli import (
    CliError,
    add_algorithm_arguments,
    positive_float,
    positive_int,
    terminal_progress,
)
from mapper.graph_io import read_graph

from .allocation import Allocation
from .config import Config, load_config
from .distribution import parse_distribution
from .files import write_files
from .hostlist import expand_counts, expand_hostlist
from .hwloc import parse_hwloc_xml
from .layout import Layout, build_layout
from .network_source import load_network
from .plan import make_plan
from .profiles.cli import store_dirs
from .profiles.store import resolve_profile
from .topology import NodeShape, SwitchTree, parse_node_shape, parse_topology_conf

EXAMPLE = Path(__file__).resolve().parent / "data" / "example"


def add_job_arguments(p: argparse.ArgumentParser, profile_help: str | None = None) -> None:
    """The job's inputs as ``rankmap plan`` takes them (``rankmap simulate`` too)."""
    p.add_argument("--nodes", default="n[1-4]", help="host list (default n[1-4])")
    p.add_argument("--tasks-per-node", default=None,
                   help="tasks per node, e.g. 16 or 16(x3),8 (default: one per core)")
    p.add_argument("--cpus-per-task", type=positive_int, default=1)
    p.add_argument("--node-info", default="Sockets=2 CoresPerSocket=4",
                   help="node shape as in slurm.conf (default 'Sockets=2 CoresPerSocket=4')")
    p.add_argument("--topology-conf", default=str(EXAMPLE / "topology.conf"),
                   help="topology.conf with the switch tree (default: the bundled example "
                        "with two leaf switches under a spine); 'none' for no switches")
    p.add_argument("--hwloc-xml", metavar="FILE",
                   help="hwloc XML (lstopo --of xml) of the nodes: adds a cache level")
    p.add_argument("--profile", default="lammps-3d",
                   help=profile_help or "store name, generator spec (stencil3d, npb-cg, ...) "
                                        "or a matrix file (default: the bundled lammps-3d)")
    p.add_argument("--distribution", default=None, metavar="DIST",
                   help="the job's Slurm --distribution, which gives the default placement "
                        "rankmap must beat (default block:cyclic, Slurm's default)")
    p.add_argument("--time-limit", type=positive_float, default=None,
                   help="solver budget, seconds")
    p.add_argument("--store", action="append", metavar="DIR")
    p.add_argument("--config", metavar="FILE")
    p.add_argument("--oversubscribe", action="store_true",
                   help="map more tasks per node than its cores hold (as a job submitted "
                        "with --overcommit at a site with [solver] oversubscribe = allow)")


@dataclass(frozen=True)
class JobInputs:
    """What ``add_job_arguments`` describe, read and checked."""

    alloc: Allocation
    shape: NodeShape
    tree: SwitchTree
    layout: Layout
    graph: CommGraph
    #: wall seconds spent reading the profile (``profile``) and building the machine
    #: from the allocation, node shape and switch tree (``layout``)
    phases: dict[str, float] = field(default_factory=dict)


def job_inputs(args: argparse.Namespace, cfg: Config) -> JobInputs:
    """Allocation, node shape, switch tree, layout and communication graph from the
    arguments; files are read here (the CLI edge)."""
    clock = time.perf_counter()
    nodes = expand_hostlist(args.nodes)
    shape = parse_node_shape(args.node_info)
    if args.tasks_per_node is None:
        tasks = [shape.cores // args.cpus_per_task] * len(nodes)
    else:
        tasks = expand_counts(args.tasks_per_node)
        if len(tasks) == 1:
            tasks = tasks * len(nodes)
    if len(tasks) != len(nodes):
        raise CliError(f"--tasks-per-node gives {len(tasks)} counts for {len(nodes)} nodes")
    alloc = Allocation(job_id=None, nodes=tuple(nodes), tasks_per_node=tuple(tasks),
                       cpus_per_task=args.cpus_per_task)
    tree = SwitchTree()
    if args.topology_conf != "none":
        path = Path(args.topology_conf)
        tree = parse_topology_conf(path.read_text(), str(path))
    groups = None
    if args.hwloc_xml:
        xml = parse_hwloc_xml(Path(args.hwloc_xml).read_text(), args.hwloc_xml)
        groups = dict.fromkeys(nodes, xml)
    layout = build_layout(alloc, shape, tree, cfg.get("solver", "level_distances"), groups,
                          cfg.get("hwloc", "cache_distance"),
                          oversubscribe=(args.oversubscribe or
                                         cfg.get("solver", "oversubscribe") == "allow"))
    phases = {"layout": time.perf_counter() - clock}
    clock = time.perf_counter()
    if Path(args.profile).is_file():
        graph = read_graph(args.profile)
    else:
        graph = resolve_profile(args.profile, layout.n, store_dirs(args),
                                max_bytes=cfg.get("profiles", "max_file_bytes"))
    phases["profile"] = time.perf_counter() - clock
    return JobInputs(alloc, shape, tree, layout, graph, phases)


def add_plan_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="compute and render a placement from explicit inputs",
                       description="Compute a placement the way the prolog does, from a "
                                   "node list, a node shape and a topology.conf, and write "
                                   "the launcher files and the report into --out.")
    add_job_arguments(p)
    add_algorithm_arguments(p, "a preset or an algorithm such as topdown+n10 (default: the "
                               "site's [solver] algorithm, else default_preset)")
    p.add_argument("--out", required=True, metavar="DIR")
    p.add_argument("--json", action="store_true",
                   help="print a JSON summary (decision, J, files, phase times) on stdout "
                        "instead of the report")
    p.set_defaults(func=_plan)


def _plan(args: argparse.Namespace) -> int:
    clock = time.perf_counter()
    cfg = load_config(args.config)
    inputs = job_inputs(args, cfg)
    layout, graph = inputs.layout, inputs.graph
    plan = make_plan(layout, graph, algorithm=(args.preset or args.algorithm
                                          or cfg.get("solver", "algorithm")),
                     time_limit=args.time_limit or cfg.get("solver", "time_limit"),
                     seed=cfg.get("solver", "seed"), files=cfg.get("render", "files"),
                     profile=args.profile,
                     templates_dir=cfg.get("render", "templates_dir") or None,
                     progress=terminal_progress(),
                     distribution=parse_distribution(args.distribution),
                     distribution_assumed=args.distribution is None,
                     network=load_network(cfg))
    written_from = time.perf_counter()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    written = write_files(out, {**plan.files, "report": plan.report_text,
                                "record": plan.report_json})
    phases = {**inputs.phases, **plan.phases, "write": time.perf_counter() - written_from}
    total = time.perf_counter() - clock
    # "other": configuration, argument handling, anything no phase names
    phases["other"] = max(0.0, total - sum(phases.values()))
    phases["total"] = total
    if args.json:
        result = plan.result
        print(json.dumps({
            "applied": plan.applied, "kept_default": plan.kept_default,
            "fallback_reason": plan.fallback_reason, "summary": plan.summary,
            "n": layout.n, "algorithm": result.algorithm if result else None,
            "objective": result.objective if result else None,
            "origin": result.origin if result else None,
            "solver_seconds": result.seconds if result else None,
            "files": {name: str(path) for name, path in written.items()},
            "phases": phases}))
        return 0
    sys.stdout.write(plan.report_text)
    print("\nwrote " + ", ".join(str(p) for p in written.values()))
    return 0
