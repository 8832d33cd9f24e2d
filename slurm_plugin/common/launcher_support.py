"""What each launcher family gets from a job's placement, in words for the user.

One sentence per family the site supports, built from what the TaskProlog actually
hands over (so it never says "applied" for a launcher that will ignore the placement):
Open MPI's mpirun takes host and core from the rankfile (4.1 by its MCA variable, 5.x
through rankmap-prterun); Hydra (MPICH, Intel MPI) takes hosts from its host file,
started through rankmap-hydra-srun, and cores from the binder, when every host is on
one line of the file; srun takes hosts from SLURM_HOSTFILE and cores from
the binder.
Standard library only (the TaskProlog imports it)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class LauncherOffer:
    """The handover in place for one job: which families the site supports and which
    of the pieces exist."""

    supported: tuple[str, ...]
    rankfile: bool
    prterun_wrapper: bool
    hydra_hostfile: bool  # MPICH's and Intel MPI's, with rankmap-hydra-srun
    binder: bool
    slurm_hostfile_exported: bool


def launcher_sentences(offer: LauncherOffer) -> list[str]:
    """``"FAMILY: what it gets"`` per supported family, in a fixed order."""
    out = []
    if "openmpi" in offer.supported:
        if offer.rankfile and offer.prterun_wrapper:
            out.append("Open MPI mpirun (4.1 and 5): host and core")
        elif offer.rankfile:
            out.append("Open MPI mpirun: host and core with 4.1; with 5, type "
                       "mpirun --map-by rankfile:file=$RANKMAP_RANKFILE")
        else:
            out.append("Open MPI mpirun: nothing (no rankfile)")
    if "hydra" in offer.supported:
        what = "host and core" if offer.binder else "host only"
        for mpi, launcher in (("MPICH", "mpiexec"), ("Intel MPI", "mpirun")):
            out.append(f"{mpi} {launcher}: {what}" if offer.hydra_hostfile else
                       f"{mpi} {launcher}: nothing (the placement interleaves hosts, which "
                       f"{mpi} cannot launch)")
    if "srun" in offer.supported:
        what = "host and core" if offer.binder else "host only"
        if offer.slurm_hostfile_exported:
            out.append(f"srun: {what}")
        else:
            out.append(f"srun: {what} with SLURM_HOSTFILE=$RANKMAP_MACHINEFILE srun ...")
    return out


def default_bind_library() -> str:
    """Where deploy/install.sh puts librankmap_bind.so: PREFIX/lib of this installation."""
    return os.path.join(sys.prefix, "lib", "librankmap_bind.so")


def prterun_wrapper_path() -> str:
    """rankmap-prterun of this installation (a console script beside this Python)."""
    return os.path.join(sys.prefix, "bin", "rankmap-prterun")


def hydra_hosts(text: str) -> list[str]:
    """The hosts of a Hydra host file's lines (``host:n``), in order."""
    return [line.split(":", 1)[0].strip() for line in text.splitlines()
            if line.strip() and not line.startswith("#")]


def one_line_per_host(hosts: list[str]) -> bool:
    """Every host on one line: what Intel MPI's Hydra can launch."""
    return bool(hosts) and len(set(hosts)) == len(hosts)


def hydra_srun_path() -> str:
    """rankmap-hydra-srun of this installation."""
    return os.path.join(sys.prefix, "bin", "rankmap-hydra-srun")


def planned_offer(supported: Sequence[str], files: Mapping[str, str], bind_library: str,
                  prterun_wrapper: str, hydra_srun: str,
                  export_slurm_hostfile: bool) -> LauncherOffer:
    """The offer the TaskProlog will make for a job whose computation wrote ``files``
    (name → text) under this site's configuration: what the report says before the
    job's steps start.  The libraries are looked for on this node (the job's)."""
    return LauncherOffer(
        supported=tuple(supported), rankfile="rankfile" in files,
        prterun_wrapper="rankfile" in files and os.path.isfile(prterun_wrapper),
        hydra_hostfile=one_line_per_host(hydra_hosts(files.get("hydra_hostfile", "")))
        and os.path.isfile(hydra_srun),
        binder="bindings" in files and bool(bind_library) and os.path.isfile(bind_library),
        slurm_hostfile_exported=export_slurm_hostfile and "slurm_hostfile" in files)
