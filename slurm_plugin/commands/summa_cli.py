"""``rankmap summa``: arrange a heterogeneous SUMMA's column-based partition, offline.

The layout comes from per-rank relative speeds (``--speeds``: the N x N matrix is
partitioned by Beaumont et al.'s column-based algorithm, :mod:`mapper.summa.tiling`)
or is given as it is (``--layout``: an arrangement file, e.g. the layout a code already
uses or the slides' worked example).  The ranks are grouped (a groups file, or a
homogeneous hierarchy with ranks in Slurm's block order) and the rectangles arranged to
cut inter-group traffic (:mod:`mapper.summa.arrange`), or, with ``--arranged``, a given
rearrangement of the layout is evaluated instead of searched for.  Prints cost_A,
cost_B and the norm of the original and of the arranged layout, and writes the
arrangement file (format: :mod:`mapper.io.summa_files`).
"""

from __future__ import annotations

import argparse
import json

from mapper.io.summa_files import read_arrangement, read_groups, read_speeds, write_arrangement
from mapper.summa.arrange import Arrangement, arrange
from mapper.summa.cost import Grouping, cost
from mapper.summa.tiling import partition

from .args import CliError, parse_hierarchy_options, positive_int


def add_summa_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "summa", help="arrange a heterogeneous SUMMA partition for the network",
        description="Partition an N x N matrix into columns of rectangles with areas "
                    "proportional to the ranks' speeds, then permute rectangles inside "
                    "columns so the ring broadcasts along rows (matrix A) and down columns "
                    "(matrix B) cross fewer group boundaries.  Prints cost_A, cost_B and "
                    "their norm before and after, writes the arrangement file.")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--speeds", metavar="FILE",
                     help="line r: relative speed of rank r ('#' comments); the layout is "
                          "the column-based partition for these speeds (needs --size)")
    src.add_argument("--layout", metavar="FILE",
                     help="the layout itself, in the arrangement file's format: a "
                          "'<nranks> <N>' line, then 'rank column position row_offset "
                          "col_offset height width' per rank (0-based; the rectangles must "
                          "tile the N x N matrix; '#' comments)")
    grp = p.add_mutually_exclusive_group(required=True)
    grp.add_argument("--groups", metavar="FILE",
                     help="line r: group id of rank r (switch, node or socket; any word); "
                          "two-level cost: 0 inside a group, 1 across")
    grp.add_argument("--hierarchy", metavar="A1:A2:...",
                     help="homogeneous machine, innermost fan-out first (e.g. 8:4:2: 8 cores "
                          "per node, 4 nodes per switch, 2 switches); rank r on PE r")
    p.add_argument("--level", type=positive_int, metavar="L",
                   help="with --hierarchy: the level whose groups are kept together (1 = the "
                        "innermost groups of A1 PEs); without --distances also the two-level "
                        "cost's level")
    p.add_argument("--distances", metavar="D1:D2:...",
                   help="with --hierarchy: weight transfers by the distance of the ranks' "
                        "lowest common level instead of counting inter-group transfers")
    p.add_argument("--size", type=positive_int, metavar="N",
                   help="with --speeds: matrix size N (the matrix is N x N; a --layout "
                        "file gives its own)")
    p.add_argument("--exhaustive", action="store_true",
                   help="exhaustive search over all in-column orders instead of the heuristic "
                        "(small layouts only)")
    p.add_argument("--exchange-columns", action="store_true",
                   help="with --exhaustive: also try every order of the columns")
    p.add_argument("--arranged", metavar="FILE",
                   help="with --layout: evaluate this rearrangement of the layout (the "
                        "same rectangles restacked in their columns, or whole columns "
                        "exchanged; arrangement file format) instead of searching for one")
    p.add_argument("--output", metavar="ARR",
                   help="write the arranged layout here (needed unless --arranged)")
    p.add_argument("--original", metavar="ORIG",
                   help="also write the original layout here (the partitioner's, or the "
                        "--layout file's)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=_summa)


def _grouping(args: argparse.Namespace, n: int) -> tuple[Grouping, str]:
    if args.groups:
        if args.level or args.distances:
            raise CliError("--level and --distances go with --hierarchy, not --groups")
        groups = read_groups(args.groups, n)
        return Grouping.two_level(groups), f"groups from {args.groups} (two-level)"
    if not args.level:
        raise CliError("--hierarchy needs --level L (the level whose groups stay together)")
    distances = args.distances or ":".join("1" for _ in args.hierarchy.split(":"))
    hierarchy = parse_hierarchy_options(args.hierarchy, distances)  # checks both strings
    if args.level >= hierarchy.levels:
        raise CliError(f"--level {args.level}: the hierarchy {args.hierarchy} has group levels "
                       f"1..{hierarchy.levels - 1} (level {hierarchy.levels} is the whole "
                       f"machine)")
    grouping = Grouping.from_hierarchy(hierarchy, n, args.level - 1,
                                       weighted=bool(args.distances))
    what = (f"hierarchy {args.hierarchy}, distances {args.distances}" if args.distances
            else f"hierarchy {args.hierarchy}, level {args.level} (two-level)")
    return grouping, what


def _check_options(args: argparse.Namespace) -> None:
    if args.exchange_columns and not args.exhaustive:
        raise CliError("--exchange-columns goes with --exhaustive")
    if args.speeds and not args.size:
        raise CliError("--speeds needs --size N (the matrix size)")
    if args.layout and args.size:
        raise CliError("--size goes with --speeds: a --layout file gives N in its header")
    if args.arranged and not args.layout:
        raise CliError("--arranged goes with --layout (a rearrangement of that layout)")
    if args.arranged and args.exhaustive:
        raise CliError("--arranged is evaluated as it is: no search (--exhaustive) with it")
    if not args.output and not args.arranged:
        raise CliError("--output ARR is needed (where to write the arranged layout)")


def _summa(args: argparse.Namespace) -> int:
    _check_options(args)
    if args.layout:
        layout = read_arrangement(args.layout)
    else:
        layout = partition(read_speeds(args.speeds), args.size)
    grouping, what = _grouping(args, layout.n)
    if args.arranged:
        given = read_arrangement(args.arranged, like=layout)
        result = Arrangement(given, cost(layout, grouping), cost(given, grouping), 0, "given")
    elif args.exhaustive:
        result = arrange(layout, grouping, "exhaustive",
                         exchange_columns=args.exchange_columns)
    else:
        result = arrange(layout, grouping, "heuristic")
    if args.output:
        after = result.after
        write_arrangement(args.output, result.layout,
                          f"{result.method} cost_A={after.cost_a:g} cost_B={after.cost_b:g} "
                          f"norm={after.norm:.3f}")
    if args.original:
        before = result.before
        write_arrangement(args.original, layout,
                          f"original cost_A={before.cost_a:g} cost_B={before.cost_b:g} "
                          f"norm={before.norm:.3f}")
    if args.json:
        print(json.dumps(summary(result, what, args), indent=2))
    else:
        print(render(result, what, args))
    return 0


def summary(result: Arrangement, what: str, args: argparse.Namespace) -> dict:
    """The result as a JSON-ready dict."""
    layout = result.layout
    return {
        "nranks": layout.n, "size": layout.size, "columns": layout.ncolumns,
        "column_widths": layout.column_widths.tolist(),
        "rectangles_per_column": [len(c) for c in layout.columns()],
        "layout": args.layout, "arranged_input": args.arranged,
        "grouping": what, "method": result.method, "evaluations": result.evaluations,
        "kept_original": result.kept_original,
        "original": result.before.as_dict(), "arranged": result.after.as_dict(),
        "reduction": result.reduction,
        "output": args.output, "original_output": args.original,
    }


def render(result: Arrangement, what: str, args: argparse.Namespace) -> str:
    """The human-readable summary."""
    layout = result.layout
    lines = [f"{layout.n} ranks, {layout.size} x {layout.size} matrix, {layout.ncolumns} "
             f"columns (widths {' '.join(map(str, layout.column_widths.tolist()))}; "
             f"rectangles {' '.join(str(len(c)) for c in layout.columns())})",
             *([f"layout: {args.layout}"] if args.layout else []),
             f"grouping: {what}",
             f"{'':10s} {'cost_A':>10s} {'cost_B':>10s} {'norm':>10s}"]
    for name, c in (("original", result.before), ("arranged", result.after)):
        lines.append(f"{name:10s} {c.cost_a:10g} {c.cost_b:10g} {c.norm:10.3f}")
    if result.method == "given":
        how = f"as given in {args.arranged}"
    else:
        how = f"{result.method}, {result.evaluations} evaluations"
    note = " (nothing cheaper found: original kept)" if result.kept_original else ""
    lines.append(f"reduction {100 * result.reduction:.1f} % ({how}){note}")
    written = [f for f in (args.output, args.original) if f]
    if written:
        lines.append("wrote " + " and ".join(written))
    return "\n".join(lines)
