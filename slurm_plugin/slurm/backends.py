"""The Slurm backend, chosen in one place: ``[slurm] backend`` → a reader.

Every reader has :class:`~slurm_plugin.slurm.cli_backend.ScontrolReader`'s interface
(``allocation``, ``node_shapes``, ``node_features``, ``topology``) and returns the same
records; :data:`READERS` names them.  ``auto`` is pyslurm when it imports and matches
the running Slurm, else scontrol (:func:`resolve_backend`, once per job: the check runs
``scontrol``).  The functions below are what the worker and the tools call.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace

from .allocation import Allocation, AllocationError, env_distribution, int_or_none
from .cli_backend import EnvReader, ScontrolReader, SqueueReader
from .pyslurm_backend import PyslurmReader
from .slurm_commands import SlurmQueryError, run_slurm
from .topology import NodeShape, SwitchTree

#: backend name → reader class; a name not here reads as ``scontrol``
READERS: dict[str, type[ScontrolReader]] = {
    "scontrol": ScontrolReader,
    "squeue": SqueueReader,
    "env": EnvReader,
    "pyslurm": PyslurmReader,
}


def pyslurm_matches(env: Mapping[str, str] | None = None) -> bool:
    """True when pyslurm imports and was built for the running Slurm's major.minor
    (``scontrol --version`` of the Slurm that ``env`` names)."""
    try:
        import pyslurm  # type: ignore[import-not-found]
    except ImportError:
        return False
    try:
        running = run_slurm(["scontrol", "--version"], timeout=5, env=env).split()[-1]
        return str(getattr(pyslurm, "__version__", "")).startswith(
            ".".join(running.split(".")[:2]))
    except SlurmQueryError:
        return False


def resolve_backend(backend: str, env: Mapping[str, str] | None = None) -> str:
    """``auto`` → ``pyslurm`` when it matches the running Slurm, else ``scontrol``;
    any other name unchanged.  Resolve once per job: the check runs ``scontrol``."""
    if backend != "auto":
        return backend
    return "pyslurm" if pyslurm_matches(env) else "scontrol"


def reader(backend: str, env: Mapping[str, str] = os.environ,
           timeout: float = 10.0) -> ScontrolReader:
    """The reader of ``backend`` (``auto`` resolved first)."""
    return READERS.get(resolve_backend(backend, env), ScontrolReader)(env, timeout)


def read_allocation(job_id: str | None = None, env: Mapping[str, str] = os.environ,
                    backend: str = "auto", timeout: float = 10.0) -> Allocation:
    """The job's allocation from the chosen backend (``auto``: best available).

    ``auto`` uses pyslurm when it matches the running Slurm, otherwise
    ``scontrol show job``; the environment fills in what the scheduler leaves out
    (user, uid/gid as the prolog sees them).
    """
    job_id = job_id or env.get("SLURM_JOB_ID")
    if backend == "env":
        return EnvReader(env, timeout).allocation(job_id)
    if not job_id:
        raise AllocationError("no job id (SLURM_JOB_ID) to ask Slurm about")
    alloc = reader(backend, env, timeout).allocation(job_id)
    return replace(alloc,
                   user=alloc.user or env.get("SLURM_JOB_USER"),
                   uid=alloc.uid if alloc.uid is not None else int_or_none(
                       env.get("SLURM_JOB_UID")),
                   gid=alloc.gid if alloc.gid is not None else int_or_none(
                       env.get("SLURM_JOB_GID")),
                   partition=alloc.partition or env.get("SLURM_JOB_PARTITION"),
                   distribution=alloc.distribution or env_distribution(env))


def read_node_shapes(nodes: Sequence[str], env: Mapping[str, str] = os.environ,
                     backend: str = "auto", timeout: float = 10.0) -> dict[str, NodeShape]:
    """Sockets, cores per socket and threads per core of ``nodes`` from the chosen
    backend: pyslurm's ``Node.load`` (the CLI for each node it cannot give, logged),
    else ``scontrol show node -o`` (squeue and the environment do not carry shapes)."""
    return reader(backend, env, timeout).node_shapes(tuple(nodes))


def read_node_features(nodes: Sequence[str], env: Mapping[str, str] = os.environ,
                       timeout: float = 10.0) -> dict[str, tuple[str, ...]]:
    """The Slurm features of ``nodes`` (``scontrol show node -o``), for ``[speeds]
    features``; the worker asks only when that table is not empty."""
    return ScontrolReader(env, timeout).node_features(nodes)


def read_topology(source: str, timeout: float, env: Mapping[str, str],
                  backend: str = "scontrol") -> SwitchTree | None:
    """The switch tree from the configured source; None when there is none.

    Slurm 25.05+ topologies (topology.yaml, per-partition, block) and topology.conf of
    either plugin: :func:`slurm_plugin.slurm.topology_yaml.read_topology_source` (pyslurm has
    no topology call: under that backend the same source, logged).
    """
    return READERS.get(backend, ScontrolReader)(env, timeout).topology(source)
