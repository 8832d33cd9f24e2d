"""deploy/install.sh gives job users a rankmap they can run; config check's site warnings.

The install test runs the real install.sh (as root) into a temporary prefix, which takes
about half a minute because pip compiles the solver's extension, and then runs rankmap
as the unprivileged user ``nobody``, as Slurm runs the TaskProlog and the prolog's worker.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from slurm_plugin.commands import config_check
from slurm_plugin.commands.cli import main as cli_main
from slurm_plugin.common.jobdir import create_job_dir
from tests.helpers.paths import REPO

ROOT = REPO
SYSTEM_PYTHON = "/usr/bin/python3"


def _open_tmpdir() -> Path:
    """A fresh directory under /tmp that other users can enter (pytest's tmp_path is
    below a 0700 directory, which is exactly what the checks must flag)."""
    path = Path(tempfile.mkdtemp(prefix="rankmap-test-", dir="/tmp"))
    path.chmod(0o755)
    return path


def _venv_works() -> bool:
    if not Path(SYSTEM_PYTHON).exists():
        return False
    probe = subprocess.run([SYSTEM_PYTHON, "-c", "import venv, ensurepip"],
                           capture_output=True, check=False)
    return probe.returncode == 0


def _nobody_works() -> bool:
    try:
        subprocess.run(["runuser", "-u", "nobody", "--", "true"], check=True,
                       capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        return False
    return True


@pytest.fixture(scope="module")
def site():
    if os.geteuid() != 0:
        pytest.skip("install.sh needs root")
    if not _venv_works():
        pytest.skip(f"{SYSTEM_PYTHON} -m venv does not work here (python3-venv missing)")
    base = _open_tmpdir()
    paths = {"prefix": base / "opt/rankmap", "etc": base / "etc/rankmap",
             "log": base / "log/rankmap", "run": base / "run/rankmap",
             "tmpfiles": base / "etc/tmpfiles.d"}
    proc = subprocess.run(
        ["bash", str(ROOT / "deploy/install.sh"), "--prefix", str(paths["prefix"]),
         "--python", SYSTEM_PYTHON, "--etc-dir", str(paths["etc"]),
         "--log-dir", str(paths["log"]), "--run-dir", str(paths["run"]),
         "--tmpfiles-dir", str(paths["tmpfiles"])],
        capture_output=True, text=True, check=False, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    paths["output"] = proc.stdout
    yield paths
    shutil.rmtree(base, ignore_errors=True)


def _as_nobody(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    if not _nobody_works():
        pytest.skip("runuser -u nobody does not work here")
    env_args = [f"{k}={v}" for k, v in (env or {}).items()]
    return subprocess.run(["runuser", "-u", "nobody", "--", "env", "-i", "PATH=/usr/bin:/bin",
                           *env_args, *argv],
                          capture_output=True, text=True, check=False, cwd="/", timeout=120)


def test_job_user_can_import_rankmap(site):
    proc = _as_nobody(str(site["prefix"] / "bin/python"), "-c",
                      "import slurm_plugin, mapper, mapper.search._swap; print(mapper.__file__)")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(str(site["prefix"]))  # the install, not a source tree


def test_job_user_runs_the_task_prolog(site):
    job = site["run"] / "job.42"
    nobody = pwd.getpwnam("nobody")
    with create_job_dir(site["run"], "42", nobody.pw_uid, nobody.pw_gid) as jd:  # the prolog's
        jd.write({"rankfile": "rank 0=n1 slot=0:0\n",
                  "report_json": json.dumps({"job_id": "42", "applied": True})})
    env = {"RANKMAP_CONFIG": str(site["etc"] / "rankmap.toml"), "SLURM_JOB_ID": "42"}
    proc = _as_nobody(str(site["prefix"] / "bin/rankmap-task-prolog"), env=env)
    assert proc.returncode == 0, proc.stderr
    assert "error ignored" not in proc.stdout, proc.stdout
    assert f"export RANKMAP_RANKFILE={job / 'rankfile'}" in proc.stdout


def test_a_config_outside_etc_gets_wrappers_that_name_it(site):
    """With --etc-dir the slurm.conf lines name PREFIX/sbin wrappers that set
    RANKMAP_CONFIG (slurmd gives its scripts no such variable): the task prolog run
    through one, with nothing but the job id, reads the install's configuration (its
    run directory) and hands over the job's rankfile."""
    sbin = site["prefix"] / "sbin"
    assert f"TaskProlog={sbin}/rankmap-task-prolog" in site["output"], site["output"]
    assert f"Prolog={sbin}/rankmap-prolog" in site["output"], site["output"]
    job = site["run"] / "job.43"
    nobody = pwd.getpwnam("nobody")
    with create_job_dir(site["run"], "43", nobody.pw_uid, nobody.pw_gid) as jd:
        jd.write({"rankfile": "rank 0=n1 slot=0:0\n",
                  "report_json": json.dumps({"job_id": "43", "applied": True})})
    proc = _as_nobody(str(sbin / "rankmap-task-prolog"), env={"SLURM_JOB_ID": "43"})
    assert proc.returncode == 0, proc.stderr
    assert f"export RANKMAP_RANKFILE={job / 'rankfile'}" in proc.stdout, proc.stdout
    config = (site["etc"] / "rankmap.toml").read_text()
    assert f'fallback_dir = "{site["run"]}-fallback"' in config


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_prefix_is_world_readable(site):
    bad = []
    for dirpath, dirnames, filenames in os.walk(site["prefix"]):
        for name in [*dirnames, *filenames]:
            p = Path(dirpath) / name
            if p.is_symlink():
                continue
            mode = _mode(p)
            if p.is_dir() and mode & 0o005 != 0o005:
                bad.append(f"{oct(mode)} {p}")
            elif not p.is_dir() and (not mode & 0o004 or (mode & 0o100 and not mode & 0o001)):
                bad.append(f"{oct(mode)} {p}")
    assert not bad, bad[:10]
    assert _mode(site["prefix"]) == 0o755
    assert (site["prefix"] / "lib/rankmap_spank.so").is_file()


