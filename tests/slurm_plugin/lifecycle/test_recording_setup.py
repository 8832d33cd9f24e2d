"""The TaskProlog's and TaskEpilog's side of recording (issue 32): who records (the
option, a site rule while the profile is missing, never when the site switched it off),
the directory made as the user, the exports every step gets, one LD_PRELOAD with the
binder and the recorder, and the TaskEpilog turning the files into a profile."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from slurm_plugin.common.user_paths import UserPathError
from slurm_plugin.lifecycle.recording_setup import (
    RecordingWish,
    recording_exports,
    recording_wish,
    start_recording,
)
from slurm_plugin.lifecycle.task_epilog import collect_job_recording
from slurm_plugin.lifecycle.task_prolog import exports, merge_preloads
from slurm_plugin.site.config import ConfigError, parse_config
from tests.slurm_plugin.profiles.test_recording import rank_text

UID = os.getuid()


def config(tmp_path: Path, extra: str = "", enabled: bool = True):
    text = (f'[profiles]\nstores = ["{tmp_path}/site"]\nuser_store = "{tmp_path}/own"\n'
            f'[record]\ndir = "{tmp_path}/rec"\nenabled = {str(enabled).lower()}\n'
            f'library = "{tmp_path}/librec.so"\n{extra}')
    path = tmp_path / "rankmap.toml"
    path.write_text(text)
    return parse_config(text, str(path)), path


RULE = '[[rules]]\njob_name = "lmp-*"\nprofile = "lammps-big"\nrecord = true\n'


def test_the_option_records_and_a_bad_name_is_said(tmp_path):
    cfg, _ = config(tmp_path)
    assert recording_wish({"SLURM_SPANK_RANKMAP_RECORD": "app"}, cfg, UID) == (
        RecordingWish("app", "option"), None)
    wish, why = recording_wish({"SLURM_SPANK_RANKMAP_RECORD": "../x"}, cfg, UID)
    assert wish is None and "not a profile name" in why
    off, _ = config(tmp_path, enabled=False)
    wish, why = recording_wish({"SLURM_SPANK_RANKMAP_RECORD": "app"}, off, UID)
    assert wish is None and "switched off" in why
    assert recording_wish({}, cfg, UID) == (None, None)


def test_a_rule_records_only_while_the_profile_is_missing(tmp_path):
    cfg, _ = config(tmp_path, RULE)
    env = {"SLURM_JOB_NAME": "lmp-run"}
    assert recording_wish(env, cfg, UID) == (RecordingWish("lammps-big", "rule"), None)
    assert recording_wish({"SLURM_JOB_NAME": "other"}, cfg, UID) == (None, None)
    # the user's --comm-profile is what the rule records
    assert recording_wish({**env, "SLURM_SPANK_RANKMAP_COMM_PROFILE": "mine"}, cfg,
                          UID)[0] == RecordingWish("mine", "rule")
    for store in ("own", "site"):  # once the profile exists anywhere: no recording
        (tmp_path / store).mkdir(exist_ok=True)
        (tmp_path / store / "lammps-big.toml").write_text("ranks = 4\nfile = 'x.mtx'\n")
        assert recording_wish(env, cfg, UID) == (None, None), store
        (tmp_path / store / "lammps-big.toml").unlink()


def test_a_rule_that_records_needs_a_store_name():
    with pytest.raises(ConfigError, match=r"record: needs profile = a store name"):
        parse_config('[[rules]]\nalgorithm = "fast"\nrecord = true\n', "/etc/r.toml")
    with pytest.raises(ConfigError, match=r"record: needs profile"):
        parse_config('[[rules]]\nprofile = "stencil3d:4x4x4"\nrecord = true\n', "/r.toml")


def test_start_makes_the_directory_as_the_user_and_refuses_a_link(tmp_path):
    job = start_recording(tmp_path / "rec", "42", RecordingWish("app", "option"), 8, UID)
    meta = json.loads((job / "recording.json").read_text())
    assert meta["name"] == "app" and meta["job"] == "42" and meta["ntasks"] == 8
    assert (job / "mpi").is_dir() and (job / "ompi").is_dir()
    assert oct((tmp_path / "rec").stat().st_mode & 0o777) == "0o700"
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "linked").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UserPathError, match="symbolic link"):
        start_recording(tmp_path / "linked", "43", RecordingWish("app", "option"), 8, UID)
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_exports_preload_the_recorder_and_switch_on_open_mpis_monitoring(tmp_path):
    cfg, _ = config(tmp_path)
    (tmp_path / "librec.so").write_text("")
    job = tmp_path / "rec" / "42"
    lines = recording_exports(job, {"LD_PRELOAD": "/usr/lib/libmine.so"}, cfg)
    assert f"export LD_PRELOAD=/usr/lib/libmine.so:{tmp_path}/librec.so" in lines
    assert f"export RANKMAP_RECORD_DIR={job}/mpi" in lines
    assert "export RANKMAP_RECORD_OPENMPI=monitoring" in lines
    assert "export OMPI_MCA_pml_monitoring_enable=2" in lines
    assert f"export OMPI_MCA_pml_monitoring_filename={job}/ompi/prof" in lines
    interposer, _ = config(tmp_path, '')
    text = (tmp_path / "rankmap.toml").read_text().replace(
        "[record]\n", '[record]\nopenmpi = "interposer"\n')
    interposer = parse_config(text, "x.toml")
    lines = recording_exports(job, {}, interposer)
    assert not any("monitoring" in line or "OPENMPI" in line for line in lines)


def test_binder_and_recorder_end_in_one_preload():
    lines = ["export A=1", "export LD_PRELOAD=/u.so:/bind.so", "print x",
             "export LD_PRELOAD=/u.so:/rec.so"]
    assert merge_preloads(lines) == ["export LD_PRELOAD=/u.so:/bind.so:/rec.so",
                                     "export A=1", "print x"]
    assert merge_preloads(lines[:2]) == lines[:2]


def test_the_task_prolog_records_in_the_batch_step_and_every_later_step(tmp_path):
    _, path = config(tmp_path)
    (tmp_path / "librec.so").write_text("")
    env = {"SLURM_JOB_ID": "42", "SLURM_STEP_ID": "4294967291", "SLURM_NTASKS": "4",
           "RANKMAP_CONFIG": str(path), "SLURM_SPANK_RANKMAP_RECORD": "app"}
    batch = exports(env)
    assert any(line.startswith("print rankmap: recording this job's communication as "
                               "profile app (you asked)") for line in batch), batch
    assert (tmp_path / "rec/42/recording.json").is_file()
    step = exports({**env, "SLURM_STEP_ID": "0", "SLURM_SPANK_RANKMAP_RECORD": ""})
    assert f"export RANKMAP_RECORD_DIR={tmp_path}/rec/42/mpi" in step
    # another job's step finds no recording of its own
    assert not any("RECORD" in line for line in exports({**env, "SLURM_JOB_ID": "43",
                                                         "SLURM_STEP_ID": "0"}))


def test_the_task_epilog_collects_the_batch_steps_recording(tmp_path):
    _, path = config(tmp_path)
    job = start_recording(tmp_path / "rec", "42", RecordingWish("app", "option"), 2, UID)
    (job / "mpi/run.0").mkdir()
    for r in range(2):
        (job / "mpi/run.0" / f"rank.{r}").write_text(rank_text(r, 2, p2p=f"{1 - r} 64 1\n"))
    env = {"SLURM_JOB_ID": "42", "SLURM_STEP_ID": "0", "RANKMAP_CONFIG": str(path)}
    assert collect_job_recording(env) is None  # not the batch step
    said = collect_job_recording({**env, "SLURM_STEP_ID": "batch"})
    assert said.startswith("profile app recorded by job 42: new profile"), said
    assert (tmp_path / "own/app.toml").is_file() and not job.exists()
    assert collect_job_recording({**env, "SLURM_STEP_ID": "batch"}) is None  # done once


def test_a_directory_an_earlier_run_of_the_job_id_left_is_set_aside(tmp_path):
    """Job ids repeat (a requeued job; a controller whose ids restarted): an unmerged
    directory of the same id is set aside, never written into or merged under the new
    job — whether the new job records or not."""
    _, path = config(tmp_path)
    (tmp_path / "librec.so").write_text("")
    old = start_recording(tmp_path / "rec", "42", RecordingWish("old", "option"), 4, UID)
    (old / "mpi" / "run.0").mkdir()
    env = {"SLURM_JOB_ID": "42", "SLURM_STEP_ID": "batch", "RANKMAP_CONFIG": str(path)}
    exports(env)  # a job of the same id that does not record
    aside = tmp_path / "rec" / "42.incomplete"
    assert aside.is_dir() and not (tmp_path / "rec" / "42").exists()
    assert "started again" in (aside / "reason.txt").read_text()
    step = exports({**env, "SLURM_STEP_ID": "0"})
    assert not any("RECORD" in line for line in step)
    # and one that records starts from an empty directory
    start_recording(tmp_path / "rec", "43", RecordingWish("a", "option"), 4, UID)
    (tmp_path / "rec" / "43" / "mpi" / "run.0").mkdir()
    new = start_recording(tmp_path / "rec", "43", RecordingWish("b", "option"), 4, UID)
    assert list((new / "mpi").iterdir()) == []
    assert json.loads((new / "recording.json").read_text())["name"] == "b"
    assert (tmp_path / "rec" / "43.incomplete").is_dir()


def test_rankmap_profile_collect_does_what_the_task_epilog_does(tmp_path, monkeypatch,
                                                                capsys):
    from slurm_plugin.commands.cli import main

    _, path = config(tmp_path)
    monkeypatch.setenv("RANKMAP_CONFIG", str(path))
    job = start_recording(tmp_path / "rec", "42", RecordingWish("app", "option"), 2, UID)
    (job / "mpi/run.0").mkdir()
    (job / "mpi/run.0" / "rank.0").write_text(rank_text(0, 2, p2p="1 64 1\n"))
    assert main(["profile", "collect", "42", "--config", str(path)]) == 1  # rank 1 missing
    assert "profile app not recorded: " in capsys.readouterr().out
    assert (tmp_path / "rec/42.incomplete/reason.txt").is_file()
    assert main(["profile", "collect", "43", "--config", str(path)]) == 2
    assert "job 43: no recording" in capsys.readouterr().err
    assert main(["profile", "list", "--config", str(path)]) == 0
    assert "job 42: " in capsys.readouterr().out


def test_config_check_warns_about_what_recording_jobs_would_miss(tmp_path):
    from slurm_plugin.commands.config_check import record_warnings

    missing = tmp_path / "nowhere" / "librankmap_record.so"
    said = record_warnings(parse_config(f'[record]\nlibrary = "{missing}"\n', "r.toml"))
    assert len(said) == 1 and str(missing) in said[0] and "only Open MPI" in said[0]
    said = record_warnings(parse_config(f'[record]\nlibrary = "{missing}"\ndir = ""\n'
                                        f'[profiles]\nuser_store = ""\n', "r.toml"))
    assert len(said) == 3 and "[record] dir is empty" in said[1], said
    off = parse_config(f'[record]\nenabled = false\nlibrary = "{missing}"\n', "r.toml")
    assert record_warnings(off) == []


def test_a_missing_recorder_is_said_in_the_batch_step(tmp_path):
    _, path = config(tmp_path)  # library = tmp_path/librec.so, not made here
    env = {"SLURM_JOB_ID": "42", "SLURM_STEP_ID": "batch", "RANKMAP_CONFIG": str(path),
           "SLURM_SPANK_RANKMAP_RECORD": "app"}
    said = exports(env)
    assert "print rankmap: the recorder (librankmap_record.so) is not installed on this " \
           "node: only Open MPI programs are recorded" in said, said
    assert not any(line.startswith("export LD_PRELOAD=") for line in said)
