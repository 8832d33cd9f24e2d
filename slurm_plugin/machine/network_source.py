"""The site's non-tree network (``[network]``) as a hop matrix over named nodes.

Two sources, both ending in one :class:`HopNetwork` (node names in slot order and the
slots × slots hop matrix):

* a **hop file** (``kind = "file"``): a node-level hop or cost matrix in text.  Blank
  lines and ``#`` comments are skipped.  The first line names the nodes in matrix order,
  separated by blanks; each item may be a Slurm host list (``n[0-63]``, or
  ``n0 n1 n2 n3``).  Then one row per node, in the same order: N non-negative numbers
  (integers for hop counts; any non-negative number for costs), symmetric with a zero
  diagonal.  Every problem is reported as ``FILE:LINE: …``.
* a **generator** (``mesh``, ``torus``, ``tianhe3``, ``dragonfly`` of
  :mod:`mapper.model.networks`) whose slots are given node names by the ``nodes`` host list
  of the table or by a ``node_order`` file (one node name, or host list, per line; the
  i-th name is slot i).

:func:`hop_machine` turns it into the mapper's :class:`~mapper.model.networks.NodeHopMachine`
for one job: the job's nodes' rows of the hop matrix (O(nodes²), never O(ranks²)) and
each node's own socket/core levels taken from the job's :class:`Layout`, so PE i of
the machine is ``layout.slots[i]`` as with the switch tree.  A node of the job the
network does not name is a :class:`NetworkError` (the job falls back to Slurm's
placement).  :func:`load_network` is the one function here that reads files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mapper import Hierarchy
from mapper.errors import RankmapError
from mapper.io.text_lines import content_lines
from mapper.model.machine import MachineError
from mapper.model.networks import (
    NodeHopMachine,
    dragonfly_hops,
    mesh_hops,
    restrict_hops,
    tianhe3_hops,
    torus_hops,
)
from mapper.objectives.link_load import (
    RoutedNetwork,
    dragonfly_network,
    mesh_network,
    tianhe3_network,
    torus_network,
)

from ..common.hostlist import HostlistError, expand_hostlist, fold_hostlist
from ..site.config import NetworkConfig
from .layout import Layout


class NetworkError(RankmapError, ValueError):
    """A hop file, node order or job the configured network cannot serve; names the
    file and line (or the config key)."""


@dataclass(frozen=True, eq=False)
class HopNetwork:
    """Hop counts (or costs) between named nodes.

    ``hops`` is slots × slots; ``names[i]`` is the node at slot i (a generator may have
    more slots than named nodes).  ``per_hop`` and ``base`` give the cost between PEs of
    two nodes: ``base + per_hop * hops``.  ``where`` says what names the nodes, for
    messages.
    """

    names: tuple[str, ...]
    hops: np.ndarray
    per_hop: float
    base: float
    description: str
    where: str
    #: the generator and its parameters ([network] kind and keys); "file" for a hop file
    kind: str = "file"
    params: tuple[tuple[str, object], ...] = ()

    def job_hops(self, nodes: Sequence[str]) -> np.ndarray:
        """The hop matrix of ``nodes`` (in that order); NetworkError naming the nodes the
        network does not know.  O(len(nodes)²)."""
        index = {name: i for i, name in enumerate(self.names)}
        missing = [n for n in nodes if n not in index]
        if missing:
            raise NetworkError(
                f"node(s) {fold_hostlist(missing)} of the job are not in the [network] "
                f"topology ({self.description}; {self.where} names "
                f"{fold_hostlist(list(self.names))}): the job keeps Slurm's placement")
        return restrict_hops(self.hops, [index[n] for n in nodes])


# -- reading -------------------------------------------------------------------------

def _names(items: Sequence[str], where: str) -> list[str]:
    names: list[str] = []
    for item in items:
        try:
            names.extend(expand_hostlist(item))
        except HostlistError as exc:
            raise NetworkError(f"{where}: {exc}") from None
    return names


def _no_duplicates(names: Sequence[str], lines: Sequence[int], path: str) -> None:
    first: dict[str, int] = {}
    for name, no in zip(names, lines, strict=True):
        if name in first:
            raise NetworkError(f"{path}:{no}: node {name} is listed twice (first on line "
                               f"{first[name]})")
        first[name] = no


def parse_hop_file(text: str, path: str) -> tuple[tuple[str, ...], np.ndarray]:
    """Node names and the hop matrix of a hop file's text (format: module docstring).

    Errors name ``path`` and the line: no header, a bad host list, a duplicate node, a
    row that is not numbers or has the wrong length, a negative or non-finite entry, a
    non-zero diagonal, too few or too many rows, an asymmetric pair.  O(N²).
    """
    lines = content_lines(text)
    if not lines:
        raise NetworkError(f"{path}:1: empty hop file: the first line must name the nodes")
    head_no, head = lines[0]
    names = _names(head.split(), f"{path}:{head_no}")
    _no_duplicates(names, [head_no] * len(names), path)
    n = len(names)
    rows = lines[1:]
    if len(rows) != n:
        no = rows[n][0] if len(rows) > n else (rows[-1][0] if rows else head_no)
        raise NetworkError(f"{path}:{no}: {len(rows)} matrix rows for the {n} nodes named on "
                           f"line {head_no}; the matrix must be {n} x {n}")
    hops = np.empty((n, n), dtype=np.float64)
    row_line = np.empty(n, dtype=np.int64)
    for i, (no, body) in enumerate(rows):
        fields = body.split()
        if len(fields) != n:
            raise NetworkError(f"{path}:{no}: {len(fields)} entries, expected {n} (one per "
                               f"node named on line {head_no})")
        try:
            hops[i] = np.array(fields, dtype=np.float64)
        except ValueError:
            raise NetworkError(f"{path}:{no}: expected numbers") from None
        row_line[i] = no
    bad = ~np.isfinite(hops) | (hops < 0)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise NetworkError(f"{path}:{row_line[i]}: entry {j + 1} ({names[j]}) is "
                           f"{hops[i, j]:g}; hops must be finite and non-negative")
    diag = np.flatnonzero(np.diag(hops) != 0)
    if len(diag):
        i = diag[0]
        raise NetworkError(f"{path}:{row_line[i]}: {names[i]} to itself is {hops[i, i]:g}; "
                           f"the diagonal must be 0")
    asym = np.argwhere(hops != hops.T)
    if len(asym):
        i, j = asym[0]
        raise NetworkError(f"{path}:{row_line[i]}: {names[i]} to {names[j]} is "
                           f"{hops[i, j]:g} but line {row_line[j]} has {names[j]} to "
                           f"{names[i]} = {hops[j, i]:g}; the matrix must be symmetric")
    return tuple(names), hops


def parse_node_order(text: str, path: str, slots: int) -> tuple[str, ...]:
    """Node names in slot order from a node-order file (one name or host list per line).

    Errors name ``path`` and the line: a bad host list, a duplicate node, more nodes
    than the ``slots`` of the generated network.
    """
    names: list[str] = []
    lines: list[int] = []
    for no, body in content_lines(text):
        got = _names(body.split(), f"{path}:{no}")
        names.extend(got)
        lines.extend([no] * len(got))
        if len(names) > slots:
            raise NetworkError(f"{path}:{no}: {len(names)} nodes but the network has only "
                               f"{slots} slots")
    if not names:
        raise NetworkError(f"{path}:1: names no node (one node name per line, line i = "
                           f"slot i)")
    _no_duplicates(names, lines, path)
    return tuple(names)


# -- building ------------------------------------------------------------------------

def generate_hops(net: NetworkConfig) -> np.ndarray:
    """The generator's hop matrix over all its slots (:mod:`mapper.model.networks`)."""
    p = net.params
    try:
        if net.kind == "mesh":
            return mesh_hops(p["dims"])
        if net.kind == "torus":
            return torus_hops(p["dims"])
        if net.kind == "tianhe3":
            extra = {"hops": p["chip_hops"]} if "chip_hops" in p else {}
            return tianhe3_hops(p["rows"], p["cols"], p["nodes_per_chip"], **extra)
        if net.kind == "dragonfly":
            return dragonfly_hops(p["groups"], p["routers"], p["nodes_per_router"])
    except MachineError as exc:  # the config checks should have caught it
        raise NetworkError(f"{net.path}: [network] {net.kind}: {exc}") from None
    raise NetworkError(f"{net.path}: [network] kind: {net.kind!r} is not a generator")


