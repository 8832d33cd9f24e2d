"""``rankmap record --name NAME -- LAUNCHER ARGS...``: record a program's communication
anywhere (a workstation, a login node, inside any job) and store it as a profile.

The launcher runs with librankmap_record preloaded (``LD_PRELOAD``) and
``RANKMAP_RECORD_DIR`` set to a directory its ranks write to; when it ends, the heaviest
complete launch becomes profile NAME (or one more sample of it) in the store, as
``rankmap profile collect DIR`` does for a directory recorded by hand.  The library is
the site's (``[record] library``, else PREFIX/lib of this installation), else one built
now from the sources this package ships into ``~/.cache/rankmap`` (needs ``cc``).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from mapper.errors import RankmapError

from ..lifecycle.recording_setup import default_record_library, user_store
from ..profiles.recorded_job import Collected, collect_directory
from ..site.config import Config, load_config

#: the recorder's sources, shipped as package data
RECORDER_SOURCES = ("record/rankmap_record.c", "record/Makefile", "preload/mpi_symbol.h")


class RecordError(RankmapError):
    """``rankmap record`` cannot start: no library, no store, no launcher."""


def add_record_command(sub: argparse._SubParsersAction) -> None:
    q = sub.add_parser(
        "record", help="run an MPI launch under the recorder and store its communication "
                       "as a profile (anywhere: no Slurm job needed)",
        description="Run LAUNCHER ARGS... (mpirun, mpiexec, srun, or the program itself) "
                    "with librankmap_record preloaded, then store the heaviest complete "
                    "launch as profile NAME.  With Open MPI across nodes add "
                    "'-x LD_PRELOAD -x RANKMAP_RECORD_DIR' to mpirun; the recording "
                    "directory must be one every node sees.")
    q.add_argument("--name", required=True, help="the profile's name")
    q.add_argument("--store", metavar="DIR",
                   help="store to write into (default: your store, [profiles] user_store)")
    q.add_argument("--config", metavar="FILE", help="site config file")
    q.add_argument("--dir", metavar="DIR",
                   help="where the ranks write (kept afterwards; default: a new "
                        "rankmap-record.<pid> in the current directory, removed once "
                        "stored)")
    q.add_argument("--library", metavar="FILE", help="librankmap_record.so to preload")
    q.add_argument("launch", nargs=argparse.REMAINDER, metavar="-- LAUNCHER ARGS",
                   help="the command to run")
    q.set_defaults(func=_record)


def _sources() -> Path:
    return Path(__file__).resolve().parent.parent


def build_recorder(cache: Path) -> Path:
    """librankmap_record.so built from the shipped sources into ``cache``, once per
    version of them (the directory is named by their digest)."""
    base = _sources()
    digest = hashlib.sha256()
    for rel in RECORDER_SOURCES:
        try:
            digest.update((base / rel).read_bytes())
        except OSError as exc:
            raise RecordError(f"{base / rel}: cannot read the recorder's source "
                              f"({exc.strerror or exc})") from None
    out = cache / f"recorder-{digest.hexdigest()[:16]}"
    library = out / "librankmap_record.so"
    if library.is_file():
        return library
    if shutil.which("make") is None or shutil.which(os.environ.get("CC", "cc")) is None:
        raise RecordError("no librankmap_record.so here and no C compiler to build one "
                          "(install make and cc, or pass --library FILE)")
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    made = subprocess.run(["make", "-s", "-C", str(base / "record"), f"OUT={tmp}"],
                          capture_output=True, text=True)
    if made.returncode or not (tmp / "librankmap_record.so").is_file():
        shutil.rmtree(tmp, ignore_errors=True)
        raise RecordError("building librankmap_record.so failed: "
                          + (made.stderr.strip() or made.stdout.strip())[-600:])
    try:
        tmp.rename(out)
    except OSError:  # another rankmap record built it meanwhile
        shutil.rmtree(tmp, ignore_errors=True)
    return library


def recorder_library(explicit: str | None, cfg: Config) -> Path:
    """--library, else the site's, else this installation's, else one built now."""
    if explicit:
        if not Path(explicit).is_file():
            raise RecordError(f"--library {explicit}: no such file")
        return Path(explicit)
    for candidate in (cfg.record.library, default_record_library()):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rankmap"
    return build_recorder(cache)


def recording_environment(env: dict[str, str], library: Path, directory: Path
                          ) -> dict[str, str]:
    """``env`` with the recorder preloaded (before any preload the user has) and told
    where to write."""
    preload = env.get("LD_PRELOAD", "")
    return {**env, "LD_PRELOAD": f"{library}:{preload}" if preload else str(library),
            "RANKMAP_RECORD_DIR": str(directory)}


def _record(args: argparse.Namespace) -> int:
    launch = args.launch[1:] if args.launch[:1] == ["--"] else args.launch
    if not launch:
        raise RecordError("no command to run: rankmap record --name NAME -- mpirun -n 4 "
                          "./app")
    cfg = load_config(args.config)
    store = Path(args.store) if args.store else user_store(cfg, os.getuid())
    if store is None:
        raise RecordError("no store to write into: pass --store DIR (this cluster has no "
                          "[profiles] user_store)")
    library = recorder_library(args.library, cfg)
    own = args.dir is None
    directory = Path(args.dir) if args.dir else Path.cwd() / f"rankmap-record.{os.getpid()}"
    directory.mkdir(parents=True, exist_ok=not own)
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    try:
        rc = subprocess.run(launch, env=recording_environment(dict(os.environ), library,
                                                               directory)).returncode
    except OSError as exc:
        if own:
            shutil.rmtree(directory, ignore_errors=True)
        raise RecordError(f"cannot run {launch[0]}: {exc.strerror or exc}") from None
    slurm_job = os.environ.get("SLURM_JOB_ID")
    done = collect_directory(directory, args.name, store, os.getuid(),
                             job=f"job {slurm_job}" if slurm_job
                             else f"{socket.gethostname()} (outside Slurm)",
                             started=started, max_file_bytes=cfg.record.max_file_bytes,
                             max_profile_bytes=cfg.profiles.max_file_bytes)
    report(done)
    if done.stored is not None and own:
        shutil.rmtree(directory, ignore_errors=True)
    elif done.stored is None:
        print(f"the recording stays in {directory}", file=sys.stderr)
    if rc:
        print(f"{launch[0]} exited with status {rc}", file=sys.stderr)
        return rc
    return 0 if done.stored is not None else 1


def report(done: Collected) -> None:
    """What became of a recording, and its notes, one line each."""
    print(done.sentence(), file=sys.stdout if done.stored else sys.stderr)
    for note in done.notes:
        print(f"  note: {note}")
