"""The job's task slots in machine order: what the mapper's PEs stand for.

:func:`build_layout` joins an :class:`~slurm_plugin.slurm.allocation.Allocation` with the
cluster topology (switch tree, node shapes, optional hwloc cache groups) into a
:class:`Layout`: the mapper's :class:`mapper.Hierarchy` (switch levels → node → socket
[→ cache] → slot) and one :class:`Slot` per PE.

There is exactly one ordering of PEs.  The slots are grouped into a nested tree and
both the hierarchy *and* the slot sequence are read off that one tree by the same
depth-first walk, so PE ``i`` of the solver is ``Layout.slots[i]`` by construction,
whatever the node names, the switch wiring, the tasks per node or the cache groups.
Nothing sorts slots anywhere else; :meth:`Layout.slot_of` is the one PE → (host,
socket, cores) function the renderers use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

import numpy as np

from mapper import Hierarchy

from ..slurm.allocation import Allocation
from ..slurm.topology import NodeShape, SwitchTree, TopologyError
from .gpus import Gpu, gpu_slot_groups
from .hwloc import CoreGroups


class Slot(NamedTuple):
    """One task slot: the cores one rank is bound to.

    ``socket`` and ``cores`` use Open MPI rankfile numbering (``slot=socket:core``,
    logical core index inside the socket); ``cpu_ids`` are the node-wide Slurm
    abstract CPU ids of all the slot's cores (as in ``scontrol show job -d`` CPU_IDs).
    A slot wider than a socket's free cores (``--cpus-per-task``) spans sockets:
    ``socket``/``cores`` are its first socket's part and ``more_sockets`` the rest,
    (socket, cores in it) each, which the rankfile writes as ``slot=0:2-3;1:0-1``.

    ``gpus`` are Slurm's indexes of the node's GPUs the slot's rank gets (a job with
    ``--gpus-per-task``; the slot's cores are those wired to them where the node says),
    ``nic`` the RDMA NIC nearest to its first GPU (``mlx5_0:1``; "" when unknown).

    A named tuple, not a dataclass: a whole-machine job has 10^6 of them, and a tuple
    is built in half the time.
    """

    host: str
    socket: int
    cores: tuple[int, ...]
    cpu_ids: tuple[int, ...]
    more_sockets: tuple[tuple[int, tuple[int, ...]], ...] = ()
    gpus: tuple[int, ...] = ()
    nic: str = ""


@dataclass(frozen=True)
class Layout:
    """Hierarchy over the job's slots, the slots in PE order, and Slurm's node order.

    ``nodes`` are the job's nodes that run tasks, in the order of the job's node list
    (Slurm's node-table order, which its block/cyclic distributions follow); it is
    *not* the PE order whenever names do not follow the switch wiring.
    """

    hierarchy: Hierarchy
    slots: tuple[Slot, ...]
    notes: tuple[str, ...] = ()  # e.g. "no topology plugin: node/socket/core levels only"
    nodes: tuple[str, ...] = ()
    #: GPU jobs: the ``--gpu-bind=mask_gpu`` mask under which each task of a step sees
    #: all of its node's GPUs of the job (:func:`slurm_plugin.machine.gpus.gpu_bind_mask`);
    #: 0: none
    gpu_mask: int = 0

    def __post_init__(self) -> None:
        if len(self.slots) != self.hierarchy.n:
            raise TopologyError(f"layout has {len(self.slots)} slots for "
                                f"{self.hierarchy.n} PEs")
        if not self.nodes:
            object.__setattr__(self, "nodes", tuple(self.hosts()))

    @property
    def n(self) -> int:
        return len(self.slots)

    def slot_of(self, pe: int) -> Slot:
        """Where PE ``pe`` is: its host, socket and cores."""
        return self.slots[pe]

    def hosts(self) -> list[str]:
        """Distinct hosts in PE order."""
        return list(dict.fromkeys(s.host for s in self.slots))

    @cached_property
    def pe_node(self) -> np.ndarray:
        """Per PE, the index of its host in :attr:`nodes` (int64); computed once, O(P)."""
        index = {h: i for i, h in enumerate(self.nodes)}
        return np.array([index[s.host] for s in self.slots], dtype=np.int64)

    @cached_property
    def pe_host_lines(self) -> list[str]:
        """Per PE, its host name and a newline: one line of a machinefile (computed once:
        the machinefile and the SLURM_HOSTFILE are both made of them)."""
        return [s.host + "\n" for s in self.slots]

    @cached_property
    def pe_socket(self) -> np.ndarray:
        """Per PE, its socket (int64)."""
        return np.array([s.socket for s in self.slots], dtype=np.int64)

    @cached_property
    def pe_first_cpu(self) -> np.ndarray:
        """Per PE, the first Slurm abstract CPU id of its slot (int64)."""
        return np.array([s.cpu_ids[0] for s in self.slots], dtype=np.int64)

    @property
    def network_levels(self) -> tuple[int, ...]:
        """Hierarchy levels whose groups reach the rest of the job through one shared
        link: nodes (their host link) and every switch below the root (its uplink)."""
        names = self.hierarchy.level_names
        return tuple(range(names.index("node"), self.hierarchy.levels - 1))


def level_distances(configured: Sequence[float], switch_levels: int) -> list[float]:
    """Distances for socket, node, each switch level (leaf first) and the root.

    Missing entries continue the last one, times ten per level.
    """
    want = 2 + switch_levels + 1
    d = list(configured)
    while len(d) < want:
        d.append(d[-1] * 10 if d else 1.0)
    return d[:want]


class OversubscribedError(TopologyError):
    """A node has more tasks than task slots (``sbatch --overcommit``) and the site does
    not map oversubscribed jobs."""


#: Distance between two ranks sharing one core, as a share of the innermost distance
#: (same socket, or same cache group): they share the core's caches too, so they are
#: closer than any two ranks on distinct cores.
SHARED_CORE_SHARE = 0.5


def build_layout(alloc: Allocation, shapes: Mapping[str, NodeShape] | NodeShape,
                 tree: SwitchTree | None, distances: Sequence[float],
                 core_groups: Mapping[str, CoreGroups] | None = None,
                 cache_distance: float | None = None, *,
                 oversubscribe: bool = False,
                 gpus: Mapping[str, tuple[Gpu, ...]] | None = None,
                 gpu_domains: Mapping[str, Sequence[Sequence[int]]] | None = None
                 ) -> Layout:
    """The job's slots and the hierarchy over them, in one depth-first order.

    Nodes under no switch, and switch trees of unequal depth, are padded with
    single-child groups at the top so that every slot is at the same depth; nodes
    without a common switch share only the root.  With ``core_groups`` (from hwloc
    XML) a "cache" level between core and socket is added, at ``cache_distance``;
    nodes without hwloc data then have one cache group per socket.

    A task's ``cpus_per_task`` CPUs are hardware threads, as Slurm counts them: a slot
    has that many threads' worth of cores (:func:`task_threads`: all of a core's threads,
    or one with ``--hint=nomultithread``), so that -c 2 on a node of two threads per
    core is one core per task, as Slurm allocates it.

    A node with more tasks than slots of ``cpus_per_task`` CPUs (a job submitted with
    ``--overcommit``) raises :class:`OversubscribedError` unless ``oversubscribe``:
    then its tasks are spread as evenly as possible over the slots it has (consecutive
    tasks share a slot), and an innermost "core" level groups the ranks that share one
    slot, at :data:`SHARED_CORE_SHARE` of the innermost distance; the layout's notes
    say how many ranks share a core.  Every rank still gets exactly one slot, so the
    launcher files keep one line per rank.

    A job with GPUs per task (``alloc.gpus_per_task``) and ``gpus`` (per node, its GPUs
    with their cores: :func:`slurm_plugin.machine.gpus.job_gpus`) gets slots next to
    GPUs: each task's GPUs (:func:`~slurm_plugin.machine.gpus.gpu_slot_groups`) and
    as many cores wired to them as the allocation allows (:func:`_gpu_slots`), so a
    rank the solver puts on a slot gets a GPU and the cores near it.  The hierarchy is
    the same: a slot's socket is its GPU's.  With ``gpu_domains`` (per node, groups of
    GPU indexes joined by NVLink, NVSwitch or xGMI: the site's ``[gpus] domains``) a
    GPU slot's level below the node is its first GPU's domain instead of its socket (a
    GPU in no domain is one of its own), at the socket distance: GPU ranks talk over
    the GPUs' links, whatever sockets their cores are on.

    Complexity: O(P · L) for P slots and L levels (one dictionary walk per slot); with
    GPUs, O(C³) more per node type for C allocated cores.
    """
    notes = []
    if tree is None or tree.empty:
        notes.append("no switch topology (topology plugin not configured or not readable): "
                     "node, socket and core levels only")
        tree = SwitchTree()
    paths = tree.paths(alloc.nodes)
    missing = [n for n, p in paths.items() if not p]
    if missing and not tree.empty:
        notes.append(f"nodes outside the switch tree: {', '.join(missing)}")
    depth = max((len(p) for p in paths.values()), default=0)
    # pad at the top: a short path's top switch stands for itself on the missing levels
    padded = {n: (p + [p[-1] if p else f"~{n}"] * (depth - len(p))) for n, p in paths.items()}
    if depth and len({p[-1] for p in padded.values()}) == 1:
        # one top switch holds the whole job: it is the root group itself
        depth -= 1
        padded = {n: p[:-1] for n, p in padded.items()}
    with_cache = bool(core_groups)
    per_node: list[tuple[str, NodeShape, list[Slot], list[int], tuple]] = []
    crowded: list[tuple[str, int, int]] = []  # (node, tasks, slots) of oversubscribed nodes
    # Nodes of one shape and task count have the same slots but for the host name: the
    # slots (and any error) are computed for the first such node and copied for the
    # others, which keeps a whole-machine job (10^4 nodes, 10^6 slots) at one Slot
    # construction per slot.
    templates: dict[tuple, tuple[list[Slot], list[int]]] = {}
    for node, ntasks in zip(alloc.nodes, alloc.tasks_per_node, strict=True):
        if ntasks == 0:
            continue
        shape = shapes if isinstance(shapes, NodeShape) else shapes.get(node)
        if shape is None:
            raise TopologyError(f"no sockets/cores known for node {node}")
        cpu_ids = alloc.cpu_ids.get(node)
        node_gpus = (gpus or {}).get(node) if alloc.gpus_per_task else None
        key = (shape, ntasks, cpu_ids, node_gpus)
        if key in templates:
            first, shared = templates[key]
            slots = [Slot(node, *s[1:]) for s in first]
        else:
            threads = task_threads(shape, alloc.threads_per_core)
            cpt = -(-alloc.cpus_per_task // threads)
            slots = _gpu_slots(node, shape, cpt, cpu_ids, threads,
                               gpu_slot_groups(node_gpus, ntasks, alloc.gpus_per_task)) \
                if node_gpus else []
            if len(slots) == ntasks:
                shared = list(range(ntasks))
            else:
                slots, shared = _node_slots(node, shape, ntasks, cpt, cpu_ids,
                                            oversubscribe, threads)
            templates[key] = (slots, shared)
        if len(set(shared)) < ntasks:
            crowded.append((node, ntasks, len(set(shared))))
        per_node.append((node, shape, slots, shared, key))
    # The nested tree: group label → subtree, leaves are lists of slots.  Children keep
    # the order in which the allocation first reaches them; the walk below defines PEs.
    root: dict = {}
    running = []
    # a node's slots grouped by their labels below the node (socket, cache group,
    # shared slot), in order of first appearance: the same for every node of one
    # template and hwloc data, so computed once per such pair, not per slot
    grouping: dict[tuple, list[tuple[tuple, list[int]]]] = {}
    by_domain = False
    for node, shape, slots, shared, template in per_node:
        running.append(node)
        groups = (core_groups or {}).get(node)
        if groups is not None and len(groups.group) != shape.cores:
            raise TopologyError(f"node {node}: hwloc XML has {len(groups.group)} cores, "
                                f"Slurm says {shape.cores}")
        node_group = root
        for label in tuple(reversed(padded[node])) + (node,):
            node_group = node_group.setdefault(label, {})
        domains = _domain_of((gpu_domains or {}).get(node)) if gpus else None
        by_domain |= bool(domains) and any(s.gpus for s in slots)
        cache_key = (template, id(groups), tuple(sorted(domains.items())) if domains else ())
        labelled = grouping.get(cache_key)
        if labelled is None:
            labelled = grouping[cache_key] = _labelled_slots(
                slots, shared, shape, groups, with_cache, bool(crowded), domains)
        for key, members in labelled:
            container = node_group
            for label in key[:-1]:
                container = container.setdefault(label, {})
            container.setdefault(key[-1], []).extend([slots[i] for i in members])
    counts, ordered = _walk(root)
    dist = level_distances(distances, depth)
    names = ["socket or GPU domain" if by_domain else "socket", "node"] + [
        f"switch level {i}" if i else "leaf switch" for i in range(depth)] + ["root"]
    if by_domain:
        notes.append("GPU domains ([gpus] domains): GPU ranks are grouped by their GPUs' "
                     "domain, not by socket, below the node")
    if with_cache:
        inner = dist[0] / 2 if cache_distance is None else cache_distance
        if inner > dist[0]:
            raise TopologyError(f"cache distance {inner:g} is above the socket distance "
                                f"{dist[0]:g}")
        dist = [inner] + dist
        names = ["cache"] + names
    if crowded:
        dist = [dist[0] * SHARED_CORE_SHARE] + dist
        names = ["core"] + names
        notes.append(_oversubscribed_note(crowded, dist[0]))
    if not ordered:
        raise TopologyError("the allocation has no tasks")
    hierarchy = Hierarchy.from_tree(counts, dist, names)
    return Layout(hierarchy, tuple(ordered), tuple(notes), tuple(running))


def _domain_of(domains: Sequence[Sequence[int]] | None) -> dict[int, int]:
    """GPU index → its domain's position in ``domains``."""
    return {g: d for d, members in enumerate(domains or ()) for g in members}


def _labelled_slots(slots: list[Slot], shared: list[int], shape: NodeShape,
                    groups: CoreGroups | None, with_cache: bool, crowded: bool,
                    domains: Mapping[int, int] | None = None
                    ) -> list[tuple[tuple, list[int]]]:
    """(labels below the node, indices of the node's slots that carry them) in order
    of first appearance: the socket (a GPU slot's GPU domain, with ``domains``), then
    the cache group with hwloc data, then the shared slot when the job is
    oversubscribed."""
    out: dict[tuple, list[int]] = {}
    for i, (slot, share) in enumerate(zip(slots, shared, strict=True)):
        if domains and slot.gpus:
            first = slot.gpus[0]
            key: tuple = (("gpu domain", domains.get(first, f"gpu {first}")),)
        else:
            key = (slot.socket,)
        if with_cache:
            core = slot.cpu_ids[0] // shape.threads_per_core
            group = groups.group[core] if groups is not None else 0
            # a domain may span sockets, whose cache groups are numbered per socket
            key += ((slot.socket, group) if domains and slot.gpus else group,)
        if crowded:
            key += (share,)
        out.setdefault(key, []).append(i)
    return list(out.items())


def _walk(tree: dict | list) -> tuple[list | int, list[Slot]]:
    """Depth-first walk: the nested PE counts for Hierarchy.from_tree and the slots in
    the same order (the single source of the PE numbering)."""
    if isinstance(tree, list):
        return len(tree), list(tree)
    counts: list = []
    slots: list[Slot] = []
    for child in tree.values():
        c, s = _walk(child)
        counts.append(c)
        slots.extend(s)
    return counts, slots


def _oversubscribed_note(crowded: list[tuple[str, int, int]], distance: float) -> str:
    ranks = sum(t for _, t, _ in crowded)
    slots = sum(s for _, _, s in crowded)
    most = max(-(-t // s) for _, t, s in crowded)
    return (f"oversubscribed (--overcommit): {ranks} ranks share {slots} task slots on "
            f"{len(crowded)} node(s), up to {most} ranks per slot; mapped because the site "
            f"allows it ([solver] oversubscribe = \"allow\"); ranks sharing a slot form the "
            f"innermost level 'core' at distance {distance:g}")


def task_threads(shape: NodeShape, requested: int | None) -> int:
    """Hardware threads a task uses per core: all of the node's, as Slurm counts a task's
    CPUs, or the job's ``--threads-per-core`` (``--hint=nomultithread``: 1)."""
    return max(1, min(requested or shape.threads_per_core, shape.threads_per_core))


def _node_slots(node: str, shape: NodeShape, ntasks: int, cpt: int,
                cpu_ids: tuple[int, ...] | None, oversubscribe: bool = False,
                threads: int | None = None) -> tuple[list[Slot], list[int]]:
    """Slots of one node, ``cpt`` cores each (``threads`` hardware threads of each in
    ``cpu_ids``: all by default), filled socket by socket, and for every task the index
    of the slot it runs in (``range(ntasks)`` unless oversubscribed).

    Slurm's abstract CPU ids (``scontrol show job -d``) number cores socket-major
    with threads innermost: cpu = (socket * cores_per_socket + core) * threads + t.
    """
    slots = _distinct_slots(node, shape, ntasks, cpt, cpu_ids, threads)
    if len(slots) >= ntasks:
        return slots, list(range(ntasks))
    if not oversubscribe:
        raise OversubscribedError(
            f"node {node}: {ntasks} tasks x {cpt} cores do not fit in its "
            f"{len(_allocated_cores(shape, cpu_ids))} allocated cores: the job is oversubscribed "
            f"(--overcommit), which this site does not map ([solver] oversubscribe = "
            f"\"never\")")
    if not slots:  # fewer cores than one task wants: all tasks share what there is
        cores = _allocated_cores(shape, cpu_ids)
        slots = [_slot(node, cores, shape, threads)]
    # consecutive tasks share a slot, the counts differing by at most one
    share = [t * len(slots) // ntasks for t in range(ntasks)]
    return [slots[i] for i in share], share


def _allocated_cores(shape: NodeShape, cpu_ids: tuple[int, ...] | None) -> list[int]:
    if cpu_ids:
        return sorted({c // shape.threads_per_core for c in cpu_ids})
    return list(range(shape.cores))


def _distinct_slots(node: str, shape: NodeShape, ntasks: int, cpt: int,
                    cpu_ids: tuple[int, ...] | None, threads: int | None = None
                    ) -> list[Slot]:
    """Up to ``ntasks`` slots of ``cpt`` distinct cores each."""
    cores = _allocated_cores(shape, cpu_ids)
    by_socket: dict[int, list[int]] = {}
    for c in cores:
        by_socket.setdefault(c // shape.cores_per_socket, []).append(c)
    slots: list[Slot] = []
    for socket in sorted(by_socket):
        free = by_socket[socket]
        while len(free) >= cpt and len(slots) < ntasks:
            take, free = free[:cpt], free[cpt:]
            slots.append(_slot(node, take, shape, threads))
    if len(slots) < ntasks:
        # tasks spanning sockets: rare (cpus-per-task larger than a socket's free cores)
        used = {c // shape.threads_per_core for s in slots for c in s.cpu_ids}
        rest = [c for c in cores if c not in used]
        while len(slots) < ntasks and len(rest) >= cpt:
            take, rest = rest[:cpt], rest[cpt:]
            slots.append(_slot(node, take, shape, threads))
    return slots


def _gpu_slots(node: str, shape: NodeShape, cpt: int, cpu_ids: tuple[int, ...] | None,
               threads: int, groups: list[tuple[Gpu, ...]]) -> list[Slot]:
    """One slot per task of ``groups`` (its GPUs), ``cpt`` of the node's allocated cores
    each, as many of them wired to the task's GPUs (gres.conf ``Cores=``) as any
    assignment allows, then on those GPUs' sockets, then the lowest: an optimal
    assignment of task cores to cores (the Hungarian method, scipy's
    ``linear_sum_assignment``; Kuhn 1955) with costs 0 (wired), 1 (same socket), 2, and a
    tie-break toward low cores.  [] when the node has fewer cores than the tasks want
    (the caller then lays the node out without GPUs' cores).

    Complexity: O(R² · C) for R = tasks × ``cpt`` ≤ C allocated cores; once per node type.
    """
    from scipy.optimize import linear_sum_assignment

    cores = np.array(_allocated_cores(shape, cpu_ids), dtype=np.int64)
    if len(groups) * cpt > len(cores):
        return []
    cps = shape.cores_per_socket
    cost = np.empty((len(groups), len(cores)))
    for t, group in enumerate(groups):
        near = np.array(sorted({c for g in group for c in g.cores}), dtype=np.int64)
        wired = np.isin(cores, near)
        on_socket = np.isin(cores // cps, near // cps)
        cost[t] = np.where(wired, 0.0, np.where(on_socket, 1.0, 2.0))
    cost += np.arange(len(cores)) / (len(cores) * len(cores) * 4.0)
    rows, cols = linear_sum_assignment(np.repeat(cost, cpt, axis=0))
    taken = [sorted(cores[cols[rows // cpt == t]].tolist()) for t in range(len(groups))]
    return [_slot(node, take, shape, threads)._replace(
                gpus=tuple(sorted(g.index for g in group)),
                nic=min(group, key=lambda g: g.index).nic if group else "")
            for take, group in zip(taken, groups, strict=True)]


def _slot(node: str, cores: list[int], shape: NodeShape, threads: int | None = None
          ) -> Slot:
    """The slot of node-wide core numbers ``cores`` (its socket: the first core's), with
    the first ``threads`` hardware threads of each (all by default) as its CPUs."""
    tpc, cps = shape.threads_per_core, shape.cores_per_socket
    parts: dict[int, list[int]] = {}
    for c in cores:
        parts.setdefault(c // cps, []).append(c % cps)
    (socket, first), *rest = parts.items()
    return Slot(node, socket, tuple(first),
                tuple(c * tpc + t for c in cores for t in range(threads or tpc)),
                tuple((s, tuple(cs)) for s, cs in rest))
