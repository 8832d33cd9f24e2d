"""Slurm 25.05+ topologies: topology.yaml, topology/block, per-partition selection, and
``scontrol show topology`` as recorded on 25.11.7 and 26.05.3 (tests/data/slurm-*/).

The recorded files come from deploy/testcluster/cluster.py ``--topology-file yaml``
(tree: spine → s1=n[1-2], s2=n[3-4]; blocks: b1=n[1-2], b2=n[3-4], block_sizes 2,4).
"""

from __future__ import annotations

import pytest

from slurm_plugin.machine.layout import build_layout
from slurm_plugin.slurm.allocation import Allocation
from slurm_plugin.slurm.topology import NodeShape, SwitchTree, TopologyError
from slurm_plugin.slurm.topology_yaml import (
    block_tree,
    parse_block_conf,
    parse_scontrol_topology_any,
    parse_topology_conf_any,
    parse_topology_yaml,
    partition_topologies,
    read_topology_source,
    select_topology,
)
from tests.helpers.paths import TEST_DATA

DATA = TEST_DATA
#: recorded releases (slurm-25.11 always; slurm-26.05 once recorded)
VERSIONS = sorted(p.name for p in DATA.glob("slurm-2*") if (p / "topology.yaml").exists())
assert "slurm-25.11" in VERSIONS

MAN_EXAMPLE = """---
- topology: topo1
  cluster_default: true
  tree:
    switches:
      - switch: sw_root
        children: s[1-2]
      - switch: s1
        nodes: node[01-02]
      - switch: s2
        nodes: node[03-04]
- topology: topo2
  cluster_default: false
  block:
    block_sizes:
      - 4
      - 16
    blocks:
      - block: b1
        nodes: node[01-04]
      - block: b2
        nodes: node[05-08]
      - block: b3
        nodes: node[09-12]
      - block: b4
        nodes: node[13-16]
- topology: topo3
  cluster_default: false
  flat: true
"""

TREE = SwitchTree({"s1": ("n1", "n2"), "s2": ("n3", "n4")}, {"spine": ("s1", "s2")})
BLOCKS = SwitchTree({"b1": ("n1", "n2"), "b2": ("n3", "n4")}, {"b[1-2]": ("b1", "b2")})


def test_man_page_example():
    topo1, topo2, topo3 = parse_topology_yaml(MAN_EXAMPLE)
    assert (topo1.name, topo1.kind, topo1.cluster_default) == ("topo1", "tree", True)
    assert topo1.tree.path("node03") == ["s2", "sw_root"]
    assert topo2.kind == "block"
    # block_sizes 4,16 nodes: base 4, one upper level of 4 base blocks
    assert topo2.tree.nodes["b3"] == ("node09", "node10", "node11", "node12")
    assert topo2.tree.children == {"b[1-4]": ("b1", "b2", "b3", "b4")}
    assert topo2.tree.path("node16") == ["b4", "b[1-4]"]
    assert topo3.kind == "flat" and topo3.tree.empty


def test_selection_by_partition_else_cluster_default():
    topos = parse_topology_yaml(MAN_EXAMPLE)
    parts = partition_topologies("PartitionName=a Nodes=x Topology=topo2\n"
                                 "PartitionName=b Nodes=x  # Topology=topo3\n")
    assert parts == {"a": "topo2"}
    assert select_topology(topos, "a", parts).name == "topo2"
    assert select_topology(topos, "b", parts).name == "topo1"
    assert select_topology(topos, None, parts).name == "topo1"
    with pytest.raises(TopologyError, match="partition a names topology nope"):
        select_topology(topos, "a", {"a": "nope"})


