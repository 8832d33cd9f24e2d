"""Slurm 25.05+ topologies: topology.yaml, topology/block, and per-partition selection.

Sources:

* ``topology.yaml(5)`` (Slurm 25.05+): a list of named topologies, each exactly one of
  ``tree: {switches: [{switch, children | nodes}]}``, ``block: {block_sizes: [..],
  blocks: [{block, nodes}]}`` or ``flat: true``; ``cluster_default: true`` marks the
  one used by partitions without ``Topology=`` in slurm.conf.  Slurm reads it before
  topology.conf (which it then ignores).
* ``topology.conf(5)`` with ``BlockName=NAME Nodes=…`` lines and ``BlockSizes=a,b,…``
  (topology/block, 23.02+); tree lines go to
  :func:`slurm_plugin.slurm.topology.parse_topology_conf`.
* ``scontrol show topology [NAME]`` of 25.11/26.05: tree switches as in 22.05 (root
  first), blocks as ``BlockName=b1 BlockIndex=0 Nodes=m1 BlockSize=1`` and
  ``AggregatedBlock=b[1-2] BlockIndex=2 Nodes=m[1-2] BlockSize=2`` lines.
* ``scontrol show partition -o NAME``: ``Topology=NAME`` (25.05+; absent before).

Every topology becomes a :class:`~slurm_plugin.slurm.topology.SwitchTree`, the structure
:func:`slurm_plugin.machine.layout.build_layout` consumes: a tree as it is; a block topology
with its base blocks as leaf groups and each higher block level (Slurm's aggregated
blocks, built exactly as src/plugins/topology/block/block_record.c builds them) as one
upper level, so each block level gets its own distance from ``level_distances``;
flat as the empty tree (no switch level).  Complexity: linear in the size of the file
or output, plus O(B · L) for B blocks and L block levels.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..common.hostlist import HostlistError, expand_hostlist, fold_hostlist
from .slurm_commands import SlurmQueryError, run_slurm
from .topology import SwitchTree, TopologyError, parse_scontrol_topology, parse_topology_conf

log = logging.getLogger("rankmap.topology")

#: Slurm's default block levels when BlockSizes is not given (bit_nset(levels, 0, 4))
DEFAULT_BLOCK_LEVELS = (0, 1, 2, 3, 4)


@dataclass(frozen=True)
class NamedTopology:
    """One entry of topology.yaml (``kind``: tree, block or flat) as a SwitchTree."""

    name: str
    kind: str
    tree: SwitchTree = field(default_factory=SwitchTree)
    cluster_default: bool = False


# -- block topologies ------------------------------------------------------------------

def block_tree(blocks: list[tuple[str, tuple[str, ...]]],
               block_sizes: list[int] | None = None, where: str = "blocks") -> SwitchTree:
    """Blocks (in configuration order) and BlockSizes (in nodes) → a SwitchTree.

    Base blocks are the leaf groups.  As in Slurm, the base block size is the first
    BlockSizes value (else the first block's node count); every further size must be
    a power-of-two multiple of it, and level ``j`` aggregates ``2**j`` consecutive base
    blocks (a short last group only when it is larger than the level below's).
    """
    if not blocks:
        raise TopologyError(f"{where}: no blocks")
    base = (block_sizes or [len(blocks[0][1])])[0]
    if base <= 0:
        raise TopologyError(f"{where}: base block size {base} must be positive")
    if block_sizes:
        levels = []
        for size in block_sizes:
            factor, rest = divmod(size, base)
            if size <= 0 or rest or factor & (factor - 1):
                raise TopologyError(f"{where}: block size {size} is not a power-of-two "
                                    f"multiple of the base size {base}")
            levels.append(factor.bit_length() - 1)
        levels = sorted(set(levels) | {0})
    else:
        levels = list(DEFAULT_BLOCK_LEVELS)
    factors: list[int] = []
    for level in levels:  # as block_record.c: stop at the first level covering all blocks
        factors.append(1 << level)
        if factors[-1] >= len(blocks):
            break
    nodes = {name: tuple(ns) for name, ns in blocks}
    if len(nodes) != len(blocks):
        raise TopologyError(f"{where}: duplicate block names")
    # every level's groups of consecutive base blocks, named by their folded block list
    levels_members: list[dict[str, tuple[str, ...]]] = []
    for j in range(1, len(factors)):
        groups: dict[str, tuple[str, ...]] = {}
        for i in range(0, len(blocks), factors[j]):
            remaining = len(blocks) - i
            if factors[j] > remaining and factors[j - 1] >= remaining:
                continue
            members = tuple(name for name, _ in blocks[i:i + factors[j]])
            groups[fold_hostlist(list(members))] = members
        levels_members.append(groups)
    return SwitchTree(nodes, _nest({name: (name,) for name, _ in blocks}, levels_members))


def _nest(below: dict[str, tuple[str, ...]],
          levels: list[dict[str, tuple[str, ...]]]) -> dict[str, tuple[str, ...]]:
    """Children of every upper group, level by level: the groups of the level below
    whose members it contains.  A group no upper group takes stays the top of its
    branch and is offered to the next level up.  O(L · G²) for L levels of G groups."""
    children: dict[str, tuple[str, ...]] = {}
    for level in levels:
        covered: set[str] = set()
        for name, members in level.items():
            inside = set(members)
            children[name] = tuple(g for g, m in below.items() if set(m) <= inside)
            covered.update(children[name])
        below = {**level, **{g: m for g, m in below.items() if g not in covered}}
    return children


def parse_block_conf(text: str, path: str = "topology.conf") -> SwitchTree:
    """topology.conf for topology/block: ``BlockName=… Nodes=…`` and ``BlockSizes=…``."""
    blocks: list[tuple[str, tuple[str, ...]]] = []
    sizes: list[int] | None = None
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        pairs = re.findall(r"(\w+)=(\S+)", line)
        kv = {k.lower(): v for k, v in pairs}
        if "blocksizes" in kv:
            try:
                sizes = [int(x) for x in kv["blocksizes"].split(",") if x]
            except ValueError:
                raise TopologyError(f"{path}:{no}: BlockSizes: not a list of integers: "
                                    f"{kv['blocksizes']!r}") from None
        elif "blockname" in kv:
            unknown = {k for k, _ in pairs if k.lower() not in ("blockname", "nodes")}
            if unknown:
                raise TopologyError(f"{path}:{no}: unknown key(s) {', '.join(sorted(unknown))}")
            try:
                blocks.append((kv["blockname"], tuple(expand_hostlist(kv.get("nodes", "")))))
            except HostlistError as exc:
                raise TopologyError(f"{path}:{no}: Nodes: {exc}") from None
        else:
            raise TopologyError(f"{path}:{no}: expected BlockName= or BlockSizes=, got {line!r}")
    return block_tree(blocks, sizes, path)


def parse_topology_conf_any(text: str, path: str = "topology.conf") -> SwitchTree:
    """A topology.conf of either plugin: block lines → :func:`parse_block_conf`, else tree."""
    if re.search(r"^\s*(BlockName|BlockSizes)\s*=", text, re.M | re.I):
        return parse_block_conf(text, path)
    return parse_topology_conf(text, path)


def parse_scontrol_topology_any(text: str) -> SwitchTree:
    """``scontrol show topology [NAME]`` of any release: switches, or blocks.

    Aggregated blocks become upper levels: each one's children are the groups of the
    next lower size whose nodes it contains.
    """
    if "SwitchName=" in text:
        return parse_scontrol_topology(text)
    levels: dict[int, dict[str, tuple[str, ...]]] = {}
    base: dict[str, tuple[str, ...]] = {}
    for line in text.splitlines():
        kv = dict(re.findall(r"(\w+)=(\S+)", line))
        try:
            if "BlockName" in kv:
                base[kv["BlockName"]] = tuple(expand_hostlist(kv.get("Nodes", "")))
            elif "AggregatedBlock" in kv:
                size = int(kv.get("BlockSize", "0"))
                levels.setdefault(size, {})[kv["AggregatedBlock"]] = \
                    tuple(expand_hostlist(kv.get("Nodes", "")))
        except (HostlistError, ValueError) as exc:
            raise TopologyError(f"scontrol show topology: {line.strip()!r}: {exc}") from None
    return SwitchTree(base, _nest(base, [levels[size] for size in sorted(levels)]))


# -- topology.yaml ---------------------------------------------------------------------

def parse_topology_yaml(text: str, path: str = "topology.yaml") -> list[NamedTopology]:
    """All topologies of a topology.yaml; errors name the file, line and field.

    Uses PyYAML's composer (not its loader) to keep line numbers for every node.
    """
    try:
        import yaml
    except ImportError:  # pragma: no cover - a dependency of the package
        raise TopologyError(f"{path}: reading topology.yaml needs PyYAML (pip install "
                            "PyYAML, or Debian's python3-yaml)") from None
    try:
        doc = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise TopologyError(f"{path}: not YAML: {exc}") from None
    if doc is None:
        raise TopologyError(f"{path}: empty")
    out = []
    for item in _seq(doc, path, "top level"):
        fields = _map(item, path, "topology entry")
        name = _scalar(fields.get("topology"), path, item, "topology")
        where = f"topology {name}"
        kinds = [k for k in ("tree", "block", "flat") if k in fields]
        if len(kinds) != 1:
            raise TopologyError(f"{path}:{_line(item)}: {where}: needs exactly one of tree, "
                                f"block, flat (has {', '.join(kinds) or 'none'})")
        unknown = set(fields) - {"topology", "cluster_default", "tree", "block", "flat"}
        if unknown:
            raise TopologyError(f"{path}:{_line(item)}: {where}: unknown field(s) "
                                f"{', '.join(sorted(unknown))}")
        default = _bool(fields.get("cluster_default"), path, f"{where}: cluster_default")
        kind = kinds[0]
        if kind == "tree":
            tree = _yaml_tree(fields["tree"], path, where)
        elif kind == "block":
            tree = _yaml_block(fields["block"], path, where)
        else:
            if not _bool(fields["flat"], path, f"{where}: flat"):
                raise TopologyError(f"{path}:{_line(fields['flat'])}: {where}: flat must be true")
            tree = SwitchTree()
        out.append(NamedTopology(name, kind, tree, default))
    names = [t.name for t in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise TopologyError(f"{path}: duplicate topology name(s) {', '.join(dup)}")
    return out


def _line(node) -> int:
    return node.start_mark.line + 1


def _seq(node, path: str, what: str) -> list:
    if node is None or node.tag != "tag:yaml.org,2002:seq":
        raise TopologyError(f"{path}:{_line(node) if node else '?'}: {what}: expected a list")
    return list(node.value)


def _map(node, path: str, what: str) -> dict:
    if node is None or node.tag != "tag:yaml.org,2002:map":
        raise TopologyError(f"{path}:{_line(node) if node else '?'}: {what}: expected a mapping")
    return {k.value: v for k, v in node.value}


def _scalar(node, path: str, parent, what: str) -> str:
    if node is None:
        raise TopologyError(f"{path}:{_line(parent)}: {what} is missing")
    if not hasattr(node, "style") or isinstance(node.value, list):
        raise TopologyError(f"{path}:{_line(node)}: {what}: expected a single value")
    return str(node.value)


def _bool(node, path: str, what: str) -> bool:
    if node is None:
        return False
    value = str(node.value).lower()
    if value in ("true", "yes", "on"):
        return True
    if value in ("false", "no", "off"):
        return False
    raise TopologyError(f"{path}:{_line(node)}: {what}: expected true or false, got {value!r}")


def _hosts(node, path: str, what: str) -> tuple[str, ...]:
    """``nodes: n[1-2]``, ``nodes: [n1, n2]`` or a block list of names."""
    if node.tag == "tag:yaml.org,2002:seq":
        parts = [str(x.value) for x in node.value]
    else:
        parts = [str(node.value)]
    try:
        return tuple(h for p in parts for h in expand_hostlist(p))
    except HostlistError as exc:
        raise TopologyError(f"{path}:{_line(node)}: {what}: {exc}") from None


def _yaml_tree(node, path: str, where: str) -> SwitchTree:
    fields = _map(node, path, f"{where}: tree")
    nodes: dict[str, tuple[str, ...]] = {}
    children: dict[str, tuple[str, ...]] = {}
    for sw in _seq(fields.get("switches"), path, f"{where}: tree.switches"):
        f = _map(sw, path, f"{where}: switch")
        name = _scalar(f.get("switch"), path, sw, f"{where}: switch")
        unknown = set(f) - {"switch", "children", "nodes"}
        if unknown:
            raise TopologyError(f"{path}:{_line(sw)}: {where}: switch {name}: unknown "
                                f"field(s) {', '.join(sorted(unknown))}")
        if "nodes" in f:
            nodes[name] = _hosts(f["nodes"], path, f"{where}: switch {name}: nodes")
        if "children" in f:
            children[name] = _hosts(f["children"], path, f"{where}: switch {name}: children")
    known = set(nodes) | set(children)
    for parent, kids in children.items():
        for kid in kids:
            if kid not in known:
                raise TopologyError(f"{path}: {where}: switch {parent} lists unknown "
                                    f"switch {kid}")
    return SwitchTree(nodes, children)


def _yaml_block(node, path: str, where: str) -> SwitchTree:
    fields = _map(node, path, f"{where}: block")
    sizes = None
    if "block_sizes" in fields:
        raw = fields["block_sizes"]
        values = [str(x.value) for x in raw.value] if raw.tag == "tag:yaml.org,2002:seq" \
            else str(raw.value).split(",")
        try:
            sizes = [int(v) for v in values]
        except ValueError:
            raise TopologyError(f"{path}:{_line(raw)}: {where}: block_sizes: not a list of "
                                "integers") from None
    blocks = []
    for b in _seq(fields.get("blocks"), path, f"{where}: block.blocks"):
        f = _map(b, path, f"{where}: block")
        name = _scalar(f.get("block"), path, b, f"{where}: block")
        blocks.append((name, _hosts(f["nodes"], path, f"{where}: block {name}: nodes")
                       if "nodes" in f else ()))
    return block_tree(blocks, sizes, f"{path}: {where}")


def select_topology(topologies: list[NamedTopology], partition: str | None,
                    partition_topology: Mapping[str, str] | None = None) -> NamedTopology:
    """The job's topology: its partition's ``Topology=``, else the cluster default.

    Without a ``cluster_default: true`` entry Slurm uses the first topology.
    """
    by_name = {t.name: t for t in topologies}
    chosen = (partition_topology or {}).get(partition or "")
    if chosen:
        if chosen not in by_name:
            raise TopologyError(f"partition {partition} names topology {chosen}, which "
                                f"topology.yaml does not define")
        return by_name[chosen]
    return next((t for t in topologies if t.cluster_default), topologies[0])


def partition_topologies(slurm_conf_text: str) -> dict[str, str]:
    """``PartitionName=P … Topology=T`` lines of a slurm.conf → {P: T}."""
    out = {}
    for raw in slurm_conf_text.splitlines():
        line = raw.split("#", 1)[0]
        kv = {k.lower(): v for k, v in re.findall(r"(\w+)=(\S+)", line)}
        if "partitionname" in kv and "topology" in kv:
            out[kv["partitionname"]] = kv["topology"]
    return out


# -- the hook read_topology uses -------------------------------------------------------

def read_topology_source(source: str, timeout: float, env: Mapping[str, str]
                         ) -> SwitchTree | None:
    """The job's switch tree from ``[slurm] topology`` (None: no topology).

    ``auto``/``scontrol``: ``scontrol show partition`` for the job's partition
    (``SLURM_JOB_PARTITION``) and, when it names one (25.05+), ``scontrol show topology
    NAME``; else ``scontrol show topology``.  A ``*.yaml`` path: that topology.yaml,
    the partition's topology from the slurm.conf beside it, else ``cluster_default``.
    Any other path: a topology.conf (tree or block).
    """
    partition = env.get("SLURM_JOB_PARTITION") or None
    if source == "none":
        return None
    if source in ("auto", "scontrol"):
        try:
            name = _partition_topology(partition, timeout, env) if partition else None
            args = ["scontrol", "show", "topology"] + ([name] if name else [])
            return parse_scontrol_topology_any(run_slurm(args, timeout, dict(env)))
        except SlurmQueryError:
            if source == "scontrol":
                raise
            return None
    with open(source, encoding="utf-8") as fh:
        text = fh.read()
    if source.endswith((".yaml", ".yml")):
        conf = os.path.join(os.path.dirname(source), "slurm.conf")
        parts: dict[str, str] = {}
        if os.path.exists(conf):
            with open(conf, encoding="utf-8") as fh:
                parts = partition_topologies(fh.read())
        topo = select_topology(parse_topology_yaml(text, source), partition, parts)
        log.debug("topology %s (%s) from %s for partition %s", topo.name, topo.kind, source,
                  partition)
        return topo.tree
    return parse_topology_conf_any(text, source)


def _partition_topology(partition: str, timeout: float, env: Mapping[str, str]) -> str | None:
    """``Topology=`` of ``scontrol show partition -o P`` (None before 25.05 or unset)."""
    try:
        out = run_slurm(["scontrol", "show", "partition", "-o", partition], timeout, dict(env))
    except SlurmQueryError as exc:
        log.debug("scontrol show partition %s: %s", partition, exc)
        return None
    m = re.search(r"(?:^|\s)Topology=(\S+)", out)
    return m.group(1) if m and m.group(1) not in ("(null)", "") else None
