"""The prolog's request to its worker (issue 30): a typed WorkerRequest, JSON on the
worker's stdin, checked field by field; a malformed one becomes the worker's fallback
status naming the field, as a malformed status does on the prolog's side."""

from __future__ import annotations

import io
import json
import os
import sys
from dataclasses import asdict

import pytest

from slurm_plugin.common.jobdir import create_job_dir
from slurm_plugin.lifecycle import job_worker, prolog
from slurm_plugin.lifecycle.worker_process import filled_pipe, run_worker_process
from slurm_plugin.lifecycle.worker_protocol import (
    MAX_REQUEST_BYTES,
    ProtocolError,
    WorkerRequest,
    WorkerStatus,
    read_request,
)
from slurm_plugin.site.request import MappingRequest
from tests.helpers.paths import REPO

REQUEST = WorkerRequest(job_id="42", profile="ring", mode="graph", algorithm="topdown",
                        time_limit=5.0, refusal=None, memory_bytes=1 << 30, cpu_seconds=9)


def fields(**changed) -> bytes:
    return json.dumps({**asdict(REQUEST), **changed}).encode()


def test_a_request_round_trips():
    assert WorkerRequest.from_json(REQUEST.to_bytes()) == REQUEST
    refused = WorkerRequest("7_3", "mesh:", "mesh", "summa", 1, "give the store entry")
    assert WorkerRequest.from_json(refused.to_bytes()) == refused
    assert read_request(io.BytesIO(REQUEST.to_bytes())) == REQUEST


@pytest.mark.parametrize("data, match", [
    (fields(mode="reorder"), "'mode' must be one of graph, mesh, summa, got 'reorder'"),
    (fields(mode=None), "'mode' must be one of"),
    (fields(time_limit=0), "'time_limit' must be a positive number"),
    (fields(time_limit="5"), "'time_limit' must be a positive number"),
    (fields(time_limit=True), "'time_limit'"),
    (fields(memory_bytes="4G"), "'memory_bytes' must be a whole number >= 0"),
    (fields(cpu_seconds=-1), "'cpu_seconds' must be a whole number >= 0"),
    (fields(cpu_seconds=2.5), "'cpu_seconds'"),
    (fields(job_id="../42"), "'job_id' must be a Slurm job id"),
    (fields(profile=""), "'profile' must be a non-empty string"),
    (fields(algorithm=3), "'algorithm' must be a non-empty string"),
    (fields(refusal=["no"]), "'refusal' must be a string or null"),
    (fields(extra=1), r"unknown fields \['extra'\]"),
    (json.dumps({k: v for k, v in asdict(REQUEST).items() if k != "mode"}).encode(),
     r"lacks the fields \['mode'\]"),
    (b"[]", "not a JSON object"),
    (b"{", "not JSON"),
    (b"\xff\xfe", "not JSON"),
])
def test_a_malformed_request_is_refused_by_field(data, match):
    with pytest.raises(ProtocolError, match=match):
        WorkerRequest.from_json(data)


def test_an_empty_or_oversized_request_is_refused():
    with pytest.raises(ProtocolError, match="no worker request on standard input"):
        read_request(io.BytesIO(b""))
    with pytest.raises(ProtocolError, match=f"over {MAX_REQUEST_BYTES} bytes"):
        read_request(io.BytesIO(b" " * (MAX_REQUEST_BYTES + 1)))
    with pytest.raises(ProtocolError, match="over the protocol's"):
        WorkerRequest("1", "x" * MAX_REQUEST_BYTES, "graph", "topdown", 1.0).to_bytes()


def status_of(stream: io.BytesIO) -> WorkerStatus:
    return WorkerStatus.from_json(stream.getvalue().rsplit(b"\nstatus ", 1)[1]
                                  .split(b"\n", 1)[1].decode())


def test_a_malformed_request_is_a_fallback_status_and_nothing_runs(monkeypatch):
    calls = []
    monkeypatch.setattr(job_worker, "apply_worker_limits", lambda *a: calls.append("limits"))
    monkeypatch.setattr(job_worker, "compute", lambda *a: calls.append("compute"))
    stream = io.BytesIO()
    job_worker.run(io.BytesIO(fields(mode="reorder")), stream, {})
    status = status_of(stream)
    assert calls == []
    assert status == WorkerStatus(applied=False, reason=(
        "worker request: 'mode' must be one of graph, mesh, summa, got 'reorder'"))


def test_the_real_worker_reads_its_request_on_stdin(tmp_path):
    """The worker as the prolog starts it: the request is waiting in its stdin pipe; a
    malformed one comes back as the worker's fallback status (from_worker), a good one
    is computed (here it fails at scontrol: the configured bin_dir has none)."""
    (tmp_path / "bin").mkdir()
    config = tmp_path / "rankmap.toml"
    config.write_text(f'[slurm]\nbackend = "scontrol"\nbin_dir = "{tmp_path / "bin"}"\n')
    argv = [sys.executable, "-m", "slurm_plugin.lifecycle.job_worker"]
    env = {"PYTHONPATH": str(REPO), "PATH": "/nonexistent", "SLURM_JOB_ID": "42",
           "RANKMAP_CONFIG": str(config)}
    with create_job_dir(tmp_path, "42") as jd:
        status, why = run_worker_process(argv, env, jd, 60, 1 << 20,
                                         stdin_bytes=fields(time_limit=-1))
        assert status is not None and status.from_worker, why
        assert not status.applied
        assert status.reason == ("worker request: 'time_limit' must be a positive number "
                                 "of seconds, got -1")
        status, why = run_worker_process(argv, env, jd, 60, 1 << 20,
                                         stdin_bytes=REQUEST.to_bytes())
    assert status is not None and not status.applied, why
    assert "scontrol" in status.reason, status


def test_the_prolog_refuses_a_request_it_cannot_send(tmp_path, monkeypatch):
    monkeypatch.setattr(prolog, "run_worker_process",
                        lambda *a, **k: pytest.fail("must not start the worker"))
    huge = MappingRequest("x" * MAX_REQUEST_BYTES, "graph", "topdown", 5.0, "user")
    with create_job_dir(tmp_path, "5") as job_dir:
        status = prolog.run_worker({"SLURM_JOB_ID": "5"}, job_dir, huge, None, None, 10)
    assert not status.applied and "over the protocol's" in status.reason


def test_a_filled_pipe_holds_a_large_request_without_a_reader():
    data = b"x" * MAX_REQUEST_BYTES
    fd = filled_pipe(data)
    try:
        with open(fd, "rb", closefd=False) as pipe:
            assert pipe.read() == data  # all of it, then the end
    finally:
        os.close(fd)
