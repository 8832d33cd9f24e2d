"""``rankmap partition`` and ``rankmap evaluate-partition``: mesh mode from the command line.

``partition`` reads a mesh (:func:`mapper.io.mesh_file.read_mesh`), builds the machine
(a homogeneous hierarchy, PE speeds, link costs), decomposes the mesh onto it
(:func:`mapper.mesh.decompose.decompose`) and writes

* the **partition file** (``--output``): line v holds the 0-based rank owning mesh
  vertex v (METIS' ``.part`` format, OpenFOAM's ``manual`` method), nothing else;
* the **placement** (``--placement``, optional): line r holds the PE of rank r, the
  ``rankmap map`` format.

``evaluate-partition`` reads a partition file (and a placement) and prints the same
metrics.  Partition files may have ``#`` comments and blank lines (rankmap's text
convention); a wrong line count, a non-integer or a rank outside 0..P-1 is an error
naming ``file:line``.

The machine's cost model (Moulitsas & Karypis §2.2, :mod:`mapper.mesh.architecture`):
``--link-costs`` (default: the ``--distances``) gives the cost per unit of data of a
link at each level.  Without ``--node-level`` every pair of PEs is directly linked and
e* is the link cost of their lowest common level, so e* equals the distances J uses.
With ``--node-level L`` only PEs sharing a level-L group (a node) are directly linked;
data between nodes crosses node → switch → … → node and costs the *quadratic path
length*, the sum of the squared link costs along the path, so the scale of the link
costs matters there (1:10:100 above a node makes a cross-switch unit 2·100² = 20000).

I/O lives here; the computing functions stay pure.  Errors are ``RankmapError`` s:
:mod:`slurm_plugin.commands.cli` prints them as one line, exit status 2.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from mapper.io.graph_file import read_input_text
from mapper.io.mapping_file import read_mapping
from mapper.io.mesh_file import read_mesh
from mapper.io.partition_file import read_partition_file, write_lines
from mapper.mesh import PartitionMetrics, evaluate_partition
from mapper.mesh.architecture import Architecture, architecture_from_hierarchy
from mapper.mesh.decompose import Decomposition, decompose
from mapper.mesh.method_names import BACKENDS, DEFAULT_BACKEND, PARTITION_METHODS, RMS
from mapper.model.machine import Hierarchy
from mapper.objectives.qap import check_mapping

from ..machine.speeds import parse_pe_speeds
from .args import CliError, parse_hierarchy_options, positive_float, positive_int

_LINK_HELP = (
    "cost per unit of data of a link at each level, innermost first (default: the "
    "--distances).  Without --node-level every PE pair is directly linked and pays its "
    "common level's cost; with it, pairs on different nodes pay the quadratic path "
    "length (sum of the squared costs of the links node -> switch -> ... -> node), so "
    "the scale matters there")


def _machine_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("mesh", metavar="MESH",
                   help="the mesh: METIS .graph (vertex weights/sizes kept), Matrix Market, "
                        "CSV or npz")
    p.add_argument("--weights", metavar="FILE",
                   help="per-vertex 'w [c]' lines (work, communication size) for a mesh "
                        "file without vertex weights")
    p.add_argument("--hierarchy", required=True, metavar="A1:A2:...",
                   help="the machine, innermost fan-out first (4:16:8 = 8 groups of 16 "
                        "groups of 4 PEs, the paper's S); one rank per PE")
    p.add_argument("--distances", required=True, metavar="D1:D2:...",
                   help="distance of each level for J (the mapping's objective)")
    p.add_argument("--link-costs", metavar="C1:C2:...", help=_LINK_HELP)
    p.add_argument("--node-level", type=positive_int, metavar="L",
                   help="levels 1..L lie inside a node (directly linked PEs); links above "
                        "cost the quadratic path length (default: all pairs directly "
                        "linked)")
    p.add_argument("--speeds", metavar="FILE",
                   help="PE speeds: lines 'PES SPEED' (e.g. '0-15 2.0'; unlisted PEs 1.0); "
                        "block targets are proportional to speed")
    p.add_argument("--json", action="store_true", help="print the metrics as JSON")


def add_partition_command(sub: argparse._SubParsersAction) -> None:
    """Register ``rankmap partition``."""
    p = sub.add_parser(
        "partition", help="decompose a mesh onto a machine (partition file + placement)",
        description="Partition MESH into one block per PE of the machine (targets "
                    "proportional to PE speed), map the blocks' quotient graph onto the "
                    "hierarchy, and write the partition file: line v = the 0-based rank "
                    "owning vertex v.  Prints edge cut, volume, MaxElTime/SumElTime, "
                    "imbalance and J.")
    _machine_args(p)
    p.add_argument("--method", default=RMS, choices=PARTITION_METHODS,
                   help="rms: multisection along the hierarchy (default); rb: recursive "
                        "bisection; archaware-*: Moulitsas & Karypis VolS/VolNS/ElTS/ElTNS")
    p.add_argument("--epsilon", type=_epsilon, default=0.03,
                   help="allowed imbalance per block, relative to its target (default 0.03)")
    p.add_argument("--map", dest="map_algorithm", default="topdown+n10", metavar="ALGORITHM",
                   help="maps the blocks' quotient graph onto the hierarchy (default "
                        "topdown+n10; 'identity' keeps block b on PE b); runs only with "
                        "equal PE speeds, and never for archaware-*")
    p.add_argument("--backend", default=DEFAULT_BACKEND, choices=BACKENDS,
                   help="graph partitioner of rb and rms (default %(default)s)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--time-limit", type=positive_float, metavar="SECONDS",
                   help="goal for partition + mapping (the archaware corrector and the "
                        "mapping's local search stop at it)")
    p.add_argument("--output", required=True, metavar="PARTFILE",
                   help="partition file: line v holds the rank of mesh vertex v")
    p.add_argument("--placement", metavar="FILE",
                   help="also write the placement: line r holds the PE of rank r")
    p.set_defaults(func=_cmd_partition)


def add_evaluate_partition_command(sub: argparse._SubParsersAction) -> None:
    """Register ``rankmap evaluate-partition``."""
    p = sub.add_parser(
        "evaluate-partition", help="metrics of a mesh partition file on a machine",
        description="Recompute edge cut, volume, MaxElTime/SumElTime, imbalance and J of "
                    "PARTFILE (line v = rank of vertex v); rank r runs on PE r unless "
                    "--placement says otherwise.")
    _machine_args(p)
    p.add_argument("partfile", metavar="PARTFILE")
    p.add_argument("--placement", metavar="FILE",
                   help="line r holds the PE of rank r (default: rank r on PE r)")
    p.set_defaults(func=_cmd_evaluate_partition)


def _epsilon(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    return value


# -- inputs --------------------------------------------------------------------------------

def _levels(text: str, option: str) -> list[float]:
    try:
        return [float(x) for x in text.split(":")]
    except ValueError:
        raise CliError(f"{option} {text!r}: expected numbers separated by ':'") from None


def load_machine(args: argparse.Namespace) -> tuple[Hierarchy, Architecture]:
    """The hierarchy (for J and the mapping) and the architecture (speeds, link costs)
    the options describe."""
    hierarchy = parse_hierarchy_options(args.hierarchy, args.distances)
    k = hierarchy.levels
    if args.link_costs is None:
        costs = list(hierarchy.distances)
    else:
        costs = _levels(args.link_costs, "--link-costs")
        if len(costs) != k:
            raise CliError(f"--link-costs {args.link_costs!r} has {len(costs)} levels but "
                           f"--hierarchy {args.hierarchy!r} has {k}")
    node_level = None
    if args.node_level is not None:
        if args.node_level >= k:
            raise CliError(f"--node-level {args.node_level}: the hierarchy {args.hierarchy} "
                           f"has levels 1..{k - 1} below the whole machine")
        node_level = args.node_level - 1
    speeds = None
    if args.speeds:
        speeds = parse_pe_speeds(read_input_text(args.speeds, None, "a speeds file"),
                                 args.speeds, hierarchy.n)
    arch = architecture_from_hierarchy(hierarchy, costs, speeds, node_level=node_level,
                                       name=f"--hierarchy {args.hierarchy}")
    return hierarchy, arch


# -- commands ------------------------------------------------------------------------------

def _cmd_partition(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    hierarchy, arch = load_machine(args)
    mesh = read_mesh(args.mesh, args.weights)
    read_s = time.perf_counter() - t0
    d = decompose(mesh, hierarchy, arch, method=args.method, epsilon=args.epsilon,
                  map_algorithm=args.map_algorithm, seed=args.seed,
                  time_limit=args.time_limit, backend=args.backend)
    t0 = time.perf_counter()
    write_lines(args.output, d.part)
    if args.placement:
        write_lines(args.placement, d.placement)
    seconds = {"read": read_s, **d.seconds, "write": time.perf_counter() - t0}
    seconds["total"] = seconds.pop("total") + read_s + seconds["write"]  # listed last
    if args.json:
        print(json.dumps(partition_summary(d, mesh, seconds, args)))
    else:
        print(render(d.metrics, mesh, args, d, seconds))
    return 0


def partition_summary(d: Decomposition, mesh, seconds: dict[str, float],
                      args: argparse.Namespace) -> dict:
    """The JSON of ``rankmap partition``: the metrics, the method, seconds and notes."""
    return {**d.metrics.to_dict(), "edges": mesh.graph.m, "mesh": args.mesh,
            "method": d.method, "map_algorithm": d.map_algorithm,
            "seconds": seconds, "partition_seconds": d.partition_seconds,
            "notes": list(d.notes), "output": args.output, "placement": args.placement}


def _cmd_evaluate_partition(args: argparse.Namespace) -> int:
    hierarchy, arch = load_machine(args)
    mesh = read_mesh(args.mesh, args.weights)
    part = read_partition_file(args.partfile, mesh.n, hierarchy.n)
    if args.placement:
        placement = read_mapping(args.placement)
        try:
            placement = check_mapping(placement, hierarchy.n, hierarchy.n)
        except ValueError as exc:
            raise CliError(f"{args.placement}: {exc}", source=args.placement) from None
    else:
        placement = np.arange(hierarchy.n, dtype=np.int64)
    metrics = evaluate_partition(mesh, placement[part], arch, hierarchy=hierarchy)
    if args.json:
        print(json.dumps({**metrics.to_dict(), "edges": mesh.graph.m, "mesh": args.mesh,
                          "partition": args.partfile, "placement": args.placement}))
    else:
        print(render(metrics, mesh, args))
    return 0


def render(metrics: PartitionMetrics, mesh, args: argparse.Namespace,
           d: Decomposition | None = None, seconds: dict[str, float] | None = None) -> str:
    """The human-readable summary."""
    head = f"{args.mesh}: {mesh.n} vertices, {mesh.graph.m} edges -> {metrics.nparts} ranks"
    if d is not None:
        head += f" ({d.method}, mapped by {d.map_algorithm})"
    lines = [head,
             f"edge cut {metrics.edge_cut:g}   total volume {metrics.total_volume:g}   "
             f"max volume {metrics.max_volume:g}   imbalance {100 * metrics.imbalance:.1f} %",
             f"MaxElTime {metrics.max_el_time:g}   SumElTime {metrics.sum_el_time:g}   "
             f"J {metrics.objective:g}"]
    if seconds is not None:
        lines.append("time: " + ", ".join(f"{k} {v:.2f} s" for k, v in seconds.items()))
    if d is not None:
        lines += [f"note: {note}" for note in d.notes]
        lines.append(f"wrote {args.output}" +
                     (f" and {args.placement}" if args.placement else ""))
    return "\n".join(lines)
