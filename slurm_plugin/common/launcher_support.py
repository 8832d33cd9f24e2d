"""Each launcher family's handover: what it reads, what it is given, what the user is told.

One :class:`Launcher` per family (:data:`LAUNCHERS`): Open MPI's mpirun takes host and
core from the rankfile (4.1 by its MCA variable, 5.x through rankmap-prterun); Hydra
(MPICH, Intel MPI) takes hosts from its host file, started through rankmap-hydra-srun,
and cores from the binder, when every host is on one line of the file; srun takes hosts
from SLURM_HOSTFILE and cores from the binder.  The report's sentence is built from the
same :class:`LauncherOffer` the TaskProlog exports from, so it never says "applied" for a
launcher that will ignore the placement.  Standard library only (the TaskProlog imports
it)."""

from __future__ import annotations

import os
import sys
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .job_conventions import (
    FILE_NAMES,
    HYDRA_NEEDS_RANK_MAP,
    INTEL_HOSTFILE_VARS,
    INTEL_LAUNCHER_EXEC_VAR,
    INTEL_LAUNCHER_VARS,
    INTEL_PERHOST_SET_VAR,
    INTEL_PERHOST_VAR,
    MPICH_CONFIG_VAR,
    MPICH_HOSTFILE_VARS,
    MPICH_LAUNCHER_VAR,
    OMPI_PRTERUN_VAR,
    OMPI_RANKFILE_VARS,
    SRUN_HOSTFILE_VAR,
)


@dataclass(frozen=True)
class LauncherOffer:
    """The handover in place for one job: which families the site supports and which
    of the pieces exist."""

    supported: tuple[str, ...]
    rankfile: bool
    prterun_wrapper: bool
    hydra_hostfile: bool  # MPICH's and Intel MPI's, with rankmap-hydra-srun
    binder: bool
    slurm_hostfile_exported: bool  # the site's switch: SLURM_HOSTFILE in every step
    slurm_hostfile: bool = False  # the file exists: a plain srun gets it (SPANK plugin)
    #: the placement interleaves hosts and MPICH gets its rank map (Intel MPI nothing)
    hydra_rankmap: bool = False
    #: the ranks of every host of the Hydra host file, when they are the same (Intel
    #: MPI's mpirun takes one count for all hosts); 0 when they differ
    hydra_perhost: int = 0


class Launcher(ABC):
    """One launcher family: its ``[launchers] supported`` name, the job files it takes
    the placement from (``reads``, keys of ``job_conventions.FILE_NAMES``), what the
    TaskProlog gives it (:meth:`exports`), what the report tells the user
    (:meth:`sentences`) and the programs of this installation it needs
    (:meth:`helpers`).  The worker, the TaskProlog, the report and ``rankmap config
    check`` all ask these objects; none repeats a family's rule."""

    family: str = ""
    reads: tuple[str, ...] = ()

    @abstractmethod
    def sentences(self, offer: LauncherOffer) -> list[str]:
        """``"FAMILY: what it gets"`` for the report and the batch step."""

    @abstractmethod
    def exports(self, offer: LauncherOffer, job_dir: str, script_step: bool,
                env: Mapping[str, str] | None = None) -> list[str]:
        """``export VAR=value`` lines for a step (``script_step``: the batch script's,
        where mpirun runs; ``env``: the step's environment, whose own settings win); the
        binder's lines, common to every family, are not here."""

    def helpers(self) -> list[tuple[str, str]]:
        """(path, what it is) of the programs this family's handover runs."""
        return []


