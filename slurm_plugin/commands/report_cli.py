"""``rankmap report JOBDIR [--png FILE]``: a job's report, as text or as a picture.

The text is the job directory's ``report.txt`` as the prolog (or ``rankmap plan``)
wrote it.  The picture (:mod:`slurm_plugin.outputs.report_png`) needs more than the directory
holds: the communication matrix is the profile named in ``report.json``, resolved again
the way ``rankmap plan`` does (store name or generator spec; ``--profile`` overrides
it), and the placement order comes from the launcher files (the rankfile's
host/socket/core per rank, else the machinefile's host per rank).  When rankmap's
placement was not applied there are no launcher files: the job ran with Slurm's own
placement, shown in rank order.

An administrator runs this on directories whose contents a user wrote or chose (a
report quotes the user's spec; a ``rankmap plan --out`` or a copy handed over is the
user's own directory), so nothing in it is trusted: the directory is
opened once and every file is read relative to that descriptor, never through a
symbolic link, only if it is a regular file and only up to a size bound; what is printed
has its control characters escaped; a path written in ``report.json`` is never opened
(a ``file:`` profile is drawn only from a ``--profile FILE`` given on the command line).
"""

from __future__ import annotations

import argparse
import errno
import itertools
import json
import math
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from mapper.errors import RankmapError
from mapper.io.graph_file import read_graph
from mapper.io.regular_file import FileTooLarge, NotARegularFile, read_regular_file
from mapper.model.graph import GraphError

from ..common.hostlist import expand_hostlist
from ..common.job_conventions import FILE_NAMES
from ..common.safe_text import escape_controls, safe_text
from ..profiles.store import resolve_profile
from ..site.config import load_config
from .profile_cli import store_dirs

#: report.txt and report.json: a report of 2^20 ranks is far below this
MAX_REPORT_BYTES = 8 << 20
#: the most ranks a report.json may claim (the launcher files' bound grows with it)
MAX_RANKS = 1 << 24
#: a launcher file line per rank: ``rank R=HOST slot=S:CORES`` with a long host name and
#: a list of scattered cores fits; a file beyond this is not one rankmap wrote
LAUNCHER_BYTES_PER_RANK = 512
LAUNCHER_SLACK_BYTES = 64 << 10
#: levels and placements a picture can show; a record with more was not written by rankmap
_MAX_LEVELS = 64
_MAX_PLACEMENTS = 64
#: what the picture says instead of reading a path the job's user wrote
USER_PATH_NOTE = "profile is a user file path; give --profile FILE to draw it"


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