def load_network(net: NetworkConfig | None) -> HopNetwork | None:
    """The configured network (a config's ``network``) with its files read; None without
    ``[network]``.

    Reads the hop file or the node-order file (the I/O edge of this module); errors
    name the file and line, or the config file and key.
    """
    if net is None:
        return None
    if net.kind == "file":
        names, hops = parse_hop_file(_read(net.hop_file, net, "hop_file"), net.hop_file)
        return HopNetwork(names, hops, net.per_hop, net.base, net.describe(),
                          f"line 1 of {net.hop_file}")
    slots = net.slots
    assert slots is not None
    if net.node_order:
        names = parse_node_order(_read(net.node_order, net, "node_order"), net.node_order,
                                 slots)
        where = f"node_order {net.node_order}"
    else:
        names = net.nodes
        where = f"[network] nodes in {net.path}"
    return HopNetwork(names, generate_hops(net), net.per_hop, net.base, net.describe(),
                      where, net.kind, tuple(sorted(net.params.items())))


def _read(path: str, net: NetworkConfig, key: str) -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError as exc:
        raise NetworkError(f"{path}: cannot read ([network] {key} in {net.path}): "
                           f"{exc.strerror or exc}") from None


def node_hierarchies(layout: Layout) -> list[Hierarchy]:
    """Each node's own levels (cache, socket, … up to the node), in PE order.

    Cut from the layout's hierarchy at its ``node`` level, so node i's PEs are the i-th
    contiguous block of PEs and keep their order.  O(levels · groups).
    """
    h = layout.hierarchy
    top = h.level_names.index("node")
    node_bounds = h.bounds[top]
    out = []
    for lo, hi in zip(node_bounds[:-1].tolist(), node_bounds[1:].tolist(), strict=True):
        bounds = [b[(b >= lo) & (b <= hi)] - lo for b in h.bounds[:top]]
        bounds.append(np.array([0, hi - lo], dtype=np.int64))
        out.append(Hierarchy(tuple(bounds), h.distances[:top + 1], h.level_names[:top + 1]))
    return out


