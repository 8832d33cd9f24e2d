"""The seed's hardware information file: parse/format and ``rankmap map --arity-file``."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from mapper.io.arity_file import (
    ArityFileError,
    arities_of,
    format_arity_file,
    hierarchy_from_arities,
    parse_arity_file,
)
from mapper.io.metis_file import write_metis
from mapper.model.graph import CommGraph
from mapper.model.machine import Hierarchy, MachineError
from slurm_plugin.commands.cli import main

SEED_SAMPLE = "3\n2 4 2\n"  # the seed's Fig. 2: 2 x 4 x 2 = 16 PEs


def test_seed_sample_round_trip():
    assert parse_arity_file(SEED_SAMPLE) == [2, 4, 2]
    assert format_arity_file([2, 4, 2]) == SEED_SAMPLE
    text = "# from lstopo\n\n1   # one level\n  8\n\n"
    assert parse_arity_file(text) == [8]


def test_hierarchy_from_arities_root_first_and_tree_hops():
    m = hierarchy_from_arities([2, 3, 4])  # root 2 children, then 3, then 4 PEs
    assert m.n == 24
    assert m.group_sizes(0).tolist() == [4] * 6 and m.group_sizes(1).tolist() == [12] * 2
    assert m.distances.tolist() == [2, 4, 6]
    assert m.distance(0, 3) == 2 and m.distance(0, 4) == 4 and m.distance(0, 12) == 6
    assert arities_of(m) == [2, 3, 4]
    assert arities_of(Hierarchy.homogeneous([4, 16, 8], [1, 10, 100])) == [8, 16, 4]
    with pytest.raises(MachineError, match="equal groups"):
        arities_of(Hierarchy.from_tree([2, 3], [1, 10]))


@pytest.mark.parametrize("text,where,what", [
    ("", "f.txt", "empty"),
    ("two\n2 2\n", "f.txt:1", "number of levels"),
    ("0\n\n", "f.txt:1", "number of levels"),
    ("3\n", "f.txt", "second line"),
    ("# c\n3\n2 4\n", "f.txt:3", "2 arities, but line 2 says 3 levels"),
    ("2\n2 x\n", "f.txt:2", "arity 'x'"),
    ("2\n2 0\n", "f.txt:2", "arity '0'"),
    ("2\n2 2\n4\n", "f.txt:3", "unexpected text"),
    # digits to str.isdigit that int() refuses: an error at the line, not a ValueError
    ("2\n2 \u00b2\n", "f.txt:2", "arity '\u00b2' is not a whole number"),
    ("\u00b2\n2\n", "f.txt:1", "number of levels"),
    ("1\n" + "9" * 5000 + "\n", "f.txt:2", "is not a whole number"),
])
def test_errors_name_file_and_line(text, where, what):
    with pytest.raises(ArityFileError) as exc:
        parse_arity_file(text, "f.txt")
    assert str(exc.value).startswith(where + ":") and what in str(exc.value)


def test_more_pes_than_to_place_are_refused_before_the_machine_is_built():
    assert parse_arity_file(SEED_SAMPLE, "f.txt", 16) == [2, 4, 2]
    with pytest.raises(ArityFileError, match=r"^f\.txt:2: the arities make 1000000000 PEs, "
                                             r"more than the 16 to place"):
        parse_arity_file("3\n1000 1000 1000\n", "f.txt", 16)
    assert parse_arity_file("1\n8\n", "f.txt", 16) == [8]  # fewer: the caller's to say


def test_a_huge_arity_file_stops_at_its_third_line():
    """Issue 28: the file has two lines that say something; millions more must not be
    split into lines before the third is refused."""
    text = SEED_SAMPLE + "2\n" * 5_000_000
    tracemalloc.start()
    try:
        with pytest.raises(ArityFileError, match=r"^f\.txt:3: unexpected text"):
            parse_arity_file(text, "f.txt")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 << 20, f"{peak} bytes at the peak"


@pytest.fixture
def ring16(tmp_path):
    a = np.zeros((16, 16))
    for i in range(16):
        a[i, (i + 1) % 16] = 10
    path = tmp_path / "ring.graph"
    write_metis(CommGraph.from_matrix(a), path)
    return path


def test_map_with_arity_file_equals_hierarchy(ring16, tmp_path, capsys):
    arity = tmp_path / "hw.txt"
    arity.write_text(SEED_SAMPLE)
    assert main(["map", str(ring16), "--arity-file", str(arity), "--algorithm", "topdown",
                 "--output", str(tmp_path / "a.map"), "--json"]) == 0
    a = capsys.readouterr().out
    assert main(["map", str(ring16), "--hierarchy", "2:4:2", "--distances", "2:4:6",
                 "--algorithm", "topdown", "--output", str(tmp_path / "b.map"),
                 "--json"]) == 0
    b = capsys.readouterr().out
    assert '"objective"' in a and a.split('"seconds"')[0] == b.split('"seconds"')[0]
    assert (tmp_path / "a.map").read_text() == (tmp_path / "b.map").read_text()
    # --distances with an arity file: innermost first, one per level
    assert main(["evaluate", str(ring16), "--arity-file", str(arity), "--distances",
                 "1:10:100", "--mapping", str(tmp_path / "a.map")]) == 0


def test_map_arity_file_errors(ring16, tmp_path, capsys):
    bad = tmp_path / "hw.txt"
    bad.write_text("3\n2 4\n")
    out = str(tmp_path / "m")
    assert main(["map", str(ring16), "--arity-file", str(bad), "--output", out]) == 2
    assert f"{bad}:2: 2 arities" in capsys.readouterr().err
    assert main(["map", str(ring16), "--arity-file", str(tmp_path / "none"),
                 "--output", out]) == 2
    assert "cannot read" in capsys.readouterr().err
    bad.write_text(SEED_SAMPLE)
    assert main(["map", str(ring16), "--arity-file", str(bad), "--hierarchy", "16",
                 "--output", out]) == 2
    assert "either --arity-file" in capsys.readouterr().err
    assert main(["map", str(ring16), "--arity-file", str(bad), "--distances", "1:2",
                 "--output", out]) == 2
    assert "has 2 levels but" in capsys.readouterr().err
    bad.write_text("1\n8\n")
    assert main(["map", str(ring16), "--arity-file", str(bad), "--output", out]) == 2
    assert "16 ranks but --arity-file" in capsys.readouterr().err
    # a machine of 10^9 PEs (an 11 GiB array) for 16 ranks is refused unbuilt
    bad.write_text("3\n1000 1000 1000\n")
    assert main(["map", str(ring16), "--arity-file", str(bad), "--output", out]) == 2
    assert f"{bad}:2: the arities make 1000000000 PEs, more than the 16" in \
        capsys.readouterr().err
