"""``--comm-profile=summa-fpm[:FILE] --rankmap=summa``: a SUMMA job's arrangement.

A heterogeneous SUMMA does not need its ranks moved: it needs its column-based
partition (:mod:`mapper.summa.tiling`) arranged so that the ring broadcasts along
the rows and down the columns cross few network boundaries (:mod:`mapper.summa.arrange`,
Malik et al. 2014, doi:10.1109/IPDPSW.2014.10).  :class:`SummaMode`, the mode the
prolog's worker (:mod:`slurm_plugin.lifecycle.job_worker`) runs for a SUMMA request, calls,
in this order:

1. :func:`load_summa_input` (the edge that reads a file) — the profile spec and the
   per-rank speeds::

       summa-fpm                     equal speeds, N = 4096
       summa-fpm,size=8192           equal speeds, N = 8192 (also summa-fpm:size=8192)
       summa-fpm:/abs/speeds.txt     speeds from the user's file (as the job's user,
                                     only with [profiles] allow_user_files, like file:)
       summa-fpm:NAME[,size=N]       speeds from NAME.speeds in a profile store

   FILE is the ``rankmap summa --speeds`` format (line r: the relative speed of rank r,
   ``#`` comments), one speed per task; N (the matrix is N x N) is an option of the
   spec, not a line of the file, so one file serves the job and the offline command.
   A FILE must not contain ``,`` or ``=`` (they separate the options).

2. :func:`plan_summa` (pure) — the ranks at Slurm's default placement (the job's
   ``--distribution``, block when unknown) are grouped at one network level: the
   leaf switches when the job spans several, else the nodes when it spans several,
   else the sockets (``level`` overrides: ``switch``, ``node``, ``socket``); the
   partition is arranged by the group-permutation heuristic for that two-level model
   (0 inside a group, 1 across; ``weighted`` uses the layout's level distances
   instead).  The files: ``arrangement`` (mapper.io.summa_files's format) and the
   launcher files of that same default placement written out explicitly (rank r on
   the PE the grouping assumed it on), and the report with cost_A, cost_B and the
   norm of the original and the arranged layout.

Every failure (bad spec or file, rank count, a partition or search that cannot be
done) is a :class:`~mapper.errors.RankmapError`: the worker reports it and the job
keeps Slurm's placement.

Complexity: the partition O(p^2), the heuristic Σ g_i! evaluations of O(r_{i-1} r_i)
each (p ranks, g_i groups and r_i rectangles in column i), the rest O(p log p).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mapper.errors import RankmapError
from mapper.io.regular_file import FileTooLarge, NotARegularFile, read_regular_file
from mapper.io.summa_files import format_arrangement, parse_speeds
from mapper.summa.arrange import Arrangement, arrange
from mapper.summa.cost import Grouping
from mapper.summa.tiling import ColumnLayout, partition

from ..common.hostlist import fold_hostlist
from ..common.job_conventions import ARRANGEMENT_FILE, SUMMA_MODE, SUMMA_PROFILE, summa_args
from ..common.safe_text import escape_strings
from ..machine.distribution import DEFAULT, Distribution, dist_label, slurm_placement
from ..machine.layout import Layout
from ..profiles.store import NAME, _inside
from .base import RENDERERS, Job, JobPlan

#: the matrix size N when the spec does not give ``size=N``
DEFAULT_SIZE = 4096
#: the grouping levels a site may ask for, by the layout's level name
LEVELS = {"switch": "leaf switch", "node": "node", "socket": "socket"}
#: file name suffix of a speeds file in a profile store
STORE_SUFFIX = ".speeds"


class SummaJobError(RankmapError, ValueError):
    """A SUMMA request that cannot be served (names the spec, file:line or the cause)."""


@dataclass(frozen=True)
class SummaSpec:
    """A parsed ``summa-fpm[:FILE][,size=N]``: the speeds' source (None: equal
    speeds) and N."""

    source: str | None = None
    size: int = DEFAULT_SIZE


@dataclass(frozen=True, eq=False)
class SummaInput:
    """Per-rank relative speeds, the matrix size and where the speeds came from."""

    speeds: np.ndarray
    size: int
    source: str  # "equal speeds" or the file read


class SummaMode:
    """The summa mode's :class:`~slurm_plugin.modes.base.JobMode`: ``load`` is
    :func:`load_summa_input`, ``machine`` nothing beyond the layout, ``plan``
    :func:`plan_summa` with the site's ``[summa] level`` and ``weighted``."""

    name = SUMMA_MODE

    def load(self, job: Job) -> SummaInput:
        return load_summa_input(job.profile, job.layout.n, job.stores, job.allow_user_files,
                                job.max_file_bytes)

    def machine(self, job: Job) -> None:
        return None

    def plan(self, job: Job, data: SummaInput | None, machine: None,
             reason: str | None) -> JobPlan[Arrangement]:
        return plan_summa(job.layout, data, job_id=job.job_id, profile=job.profile,
                          fallback_reason=reason, distribution=job.slurm_distribution,
                          distribution_assumed=job.distribution_assumed,
                          files=job.render_files, templates_dir=job.templates_dir,
                          level=job.settings.summa.level,
                          weighted=job.settings.summa.weighted)


