"""Speeds from Slurm and the site config (slurm_plugin.machine.speeds, topology LinkSpeed,
config [speeds]): what reaches mapper.mesh.architecture."""


import numpy as np
import pytest

from mapper.mesh.architecture import architecture_from_hierarchy
from slurm_plugin.machine.layout import build_layout
from slurm_plugin.machine.speeds import (
    SpeedsError,
    config_node_speeds,
    layout_link_weights,
    layout_pe_speeds,
    layout_uplink_costs,
    node_speeds,
    parse_pe_speeds,
)
from slurm_plugin.site.config import ConfigError, parse_config
from slurm_plugin.slurm.allocation import Allocation
from slurm_plugin.slurm.topology import (
    NodeShape,
    TopologyError,
    parse_scontrol_node_features,
    parse_scontrol_topology,
    parse_topology_conf,
    switch_cost_factors,
)
from tests.helpers.paths import TEST_DATA

DATA = TEST_DATA

SPEEDS_CONF = """\
SwitchName=l1 Nodes=n[1-2] LinkSpeed=100
SwitchName=l2 Nodes=n3 LinkSpeed=50
SwitchName=l3 Nodes=n4
SwitchName=spine Switches=l[1-3] LinkSpeed=40
"""

# scontrol show topology as Slurm 23.02 prints it for SPEEDS_CONF (l3 without one: 0)
SPEEDS_SCONTROL = """\
SwitchName=l1 Level=0 LinkSpeed=100 Nodes=n[1-2]
SwitchName=l2 Level=0 LinkSpeed=50 Nodes=n3
SwitchName=l3 Level=0 LinkSpeed=0 Nodes=n4
SwitchName=spine Level=1 LinkSpeed=40 Nodes=n[1-4] Switches=l[1-3]
"""


# -- LinkSpeed ----------------------------------------------------------------------------------

def test_link_speed_round_trip_from_topology_conf_and_scontrol():
    conf = parse_topology_conf(SPEEDS_CONF)
    shown = parse_scontrol_topology(SPEEDS_SCONTROL)
    assert conf.link_speeds == {"l1": 100, "l2": 50, "spine": 40}
    assert shown == conf and shown.link_speeds == conf.link_speeds
    assert conf.switch_levels() == {"l1": 0, "l2": 0, "l3": 0, "spine": 1}
    # fastest of a level = factor 1; half as fast = 2; no LinkSpeed = absent (factor 1)
    assert switch_cost_factors(conf) == {"l1": 1.0, "l2": 2.0, "spine": 1.0}


def test_recorded_scontrol_link_speeds():
    # Slurm 22.05 prints LinkSpeed=1 for every switch, 25.11 prints 0 (not set)
    old = parse_scontrol_topology((DATA / "slurm" / "scontrol_topology.txt").read_text())
    assert old.link_speeds == {"s1": 1, "s2": 1, "spine": 1}
    assert switch_cost_factors(old) == {"s1": 1.0, "s2": 1.0, "spine": 1.0}
    new = parse_scontrol_topology((DATA / "slurm-25.11" / "scontrol_topology.txt").read_text())
    assert new.link_speeds == {} and switch_cost_factors(new) == {}


@pytest.mark.parametrize("text,msg", [
    ("SwitchName=a Nodes=n1\nSwitchName=b Nodes=n2 LinkSpeed=fast\n",
     r"t.conf:2: switch b: LinkSpeed must be a non-negative number, got 'fast'"),
    ("SwitchName=a Nodes=n1 LinkSpeed=-3\n", r"t.conf:1: switch a: LinkSpeed"),
])
def test_bad_link_speed_names_file_and_line(text, msg):
    with pytest.raises(TopologyError, match=msg):
        parse_topology_conf(text, "t.conf")
    with pytest.raises(TopologyError, match="scontrol show topology line"):
        parse_scontrol_topology(text.replace("Nodes=", "Level=0 Nodes="))


def _layout(tree, tasks=(2, 2, 2, 2), nodes=("n1", "n2", "n3", "n4")):
    alloc = Allocation("1", nodes, tasks, 1)
    return build_layout(alloc, NodeShape(1, 2), tree, [1, 10, 100, 1000])


def test_layout_uplink_costs_reach_the_architecture():
    tree = parse_topology_conf(SPEEDS_CONF)
    layout = _layout(tree)
    h = layout.hierarchy
    assert h.level_names == ("socket", "node", "leaf switch", "root")
    up = layout_uplink_costs(layout, tree, [1, 10, 100, 1000])
    assert up[0] is None and up[3] is None
    # node -> leaf switch: 100 x factor (l1 1, l2 2, l3 none: 1); leaf -> spine (root) 1000
    assert up[1].tolist() == [100, 100, 200, 100]
    assert up[2].tolist() == [1000, 1000, 1000]
    arch = architecture_from_hierarchy(h, [1, 10, 100, 1000], uplink_costs=up)
    n1, n2, n3 = 0, 2, 4
    assert arch.pair_cost(n1, 1) == 1 and arch.pair_cost(n1, n2) == 2 * 100**2
    assert arch.pair_cost(n1, n3) == 100**2 + 1000**2 + 200**2 + 1000**2


