"""``rankmap report JOBDIR [--png FILE]`` on directories written by ``rankmap plan``."""

import importlib.util
import json
import struct
import sys

import numpy as np
import pytest

from mapper.graph import CommGraph
from mapper.graph_io import write_mtx
from slurm_plugin import cli
from slurm_plugin.profiles.generators import generate
from slurm_plugin.report_cli import placement_order

needs_matplotlib = pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None,
                                      reason="matplotlib not installed (optional: png)")


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    """A 64-rank stencil with scrambled rank numbers on 8 nodes: rankmap's placement is
    applied, so the directory holds a rankfile."""
    d = tmp_path_factory.mktemp("job")
    a = generate("stencil3d:4x4x4", 64).to_csr().tocoo()
    perm = np.random.default_rng(1).permutation(64)
    write_mtx(CommGraph.from_edges(perm[a.row], perm[a.col], a.data * 1e6, n=64),
              d / "scrambled.mtx")
    assert cli.main(["plan", "--nodes", "n[1-8]", "--profile", str(d / "scrambled.mtx"),
                     "--out", str(d / "out")]) == 0
    assert (d / "out" / "rankfile").is_file()
    return d


def png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_report_prints_the_job_directorys_report(planned, capsys):
    capsys.readouterr()
    assert cli.main(["report", str(planned / "out")]) == 0
    assert capsys.readouterr().out == (planned / "out" / "report.txt").read_text()


def test_report_of_a_directory_without_one_is_a_user_error(tmp_path, capsys):
    assert cli.main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path}/report.txt: no such file" in err and "Traceback" not in err


def test_placement_order_follows_the_rankfile(planned):
    out = planned / "out"
    record = json.loads((out / "report.json").read_text())
    order, sizes, label = placement_order(out, record)
    assert sorted(order.tolist()) == list(range(64)) and sizes == [8] * 8
    assert label == "from the rankfile"
    hosts = {}
    for line in (out / "rankfile").read_text().splitlines():
        if line.startswith("rank "):
            rank, rest = line[5:].split("=", 1)
            hosts[int(rank)] = rest.split()[0]
    assert [hosts[r] for r in order] == [f"n{i}" for i in range(1, 9) for _ in range(8)]


@needs_matplotlib
def test_png_of_an_applied_placement(planned, capsys):
    png = planned / "report.png"
    assert cli.main(["report", str(planned / "out"), "--png", str(png)]) == 0
    assert f"wrote {png}" in capsys.readouterr().out
    assert png_size(png) == (1600, 500)
    assert 20_000 < png.stat().st_size < 2_000_000  # three drawn panels, not a blank page


@needs_matplotlib
def test_png_without_the_profile_still_draws_the_bars(planned, tmp_path, capsys):
    out = planned / "out"
    png = tmp_path / "r.png"
    assert cli.main(["report", str(out), "--png", str(png), "--profile",
                     str(tmp_path / "gone.mtx")]) == 0
    assert "not drawn" in capsys.readouterr().err
    assert png_size(png) == (1600, 500)


def test_png_without_matplotlib_names_the_package_and_the_command(planned, tmp_path,
                                                                  monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails as if absent
    assert cli.main(["report", str(planned / "out"), "--png", str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err
    assert "needs matplotlib" in err and f"{sys.executable} -m pip install matplotlib" in err
    assert not (tmp_path / "x.png").exists()


def test_kept_default_has_no_placement_order_and_still_draws(tmp_path, capsys):
    out = tmp_path / "out"
    assert cli.main(["plan", "--nodes", "n[1-4]", "--profile", "stencil3d:4x4x2,periodic",
                     "--out", str(out)]) == 0
    assert not (out / "rankfile").exists()
    order, sizes, label = placement_order(out, json.loads((out / "report.json").read_text()))
    assert order is None and label == "Slurm's own placement: rank order"
    if importlib.util.find_spec("matplotlib") is not None:
        assert cli.main(["report", str(out), "--png", str(tmp_path / "k.png")]) == 0
        assert png_size(tmp_path / "k.png") == (1600, 500)