SUMMA = SummaMode()


# -- the spec and the speeds -------------------------------------------------------------

def parse_summa_spec(spec: str) -> SummaSpec:
    """``summa-fpm[:FILE][,size=N]`` (also ``summa-fpm:size=N``)."""
    args = summa_args(spec)
    if args is None:
        raise SummaJobError(f"profile {spec!r} is not a SUMMA profile "
                            f"({SUMMA_PROFILE}[:FILE][,size=N])")
    # a FILE comes after the ':'; after a bare 'summa-fpm,' only options may follow
    file_allowed = args.startswith(":")
    source, size = None, DEFAULT_SIZE
    for item in (a.strip() for a in args[1:].split(",") if a.strip()):
        key, eq, value = item.partition("=")
        if not eq:
            if not file_allowed:
                raise SummaJobError(f"{spec!r}: {item!r}: a speeds file follows "
                                    f"'{SUMMA_PROFILE}:' ({SUMMA_PROFILE}[:FILE][,size=N])")
            if source is not None:
                raise SummaJobError(f"{spec!r}: two speeds files ({source!r}, {item!r})")
            source = item
        elif key.strip() == "size":
            try:
                size = int(value)
            except ValueError:
                size = 0
            if size < 1:
                raise SummaJobError(f"{spec!r}: size={value!r}: the matrix size N must be a "
                                    f"positive integer")
        else:
            raise SummaJobError(f"{spec!r}: unknown option {key.strip()!r} (known: size=N)")
    return SummaSpec(source, size)


def speeds_path(source: str, stores: Sequence[str | Path], allow_user_files: bool) -> Path:
    """Where ``source`` (the FILE of the spec) is, under the rules of profile files.

    An absolute path is the user's own file: accepted only where the site allows user
    files (``[profiles] allow_user_files``, as for ``file:``), without ``..``; the
    worker reads it as the job's user, so it cannot read what the user could not.  A
    name (no ``/``) is ``NAME.speeds`` in the first profile store that has it, and must
    stay inside that store after resolving symlinks (the store's rule for profiles).
    """
    if "/" in source:
        path = Path(source)
        if not path.is_absolute() or ".." in path.parts:
            raise SummaJobError(f"{SUMMA_PROFILE}:{source}: give an absolute path without "
                                f"'..' or a store name")
        if not allow_user_files:
            raise SummaJobError(f"{SUMMA_PROFILE}:{source}: user files are not enabled on "
                                f"this cluster ([profiles] allow_user_files); use a store name")
        return path
    if not NAME.match(source) or ".." in source:
        raise SummaJobError(f"{SUMMA_PROFILE}:{source}: a store name is letters, digits, "
                            f"'.', '_', '+', '-'")
    for d in (Path(s) for s in stores):
        path = d / f"{source}{STORE_SUFFIX}"
        if path.is_file():
            if not _inside(path, d):
                raise SummaJobError(f"{SUMMA_PROFILE}:{source}: {path} leads outside the "
                                    f"store {d}")
            return path
    where = ", ".join(str(s) for s in stores) or "(no stores configured)"
    raise SummaJobError(f"{SUMMA_PROFILE}:{source}: no {source}{STORE_SUFFIX} in the profile "
                        f"stores {where}")


def read_text_file(path: Path, max_bytes: int | None) -> str:
    """A regular file's text, at most ``max_bytes`` (None or 0: no limit); a FIFO or a
    device is refused before anything is read from it
    (:func:`mapper.io.regular_file.read_regular_file`)."""
    try:
        data = read_regular_file(path, max_bytes or None)
    except FileNotFoundError:
        raise SummaJobError(f"{path}: no such file", source=str(path)) from None
    except PermissionError:
        raise SummaJobError(f"{path}: not readable by the job's user",
                            source=str(path)) from None
    except NotARegularFile:
        raise SummaJobError(f"{path}: not a regular file", source=str(path)) from None
    except FileTooLarge:
        raise SummaJobError(f"{path}: larger than the site's limit of {max_bytes} bytes "
                            f"([profiles] max_file_bytes)", source=str(path)) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise SummaJobError(f"{path}: not a UTF-8 text file", source=str(path)) from None


