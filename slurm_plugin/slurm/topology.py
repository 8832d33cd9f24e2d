"""Cluster topology as Slurm describes it: the switch tree and the node shapes.

Sources: the switch tree from topology.conf (``SwitchName=``, ``Switches=``,
``Nodes=``, ``LinkSpeed=``) or ``scontrol show topology``; node shapes (``Boards``,
``Sockets``, ``CoresPerSocket``, ``ThreadsPerCore``) from ``scontrol show node -o`` or
given by hand.  :func:`slurm_plugin.machine.layout.build_layout` joins them with an allocation.

``LinkSpeed`` (topology.conf(5): "an indication of the speed of the links to the switch",
arbitrary units, unused by Slurm itself) is kept per switch in
:attr:`SwitchTree.link_speeds`; :func:`switch_cost_factors` turns it into link costs.
Slurm 25.11 and later print ``LinkSpeed=0`` for a switch without one, so 0 means "not
given", like an absent key.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from mapper.errors import RankmapError

from ..common.hostlist import HostlistError, expand_hostlist


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
    """Switches by name: the nodes directly under each, the child switches, the parent,
    and the LinkSpeed of the switches that have one (> 0).

    Equality compares the wiring only: ``link_speeds`` annotate it (Slurm before 25.11
    prints ``LinkSpeed=1`` for every switch whose topology.conf line has none, so the
    same wiring read from topology.conf and from scontrol may differ in them).
    """

    nodes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    children: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    link_speeds: Mapping[str, float] = field(default_factory=dict, compare=False)

    @property
    def empty(self) -> bool:
        return not self.nodes and not self.children

    def parents(self) -> dict[str, str]:
        return {c: p for p, cs in self.children.items() for c in cs}

    def leaf_of(self) -> dict[str, str]:
        return {n: s for s, ns in self.nodes.items() for n in ns}

    def path(self, node: str) -> list[str]:
        """Switches from the node's leaf switch up to its top switch ([] if none)."""
        return self.paths([node])[node]

    def paths(self, nodes: Iterable[str]) -> dict[str, list[str]]:
        """:meth:`path` of every node in ``nodes``; the node → leaf and switch → parent
        tables are built once (O(switches + nodes · depth)), where one :meth:`path`
        call per node rebuilt them each time (O(nodes²) for a whole machine)."""
        leaf_of, parents = self.leaf_of(), self.parents()
        return {node: _path_up(leaf_of.get(node), parents) for node in nodes}

    def nodes_below(self) -> dict[str, int]:
        """Number of nodes under every switch (the whole tree, not a job's nodes);
        O(switches + nodes), a cycle is a TopologyError."""
        return self._fold_up(lambda s, kids: len(self.nodes.get(s, ())) + sum(kids))

    def switch_levels(self) -> dict[str, int]:
        """Level of every switch as Slurm counts it: 0 for a switch without child
        switches, else one more than its highest child (``scontrol show topology``'s
        ``Level=``).  O(switches) with memoisation; a cycle is a TopologyError."""
        return self._fold_up(lambda _s, kids: 1 + max(kids) if kids else 0)

    def _fold_up(self, value: Callable[[str, list[int]], int]) -> dict[str, int]:
        """``value(switch, its children's values)`` for every switch, children first,
        each once; a cycle is a TopologyError."""
        done: dict[str, int] = {}
        active: set[str] = set()

        def visit(s: str) -> int:
            if s in done:
                return done[s]
            if s in active:
                raise TopologyError(f"switch {s} is its own ancestor")
            active.add(s)
            done[s] = value(s, [visit(c) for c in self.children.get(s, ())])
            active.discard(s)
            return done[s]

        for s in set(self.nodes) | set(self.children):
            visit(s)
        return done


def _path_up(leaf: str | None, parents: Mapping[str, str]) -> list[str]:
    """Switches from ``leaf`` up through ``parents`` (a cycle stops at the repeat)."""
    out: list[str] = []
    seen = set()
    while leaf is not None and leaf not in seen:
        out.append(leaf)
        seen.add(leaf)
        leaf = parents.get(leaf)
    return out


