"""``rankmap profile list|show|generate|import``."""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from pathlib import Path

import tomllib

from mapper import CommGraph
from mapper.io.graph_file import read_graph
from mapper.io.mtx_file import write_mtx
from mapper.model.phased_graph import PIPELINE_PACES, Phase, PhasedGraph, merge_global_phases

from ..common.job_conventions import RECORDING_META, valid_job_id
from ..common.user_paths import UserPathError
from ..lifecycle.job_worker import job_stores
from ..lifecycle.recording_setup import recordings_dir, user_store
from ..profiles import collectives
from ..profiles.generators import generate
from ..profiles.ompi_monitoring import import_monitoring
from ..profiles.pattern_match import generator_line, match_generator
from ..profiles.recorded_job import (
    collect_directory,
    collect_recording,
    incomplete_recordings,
)
from ..profiles.smpi_ti import (
    PIPELINE_BYTES,
    CollectiveMismatch,
    TraceError,
    import_ti,
    import_ti_phases,
)
from ..profiles.store import (
    NAME,
    ProfileError,
    ProfileInfo,
    ProfileStore,
    bundled_store,
    toml_string,
)
from ..profiles.store_writer import entry_text, toml_value
from ..site.config import Config, load_config
from .record_cli import report


def store_dirs(args: argparse.Namespace) -> list[str]:
    """--store DIRs, else the stores a job of this user reads (your own store, the
    site's); the bundled examples come last."""
    if args.store:
        return list(args.store) + [str(bundled_store())]
    return list(job_stores(load_config(getattr(args, "config", None)), os.getuid()))


def add_profile_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("profile", help="communication profiles")
    psub = p.add_subparsers(dest="profile_command", required=True, metavar="ACTION")

    def common(q: argparse.ArgumentParser) -> None:
        q.add_argument("--store", action="append", metavar="DIR",
                       help="profile store directory (repeatable; default: site config)")
        q.add_argument("--config", metavar="FILE", help="site config file")

    q = psub.add_parser("list", help="profiles in the stores, where their samples came "
                                     "from, and your recordings that were not used")
    q.add_argument("--ntasks", type=int, metavar="N",
                   help="say whether each profile is usable for a job of N tasks")
    common(q)
    q.set_defaults(func=_list)
    q = psub.add_parser("collect", help="turn your recording of JOB into a profile (what "
                                        "the TaskEpilog does when the job ends), or a "
                                        "directory recorded with RANKMAP_RECORD_DIR=DIR")
    q.add_argument("job", nargs="+", metavar="JOB|DIR",
                   help="a job id, or a directory (a path: needs --name; its files are "
                        "kept)")
    q.add_argument("--name", help="DIR: the profile's name")
    q.add_argument("--store", metavar="DIR",
                   help="DIR: store to write into (default: your store)")
    q.add_argument("--config", metavar="FILE", help="site config file")
    q.set_defaults(func=_collect)
    q = psub.add_parser("show", help="one profile's metadata and size")
    q.add_argument("name")
    common(q)
    q.set_defaults(func=_show)
    q = psub.add_parser("generate", help="write a generated pattern as a profile")
    q.add_argument("spec", help="e.g. stencil3d, stencil3d:4x4x4, npb-cg, summa")
    q.add_argument("--ntasks", type=int, required=True)
    q.add_argument("--out", required=True, metavar="FILE.mtx")
    q.set_defaults(func=_generate)
    q = psub.add_parser("import", help="import Open MPI pml_monitoring output or SMPI "
                                       "time-independent traces into a store")
    q.add_argument("prefix", nargs="+", metavar="PREFIX|FILE",
                   help="ompi: PREFIX of PREFIX.<rank>.prof files; smpi-ti: the trace index "
                        "(tracing/filename) or per-rank trace files")
    q.add_argument("--format", choices=("ompi", "smpi-ti"), default="ompi",
                   help="ompi: pml_monitoring output (default); smpi-ti: SimGrid "
                        "smpirun -trace-ti traces, collectives expanded")
    q.add_argument("--name", required=True)
    q.add_argument("--store", required=True, metavar="DIR", help="store to write into")
    q.add_argument("--description", default="")
    q.add_argument("--kinds", default="E,I,C",
                   help="monitoring line kinds to count (E user p2p, I internal, C)")
    q.add_argument("--add-sample", action="store_true",
                   help="add this run as one more sample of the existing profile NAME "
                        "(NAME.sK.mtx, listed in its samples): rankmap then applies a "
                        "placement only if it beats Slurm's default under every sample")
    q.add_argument("--phases", action="store_true",
                   help="smpi-ti: also store the trace's phases, split at every collective "
                        "call (equal ones merged): NAME.pK.mtx, listed in its phases; "
                        "the never-worse rule then checks each link level's phase time "
                        "(done without this option too when the trace has latency-bound "
                        "wavefronts, whose pace the rule must check)")
    q.set_defaults(func=_import)


