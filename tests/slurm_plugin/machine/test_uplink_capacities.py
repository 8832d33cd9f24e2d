"""Link capacities across levels (slurm_plugin.machine.speeds.layout_uplink_capacities,
config [solver] uplink_oversubscription): a node's host link 1, a switch's uplink its
nodes below over the oversubscription.  Checked against the uplink bandwidths of the
SimGrid platform `rankmap simulate` builds from the same tree, which shares no code
with it."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest

from slurm_plugin.machine.layout import build_layout
from slurm_plugin.machine.speeds import SpeedsError, layout_uplink_capacities
from slurm_plugin.simulate.platform import NetworkParams, build_platform
from slurm_plugin.site.config import ConfigError, parse_config
from slurm_plugin.slurm.allocation import Allocation
from slurm_plugin.slurm.topology import NodeShape, parse_topology_conf

# uneven: leaves of 4, 2 and 3 nodes, one middle switch over two leaves, another
# over one (a padding level for the job's nodes under it)
CONF = """\
SwitchName=a Nodes=n[0-3]
SwitchName=b Nodes=n[4-5]
SwitchName=c Nodes=n[6-8]
SwitchName=m1 Switches=a,b
SwitchName=m2 Switches=c
SwitchName=top Switches=m[1-2]
"""
JOB = ("n1", "n2", "n4", "n6", "n7")


def _layout(tree):
    return build_layout(Allocation("1", JOB, (2,) * len(JOB), 1), NodeShape(1, 2), tree,
                        [1, 10, 100, 1000, 10000])


def _switch_at(tree, hosts: set[str], steps: int) -> str:
    """The switch ``steps`` above the hosts' leaf switch (a plain walk; every host of a
    group must give the same one)."""
    parent = {c: p for p, cs in tree.children.items() for c in cs}
    leaf = {n: s for s, ns in tree.nodes.items() for n in ns}
    found = set()
    for h in hosts:
        s = leaf[h]
        for _ in range(steps):
            s = parent[s]
        found.add(s)
    assert len(found) == 1
    return found.pop()


def test_capacities_are_the_platforms_uplink_bandwidths():
    tree = parse_topology_conf(CONF)
    layout = _layout(tree)
    host_bw = 12.5e9
    plat = build_platform(tree, JOB, NodeShape(1, 2),
                          NetworkParams(host_bw=host_bw, oversubscription=4.0))
    bw = {link.get("id"): float(link.get("bandwidth").removesuffix("Bps"))
          for link in ET.fromstring(plat.xml.split("\n", 2)[2]).iter("link")}
    caps = layout_uplink_capacities(layout, tree, [4.0])
    h = layout.hierarchy
    node = h.level_names.index("node")
    assert all(c is None for c in caps[:node]) and caps[-1] is None
    np.testing.assert_array_equal(caps[node], np.ones(len(JOB)))
    checked = 0
    for lv in range(node + 1, h.levels - 1):
        for g, first in enumerate(h.bounds[lv][:-1].tolist()):
            last = int(h.bounds[lv][g + 1])
            hosts = {layout.slots[pe].host for pe in range(first, last)}
            own = _switch_at(tree, hosts, lv - node - 1)
            assert caps[lv][g] * host_bw == pytest.approx(bw[plat.uplink_of[own]])
            checked += 1
    assert checked == 5  # leaves a, b, c, middle switches m1 and m2


def test_oversubscription_per_switch_level():
    tree = parse_topology_conf(CONF)
    layout = _layout(tree)
    h = layout.hierarchy
    leaf, mid = h.level_names.index("node") + 1, h.level_names.index("node") + 2
    caps = layout_uplink_capacities(layout, tree, [2.0, 8.0])
    # leaves a (4 nodes), b (2), c (3) at 2:1; m1 (6 nodes) and m2 (3) at 8:1
    assert sorted(caps[leaf].tolist()) == [1.0, 1.5, 2.0]
    assert sorted(caps[mid].tolist()) == [0.375, 0.75]
    with pytest.raises(SpeedsError, match="oversubscription must be positive"):
        layout_uplink_capacities(layout, tree, [])


def test_the_config_key():
    cfg = parse_config('[solver]\nuplink_oversubscription = [4, 2]\n', "/etc/rankmap.toml")
    assert cfg.solver.uplink_oversubscription == [4.0, 2.0]
    assert parse_config("", "/etc/rankmap.toml").solver.uplink_oversubscription == []
    with pytest.raises(ConfigError, match="uplink_oversubscription"):
        parse_config('[solver]\nuplink_oversubscription = [0.5]\n', "/etc/rankmap.toml")
