"""A recording job's files → the user's store (slurm_plugin.profiles.recorded_job and
store_writer): new profile, added sample with provenance, generator kept only while
every sample matches, incomplete and refused recordings kept aside with the reason."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import tomllib

from slurm_plugin.common.user_paths import UserPathError, expand_user_path, own_directory
from slurm_plugin.profiles.recorded_job import (
    collect_recording,
    incomplete_recordings,
    launches,
)
from slurm_plugin.profiles.store import ProfileStore
from tests.slurm_plugin.profiles.test_recording import rank_text

UID = os.getuid()
LIMIT = 1 << 20


def ring_p2p(r: int, size: int, nbytes: int = 300) -> str:
    return f"{(r + 1) % size} {nbytes} 1\n"


def recording(tmp_path: Path, name: str = "app", ntasks: int = 4, job: str = "7",
              runs: tuple[int, ...] = (4,), skip: tuple[int, ...] = (),
              nbytes: int = 300, p2p=None) -> Path:
    """A recording directory as the TaskProlog and the interposer leave it; rank r of
    each launch sends ``p2p(r, size)`` (default: ``nbytes`` to r+1)."""
    d = tmp_path / "recordings" / job
    (d / "mpi").mkdir(parents=True)
    (d / "ompi").mkdir()
    (d / "recording.json").write_text(json.dumps(
        {"name": name, "job": job, "ntasks": ntasks, "origin": "option",
         "started": "2026-11-27T13:00:00+0000"}))
    for k, size in enumerate(runs):
        run = d / "mpi" / f"run.{k}"
        run.mkdir()
        for r in range(size):
            if r not in skip:
                lines = p2p(r, size) if p2p else ring_p2p(r, size, nbytes)
                (run / f"rank.{r}").write_text(rank_text(r, size, p2p=lines))
    return d


def dense(path: Path) -> np.ndarray:
    from mapper.io.graph_file import read_graph

    return read_graph(path).to_csr().toarray()


def ring(n: int, nbytes: float = 300) -> np.ndarray:
    a = np.zeros((n, n))
    for r in range(n):
        a[r, (r + 1) % n] += nbytes
        a[(r + 1) % n, r] += nbytes
    return a


def test_a_complete_run_becomes_a_profile_with_its_provenance(tmp_path):
    store = tmp_path / "store"
    done = collect_recording(recording(tmp_path), store, UID, max_file_bytes=LIMIT)
    assert done.stored is not None and done.stored.sample == 1, done
    entry = tomllib.loads((store / "app.toml").read_text())
    assert entry["ranks"] == 4 and entry["file"] == "app.mtx"
    assert entry["runs"] == [{"file": "app.mtx", "job": "7",
                              "date": "2026-11-27T13:00:00+0000", "mpi": "MPICH test",
                              "recorder": "librankmap_record", "ranks": 4,
                              "volume": 1200.0}]
    assert entry["generator"] == "ring"  # a ring: usable at other sizes
    assert np.array_equal(dense(store / "app.mtx"), ring(4))
    assert not (tmp_path / "recordings" / "7").exists()  # raw files removed
    info = ProfileStore([store]).find("app")
    assert info.runs[0]["job"] == "7"
    assert ProfileStore([store]).load("app", 6).n == 6  # the generator at 6 ranks
    assert "new profile" in done.sentence()


def test_a_second_recording_is_a_second_sample_and_keeps_the_first(tmp_path):
    store = tmp_path / "store"
    collect_recording(recording(tmp_path, job="7"), store, UID, max_file_bytes=LIMIT)
    done = collect_recording(recording(tmp_path, job="8", nbytes=500), store, UID,
                             max_file_bytes=LIMIT)
    assert done.stored.sample == 2 and done.stored.matrix == "app.s1.mtx"
    entry = tomllib.loads((store / "app.toml").read_text())
    assert entry["samples"] == ["app.mtx", "app.s1.mtx"]
    assert [r["job"] for r in entry["runs"]] == ["7", "8"]
    assert np.array_equal(dense(store / "app.mtx"), ring(4))
    assert np.array_equal(dense(store / "app.s1.mtx"), ring(4, 500))
    assert entry["generator"] == "ring"
    g = ProfileStore([store]).load("app", 4)
    assert len(g.samples) == 2


def test_a_sample_of_another_pattern_drops_the_generator(tmp_path):
    store = tmp_path / "store"
    collect_recording(recording(tmp_path, job="7"), store, UID, max_file_bytes=LIMIT)
    def star(r: int, size: int) -> str:  # everyone talks to rank 0 too: not a ring
        lines = {(r + 1) % size: 300}
        if r:
            lines[0] = lines.get(0, 0) + 900
        return "".join(f"{d} {b} 1\n" for d, b in sorted(lines.items()))
    d = recording(tmp_path, job="8", p2p=star)
    done = collect_recording(d, store, UID, max_file_bytes=LIMIT)
    assert done.stored is not None, done
    assert "generator" not in tomllib.loads((store / "app.toml").read_text())


def test_the_heaviest_launch_of_the_jobs_size_is_taken(tmp_path):
    d = recording(tmp_path, runs=(2, 4))
    found, why = launches(d, 4, LIMIT)
    assert [f.where.name for f in found] == ["run.1"]
    assert "a launch of 2 ranks, the job has 4 tasks" in why[0]


def test_a_missing_rank_keeps_the_recording_aside_with_the_reason(tmp_path):
    store = tmp_path / "store"
    d = recording(tmp_path, skip=(2,))
    done = collect_recording(d, store, UID, max_file_bytes=LIMIT)
    assert done.stored is None and "1 of 4 ranks wrote no file" in done.reason
    aside = tmp_path / "recordings" / "7.incomplete"
    assert aside.is_dir() and not d.exists()
    assert "1 of 4 ranks wrote no file" in (aside / "reason.txt").read_text()
    assert not (store / "app.toml").exists()
    assert incomplete_recordings(tmp_path / "recordings")[0][0] == "7"


def test_a_job_whose_program_never_finished_says_so(tmp_path):
    d = recording(tmp_path, runs=())
    done = collect_recording(d, tmp_path / "store", UID, max_file_bytes=LIMIT)
    assert "reached MPI_Finalize" in done.reason


def test_a_store_that_is_a_link_is_refused_and_nothing_written_there(tmp_path):
    elsewhere = tmp_path / "roots"
    elsewhere.mkdir()
    store = tmp_path / "store"
    store.symlink_to(elsewhere)
    done = collect_recording(recording(tmp_path), store, UID, max_file_bytes=LIMIT)
    assert done.stored is None and "symbolic link" in done.reason
    assert list(elsewhere.iterdir()) == []
    assert (tmp_path / "recordings" / "7.incomplete").is_dir()


def test_an_entry_of_another_rank_count_is_not_overwritten(tmp_path):
    store = tmp_path / "store"
    collect_recording(recording(tmp_path, job="7"), store, UID, max_file_bytes=LIMIT)
    before = (store / "app.toml").read_text()
    done = collect_recording(recording(tmp_path, job="8", ntasks=6, runs=(6,)), store, UID,
                             max_file_bytes=LIMIT)
    assert "has 4 ranks, this recording 6" in done.reason
    assert (store / "app.toml").read_text() == before


def test_monitoring_files_count_application_and_library_messages_once(tmp_path):
    d = recording(tmp_path, runs=())
    for r in range(2):
        (d / "ompi" / f"prof.{r}.prof").write_text(
            "# POINT TO POINT\n"
            f"E\t{r}\t{1 - r}\t100 bytes\t1 msgs sent\t0,1\n"
            f"I\t{r}\t{1 - r}\t10 bytes\t1 msgs sent\n"
            f"C\t{r}\t{1 - r}\t10 bytes\t1 msgs sent\n")
    meta = json.loads((d / "recording.json").read_text())
    (d / "recording.json").write_text(json.dumps({**meta, "ntasks": 2}))
    done = collect_recording(d, tmp_path / "store", UID, max_file_bytes=LIMIT)
    assert done.stored is not None, done
    assert np.array_equal(dense(tmp_path / "store/app.mtx"), [[0, 220], [220, 0]])
    entry = tomllib.loads((tmp_path / "store/app.toml").read_text())
    assert entry["runs"][0]["recorder"] == "Open MPI monitoring"


def test_user_paths(tmp_path):
    import pwd

    me = pwd.getpwuid(UID)
    assert expand_user_path("~/x/%u", UID) == Path(me.pw_dir.rstrip("/") + f"/x/{me.pw_name}")
    assert expand_user_path("", UID) is None
    link = tmp_path / "link"
    link.symlink_to(tmp_path)
    with pytest.raises(UserPathError, match="symbolic link"):
        own_directory(link, UID)
    fd = own_directory(tmp_path / "a" / "b", UID)
    os.close(fd)
    assert (tmp_path / "a" / "b").is_dir()
    if UID == 0:  # another owner's directory
        other = tmp_path / "other"
        other.mkdir()
        os.chown(other, 65534, 65534)
        with pytest.raises(UserPathError, match="owned by uid 65534"):
            own_directory(other, UID)


def test_monitoring_files_are_bounded_like_the_recorders(tmp_path):
    d = recording(tmp_path, runs=())
    (d / "ompi/prof.0.prof").write_text("E\t0\t1\t100 bytes\t1 msgs sent\n" * 100)
    (d / "ompi/prof.1.prof").symlink_to("/etc/passwd")
    done = collect_recording(d, tmp_path / "store", UID, max_file_bytes=1000)
    assert done.stored is None and "not a regular file of at most 1000 bytes" in done.reason


def test_a_manual_sample_keeps_the_recorded_provenance(tmp_path, capsys):
    """``rankmap profile import --add-sample`` on a recorded profile keeps its
    [[runs]] (and every other key) and adds its own run."""
    from slurm_plugin.commands.cli import main

    store = tmp_path / "store"
    data = Path(__file__).resolve().parents[2] / "data" / "ompi_monitoring"
    rec = recording(tmp_path)
    collect_recording(rec, store, UID, max_file_bytes=LIMIT)
    assert main(["profile", "import", str(data / "prof"), "--name", "app", "--store",
                 str(store), "--add-sample"]) == 0, capsys.readouterr()
    entry = tomllib.loads((store / "app.toml").read_text())
    assert entry["samples"] == ["app.mtx", "app.s1.mtx"]
    assert [r["file"] for r in entry["runs"]] == ["app.mtx", "app.s1.mtx"]
    assert entry["runs"][0]["job"] == "7" and "monitoring" in entry["runs"][1]["recorder"]