def test_block_levels_as_slurm_aggregates_them():
    blocks = [(f"b{i}", (f"n{i}",)) for i in range(1, 6)]
    # default levels 1,2,4,8 blocks; five blocks: pairs b[1-2], b[3-4] and b5 left
    # alone at level 1 (no larger than the level below), b[1-4] and b5 at level 2
    # (5 - 4 = 1 block remains), then b[1-5] at level 3 (8 > 5 but 4 < 5)
    tree = block_tree(blocks)
    assert tree.children["b[1-2]"] == ("b1", "b2")
    assert tree.children["b[1-4]"] == ("b[1-2]", "b[3-4]")
    assert tree.children["b[1-5]"] == ("b[1-4]", "b5")
    assert tree.path("n1") == ["b1", "b[1-2]", "b[1-4]", "b[1-5]"]
    assert tree.path("n5") == ["b5", "b[1-5]"]
    # BlockSizes picks levels: 1 and 4 blocks only
    tree = block_tree(blocks, [1, 4])
    assert tree.path("n1") == ["b1", "b[1-4]"]
    with pytest.raises(TopologyError, match="block size 3 is not a power-of-two"):
        block_tree(blocks, [1, 3])


def test_scontrol_blocks_match_the_configured_aggregation():
    """scontrol's aggregated blocks (a lone b5 under b[1-5] only) give the same tree."""
    text = "".join(f"BlockName=b{i} BlockIndex={i - 1} Nodes=n{i} BlockSize=1\n"
                   for i in range(1, 6)) + (
        "AggregatedBlock=b[1-2] BlockIndex=5 Nodes=n[1-2] BlockSize=2\n"
        "AggregatedBlock=b[3-4] BlockIndex=6 Nodes=n[3-4] BlockSize=2\n"
        "AggregatedBlock=b[1-4] BlockIndex=7 Nodes=n[1-4] BlockSize=4\n"
        "AggregatedBlock=b[1-5] BlockIndex=8 Nodes=n[1-5] BlockSize=5\n")
    assert parse_scontrol_topology_any(text) == \
        block_tree([(f"b{i}", (f"n{i}",)) for i in range(1, 6)])


def test_block_conf_and_dispatch():
    text = "BlockName=b1 Nodes=n[1-2]\nBlockName=b2 Nodes=n[3-4]\nBlockSizes=2,4\n"
    assert parse_topology_conf_any(text) == BLOCKS
    assert parse_topology_conf_any("SwitchName=s1 Nodes=n1\n").nodes == {"s1": ("n1",)}
    with pytest.raises(TopologyError, match=r"topo.conf:2: unknown key\(s\) Switches"):
        parse_block_conf("BlockName=b1 Nodes=n1\nBlockName=b2 Switches=x\n", "topo.conf")


@pytest.mark.parametrize("text, message", [
    ("- topology: a\n  tree:\n    switches: []\n  flat: true\n",
     r"t.yaml:1: topology a: needs exactly one of tree, block, flat \(has tree, flat\)"),
    ("- topology: a\n  flat: maybe\n", r"t.yaml:2: topology a: flat: expected true or false"),
    ("- cluster_default: true\n  flat: true\n", r"t.yaml:1: topology is missing"),
    ("- topology: a\n  tree:\n    switches:\n      - switch: s\n        nodez: n1\n",
     r"t.yaml:4: topology a: switch s: unknown field\(s\) nodez"),
    ("- topology: a\n  block:\n    block_sizes: [2, x]\n    blocks: []\n",
     r"t.yaml:3: topology a: block_sizes: not a list of integers"),
    ("topology: a\n", r"t.yaml:1: top level: expected a list"),
    ("- topology: a\n  tree:\n    switches:\n      - switch: top\n        children: s9\n",
     r"switch top lists unknown switch s9"),
])
def test_errors_name_file_line_and_field(text, message):
    with pytest.raises(TopologyError, match=message):
        parse_topology_yaml(text, "t.yaml")


@pytest.mark.parametrize("version", VERSIONS)
def test_recorded_topology_yaml(version):
    topos = {t.name: t for t in parse_topology_yaml(
        (DATA / version / "topology.yaml").read_text())}
    assert topos["tree"].tree == TREE
    assert topos["blocks"].tree == BLOCKS
    assert topos["flat"].tree.empty


@pytest.mark.parametrize("version", VERSIONS)
def test_recorded_scontrol_show_topology(version):
    """Default (cluster_default tree, root first) and ``scontrol show topology blocks``."""
    assert parse_scontrol_topology_any(
        (DATA / version / "scontrol_topology.txt").read_text()) == TREE
    assert parse_scontrol_topology_any(
        (DATA / version / "scontrol_topology_blocks.txt").read_text()) == BLOCKS