def test_created_directories_and_config(site):
    assert _mode(site["etc"]) == 0o755
    assert _mode(site["etc"] / "profiles") == 0o755
    assert _mode(site["etc"] / "rankmap.toml") == 0o644
    config = (site["etc"] / "rankmap.toml").read_text()
    assert f'output_dir = "{site["run"]}"' in config
    assert f'log_file = "{site["log"]}/rankmap.log"' in config
    log = site["log"].stat()
    try:
        adm = grp.getgrnam("adm").gr_gid
    except KeyError:
        assert (stat.S_IMODE(log.st_mode), log.st_uid) == (0o700, 0)
    else:
        assert (stat.S_IMODE(log.st_mode), log.st_uid, log.st_gid) == (0o750, 0, adm)
    run = site["run"].stat()
    assert (stat.S_IMODE(run.st_mode), run.st_uid) == (0o755, 0)


def test_tmpfiles_entry(site):
    conf = site["tmpfiles"] / "rankmap.conf"
    assert _mode(conf) == 0o644
    lines = [line for line in conf.read_text().splitlines() if not line.startswith("#")]
    assert lines == [f"d {site['run']} 0755 root root -"]
    assert config_check.tmpfiles_creates(site["run"], [site["tmpfiles"]]) == conf


def test_printed_lines_name_the_installed_paths(site):
    out, prefix = site["output"], site["prefix"]
    # --etc-dir moves the config: the scripts are the wrappers that name it
    for line in (f"Prolog={prefix}/sbin/rankmap-prolog", f"Epilog={prefix}/sbin/rankmap-epilog",
                 f"TaskProlog={prefix}/sbin/rankmap-task-prolog",
                 f"optional {prefix}/lib/rankmap_spank.so"):
        assert line in out, out


