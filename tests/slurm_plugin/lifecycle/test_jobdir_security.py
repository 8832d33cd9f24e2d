"""Root's job-directory handling against hostile users (issue 14), without Slurm.

The prolog runs as root in a directory the job's user can write to; these tests play
the user: a symlink swapped in while the worker runs, a 3000-level tree planted as
``job.<id>``, files meant for another user.  Tests that need root (chown to another
uid) skip otherwise.
"""

import json
import logging
import os
import re
import resource
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from slurm_plugin.common import jobdir
from slurm_plugin.common.files import write_files
from slurm_plugin.common.job_conventions import LAUNCHER_FILES
from slurm_plugin.common.jobdir import (
    JobDirError,
    create_job_dir,
    ensure_output_dir,
    remove_job_dir,
)
from slurm_plugin.lifecycle import prolog
from slurm_plugin.lifecycle.task_prolog import exports
from slurm_plugin.lifecycle.worker_protocol import WorkerStatus
from slurm_plugin.site.config import parse_config
from tests.helpers.users_harness import as_user

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (chown to another uid)")
NOBODY = 65534
LAUNCHERS = LAUNCHER_FILES


@pytest.fixture(autouse=True)
def _restore_logging(restore_prolog_logging):
    """Every test here runs with the prolog's logger restored afterwards."""


@pytest.fixture(autouse=True)
def _remove_deep_trees(tmp_path):
    """pytest later removes old temporary directories with shutil.rmtree, which cannot
    remove the 3000-level trees made here (RecursionError): remove them now."""
    yield
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for name in os.listdir(fd):
            jobdir.remove_entry(fd, name, max_entries=10**7)
    finally:
        os.close(fd)


def site(tmp_path: Path, output_dir: Path | None = None) -> tuple:
    out = output_dir or tmp_path / "out"
    out.mkdir(exist_ok=True)
    log_file = tmp_path / "rankmap.log"
    cfg = parse_config(f'[general]\noutput_dir = "{out}"\nlog_file = "{log_file}"\n'
                       f'[prolog]\nfallback_dir = "{tmp_path / "fallback"}"\n', "t.toml")
    prolog.setup_logging(cfg)
    return cfg, out, log_file


def job_env(job_id: str, **extra: str) -> dict:
    return {"SLURM_JOB_ID": job_id, "SLURM_NODELIST": "n1", "SLURMD_NODENAME": "n1",
            "SPANK_RANKMAP_COMM_PROFILE": "ring", **extra}


