"""rankmap simulate: SimGrid platform generation, option parsing, and one real SMPI run."""

from __future__ import annotations

import json
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from slurm_plugin.commands.cli import main
from slurm_plugin.commands.simulate_cli import parse_times
from slurm_plugin.simulate.platform import (
    NetworkParams,
    build_platform,
    parse_bandwidth,
    parse_latency,
)
from slurm_plugin.slurm.topology import NodeShape, TopologyError, parse_topology_conf
from tests.helpers.paths import REPO

ROOT = REPO

# leaves of two nodes, two leaves per middle switch, two middle switches under a top
TREE3 = """\
SwitchName=l0 Nodes=a[0-1]
SwitchName=l1 Nodes=a[2-3]
SwitchName=l2 Nodes=a[4-5]
SwitchName=l3 Nodes=a[6-7]
SwitchName=m0 Switches=l[0-1]
SwitchName=m1 Switches=l[2-3]
SwitchName=top Switches=m[0-1]
"""


def _parse(xml: str) -> ET.Element:
    return ET.fromstring(xml.split("\n", 2)[2])  # past the XML declaration and DOCTYPE


def _route(zone: ET.Element, src: str, dst: str) -> list[tuple[str, str]]:
    (route,) = [r for r in zone.iter("zoneRoute")
                if r.get("src") == src and r.get("dst") == dst]
    return [(c.get("id"), c.get("direction")) for c in route.iter("link_ctn")]


def test_platform_three_level_tree_zones_links_routes():
    tree = parse_topology_conf(TREE3)
    nodes = [f"a{i}" for i in range(8)]
    plat = build_platform(tree, nodes, NodeShape(2, 4),
                          NetworkParams(host_bw=1e9, oversubscription=4.0))
    zone = _parse(plat.xml).find("zone")
    assert zone.get("routing") == "Full"
    clusters = zone.findall("cluster")
    assert [c.get("id") for c in clusters] == ["c0", "c1", "c2", "c3"]
    assert [c.get("radical") for c in clusters] == ["0-1", "2-3", "4-5", "6-7"]
    assert {c.get("core") for c in clusters} == {"8"}
    assert plat.host_of == {f"a{i}": f"h{i}" for i in range(8)}
    links = {ln.get("id"): float(ln.get("bandwidth").removesuffix("Bps"))
             for ln in zone.findall("link")}
    # one uplink per switch below the top: 4 leaves + 2 middle switches
    assert len(links) == 6
    up = plat.uplink_of
    assert links[up["l0"]] == pytest.approx(2 * 1e9 / 4)  # two host links, 4:1
    assert links[up["m0"]] == pytest.approx(4 * 1e9 / 4)  # four host links below
    assert "top" not in up
    assert len(zone.findall("zoneRoute")) == 4 * 3
    # leaves under different middle switches: up to the top and down again
    assert _route(zone, "c0", "c3") == [(up["l0"], "UP"), (up["m0"], "UP"),
                                        (up["m1"], "DOWN"), (up["l3"], "DOWN")]
    assert _route(zone, "c3", "c0") == [(up["l3"], "UP"), (up["m1"], "UP"),
                                        (up["m0"], "DOWN"), (up["l0"], "DOWN")]
    # same middle switch: only the two leaf uplinks
    assert _route(zone, "c0", "c1") == [(up["l0"], "UP"), (up["l1"], "DOWN")]
    for route in zone.iter("zoneRoute"):
        assert route.get("gw_src") == f"h{route.get('src')}_router"


def test_platform_interleaved_names_land_in_their_leaf():
    tree = parse_topology_conf("SwitchName=s0 Nodes=n0,n2\nSwitchName=s1 Nodes=n1,n3\n"
                               "SwitchName=sp Switches=s[0-1]\n")
    plat = build_platform(tree, ["n0", "n1", "n2", "n3"], NodeShape(1, 4))
    zone = _parse(plat.xml).find("zone")
    ranges = {c.get("id"): c.get("radical") for c in zone.findall("cluster")}
    assert plat.cluster_of == {"s0": "c0", "s1": "c1"}
    assert ranges == {"c0": "0-1", "c1": "2-3"}
    assert plat.host_of["n0"] == "h0" and plat.host_of["n2"] == "h1"
    assert plat.host_of["n1"] == "h2" and plat.host_of["n3"] == "h3"
    assert plat.hostfile(["n1", "n0", "n3"]) == "h2\nh0\nh3\n"


