"""Speeds of a job's machine: node compute speeds and switch link costs.

Feeds :func:`mapper.mesh.architecture.architecture_from_hierarchy` (Moulitsas & Karypis,
ICA3PP 2008, LNCS 5022, pp. 42–53, doi:10.1007/978-3-540-69501-1_6, §2.2: ``w*`` per PE,
``e*`` per link) from what a site has:

* **Node speeds** from the site config's ``[speeds]`` (keys checked by
  :mod:`slurm_plugin.site.config`): ``nodes`` maps host lists to relative speeds,
  ``features`` maps Slurm node features to relative speeds.  A node listed nowhere has
  speed 1.0; a node matched by two keys is an error naming both.  Features come from
  ``scontrol show node -o``
  (:func:`~slurm_plugin.slurm.topology.parse_scontrol_node_features`: ``ActiveFeatures``,
  else ``AvailableFeatures``, else the older ``Features``).  Every PE of a node gets the
  node's speed (:func:`layout_pe_speeds`).
* **PE speeds from a file** (``--speeds FILE`` of the CLI, :func:`parse_pe_speeds`)::

      # PES SPEED  — '#' comments, blank lines skipped
      0-15 2.0
      16,18,20-23 0.5

  PES is a PE index, a range ``a-b`` or a comma list of both (0-based, the PE order of
  the machine); SPEED a positive number.  Unlisted PEs have speed 1.0; a PE listed on two
  lines is an error naming both lines.
* **Link costs per switch** from topology.conf's ``LinkSpeed``
  (:func:`slurm_plugin.slurm.topology.switch_cost_factors`) placed on the groups of a
  :class:`~slurm_plugin.machine.layout.Layout` (:func:`layout_uplink_costs`), and the
  same factors as the never-worse rule's link weights (:func:`layout_link_weights`).

Pure functions: text in, values out; the callers read files and run Slurm commands.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from mapper.errors import RankmapError
from mapper.io.text_lines import content_lines

from ..common.hostlist import HostlistError, expand_hostlist
from ..slurm.topology import SwitchTree, switch_cost_factors
from .layout import Layout

if TYPE_CHECKING:
    from ..site.config import SpeedsSettings


class SpeedsError(RankmapError, ValueError):
    """Speeds that cannot be used; the message names the file and line, or the key."""


# -- node features and the [speeds] table --------------------------------------------------

def node_speeds(nodes: Sequence[str], by_nodes: Mapping[str, float],
                by_features: Mapping[str, float],
                features: Mapping[str, Sequence[str]] | None = None,
                where: str = "[speeds]") -> dict[str, float]:
    """Relative speed of each of ``nodes`` from the ``[speeds]`` tables.

    ``by_nodes``: host list → speed; ``by_features``: feature → speed; ``features``:
    each node's Slurm features (required when ``by_features`` is not empty).  A node no
    key matches has speed 1.0; a node two keys match is a :class:`SpeedsError` naming
    both, prefixed with ``where`` (e.g. ``"/etc/rankmap/rankmap.toml: [speeds]"``).
    O(nodes + expanded host lists).
    """
    if by_features and features is None:
        raise SpeedsError(f"{where} features: the nodes' Slurm features are needed "
                          f"(scontrol show node)")
    wanted = set(nodes)
    match: dict[str, tuple[str, float]] = {}

    def claim(node: str, key: str, speed: float) -> None:
        if node in match and match[node][0] != key:
            raise SpeedsError(f"{where}: {match[node][0]} and {key} both match node {node}")
        match[node] = (key, speed)

    for hosts, speed in by_nodes.items():
        try:
            names = expand_hostlist(hosts)
        except HostlistError as exc:
            raise SpeedsError(f"{where} nodes: {hosts!r}: {exc}") from None
        for node in names:
            if node in wanted:
                claim(node, f"nodes {hosts!r}", float(speed))
    for node in nodes:
        for feature in (features or {}).get(node, ()):
            if feature in by_features:
                claim(node, f"features {feature!r}", float(by_features[feature]))
    return {node: match[node][1] if node in match else 1.0 for node in nodes}


def config_node_speeds(speeds: SpeedsSettings, path: str | None, nodes: Sequence[str],
                       features: Mapping[str, Sequence[str]] | None = None
                       ) -> dict[str, float]:
    """:func:`node_speeds` with a config's ``[speeds]`` (read from ``path``); errors name
    the config file."""
    where = f"{path or 'built-in defaults'}: [speeds]"
    return node_speeds(nodes, speeds.nodes, speeds.features, features, where)


def layout_pe_speeds(layout: Layout, speeds: Mapping[str, float]) -> np.ndarray:
    """Speed of every PE of ``layout`` (its node's speed; 1.0 for a node not in
    ``speeds``), float64 in PE order.  O(P) in numpy, O(nodes) in Python."""
    h = layout.hierarchy
    bounds = h.bounds[h.level_names.index("node")]
    per_node = np.array([float(speeds.get(layout.slots[int(b)].host, 1.0))
                         for b in bounds[:-1]])
    return np.repeat(per_node, np.diff(bounds))


# -- the --speeds FILE format ----------------------------------------------------------------

def _fail(source: str, no: int, msg: str) -> SpeedsError:
    return SpeedsError(f"{source}:{no}: {msg}", source=source, line=no)


def _pe_ranges(token: str) -> np.ndarray:
    """``0-3,8`` → [0 1 2 3 8]; ValueError when malformed."""
    parts = []
    for item in token.split(","):
        lo, sep, hi = item.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise ValueError(item)
        a, b = int(lo), int(hi) if sep else int(lo)
        if b < a:
            raise ValueError(item)
        parts.append(np.arange(a, b + 1, dtype=np.int64))
    return np.concatenate(parts)


def parse_pe_speeds(text: str, source: str, n: int) -> np.ndarray:
    """Speed of each of ``n`` PEs from the ``--speeds`` file format (module docstring).

    Lines ``PES SPEED``; unlisted PEs 1.0.  Errors name ``source:line``: a malformed
    line, a PE outside 0..n-1, a speed that is not a positive finite number, a PE given
    on two lines (both line numbers).  O(n + text length).
    """
    speeds = np.ones(n, dtype=np.float64)
    first_line = np.zeros(n, dtype=np.int64)  # 0: not given yet
    for no, body in content_lines(text):
        fields = body.split()
        if len(fields) != 2:
            raise _fail(source, no, f"expected 'PES SPEED' (e.g. '0-15 2.0'), got {body!r}")
        try:
            pes = _pe_ranges(fields[0])
        except ValueError as exc:
            raise _fail(source, no, f"bad PE list {fields[0]!r} (at {str(exc)!r}): expected "
                                    f"indices and ranges a-b separated by commas") from None
        try:
            speed = float(fields[1])
        except ValueError:
            speed = float("nan")
        if not (np.isfinite(speed) and speed > 0):
            raise _fail(source, no, f"speed must be a positive number, got {fields[1]!r}")
        if pes.max() >= n:
            raise _fail(source, no, f"PE {int(pes.max())} is out of range: the machine has "
                                    f"{n} PEs (0..{n - 1})")
        taken = first_line[pes] != 0
        if taken.any():
            pe = int(pes[taken][0])
            raise _fail(source, no, f"PE {pe} already has a speed (line "
                                    f"{int(first_line[pe])})")
        dup = np.unique(pes, return_counts=True)
        if np.any(dup[1] > 1):
            raise _fail(source, no, f"PE {int(dup[0][dup[1] > 1][0])} is listed twice")
        first_line[pes] = no
        speeds[pes] = speed
    return speeds


# -- switch link costs on a Layout --------------------------------------------------------------

class _GroupSwitches:
    """Which switch each group of a layout stands for, with build_layout's own rule
    (path index ``min(j, len - 1)``, the job's single top switch as root); a node
    outside the tree is its own switch ``~node``.  One switch-path walk per host."""

    def __init__(self, layout: Layout, tree: SwitchTree | None):
        self.layout = layout
        h = layout.hierarchy
        self.levels = h.levels
        self.node_level = h.level_names.index("node")
        tree = tree or SwitchTree()
        # every host's switch path at once: one tree.path call per host rebuilds the
        # tree's tables each time, O(hosts²)
        self.paths = {host: p or [f"~{host}"]
                      for host, p in tree.paths(layout.hosts()).items()}
        tops = {p[-1] for p in self.paths.values()}
        self.root = next(iter(tops)) if len(tops) == 1 else None

    def switch(self, host: str, level: int) -> str | None:
        """The switch a level-``level`` group stands for (None: the root above all)."""
        if level == self.node_level:
            return f"node:{host}"
        if level == self.levels - 1:
            return self.root
        p = self.paths[host]
        return p[min(level - self.node_level - 1, len(p) - 1)]

    def groups(self, level: int) -> Iterator[tuple[int, str, str | None, str | None]]:
        """(group, the host of its first PE, the switch it stands for, its parent's) for
        every group of ``level``; the two switches are equal on a padding level, where
        the group has no link of its own."""
        firsts = self.layout.hierarchy.bounds[level][:-1]
        for g, pe in enumerate(firsts.tolist()):
            host = self.layout.slots[pe].host
            yield g, host, self.switch(host, level), self.switch(host, level + 1)

    def entered_level(self, host: str, level: int, label: str | None) -> int:
        """The level whose cost a link into switch ``label`` has: the highest level the
        switch stands for — the root for the job's top switch, the top switch level for
        the top of a shorter path (padded upwards), else where it is."""
        if label is not None and label == self.root:
            return self.levels - 1
        if label == self.paths[host][-1]:
            return self.levels - 2
        return level


def layout_uplink_costs(layout: Layout, tree: SwitchTree | None,
                        link_costs: Sequence[float]) -> list[np.ndarray | None]:
    """Per-group uplink costs of ``layout`` for ``architecture_from_hierarchy``.

    Entry i (one per hierarchy level) is None inside a node; from the node level up to
    the level below the root it holds, for each level-i group g, the cost of the link by
    which g reaches its parent: ``link_costs[L] x factor(s)`` for the switch s entered,
    with the factor from LinkSpeed (:func:`slurm_plugin.slurm.topology.switch_cost_factors`; 1
    without one) and L the level s stands for (i + 1; the root level for the job's
    single top switch and the top switch level for the top of a shorter path, which
    :func:`slurm_plugin.machine.layout.build_layout` pads upwards, so that every link into one
    switch costs the same); 0 when the parent is the same switch as g — a padding level,
    where no link exists.  The switch of a group is read off the first PE's host
    (:class:`_GroupSwitches`); a node outside the tree (``~node``) and a root above
    several top switches count as unknown switches (factor 1).

    O(groups x levels) dictionary work plus one switch-path walk per node.
    """
    h = layout.hierarchy
    k = h.levels
    costs = np.asarray(link_costs, dtype=np.float64)
    if costs.shape != (k,):
        raise SpeedsError(f"link costs: the layout has {k} levels, got {costs.size}")
    factors = switch_cost_factors(tree or SwitchTree())
    sw = _GroupSwitches(layout, tree)
    out: list[np.ndarray | None] = [None] * k
    for i in range(sw.node_level, k - 1):
        level_costs = np.empty(len(h.bounds[i]) - 1)
        for g, host, own, parent in sw.groups(i):
            if own == parent:  # a padding level: no link
                level_costs[g] = 0.0
            else:
                level_costs[g] = (costs[sw.entered_level(host, i + 1, parent)]
                                  * factors.get(parent or "", 1.0))
        out[i] = level_costs
    return out


def layout_uplink_capacities(layout: Layout, tree: SwitchTree | None,
                             oversubscription: Sequence[float]
                             ) -> list[np.ndarray | None]:
    """Each group's uplink capacity, in host links, comparable across levels
    (:data:`mapper.objectives.congestion.LinkCapacities`): 1 for a node's link; for a switch's
    uplink the number of nodes below the switch in the whole tree over the switch
    level's ``oversubscription`` (leaf switches first, the last value for the levels
    above; Slurm's topology.conf gives no bandwidths, so a site states it), as a fat
    tree tapered at every level is built and as ``rankmap simulate`` builds its
    platform; ``inf`` where a group has no link of its own (a padding level, or a
    switch with no node below it); a node outside the tree is its own switch of one
    node, not oversubscribed.  None inside a node and at the root.

    O(groups x levels) plus one switch-path walk per node.
    """
    if not oversubscription or min(oversubscription) <= 0:
        raise SpeedsError(f"oversubscription must be positive numbers, got "
                          f"{list(oversubscription)}")
    h = layout.hierarchy
    k = h.levels
    sw = _GroupSwitches(layout, tree)
    below = (tree or SwitchTree()).nodes_below()
    out: list[np.ndarray | None] = [None] * k
    for i in range(sw.node_level, k - 1):
        caps = np.empty(len(h.bounds[i]) - 1)
        for g, _host, own, parent in sw.groups(i):
            if own == parent or own is None:  # a padding level: no link
                caps[g] = np.inf
            elif i == sw.node_level:
                caps[g] = 1.0
            elif own.startswith("~"):
                caps[g] = 1.0
            else:
                switch_level = min(i - sw.node_level - 1, len(oversubscription) - 1)
                nodes = below.get(own, 0)
                caps[g] = nodes / oversubscription[switch_level] if nodes else np.inf
        out[i] = caps
    return out


def layout_link_weights(layout: Layout, tree: SwitchTree | None
                        ) -> list[np.ndarray | None] | None:
    """The never-worse rule's link weights (:data:`mapper.objectives.congestion.LinkWeights`) from
    the switches' LinkSpeed: per level of ``layout``, each group's uplink cost relative
    to the fastest switch of its level (:func:`layout_uplink_costs` with unit link
    costs: the factor of the switch entered, 0 on a padding level), so that the rule
    compares cut × weight, load over capacity (Hoefler & Snir, ICS 2011,
    doi:10.1145/1995896.1995909).

    None when no switch on the job's paths is slower than its level's fastest
    (:func:`slow_switches`: no LinkSpeed, or the same one on every switch of a level,
    as Slurm before 25.11 prints for a tree without any): the rule then compares
    volumes exactly as without weights.  O(groups x levels) plus one switch-path walk
    per node.
    """
    if not slow_switches(tree, layout.hosts()):
        return None
    return layout_uplink_costs(layout, tree, np.ones(layout.hierarchy.levels))


def slow_switches(tree: SwitchTree | None, hosts: Sequence[str] | None = None
                  ) -> dict[str, float]:
    """Switches whose LinkSpeed is below their level's fastest, by name, with their
    cost factor (> 1; :func:`~slurm_plugin.slurm.topology.switch_cost_factors`); with
    ``hosts``, only the switches on those hosts' paths.  O(switches + hosts x depth)."""
    factors = {s: f for s, f in switch_cost_factors(tree or SwitchTree()).items()
               if f != 1.0}
    if hosts is None or tree is None:
        return dict(sorted(factors.items()))
    on_paths = {s for p in tree.paths(hosts).values() for s in (p or ())}
    return {s: f for s, f in sorted(factors.items()) if s in on_paths}


# -- rankmap config check --------------------------------------------------------------------

def speeds_check(config, features: Mapping[str, Sequence[str]] | None = None
                 ) -> tuple[list[str], list[str]]:
    """``[speeds]`` for ``rankmap config check``: (summary lines, warnings).

    Nothing when the section is empty.  With ``features`` (every node's Slurm features,
    :func:`~slurm_plugin.slurm.topology.parse_scontrol_node_features` of
    ``scontrol show node -o``) the nodes a host
    list and a feature (or two features) both match are found now instead of in a job:
    each is a warning naming both keys, the error every such job would get.
    """
    by_nodes = config.speeds.nodes
    by_features = config.speeds.features
    if not by_nodes and not by_features:
        return [], []
    named = sum(len(expand_hostlist(h)) for h in by_nodes)
    lines = [f"# [speeds] {len(by_nodes)} host list(s) naming {named} node(s), "
             f"{len(by_features)} feature(s); other nodes have speed 1.0"]
    if features is None:
        return lines, []
    where = f"{config.path or 'built-in defaults'}: [speeds]"
    warnings = []
    for node in features:
        try:
            node_speeds([node], by_nodes, by_features, features, where)
        except SpeedsError as exc:
            warnings.append(f"{exc}: jobs on node {node} get no speeds")
    matched = {f for fs in features.values() for f in fs}
    unused = sorted(set(by_features) - matched)
    if unused:
        warnings.append(f"{where} features: no node has {', '.join(map(repr, unused))}")
    return lines, warnings
