"""``rankmap summa`` and its files: round trip of the arrangement file, the printed and
JSON costs, and bad input reported with file:line."""

from __future__ import annotations

import argparse
import json
import tracemalloc

import numpy as np
import pytest

from mapper.errors import RankmapError
from mapper.io.summa_files import (
    SummaFileError,
    format_arrangement,
    parse_speeds,
    read_arrangement,
    read_groups,
    read_speeds,
    write_arrangement,
)
from mapper.summa.cost import Grouping, cost
from mapper.summa.tiling import partition
from slurm_plugin.commands.summa_cli import add_summa_command

SPEEDS = [1.0, 2.0, 1.5, 3.0, 1.0, 1.2, 2.2, 1.7, 0.8, 2.5, 1.1, 1.9]
GROUPS = ["a", "b", "c"] * 4  # interleaved: the rank-order layout mixes the groups


def run(argv):
    parser = argparse.ArgumentParser(prog="rankmap")
    add_summa_command(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


@pytest.fixture
def inputs(tmp_path):
    speeds = tmp_path / "speeds.txt"
    speeds.write_text("# relative speeds, rank 0 first\n" +
                      "\n".join(f"{s}  # rank {r}" for r, s in enumerate(SPEEDS)) + "\n")
    groups = tmp_path / "groups.txt"
    groups.write_text("\n".join(GROUPS) + "\n")
    return tmp_path, speeds, groups


def test_round_trip_and_costs(inputs, capsys):
    tmp, speeds, groups = inputs
    out, orig = tmp / "arr.txt", tmp / "orig.txt"
    assert run(["summa", "--speeds", str(speeds), "--groups", str(groups), "--size", "120",
                "--output", str(out), "--original", str(orig), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    arranged, original = read_arrangement(out), read_arrangement(orig)
    g = Grouping.two_level(np.tile([0, 1, 2], 4))
    # the files hold exactly the layouts whose costs were printed
    assert cost(arranged, g).as_dict() == report["arranged"]
    assert cost(original, g).as_dict() == report["original"]
    assert report["arranged"]["norm"] < report["original"]["norm"]
    # original = the partitioner's layout; arranged = same rectangles restacked
    ref = partition(SPEEDS, 120)
    for f in ("column", "position", "row_offset", "col_offset", "height", "width"):
        assert np.array_equal(getattr(original, f), getattr(ref, f))
    assert np.array_equal(arranged.height, ref.height)
    assert np.array_equal(arranged.width, ref.width)
    assert np.array_equal(arranged.column, ref.column)
    text = out.read_text().splitlines()
    assert text[0].startswith("# rankmap summa arrangement: heuristic cost_A=")
    assert text[1] == "12 120" and len(text) == 14
    assert [int(line.split()[0]) for line in text[2:]] == list(range(12))


def test_text_output_and_exhaustive(inputs, capsys):
    tmp, speeds, groups = inputs
    out = tmp / "arr.txt"
    run(["summa", "--speeds", str(speeds), "--groups", str(groups), "--size", "60",
         "--output", str(out), "--exhaustive"])
    text = capsys.readouterr().out
    assert "original" in text and "arranged" in text and "exhaustive" in text
    layout = read_arrangement(out)
    g = Grouping.two_level(np.tile([0, 1, 2], 4))
    row = next(line for line in text.splitlines() if line.startswith("arranged"))
    assert float(row.split()[3]) == pytest.approx(cost(layout, g).norm, abs=0.005)


def test_hierarchy_level_equals_groups_file(inputs, capsys):
    tmp, speeds, _ = inputs
    groups = tmp / "blocks.txt"
    groups.write_text("".join(f"sw{r // 4}\n" for r in range(12)))
    run(["summa", "--speeds", str(speeds), "--groups", str(groups), "--size", "90",
         "--output", str(tmp / "a"), "--json"])
    by_file = json.loads(capsys.readouterr().out)
    # 2 cores x 2 nodes per switch x 3 switches: level 2 groups = blocks of 4 ranks
    run(["summa", "--speeds", str(speeds), "--hierarchy", "2:2:3", "--level", "2",
         "--size", "90", "--output", str(tmp / "b"), "--json"])
    by_level = json.loads(capsys.readouterr().out)
    assert by_file["original"] == by_level["original"]
    assert by_file["arranged"] == by_level["arranged"]
    run(["summa", "--speeds", str(speeds), "--hierarchy", "2:2:3", "--level", "2",
         "--distances", "1:10:100", "--size", "90", "--output", str(tmp / "c"), "--json"])
    weighted = json.loads(capsys.readouterr().out)
    assert weighted["original"]["cost_A"] > by_level["original"]["cost_A"]


def test_arrangement_reader_rejects_bad_files(tmp_path):
    good = format_arrangement(partition([1, 2, 3, 4], 20), "x").splitlines()

    def check(lines, match):
        f = tmp_path / "bad.txt"
        f.write_text("\n".join(lines) + "\n")
        with pytest.raises(SummaFileError, match=match):
            read_arrangement(f)

    check(good[:1] + ["4"] + good[2:], r"bad\.txt:2: expected '<nranks> <N>'")
    check(good[:-1], r"3 rank lines, the header says 4")
    swapped = good[:2] + [good[3], good[2]] + good[4:]
    check(swapped, r"bad\.txt:3: expected rank 0")
    fields = good[3].split()
    fields[5] = str(int(fields[5]) + 1)  # a taller rectangle: no longer tiles
    check(good[:3] + [" ".join(fields)] + good[4:],
          r"bad\.txt:4: rank 1: rows 7\.\.20 end below the 20 x 20 matrix")
    fields = good[3].split()
    fields[4] = "7"
    check(good[:3] + [" ".join(fields)] + good[4:], r"bad\.txt:4: rank 1: col_offset 7")
    check(good[:3] + ["1 0 0 x 0 1 1"] + good[4:], r"bad\.txt:4: expected 7 integers")
    # comments anywhere are fine
    f = tmp_path / "ok.txt"
    f.write_text("\n".join(good[:2] + ["# a comment"] + good[2:]) + "\n")
    assert read_arrangement(f).n == 4


def test_speed_and_group_files(tmp_path):
    f = tmp_path / "s.txt"
    f.write_text("1.5\n# c\n\n2 # fast\n")
    assert read_speeds(f).tolist() == [1.5, 2.0]
    f.write_text("1.5\n-2\n")
    with pytest.raises(SummaFileError, match=r"s\.txt:2: speed of rank 1 must be positive"):
        read_speeds(f)
    f.write_text("1.5\nfast\n")
    with pytest.raises(SummaFileError, match=r"s\.txt:2: expected one number"):
        read_speeds(f)
    f.write_text("# nothing\n")
    with pytest.raises(SummaFileError, match="no speeds"):
        read_speeds(f)
    with pytest.raises(SummaFileError, match="no such file"):
        read_speeds(tmp_path / "missing")
    g = tmp_path / "g.txt"
    g.write_text("sw2\nsw1\nsw2\n")
    assert read_groups(g).tolist() == [0, 1, 0]
    with pytest.raises(SummaFileError, match="3 groups for 4 ranks"):
        read_groups(g, 4)
    g.write_text("sw2\nsw1 x\n")
    with pytest.raises(SummaFileError, match=r"g\.txt:2: expected one group id"):
        read_groups(g)


def test_speeds_beyond_the_task_count_are_refused_at_their_line(tmp_path):
    text = "# speeds\n1\n2\n\n3\n4  # rank 3\n5\n6\n"
    assert parse_speeds(text, "s.txt", 4 + 2).tolist() == [1, 2, 3, 4, 5, 6]
    with pytest.raises(SummaFileError, match=r"^s\.txt:7: more than 4 speeds: the job has "
                                             r"4 tasks") as exc:
        parse_speeds(text, "s.txt", 4)
    assert exc.value.line == 7 and exc.value.source == "s.txt"
    f = tmp_path / "s.txt"
    f.write_text(text)
    with pytest.raises(SummaFileError, match=r"s\.txt:7: more than 4 speeds"):
        read_speeds(f, 4)
    # the check comes before the line is read: a bad line past the tasks says "more than"
    with pytest.raises(SummaFileError, match=r":3: more than 1 speeds"):
        parse_speeds("1\n\nfast\n", "s.txt", 1)


def test_group_lines_beyond_the_rank_count_are_refused_at_their_line(tmp_path):
    g = tmp_path / "g.txt"
    g.write_text("a\nb\n# c\na\nb\n\nc\n")
    assert read_groups(g, 5).tolist() == [0, 1, 0, 1, 2]
    with pytest.raises(SummaFileError, match=r"g\.txt:7: more than 4 groups for 4 ranks"):
        read_groups(g, 4)


def test_a_huge_speeds_file_stops_at_the_first_line_too_many():
    """Issue 28: 33 million ``1`` lines took the worker to 3.7 GB before the count was
    compared; 5 million here must stop at line 5 having allocated almost nothing."""
    text = "1\n" * 5_000_000
    tracemalloc.start()
    try:
        with pytest.raises(SummaFileError, match=r"^big:5: more than 4 speeds"):
            parse_speeds(text, "big", 4)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 << 20, f"{peak} bytes at the peak"


def test_cli_argument_errors(inputs):
    tmp, speeds, groups = inputs
    base = ["summa", "--speeds", str(speeds), "--output", str(tmp / "o"), "--size", "50"]
    with pytest.raises(RankmapError, match="needs --level"):
        run(base + ["--hierarchy", "4:3"])
    with pytest.raises(RankmapError, match="group levels 1..1"):
        run(base + ["--hierarchy", "4:3", "--level", "2"])
    with pytest.raises(RankmapError, match="go with --hierarchy"):
        run(base + ["--groups", str(groups), "--level", "1"])
    with pytest.raises(RankmapError, match="only 8 PEs"):
        run(base + ["--hierarchy", "4:2", "--level", "1"])
    with pytest.raises(RankmapError, match="smaller than"):
        run(["summa", "--speeds", str(speeds), "--groups", str(groups), "--size", "2",
             "--output", str(tmp / "o")])
    with pytest.raises(SystemExit):  # argparse: exactly one of --groups / --hierarchy
        run(base)


def test_written_file_matches_layout(tmp_path):
    layout = partition([3, 1, 2, 2, 5], 77)
    write_arrangement(tmp_path / "a", layout, "two\nlines")
    assert (tmp_path / "a").read_text().splitlines()[0] == \
        "# rankmap summa arrangement: two lines"
    back = read_arrangement(tmp_path / "a")
    for f in ("column", "position", "row_offset", "col_offset", "height", "width"):
        assert np.array_equal(getattr(back, f), getattr(layout, f))