def test_layout_uplink_costs_on_an_uneven_tree_skip_the_padding():
    # x1 sits one level higher than n1/n4: its path l4 -> core is padded up to depth 3
    tree = parse_topology_conf("""\
SwitchName=l1 Nodes=n1
SwitchName=l4 Nodes=x1 LinkSpeed=10
SwitchName=pod1 Switches=l1
SwitchName=core Switches=pod1,l4 LinkSpeed=5
""")
    layout = _layout(tree, (2, 2), ("n1", "x1"))
    assert layout.hierarchy.level_names == ("socket", "node", "leaf switch",
                                            "switch level 1", "root")
    costs = [1, 10, 100, 1000, 10000]
    up = layout_uplink_costs(layout, tree, costs)
    # n1: n1->l1 100, l1->pod1 1000, pod1->core 10000;
    # x1: x1->l4 100, l4->core (the job's top switch: root cost) 10000, pad 0
    assert up[1].tolist() == [100, 100]
    assert up[2].tolist() == [1000, 10000]
    assert up[3].tolist() == [10000, 0]
    arch = architecture_from_hierarchy(layout.hierarchy, costs, uplink_costs=up)
    # five physical links: n1-l1, l1-pod1, pod1-core, core-l4, l4-x1
    assert arch.pair_cost(0, 2) == 100**2 + 1000**2 + 10000**2 + 10000**2 + 100**2


def test_layout_link_weights_are_the_link_speed_factors_or_none():
    tree = parse_topology_conf(SPEEDS_CONF)
    w = layout_link_weights(_layout(tree), tree)
    # the never-worse rule's weights: l2 half as fast as l1 (factor 2), l3 none (1);
    # the spine is the job's root: one switch, factor 1
    assert w[0] is None and w[3] is None
    assert w[1].tolist() == [1, 1, 2, 1] and w[2].tolist() == [1, 1, 1]
    # no LinkSpeed, or the same on every switch (Slurm before 25.11 prints
    # LinkSpeed=1 for each): no weights, the rule compares volumes as before
    plain = parse_topology_conf(SPEEDS_CONF.replace(" LinkSpeed=100", "")
                                .replace(" LinkSpeed=50", "").replace(" LinkSpeed=40", ""))
    assert layout_link_weights(_layout(plain), plain) is None
    same = parse_topology_conf(SPEEDS_CONF.replace("LinkSpeed=50", "LinkSpeed=100"))
    assert layout_link_weights(_layout(same), same) is None
    assert layout_link_weights(_layout(tree), None) is None


def test_layout_link_weights_are_zero_on_padding_levels():
    tree = parse_topology_conf("""\
SwitchName=l1 Nodes=n1 LinkSpeed=20
SwitchName=l4 Nodes=x1 LinkSpeed=10
SwitchName=pod1 Switches=l1
SwitchName=core Switches=pod1,l4
""")
    layout = _layout(tree, (2, 2), ("n1", "x1"))
    w = layout_link_weights(layout, tree)
    assert w[1].tolist() == [1, 2]  # x1's link into the slower l4
    assert w[2].tolist() == [1, 1]
    assert w[3].tolist() == [1, 0]  # x1's padded level: no link, never loaded


# -- node speeds --------------------------------------------------------------------------

def _with_features(line, feats):
    return line.replace("AvailableFeatures=(null) ActiveFeatures=(null)",
                        f"AvailableFeatures={feats},big ActiveFeatures={feats}")


def test_node_features_from_recorded_scontrol_show_node():
    lines = (DATA / "slurm-25.11" / "scontrol_nodes.txt").read_text().splitlines()
    assert set(parse_scontrol_node_features("\n".join(lines)).values()) == {()}
    text = "\n".join([_with_features(lines[0], "gpu,fast"), *lines[1:]])
    feats = parse_scontrol_node_features(text)
    assert feats["n1"] == ("gpu", "fast") and feats["n2"] == ()
    assert parse_scontrol_node_features("NodeName=a Features=x,y Sockets=1") == {"a": ("x", "y")}


def test_node_speeds_by_host_list_and_feature():
    cfg = parse_config('[speeds]\nnodes = { "n[1-2]" = 2.0 }\nfeatures = { gpu = 3 }\n',
                       "s.toml")
    feats = {"n1": ("ib",), "n3": ("gpu",), "n4": ()}
    got = config_node_speeds(cfg.speeds, cfg.path, ["n1", "n2", "n3", "n4"], feats)
    assert got == {"n1": 2.0, "n2": 2.0, "n3": 3.0, "n4": 1.0}
    layout = _layout(parse_topology_conf(SPEEDS_CONF))
    assert layout_pe_speeds(layout, got).tolist() == [2, 2, 2, 2, 3, 3, 1, 1]


