"""rankmap simulate --host-speeds: per-node core speeds in the SimGrid platform."""

from __future__ import annotations

import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest

from slurm_plugin.commands.cli import main
from slurm_plugin.simulate.platform import (
    NetworkParams,
    build_platform,
    parse_host_speeds,
    parse_speed,
)
from slurm_plugin.slurm.topology import NodeShape, TopologyError, parse_topology_conf

TWO_LEAVES = ("SwitchName=s0 Nodes=n[0-2]\nSwitchName=s1 Nodes=n[3-5]\n"
              "SwitchName=sp Switches=s[0-1]\n")
NODES = [f"n{i}" for i in range(6)]


def _parse(xml: str) -> ET.Element:
    return ET.fromstring(xml.split("\n", 2)[2])  # past the XML declaration and DOCTYPE


def _effective_speeds(xml: str) -> dict[str, float]:
    """SimGrid host → flop/s of a core: its cluster's speed × its SPEED trace's value,
    read back from the XML the way SimGrid combines them."""
    root = _parse(xml)
    speeds = {}
    for cluster in root.iter("cluster"):
        lo, hi = map(int, cluster.get("radical").split("-"))
        base = parse_speed(cluster.get("speed"))
        speeds.update({f"h{i}": base for i in range(lo, hi + 1)})
    traces = {t.get("id"): t for t in root.findall("trace")}
    for conn in root.findall("trace_connect"):
        assert conn.get("kind") == "SPEED"
        trace = traces[conn.get("trace")]
        assert trace.get("periodicity") == "-1"
        ((time, value),) = [line.split() for line in trace.text.strip().splitlines()]
        assert float(time) == 0
        speeds[conn.get("element")] *= float(value)
    return speeds


def test_parse_host_speeds_inline_and_file_forms():
    assert parse_host_speeds("n[0-2,5]=2Gf,n3=1.5e9") == {
        "n0": 2e9, "n1": 2e9, "n2": 2e9, "n5": 2e9, "n3": 1.5e9}
    text = "# speeds\nn[0-1] 3Gf\n\nn2=1Gf, n3=500Mf  # slow\nn0=4Gf\n"
    assert parse_host_speeds(text, "speeds.txt") == {
        "n0": 4e9, "n1": 3e9, "n2": 1e9, "n3": 5e8}  # a node named twice: the last


@pytest.mark.parametrize(("text", "message"), [
    ("n0", "'n0' is not HOSTLIST=SPEED"),
    ("n0=fast", "speed of n0: 'fast' is not a speed"),
    ("n0=0", "must be positive"),
    ("n[0-=1Gf", "unbalanced"),
    ("n0=1Gf\nn1=\n", "speeds.txt:2: 'n1=' is not HOSTLIST=SPEED"),
])
def test_parse_host_speeds_errors_name_the_entry(text, message):
    with pytest.raises(TopologyError, match=message.replace("[", r"\[")):
        parse_host_speeds(text, "speeds.txt")


def test_platform_speeds_per_host_through_cluster_speed_and_traces():
    tree = parse_topology_conf(TWO_LEAVES)
    speeds = {"n0": 4e9, "n1": 1e9, "n2": 2e9, "n4": 3e9, "elsewhere": 9e9}
    plat = build_platform(tree, NODES, NodeShape(1, 2), NetworkParams(host_speed=2e9),
                          speeds)
    root = _parse(plat.xml)
    clusters = {c.get("id"): parse_speed(c.get("speed")) for c in root.iter("cluster")}
    # a cluster runs at its fastest node; slower hosts are scaled down
    assert clusters == {"c0": 4e9, "c1": 3e9}
    got = _effective_speeds(plat.xml)
    want = {plat.host_of[n]: speeds.get(n, 2e9) for n in NODES}
    assert got == pytest.approx(want)
    # one trace per slower host (SimGrid keeps one element per trace), none for the rest
    assert sorted(c.get("element") for c in root.findall("trace_connect")) == \
        sorted(plat.host_of[n] for n in ("n1", "n2", "n3", "n5"))
    # the network is what it is without speeds
    plain = _parse(build_platform(tree, NODES, NodeShape(1, 2),
                                  NetworkParams(host_speed=2e9)).xml)
    assert [ET.tostring(e) for e in root.find("zone").iter("link")] == \
        [ET.tostring(e) for e in plain.find("zone").iter("link")]
    assert not plain.findall("trace")


