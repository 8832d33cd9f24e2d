"""mapper.io.partition_file: the part format read back (comments, blank lines, errors
naming the line) and written one value per line; the CLI's use of it is in
tests/slurm_plugin/commands/test_mesh_cli.py."""

import numpy as np
import pytest

from mapper.io.partition_file import PartitionFileError, read_partition_file, write_lines


def test_comments_and_blank_lines_in_partition_file(tmp_path):
    ranks = np.arange(256) % 24
    f = tmp_path / "c.part"
    f.write_text("# made by hand\n\n" + "\n".join(f"{r}  # v" for r in ranks) + "\n")
    assert np.array_equal(read_partition_file(str(f), 256, 24), ranks)


def test_written_partition_reads_back(tmp_path):
    ranks = np.array([3, 0, 2, 1, 1])
    write_lines(tmp_path / "p.part", ranks)
    assert np.array_equal(read_partition_file(str(tmp_path / "p.part"), 5, 4), ranks)


@pytest.mark.parametrize("text, where", [("0\n1\n", ":3"), ("0\nx\n0\n", ":2"),
                                         ("0\n9\n0\n", ":2")])
def test_bad_files_name_the_line(tmp_path, text, where):
    f = tmp_path / "bad.part"
    f.write_text(text)
    with pytest.raises(PartitionFileError) as err:
        read_partition_file(str(f), 3, 4)
    assert str(err.value).startswith(f"{f}{where}")
