"""[network]: config keys and their errors, hop files and node-order files (file:line
errors), the generated matrices by name, and what `rankmap config check` says."""

import re

import numpy as np
import pytest

from mapper.errors import RankmapError
from slurm_plugin.commands.config_check import network_check
from slurm_plugin.machine.network_source import (
    NetworkError,
    load_network,
    parse_hop_file,
    parse_node_order,
)
from slurm_plugin.site.config import (
    NETWORK_KEYS,
    ConfigError,
    format_effective,
    load_config,
    parse_config,
)
from tests.helpers.paths import REPO

EXAMPLE = REPO / "deploy" / "rankmap.toml.example"

TORUS = '[network]\nkind = "torus"\ndims = [4]\nnodes = "n[0-3]"\n'


def test_absent_network_changes_nothing():
    cfg = parse_config("", "x.toml")
    assert cfg.network is None
    assert cfg.solver.algorithm == "fast"  # the default preset: topdown+n10
    assert "[network]" not in format_effective(cfg)


def test_torus_table_and_the_hop_default_algorithm():
    cfg = parse_config(TORUS, "x.toml")
    net = cfg.network
    assert (net.kind, net.params, net.nodes, net.slots) == (
        "torus", {"dims": [4]}, ("n0", "n1", "n2", "n3"), 4)
    assert (net.per_hop, net.base) == (100.0, 0.0)
    assert cfg.solver.algorithm == "ohtma+n10"
    assert cfg.sources["solver"]["algorithm"] == "default for [network]"
    text = format_effective(cfg)
    assert '[network]\nkind = "torus"    # x.toml\ndims = [4]    # x.toml\n' in text
    assert 'nodes = "n[0-3]"    # x.toml' in text and "per_hop = 100.0    # default" in text


def test_site_algorithm_is_kept_with_a_network():
    cfg = parse_config(TORUS + '[solver]\nalgorithm = "greedy+n10"\n', "x.toml")
    assert cfg.solver.algorithm == "greedy+n10"
    assert cfg.sources["solver"]["algorithm"] == "x.toml"


def test_nodes_order_is_kept_when_it_is_not_sorted():
    cfg = parse_config('[network]\nkind = "mesh"\ndims = [2, 2]\nnodes = "b,a,c"\n', "x.toml")
    assert cfg.network.nodes == ("b", "a", "c")
    assert 'nodes = "b,a,c"' in format_effective(cfg)


