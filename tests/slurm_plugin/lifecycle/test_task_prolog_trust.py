"""The TaskProlog hands a job only files the prolog of this very job wrote; every
configuration problem reaches the user with one named error (issue 28 items 1 and 7).

As root, the attacks run as real unprivileged users (uids 65533 and 65534): user B
plants ``job.<id>`` for user A's next job in a world-writable output directory, as the
adversarial run did.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest

from slurm_plugin.commands.config_check import check_command
from slurm_plugin.common.jobdir import JobDirError, create_job_dir, open_job_dir_for_task
from slurm_plugin.lifecycle import prolog
from slurm_plugin.lifecycle.task_prolog import exports
from slurm_plugin.site.config import ConfigError, load_config
from tests.helpers.users_harness import as_user

USER_A, USER_B = 65534, 65533
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (runs as other uids)")


@pytest.fixture
def shared(tmp_path):
    """A directory every user can reach (tmp_path's parents are root's 0700)."""
    base = Path(tempfile.mkdtemp(prefix="rankmap_trust_"))
    os.chmod(base, 0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def config_for(base: Path, out: Path, fallback: Path | None = None) -> Path:
    cfg = base / "rankmap.toml"
    cfg.write_text(f'[general]\noutput_dir = "{out}"\nlog_file = ""\n'
                   f'[prolog]\nfallback_dir = "{fallback or base / "fallback"}"\n')
    cfg.chmod(0o644)
    return cfg


def plant(out: Path, job_id: str, applied: bool = True) -> Path:
    """What user B leaves for job ``job_id``: a report saying "applied" and a rankfile."""
    d = out / f"job.{job_id}"
    d.mkdir()
    (d / "report.json").write_text(json.dumps({"job_id": job_id, "applied": applied,
                                               "n": 2, "summary": "B's text"}))
    for name in ("rankfile", "hostfile", "machinefile", "partition", "arrangement",
                 "reorder.block"):
        (d / name).write_text("B's file\n")
    return d


RANKMAP_VARS = ("OMPI_MCA_rmaps", "RANKMAP_RANKFILE", "RANKMAP_HOSTFILE",
                "RANKMAP_MACHINEFILE", "RANKMAP_PARTITION", "RANKMAP_ARRANGEMENT",
                "RANKMAP_REORDER=", "RANKMAP_REPORT", "SLURM_HOSTFILE", "B's text")


@root_only
@pytest.mark.parametrize("mode", [0o1777, 0o777])
def test_another_users_planted_job_dir_reaches_no_job(shared, mode):
    out = shared / "out"
    out.mkdir()
    os.chmod(out, mode)  # what config check refuses; the TaskProlog must hold anyway
    cfg = config_for(shared, out)
    as_user(USER_B, lambda: str(plant(out, "501")))
    assert (out / "job.501").stat().st_uid == USER_B
    env = {"SLURM_JOB_ID": "501", "RANKMAP_CONFIG": str(cfg)}
    lines = as_user(USER_A, lambda: exports(env))
    assert not any(v in line for line in lines for v in RANKMAP_VARS), lines
    if mode & stat.S_ISVTX:  # B cannot touch root's entries here, but can add its own
        assert lines == [f"print rankmap: {out / 'job.501'} is owned by uid {USER_B}, not "
                         "by root: not made by the prolog; ignored"]
    else:  # anyone can rename anything here: nothing in it is trusted
        assert lines == [f"print rankmap: {out} is writable by others without the sticky "
                         "bit"]
    # in a step (not the batch script) nothing at all is printed per task
    assert as_user(USER_A, lambda: exports({**env, "SLURM_STEP_ID": "0"})) == []
    # and the prolog refuses such a directory for its own output
    with pytest.raises(JobDirError, match="writable by everyone"):
        create_job_dir(out, "502")


@root_only
def test_a_symlink_to_the_users_own_old_job_dir_is_not_followed(shared):
    out = shared / "out"
    out.mkdir(mode=0o755)
    with create_job_dir(out, "510", USER_A, USER_A) as jd:  # A's own earlier job
        jd.write({"report_json": json.dumps({"job_id": "510", "applied": True, "n": 2}),
                  "rankfile": "rank 0=n1 slot=0:0\n"})
    os.chmod(out, 0o1777)  # a site that ignored config check
    as_user(USER_B, lambda: os.symlink(out / "job.510", out / "job.511"))
    cfg = config_for(shared, out)
    lines = as_user(USER_A, lambda: exports({"SLURM_JOB_ID": "511",
                                             "RANKMAP_CONFIG": str(cfg)}))
    assert not any("RANKMAP" in line or "OMPI" in line for line in lines), lines
    assert "is not a directory (or is a symlink)" in lines[0]


@root_only
def test_the_prologs_own_directory_is_trusted_and_a_stale_record_is_not(shared):
    out = shared / "out"
    out.mkdir(mode=0o755)
    cfg = config_for(shared, out)
    with create_job_dir(out, "520", USER_A, USER_A) as jd:
        jd.write({"rankfile": "rank 0=n1 slot=0:0\n",
                  "report_json": json.dumps({"job_id": "520", "applied": True, "n": 2})})
    st = (out / "job.520").stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, USER_A, 0o750)
    env = {"SLURM_JOB_ID": "520", "RANKMAP_CONFIG": str(cfg)}
    lines = as_user(USER_A, lambda: exports(env))
    assert f"export OMPI_MCA_rmaps_rank_file_path={out / 'job.520' / 'rankfile'}" in lines
    assert f"export RANKMAP_RANKFILE={out / 'job.520' / 'rankfile'}" in lines
    # the job's user can neither add to it nor replace its files
    assert as_user(USER_A, lambda: (out / "job.520" / "x").write_text("x")).startswith(
        "PermissionError")
    assert as_user(USER_A, lambda: os.rename(out / "job.520" / "rankfile",
                                             out / "job.520" / "r2")).startswith(
        "PermissionError")
    # another user's job of the same id (a group mismatch) gets nothing from it
    lines = as_user(USER_B, lambda: exports(env))
    assert not any("RANKMAP_RANKFILE" in line for line in lines), lines
    # a record of another job id (a directory renamed by root, ids reused) is refused
    os.rename(out / "job.520", out / "job.521")
    lines = as_user(USER_A, lambda: exports({**env, "SLURM_JOB_ID": "521"}))
    assert lines == [f"print rankmap: {out / 'job.521' / 'report.json'} is not job 521's; "
                     "ignored"]


def test_open_job_dir_for_task_checks(tmp_path):
    uid, gid = os.getuid(), os.getgid()
    assert open_job_dir_for_task(tmp_path / "missing", "1", uid, gid) is None
    assert open_job_dir_for_task(tmp_path, "1", uid, gid) is None
    with create_job_dir(tmp_path, "2") as jd:
        jd.write({"report_json": '{"job_id": "2", "applied": false}'})
    path, record = open_job_dir_for_task(tmp_path, "2", uid, gid)
    assert path == tmp_path / "job.2" and record["applied"] is False
    os.chmod(tmp_path / "job.2", 0o770)
    with pytest.raises(JobDirError, match="writable by others"):
        open_job_dir_for_task(tmp_path, "2", uid, gid)
    os.chmod(tmp_path / "job.2", 0o750)
    (tmp_path / "job.2" / "report.json").unlink()
    (tmp_path / "job.2" / "report.json").symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(JobDirError, match="report.json"):
        open_job_dir_for_task(tmp_path, "2", uid, gid)
    (tmp_path / "job.2" / "report.json").unlink()
    (tmp_path / "job.2" / "report.json").write_bytes(b" " * (2 << 20))
    with pytest.raises(JobDirError, match="over 1048576 bytes"):
        open_job_dir_for_task(tmp_path, "2", uid, gid)


# -- rankmap config check refuses output directories others can write -----------------

@pytest.mark.parametrize("key, section", [("output_dir", "general"),
                                          ("fallback_dir", "prolog")])
@pytest.mark.parametrize("mode", [0o1777, 0o777, 0o775])
def test_config_check_refuses_directories_others_can_write(tmp_path, capsys, key, section,
                                                           mode):
    unsafe = tmp_path / "unsafe"
    unsafe.mkdir()
    os.chmod(unsafe, mode)
    cfg = tmp_path / "rankmap.toml"
    cfg.write_text(f'[{section}]\n{key} = "{unsafe}"\n')
    assert check_command(argparse.Namespace(config=str(cfg))) == 2
    err = capsys.readouterr().err
    assert f"error: {'output' if key == 'output_dir' else 'fallback'} directory " \
           f"([{section}] {key}) {unsafe} is writable by" in err
    assert "jobs keep Slurm's placement" in err
    os.chmod(unsafe, 0o755)
    assert check_command(argparse.Namespace(config=str(cfg))) == 0


# -- configuration problems: one named error everywhere --------------------------------

def test_a_config_that_is_not_utf8_is_the_same_named_error_everywhere(
        tmp_path, defaults, monkeypatch, capsys, restore_prolog_logging):
    cfg = tmp_path / "rankmap.toml"
    data = b'[general]\nlog_level = "info"\nlog_file = "\xff\xfe"\n'
    cfg.write_bytes(data)
    bad = data.index(b"\xff")
    expected = f"{cfg}:3: not UTF-8 text (byte {bad}: b'\\xff')"
    with pytest.raises(ConfigError) as info:
        load_config(str(cfg))
    assert str(info.value) == expected and info.value.line == 3
    # rankmap config check: one line, exit 2, no traceback
    from slurm_plugin.commands.cli import main as cli_main

    assert cli_main(["config", "check", "--config", str(cfg)]) == 2
    assert capsys.readouterr().err == f"rankmap: error: {expected}\n"
    # the prolog's report
    for key in list(os.environ):
        if key.startswith(("SLURM", "SPANK_")):
            monkeypatch.delenv(key)
    env = {"RANKMAP_CONFIG": str(cfg), "SLURM_JOB_ID": "61", "SLURM_NODELIST": "n1",
           "SLURMD_NODENAME": "n1", "SPANK_RANKMAP_COMM_PROFILE": "ring"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert prolog.main() == 0
    report = (defaults["output_dir"] / "job.61" / "report.txt").read_text()
    assert f"NOT applied: configuration error: {expected}" in report
    # the TaskProlog's line in the batch step of a job that asked for rankmap
    task_env = {"SLURM_JOB_ID": "61", "RANKMAP_CONFIG": str(cfg),
                "SLURM_SPANK_RANKMAP_COMM_PROFILE": "ring"}
    lines = exports(task_env)
    assert lines[0] == (f"print rankmap: configuration error: {expected}; looking for the "
                        "job's report in the default directories")
    assert lines[-1].startswith("print rankmap: placement NOT applied (configuration error")
    # a job that did not ask is not told
    del task_env["SLURM_SPANK_RANKMAP_COMM_PROFILE"]
    assert not any("configuration error:" in line and "looking" in line
                   for line in exports(task_env))


@root_only
def test_a_config_users_cannot_read_is_named_in_the_jobs_output(shared):
    out = shared / "out"
    out.mkdir(mode=0o755)
    cfg = config_for(shared, out)
    cfg.chmod(0o600)
    env = {"SLURM_JOB_ID": "530", "RANKMAP_CONFIG": str(cfg),
           "SLURM_SPANK_RANKMAP_COMM_PROFILE": "ring"}
    lines = as_user(USER_A, lambda: exports(env))
    assert lines[0] == (f"print rankmap: configuration error: {cfg}: cannot read: "
                        "Permission denied (the TaskProlog and the worker read it as the "
                        "job's user: make it 0644); looking for the job's report in the "
                        "default directories")
