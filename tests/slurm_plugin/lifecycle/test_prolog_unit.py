"""The prolog's own decisions, without Slurm (the e2e tests run it inside Slurm)."""

import json

from slurm_plugin.common.jobdir import create_job_dir
from slurm_plugin.lifecycle.prolog import fallback_report, handle_job, run_worker
from slurm_plugin.lifecycle.worker_protocol import WorkerRequest, WorkerStatus
from slurm_plugin.site.config import parse_config
from slurm_plugin.site.request import MappingRequest


def test_watchdog_stops_a_computation_over_its_budget(tmp_path):
    request = MappingRequest("ring", "graph", "topdown", 0.01, "user")
    with create_job_dir(tmp_path, "5") as job_dir:
        status = run_worker({"SLURM_JOB_ID": "5"}, job_dir, request, None, None,
                            timeout=0.01)
    assert not status.applied and "did not finish within 0.01 s" in status.reason
    assert not status.from_worker


def test_worker_failure_is_a_fallback_status(tmp_path):
    # no Slurm here: the worker's scontrol call fails, and it says so instead of crashing
    request = MappingRequest("ring", "graph", "topdown", 5.0, "user")
    env = {"SLURM_JOB_ID": "5", "RANKMAP_CONFIG": str(tmp_path / "none.toml")}
    (tmp_path / "none.toml").write_text("")
    with create_job_dir(tmp_path, "5") as job_dir:
        status = run_worker(env, job_dir, request, None, None, timeout=60)
    assert status.from_worker and not status.applied and "scontrol" in status.reason


def test_only_the_batch_host_computes(tmp_path):
    cfg = parse_config(f'[general]\noutput_dir = "{tmp_path}"\nlog_file = ""\n', "t.toml")
    env = {"SLURM_JOB_ID": "9", "SLURM_NODELIST": "n[1-2]", "SLURMD_NODENAME": "n2",
           "SPANK_RANKMAP_COMM_PROFILE": "ring"}
    handle_job(env, cfg)
    assert not (tmp_path / "job.9").exists()  # not the first node: nothing done
    handle_job({**env, "SPANK_RANKMAP_COMM_PROFILE": "", "SLURMD_NODENAME": "n1"}, cfg)
    assert not (tmp_path / "job.9").exists()  # no profile asked for: untouched


def test_fallback_report_record():
    files = fallback_report("3", MappingRequest("x", "graph", "topdown", 1.0, "user"),
                            "broken")
    assert "rankmap was NOT applied: broken" in files["report"]
    assert json.loads(files["report_json"]) == {"job_id": "3", "profile": "x", "applied": False,
                                                "fallback_reason": "broken"}


def test_batch_host_writes_the_workers_report(tmp_path):
    """handle_job on the batch host runs the real worker; without Slurm here it fails
    at scontrol and the job directory gets that reason in its report (a no-op
    handle_job, or a worker that dies, fails this test)."""
    out = tmp_path / "out"
    out.mkdir()
    cfg = parse_config(f'[general]\noutput_dir = "{out}"\nlog_file = ""\n', "t.toml")
    env = {"SLURM_JOB_ID": "9", "SLURM_NODELIST": "n[1-2]", "SLURMD_NODENAME": "n1",
           "SPANK_RANKMAP_COMM_PROFILE": "ring", "RANKMAP_CONFIG": str(tmp_path / "c.toml"),
           "SLURM_CONF": str(tmp_path / "no-slurm.conf")}
    (tmp_path / "c.toml").write_text(f'[general]\noutput_dir = "{out}"\nlog_file = ""\n')
    handle_job(env, cfg)
    record = json.loads((out / "job.9" / "report.json").read_text())
    assert record["applied"] is False
    assert "scontrol" in record["fallback_reason"], record
    assert not (out / "job.9" / "rankfile").exists()


def test_worker_gets_memory_and_cpu_limits_and_runs_as_the_user(tmp_path, monkeypatch):
    import slurm_plugin.lifecycle.prolog as prolog

    seen = {}

    def fake_run(argv, env, sink, timeout, max_bytes, **kw):
        seen.update(kw, env=env, max_bytes=max_bytes)
        return WorkerStatus(applied=False, reason="x"), ""

    monkeypatch.setattr(prolog, "run_worker_process", fake_run)
    monkeypatch.setattr(prolog.os, "geteuid", lambda: 0)
    request = MappingRequest("ring", "graph", "topdown", 5.0, "user")
    with create_job_dir(tmp_path, "5") as job_dir:
        run_worker({"SLURM_JOB_ID": "5"}, job_dir, request, 1234, 99, timeout=25.5,
                   memory_bytes=3 << 30, max_output_bytes=12345)
    assert seen["max_bytes"] == 12345
    asked = WorkerRequest.from_json(seen["stdin_bytes"])
    assert (asked.memory_bytes, asked.cpu_seconds) == (3 << 30, 26)
    assert (asked.job_id, asked.profile, asked.mode, asked.algorithm, asked.time_limit) == \
        ("5", "ring", "graph", "topdown", 5.0)
    assert not any(k.startswith("RANKMAP_") for k in seen["env"])  # on stdin, not in env
    assert (seen["user"], seen["group"], seen["extra_groups"]) == (1234, 99, [])


def test_one_budget_split_for_the_solver_the_watchdog_and_the_cpu_limit():
    """The job's budget and the prolog's grace give every part its time in one place
    (slurm_plugin.common.job_budget): 90 % to the solver, budget + grace to the slot
    wait and the worker's watchdog, that rounded up as its CPU limit."""
    from slurm_plugin.common.job_budget import SOLVER_SHARE, JobBudget

    budget = JobBudget(5.0, 20.5)
    assert budget.solver_seconds == 5.0 * SOLVER_SHARE < 5.0
    assert budget.watchdog_seconds == 25.5 and budget.cpu_seconds == 26
    assert JobBudget(5.0).watchdog_seconds == 5.0
