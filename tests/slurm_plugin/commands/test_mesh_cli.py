"""``rankmap partition`` and ``rankmap evaluate-partition``: files, JSON, errors."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from mapper.errors import RankmapError
from mapper.io.mesh_file import read_mesh, write_mesh_metis
from mapper.mesh import evaluate_partition, mesh_from_graph
from mapper.mesh.architecture import architecture_from_hierarchy
from mapper.mesh.method_names import PARTITION_METHODS
from mapper.model.graph import CommGraph
from mapper.model.machine import Hierarchy
from slurm_plugin.commands.mesh_cli import add_evaluate_partition_command, add_partition_command

MACHINE = ["--hierarchy", "4:3:2", "--distances", "1:10:100"]


def run(argv):
    """Parse and run like slurm_plugin.commands.cli.main: RankmapError -> one line, exit 2."""
    parser = argparse.ArgumentParser(prog="rankmap")
    sub = parser.add_subparsers(dest="command", required=True)
    add_partition_command(sub)
    add_evaluate_partition_command(sub)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except RankmapError as exc:
        print(f"rankmap: error: {exc}")
        return 2


@pytest.fixture
def mesh_file(tmp_path):
    a = b = 16
    idx = np.arange(a * b).reshape(a, b)
    u = np.concatenate([idx[:, :-1].ravel(), idx[:-1, :].ravel()])
    v = np.concatenate([idx[:, 1:].ravel(), idx[1:, :].ravel()])
    w = np.random.default_rng(1).integers(1, 3, a * b)
    mesh = mesh_from_graph(CommGraph.from_edges(u, v, np.ones(len(u)), n=a * b), w)
    path = tmp_path / "grid.graph"
    write_mesh_metis(mesh, path)
    return path


def lines(path):
    return [int(x) for x in path.read_text().split()]


@pytest.mark.parametrize("method", PARTITION_METHODS)
def test_partition_end_to_end(method, mesh_file, tmp_path, capsys):
    part, place = tmp_path / "out.part", tmp_path / "out.map"
    assert run(["partition", str(mesh_file), *MACHINE, "--method", method,
                "--output", str(part), "--placement", str(place), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    ranks, pes = lines(part), lines(place)
    assert len(ranks) == 256 and set(ranks) == set(range(24))   # every rank owns vertices
    assert sorted(pes) == list(range(24))
    assert out["method"] == method and out["vertices"] == 256 and out["parts"] == 24
    assert set(out["seconds"]) >= {"read", "partition", "quotient", "map", "evaluate",
                                   "write", "total"}
    # the printed metrics are those of the files: recomputed here from scratch
    mesh = read_mesh(mesh_file)
    h = Hierarchy.parse("4:3:2", "1:10:100")
    arch = architecture_from_hierarchy(h, [1, 10, 100])
    ref = evaluate_partition(mesh, np.array(pes)[np.array(ranks)], arch, hierarchy=h).to_dict()
    assert {k: out[k] for k in ref} == ref
    # evaluate-partition prints the same numbers
    assert run(["evaluate-partition", str(mesh_file), str(part), "--placement", str(place),
                *MACHINE, "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert {k: again[k] for k in ref} == ref


def test_speeds_file_and_link_costs(mesh_file, tmp_path, capsys):
    speeds = tmp_path / "speeds.txt"
    speeds.write_text("# PES SPEED\n0-11 2.0\n")
    part = tmp_path / "p.part"
    base = ["partition", str(mesh_file), *MACHINE, "--output", str(part), "--json"]
    assert run([*base, "--speeds", str(speeds)]) == 0
    out = json.loads(capsys.readouterr().out)
    sizes = np.bincount(np.array(lines(part)), minlength=24)
    assert sizes[:12].sum() > 1.8 * sizes[12:].sum()       # fast PEs got twice the work
    assert out["map_algorithm"] == "identity"
    assert any("speeds differ" in n for n in out["notes"])
    # QPL above the node: 4:3 PEs per node, so e* between the two switches' halves is
    # 100^2 + 100^2 instead of 100; J (distances) is the same, MaxElTime is not
    assert run([*base, "--map", "identity"]) == 0
    flat = json.loads(capsys.readouterr().out)
    assert run([*base, "--map", "identity", "--node-level", "2"]) == 0
    qpl = json.loads(capsys.readouterr().out)
    assert qpl["objective"] == flat["objective"] and qpl["edge_cut"] == flat["edge_cut"]
    assert qpl["max_el_time"] > flat["max_el_time"]
    # the human summary
    assert run(["partition", str(mesh_file), *MACHINE, "--output", str(part)]) == 0
    text = capsys.readouterr().out
    assert "256 vertices" in text and "MaxElTime" in text and f"wrote {part}" in text


@pytest.mark.parametrize("content, where, what", [
    ("0\n" * 255, ":256:", "256 vertices but the partition file has 255 lines"),
    ("0\n" * 257, ":257:", "has 257 lines"),
    ("0\n" * 9 + "1.5\n" + "0\n" * 246, ":10:", "expected one rank"),
    ("# ranks\n" + "0\n" * 99 + "24\n" + "0\n" * 156, ":101:", "rank 24 of vertex 99 is "
     "outside 0..23"),
    ("0\n" * 20 + "-1\n" + "0\n" * 235, ":21:", "outside"),
])
def test_bad_partition_file(content, where, what, mesh_file, tmp_path, capsys):
    bad = tmp_path / "bad.part"
    bad.write_text(content)
    assert run(["evaluate-partition", str(mesh_file), str(bad), *MACHINE]) == 2
    msg = capsys.readouterr().out.strip()
    assert msg.startswith(f"rankmap: error: {bad}{where}") and what in msg
    assert "\n" not in msg and "Traceback" not in msg


def test_other_input_errors(mesh_file, tmp_path, capsys):
    part = tmp_path / "p.part"
    part.write_text("0\n" * 256)
    dup = tmp_path / "dup.map"
    dup.write_text("0\n" * 24)
    speeds = tmp_path / "s.txt"
    speeds.write_text("0-3 2\n2 1\n")
    cases = [
        (["evaluate-partition", str(mesh_file), str(part), *MACHINE, "--placement", str(dup)],
         f"{dup}: PE 0 is given to more than one rank"),
        (["partition", str(mesh_file), *MACHINE, "--speeds", str(speeds), "--output",
          str(part)], f"{speeds}:2: PE 2 already has a speed"),
        (["partition", str(mesh_file), *MACHINE, "--link-costs", "1:2", "--output",
          str(part)], "--link-costs '1:2' has 2 levels"),
        (["partition", str(mesh_file), *MACHINE, "--node-level", "3", "--output", str(part)],
         "--node-level 3"),
        (["partition", str(mesh_file), *MACHINE, "--map", "best", "--output", str(part)],
         "unknown algorithm 'best'"),
        (["partition", str(mesh_file), "--hierarchy", "16:16:2", "--distances", "1:10:100",
          "--output", str(part)], "cannot make 512 non-empty blocks"),
    ]
    for argv, what in cases:
        assert run(argv) == 2, argv
        msg = capsys.readouterr().out.strip()
        assert what in msg and "\n" not in msg, msg
    bad_mesh = tmp_path / "bad.graph"
    bad_mesh.write_text("3 2 10\n0 2\n1 1 3\n1 2\n")  # weight 0 on line 2
    assert run(["partition", str(bad_mesh), "--hierarchy", "3", "--distances", "1",
                "--output", str(part)]) == 2
    assert f"{bad_mesh}:2" in capsys.readouterr().out