def test_a_node_matched_twice_names_both_keys():
    with pytest.raises(SpeedsError, match=r"s.toml: \[speeds\]: nodes 'n\[1-2\]' and "
                                          r"features 'gpu' both match node n2"):
        node_speeds(["n1", "n2"], {"n[1-2]": 2.0}, {"gpu": 3.0}, {"n2": ("gpu",)},
                    "s.toml: [speeds]")
    with pytest.raises(SpeedsError, match="features 'a' and features 'b' both match node n1"):
        node_speeds(["n1"], {}, {"a": 2.0, "b": 3.0}, {"n1": ("a", "b")})
    with pytest.raises(SpeedsError, match="features: the nodes' Slurm features are needed"):
        node_speeds(["n1"], {}, {"a": 2.0})


@pytest.mark.parametrize("text,msg", [
    ('[speeds]\nnodes = { "n[1-" = 2.0 }\n', r"x.toml: \[speeds\] nodes: 'n\[1-': unbalanced"),
    ('[speeds]\nnodes = { "n1" = -2 }\n', r"x.toml: \[speeds\] nodes: 'n1': must be a positive"),
    ('[speeds]\nnodes = { "n1" = 0 }\n', r"x.toml: \[speeds\] nodes: 'n1': must be a positive"),
    ('[speeds]\nnodes = { "n1" = "fast" }\n', r"\[speeds\] nodes: 'n1': must be a positive"),
    ('[speeds]\nnodes = { "n[1-4]" = 2, "n[3-8]" = 1 }\n',
     r"x.toml: \[speeds\] nodes: 'n\[1-4\]' and 'n\[3-8\]' both name node n3"),
    ('[speeds]\nfeatures = { "a b" = 2 }\n', r"\[speeds\] features: 'a b': not a Slurm feature"),
    ('[speeds]\nfeatures = { gpu = inf }\n', r"\[speeds\] features: 'gpu': must be a positive"),
    ('[speeds]\nnode = {}\n', r"x.toml: \[speeds\] unknown key 'node'"),
    ('[speeds]\nnodes = 2\n', r"\[speeds\] nodes: must be a table"),
])
def test_speeds_config_errors_name_file_and_key(text, msg):
    with pytest.raises(ConfigError, match=msg):
        parse_config(text, "x.toml")


def test_speeds_config_check_prints_the_tables():
    from slurm_plugin.site.config import format_effective

    cfg = parse_config('[speeds.nodes]\n"n[1-16]" = 2\n[speeds.features]\ngpu = 1.5\n',
                       "s.toml")
    out = format_effective(cfg)
    assert 'nodes = {"n[1-16]" = 2.0}    # s.toml' in out
    assert 'features = {"gpu" = 1.5}    # s.toml' in out
    assert "features = {}    # default" in format_effective(parse_config("", "d.toml"))


# -- the --speeds file --------------------------------------------------------------------

def test_pe_speeds_file():
    text = "# PES SPEED\n0-3 2.0\n\n5,7-8 0.5   # slow ones\n9 1e0\n"
    assert parse_pe_speeds(text, "s.txt", 10).tolist() == [2, 2, 2, 2, 1, 0.5, 1, 0.5, 0.5, 1]


@pytest.mark.parametrize("text,msg", [
    ("0-3 2.0\n4 2 3\n", r"s.txt:2: expected 'PES SPEED'"),
    ("# x\n0-3 fast\n", r"s.txt:2: speed must be a positive number, got 'fast'"),
    ("0-3 -1\n", r"s.txt:1: speed must be a positive"),
    ("3-1 1\n", r"s.txt:1: bad PE list '3-1'"),
    ("a 1\n", r"s.txt:1: bad PE list 'a'"),
    ("0-9 1\n", r"s.txt:1: PE 9 is out of range: the machine has 8 PEs"),
    ("0-3 1\n\n2 5\n", r"s.txt:3: PE 2 already has a speed \(line 1\)"),
    ("1,1 5\n", r"s.txt:1: PE 1 is listed twice"),
])
def test_pe_speeds_file_errors_name_file_and_line(text, msg):
    with pytest.raises(SpeedsError, match=msg) as info:
        parse_pe_speeds(text, "s.txt", 8)
    assert info.value.source == "s.txt" and info.value.line == int(msg.split(":")[1][0])
    assert np.all(parse_pe_speeds("", "s.txt", 3) == 1)


def test_speeds_check_for_config_check():
    from slurm_plugin.machine.speeds import speeds_check

    assert speeds_check(parse_config("", "d.toml")) == ([], [])
    cfg = parse_config('[speeds]\nnodes = { "n[1-4]" = 2 }\nfeatures = { gpu = 3, knl = 1 }\n',
                       "s.toml")
    lines, warnings = speeds_check(cfg)
    assert lines == ["# [speeds] 1 host list(s) naming 4 node(s), 2 feature(s); other nodes "
                     "have speed 1.0"] and warnings == []
    _, warnings = speeds_check(cfg, {"n1": (), "n2": ("gpu",), "g1": ("gpu",)})
    assert warnings == ["s.toml: [speeds]: nodes 'n[1-4]' and features 'gpu' both match node "
                        "n2: jobs on node n2 get no speeds",
                        "s.toml: [speeds] features: no node has 'knl'"]
