"""``rankmap map`` and ``rankmap evaluate``: the solver from the command line.

The files are read and written by :mod:`mapper.io` (graphs, arity files, distance
matrices, mapping files); the computing functions stay pure.  Errors in inputs become
one line on stderr and exit code 2 (:mod:`slurm_plugin.commands.cli` turns every
``RankmapError`` into that).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from mapper.io.arity_file import hierarchy_from_arities, parse_arity_file
from mapper.io.distance_matrix_file import read_distance_matrix
from mapper.io.graph_file import read_graph
from mapper.io.mapping_file import format_mapping, read_mapping
from mapper.model.graph import CommGraph
from mapper.model.machine import Hierarchy, Machine
from mapper.objectives.qap import evaluate
from mapper.solve.api import map_processes

from .args import (
    CliError,
    add_algorithm_arguments,
    parse_hierarchy_options,
    positive_float,
    terminal_progress,
)


def add_map_commands(sub: argparse._SubParsersAction) -> None:
    """Register ``map`` and ``evaluate`` on a subparsers object."""
    p = sub.add_parser("map", help="map a communication graph onto a hierarchy",
                       description="Map GRAPH's ranks onto the PEs of a homogeneous hierarchy "
                                   "and write one PE index (0-based) per rank to FILE.")
    _machine_args(p)
    add_algorithm_arguments(p, "a preset or CONSTRUCTION[+NEIGHBOURHOOD], e.g. "
                               "topdown+n10, greedy+np (default: the preset fast)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--time-limit", type=positive_float, default=None, metavar="SECONDS")
    p.add_argument("--attempts", type=int, default=1,
                   help="repeat with seeds SEED, SEED+1, ... and keep the best (default 1)")
    p.add_argument("--output", required=True, metavar="FILE",
                   help="mapping file: line r holds the PE of rank r")
    p.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    p.set_defaults(func=_cmd_map)

    e = sub.add_parser("evaluate", help="objective J of a mapping file",
                       description="Recompute J and per-level traffic of a mapping file.")
    _machine_args(e)
    e.add_argument("--mapping", required=True, metavar="FILE")
    e.add_argument("--json", action="store_true")
    e.set_defaults(func=_cmd_evaluate)


def _machine_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("graph", metavar="GRAPH",
                   help="communication graph: METIS .graph, Matrix Market .mtx, CSV, .npz")
    p.add_argument("--hierarchy", metavar="A1:A2:...",
                   help="PEs per group, innermost first, e.g. 4:16:8")
    p.add_argument("--distances", metavar="D1:D2:...",
                   help="distance per level, innermost first, e.g. 1:10:100")
    p.add_argument("--distance-matrix", metavar="FILE",
                   help="instead of a hierarchy: an explicit n x n distance matrix (text, "
                        "one row per line, or .npy) for non-tree machines such as tori")
    p.add_argument("--arity-file", metavar="FILE",
                   help="instead of --hierarchy: a hardware information file (line 1 the "
                        "number of levels, line 2 the arities, root first; 'rankmap "
                        "hwinfo' writes one); --distances optional, tree hops by default")


def _load(args: argparse.Namespace) -> tuple[CommGraph, Machine]:
    if args.arity_file:
        if args.hierarchy or args.distance_matrix:
            raise CliError("give either --arity-file or --hierarchy/--distance-matrix")
        # the graph first: its rank count bounds the PEs the arities may make, checked
        # before the machine is built
        graph = read_graph(args.graph)
        machine: Machine = _read_arity_file(args.arity_file, args.distances, graph.n)
        what = f"--arity-file {args.arity_file}"
    elif args.distance_matrix:
        if args.hierarchy or args.distances:
            raise CliError("give either --distance-matrix or --hierarchy/--distances")
        machine = read_distance_matrix(args.distance_matrix)
        what = f"--distance-matrix {args.distance_matrix}"
    else:
        if not (args.hierarchy and args.distances):
            raise CliError("--hierarchy and --distances are required (or --distance-matrix, "
                           "--arity-file)")
        machine = parse_hierarchy_options(args.hierarchy, args.distances)
        what = f"--hierarchy {args.hierarchy}"
    if not args.arity_file:
        graph = read_graph(args.graph)
    if graph.n != machine.n:
        raise CliError(f"{args.graph}: graph has {graph.n} ranks but {what} has {machine.n} "
                       f"PEs")
    return graph, machine


def _read_arity_file(path: str, distances: str | None,
                     max_pes: int | None = None) -> Hierarchy:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise CliError(f"{path}: cannot read: {exc.strerror or exc}") from None
    arities = parse_arity_file(text, path, max_pes)
    if distances is None:
        return hierarchy_from_arities(arities)
    try:
        dist = [float(x) for x in distances.split(":")]
    except ValueError:
        raise CliError(f"--distances {distances!r}: expected numbers separated by ':'"
                       ) from None
    if len(dist) != len(arities):
        raise CliError(f"--distances {distances!r} has {len(dist)} levels but {path} has "
                       f"{len(arities)}")
    return hierarchy_from_arities(arities, dist)  # distances innermost first


def _traffic_json(traffic) -> list[dict]:
    return [t.as_dict() for t in traffic]


def _cmd_map(args: argparse.Namespace) -> int:
    clock = start = time.perf_counter()
    progress = terminal_progress()
    if progress:
        progress(f"reading {args.graph}")
    graph, machine = _load(args)
    timings = {"read": time.perf_counter() - clock}
    result = map_processes(graph, machine, args.preset or args.algorithm or "fast",
                           args.seed, args.time_limit, args.attempts, progress)
    timings.update({("solver_other" if k == "other" else k): v
                   for k, v in result.timings.items()})
    clock = time.perf_counter()
    Path(args.output).write_text(format_mapping(result.mapping))
    timings["write"] = time.perf_counter() - clock
    summary = {
        "objective": result.objective,
        "seconds": result.seconds,
        "algorithm": result.algorithm,
        "origin": result.origin,
        "candidates": dict(result.candidates),
        "seed": result.seed,
        "n": graph.n,
        "m": graph.m,
        "hit_time_limit": result.hit_time_limit,
        "traffic": _traffic_json(result.traffic),
        "notes": list(result.notes),
    }
    hops = _hop_bytes(graph, machine, result.mapping)
    if hops is not None:
        summary.update(hops.as_dict())
    total = time.perf_counter() - start
    timings["other"] = max(0.0, total - sum(timings.values()))  # hop-bytes, the summary
    summary["timings"] = {**timings, "total": total}
    if args.json:
        print(json.dumps(summary))
    else:
        won = (result.algorithm if result.origin == "algorithm"
               else f"{result.origin}, beside {result.algorithm}'s "
                    f"{result.candidates.get(result.algorithm, float('nan')):g}")
        print(f"J = {result.objective:g}  ({won}, {result.seconds:.3f} s, "
              f"n = {graph.n}, m = {graph.m}) -> {args.output}")
        if hops is not None:
            print(_hop_bytes_line(hops))
        for note in result.notes:
            print(f"note: {note}")
    return 0


def _hop_bytes(graph: CommGraph, machine: Machine, mapping: np.ndarray):
    """Hop-bytes when the machine is a hop matrix (explicit matrix), else None."""
    from mapper.objectives.hop_bytes import has_hops, hop_bytes

    return hop_bytes(graph, machine, mapping) if has_hops(machine) else None


def _hop_bytes_line(hops) -> str:
    return (f"hop-bytes = {hops.total:g}  (max {hops.max_hops:g} hops, "
            f"{hops.mean_hops_per_byte:.3f} hops per byte)")


def _cmd_evaluate(args: argparse.Namespace) -> int:
    graph, machine = _load(args)
    mapping = read_mapping(args.mapping)
    ev = evaluate(graph, machine, mapping)
    hops = _hop_bytes(graph, machine, mapping)
    if args.json:
        out = {"objective": ev.objective, "n": graph.n, "m": graph.m,
               "traffic": _traffic_json(ev.traffic)}
        if hops is not None:
            out.update(hops.as_dict())
        print(json.dumps(out))
    else:
        print(f"J = {ev.objective:g}")
        for t in ev.traffic:
            print(f"  {t.name:>10}  distance {t.distance:g}  volume {t.volume:g}")
        if hops is not None:
            print(_hop_bytes_line(hops))
    sys.stdout.flush()
    return 0
