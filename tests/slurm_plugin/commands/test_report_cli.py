"""``rankmap report JOBDIR [--png FILE]`` on directories written by ``rankmap plan``."""

import importlib.util
import json
import os
import shutil
import struct
import sys
import tracemalloc

import numpy as np
import pytest

from mapper.io.mtx_file import write_mtx
from mapper.model.graph import CommGraph
from slurm_plugin.commands import cli, report_cli
from slurm_plugin.commands.report_cli import USER_PATH_NOTE, picture_record, placement_order
from slurm_plugin.outputs import report_png
from slurm_plugin.profiles.generators import generate

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
    assert cli.main(["report", str(planned / "out"), "--png", str(png),
                     "--profile", str(planned / "scrambled.mtx")]) == 0
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


# -- a job directory its user wrote (issue 28, item 4) -------------------------------------

@pytest.fixture
def userdir(planned, tmp_path):
    """A copy of the planned job's directory, for a test to tamper with."""
    d = tmp_path / "job.7"
    shutil.copytree(planned / "out", d)
    return d


@pytest.fixture
def drawn(monkeypatch):
    """Stands in for the picture (works without matplotlib): what it was given."""
    seen = {}

    def draw(record, path, matrix=None, order=None, node_sizes=None, order_label="",
             note=""):
        seen.update(record=record, matrix=matrix, order=order, note=note)

    monkeypatch.setattr(report_png, "draw_report_png", draw)
    return seen


def test_report_text_is_printed_with_its_control_characters_escaped(userdir, capsys):
    (userdir / "report.txt").write_text("rankmap report\n\x1b]0;pwned\x07\x1b[2J"
                                        "\r fake\u2028line \u202egnp.exe\nlast\n")
    capsys.readouterr()
    assert cli.main(["report", str(userdir)]) == 0
    out = capsys.readouterr().out
    assert out == ("rankmap report\n\\x1b]0;pwned\\x07\\x1b[2J\\r fake\\u2028line "
                   "\\u202egnp.exe\nlast\n")
    assert not any(c in out for c in "\x1b\x07\r\u2028\u202e")


def test_report_txt_through_a_symbolic_link_is_refused(userdir, tmp_path, capsys):
    secret = tmp_path / "secret"
    secret.write_text("root:the-secret\n")
    (userdir / "report.txt").unlink()
    (userdir / "report.txt").symlink_to(secret)
    capsys.readouterr()
    assert cli.main(["report", str(userdir)]) == 2
    out, err = capsys.readouterr()
    assert "the-secret" not in out + err
    assert f"{userdir}/report.txt: is a symbolic link" in err and "Traceback" not in err


def test_launcher_file_through_a_symbolic_link_is_refused(userdir, tmp_path, drawn, capsys):
    (userdir / "rankfile").unlink()
    (userdir / "rankfile").symlink_to("/etc/passwd")
    assert cli.main(["report", str(userdir), "--png", str(tmp_path / "x.png")]) == 2
    assert f"{userdir}/rankfile: is a symbolic link" in capsys.readouterr().err
    assert not drawn


def test_a_symbolic_link_as_the_job_directory_is_refused(userdir, tmp_path, capsys):
    (tmp_path / "link").symlink_to(userdir)
    assert cli.main(["report", str(tmp_path / "link")]) == 2
    assert "is a symbolic link; give the directory it leads to" in capsys.readouterr().err


def test_huge_or_special_report_files_are_refused_unread(userdir, capsys):
    report = userdir / "report.txt"
    report.unlink()
    with open(report, "wb") as fh:  # sparse: 1 GiB that reading whole would hold in memory
        fh.truncate(1 << 30)
    tracemalloc.start()
    try:
        assert cli.main(["report", str(userdir)]) == 2
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 << 20, f"{peak} bytes at the peak"  # the 1 GiB was not read
    assert "more than 8388608 bytes" in capsys.readouterr().err
    report.unlink()
    os.mkfifo(report)  # a FIFO without a writer would block a plain open()
    assert cli.main(["report", str(userdir)]) == 2
    assert "is a FIFO, not a regular file" in capsys.readouterr().err