def make_chain(parent: Path, name: str, depth: int, leaf_link: Path | None = None,
               link_depth: int | None = None) -> None:
    """``parent/name/d/d/...`` ``depth`` levels deep, made through fds (the path would
    exceed PATH_MAX), a file at every level; optionally a symlink at ``link_depth``."""
    fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY)
    step = name
    for level in range(depth):
        os.mkdir(step, dir_fd=fd)
        nfd = os.open(step, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = nfd
        os.close(os.open("f", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
        if leaf_link is not None and level == link_depth:
            os.symlink(leaf_link, "link", dir_fd=fd)
        step = "d"
    os.close(fd)


def victim_dir(tmp_path: Path) -> Path:
    victim = tmp_path / "victim"
    victim.mkdir()
    for name in (*LAUNCHERS, "report.txt", "report.json"):
        (victim / name).write_text(f"precious {name}")
    return victim


def assert_victim_intact(victim: Path) -> None:
    for name in (*LAUNCHERS, "report.txt", "report.json"):
        assert (victim / name).read_text() == f"precious {name}", name


# -- finding 3: the swap race ---------------------------------------------------------

def test_symlink_swapped_in_while_the_worker_runs_is_never_followed(tmp_path, monkeypatch):
    """The user renames job.N away and puts a symlink to another directory in its place
    while the worker runs; root's cleanup and report must act on the real directory."""
    cfg, out, _ = site(tmp_path)
    victim = victim_dir(tmp_path)

    def worker_then_swap(env, job_dir, request, uid, gid, timeout, *limits):
        job_dir.write({name: "stale" for name in LAUNCHERS})  # left before it failed
        # (only root can do this since job directories are root's; the descriptors
        # still make root act on the real directory)
        os.rename(job_dir.path, out / "moved")
        os.symlink(victim, job_dir.path)
        return WorkerStatus(applied=False, reason="solver failed")

    monkeypatch.setattr(prolog, "run_worker", worker_then_swap)
    prolog.handle_job(job_env("41"), cfg)
    assert_victim_intact(victim)
    moved = out / "moved"
    assert not any((moved / name).exists() for name in LAUNCHERS)
    assert "NOT applied: solver failed" in (moved / "report.txt").read_text()


def test_job_dir_operations_go_through_the_descriptor(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    victim = victim_dir(tmp_path)
    with create_job_dir(out, "42") as jd:
        jd.write({name: "mine" for name in LAUNCHERS})
        os.rename(out / "job.42", out / "real")
        os.symlink(victim, out / "job.42")
        jd.remove_launcher_files()
        jd.write(prolog.fallback_report("42", None, "x"))
        assert jd.is_file("report") and not jd.is_file("rankfile")
    assert_victim_intact(victim)
    assert (out / "real" / "report.txt").exists()
    assert not any((out / "real" / name).exists() for name in LAUNCHERS)


def test_removing_launcher_files_removes_every_computed_file(tmp_path):
    """A failed computation leaves no launcher file and no SUMMA arrangement behind."""
    from slurm_plugin.common.job_conventions import ARRANGEMENT_FILE, COMPUTED_FILES

    out = tmp_path / "out"
    out.mkdir()
    with create_job_dir(out, "43") as jd:
        jd.write({name: "partial" for name in COMPUTED_FILES})
        assert jd.is_file(ARRANGEMENT_FILE)
        jd.remove_launcher_files()
        assert not any(jd.is_file(name) for name in COMPUTED_FILES)


def test_output_dir_and_job_dir_symlinks_are_refused_or_replaced(tmp_path):
    victim = victim_dir(tmp_path)
    (tmp_path / "link").symlink_to(victim)
    with pytest.raises(JobDirError, match="symlink"):
        create_job_dir(tmp_path / "link", "1")
    out = tmp_path / "out"
    out.mkdir()
    (out / "job.43").symlink_to(victim)
    with create_job_dir(out, "43") as jd:
        jd.write({"rankfile": "x"})
    assert_victim_intact(victim)
    assert not (out / "job.43").is_symlink() and (out / "job.43" / "rankfile").exists()
    for mode, who in ((0o777, "everyone"), (0o1777, "everyone"), (0o775, "its group")):
        os.chmod(out, mode)  # anyone who can create entries could plant job.<id>
        with pytest.raises(JobDirError, match=f"writable by {who}"):
            create_job_dir(out, "44")


@root_only
def test_output_dir_owned_by_a_user_is_refused(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    os.chown(out, NOBODY, NOBODY)
    with pytest.raises(JobDirError, match=f"owned by uid {NOBODY}"):
        create_job_dir(out, "45")


def test_job_ids():
    assert jobdir.valid_job_id("123") and jobdir.valid_job_id("123_4")
    for bad in ("", "12a", "../1", "1\n", "_1", "1_", "١٢"):
        assert not jobdir.valid_job_id(bad), bad


# -- finding 4: deep trees ------------------------------------------------------------

def test_planted_3000_level_tree_does_not_cost_the_job_its_report(tmp_path, monkeypatch):
    cfg, out, _ = site(tmp_path)
    victim = victim_dir(tmp_path)
    make_chain(out, "job.46", 3000, leaf_link=victim, link_depth=2500)
    monkeypatch.setattr(prolog, "run_worker",
                        lambda *a: WorkerStatus(applied=False, reason="no slurm here"))
    prolog.handle_job(job_env("46"), cfg)
    assert "no slurm here" in (out / "job.46" / "report.txt").read_text()
    assert sorted(os.listdir(out / "job.46")) == ["report.json", "report.txt"]
    left = [n for n in os.listdir(out) if not n.startswith(".worker-slot.")]
    assert left == ["job.46"]  # the whole tree went, nothing aside
    assert_victim_intact(victim)


def test_a_tree_beyond_the_bound_is_moved_aside_and_the_job_still_gets_its_report(
        tmp_path, monkeypatch, caplog):
    cfg, out, log_file = site(tmp_path)
    make_chain(out, "job.47", 3000)
    monkeypatch.setattr(jobdir, "MAX_ENTRIES", 500)
    monkeypatch.setattr(prolog, "run_worker",
                        lambda *a: WorkerStatus(applied=False, reason="no slurm here"))
    prolog.handle_job(job_env("47"), cfg)
    assert "no slurm here" in (out / "job.47" / "report.txt").read_text()
    aside = [n for n in os.listdir(out) if n.startswith(".stale.job.47.")]
    assert len(aside) == 1
    text = log_file.read_text()
    assert "more than 500 entries" in text and aside[0] in text


def test_epilog_removes_a_users_deep_tree_iteratively(tmp_path, monkeypatch):
    cfg_path = tmp_path / "rankmap.toml"
    out = tmp_path / "out"
    out.mkdir()
    log_file = tmp_path / "rankmap.log"
    cfg_path.write_text(f'[general]\noutput_dir = "{out}"\nlog_file = "{log_file}"\n'
                        f'log_level = "debug"\n'
                        f'[prolog]\nfallback_dir = "{tmp_path / "fb"}"\n')
    monkeypatch.setenv("RANKMAP_CONFIG", str(cfg_path))
    victim = victim_dir(tmp_path)
    with create_job_dir(out, "48", os.getuid(), os.getgid()) as jd:
        jd.write({"report": "r"})
    make_chain(out / "job.48", "deep", 3000, leaf_link=victim, link_depth=1000)
    monkeypatch.setenv("SLURM_JOB_ID", "48")
    assert prolog.epilog_main() == 0
    assert not (out / "job.48").exists() and os.listdir(out) == []
    assert_victim_intact(victim)
    assert "removed" in log_file.read_text()

    # beyond the bound: removed up to it, the rest moved aside and logged, no exception
    with create_job_dir(out, "49") as jd:
        pass
    make_chain(out / "job.49", "deep", 3000)
    monkeypatch.setenv("SLURM_JOB_ID", "49")
    monkeypatch.setattr(jobdir, "MAX_ENTRIES", 1000)
    assert prolog.epilog_main() == 0
    assert not (out / "job.49").exists()
    aside = [n for n in os.listdir(out) if n.startswith(".stale.job.49.")]
    assert len(aside) == 1
    assert f"the rest was left in {out / aside[0]}" in log_file.read_text()
    # later epilogs on the node remove what was left, a bounded part each
    counts = [int(n) for n in re.findall(r"removed (\d+) entries left aside",
                                         log_file.read_text())]
    for epilogs in range(1, 20):
        if not (out / aside[0]).exists():
            break
        monkeypatch.setenv("SLURM_JOB_ID", str(100 + epilogs))
        assert prolog.epilog_main() == 0
        counts = [int(n) for n in re.findall(r"removed (\d+) entries left aside",
                                             log_file.read_text())]
    assert not (out / aside[0]).exists() and epilogs > 3
    assert len(counts) == epilogs and all(0 < c <= 1000 for c in counts), counts
    assert log_file.read_text().count("left for a later epilog") == epilogs - 1


def test_removal_holds_at_most_max_depth_directories_open(tmp_path):
    make_chain(tmp_path, "job.50", 500)
    fds_before = len(os.listdir("/proc/self/fd"))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # 500 levels with a few dozen descriptors: only possible when at most 8 are open
    resource.setrlimit(resource.RLIMIT_NOFILE, (fds_before + 30, hard))
    try:
        assert remove_job_dir(tmp_path, "50", max_depth=8)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert not (tmp_path / "job.50").exists()
    assert len(os.listdir("/proc/self/fd")) == fds_before
    make_chain(tmp_path, "job.51", 50)
    with pytest.raises(JobDirError, match="more than 20 entries"):
        remove_job_dir(tmp_path, "51", max_entries=20)
    assert not (tmp_path / "job.51").exists()


@root_only
@pytest.mark.skipif(not shutil.which("unshare"), reason="needs unshare(1)")
def test_removal_does_not_cross_a_mount_point(tmp_path):
    """A file system mounted inside a job directory (a user's FUSE mount, say) is left
    alone: tested with a tmpfs in a private mount namespace, so nothing else sees it."""
    # unshare --propagation private remounts / private (MS_REC | MS_PRIVATE), which fails
    # where / is not a mount point (a chroot: "cannot change root filesystem propagation:
    # Invalid argument"); without a private namespace a mount could reach the host's
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "true"],
                           capture_output=True, text=True, timeout=60)
    if probe.returncode:
        pytest.skip("no private mount namespace to mount a tmpfs in (is / a mount point?): "
                    + probe.stderr.strip())
    out = tmp_path / "out"
    (out / "job.56" / "sub" / "mnt").mkdir(parents=True)
    (out / "job.56" / "sub" / "f").write_text("x")
    script = (
        "import sys\n"
        "from slurm_plugin.common.jobdir import JobDirError, remove_job_dir\n"
        "open(sys.argv[2], 'w').write('precious')\n"
        "try:\n"
        "    remove_job_dir(sys.argv[1], '56')\n"
        "    print('removed')\n"
        "except JobDirError as exc:\n"
        "    print('refused:', exc)\n"
        "import glob\n"
        "[aside] = glob.glob(sys.argv[1] + '/.stale.job.56.*')\n"
        "print(open(aside + '/sub/mnt/data').read())\n")
    mnt = out / "job.56" / "sub" / "mnt"
    proc = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c",
         'mount -t tmpfs none "$1" || exit 97; exec "$2" -c "$3" "$4" "$1/data"', "sh",
         str(mnt), sys.executable, script, str(out)], capture_output=True, text=True,
        timeout=60)
    if proc.returncode == 97:
        pytest.skip(f"cannot mount a tmpfs in a private namespace: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("refused:") and "mount point" in lines[0], lines
    assert lines[1] == "precious"  # the mounted file system's content survived
    assert not (out / "job.56").exists()  # the job's name is free again
    assert [n for n in os.listdir(out) if n.startswith(".stale.job.56.")]


# -- finding 6: private files ---------------------------------------------------------

def test_modes_without_root(tmp_path):
    with create_job_dir(tmp_path, "52") as jd:
        jd.write({"report": "r", "rankfile": "x"})
    assert stat.S_IMODE((tmp_path / "job.52").stat().st_mode) == 0o750
    for name in ("report.txt", "rankfile"):
        assert stat.S_IMODE((tmp_path / "job.52" / name).stat().st_mode) == 0o600


@root_only
def test_job_dir_and_files_belong_to_the_job_user_and_nobody_else(tmp_path):
    out = Path(tempfile.mkdtemp(prefix="rankmap-test-"))  # traversable by the test user
    try:
        out.chmod(0o755)
        with create_job_dir(out, "53", NOBODY, NOBODY) as jd:
            jd.write(prolog.fallback_report("53", None, "why"))
        d = out / "job.53"
        st = d.stat()
        # root's, with the job's group: the user reads but can add nothing
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, NOBODY, 0o750)
        assert as_user(NOBODY, lambda: (d / "planted").write_text("x")).startswith(
            "PermissionError")
        for name in ("report.txt", "report.json"):
            st = (d / name).stat()
            assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (NOBODY, NOBODY, 0o600)
        cfg = out / "rankmap.toml"
        cfg.write_text(f'[general]\noutput_dir = "{out}"\n')
        cfg.chmod(0o644)
        env = {"SLURM_JOB_ID": "53", "RANKMAP_CONFIG": str(cfg)}
        # the job's user (the TaskProlog's uid) finds the report; another user cannot
        assert as_user(NOBODY, lambda: "\n".join(exports(env))) == \
            f"export RANKMAP_REPORT={d / 'report.txt'}\n" \
            f"print rankmap: placement NOT applied (why); report: {d / 'report.txt'}"
        assert as_user(NOBODY - 1, lambda: (d / "report.txt").read_text()).startswith(
            "PermissionError")
    finally:
        remove_job_dir(out, "53")
        for p in out.iterdir():
            p.unlink()
        out.rmdir()


def test_log_file_is_created_0640_and_an_existing_mode_is_kept(tmp_path):
    log_file = tmp_path / "logs" / "rankmap.log"
    cfg = parse_config(f'[general]\nlog_file = "{log_file}"\n', "t.toml")
    old = os.umask(0)
    try:
        prolog.setup_logging(cfg)
    finally:
        os.umask(old)
    prolog.log.warning("hello")
    assert stat.S_IMODE(log_file.stat().st_mode) == 0o640
    assert "hello" in log_file.read_text()
    log_file.chmod(0o600)  # the administrator's choice stays
    prolog.setup_logging(cfg)
    prolog.log.warning("again")
    assert stat.S_IMODE(log_file.stat().st_mode) == 0o600
    assert "again" in log_file.read_text()


def test_log_file_symlink_is_not_followed(tmp_path, capsys):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "rankmap.log").symlink_to(victim)
    cfg = parse_config(f'[general]\nlog_file = "{tmp_path / "rankmap.log"}"\n', "t.toml")
    prolog.setup_logging(cfg)
    prolog.log.warning("to stderr instead")
    assert victim.read_text() == "precious"
    assert "to stderr instead" in capsys.readouterr().err