def test_platform_without_speeds_is_unchanged_and_bad_speed_refused():
    tree = parse_topology_conf(TWO_LEAVES)
    a = build_platform(tree, NODES, NodeShape(1, 2))
    assert a.xml == build_platform(tree, NODES, NodeShape(1, 2), speeds={}).xml
    with pytest.raises(TopologyError, match="positive"):
        build_platform(tree, NODES, NodeShape(1, 2), speeds={"n0": 0.0})


def test_cli_host_speeds_from_file_and_inline(tmp_path, capsys):
    conf = tmp_path / "topology.conf"
    conf.write_text(TWO_LEAVES)
    base = ["simulate", "--nodes", "n[0-5]", "--node-info", "Sockets=1 CoresPerSocket=1",
            "--topology-conf", str(conf), "--profile", "ring", "--platform-only"]
    speeds = tmp_path / "speeds.txt"
    speeds.write_text("n0=1Gf,n[1-2]=2Gf  # cluster 0\nn[3-5] 4Gf\n")
    for spec in (str(speeds), "n0=1Gf,n[1-2]=2Gf,n[3-5]=4Gf"):
        out = tmp_path / f"out{len(spec)}"
        assert main([*base, "--host-speed", "4Gf", "--host-speeds", spec,
                     "--out", str(out)]) == 0
        got = _effective_speeds((out / "platform.xml").read_text())
        assert got == {"h0": 1e9, "h1": 2e9, "h2": 2e9, "h3": 4e9, "h4": 4e9, "h5": 4e9}
    # an inline list longer than a file name may be is still a list
    long = ",".join(f"n{i}={i + 1}Gf" for i in range(6)) + "," + ",".join(
        f"other{i}=1Gf" for i in range(40))
    assert main([*base, "--host-speeds", long, "--out", str(tmp_path / "long")]) == 0
    got = _effective_speeds((tmp_path / "long" / "platform.xml").read_text())
    assert got == pytest.approx({f"h{i}": (i + 1) * 1e9 for i in range(6)})
    capsys.readouterr()
    assert main([*base, "--host-speeds", str(tmp_path / "missing.txt")]) == 2
    assert "no such file" in capsys.readouterr().err
    speeds.write_text("n0=1Gf\nn1=slow\n")
    assert main([*base, "--host-speeds", str(speeds)]) == 2
    assert f"{speeds}:2" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("smpirun") is None or shutil.which("smpicc") is None,
                    reason="SimGrid's smpirun/smpicc not installed")
def test_simgrid_runs_each_host_at_its_speed(tmp_path):
    """The same declared flops take 1/speed seconds on each host, in a real SMPI run."""
    src = tmp_path / "flops.c"
    src.write_text('#include <mpi.h>\n#include <stdio.h>\n'
                   'int main(int c, char **v) { int r; MPI_Init(&c, &v);\n'
                   '  MPI_Comm_rank(MPI_COMM_WORLD, &r); double t = MPI_Wtime();\n'
                   '  smpi_execute_flops(1e9);\n'
                   '  printf("rank %d %.9f\\n", r, MPI_Wtime() - t); MPI_Finalize(); }\n')
    exe = tmp_path / "flops"
    subprocess.run(["smpicc", "-o", str(exe), str(src)], check=True, capture_output=True)
    tree = parse_topology_conf(TWO_LEAVES)
    speeds = {"n0": 4e9, "n1": 1e9, "n3": 0.5e9}
    plat = build_platform(tree, NODES, NodeShape(1, 1), NetworkParams(host_speed=2e9),
                          speeds)
    (tmp_path / "platform.xml").write_text(plat.xml)
    (tmp_path / "hosts").write_text(plat.hostfile(NODES))
    proc = subprocess.run(["smpirun", "-platform", str(tmp_path / "platform.xml"),
                           "-hostfile", str(tmp_path / "hosts"), "-np", "6",
                           "--cfg=smpi/simulate-computation:no",
                           "--log=root.thresh:warning", str(exe)],
                          capture_output=True, text=True, check=True)
    seconds = {int(r): float(t) for _, r, t in
               (line.split() for line in proc.stdout.splitlines() if line.startswith("rank"))}
    assert seconds == pytest.approx({r: 1e9 / speeds.get(n, 2e9)
                                     for r, n in enumerate(NODES)}, rel=1e-6)


def test_help_mentions_host_speeds(capsys):
    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    assert "--host-speeds" in capsys.readouterr().out