def test_oversized_launcher_file_for_the_records_rank_count_is_refused(userdir, tmp_path,
                                                                      drawn, capsys):
    with open(userdir / "rankfile", "ab") as fh:  # 64 ranks cannot need 100 MB
        fh.truncate(100 << 20)
    assert cli.main(["report", str(userdir), "--png", str(tmp_path / "x.png")]) == 2
    assert f"{userdir}/rankfile: more than" in capsys.readouterr().err


def record_of(userdir, **changes):
    record = json.loads((userdir / "report.json").read_text())
    record.update(changes)
    (userdir / "report.json").write_text(json.dumps(record))
    return record


def test_a_user_file_path_in_the_record_is_never_read(userdir, tmp_path, drawn, monkeypatch,
                                                      capsys):
    """The record names a FIFO (reading it would fail) and files in the current
    directory: none is opened, the picture says why; a bare file name is a store name,
    looked up in the stores only."""
    def no_reading(*args, **kw):
        raise AssertionError(f"read a path from report.json: {args}")

    monkeypatch.setattr(report_cli, "read_graph", no_reading)
    fifo = tmp_path / "huge.csv"
    os.mkfifo(fifo)
    monkeypatch.chdir(tmp_path)
    write_mtx(generate("ring", 64), tmp_path / "here.mtx")  # would be drawn if read
    for spec in (f"file:{fifo}", str(fifo), "./here.mtx", "~/p.mtx", "here.mtx"):
        record_of(userdir, profile=spec)
        drawn.clear()
        assert cli.main(["report", str(userdir), "--png", str(tmp_path / "x.png")]) == 0
        assert drawn["matrix"] is None, spec
        assert drawn["order"] is not None  # the rankfile is still used
        if spec != "here.mtx":
            assert drawn["note"] == USER_PATH_NOTE, spec
    assert "'here.mtx' not found in the profile stores" in capsys.readouterr().err


def test_the_invokers_profile_file_and_a_store_or_generator_spec_are_drawn(
        userdir, planned, drawn):
    assert cli.main(["report", str(userdir), "--png", "x.png", "--profile",
                     str(planned / "scrambled.mtx")]) == 0
    assert drawn["matrix"].shape == (64, 64)
    record_of(userdir, profile="stencil3d:4x4x4")
    assert cli.main(["report", str(userdir), "--png", "x.png"]) == 0
    assert drawn["matrix"].shape == (64, 64) and drawn["note"] == ""


@pytest.mark.parametrize("n", [1 << 30, "64", 64.0, True, -1])
def test_the_records_rank_count_is_bounded(userdir, n, drawn, capsys):
    record_of(userdir, n=n)
    assert cli.main(["report", str(userdir), "--png", "x.png"]) == 2
    assert "'n' is" in capsys.readouterr().err and not drawn


def test_a_node_list_that_expands_beyond_the_job_is_refused_unexpanded(userdir, drawn,
                                                                       capsys):
    for nodes in ("n[1-999999999]", "@all", "n[1-8],x!y"):
        record_of(userdir, nodes=nodes)
        tracemalloc.start()
        try:
            assert cli.main(["report", str(userdir), "--png", "x.png"]) == 2
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 50 << 20, f"{peak} bytes at the peak"  # no host list expanded
        assert "'nodes' is not a host list" in capsys.readouterr().err


def test_strings_of_the_record_reach_the_picture_escaped(userdir, drawn):
    record_of(userdir, summary="ok\x1b]0;pwned\x07 $\\frac{$", job_id="7\n8",
              units="by\x1btes")
    assert cli.main(["report", str(userdir), "--png", "x.png"]) == 0
    shown = drawn["record"]
    assert shown["summary"] == "ok\\x1b]0;pwned\\x07 $\\frac{$"
    assert shown["job_id"] == "7\\n8" and shown["units"] == "by\\x1btes"
    assert report_png.plain("a $x$ b") == r"a \$x\$ b"
    with pytest.raises(report_cli.ReportError, match="not a short list"):
        picture_record({"placements": {"a": 1}})