@pytest.mark.parametrize("body,msg", [
    ('dims = [4]\nnodes = "n1"\n', r"x.toml: \[network\] kind: required"),
    ('kind = "ring"\n', r"x.toml: \[network\] kind: must be one of file, mesh, torus"),
    ('kind = "torus"\nnodes = "n1"\n', r"\[network\] dims: required for kind = 'torus'"),
    ('kind = "torus"\ndims = [4, 0]\nnodes = "n1"\n', r"\[network\] dims: must be a list of "
                                                      "positive integers"),
    ('kind = "torus"\ndims = []\nnodes = "n1"\n', r"\[network\] dims: must be a non-empty"),
    ('kind = "torus"\ndims = [4]\nrows = 2\nnodes = "n1"\n',
     r"\[network\] rows: only for kind = 'tianhe3' \(kind is 'torus'\)"),
    ('kind = "torus"\ndims = [4]\n', r"\[network\] nodes: give exactly one of nodes"),
    ('kind = "torus"\ndims = [4]\nnodes = "n1"\nnode_order = "/x"\n',
     r"\[network\] nodes: give exactly one"),
    ('kind = "torus"\ndims = [2]\nnodes = "n[1-3]"\n',
     r"\[network\] nodes: 3 nodes but torus \[2\] has only 2 slots"),
    ('kind = "torus"\ndims = [4]\nnodes = "n1,n2,n1"\n', r"\[network\] nodes: node n1 is "
                                                         "listed twice"),
    ('kind = "torus"\ndims = [4]\nnodes = "n[3-1]"\n', r"\[network\] nodes: "),
    ('kind = "torus"\ndims = [128, 128]\nnodes = "n1"\n',
     r"\[network\] dims: torus \[128, 128\] has 16384 slots, more than the 8192"),
    ('kind = "tianhe3"\nrows = 2\ncols = 2\nnodes_per_chip = 2\nchip_hops = [2, 1, 3]\n'
     'nodes = "n1"\n', r"\[network\] chip_hops: must be three integers 0 <= same chip"),
    ('kind = "tianhe3"\nrows = 2\nnodes_per_chip = 2\nnodes = "n1"\n',
     r"\[network\] cols: required for kind = 'tianhe3'"),
    ('kind = "dragonfly"\ngroups = 2\nrouters = 0\nnodes_per_router = 1\nnodes = "n1"\n',
     r"\[network\] routers: must be a positive integer"),
    ('kind = "file"\n', r"\[network\] hop_file: required for kind = 'file'"),
    ('kind = "file"\nhop_file = "hops.txt"\n', r"\[network\] hop_file: must be an absolute"),
    ('kind = "file"\nhop_file = "/h"\nnodes = "n1"\n',
     r"\[network\] nodes: only for kind = 'mesh' or 'torus'"),
    ('kind = "torus"\ndims = [4]\nnodes = "n1"\nper_hop = -1\n',
     r"\[network\] per_hop: must be a non-negative number"),
    ('kind = "torus"\ndims = [4]\nnodes = "n1"\nbase = "x"\n',
     r"\[network\] base: must be a non-negative number"),
    ('kind = "torus"\ndims = [4]\nnodes = "n1"\ncolour = 1\n',
     r"\[network\] unknown key 'colour'"),
])
def test_network_key_errors_name_the_file_and_key(body, msg):
    with pytest.raises(ConfigError, match=msg):
        parse_config("[network]\n" + body, "x.toml")


def test_network_must_be_a_table():
    with pytest.raises(ConfigError, match=r"x.toml: network: must be a \[network\] table"):
        parse_config('network = 3\n', "x.toml")


def test_example_documents_every_network_key():
    text = EXAMPLE.read_text()
    for key in NETWORK_KEYS:
        assert re.search(rf"^# {key} = ", text, re.M), key
    # the commented block, uncommented, is a valid configuration
    block = text[text.index("# [network]"):text.index("# Site rules")]
    lines = [ln[2:].split("  #")[0] for ln in block.splitlines()
             if re.match(r"# (\[network\]$|(kind|dims|nodes|per_hop|base) = )", ln)]
    cfg = parse_config("\n".join(lines) + "\n", "example")
    assert cfg.network.describe() == "torus [4, 4, 4]" and len(cfg.network.nodes) == 64


# -- hop files -------------------------------------------------------------------------

GOOD = """# measured hops
n[1-2] n5   # three nodes

0 1 2
1 0 1   # n2
2 1 0
"""


def test_hop_file_header_and_rows():
    names, hops = parse_hop_file(GOOD, "/h.txt")
    assert names == ("n1", "n2", "n5")
    assert hops.tolist() == [[0, 1, 2], [1, 0, 1], [2, 1, 0]]


@pytest.mark.parametrize("text,msg", [
    ("", r"/h.txt:1: empty hop file"),
    ("n[1-2]\n0 1\n2 0\n", r"/h.txt:2: n1 to n2 is 1 but line 3 has n2 to n1 = 2; the "
                           "matrix must be symmetric"),
    ("n[1-2]\n0 -1\n-1 0\n", r"/h.txt:2: entry 2 \(n2\) is -1; hops must be finite and "
                             "non-negative"),
    ("n[1-2]\n0 1\n1 0 3\n", r"/h.txt:3: 3 entries, expected 2"),
    ("n[1-3]\n0 1 1\n1 0 1\n", r"/h.txt:3: 2 matrix rows for the 3 nodes named on line 1"),
    ("n[1-2]\n0 1\n1 0\n1 1\n", r"/h.txt:4: 3 matrix rows for the 2 nodes"),
    ("n[1-2]\n0 x\n1 0\n", r"/h.txt:2: expected numbers"),
    ("n[1-2]\n0 1\n1 2\n", r"/h.txt:3: n2 to itself is 2; the diagonal must be 0"),
    ("n1 n[0-1]\n0 1 1\n1 0 1\n1 1 0\n", r"/h.txt:1: node n1 is listed twice"),
    ("n[2-1\n0\n", r"/h.txt:1: "),
    ("n[1-2]\n0 inf\ninf 0\n", r"/h.txt:2: entry 2 \(n2\) is inf"),
])
def test_bad_hop_files_give_file_line_errors(text, msg):
    with pytest.raises(NetworkError, match=msg):
        parse_hop_file(text, "/h.txt")


