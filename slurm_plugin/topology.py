"""Cluster topology for exactly the job's slots, as a mapper hierarchy.

Sources: the switch tree from topology.conf (``SwitchName=``, ``Switches=``,
``Nodes=``, ``LinkSpeed=``) or ``scontrol show topology``; node shapes (``Boards``,
``Sockets``, ``CoresPerSocket``, ``ThreadsPerCore``) from ``scontrol show node -o`` or
given by hand.  :func:`build_layout` joins them with an :class:`Allocation` into a
:class:`~slurm_plugin.layout.Layout`: root → switch levels → node → socket → slot, with
uneven fan-outs wherever the allocation is uneven.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from mapper import Hierarchy

from .allocation import Allocation
from .hostlist import HostlistError, expand_hostlist
from .hwloc import CoreGroups
from .layout import Layout, Slot


class TopologyError(ValueError):
    """Topology input that does not parse or does not fit the job."""


@dataclass(frozen=True)
class NodeShape:
    """Processor layout of one node (Slurm's view)."""

    sockets: int = 1
    cores_per_socket: int = 1
    threads_per_core: int = 1

    @property
    def cores(self) -> int:
        return self.sockets * self.cores_per_socket


@dataclass(frozen=True)
class SwitchTree:
    """Switches by name: the nodes directly under each, the child switches, the parent."""

    nodes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    children: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.nodes and not self.children

    def parents(self) -> dict[str, str]:
        return {c: p for p, cs in self.children.items() for c in cs}

    def leaf_of(self) -> dict[str, str]:
        return {n: s for s, ns in self.nodes.items() for n in ns}

    def path(self, node: str) -> list[str]:
        """Switches from the node's leaf switch up to its top switch ([] if none)."""
        leaf = self.leaf_of().get(node)
        parents = self.parents()
        out = []
        seen = set()
        while leaf is not None and leaf not in seen:
            out.append(leaf)
            seen.add(leaf)
            leaf = parents.get(leaf)
        return out


def _kv(line: str) -> dict[str, str]:
    return dict(re.findall(r"(\w+)=(\S+)", line))


def parse_topology_conf(text: str, path: str = "topology.conf") -> SwitchTree:
    """Parse a topology/tree topology.conf; errors name the file and line."""
    nodes: dict[str, tuple[str, ...]] = {}
    children: dict[str, tuple[str, ...]] = {}
    joined: list[tuple[int, str]] = []
    buf, start = "", 0
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].rstrip()
        if not buf:
            start = no
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        if buf.strip():
            joined.append((start, buf.strip()))
        buf = ""
    for no, line in joined:
        kv = _kv(line)
        name = kv.get("SwitchName")
        if not name:
            raise TopologyError(f"{path}:{no}: expected SwitchName=..., got {line!r}")
        unknown = set(kv) - {"SwitchName", "Switches", "Nodes", "LinkSpeed"}
        if unknown:
            raise TopologyError(f"{path}:{no}: unknown key(s) {', '.join(sorted(unknown))}")
        try:
            if "Nodes" in kv:
                nodes[name] = tuple(expand_hostlist(kv["Nodes"]))
            if "Switches" in kv:
                children[name] = tuple(expand_hostlist(kv["Switches"]))
        except HostlistError as exc:
            raise TopologyError(f"{path}:{no}: {exc}") from None
    known = set(nodes) | set(children)
    for parent, kids in children.items():
        for kid in kids:
            if kid not in known:
                raise TopologyError(f"{path}: switch {parent} lists unknown switch {kid}")
    return SwitchTree(nodes, children)


def parse_scontrol_topology(text: str) -> SwitchTree:
    """Parse ``scontrol show topology`` (one ``SwitchName=… Level=…`` line per switch).

    Slurm lists, for upper switches, every node below them in ``Nodes=``; only
    leaf switches (``Level=0``) keep their node lists.
    """
    nodes: dict[str, tuple[str, ...]] = {}
    children: dict[str, tuple[str, ...]] = {}
    for line in text.splitlines():
        kv = _kv(line)
        if "SwitchName" not in kv:
            continue
        name = kv["SwitchName"]
        if kv.get("Switches"):
            children[name] = tuple(expand_hostlist(kv["Switches"]))
        elif kv.get("Nodes") and kv.get("Level", "0") == "0":
            nodes[name] = tuple(expand_hostlist(kv["Nodes"]))
    return SwitchTree(nodes, children)


def parse_node_shape(text: str) -> NodeShape:
    """``Sockets=2 CoresPerSocket=8 [ThreadsPerCore=2] [Boards=1]`` or scontrol's form."""
    kv = _kv(text)
    try:
        boards = int(kv.get("Boards", 1))
        sockets = int(kv["SocketsPerBoard"]) * boards if "SocketsPerBoard" in kv \
            else int(kv.get("Sockets", 1))
        return NodeShape(sockets, int(kv.get("CoresPerSocket", 1)),
                         int(kv.get("ThreadsPerCore", 1)))
    except ValueError as exc:
        raise TopologyError(f"bad node description {text!r}: {exc}") from None


def parse_scontrol_nodes(text: str) -> dict[str, NodeShape]:
    """``scontrol show node -o``: one NodeName= line per node."""
    shapes = {}
    for line in text.splitlines():
        kv = _kv(line)
        if "NodeName" in kv:
            shapes[kv["NodeName"]] = parse_node_shape(line)
    return shapes


def level_distances(configured: Sequence[float], switch_levels: int) -> list[float]:
    """Distances for socket, node, each switch level (leaf first) and the root.

    Missing entries continue the last one, times ten per level.
    """
    want = 2 + switch_levels + 1
    d = list(configured)
    while len(d) < want:
        d.append(d[-1] * 10 if d else 1.0)
    return d[:want]