def test_platform_node_outside_the_tree_joins_at_the_root():
    tree = parse_topology_conf("SwitchName=s0 Nodes=n[0-1]\n")
    plat = build_platform(tree, ["n0", "n1", "x"], NodeShape(1, 2))
    zone = _parse(plat.xml).find("zone")
    assert plat.cluster_of == {"s0": "c0", "x": "c1"}
    assert _route(zone, "c1", "c0") == [(plat.uplink_of["~x"], "UP"),
                                        (plat.uplink_of["s0"], "DOWN")]


def test_platform_bad_input():
    with pytest.raises(TopologyError, match="twice"):
        build_platform(None, ["n0", "n0"], NodeShape())
    with pytest.raises(TopologyError, match="oversubscription"):
        NetworkParams(oversubscription=0)


def test_units_and_times():
    assert parse_bandwidth("12.5GBps") == 12.5e9
    assert parse_bandwidth("100Gbps") == pytest.approx(12.5e9)
    assert parse_latency("500ns") == pytest.approx(5e-7)
    with pytest.raises(TopologyError, match="--host-bw"):
        parse_bandwidth("fast", "--host-bw")
    out = "[0.1] [smpi_utils/INFO] Simulated time: 0.25 seconds.\nrankmap-sim-time 0.125\n"
    assert parse_times(out) == (0.125, 0.25)
    assert parse_times("nothing") == (None, None)


def test_simulate_bad_oversubscription(capsys):
    assert main(["simulate", "--oversubscription", "4:0", "--platform-only"]) == 2
    assert "--oversubscription" in capsys.readouterr().err


needs_smpi = pytest.mark.skipif(shutil.which("smpirun") is None or shutil.which("smpicc")
                                is None, reason="SimGrid's smpirun/smpicc not installed")


def _halo_and_two_leaves(tmp_path: Path) -> tuple[Path, Path]:
    """bench/benefit/halo3d.c built with smpicc, and a topology.conf of two leaves of two
    nodes under a spine."""
    exe = tmp_path / "halo3d"
    subprocess.run(["smpicc", "-O2", "-o", str(exe), str(ROOT / "bench/benefit/halo3d.c")],
                   check=True, capture_output=True)
    conf = tmp_path / "topology.conf"
    conf.write_text("SwitchName=s0 Nodes=n[0-1]\nSwitchName=s1 Nodes=n[2-3]\n"
                    "SwitchName=sp Switches=s[0-1]\n")
    return exe, conf


@needs_smpi
def test_sixteen_rank_simulation_scrambled_is_slower_and_hosts_follow_hostfile(
        tmp_path, capsys):
    exe, conf = _halo_and_two_leaves(tmp_path)
    out = tmp_path / "out"
    rc = main(["simulate", "--nodes", "n[0-3]", "--node-info", "Sockets=1 CoresPerSocket=4",
               "--topology-conf", str(conf), "--profile", "stencil3d:2x2x4,bytes=1e6",
               "--out", str(out), "--json", "--",
               str(exe), "-d", "2x2x4", "-b", "1000000", "-i", "3"])
    assert rc == 0
    rec = json.loads(capsys.readouterr().out)
    times = {p["name"]: p["seconds"] for p in rec["placements"]}
    assert times["scrambled"] > 1.2 * times["block"]
    assert times["block"] > 0
    # the XML loads and rank r runs on line r of the hostfile: Slurm's block placement
    # puts ranks 4k..4k+3 on node n<k> (SimGrid host h<k>), the scrambled one elsewhere
    files = {p["name"]: p["hostfile"] for p in rec["placements"]}
    block = [f"h{r // 4}" for r in range(16)]
    assert Path(files["block"]).read_text().split() == block
    for name in ("block", "scrambled"):
        proc = subprocess.run(["smpirun", "-platform", str(out / "platform.xml"), "-hostfile",
                               files[name], "-np", "16", "--cfg=smpi/simulate-computation:no",
                               "--log=root.thresh:warning", str(exe), "-d", "2x2x4", "-i", "0",
                               "-v"], capture_output=True, text=True, check=True)
        seen = dict(line.split()[1::2] for line in proc.stdout.splitlines()
                    if line.startswith("rank "))
        want = Path(files[name]).read_text().split()
        assert [seen[str(r)] for r in range(16)] == want
        assert sorted(want) == sorted(block)
        assert (want == block) == (name == "block")


