"""bench/summa/summa.c: the heterogeneous SUMMA multiplies correctly on hand-written
arrangements, refuses bad ones naming the line, and runs faster under SimGrid when the
arrangement sends less over the slow link between two clusters."""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from slurm_plugin.simulate.platform import NetworkParams, build_platform
from slurm_plugin.slurm.topology import NodeShape, parse_topology_conf
from tests.helpers.paths import REPO

ROOT = REPO

pytestmark = pytest.mark.skipif(
    shutil.which("smpirun") is None or shutil.which("smpicc") is None,
    reason="SimGrid's smpirun/smpicc not installed")

# 5 ranks, N = 12: column 0 (width 5) holds ranks 0, 3, 1 top to bottom, column 1
# (width 7) ranks 2, 4; row bands [0,4) [4,6) [6,7) [7,12) have different owner pairs
FIVE = """\
# hand-written: rank column position row_offset col_offset height width
5 12
0 0 0 0 0 4 5
3 0 1 4 0 3 5   # listed out of rank order on purpose
1 0 2 7 0 5 5
2 1 0 0 5 6 7
4 1 1 6 5 6 7
"""

# 6 ranks on two clusters (ranks 0-2 on cluster 0, 3-5 on cluster 1 under block
# placement), N = 4800, two columns of width 2400; heights in units of 100 rows:
# rank 0: 20, 1: 12, 3: 16 (column 0); rank 2: 10, 4: 22, 5: 16 (column 1)
HEIGHT = {0: 20, 1: 12, 3: 16, 2: 10, 4: 22, 5: 16}
ORIGINAL = [[0, 3, 1], [4, 2, 5]]   # clusters 0 1 0 | 1 0 1: oblivious of the topology
ARRANGED = [[0, 1, 3], [2, 4, 5]]   # clusters 0 0 1 | 0 1 1: grouped
CLUSTER = {0: 0, 1: 0, 2: 0, 3: 1, 4: 1, 5: 1}


def _arr(columns: list[list[int]], unit: int = 100, width: int = 24) -> str:
    lines = [f"{sum(map(len, columns))} {48 * unit}"]
    for c, ranks in enumerate(columns):
        top = 0
        for p, r in enumerate(ranks):
            lines.append(f"{r} {c} {p} {top * unit} {c * width * unit} "
                         f"{HEIGHT[r] * unit} {width * unit}")
            top += HEIGHT[r]
    return "\n".join(lines) + "\n"


def _inter_cluster(columns: list[list[int]]) -> tuple[int, int]:
    """(cost_A, cost_B) of the slides in units of 100 rows, by brute force: every row,
    the cluster changes between the owners of neighbouring columns; every column, the
    changes between vertical neighbours times its width."""
    owner = [[r for r in col for _ in range(HEIGHT[r])] for col in columns]
    cost_a = sum(CLUSTER[a[i]] != CLUSTER[b[i]] for a, b in itertools.pairwise(owner)
                 for i in range(48))
    cost_b = sum(24 * sum(CLUSTER[x] != CLUSTER[y] for x, y in itertools.pairwise(col))
                 for col in columns)
    return cost_a, cost_b


@pytest.fixture(scope="module")
def summa(tmp_path_factory) -> Path:
    exe = tmp_path_factory.mktemp("summa") / "summa"
    subprocess.run(["smpicc", "-O2", "-o", str(exe), str(ROOT / "bench/summa/summa.c")],
                   check=True, capture_output=True)
    return exe


def _flat_platform(tmp: Path, n: int) -> tuple[Path, Path]:
    plat = build_platform(None, [f"n{i}" for i in range(n)], NodeShape(1, 1))
    (tmp / "flat.xml").write_text(plat.xml)
    (tmp / "flat.hosts").write_text(plat.hostfile([f"n{i}" for i in range(n)]))
    return tmp / "flat.xml", tmp / "flat.hosts"


def _smpirun(platform: Path, hosts: Path, n: int, args: list[str],
             check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["smpirun", "-platform", str(platform), "-hostfile", str(hosts),
                           "-np", str(n), "--cfg=smpi/simulate-computation:no",
                           "--log=root.thresh:critical", *args],
                          capture_output=True, text=True, check=check, timeout=300)


def _time(out: str) -> float:
    (t,) = re.findall(r"^rankmap-sim-time ([0-9.eE+-]+)$", out, re.M)
    return float(t)


@pytest.mark.parametrize("panel", [1, 3, 64])
def test_real_product_verified(summa, tmp_path, panel):
    """-r: every rank's C rectangle equals the serial product, whatever the panel width
    (1: one column per step; 3: panels cut at the partition's column boundary 5 and
    inside rectangles; 64: one panel per partition column)."""
    arr = tmp_path / "five.arr"
    arr.write_text(FIVE)
    plat, hosts = _flat_platform(tmp_path, 5)
    proc = _smpirun(plat, hosts, 5, [str(summa), "-a", str(arr), "-b", str(panel), "-r"])
    assert "summa-verify ok" in proc.stdout
    assert _time(proc.stdout) > 0