def _node_slots(node: str, shape: NodeShape, ntasks: int, cpt: int,
                cpu_ids: tuple[int, ...] | None) -> list[Slot]:
    """Slots of one node: ``cpt`` cores each, filled socket by socket.

    Slurm's abstract CPU ids (``scontrol show job -d``) number cores socket-major
    with threads innermost: cpu = (socket * cores_per_socket + core) * threads + t.
    """
    if cpu_ids:
        cores = sorted({c // shape.threads_per_core for c in cpu_ids})
    else:
        cores = list(range(shape.cores))
    by_socket: dict[int, list[int]] = {}
    for c in cores:
        by_socket.setdefault(c // shape.cores_per_socket, []).append(c)
    slots: list[Slot] = []
    for socket in sorted(by_socket):
        free = by_socket[socket]
        while len(free) >= cpt and len(slots) < ntasks:
            take, free = free[:cpt], free[cpt:]
            slots.append(_slot(node, socket, take, shape))
    if len(slots) < ntasks:
        # tasks spanning sockets: rare (cpus-per-task larger than a socket's free cores)
        used = {c // shape.threads_per_core for s in slots for c in s.cpu_ids}
        rest = [c for c in cores if c not in used]
        while len(slots) < ntasks and len(rest) >= cpt:
            take, rest = rest[:cpt], rest[cpt:]
            slots.append(_slot(node, take[0] // shape.cores_per_socket, take, shape))
    if len(slots) < ntasks:
        raise TopologyError(f"node {node}: {ntasks} tasks x {cpt} cores do not fit in "
                            f"{len(cores)} cores")
    return slots


def _slot(node: str, socket: int, cores: list[int], shape: NodeShape) -> Slot:
    tpc = shape.threads_per_core
    return Slot(node, socket, tuple(c % shape.cores_per_socket for c in cores),
                tuple(c * tpc + t for c in cores for t in range(tpc)))


def build_layout(alloc: Allocation, shapes: Mapping[str, NodeShape] | NodeShape,
                 tree: SwitchTree | None, distances: Sequence[float],
                 core_groups: Mapping[str, CoreGroups] | None = None,
                 cache_distance: float | None = None) -> Layout:
    """The job's slots and the hierarchy over them.

    Nodes under no switch, and switch trees of unequal depth, are padded with
    single-child groups at the top so that every slot is at the same depth; nodes
    without a common switch share only the root.  With ``core_groups`` (from hwloc
    XML) a "cache" level between core and socket is added, at ``cache_distance``;
    nodes without hwloc data then have one cache group per socket.
    """
    notes = []
    if tree is None or tree.empty:
        notes.append("no switch topology (topology plugin not configured or not readable): "
                     "node, socket and core levels only")
        tree = SwitchTree()
    paths = {n: tree.path(n) for n in alloc.nodes}
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
    slots: list[Slot] = []
    cache_of: list[int] = []
    with_cache = bool(core_groups)
    for node, ntasks in zip(alloc.nodes, alloc.tasks_per_node, strict=True):
        if ntasks == 0:
            continue
        shape = shapes if isinstance(shapes, NodeShape) else shapes.get(node)
        if shape is None:
            raise TopologyError(f"no sockets/cores known for node {node}")
        node_slots = _node_slots(node, shape, ntasks, alloc.cpus_per_task,
                                 alloc.cpu_ids.get(node))
        groups = (core_groups or {}).get(node)
        if groups is not None and len(groups.group) != shape.cores:
            raise TopologyError(f"node {node}: hwloc XML has {len(groups.group)} cores, "
                                f"Slurm says {shape.cores}")
        for slot in node_slots:
            core = slot.cpu_ids[0] // shape.threads_per_core
            cache_of.append(groups.group[core] if groups is not None else 0)
        slots.extend(node_slots)
    # Group slots into a nested tree: switch levels (top first), node, socket[, cache].
    order_keys = []
    for s, cache in zip(slots, cache_of, strict=True):
        key = tuple(reversed(padded[s.host])) + (s.host, s.socket)
        order_keys.append(key + (cache,) if with_cache else key)
    levels = depth + 2 + int(with_cache)  # switches + node + socket [+ cache]
    tree_nested: list = []
    index: dict[tuple, list] = {}
    for key in order_keys:
        container = tree_nested
        for i in range(levels):
            prefix = key[: i + 1]
            if prefix not in index:
                child: list = [] if i < levels - 1 else [0]
                container.append(child)
                index[prefix] = child
            container = index[prefix]
        container[0] += 1
    leaf_nested = _leaves_to_counts(tree_nested, levels)
    dist = level_distances(distances, depth)
    names = ["socket", "node"] + [f"switch level {i}" if i else "leaf switch"
                                  for i in range(depth)] + ["root"]
    if with_cache:
        inner = dist[0] / 2 if cache_distance is None else cache_distance
        if inner > dist[0]:
            raise TopologyError(f"cache distance {inner:g} is above the socket distance "
                                f"{dist[0]:g}")
        dist = [inner] + dist
        names = ["cache"] + names
    hierarchy = Hierarchy.from_tree(leaf_nested, dist, names)
    # slots must be in the tree's depth-first order (they are: grouped by key order)
    key_order = {k: i for i, k in enumerate(dict.fromkeys(order_keys))}
    ordered = sorted(range(len(slots)), key=lambda i: key_order[order_keys[i]])
    return Layout(hierarchy, tuple(slots[i] for i in ordered), tuple(notes))


def _leaves_to_counts(nested: list, levels: int) -> list:
    """Replace the [count] leaves by plain counts."""
    if levels == 1:
        return [c[0] for c in nested]
    return [_leaves_to_counts(c, levels - 1) for c in nested]

