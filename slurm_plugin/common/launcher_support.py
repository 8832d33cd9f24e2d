"""What each launcher family gets from a job's placement, in words for the user.

One sentence per family the site supports, built from what the TaskProlog actually
hands over (so it never says "applied" for a launcher that will ignore the placement):
Open MPI's mpirun takes host and core from the rankfile (4.1 by its MCA variable, 5.x
through rankmap-prterun); Hydra (MPICH, Intel MPI) takes hosts from its host file and
cores from the binder; srun takes hosts from SLURM_HOSTFILE and cores from the binder.
Standard library only (the TaskProlog imports it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LauncherOffer:
    """The handover in place for one job: which families the site supports and which
    of the pieces exist."""

    supported: tuple[str, ...]
    rankfile: bool
    prterun_wrapper: bool
    hydra_hostfile: bool
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
        if offer.hydra_hostfile:
            what = "host and core" if offer.binder else "host only"
            out.append(f"MPICH/Intel MPI mpiexec: {what}")
        else:
            out.append("MPICH/Intel MPI mpiexec: nothing (the placement interleaves hosts, "
                       "which Hydra cannot launch under Slurm)")
    if "srun" in offer.supported:
        what = "host and core" if offer.binder else "host only"
        if offer.slurm_hostfile_exported:
            out.append(f"srun: {what}")
        else:
            out.append(f"srun: {what} with SLURM_HOSTFILE=$RANKMAP_MACHINEFILE srun ...")
    return out