class OpenMPI(Launcher):
    """Open MPI's mpirun: host and core from the rankfile, 4.1 by its MCA variable,
    5.x through rankmap-prterun (slurm_plugin.lifecycle.prterun_wrapper)."""

    family, reads = "openmpi", ("rankfile",)

    def sentences(self, offer: LauncherOffer) -> list[str]:
        if offer.rankfile and offer.prterun_wrapper:
            return ["Open MPI mpirun (4.1 and 5): host and core"]
        if offer.rankfile:
            return ["Open MPI mpirun: host and core with 4.1; with 5, type "
                    "mpirun --map-by rankfile:file=$RANKMAP_RANKFILE"]
        return ["Open MPI mpirun: nothing (no rankfile)"]

    def exports(self, offer: LauncherOffer, job_dir: str, script_step: bool,
                env: Mapping[str, str] | None = None) -> list[str]:
        # in the batch step only: mpirun's daemons' step inherits them from mpirun, so
        # a script that unsets them leaves no rankfile anywhere in the job
        if not (script_step and offer.rankfile):
            return []
        rankfile = os.path.join(job_dir, FILE_NAMES["rankfile"])
        lines = [f"export {var}={rankfile}" for var in OMPI_RANKFILE_VARS]
        if offer.prterun_wrapper:
            lines.append(f"export {OMPI_PRTERUN_VAR}={prterun_wrapper_path()}")
        return lines

    def helpers(self) -> list[tuple[str, str]]:
        return [(prterun_wrapper_path(), "rankmap-prterun (Open MPI 5's mpirun)")]


class Hydra(Launcher):
    """MPICH's mpiexec and Intel MPI's mpirun: hosts from the Hydra host file, started
    through rankmap-hydra-srun, cores from the binder, when every host is on one line
    of the file; a placement that interleaves hosts gives MPICH its rank map too
    (``-rankmap`` in ``HYDRA_CONFIG_FILE``, MPICH 5.0.2 and later) and Intel MPI, which
    has no rank map, nothing."""

    family, reads = "hydra", ("hydra_hostfile", "hydra_rankmap", "bindings")

    def sentences(self, offer: LauncherOffer) -> list[str]:
        what = "host and core" if offer.binder else "host only"
        cannot = "nothing (the placement interleaves hosts, which {} cannot launch)"
        mpich = (f"MPICH mpiexec: {what}" + (" (5.0.2 and later: the placement interleaves "
                                             "hosts; earlier ones keep their own)"
                                             if offer.hydra_rankmap else "")
                 if offer.hydra_hostfile else f"MPICH mpiexec: {cannot.format('MPICH')}")
        if offer.hydra_hostfile and not offer.hydra_rankmap and offer.hydra_perhost:
            intel = f"Intel MPI mpirun: {what}"
        elif offer.hydra_hostfile and not offer.hydra_rankmap:
            intel = ("Intel MPI mpirun: nothing (the placement gives hosts different "
                     "numbers of ranks, and Intel MPI takes one number for every host)")
        else:
            intel = f"Intel MPI mpirun: {cannot.format('Intel MPI')}"
        return [mpich, intel]

    def exports(self, offer: LauncherOffer, job_dir: str, script_step: bool,
                env: Mapping[str, str] | None = None) -> list[str]:
        # a host on several lines (an interleaved placement) starts several proxies per
        # node: MPICH ran that under Slurm 22.05 but hung under 24.11, and Intel MPI
        # launched too many ranks; so the offer gives the file only with one line per
        # host, and an interleaved placement to MPICH as a rank map over that file
        if not (script_step and offer.hydra_hostfile):
            return []
        hydra, launcher = os.path.join(job_dir, FILE_NAMES["hydra_hostfile"]), hydra_srun_path()
        lines = [f"export {var}={hydra}" for var in MPICH_HOSTFILE_VARS]
        lines.append(f"export {MPICH_LAUNCHER_VAR}={launcher}")
        if offer.hydra_rankmap:
            return [*lines, f"export {MPICH_CONFIG_VAR}="
                            f"{os.path.join(job_dir, FILE_NAMES['hydra_rankmap'])}"]
        if not offer.hydra_perhost:
            return lines
        lines += [f"export {var}={hydra}" for var in INTEL_HOSTFILE_VARS]
        lines += [f"export {k}={v}" for k, v in INTEL_LAUNCHER_VARS.items()]
        lines.append(f"export {INTEL_LAUNCHER_EXEC_VAR}={launcher}")
        if INTEL_PERHOST_VAR in (env or {}):  # the job's own count wins
            return lines
        n = offer.hydra_perhost
        return [*lines, f"export {INTEL_PERHOST_VAR}={n}", f"export {INTEL_PERHOST_SET_VAR}={n}"]

    def helpers(self) -> list[tuple[str, str]]:
        return [(hydra_srun_path(), "rankmap-hydra-srun (MPICH's and Intel MPI's hosts)")]