def load_summa_input(spec: str, ntasks: int, stores: Sequence[str | Path],
                     allow_user_files: bool = False, max_bytes: int | None = None
                     ) -> SummaInput:
    """The speeds and N for a job of ``ntasks`` tasks (reads the speeds file, if any).

    The file is read up to ``max_bytes``, and its lines only up to the first speed
    beyond ``ntasks`` (refused at its line): the job can use no more, and counting them
    all cost gigabytes (:func:`mapper.io.summa_files.parse_speeds`).
    """
    parsed = parse_summa_spec(spec)
    if parsed.source is None:
        return SummaInput(np.ones(ntasks), parsed.size, "equal speeds")
    path = speeds_path(parsed.source, stores, allow_user_files)
    speeds = parse_speeds(read_text_file(path, max_bytes), str(path), ntasks)
    if len(speeds) != ntasks:
        raise SummaJobError(f"{path}: {len(speeds)} speeds but the job has {ntasks} tasks "
                            f"(one line per rank)", source=str(path))
    return SummaInput(speeds, parsed.size, str(path))


# -- grouping and plan ---------------------------------------------------------------------

def grouping_level(layout: Layout, level: str = "auto") -> int:
    """Index (into the layout's hierarchy levels) of the level whose groups are the
    two-level model's clusters: ``auto`` is the leaf switches when the job spans more
    than one, else the nodes when it spans more than one, else the sockets."""
    h = layout.hierarchy
    names = list(h.level_names)
    if level != "auto":
        if level not in LEVELS:
            raise SummaJobError(f"SUMMA grouping level {level!r}: expected auto, "
                                f"{', '.join(LEVELS)}")
        if LEVELS[level] not in names:
            raise SummaJobError(f"SUMMA grouping level {level!r}: the job's layout has no "
                                f"{LEVELS[level]} level ({', '.join(names)})")
        return names.index(LEVELS[level])
    for name in ("leaf switch", "node"):
        if name in names and len(h.bounds[names.index(name)]) - 1 > 1:
            return names.index(name)
    return names.index("socket")


def job_grouping(layout: Layout, mapping: np.ndarray, level: int,
                 weighted: bool = False) -> Grouping:
    """Rank r's groups are those of PE ``mapping[r]``; two-level weights (0 up to
    ``level``, 1 above) or, ``weighted``, the layout's level distances."""
    h = layout.hierarchy
    ids = h.group_ids[np.asarray(mapping, dtype=np.int64)].astype(np.int64)
    weights = h.distances if weighted else (np.arange(h.levels) > level).astype(np.float64)
    return Grouping(ids, weights, level)


def plan_summa(layout: Layout, data: SummaInput | None, *, job_id: str | None = None,
               profile: str | None = None, fallback_reason: str | None = None,
               distribution: Distribution = DEFAULT, distribution_assumed: bool = True,
               files: Sequence[str] = tuple(RENDERERS), templates_dir: str | None = None,
               level: str = "auto", weighted: bool = False) -> JobPlan[Arrangement]:
    """Arrange the partition for the job's default placement; render the files.

    ``data`` None (with ``fallback_reason``) or any error of the partition or the
    search gives a plan without files whose report says why.
    """
    mapping = slurm_placement(layout, distribution)
    placement = dist_label(distribution)
    result: Arrangement | None = None
    what = ""
    if fallback_reason is None and data is None:
        fallback_reason = "no SUMMA speeds"
    if fallback_reason is None:
        try:
            if len(data.speeds) != layout.n:
                raise SummaJobError(f"{len(data.speeds)} speeds for {layout.n} tasks")
            lev = grouping_level(layout, level)
            grouping = job_grouping(layout, mapping, lev, weighted)
            result = arrange(partition(data.speeds, data.size), grouping, "heuristic")
            name = layout.hierarchy.level_names[lev]
            groups = len(np.unique(grouping.clusters))
            what = (f"{name} ({groups} group{'s' if groups != 1 else ''}; " +
                    ("weighted by the level distances)" if weighted else
                     f"two-level: 0 inside a {name}, 1 across)"))
        except RankmapError as exc:
            fallback_reason = str(exc)
            result = None
    rendered: dict[str, str] = {}
    if result is not None:
        after = result.after
        rendered[ARRANGEMENT_FILE] = format_arrangement(
            result.layout, f"{result.method} cost_A={after.cost_a:g} cost_B={after.cost_b:g} "
                           f"norm={after.norm:.2f} job {job_id or '-'} ({placement} placement, "
                           f"{what})")
        for name in files:
            rendered[name] = RENDERERS[name](layout, mapping, templates_dir=templates_dir,
                                             algorithm=SUMMA_MODE, job_id=job_id)
    summary = _summary(result, fallback_reason, placement)
    # the spec, the speeds path and errors quoting them are the user's: escaped once,
    # here, for both the text and the record
    record = escape_strings(_record(layout, data, result, what, job_id, profile,
                                    fallback_reason, summary, placement,
                                    distribution_assumed))
    text = _text(record, result)
    applied = fallback_reason is None
    return JobPlan(files=rendered, report_text=text,
                   report_record=record,
                   fallback_reason=fallback_reason, summary=summary,
                   objective=result.after.norm if result else None,
                   notes=list(layout.notes),
                   status_notes=(*layout.notes, *([summary] if applied else [])),
                   result=result)