def _list(args: argparse.Namespace) -> int:
    good, broken = ProfileStore(store_dirs(args)).scan()
    for info in good:
        for line in profile_lines(info, args.ntasks):
            print(line)
    for name, _, reason in broken:
        print(f"{name:24s} {'BROKEN':>14s}  {reason}")
    if not args.store:
        cfg = load_config(getattr(args, "config", None))
        try:
            base = recordings_dir(cfg, os.getuid())
        except UserPathError:
            base = None
        for job, reason in incomplete_recordings(base) if base else []:
            print(f"{'(recording)':24s} {'NOT USED':>14s}  job {job}: {reason}")
    return 0


def profile_lines(info: ProfileInfo, ntasks: int | None) -> list[str]:
    """One profile in ``rankmap profile list``: name, ranks, samples, whether a job of
    ``ntasks`` can use it, the description; then one line per recorded run (job, date,
    MPI, recorder, volume)."""
    if info.is_mesh:
        return [f"{info.name:24s} {'mesh':>14s}  {info.description}"]
    samples = len(info.samples) or 1
    usable = ""
    if ntasks is not None:
        if info.ranks == ntasks:
            usable = f"  usable for {ntasks} tasks"
        elif info.generator:
            usable = f"  usable for {ntasks} tasks as {info.generator}"
        else:
            usable = f"  NOT usable for {ntasks} tasks"
    lines = [f"{info.name:24s} {info.ranks:8d} ranks  {samples} sample"
             f"{'s' if samples > 1 else ''}{usable}  {info.description}"]
    for run in info.runs:
        what = ", ".join(f"{k} {run[k]}" for k in ("job", "date") if k in run)
        how = " / ".join(str(run[k]) for k in ("mpi", "recorder") if k in run)
        volume = f"{float(run['volume']):.4g} bytes" if "volume" in run else ""
        lines.append("    " + "; ".join(x for x in (run.get("file", ""), what, how, volume)
                                        if x))
    return lines


def _is_directory_argument(text: str) -> bool:
    """A path (``rankmap profile collect ./rec``), not a job id."""
    return not valid_job_id(text) or Path(text).is_dir()


def _collect_directories(args: argparse.Namespace, cfg: Config) -> int:
    uid = os.getuid()
    if not args.name:
        raise ProfileError("collecting a directory needs --name NAME (the profile)")
    store = Path(args.store) if args.store else user_store(cfg, uid)
    if store is None:
        raise ProfileError("no store to write into: pass --store DIR (this cluster has "
                           "no [profiles] user_store)")
    status = 0
    for d in args.job:
        started = datetime.datetime.fromtimestamp(
            Path(d).stat().st_mtime, datetime.timezone.utc).isoformat(timespec="seconds") \
            if Path(d).exists() else ""
        done = collect_directory(Path(d), args.name, store, uid,
                                 job=f"directory {Path(d).resolve()}", started=started,
                                 max_file_bytes=cfg.record.max_file_bytes,
                                 max_profile_bytes=cfg.profiles.max_file_bytes)
        report(done)
        status = status or (0 if done.stored else 1)
    return status


def _collect(args: argparse.Namespace) -> int:
    cfg = load_config(args.config)
    if any(_is_directory_argument(j) for j in args.job):
        if not all(_is_directory_argument(j) for j in args.job):
            raise ProfileError("give job ids or directories, not both")
        return _collect_directories(args, cfg)
    if args.name or args.store:
        raise ProfileError("--name and --store are for a directory; a job's recording "
                           "keeps the name it was recorded under")
    uid = os.getuid()
    base, store = recordings_dir(cfg, uid), user_store(cfg, uid)
    if base is None or store is None:
        raise ProfileError("this cluster has no recordings or user stores ([record] dir, "
                           "[profiles] user_store)")
    status = 0
    for job in args.job:
        if not valid_job_id(job) or not (base / job / RECORDING_META).is_file():
            print(f"job {job}: no recording in {base}", file=sys.stderr)
            status = 2
            continue
        done = collect_recording(base / job, store, uid,
                                 max_file_bytes=cfg.record.max_file_bytes,
                                 max_profile_bytes=cfg.profiles.max_file_bytes)
        print(done.sentence())
        status = status or (0 if done.stored else 1)
    return status


