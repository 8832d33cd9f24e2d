"""Profiles with several measured runs: a placement is applied only when it beats
Slurm's default under every sample; store format and `profile import --add-sample`."""

import argparse
import json

import numpy as np
import pytest

from mapper import CommGraph
from mapper.io.mtx_file import write_mtx
from mapper.objectives.qap import evaluate
from slurm_plugin.commands.profile_cli import add_profile_commands
from slurm_plugin.machine.distribution import default_placements
from slurm_plugin.machine.layout import build_layout
from slurm_plugin.machine.speeds import layout_link_weights
from slurm_plugin.modes.graph_job import make_plan
from slurm_plugin.profiles.samples import SampledGraph, check_samples, common_traffic, with_samples
from slurm_plugin.profiles.store import ProfileError, ProfileStore, resolve_profile
from slurm_plugin.slurm.allocation import Allocation
from slurm_plugin.slurm.topology import NodeShape, parse_topology_conf
from tests.helpers.paths import TEST_DATA

DATA = TEST_DATA
# the netns bench's machine: 4 nodes x 2 slots, two leaves of two nodes under a spine
TREE = ("SwitchName=leaf0 Nodes=n0,n1\nSwitchName=leaf1 Nodes=n2,n3\n"
        "SwitchName=spine Switches=leaf[0-1]\n")


def layout():
    alloc = Allocation("1", ("n0", "n1", "n2", "n3"), (2, 2, 2, 2), 1)
    return build_layout(alloc, NodeShape(1, 2), parse_topology_conf(TREE),
                        [1, 10, 100, 1000])


def graph(edges, source="g", n=8):
    u, v, w = zip(*edges, strict=True)
    return CommGraph.from_edges(u, v, w, n=n, source=source)


# Block puts ranks 2k, 2k+1 on node k, nodes 0-1 on leaf 0.  Sample A: heavy traffic
# between rank r and r+4 (on the other leaf under block): rankmap pairs them up.
# Sample B: heavy traffic inside block's nodes (2k <-> 2k+1), which A's placement splits.
A = graph([(r, r + 4, 1000.0) for r in range(4)], "A")
B = graph([(2 * k, 2 * k + 1, 1000.0) for k in range(4)] + [(0, 4, 10.0)], "B")


def test_check_samples_hand_computed():
    lay = layout()
    block = default_placements(lay)["block"]
    cand = np.array([0, 2, 4, 6, 1, 3, 5, 7])  # rank r+4 beside rank r on one node
    v = check_samples([A, B], ["A", "B"], lay.hierarchy, cand, block, lay.network_levels)
    # under A: block J = 4 x 1000 x 1000 (root), candidate 4 x 1000 x 1 (same node)
    assert v[0].j_change == pytest.approx(4e3 / 4e6 - 1) and v[0].agrees
    # under B: block 4000 x 1 + 10 x 1000; candidate: pairs 0-1 (PEs 0, 2: leaf), 2-3
    # (PEs 4, 6: leaf), 4-5 (1, 3: leaf), 6-7 (5, 7: leaf), 0-4 (0, 1: node)
    jb, jc = 4000 + 10 * 1000, 4000 * 100 + 10 * 1
    assert v[1].j_change == pytest.approx(jc / jb - 1) and not v[1].agrees
    assert evaluate(B, lay.hierarchy, cand).objective == jc
    assert "above" in v[1].describe() and "sample B" in v[1].describe()


def test_check_samples_refuses_a_raised_link_even_with_lower_j():
    lay = layout()
    block = default_placements(lay)["block"]
    # pairs 0-2 and 1-3 cross node 0 -> node 1 under block; ranks 0 and 2 also talk to
    # the other leaf.  The candidate swaps ranks 1 and 2 (node 0 = ranks 0, 2).
    c = graph([(0, 2, 10.0), (1, 3, 10.0), (0, 4, 30.0), (2, 6, 30.0)], "C")
    cand = np.array([0, 2, 1, 3, 4, 5, 6, 7])
    (v,) = check_samples([c], ["C"], lay.hierarchy, cand, block, lay.network_levels)
    # J: block 20 x 100 + 60 x 1000 = 62000, candidate 20 x 1 + 60 x 1000 = 60020;
    # busiest node link: block 30 + 20 = 50 (node 0 and node 1), candidate 60 (node 0)
    assert v.j_change == pytest.approx(60020 / 62000 - 1)
    assert v.raised == "node" and v.link_ratio == pytest.approx(60 / 50)
    assert not v.agrees and "1.20x" in v.describe()
    # a candidate within the tolerance (2 %) of block's busiest link passes
    (w,) = check_samples([c], ["C"], lay.hierarchy, cand, block, lay.network_levels,
                         link_tolerance=0.25)
    assert w.agrees