def switch_cost_factors(tree: SwitchTree) -> dict[str, float]:
    """Relative cost of the links into each switch that has a LinkSpeed, from 1 up.

    Cost is proportional to 1 / LinkSpeed, normalised per switch level
    (:meth:`SwitchTree.switch_levels`, Slurm's ``Level=``): the fastest switch of a level
    gets factor 1 (the level's own link cost), a switch half as fast factor 2.  Switches
    without a LinkSpeed are absent (factor 1: the level's cost).  Multiply by the level's
    link cost to get a link cost (:func:`slurm_plugin.machine.speeds.layout_uplink_costs`).
    O(switches).
    """
    if not tree.link_speeds:
        return {}
    levels = tree.switch_levels()
    fastest: dict[int, float] = {}
    for s, speed in tree.link_speeds.items():
        lev = levels.get(s, 0)
        fastest[lev] = max(fastest.get(lev, 0.0), speed)
    return {s: fastest[levels.get(s, 0)] / speed for s, speed in tree.link_speeds.items()}


def _kv(line: str) -> dict[str, str]:
    return dict(re.findall(r"(\w+)=(\S+)", line))


def _link_speed(value: str, where: str) -> float | None:
    """LinkSpeed as a number; None for 0 (not given); TopologyError otherwise."""
    try:
        speed = float(value)
    except ValueError:
        speed = float("nan")
    if not (math.isfinite(speed) and speed >= 0):
        raise TopologyError(f"{where}: LinkSpeed must be a non-negative number, got {value!r}")
    return speed or None


def parse_topology_conf(text: str, path: str = "topology.conf") -> SwitchTree:
    """Parse a topology/tree topology.conf; errors name the file and line."""
    nodes: dict[str, tuple[str, ...]] = {}
    children: dict[str, tuple[str, ...]] = {}
    speeds: dict[str, float] = {}
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
        if "LinkSpeed" in kv:
            speed = _link_speed(kv["LinkSpeed"], f"{path}:{no}: switch {name}")
            if speed:
                speeds[name] = speed
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
    return SwitchTree(nodes, children, speeds)


def parse_scontrol_topology(text: str) -> SwitchTree:
    """Parse ``scontrol show topology`` (one ``SwitchName=… Level=…`` line per switch).

    Slurm lists, for upper switches, every node below them in ``Nodes=``; only
    leaf switches (``Level=0``) keep their node lists.  ``LinkSpeed=`` is kept (0: none).
    """
    nodes: dict[str, tuple[str, ...]] = {}
    children: dict[str, tuple[str, ...]] = {}
    speeds: dict[str, float] = {}
    for no, line in enumerate(text.splitlines(), 1):
        kv = _kv(line)
        if "SwitchName" not in kv:
            continue
        name = kv["SwitchName"]
        if "LinkSpeed" in kv:
            speed = _link_speed(kv["LinkSpeed"],
                                f"scontrol show topology line {no}: switch {name}")
            if speed:
                speeds[name] = speed
        if kv.get("Switches"):
            children[name] = tuple(expand_hostlist(kv["Switches"]))
        elif kv.get("Nodes") and kv.get("Level", "0") == "0":
            nodes[name] = tuple(expand_hostlist(kv["Nodes"]))
    return SwitchTree(nodes, children, speeds)


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


# -- node features (for [speeds] features) -------------------------------------------

_FEATURE_KEYS = ("ActiveFeatures", "AvailableFeatures", "Features")


def parse_scontrol_node_features(text: str) -> dict[str, tuple[str, ...]]:
    """Features of every node of ``scontrol show node -o`` (one ``NodeName=`` line each).

    ``ActiveFeatures`` when present (the features in force now, which is what decides a
    node's speed when a node-features plugin can change them), else
    ``AvailableFeatures``, else ``Features`` (older Slurm); ``(null)`` means none.
    O(text length).
    """
    out: dict[str, tuple[str, ...]] = {}
    for line in text.splitlines():
        kv = dict(re.findall(r"(\w+)=(\S*)", line))
        if "NodeName" not in kv:
            continue
        value = next((kv[k] for k in _FEATURE_KEYS if k in kv), "")
        out[kv["NodeName"]] = () if value in ("", "(null)") else tuple(
            f for f in value.split(",") if f)
    return out
