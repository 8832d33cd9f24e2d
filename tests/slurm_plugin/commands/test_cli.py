import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mapper import Hierarchy, objective
from mapper.io.graph_file import read_graph
from mapper.io.metis_file import write_metis
from slurm_plugin.commands.cli import main
from slurm_plugin.profiles.generators import generate
from tests.helpers.paths import TEST_DATA

DATA = TEST_DATA


@pytest.fixture
def stencil(tmp_path):
    path = tmp_path / "s.graph"
    write_metis(generate("stencil3d:8x8x8", 512), path)
    return path


def test_map_writes_a_mapping_and_evaluate_recomputes_j(stencil, tmp_path, capsys):
    out = tmp_path / "map.txt"
    assert main(["map", str(stencil), "--hierarchy", "4:16:8", "--distances", "1:10:100",
                 "--algorithm", "topdown+n10", "--seed", "1", "--output", str(out),
                 "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert set(summary) >= {"objective", "seconds", "algorithm", "n", "m", "traffic"}
    assert summary["n"] == 512 and summary["m"] == 1344
    mapping = np.loadtxt(out, dtype=np.int64)
    assert sorted(mapping.tolist()) == list(range(512))
    h = Hierarchy.parse("4:16:8", "1:10:100")
    assert summary["objective"] == pytest.approx(objective(read_graph(stencil), h, mapping))
    assert main(["evaluate", str(stencil), "--hierarchy", "4:16:8", "--distances",
                 "1:10:100", "--mapping", str(out), "--json"]) == 0
    ev = json.loads(capsys.readouterr().out)
    assert ev["objective"] == summary["objective"]
    assert [t["level"] for t in ev["traffic"]] == ["level1", "level2", "level3"]


def test_map_says_when_the_grids_boxes_won(tmp_path, capsys):
    path = tmp_path / "g.graph"
    write_metis(generate("stencil2d:32x32,periodic", 1024), path)
    out = tmp_path / "map.txt"
    args = ["map", str(path), "--hierarchy", "4:2:4:4:8", "--distances", "1:2:10:20:40",
            "--algorithm", "topdown+n10", "--output", str(out)]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert re.search(r"J = 16896  \(grid boxes, beside topdown\+n10's \d+", text)
    assert "note: the profile is a 32x32 periodic grid in rank order" in text
    assert main([*args, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["origin"] == "grid boxes"
    assert summary["candidates"]["grid boxes"] == summary["objective"] == 16896
    assert summary["candidates"]["topdown+n10"] > summary["objective"]


SOLVER_TIMINGS = {"construction", "search", "baseline", "evaluation", "solver_other"}


def check_timings(timings: dict, expected: set[str], solver_seconds: float) -> None:
    """Timed parts: exactly the expected keys, none negative, the parts add up to the
    total and the solver's parts to the solver's own time."""
    assert set(timings) == expected | {"total"}
    assert min(timings.values()) >= 0.0
    parts = sum(v for k, v in timings.items() if k != "total")
    assert parts == pytest.approx(timings["total"], rel=1e-9, abs=1e-9)
    assert sum(timings[k] for k in SOLVER_TIMINGS) == pytest.approx(solver_seconds, rel=1e-9)


@pytest.mark.parametrize("algorithm", ["identity", "topdown+n10"])
def test_map_json_has_timings(stencil, tmp_path, capsys, algorithm):
    assert main(["map", str(stencil), "--hierarchy", "4:16:8", "--distances", "1:10:100",
                 "--algorithm", algorithm, "--output", str(tmp_path / "m"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    timings = summary["timings"]
    check_timings(timings, SOLVER_TIMINGS | {"read", "write", "other"}, summary["seconds"])
    assert timings["read"] > 0 and timings["write"] > 0 and timings["construction"] > 0


def test_plan_json_has_timings(tmp_path, capsys):
    assert main(["plan", "--out", str(tmp_path), "--store", str(tmp_path),
                 "--nodes", "n[1-4]", "--profile", "stencil3d", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["applied"] and summary["n"] == 32
    assert Path(summary["files"]["rankfile"]).is_file()
    timings = summary["timings"]
    check_timings(timings, SOLVER_TIMINGS | {"layout", "profile", "default_placements",
                                          "render", "report", "write", "other"},
                 summary["solver_seconds"])
    # the polished baseline is compared after the algorithm, and files were rendered
    assert timings["baseline"] > 0 and timings["render"] > 0 and timings["construction"] > 0


def test_cli_errors_are_one_line_and_exit_2(stencil, tmp_path, capsys):
    assert main(["map", str(stencil), "--hierarchy", "4:16:4", "--distances", "1:10:100",
                 "--output", str(tmp_path / "m")]) == 2
    assert "512 ranks but --hierarchy 4:16:4 has 256 PEs" in capsys.readouterr().err
    bad = tmp_path / "m2"
    bad.write_text("0\n1\nx\n")
    assert main(["evaluate", str(stencil), "--hierarchy", "4:16:8", "--distances",
                 "1:10:100", "--mapping", str(bad)]) == 2
    assert f"{bad}:3: expected a PE index" in capsys.readouterr().err
    bad.write_text("\n".join(["0"] * 512))
    assert main(["evaluate", str(stencil), "--hierarchy", "4:16:8", "--distances",
                 "1:10:100", "--mapping", str(bad)]) == 2
    assert "PE 0 is given to more than one rank" in capsys.readouterr().err
    assert main(["map", str(tmp_path / "none.graph"), "--hierarchy", "2", "--distances", "1",
                 "--output", str(bad)]) == 2


def test_console_script_runs_as_a_process(stencil, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "slurm_plugin.commands.cli", "map", str(stencil),
                           "--hierarchy", "4:16:8", "--distances", "1:10:x",
                           "--output", str(tmp_path / "m")], capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--distances '1:10:x'" in proc.stderr


def test_plan_on_the_bundled_example(tmp_path, capsys):
    assert main(["plan", "--out", str(tmp_path), "--store", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "profile    lammps-3d" in out and "rankmap was NOT applied" not in out
    record = json.loads((tmp_path / "report.json").read_text())
    assert record["applied"] and record["n"] == 32
    lines = [ln for ln in (tmp_path / "rankfile").read_text().splitlines()
             if ln.startswith("rank")]
    assert len(lines) == 32


def test_plan_with_hwloc_cache_level(tmp_path, capsys):
    assert main(["plan", "--out", str(tmp_path), "--hwloc-xml",
                 str(DATA / "hwloc" / "2pkg-2l3-2core-2pu.xml"), "--node-info",
                 "Sockets=2 CoresPerSocket=4 ThreadsPerCore=2"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^  cache\s+0\.5\s", out, re.M), out


def test_plan_with_generator_uneven_nodes_and_no_switches(tmp_path, capsys):
    assert main(["plan", "--nodes", "c[1-3]", "--tasks-per-node", "8(x2),4", "--node-info",
                 "Sockets=2 CoresPerSocket=4", "--topology-conf", "none", "--profile",
                 "npb-mg", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "ranks      20 on 3 node(s)" in out and "no switch topology" in out
    assert main(["plan", "--profile", "npb-bt", "--out", str(tmp_path)]) == 2
    assert "square task count" in capsys.readouterr().err


def test_profile_commands(tmp_path, capsys):
    store = tmp_path / "store"
    assert main(["profile", "import", str(DATA / "ompi_monitoring" / "prof"), "--name",
                 "ring4", "--store", str(store), "--description", "recorded ring"]) == 0
    assert main(["profile", "list", "--store", str(store)]) == 0
    assert "ring4" in capsys.readouterr().out
    assert main(["profile", "show", "ring4", "--store", str(store)]) == 0
    assert "total volume 4000" in capsys.readouterr().out
    assert main(["profile", "generate", "summa", "--ntasks", "16", "--out",
                 str(tmp_path / "s.mtx")]) == 0
    assert read_graph(tmp_path / "s.mtx").m == 48


def test_map_onto_an_explicit_distance_matrix(tmp_path, capsys):
    xy = np.array([(i, j) for i in range(4) for j in range(4)])
    dx = np.abs(xy[:, None, 0] - xy[None, :, 0])
    dy = np.abs(xy[:, None, 1] - xy[None, :, 1])
    hops = np.minimum(dx, 4 - dx) + np.minimum(dy, 4 - dy)  # 4x4 torus
    (tmp_path / "torus.txt").write_text("\n".join(" ".join(map(str, r)) for r in hops))
    graph = tmp_path / "g.graph"
    write_metis(generate("stencil2d:4x4,periodic", 16), graph)
    assert main(["map", str(graph), "--distance-matrix", str(tmp_path / "torus.txt"),
                 "--algorithm", "greedyallc+n2", "--attempts", "5", "--output",
                 str(tmp_path / "m"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["objective"] == 32  # every edge one hop
    (tmp_path / "bad.txt").write_text("0 1\n1 0 2\n")
    assert main(["map", str(graph), "--distance-matrix", str(tmp_path / "bad.txt"),
                 "--output", str(tmp_path / "m")]) == 2
    assert "bad.txt:2: 3 entries" in capsys.readouterr().err