def test_node_order_file():
    assert parse_node_order("# slot order\nb\n\na\nc[1-2]\n", "/o", 6) == ("b", "a", "c1", "c2")
    with pytest.raises(NetworkError, match=r"/o:3: node a is listed twice \(first on line 1\)"):
        parse_node_order("a\nb\na\n", "/o", 6)
    with pytest.raises(NetworkError, match=r"/o:2: 3 nodes but the network has only 2 slots"):
        parse_node_order("a\nb c\n", "/o", 2)
    with pytest.raises(NetworkError, match=r"/o:1: names no node"):
        parse_node_order("# nothing\n", "/o", 2)


# -- loading: files read, matrices generated -------------------------------------------

def _load(tmp_path, body: str):
    cfg_path = tmp_path / "rankmap.toml"
    cfg_path.write_text("[network]\n" + body)
    return load_network(load_config(str(cfg_path)).network)


def test_load_hop_file_and_restrict_to_a_job(tmp_path):
    (tmp_path / "hops.txt").write_text(GOOD)
    net = _load(tmp_path, f'kind = "file"\nhop_file = "{tmp_path}/hops.txt"\nper_hop = 3\n')
    assert net.names == ("n1", "n2", "n5") and net.per_hop == 3.0
    assert net.job_hops(["n5", "n1"]).tolist() == [[0, 2], [2, 0]]
    with pytest.raises(NetworkError, match=rf"node\(s\) n\[7,9\] of the job are not in the "
                                           rf"\[network\] topology \(hop file {tmp_path}/hops"
                                           rf".txt; line 1 of .* names n\[1-2,5\]\)"):
        net.job_hops(["n1", "n9", "n7"])


def test_missing_hop_file_names_file_and_key(tmp_path):
    with pytest.raises(NetworkError, match=rf"{tmp_path}/none.txt: cannot read \(\[network\] "
                                           rf"hop_file in {tmp_path}/rankmap.toml\)"):
        _load(tmp_path, f'kind = "file"\nhop_file = "{tmp_path}/none.txt"\n')


def test_torus_by_node_names_hand_counted(tmp_path):
    net = _load(tmp_path, 'kind = "torus"\ndims = [2, 3]\nnodes = "n[0-5]"\n')
    # slot = (x, y), y fastest; hops = sum of per-dimension wrap-around distances
    assert net.job_hops(["n0", "n1", "n2", "n5"]).tolist() == [
        [0, 1, 1, 2], [1, 0, 1, 2], [1, 1, 0, 1], [2, 2, 1, 0]]


def test_mesh_by_node_order_file(tmp_path):
    (tmp_path / "order").write_text("c3\nc0\n# the far corner\nc1\nc2\n")
    net = _load(tmp_path, f'kind = "mesh"\ndims = [2, 2]\nnode_order = "{tmp_path}/order"\n')
    # c3 at (0,0), c0 at (0,1), c1 at (1,0), c2 at (1,1)
    assert net.job_hops(["c3", "c2", "c0", "c1"]).tolist() == [
        [0, 2, 1, 1], [2, 0, 1, 1], [1, 1, 0, 2], [1, 1, 2, 0]]
    assert net.where == f"node_order {tmp_path}/order"