def _show(args: argparse.Namespace) -> int:
    info = ProfileStore(store_dirs(args)).find(args.name)
    g = read_graph(info.file)
    print(f"name         {info.name}\nfile         {info.file}\nranks        {info.ranks}\n"
          f"units        {info.units}\ndescription  {info.description}\n"
          f"source       {info.source}\nedges        {g.m}\ntotal volume {g.total_volume:g}")
    if info.samples:
        print(f"samples      {len(info.samples)}: "
              + ", ".join(p.name for p in info.samples))
    if info.phases:
        paces = info.paces or ("",) * len(info.phases)
        paced = [f"{p.name} ({pace})" for p, pace in zip(info.phases, paces, strict=True)
                 if pace in PIPELINE_PACES]
        rounds = [r for r, pace in zip(info.repeats or (1.0,) * len(paces), paces,
                                       strict=True) if pace == "rounds"]
        print(f"phases       {len(info.phases)}"
              + (f"; latency-bound: {', '.join(paced)}" if paced else "")
              + (f"; exchange rounds: {len(rounds)} distinct, {sum(rounds):g} in all"
                 if rounds else ""))
    if info.generator:
        print(f"generator    {info.generator} (at other task counts)")
    return 0


def _generate(args: argparse.Namespace) -> int:
    g = generate(args.spec, args.ntasks)
    write_mtx(g, args.out, comment=f"rankmap generator {args.spec}, {args.ntasks} ranks")
    print(f"{args.out}: {g.n} ranks, {g.m} edges")
    return 0


def _import(args: argparse.Namespace) -> int:
    if not NAME.match(args.name):
        raise ProfileError(f"profile name {args.name!r} is not allowed")
    tty = sys.stderr.isatty()

    def progress(done: int, total: int) -> None:
        if tty:
            print(f"\rreading monitoring files {done}/{total}", end="", file=sys.stderr,
                  flush=True)

    if args.phases and (args.format != "smpi-ti" or args.add_sample):
        raise ProfileError("--phases needs --format smpi-ti and no --add-sample "
                           "(a profile's phases belong to one run)")
    notes = []
    if args.format == "smpi-ti":
        g = (merge_global_phases(import_ti_phases(args.prefix, progress)) if args.phases
             else _total_or_pipelines(args.prefix, progress, notes))
        origin = f"SimGrid SMPI TI trace: {' '.join(args.prefix)}"
    else:
        if len(args.prefix) != 1:
            raise ProfileError("--format ompi takes one PREFIX")
        args.prefix = args.prefix[0]
        g = import_monitoring(args.prefix, args.kinds.split(","), progress)
        origin = f"Open MPI pml_monitoring: {args.prefix}"
    if tty:
        print(file=sys.stderr)
    store = Path(args.store)
    if args.add_sample:
        return _add_sample(store, args.name, g, origin)
    store.mkdir(parents=True, exist_ok=True)
    write_mtx(g, store / f"{args.name}.mtx", comment=f"imported from {origin}")
    line, found = generator_line(g)
    if isinstance(g, PhasedGraph):
        line += f"phases = {toml_value(_write_phases(store, args.name, g))}\n"
        if any(p.pace for p in g.phases):
            line += f"paces = {toml_value([p.pace for p in g.phases])}\n"
        if any(p.pace == "rounds" and p.repeat != 1 for p in g.phases):
            line += f"repeats = {toml_value([_stored_repeat(p) for p in g.phases])}\n"
    (store / f"{args.name}.toml").write_text(
        f'ranks = {g.n}\nunits = "bytes"\ndescription = {toml_string(args.description)}\n'
        f'source = {toml_string(origin)}\nfile = "{args.name}.mtx"\n{line}')
    print(f"{store / args.name}.toml: {g.n} ranks, {g.m} edges, {g.total_volume:g} bytes"
          + (f", {len(g.phases)} phases" if isinstance(g, PhasedGraph) else ""))
    if found is not None:
        print(found.describe())
    for note in notes:
        print(note)
    return 0


