"""Cluster topology as Slurm describes it: the switch tree and the node shapes.

Sources: the switch tree from topology.conf (``SwitchName=``, ``Switches=``,
``Nodes=``, ``LinkSpeed=``) or ``scontrol show topology``; node shapes (``Boards``,
``Sockets``, ``CoresPerSocket``, ``ThreadsPerCore``) from ``scontrol show node -o`` or
given by hand.  :func:`slurm_plugin.layout.build_layout` joins them with an allocation.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from mapper.errors import RankmapError

from .hostlist import HostlistError, expand_hostlist


class TopologyError(RankmapError, ValueError):
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
