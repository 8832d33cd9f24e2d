"""The pyslurm backend: the job's allocation, node shapes and topology through libslurm.

Source: pyslurm 25.11 (PyPI, built against Slurm 25.11; pyslurm/core/job/job.pyx
``Job.load``, ``Job.get_resource_layout_per_node``; pyslurm/core/node.pyx
``Node.load``).  pyslurm has no topology API, so the switch tree always comes from the
CLI (logged).  Every item pyslurm cannot give falls back to the CLI on its own, with a
log line naming the item and the reason, so one missing attribute does not cost the
whole backend.  Results are the same types the CLI parsers return
(:class:`~slurm_plugin.allocation.Allocation`, :class:`~slurm_plugin.topology.NodeShape`,
:class:`~slurm_plugin.topology.SwitchTree`).  Complexity: one RPC per job and per node.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from .allocation import Allocation, distribute_tasks, parse_id_ranges, parse_scontrol_job
from .hostlist import expand_hostlist
from .slurm_commands import run_slurm
from .topology import NodeShape, SwitchTree, parse_scontrol_nodes
from .topology_yaml import read_topology_source

log = logging.getLogger("rankmap.pyslurm")


def allocation(job_id: str, env: Mapping[str, str] | None = None,
               timeout: float = 10.0) -> Allocation:
    """The job's allocation from ``pyslurm.Job.load``; the CLI when pyslurm fails."""
    try:
        return _allocation(job_id)
    except Exception as exc:  # pyslurm raises its own RPCError and AttributeErrors
        log.warning("pyslurm: allocation of job %s unavailable (%s: %s); using scontrol",
                    job_id, type(exc).__name__, exc)
        return parse_scontrol_job(run_slurm(["scontrol", "show", "job", "-o", "-d",
                                             str(job_id)], timeout, dict(env or {})))


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
                      cpus_per_task=cpt, cpus_per_node=tuple(cpus), cpu_ids=cpu_ids,
                      partition=job.partition, account=job.account or None, job_name=job.name,
                      user=job.user_name, uid=job.user_id, gid=job.group_id)


def node_shapes(nodes: tuple[str, ...] | list[str], env: Mapping[str, str] | None = None,
                timeout: float = 10.0) -> dict[str, NodeShape]:
    """Sockets, cores per socket and threads per core from ``pyslurm.Node.load``;
    ``scontrol show node -o`` for the nodes pyslurm cannot give."""
    shapes: dict[str, NodeShape] = {}
    missing = []
    try:
        import pyslurm  # type: ignore[import-not-found]
    except ImportError as exc:
        log.warning("pyslurm: not importable (%s); node shapes from scontrol", exc)
        pyslurm = None
    for name in nodes:
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
        shapes.update(parse_scontrol_nodes(run_slurm(
            ["scontrol", "show", "node", "-o", ",".join(missing)], timeout, dict(env or {}))))
    return shapes


def topology(source: str, timeout: float, env: Mapping[str, str]) -> SwitchTree | None:
    """pyslurm 25.11 has no topology call: the configured CLI/file source, logged."""
    log.info("pyslurm: no topology API; topology from %s", source)
    return read_topology_source(source, timeout, env)
