"""Task slots next to their GPUs (build_layout with ``gpus``), checked against brute
force on generated nodes with odd wiring, uneven allocations and several CPUs per task."""

import itertools

import numpy as np
import pytest

from slurm_plugin.machine.gpus import Gpu, gpu_bind_mask, gpu_slot_groups, job_gpus
from slurm_plugin.machine.layout import build_layout
from slurm_plugin.slurm.allocation import Allocation
from slurm_plugin.slurm.gres import parse_gres_conf
from slurm_plugin.slurm.topology import NodeShape

SHAPE = NodeShape(sockets=2, cores_per_socket=4)


def alloc_of(gpus: dict[str, tuple[int, ...]], tasks: dict[str, int],
             cpu_ids: dict[str, tuple[int, ...]] | None = None, cpt: int = 1,
             per_task: int = 1) -> Allocation:
    nodes = tuple(tasks)
    return Allocation("1", nodes, tuple(tasks[n] for n in nodes), cpus_per_task=cpt,
                      cpu_ids=cpu_ids or {}, gpus=gpus, gpus_per_task=per_task)


def wired_cores_best(cores: list[int], cpt: int, groups: list[set[int]]) -> int:
    """The most cores wired to their task's GPUs any split of ``cores`` into tasks of
    ``cpt`` reaches (brute force over assignments)."""
    best = 0
    for perm in itertools.permutations(cores, len(groups) * cpt):
        best = max(best, sum(c in groups[t] for t in range(len(groups))
                             for c in perm[t * cpt:(t + 1) * cpt]))
    return best


def test_each_slot_gets_a_gpu_and_the_cores_wired_to_it():
    gres = parse_gres_conf("".join(
        f"NodeName=g1 Name=gpu File=/dev/nvidia{i} Cores={c}\n"
        for i, c in enumerate(["4-7", "4-7", "0-3", "0-3"])))
    alloc = alloc_of({"g1": (0, 1, 2, 3)}, {"g1": 4})
    gpus, notes = job_gpus(alloc, gres)
    assert not notes
    slots = build_layout(alloc, SHAPE, None, [1, 10], gpus=gpus).slots
    assert sorted(s.gpus for s in slots) == [(0,), (1,), (2,), (3,)]
    for s in slots:
        assert set(s.cpu_ids) <= set(gres.of("g1")[s.gpus[0]].cores), s


@pytest.mark.parametrize("seed", range(40))
def test_generated_nodes_reach_the_most_wired_cores_any_assignment_does(seed):
    rng = np.random.default_rng(seed)
    per_task = int(rng.integers(1, 3))
    ntasks = int(rng.integers(1, 4 // per_task + 1))
    ngpus = ntasks * per_task  # what Slurm gives a --gpus-per-task job on a node
    cpt = int(rng.integers(1, 3))
    cores = sorted(rng.choice(8, size=min(8, ntasks * cpt + int(rng.integers(0, 3))),
                              replace=False).tolist())
    wiring = [tuple(sorted(rng.choice(8, size=int(rng.integers(1, 5)), replace=False)))
              for _ in range(ngpus)]
    order = rng.permutation(4)[:ngpus]  # the job's GPU indexes, not 0..n-1
    gpus = {"g1": tuple(Gpu(int(i), w) for i, w in zip(sorted(order), wiring, strict=True))}
    alloc = alloc_of({"g1": tuple(sorted(int(i) for i in order))}, {"g1": ntasks},
                     {"g1": tuple(cores)}, cpt, per_task)
    slots = build_layout(alloc, SHAPE, None, [1, 10], gpus=gpus).slots
    assert len(slots) == ntasks
    got = [g for s in slots for g in s.gpus]
    assert sorted(got) == sorted(int(i) for i in order)  # every GPU once
    wires = {g.index: set(g.cores) for g in gpus["g1"]}
    reached = sum(c in set().union(*(wires[g] for g in s.gpus))
                  for s in slots for c in s.cpu_ids)
    used = {c for s in slots for c in s.cpu_ids}
    assert len(used) == ntasks * cpt and used <= set(cores)
    # the best over every split of the allocated cores, for the groups the slots have
    groups = [set().union(*(wires[g] for g in s.gpus)) for s in slots]
    assert reached == wired_cores_best(cores, cpt, groups), (slots, wiring, cores)


def test_gpus_without_cores_are_given_in_index_order_and_said():
    alloc = alloc_of({"g1": (1, 3)}, {"g1": 2})
    gpus, notes = job_gpus(alloc, None)
    assert gpus == {"g1": (Gpu(1, ()), Gpu(3, ()))}
    assert notes and "g1" in notes[0]
    slots = build_layout(alloc, SHAPE, None, [1, 10], gpus=gpus).slots
    assert [s.gpus for s in slots] == [(1,), (3,)]


def test_more_tasks_than_gpus_share_them_evenly():
    groups = gpu_slot_groups([Gpu(0, (0,)), Gpu(1, (4,))], 5, 1)
    assert [g[0].index for g in groups] == [0, 0, 0, 1, 1]


def test_a_job_without_gpus_per_task_gets_plain_slots():
    alloc = alloc_of({"g1": (0, 1)}, {"g1": 2}, per_task=0)
    slots = build_layout(alloc, SHAPE, None, [1, 10],
                         gpus={"g1": (Gpu(0, (4,)), Gpu(1, (5,)))}).slots
    assert [s.gpus for s in slots] == [(), ()] and [s.cpu_ids for s in slots] == [(0,), (1,)]


def test_the_srun_mask_covers_the_highest_index_unless_a_node_has_fewer_gpus():
    gres = parse_gres_conf("NodeName=g[1-2] Name=gpu File=/dev/nvidia[0-3]\n"
                           "NodeName=g3 Name=gpu File=/dev/nvidia[0-1]\n")
    assert gpu_bind_mask(alloc_of({"g1": (0, 2), "g2": (1,)}, {"g1": 2, "g2": 1}),
                         gres) == 0b111
    assert gpu_bind_mask(alloc_of({"g1": (3,), "g3": (0,)}, {"g1": 1, "g3": 1}), gres) == 0
    assert gpu_bind_mask(alloc_of({"g1": (0,)}, {"g1": 1}, per_task=0), gres) == 0


def test_the_bind_files_gpus_per_node_counts_a_gpu_tasks_share_once():
    """Four tasks on a node with two GPUs share them: the daemons of mpirun and mpiexec
    must ask for two GPUs per node (the header's gpunode), not one per task."""
    from dataclasses import replace

    from slurm_plugin.outputs.render import render_bindfile

    alloc = alloc_of({"g1": (0, 1), "g2": (0, 1)}, {"g1": 4, "g2": 4})
    gpus = {n: (Gpu(0, (0, 1, 2, 3)), Gpu(1, (4, 5, 6, 7))) for n in ("g1", "g2")}
    layout = replace(build_layout(alloc, SHAPE, None, [1, 10], gpus=gpus), gpu_mask=0b11)
    assert sorted(s.gpus for s in layout.slots) == [(0,)] * 4 + [(1,)] * 4
    header = render_bindfile(layout, np.arange(8)).splitlines()[0].split()
    assert header[4:] == ["gpumask=0x3", "gpunode=2"]