@pytest.mark.parametrize(("slow", "raised"), [("leaf0", True), ("leaf1", False)])
def test_check_samples_weighs_node_links_by_link_speed(slow, raised):
    # sample C of the test above, the leaf switch ``slow`` at half the other's
    # LinkSpeed: its nodes' links cost 2 (slurm_plugin.machine.speeds.layout_link_weights)
    fast = "leaf1" if slow == "leaf0" else "leaf0"
    conf = (TREE.replace(f"SwitchName={slow} ", f"SwitchName={slow} LinkSpeed=50 ")
            .replace(f"SwitchName={fast} ", f"SwitchName={fast} LinkSpeed=100 "))
    tree = parse_topology_conf(conf)
    alloc = Allocation("1", ("n0", "n1", "n2", "n3"), (2, 2, 2, 2), 1)
    lay = build_layout(alloc, NodeShape(1, 2), tree, [1, 10, 100, 1000])
    weights = layout_link_weights(lay, tree)
    block = default_placements(lay)["block"]
    c = graph([(0, 2, 10.0), (1, 3, 10.0), (0, 4, 30.0), (2, 6, 30.0)], "C")
    cand = np.array([0, 2, 1, 3, 4, 5, 6, 7])
    (v,) = check_samples([c], ["C"], lay.hierarchy, cand, block, lay.network_levels,
                         link_weights=weights)
    # node cuts: block 50, 50, 30, 30; candidate 60, 0, 30, 30 (raw: 1.20x, refused)
    if raised:  # leaf0 slow: loads block 100, 100, 30, 30; candidate 120, 0, 30, 30
        assert v.raised == "node" and v.link_ratio == pytest.approx(1.2)
        assert "1.20x the load/capacity of" in v.describe() and not v.agrees
    else:  # leaf1 slow: block 50, 50, 60, 60; candidate 60, 0, 60, 60: not raised
        assert v.raised is None and v.agrees


def test_plan_keeps_block_when_a_sample_disagrees_and_says_which():
    lay = layout()
    prof = with_samples(A, [A, B], ["run1.mtx", "run2.mtx"])
    plan = make_plan(lay, prof, algorithm="topdown+n10", time_limit=10,
                     files=("machinefile",))
    assert plan.kept_default and not plan.files
    assert "run2.mtx" in plan.summary and "above" in plan.summary
    assert "1 of 2 samples disagree" in plan.summary
    record = json.loads(plan.report_json)
    assert "run2.mtx" in record["rejected"]["topdown+n10"]
    assert np.array_equal(plan.result.mapping, default_placements(lay)["block"])
    # the same profile without samples is applied (A alone is a clear win)
    alone = make_plan(lay, A, algorithm="topdown+n10", time_limit=10, files=("machinefile",))
    assert alone.applied and alone.files


def test_plan_applies_when_consistent_samples_agree():
    lay = layout()
    rng = np.random.default_rng(1)
    # LAMMPS-like: the same halo pattern, ~0.5 % noise per pair between runs
    runs = [graph([(r, r + 4, 1000.0 * (1 + 0.005 * rng.standard_normal()))
                   for r in range(4)] + [(0, 1, 50.0)], f"run{i}") for i in range(3)]
    prof = with_samples(runs[0], runs, ["r0", "r1", "r2"])
    plan = make_plan(lay, prof, algorithm="topdown+n10", time_limit=10,
                     files=("machinefile",))
    assert plan.applied and plan.files["machinefile"]
    note = next(n for n in plan.notes if "measured sample" in n)
    assert "r0 -" in note and "r1 -" in note and "r2 -" in note
    block = default_placements(lay)["block"]
    for g in runs:
        assert (evaluate(g, lay.hierarchy, plan.result.mapping).objective
                < evaluate(g, lay.hierarchy, block).objective)


def test_common_traffic_is_the_elementwise_minimum():
    x = graph([(0, 1, 5.0), (1, 2, 7.0), (2, 3, 1.0)], "x", n=4)
    y = graph([(0, 1, 3.0), (1, 2, 9.0), (0, 3, 4.0)], "y", n=4)
    m = common_traffic([x, y]).to_csr().toarray()
    want = np.zeros((4, 4))
    want[0, 1] = want[1, 0] = 3.0
    want[1, 2] = want[2, 1] = 7.0
    assert np.array_equal(m, want)


def test_with_samples_checks_rank_counts():
    with pytest.raises(ValueError, match="4 ranks, the profile has 8"):
        with_samples(A, [graph([(0, 1, 1.0)], "s", n=4)], ["s"])


# -- store -----------------------------------------------------------------------------

def _store(tmp_path, samples_line, files=(("a.mtx", A), ("b.mtx", B))):
    for name, g in files:
        write_mtx(g, tmp_path / name)
    (tmp_path / "p.toml").write_text(f'ranks = 8\nunits = "bytes"\nfile = "a.mtx"\n'
                                     f'{samples_line}\n')
    return tmp_path


