"""``rankmap report JOBDIR [--png FILE]``: a job's report, as text or as a picture.

The text is the job directory's ``report.txt`` as the prolog (or ``rankmap plan``)
wrote it.  The picture (:mod:`slurm_plugin.report_png`) needs more than the directory
holds: the communication matrix is the profile named in ``report.json``, resolved again
the way ``rankmap plan`` does (store name, generator spec, matrix file; ``--profile``
overrides it), and the placement order comes from the launcher files (the rankfile's
host/socket/core per rank, else the machinefile's host per rank).  When rankmap's
placement was not applied there are no launcher files: the job ran with Slurm's own
placement, shown in rank order.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from mapper.errors import RankmapError
from mapper.graph import GraphError
from mapper.graph_io import read_graph

from .config import load_config
from .hostlist import expand_hostlist
from .names import FILE_NAMES
from .profiles.cli import store_dirs
from .profiles.store import resolve_profile


class ReportError(RankmapError, ValueError):
    """A job directory without a readable report."""


def add_report_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="show a job's report (text, or a PNG picture)",
                       description="Print the report rankmap wrote into a job directory; "
                                   "with --png also draw the communication matrix in rank "
                                   "and in placement order and the traffic per level.")
    p.add_argument("jobdir", metavar="JOBDIR",
                   help="the job's directory (output_dir/job.<id>) or a rankmap plan --out")
    p.add_argument("--png", metavar="FILE", help="also draw the report into this PNG file "
                                                 "(needs matplotlib)")
    p.add_argument("--profile", help="the communication profile, if not the one the report "
                                     "names (store name, generator spec or matrix file)")
    p.add_argument("--store", action="append", metavar="DIR")
    p.add_argument("--config", metavar="FILE")
    p.set_defaults(func=_report)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ReportError(f"{path}: no such file; is {path.parent} a job directory "
                          f"(output_dir/job.<id>) or a 'rankmap plan --out' directory?",
                          source=str(path)) from None


def _report(args: argparse.Namespace) -> int:
    jobdir = Path(args.jobdir)
    sys.stdout.write(_read(jobdir / FILE_NAMES["report"]))
    if not args.png:
        return 0
    from .report_png import draw_report_png  # matplotlib only for pictures

    record_path = jobdir / FILE_NAMES["record"]
    try:
        record = json.loads(_read(record_path))
    except json.JSONDecodeError as exc:
        raise ReportError(f"{record_path}: not valid JSON ({exc})",
                          source=str(record_path)) from None
    matrix, note = job_matrix(record, args)
    order, node_sizes, label = placement_order(jobdir, record)
    draw_report_png(record, args.png, matrix, order, node_sizes, label, note)
    print(f"\nwrote {args.png}")
    return 0


def job_matrix(record: dict, args: argparse.Namespace) -> tuple[sp.csr_matrix | None, str]:
    """(the job's communication matrix or None, why not)."""
    spec, n = args.profile or record.get("profile"), int(record.get("n") or 0)
    if not spec or n <= 0:
        return None, "the report names no communication profile (give --profile)"
    try:
        if spec.startswith("file:") or Path(spec).is_file():
            graph = read_graph(spec[5:] if spec.startswith("file:") else spec, expected_n=n)
        else:
            cfg = load_config(args.config)
            graph = resolve_profile(spec, n, store_dirs(args),
                                    max_bytes=cfg.get("profiles", "max_file_bytes"))
    except (RankmapError, GraphError, OSError) as exc:
        print(f"rankmap: warning: profile {spec!r} not drawn: {exc}", file=sys.stderr)
        return None, f"profile {spec!r} not available here:\n{exc}"
    if graph.n != n:
        return None, f"profile {spec!r} has {graph.n} ranks, the job {n}"
    return graph.to_csr(), ""


_RANKFILE_LINE = re.compile(r"rank\s+(\d+)=(\S+)\s+slot=(\d+):(\d+)")


def placement_order(jobdir: Path, record: dict
                    ) -> tuple[np.ndarray | None, list[int] | None, str]:
    """(ranks in PE order or None, ranks per node in that order, a label)."""
    n = int(record.get("n") or 0)
    nodes = expand_hostlist(record["nodes"]) if record.get("nodes") else []
    node_index = {name: i for i, name in enumerate(nodes)}
    rankfile = jobdir / FILE_NAMES["rankfile"]
    machinefile = jobdir / FILE_NAMES["machinefile"]
    keys: dict[int, tuple] = {}
    label = ""
    if rankfile.is_file():
        for line in rankfile.read_text(encoding="utf-8").splitlines():
            m = _RANKFILE_LINE.match(line)
            if m:
                rank, host = int(m.group(1)), m.group(2)
                keys[rank] = (node_index.get(host, len(nodes)), host, int(m.group(3)),
                              int(m.group(4)))
        label = "from the rankfile"
    elif machinefile.is_file():
        hosts = machinefile.read_text(encoding="utf-8").split()
        keys = {rank: (node_index.get(h, len(nodes)), h) for rank, h in enumerate(hosts)}
        label = "from the machinefile"
    if n <= 0 or sorted(keys) != list(range(n)):
        return None, None, "Slurm's own placement: rank order"
    order = np.array(sorted(range(n), key=lambda r: (keys[r], r)), dtype=np.int64)
    node_of = [keys[r][:2] for r in order]
    sizes = [len(list(run)) for _, run in itertools.groupby(node_of)]
    return order, sizes, label
