"""The prolog's own decisions, without Slurm (the e2e tests run it inside Slurm)."""

import json

from slurm_plugin.config import parse_config
from slurm_plugin.prolog import fallback_report, handle_job, run_worker
from slurm_plugin.request import MappingRequest


def test_watchdog_stops_a_computation_over_its_budget(tmp_path):
    request = MappingRequest("ring", "topdown", 0.01, "user")
    status = run_worker({"SLURM_JOB_ID": "5"}, tmp_path, request, None, None, timeout=0.01)
    assert not status["applied"] and "did not finish within 0.01 s" in status["reason"]
    assert "from_worker" not in status


def test_worker_failure_is_a_fallback_status(tmp_path):
    # no Slurm here: the worker's scontrol call fails, and it says so instead of crashing
    request = MappingRequest("ring", "topdown", 5.0, "user")
    env = {"SLURM_JOB_ID": "5", "RANKMAP_CONFIG": str(tmp_path / "none.toml")}
    (tmp_path / "none.toml").write_text("")
    status = run_worker(env, tmp_path, request, None, None, timeout=60)
    assert status["from_worker"] and not status["applied"] and status["reason"]


def test_only_the_batch_host_computes(tmp_path):
    cfg = parse_config(f'[general]\noutput_dir = "{tmp_path}"\nlog_file = ""\n', "t.toml")
    env = {"SLURM_JOB_ID": "9", "SLURM_NODELIST": "n[1-2]", "SLURMD_NODENAME": "n2",
           "SPANK_RANKMAP_COMM_PROFILE": "ring"}
    handle_job(env, cfg)
    assert not (tmp_path / "job.9").exists()  # not the first node: nothing done
    handle_job({**env, "SPANK_RANKMAP_COMM_PROFILE": "", "SLURMD_NODENAME": "n1"}, cfg)
    assert not (tmp_path / "job.9").exists()  # no profile asked for: untouched


def test_fallback_report_record():
    files = fallback_report("3", MappingRequest("x", "topdown", 1.0, "user"), "broken")
    assert "rankmap was NOT applied: broken" in files["report"]
    assert json.loads(files["record"]) == {"job_id": "3", "profile": "x", "applied": False,
                                           "fallback_reason": "broken"}
