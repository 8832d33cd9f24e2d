"""The command-line backends: Slurm's own commands, parsed into the records.

Every backend is a reader with the same four methods (:class:`ScontrolReader`'s);
:mod:`slurm_plugin.slurm.backends` maps the configured name to one:

* ``scontrol`` — ``scontrol show job -o -d``, ``scontrol show node -o`` and the
  configured topology source (the default, and every other reader's fallback);
* ``squeue`` — the allocation from ``squeue --json``, the rest as ``scontrol``;
* ``env`` — the allocation from the environment alone, the rest as ``scontrol``.

The texts are parsed by :mod:`~slurm_plugin.slurm.allocation`,
:mod:`~slurm_plugin.slurm.topology` and :mod:`~slurm_plugin.slurm.topology_yaml`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .allocation import Allocation, allocation_from_env, parse_scontrol_job, parse_squeue_json
from .slurm_commands import run_slurm
from .topology import NodeShape, SwitchTree, parse_scontrol_node_features, parse_scontrol_nodes
from .topology_yaml import read_topology_source


class ScontrolReader:
    """The job's allocation, node shapes, node features and switch tree through
    ``scontrol`` (and the configured topology source); ``env`` is the environment the
    commands run in, ``timeout`` their time limit in seconds."""

    name = "scontrol"

    def __init__(self, env: Mapping[str, str], timeout: float = 10.0) -> None:
        self.env = env
        self.timeout = timeout

    def _run(self, args: list[str]) -> str:
        return run_slurm(args, self.timeout, dict(self.env))

    def allocation(self, job_id: str) -> Allocation:
        return parse_scontrol_job(self._run(["scontrol", "show", "job", "-o", "-d",
                                             str(job_id)]))

    def node_shapes(self, nodes: Sequence[str]) -> dict[str, NodeShape]:
        return parse_scontrol_nodes(self._run(["scontrol", "show", "node", "-o",
                                               ",".join(nodes)]))

    def node_features(self, nodes: Sequence[str]) -> dict[str, tuple[str, ...]]:
        return parse_scontrol_node_features(self._run(["scontrol", "show", "node", "-o",
                                                       ",".join(nodes)]))

    def topology(self, source: str) -> SwitchTree | None:
        """The switch tree from ``source`` (``[slurm] topology``); None when there is
        none (:func:`~slurm_plugin.slurm.topology_yaml.read_topology_source`)."""
        return read_topology_source(source, self.timeout, self.env)


class SqueueReader(ScontrolReader):
    """The allocation from ``squeue --json``; node shapes and topology as scontrol
    (squeue does not carry them)."""

    name = "squeue"

    def allocation(self, job_id: str) -> Allocation:
        return parse_squeue_json(self._run(["squeue", "--json", "-j", str(job_id)]), job_id)


class EnvReader(ScontrolReader):
    """The allocation from the environment alone (no job id needed); the rest as
    scontrol."""

    name = "env"

    def allocation(self, job_id: str | None = None) -> Allocation:
        return allocation_from_env(self.env)