# -- finding 8: the output directory is created -------------------------------------

def test_missing_output_dir_is_created_safely(tmp_path, monkeypatch):
    out = tmp_path / "run" / "rankmap"
    (tmp_path / "run").mkdir()
    cfg, _, log_file = site(tmp_path, output_dir=tmp_path / "unused")
    cfg = parse_config(f'[general]\noutput_dir = "{out}"\nlog_file = "{log_file}"\n',
                       "t.toml")
    monkeypatch.setattr(prolog, "run_worker",
                        lambda *a: WorkerStatus(applied=False, reason="r"))
    old = os.umask(0o077)
    try:
        prolog.handle_job(job_env("54"), cfg)
    finally:
        os.umask(old)
    st = out.stat()
    assert stat.S_IMODE(st.st_mode) == 0o755 and st.st_uid == os.geteuid()
    assert (out / "job.54" / "report.txt").exists()
    assert f"created the output directory {out}" in log_file.read_text()


def test_output_dir_is_not_created_in_an_unsafe_parent(tmp_path):
    parent = tmp_path / "open"
    parent.mkdir()
    parent.chmod(0o777)
    with pytest.raises(JobDirError, match="world-writable without the sticky bit"):
        ensure_output_dir(parent / "rankmap")
    assert not (parent / "rankmap").exists()
    parent.chmod(0o1777)  # sticky, like /tmp: allowed
    assert ensure_output_dir(parent / "rankmap")
    assert not ensure_output_dir(parent / "rankmap")  # exists: left alone
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "ok").mkdir()
    (tmp_path / "ok" / "rankmap").symlink_to(target)
    assert not ensure_output_dir(tmp_path / "ok" / "rankmap")
    with pytest.raises(JobDirError, match="symlink"):
        create_job_dir(tmp_path / "ok" / "rankmap", "1")
    assert os.listdir(target) == []


