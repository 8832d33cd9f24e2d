"""``rankmap summa --layout FILE``: an explicit layout (the arrangement file's format)
evaluated and arranged from the command line; the slides' worked example shipped in
slurm_plugin/data/summa-example and reproduced by the README's command (issue 29 item
5); bad layout files refused at their file:line, reading no further than the header's
rank count."""

from __future__ import annotations

import json
import re
import shlex
import tracemalloc

import numpy as np
import pytest

from mapper.errors import RankmapError
from mapper.io.summa_files import (
    SummaFileError,
    format_arrangement,
    parse_arrangement,
    read_arrangement,
    read_groups,
)
from mapper.summa.cost import Grouping, cost
from mapper.summa.tiling import build_column_layout, partition
from slurm_plugin.commands.cli import main
from tests.helpers.paths import REPO
from tests.mapper.summa.test_summa_cost import EXAMPLE_GROUPS, EXAMPLE_OPTIMUM, example_layout

ROOT = REPO
EXAMPLE = ROOT / "slurm_plugin" / "data" / "summa-example"
FIELDS = ("column", "position", "row_offset", "col_offset", "height", "width")


def same_layout(a, b) -> bool:
    return a.size == b.size and all(np.array_equal(getattr(a, f), getattr(b, f))
                                    for f in FIELDS)


def table(text: str) -> dict[str, list[float]]:
    """The printed rows ``original`` and ``arranged``: cost_A, cost_B, norm."""
    rows = {}
    for line in text.splitlines():
        words = line.split()
        if words and words[0] in ("original", "arranged"):
            rows[words[0]] = [float(w) for w in words[1:4]]
    return rows