def _summary(result: Arrangement | None, reason: str | None, placement: str) -> str:
    if result is None:
        return f"rankmap was NOT applied: {reason}"
    if result.kept_original or result.after.norm >= result.before.norm:
        return (f"SUMMA arrangement written: the partitioner's original layout (nothing "
                f"cheaper found, norm {result.before.norm:.2f}); ranks at Slurm's "
                f"{placement} placement")
    return (f"SUMMA arrangement applied: norm {100 * result.reduction:.1f}% below the "
            f"partitioner's original layout; ranks at Slurm's {placement} placement")


def _layout_dict(layout: ColumnLayout) -> dict:
    return {"size": layout.size, "columns": layout.ncolumns,
            "column_widths": layout.column_widths.tolist(),
            "rectangles_per_column": [len(c) for c in layout.columns()]}


def _record(layout: Layout, data: SummaInput | None, result: Arrangement | None, what: str,
            job_id: str | None, profile: str | None, reason: str | None, summary: str,
            placement: str, assumed: bool) -> dict:
    """report.json: the keys of slurm_plugin.outputs.report's record that readers use (job_id,
    profile, n, nodes, applied, summary, fallback_reason, level_distances), plus
    ``summa``."""
    hosts = layout.hosts()
    h = layout.hierarchy
    record = {
        "job_id": job_id, "profile": profile, "n": layout.n, "nodes": fold_hostlist(hosts),
        "node_count": len(hosts), "machine": h.describe(), "applied": reason is None,
        "algorithm": SUMMA_MODE, "fallback_reason": reason, "summary": summary,
        "default_placement": placement, "default_assumed": assumed,
        "level_distances": {n: float(d) for n, d in zip(h.level_names, h.distances,
                                                        strict=True)},
        "notes": list(layout.notes), "placements": [], "summa": None,
    }
    if result is not None and data is not None:
        record["summa"] = {
            **_layout_dict(result.layout), "speeds": data.source, "grouping": what,
            "method": result.method, "evaluations": result.evaluations,
            "kept_original": result.kept_original, "original": result.before.as_dict(),
            "arranged": result.after.as_dict(), "reduction": result.reduction,
        }
    return record


def _text(record: dict, result: Arrangement | None) -> str:
    """report.txt: the decision first, then the job, then the costs."""
    lines = [f"rankmap report for job {record['job_id'] or '-'}", "", "",
             f"  {record['summary']}"]
    if result is None:
        lines.append("  The job runs with Slurm's default placement.")
    assumed = (" (assumed: the prolog is not told --distribution)" if record["default_assumed"]
               else " (the job's --distribution)")
    lines += ["", f"  profile    {record['profile'] or '-'}",
              f"  ranks      {record['n']} on {record['node_count']} node(s): {record['nodes']}",
              f"  machine    {record['machine']}",
              f"  default    {record['default_placement']}{assumed}"]
    lines += [f"  note       {note}" for note in record["notes"]]
    s = record["summa"]
    if s is not None:
        lines += ["", f"  SUMMA      {s['size']} x {s['size']} matrix, {s['columns']} columns "
                      f"(widths {' '.join(map(str, s['column_widths']))}; rectangles "
                      f"{' '.join(map(str, s['rectangles_per_column']))})",
                  f"  speeds     {s['speeds']}",
                  f"  grouping   {s['grouping']}",
                  "  rankfile   the default placement written out: rank r where the grouping "
                  "put it",
                  "",
                  f"  {'layout':10s} {'cost_A':>12s} {'cost_B':>12s} {'norm':>12s}"]
        for name in ("original", "arranged"):
            c = s[name]
            lines.append(f"  {name:10s} {c['cost_A']:12g} {c['cost_B']:12g} {c['norm']:12.2f}")
        kept = " (nothing cheaper found: original kept)" if s["kept_original"] else ""
        lines.append(f"  reduction  {100 * s['reduction']:.1f}% of the norm ({s['method']}, "
                     f"{s['evaluations']} evaluations){kept}")
        lines.append("  cost_A: Σ row overlaps h·v, cost_B: Σ columns h·w, h the inter-group "
                     "transfers (Malik et al. 2014)")
    return "\n".join(lines) + "\n"
