"""The prolog–worker stream, and that nothing a worker or a Slurm command started
outlives it (issue 28 items 1, 3 and 6).

Real child processes throughout: small Python programs stand in for the worker where a
test needs it to misbehave; the real worker runs as an unprivileged user where root is
available.
"""

from __future__ import annotations

import io
import os
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

from slurm_plugin.common.jobdir import create_job_dir
from slurm_plugin.common.processes import _zombie, end_session, session_pids
from slurm_plugin.lifecycle import prolog
from slurm_plugin.lifecycle.worker_process import run_worker_process
from slurm_plugin.lifecycle.worker_protocol import (
    MAGIC,
    ProtocolError,
    WorkerRequest,
    WorkerStatus,
    parse_header,
    write_stream,
)
from slurm_plugin.lifecycle.worker_slots import NoWorkerSlot, slot_count, worker_slot
from slurm_plugin.site.config import parse_config
from slurm_plugin.slurm.slurm_commands import SlurmQueryError, run_slurm
from tests.helpers.paths import REPO

NOBODY = 65534
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (runs as another uid)")
ROOT = REPO


def processes_with(marker: str) -> list[str]:
    """Command lines of live (non-zombie) processes that mention ``marker``."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmd and state != b"Z":
            out.append(cmd)
    return out


#: a graph job's request, without limits (the worker's own are not what these tests test)
RING = WorkerRequest(job_id="11", profile="ring", mode="graph", algorithm="topdown",
                     time_limit=5.0, memory_bytes=0)


def fake_worker(body: str) -> list[str]:
    """argv of a Python program whose stdout is ``out`` (binary)."""
    return [sys.executable, "-c", "import os, sys, subprocess, time\n"
            "out = sys.stdout.buffer\n" + textwrap.dedent(body)]


# -- the protocol -----------------------------------------------------------------------

def test_status_round_trip_and_checked_fields():
    status = WorkerStatus(applied=True, reason=None, n=16, objective=3.5, seconds=0.2,
                          kept_default=False, notes=("a", "b"))
    assert WorkerStatus.from_json(status.to_json()) == status
    for bad, field in (('{"applied": "yes"}', "applied"),
                       ('{"applied": true, "n": "16"}', "'n'"),
                       ('{"applied": true, "n": true}', "'n'"),
                       ('{"applied": true, "objective": NaN}', "'objective'"),
                       ('{"applied": true, "notes": [1]}', "'notes'"),
                       ('{"applied": true, "from_worker": true}', "unknown fields"),
                       ("[]", "not a JSON object"), ("{", "not JSON")):
        with pytest.raises(ProtocolError, match=field):
            WorkerStatus.from_json(bad)


def test_headers_name_known_files_once_within_the_budget():
    assert parse_header(b"file rankfile 10", set(), 100) == ("file", "rankfile", 10)
    assert parse_header(b"status 5", set(), 100) == ("status", None, 5)
    for line, seen, budget, match in (
            (b"file ../../etc/passwd 1", set(), 100, "unknown file"),
            (b"file rankfile 1", {"rankfile"}, 100, "sent twice"),
            (b"file rankfile 101", set(), 100, "over the limit"),
            (b"file rankfile -1", set(), 100, "bad size"),
            (b"exec rm -rf /", set(), 100, "unexpected header"),
            (b"file rank\xfffile 1", set(), 100, "not ASCII")):
        with pytest.raises(ProtocolError, match=match):
            parse_header(line, seen, budget)


def test_the_stream_carries_files_in_order_and_then_the_status():
    buf = io.BytesIO()
    write_stream(buf, {"rankfile": "rank 0=n1 slot=0:0\n", "report": "é\n"},
                 WorkerStatus(applied=True, n=1))
    data = buf.getvalue()
    assert data.startswith(MAGIC)
    assert data.index(b"file rankfile 19\n") < data.index(b"file report 3\n") < \
        data.index(b"status ")
    with pytest.raises(ValueError, match="unknown job file"):
        write_stream(io.BytesIO(), {"../x": ""}, WorkerStatus(applied=False))


# -- the prolog's reader, with real child processes -------------------------------------

def emit(files: dict[str, str], status: str = '{"applied": true, "n": 2}') -> str:
    """Worker body that writes ``files`` and ``status`` with the real protocol."""
    return f"""
        from slurm_plugin.lifecycle.worker_protocol import WorkerStatus, write_stream
        write_stream(out, {files!r}, WorkerStatus.from_json({status!r}))
    """


def test_files_are_written_by_the_prolog_as_they_arrive(tmp_path):
    with create_job_dir(tmp_path, "7") as jd:
        status, why = run_worker_process(
            fake_worker(emit({"rankfile": "rank 0=n1 slot=0:0\n", "report": "r\n"})),
            {"PYTHONPATH": str(ROOT)}, jd, 30, 1 << 20)
    assert status is not None and status.applied and status.n == 2, why
    assert status.from_worker
    d = tmp_path / "job.7"
    assert (d / "rankfile").read_text() == "rank 0=n1 slot=0:0\n"
    assert stat.S_IMODE((d / "rankfile").stat().st_mode) == 0o600
    assert sorted(os.listdir(d)) == ["rankfile", "report.txt"]


@pytest.mark.parametrize("body, match", [
    ("out.write(b'rankmap-worker 1\\nfile ../evil 3\\nabc'); out.flush()", "unknown file"),
    ("out.write(b'rankmap-worker 1\\nfile rankfile 5000\\n' + b'x' * 5000)", "over the limit"),
    ("out.write(b'hello\\n')", "does not start with"),
    ("out.write(b'rankmap-worker 1\\n' + b'x' * 500)", "header too long"),
    ("out.write(b'rankmap-worker 1\\nfile rankfile 3\\nab'); sys.exit(3)", "ended early"),
    ("sys.stderr.write('Traceback: boom'); sys.exit(1)", "boom"),
])
def test_a_broken_stream_is_refused_and_named(tmp_path, body, match):
    with create_job_dir(tmp_path, "8") as jd:
        status, why = run_worker_process(fake_worker(body), {}, jd, 30, 1000)
    assert status is None and match in why, why
    assert not (tmp_path / "job.8" / "evil").exists()
    assert not (tmp_path / "evil").exists()


def test_the_time_budget_ends_the_worker_and_all_it_started(tmp_path):
    marker = f"{uuid.uuid4().int % 10**6 + 1000}.{os.getpid()}"
    # a grandchild in a process group of its own, as a Slurm command runs
    body = f"""
        subprocess.Popen(["sleep", "{marker}"], process_group=0)
        time.sleep(600)
    """
    with create_job_dir(tmp_path, "9") as jd:
        status, why = run_worker_process(fake_worker(body), {}, jd, 1.5, 1000)
    assert status is None and "did not finish within 1.5 s" in why
    assert processes_with(marker) == []


def test_a_worker_that_exits_leaves_nothing_running(tmp_path):
    marker = f"{uuid.uuid4().int % 10**6 + 1000}.{os.getpid()}"
    body = textwrap.dedent(f"""
        subprocess.Popen(["sleep", "{marker}"], process_group=0,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    """) + textwrap.dedent(emit({"report": "r"}))
    with create_job_dir(tmp_path, "10") as jd:
        status, why = run_worker_process(fake_worker(body), {"PYTHONPATH": str(ROOT)}, jd,
                                         30, 1000)
    assert status is not None, why
    assert processes_with(marker) == []


def test_end_session_ends_every_member():
    proc = subprocess.Popen(["sh", "-c", "sleep 300 & sleep 301 & wait"],
                            start_new_session=True)
    for _ in range(100):
        if len(session_pids(proc.pid)) >= 3:
            break
        time.sleep(0.02)
    assert len(session_pids(proc.pid)) >= 3
    assert end_session(proc.pid) >= 3
    proc.wait()
    # killed orphans may stay zombies until init reaps them: dead all the same
    assert [p for p in session_pids(proc.pid) if not _zombie(p)] == []


def test_stray_prints_of_the_worker_do_not_break_its_stream(tmp_path, monkeypatch):
    """job_worker.main moves fd 1 to stderr before computing: a library that prints
    to stdout cannot corrupt the stream."""
    body = """
        from slurm_plugin.lifecycle import job_worker
        def noisy(request, env):
            print("a library printing to stdout")
            os.write(1, b"and one writing to fd 1\\n")
            return job_worker.WorkerOutput(job_worker.status(False, "why"),
                                           {"report": "r"})
        job_worker.compute = noisy
        job_worker.main()
    """
    with create_job_dir(tmp_path, "11") as jd:
        status, why = run_worker_process(fake_worker(body), {"PYTHONPATH": str(ROOT)}, jd,
                                         30, 1000, stdin_bytes=RING.to_bytes())
    assert status is not None and status.reason == "why", why
    assert (tmp_path / "job.11" / "report.txt").read_text() == "r"


# -- Slurm commands: a time-out ends the wrapper and its children ------------------------

def hanging_scontrol(bin_dir: Path, marker: str) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(bin_dir, 0o755)
    script = bin_dir / "scontrol"
    script.write_text(f"#!/bin/sh\n# a site's wrapper around scontrol\nsleep {marker}\n")
    script.chmod(0o755)


def test_a_slurm_command_time_out_ends_its_children(tmp_path):
    marker = f"{uuid.uuid4().int % 10**6 + 1000}.{os.getpid()}"
    hanging_scontrol(tmp_path / "bin", marker)
    with pytest.raises(SlurmQueryError, match="no answer within 0.5 s"):
        run_slurm(["scontrol", "show", "job"], 0.5, bin_dir=str(tmp_path / "bin"))
    assert processes_with(marker) == []


def _nobody_can_run_the_worker() -> bool:
    try:
        probe = subprocess.run([sys.executable, "-c",
                                "import slurm_plugin.lifecycle.job_worker"],
                               cwd="/", env={"PYTHONPATH": str(ROOT)}, user=NOBODY,
                               group=NOBODY, extra_groups=[], capture_output=True,
                               check=False)
    except PermissionError:  # the interpreter itself (a venv under /root, 0700)
        return False
    return probe.returncode == 0


@root_only
@pytest.mark.parametrize("where", ["command time-out", "prolog watchdog"])
def test_nothing_of_the_job_user_remains_after_a_hanging_scontrol(where, monkeypatch):
    """The prolog on the batch host, the worker as the job's user, and a Slurm command
    that hangs: whichever time-out fires, no process of the job's user is left."""
    if not _nobody_can_run_the_worker():
        pytest.skip(f"uid {NOBODY} cannot run {sys.executable} or read the project at "
                    f"{ROOT}")
    base = Path(tempfile.mkdtemp(prefix="rankmap_hang_"))
    try:
        os.chmod(base, 0o755)
        marker = f"{uuid.uuid4().int % 10**6 + 1000}.{os.getpid()}"
        hanging_scontrol(base / "bin", marker)
        out = base / "out"
        out.mkdir(mode=0o755)
        command_timeout, time_limit = (1.0, 30.0) if where == "command time-out" else \
            (600.0, 0.5)
        text = (f'[general]\noutput_dir = "{out}"\nlog_file = ""\n'
                f'[slurm]\nbin_dir = "{base / "bin"}"\ncommand_timeout = {command_timeout}\n'
                f'[solver]\ntime_limit = {time_limit}\n'
                f'[prolog]\nfallback_dir = "{base / "fb"}"\ngrace_seconds = 3.0\n')
        config = base / "rankmap.toml"
        config.write_text(text)
        config.chmod(0o644)
        env = {"SLURM_JOB_ID": "77", "SLURM_NODELIST": "n1", "SLURMD_NODENAME": "n1",
               "SLURM_JOB_UID": str(NOBODY), "SLURM_JOB_GID": str(NOBODY),
               "SPANK_RANKMAP_COMM_PROFILE": "ring", "RANKMAP_CONFIG": str(config),
               "PYTHONPATH": str(ROOT)}
        monkeypatch.setattr(prolog, "SLURM_PATH", os.environ.get("PATH", "/usr/bin:/bin"))
        prolog.handle_job(env, parse_config(text, str(config)))
        report = (out / "job.77" / "report.txt").read_text()
        assert ("no answer within 1 s" if where == "command time-out"
                else "did not finish within 3.5 s") in report, report
        assert processes_with(marker) == []
        st = (out / "job.77").stat()
        assert (st.st_uid, st.st_gid) == (0, NOBODY)
        assert (out / "job.77" / "report.txt").stat().st_uid == NOBODY
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False)