def test_arrangement_from_environment(summa, tmp_path):
    arr = tmp_path / "five.arr"
    arr.write_text(FIVE)
    plat, hosts = _flat_platform(tmp_path, 5)
    proc = subprocess.run(["smpirun", "-platform", str(plat), "-hostfile", str(hosts),
                           "-np", "5", "--cfg=smpi/simulate-computation:no",
                           "--log=root.thresh:critical", str(summa), "-r", "-v"],
                          capture_output=True, text=True, check=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "RANKMAP_ARRANGEMENT": str(arr)})
    assert "summa-verify ok" in proc.stdout
    assert "rank 3 host h3 column 0 position 1 rows 4+3 cols 0+5" in proc.stdout


@pytest.mark.parametrize(("edit", "message"), [
    (("3 0 1 4 0 3 5", "3 0 1 5 0 3 5"), "five.arr:4: column 0 position 1 starts at row 5"),
    (("4 1 1 6 5 6 7", "2 1 1 6 5 6 7"), "five.arr:7: rank 2 already given on line 6"),
    (("5 12", "4 12"), "five.arr:2: arrangement for 4 ranks, but the job has 5"),
    (("1 0 2 7 0 5 5", "1 0 2 7 0 5 4"), "five.arr:5: column 0: cols 0+4 differ"),
    (("2 1 0 0 5 6 7", "2 1 0 0 5 6 x"), "five.arr:6: expected 7 integers"),
    (("4 1 1 6 5 6 7", "4 2 0 0 5 12 7"), "five.arr:6: column 1 covers rows [0, 6)"),
    (("4 1 1 6 5 6 7", "4 1 1 6 5 6 6"), "five.arr:7: column 1: cols 5+6 differ"),
    (("2 1 0 0 5 6 7\n4 1 1 6 5 6 7", "2 1 0 0 5 6 6\n4 1 1 6 5 6 6"),
     "five.arr:6: the columns cover matrix columns [0, 11)"),
])
def test_bad_arrangement_names_the_line(summa, tmp_path, edit, message):
    arr = tmp_path / "five.arr"
    arr.write_text(FIVE.replace(*edit))
    plat, hosts = _flat_platform(tmp_path, 5)
    proc = _smpirun(plat, hosts, 5, [str(summa), "-a", str(arr)], check=False)
    assert proc.returncode != 0
    assert f"summa: {arr.parent}/{message}" in proc.stderr


def test_hand_costs():
    # worked by hand: original bands [0,20) 0|1, [22,32) 1|0, [36,48) 0|1 cross; two
    # changes in each column.  Arranged: [10,20) and [20,32) cross; one change each
    assert _inter_cluster(ORIGINAL) == (20 + 10 + 12, 2 * 24 + 2 * 24)
    assert _inter_cluster(ARRANGED) == (10 + 12, 24 + 24)


def test_less_inter_cluster_traffic_runs_faster(summa, tmp_path):
    """Two clusters of three nodes under a spine whose links are 100x slower than the
    host links; the arranged layout (half the inter-cluster volume) must be clearly
    faster, and both must verify (-r is too slow at N = 4800, so N = 48 checks it)."""
    tree = parse_topology_conf("SwitchName=s0 Nodes=n[0-2]\nSwitchName=s1 Nodes=n[3-5]\n"
                               "SwitchName=sp Switches=s[0-1]\n")
    nodes = [f"n{i}" for i in range(6)]
    plat = build_platform(tree, nodes, NodeShape(1, 1),
                          NetworkParams(host_bw=12.5e9, uplink_bw=(0.125e9,),
                                        host_speed=100e9))
    (tmp_path / "two.xml").write_text(plat.xml)
    hosts = tmp_path / "block.hosts"
    hosts.write_text(plat.hostfile(nodes))  # rank r on node n<r>: block placement
    times = {}
    for name, columns in (("original", ORIGINAL), ("arranged", ARRANGED)):
        small = tmp_path / f"{name}.small.arr"
        small.write_text(_arr(columns, unit=1, width=24))
        proc = _smpirun(tmp_path / "two.xml", hosts, 6, [str(summa), "-a", str(small), "-b",
                                                         "5", "-r"])
        assert "summa-verify ok" in proc.stdout
        arr = tmp_path / f"{name}.arr"
        arr.write_text(_arr(columns))
        times[name] = _time(_smpirun(tmp_path / "two.xml", hosts, 6,
                                     [str(summa), "-a", str(arr), "-b", "200"]).stdout)
    assert times["arranged"] < 0.8 * times["original"]
