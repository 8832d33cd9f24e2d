"""The prolog's worker reads the job's inputs through the configured backend: under
``pyslurm`` the allocation and node shapes come from pyslurm (scontrol only for what
pyslurm cannot give, logged), Slurm's commands from ``[slurm] bin_dir``; the report
names the profile's units.  pyslurm is replaced by a stand-in module here; the real
one is compared with the CLI on Slurm 25.11 in tests/e2e/test_current_slurm.py."""

import json
import sys
from pathlib import Path

import pytest

from slurm_plugin.modes import graph_job
from slurm_plugin.slurm.backends import read_node_shapes
from slurm_plugin.slurm.topology import NodeShape
from tests.helpers.fake_pyslurm import fake_pyslurm
from tests.helpers.paths import TEST_DATA
from tests.helpers.worker_harness import compute_into, job_request

RING8 = job_request("ring8", "topdown", time_limit=2.0)

DATA = TEST_DATA


def recording_scontrol(bin_dir: Path, log: Path, node_line: str = "") -> None:
    """scontrol that records its arguments and answers ``show node`` with node_line."""
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "scontrol"
    script.write_text(f"#!/bin/sh\necho \"$@\" >> {log}\n"
                      f"case \"$*\" in 'show node'*) echo '{node_line}';; *) exit 1;; esac\n")
    script.chmod(0o755)


@pytest.fixture
def job(tmp_path, monkeypatch):
    store = tmp_path / "profiles"
    store.mkdir()
    edges = "\n".join(f"{i + 1} {(i + 1) % 8 + 1} 100" for i in range(8))
    (store / "ring8.mtx").write_text(
        "%%MatrixMarket matrix coordinate real general\n8 8 8\n" + edges + "\n")
    (store / "ring8.toml").write_text('ranks = 8\nunits = "messages"\nfile = "ring8.mtx"\n')
    (tmp_path / "topology.conf").write_text("SwitchName=s1 Nodes=n1\nSwitchName=s2 Nodes=n2\n"
                                            "SwitchName=top Switches=s[1-2]\n")
    config = tmp_path / "rankmap.toml"
    config.write_text(f'[slurm]\nbackend = "pyslurm"\nbin_dir = "{tmp_path}/bin"\n'
                      f'topology = "{tmp_path}/topology.conf"\n'
                      f'[profiles]\nstores = ["{store}"]\n')
    (tmp_path / "job").mkdir()
    env = {"RANKMAP_CONFIG": str(config), "RANKMAP_JOB_DIR": str(tmp_path / "job"),
           "SLURM_JOB_ID": "42", "PATH": "/nonexistent"}
    return tmp_path, env


def test_pyslurm_backend_gives_allocation_and_shapes(job, monkeypatch):
    tmp_path, env = job
    monkeypatch.setitem(sys.modules, "pyslurm", fake_pyslurm(nodes=2))
    recording_scontrol(tmp_path / "bin", tmp_path / "calls")
    result = compute_into(env, RING8)
    assert result["n"] == 8
    assert not (tmp_path / "calls").exists(), "scontrol ran although pyslurm had everything"
    assert "Slurm backend: pyslurm" in result["notes"]
    assert any("pyslurm: no topology API" in n for n in result["notes"])
    # 2 sockets x 2 cores from pyslurm's Node.load, 4 CPU ids each: both sockets used
    report = (tmp_path / "job" / "report.txt").read_text()
    record = json.loads((tmp_path / "job" / "report.json").read_text())
    assert record["units"] == "messages"
    assert "J (messages x distance)" in report and "400 messages" in report


def test_pyslurm_node_fallback_uses_bin_dir_scontrol_for_that_node_only(job, monkeypatch):
    tmp_path, env = job
    monkeypatch.setitem(sys.modules, "pyslurm", fake_pyslurm(nodes=2, broken_nodes=("n2",)))
    recording_scontrol(tmp_path / "bin", tmp_path / "calls",
                       "NodeName=n2 CoresPerSocket=2 Sockets=2 ThreadsPerCore=1")
    result = compute_into(env, RING8)
    assert result["n"] == 8
    assert (tmp_path / "calls").read_text().split("\n")[0] == "show node -o n2"
    assert any("pyslurm: node n2 unavailable" in n and "using scontrol" in n
               for n in result["notes"])


def test_cli_backend_reads_shapes_with_scontrol(tmp_path):
    recording_scontrol(tmp_path / "bin", tmp_path / "calls",
                       (DATA / "slurm-25.11/scontrol_nodes.txt").read_text().splitlines()[0])
    env = {"RANKMAP_SLURM_BIN_DIR": str(tmp_path / "bin")}
    assert read_node_shapes(["n1"], env, "scontrol") == {"n1": NodeShape(2, 4, 1)}
    assert (tmp_path / "calls").read_text() == "show node -o n1\n"


def test_profile_units_come_from_the_store(job):
    tmp_path, _ = job
    stores = [str(tmp_path / "profiles")]
    assert graph_job.profile_units("ring8", stores, None) == "messages"
    assert graph_job.profile_units("stencil3d:2x2x2", stores, None) == "bytes"
    assert graph_job.profile_units("ring", stores, None) == "bytes"  # a generator's name
    assert graph_job.profile_units("file:/x/y.mtx", stores, None) == "bytes"
