"""The job's GPUs on each node and the cores each one is wired to.

Slurm says which GPUs a job has on a node (their indexes, :attr:`Allocation.gpus`);
which cores sit next to each comes from gres.conf ``Cores=``
(:mod:`slurm_plugin.slurm.gres`, what Slurm itself binds by) or else from the node
type's hwloc XML (the GPU's PCI locality, :func:`slurm_plugin.machine.hwloc.parse_hwloc_gpus`,
GPUs counted in PCI bus order as Slurm's autodetection does).  A GPU with neither has no
cores (): the layout then gives GPUs in index order, and says so.

:func:`gpu_slot_groups` is the rule the layout uses to put task slots next to their
GPUs (:func:`slurm_plugin.machine.layout.build_layout`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from ..slurm.allocation import Allocation
from ..slurm.gres import GresConf


class Gpu(NamedTuple):
    """One of the job's GPUs on a node: Slurm's index, the node-wide core numbers it is
    wired to (() when no source says) and the RDMA NIC nearest to it (``mlx5_0:1``, from
    the node's hwloc XML; "" when unknown)."""

    index: int
    cores: tuple[int, ...]
    nic: str = ""


def job_gpus(alloc: Allocation, gres: GresConf | None = None,
             hwloc: Mapping[str, Sequence] | None = None
             ) -> tuple[dict[str, tuple[Gpu, ...]], tuple[str, ...]]:
    """Per node of the job, its GPUs with their cores, and notes on what is not known.

    ``hwloc``: per node, the GPUs of its hwloc XML in index order (objects with
    ``index``, ``cores`` and ``nic``: :class:`~slurm_plugin.machine.hwloc.HwlocGpu`).
    O(GPUs of the job)."""
    out: dict[str, tuple[Gpu, ...]] = {}
    unwired: list[str] = []
    for node, indexes in alloc.gpus.items():
        conf = {d.index: d.cores for d in gres.of(node)} if gres else {}
        xml = {g.index: g for g in (hwloc or {}).get(node, ())}
        gpus = tuple(Gpu(i, conf.get(i) or (tuple(xml[i].cores) if i in xml else ()),
                         getattr(xml.get(i), "nic", "")) for i in indexes)
        if any(not g.cores for g in gpus):
            unwired.append(node)
        out[node] = gpus
    notes = ()
    if unwired:
        notes = (f"GPU cores unknown on {len(unwired)} node(s) (no Cores= in gres.conf, "
                 f"no hwloc XML), e.g. {unwired[0]}: tasks get GPUs in index order",)
    return out, notes


def gpu_slot_groups(gpus: Sequence[Gpu], ntasks: int, per_task: int
                    ) -> list[tuple[Gpu, ...]]:
    """For each of a node's ``ntasks`` tasks, the ``per_task`` GPUs of its slot.

    The GPUs are taken in the order of their first core (GPUs without cores last, by
    index), ``per_task`` at a time, so that a task's GPUs are wired to neighbouring
    cores; with fewer GPUs than tasks × ``per_task`` (Slurm gives per-task jobs
    exactly that many; a job that mixes in other steps' GPUs may not) consecutive
    tasks share a group, the counts differing by at most one.  O(G log G + T)."""
    ordered = sorted(gpus, key=lambda g: (not g.cores, min(g.cores, default=0), g.index))
    groups = [tuple(ordered[i:i + per_task])
              for i in range(0, len(ordered) - per_task + 1, per_task)]
    if not groups:
        groups = [tuple(ordered)]
    return [groups[t * len(groups) // ntasks] for t in range(ntasks)]


def gpu_bind_mask(alloc: Allocation, gres: GresConf | None = None) -> int:
    """The ``--gpu-bind=mask_gpu`` mask that lets each task of a step see every GPU the
    job has on its node: one bit per GPU index up to the job's highest.  Slurm refuses a
    mask with bits past a node's GPU count ("Invalid --gpu-bind"), so with gres.conf
    known the mask is given only when every GPU node of the job has that many; 0 when
    the job has no GPUs per task or the mask would not hold.  O(GPUs)."""
    if not alloc.gpus_per_task or not alloc.gpus:
        return 0
    bits = max(max(ids) for ids in alloc.gpus.values()) + 1
    if gres is not None and any(len(gres.of(n)) < bits for n in alloc.gpus):
        return 0
    return (1 << bits) - 1