@pytest.mark.parametrize("version", VERSIONS)
def test_recorded_partition_names_its_topology(version):
    text = (DATA / version / "scontrol_partition_blocked.txt").read_text()
    assert "Topology=blocks" in text


@pytest.mark.parametrize("version", VERSIONS)
def test_recorded_job_and_nodes(version):
    """The CLI parsers read the current releases' job and node output unchanged."""
    from slurm_plugin.slurm.allocation import parse_scontrol_job
    from slurm_plugin.slurm.topology import parse_scontrol_nodes

    alloc = parse_scontrol_job((DATA / version / "scontrol_job_blocked.txt").read_text())
    assert alloc.partition == "blocked" and alloc.tasks_per_node == (4, 4)
    assert all(len(alloc.cpu_ids[n]) == 4 for n in alloc.nodes)
    shapes = parse_scontrol_nodes((DATA / version / "scontrol_nodes.txt").read_text())
    assert set(shapes) == {"n1", "n2", "n3", "n4"}
    assert all(s == NodeShape(2, 4, 1) for s in shapes.values())


def test_blocks_give_their_own_hierarchy_levels():
    """Base blocks are leaf groups, each block level above them one more level with its
    own distance; flat has no switch level."""
    alloc = Allocation("1", ("n1", "n2", "n3", "n4"), (8, 8, 8, 8))
    blocks = block_tree([(f"b{i}", (f"n{i}",)) for i in range(1, 5)], [1, 2, 4])
    layout = build_layout(alloc, NodeShape(2, 4), blocks, [1, 10, 100, 1000, 10000])
    h = layout.hierarchy
    assert h.level_names == ("socket", "node", "leaf switch", "switch level 1", "root")
    assert [list(b) for b in h.bounds[2:]] == [[0, 8, 16, 24, 32], [0, 16, 32], [0, 32]]
    assert list(h.distances) == [1, 10, 100, 1000, 10000]
    flat = build_layout(alloc, NodeShape(2, 4), SwitchTree(), [1, 10, 100])
    assert flat.hierarchy.level_names == ("socket", "node", "root")


def test_read_topology_source_files(tmp_path):
    (tmp_path / "topology.yaml").write_text((DATA / "slurm-25.11/topology.yaml").read_text())
    (tmp_path / "slurm.conf").write_text("PartitionName=blocked Nodes=n[1-4] Topology=blocks\n")
    src = str(tmp_path / "topology.yaml")
    assert read_topology_source(src, 5, {"SLURM_JOB_PARTITION": "blocked"}) == BLOCKS
    assert read_topology_source(src, 5, {"SLURM_JOB_PARTITION": "debug"}) == TREE
    assert read_topology_source(src, 5, {}) == TREE
    conf = tmp_path / "topology.conf"
    conf.write_text("BlockName=b1 Nodes=n[1-2]\nBlockName=b2 Nodes=n[3-4]\n")
    assert read_topology_source(str(conf), 5, {}) == BLOCKS
    assert read_topology_source("none", 5, {}) is None


def test_read_topology_source_scontrol(monkeypatch):
    """auto: the partition's Topology= (25.05+) picks ``scontrol show topology NAME``."""
    calls = []
    outputs = {
        ("scontrol", "show", "partition", "-o", "blocked"): "PartitionName=blocked "
        "Nodes=n[1-4] Topology=blocks\n",
        ("scontrol", "show", "partition", "-o", "old"): "PartitionName=old Nodes=n[1-4]\n",
        ("scontrol", "show", "topology", "blocks"):
            (DATA / "slurm-25.11/scontrol_topology_blocks.txt").read_text(),
        ("scontrol", "show", "topology"): (DATA / "slurm/scontrol_topology.txt").read_text(),
    }

    def fake(args, timeout=10.0, env=None):
        calls.append(tuple(args))
        return outputs[tuple(args)]

    monkeypatch.setattr("slurm_plugin.slurm.topology_yaml.run_slurm", fake)
    assert read_topology_source("auto", 5, {"SLURM_JOB_PARTITION": "blocked"}) == BLOCKS
    assert read_topology_source("auto", 5, {"SLURM_JOB_PARTITION": "old"}) == TREE
    assert calls[-1] == ("scontrol", "show", "topology")