def _total_or_pipelines(prefix: list[str], progress, notes: list[str]):
    """The trace's total graph, or, when it has latency-bound wavefronts
    (:func:`import_ti_phases`), its phases: without them the never-worse rule cannot
    see that a placement slows a wavefront (NPB LU's trace: 1.09-1.34x block's time
    applied).  A trace whose collectives cannot be split gives the total."""
    try:
        phased = import_ti_phases(prefix, progress)
    except CollectiveMismatch as exc:
        total = import_ti(prefix, progress)
        notes.append(
            f"collectives on sub-communicators: {exc}. A TI trace names no "
            f"communicator, so each collective was expanded over all {total.n} ranks, "
            f"which puts traffic between ranks that may never exchange it; 'rankmap "
            f"record' (librankmap_record) records every collective over its "
            f"communicator's members")
        return total
    except TraceError:
        return import_ti(prefix, progress)
    if any(collectives.canonical(p.name.split()[0]) for p in phased.phases):
        notes.append("the trace's collectives were taken as MPI_COMM_WORLD's (a TI trace "
                     "names no communicator): right when they all are; for row or column "
                     "communicators, 'rankmap record' records each over its members")
    paced = [p.name for p in phased.phases if p.pace in PIPELINE_PACES]
    rounds = sum(1 for p in phased.phases if p.pace == "rounds")
    if not paced and not rounds:
        return CommGraph(phased.indptr, phased.indices, phased.weights, phased.source)
    if paced:
        notes.append(f"phases stored: the trace has latency-bound wavefronts ({len(paced)} "
                     f"phases, e.g. {paced[0]}), whose pace the never-worse rule checks")
    if rounds:
        notes.append(f"phases stored: every point-to-point message of the trace is at most "
                     f"{PIPELINE_BYTES} bytes, exchanged in {rounds} rounds; the never-worse "
                     f"rule checks each round's farthest message")
    return merge_global_phases(phased)


def _stored_repeat(phase: Phase) -> float:
    """The repeat count ``repeats`` lists for a phase: an exchange round's own (its
    latency counts rounds, not volume: :func:`mapper.objectives.phase_time.round_latency`); 1 for
    the others, whose repeat is in their volumes (:func:`_write_phases`)."""
    if phase.pace != "rounds":
        return 1
    return int(phase.repeat) if float(phase.repeat).is_integer() else phase.repeat


def _write_phases(store: Path, name: str, g: PhasedGraph) -> list[str]:
    """NAME.pK.mtx for each phase, its volumes times its repeat count except for
    exchange rounds (the phase time model is linear in a phase's volume; a round's
    repeat goes to ``repeats``: :func:`_stored_repeat`); their names."""
    files = []
    for k, phase in enumerate(g.phases):
        pg = phase.graph
        scale = phase.repeat / _stored_repeat(phase)
        scaled = type(pg)(pg.indptr, pg.indices, pg.weights * scale, pg.source)
        files.append(f"{name}.p{k}.mtx")
        write_mtx(scaled, store / files[-1], comment=f"phase {k}: {phase.name}")
    return files


def _add_sample(store: Path, name: str, g, origin: str) -> int:
    """Write ``g`` as NAME.sK.mtx and append it to NAME.toml's samples (the first
    sample is the entry's own ``file`` when it had none).  The entry keeps a
    ``generator`` only when every sample matches the same one (:func:`_common_generator`)."""
    if not (store / f"{name}.toml").is_file():
        raise ProfileError(f"--add-sample: no profile {name!r} in {store} (import the "
                           f"first run without --add-sample)")
    info = ProfileStore([store]).find(name)
    if info.is_mesh:
        raise ProfileError(f"--add-sample: {info.path} is a mesh, not a measured profile")
    if g.n != info.ranks:
        raise ProfileError(f"--add-sample: this run has {g.n} ranks, profile {name!r} "
                           f"({info.path}) has {info.ranks}")
    samples = [p.name for p in info.samples] or [info.file.name]
    k = 1
    while f"{name}.s{k}.mtx" in samples or (store / f"{name}.s{k}.mtx").exists():
        k += 1
    new = f"{name}.s{k}.mtx"
    write_mtx(g, store / new, comment=f"imported from {origin}")
    samples.append(new)
    generator = _common_generator([store / s for s in samples[:-1]], g)
    # every key of the entry is kept (its [[runs]] provenance, phases, …): only samples,
    # the generator and one more run change
    data = tomllib.loads(info.path.read_text(encoding="utf-8"))
    runs = list(data.pop("runs", []))
    if runs:
        runs.append({"file": new, "recorder": origin, "ranks": g.n,
                     "volume": float(g.total_volume)})
    data["samples"] = samples
    data.pop("generator", None)
    if generator:
        data["generator"] = generator
    (store / f"{name}.toml").write_text(entry_text(data, runs))
    print(f"{store / name}.toml: sample {len(samples)} ({new}): {g.n} ranks, {g.m} edges, "
          f"{g.total_volume:g} bytes")
    if generator:
        print(f"all {len(samples)} samples match {generator}: usable at other task counts")
    elif info.generator:
        print(f"generator {info.generator!r} removed: not every sample matches it")
    return 0


def _common_generator(paths: list[Path], new) -> str:
    """The size-free generator every sample matches (the files ``paths`` and the
    graph ``new``), else ''.  One match per sample: O(S·C·m log m)."""
    found = match_generator(new)
    if found is None:
        return ""
    for path in paths:
        other = match_generator(read_graph(path))
        if other is None or other.spec != found.spec:
            return ""
    return found.spec