@root_only
def test_output_dir_is_not_created_in_a_users_directory(tmp_path):
    parent = tmp_path / "home"
    parent.mkdir()
    os.chown(parent, NOBODY, NOBODY)
    with pytest.raises(JobDirError, match=f"owned by uid {NOBODY}"):
        ensure_output_dir(parent / "rankmap")
    assert not (parent / "rankmap").exists()


def test_report_record_is_json_with_escaped_strings(tmp_path):
    files = prolog.fallback_report("55", None, "bad\nthing")
    assert json.loads(files["report_json"])["fallback_reason"] == "bad\\nthing"
    assert files["report"].count("\n") == files["report"].count("\n") and \
        "NOT applied: bad\\nthing\n" in files["report"]
    assert logging.getLogger("rankmap") is prolog.log


# -- moved from test_render_report.py: writing and removing without following links ----

def test_write_files_replaces_planted_symlinks(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    out = tmp_path / "out"
    out.mkdir()
    (out / "rankfile").symlink_to(victim)
    write_files(out, {"rankfile": "rank 0=a slot=0:0\n"})
    assert victim.read_text() == "precious"
    assert not (out / "rankfile").is_symlink()
    assert (out / "rankfile").read_text() == "rank 0=a slot=0:0\n"


def test_job_directory_removal_keeps_link_targets_and_bad_names_are_refused(tmp_path):
    # (the 0700 mode and a planted job.<id> symlink are tested above)
    with create_job_dir(tmp_path, "17", os.getuid(), os.getgid()) as jd:
        d = jd.path
    assert d == tmp_path / "job.17"
    (d / "f").write_text("x")
    outside = tmp_path / "keep"
    outside.mkdir()
    (outside / "data").write_text("keep me")
    (d / "link").symlink_to(outside)
    assert remove_job_dir(tmp_path, "17") and not d.exists()
    assert (outside / "data").read_text() == "keep me"
    with pytest.raises(JobDirError, match="not a Slurm job id"):
        create_job_dir(tmp_path, "../17")
    with pytest.raises(JobDirError, match="does not exist"):
        create_job_dir(tmp_path / "missing", "1")