@needs_smpi
@pytest.mark.parametrize("by_axis", [False, True])
def test_halo3d_s_exchanges_one_dimension_per_wait(tmp_path, by_axis):
    """halo3d -s (bench/benefit, run_benefit's halo-axes) waits for each dimension's
    messages before it posts the next dimension's; without -s all six at once.  Read
    from rank 0's SMPI time-independent trace: the partners it sends to between waits."""
    exe, conf = _halo_and_two_leaves(tmp_path)
    hostfile = tmp_path / "hosts"
    hostfile.write_text("".join(f"h{r // 4}\n" for r in range(16)))
    assert main(["simulate", "--nodes", "n[0-3]", "--node-info",
                 "Sockets=1 CoresPerSocket=4", "--topology-conf", str(conf),
                 "--profile", "stencil3d:2x2x4,periodic", "--out", str(tmp_path / "p"),
                 "--platform-only", "--", str(exe)]) == 0
    trace = tmp_path / "trace"
    subprocess.run(["smpirun", "-trace-ti", f"--cfg=tracing/filename:{trace}", "-platform",
                    str(tmp_path / "p/platform.xml"), "-hostfile", str(hostfile), "-np",
                    "16", "--cfg=smpi/simulate-computation:no", "--log=root.thresh:error",
                    str(exe), "-d", "2x2x4", "-p", *(["-s"] if by_axis else []),
                    "-b", "1000", "-i", "1"], check=True, capture_output=True)
    rank0 = Path(trace.read_text().split()[0])  # line r: rank r's file
    rounds, current = [], []
    for line in rank0.read_text().splitlines():
        word = line.split()
        if word[1] == "isend":
            current.append(int(word[2]))
        elif word[1] == "waitall" and current:
            rounds.append(sorted(current))
            current = []
    # rank 0 = (0, 0, 0) of 2x2x4, periodic: one partner along each dimension of 2
    # (ranks 8 and 4), two along the ring of 4 (ranks 1 and 3)
    assert rounds == ([[8], [4], [1, 3]] if by_axis else [[1, 3, 4, 8]])


@needs_smpi
def test_replay_of_a_trace_gives_the_run_s_communication_per_placement(tmp_path, capsys):
    """--replay: one traced run (smpirun -trace-ti) replayed on every placement; the
    replay of the block placement takes the traced run's time (same messages, no
    compute declared), and the scrambled one is slower, as when the program runs."""
    exe, conf = _halo_and_two_leaves(tmp_path)
    job = ["simulate", "--nodes", "n[0-3]", "--node-info", "Sockets=1 CoresPerSocket=4",
           "--topology-conf", str(conf), "--profile", "stencil3d:2x2x4,bytes=1e6", "--json"]
    app = [str(exe), "-d", "2x2x4", "-b", "1000000", "-i", "3"]
    assert main([*job, "--out", str(tmp_path / "run"), "--", *app]) == 0
    direct = {p["name"]: p for p in json.loads(capsys.readouterr().out)["placements"]}
    trace = tmp_path / "trace"
    subprocess.run(["smpirun", "-trace-ti", f"--cfg=tracing/filename:{trace}", "-platform",
                    str(tmp_path / "run/platform.xml"), "-hostfile",
                    direct["block"]["hostfile"], "-np", "16",
                    "--cfg=smpi/simulate-computation:no", "--log=root.thresh:error", *app],
                   check=True, capture_output=True)
    assert main([*job, "--out", str(tmp_path / "replay"), "--replay", str(trace)]) == 0
    rec = json.loads(capsys.readouterr().out)
    replayed = {p["name"]: p["seconds"] for p in rec["placements"]}
    assert rec["replay"] == str(trace)
    # the whole replay against the program's whole simulated run (its init included)
    assert replayed["block"] == pytest.approx(direct["block"]["simulated_total"], rel=0.05)
    assert replayed["scrambled"] > 1.2 * replayed["block"]
    # a trace of another rank count is refused, naming both counts
    (tmp_path / "short").write_text("\n".join(trace.read_text().splitlines()[:8]) + "\n")
    assert main([*job, "--replay", str(tmp_path / "short")]) != 0
    assert "the trace has 8 ranks (one file per line) but the job has 16" in \
        capsys.readouterr().err