def hop_machine(layout: Layout, network: HopNetwork) -> NodeHopMachine:
    """The job's machine on the network: its nodes' hop matrix (in PE order) and each
    node's socket/core levels from the layout; NetworkError for a node the network does
    not name."""
    hosts = layout.hosts()
    return NodeHopMachine(network.job_hops(hosts), node_hierarchies(layout),
                          per_hop=network.per_hop, base=network.base)


def routed_network(layout: Layout, network: HopNetwork,
                   machine: NodeHopMachine) -> RoutedNetwork | None:
    """The links and routes of the job's nodes on ``network`` (:mod:`mapper.objectives.link_load`),
    for the never-worse rule's link check: dimension-order routing on a torus or mesh,
    minimal routing on a dragonfly, dimension-order (along the row, then the column) on
    Tianhe-3's grid of chips with fully connected rows and columns (its links do not
    depend on ``chip_hops``, which change J only); None for a hop file, whose matrix of
    distances names no links (J is then the only check, and the report says so).
    Every link of a level is taken to have the same capacity.  O(N² · h) for N job
    nodes."""
    p = dict(network.params)
    index = {name: i for i, name in enumerate(network.names)}
    slots = [index[h] for h in dict.fromkeys(layout.hosts())]
    sizes = machine.node_sizes
    if network.kind in ("torus", "mesh"):
        build = torus_network if network.kind == "torus" else mesh_network
        return build(p["dims"], slots=slots, node_sizes=sizes)
    if network.kind == "dragonfly":
        return dragonfly_network(p["groups"], p["routers"], p["nodes_per_router"],
                                 slots=slots, node_sizes=sizes)
    if network.kind == "tianhe3":
        return tianhe3_network(p["rows"], p["cols"], p["nodes_per_chip"], slots=slots,
                               node_sizes=sizes)
    return None

