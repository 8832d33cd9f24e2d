"""``rankmap-prterun``: Open MPI 5's ``mpirun`` runs ``prterun`` through this.

Open MPI 5's ``mpirun`` is a small program that ``exec``\\ s PRRTE's ``prterun``, found
first at ``$OMPI_PRTERUN`` (ompi/tools/mpirun/main.c, since 5.0.0).  No environment
variable or parameter file gives PRRTE 3.0 (every Open MPI 5.0.x) a rankfile:
``OMPI_MCA_rmaps_rank_file_path`` is ignored, and a default mapping policy
``rankfile:file=F`` aborts because PRRTE never hands the default's file to the job (fixed
only in PRRTE 4.1, commit 5cb36418f3).  So the TaskProlog points ``OMPI_PRTERUN`` here,
and this adds ``--map-by rankfile:file=$RANKMAP_RANKFILE`` to the command line and runs
the real ``prterun``.  A plain ``mpirun ./app`` then runs with the placement.

It adds nothing, and says why on stderr, when the user chose a placement
(``--map-by``, ``--rankfile``, ``--host``, ``--hostfile`` ...), asked for another number of
ranks than the job's placement has, launched several programs (``a : b``), or set
``RANKMAP_BIND=off``.  Open MPI 5.0.7 rejects a rankfile path holding ``-`` or ``:``
(open-mpi/ompi#13545): such a path is reached through a symbolic link in a fresh
directory without either, removed when ``prterun`` ends.

Standard library only: it runs on every ``mpirun``.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..common.processes import run_relaying_signals

#: options by which the user places the ranks: rankmap then stays out of the way
PLACEMENT_OPTIONS = ("--map-by", "-map-by", "--rankfile", "-rankfile", "-rf", "--host",
                     "-host", "-H", "--hostfile", "-hostfile", "--machinefile",
                     "-machinefile", "--default-hostfile", "--add-host", "--add-hostfile")
RANK_COUNT_OPTIONS = ("-np", "--np", "-n", "--n", "-c")


def _option_name(arg: str) -> str:
    return arg.split("=", 1)[0]


def requested_ranks(args: Sequence[str]) -> int | None:
    """The rank count the command line asks for (``-np N``, ``-n N``, ``--np=N``)."""
    for i, arg in enumerate(args):
        name = _option_name(arg)
        if name in RANK_COUNT_OPTIONS:
            value = arg.split("=", 1)[1] if "=" in arg else (
                args[i + 1] if i + 1 < len(args) else "")
            return int(value) if value.isdigit() else None
    return None


def placement_args(args: Sequence[str], env: Mapping[str, str],
                   planned_ranks: int | None) -> tuple[list[str], str | None]:
    """The options to add in front of the user's, and why none were added (or None)."""
    rankfile = env.get("RANKMAP_RANKFILE", "")
    if not rankfile:
        return [], None
    if env.get("RANKMAP_BIND", "").lower() in ("off", "0", "no", "false"):
        return [], "RANKMAP_BIND=off: Open MPI places the ranks"
    if any(_option_name(a) in PLACEMENT_OPTIONS for a in args):
        return [], "the command line places the ranks itself: rankmap's rankfile not added"
    if ":" in args:
        return [], "several programs (a : b): rankmap's rankfile not added"
    asked = requested_ranks(args)
    if asked is not None and planned_ranks is not None and asked != planned_ranks:
        return [], (f"this launch asks for {asked} ranks and the job's placement has "
                    f"{planned_ranks}: Open MPI places the ranks")
    return ["--map-by", f"rankfile:file={rankfile}"], None


def planned_rank_count(rankfile: str) -> int | None:
    try:
        with open(rankfile, encoding="utf-8", errors="replace") as f:
            return sum(1 for line in f if line.startswith("rank "))
    except OSError:
        return None