def test_store_loads_samples_and_the_plan_uses_them(tmp_path):
    store = _store(tmp_path, 'samples = ["a.mtx", "b.mtx"]')
    g = resolve_profile("p", 8, [store])
    assert isinstance(g, SampledGraph) and g.sample_names == ("a.mtx", "b.mtx")
    assert g.samples[0] is not None and g.samples[1].total_volume == B.total_volume
    assert g.total_volume == A.total_volume  # the profile itself is `file`
    plan = make_plan(layout(), g, algorithm="topdown+n10", time_limit=10)
    assert plan.kept_default and "b.mtx" in plan.summary


def test_store_without_samples_is_a_plain_graph(tmp_path):
    store = _store(tmp_path, "")
    g = ProfileStore([store]).load("p", 8)
    assert not isinstance(g, SampledGraph)


@pytest.mark.parametrize("line,msg", [
    ('samples = ["a.mtx", "nope.mtx"]', r"p.toml:4: samples\[1\] 'nope.mtx' is missing"),
    ("samples = [1]", r"p.toml:4: samples\[0\]: must be a file name \(str\), got int"),
    ("samples = []", r"p.toml:4: samples: empty list"),
    ('samples = ["a.mtx", "a.mtx"]', r"p.toml:4: samples\[1\]: 'a.mtx' is listed twice"),
    ('samples = ["../x.mtx"]', r"p.toml:4: samples\[0\]: must be a path inside the store"),
    ('samples = "a.mtx"', r"p.toml: samples: must be list"),
])
def test_store_sample_errors_name_file_and_line(tmp_path, line, msg):
    store = _store(tmp_path, line)
    with pytest.raises(ProfileError, match=msg):
        ProfileStore([store]).find("p")


def test_damaged_or_mismatched_sample_files(tmp_path):
    store = _store(tmp_path, 'samples = ["a.mtx", "bad.mtx"]')
    (store / "bad.mtx").write_text("%%MatrixMarket matrix coordinate real symmetric\n"
                                   "8 8 1\n9 1 5\n")
    with pytest.raises(ProfileError, match=r"sample .*bad.mtx:3: .*"):
        ProfileStore([store]).load("p", 8)
    write_mtx(graph([(0, 1, 1.0)], "small", n=4), store / "bad.mtx")
    with pytest.raises(ProfileError, match=r"sample bad.mtx has 4 ranks, the job has 8"):
        ProfileStore([store]).load("p", 8)


def test_mesh_entry_cannot_have_samples(tmp_path):
    (tmp_path / "m.graph").write_text("2 1\n2\n1\n")
    (tmp_path / "m.toml").write_text('kind = "mesh"\nfile = "m.graph"\nsamples = ["m.graph"]\n')
    with pytest.raises(ProfileError, match="m.toml: samples: a mesh entry has no samples"):
        ProfileStore([tmp_path]).find("m")


# -- rankmap profile import --add-sample ------------------------------------------------

def _cli(argv):
    ap = argparse.ArgumentParser()
    add_profile_commands(ap.add_subparsers(dest="command"))
    args = ap.parse_args(argv)
    return args.func(args)


def test_import_add_sample_appends_runs(tmp_path, capsys):
    prof = str(DATA / "ompi_monitoring" / "prof")
    store = tmp_path / "st"
    assert _cli(["profile", "import", prof, "--name", "ring", "--store", str(store),
                 "--description", "a ring"]) == 0
    assert _cli(["profile", "import", prof, "--name", "ring", "--store", str(store),
                 "--add-sample"]) == 0
    assert _cli(["profile", "import", prof, "--name", "ring", "--store", str(store),
                 "--add-sample"]) == 0
    info = ProfileStore([store]).find("ring")
    assert [p.name for p in info.samples] == ["ring.mtx", "ring.s1.mtx", "ring.s2.mtx"]
    assert info.description == "a ring" and info.file.name == "ring.mtx"
    g = ProfileStore([store]).load("ring", 4)
    assert isinstance(g, SampledGraph) and len(g.samples) == 3
    assert "sample 3 (ring.s2.mtx)" in capsys.readouterr().out


def test_import_add_sample_errors(tmp_path):
    prof = str(DATA / "ompi_monitoring" / "prof")
    with pytest.raises(ProfileError, match="no profile 'x' in .*import the first run"):
        _cli(["profile", "import", prof, "--name", "x", "--store", str(tmp_path),
              "--add-sample"])
    write_mtx(A, tmp_path / "eight.mtx")
    (tmp_path / "eight.toml").write_text('ranks = 8\nfile = "eight.mtx"\n')
    with pytest.raises(ProfileError, match="this run has 4 ranks, profile 'eight'"):
        _cli(["profile", "import", prof, "--name", "eight", "--store", str(tmp_path),
              "--add-sample"])
    assert not (tmp_path / "eight.s1.mtx").exists()
