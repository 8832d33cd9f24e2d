"""The pyslurm backend: the job's allocation, node shapes and topology through libslurm.

Source: pyslurm 25.11 (PyPI, built against Slurm 25.11; pyslurm/core/job/job.pyx
``Job.load``, ``Job.get_resource_layout_per_node``; pyslurm/core/node.pyx
``Node.load``).  pyslurm has no topology API, so the switch tree always comes from the
CLI (logged).  Every item pyslurm cannot give falls back to the CLI on its own, with a
log line naming the item and the reason, so one missing attribute does not cost the
whole backend.  Results are the same types the CLI parsers return
(:class:`~slurm_plugin.slurm.allocation.Allocation`,
:class:`~slurm_plugin.slurm.topology.NodeShape`,
:class:`~slurm_plugin.slurm.topology.SwitchTree`).  Complexity: one RPC per job and per node.
"""

from __future__ import annotations

import logging

from ..common.hostlist import expand_hostlist
from .allocation import Allocation, distribute_tasks, parse_id_ranges
from .cli_backend import ScontrolReader
from .topology import NodeShape, SwitchTree

log = logging.getLogger("rankmap.pyslurm")


class PyslurmReader(ScontrolReader):
    """:class:`~slurm_plugin.slurm.cli_backend.ScontrolReader`'s interface through
    libslurm; every item pyslurm cannot give comes from scontrol, logged."""

    name = "pyslurm"

    def allocation(self, job_id: str) -> Allocation:
        """The job's allocation from ``pyslurm.Job.load``; the CLI when pyslurm fails."""
        try:
            return _allocation(job_id)
        except Exception as exc:  # pyslurm raises its own RPCError and AttributeErrors
            log.warning("pyslurm: allocation of job %s unavailable (%s: %s); using scontrol",
                        job_id, type(exc).__name__, exc)
            return super().allocation(job_id)

    def node_shapes(self, nodes) -> dict[str, NodeShape]:
        """Sockets, cores per socket and threads per core from ``pyslurm.Node.load``;
        ``scontrol show node -o`` for the nodes pyslurm cannot give."""
        shapes: dict[str, NodeShape] = {}
        missing = []
        try:
            import pyslurm  # type: ignore[import-not-found]
        except ImportError as exc:
            log.warning("pyslurm: not importable (%s); node shapes from scontrol", exc)
            pyslurm = None
        for name in tuple(nodes):
            try:
                node = pyslurm.Node.load(name)
                shapes[name] = NodeShape(int(node.sockets), int(node.cores_per_socket),
                                         int(node.threads_per_core or 1))
            except Exception as exc:
                if pyslurm is not None:
                    log.warning("pyslurm: node %s unavailable (%s: %s); using scontrol", name,
                                type(exc).__name__, exc)
                missing.append(name)
        if missing:
            shapes.update(super().node_shapes(missing))
        return shapes

    def topology(self, source: str) -> SwitchTree | None:
        """pyslurm 25.11 has no topology call: the configured CLI/file source, logged."""
        log.info("pyslurm: no topology API; topology from %s", source)
        return super().topology(source)


def _allocation(job_id: str) -> Allocation:
    import pyslurm  # type: ignore[import-not-found]

    job = pyslurm.Job.load(int(job_id))
    nodes = expand_hostlist(job.allocated_nodes or "")
    if not nodes:
        raise ValueError("job has no allocated nodes yet")
    cpt = int(job.cpus_per_task or 1)
    ntasks = int(job.ntasks or len(nodes))
    per_node = int(job.ntasks_per_node or 0) or None
    layout = job.get_resource_layout_per_node() or {}
    cpu_ids: dict[str, tuple[int, ...]] = {}
    for node in nodes:
        ids = (layout.get(node) or {}).get("cpu_ids")
        if ids is not None:
            cpu_ids[node] = parse_id_ranges(ids, f"pyslurm job {job_id} node {node} cpu_ids") \
                if isinstance(ids, str) else tuple(ids)
    cpus = [len(cpu_ids[n]) for n in nodes] if len(cpu_ids) == len(nodes) else []
    slots = [c // cpt for c in cpus] if cpus else [ntasks] * len(nodes)
    return Allocation(job_id=str(job_id), nodes=tuple(nodes),
                      tasks_per_node=tuple(distribute_tasks(ntasks, slots, per_node)),
                      cpus_per_task=cpt, threads_per_core=_threads(job),
                      cpus_per_node=tuple(cpus), cpu_ids=cpu_ids,
                      partition=job.partition, account=job.account or None, job_name=job.name,
                      user=job.user_name, uid=job.user_id, gid=job.group_id)


def _threads(job: object) -> int | None:
    """The job's ``--threads-per-core`` (pyslurm's ``Job.threads_per_core``; None when
    unset or not given by this pyslurm)."""
    value = getattr(job, "threads_per_core", None)
    return int(value) if isinstance(value, int) and 0 < value < 0xFFFF else None