def readme_commands(prefix: str) -> list[str]:
    """The commands of README.md's code blocks that start with ``prefix`` (lines joined
    at a trailing backslash)."""
    text = "\n\n".join(path.read_text(encoding="utf-8") for path in
                       [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))])
    commands = []
    for block in re.findall(r"^```.*?^```", text, re.M | re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        commands += [line.strip() for line in joined.splitlines()
                     if line.strip().startswith(prefix)]
    return commands


# -- the shipped example --------------------------------------------------------------------

def test_shipped_example_is_the_reconstruction_in_the_tests():
    worst = read_arrangement(EXAMPLE / "worst.arr")
    assert same_layout(worst, example_layout())
    optimal = read_arrangement(EXAMPLE / "optimal.arr", like=worst)
    assert same_layout(optimal, example_layout().with_columns(
        [np.array(c) for c in EXAMPLE_OPTIMUM]))
    groups = read_groups(EXAMPLE / "clusters", 10)
    assert np.array_equal(groups, EXAMPLE_GROUPS)
    g = Grouping.two_level(groups)
    assert (cost(worst, g).cost_a, cost(worst, g).cost_b) == (64, 63)
    assert (cost(optimal, g).cost_a, cost(optimal, g).cost_b) == (50, 54)


def test_the_readme_command_reproduces_89_80_to_73_59(capsys, monkeypatch):
    """The README's command, run as written from the project root through the CLI's
    entry point, prints the slides' worst case and their "optimal" arrangement."""
    (command,) = [c for c in readme_commands("rankmap summa --layout") if "--arranged" in c]
    argv = shlex.split(command)
    assert argv[0] == "rankmap"
    monkeypatch.chdir(ROOT)
    assert main(argv[1:]) == 0
    out = capsys.readouterr().out
    rows = table(out)
    assert rows["original"] == [64, 63, 89.805]  # sqrt(8065); the slides truncate: 89.80
    assert rows["arranged"] == [50, 54, 73.593]  # sqrt(5416): 73.59
    assert "reduction 18.1 %" in out
    assert "10 ranks, 33 x 33 matrix, 3 columns (widths 12 12 9; rectangles 3 3 4)" in out


def test_the_example_arranged_by_the_heuristic_and_by_exhaustive_search(tmp_path, capsys):
    base = ["summa", "--layout", str(EXAMPLE / "worst.arr"),
            "--groups", str(EXAMPLE / "clusters")]
    out = tmp_path / "arr"
    assert main(base + ["--output", str(out), "--original", str(tmp_path / "orig"),
                        "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["original"] == {"cost_A": 64, "cost_B": 63,
                                  "norm": pytest.approx(89.805, abs=1e-3)}
    assert (report["arranged"]["cost_A"], report["arranged"]["cost_B"]) == (35, 54)
    assert report["method"] == "heuristic" and report["evaluations"] == 12
    g = Grouping.two_level(EXAMPLE_GROUPS)
    arranged = read_arrangement(out, like=example_layout())
    assert cost(arranged, g).as_dict() == report["arranged"]
    assert same_layout(read_arrangement(tmp_path / "orig"), example_layout())
    assert main(base + ["--output", str(out), "--exhaustive"]) == 0
    assert table(capsys.readouterr().out)["arranged"] == [33, 54, 63.285]


def test_a_written_arrangement_reads_back_as_a_layout(tmp_path, capsys):
    """--original of the speeds path, given back as --layout, gives the same costs."""
    speeds = tmp_path / "speeds"
    speeds.write_text("\n".join(map(str, [1.0, 2.0, 1.5, 3.0, 1.0, 1.2, 2.2, 1.7])) + "\n")
    common = ["--hierarchy", "2:2:2", "--level", "1", "--json"]
    assert main(["summa", "--speeds", str(speeds), "--size", "64", "--output",
                 str(tmp_path / "a"), "--original", str(tmp_path / "o")] + common) == 0
    by_speeds = json.loads(capsys.readouterr().out)
    assert main(["summa", "--layout", str(tmp_path / "o"), "--output", str(tmp_path / "b")]
                + common) == 0
    by_layout = json.loads(capsys.readouterr().out)
    for key in ("original", "arranged", "evaluations", "column_widths", "nranks", "size"):
        assert by_layout[key] == by_speeds[key]
    assert (tmp_path / "a").read_text().splitlines()[1:] == \
        (tmp_path / "b").read_text().splitlines()[1:]


# -- bad layout files -----------------------------------------------------------------------

GOOD = ["# a layout", "10 33",
        "0 0 0 0 0 14 12", "1 0 1 14 0 10 12", "2 0 2 24 0 9 12",
        "3 1 0 0 12 17 12", "4 1 1 17 12 15 12", "5 1 2 32 12 1 12",
        "6 2 0 0 24 11 9", "7 2 1 11 24 9 9", "8 2 2 20 24 6 9", "9 2 3 26 24 7 9"]


def replaced(line_no: int, text: str) -> list[str]:
    """GOOD with its (1-based) line ``line_no`` replaced."""
    lines = list(GOOD)
    lines[line_no - 1] = text
    return lines


@pytest.fixture
def bad(tmp_path):
    def check(lines, match, **kw):
        f = tmp_path / "lay.arr"
        f.write_text("\n".join(lines) + "\n")
        with pytest.raises(SummaFileError, match=match) as exc:
            read_arrangement(f, **kw)
        assert isinstance(exc.value, RankmapError)
        return exc.value
    return check


def test_the_good_layout_reads(tmp_path):
    f = tmp_path / "lay.arr"
    f.write_text("\n".join(GOOD) + "\n")
    assert same_layout(read_arrangement(f), example_layout())


def test_overlapping_rectangles_are_named_at_their_line(bad):
    # rank 1 taller by one: rank 2 below it starts inside it
    err = bad(replaced(4, "1 0 1 14 0 11 12"),
              r"^.*lay\.arr:5: rank 2 \(rows 24\.\.32 of column 0\) overlaps rank 1 above "
              r"it \(rows 14\.\.24\)")
    assert err.line == 5
    # rank 2 moved up into rank 1
    bad(replaced(5, "2 0 2 23 0 9 12"), r"lay\.arr:5: rank 2 \(rows 23\.\.31 of column 0\) "
                                        r"overlaps rank 1")
    # a rectangle below the matrix
    bad(replaced(5, "2 0 2 24 0 10 12"), r"lay\.arr:5: rank 2: rows 24\.\.33 end below the "
                                         r"33 x 33 matrix")
    # column 1 starting inside column 0
    bad(replaced(6, "3 1 0 0 11 17 12"), r"lay\.arr:6: rank 3: col_offset 11, column 1's "
                                         r"other rectangles start at 12")
    bad(GOOD[:5] + [line.replace(" 12 ", " 11 ", 1) if i < 3 else line
                    for i, line in enumerate(GOOD[5:])],
        r"lay\.arr:6: column 1 \(columns 11\.\.22\) overlaps column 0 \(columns 0\.\.11\)")
    # two ranks at one position
    bad(replaced(5, "2 0 1 24 0 9 12"), r"lay\.arr:5: rank 2: position 1 in column 0, as "
                                        r"rank 1 \(line 4\)")


def test_gaps_are_named_at_their_line(bad):
    # rank 1 shorter by one: a row of column 0 nobody covers
    bad(replaced(4, "1 0 1 14 0 9 12"), r"lay\.arr:5: rank 2 \(rows 24\.\.32 of column 0\) "
                                        r"leaves rows 23\.\.23 above it uncovered")
    # the last rectangle of column 0 ends above the bottom
    bad(replaced(5, "2 0 2 24 0 8 12"), r"lay\.arr:5: rank 2 ends at row 31: rows 32\.\.32 "
                                        r"of column 0 are uncovered")
    # the last column too narrow
    bad(GOOD[:8] + [line[:-1] + "8" for line in GOOD[8:]],
        r"lay\.arr:9: column 2 \(columns 24\.\.31\) ends before the matrix's right edge: "
        r"columns 32\.\.32 are uncovered")
    # column 2 starting one to the right of column 1's end
    bad(GOOD[:8] + [" ".join(line.split()[:4] + ["25"] + line.split()[5:6] + ["8"])
                    for line in GOOD[8:]],
        r"lay\.arr:9: column 2 \(columns 25\.\.32\) leaves columns 24\.\.24 uncovered")
    # a column number with nothing in it
    bad(GOOD[:8] + [line.replace(" 2 ", " 3 ", 1) for line in GOOD[8:]],
        r"lay\.arr:9: rank 6 is in column 3, but column 2 has no rectangle \(columns are "
        r"numbered 0\.\.c-1 left to right\)")


def test_too_many_or_too_few_lines(bad):
    bad(GOOD + ["10 2 4 33 24 0 9"], r"lay\.arr:13: more than 10 rank lines, the header "
                                     r"says 10")
    # the first line too many is refused before it is read: garbage after it is not
    bad(GOOD + ["10 2 4 33 24 0 9", "x"], r"lay\.arr:13: more than 10 rank lines")
    bad(GOOD[:-1], r"lay\.arr:11: 9 rank lines, the header says 10")
    bad(GOOD, r"lay\.arr:2: the header says 10 ranks, expected 12", expected=12)
    bad(["# nothing"], r"lay\.arr: empty arrangement file")


def test_a_non_number_and_other_bad_lines(bad):
    err = bad(replaced(6, "3 1 0 O 12 17 12"),
              r"^.*lay\.arr:6: expected 7 integers \(rank column position row_offset "
              r"col_offset height width\), got '3 1 0 O 12 17 12'")
    assert err.line == 6 and err.source.endswith("lay.arr")
    # the first bad line is reported, not a later one
    bad(replaced(6, "3 1 0 O 12 17 12")[:9] + ["junk"] + GOOD[9:], r"lay\.arr:6: ")
    bad(replaced(2, "10 x"), r"lay\.arr:2: expected '<nranks> <N>'")
    bad(replaced(2, "0 33"), r"lay\.arr:2: nranks and N must be positive")
    bad(replaced(4, "1 0 1 14 0 0 12"), r"lay\.arr:4: rank 1: height and width must be at "
                                        r"least 1")
    bad(replaced(4, "1 0 1 -14 0 10 12"), r"lay\.arr:4: negative value")
    bad(replaced(4, "2 0 1 14 0 10 12"), r"lay\.arr:4: expected rank 1 \(lines in rank "
                                         r"order\), got 2")
    bad(replaced(4, "1 10 1 14 0 10 12"), r"lay\.arr:4: rank 1: column 10, but 10 ranks "
                                          r"have at most columns 0\.\.9")
    bad(replaced(4, "1 0 7 14 0 10 12"), r"lay\.arr:4: rank 1: position 7, but column 0 "
                                         r"holds 3 rectangles \(positions 0\.\.2\)")
    bad(replaced(4, "1 0 1 14 0 10 11"), r"lay\.arr:4: rank 1: width 11 differs from "
                                         r"column 0's width 12")


def test_the_reader_stops_at_the_first_line_beyond_the_header():
    """A file of millions of lines after a small header costs the lines read."""
    text = ("4 4\n0 0 0 0 0 1 4\n1 0 1 1 0 1 4\n2 0 2 2 0 1 4\n3 0 3 3 0 1 4\n"
            + "x\n" * 5_000_000)
    tracemalloc.start()
    try:
        with pytest.raises(SummaFileError, match=r"^big:6: more than 4 rank lines"):
            parse_arrangement(text, "big")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 << 20, f"{peak} bytes at the peak"


def test_an_arranged_file_must_restack_the_same_rectangles(bad):
    layout = example_layout()
    optimal = (EXAMPLE / "optimal.arr").read_text().splitlines()
    assert same_layout(parse_arrangement("\n".join(optimal), "o", like=layout),
                       layout.with_columns([np.array(c) for c in EXAMPLE_OPTIMUM]))
    # whole columns may change places (same rectangles)
    swapped = layout.with_columns(layout.columns(), column_order=[1, 0, 2])
    assert same_layout(parse_arrangement(format_arrangement(swapped), "s", like=layout),
                       swapped)
    bad(GOOD[:1] + ["10 34"] + GOOD[2:], r"lay\.arr:2: N = 34, the layout's is 33",
        like=layout)
    bad(GOOD, r"lay\.arr:2: the header says 10 ranks, expected 4",
        like=partition([1, 1, 1, 1], 10))
    # another partition of the same matrix: rank 0's rectangle differs
    bad(format_arrangement(partition(range(1, 11), 33)).splitlines(),
        r"lay\.arr:3: rank 0: height [0-9]+, the layout's is 14 \(an arrangement keeps "
        r"every rectangle\)", like=layout)
    bad(replaced(8, "5 1 2 32 12 1 11"), r"lay\.arr:8: rank 5: width 11, the layout's is 12",
        like=layout)
    # the same rectangles in two columns of equal width, but other ranks share a column
    square = build_column_layout([np.array([0, 1]), np.array([2, 3])], np.full(4, 5),
                          np.array([5, 5]), 10)
    mixed = build_column_layout([np.array([0, 2]), np.array([1, 3])], np.full(4, 5),
                         np.array([5, 5]), 10)
    with pytest.raises(SummaFileError, match=r"^m:4: rank 1 is in column 1 and rank 0 in "
                                             r"column 0, but they share column 0 in the "
                                             r"layout \(an arrangement only restacks"):
        parse_arrangement(format_arrangement(mixed), "m", like=square)


# -- command-line errors --------------------------------------------------------------------

def test_cli_argument_errors_with_layout(tmp_path, capsys):
    lay, groups = str(EXAMPLE / "worst.arr"), str(EXAMPLE / "clusters")
    base = ["summa", "--layout", lay, "--groups", groups]
    for extra, msg in (
            (["--size", "33", "--output", "o"], "--size goes with --speeds"),
            (["--arranged", lay, "--exhaustive"], "--arranged is evaluated as it is"),
            ([], "--output ARR is needed"),
    ):
        assert main(base + extra) == 2
        assert msg in capsys.readouterr().err
    speeds = tmp_path / "s"
    speeds.write_text("1\n2\n")
    assert main(["summa", "--speeds", str(speeds), "--groups", groups, "--output",
                 str(tmp_path / "o")]) == 2
    assert "--speeds needs --size N" in capsys.readouterr().err
    assert main(["summa", "--speeds", str(speeds), "--groups", groups, "--size", "8",
                 "--arranged", lay, "--output", str(tmp_path / "o")]) == 2
    assert "--arranged goes with --layout" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # one of --speeds / --layout
        main(["summa", "--speeds", str(speeds), "--layout", lay, "--groups", groups])
    bad_layout = tmp_path / "bad.arr"
    bad_layout.write_text("\n".join(replaced(6, "3 1 0 O 12 17 12")) + "\n")
    assert main(["summa", "--layout", str(bad_layout), "--groups", groups, "--output",
                 str(tmp_path / "o")]) == 2
    assert f"{bad_layout}:6: expected 7 integers" in capsys.readouterr().err
    # a groups file for another rank count
    assert main(["summa", "--layout", lay, "--groups", str(speeds), "--output",
                 str(tmp_path / "o")]) == 2
    assert "2 groups for 10 ranks" in capsys.readouterr().err