def _fake_smpirun(tmp_path: Path, rc: int) -> Path:
    """A stand-in smpirun that prints SMPI's time line and exits with ``rc``."""
    script = tmp_path / "smpirun"
    script.write_text(f"#!/bin/sh\necho 'Simulated time: 0.25 seconds.'\nexit {rc}\n")
    script.chmod(0o755)
    return script


def _job(tmp_path: Path) -> list[str]:
    conf = tmp_path / "topology.conf"
    conf.write_text(TREE3)
    return ["simulate", "--nodes", "a[0-7]", "--node-info", "Sockets=1 CoresPerSocket=2",
            "--topology-conf", str(conf), "--profile", "npb-cg", "--json"]


def test_skip_unguarded_and_ok_exit(tmp_path, capsys):
    smpirun = _fake_smpirun(tmp_path, 1)
    # a run that exits 1 is a failure unless that code is declared a success (NPB DT)
    assert main([*_job(tmp_path), "--smpirun", str(smpirun), "--", "app"]) != 0
    assert "exited with 1" in capsys.readouterr().err
    rc = main([*_job(tmp_path), "--smpirun", str(smpirun), "--ok-exit", "1",
               "--skip", "block", "--skip", "scrambled", "--unguarded", "--", "app"])
    assert rc == 0
    rows = {p["name"]: p for p in json.loads(capsys.readouterr().out)["placements"]}
    assert list(rows) == ["block", "cyclic", "scrambled", "rankmap fast",
                          "fast unguarded"]
    assert rows["block"]["seconds"] is None and rows["scrambled"]["seconds"] is None
    assert rows["cyclic"]["seconds"] == 0.25
    # no reference run: no ratios; links and J are computed for every placement
    assert all(p["ratio_to_default"] is None for p in rows.values())
    assert all(set(p["busiest_links"]) == {"node", "leaf switch", "switch level 1"}
               for p in rows.values())


def test_a_timed_out_smpirun_takes_its_simulation_with_it(tmp_path):
    # smpirun is a script that starts smpimain; a timeout must kill both (a 4096-rank
    # smpimain once kept running, 13 GB, after its smpirun was killed)
    import os
    import time

    from slurm_plugin.commands.simulate_cli import SimulationError, _run

    pidfile = tmp_path / "child.pid"
    fake = tmp_path / "smpirun"
    fake.write_text(f"#!/bin/sh\nsleep 300 &\necho $! > {pidfile}\nwait\n")
    fake.chmod(0o755)
    with pytest.raises(SimulationError, match="longer than 1 s"):
        _run([str(fake)], timeout=1)
    child = int(pidfile.read_text())
    for _ in range(50):  # reaped by init shortly after the kill
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        with open(f"/proc/{child}/stat") as fh:
            if fh.read().split()[2] == "Z":
                break
        time.sleep(0.1)
    else:
        pytest.fail(f"the simulation (pid {child}) outlived its smpirun")