# -- at most max_workers computations at once on a node ----------------------------------

def test_worker_slots_bound_the_computations_at_once(tmp_path):
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    got: list[str] = []

    def third() -> None:  # a computation allowed to wait for a slot
        with worker_slot(fd, 2, 60):
            got.append("held")

    try:
        with worker_slot(fd, 2, 0) as w1:
            with worker_slot(fd, 2, 0) as w2:
                assert w1 < 1 and w2 < 1
                with pytest.raises(NoWorkerSlot, match=r"max_workers = 2"):
                    with worker_slot(fd, 2, 0.3):
                        pass
                waiter = threading.Thread(target=third)
                waiter.start()
                time.sleep(0.5)
                assert got == []  # both slots held: it waits
            waiter.join(60)  # one holder left: it gets that slot
            assert not waiter.is_alive() and got == ["held"]
        with worker_slot(fd, 2, 0):  # released when the holders left
            pass
    finally:
        os.close(fd)


def test_slot_count_defaults_to_half_the_memory_over_the_workers_cap():
    gib = 1 << 30
    assert slot_count(3, 4 * gib, 256 * gib) == 3  # set by the site
    assert slot_count(0, 4 * gib, 256 * gib) == 32
    assert slot_count(0, 4 * gib, 24 * gib) == 3
    assert slot_count(0, 4 * gib, 6 * gib) == 1  # at least one
    assert slot_count(0, 0, 6 * gib) == 2  # uncapped workers
    assert slot_count(0, 4 * gib) >= 1  # this machine's memory