class Srun(Launcher):
    """srun: hosts from SLURM_HOSTFILE, cores from the binder.  The TaskProlog names the
    file in the batch step (:data:`~slurm_plugin.common.job_conventions.SRUN_HOSTFILE_VAR`)
    and the SPANK plugin, in srun, makes it SLURM_HOSTFILE for a plain step of the job's
    size only (slurm_plugin/spank/rankmap_spank.c, ``plain_step``); where the site
    exports SLURM_HOSTFILE job-wide instead, every step gets it."""

    family, reads = "srun", ("slurm_hostfile", "bindings")

    def sentences(self, offer: LauncherOffer) -> list[str]:
        what = "host and core" if offer.binder else "host only"
        if offer.slurm_hostfile_exported:
            return [f"srun: {what}"]
        if offer.slurm_hostfile:
            return [f"srun: {what} for srun of the job's task count (with -n of another "
                    f"size, -N, -w or -m it keeps Slurm's placement)"]
        return ["srun: nothing (no host file)"]

    def exports(self, offer: LauncherOffer, job_dir: str, script_step: bool,
                env: Mapping[str, str] | None = None) -> list[str]:
        hostfile = os.path.join(job_dir, FILE_NAMES["slurm_hostfile"])
        if offer.slurm_hostfile_exported:
            return [f"export SLURM_HOSTFILE={hostfile}", "export SLURM_DISTRIBUTION=arbitrary"]
        if script_step and offer.slurm_hostfile:
            return [f"export {SRUN_HOSTFILE_VAR}={hostfile}"]
        return []


#: every family, by its ``[launchers] supported`` name, in the report's order
LAUNCHERS: dict[str, Launcher] = {f.family: f for f in (OpenMPI(), Hydra(), Srun())}


def supported_launchers(supported: Sequence[str]) -> list[Launcher]:
    """The families of ``supported``, in :data:`LAUNCHERS`' order."""
    return [launcher for name, launcher in LAUNCHERS.items() if name in supported]


def launcher_sentences(offer: LauncherOffer) -> list[str]:
    """``"FAMILY: what it gets"`` per supported family, in a fixed order."""
    return [line for launcher in supported_launchers(offer.supported)
            for line in launcher.sentences(offer)]


def family_exports(offer: LauncherOffer, job_dir: str, script_step: bool,
                   env: Mapping[str, str] | None = None) -> list[str]:
    """Every supported family's own ``export`` lines for a step of environment ``env``."""
    return [line for launcher in supported_launchers(offer.supported)
            for line in launcher.exports(offer, job_dir, script_step, env)]


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


def hydra_perhost(text: str) -> int:
    """The ranks per host of a Hydra host file (``host:n``, n 1 when absent) when every
    line has the same; 0 when they differ or the file has no hosts."""
    counts = set()
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            count = line.partition(":")[2].strip() or "1"
            counts.add(int(count) if count.isdigit() else 0)
    return counts.pop() if len(counts) == 1 else 0


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
    job's steps start.  The libraries are looked for on this node (the job's).  A host
    file of an interleaved placement (marked by its first line, ``# ranks interleave``)
    is given only with its rank map."""
    rank_map = bool(files.get("hydra_rankmap", "").strip())
    needs_rank_map = files.get("hydra_hostfile", "").startswith(HYDRA_NEEDS_RANK_MAP)
    return LauncherOffer(
        supported=tuple(supported), rankfile="rankfile" in files,
        prterun_wrapper="rankfile" in files and os.path.isfile(prterun_wrapper),
        hydra_hostfile=one_line_per_host(hydra_hosts(files.get("hydra_hostfile", "")))
        and os.path.isfile(hydra_srun) and (rank_map or not needs_rank_map),
        binder="bindings" in files and bool(bind_library) and os.path.isfile(bind_library),
        slurm_hostfile_exported=export_slurm_hostfile and "slurm_hostfile" in files,
        slurm_hostfile="slurm_hostfile" in files,
        hydra_rankmap=rank_map,
        hydra_perhost=hydra_perhost(files.get("hydra_hostfile", "")))
