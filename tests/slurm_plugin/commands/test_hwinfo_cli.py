"""``rankmap hwinfo`` writes the seed's hardware information file (parser built here)."""

from __future__ import annotations

import argparse
import io
import shutil
import subprocess

import pytest

from mapper.errors import RankmapError
from mapper.io.arity_file import parse_arity_file
from slurm_plugin.commands.hwinfo_cli import (
    HwinfoError,
    add_hwinfo_command,
    hwinfo_arities,
    node_arities_from_cores,
)
from slurm_plugin.machine.hwloc import CoreGroups
from tests.helpers.paths import TEST_DATA

DATA = TEST_DATA / "hwloc"


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="rankmap")
    add_hwinfo_command(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["hwinfo", *argv])
    return args.func(args)


def test_from_hwloc_xml_with_l3_groups(capsys):
    # synthetic "package:2 l3:2 core:2 pu:2": 2 sockets x 2 L3 x 2 cores
    assert _run(["--xml", str(DATA / "2pkg-2l3-2core-2pu.xml")]) == 0
    assert capsys.readouterr().out == "3\n2 2 2\n"
    assert _run(["--xml", str(DATA / "2pkg-2l3-2core-2pu.xml"), "--nodes", "4"]) == 0
    assert capsys.readouterr().out == "4\n4 2 2 2\n"


def test_from_stdin_and_to_a_file(tmp_path, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO((DATA / "2pkg-2l3-2core-2pu.xml").read_text()))
    out = tmp_path / "hw.txt"
    assert _run(["--xml", "-", "--output", str(out)]) == 0
    assert parse_arity_file(out.read_text(), str(out)) == [2, 2, 2]


def test_from_node_info(capsys):
    assert _run(["--node-info", "Sockets=2 CoresPerSocket=4", "--nodes", "3"]) == 0
    assert capsys.readouterr().out == "3\n3 2 4\n"
    # one socket, one node: only the cores are left
    assert _run(["--node-info", "Sockets=1 CoresPerSocket=8 ThreadsPerCore=2"]) == 0
    assert capsys.readouterr().out == "1\n8\n"


def test_arity_one_levels_are_dropped():
    assert hwinfo_arities([1, 1, 6], 1) == [6]
    assert hwinfo_arities([2, 1, 4], 2) == [2, 2, 4]
    assert hwinfo_arities([1, 1, 1], 1) == [1]


def test_uneven_nodes_are_refused():
    uneven = CoreGroups(socket=(0, 0, 0, 1, 1), group=(0, 0, 0, 0, 0))
    with pytest.raises(HwinfoError, match="uneven cores per socket"):
        node_arities_from_cores(uneven, "x.xml")
    groups = CoreGroups(socket=(0, 0, 0, 0), group=(0, 0, 0, 1))
    with pytest.raises(HwinfoError, match="uneven cores per group"):
        node_arities_from_cores(groups, "x.xml")


def test_bad_inputs_are_user_errors(tmp_path):
    with pytest.raises(HwinfoError, match="cannot read"):
        _run(["--xml", str(tmp_path / "none.xml")])
    bad = tmp_path / "bad.xml"
    bad.write_text("<topology")
    with pytest.raises(RankmapError, match="bad.xml: not valid XML"):
        _run(["--xml", str(bad)])


@pytest.mark.skipif(not shutil.which("lstopo"), reason="hwloc's lstopo not installed")
def test_synthetic_lstopo_output(tmp_path, capsys):
    xml = tmp_path / "t.xml"
    proc = subprocess.run(["lstopo", "--of", "xml", "-i", "package:2 core:3 pu:2"],
                          capture_output=True, text=True, check=True)
    xml.write_text(proc.stdout)
    assert _run(["--xml", str(xml)]) == 0
    out = capsys.readouterr().out
    # hwloc may add per-core caches (one core per group): that level has arity 1
    assert out == "2\n2 3\n"


@pytest.mark.skipif(not shutil.which("lstopo"), reason="hwloc's lstopo not installed")
def test_runs_lstopo_on_this_machine(capsys):
    assert _run([]) == 0
    arities = parse_arity_file(capsys.readouterr().out)
    assert all(a >= 1 for a in arities)
