"""A SimGrid platform (XML, version 4.1) from a Slurm switch tree and a node list.

Model (SimGrid 3.32, https://simgrid.org/doc/latest/Platform_describing.html):

* every leaf switch is one ``<cluster>``: one host per job node (``core=`` the node's
  cores), a private full-duplex link per host (``bw``/``lat``: the host link), a
  non-blocking backbone (the switch's crossbar: the sum of its host links, zero
  latency) and a loopback link for ranks on the same node;
* every switch below the top has one uplink to its parent: a ``SPLITDUPLEX`` ``<link>``
  whose bandwidth is the sum of the host links of all nodes below it in the tree
  (the physical tree, not only the job's nodes) divided by the oversubscription
  factor (4:1 → 4), unless a bandwidth for its level is given;
* a top ``<zone routing="Full">`` holds the clusters, the uplinks and one
  ``<zoneRoute>`` per ordered pair of clusters: the uplinks from the source leaf up to
  the child of the lowest common switch (direction UP), then down to the
  destination leaf (direction DOWN);
* nodes outside the switch tree each get a one-host cluster with an uplink (its host
  link bandwidth) to the root; several top switches (a forest) are joined by a
  virtual root, each with an uplink like any other switch.

Per-node speeds (``speeds``, flop/s of one core): a ``<cluster>`` has one speed for all
its hosts, so it gets the fastest of its nodes' speeds and every slower host a SPEED
profile (``<trace>`` + ``<trace_connect kind="SPEED">``, SimGrid's availability
scaling, https://simgrid.org/doc/latest/Platform_describing.html) holding the constant
ratio of its speed to the cluster's.  One trace per host: SimGrid 3.32 keeps only the
first element a trace is connected to.  The network is unchanged.

SimGrid hosts are named generically, ``h0``, ``h1``, … consecutively over the clusters
(a cluster's router is ``h<cluster id>_router``), so any Slurm node name works;
:class:`Platform.host_of` translates.  Pure: no I/O.

Complexity: O(N · D) for N nodes and tree depth D, plus O(L² · D) for the routes of L
leaf clusters (SimGrid's Full routing stores every pair).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..common.hostlist import HostlistError, expand_hostlist
from ..slurm.topology import NodeShape, SwitchTree, TopologyError

#: Defaults, documented in ``rankmap simulate --help`` and the README: a 100 Gb/s
#: (12.5 GB/s) NIC with 1 µs latency, 0.5 µs per switch hop upwards, 4:1 uplinks.
HOST_BW = 12.5e9
HOST_LAT = 1e-6
UPLINK_LAT = 0.5e-6
LOOPBACK_BW = 40e9
LOOPBACK_LAT = 0.1e-6
HOST_SPEED = 10e9
OVERSUBSCRIPTION = 4.0

ROOT = "~root"  # the virtual switch above several top switches and outside nodes


@dataclass(frozen=True)
class NetworkParams:
    """Link parameters, in bytes/s and seconds.

    ``uplink_lat[i]`` / ``uplink_bw[i]`` are for uplinks of level i+1 (leaf switch →
    its parent is level 1); the last entry repeats for higher levels.  An empty or
    ``None`` ``uplink_bw`` entry means: derived from the host links below and
    ``oversubscription``.
    """

    host_bw: float = HOST_BW
    host_lat: float = HOST_LAT
    uplink_lat: tuple[float, ...] = (UPLINK_LAT,)
    uplink_bw: tuple[float | None, ...] = ()
    oversubscription: float = OVERSUBSCRIPTION
    loopback_bw: float = LOOPBACK_BW
    loopback_lat: float = LOOPBACK_LAT
    host_speed: float = HOST_SPEED

    def __post_init__(self) -> None:
        for name in ("host_bw", "loopback_bw", "host_speed", "oversubscription"):
            if not getattr(self, name) > 0:
                raise TopologyError(f"{name.replace('_', '-')} must be positive")
        for name in ("host_lat", "loopback_lat"):
            if getattr(self, name) < 0:
                raise TopologyError(f"{name.replace('_', '-')} must not be negative")
        if any(x < 0 for x in self.uplink_lat) or any(
                x is not None and not x > 0 for x in self.uplink_bw):
            raise TopologyError("uplink latencies must be >= 0 and bandwidths > 0")

    def level_lat(self, level: int) -> float:
        lat = self.uplink_lat or (UPLINK_LAT,)
        return lat[min(level, len(lat)) - 1]

    def level_bw(self, level: int) -> float | None:
        if not self.uplink_bw:
            return None
        return self.uplink_bw[min(level, len(self.uplink_bw)) - 1]


@dataclass(frozen=True)
class Platform:
    """The XML text and how to read it.

    ``host_of``: Slurm node → SimGrid host; ``cluster_of``: leaf switch (or the node
    itself, for nodes outside the tree) → cluster id; ``uplink_of``: switch → link id.
    """

    xml: str
    host_of: dict[str, str]
    cluster_of: dict[str, str] = field(default_factory=dict)
    uplink_of: dict[str, str] = field(default_factory=dict)

    def hostfile(self, nodes_per_rank: Sequence[str]) -> str:
        """smpirun hostfile: line r is the host of rank r."""
        return "".join(self.host_of[n] + "\n" for n in nodes_per_rank)


_BW = {"": 1.0, "bps": 1 / 8, "Bps": 1.0}
_PREFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
           "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
_LAT = {"": 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9, "ps": 1e-12}
_NUM = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z]*)\s*$")


def parse_bandwidth(text: str, what: str = "bandwidth") -> float:
    """``12.5GBps``, ``100Gbps``, ``1e9`` (bytes/s) → bytes/s (SimGrid's units)."""
    m = _NUM.match(text)
    if m:
        unit = m.group(2)
        for suffix in ("Bps", "bps", ""):
            if unit.endswith(suffix) and unit[:len(unit) - len(suffix)] in _PREFIX:
                if suffix or not unit:
                    return float(m.group(1)) * _PREFIX[unit[:len(unit) - len(suffix)]] \
                        * _BW[suffix]
    raise TopologyError(f"{what}: {text!r} is not a bandwidth (e.g. 12.5GBps, 100Gbps)")


def parse_latency(text: str, what: str = "latency") -> float:
    """``1us``, ``500ns``, ``2e-6`` (seconds) → seconds."""
    m = _NUM.match(text)
    if m and m.group(2) in _LAT:
        return float(m.group(1)) * _LAT[m.group(2)]
    raise TopologyError(f"{what}: {text!r} is not a latency (e.g. 1us, 500ns)")


def _bw(x: float) -> str:
    return f"{x:.12g}Bps"


def _lat(x: float) -> str:
    return f"{x:.12g}s"


def _parents(tree: SwitchTree, leaves: Sequence[str], outside: Sequence[str]
             ) -> dict[str, str]:
    """Parent of every switch on a path from a used leaf, plus the virtual root."""
    parents = tree.parents()
    tops = []
    for leaf in leaves:
        s = leaf
        seen = {s}
        while s in parents:
            s = parents[s]
            if s in seen:
                raise TopologyError(f"switch tree has a cycle through {s}")
            seen.add(s)
        if s not in tops:
            tops.append(s)
    out = dict(parents)
    if len(tops) + len(outside) > 1:
        out.update({t: ROOT for t in tops})
        out.update({f"~{n}": ROOT for n in outside})
    return out


def _chain(start: str, parents: Mapping[str, str]) -> list[str]:
    """``start`` and its ancestors, bottom up."""
    out = [start]
    while out[-1] in parents:
        out.append(parents[out[-1]])
    return out


_TOP_COMMA = re.compile(r",(?![^\[]*\])")  # a comma outside host-list brackets


def parse_speed(text: str, what: str = "speed") -> float:
    """``2Gf``, ``500Mf``, ``1e9`` (flop/s) → flop/s."""
    try:
        value = parse_bandwidth(text.strip().removesuffix("f").removesuffix("F") + "Bps",
                                what)
    except TopologyError:
        raise TopologyError(f"{what}: {text!r} is not a speed (e.g. 2Gf, 1.5e9)") from None
    if not value > 0:
        raise TopologyError(f"{what}: speed {text!r} must be positive")
    return value


def parse_host_speeds(text: str, source: str = "--host-speeds") -> dict[str, float]:
    """Per-node core speeds from ``HOSTLIST=SPEED`` entries → {node: flop/s}.

    Entries are separated by commas outside brackets or by new lines; ``#`` starts a
    comment; ``HOSTLIST SPEED`` (blank instead of ``=``) is accepted on a line of its
    own.  A node named twice keeps the last speed.  Errors name ``source``, and the line
    when ``text`` has several (a file's).
    O(entries + nodes).
    """
    out: dict[str, float] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{source}:{lineno}" if "\n" in text else source  # a file: say the line
        entries = [e.strip() for e in _TOP_COMMA.split(line) if e.strip()]
        if "=" not in line and len(line.split()) == 2:
            entries = ["=".join(line.split())]
        for entry in entries:
            hosts, eq, speed = entry.partition("=")
            if not eq or not hosts.strip() or not speed.strip():
                raise TopologyError(f"{where}: {entry!r} is not HOSTLIST=SPEED")
            try:
                names = expand_hostlist(hosts)
            except HostlistError as exc:
                raise TopologyError(f"{where}: {exc}") from None
            value = parse_speed(speed, f"{where}: speed of {hosts.strip()}")
            out.update(dict.fromkeys(names, value))
    return out


def build_platform(tree: SwitchTree | None, nodes: Sequence[str],
                   shapes: Mapping[str, NodeShape] | NodeShape,
                   net: NetworkParams | None = None,
                   speeds: Mapping[str, float] | None = None) -> Platform:
    """The platform of the job's ``nodes`` (see the module docstring for the model).

    ``speeds``: flop/s of one core per node (nodes not named run at ``net.host_speed``;
    names that are not job nodes are ignored, so a whole cluster's file works)."""
    net = net or NetworkParams()
    speeds = speeds or {}
    if any(not v > 0 for v in speeds.values()):
        raise TopologyError("host speeds must be positive")
    tree = tree or SwitchTree()
    if len(set(nodes)) != len(nodes):
        raise TopologyError("node list names a node twice")
    if not nodes:
        raise TopologyError("empty node list")
    leaf_of = tree.leaf_of()
    # clusters in order of the job's first node in each; nodes keep node-list order
    members: dict[str, list[str]] = {}
    outside = []
    for n in nodes:
        leaf = leaf_of.get(n)
        if leaf is None:
            outside.append(n)
            leaf = f"~{n}"
        members.setdefault(leaf, []).append(n)
    parents = _parents(tree, [s for s in members if not s.startswith("~")], outside)
    below = tree.nodes_below()
    below.update({f"~{n}": 1 for n in outside})

    root = ET.Element("platform", version="4.1")
    world = ET.SubElement(root, "zone", id="world", routing="Full")
    host_of: dict[str, str] = {}
    cluster_of: dict[str, str] = {}
    scale: dict[str, float] = {}  # SimGrid host -> its speed / its cluster's
    first = 0
    for i, (leaf, ns) in enumerate(members.items()):
        cid = f"c{i}"
        cores = max((shapes if isinstance(shapes, NodeShape) else _shape(shapes, n)).cores
                    for n in ns)
        node_speed = [speeds.get(n, net.host_speed) for n in ns]
        top = max(node_speed)
        scale.update({f"h{first + k}": v / top for k, v in enumerate(node_speed)
                      if v != top})
        ET.SubElement(world, "cluster", id=cid, prefix="h", suffix="",
                      radical=f"{first}-{first + len(ns) - 1}", speed=f"{top:.12g}f",
                      core=str(cores), bw=_bw(net.host_bw), lat=_lat(net.host_lat),
                      sharing_policy="SPLITDUPLEX",
                      bb_bw=_bw(net.host_bw * len(ns)), bb_lat=_lat(0.0),
                      loopback_bw=_bw(net.loopback_bw), loopback_lat=_lat(net.loopback_lat))
        host_of.update({n: f"h{first + k}" for k, n in enumerate(ns)})
        cluster_of[leaf.removeprefix("~") if leaf.startswith("~") else leaf] = cid
        first += len(ns)
    chains = {leaf: _chain(leaf, parents) for leaf in members}
    used = list(dict.fromkeys(s for c in chains.values() for s in c if s in parents))
    uplink_of = {s: f"up{k}" for k, s in enumerate(used)}
    for s in used:
        level = _level(s, tree, parents)
        bw = net.level_bw(level)
        if bw is None:
            bw = below.get(s, 0) * net.host_bw / (1.0 if s.startswith("~") else
                                                   net.oversubscription)
        if not bw > 0:
            raise TopologyError(f"switch {s} has no nodes below it")
        ET.SubElement(world, "link", id=uplink_of[s], bandwidth=_bw(bw),
                      latency=_lat(net.level_lat(level)), sharing_policy="SPLITDUPLEX")
    cids = list(members)
    for a in cids:
        for b in cids:
            if a == b:
                continue
            up, down = _route(chains[a], chains[b])
            ca, cb = _cid(a, cluster_of), _cid(b, cluster_of)
            route = ET.SubElement(world, "zoneRoute", src=ca, dst=cb,
                                  gw_src=f"h{ca}_router", gw_dst=f"h{cb}_router",
                                  symmetrical="NO")
            for s in up:
                ET.SubElement(route, "link_ctn", id=uplink_of[s], direction="UP")
            for s in down:
                ET.SubElement(route, "link_ctn", id=uplink_of[s], direction="DOWN")
    for host, ratio in scale.items():
        trace = ET.SubElement(root, "trace", id=f"speed_{host}", periodicity="-1")
        trace.text = f"0 {ratio:.12g}\n"
        ET.SubElement(root, "trace_connect", kind="SPEED", trace=f"speed_{host}",
                      element=host)
    ET.indent(root)
    text = ("<?xml version='1.0'?>\n"
            '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">\n'
            + ET.tostring(root, encoding="unicode") + "\n")
    return Platform(text, host_of, cluster_of, uplink_of)


def _cid(leaf: str, cluster_of: Mapping[str, str]) -> str:
    return cluster_of[leaf.removeprefix("~") if leaf.startswith("~") else leaf]


def _route(a: list[str], b: list[str]) -> tuple[list[str], list[str]]:
    """Uplinks from leaf chain ``a`` up to below the lowest common switch, and those of
    ``b`` from there down (top first)."""
    common = set(a) & set(b)
    if not common:
        raise TopologyError(f"switches {a[0]} and {b[0]} have no common ancestor")
    up = a[:next(i for i, s in enumerate(a) if s in common)]
    down = b[:next(i for i, s in enumerate(b) if s in common)]
    return up, down[::-1]


def _level(s: str, tree: SwitchTree, parents: Mapping[str, str]) -> int:
    """1 + the height of ``s`` above the leaf switches (a leaf's uplink is level 1)."""
    if s.startswith("~") or s in tree.nodes and not tree.children.get(s):
        return 1
    kids = tree.children.get(s, ())
    return 1 + max((_level(k, tree, parents) for k in kids), default=0)


def _shape(shapes: Mapping[str, NodeShape], node: str) -> NodeShape:
    try:
        return shapes[node]
    except KeyError:
        raise TopologyError(f"no sockets/cores known for node {node}") from None
