"""SMPI time-independent trace import: point-to-point and expanded collectives, counted
exactly, and errors that name the file and line."""

from __future__ import annotations

import numpy as np
import pytest

from slurm_plugin.commands.cli import main
from slurm_plugin.profiles.smpi_ti import TraceError, import_ti

# Four ranks, written the way SimGrid 3.32 writes them (datatype 2 = MPI_CHAR, 0 =
# MPI_DOUBLE, 1 = MPI_INT, 6 = MPI_BYTE).
RANKS = {
    0: "0 init\n0 send 1 5 1000 2\n0 isend 2 1 10 0\n0 bcast 100 0 6 \n0 finalize\n",
    1: "1 init\n1 recv 0 5 1000 2\n1 bcast 100 0 6 \n1 finalize\n",
    2: "2 init\n2 irecv 0 1 10 0\n2 wait 0 2 1\n2 bcast 100 0 6 \n2 finalize\n",
    3: "3 init\n3 bcast 100 0 6 \n3 sendRecv 4 0 4 0 1 1\n3 compute 0.5\n3 finalize\n",
}


def _write(tmp_path, ranks=RANKS):
    files = []
    for r, text in ranks.items():
        p = tmp_path / f"trace_files/1_rank-{r + 1}.txt"
        p.parent.mkdir(exist_ok=True)
        p.write_text(text)
        files.append(p)
    index = tmp_path / "trace"
    index.write_text("".join(f"trace_files/{p.name}\n" for p in files))
    return index, files


def _dense(g) -> np.ndarray:
    u, v, w = g.edges()
    a = np.zeros((g.n, g.n))
    a[u, v] = w
    return a + a.T


def test_p2p_and_binomial_bcast_counted_exactly(tmp_path):
    index, files = _write(tmp_path)
    want = np.zeros((4, 4))
    want[0, 1] = 1000 + 100      # send of 1000 chars; bcast tree edge 0 -> 1
    want[0, 2] = 10 * 8 + 100    # isend of 10 doubles; bcast tree edge 0 -> 2
    want[2, 3] = 100             # bcast tree edge 2 -> 3 (binomial from root 0)
    want[0, 3] = 4 * 4           # sendRecv of 4 ints from 3 to 0
    want += want.T
    for source in ([index], files):  # the index file or the per-rank files
        assert np.array_equal(_dense(import_ti(source)), want)


def test_allreduce_recursive_doubling_with_fold_in(tmp_path):
    ranks = {r: f"{r} allreduce 3 0 0 \n" for r in range(6)}  # 3 doubles, n = 6, p = 4
    index, _ = _write(tmp_path, ranks)
    a = _dense(import_ti([index]))
    pairs = {(0, 1), (2, 3), (0, 2), (1, 3), (0, 4), (1, 5)}
    want = np.zeros((6, 6))
    for u, v in pairs:
        # xor partners exchange both ways; fold-in ranks send in and get the result back
        want[u, v] = want[v, u] = 2 * 24
    assert np.array_equal(a, want)


@pytest.mark.parametrize(("line", "message"), [
    ("0 frobnicate 3", r"rank-1\.txt:2: unknown TI action 'frobnicate'"),
    ("0 send 9 0 10 2", r"rank-1\.txt:2: destination 9 is not a rank below 2"),
    ("0 send 1 0 10 77", r"rank-1\.txt:2: unknown datatype id 77"),
    ("0 send 1 0 ten 2", r"rank-1\.txt:2: count 'ten' is not a number"),
    ("0 alltoallv 3 1", r"rank-1\.txt:2: expected 2 send counts"),
])
def test_bad_lines_name_file_and_line(tmp_path, line, message):
    _, files = _write(tmp_path, {0: "0 init\n" + line + "\n", 1: "1 init\n"})
    with pytest.raises(TraceError, match=message):
        import_ti(files)


def test_missing_rank_file(tmp_path):
    _, files = _write(tmp_path, {0: "0 init\n", 2: "2 init\n"})
    with pytest.raises(TraceError, match=r"no trace lines for ranks \[1\]"):
        import_ti(files)


def test_cli_import_smpi_ti_writes_profile(tmp_path, capsys):
    index, _ = _write(tmp_path)
    store = tmp_path / "store"
    assert main(["profile", "import", "--format", "smpi-ti", str(index), "--name", "tiny",
                 "--store", str(store)]) == 0
    assert "4 ranks, 4 edges, 1396 bytes" in capsys.readouterr().out
    toml = (store / "tiny.toml").read_text()
    assert 'ranks = 4' in toml and 'units = "bytes"' in toml and "SMPI" in toml
    assert main(["profile", "show", "tiny", "--store", str(store)]) == 0
    assert main(["profile", "import", "--format", "smpi-ti", str(tmp_path / "nope"),
                 "--name", "x", "--store", str(store)]) == 2


def test_import_says_that_collectives_are_taken_as_the_worlds(tmp_path, capsys):
    """A TI trace names no communicator: the import says its collectives were
    expanded over all ranks; ranks calling different collectives (a row allreduce on
    half of them) are sub-communicators for sure, and said so."""
    def imported(name: str, ranks: dict[int, str]) -> str:
        (tmp_path / name).mkdir()
        index, _ = _write(tmp_path / name, ranks)
        assert main(["profile", "import", "--format", "smpi-ti", str(index), "--name",
                     name, "--store", str(tmp_path / "store")]) == 0
        return capsys.readouterr().out

    world = {r: f"{r} init\n{r} allreduce 8 0 0\n{r} send {(r + 1) % 4} 0 100 1\n"
             for r in range(4)}
    out = imported("world", world)
    assert "collectives were taken as MPI_COMM_WORLD's" in out
    assert "sub-communicators" not in out
    out = imported("rows", {r: world[r] + (f"{r} allreduce 64 0 0\n" if r < 2 else "")
                            for r in range(4)})
    assert "collectives on sub-communicators: rank 2 calls 1 collectives" in out
    assert "expanded over all 4 ranks" in out
