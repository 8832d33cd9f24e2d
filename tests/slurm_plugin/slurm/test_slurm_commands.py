"""The Slurm command runner (slurm_plugin.slurm.slurm_commands): where commands are looked
up ([slurm] bin_dir, else PATH then the default directories) and what they are given."""

import os
from pathlib import Path

import pytest

from slurm_plugin.site.config import ConfigError, parse_config
from slurm_plugin.slurm.slurm_commands import (
    BIN_DIR_VAR,
    SlurmQueryError,
    find_command,
    run_slurm,
    with_bin_dir,
)
from tests.helpers.paths import TEST_DATA


def fake_command(directory: Path, name: str, text: str, rc: int = 0) -> Path:
    """An executable ``name`` printing ``text``, its arguments and SLURM_CONF."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(f"#!/bin/sh\necho '{text}' \"$@\" \"conf=$SLURM_CONF\" \"home=$HOME\"\n"
                    f"exit {rc}\n")
    path.chmod(0o755)
    return path


def test_bin_dir_is_the_only_place_searched(tmp_path):
    fake_command(tmp_path / "site", "scontrol", "site")
    fake_command(tmp_path / "other", "scontrol", "other")
    env = {"PATH": str(tmp_path / "other"), "SLURM_CONF": "/x/slurm.conf", "HOME": "/h"}
    out = run_slurm(["scontrol", "show", "node"], 5, env, bin_dir=str(tmp_path / "site"))
    # only SLURM_CONF of the caller's environment reaches the command
    assert out.split() == ["site", "show", "node", "conf=/x/slurm.conf", "home="]
    with pytest.raises(SlurmQueryError, match=r"squeue: not found in \[slurm\] bin_dir"):
        run_slurm(["squeue"], 5, env, bin_dir=str(tmp_path / "site"))


def test_bin_dir_travels_in_the_environment(tmp_path):
    """Layers that only pass ``env`` along (topology, allocation) reach the same
    directory: with_bin_dir puts it there, the runner honours it."""
    fake_command(tmp_path / "site", "scontrol", "site")
    fake_command(tmp_path / "other", "scontrol", "other")
    env = with_bin_dir({"PATH": str(tmp_path / "other")}, str(tmp_path / "site"))
    assert env[BIN_DIR_VAR] == str(tmp_path / "site")
    assert run_slurm(["scontrol"], 5, env).split()[0] == "site"
    assert with_bin_dir({"A": "1"}, "") == {"A": "1"}


def test_without_bin_dir_path_comes_first(tmp_path):
    fake_command(tmp_path / "p", "scontrol", "from-path")
    assert find_command("scontrol", {"PATH": str(tmp_path / "p")}) == \
        str(tmp_path / "p" / "scontrol")
    with pytest.raises(SlurmQueryError, match="not found on PATH or in /usr/local/bin"):
        find_command("rankmap-no-such-slurm-command", {"PATH": str(tmp_path)})


def test_failures_name_the_command(tmp_path):
    fake_command(tmp_path, "scontrol", "boom", rc=3)
    with pytest.raises(SlurmQueryError, match="scontrol show job 1: exit 3"):
        run_slurm(["scontrol", "show", "job", "1"], 5, {}, bin_dir=str(tmp_path))
    slow = tmp_path / "sinfo"
    slow.write_text("#!/bin/sh\nsleep 5\n")
    slow.chmod(0o755)
    with pytest.raises(SlurmQueryError, match="no answer within 0.2 s"):
        run_slurm(["sinfo"], 0.2, {}, bin_dir=str(tmp_path))


def test_bin_dir_config_key():
    assert parse_config("", "x.toml").slurm.bin_dir == ""
    cfg = parse_config('[slurm]\nbin_dir = "/opt/slurm/bin"\n', "x.toml")
    assert cfg.slurm.bin_dir == "/opt/slurm/bin"
    assert cfg.sources["slurm"]["bin_dir"] == "x.toml"
    with pytest.raises(ConfigError, match=r"x.toml: \[slurm\] bin_dir: must be an absolute"):
        parse_config('[slurm]\nbin_dir = "opt/slurm/bin"\n', "x.toml")
    with pytest.raises(ConfigError, match=r"x.toml: \[slurm\] bin_dir: must be a string"):
        parse_config("[slurm]\nbin_dir = 3\n", "x.toml")


def test_runner_is_not_given_the_callers_path(tmp_path):
    """The command runs with its own directory and the defaults as PATH, not the
    caller's (a job's PATH must not pick the helpers Slurm's commands start)."""
    d = tmp_path / "b"
    d.mkdir()
    (d / "scontrol").write_text('#!/bin/sh\necho "$PATH"\n')
    (d / "scontrol").chmod(0o755)
    out = run_slurm(["scontrol"], 5, {"PATH": "/evil"}, bin_dir=str(d)).strip()
    assert out.split(os.pathsep)[0] == str(d) and "/evil" not in out


def test_the_prolog_reads_account_and_name_from_bin_dir(tmp_path):
    """Site rules need the job's account and name; the prolog asks scontrol for them,
    through [slurm] bin_dir like every other Slurm command."""
    from slurm_plugin.lifecycle.prolog import _account_and_name

    job = (TEST_DATA / "slurm" / "scontrol_job_4x4.txt").read_text()
    job = job.replace("JobName=wrap", "JobName=lammps").replace("Account=(null)",
                                                                "Account=proj7")
    site = tmp_path / "site"
    site.mkdir()
    (site / "job.txt").write_text(job)
    script = site / "scontrol"
    script.write_text(f"#!/bin/sh\ncat {site / 'job.txt'}\n")
    script.chmod(0o755)
    cfg = parse_config(f'[slurm]\nbin_dir = "{site}"\n', "rankmap.toml")
    env = {"PATH": "/nonexistent"}
    account, name = _account_and_name("5", env, cfg)
    assert (account, name) == ("proj7", "lammps")