def test_tianhe3_hand_counted(tmp_path):
    net = _load(tmp_path, 'kind = "tianhe3"\nrows = 2\ncols = 2\nnodes_per_chip = 2\n'
                          'chip_hops = [1, 3, 5]\nnodes = "t[0-7]"\n')
    # t0,t1 chip (0,0); t2 chip (0,1); t4 chip (1,0); t6 chip (1,1)
    assert net.job_hops(["t0", "t1", "t2", "t4", "t6"]).tolist() == [
        [0, 1, 3, 3, 5], [1, 0, 3, 3, 5], [3, 3, 0, 5, 3], [3, 3, 5, 0, 3], [5, 5, 3, 3, 0]]


def test_dragonfly_hand_counted(tmp_path):
    net = _load(tmp_path, 'kind = "dragonfly"\ngroups = 2\nrouters = 2\n'
                          'nodes_per_router = 1\nnodes = "d[0-3]"\n')
    # router 0 of each group holds the one global link: d0 (g0 r0), d1 (g0 r1),
    # d2 (g1 r0), d3 (g1 r1); same group 3, across 3 (node, router, global link,
    # router, node) + one local link per end off the gateway
    assert net.job_hops([f"d{i}" for i in range(4)]).tolist() == [
        [0, 3, 3, 4], [3, 0, 4, 5], [3, 4, 0, 3], [4, 5, 3, 0]]


def test_network_errors_are_rankmap_errors_so_the_worker_falls_back():
    from slurm_plugin.lifecycle.job_worker import USER_FACING

    assert issubclass(NetworkError, RankmapError) and issubclass(NetworkError, USER_FACING)


# -- rankmap config check --------------------------------------------------------------

def test_config_check_summarises_the_network(tmp_path):
    cfg_path = tmp_path / "rankmap.toml"
    cfg_path.write_text(TORUS)
    lines, warnings = network_check(load_config(str(cfg_path)))
    assert warnings == []
    assert lines == ["# [network] torus [4]: 4 slots, 4 nodes named ([network] nodes in "
                     f"{cfg_path}), 1 to 2 hops between nodes; cost between nodes 0 + 100 x "
                     "hops"]
    assert network_check(parse_config("", "x")) == ([], [])


def test_config_check_warns_about_a_bad_hop_file_and_cheap_hops(tmp_path):
    (tmp_path / "hops.txt").write_text("n[1-2]\n0 1\n2 0\n")
    cfg_path = tmp_path / "rankmap.toml"
    cfg_path.write_text(f'[network]\nkind = "file"\nhop_file = "{tmp_path}/hops.txt"\n')
    lines, warnings = network_check(load_config(str(cfg_path)))
    assert lines == [] and len(warnings) == 1
    assert f"every job keeps Slurm's placement: {tmp_path}/hops.txt:2: n1 to n2" in warnings[0]
    cfg_path.write_text(TORUS + "per_hop = 4\nbase = 1\n")
    lines, warnings = network_check(load_config(str(cfg_path)))
    assert len(lines) == 1 and len(warnings) == 1
    assert "base + per_hop x 1 hops = 5 is below the same-node distance 10" in warnings[0]


def test_config_check_command_prints_network(tmp_path, capsys):
    import argparse

    from slurm_plugin.commands.config_check import check_command

    cfg_path = tmp_path / "rankmap.toml"
    cfg_path.write_text(TORUS)
    assert check_command(argparse.Namespace(config=str(cfg_path))) == 0
    out = capsys.readouterr().out
    assert '[network]\nkind = "torus"' in out and "# [network] torus [4]: 4 slots" in out


def test_generated_matrix_is_symmetric_with_zero_diagonal(tmp_path):
    net = _load(tmp_path, 'kind = "dragonfly"\ngroups = 5\nrouters = 3\n'
                          'nodes_per_router = 2\nnodes = "d[0-29]"\n')
    assert np.array_equal(net.hops, net.hops.T) and not np.diag(net.hops).any()
