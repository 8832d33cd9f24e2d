"""A stand-in for the ``pyslurm`` module the worker's pyslurm backend loads: a job of 4
tasks per node on nodes n1..n<nodes> (CPUs 0-3 each) of 2 sockets x 2 cores; loading a
node named in ``broken_nodes`` fails.  Tests install it with
``monkeypatch.setitem(sys.modules, "pyslurm", fake_pyslurm())``."""

from __future__ import annotations

import types


def fake_pyslurm(nodes: int = 4, broken_nodes: tuple[str, ...] = ()) -> types.SimpleNamespace:
    class Job:
        allocated_nodes = f"n[1-{nodes}]"
        cpus_per_task = 1
        ntasks = 4 * nodes
        ntasks_per_node = 4
        partition = "debug"
        account = None
        name = "job"
        user_name = "root"
        user_id = 0
        group_id = 0

        @staticmethod
        def load(job_id):
            return Job()

        def get_resource_layout_per_node(self):
            return {f"n{i}": {"cpu_ids": "0-3"} for i in range(1, nodes + 1)}

    class Node:
        @staticmethod
        def load(name):
            if name in broken_nodes:
                raise RuntimeError(f"no node {name}")
            return types.SimpleNamespace(sockets=2, cores_per_socket=2, threads_per_core=1)

    return types.SimpleNamespace(Job=Job, Node=Node, __version__="25.11.2")
