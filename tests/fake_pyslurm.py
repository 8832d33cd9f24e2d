"""A stand-in for the ``pyslurm`` module the worker's pyslurm backend loads: a 16-task
job on nodes n1-n4 (4 tasks each, CPUs 0-3) of 2 sockets x 2 cores.  Tests install it
with ``monkeypatch.setitem(sys.modules, "pyslurm", fake_pyslurm())``."""

from __future__ import annotations

import types


class FakeJob:
    allocated_nodes = "n[1-4]"
    cpus_per_task = 1
    ntasks = 16
    ntasks_per_node = 4
    partition = "debug"
    account = None
    name = "job"
    user_name = "root"
    user_id = 0
    group_id = 0

    @staticmethod
    def load(job_id):
        return FakeJob()

    def get_resource_layout_per_node(self):
        return {f"n{i}": {"cpu_ids": "0-3"} for i in range(1, 5)}


def fake_pyslurm() -> types.SimpleNamespace:
    class Node:
        @staticmethod
        def load(name):
            return types.SimpleNamespace(sockets=2, cores_per_socket=2, threads_per_core=1)

    return types.SimpleNamespace(Job=FakeJob, Node=Node, __version__="25.11.2")