def test_installed_config_check_has_no_warnings(site):
    proc = subprocess.run([str(site["prefix"] / "bin/rankmap"), "config", "check", "--config",
                           str(site["etc"] / "rankmap.toml")],
                          capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr, proc.stderr


# -- config_check on its own (any user) ----------------------------------------------------

@pytest.fixture
def dirs():
    base = _open_tmpdir()
    good = base / "good"
    good.mkdir(mode=0o755)
    private = base / "private"
    private.mkdir()
    private.chmod(0o700)
    (private / "out").mkdir(mode=0o755)
    yield base, good, private
    shutil.rmtree(base, ignore_errors=True)


@pytest.mark.skipif(not Path(SYSTEM_PYTHON).exists(), reason=f"no {SYSTEM_PYTHON}")
def test_root_only_directories_are_flagged(dirs):
    _, _, private = dirs
    warnings = config_check.output_dir_warnings(private / "out", tmpfiles_dirs=[])
    assert len(warnings) == 1 and f"{private} is not searchable" in warnings[0]
    (private / "bin").mkdir(mode=0o755)
    (private / "bin/python").symlink_to(SYSTEM_PYTHON)
    # a venv's bin/python is a link to an open interpreter: the link's own parents count
    warnings = config_check.python_warnings(str(private / "bin/python"), package_dirs=[])
    assert len(warnings) == 1 and warnings[0].startswith("the Python running rankmap")
    assert f"{private} is not searchable" in warnings[0] and "status=126" in warnings[0]
    warnings = config_check.python_warnings(SYSTEM_PYTHON, package_dirs=[private / "out"])
    assert len(warnings) == 1 and warnings[0].startswith("rankmap's package")


@pytest.mark.skipif(not Path(SYSTEM_PYTHON).exists(), reason=f"no {SYSTEM_PYTHON}")
def test_open_directories_are_not_flagged(dirs):
    _, good, _ = dirs
    assert config_check.output_dir_warnings(good, tmpfiles_dirs=[]) == []
    assert config_check.python_warnings(SYSTEM_PYTHON, package_dirs=[good]) == []


def test_missing_output_dir_needs_a_creator(dirs):
    base, good, _ = dirs
    tmpfiles = base / "tmpfiles.d"
    # the prolog creates a missing output directory inside a trusted (root's) parent
    assert config_check.output_dir_warnings(good / "rankmap", tmpfiles_dirs=[tmpfiles]) == []
    missing = good / "no-parent" / "rankmap"
    warnings = config_check.output_dir_warnings(missing, tmpfiles_dirs=[tmpfiles])
    assert len(warnings) == 1 and "does not exist" in warnings[0]
    tmpfiles.mkdir()
    (tmpfiles / "rankmap.conf").write_text(f"d {missing} 0755 root root -\n")
    assert config_check.output_dir_warnings(missing, tmpfiles_dirs=[tmpfiles]) == []


def test_unreadable_config_file_is_flagged(dirs):
    _, good, _ = dirs
    cfg = good / "rankmap.toml"
    cfg.write_text("")
    cfg.chmod(0o600)
    assert "not readable by other users" in config_check.config_file_warnings(cfg)[0]
    cfg.chmod(0o644)
    assert config_check.config_file_warnings(cfg) == []


def test_config_check_command_warns_but_succeeds(dirs, capsys):
    _, good, _ = dirs
    cfg = good / "site.toml"
    cfg.write_text(f'[general]\noutput_dir = "{good}/no-parent/missing"\n')
    cfg.chmod(0o644)
    assert cli_main(["config", "check", "--config", str(cfg)]) == 0
    captured = capsys.readouterr()
    assert "output_dir" in captured.out
    assert f"warning: output directory {good}/no-parent/missing does not exist" in captured.err