def test_a_slot_held_by_another_process_is_waited_for(tmp_path):
    """A second prolog process holds the only slot for a moment; this one waits."""
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import os, sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from slurm_plugin.lifecycle.worker_slots import worker_slot
        fd = os.open({str(tmp_path)!r}, os.O_RDONLY | os.O_DIRECTORY)
        with worker_slot(fd, 1, 0):
            print("held", flush=True)
            time.sleep(1.0)
    """)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with worker_slot(fd, 1, 30) as waited:
            assert 0.3 < waited < 30
    finally:
        os.close(fd)
        holder.wait()


def test_a_job_that_finds_every_slot_taken_keeps_slurms_placement(tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    cfg = parse_config(f'[general]\noutput_dir = "{out}"\nlog_file = ""\n'
                       '[solver]\ntime_limit = 0.2\n'
                       '[prolog]\nmax_workers = 1\ngrace_seconds = 0.1\n', "t.toml")
    monkeypatch.setattr(prolog, "run_worker", lambda *a: pytest.fail("must not compute"))
    fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with worker_slot(fd, 1, 0):
            prolog.handle_job({"SLURM_JOB_ID": "12", "SLURM_NODELIST": "n1",
                               "SLURMD_NODENAME": "n1", "SPANK_RANKMAP_COMM_PROFILE": "ring"},
                              cfg)
    finally:
        os.close(fd)
    report = (out / "job.12" / "report.txt").read_text()
    assert "NOT applied: 1 rankmap computation(s) already running on this node for 0.3 s" \
        in report