def real_prterun(env: Mapping[str, str], self_path: str) -> str | None:
    """The ``prterun`` the calling ``mpirun`` would have run: ``RANKMAP_REAL_PRTERUN``;
    beside the Open MPI that called (``mpirun`` sets ``OMPI_LIBDIR_LOC`` to its libdir;
    an internal PRRTE sits in the sibling ``bin``); ``$PRTE_PREFIX/bin``; else the first
    on PATH that is not this wrapper."""
    me = os.path.realpath(self_path)
    candidates = []
    if env.get("RANKMAP_REAL_PRTERUN"):
        candidates.append(env["RANKMAP_REAL_PRTERUN"])
    if env.get("OMPI_LIBDIR_LOC"):
        candidates.append(str(Path(env["OMPI_LIBDIR_LOC"]).parent / "bin" / "prterun"))
    if env.get("PRTE_PREFIX"):
        candidates.append(str(Path(env["PRTE_PREFIX"]) / "bin" / "prterun"))
    for folder in env.get("PATH", "").split(os.pathsep):
        if folder:
            candidates.append(str(Path(folder) / "prterun"))
    for path in candidates:
        if (os.path.isfile(path) and os.access(path, os.X_OK)
                and os.path.realpath(path) != me):
            return path
    return None


def gpu_header(bind_file: str) -> tuple[str, int] | None:
    """The ``gpumask=0xM gpunode=K`` of a bind file's header (render.py
    render_bindfile); None when it has none or cannot be read."""
    try:
        with open(bind_file, "rb") as fh:
            header = fh.read(4096).split(b"\n", 1)[0].decode("ascii", "replace")
    except OSError:
        return None
    fields = dict(f.split("=", 1) for f in header.split()[4:] if "=" in f)
    if not header.startswith("rankmap-bind ") or "gpumask" not in fields:
        return None
    try:
        return fields["gpumask"], int(fields.get("gpunode", "0"))
    except ValueError:
        return None


def daemon_gpu_env(env: Mapping[str, str]) -> dict[str, str | None]:
    """For a launch rankmap places in a GPU job, the variables to change (None: unset)
    so that the prted daemons prterun starts with srun (one task per node) ask for the
    job's GPUs per node instead of its GPUs per task and their task sees them all; the
    binder then narrows each rank's to its own (librankmap_bind's widen_daemon_gpus does
    the same in Open MPI 4.1's mpirun).  {} when the bind file has no GPUs."""
    found = gpu_header(env.get("RANKMAP_BIND_FILE", ""))
    if not found or found[1] < 1:
        return {}
    mask, per_node = found
    changes: dict[str, str | None] = {"SLURM_GPUS_PER_TASK": None,
                                      "SLURM_GPUS_PER_NODE": str(per_node)}
    tres = env.get("SLURM_TRES_PER_TASK")
    if tres is not None:
        kept = [t for t in tres.split(",") if not t.startswith(("gres/gpu", "gres:gpu"))]
        changes["SLURM_TRES_PER_TASK"] = ",".join(kept) or None
    if "SLURM_GPU_BIND" not in env:
        changes["SLURM_GPU_BIND"] = f"mask_gpu:{mask}"
    return changes


def _say(text: str) -> None:
    print(f"rankmap: {text}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    env = dict(os.environ)
    real = real_prterun(env, argv[0] if os.path.isabs(argv[0]) else
                        shutil.which(argv[0]) or argv[0])
    if real is None:
        _say("rankmap-prterun: no prterun found (set RANKMAP_REAL_PRTERUN)")
        return 127
    args = argv[1:]
    rankfile = env.get("RANKMAP_RANKFILE", "")
    extra, why = placement_args(args, env, planned_rank_count(rankfile) if rankfile else None)
    if why:
        _say(why)
        # Open MPI places these ranks: librankmap_bind must not move them (it takes the
        # rankfile variable Open MPI 4.1 reads as the sign that the plan's hosts were used)
        os.environ["RANKMAP_BIND"] = "off"
    elif extra:
        for name, value in daemon_gpu_env(env).items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    command = [real if os.path.isabs(argv[0]) else "prterun"]
    if not extra or not any(c in rankfile for c in "-:"):
        os.execv(real, [*command, *extra, *args])  # os.environ: RANKMAP_BIND travels
    # a path Open MPI 5.0.7 cannot take: reach it through a link, removed afterwards
    link_dir = tempfile.mkdtemp(prefix="rankmap", dir="/tmp")
    try:
        link = os.path.join(link_dir, "rankfile")
        os.symlink(rankfile, link)
        extra = ["--map-by", f"rankfile:file={link}"]
        return run_relaying_signals([*command, *extra, *args], executable=real)
    finally:
        shutil.rmtree(link_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