class JobDirectory:
    """A job directory opened once (``O_DIRECTORY | O_NOFOLLOW``); its files are opened
    by name relative to that descriptor, so swapping the directory or a file for a
    symbolic link afterwards redirects nothing."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        try:
            self.fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
                              | os.O_CLOEXEC)
        except FileNotFoundError:
            raise ReportError(f"{self._shown(self.path)}: no such directory",
                              source=str(self.path)) from None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR) and self.path.is_symlink():
                raise ReportError(f"{self._shown(self.path)}: is a symbolic link; give the "
                                  f"directory it leads to", source=str(self.path)) from None
            raise ReportError(f"{self._shown(self.path)}: not a readable directory "
                              f"({exc.strerror})", source=str(self.path)) from None

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> JobDirectory:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @staticmethod
    def _shown(path: Path) -> str:
        return safe_text(str(path), 1000)

    def read(self, name: str, max_bytes: int, *, required: bool = True) -> str | None:
        """File ``name`` of the directory as text (UTF-8, undecodable bytes replaced):
        a regular file, not a symbolic link, at most ``max_bytes``.  None when it does
        not exist and is not ``required``."""
        path = self._shown(self.path / name)
        try:
            data = read_regular_file(name, max_bytes, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            if not required:
                return None
            raise ReportError(f"{path}: no such file; is {self._shown(self.path)} a job "
                              f"directory (output_dir/job.<id>) or a 'rankmap plan --out' "
                              f"directory?", source=path) from None
        except NotARegularFile as exc:
            raise ReportError(f"{path}: is {exc.kind}, not a regular file; refused",
                              source=path) from None
        except FileTooLarge:
            raise ReportError(f"{path}: more than {max_bytes} bytes, more than rankmap "
                              f"writes there; refused", source=path) from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise ReportError(f"{path}: is a symbolic link; refused (the files of a job "
                                  f"directory are read only as regular files in it)",
                                  source=path) from None
            raise ReportError(f"{path}: cannot read: {exc.strerror}", source=path) from None
        return data.decode("utf-8", errors="replace")


def printable_report(text: str) -> str:
    """``text`` line by line with every control and formatting character made visible:
    the lines stay lines, nothing else reaches the terminal as a control sequence."""
    return "\n".join(escape_controls(line) for line in text.split("\n"))


def _report(args: argparse.Namespace) -> int:
    with JobDirectory(args.jobdir) as jobdir:
        sys.stdout.write(printable_report(jobdir.read(FILE_NAMES["report"],
                                                      MAX_REPORT_BYTES)))
        if not args.png:
            return 0
        from ..outputs.report_png import draw_report_png  # matplotlib only for pictures

        record = read_record(jobdir)
        matrix, note = job_matrix(record, args)
        order, node_sizes, label = placement_order(jobdir, record)
    draw_report_png(picture_record(record), args.png, matrix, order, node_sizes, label,
                    note)
    print(f"\nwrote {safe_text(args.png, 1000)}")
    return 0


def read_record(jobdir: JobDirectory) -> dict:
    """``report.json`` (bounded, parsed), with its rank count checked."""
    name = FILE_NAMES["report_json"]
    text = jobdir.read(name, MAX_REPORT_BYTES)
    shown = safe_text(str(jobdir.path / name), 1000)
    try:
        record = json.loads(text)
    except (ValueError, RecursionError) as exc:  # also over-long integers, deep nesting
        raise ReportError(f"{shown}: not valid JSON ({safe_text(exc)})", source=shown) from None
    if not isinstance(record, dict):
        raise ReportError(f"{shown}: not a JSON object", source=shown)
    record_ranks(record)
    return record


def record_ranks(record: Mapping) -> int:
    """The record's ``n`` (0 when it has none): a whole number up to :data:`MAX_RANKS`,
    since it sizes what is read and drawn."""
    n = record.get("n")
    if n is None:
        return 0
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_RANKS:
        raise ReportError(f"report.json: 'n' is {safe_text(repr(n), 40)}, not a rank count "
                          f"from 0 to {MAX_RANKS}")
    return n


def _record_str(record: Mapping, key: str) -> str | None:
    value = record.get(key)
    if value is None or isinstance(value, str):
        return value
    raise ReportError(f"report.json: {key!r} is not a string")


def looks_like_path(spec: str) -> bool:
    """A profile spec naming a file rather than a store entry or a generator: ``file:``,
    any ``/`` or ``\\``, or a name starting with ``.`` or ``~`` (store names cannot)."""
    s = spec.strip()
    return s.startswith(("file:", ".", "~")) or "/" in s or "\\" in s


def job_matrix(record: Mapping, args: argparse.Namespace
               ) -> tuple[sp.csr_matrix | None, str]:
    """(the job's communication matrix or None, why not).

    ``--profile`` is the invoking person's: a matrix file (``file:PATH`` or an existing
    path) is read with the profile readers' bounds.  The record's profile was written by
    the job's user: only a store name or a generator spec is resolved; a path in it is
    never opened.
    """
    n = record_ranks(record)
    spec = args.profile or _record_str(record, "profile")
    if not spec or n <= 0:
        return None, "the report names no communication profile (give --profile)"
    shown = safe_text(spec)
    if not args.profile and looks_like_path(spec):
        return None, USER_PATH_NOTE
    try:
        max_bytes = load_config(args.config).profiles.max_file_bytes
        if args.profile and (spec.startswith("file:") or Path(spec).is_file()):
            graph = read_graph(spec[5:] if spec.startswith("file:") else spec, expected_n=n,
                               max_bytes=max_bytes)
        else:
            graph = resolve_profile(spec, n, store_dirs(args), allow_user_files=False,
                                    max_bytes=max_bytes)
    except (RankmapError, GraphError, OSError) as exc:
        why = safe_text(exc, 1000)
        print(f"rankmap: warning: profile {shown} not drawn: {why}", file=sys.stderr)
        return None, f"profile {shown} not available here:\n{why}"
    if graph.n != n:
        return None, f"profile {shown} has {graph.n} ranks, the job {n}"
    return graph.to_csr(), ""


# a hostlist as rankmap folds one: names and [ranges] of digits; nothing ClusterShell
# would resolve further (@groups run the site's group commands) or operate on (! & ^)
_HOSTLIST_ELEMENT = re.compile(r"(?:[A-Za-z0-9._-]+|\[\d{1,9}(?:-\d{1,9})?"
                               r"(?:,\d{1,9}(?:-\d{1,9})?)*\])+")
_BRACKETS = re.compile(r"\[([^\]]*)\]")


def record_nodes(record: Mapping, limit: int) -> list[str]:
    """The record's ``nodes`` hostlist expanded, refused when it would expand to more
    than ``limit`` names (counted from the text: ClusterShell builds every name while
    parsing, so ``n[1-999999999]`` must not reach it)."""
    text = _record_str(record, "nodes")
    if not text:
        return []
    elements = [e for e in re.split(r",(?![^\[]*\])", text) if e]
    total = 0
    for element in elements:
        if not _HOSTLIST_ELEMENT.fullmatch(element):
            total = limit + 1
            break
        count = 1
        for group in _BRACKETS.findall(element):
            count *= sum(_range_size(item) for item in group.split(","))
            count = min(count, limit + 1)  # no huge products
        total += count
    if total > limit:
        raise ReportError(f"report.json: 'nodes' is not a host list of at most {limit} nodes "
                          f"({safe_text(text, 80)})")
    return expand_hostlist(text)


def _range_size(item: str) -> int:
    lo, _, hi = item.partition("-")
    return max(0, int(hi or lo) - int(lo) + 1)


_RANKFILE_LINE = re.compile(r"rank\s+(\d{1,9})=(\S+)\s+slot=(\d{1,9}):(\d{1,9})")


def launcher_bytes(n: int) -> int:
    """The most bytes a launcher file of an ``n``-rank job is read up to."""
    return n * LAUNCHER_BYTES_PER_RANK + LAUNCHER_SLACK_BYTES


def placement_order(jobdir: JobDirectory | str | os.PathLike, record: Mapping
                    ) -> tuple[np.ndarray | None, list[int] | None, str]:
    """(ranks in PE order or None, ranks per node in that order, a label)."""
    if not isinstance(jobdir, JobDirectory):
        with JobDirectory(jobdir) as opened:
            return placement_order(opened, record)
    n = record_ranks(record)
    if n <= 0:
        return None, None, "Slurm's own placement: rank order"
    nodes = record_nodes(record, n)  # a job has no node without a rank
    node_index = {name: i for i, name in enumerate(nodes)}
    keys: dict[int, tuple] = {}
    label = ""
    bound = launcher_bytes(n)
    rankfile = jobdir.read(FILE_NAMES["rankfile"], bound, required=False)
    machinefile = (None if rankfile is not None else
                   jobdir.read(FILE_NAMES["machinefile"], bound, required=False))
    if rankfile is not None:
        for line in rankfile.splitlines():
            m = _RANKFILE_LINE.match(line)
            if m:
                rank, host = int(m.group(1)), m.group(2)
                keys[rank] = (node_index.get(host, len(nodes)), host, int(m.group(3)),
                              int(m.group(4)))
        label = "from the rankfile"
    elif machinefile is not None:
        hosts = machinefile.split()
        keys = {rank: (node_index.get(h, len(nodes)), h) for rank, h in enumerate(hosts)}
        label = "from the machinefile"
    if sorted(keys) != list(range(n)):
        return None, None, "Slurm's own placement: rank order"
    order = np.array(sorted(range(n), key=lambda r: (keys[r], r)), dtype=np.int64)
    node_of = [keys[r][:2] for r in order]
    sizes = [len(list(run)) for _, run in itertools.groupby(node_of)]
    return order, sizes, label


def picture_record(record: Mapping) -> dict:
    """What the picture shows of ``record``, checked and escaped: strings made one
    printable line, numbers finite, at most :data:`_MAX_LEVELS` levels and
    :data:`_MAX_PLACEMENTS` placements."""
    distances = record.get("level_distances") or {}
    placements = record.get("placements") or []
    if not isinstance(distances, dict) or len(distances) > _MAX_LEVELS:
        raise ReportError("report.json: 'level_distances' is not a small object of numbers")
    if not isinstance(placements, list) or len(placements) > _MAX_PLACEMENTS:
        raise ReportError("report.json: 'placements' is not a short list")
    levels = {safe_text(k, 40): _number(v, "level_distances") for k, v in distances.items()}
    out = []
    for p in placements:
        traffic = p.get("traffic") if isinstance(p, dict) else None
        if not isinstance(p, dict) or not isinstance(traffic or {}, dict):
            raise ReportError("report.json: a placement is not an object with a 'traffic' "
                              "object")
        out.append({"name": safe_text(p.get("name"), 60), "applied": p.get("applied") is True,
                    "traffic": {safe_text(k, 40): _number(v, "traffic")
                                for k, v in (traffic or {}).items()}})
    job_id = record.get("job_id")
    return {"job_id": safe_text(job_id, 40) if job_id not in (None, "") else None,
            "summary": safe_text(record.get("summary") or "", 300),
            "units": safe_text(record.get("units") or "bytes", 40),
            "level_distances": levels, "placements": out}


def _number(value: object, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ReportError(f"report.json: a value of {key!r} is not a finite number")
    return float(value)
